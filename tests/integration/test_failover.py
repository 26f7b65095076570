"""Automatic failover in controller mode: three broker processes and an etcd on 127.0.0.1.

Each test ends with the checks that matter: every message a producer saw PUT_OK for is in the
final master's CommitLog at the offset its acknowledgement gave, and the replicas are
byte-identical up to the confirmed offset. Conditions are awaited with deadlines; every load is
bounded in messages and seconds.
"""

from __future__ import annotations

import os
import time

import grpc
import pytest
from test_timers import send_at, visible

from client import Producer, PullConsumer
from failover_support import TOPIC, Load, first_difference, messages_by_offset, missing_acknowledged, open_store
from harness.local_cluster import ControllerCluster, LocalBroker, poll_until
from pop_support import Pop
from support import BROKER_TEST_SETTINGS
from transaction_support import ProducerStream, Transactions
from wire.rpc import messaging_pb2 as pb
from wire.rpc import messaging_pb2_grpc

pytestmark = pytest.mark.timeout(600)

# Slaves that stay in the in-sync set while paused, and puts that give up quickly.
PATIENT = dict(haMaxTimeSlaveNotCatchup="60000", haHousekeepingInterval="60000", slaveTimeout="500")

# Where both ends of the replication stream run (haStreamOnEventLoop): gRPC's threads, or event
# loops (what `auto` picks). The tests that kill, pause,
# depose and hand over masters run under both: each role change tears one shape down and builds it
# again on the other side.
STREAM_SHAPES = pytest.mark.parametrize(
    "stream_on_loop", ["false", "true"], ids=["stream-on-threads", "stream-on-loops"]
)


@pytest.fixture
def group(tmp_path, etcd, request):
    clusters: list[ControllerCluster] = []

    def make(size: int = 3, **settings: str) -> ControllerCluster:
        merged = dict(BROKER_TEST_SETTINGS)
        merged.update(settings)
        cluster = ControllerCluster(tmp_path / f"group{len(clusters)}", etcd.endpoint, size=size, settings=merged)
        clusters.append(cluster)
        return cluster.start()

    yield make
    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    for cluster in clusters:
        if failed:
            print(cluster.tails())
            print(etcd.log_tail(40))
        cluster.stop()


def final_check(cluster: ControllerCluster, acked: dict[str, int]) -> None:
    """Stop every broker and check the stores: nothing acknowledged is missing, the replicas
    agree byte for byte up to the lowest confirmed offset."""
    master = cluster.wait_master(60, in_sync=2)
    confirmed = int(cluster.status(master)["confirmed_offset"])
    cluster.stop()
    stores = [open_store(b.store_dir) for b in cluster.brokers]
    try:
        master_store = stores[cluster.brokers.index(master)]
        missing = missing_acknowledged(acked, messages_by_offset(master_store))
        assert not missing, f"{len(missing)} acknowledged messages are missing: {missing[:10]}"
        in_sync = [s for s in stores if s.max_offset >= confirmed]
        assert len(in_sync) >= 2
        assert first_difference(in_sync, confirmed) is None
    finally:
        for store in stores:
            store.shutdown()


def rejoined(cluster: ControllerCluster, broker: LocalBroker, master: LocalBroker) -> bool:
    """`broker` follows `master` again and is back in its in-sync set."""
    own, theirs = cluster.status(broker), cluster.status(master)
    if own is None or theirs is None or own["role"] != "SLAVE":
        return False
    return cluster.brokers.index(broker) in theirs.get("in_sync_replica_ids", [])


def send_raw(broker: LocalBroker, body: bytes = b"x") -> pb.SendMessageResponse:
    """One SendMessage straight to `broker`, no client-side retry."""
    with grpc.insecure_channel(broker.client_endpoint) as channel:
        stub = messaging_pb2_grpc.MessagingServiceStub(channel)
        message = pb.Message(topic=pb.Resource(name=TOPIC), body=body)
        message.system_properties.message_id = "RAW" + body.hex()[:20]
        return stub.SendMessage(pb.SendMessageRequest(messages=[message]), timeout=5)


