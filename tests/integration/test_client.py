"""The client against a fake broker: real gRPC on 127.0.0.1 port 0, in-process servicers with
canned but realistic answers (timeouts that still stored the message, a slave's FORBIDDEN with
its master's endpoint, MESSAGE_NOT_FOUND and ILLEGAL_OFFSET pulls, an authenticated admin API).
Exercises Producer, AsyncProducer, PullConsumer, AsyncPullConsumer, AdminClient and the
`rocketstore produce|consume|status|topic` commands in-process.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import threading
import time
import zlib
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest

from client import (
    AdminClient,
    AsyncProducer,
    AsyncPullConsumer,
    AuthenticationError,
    BrokerError,
    NotMasterError,
    PartialBatchError,
    Producer,
    ProducerMessage,
    PullConsumer,
    PullStatus,
    SendStatus,
    TransportError,
)
from rocketstore.cli import main
from wire.admin_auth import AuthInterceptor, BrokerIdentity, Verifier, identity_answer
from wire.rpc import admin_pb2, admin_pb2_grpc, messaging_pb2_grpc
from wire.rpc import messaging_pb2 as pb

SECRET = b"client-integration-secret-0123456789"
HEX32 = re.compile(r"[0-9A-F]{32}")
QUEUES = 4
TIMEOUT_CODES = {
    "SlowDisk": pb.MASTER_PERSISTENCE_TIMEOUT,
    "SlowSlave": pb.SLAVE_PERSISTENCE_TIMEOUT,
    "NoSlave": pb.HA_NOT_AVAILABLE,
}
TOPICS = {"Orders", "Mixed", "Hang", "Corrupt", *TIMEOUT_CODES}


def _status(code: int, message: str = "", master: str = "") -> pb.Status:
    return pb.Status(code=code, message=message, master_endpoint=master)


class FakeMessaging(messaging_pb2_grpc.MessagingServiceServicer):
    """A broker's client API over in-memory queues; `slave_of` makes it answer as a slave."""

    def __init__(self) -> None:
        self.endpoint = ""
        self.slave_of = ""
        self.lock = threading.Lock()
        self.queues: dict[tuple[str, int], list[pb.Message]] = defaultdict(list)
        self.next_commit_log_offset = 0
        self.round_robin: Counter = Counter()
        self.offsets: dict[tuple[str, str, int], int] = {}
        self.sends: list[pb.SendMessageRequest] = []
        self.pulls: list[pb.PullMessageRequest] = []
        self.release = threading.Event()
        self.fail_next = 0  # SendMessage calls to fail with UNAVAILABLE after reading them

    def QueryRoute(self, request, context):
        if request.topic.name not in TOPICS:
            return pb.QueryRouteResponse(status=_status(pb.TOPIC_NOT_FOUND, f"topic {request.topic.name} not found"))
        host, port = self.endpoint.rsplit(":", 1)
        broker = pb.Broker(
            name="broker-a",
            id=0,
            endpoints=pb.Endpoints(scheme=pb.IPv4, addresses=[pb.Address(host=host, port=int(port))]),
        )
        return pb.QueryRouteResponse(
            status=_status(pb.OK),
            message_queues=[
                pb.MessageQueue(
                    topic=request.topic,
                    id=i,
                    permission=pb.READ_WRITE,
                    broker=broker,
                    accept_message_types=[pb.NORMAL, pb.FIFO],
                )
                for i in range(QUEUES)
            ],
        )

    def _store(self, message: pb.Message, queue_id: int) -> tuple[int, int]:
        topic = message.topic.name
        stored = pb.Message()
        stored.CopyFrom(message)
        sp = stored.system_properties
        sp.ClearField("send_queue_id")
        queue = self.queues[(topic, queue_id)]
        sp.queue_id, sp.queue_offset = queue_id, len(queue)
        sp.commit_log_offset = self.next_commit_log_offset
        sp.store_host = self.endpoint
        sp.store_timestamp.FromMilliseconds(time.time_ns() // 1_000_000)
        sp.reconsume_times, sp.delivery_attempt = 0, 1
        checksum = "DEADBEEF" if topic == "Corrupt" else f"{zlib.crc32(stored.body):08X}"
        sp.body_digest.CopyFrom(pb.Digest(type=pb.CRC32, checksum=checksum))
        self.next_commit_log_offset += 200 + len(stored.body)
        queue.append(stored)
        return sp.queue_offset, sp.commit_log_offset

    def SendMessage(self, request, context):
        self.sends.append(request)
        with self.lock:
            fail, self.fail_next = self.fail_next > 0, max(0, self.fail_next - 1)
        if fail:
            context.abort(grpc.StatusCode.UNAVAILABLE, "the answer was lost")
        if self.slave_of:
            status = _status(
                pb.FORBIDDEN, f"broker-a (id 1) is a SLAVE: send to its master at {self.slave_of}", self.slave_of
            )
            return pb.SendMessageResponse(
                status=status, entries=[pb.SendResultEntry(status=status) for _ in request.messages]
            )
        if not request.messages:
            return pb.SendMessageResponse(status=_status(pb.BAD_REQUEST, "no messages"))
        entries = []
        for i, m in enumerate(request.messages):
            topic = m.topic.name
            if topic == "Hang":
                self.release.wait(10)
            if topic not in TOPICS:
                entries.append(pb.SendResultEntry(status=_status(pb.TOPIC_NOT_FOUND, f"topic {topic} not found")))
                continue
            if topic == "Mixed" and i % 2:
                entries.append(pb.SendResultEntry(status=_status(pb.MESSAGE_BODY_TOO_LARGE, "body too large")))
                continue
            sp = m.system_properties
            with self.lock:
                if sp.HasField("send_queue_id"):
                    queue_id = sp.send_queue_id
                else:
                    queue_id = self.round_robin[topic] % QUEUES
                    self.round_robin[topic] += 1
                queue_offset, commit_log_offset = self._store(m, queue_id)
            entries.append(
                pb.SendResultEntry(
                    status=_status(TIMEOUT_CODES.get(topic, pb.OK)),
                    message_id=sp.message_id,
                    offset=queue_offset,
                    queue_id=queue_id,
                    commit_log_offset=commit_log_offset,
                )
            )
        codes = {e.status.code for e in entries}
        code = codes.pop() if len(codes) == 1 else pb.MULTIPLE_RESULTS
        return pb.SendMessageResponse(status=_status(code), entries=entries)

    def PullMessage(self, request, context):
        self.pulls.append(request)
        topic, queue_id = request.message_queue.topic.name, request.message_queue.id
        if topic not in TOPICS:
            yield pb.PullMessageResponse(status=_status(pb.TOPIC_NOT_FOUND, f"topic {topic} not found"))
            return
        with self.lock:
            queue = list(self.queues[(topic, queue_id)])
        offset = request.offset
        if offset > len(queue):
            yield pb.PullMessageResponse(status=_status(pb.ILLEGAL_OFFSET, f"offset {offset} is past the end"))
            yield pb.PullMessageResponse(next_offset=len(queue))
            return
        if offset == len(queue):
            yield pb.PullMessageResponse(status=_status(pb.MESSAGE_NOT_FOUND, "no new message"))
            yield pb.PullMessageResponse(next_offset=offset)
            return
        window = queue[offset : offset + request.batch_size]
        tags = None
        if request.HasField("filter_expression") and request.filter_expression.expression not in ("", "*"):
            tags = set(request.filter_expression.expression.split("||"))
        yield pb.PullMessageResponse(status=_status(pb.OK))
        for m in window:
            if tags is None or m.system_properties.tag in tags:
                yield pb.PullMessageResponse(message=m)
        yield pb.PullMessageResponse(next_offset=offset + len(window))

    def GetOffset(self, request, context):
        key = (request.group.name, request.message_queue.topic.name, request.message_queue.id)
        if key not in self.offsets:
            return pb.GetOffsetResponse(status=_status(pb.OFFSET_NOT_FOUND, "no committed offset"))
        return pb.GetOffsetResponse(status=_status(pb.OK), offset=self.offsets[key])

    def UpdateOffset(self, request, context):
        self.offsets[(request.group.name, request.message_queue.topic.name, request.message_queue.id)] = request.offset
        return pb.UpdateOffsetResponse(status=_status(pb.OK))

    def QueryOffset(self, request, context):
        queue = self.queues[(request.message_queue.topic.name, request.message_queue.id)]
        if request.query_offset_policy == pb.BEGINNING:
            return pb.QueryOffsetResponse(status=_status(pb.OK), offset=0)
        if request.query_offset_policy == pb.END:
            return pb.QueryOffsetResponse(status=_status(pb.OK), offset=len(queue))
        wanted = request.timestamp.ToMilliseconds()
        found = next(
            (i for i, m in enumerate(queue) if m.system_properties.store_timestamp.ToMilliseconds() >= wanted),
            len(queue),
        )
        return pb.QueryOffsetResponse(status=_status(pb.OK), offset=found)


class FakeAdmin(admin_pb2_grpc.AdminServicer):
    def __init__(self, identity: BrokerIdentity) -> None:
        self.identity = identity
        self.status = admin_pb2.BrokerStatus()
        self.topics: dict[str, admin_pb2.TopicSpec] = {}

    def Identify(self, request, context):
        return identity_answer(self.identity)

    def GetStatus(self, request, context):
        return self.status

    def CreateTopic(self, request, context):
        if self.status.role == "SLAVE":
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "not master: create topics on the MASTER")
        if not re.fullmatch(r"[%|a-zA-Z0-9_-]+", request.topic.name):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"topic name {request.topic.name!r} is invalid")
        self.topics[request.topic.name] = request.topic
        return admin_pb2.CreateTopicResponse(topic=request.topic)

    def ListTopics(self, request, context):
        return admin_pb2.ListTopicsResponse(topics=list(self.topics.values()))

    def GetClusterView(self, request, context):
        if self.status.role == "SLAVE":
            return admin_pb2.ClusterView(self=self.status)
        return admin_pb2.ClusterView(master=self.status)


