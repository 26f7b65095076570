"""Reads from a slave: the official RocketMQ 5 Python client, given only a slave's endpoint,
consumes through the master while it is up, keeps consuming from the slave while the master is
down, and what it acked there is not delivered again once the master is back.

The official client runs in its own virtualenv (`.venv-rocketmq`, made by `make test`).
"""

from __future__ import annotations

import json

import grpc
from test_official_client import PRODUCER
from test_pop_consumption import run_official

from client import Producer, PullConsumer
from harness.local_cluster import poll_until
from pop_support import Pop
from wire.rpc import messaging_pb2 as pb
from wire.rpc import messaging_pb2_grpc

TOPIC = "SlaveReadTopic"
GROUP = "slave-read-group"

# Receive until `want` messages came (or 40 s passed), ack the first `ack` of them, print both.
TAKE = r"""
import json, sys, time
from rocketmq import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer

endpoint, topic, group = sys.argv[1], sys.argv[2], sys.argv[3]
want, ack, invisible_s = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
config = ClientConfiguration(endpoint, Credentials(), request_timeout=10)
consumer = SimpleConsumer(config, group, {topic: FilterExpression("*")}, await_duration=2)
consumer.startup()
got, errors = [], []
try:
    deadline = time.time() + 40
    while len(got) < want and time.time() < deadline:
        try:
            got += consumer.receive(want - len(got), invisible_s)
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
            time.sleep(0.5)
    for m in got[:ack]:
        consumer.ack(m)
finally:
    consumer.shutdown()
print(json.dumps({
    "got": [(m.body.decode(), m.delivery_attempt) for m in got],
    "acked": [m.body.decode() for m in got[:ack]],
    "errors": errors[-3:],
}))
"""


def take(endpoint: str, home, want: int, ack: int, invisible_s: int) -> dict:
    return json.loads(run_official(TAKE, [endpoint, TOPIC, GROUP, str(want), str(ack), str(invisible_s)], home))


def route(endpoint: str, replicas: bool = False) -> pb.QueryRouteResponse:
    with grpc.insecure_channel(endpoint) as channel:
        stub = messaging_pb2_grpc.MessagingServiceStub(channel)
        return stub.QueryRoute(pb.QueryRouteRequest(topic=pb.Resource(name=TOPIC), replicas=replicas), timeout=5)


def id0_endpoints(answer: pb.QueryRouteResponse) -> set[tuple[str, int]]:
    return {
        (f"{q.broker.endpoints.addresses[0].host}:{q.broker.endpoints.addresses[0].port}", q.permission)
        for q in answer.message_queues
        if q.broker.id == 0
    }


def test_consumers_keep_receiving_from_a_slave_while_the_master_is_down(make_cluster, tmp_path):
    cluster = make_cluster(
        master_role="SYNC_MASTER", flush_disk_type="SYNC_FLUSH", slaves=1, settings={"slaveActingMasterDelay": "1000"}
    )
    master, slave = cluster.master, cluster.slave_brokers[0]
    bodies = {f"m{i}" for i in range(8)}
    with Producer(master.client_endpoint) as producer:
        for body in sorted(bodies):
            assert producer.send(TOPIC, body.encode()).ok
    # The slave's route names its master as broker id 0, the only one RocketMQ 5 clients get;
    # asked for replicas (RocketStore's clients), itself too, read-only, under its own id.
    assert poll_until(lambda: route(slave.client_endpoint).status.code == pb.OK, 20)
    assert id0_endpoints(route(slave.client_endpoint)) == {(master.client_endpoint, pb.READ_WRITE)}
    assert {q.broker.id for q in route(slave.client_endpoint).message_queues} == {0}
    assert {q.broker.id for q in route(slave.client_endpoint, replicas=True).message_queues} == {0, 1}

    # Given only the slave's endpoint, the official client consumes through the master.
    first = take(slave.client_endpoint, tmp_path / "c1", want=2, ack=2, invisible_s=30)
    assert len(first["got"]) == 2 and all(attempt == 1 for _, attempt in first["got"]), first
    acked = set(first["acked"])

    master.kill()
    # After slaveActingMasterDelay the slave stands in as broker id 0, read-only.
    assert poll_until(lambda: id0_endpoints(route(slave.client_endpoint)) == {(slave.client_endpoint, pb.READ)}, 30), (
        route(slave.client_endpoint)
    )
    # The rest comes from the slave; two are acked there, the others left to come back in 4 s.
    second = take(slave.client_endpoint, tmp_path / "c2", want=6, ack=2, invisible_s=4)
    assert sorted(body for body, _ in second["got"]) == sorted(bodies - acked), second
    assert all(attempt == 1 for _, attempt in second["got"]), second
    acked |= set(second["acked"])
    assert (slave.store_dir / "pop_journal").exists()

    # The master comes back; the slave hands its journal back and routes to the master again.
    master.restart()
    assert poll_until(lambda: not (slave.store_dir / "pop_journal").exists(), 60), slave.tail()
    assert poll_until(
        lambda: id0_endpoints(route(slave.client_endpoint)) == {(master.client_endpoint, pb.READ_WRITE)}, 30
    )
    # Only the four left unacked on the slave come back, each with its second attempt.
    third = take(slave.client_endpoint, tmp_path / "c3", want=4, ack=4, invisible_s=30)
    assert sorted(body for body, _ in third["got"]) == sorted(bodies - acked), third
    assert all(attempt == 2 for _, attempt in third["got"]), third
    pop = Pop(master.client_endpoint, TOPIC, GROUP)
    try:
        assert pop.receive(wait_s=1) == (pb.MESSAGE_NOT_FOUND, [])
    finally:
        pop.close()


