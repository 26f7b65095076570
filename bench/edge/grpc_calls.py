"""gRPC calls made of bytes, for the edge tools: any method of the broker's services with any
request bytes and any credentials, and the answer reduced to one label.

`METHODS` lists every method of `MessagingService`, `Admin` and `Replication` from the generated
descriptors (nothing hand-copied: a new method is fuzzed the day it is added). `RawChannel.call`
sends request bytes as they are (no serializer in the way, so bytes that are not the request
reach the broker) and classifies the outcome:

- `answer`: the gRPC status name; for an OK answer of a MessagingService method, `OK/<Code>` with
  the RocketMQ v2 code of its status (the first status of a stream); None when the broker did not
  answer (the call's deadline passed, the connection failed);
- `transport`: DEADLINE_EXCEEDED, UNAVAILABLE, CANCELLED or the exception's name when there was no
  answer;
- `detail`: the status message, for the report of unexpected answers.

Credentials: `AdminAuth.sign` makes an `x-rs-auth` header (`wire.admin_auth`, bound to the broker's
identity that `RawChannel.identify` learns and to the request's bytes) in one of `ADMIN_AUTH`'s
ways (signed, missing, wrong secret, signed for another method, for another broker or for another
body, stale, replayed, malformed); `acl_metadata` a client signature (`wire.client_signature`) in
one of `ACL_AUTH`'s ways.

Thread-safety: a `RawChannel` may be shared by threads (gRPC channels are); `AdminAuth` keeps the
last header per method for replays and locks nothing: one per thread.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from types import ModuleType

import grpc
from google.protobuf import message_factory
from google.protobuf.message import DecodeError, Message

from client.signing import Credentials
from wire import admin_auth, client_signature
from wire.auth import wall_clock_ms
from wire.rpc import admin_pb2, ha_pb2, messaging_pb2


@dataclass(frozen=True)
class Method:
    service: str  # MessagingService, Admin, Replication
    name: str
    path: str  # /package.Service/Name
    request: type[Message]
    response: type[Message]
    client_streaming: bool
    server_streaming: bool


def _methods(module: ModuleType, service: str) -> list[Method]:
    descriptor = module.DESCRIPTOR.services_by_name[service]
    return [
        Method(
            service,
            m.name,
            f"/{descriptor.full_name}/{m.name}",
            message_factory.GetMessageClass(m.input_type),
            message_factory.GetMessageClass(m.output_type),
            m.client_streaming,
            m.server_streaming,
        )
        for m in descriptor.methods
    ]


MESSAGING = _methods(messaging_pb2, "MessagingService")
ADMIN = _methods(admin_pb2, "Admin")
REPLICATION = _methods(ha_pb2, "Replication")
METHODS = {m.path: m for m in (*MESSAGING, *ADMIN, *REPLICATION)}
_TRANSPORT = {grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED}


@dataclass(frozen=True)
class Outcome:
    answer: str | None
    transport: str | None = None
    detail: str = ""
    responses: tuple[bytes, ...] = ()


def _code_name(code: int) -> str:
    try:
        return messaging_pb2.Code.Name(code)
    except ValueError:
        return f"CODE_{code}"


def _status_label(method: Method, responses: list[bytes]) -> str:
    """OK, or OK/<Code> for a MessagingService answer that carries a status."""
    if method.service != "MessagingService":
        return "OK"
    for raw in responses:
        try:
            response = method.response.FromString(raw)
        except DecodeError:
            return "OK/UNDECODABLE"
        if "status" in response.DESCRIPTOR.fields_by_name and response.HasField("status"):
            return f"OK/{_code_name(response.status.code)}"
    return "OK/NO_STATUS"


class RawChannel:
    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self._channel = grpc.insecure_channel(
            endpoint,
            options=[("grpc.max_send_message_length", 64 << 20), ("grpc.max_receive_message_length", 64 << 20)],
        )

    def close(self) -> None:
        self._channel.close()

    def identify(self, timeout_s: float = 10.0) -> admin_auth.BrokerIdentity:
        """The broker's identity, which admin signatures bind (`Admin/Identify`, unsigned)."""
        outcome = self.call(METHODS[admin_auth.IDENTIFY_METHOD], [b""], timeout_s=timeout_s)
        if outcome.answer != "OK":
            raise RuntimeError(f"Identify answered {outcome.answer or outcome.transport}: {outcome.detail}")
        answer = admin_pb2.BrokerIdentity.FromString(outcome.responses[0])
        return admin_auth.BrokerIdentity(answer.cluster_name, answer.broker_name, answer.broker_id)

    def call(
        self,
        method: Method,
        payloads: list[bytes],
        metadata: tuple[tuple[str, str], ...] = (),
        timeout_s: float = 5.0,
        max_responses: int = 64,
    ) -> Outcome:
        """Send `payloads` (one for a unary request, any number for a request stream) and read at
        most `max_responses` answers."""
        kind = (method.client_streaming, method.server_streaming)
        try:
            if kind == (False, False):
                callable_ = self._channel.unary_unary(method.path)
                responses = [callable_(payloads[0] if payloads else b"", timeout=timeout_s, metadata=metadata)]
            elif kind == (False, True):
                stream = self._channel.unary_stream(method.path)(
                    payloads[0] if payloads else b"", timeout=timeout_s, metadata=metadata
                )
                responses = _take(stream, max_responses)
            elif kind == (True, False):
                callable_ = self._channel.stream_unary(method.path)
                responses = [callable_(iter(payloads), timeout=timeout_s, metadata=metadata)]
            else:
                stream = self._channel.stream_stream(method.path)(iter(payloads), timeout=timeout_s, metadata=metadata)
                responses = _take(stream, max_responses)
        except grpc.RpcError as exc:
            code = exc.code() if hasattr(exc, "code") else None
            detail = (exc.details() if hasattr(exc, "details") else str(exc)) or ""
            if code is not None and code in _TRANSPORT:
                return Outcome(None, code.name, detail[:300])
            return Outcome(code.name if code is not None else type(exc).__name__, None, detail[:300])
        return Outcome(_status_label(method, responses), responses=tuple(responses))