class FakeBroker:
    def __init__(self, role: str, broker_id: int) -> None:
        self.messaging = FakeMessaging()
        identity = BrokerIdentity("DefaultCluster", "broker-a", broker_id)
        self.admin = FakeAdmin(identity)
        self.server = grpc.server(
            ThreadPoolExecutor(max_workers=16),
            interceptors=[AuthInterceptor(Verifier(SECRET, identity), ["/rocketstore.admin.v1.Admin/"])],
        )
        messaging_pb2_grpc.add_MessagingServiceServicer_to_server(self.messaging, self.server)
        admin_pb2_grpc.add_AdminServicer_to_server(self.admin, self.server)
        port = self.server.add_insecure_port("127.0.0.1:0")
        self.endpoint = f"127.0.0.1:{port}"
        self.messaging.endpoint = self.endpoint
        self.admin.status.CopyFrom(
            admin_pb2.BrokerStatus(
                cluster_name="DefaultCluster",
                broker_name="broker-a",
                broker_id=broker_id,
                role=role,
                client_endpoint=self.endpoint,
                ha_endpoint="127.0.0.1:1",
                flush_disk_type="SYNC_FLUSH",
                max_offset=4096,
                flushed_offset=4096,
                confirmed_offset=3000,
                dispatched_offset=4096,
                in_sync_replicas=2,
                stats_json=json.dumps({"puts": {"PUT_OK": 12}}),
            )
        )
        self.server.start()

    def stop(self) -> None:
        self.messaging.release.set()
        self.server.stop(grace=None).wait(5)


