"""The admin API's shared-secret signatures (`rocketstore.admin.v1.Admin`): a signed call is good
for one broker, one request body and one use.

Every call but `Identify` carries the metadata entry

    x-rs-auth: v2 <unix time ms> <nonce> <identity tag> <hex HMAC-SHA256(secret, fields)>

where the fields are, each as an 8-byte big-endian length and its bytes: the label "rs-admin-v2",
the full method name (`/rocketstore.admin.v1.Admin/SetBrokerConfig`), the time, the nonce, the
broker's identity (cluster name, broker name and broker id, as `BrokerIdentity.encoded`) and the
SHA-256 of the request's bytes as sent. The identity tag (the first 8 bytes of the identity's
SHA-256, in hex) only lets the broker say "signed for another broker" rather than "bad
signature"; the HMAC is what binds it. A client learns the identity with `Identify`, the one call
that needs no signature (what it answers is no secret: routes name brokers too).

The broker checks the signature in constant time over its own identity and the bytes it received,
refuses a time more than `max_skew_ms` from its clock, and a nonce it saw within that window. So a
captured header is refused by any other broker (another identity), with any other body (another
digest), after five minutes, and a second time on the same broker. The secret never crosses the
wire and is never logged; refusals log the peer, the method and the reason (at most once per peer
host per 10 s). The v1 header of earlier clients (method, time and nonce only) is refused.

`Verifier` is the sans-IO core (header, method, body, now -> None or a reason); `AuthInterceptor`
and `AsyncAuthInterceptor` are the gRPC adapters (threaded and asyncio servers): they read the
request's bytes as grpc hands them over, before they are decoded. `Signer` makes headers and
`AdminCaller` makes signed calls for clients. Thread-safety: `Signer` is stateless;
`Verifier.check` takes a lock around its nonce cache; `AdminCaller` may be shared by threads.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import struct
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import message_factory

from .auth import wall_clock_ms
from .log_limit import LogLimiter, peer_host
from .rpc import admin_pb2

log = logging.getLogger(__name__)

HEADER = "x-rs-auth"
VERSION = "v2"
SERVICE = "/rocketstore.admin.v1.Admin/"
IDENTIFY_METHOD = SERVICE + "Identify"
DEFAULT_MAX_SKEW_MS = 5 * 60 * 1000
_MAX_NONCES = 100_000
_LABEL = b"rs-admin-v2"
# What the broker says when the identity tag is not its own; a client then asks `Identify` again.
ANOTHER_BROKER = "signed for another broker"
_METHODS = admin_pb2.DESCRIPTOR.services_by_name["Admin"].methods_by_name


@dataclass(frozen=True, slots=True)
class BrokerIdentity:
    cluster: str
    broker_name: str
    broker_id: int

    def encoded(self) -> bytes:
        cluster, name = self.cluster.encode("utf-8"), self.broker_name.encode("utf-8")
        return b"".join(
            (
                len(cluster).to_bytes(8, "big"),
                cluster,
                len(name).to_bytes(8, "big"),
                name,
                struct.pack(">q", self.broker_id),
            )
        )

    def tag(self) -> str:
        return hashlib.sha256(self.encoded()).hexdigest()[:16]

    def __str__(self) -> str:
        return f"{self.cluster}/{self.broker_name}/{self.broker_id}"


def _signature(secret: bytes, method: str, time_ms: int, nonce: str, identity: BrokerIdentity, body: bytes) -> str:
    mac = hmac.new(secret, _LABEL, hashlib.sha256)
    parts = (
        method.encode("utf-8"),
        str(time_ms).encode(),
        nonce.encode(),
        identity.encoded(),
        hashlib.sha256(body).digest(),
    )
    for part in parts:
        mac.update(len(part).to_bytes(8, "big"))
        mac.update(part)
    return mac.hexdigest()


class Signer:
    """Client side: the metadata of a call to `method` of the broker `identity` with `body`."""

    def __init__(self, secret: bytes, clock_ms: Callable[[], int] = wall_clock_ms) -> None:
        if not secret:
            raise ValueError("Signer needs a secret")
        self._secret = secret
        self._clock = clock_ms

    def header(self, method: str, identity: BrokerIdentity, body: bytes) -> str:
        time_ms = self._clock()
        nonce = os.urandom(12).hex()
        signature = _signature(self._secret, method, time_ms, nonce, identity, body)
        return f"{VERSION} {time_ms} {nonce} {identity.tag()} {signature}"

    def metadata(self, method: str, identity: BrokerIdentity, body: bytes) -> tuple[tuple[str, str], ...]:
        return ((HEADER, self.header(method, identity, body)),)

    def __repr__(self) -> str:  # keep the secret out of reprs and logs
        return "Signer(<secret>)"


class Verifier:
    """Server side: checks a header value for a call to `method` of this broker with `body`."""

    def __init__(self, secret: bytes, identity: BrokerIdentity, max_skew_ms: int = DEFAULT_MAX_SKEW_MS) -> None:
        if not secret:
            raise ValueError("Verifier needs a secret")
        self._secret = secret
        self.identity = identity
        self._tag = identity.tag()
        self._max_skew_ms = max_skew_ms
        self._seen: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()

    def check(self, header: str | None, method: str, body: bytes, now_ms: int) -> str | None:
        """None when the header authenticates this call; otherwise the reason."""
        if not header:
            return "no credentials"
        parts = header.split(" ")
        if parts[0] == "v1":
            return "credentials of the v1 scheme, which does not bind the broker and the request: upgrade the client"
        if len(parts) != 5 or parts[0] != VERSION:
            return "malformed credentials"
        _, time_text, nonce, tag, signature = parts
        if not time_text.isascii() or not time_text.isdigit() or not 8 <= len(nonce) <= 64 or not nonce.isascii():
            return "malformed credentials"
        if tag != self._tag:
            return f"{ANOTHER_BROKER}: this is {self.identity}"
        time_ms = int(time_text)
        expected = _signature(self._secret, method, time_ms, nonce, self.identity, body)
        if not hmac.compare_digest(expected.encode(), signature.encode("utf-8", "replace")):
            return "bad signature (another secret, method or request)"
        if abs(now_ms - time_ms) > self._max_skew_ms:
            return "credentials expired (clock skew or replay)"
        with self._lock:
            self._forget_before(now_ms - self._max_skew_ms)
            if nonce in self._seen:
                return "replayed credentials"
            self._seen[nonce] = time_ms
            if len(self._seen) > _MAX_NONCES:
                self._seen.popitem(last=False)
        return None

    def _forget_before(self, oldest_ms: int) -> None:
        seen = self._seen
        while seen:
            nonce, time_ms = next(iter(seen.items()))
            if time_ms >= oldest_ms:
                break
            seen.popitem(last=False)

    def __repr__(self) -> str:
        return f"Verifier({self.identity}, <secret>)"


# -- the server side's gRPC adapters -----------------------------------------------------------------


class _Refused:
    """Stands for a request whose signature did not check."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _refusing_handler(handler, reason: str, *, aio: bool):
    """A handler of the same shape as `handler` that answers UNAUTHENTICATED."""
    message = f"authentication failed: {reason}"

    async def deny_async(request_or_iterator, context):
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    def deny_sync(request_or_iterator, context):
        context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    deny = deny_async if aio else deny_sync
    if handler.request_streaming and handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(deny)
    if handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(deny)
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(deny)
    return grpc.unary_unary_rpc_method_handler(deny)


