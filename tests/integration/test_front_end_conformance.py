"""One broker core behind both client APIs (issue 31): the same scenarios driven through the gRPC
client API and the remoting API of one real master and its slave give the same outcome. A
success is the same decision (stored where both say, readable through the other API; a long poll
woken by the same send); a refusal is the core's one refusal, so both carry the same text, each
under its own API's code for it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import grpc
import pytest
from google.protobuf import duration_pb2

from client import AdminClient
from client.errors import BrokerError
from client.remoting import AsyncRemotingProducer, RemotingConnection, code_name
from remoting_support import pull as remoting_pull
from wire.remoting import RequestCode, decode_stored_records
from wire.rpc import messaging_pb2 as pb
from wire.rpc import messaging_pb2_grpc

MAX_BODY = 64 * 1024


@pytest.fixture
def group(make_cluster):
    # Proxy mode off: a slave's gRPC API would relay what the remoting API refuses (it has no
    # relay), and these scenarios compare the core's refusals through both.
    settings = {"remotingListenPort": "0", "maxMessageSize": str(MAX_BODY), "proxyModeEnable": "false"}
    return make_cluster(master_role="SYNC_MASTER", flush_disk_type="SYNC_FLUSH", settings=settings)


@dataclass(frozen=True)
class Answer:
    """One API's answer, in its own code names."""

    code: str
    text: str = ""
    offsets: tuple[int, ...] = ()  # queue offsets of what a send stored
    bodies: tuple[bytes, ...] = ()  # what a pull read
    next_offset: int = -1


