"""`MalformedRequestGuard`: a grpc.aio server interceptor answering a request whose bytes do not
decode INVALID_ARGUMENT (grpc.aio itself answers UNKNOWN, "Unexpected DecodeError"), so a hostile
client gets a clear error and the servicer never sees it. Stateless, thread-safe.

In a request stream, a message that does not decode raises `MalformedRequest` where the servicer
reads it; the guard answers the status once the servicer's handler has ended (with the exception).
It never aborts from the reading side: a servicer may read on a task of its own (Telemetry does)
while its handler is sending, and grpc refuses a status while a message is in flight
(GRPC_CALL_ERROR_TOO_MANY_OPERATIONS), which left such calls without a status until their deadline.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import grpc


# -- undecodable requests ---------------------------------------------------------------------


class _Malformed:
    """Stands for a request message that did not decode."""

    __slots__ = ("error",)

    def __init__(self, error: str) -> None:
        self.error = error


def _safe_decoder(decode: Callable[[bytes], object]) -> Callable[[bytes], object]:
    def decoder(data: bytes) -> object:
        try:
            return decode(data)
        except Exception as exc:  # DecodeError, or whatever a hostile payload provokes
            return _Malformed(f"{type(exc).__name__}: {exc}")

    return decoder


class MalformedRequest(Exception):
    """A message of a request stream did not decode; raised where the servicer reads it. A
    servicer that catches exceptions of its own lets this one through: the guard answers it."""


async def _refuse_malformed(context, error: str) -> None:
    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"malformed request: {error}")


async def _checked(requests):
    async for item in requests:
        if isinstance(item, _Malformed):
            raise MalformedRequest(item.error)
        yield item


def _guard_handler(handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    serializer = handler.response_serializer
    decoder = _safe_decoder(handler.request_deserializer)

    if handler.unary_unary is not None and inspect.iscoroutinefunction(handler.unary_unary):
        inner_uu = handler.unary_unary

        async def unary_unary(request, context):
            if isinstance(request, _Malformed):
                await _refuse_malformed(context, request.error)
            return await inner_uu(request, context)

        return grpc.unary_unary_rpc_method_handler(unary_unary, decoder, serializer)
    if handler.unary_stream is not None and inspect.isasyncgenfunction(handler.unary_stream):
        inner_us = handler.unary_stream

        async def unary_stream(request, context):
            if isinstance(request, _Malformed):
                await _refuse_malformed(context, request.error)
            async for response in inner_us(request, context):
                yield response

        return grpc.unary_stream_rpc_method_handler(unary_stream, decoder, serializer)
    if handler.stream_stream is not None and inspect.isasyncgenfunction(handler.stream_stream):
        inner_ss = handler.stream_stream

        async def stream_stream(requests, context):
            try:
                async for response in inner_ss(_checked(requests), context):
                    yield response
            except MalformedRequest as exc:
                # Here, between two sends of the handler: no message is in flight.
                await _refuse_malformed(context, str(exc))

        return grpc.stream_stream_rpc_method_handler(stream_stream, decoder, serializer)
    if handler.stream_unary is not None and inspect.iscoroutinefunction(handler.stream_unary):
        inner_su = handler.stream_unary

        async def stream_unary(requests, context):
            try:
                return await inner_su(_checked(requests), context)
            except MalformedRequest as exc:
                await _refuse_malformed(context, str(exc))

        return grpc.stream_unary_rpc_method_handler(stream_unary, decoder, serializer)
    return handler


class MalformedRequestGuard(grpc.aio.ServerInterceptor):
    """Answers a request that does not decode INVALID_ARGUMENT (grpc.aio's own answer is UNKNOWN,
    "Unexpected DecodeError"). Wraps async handlers of every method; others pass unchanged."""

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if handler is None or handler.request_deserializer is None:
            return handler
        return _guard_handler(handler)
