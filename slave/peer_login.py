"""The slave's Hello: the gRPC adapter of `ha.peer_auth.SlaveAuth`, run before each call to the
master in shared-secret mode. It sends a fresh nonce, checks the master's proof and returns the
call's session (to check the MACs of what the master sends and to seal what the slave sends) and
the metadata that authenticates the call. Nothing is sent to a peer that has not proven it holds
the secret, and nothing it sent is used.

Stateless; thread-safe.
"""

from __future__ import annotations

import grpc

from ha.peer_auth import HEADER, AuthenticationError, HelloAnswer, Identity, PeerSession, SlaveAuth
from slave.rpc_failure import describe
from wire.rpc import ha_pb2, ha_pb2_grpc

SERVICE = "/rocketstore.ha.v1.Replication/"
REFUSALS = (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED)


class LoginFailed(Exception):
    """The Hello failed: `refusal` when the peer answered but did not authenticate (or refused),
    as opposed to a transport failure."""

    def __init__(self, message: str, *, refusal: bool) -> None:
        super().__init__(message)
        self.message = message
        self.refusal = refusal


def login(
    channel: grpc.Channel, auth: SlaveAuth, method: str, address: str, timeout_s: float, *, tls: bool = False
) -> tuple[PeerSession, tuple[tuple[str, str], ...]]:
    """The session and call metadata for `method` (its short name, e.g. "Replicate")."""
    nonce = auth.client_nonce()
    try:
        answer = ha_pb2_grpc.ReplicationStub(channel).Hello(
            ha_pb2.HelloRequest(client_nonce=nonce, broker_name=auth.slave.broker_name, broker_id=auth.slave.broker_id),
            timeout=timeout_s,
        )
    except grpc.RpcError as exc:
        code, text = describe(exc, tls=tls, address=address)
        raise LoginFailed(f"Hello: {text}", refusal=code in REFUSALS) from None
    hello = HelloAnswer(answer.server_nonce, answer.server_proof, Identity(answer.broker_name, answer.broker_id))
    try:
        session, header = auth.verify(nonce, hello, SERVICE + method)
    except AuthenticationError as exc:
        raise LoginFailed(f"the peer at {address} is not an authenticated master: {exc}", refusal=True) from None
    return session, ((HEADER, header),)
