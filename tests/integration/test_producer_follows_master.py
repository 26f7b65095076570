"""The producers follow a broker group's master across failovers, against fake brokers: gRPC
servers on 127.0.0.1 port 0 serving only SendMessage and QueryRoute, each scripted as a master,
a slave naming its master, a broker in an election (FORBIDDEN without an endpoint, no route), a
broker that stores a message and loses the answer, or a stopped server. Each scenario runs on
`Producer` and on `AsyncProducer` (driven from a loop thread); the `rocketstore produce` command
takes several endpoints too. Every send ends by itself (success or the retry budget), so nothing
here waits on a clock."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from concurrent import futures

import grpc
import pytest

from client import (
    AsyncProducer,
    BrokerError,
    NotMasterError,
    Producer,
    RetryPolicy,
    RocketStoreError,
    SendStatus,
    TransportError,
)
from rocketstore.cli import main
from wire.rpc import messaging_pb2 as pb
from wire.rpc import messaging_pb2_grpc

TOPIC = "Orders"
GROUP_NAME = "broker-a"
# Small pauses and budget: a scenario takes milliseconds, a give-up well under a second.
FAST = RetryPolicy(retry_timeout_s=5.0, backoff_min_s=0.005, backoff_max_s=0.02)
SHORT = RetryPolicy(retry_timeout_s=0.4, backoff_min_s=0.005, backoff_max_s=0.02)


class FakeBroker(messaging_pb2_grpc.MessagingServiceServicer):
    """One broker of the group. `role`: "master" stores; "slave" answers FORBIDDEN naming
    `master` (or none); a route names the master (itself when master, `master` otherwise) once
    `route_fails` questions have failed; `lose_answers` stored sends answer UNAVAILABLE."""

    def __init__(self, role: str = "master") -> None:
        self.role = role
        self.master = ""
        self.route_fails = 0
        self.lose_answers = 0
        self.answer_code = pb.OK
        self.lock = threading.Lock()
        self.sent: list[list[str]] = []  # the message ids of each SendMessage, in arrival order
        self.stored: list[str] = []
        self.routes_asked = 0
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        messaging_pb2_grpc.add_MessagingServiceServicer_to_server(self, self.server)
        self.endpoint = f"127.0.0.1:{self.server.add_insecure_port('127.0.0.1:0')}"
        self.server.start()

    def stop(self) -> None:
        self.server.stop(None).wait(5)

    def QueryRoute(self, request, context):
        with self.lock:
            self.routes_asked += 1
            failing = self.route_fails > 0
            self.route_fails = max(0, self.route_fails - 1)
        master = self.endpoint if self.role == "master" else self.master
        if failing or not master:
            return pb.QueryRouteResponse(status=pb.Status(code=pb.HA_NOT_AVAILABLE, message="no master elected now"))
        host, port = master.rsplit(":", 1)
        broker = pb.Broker(
            name=GROUP_NAME,
            id=0,
            endpoints=pb.Endpoints(scheme=pb.IPv4, addresses=[pb.Address(host=host, port=int(port))]),
        )
        return pb.QueryRouteResponse(
            status=pb.Status(code=pb.OK),
            message_queues=[
                pb.MessageQueue(topic=request.topic, id=i, permission=pb.READ_WRITE, broker=broker) for i in range(2)
            ],
        )

    def SendMessage(self, request, context):
        ids = [m.system_properties.message_id for m in request.messages]
        with self.lock:
            self.sent.append(ids)
        if self.role != "master":
            why = f"not master: {GROUP_NAME} (id 1) is a SLAVE" if self.master else "not master: no master elected"
            status = pb.Status(code=pb.FORBIDDEN, message=why, master_endpoint=self.master)
            return pb.SendMessageResponse(status=status, entries=[pb.SendResultEntry(status=status) for _ in ids])
        if any(m.topic.name != TOPIC for m in request.messages):
            status = pb.Status(code=pb.TOPIC_NOT_FOUND, message="no such topic")
            return pb.SendMessageResponse(status=status, entries=[pb.SendResultEntry(status=status) for _ in ids])
        with self.lock:
            first = len(self.stored)
            self.stored.extend(ids)
            lose, self.lose_answers = self.lose_answers > 0, max(0, self.lose_answers - 1)
        if lose:
            context.abort(grpc.StatusCode.UNAVAILABLE, "the answer was lost")
        status = pb.Status(code=self.answer_code)
        return pb.SendMessageResponse(
            status=status,
            entries=[
                pb.SendResultEntry(status=status, message_id=mid, queue_id=0, offset=first + i, commit_log_offset=0)
                for i, mid in enumerate(ids)
            ],
        )


@pytest.fixture
def brokers():
    made: list[FakeBroker] = []

    def make(*roles: str) -> list[FakeBroker]:
        new = [FakeBroker(role) for role in roles]
        made.extend(new)
        return new

    yield make
    for b in made:
        b.stop()


class LoopThread:
    """An event loop on its own thread, so a test can drive an AsyncProducer step by step."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