@pytest.fixture
def broker():
    b = FakeBroker("SYNC_MASTER", 0)
    yield b
    b.stop()


@pytest.fixture
def closed_endpoint():
    # Bound but not listening: connections are refused, and no other test can take the port.
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    yield f"127.0.0.1:{s.getsockname()[1]}"
    s.close()


@pytest.fixture
def secret_file(tmp_path):
    path = tmp_path / "admin.secret"
    path.write_bytes(SECRET + b"\n")
    path.chmod(0o600)
    return str(path)


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()  # drop the transcript the previous call printed for pytest's report
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    print(f"$ rocketstore {' '.join(map(str, argv))}\n[exit {code}]\n{out}\n[stderr]\n{err}")
    assert "Traceback" not in err
    return code, out, err


# -- producers ---------------------------------------------------------------------------------


def test_producer_sends_and_reports_where_the_message_went(broker):
    with Producer(broker.endpoint, timeout_s=5) as producer:
        first = producer.send("Orders", b"hello", tag="TagA", keys=["order-1", "k2"], properties={"src": "test"})
        second = producer.send("Orders", "second", queue_id=2, message_group="g1", message_id="MY-OWN-ID")
    assert first.status is SendStatus.SEND_OK and first.ok and first.topic == "Orders"
    assert HEX32.fullmatch(first.msg_id) and (first.queue_id, first.queue_offset, first.commit_log_offset) == (0, 0, 0)
    assert (second.queue_id, second.queue_offset, second.msg_id) == (2, 0, "MY-OWN-ID") and second.commit_log_offset > 0
    sent = broker.messaging.sends[0].messages[0]
    sp = sent.system_properties
    assert sp.message_id == first.msg_id and sp.tag == "TagA" and list(sp.keys) == ["order-1", "k2"]
    assert dict(sent.user_properties) == {"src": "test"} and not sp.HasField("send_queue_id")
    assert broker.messaging.sends[1].messages[0].system_properties.send_queue_id == 2


