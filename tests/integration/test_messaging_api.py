"""The client API servicer (rocketstore/broker/messaging.py) on a real grpc.aio server on
127.0.0.1, over a real MessageStore in the test's tmp dir, driven by grpc.aio clients."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import hashlib
import time
from dataclasses import dataclass, field

import grpc
from google.protobuf import duration_pb2

from ha.config import HaConfig
from ha.replica_tracker import SlaveSnapshot
from pop_support import received
from rocketstore.broker.config import BrokerConfig, BrokerConfigs
from rocketstore.broker.core.services import BrokerCore
from rocketstore.broker.messaging import MessagingServicer
from rocketstore.broker.view import StaticView
from store import BrokerRole, FlushDiskType, MessageStore, StoreConfig, TopicConfig, decode_msg_id
from store.log.codec import java_string_hash
from support import wait_for
from wire.request_guard import MalformedRequestGuard
from wire.rpc import messaging_pb2 as pb
from wire.rpc import messaging_pb2_grpc

TOPIC = "ApiTopic"
MAX_MESSAGE_SIZE = 16 * 1024


def store_config(root, **overrides) -> StoreConfig:
    settings = dict(
        store_path_root_dir=str(root),
        mapped_file_size_commit_log=64 * 1024,
        mapped_file_size_consume_queue=20480,
        max_hash_slot_num=512,
        max_index_num=2048,
        max_message_size=MAX_MESSAGE_SIZE,
        flush_disk_type=FlushDiskType.ASYNC_FLUSH,
    )
    settings.update(overrides)
    return StoreConfig(**settings)


@dataclass
class Harness:
    store: MessageStore
    stub: messaging_pb2_grpc.MessagingServiceStub
    channel: grpc.aio.Channel
    servicer: MessagingServicer
    view: StaticView
    endpoint: str
    extra: dict = field(default_factory=dict)


@contextlib.asynccontextmanager
async def serving(
    root,
    *,
    broker_id: int = 0,
    long_polling_max_ms: int = 30_000,
    view: StaticView | None = None,
    broker_settings: dict | None = None,
    **store_overrides,
):
    config = store_config(root, **store_overrides)
    store = MessageStore(config)
    store.load()
    store.start()
    broker = BrokerConfig(
        broker_name="broker-a",
        broker_id=broker_id,
        long_polling_max_ms=long_polling_max_ms,
        **(broker_settings or {}),
    )
    configs = BrokerConfigs(
        broker,
        config,
        HaConfig(),
    )
    server = grpc.aio.server(interceptors=[MalformedRequestGuard()])
    port = server.add_insecure_port("127.0.0.1:0")
    endpoint = f"127.0.0.1:{port}"
    if view is None:
        view = StaticView(broker_role=config.broker_role, client=endpoint)
    servicer = MessagingServicer(BrokerCore(store, configs, view))
    messaging_pb2_grpc.add_MessagingServiceServicer_to_server(servicer, server)
    store.add_arrival_listener(servicer.on_arrival)
    servicer.bind_loop(asyncio.get_running_loop())
    await server.start()
    channel = grpc.aio.insecure_channel(endpoint)
    try:
        yield Harness(store, messaging_pb2_grpc.MessagingServiceStub(channel), channel, servicer, view, endpoint)
    finally:
        await channel.close()
        await server.stop(0)
        await servicer.close()
        await asyncio.to_thread(store.shutdown)


def port_of(h: Harness) -> int:
    return int(h.endpoint.rsplit(":", 1)[1])


def run(coro) -> None:
    asyncio.run(asyncio.wait_for(coro, 120))


def message(body: bytes = b"body", topic: str = TOPIC, **system) -> pb.Message:
    return pb.Message(topic=pb.Resource(name=topic), body=body, system_properties=pb.SystemProperties(**system))


async def send(h: Harness, *messages: pb.Message) -> pb.SendMessageResponse:
    """Send, then wait until what was stored is readable (the store dispatches on its own thread)."""
    response = await h.stub.SendMessage(pb.SendMessageRequest(messages=messages), timeout=30)
    assert await asyncio.to_thread(h.store.wait_dispatched)
    return response


def pull_request(
    topic: str = TOPIC,
    queue_id: int = 0,
    offset: int = 0,
    *,
    group: str = "G",
    batch: int = 32,
    tags: str | None = None,
    long_poll_ms: int = 0,
) -> pb.PullMessageRequest:
    request = pb.PullMessageRequest(
        group=pb.Resource(name=group),
        message_queue=pb.MessageQueue(topic=pb.Resource(name=topic), id=queue_id),
        offset=offset,
        batch_size=batch,
        long_polling_timeout=duration_pb2.Duration(
            seconds=long_poll_ms // 1000, nanos=(long_poll_ms % 1000) * 1_000_000
        ),
    )
    if tags is not None:
        request.filter_expression.CopyFrom(pb.FilterExpression(type=pb.TAG, expression=tags))
    return request


@dataclass
class Pulled:
    status: pb.Status
    messages: list
    next_offset: int | None


async def pull(h: Harness, request: pb.PullMessageRequest, timeout: float = 30) -> Pulled:
    responses = [r async for r in h.stub.PullMessage(request, timeout=timeout)]
    kinds = [r.WhichOneof("content") for r in responses]
    assert kinds[0] == "status" and kinds.count("status") == 1, kinds
    assert kinds.count("next_offset") <= 1 and (kinds[-1] == "next_offset" or "next_offset" not in kinds), kinds
    return Pulled(
        responses[0].status,
        [r.message for r in responses if r.WhichOneof("content") == "message"],
        next((r.next_offset for r in responses if r.WhichOneof("content") == "next_offset"), None),
    )


# -- sends -----------------------------------------------------------------------------------------


def test_send_one_message_and_pull_it_back(tmp_path):
    async def body():
        async with serving(tmp_path) as h:
            sent = message(b"hello", tag="TagA", keys=["k1", "k2"], message_id="CLIENT-ID-1", send_queue_id=1)
            sent.user_properties["color"] = "blue"
            sent.system_properties.born_timestamp.FromMilliseconds(1_700_000_000_000)
            response = await send(h, sent)
            assert response.status.code == pb.OK, response
            (entry,) = response.entries
            assert (entry.status.code, entry.message_id, entry.queue_id, entry.offset) == (pb.OK, "CLIENT-ID-1", 1, 0)
            assert entry.commit_log_offset == 0

            got = await pull(h, pull_request(queue_id=1))
            assert got.status.code == pb.OK and got.next_offset == 1
            (m,) = got.messages
            sp = m.system_properties
            assert (m.topic.name, m.body, dict(m.user_properties)) == (TOPIC, b"hello", {"color": "blue"})
            assert (sp.tag, list(sp.keys), sp.message_id) == ("TagA", ["k1", "k2"], "CLIENT-ID-1")
            assert (sp.body_digest.type, sp.body_digest.checksum) == (pb.MD5, hashlib.md5(b"hello").hexdigest().upper())
            assert (sp.body_encoding, sp.message_type) == (pb.IDENTITY, pb.NORMAL)
            assert (sp.queue_id, sp.queue_offset, sp.delivery_attempt, sp.commit_log_offset) == (1, 0, 1, 0)
            assert sp.born_timestamp.ToMilliseconds() == 1_700_000_000_000
            assert sp.born_host.startswith("127.0.0.1:")
            assert sp.store_timestamp.ToMilliseconds() > 0 and sp.store_host

    run(body())


def test_several_messages_for_one_queue_are_one_batch(tmp_path):
    async def body():
        async with serving(tmp_path) as h:
            response = await send(h, *(message(f"m{i}".encode(), send_queue_id=2) for i in range(5)))
            assert response.status.code == pb.OK
            entries = list(response.entries)
            assert [e.offset for e in entries] == [0, 1, 2, 3, 4]
            assert {e.queue_id for e in entries} == {2}
            offsets = [e.commit_log_offset for e in entries]
            assert offsets == sorted(offsets) and offsets[0] == 0
            # Without a client id, the entry carries the store's msgId, which names the offset.
            for e in entries:
                assert decode_msg_id(e.message_id)[1] == e.commit_log_offset
            assert h.store.stats_snapshot().as_dict()  # the store is consistent after the batch
            got = await pull(h, pull_request(queue_id=2))
            assert [m.body for m in got.messages] == [f"m{i}".encode() for i in range(5)]
            assert [m.system_properties.commit_log_offset for m in got.messages] == offsets

    run(body())


def test_queue_choice_explicit_group_hash_and_round_robin(tmp_path):
    async def body():
        async with serving(tmp_path, default_topic_queue_nums=4) as h:
            explicit = await send(h, message(send_queue_id=3))
            assert explicit.entries[0].queue_id == 3
            grouped = await send(h, message(message_group="order-42"), message(message_group="order-42"))
            expected = abs(java_string_hash("order-42")) % 4
            assert [e.queue_id for e in grouped.entries] == [expected, expected]
            chosen = [(await send(h, message())).entries[0].queue_id for _ in range(8)]
            assert sorted(set(chosen)) == [0, 1, 2, 3]
            assert chosen[:4] == chosen[4:]
            before = h.store.max_offset
            out_of_range = await send(h, message(send_queue_id=4))
            assert out_of_range.status.code == pb.BAD_REQUEST and out_of_range.entries[0].status.code == pb.BAD_REQUEST
            assert h.store.max_offset == before

    run(body())


def test_mixed_request_answers_each_entry(tmp_path):
    async def body():
        async with serving(tmp_path) as h:
            response = await send(
                h, message(b"good", send_queue_id=0), message(b"bad", topic=""), message(b"", send_queue_id=0)
            )
            assert response.status.code == pb.MULTIPLE_RESULTS
            assert [e.status.code for e in response.entries] == [pb.OK, pb.ILLEGAL_TOPIC, pb.MESSAGE_BODY_EMPTY]
            got = await pull(h, pull_request())
            assert [m.body for m in got.messages] == [b"good"]

    run(body())


def test_stored_without_a_replica_carries_id_and_offsets(tmp_path):
    async def body():
        # A SYNC_MASTER without any slave: stored, the replica guarantee missing.
        async with serving(tmp_path, broker_role=BrokerRole.SYNC_MASTER) as h:
            response = await send(h, message(b"lonely", message_id="ID-L", send_queue_id=0))
            (entry,) = response.entries
            assert entry.status.code == pb.HA_NOT_AVAILABLE and "stored" in entry.status.message
            assert (entry.message_id, entry.offset, entry.commit_log_offset) == ("ID-L", 0, 0)
            assert response.status.code == pb.HA_NOT_AVAILABLE
            got = await pull(h, pull_request())
            assert [m.body for m in got.messages] == [b"lonely"]

    run(body())


# -- pulls -----------------------------------------------------------------------------------------


def test_long_poll_is_woken_by_a_send(tmp_path):
    async def body():
        async with serving(tmp_path, long_polling_max_ms=120_000) as h:
            await send(h, message(b"first", send_queue_id=0))
            waiting = asyncio.create_task(pull(h, pull_request(offset=1, long_poll_ms=120_000), timeout=150))
            await wait_for(lambda: h.servicer.waiting_pulls or waiting.done())
            await send(h, message(b"second", send_queue_id=0))
            # Well inside the 120 s long poll: only the arrival can have ended it.
            got = await asyncio.wait_for(waiting, 60)
            assert got.status.code == pb.OK
            assert [m.body for m in got.messages] == [b"second"] and got.next_offset == 2
            await wait_for(lambda: not h.servicer.waiting_pulls)

    run(body())


def _receive(h: Harness, group: str, wait_s: int, *, auto_renew: bool = False) -> pb.ReceiveMessageRequest:
    request = pb.ReceiveMessageRequest(
        group=pb.Resource(name=group), message_queue=pb.MessageQueue(topic=pb.Resource(name=TOPIC), id=-1)
    )
    request.batch_size = 1
    if auto_renew:
        request.auto_renew = True  # and no invisible time, as a PushConsumer asks
    else:
        request.invisible_duration.FromSeconds(60)
    request.long_polling_timeout.FromSeconds(wait_s)
    return request


async def _received(h: Harness, request: pb.ReceiveMessageRequest) -> tuple[int, list[pb.Message]]:
    return received([answer async for answer in h.stub.ReceiveMessage(request, timeout=120)])


def test_an_ack_wakes_a_receive_waiting_for_the_next_message_of_its_fifo_group(tmp_path):
    """Issue 32 item 2: a 30-message backlog in one message group drained in bursts, one per long
    poll, because the ack that lets the next message go out did not wake the waiting receive."""

    async def body():
        async with serving(
            tmp_path, long_polling_max_ms=120_000, broker_settings={"fifo_consumer_groups": "fifo"}
        ) as h:
            bodies = [f"m{i}".encode() for i in range(30)]
            sent = [message(b, send_queue_id=0, message_group="one-group") for b in bodies]
            assert (await send(h, *sent)).status.code == pb.OK
            code, (held,) = await _received(h, _receive(h, "fifo", 1))
            assert code == pb.OK
            delivered, expired = [held.body], 0
            while len(delivered) < len(bodies) and expired == 0:
                # The group's next message waits for this one's ack: the receive long-polls, and
                # only the ack can end it well inside its 30 s.
                waiting = asyncio.create_task(_received(h, _receive(h, "fifo", 30)))
                await wait_for(lambda: h.servicer.waiting_pulls or waiting.done())
                assert not waiting.done(), "a FIFO group's next message went out before the ack"
                entry = pb.AckMessageEntry(message_id="m", receipt_handle=held.system_properties.receipt_handle)
                request = pb.AckMessageRequest(group=pb.Resource(name="fifo"), topic=held.topic, entries=[entry])
                assert (await h.stub.AckMessage(request, timeout=30)).status.code == pb.OK
                code, got = await waiting
                if code != pb.OK:
                    expired += 1
                    continue
                (held,) = got
                delivered.append(held.body)
            assert expired == 0 and delivered == bodies

    run(body())


def test_auto_renewed_deliveries_stay_invisible_until_acked_or_their_client_goes_away(tmp_path):
    """Issue 32 item 1: a PushConsumer's auto-renew receive got a fixed invisible time. The broker
    renews it while its client is there: acked by the handle the client got, after renewals; shown
    again once the client's Telemetry stream ends."""
    # Renewed 1 s after each receive or renewal: 3 s of margin before the delivery would show.
    renew = {"default_invisible_time_ms": 4_000, "renew_slice_time_ms": 4_000, "renew_ahead_time_ms": 3_000}

    async def body():
        async with serving(tmp_path, long_polling_max_ms=120_000, broker_settings=renew) as h:
            client = (("x-mq-client-id", "push-client-1"),)
            telemetry = h.stub.Telemetry(timeout=120, metadata=client)
            await telemetry.write(pb.TelemetryCommand(settings=pb.Settings(client_type=pb.PUSH_CONSUMER)))
            assert (await telemetry.read()).status.code == pb.OK
            await send(h, message(b"kept", send_queue_id=0), message(b"left", send_queue_id=0))

            async def receive(wait_s: int) -> tuple[int, list[pb.Message]]:
                request = _receive(h, "renewed", wait_s, auto_renew=True)
                return received([a async for a in h.stub.ReceiveMessage(request, timeout=120, metadata=client)])

            code, [kept] = await receive(5)
            code, [left] = await receive(5)
            assert [kept.body, left.body] == [b"kept", b"left"]
            # Past two invisible times, renewed each time: nothing shows again.
            assert await receive(10) == (pb.MESSAGE_NOT_FOUND, [])
            entry = pb.AckMessageEntry(message_id="m", receipt_handle=kept.system_properties.receipt_handle)
            ack = pb.AckMessageRequest(group=pb.Resource(name="renewed"), topic=kept.topic, entries=[entry])
            assert (await h.stub.AckMessage(ack, timeout=30)).status.code == pb.OK  # the handle it got
            await telemetry.done_writing()  # the client goes away: "left" is not renewed any more
            code, again = await receive(30)
            assert [(m.body, m.system_properties.delivery_attempt) for m in again] == [(b"left", 2)]

    run(body())


