"""Guards of gRPC servers against requests whose bytes do not decode: the request is answered
INVALID_ARGUMENT ("malformed request: ...") and the servicer never sees it. Without a guard grpc.aio
answers UNKNOWN ("Unexpected DecodeError"), and a threaded `grpc.server` answers INTERNAL and logs
an ERROR with a traceback for every such request ("Exception deserializing request!"): thousands
a second from a client without credentials on the replication port (issue 30). With one, a
refusal costs at most one log line per peer host per 10 s (`log_limit.LogLimiter`; the refusals
in between are counted into it).

`MalformedRequestGuard` is the interceptor of a grpc.aio server (the client and admin APIs),
`ThreadedMalformedRequestGuard` of a threaded one (replication); both wrap each method's handler
the same way (`_Guard`): the request deserializer never raises but hands over a stand-in, which
the wrapped behaviour refuses before calling the servicer's.

In a request stream, a message that does not decode raises `MalformedRequest` where the servicer
reads it; the guard answers the status once the servicer's handler has ended (with the exception).
It never aborts from the reading side: a servicer may read on a task or thread of its own
(Telemetry and Replicate do) while its handler is sending, and grpc refuses a status while a
message is in flight (GRPC_CALL_ERROR_TOO_MANY_OPERATIONS), which left such calls without a status
until their deadline. A servicer that reads on a thread of its own ends its call itself on a
`MalformedRequest` (Replicate closes the stream INVALID_ARGUMENT).

A method's wrapped handler is made once and reused while the inner handler is the same object (a
servicer's handlers are made once, when it is added to the server): a call costs a dict lookup, not
closures and a handler tuple.

Thread-safety: the guards may serve any number of calls at once; their state is the limiter, which
locks, and the wrapped handlers by method (a dict; a race makes a handler twice, both right).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable

import grpc

from .log_limit import LogLimiter, peer_host

log = logging.getLogger(__name__)


class Malformed:
    """Stands for a request message that did not decode."""

    __slots__ = ("error",)

    def __init__(self, error: str) -> None:
        self.error = error


def safe_decoder(decode: Callable[[bytes], object]) -> Callable[[bytes], object]:
    def decoder(data: bytes) -> object:
        try:
            return decode(data)
        except Exception as exc:  # DecodeError, or whatever a hostile payload provokes
            return Malformed(f"{type(exc).__name__}: {exc}")

    return decoder


class MalformedRequest(Exception):
    """A message of a request stream did not decode; raised where the servicer reads it. A
    servicer that catches exceptions of its own lets this one through: the guard answers it."""


async def _checked_async(requests):
    async for item in requests:
        if isinstance(item, Malformed):
            raise MalformedRequest(item.error)
        yield item


def _checked(requests):
    for item in requests:
        if isinstance(item, Malformed):
            raise MalformedRequest(item.error)
        yield item


class _Guard:
    """What both flavours share: the handler wrapping and the refusals' log."""

    def __init__(self) -> None:
        self._refusals = LogLimiter(log)
        # method -> (the inner handler, its wrapping); only methods a handler serves get here.
        self._wrapped: dict[tuple[str, bool], tuple[object, object]] = {}

    def _refusal(self, context, method: str, error: str) -> str:
        """The status details of a refusal, logged (rate-limited per peer host)."""
        peer = context.peer() or "?"
        self._refusals.log(peer_host(peer), "malformed request to %s from %s: %s", method, peer, error)
        return f"malformed request: {error}"

    def wrap(self, handler, method: str, *, aio: bool):
        if handler is None or handler.request_deserializer is None:
            return handler
        known = self._wrapped.get((method, aio))
        if known is not None and known[0] is handler:
            return known[1]
        wrap = self._wrap_async if aio else self._wrap_threaded
        wrapped = wrap(handler, method, safe_decoder(handler.request_deserializer), handler.response_serializer)
        self._wrapped[(method, aio)] = (handler, wrapped)
        return wrapped

    def _wrap_async(self, handler, method: str, decoder, serializer):
        refusal = self._refusal
        bad = grpc.StatusCode.INVALID_ARGUMENT
        if handler.unary_unary is not None and inspect.iscoroutinefunction(handler.unary_unary):
            inner_uu = handler.unary_unary

            async def unary_unary(request, context):
                if isinstance(request, Malformed):
                    await context.abort(bad, refusal(context, method, request.error))
                return await inner_uu(request, context)

            return grpc.unary_unary_rpc_method_handler(unary_unary, decoder, serializer)
        if handler.unary_stream is not None and inspect.isasyncgenfunction(handler.unary_stream):
            inner_us = handler.unary_stream

            async def unary_stream(request, context):
                if isinstance(request, Malformed):
                    await context.abort(bad, refusal(context, method, request.error))
                async for response in inner_us(request, context):
                    yield response

            return grpc.unary_stream_rpc_method_handler(unary_stream, decoder, serializer)
        if handler.stream_stream is not None and inspect.isasyncgenfunction(handler.stream_stream):
            inner_ss = handler.stream_stream

            async def stream_stream(requests, context):
                try:
                    async for response in inner_ss(_checked_async(requests), context):
                        yield response
                except MalformedRequest as exc:
                    # Here, between two sends of the handler: no message is in flight.
                    await context.abort(bad, refusal(context, method, str(exc)))

            return grpc.stream_stream_rpc_method_handler(stream_stream, decoder, serializer)
        if handler.stream_unary is not None and inspect.iscoroutinefunction(handler.stream_unary):
            inner_su = handler.stream_unary

            async def stream_unary(requests, context):
                try:
                    return await inner_su(_checked_async(requests), context)
                except MalformedRequest as exc:
                    await context.abort(bad, refusal(context, method, str(exc)))

            return grpc.stream_unary_rpc_method_handler(stream_unary, decoder, serializer)
        return handler

    def _wrap_threaded(self, handler, method: str, decoder, serializer):
        refusal = self._refusal
        bad = grpc.StatusCode.INVALID_ARGUMENT
        if handler.unary_unary is not None:
            inner_uu = handler.unary_unary

            def unary_unary(request, context):
                if isinstance(request, Malformed):
                    context.abort(bad, refusal(context, method, request.error))
                return inner_uu(request, context)

            return grpc.unary_unary_rpc_method_handler(unary_unary, decoder, serializer)
        if handler.unary_stream is not None:
            inner_us = handler.unary_stream

            def unary_stream(request, context):
                if isinstance(request, Malformed):
                    context.abort(bad, refusal(context, method, request.error))
                yield from inner_us(request, context)

            return grpc.unary_stream_rpc_method_handler(unary_stream, decoder, serializer)
        if handler.stream_stream is not None:
            inner_ss = handler.stream_stream

            def stream_stream(requests, context):
                try:
                    yield from inner_ss(_checked(requests), context)
                except MalformedRequest as exc:
                    context.abort(bad, refusal(context, method, str(exc)))

            return grpc.stream_stream_rpc_method_handler(stream_stream, decoder, serializer)
        inner_su = handler.stream_unary

        def stream_unary(requests, context):
            try:
                return inner_su(_checked(requests), context)
            except MalformedRequest as exc:
                context.abort(bad, refusal(context, method, str(exc)))

        return grpc.stream_unary_rpc_method_handler(stream_unary, decoder, serializer)


class MalformedRequestGuard(grpc.aio.ServerInterceptor):
    """Answers a request that does not decode INVALID_ARGUMENT, on a grpc.aio server. Wraps the
    async handlers of every method; others pass unchanged."""

    def __init__(self) -> None:
        self._guard = _Guard()

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        return self._guard.wrap(handler, handler_call_details.method, aio=True)


class ThreadedMalformedRequestGuard(grpc.ServerInterceptor):
    """`MalformedRequestGuard` for a threaded `grpc.server`."""

    def __init__(self) -> None:
        self._guard = _Guard()

    def intercept_service(self, continuation, handler_call_details):
        return self._guard.wrap(continuation(handler_call_details), handler_call_details.method, aio=False)