@pytest.mark.parametrize(
    "topic,status",
    [
        ("SlowDisk", SendStatus.FLUSH_DISK_TIMEOUT),
        ("SlowSlave", SendStatus.FLUSH_SLAVE_TIMEOUT),
        ("NoSlave", SendStatus.SLAVE_NOT_AVAILABLE),
    ],
)
def test_timeouts_are_results_and_the_message_is_stored(broker, topic, status):
    with Producer(broker.endpoint) as producer, PullConsumer(broker.endpoint) as consumer:
        result = producer.send(topic, b"durable-ish", queue_id=1)
        pulled = consumer.pull(topic, 1, 0)
    assert result.status is status and not result.ok and result.queue_offset == 0
    assert pulled.status is PullStatus.FOUND and pulled.messages[0].msg_id == result.msg_id


def test_send_batch_is_one_request_in_order(broker):
    with Producer(broker.endpoint) as producer:
        results = producer.send_batch("Orders", [b"a", "b", ProducerMessage(b"c", tag="T")], queue_id=3)
        with pytest.raises(PartialBatchError) as info:
            producer.send_batch("Mixed", [b"1", b"2", b"3"], queue_id=0)
    assert len(broker.messaging.sends) == 2 and len(broker.messaging.sends[0].messages) == 3
    assert [(r.queue_id, r.queue_offset) for r in results] == [(3, 0), (3, 1), (3, 2)]
    assert len({r.msg_id for r in results}) == 3
    outcomes = info.value.outcomes
    assert info.value.code_name == "MESSAGE_BODY_TOO_LARGE"
    assert [getattr(o, "queue_offset", None) for o in outcomes] == [0, None, 1]


def test_a_slave_refuses_with_its_masters_endpoint(broker):
    broker.messaging.slave_of = "10.1.2.3:10911"
    with Producer(broker.endpoint, retry_timeout_s=0) as producer:
        with pytest.raises(NotMasterError) as info:
            producer.send("Orders", b"x")
        with pytest.raises(NotMasterError):
            producer.send_batch("Orders", [b"x", b"y"])
    assert info.value.master_endpoint == "10.1.2.3:10911" and "SLAVE" in str(info.value)


def test_a_send_that_failed_in_transport_is_sent_again_with_the_same_message_ids(broker):
    broker.messaging.fail_next = 2
    with Producer(broker.endpoint, retry_timeout_s=5) as producer:
        result = producer.send("Orders", b"x")
        batch = producer.send_batch("Orders", [b"a", b"b"])
    assert result.ok and all(r.ok for r in batch)
    first = [[m.system_properties.message_id for m in r.messages] for r in broker.messaging.sends]
    assert first[0] == first[1] == first[2] == [result.msg_id]
    assert first[3] == [r.msg_id for r in batch]


def test_unknown_topic_is_a_broker_error(broker):
    with Producer(broker.endpoint) as producer:
        with pytest.raises(BrokerError) as info:
            producer.send("Nope", b"x")
    assert info.value.code_name == "TOPIC_NOT_FOUND"


def test_async_producer(broker, closed_endpoint):
    async def scenario():
        async with AsyncProducer(broker.endpoint, timeout_s=5, retry_timeout_s=0) as producer:
            one = await producer.send("Orders", b"one", tag="TagA", queue_id=1)
            batch = await producer.send_batch("Orders", [b"x"] * 4, queue_id=2)
            many = await asyncio.gather(*(producer.send("Orders", f"m{i}") for i in range(20)))
            slow = await producer.send("SlowSlave", b"s")
            broker.messaging.slave_of = "10.9.9.9:10911"
            try:
                await producer.send("Orders", b"refused")
            except NotMasterError as exc:
                refused = exc
        async with AsyncProducer(closed_endpoint, timeout_s=5, retry_timeout_s=0) as dead:
            try:
                await dead.send("Orders", b"x")
            except TransportError as exc:
                unreachable = exc
        return one, batch, many, slow, refused, unreachable

    one, batch, many, slow, refused, unreachable = asyncio.run(scenario())
    assert one.ok and (one.queue_id, one.queue_offset) == (1, 0)
    assert [r.queue_offset for r in batch] == [0, 1, 2, 3]
    assert len({r.msg_id for r in many}) == 20 and all(r.ok for r in many)
    assert slow.status is SendStatus.FLUSH_SLAVE_TIMEOUT
    assert refused.master_endpoint == "10.9.9.9:10911"
    assert closed_endpoint in str(unreachable) and unreachable.code == "UNAVAILABLE"