def test_long_poll_on_an_empty_queue_ends_with_message_not_found(tmp_path):
    async def body():
        async with serving(tmp_path) as h:
            h.store.create_or_update_topic(TopicConfig(TOPIC, 2, 2))
            got = await pull(h, pull_request(long_poll_ms=200))
            assert (got.status.code, got.messages, got.next_offset) == (pb.MESSAGE_NOT_FOUND, [], 0)
            await send(h, message(send_queue_id=0))
            got = await pull(h, pull_request(offset=1, long_poll_ms=100))
            assert (got.status.code, got.next_offset) == (pb.MESSAGE_NOT_FOUND, 1)

    run(body())


def test_tag_filter(tmp_path):
    async def body():
        async with serving(tmp_path) as h:
            await send(h, *(message(f"{t}".encode(), tag=t, send_queue_id=0) for t in ("TagA", "TagB", "TagA")))
            a = await pull(h, pull_request(tags="TagA"))
            assert [m.body for m in a.messages] == [b"TagA", b"TagA"] and a.next_offset == 3
            both = await pull(h, pull_request(tags="TagA || TagB"))
            assert len(both.messages) == 3
            none = await pull(h, pull_request(tags="TagC"))
            assert (none.status.code, none.messages, none.next_offset) == (pb.OK, [], 3)
            everything = await pull(h, pull_request(tags="*", batch=2))
            assert len(everything.messages) == 2 and everything.next_offset == 2
            bad = await pull(h, pull_request(tags="||"))
            assert bad.status.code == pb.ILLEGAL_FILTER_EXPRESSION
            sql = pull_request()
            sql.filter_expression.CopyFrom(pb.FilterExpression(type=pb.SQL, expression="a > 1"))
            assert (await pull(h, sql)).status.code == pb.UNSUPPORTED

    run(body())