class Grpc:
    """The gRPC client API, straight on the wire."""

    def __init__(self, endpoint: str) -> None:
        self._channel = grpc.aio.insecure_channel(endpoint)
        self._stub = messaging_pb2_grpc.MessagingServiceStub(self._channel)

    async def close(self) -> None:
        await self._channel.close()

    async def send(self, topic: str, *bodies: bytes, queue_id: int = 0) -> Answer:
        messages = [
            pb.Message(
                topic=pb.Resource(name=topic), body=b, system_properties=pb.SystemProperties(send_queue_id=queue_id)
            )
            for b in bodies
        ]
        response = await self._stub.SendMessage(pb.SendMessageRequest(messages=messages), timeout=30)
        entry = response.entries[0]
        code = pb.Code.Name(entry.status.code)
        return Answer(code, entry.status.message if code != "OK" else "", tuple(e.offset for e in response.entries))

    async def pull(self, topic: str, offset: int, wait_ms: int = 0) -> Answer:
        request = pb.PullMessageRequest(
            group=pb.Resource(name="conformance"),
            message_queue=pb.MessageQueue(topic=pb.Resource(name=topic), id=0),
            offset=offset,
            batch_size=32,
            long_polling_timeout=duration_pb2.Duration(seconds=wait_ms // 1000, nanos=wait_ms % 1000 * 1_000_000),
        )
        code, text, bodies, next_offset = "", "", [], -1
        async for response in self._stub.PullMessage(request, timeout=60):
            kind = response.WhichOneof("content")
            if kind == "status":
                code, text = pb.Code.Name(response.status.code), response.status.message
            elif kind == "message":
                bodies.append(response.message.body)
            else:
                next_offset = response.next_offset
        return Answer(code, text, bodies=tuple(bodies), next_offset=next_offset)

    async def consumer_offset(self, topic: str) -> Answer:
        queue = pb.MessageQueue(topic=pb.Resource(name=topic), id=0)
        request = pb.GetOffsetRequest(group=pb.Resource(name="conformance"), message_queue=queue)
        return _status((await self._stub.GetOffset(request, timeout=10)).status)

    async def max_offset(self, topic: str) -> Answer:
        queue = pb.MessageQueue(topic=pb.Resource(name=topic), id=0)
        request = pb.QueryOffsetRequest(message_queue=queue, query_offset_policy=pb.END)
        return _status((await self._stub.QueryOffset(request, timeout=10)).status)

    async def commit(self, topic: str, offset: int) -> Answer:
        queue = pb.MessageQueue(topic=pb.Resource(name=topic), id=0)
        request = pb.UpdateOffsetRequest(group=pb.Resource(name="conformance"), message_queue=queue, offset=offset)
        return _status((await self._stub.UpdateOffset(request, timeout=10)).status)


def _status(status: pb.Status) -> Answer:
    code = pb.Code.Name(status.code)
    return Answer(code, status.message if code != "OK" else "")


class Remoting:
    """The remoting API: sends through our 4.x-style producer, the rest straight on the wire."""

    def __init__(self, endpoint: str, producer: AsyncRemotingProducer, conn: RemotingConnection) -> None:
        self._producer = producer
        self._conn = conn

    @classmethod
    async def open(cls, endpoint: str) -> Remoting:
        return cls(endpoint, AsyncRemotingProducer(endpoint), await RemotingConnection.open(endpoint))

    async def close(self) -> None:
        await self._producer.close()
        self._conn.close()

    async def send(self, topic: str, *bodies: bytes, queue_id: int = 0) -> Answer:
        try:
            if len(bodies) == 1:
                sent = [await self._producer.send(topic, bodies[0], queue_id=queue_id)]
            else:
                sent = await self._producer.send_batch(topic, list(bodies), queue_id=queue_id)
        except BrokerError as exc:
            return Answer(exc.code_name, exc.message)
        return Answer("SUCCESS", "", tuple(r.queue_offset for r in sent))

    async def pull(self, topic: str, offset: int, wait_ms: int = 0) -> Answer:
        extra = {"sysFlag": "2", "suspendTimeoutMillis": str(wait_ms)} if wait_ms else {}
        answer = await remoting_pull(self._conn, topic, 0, offset, consumerGroup="conformance", **extra)
        bodies = tuple(r.body for r in decode_stored_records(answer.body))
        next_offset = int(answer.ext_fields.get("nextBeginOffset", "-1"))
        return Answer(code_name(answer.code), answer.remark or "", bodies=bodies, next_offset=next_offset)

    async def _ask(self, code: int, **fields: str) -> Answer:
        answer = await self._conn.request(code, fields)
        return Answer(code_name(answer.code), answer.remark or "")

    async def consumer_offset(self, topic: str) -> Answer:
        return await self._ask(RequestCode.QUERY_CONSUMER_OFFSET, consumerGroup="conformance", topic=topic, queueId="0")

    async def max_offset(self, topic: str) -> Answer:
        return await self._ask(RequestCode.GET_MAX_OFFSET, topic=topic, queueId="0")

    async def commit(self, topic: str, offset: int) -> Answer:
        fields = {"consumerGroup": "conformance", "topic": topic, "queueId": "0", "commitOffset": str(offset)}
        return await self._ask(RequestCode.UPDATE_CONSUMER_OFFSET, **fields)


async def both(broker) -> tuple[Grpc, Remoting]:
    return Grpc(broker.client_endpoint), await Remoting.open(broker.remoting_endpoint)


def same_refusal(grpc_answer: Answer, remoting_answer: Answer, codes: tuple[str, str], says: str) -> None:
    """Both refused with the core's one text, each under its own code."""
    assert (grpc_answer.code, remoting_answer.code) == codes, (grpc_answer, remoting_answer)
    assert grpc_answer.text == remoting_answer.text, (grpc_answer, remoting_answer)
    assert says in grpc_answer.text, grpc_answer


def test_sends_batches_pulls_and_long_polls_give_the_same_outcome_through_both_apis(group):
    async def scenario() -> None:
        g, r = await both(group.master)
        try:
            # A send: stored by either, one queue, consecutive offsets; a batch: one append each.
            sent = [await g.send("Same", b"g0"), await r.send("Same", b"r1")]
            assert [(a.code, a.offsets) for a in sent] == [("OK", (0,)), ("SUCCESS", (1,))]
            batches = [await g.send("Same", b"g2", b"g3", b"g4"), await r.send("Same", b"r5", b"r6", b"r7")]
            assert [(a.code, a.offsets) for a in batches] == [("OK", (2, 3, 4)), ("SUCCESS", (5, 6, 7))]
            # Each API reads what the other stored (a long poll waits for the dispatcher's last).
            stored = (b"g0", b"r1", b"g2", b"g3", b"g4", b"r5", b"r6", b"r7")
            await g.pull("Same", 7, wait_ms=20_000)
            read = [await g.pull("Same", 0), await r.pull("Same", 0)]
            assert [(a.code, a.bodies, a.next_offset) for a in read] == [("OK", stored, 8), ("SUCCESS", stored, 8)]
            # At the end: nothing new, the same offset; past it: an illegal offset, both sent back to the same one.
            at_end = [await g.pull("Same", 8), await r.pull("Same", 8)]
            assert [(a.code, a.next_offset) for a in at_end] == [("MESSAGE_NOT_FOUND", 8), ("PULL_NOT_FOUND", 8)]
            past = [await g.pull("Same", 50), await r.pull("Same", 50)]
            assert [a.code for a in past] == ["ILLEGAL_OFFSET", "PULL_OFFSET_MOVED"]
            assert past[0].next_offset == past[1].next_offset == 0
            # A long poll through each, woken by one send.
            polls = [asyncio.create_task(api.pull("Same", 8, wait_ms=30_000)) for api in (g, r)]
            done, _ = await asyncio.wait(polls, timeout=0.5)
            assert not done, "a pull at the end of a queue with a wait must wait"
            assert (await g.send("Same", b"woke")).code == "OK"
            woken = await asyncio.wait_for(asyncio.gather(*polls), 30)
            assert [(a.code, a.bodies) for a in woken] == [("OK", (b"woke",)), ("SUCCESS", (b"woke",))]
        finally:
            await asyncio.gather(g.close(), r.close())

    asyncio.run(scenario())


def test_refusals_are_the_cores_through_both_apis(group):
    master, slave = group.master, group.slave_brokers[0]

    async def scenario() -> None:
        g, r = await both(master)
        gs, rs = await both(slave)
        try:
            assert (await g.send("Known", b"x")).code == "OK"
            # Topics: a system topic, an illegal name.
            same_refusal(await g.send("SCHEDULE_TOPIC_XXXX", b"x"), await r.send("SCHEDULE_TOPIC_XXXX", b"x"),
                         ("ILLEGAL_TOPIC", "NO_PERMISSION"), "system topic")  # fmt: skip
            same_refusal(await g.send("bad topic!", b"x"), await r.send("bad topic!", b"x"),
                         ("ILLEGAL_TOPIC", "MESSAGE_ILLEGAL"), "bad topic!")  # fmt: skip
            # A body past maxMessageSize; a queue past the topic's.
            big = b"x" * (MAX_BODY + 1)
            same_refusal(await g.send("Known", big), await r.send("Known", big),
                         ("MESSAGE_BODY_TOO_LARGE", "MESSAGE_ILLEGAL"), "maxMessageSize")  # fmt: skip
            same_refusal(await g.send("Known", b"x", queue_id=9), await r.send("Known", b"x", queue_id=9),
                         ("BAD_REQUEST", "MESSAGE_ILLEGAL"), "out of range")  # fmt: skip
            # Reads and offsets of a topic that does not exist: refused, never created.
            same_refusal(await g.pull("Nowhere", 0), await r.pull("Nowhere", 0),
                         ("TOPIC_NOT_FOUND", "TOPIC_NOT_EXIST"), "does not exist")  # fmt: skip
            same_refusal(await g.consumer_offset("Nowhere"), await r.consumer_offset("Nowhere"),
                         ("TOPIC_NOT_FOUND", "TOPIC_NOT_EXIST"), "does not exist")  # fmt: skip
            same_refusal(await g.max_offset("Nowhere"), await r.max_offset("Nowhere"),
                         ("TOPIC_NOT_FOUND", "TOPIC_NOT_EXIST"), "does not exist")  # fmt: skip
            # A group with no offset: gRPC says so (our clients choose where to start); remoting
            # answers 0 while the queue still starts at 0, RocketMQ 4.x's rule for a new group
            # (one core decision, `OffsetService`, two documented encodings).
            no_offset = await g.consumer_offset("Known")
            assert (no_offset.code, "no offset" in no_offset.text) == ("OFFSET_NOT_FOUND", True), no_offset
            assert (await r.consumer_offset("Known")).code == "SUCCESS"
            # The slave: no sends, no offset commits; both name the master.
            same_refusal(await gs.send("Known", b"x"), await rs.send("Known", b"x"),
                         ("FORBIDDEN", "SERVICE_NOT_AVAILABLE"), master.client_endpoint)  # fmt: skip
            same_refusal(await gs.commit("Known", 1), await rs.commit("Known", 1),
                         ("FORBIDDEN", "SERVICE_NOT_AVAILABLE"), "committed on the master")  # fmt: skip
            with AdminClient(master.client_endpoint, group.admin_secret(), timeout_s=10) as admin:
                # Auto-creation off: a new topic is not found.
                admin.set_broker_config({"autoCreateTopicEnable": "false"})
                same_refusal(await g.send("Fresh", b"x"), await r.send("Fresh", b"x"),
                             ("TOPIC_NOT_FOUND", "TOPIC_NOT_EXIST"), "autoCreateTopicEnable")  # fmt: skip
                # A drained master: nothing written.
                admin.set_broker_config({"autoCreateTopicEnable": "true", "brokerPermission": "4"})
                same_refusal(await g.send("Known", b"x"), await r.send("Known", b"x"),
                             ("FORBIDDEN", "NO_PERMISSION"), "drained")  # fmt: skip
                admin.set_broker_config({"brokerPermission": "6"})
            assert [(await api.send("Known", b"after")).code for api in (g, r)] == ["OK", "SUCCESS"]
            assert (await g.max_offset("Fresh")).code == "TOPIC_NOT_FOUND"  # nothing was created
        finally:
            await asyncio.gather(g.close(), r.close(), gs.close(), rs.close())

    asyncio.run(scenario())