def _take(stream, limit: int) -> list[bytes]:
    out = []
    for item in stream:
        out.append(item)
        if len(out) >= limit:
            stream.cancel()
            break
    return out


# -- credentials --------------------------------------------------------------------------------

ADMIN_AUTH = (
    "signed",
    "signed",
    "signed",
    "none",
    "wrong-secret",
    "other-method",
    "other-broker",
    "other-body",
    "stale",
    "replayed",
    "malformed",
)
Headers = tuple[tuple[str, str], ...]


class AdminAuth:
    """`x-rs-auth` headers for one thread's calls to the broker `identity`: `sign(mode, path, body)`."""

    def __init__(self, secret: bytes, identity: admin_auth.BrokerIdentity, rng: random.Random) -> None:
        self._secret = secret
        self._identity = identity
        self._signer = admin_auth.Signer(secret)
        self._stranger = admin_auth.Signer(b"not-the-secret-of-this-group")
        self._rng = rng
        self._last: dict[str, tuple[str, bytes]] = {}  # path -> the last signed header and its body

    def sign(self, mode: str, path: str, body: bytes) -> tuple[Headers, bytes]:
        """The metadata of a call to `path` with `body` in `mode`, and the body to send: a replay
        sends the body its header was signed for, so that only the nonce can refuse it."""
        rng, identity = self._rng, self._identity
        if mode == "none":
            return (), body
        if mode == "signed":
            header = self._signer.header(path, identity, body)
            self._last[path] = (header, body)
        elif mode == "replayed":
            header, body = self._last.get(path) or (self._signer.header(path, identity, body), body)
            self._last[path] = (header, body)
        elif mode == "wrong-secret":
            header = self._stranger.header(path, identity, body)
        elif mode == "other-method":
            # Never this method itself: that header would authenticate the call.
            header = self._signer.header(rng.choice([p for p in METHODS if p != path]), identity, body)
        elif mode == "other-broker":
            header = self._signer.header(path, self._another_broker(), body)
        elif mode == "other-body":
            header = self._signer.header(path, identity, body + rng.randbytes(rng.randint(1, 8)))
        elif mode == "stale":
            old = wall_clock_ms() - rng.choice((6, 60, 24 * 60)) * 60_000
            header = admin_auth.Signer(self._secret, clock_ms=lambda: old).header(path, identity, body)
        else:  # printable ASCII only: gRPC refuses to send other header values
            header = rng.choice(
                (
                    "v1",
                    "v1 x y z",
                    f"v1 {time.time_ns()} n {'0' * 64}",
                    "v1 1 12345678 ",
                    "v2 1 2 3",
                    f"v2 {wall_clock_ms()} short {identity.tag()} {'0' * 64}",
                    f"v2 -1 {'a' * 24} {identity.tag()} {'0' * 64}",
                    "v2  1  2  3",
                    "=" * 300,
                )
            )
        return ((admin_auth.HEADER, header),), body

    def _another_broker(self) -> admin_auth.BrokerIdentity:
        """A broker of the same group (the attack of issue 30: a header used on the slave), of
        another group, or of another cluster."""
        me = self._identity
        return self._rng.choice(
            (
                admin_auth.BrokerIdentity(me.cluster, me.broker_name, me.broker_id + 1),
                admin_auth.BrokerIdentity(me.cluster, me.broker_name + "-other", me.broker_id),
                admin_auth.BrokerIdentity(me.cluster + "-other", me.broker_name, me.broker_id),
            )
        )


ACL_AUTH = ("app", "app", "admin", "outsider", "wrong-secret", "unknown-key", "none", "malformed")


def acl_metadata(mode: str, rng: random.Random, app: Credentials, admin: Credentials, outsider: Credentials):
    if mode == "none":
        return ()
    if mode in ("app", "admin", "outsider"):
        who = {"app": app, "admin": admin, "outsider": outsider}[mode]
        return client_signature.metadata(who.access_key, who.secret_key)
    if mode == "wrong-secret":
        return client_signature.metadata(app.access_key, "not-the-secret-key")
    if mode == "unknown-key":
        return client_signature.metadata("nobody-" + rng.randbytes(3).hex(), "whatever-secret-key")
    date = client_signature.date_time_now()
    value = rng.choice(
        (
            "MQv2-HMAC-SHA1",
            "MQv2-HMAC-SHA1 Credential=, SignedHeaders=, Signature=",
            f"MQv2-HMAC-SHA1 Credential={app.access_key}, SignedHeaders=authorization, Signature=00",
            "Basic Zm9vOmJhcg==",
            "MQv2-HMAC-SHA1 Credential=a=b=c, SignedHeaders=x-mq-date-time, Signature=zz",
        )
    )
    return (
        (client_signature.DATE_HEADER, rng.choice((date, "", "19700101T000000Z", "garbage"))),
        ("authorization", value),
    )