def test_illegal_offsets_and_bad_pulls(tmp_path):
    async def body():
        async with serving(tmp_path, auto_create_topic_enable=False) as h:
            h.store.create_or_update_topic(TopicConfig(TOPIC, 2, 2))
            await send(h, *(message(send_queue_id=0) for _ in range(3)))
            # RocketMQ's correction: back to the minimum when the queue still starts at 0.
            past = await pull(h, pull_request(offset=10))
            assert (past.status.code, past.next_offset) == (pb.ILLEGAL_OFFSET, 0)
            negative = await pull(h, pull_request(offset=-5))
            assert (negative.status.code, negative.next_offset) == (pb.ILLEGAL_OFFSET, 0)
            empty_queue_past_start = await pull(h, pull_request(queue_id=1, offset=4))
            assert (empty_queue_past_start.status.code, empty_queue_past_start.next_offset) == (pb.ILLEGAL_OFFSET, 0)
            assert (await pull(h, pull_request(topic="Nope"))).status.code == pb.TOPIC_NOT_FOUND
            assert (await pull(h, pull_request(topic="bad topic"))).status.code == pb.ILLEGAL_TOPIC
            assert (await pull(h, pull_request(queue_id=9))).status.code == pb.BAD_REQUEST
            assert (await pull(h, pull_request(queue_id=-1))).status.code == pb.BAD_REQUEST
            assert (await pull(h, pull_request(batch=0))).status.code == pb.BAD_REQUEST
            assert (await pull(h, pull_request(group="no spaces allowed"))).status.code == pb.ILLEGAL_CONSUMER_GROUP
            assert (await pull(h, pull_request(group=""))).status.code == pb.ILLEGAL_CONSUMER_GROUP
            huge = await pull(h, pull_request(batch=1_000_000))
            assert huge.status.code == pb.OK and len(huge.messages) == 3
            negative_poll = pull_request()
            negative_poll.long_polling_timeout.FromMilliseconds(-1000)
            assert (await pull(h, negative_poll)).status.code == pb.ILLEGAL_POLLING_TIME

    run(body())


