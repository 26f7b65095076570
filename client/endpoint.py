"""Broker endpoints: parsing `host:port` and opening gRPC channels to them.

Accepted forms: `host:port` where host is an IPv4 literal or a DNS name (RFC 1123 labels), and
`[v6-literal]:port` (an IPv6 literal must be in brackets, since its colons would hide the port).
Ports run from 1 to 65535. Anything else raises `EndpointError` naming what is wrong.
`Endpoint.target` is the form gRPC takes (brackets kept for IPv6).

`route_request` asks a broker for a topic's route with every broker under its own id (slaves
too, read-only): what this client's producers, consumers and tools read routes from.
`open_channel` makes a plaintext channel, or a TLS one trusting `tls_ca_file`, sync or grpc.aio;
`MessagingStubs` keeps one per endpoint for a client that talks to several brokers.
Thread-safety: `Endpoint` is immutable; sync channels may be shared between threads; an aio
channel belongs to the event loop that created it; `MessagingStubs` may be used from any thread.
"""

from __future__ import annotations

import ipaddress
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc

from wire.rpc import messaging_pb2 as pb
from wire.rpc import messaging_pb2_grpc

from .errors import EndpointError

DEFAULT_ENDPOINT = "127.0.0.1:10911"
# Pull answers stream one message per response, but a send batch or a status with a large stats
# snapshot can pass gRPC's 4 MiB default; a broker's maxMessageSize is 4 MiB by default.
MAX_MESSAGE_BYTES = 128 * 1024 * 1024
CHANNEL_OPTIONS = (
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
)

_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")
_DIGITS_AND_DOTS = re.compile(r"[0-9.]+")


@dataclass(frozen=True, slots=True)
class Endpoint:
    host: str
    port: int

    @property
    def is_ipv6(self) -> bool:
        return ":" in self.host

    @property
    def is_ipv4(self) -> bool:
        return _DIGITS_AND_DOTS.fullmatch(self.host) is not None

    @property
    def target(self) -> str:
        return f"[{self.host}]:{self.port}" if self.is_ipv6 else f"{self.host}:{self.port}"

    def __str__(self) -> str:
        return self.target


def _check_host(host: str, text: str) -> str:
    if not host:
        raise EndpointError(f"endpoint {text!r} has no host (expected HOST:PORT)")
    if ":" in host:
        raise EndpointError(f"endpoint {text!r}: an IPv6 address needs brackets, e.g. [{host}]:10911")
    if _DIGITS_AND_DOTS.fullmatch(host):
        try:
            return str(ipaddress.IPv4Address(host))
        except ValueError:
            raise EndpointError(f"endpoint {text!r}: {host!r} is not an IPv4 address") from None
    name = host[:-1] if host.endswith(".") else host
    if len(name) > 253 or not all(_LABEL.fullmatch(label) for label in name.split(".")):
        raise EndpointError(f"endpoint {text!r}: {host!r} is neither an IP address nor a valid host name")
    return host


def _check_port(port_text: str, text: str) -> int:
    if not port_text:
        raise EndpointError(f"endpoint {text!r} has no port (expected HOST:PORT)")
    if not port_text.isascii() or not port_text.isdigit():
        raise EndpointError(f"endpoint {text!r}: port {port_text!r} is not a number")
    port = int(port_text)
    if not 1 <= port <= 65535:
        raise EndpointError(f"endpoint {text!r}: port {port} is outside 1-65535")
    return port


