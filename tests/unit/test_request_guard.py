"""`wire.request_guard`'s wrapping of a grpc.aio server's handlers, without a server: a wrapped
handler refuses a request that did not decode and hands any other to the servicer's, and a
method's wrapping is made once per inner handler."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from wire.request_guard import MalformedRequestGuard
from wire.rpc import messaging_pb2 as pb

METHOD = "/apache.rocketmq.v2.MessagingService/Heartbeat"


class _Details:
    method = METHOD
    invocation_metadata = ()


class _Aborted(Exception):
    pass


class _Context:
    def __init__(self) -> None:
        self.aborted: tuple[grpc.StatusCode, str] | None = None

    def peer(self) -> str:
        return "ipv4:127.0.0.1:5000"

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        self.aborted = (code, details)
        raise _Aborted


def _handler(answer: str) -> grpc.RpcMethodHandler:
    async def behaviour(request: pb.HeartbeatRequest, context) -> pb.HeartbeatResponse:
        return pb.HeartbeatResponse(status=pb.Status(code=pb.OK, message=answer))

    return grpc.unary_unary_rpc_method_handler(
        behaviour, pb.HeartbeatRequest.FromString, pb.HeartbeatResponse.SerializeToString
    )


def _intercept(guard: MalformedRequestGuard, handler: grpc.RpcMethodHandler):
    async def continuation(details):
        return handler

    return asyncio.run(guard.intercept_service(continuation, _Details()))


def _call(wrapped, raw: bytes) -> tuple[pb.HeartbeatResponse | None, _Context]:
    context = _Context()
    try:
        return asyncio.run(wrapped.unary_unary(wrapped.request_deserializer(raw), context)), context
    except _Aborted:
        return None, context


def test_a_methods_wrapping_is_made_once_per_inner_handler_and_follows_a_new_one():
    guard = MalformedRequestGuard()
    first = _handler("first")
    wrapped = _intercept(guard, first)
    assert _intercept(guard, first) is wrapped
    response, _ = _call(wrapped, pb.HeartbeatRequest().SerializeToString())
    assert response is not None and response.status.message == "first"

    # Another handler for the same method (a servicer added again): its own wrapping, not the kept one.
    replaced = _intercept(guard, _handler("second"))
    assert replaced is not wrapped
    response, _ = _call(replaced, pb.HeartbeatRequest().SerializeToString())
    assert response is not None and response.status.message == "second"


@pytest.mark.parametrize("calls", [1, 3])
def test_a_kept_wrapping_still_refuses_a_request_that_does_not_decode(calls):
    guard = MalformedRequestGuard()
    handler = _handler("served")
    for _ in range(calls):
        wrapped = _intercept(guard, handler)
    response, context = _call(wrapped, b"\xff\xff\xff")
    assert response is None
    assert context.aborted is not None
    code, details = context.aborted
    assert code is grpc.StatusCode.INVALID_ARGUMENT
    assert details.startswith("malformed request: ")