# -- consumers ---------------------------------------------------------------------------------


def _fill(broker, topic="Orders", queue_id=1, n=5):
    with Producer(broker.endpoint) as producer:
        return [
            producer.send(
                topic,
                f"body-{i}",
                tag="even" if i % 2 == 0 else "odd",
                keys=[f"k{i}"],
                properties={"i": str(i)},
                queue_id=queue_id,
            )
            for i in range(n)
        ]


def test_pull_consumer(broker):
    sent = _fill(broker)
    with PullConsumer(broker.endpoint, group="billing") as consumer:
        queues = consumer.route("Orders")
        queue_ids = consumer.queues("Orders")
        found = consumer.pull("Orders", 1, 0, max_messages=32)
        caught_up = consumer.pull("Orders", 1, 5, long_polling_ms=200)
        illegal = consumer.pull("Orders", 1, 99)
        odd = consumer.pull("Orders", 1, 0, tag_filter="odd")
        nothing = consumer.pull("Orders", 1, 0, max_messages=1, tag_filter="odd")
        assert consumer.get_offset("Orders", 1) is None
        consumer.update_offset("Orders", 1, 3)
        committed = consumer.get_offset("Orders", 1)
        begin, end = consumer.query_offset("Orders", 1), consumer.query_offset("Orders", 1, "END")
        by_time = consumer.query_offset("Orders", 1, 0)
    assert queue_ids == [q.queue_id for q in queues] == [0, 1, 2, 3] and all(q.readable and q.writable for q in queues)
    assert queues[0].endpoint == broker.endpoint and queues[0].broker_name == "broker-a"
    assert found.status is PullStatus.FOUND and found.next_offset == 5
    assert [m.msg_id for m in found.messages] == [r.msg_id for r in sent]
    m = found.messages[2]
    assert (m.body, m.tag, m.keys, dict(m.properties), m.queue_id, m.queue_offset) == (
        b"body-2",
        "even",
        ("k2",),
        {"i": "2"},
        1,
        2,
    )
    assert m.body_crc_ok and m.store_host == broker.endpoint and m.commit_log_offset == sent[2].commit_log_offset
    assert m.store_timestamp_ms >= m.born_timestamp_ms > 0 and m.reconsume_times == 0
    assert caught_up.status is PullStatus.NO_NEW_MSG and caught_up.next_offset == 5
    assert broker.messaging.pulls[1].long_polling_timeout.ToMilliseconds() == 200
    assert illegal.status is PullStatus.OFFSET_ILLEGAL and illegal.next_offset == 5
    assert [x.queue_offset for x in odd.messages] == [1, 3] and odd.next_offset == 5
    assert nothing.status is PullStatus.NO_MATCHED_MSG and nothing.next_offset == 1
    assert committed == 3 and (begin, end, by_time) == (0, 5, 0)


def test_pull_reports_a_corrupt_body(broker):
    _fill(broker, topic="Corrupt", queue_id=0, n=1)
    with PullConsumer(broker.endpoint) as consumer:
        (message,) = consumer.pull("Corrupt", 0, 0).messages
    assert not message.body_crc_ok


def test_pull_errors(broker):
    with PullConsumer(broker.endpoint) as consumer:
        with pytest.raises(BrokerError, match="TOPIC_NOT_FOUND"):
            consumer.pull("Nope", 0, 0)
        with pytest.raises(BrokerError, match="TOPIC_NOT_FOUND"):
            consumer.queues("Nope")
        with pytest.raises(ValueError):
            consumer.pull("Orders", 0, -1)


def test_async_pull_consumer(broker):
    _fill(broker, queue_id=0, n=3)

    async def scenario():
        async with AsyncPullConsumer(broker.endpoint, group="async-group") as consumer:
            queues = await consumer.queues("Orders")
            pulls = await asyncio.gather(*(consumer.pull("Orders", q, 0) for q in queues))
            await consumer.update_offset("Orders", 0, 3)
            return (
                queues,
                pulls,
                await consumer.get_offset("Orders", 0),
                await consumer.query_offset("Orders", 0, "END"),
            )

    queues, pulls, committed, end = asyncio.run(scenario())
    assert queues == [0, 1, 2, 3] and [p.status for p in pulls] == [PullStatus.FOUND] + [PullStatus.NO_NEW_MSG] * 3
    assert [m.body for m in pulls[0].messages] == [b"body-0", b"body-1", b"body-2"]
    assert committed == 3 and end == 3