class Client:
    """The same blocking calls over a Producer or an AsyncProducer."""

    def __init__(self, api: str, endpoints, policy: RetryPolicy = FAST, timeout_s: float = 3.0) -> None:
        self.api = api
        if api == "sync":
            self.producer = Producer(endpoints, timeout_s=timeout_s, retry_policy=policy)
        else:
            self.runner = LoopThread()
            self.producer = AsyncProducer(endpoints, timeout_s=timeout_s, retry_policy=policy)

    def send_batch(self, bodies, **kw):
        if self.api == "sync":
            return self.producer.send_batch(TOPIC, bodies, **kw)
        return self.runner.run(self.producer.send_batch(TOPIC, bodies, **kw))

    def send(self, body, topic=TOPIC):
        if self.api == "sync":
            return self.producer.send(topic, body)
        return self.runner.run(self.producer.send(topic, body))

    def close(self) -> None:
        if self.api == "sync":
            self.producer.close()
        else:
            self.runner.run(self.producer.close())
            self.runner.close()


@pytest.fixture(params=["sync", "async"])
def client(request):
    made: list[Client] = []

    def make(endpoints, **kw) -> Client:
        c = Client(request.param, endpoints, **kw)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


def test_a_slave_naming_its_master_sends_the_producer_there_for_good(brokers, client, caplog):
    slave, master = brokers("slave", "master")
    slave.master = master.endpoint
    producer = client(slave.endpoint)  # one endpoint given: the master is learnt from the answer
    with caplog.at_level(logging.INFO, logger="client.producer"):
        first = producer.send_batch([b"a", b"b"])
    assert [r.status for r in first] == [SendStatus.SEND_OK] * 2
    # A group standing alone: its route's group stored them, as a cluster's results say.
    assert {r.broker_name for r in first} == {GROUP_NAME}
    assert slave.sent == master.sent == [[r.msg_id for r in first]]
    assert producer.producer.endpoint == master.endpoint
    assert producer.producer.endpoints == [slave.endpoint, master.endpoint]
    assert f"moved from {slave.endpoint} to {master.endpoint}" in caplog.text
    second = producer.send(b"c")
    assert len(slave.sent) == 1 and master.sent[-1] == [second.msg_id]
    assert master.stored == [r.msg_id for r in first] + [second.msg_id]


def test_a_stopped_master_is_replaced_by_the_one_the_group_names(brokers, client, caplog):
    old, new = brokers("master", "slave")
    producer = client(f"{old.endpoint};{new.endpoint}")
    before = producer.send(b"before")
    assert old.stored == [before.msg_id]
    old.stop()
    new.role = "master"
    with caplog.at_level(logging.INFO, logger="client.producer"):
        after = producer.send_batch([b"x", b"y"])
    assert new.stored == [r.msg_id for r in after] and new.routes_asked >= 1
    assert before.broker_name == GROUP_NAME and {r.broker_name for r in after} == {GROUP_NAME}
    assert producer.producer.endpoint == new.endpoint
    assert f"master of {GROUP_NAME} moved from {old.endpoint} to {new.endpoint}" in caplog.text


def test_a_lost_answer_is_sent_again_with_the_same_message_ids(brokers, client):
    old, new = brokers("master", "slave")
    old.lose_answers = 1
    new.master = new.endpoint  # the group has moved on: the route names the new master
    new.role = "master"
    producer = client([old.endpoint, new.endpoint])
    results = producer.send_batch([b"1", b"2", b"3"])
    ids = [r.msg_id for r in results]
    assert old.sent == [ids] and new.sent == [ids]
    assert old.stored == new.stored == ids  # at least once: the first copy was stored too
    assert producer.producer.endpoint == new.endpoint


def test_an_election_then_a_route_from_a_third_broker(brokers, client):
    electing, knowing, master = brokers("slave", "slave", "master")
    knowing.master = master.endpoint
    knowing.route_fails = 2  # the election is still on for two questions
    producer = client([electing.endpoint, knowing.endpoint])
    result = producer.send(b"m")
    assert electing.sent == master.sent == [[result.msg_id]]
    assert knowing.sent == [] and knowing.routes_asked == 3
    assert producer.producer.endpoint == master.endpoint
    assert producer.producer.endpoints == [electing.endpoint, knowing.endpoint, master.endpoint]