class _Gate:
    """What both interceptor flavours share: wraps a protected unary method's handler so that its
    request's bytes are checked against the call's header before they are decoded."""

    def __init__(
        self,
        verifier: Verifier,
        protected_prefixes: Iterable[str],
        clock_ms: Callable[[], int],
        open_methods: Iterable[str],
    ) -> None:
        self._verifier = verifier
        self._prefixes = tuple(protected_prefixes)
        self._open = frozenset(open_methods)
        self._clock = clock_ms
        self._refusals = LogLimiter(log)

    def _log(self, context, method: str, reason: str) -> None:
        peer = context.peer() or "?"
        self._refusals.log(peer_host(peer), "refused %s from %s: %s", method, peer, reason)

    def wrap(self, handler, handler_call_details, *, aio: bool):
        method = handler_call_details.method
        if handler is None or not method.startswith(self._prefixes) or method in self._open:
            return handler
        if handler.request_streaming or handler.response_streaming:
            return _refusing_handler(handler, "only unary calls can be signed", aio=aio)
        header = next((v for k, v in handler_call_details.invocation_metadata or () if k == HEADER), None)
        decode = handler.request_deserializer

        def checked(raw: bytes) -> Any:
            reason = self._verifier.check(header, method, raw, self._clock())
            if reason is not None:
                return _Refused(reason)
            return decode(raw) if decode is not None else raw

        inner = handler.unary_unary
        if aio:

            async def behaviour_async(request, context):
                if isinstance(request, _Refused):
                    self._log(context, method, request.reason)
                    await context.abort(grpc.StatusCode.UNAUTHENTICATED, f"authentication failed: {request.reason}")
                return await inner(request, context)

            behaviour: Callable[..., Any] = behaviour_async
        else:

            def behaviour_sync(request, context):
                if isinstance(request, _Refused):
                    self._log(context, method, request.reason)
                    context.abort(grpc.StatusCode.UNAUTHENTICATED, f"authentication failed: {request.reason}")
                return inner(request, context)

            behaviour = behaviour_sync
        return grpc.unary_unary_rpc_method_handler(behaviour, checked, handler.response_serializer)