# -- transport ---------------------------------------------------------------------------------


def test_unreachable_and_slow_brokers_are_transport_errors(broker, closed_endpoint):
    for call in (
        lambda: Producer(closed_endpoint, retry_timeout_s=0).send("Orders", b"x"),
        lambda: PullConsumer(closed_endpoint).pull("Orders", 0, 0),
        lambda: PullConsumer(closed_endpoint).queues("Orders"),
        lambda: AdminClient(closed_endpoint, SECRET).status(),
    ):
        with pytest.raises(TransportError) as info:
            call()
        assert closed_endpoint in str(info.value) and "UNAVAILABLE" in str(info.value)
    with Producer(broker.endpoint, timeout_s=0.3, retry_timeout_s=0) as producer:
        with pytest.raises(TransportError) as info:
            producer.send("Hang", b"x")
    assert info.value.code == "DEADLINE_EXCEEDED" and broker.endpoint in str(info.value)


# -- admin -------------------------------------------------------------------------------------


def test_admin_client(broker):
    with AdminClient(broker.endpoint, SECRET) as admin:
        status = admin.status()
        view = admin.cluster_view()
        created = admin.create_topic("Payments", queues=8, perm=6)
        topics = admin.list_topics()
        with pytest.raises(BrokerError) as invalid:
            admin.create_topic("bad topic")
    assert (
        status["role"] == "SYNC_MASTER" and status["max_offset"] == 4096 and status["stats"] == {"puts": {"PUT_OK": 12}}
    )
    assert view["master"]["broker_name"] == "broker-a" and view["self"] is None
    assert created == {
        "name": "Payments",
        "read_queue_nums": 8,
        "write_queue_nums": 8,
        "perm": 6,
        "order": False,
        "system": False,
    }
    assert [t["name"] for t in topics] == ["Payments"]
    assert invalid.value.code_name == "INVALID_ARGUMENT"
    assert "secret" not in repr(AdminClient(broker.endpoint, SECRET)).replace("<secret>", "").replace("secret=", "")


def test_admin_refuses_a_wrong_secret_and_slaves_refuse_topics(broker):
    with AdminClient(broker.endpoint, b"not-the-right-secret-at-all") as admin:
        with pytest.raises(AuthenticationError) as info:
            admin.status()
    assert broker.endpoint in str(info.value)
    broker.admin.status.role = "SLAVE"
    with AdminClient(broker.endpoint, SECRET) as admin:
        with pytest.raises(BrokerError) as refused:
            admin.create_topic("Payments")
        assert admin.cluster_view()["self"]["role"] == "SLAVE"
    assert refused.value.code_name == "FAILED_PRECONDITION" and "MASTER" in refused.value.message


# -- the commands ------------------------------------------------------------------------------


@pytest.mark.parametrize("api", ["asyncio", "threads"])
def test_produce_command(broker, capsys, api):
    code, out, _ = cli(
        capsys,
        "produce",
        "--endpoint",
        broker.endpoint,
        "--topic",
        "Orders",
        "--count",
        50,
        "--size",
        64,
        "--batch",
        4,
        "--concurrency",
        3,
        "--api",
        api,
        "--tag",
        "bench",
    )
    assert code == 0
    assert re.search(r"SEND_OK\s+50\b", out) and "msgs/s" in out and "p99" in out
    stored = [m for (topic, _), q in broker.messaging.queues.items() if topic == "Orders" for m in q]
    assert len(stored) == 50 and all(len(m.body) == 64 and m.system_properties.tag == "bench" for m in stored)
    assert max(len(r.messages) for r in broker.messaging.sends) == 4
    assert sorted(m.body[:12] for m in stored) == [b"%012d" % i for i in range(50)]


def test_produce_command_json_and_not_ok_statuses(broker, capsys):
    code, out, _ = cli(
        capsys, "produce", "--endpoint", broker.endpoint, "--topic", "SlowSlave", "--count", 6, "--queue", 2, "--json"
    )
    summary = json.loads(out)
    assert code == 1 and summary["statuses"] == {"FLUSH_SLAVE_TIMEOUT": 6} and not summary["ok"]
    assert summary["requests"] == 6 and summary["queue"] == 2 and summary["latency_ms"]["max"] > 0
    assert len(broker.messaging.queues[("SlowSlave", 2)]) == 6