def test_a_group_elects_one_master_that_replicates_to_its_in_sync_slaves(group):
    cluster = group(3)
    master = cluster.wait_master(60, in_sync=3)
    with Producer(cluster.client_endpoints(), timeout_s=3.0) as producer:
        results = [producer.send(TOPIC, f"m{i}".encode()) for i in range(30)]
    assert all(r.ok for r in results)
    status = cluster.status(master)
    assert sorted(status["in_sync_replica_ids"]) == [0, 1, 2]
    assert status["epoch"] >= 1
    acked = {r.msg_id: r.commit_log_offset for r in results}
    slaves = [b for b in cluster.brokers if b is not master]
    for slave in slaves:
        assert cluster.status(slave)["role"] == "SLAVE"
        # Proxy mode: a slave relays the send to its master, whose log holds it.
        (entry,) = send_raw(slave, f"via-{cluster.brokers.index(slave)}".encode()).entries
        assert entry.status.code == pb.OK, entry
        acked[entry.message_id] = entry.commit_log_offset
    final_check(cluster, acked)


def test_consumers_see_messages_only_up_to_the_confirmed_offset(group):
    from client import PullConsumer

    cluster = group(3, **PATIENT)
    master = cluster.wait_master(60, in_sync=3)
    slaves = [b for b in cluster.brokers if b is not master]
    with Producer(master.client_endpoint, timeout_s=3.0, retry_timeout_s=0) as producer:
        seen = producer.send(TOPIC, b"confirmed", queue_id=0)
        assert seen.ok
        slaves[0].pause()  # an in-sync slave stops acknowledging: nothing new is confirmed
        held = producer.send(TOPIC, b"stored, not confirmed", queue_id=0)
    assert held.status.name == "FLUSH_SLAVE_TIMEOUT"

    def visible(broker: LocalBroker) -> list[bytes]:
        with PullConsumer(broker.client_endpoint) as consumer:
            return [m.body for m in consumer.pull(TOPIC, 0, 0, max_messages=10).messages]

    for broker in (master, slaves[1]):
        assert poll_until(lambda: visible(broker) == [b"confirmed"], 10)
        assert visible(broker) == [b"confirmed"]
    slaves[0].resume()
    for broker in (master, slaves[1]):
        assert poll_until(lambda: visible(broker) == [b"confirmed", b"stored, not confirmed"], 20), visible(broker)


@STREAM_SHAPES
def test_kill_9_of_the_master_under_load_loses_no_acknowledged_message(group, stream_on_loop):
    cluster = group(3, haStreamOnEventLoop=stream_on_loop)
    old = cluster.wait_master(60, in_sync=3)
    load = Load(cluster.client_endpoints()).start()
    try:
        assert load.wait_acked(200, 60), load.outcomes
        old.kill()
        before = load.acked_count()
        new = cluster.wait_master(30, not_=old)
        assert load.wait_acked(before + 200, 60), (load.outcomes, load.errors)
    finally:
        acked = load.stop()
    assert new is not old
    cluster.restart(old)
    final_check(cluster, acked)


def test_topics_and_consumer_offsets_survive_a_failover(group):
    from client import AdminClient, BrokerError, PullConsumer

    cluster = group(3, haMetadataSyncInterval="200")
    old = cluster.wait_master(60, in_sync=3)
    with AdminClient(old.client_endpoint, cluster.admin_secret()) as admin:
        admin.create_topic("WideTopic", queues=8)
    with PullConsumer(old.client_endpoint, group="billing") as consumer:
        consumer.update_offset("WideTopic", 7, 42)

    def committed(broker: LocalBroker) -> int | None:
        with PullConsumer(broker.client_endpoint, group="billing") as consumer:
            try:
                return consumer.get_offset("WideTopic", 7)
            except BrokerError as exc:  # a slave does not know the topic before its first copy
                assert "does not exist" in str(exc)
                return None

    for slave in (b for b in cluster.brokers if b is not old):
        assert poll_until(lambda: committed(slave) == 42, 20), f"broker {cluster.brokers.index(slave)} never copied it"
    old.kill()
    new = cluster.wait_master(30, not_=old)

    assert committed(new) == 42
    with AdminClient(new.client_endpoint, cluster.admin_secret()) as admin:
        assert [t["write_queue_nums"] for t in admin.list_topics() if t["name"] == "WideTopic"] == [8]
    with Producer(new.client_endpoint, timeout_s=3.0) as producer:
        assert producer.send("WideTopic", b"to the last queue", queue_id=7).ok