def test_brokers_naming_each_other_settle_once_the_group_does(brokers, client):
    a, b, c = brokers("slave", "slave", "slave")
    a.master, b.master = b.endpoint, a.endpoint  # stale views during an election
    producer = client([a.endpoint, b.endpoint, c.endpoint], policy=SHORT)
    with pytest.raises(NotMasterError) as info:
        producer.send(b"m")
    ids = {tuple(s) for s in a.sent + b.sent}
    assert len(ids) == 1 and info.value.attempts == len(a.sent) + len(b.sent) > 2
    assert len(a.sent) + len(b.sent) < 200  # paused, not spun
    c.role = "master"
    a.master = b.master = c.endpoint
    assert producer.send(b"n").ok and producer.producer.endpoint == c.endpoint


def test_the_last_error_is_raised_after_the_retry_budget(brokers, client):
    a, b = brokers("slave", "slave")
    producer = client([a.endpoint, b.endpoint], policy=SHORT)
    started = time.monotonic()
    with pytest.raises(NotMasterError) as info:
        producer.send_batch([b"x", b"y"])
    spent = time.monotonic() - started
    assert SHORT.retry_timeout_s - 0.05 < spent < SHORT.retry_timeout_s + 2.0
    # Without a master named anywhere, the producer keeps asking the group, not re-sending.
    assert info.value.master_endpoint == "" and info.value.attempts == len(a.sent) == 1 and b.sent == []
    assert a.routes_asked + b.routes_asked > 4
    assert any("gave up after" in note for note in info.value.__notes__)
    assert producer.producer.endpoint == a.endpoint


def test_a_group_that_cannot_be_reached_raises_the_transport_error(brokers, client):
    a, b = brokers("master", "slave")
    producer = client([a.endpoint, b.endpoint], policy=SHORT)
    a.stop()
    b.stop()
    with pytest.raises(TransportError) as info:
        producer.send(b"x")
    # Never reached, the group is not waited for: each endpoint is tried once, the last error raised.
    assert info.value.code == "UNAVAILABLE" and info.value.attempts == 2
    assert info.value.endpoint == b.endpoint
    assert any("no broker answered" in note for note in info.value.__notes__)


def test_stored_with_a_timeout_is_a_result_and_refusals_are_final(brokers, client):
    master, other = brokers("master", "master")
    master.answer_code = pb.SLAVE_PERSISTENCE_TIMEOUT
    producer = client([master.endpoint, other.endpoint])
    result = producer.send(b"slow")
    assert result.status is SendStatus.FLUSH_SLAVE_TIMEOUT and master.sent == [[result.msg_id]]
    with pytest.raises(BrokerError) as info:
        producer.send(b"x", topic="Nope")
    assert info.value.code_name == "TOPIC_NOT_FOUND" and info.value.attempts == 1
    assert len(master.sent) == 2 and other.sent == [] and other.routes_asked == 0


def test_channels_open_when_needed_and_close_together(brokers):
    slave, master, unused = brokers("slave", "master", "master")
    slave.master = master.endpoint
    producer = Producer([slave.endpoint, master.endpoint, unused.endpoint], retry_policy=FAST)
    assert producer._stubs.endpoints == {producer._group.current}
    producer.send(TOPIC, b"m")
    assert {e.target for e in producer._stubs.endpoints} == {slave.endpoint, master.endpoint}
    producer.close()
    assert producer._stubs.endpoints == set()
    with pytest.raises(RocketStoreError, match="closed"):
        producer.send(TOPIC, b"late")
    assert unused.sent == []


@pytest.mark.parametrize("api", ["asyncio", "threads"])
def test_produce_command_follows_the_master(brokers, capsys, api):
    slave, master = brokers("slave", "master")
    slave.master = master.endpoint
    code = main(
        [
            "produce",
            "--endpoint",
            f"{slave.endpoint},{master.endpoint}",
            "--topic",
            TOPIC,
            "--count",
            "6",
            "--batch",
            "2",
            "--concurrency",
            "2",
            "--api",
            api,
            "--json",
            "--retry-timeout-s",
            "5",
        ]
    )
    out = capsys.readouterr().out
    summary = json.loads(out)
    assert code == 0 and summary["ok"] and summary["statuses"] == {"SEND_OK": 6}
    assert summary["endpoint"] == f"{slave.endpoint};{master.endpoint}"
    assert len(master.stored) == 6 and 1 <= len(slave.sent) <= 2