def test_pulls_work_on_a_slave(tmp_path):
    async def body():
        async with serving(tmp_path / "master") as master:
            await send(master, *(message(f"r{i}".encode(), send_queue_id=0) for i in range(3)))
            data = master.store.commit_log_data(0, master.store.max_offset)
            async with serving(
                tmp_path / "slave",
                broker_id=1,
                broker_role=BrokerRole.SLAVE,
                view=StaticView(BrokerRole.SLAVE, client="127.0.0.1:1", master_client=master.endpoint),
            ) as slave:
                slave.view.client = slave.endpoint
                # An unknown topic is not found on a slave either: reads never create topics.
                unknown = await pull(slave, pull_request())
                assert unknown.status.code == pb.TOPIC_NOT_FOUND
                # The slave knows its master's topics from the metadata copy.
                slave.store.create_or_update_topic(master.store.topics.get(TOPIC))
                waiting = asyncio.create_task(pull(slave, pull_request(long_poll_ms=60_000), timeout=90))
                await wait_for(lambda: slave.servicer.waiting_pulls or waiting.done())
                slave.store.append_replicated(0, data)
                got = await asyncio.wait_for(waiting, 45)
                assert got.status.code == pb.OK
                # The first dispatched message wakes the pull; the rest may come with it or after.
                first = [m.body for m in got.messages]
                assert first and first == [b"r0", b"r1", b"r2"][: len(first)]
                assert await asyncio.to_thread(slave.store.wait_dispatched)
                rest = await pull(slave, pull_request(offset=got.next_offset))
                assert first + [m.body for m in rest.messages] == [b"r0", b"r1", b"r2"]
                ask = pb.QueryRouteRequest(topic=pb.Resource(name=TOPIC))
                replicas = pb.QueryRouteRequest(topic=pb.Resource(name=TOPIC), replicas=True)

                async def named(broker, request) -> set[tuple[int, int, int]]:
                    route = await broker.stub.QueryRoute(request, timeout=10)
                    assert route.status.code == pb.OK
                    return {
                        (q.broker.id, q.permission, q.broker.endpoints.addresses[0].port) for q in route.message_queues
                    }

                # RocketMQ 5's clients get its master alone, as id 0 (where they write and pop).
                assert await named(slave, ask) == {(0, pb.READ_WRITE, port_of(master))}
                # Asked for replicas (RocketStore's clients), itself for reads under its own id.
                by_id = {(0, pb.READ_WRITE, port_of(master)), (1, pb.READ, port_of(slave))}
                assert await named(slave, replicas) == by_id
                # The master names its connected slave the same way, as the other groups do.
                master.view.slaves = [SlaveSnapshot("ha", 1, slave.endpoint, 0, 0, 0.0, True, 0)]
                assert await named(master, replicas) == by_id
                assert await named(master, ask) == {(0, pb.READ_WRITE, port_of(master))}
                # Standing in for a master that is down: itself as id 0, read-only.
                slave.view.acting = True
                assert await named(slave, ask) == await named(slave, replicas) == {(0, pb.READ, port_of(slave))}

    run(body())