@STREAM_SHAPES
def test_a_paused_master_acknowledges_nothing_after_it_resumes_and_rejoins_as_slave(group, stream_on_loop):
    cluster = group(3, haStreamOnEventLoop=stream_on_loop)
    old = cluster.wait_master(60, in_sync=3)
    load = Load(cluster.client_endpoints(), threads=2).start()
    try:
        assert load.wait_acked(100, 60), load.outcomes
        old.pause()
        new = cluster.wait_master(30, not_=old)
        assert load.wait_acked(load.acked_count() + 100, 60), (load.outcomes, load.errors)
        old.resume()
        # Straight to the old master, which still believes it is master until it reads etcd:
        # it must not acknowledge from its own log, whatever moment this lands in. Once a slave,
        # it relays the send to the new master (proxy mode): such an OK is the new master's, and
        # the final check finds the message in its log.
        relayed = {}
        for i in range(20):
            response = send_raw(old, f"resumed-{i:02}".encode())
            if response.status.code == pb.OK:
                (entry,) = response.entries
                relayed[entry.message_id] = entry.commit_log_offset
        assert poll_until(lambda: rejoined(cluster, old, new), 30)
    finally:
        acked = load.stop()
    acked.update(relayed)
    assert cluster.acting_master() is new
    final_check(cluster, acked)


def deposed_master_with_a_tail(cluster: ControllerCluster) -> tuple[LocalBroker, LocalBroker, dict[str, int], int]:
    """Acknowledged messages, then a tail only the master holds (its slaves paused), then
    kill -9 of the master and an election: (old master, new master, acknowledged, tail end)."""
    old = cluster.wait_master(60, in_sync=3)
    with Producer(old.client_endpoint, timeout_s=3.0) as producer:
        acked = {r.msg_id: r.commit_log_offset for r in (producer.send(TOPIC, b"acked") for _ in range(20))}
    slaves = [b for b in cluster.brokers if b is not old]
    for slave in slaves:
        slave.pause()
    for i in range(5):
        assert send_raw(old, f"unacked-{i}".encode()).status.code != pb.OK
    tail_end = int(cluster.status(old)["max_offset"])
    old.kill()
    for slave in slaves:
        slave.resume()
    new = cluster.wait_master(30, not_=old)
    return old, new, acked, tail_end


@STREAM_SHAPES
def test_the_old_masters_unacknowledged_tail_is_truncated_when_it_rejoins(group, stream_on_loop):
    cluster = group(3, haStreamOnEventLoop=stream_on_loop, **PATIENT)
    old, new, acked, tail_end = deposed_master_with_a_tail(cluster)
    cut = int(cluster.status(new)["max_offset"])
    assert cut < tail_end
    cluster.restart(old)
    assert poll_until(lambda: rejoined(cluster, old, new), 60)
    log = (old.directory / "logs" / "broker.log").read_text()
    assert "truncating this slave's log" in log
    final_check(cluster, acked)


def test_a_slave_that_crashes_in_the_middle_of_truncation_recovers(group):
    cluster = group(3, **PATIENT)
    old, new, acked, _ = deposed_master_with_a_tail(cluster)
    # The restarted old master dies inside its truncation (after the CommitLog cut, before the
    # intent is cleared), then starts again and must finish the job on its own.
    env = dict(os.environ, ROCKETSTORE_TEST_CRASH_IN_TRUNCATION="after_commitlog")
    cluster.restart(old, env=env)
    assert poll_until(lambda: not old.running(), 60), "the broker did not reach its truncation"
    assert old.process.returncode == 86, old.tail()
    cluster.restart(old)
    assert poll_until(lambda: rejoined(cluster, old, new), 60)
    assert "finishing it" in (old.directory / "logs" / "broker.log").read_text()
    final_check(cluster, acked)


