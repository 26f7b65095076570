"""Authentication of RocketStore's own endpoints: the admin API's shared-secret signatures, and
the mutual TLS credentials of replication and the client API. (Replication's shared-secret mode is
mutual and per call: ha/peer_auth.py; it only borrows `load_secret` from here.)

Shared secret (admin API): every call carries the metadata entry

    x-rs-auth: v1 <unix time ms> <nonce> <hex HMAC-SHA256(secret, "<method>\\n<time ms>\\n<nonce>")>

where <method> is the full gRPC method name (`/rocketstore.admin.v1.Admin/GetStatus`). The
server checks the signature in constant time, refuses a time more than `max_skew_ms` away from its
clock, and refuses a nonce it saw within that window (a captured header cannot be replayed). The
secret itself never crosses the wire and is never logged; refusals log the peer, the method and
the reason only.

`Verifier` is the sans-IO core (header, method, now -> None or a reason); `AuthInterceptor` and
`AsyncAuthInterceptor` are the gRPC adapters (threaded and asyncio servers); `Signer` makes
headers for clients. Thread-safety: `Signer` is stateless; `Verifier.check` takes a lock around
its nonce cache.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from pathlib import Path

import grpc

log = logging.getLogger(__name__)

HEADER = "x-rs-auth"
VERSION = "v1"
DEFAULT_MAX_SKEW_MS = 5 * 60 * 1000
_MAX_NONCES = 100_000
MIN_SECRET_BYTES = 16


def wall_clock_ms() -> int:
    # Not store.clock's: the client imports this module and must not load the store package.
    return time.time_ns() // 1_000_000


def load_secret(secret: str = "", secret_file: str = "") -> bytes:
    """The shared secret from the config: inline, or the first line of a file. Empty when
    neither is set. ValueError for one shorter than MIN_SECRET_BYTES (it would be guessable) and
    for a file that users other than its owner may read or write (like ssh with a private key)."""
    if secret_file:
        mode = os.stat(secret_file).st_mode
        if mode & 0o077:
            raise ValueError(
                f"the secret file {secret_file} is accessible by group or others (mode {mode & 0o777:o}): "
                f"run chmod 600 {secret_file}"
            )
        text = Path(secret_file).read_text(encoding="utf-8").strip()
    else:
        text = secret
    raw = text.encode("utf-8")
    if raw and len(raw) < MIN_SECRET_BYTES:
        raise ValueError(f"a shared secret needs at least {MIN_SECRET_BYTES} bytes")
    return raw


def _signature(secret: bytes, method: str, time_ms: int, nonce: str) -> str:
    message = f"{method}\n{time_ms}\n{nonce}".encode("utf-8")
    return hmac.new(secret, message, hashlib.sha256).hexdigest()


class Signer:
    """Client side: the metadata a call to `method` carries."""

    def __init__(self, secret: bytes, clock_ms: Callable[[], int] = wall_clock_ms) -> None:
        if not secret:
            raise ValueError("Signer needs a secret")
        self._secret = secret
        self._clock = clock_ms

    def header(self, method: str) -> str:
        time_ms = self._clock()
        nonce = os.urandom(12).hex()
        return f"{VERSION} {time_ms} {nonce} {_signature(self._secret, method, time_ms, nonce)}"

    def metadata(self, method: str) -> tuple[tuple[str, str], ...]:
        return ((HEADER, self.header(method)),)

    def __repr__(self) -> str:  # keep the secret out of reprs and logs
        return "Signer(<secret>)"


class Verifier:
    """Server side: checks a header value for a method at `now_ms`."""

    def __init__(self, secret: bytes, max_skew_ms: int = DEFAULT_MAX_SKEW_MS) -> None:
        if not secret:
            raise ValueError("Verifier needs a secret")
        self._secret = secret
        self._max_skew_ms = max_skew_ms
        self._seen: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()

    def check(self, header: str | None, method: str, now_ms: int) -> str | None:
        """None when the header authenticates a call to `method`; otherwise the reason."""
        if not header:
            return "no credentials"
        parts = header.split(" ")
        if len(parts) != 4 or parts[0] != VERSION:
            return "malformed credentials"
        _, time_text, nonce, signature = parts
        try:
            time_ms = int(time_text)
        except ValueError:
            return "malformed credentials"
        if not 8 <= len(nonce) <= 64:
            return "malformed credentials"
        expected = _signature(self._secret, method, time_ms, nonce)
        if not hmac.compare_digest(expected.encode(), signature.encode()):
            return "bad signature"
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
        return "Verifier(<secret>)"


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
    """The decision both interceptor flavours share: None (let the call in) or a reason."""

    def __init__(self, verifier: Verifier, protected_prefixes: Iterable[str], clock_ms: Callable[[], int]) -> None:
        self._verifier = verifier
        self._prefixes = tuple(protected_prefixes)
        self._clock = clock_ms

    def refusal(self, handler_call_details) -> str | None:
        method = handler_call_details.method
        if not method.startswith(self._prefixes):
            return None
        header = next((v for k, v in handler_call_details.invocation_metadata or () if k == HEADER), None)
        reason = self._verifier.check(header, method, self._clock())
        if reason is not None:
            log.warning("refused %s: %s", method, reason)
        return reason


class AuthInterceptor(grpc.ServerInterceptor):
    """Refuses calls to methods under `protected_prefixes` without a valid `x-rs-auth` header,
    on a threaded `grpc.server`. Methods outside them (the RocketMQ client API) pass untouched."""

    def __init__(
        self,
        verifier: Verifier,
        protected_prefixes: Iterable[str],
        clock_ms: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self._gate = _Gate(verifier, protected_prefixes, clock_ms)

    def intercept_service(self, continuation, handler_call_details):
        reason = self._gate.refusal(handler_call_details)
        handler = continuation(handler_call_details)
        if reason is None or handler is None:
            return handler
        return _refusing_handler(handler, reason, aio=False)


class AsyncAuthInterceptor(grpc.aio.ServerInterceptor):
    """`AuthInterceptor` for a `grpc.aio` server."""

    def __init__(
        self,
        verifier: Verifier,
        protected_prefixes: Iterable[str],
        clock_ms: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self._gate = _Gate(verifier, protected_prefixes, clock_ms)

    async def intercept_service(self, continuation, handler_call_details):
        reason = self._gate.refusal(handler_call_details)
        handler = await continuation(handler_call_details)
        if reason is None or handler is None:
            return handler
        return _refusing_handler(handler, reason, aio=True)


# -- mutual TLS ----------------------------------------------------------------------------------


def _read(path: str) -> bytes:
    return Path(path).read_bytes()


def server_credentials(cert_file: str, key_file: str, ca_file: str = "") -> grpc.ServerCredentials:
    """TLS for a server; with `ca_file`, clients must present a certificate signed by it."""
    return grpc.ssl_server_credentials(
        [(_read(key_file), _read(cert_file))],
        root_certificates=_read(ca_file) if ca_file else None,
        require_client_auth=bool(ca_file),
    )


def channel_credentials(ca_file: str, cert_file: str = "", key_file: str = "") -> grpc.ChannelCredentials:
    """TLS for a client trusting `ca_file`; with a certificate and key, it presents them."""
    return grpc.ssl_channel_credentials(
        root_certificates=_read(ca_file),
        private_key=_read(key_file) if key_file else None,
        certificate_chain=_read(cert_file) if cert_file else None,
    )