# -- offsets ---------------------------------------------------------------------------------------


def test_offsets_api(tmp_path):
    async def body():
        async with serving(tmp_path) as h:
            await send(h, *(message(send_queue_id=0) for _ in range(3)))
            queue = pb.MessageQueue(topic=pb.Resource(name=TOPIC), id=0)
            group = pb.Resource(name="G1")
            none = await h.stub.GetOffset(pb.GetOffsetRequest(group=group, message_queue=queue), timeout=10)
            assert none.status.code == pb.OFFSET_NOT_FOUND
            updated = await h.stub.UpdateOffset(
                pb.UpdateOffsetRequest(group=group, message_queue=queue, offset=2), timeout=10
            )
            assert updated.status.code == pb.OK
            got = await h.stub.GetOffset(pb.GetOffsetRequest(group=group, message_queue=queue), timeout=10)
            assert (got.status.code, got.offset) == (pb.OK, 2)
            negative = await h.stub.UpdateOffset(
                pb.UpdateOffsetRequest(group=group, message_queue=queue, offset=-1), timeout=10
            )
            assert negative.status.code == pb.ILLEGAL_OFFSET
            bad_group = await h.stub.GetOffset(
                pb.GetOffsetRequest(group=pb.Resource(name="a b"), message_queue=queue), timeout=10
            )
            assert bad_group.status.code == pb.ILLEGAL_CONSUMER_GROUP

            async def query(policy, **kw):
                return await h.stub.QueryOffset(
                    pb.QueryOffsetRequest(message_queue=queue, query_offset_policy=policy, **kw), timeout=10
                )

            assert (await query(pb.BEGINNING)).offset == 0
            assert (await query(pb.END)).offset == 3
            early = pb.QueryOffsetRequest(message_queue=queue, query_offset_policy=pb.TIMESTAMP)
            early.timestamp.FromMilliseconds(0)
            assert (await h.stub.QueryOffset(early, timeout=10)).offset == 0
            late = pb.QueryOffsetRequest(message_queue=queue, query_offset_policy=pb.TIMESTAMP)
            late.timestamp.FromMilliseconds(2**42)
            assert (await h.stub.QueryOffset(late, timeout=10)).offset == 3
            assert (await query(pb.TIMESTAMP)).status.code == pb.BAD_REQUEST
            unknown = pb.MessageQueue(topic=pb.Resource(name="Unknown"), id=0)
            missing = await h.stub.QueryOffset(pb.QueryOffsetRequest(message_queue=unknown), timeout=10)
            assert missing.status.code == pb.TOPIC_NOT_FOUND

    run(body())


# -- routes, telemetry, heartbeats -------------------------------------------------------------------


def test_query_route_shape(tmp_path):
    async def body():
        async with serving(tmp_path, default_topic_queue_nums=4) as h:
            request = pb.QueryRouteRequest(topic=pb.Resource(name="RouteTopic"))
            route = await h.stub.QueryRoute(request, timeout=10)
            assert route.status.code == pb.OK
            assert [q.id for q in route.message_queues] == [0, 1, 2, 3]
            host, port = h.endpoint.split(":")
            for q in route.message_queues:
                assert (q.topic.resource_namespace, q.topic.name) == ("", "RouteTopic")
                assert q.permission == pb.READ_WRITE
                assert (q.broker.name, q.broker.id) == ("broker-a", 0)
                assert q.broker.endpoints.scheme == pb.IPv4
                assert [(a.host, a.port) for a in q.broker.endpoints.addresses] == [(host, int(port))]
                assert pb.NORMAL in q.accept_message_types
            # A route is an answer, not a creation: the first send creates the topic.
            assert h.store.topics.get("RouteTopic") is None
            h.store.create_or_update_topic(TopicConfig("Uneven", 3, 2, perm=6))
            uneven = await h.stub.QueryRoute(pb.QueryRouteRequest(topic=pb.Resource(name="Uneven")), timeout=10)
            assert [q.permission for q in uneven.message_queues] == [pb.READ_WRITE, pb.READ_WRITE, pb.READ]
            bad = await h.stub.QueryRoute(pb.QueryRouteRequest(topic=pb.Resource(name="no/slash")), timeout=10)
            assert bad.status.code == pb.ILLEGAL_TOPIC

    run(body())