def test_with_etcd_down_masters_stop_acknowledging_and_service_returns_with_it(group, etcd):
    cluster = group(3)
    cluster.wait_master(60, in_sync=3)
    load = Load(cluster.client_endpoints(), retry_timeout_s=60.0).start()
    try:
        assert load.wait_acked(100, 60), load.outcomes
        etcd.stop()
        # Within the lease (2 s) every master fences itself: no acknowledgement after that.
        assert poll_until(lambda: cluster.acting_master() is None, 10)
        frozen = load.acked_count()
        assert not load.wait_acked(frozen + 1, 3)
        etcd.restart()
        assert load.wait_acked(frozen + 100, 60), (load.outcomes, load.errors)
    finally:
        acked = load.stop()
    final_check(cluster, acked)


@STREAM_SHAPES
def test_twenty_failovers_in_a_row_under_load(group, stream_on_loop):
    cluster = group(3, haStreamOnEventLoop=stream_on_loop)
    master = cluster.wait_master(60, in_sync=3)
    load = Load(cluster.client_endpoints(), max_seconds=500).start()
    try:
        for round_ in range(20):
            assert load.wait_acked(load.acked_count() + 30, 60), (round_, load.outcomes, load.errors)
            master.kill()
            new = cluster.wait_master(30, not_=master)
            cluster.restart(master)
            master = new
        assert load.wait_acked(load.acked_count() + 30, 60), (load.outcomes, load.errors)
    finally:
        acked = load.stop()
    final_check(cluster, acked)


@STREAM_SHAPES
def test_a_planned_switchover_loses_nothing_and_producers_see_no_error(group, stream_on_loop):
    from client import AdminClient

    cluster = group(3, haStreamOnEventLoop=stream_on_loop)
    old = cluster.wait_master(60, in_sync=3)
    target = next(b for b in cluster.brokers if b is not old)
    target_id = cluster.brokers.index(target)
    load = Load(cluster.client_endpoints()).start()
    try:
        assert load.wait_acked(100, 60), load.outcomes
        with AdminClient(old.client_endpoint, cluster.admin_secret(), timeout_s=10) as admin:
            answer = admin.elect_master(target_id, timeout_s=20)
        assert answer["master_broker_id"] == target_id
        assert cluster.wait_master(30, in_sync=2) is target
        assert load.wait_acked(load.acked_count() + 100, 60), (load.outcomes, load.errors)
    finally:
        acked = load.stop()
    assert set(load.outcomes) == {"SEND_OK"}, (load.outcomes, load.errors)
    final_check(cluster, acked)


def test_without_a_live_in_sync_broker_only_an_unclean_election_proceeds_and_says_what_may_be_lost(group):
    # The master keeps a silent slave's stream for a minute: only the in-sync rule can drop it.
    cluster = group(3, haMaxTimeSlaveNotCatchup="1000", haHousekeepingInterval="60000", slaveTimeout="500")
    master = cluster.wait_master(60, in_sync=3)
    behind = next(b for b in cluster.brokers if b is not master)
    other = next(b for b in cluster.brokers if b is not master and b is not behind)
    behind.pause()
    with Producer(master.client_endpoint, timeout_s=3.0, retry_timeout_s=10) as producer:
        # The paused slave leaves the in-sync set (no report for 1 s, though nothing new was
        # written and it holds everything): puts are OK again.
        assert poll_until(
            lambda: (
                sorted(cluster.status(master)["in_sync_replica_ids"])
                == sorted([cluster.brokers.index(master), cluster.brokers.index(other)])
            ),
            30,
        ), (
            f"paused broker {cluster.brokers.index(behind)} (pid {behind.process.pid}) is still in the set;"
            f" master {cluster.brokers.index(master)} says {cluster.status(master)}"
        )
        for i in range(20):
            assert producer.send(TOPIC, f"only on two {i}".encode()).ok
    end = int(cluster.status(master)["max_offset"])
    assert poll_until(lambda: int(cluster.status(master)["group_max_offset"]) == end, 10)
    master.kill()
    other.kill()
    behind.resume()
    # The only live broker is out of the set: no election without enableElectUncleanMaster.
    assert not poll_until(lambda: cluster.acting_master(), 5)
    assert cluster.status(behind)["role"] == "SLAVE"
    behind.stop()
    behind.settings["enableElectUncleanMaster"] = "true"
    cluster.restart(behind)

    def elected() -> dict | None:
        status = cluster.status(behind)
        return status if status is not None and status["role"] == "SYNC_MASTER" else None

    status = poll_until(elected, 30)
    assert status, behind.tail()
    # It holds none of the 20 messages, which the group had recorded in etcd.
    assert int(status["unclean_lost_bytes"]) == end - int(status["max_offset"]) > 0


