"""`ProxyForwarder`: proxy mode's adapter, a grpc.aio server interceptor that relays the client
API calls a slave would refuse to its group's master (`proxy_rules.py` decides which, and where).

It is the innermost interceptor of the client API's server: for a relayed call it hands back a
handler of its own in place of the servicer's, so the outer interceptors (the malformed-request
guard, the ACL guard, the client sightings) wrap the relay as they wrap the servicer. The relay:

- carries the decoded request to the master over one cached grpc.aio channel per master endpoint,
  with the caller's metadata (ACL signature, client id, language: the master checks and records
  them as from the client) plus `FORWARDED_HEADER`, and the caller's remaining deadline;
- hands the master's answers back as they come, as bytes never decoded on the way (a unary
  answer; ReceiveMessage's stream; both
  directions of a Telemetry stream, so that the master's transaction check-backs reach a
  producer whose stream is on a slave);
- falls back to the local servicer when the master cannot be reached (gRPC UNAVAILABLE before any
  answer came back, as while the group elects a new master): the slave answers NOT_MASTER, which
  the clients retry, or serves the call itself while it acts for its master. A Telemetry stream
  is relayed only when the channel to the master becomes ready within `TELEMETRY_CONNECT_S`; else
  the slave serves the stream's settings itself. Any other error of the master's is the caller's
  error, with the master's code and text. A relayed stream the master ends with an error ends
  with it.

A message the master stores through a relayed SendMessage records the slave's address as its born
host (the master sees the call come from the slave).

Thread-safety: runs on the client API server's event loop, as do its channels.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import grpc

from store import BrokerRole

from .call_metadata import method_of
from .proxy_rules import FORWARDED_HEADER, RELAYED, Standing, relay_target
from .view import BrokerView

log = logging.getLogger("rocketstore.broker.proxy")

# Channels kept open to masters: a group's master changes now and then; old ones are closed.
MAX_CHANNELS = 4
TELEMETRY_CONNECT_S = 1.0
# Metadata gRPC sets itself on the relayed call.
_TRANSPORT_KEYS = frozenset(("user-agent", "content-type", "te", "host", "accept-encoding", "grpc-accept-encoding"))
# A master restarted at the same address is reached again within this backoff.
_CHANNEL_OPTIONS: tuple[tuple[str, Any], ...] = (
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
)


def _serialize(message: Any) -> bytes:
    return message.SerializeToString()


def _passing_bytes(serialize: Callable[[Any], bytes] | None) -> Callable[[Any], bytes]:
    """The servicer's response serializer, taking the master's answers as the bytes they came in
    (never decoded here) and the local answers (a fallback, a guard's refusal) as messages."""

    def serializer(response: Any) -> bytes:
        if isinstance(response, bytes):
            return response
        return serialize(response) if serialize is not None else _serialize(response)

    return serializer


def relayed_metadata(metadata: Sequence[tuple[str, Any]] | None) -> tuple[tuple[str, Any], ...]:
    """The caller's metadata as the relayed call carries it: its own, less what gRPC sets on a
    call, marked as relayed."""
    kept = tuple(
        (key, value)
        for key, value in metadata or ()
        if not key.startswith((":", "grpc-")) and key not in _TRANSPORT_KEYS and key != FORWARDED_HEADER
    )
    return (*kept, (FORWARDED_HEADER, "1"))


def proxy_standing(view: BrokerView) -> Standing:
    """This broker's role as `relay_target` reads it (a master's in one look)."""
    if view.role is not BrokerRole.SLAVE:
        return Standing(False, False, "", "")
    return Standing(True, view.acting_master(), view.client_endpoint(), view.master_client_endpoint())


def _unavailable(exc: grpc.aio.AioRpcError) -> bool:
    return exc.code() is grpc.StatusCode.UNAVAILABLE


class _Channels:
    """The channels to masters, by endpoint, the most recently used last."""

    def __init__(self, options: Sequence[tuple[str, Any]]) -> None:
        self._options = (*_CHANNEL_OPTIONS, *options)
        self._open: OrderedDict[str, grpc.aio.Channel] = OrderedDict()

    def get(self, endpoint: str) -> grpc.aio.Channel:
        channel = self._open.get(endpoint)
        if channel is None:
            log.info("proxy mode: relaying the calls only a master serves to %s", endpoint)
            channel = self._open[endpoint] = grpc.aio.insecure_channel(endpoint, options=self._options)
            while len(self._open) > MAX_CHANNELS:
                _, old = self._open.popitem(last=False)
                # Calls still on it (a long poll) end with it; their clients retry.
                asyncio.ensure_future(old.close(grace=5.0))
        self._open.move_to_end(endpoint)
        return channel

    async def close(self) -> None:
        channels, self._open = list(self._open.values()), OrderedDict()
        for channel in channels:
            await channel.close(grace=1.0)


class ProxyForwarder(grpc.aio.ServerInterceptor):
    """See the module docstring. `standing` reads this broker's role for one call; None until the
    broker serves (nothing is relayed)."""

    def __init__(self, channel_options: Sequence[tuple[str, Any]] = ()) -> None:
        self._standing: Callable[[], Standing] | None = None
        self._channels = _Channels(channel_options)

    def bind(self, standing: Callable[[], Standing]) -> None:
        self._standing = standing

    async def close(self) -> None:
        await self._channels.close()

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        path = handler_call_details.method
        method = method_of(path)
        if handler is None or method not in RELAYED or self._standing is None:
            return handler
        standing = self._standing()
        if not standing.is_slave:
            # A master serves every call: its sends skip the scan of their metadata below.
            return handler
        metadata = handler_call_details.invocation_metadata or ()
        relayed = any(key == FORWARDED_HEADER for key, _ in metadata)
        target = relay_target(method, standing, already_relayed=relayed)
        if target is None:
            return handler
        channel = self._channels.get(target)
        upstream_metadata = relayed_metadata(metadata)
        responses = _passing_bytes(handler.response_serializer)
        relays = (
            ("unary_unary", _relay_unary, grpc.unary_unary_rpc_method_handler),
            ("unary_stream", _relay_unary_stream, grpc.unary_stream_rpc_method_handler),
            ("stream_stream", functools.partial(_relay_stream_stream, channel), grpc.stream_stream_rpc_method_handler),
        )
        for kind, relay, method_handler in relays:
            local = getattr(handler, kind)
            if local is not None:
                upstream = getattr(channel, kind)(path, request_serializer=_serialize)
                return method_handler(
                    relay(upstream, local, upstream_metadata), handler.request_deserializer, responses
                )
        return handler


def _relay_unary(upstream, local, metadata):
    async def unary_unary(request, context):
        try:
            return await upstream(request, metadata=metadata, timeout=context.time_remaining())
        except grpc.aio.AioRpcError as exc:
            if _unavailable(exc):
                return await local(request, context)
            await context.abort(exc.code(), exc.details() or "")

    return unary_unary


def _relay_unary_stream(upstream, local, metadata):
    async def unary_stream(request, context):
        call = upstream(request, metadata=metadata, timeout=context.time_remaining())
        answered = False
        try:
            async for response in call:
                answered = True
                yield response
        except grpc.aio.AioRpcError as exc:
            if answered or not _unavailable(exc):
                await context.abort(exc.code(), exc.details() or "")
            async for response in local(request, context):
                yield response
        finally:
            call.cancel()

    return unary_stream


def _relay_stream_stream(channel: grpc.aio.Channel, upstream, local, metadata):
    async def stream_stream(requests: AsyncIterator[Any], context):
        try:
            await asyncio.wait_for(channel.channel_ready(), TELEMETRY_CONNECT_S)
        except asyncio.TimeoutError:
            async for response in local(requests, context):
                yield response
            return
        call = upstream(requests, metadata=metadata, timeout=context.time_remaining())
        try:
            async for response in call:
                yield response
        except grpc.aio.AioRpcError as exc:
            await context.abort(exc.code(), exc.details() or "")
        finally:
            call.cancel()

    return stream_stream