def test_every_call_naming_a_namespace_is_refused_naming_it_and_changes_nothing(tmp_path):
    """Issue 32 item 4: namespaces were echoed back but isolated nothing. A namespace, in the
    x-mq-namespace header or in a resource, is refused UNSUPPORTED on every call, naming it."""

    async def body():
        async with serving(tmp_path) as h:

            def topic(namespace: str = "tenant-a") -> pb.Resource:
                return pb.Resource(resource_namespace=namespace, name="NsTopic")

            group = pb.Resource(resource_namespace="tenant-a", name="ns-group")
            header = (("x-mq-namespace", "tenant-b"),)
            sent = pb.Message(topic=topic(), body=b"x", system_properties=pb.SystemProperties(message_id="id"))
            answers = [
                await h.stub.QueryRoute(pb.QueryRouteRequest(topic=topic()), timeout=10),
                await h.stub.SendMessage(pb.SendMessageRequest(messages=[sent]), timeout=10),
                await h.stub.Heartbeat(pb.HeartbeatRequest(group=group), timeout=10),
                await h.stub.QueryAssignment(pb.QueryAssignmentRequest(topic=topic(), group=group), timeout=10),
                await h.stub.AckMessage(
                    pb.AckMessageRequest(topic=topic(""), group=pb.Resource(name="g")), timeout=10, metadata=header
                ),
            ]
            receive = pb.ReceiveMessageRequest(group=group, message_queue=pb.MessageQueue(topic=topic()))
            answers += [r async for r in h.stub.ReceiveMessage(receive, timeout=10)]
            answers += [r async for r in h.stub.PullMessage(pull_request(topic="NsTopic"), timeout=10, metadata=header)]
            telemetry = h.stub.Telemetry(timeout=10, metadata=header)
            answers.append(await telemetry.read())
            telemetry.cancel()
            statuses = [a.status for a in answers]
            assert [s.code for s in statuses] == [pb.UNSUPPORTED] * len(statuses), statuses
            # The ack, the pull and Telemetry name theirs in the header, the others in a resource.
            named = ["tenant-a"] * 4 + ["tenant-b", "tenant-a", "tenant-b", "tenant-b"]
            assert all(f"namespace '{n}' is not supported" in s.message for n, s in zip(named, statuses)), statuses
            assert h.store.topics.get("NsTopic") is None  # the refused send created nothing
            # An empty namespace is no namespace.
            plain = await h.stub.QueryRoute(pb.QueryRouteRequest(topic=topic("")), timeout=10)
            assert plain.status.code == pb.OK

    run(body())


def test_query_route_without_auto_create(tmp_path):
    async def body():
        async with serving(tmp_path, auto_create_topic_enable=False) as h:
            route = await h.stub.QueryRoute(pb.QueryRouteRequest(topic=pb.Resource(name="Absent")), timeout=10)
            assert route.status.code == pb.TOPIC_NOT_FOUND and not route.message_queues
            sent = await send(h, message(topic="Absent"))
            assert sent.entries[0].status.code == pb.TOPIC_NOT_FOUND
            assert h.store.topics.get("Absent") is None

    run(body())


def test_telemetry_answers_settings_and_stays_open(tmp_path):
    async def body():
        async with serving(tmp_path) as h:
            call = h.stub.Telemetry(timeout=30)
            producer = pb.Settings(client_type=pb.PRODUCER, publishing=pb.Publishing(topics=[pb.Resource(name=TOPIC)]))
            await call.write(pb.TelemetryCommand(settings=producer))
            reply = await call.read()
            assert reply.status.code == pb.OK
            assert reply.settings.publishing.max_body_size == MAX_MESSAGE_SIZE
            assert reply.settings.client_type == pb.PRODUCER and not reply.settings.metric.on
            consumer = pb.Settings(
                client_type=pb.PUSH_CONSUMER, subscription=pb.Subscription(group=pb.Resource(name="G"))
            )
            await call.write(pb.TelemetryCommand(settings=consumer))
            reply = await call.read()
            assert reply.status.code == pb.OK
            assert reply.settings.subscription.long_polling_timeout.ToMilliseconds() == 20_000
            await call.done_writing()
            assert await call.read() is grpc.aio.EOF
            assert await call.code() == grpc.StatusCode.OK

    run(body())


def test_heartbeat_and_termination(tmp_path):
    async def body():
        async with serving(tmp_path) as h:
            beat = await h.stub.Heartbeat(pb.HeartbeatRequest(client_type=pb.PRODUCER), timeout=10)
            assert beat.status.code == pb.OK
            bad = await h.stub.Heartbeat(pb.HeartbeatRequest(group=pb.Resource(name="a b")), timeout=10)
            assert bad.status.code == pb.ILLEGAL_CONSUMER_GROUP
            bye = await h.stub.NotifyClientTermination(pb.NotifyClientTerminationRequest(), timeout=10)
            assert bye.status.code == pb.OK

    run(body())


# -- slaves and hostile input ----------------------------------------------------------------------


def test_a_slave_refuses_sends_naming_its_master(tmp_path):
    async def body():
        view = StaticView(BrokerRole.SLAVE, client="127.0.0.1:2", master_client="10.1.2.3:10911")
        async with serving(tmp_path, broker_id=1, broker_role=BrokerRole.SLAVE, view=view) as h:
            response = await send(h, message(b"a", message_id="X1"), message(b"b"))
            assert response.status.code == pb.FORBIDDEN
            assert response.status.master_endpoint == "10.1.2.3:10911"
            assert (
                "broker-a (id 1) is a SLAVE" in response.status.message and "10.1.2.3:10911" in response.status.message
            )
            assert [e.status.code for e in response.entries] == [pb.FORBIDDEN, pb.FORBIDDEN]
            assert response.entries[0].message_id == "X1"
            assert h.store.max_offset == 0

    run(body())