def test_a_slave_with_its_master_up_refuses_pop_calls_and_names_the_master(make_cluster):
    # Proxy mode off: the slave would relay the pop calls to its master (test_proxy_mode.py).
    settings = {"slaveActingMasterDelay": "1000", "proxyModeEnable": "false"}
    cluster = make_cluster(master_role="ASYNC_MASTER", slaves=1, settings=settings)
    master, slave = cluster.master, cluster.slave_brokers[0]
    with Producer(master.client_endpoint) as producer:
        assert producer.send(TOPIC, b"x").ok
    assert poll_until(lambda: route(slave.client_endpoint).status.code == pb.OK, 20)
    pop = Pop(slave.client_endpoint, TOPIC, GROUP)
    try:
        code, messages = pop.receive(wait_s=0.2)
    finally:
        pop.close()
    assert (code, messages) == (pb.FORBIDDEN, [])


def test_a_slave_restarted_as_master_takes_its_pop_journal_into_its_log(make_cluster):
    cluster = make_cluster(master_role="ASYNC_MASTER", slaves=1, settings={"slaveActingMasterDelay": "500"})
    master, slave = cluster.master, cluster.slave_brokers[0]
    with Producer(master.client_endpoint) as producer:
        for i in range(4):
            assert producer.send(TOPIC, f"m{i}".encode()).ok
    assert poll_until(lambda: cluster.caught_up(), 30)
    master.kill()
    assert poll_until(lambda: id0_endpoints(route(slave.client_endpoint)) == {(slave.client_endpoint, pb.READ)}, 30)
    pop = Pop(slave.client_endpoint, TOPIC, GROUP)
    try:
        received: list[pb.Message] = []
        assert poll_until(lambda: received.extend(pop.receive(invisible_s=3600)[1]) or len(received) == 4, 20)
        handles = {m.body: m.system_properties.receipt_handle for m in received}
        assert pop.ack(handles[b"m0"], handles[b"m1"]).status.code == pb.OK
        # Dead-lettering is a put: a slave standing in for its master cannot.
        gave_up = pop.forward_to_dead_letter(handles[b"m2"])
        assert gave_up.status.code == pb.MASTER_PERSISTENCE_TIMEOUT, gave_up
    finally:
        pop.close()
    # The operator makes the slave the master (the old one is gone for good).
    slave.stop()
    del slave.settings["haMasterAddress"]
    slave.settings.update(brokerRole="ASYNC_MASTER", brokerId="0", haListenPort="0")
    slave.restart()
    pop = Pop(slave.client_endpoint, TOPIC, GROUP)
    try:
        # What the slave acked stays acked; what it handed out stays invisible, and its handles work.
        assert pop.receive(wait_s=0.5) == (pb.MESSAGE_NOT_FOUND, [])
        assert not (slave.store_dir / "pop_journal").exists()
        assert pop.ack(handles[b"m2"]).status.code == pb.OK
        assert pop.change(handles[b"m3"], 1).status.code == pb.OK
        got: list[pb.Message] = []
        assert poll_until(lambda: got.extend(pop.receive(wait_s=2)[1]) or got, 20)
        assert [(m.body, m.system_properties.delivery_attempt) for m in got] == [(b"m3", 2)]
    finally:
        pop.close()


def test_a_producer_given_a_slave_creates_a_new_topic_through_the_master(make_cluster, tmp_path):
    """Issue 32 item 5: a slave answered TOPIC_NOT_FOUND (40402) for a topic that did not exist
    yet, where its master routes the first send to create it. It answers as the master would."""
    cluster = make_cluster(master_role="SYNC_MASTER", flush_disk_type="SYNC_FLUSH", slaves=1)
    slave, master = cluster.slave_brokers[0].client_endpoint, cluster.master.client_endpoint
    assert poll_until(lambda: cluster.caught_up(), 20)
    answer = route(slave)
    assert answer.status.code == pb.OK, answer.status
    assert {endpoint for endpoint, _ in id0_endpoints(answer)} == {master}
    assert all(q.permission == pb.READ_WRITE for q in answer.message_queues)
    ids = json.loads(run_official(PRODUCER, [slave, TOPIC, "3"], tmp_path))
    with PullConsumer(master, group="new-topic-check") as consumer:
        stored = [m.msg_id for q in consumer.queues(TOPIC) for m in consumer.pull(TOPIC, q, 0).messages]
    assert sorted(set(stored)) == sorted(ids)
