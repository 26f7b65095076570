"""The client's exceptions, and the mapping from gRPC failures and broker statuses to them.

Expected outcomes that still stored a message (disk or slave timeouts) are `SendStatus` values,
never exceptions; everything here means the call did not do what was asked (or, for
`PartialBatchError`, did it for only part of a batch).

    RocketStoreError
    ├── EndpointError        a `host:port` that does not parse (also a ValueError)
    ├── TransportError       the broker could not be reached or did not answer in time
    ├── AuthenticationError  the broker refused our credentials (admin API)
    ├── ProtocolError        the broker answered something this client cannot read
    └── BrokerError          the broker answered a non-OK code
        ├── NotMasterError   a slave refused a write; `.master_endpoint` says where to go
        └── PartialBatchError  some messages of a batch were stored, others refused

`from_rpc_error` is sans-IO: it looks at a `grpc.RpcError`'s code and details only. Messages
carry the endpoint and the code, never credentials; when the failure says the endpoint is another
port of a broker (its metrics, remoting or replication port: `wire.ports`), the message says so and
names the key of the port to use (`hint`). Thread-safety: immutable after construction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grpc

from wire.ports import wrong_port


class RocketStoreError(Exception):
    """Base of every error the client raises."""

    # Sends made before this error was raised: a producer following a moving master sets it on
    # the last error when it gives up (see client.failover).
    attempts: int = 1


class EndpointError(RocketStoreError, ValueError):
    """An endpoint string that is not `host:port`."""


class TransportError(RocketStoreError):
    """The call did not reach the broker or got no answer in time (the broker may have acted).
    `hint`: what the endpoint most likely is instead, when the failure says (`wire.ports`)."""

    def __init__(self, endpoint: str, code: str, details: str = "", hint: str = "") -> None:
        self.endpoint = endpoint
        self.code = code
        self.details = details
        self.hint = hint
        if hint:
            text = f"{hint} (gRPC: {code}: {details})"
        else:
            text = f"cannot reach the broker at {endpoint} ({code})"
            text = f"{text}: {details}" if details else text
        super().__init__(text)


class AuthenticationError(RocketStoreError):
    """The broker refused the call's credentials (wrong, missing or expired secret)."""

    def __init__(self, endpoint: str, details: str = "") -> None:
        self.endpoint = endpoint
        self.details = details
        text = f"the broker at {endpoint} refused our credentials"
        super().__init__(f"{text}: {details}" if details else text)


class ProtocolError(RocketStoreError):
    """An answer that breaks the wire contract (wrong entry count, a stream out of order)."""


class BrokerError(RocketStoreError):
    """The broker answered `code_name` (a messaging `Code` name, or a gRPC status code name for
    the admin API) with its message."""

    def __init__(self, code_name: str, message: str = "") -> None:
        self.code_name = code_name
        self.message = message
        super().__init__(f"{code_name}: {message}" if message else code_name)


class NotMasterError(BrokerError):
    """The broker is a slave; writes go to `master_endpoint` ("" when the slave does not know)."""

    def __init__(self, master_endpoint: str, message: str = "") -> None:
        self.master_endpoint = master_endpoint
        super().__init__(
            "FORBIDDEN", message or f"not a master; the master is at {master_endpoint or 'an unknown endpoint'}"
        )


class PartialBatchError(BrokerError):
    """A batch where some messages were stored and others refused. `outcomes` has one item per
    message, in order: its `SendResult`, or the `BrokerError` that refused it. `error` is the
    first refusal, whose code and message this exception repeats."""

    def __init__(self, outcomes: Sequence[Any], error: BrokerError) -> None:
        self.outcomes = tuple(outcomes)
        self.error = error
        stored = sum(1 for o in self.outcomes if not isinstance(o, BaseException))
        super().__init__(
            error.code_name,
            f"{stored} of {len(self.outcomes)} messages stored; first refusal: {error.message or error.code_name}",
        )


# Codes that mean the call may never have reached the broker, or its answer never came back.
_TRANSPORT_CODES = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED}
)
_AUTH_CODES = frozenset({grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED})


def from_rpc_error(exc: grpc.RpcError, endpoint: str) -> RocketStoreError:
    """The client error for a failed gRPC call to `endpoint`."""
    code = exc.code() if hasattr(exc, "code") else None
    details = (exc.details() if hasattr(exc, "details") else "") or ""
    if code in _AUTH_CODES:
        return AuthenticationError(endpoint, details)
    if code in _TRANSPORT_CODES or code is None:
        name = code.name if code is not None else "UNKNOWN"
        return TransportError(endpoint, name, details, wrong_port(name, details, endpoint) or "")
    if code == grpc.StatusCode.UNIMPLEMENTED:
        hint = wrong_port(code.name, details, endpoint)
        if hint:
            return BrokerError("UNIMPLEMENTED", f"{hint} (gRPC: {details})")
        return BrokerError(
            "UNIMPLEMENTED",
            f"{endpoint} does not serve this call ({details})" if details else f"{endpoint} does not serve this call",
        )
    return BrokerError(code.name, details)