def test_a_group_works_with_etcd_authentication_and_never_logs_the_password(group, etcd, tmp_path):
    password = "etcd-password-for-this-test"
    etcd.enable_auth(password)
    password_file = tmp_path / "etcd.password"
    password_file.write_text(password + "\n")
    password_file.chmod(0o600)
    cluster = group(3, etcdUser="root", etcdPasswordFile=str(password_file))
    cluster.wait_master(60, in_sync=3)
    with Producer(cluster.client_endpoints(), timeout_s=3.0) as producer:
        assert producer.send(TOPIC, b"with etcd auth").ok
    cluster.stop()
    for broker in cluster.brokers:
        assert password not in (broker.directory / "logs" / "broker.log").read_text()


def test_pop_consumption_continues_on_the_new_master_without_redelivering_acked_messages(group):
    cluster = group(3)
    old = cluster.wait_master(60, in_sync=3)
    with Producer(old.client_endpoint, timeout_s=5.0) as producer:
        for i in range(6):
            assert producer.send(TOPIC, f"m{i}".encode()).ok
    pop = Pop(old.client_endpoint, TOPIC, "pop-failover")
    try:
        received: list[pb.Message] = []
        assert poll_until(lambda: received.extend(pop.receive(invisible_s=3600)[1]) or len(received) == 6, 20)
        handles = {m.body: m.system_properties.receipt_handle for m in received}
        assert pop.ack(handles[b"m0"], handles[b"m1"], handles[b"m2"]).status.code == pb.OK
    finally:
        pop.close()
    old.kill()
    new = cluster.wait_master(30, not_=old)
    pop = Pop(new.client_endpoint, TOPIC, "pop-failover")
    try:
        # Nothing acked comes back, nothing in flight is visible early; the old master's handles work.
        assert pop.receive(wait_s=0.5) == (pb.MESSAGE_NOT_FOUND, [])
        assert pop.ack(handles[b"m3"]).status.code == pb.OK
        assert pop.change(handles[b"m4"], 1).status.code == pb.OK
        got: list[pb.Message] = []
        assert poll_until(lambda: got.extend(pop.receive(wait_s=2)[1]) or got, 20)
        assert [(m.body, m.system_properties.delivery_attempt) for m in got] == [(b"m4", 2)]
    finally:
        pop.close()


def test_transactions_continue_on_the_new_master(group):
    cluster = group(3, transactionTimeOut="1000", transactionCheckInterval="1000")
    old = cluster.wait_master(60, in_sync=3)
    tx = Transactions(old.client_endpoint)
    try:
        committed, open_one, ended_later = (tx.send_half(TOPIC, b) for b in (b"committed", b"open", b"ended-later"))
        assert all(e.status.code == pb.OK for e in (committed, open_one, ended_later))
        assert tx.end(TOPIC, committed, True).code == pb.OK
    finally:
        tx.close()
    old.kill()
    new = cluster.wait_master(30, not_=old)
    tx = Transactions(new.client_endpoint)
    producer = ProducerStream(new.client_endpoint, TOPIC)
    try:
        # The old master's transaction ids work; its outcome stands; what was open is asked about.
        assert tx.end(TOPIC, committed, False).code == pb.INVALID_TRANSACTION_ID
        assert tx.end(TOPIC, ended_later, True).code == pb.OK
        check = producer.checks.get(timeout=30)
        assert check.transaction_id == open_one.transaction_id and check.message.body == b"open"
        assert tx.end(TOPIC, open_one, False).code == pb.OK
    finally:
        producer.close()
        tx.close()
    with PullConsumer(new.client_endpoint, group="tx-failover") as consumer:
        bodies = sorted(m.body for q in consumer.queues(TOPIC) for m in consumer.pull(TOPIC, q, 0).messages)
    assert bodies == [b"committed", b"ended-later"]


