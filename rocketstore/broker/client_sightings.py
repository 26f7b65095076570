"""`ClientSightings`: a grpc.aio server interceptor that tells the `ClientRegistry` which clients
call the client API, before the call's handler runs.

Only the calls that name a client's group or kind are looked at: Heartbeat (the official clients'
kind: producer, push or simple consumer), the pop calls (QueryAssignment, ReceiveMessage,
AckMessage, ChangeInvisibleDuration: a gRPC pop consumer), the pull calls (PullMessage,
GetOffset, UpdateOffset: a gRPC pull consumer) and NotifyClientTermination (the client is gone).
Sends and routes pass untouched, so the put path pays nothing beyond the interceptor's lookup.
The client's id is its `x-mq-client-id` header (the official clients send one), else the address
it calls from; `x-mq-language` and `x-mq-client-version` are kept when sent.

Thread-safety: runs on the server's event loop; the registry takes its own lock.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

import grpc

from store.clock import wall_clock_ms
from wire.rpc import messaging_pb2 as pb

from .call_metadata import call_headers, method_of
from .client_registry import ClientKind, ClientProtocol, ClientRegistry, ClientSeen

CLIENT_ID_HEADER = "x-mq-client-id"
LANGUAGE_HEADER = "x-mq-language"
VERSION_HEADER = "x-mq-client-version"

_POP = ("QueryAssignment", "ReceiveMessage", "AckMessage", "ChangeInvisibleDuration")
_PULL = ("PullMessage", "GetOffset", "UpdateOffset")
_WATCHED = frozenset(("Heartbeat", "NotifyClientTermination", *_POP, *_PULL))


def _address(peer: str) -> str:
    """grpc's peer ("ipv4:127.0.0.1:5000", "ipv6:[::1]:5000") as host:port."""
    return peer.split(":", 1)[1] if peer.startswith(("ipv4:", "ipv6:")) else peer


def _topic(request: Any) -> str:
    if hasattr(request, "message_queue"):
        return request.message_queue.topic.name
    topic = getattr(request, "topic", None)
    return topic.name if topic is not None else ""


def _group(request: Any) -> str:
    group = getattr(request, "group", None)
    return group.name if group is not None else ""


def client_id_of(metadata: Mapping[str, str], peer: str) -> str:
    """Who a gRPC call comes from: its `x-mq-client-id`, else the address it calls from."""
    return metadata.get(CLIENT_ID_HEADER, "") or _address(peer)


class ClientSightings(grpc.aio.ServerInterceptor):
    def __init__(self, registry: ClientRegistry, clock_ms: Callable[[], int] = wall_clock_ms) -> None:
        self._registry = registry
        self._clock = clock_ms

    def record(self, method: str, request: Any, metadata: Mapping[str, str], peer: str) -> None:
        """What the call `method` with `request` says about its client (see the module docstring)."""
        address = _address(peer)
        client_id = client_id_of(metadata, peer)
        group = _group(request)
        if method == "NotifyClientTermination":
            self._registry.gone(client_id, group or None)
            return
        if method == "Heartbeat":
            producer = request.client_type == pb.PRODUCER
            if not producer and not group:
                return
            kind = ClientKind.PRODUCER if producer else ClientKind.CONSUMER
            protocol = ClientProtocol.GRPC if producer else ClientProtocol.GRPC_POP
            topics: tuple[str, ...] = ()
        else:
            if not group:
                return
            kind = ClientKind.CONSUMER
            protocol = ClientProtocol.GRPC_POP if method in _POP else ClientProtocol.GRPC_PULL
            topics = (_topic(request),)
        self._registry.saw(
            ClientSeen.first(
                client_id,
                protocol,
                kind,
                "" if kind is ClientKind.PRODUCER else group,
                address,
                self._clock(),
                topics,
                metadata.get(LANGUAGE_HEADER, ""),
                metadata.get(VERSION_HEADER, ""),
            )
        )

    def _seen(self, method: str, request: Any, context) -> None:
        self.record(method, request, call_headers(context), context.peer() or "")

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        method = method_of(handler_call_details.method)
        if handler is None or method not in _WATCHED:
            return handler
        if handler.unary_unary is not None and inspect.iscoroutinefunction(handler.unary_unary):
            inner_uu = handler.unary_unary

            async def unary_unary(request, context):
                self._seen(method, request, context)
                return await inner_uu(request, context)

            return grpc.unary_unary_rpc_method_handler(
                unary_unary, handler.request_deserializer, handler.response_serializer
            )
        if handler.unary_stream is not None and inspect.isasyncgenfunction(handler.unary_stream):
            inner_us = handler.unary_stream

            async def unary_stream(request, context):
                self._seen(method, request, context)
                async for response in inner_us(request, context):
                    yield response

            return grpc.unary_stream_rpc_method_handler(
                unary_stream, handler.request_deserializer, handler.response_serializer
            )
        return handler