class _Protecting:
    """What both interceptors are built from: the verifier, the protected method prefixes (but
    `open_methods`), the clock."""

    def __init__(
        self,
        verifier: Verifier,
        protected_prefixes: Iterable[str],
        clock_ms: Callable[[], int] = wall_clock_ms,
        open_methods: Iterable[str] = (IDENTIFY_METHOD,),
    ) -> None:
        self._gate = _Gate(verifier, protected_prefixes, clock_ms, open_methods)


class AuthInterceptor(_Protecting, grpc.ServerInterceptor):
    """Refuses calls to methods under `protected_prefixes` (but `open_methods`) without a valid
    `x-rs-auth` header for their request, on a threaded `grpc.server`. Methods outside them (the
    RocketMQ client API) pass untouched."""

    def intercept_service(self, continuation, handler_call_details):
        return self._gate.wrap(continuation(handler_call_details), handler_call_details, aio=False)


class AsyncAuthInterceptor(_Protecting, grpc.aio.ServerInterceptor):
    """`AuthInterceptor` for a `grpc.aio` server."""

    async def intercept_service(self, continuation, handler_call_details):
        return self._gate.wrap(await continuation(handler_call_details), handler_call_details, aio=True)


def identity_answer(identity: BrokerIdentity) -> admin_pb2.BrokerIdentity:
    """What `Identify` answers."""
    return admin_pb2.BrokerIdentity(
        cluster_name=identity.cluster, broker_name=identity.broker_name, broker_id=identity.broker_id
    )


# -- the client side -----------------------------------------------------------------------------------


class AdminCaller:
    """Signed unary calls to the admin API of the broker behind `channel` (a blocking channel).
    It learns the broker's identity with `Identify` at the first call (again when the broker says
    a call was signed for another broker: it restarted as another), serializes each request once
    and signs those very bytes. grpc's errors are raised as they come."""

    def __init__(self, channel: grpc.Channel, secret: bytes, clock_ms: Callable[[], int] = wall_clock_ms) -> None:
        self._channel = channel
        self._signer = Signer(secret, clock_ms)
        self._identity: BrokerIdentity | None = None
        self._identify = channel.unary_unary(
            IDENTIFY_METHOD,
            request_serializer=admin_pb2.IdentifyRequest.SerializeToString,
            response_deserializer=admin_pb2.BrokerIdentity.FromString,
        )

    def identity(self, timeout_s: float) -> BrokerIdentity:
        identity = self._identity
        if identity is None:
            answer = self._identify(admin_pb2.IdentifyRequest(), timeout=timeout_s)
            identity = self._identity = BrokerIdentity(answer.cluster_name, answer.broker_name, answer.broker_id)
        return identity

    def call(self, method: str, request: Any, timeout_s: float) -> Any:
        """`method` (its short name, `GetStatus`) with `request`; its answer."""
        path = SERVICE + method
        body = request.SerializeToString(deterministic=True)
        answer = message_factory.GetMessageClass(_METHODS[method].output_type)
        call = self._channel.unary_unary(path, request_serializer=None, response_deserializer=answer.FromString)

        def signed() -> Any:
            metadata = self._signer.metadata(path, self.identity(timeout_s), body)
            return call(body, timeout=timeout_s, metadata=metadata)

        try:
            return signed()
        except grpc.RpcError as exc:
            if not isinstance(exc, grpc.Call) or ANOTHER_BROKER not in (exc.details() or ""):
                raise
        self._identity = None  # the broker behind the endpoint is another one now: ask again
        return signed()

    def __repr__(self) -> str:
        return "AdminCaller(<secret>)"