def test_a_waiting_timer_fires_on_the_new_master(group):
    cluster = group(3)
    old = cluster.wait_master(60, in_sync=3)
    deliver_ms = time.time_ns() // 1_000_000 + 4_000
    send_at(old.client_endpoint, "FailoverTimer", b"timed", deliver_ms)
    old.kill()
    new = cluster.wait_master(30, not_=old)
    assert poll_until(lambda: visible(new.client_endpoint, "FailoverTimer"), 30), "the timer never fired"
    [(body, stored_ms)] = visible(new.client_endpoint, "FailoverTimer")
    assert body == b"timed" and stored_ms >= deliver_ms


OFFICIAL_ACROSS_FAILOVER = r"""
import json, os, sys, time
from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

endpoints, topic, group, ready_file, go_file = sys.argv[1:6]
config = ClientConfiguration(endpoints, Credentials(), request_timeout=5)
producer = Producer(config, (topic,))
producer.startup()
consumer = SimpleConsumer(config, group, {topic: FilterExpression("*")}, await_duration=2)
consumer.startup()


def send(body, deadline_s):
    deadline, errors = time.time() + deadline_s, 0
    while True:
        m = Message()
        m.topic, m.body = topic, body.encode()
        try:
            return producer.send(m).message_id, errors
        except Exception:
            errors += 1
            if time.time() > deadline:
                raise
            time.sleep(1)


def take(want, deadline_s, keep_unacked=0):
    got, deadline = [], time.time() + deadline_s
    while len(got) < want and time.time() < deadline:
        try:
            got += consumer.receive(16, 5)
        except Exception:
            time.sleep(1)
    for m in got[keep_unacked:]:
        consumer.ack(m)
    return [(m.body.decode(), m.delivery_attempt) for m in got]


out = {}
try:
    for i in range(4):
        send(f"m{i}", 30)
    out["before"] = take(4, 30, keep_unacked=2)
    open(ready_file, "w").close()
    deadline = time.time() + 120
    while not os.path.exists(go_file) and time.time() < deadline:
        time.sleep(0.1)
    out["send_errors"] = send("m4", 90)[1]
    out["after"] = take(3, 90)
finally:
    consumer.shutdown()
    producer.shutdown()
print(json.dumps(out))
"""


def test_official_clients_find_the_new_master_and_resume_without_redelivering_acked_messages(group, tmp_path):
    import json
    import subprocess

    from test_pop_consumption import OFFICIAL_PYTHON

    cluster = group(3)
    old = cluster.wait_master(60, in_sync=3)
    ready, go = tmp_path / "ready", tmp_path / "go"
    process = subprocess.Popen(
        [
            str(OFFICIAL_PYTHON),
            "-c",
            OFFICIAL_ACROSS_FAILOVER,
            cluster.client_endpoints(),
            TOPIC,
            "official",
            str(ready),
            str(go),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, HOME=str(tmp_path)),
    )
    try:
        assert poll_until(lambda: ready.exists() or process.poll() is not None, 90)
        assert process.poll() is None, process.communicate()
        old.kill()
        cluster.wait_master(60, not_=old)
        go.write_text("go")
        out, err = process.communicate(timeout=240)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err[-4000:]
    result = json.loads(out.strip().splitlines()[-1])
    before = dict(result["before"])
    assert sorted(before) == ["m0", "m1", "m2", "m3"] and set(before.values()) == {1}
    unacked = {body for body, _ in result["before"][:2]}
    after = dict(result["after"])
    # Only what was not acked comes back (with a later attempt), and the new send arrives once.
    assert sorted(after) == sorted(unacked | {"m4"}), result
    assert {after[b] for b in unacked} == {2} and after["m4"] == 1, result