def test_produce_command_against_a_closed_port_or_a_slave(broker, capsys, closed_endpoint):
    code, out, _ = cli(
        capsys,
        "produce",
        "--endpoint",
        closed_endpoint,
        "--topic",
        "Orders",
        "--count",
        100,
        "--concurrency",
        4,
        "--retry-timeout-s",
        0,
    )
    assert code == 1 and "error TRANSPORT_UNAVAILABLE" in out and "stopped by" in out and closed_endpoint in out
    broker.messaging.slave_of = "10.1.1.1:10911"
    code, out, _ = cli(
        capsys,
        "produce",
        "--endpoint",
        broker.endpoint,
        "--topic",
        "Orders",
        "--count",
        10,
        "--json",
        "--retry-timeout-s",
        0,
    )
    summary = json.loads(out)
    assert code == 1 and summary["errors"] == {"NOT_MASTER": 1} and "10.1.1.1:10911" in summary["stopped_by"]


def test_produce_command_stops_at_its_timeout_and_shows_progress(broker, capsys, monkeypatch):
    monkeypatch.setattr("rocketstore.commands.produce.PROGRESS_EVERY_S", 0.05)
    code, out, err = cli(
        capsys,
        "produce",
        "--endpoint",
        broker.endpoint,
        "--topic",
        "Hang",
        "--count",
        10,
        "--concurrency",
        2,
        "--timeout-s",
        1,
    )
    assert code == 1 and "stopped: --timeout-s ran out" in out and "not sent" in out
    assert "produce: 0 of 10 messages answered" in err


def test_consume_command(broker, capsys):
    for queue_id in (0, 2):
        _fill(broker, queue_id=queue_id, n=3)
    code, out, _ = cli(capsys, "consume", "--endpoint", broker.endpoint, "--topic", "Orders")
    lines = out.splitlines()
    assert code == 0 and len([x for x in lines if x.startswith("queue=")]) == 6
    assert any(x.startswith("queue=2 offset=1 ") and "size=6 tag=odd body=body-1" in x for x in lines)
    assert "consumed 6 messages from Orders (queues 0, 1, 2, 3)" in lines[-1]

    code, out, _ = cli(
        capsys,
        "consume",
        "--endpoint",
        broker.endpoint,
        "--topic",
        "Orders",
        "--queue",
        0,
        "--from-offset",
        1,
        "--count",
        1,
        "--json",
    )
    records = [json.loads(x) for x in out.splitlines()]
    assert code == 0 and len(records) == 2
    assert records[0]["queue_offset"] == 1 and records[0]["body"] == "body-1" and records[0]["body_crc_ok"]
    assert records[1]["summary"]["messages"] == 1 and records[1]["summary"]["next_offsets"] == {"0": 2}


def test_consume_command_with_a_group_commits_its_progress(broker, capsys):
    _fill(broker, queue_id=1, n=4)
    code, out, _ = cli(
        capsys,
        "consume",
        "--endpoint",
        broker.endpoint,
        "--topic",
        "Orders",
        "--group",
        "audit",
        "--count",
        3,
        "--tag",
        "even||odd",
        "--batch",
        2,
    )
    assert code == 0 and out.count("queue=1 ") == 3 and "committed these offsets for group audit" in out
    assert broker.messaging.offsets == {("audit", "Orders", 1): 3}
    code, out, _ = cli(
        capsys, "consume", "--endpoint", broker.endpoint, "--topic", "Orders", "--group", "audit", "--wait-ms", 50
    )
    assert code == 0 and out.count("queue=1 ") == 1 and "queue=1 offset=3 " in out
    assert broker.messaging.offsets[("audit", "Orders", 1)] == 4
    assert all(p.group.name == "audit" for p in broker.messaging.pulls)


def test_consume_command_flags_corrupt_bodies_and_errors(broker, capsys, closed_endpoint):
    _fill(broker, topic="Corrupt", queue_id=0, n=1)
    code, out, _ = cli(capsys, "consume", "--endpoint", broker.endpoint, "--topic", "Corrupt", "--queue", 0)
    assert code == 1 and "CORRUPT" in out and "1 messages failed their body digest check" in out
    code, _, err = cli(capsys, "consume", "--endpoint", broker.endpoint, "--topic", "Nope")
    assert code == 1 and "TOPIC_NOT_FOUND" in err
    code, _, err = cli(capsys, "consume", "--endpoint", closed_endpoint, "--topic", "Orders")
    assert code == 1 and "cannot reach the broker" in err and len(err.strip().splitlines()) == 1