def test_hostile_requests_get_errors_and_serving_goes_on(tmp_path):
    async def body():
        async with serving(tmp_path) as h:
            assert (await send(h)).status.code == pb.BAD_REQUEST
            flood = await send(h, *(message(b"x") for _ in range(2000)))
            assert flood.status.code == pb.BAD_REQUEST
            names = ["", "has space", "x" * 300, "slash/y", "SCHEDULE_TOPIC_XXXX", "ünïcode"]
            response = await send(h, *(message(b"x", topic=n) for n in names))
            assert [e.status.code for e in response.entries] == [pb.ILLEGAL_TOPIC] * len(names)
            too_big = await send(h, message(b"x" * (MAX_MESSAGE_SIZE + 1)))
            assert too_big.entries[0].status.code == pb.MESSAGE_BODY_TOO_LARGE
            wrong_digest = message(b"x", body_digest=pb.Digest(type=pb.CRC32, checksum="00000000"))
            assert (await send(h, wrong_digest)).entries[0].status.code == pb.MESSAGE_CORRUPTED
            bad_key = message(b"x")
            bad_key.user_properties["UNIQ_KEY"] = "spoof"
            assert (await send(h, bad_key)).entries[0].status.code == pb.ILLEGAL_MESSAGE_PROPERTY_KEY
            # A transaction cannot also wait for a delivery time (RocketMQ refuses it too).
            transaction = message(b"x", message_type=pb.TRANSACTION)
            transaction.system_properties.delivery_timestamp.FromMilliseconds(time.time_ns() // 1_000_000 + 60_000)
            refused = (await send(h, transaction)).entries[0].status
            assert refused.code == pb.BAD_REQUEST and "delivery time" in refused.message
            assert h.store.max_offset == 0
            # Undecodable bytes never reach the servicer.
            garbage = bytes(range(256)) * 4
            for method, kind in (
                ("SendMessage", "unary_unary"),
                ("PullMessage", "unary_stream"),
                ("QueryRoute", "unary_unary"),
            ):
                raw = getattr(h.channel, kind)(f"/apache.rocketmq.v2.MessagingService/{method}")
                try:
                    call = raw(garbage, timeout=10)
                    if kind == "unary_stream":
                        _ = [r async for r in call]
                    else:
                        await call
                    raise AssertionError(f"{method} accepted garbage")
                except grpc.aio.AioRpcError as exc:
                    assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT, exc
                    assert "malformed request" in exc.details()
            telemetry = h.channel.stream_stream("/apache.rocketmq.v2.MessagingService/Telemetry")(timeout=10)
            await telemetry.write(garbage)
            try:
                await telemetry.read()
                raise AssertionError("Telemetry accepted garbage")
            except grpc.aio.AioRpcError as exc:
                assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT, exc
            ok = await send(h, message(b"fine", send_queue_id=0))
            assert ok.status.code == pb.OK
            got = await pull(h, pull_request())
            assert [m.body for m in got.messages] == [b"fine"]

    run(body())


def test_a_malformed_telemetry_command_ends_its_stream_with_a_status(tmp_path):
    """Issue 30: a command that did not decode, right behind one the broker was answering, left
    the stream without a status (GRPC_CALL_ERROR_TOO_MANY_OPERATIONS): the call ran to its
    deadline. Every such stream now ends INVALID_ARGUMENT at once."""

    async def body():
        async with serving(tmp_path) as h:
            settings = pb.Settings(client_type=pb.PRODUCER, publishing=pb.Publishing(topics=[pb.Resource(name=TOPIC)]))
            good = pb.TelemetryCommand(settings=settings).SerializeToString()
            telemetry = h.channel.stream_stream("/apache.rocketmq.v2.MessagingService/Telemetry")
            codes = []
            for i in range(60):
                call = telemetry(timeout=10)
                for _ in range(i % 4):
                    await call.write(good)
                await call.write(b"\xff\xff\xff")  # wire type 7: never a message
                with contextlib.suppress(grpc.aio.AioRpcError):
                    while await call.read() is not grpc.aio.EOF:
                        pass
                codes.append((await call.code(), await call.details()))
            assert all(code == grpc.StatusCode.INVALID_ARGUMENT for code, _ in codes), codes
            assert all("malformed request" in details for _, details in codes)
            # The broker goes on answering.
            call = h.stub.Telemetry(timeout=30)
            await call.write(pb.TelemetryCommand(settings=settings))
            assert (await call.read()).status.code == pb.OK
            await call.done_writing()

    run(body())


def test_delivery_time_delays_and_gzip_bodies_keep_their_encoding(tmp_path):
    async def body():
        async with serving(tmp_path) as h:
            delayed = message(b"later", send_queue_id=0, message_type=pb.DELAY)
            delayed.system_properties.delivery_timestamp.FromMilliseconds(time.time_ns() // 1_000_000 + 500)
            response = await send(h, delayed)
            assert response.status.code == pb.OK
            # Level 1 (1 s) covers 500 ms: the message appears once the schedule delivers it.
            got = await pull(h, pull_request(long_poll_ms=20_000))
            (m,) = got.messages
            assert (m.body, m.system_properties.message_type) == (b"later", pb.DELAY)
            assert "REAL_TOPIC" not in m.user_properties and "DELAY" not in m.user_properties

            packed = gzip.compress(b"zipped")
            response = await send(h, message(packed, send_queue_id=1, body_encoding=pb.GZIP))
            assert response.status.code == pb.OK
            (m,) = (await pull(h, pull_request(queue_id=1))).messages
            assert (m.body, m.system_properties.body_encoding) == (packed, pb.GZIP)

    run(body())


def test_long_poll_answers_before_the_client_deadline_and_cancels_cleanly(tmp_path):
    async def body():
        async with serving(tmp_path) as h:
            h.store.create_or_update_topic(TopicConfig(TOPIC, 1, 1))
            # A 60 s long poll inside a 3 s call: the broker answers before the call's deadline.
            got = await pull(h, pull_request(long_poll_ms=60_000), timeout=3)
            assert got.status.code == pb.MESSAGE_NOT_FOUND
            # A client that gives up leaves nothing registered behind.
            waiting = asyncio.create_task(pull(h, pull_request(long_poll_ms=60_000), timeout=90))
            await wait_for(lambda: h.servicer.waiting_pulls or waiting.done())
            waiting.cancel()
            await wait_for(lambda: not h.servicer.waiting_pulls)
            await send(h, message(b"after", send_queue_id=0))
            assert [m.body for m in (await pull(h, pull_request())).messages] == [b"after"]

    run(body())


def _allocated_bytes(root) -> int:
    from pathlib import Path

    return sum(p.stat().st_blocks * 512 for p in Path(root).rglob("*") if p.is_file())


def test_clients_flooding_new_topic_names_cannot_fill_the_disk(tmp_path):
    """Reads of unknown topics create nothing; sends create topics within the auto-creation rate
    and cap, each costing a reservation step of queue file, and the rest get a clear status."""

    async def body():
        async with serving(
            tmp_path / "b",
            auto_create_topic_per_minute=10,
            auto_create_topic_max_topics=200,
            mapped_file_size_consume_queue=6_000_000,
        ) as h:
            root = h.store.config.store_path_root_dir
            topics_before = len(h.store.topics.topics())
            disk_before = _allocated_bytes(root)
            for i in range(50):
                name = f"flood-read-{i}"
                route = await h.stub.QueryRoute(pb.QueryRouteRequest(topic=pb.Resource(name=name)), timeout=10)
                assert route.status.code == pb.OK  # a route to send to: the send decides
                assert (await pull(h, pull_request(topic=name))).status.code == pb.TOPIC_NOT_FOUND
                offset = await h.stub.GetOffset(
                    pb.GetOffsetRequest(
                        group=pb.Resource(name="G"), message_queue=pb.MessageQueue(topic=pb.Resource(name=name), id=0)
                    ),
                    timeout=10,
                )
                assert offset.status.code == pb.TOPIC_NOT_FOUND
            assert len(h.store.topics.topics()) == topics_before
            assert not (tmp_path / "b" / "consumequeue").exists() or not any(
                (tmp_path / "b" / "consumequeue").iterdir()
            )
            codes = []
            for i in range(50):
                response = await h.stub.SendMessage(
                    pb.SendMessageRequest(messages=[message(b"x", topic=f"flood-send-{i}", send_queue_id=0)]),
                    timeout=30,
                )
                codes.append(response.status.code)
            assert codes[:10] == [pb.OK] * 10
            assert set(codes[10:]) == {pb.TOO_MANY_REQUESTS}
            refused = await h.stub.SendMessage(
                pb.SendMessageRequest(messages=[message(b"x", topic="flood-send-more", send_queue_id=0)]), timeout=30
            )
            assert "autoCreateTopicPerMinute=10" in refused.status.message
            assert await asyncio.to_thread(h.store.wait_dispatched)
            assert len(h.store.topics.topics()) == topics_before + 10
            # Ten one-byte messages in ten new topics: a reservation step of queue file each (and
            # the CommitLog's own segment), not ten 6 MB queue files.
            grown = _allocated_bytes(root) - disk_before
            assert grown <= h.store.config.mapped_file_size_commit_log + 10 * 2 * 64 * 1024 + 1024 * 1024

    run(body())


def test_auto_creation_stops_at_its_topic_cap_with_a_clear_status(tmp_path):
    async def body():
        async with serving(tmp_path / "b", auto_create_topic_max_topics=0) as h:
            response = await h.stub.SendMessage(
                pb.SendMessageRequest(messages=[message(b"x", topic="OneTooMany", send_queue_id=0)]), timeout=30
            )
            assert response.status.code == pb.TOPIC_NOT_FOUND
            assert "autoCreateTopicMaxTopics=0" in response.status.message
            h.store.create_or_update_topic(TopicConfig("OneTooMany", 4, 4))  # an operator still can
            response = await h.stub.SendMessage(
                pb.SendMessageRequest(messages=[message(b"x", topic="OneTooMany", send_queue_id=0)]), timeout=30
            )
            assert response.status.code == pb.OK

    run(body())


def test_a_resent_message_id_is_stored_once(tmp_path):
    async def body():
        async with serving(tmp_path / "b") as h:
            resent = message(b"once", send_queue_id=0, message_id="01A2B3C4D5E6F708090A0B0C0D")
            first = await send(h, resent)
            again = await send(h, resent)
            assert first.status.code == again.status.code == pb.OK
            assert first.entries[0].message_id == again.entries[0].message_id
            assert first.entries[0].offset == again.entries[0].offset
            got = await pull(h, pull_request())
            assert [m.body for m in got.messages] == [b"once"]

    run(body())


def test_a_body_of_exactly_the_advertised_size_is_stored(tmp_path):
    async def body():
        async with serving(tmp_path / "b") as h:
            # The advertised limit (Settings.publishing.max_body_size) is the body's: the record
            # gets its header, keys and properties on top.
            largest = message(b"y" * MAX_MESSAGE_SIZE, keys=["k1", "k2"], tag="T")
            largest.user_properties["note"] = "n" * 200
            assert (await send(h, largest)).entries[0].status.code == pb.OK
            too_big = await send(h, message(b"y" * (MAX_MESSAGE_SIZE + 1)))
            assert too_big.entries[0].status.code == pb.MESSAGE_BODY_TOO_LARGE
            assert [m.body for m in (await pull(h, pull_request())).messages] == [b"y" * MAX_MESSAGE_SIZE]

    run(body())