def parse_endpoint(text: object, default_port: int | None = None) -> Endpoint:
    """`host:port` or `[ipv6]:port` -> Endpoint; without a port, `default_port` when given."""
    if isinstance(text, Endpoint):
        return text
    if not isinstance(text, str):
        raise EndpointError(f"an endpoint is a 'host:port' string, not {type(text).__name__}")
    raw = text.strip()
    if not raw:
        raise EndpointError("the endpoint is empty (expected HOST:PORT)")
    if any(c.isspace() for c in raw) or "/" in raw or "@" in raw:
        raise EndpointError(f"endpoint {text!r}: expected HOST:PORT, without spaces, scheme or path")
    if raw.startswith("["):
        close = raw.find("]")
        if close < 0:
            raise EndpointError(f"endpoint {text!r}: '[' without its ']'")
        literal, rest = raw[1:close], raw[close + 1 :]
        try:
            host = str(ipaddress.IPv6Address(literal))
        except ValueError:
            raise EndpointError(f"endpoint {text!r}: {literal!r} in brackets is not an IPv6 address") from None
        if rest == "" and default_port is not None:
            return Endpoint(host, default_port)
        if not rest.startswith(":"):
            raise EndpointError(f"endpoint {text!r}: expected ':PORT' after ']'")
        return Endpoint(host, _check_port(rest[1:], text))
    if "]" in raw:
        raise EndpointError(f"endpoint {text!r}: ']' without its '['")
    if raw.count(":") > 1:
        raise EndpointError(f"endpoint {text!r}: an IPv6 address needs brackets, e.g. [::1]:10911")
    host_text, colon, port_text = raw.partition(":")
    host = _check_host(host_text, text)
    if not colon:
        if default_port is None:
            raise EndpointError(f"endpoint {text!r} has no port (expected HOST:PORT)")
        return Endpoint(host, default_port)
    return Endpoint(host, _check_port(port_text, text))


def route_request(topic: str, endpoint: Endpoint) -> pb.QueryRouteRequest:
    """QueryRoute of `topic`, naming the access point asked (`endpoint`) and asking for every
    broker under its own id (`replicas`), not RocketMQ 5's one entry per group."""
    return pb.QueryRouteRequest(
        topic=pb.Resource(name=topic),
        endpoints=pb.Endpoints(
            scheme=pb.IPv6 if endpoint.is_ipv6 else pb.IPv4 if endpoint.is_ipv4 else pb.DOMAIN_NAME,
            addresses=[pb.Address(host=endpoint.host, port=endpoint.port)],
        ),
        replicas=True,
    )


def open_channel(endpoint: Endpoint, *, tls_ca_file: str | None = None, aio: bool = False, credentials=None):
    """A channel to `endpoint`: TLS trusting `tls_ca_file` when given, else plaintext; every call
    signed with `credentials` (a `client.signing.Credentials`) when given."""
    module = grpc.aio if aio else grpc
    extra: dict = {}
    if credentials is not None and aio:
        from .signing import AsyncSigningInterceptor

        extra["interceptors"] = [AsyncSigningInterceptor(credentials)]
    if tls_ca_file:
        from wire.auth import channel_credentials

        channel = module.secure_channel(
            endpoint.target, channel_credentials(tls_ca_file), options=CHANNEL_OPTIONS, **extra
        )
    else:
        channel = module.insecure_channel(endpoint.target, options=CHANNEL_OPTIONS, **extra)
    if credentials is not None and not aio:
        from .signing import SigningInterceptor

        channel = grpc.intercept_channel(channel, SigningInterceptor(credentials))
    return channel


class MessagingStubs:
    """A MessagingService stub per endpoint, each on its own channel opened at first use (sync or
    grpc.aio); `close_all` ends them together, after which `get` raises `closed_error()`."""

    def __init__(
        self,
        closed_error: Callable[[], Exception],
        *,
        tls_ca_file: str | None = None,
        credentials=None,
        aio: bool = False,
    ) -> None:
        self._closed_error = closed_error
        self._tls_ca_file = tls_ca_file
        self._credentials = credentials
        self._aio = aio
        self._lock = threading.Lock()
        self._open: dict[Endpoint, tuple[Any, messaging_pb2_grpc.MessagingServiceStub]] = {}
        self.closed = False

    @property
    def endpoints(self) -> set[Endpoint]:
        """The endpoints a channel is open to."""
        with self._lock:
            return set(self._open)

    def get(self, endpoint: Endpoint) -> messaging_pb2_grpc.MessagingServiceStub:
        with self._lock:
            if self.closed:
                raise self._closed_error()
            entry = self._open.get(endpoint)
            if entry is None:
                channel = open_channel(
                    endpoint, tls_ca_file=self._tls_ca_file, aio=self._aio, credentials=self._credentials
                )
                entry = self._open[endpoint] = (channel, messaging_pb2_grpc.MessagingServiceStub(channel))
            return entry[1]

    def close_all(self) -> list[Any]:
        """Marks the stubs closed and hands back their channels for the caller to close (an aio
        channel's close is awaited)."""
        with self._lock:
            self.closed = True
            channels, self._open = [channel for channel, _ in self._open.values()], {}
        return channels