def test_status_command(broker, capsys, secret_file, closed_endpoint, monkeypatch):
    slave = FakeBroker("SLAVE", 1)
    try:
        slave.admin.status.max_offset = 4000
        slave.admin.status.master_ha_address = "127.0.0.1:1"
        slave.admin.status.master_connected = True
        snapshots = [
            admin_pb2.SlaveStatus(
                ha_peer="127.0.0.1:50001",
                broker_id=1,
                client_endpoint=slave.endpoint,
                ack_offset=4000,
                lag_bytes=96,
                lag_seconds=0.25,
                fit=True,
                connected_at_ms=1,
            ),
            admin_pb2.SlaveStatus(
                ha_peer="127.0.0.1:50002",
                broker_id=2,
                client_endpoint=closed_endpoint,
                ack_offset=100,
                lag_bytes=3996,
                lag_seconds=42.0,
                fit=False,
                connected_at_ms=1,
            ),
        ]
        broker.admin.status.slaves.extend(snapshots)
        code, out, _ = cli(capsys, "status", "--endpoint", broker.endpoint, "--secret-file", secret_file)
        assert code == 1
        header = out.splitlines()[1]
        assert all(column in header for column in ("broker", "role", "max offset", "ack/lag bytes", "lag s", "fit"))
        rows = out.splitlines()[2:5]
        assert "SYNC_MASTER" in rows[0] and broker.endpoint in rows[0]
        assert "SLAVE" in rows[1] and "4000/96" in rows[1] and "yes" in rows[1]
        assert "unreachable" in rows[2] and "100/3996" in rows[2] and "NO" in rows[2]
        assert f"slave 2 at {closed_endpoint}: unreachable" in out

        del broker.admin.status.slaves[1]
        monkeypatch.setenv("ROCKETSTORE_ADMIN_SECRET", SECRET.decode())
        code, out, _ = cli(capsys, "status", "--endpoint", broker.endpoint, "--json")
        report = json.loads(out)
        assert code == 0 and not report["problems"]
        assert [(b["role"], b["max_offset"]) for b in report["brokers"]] == [("SYNC_MASTER", 4096), ("SLAVE", 4000)]

        code, out, _ = cli(capsys, "status", "--endpoint", slave.endpoint)
        assert code == 0 and "replicating from 127.0.0.1:1: connected" in out
    finally:
        slave.stop()


def test_status_command_with_a_wrong_secret(broker, capsys, tmp_path):
    wrong = tmp_path / "wrong.secret"
    wrong.write_text("this-is-not-the-broker-secret\n")
    wrong.chmod(0o600)
    code, out, err = cli(capsys, "status", "--endpoint", broker.endpoint, "--secret-file", wrong)
    assert code == 1 and out == "" and "refused our credentials" in err
    assert "this-is-not" not in err


def test_topic_commands(broker, capsys, secret_file):
    code, out, _ = cli(
        capsys,
        "topic",
        "create",
        "--endpoint",
        broker.endpoint,
        "--secret-file",
        secret_file,
        "--topic",
        "Payments",
        "--queues",
        8,
    )
    assert code == 0 and "topic Payments: 8 read / 8 write queues, perm 6 (RW-)" in out
    cli(
        capsys,
        "topic",
        "create",
        "--endpoint",
        broker.endpoint,
        "--secret-file",
        secret_file,
        "--topic",
        "Audit",
        "--perm",
        4,
    )
    code, out, _ = cli(capsys, "topic", "list", "--endpoint", broker.endpoint, "--secret-file", secret_file)
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == ["topic", "read", "queues", "write", "queues", "perm", "order"]
    assert lines[1].split()[0] == "Audit" and lines[2].split()[:3] == ["Payments", "8", "8"]
    code, out, _ = cli(capsys, "topic", "list", "--endpoint", broker.endpoint, "--secret-file", secret_file, "--json")
    assert code == 0 and [t["name"] for t in json.loads(out)] == ["Audit", "Payments"]
    code, _, err = cli(
        capsys, "topic", "create", "--endpoint", broker.endpoint, "--secret-file", secret_file, "--topic", "bad topic"
    )
    assert code == 1 and "INVALID_ARGUMENT" in err
