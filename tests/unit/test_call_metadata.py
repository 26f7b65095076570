"""A client API call's metadata is parsed once and shared by its readers (issue 33): the ACL
guard, the client sightings and the servicer's own checks read the same dict, and no call ever
reads another's."""

from __future__ import annotations

import asyncio

import grpc

from rocketstore.broker.acl import AclConfig, AclGuard
from rocketstore.broker.call_metadata import call_headers
from rocketstore.broker.client_registry import ClientLimits, ClientRegistry
from rocketstore.broker.client_sightings import ClientSightings, client_id_of
from rocketstore.broker.namespaces import namespace_refusal
from wire import client_signature
from wire.rpc import messaging_pb2 as pb

SERVICE = "/apache.rocketmq.v2.MessagingService/"
ACL = AclConfig.from_document({"accounts": [{"accessKey": "app", "secretKey": "app-secret-key"}]}, "test")


class CountingContext:
    """The parts of a grpc.aio ServicerContext the readers use; counts metadata reads."""

    def __init__(self, metadata: tuple[tuple[str, str | bytes], ...], peer: str = "ipv4:10.0.0.9:5000") -> None:
        self._metadata = metadata
        self._peer = peer
        self.reads = 0

    def invocation_metadata(self):
        self.reads += 1
        return self._metadata

    def peer(self) -> str:
        return self._peer


class Details:
    def __init__(self, method: str, metadata) -> None:
        self.method = method
        self.invocation_metadata = metadata


def test_the_first_ask_parses_and_later_asks_of_the_same_call_share_the_result():
    async def call() -> None:
        context = CountingContext((("x-mq-client-id", "app@1"), ("trace-bin", b"\x00\x01")))
        first = call_headers(context)
        assert first == {"x-mq-client-id": "app@1"}  # binary values are not text headers
        assert call_headers(context) is first and call_headers(context) is first
        assert context.reads == 1

    asyncio.run(call())


def test_a_task_serving_calls_in_turn_never_reads_the_previous_calls_headers():
    async def calls() -> None:
        one = CountingContext((("x-mq-client-id", "one"),))
        two = CountingContext((("x-mq-client-id", "two"),))
        assert call_headers(one)["x-mq-client-id"] == "one"
        assert call_headers(two)["x-mq-client-id"] == "two"
        assert call_headers(one)["x-mq-client-id"] == "one"  # parsed again: the task moved on
        assert (one.reads, two.reads) == (2, 1)

    asyncio.run(calls())


def test_concurrent_calls_each_see_their_own_headers():
    async def serve(name: str, seen: list[str], all_parsed: asyncio.Barrier) -> None:
        context = CountingContext((("x-mq-client-id", name),))
        call_headers(context)
        await all_parsed.wait()  # every other call has parsed its own headers in between
        seen.append(call_headers(context)["x-mq-client-id"])
        assert context.reads == 1

    async def both() -> list[str]:
        seen: list[str] = []
        names = ("a", "b", "c")
        all_parsed = asyncio.Barrier(len(names))
        await asyncio.gather(*(serve(name, seen, all_parsed) for name in names))
        return seen

    assert sorted(asyncio.run(both())) == ["a", "b", "c"]


def test_the_acl_guard_the_sightings_and_the_servicer_read_one_parse_per_call():
    """The interceptor chain as the broker builds it (ACL guard, then client sightings) in front
    of a handler doing what the servicer does with the headers (namespace check, client id)."""
    registry = ClientRegistry(ClientLimits())
    seen_by_handler: list[tuple[object, str]] = []

    async def heartbeat(request, context):
        headers = call_headers(context)
        seen_by_handler.append((namespace_refusal(headers, request), client_id_of(headers, context.peer())))
        return pb.HeartbeatResponse(status=pb.Status(code=pb.OK))

    async def chain(metadata) -> tuple[pb.HeartbeatResponse, CountingContext]:
        details = Details(SERVICE + "Heartbeat", metadata)
        servicer = grpc.unary_unary_rpc_method_handler(heartbeat)

        async def to_servicer(_details):
            return servicer

        async def to_sightings(_details):
            return await ClientSightings(registry, clock_ms=lambda: 1000).intercept_service(to_servicer, _details)

        handler = await AclGuard(ACL).intercept_service(to_sightings, details)
        context = CountingContext(metadata)
        request = pb.HeartbeatRequest(client_type=pb.PRODUCER)
        return await handler.unary_unary(request, context), context

    signed = (*client_signature.metadata("app", "app-secret-key"), ("x-mq-client-id", "app@1"))
    response, context = asyncio.run(chain(signed))
    assert response.status.code == pb.OK
    assert seen_by_handler == [(None, "app@1")]
    assert [c.client_id for c in registry.clients(1000)] == ["app@1"]  # the sightings read it too
    assert context.reads == 1

    unsigned = (("x-mq-client-id", "app@2"),)
    response, context = asyncio.run(chain(unsigned))
    assert response.status.code == pb.UNAUTHORIZED and context.reads == 1
    assert len(seen_by_handler) == 1  # refused before the handler
