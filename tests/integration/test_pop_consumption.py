"""Pop consumption (RocketMQ 5's SimpleConsumer and PushConsumer) against real brokers: the
official Python client receives, acks, changes invisible time, is redelivered to with a higher
attempt, and dead-letters through its PushConsumer; raw calls check receipt handles (forged and
stale ones are refused) and that the pop state survives a broker restart.

The official client runs in its own virtualenv (`.venv-rocketmq`, made by `make test`): its
generated stubs cannot share a process with ours.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from client import BrokerError, Producer, PullConsumer
from harness.local_cluster import poll_until
from pki_support import tls_broker_settings
from pop_support import Pop
from wire.rpc import messaging_pb2 as pb

REPO = Path(__file__).resolve().parents[2]
OFFICIAL_PYTHON = REPO / ".venv-rocketmq" / "bin" / "python"

SIMPLE_CONSUMER = r"""
import json, sys, time
from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

endpoint, topic, group = sys.argv[1], sys.argv[2], sys.argv[3]
config = ClientConfiguration(endpoint, Credentials(), request_timeout=10)
producer = Producer(config, (topic,))
producer.startup()
sent = []
try:
    for i in range(4):
        m = Message()
        m.topic, m.body, m.tag = topic, f"pop-{i}".encode(), "t"
        sent.append(producer.send(m).message_id)
finally:
    producer.shutdown()
consumer = SimpleConsumer(config, group, {topic: FilterExpression("*")}, await_duration=3)
consumer.startup()
out = {"sent": sent}
try:
    got = []
    deadline = time.time() + 30
    while len(got) < 4 and time.time() < deadline:
        got += consumer.receive(16, 2)
    out["first"] = [(m.message_id, m.delivery_attempt, m.body.decode()) for m in got]
    for m in got:
        if m.body == b"pop-0":
            pass  # not acked: it comes back when its 2 s are over
        elif m.body == b"pop-1":
            consumer.change_invisible_duration(m, 1)
        else:
            consumer.ack(m)
    again = []
    deadline = time.time() + 30
    while len(again) < 2 and time.time() < deadline:
        again += consumer.receive(16, 20)
    out["second"] = [(m.message_id, m.delivery_attempt, m.body.decode()) for m in again]
    for m in again:
        consumer.ack(m)
    out["third"] = [m.message_id for m in consumer.receive(16, 20)]
finally:
    consumer.shutdown()
print(json.dumps(out))
"""

_PUSH_HEAD = r"""
import json, os, sys, threading, time
from rocketmq import (ClientConfiguration, ConsumeResult, Credentials, FilterExpression, Message,
                      MessageListener, Producer, PushConsumer)

endpoint, topic, group, stop_file = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
config = ClientConfiguration(endpoint, Credentials(), request_timeout=10)
"""

# A PushConsumer whose listener records each delivery and answers `outcome(message)`, consuming
# until the stop file appears; it prints the deliveries once shutdown() returned.
_LISTEN_UNTIL_STOPPED = r"""
seen = []
lock = threading.Lock()

class Listener(MessageListener):
    def consume(self, message):
        with lock:
            seen.append((message.body.decode(), message.delivery_attempt))
        return outcome(message)

consumer = PushConsumer(config, group, Listener(), {topic: FilterExpression("*")})
consumer.startup()
deadline = time.time() + 120
try:
    while not os.path.exists(stop_file) and time.time() < deadline:
        time.sleep(0.1)
finally:
    consumer.shutdown()
print(json.dumps(seen))
"""

PUSH_CONSUMER = (
    _PUSH_HEAD
    + r"""
producer = Producer(config, (topic,))
producer.startup()
try:
    for body in ("good-0", "bad", "good-1"):
        m = Message()
        m.topic, m.body, m.tag = topic, body.encode(), "t"
        producer.send(m)
finally:
    producer.shutdown()

def outcome(message):
    return ConsumeResult.FAILURE if message.body == b"bad" else ConsumeResult.SUCCESS
"""
    + _LISTEN_UNTIL_STOPPED
)


def run_official(
    script: str, args: list[str], home: Path, timeout_s: float = 150, env: dict[str, str] | None = None
) -> str:
    assert OFFICIAL_PYTHON.exists(), f"{OFFICIAL_PYTHON} is missing: `make test` creates it"
    # The client writes its log under HOME and probes the local address; keep both in the test.
    done = subprocess.run(
        [str(OFFICIAL_PYTHON), "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=dict(os.environ, HOME=str(home), **(env or {})),
    )
    client_log = home / "logs" / "rocketmq_python" / "rocketmq_client.log"
    assert done.returncode == 0, done.stderr + (client_log.read_text()[-4000:] if client_log.exists() else "")
    return done.stdout.strip().splitlines()[-1]


def test_official_simple_consumer_receives_acks_changes_and_is_redelivered_to(make_cluster, tmp_path):
    cluster = make_cluster(master_role="SYNC_MASTER", flush_disk_type="SYNC_FLUSH", slaves=1)
    out = json.loads(run_official(SIMPLE_CONSUMER, [cluster.master.client_endpoint, "PopTopic", "pop-group"], tmp_path))
    first = {body: (msg_id, attempt) for msg_id, attempt, body in out["first"]}
    assert set(first) == {"pop-0", "pop-1", "pop-2", "pop-3"}
    assert {msg_id for msg_id, _ in first.values()} == set(out["sent"])
    assert all(attempt == 1 for _, attempt in first.values())
    # The unacked one and the one whose invisible time was shortened come back, one attempt up;
    # the acked ones never do.
    assert sorted((body, attempt) for _, attempt, body in out["second"]) == [("pop-0", 2), ("pop-1", 2)]
    assert out["third"] == []
    # The group's consumer offsets follow what is acked.
    with PullConsumer(cluster.master.client_endpoint, group="pop-group") as consumer:
        committed = sum(consumer.get_offset("PopTopic", q) for q in consumer.queues("PopTopic"))
    assert committed == 4


def read_dead_letters(endpoint: str, group: str) -> list:
    """What `group`'s dead-letter queue holds now (nothing before its first dead letter)."""
    dlq_topic = "%DLQ%" + group
    with PullConsumer(endpoint, group="dlq-reader") as consumer:
        try:
            return [m for q in consumer.queues(dlq_topic) for m in consumer.pull(dlq_topic, q, 0).messages]
        except BrokerError as exc:
            # The topic appears with the first dead letter. Until then its route is the one a
            # send would create it by (defaultTopicQueueNums queues), so when it appears
            # between the route and the pulls, with one queue, a later queue is out of range;
            # the next poll reads the new route.
            assert "does not exist" in str(exc) or "is out of range" in str(exc), exc
            return []


def test_official_push_consumer_retries_a_failing_message_then_dead_letters_it(make_cluster, tmp_path):
    # Three deliveries at most, one second apart (the consumers' backoff comes from the delay levels).
    settings = {"retryMaxTimes": "2", "messageDelayLevel": "1s 1s 1s 1s"}
    cluster = make_cluster(master_role="SYNC_MASTER", flush_disk_type="SYNC_FLUSH", slaves=1, settings=settings)
    endpoint = cluster.master.client_endpoint
    stop = tmp_path / "stop"
    process = subprocess.Popen(
        [str(OFFICIAL_PYTHON), "-c", PUSH_CONSUMER, endpoint, "PushTopic", "push-group", str(stop)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, HOME=str(tmp_path)),
    )

    def dead_letters() -> list:
        return read_dead_letters(endpoint, "push-group")

    try:
        assert poll_until(lambda: dead_letters() != [], 60), "nothing reached the dead-letter queue"
    finally:
        stop.write_text("stop")
        out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    seen = json.loads(out.strip().splitlines()[-1])
    assert sorted(a for body, a in seen if body == "bad") == [1, 2, 3]
    assert sorted(body for body, _ in seen if body != "bad") == ["good-0", "good-1"]
    [dead] = dead_letters()
    assert dead.body == b"bad"
    assert dead.properties["RETRY_TOPIC"] == "PushTopic"
    assert dead.reconsume_times == 3


def test_a_message_past_its_last_attempt_is_dead_lettered_with_no_consumer_receiving(make_cluster):
    """Issue 32 item 3: retries and dead letters happened only inside a receive, so with no consumer
    receiving, a message past its last attempt never reached %DLQ%<group>. The broker revives on
    its own schedule: the unacked delivery is dead-lettered once its invisible time runs out."""
    settings = {"retryMaxTimes": "0", "reviveInterval": "200"}
    cluster = make_cluster(master_role="SYNC_MASTER", flush_disk_type="SYNC_FLUSH", slaves=1, settings=settings)
    endpoint = cluster.master.client_endpoint
    with Producer(endpoint) as producer:
        assert producer.send("ReviveTopic", b"last-chance").ok
    pop = Pop(endpoint, "ReviveTopic", "revive-group")
    try:
        code, [only] = pop.receive(invisible_s=1)
        assert code == pb.OK and only.system_properties.delivery_attempt == 1
    finally:
        pop.close()  # no consumer receives from here on
    assert poll_until(lambda: read_dead_letters(endpoint, "revive-group") != [], 30), "no dead letter"
    [dead] = read_dead_letters(endpoint, "revive-group")
    assert dead.body == b"last-chance" and dead.properties["RETRY_TOPIC"] == "ReviveTopic"
    assert dead.reconsume_times == 1
    # Dead-lettered means done: the group's progress moves past it, and it is not received again.
    with PullConsumer(endpoint, group="revive-group") as consumer:
        queue_id = only.system_properties.queue_id
        assert poll_until(
            lambda: consumer.get_offset("ReviveTopic", queue_id) == only.system_properties.queue_offset + 1, 10
        )


SLOW_PUSH_CONSUMER = (
    _PUSH_HEAD
    + r"""
work_s = float(sys.argv[5])

def outcome(message):
    time.sleep(work_s)  # longer than the invisible time: only renewals keep it invisible
    return ConsumeResult.SUCCESS
"""
    + _LISTEN_UNTIL_STOPPED
)


def test_a_push_consumer_slower_than_the_invisible_time_gets_each_message_once(make_cluster, tmp_path):
    """Issue 32 item 1: auto_renew was ignored, so a listener slower than the invisible time saw
    its message delivered again and its ack refused; in a FIFO group the rest of the message group
    was never delivered and shutdown() hung. The broker renews auto-renew deliveries until acked."""
    settings = {
        "defaultInvisibleTimeMills": "2000",
        "renewSliceTimeMillis": "2000",
        "renewAheadTimeMillis": "1000",
        "fifoConsumerGroups": "slow-fifo",
    }
    cluster = make_cluster(master_role="ASYNC_MASTER", flush_disk_type="SYNC_FLUSH", slaves=0, settings=settings)
    endpoint = cluster.master.client_endpoint
    bodies = ["slow-0", "slow-1", "slow-2"]
    with Producer(endpoint) as producer:
        sent = [producer.send("SlowTopic", body.encode(), message_group="one", queue_id=0) for body in bodies]
    assert all(s.ok for s in sent)
    for group in ("slow-fifo", "slow-plain"):
        stop = tmp_path / f"stop-{group}"
        process = subprocess.Popen(
            [str(OFFICIAL_PYTHON), "-c", SLOW_PUSH_CONSUMER, endpoint, "SlowTopic", group, str(stop), "3"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ, HOME=str(tmp_path / group)),
        )
        try:
            with PullConsumer(endpoint, group=group) as consumer:
                # Every message acked (the acks were accepted): the group's offset is past them all.
                assert poll_until(lambda: consumer.get_offset("SlowTopic", 0) == len(bodies), 90), group
        finally:
            stop.write_text("stop")
            out, err = process.communicate(timeout=60)  # shutdown() returns
        assert process.returncode == 0, err
        seen = [tuple(d) for d in json.loads(out.strip().splitlines()[-1])]
        assert sorted(seen) == [(body, 1) for body in bodies], (group, seen)  # once each, never again
        if group == "slow-fifo":
            assert seen == [(body, 1) for body in bodies]


def test_an_official_push_consumer_drains_a_fifo_backlog_in_order_once_each(make_cluster, tmp_path):
    """Issue 32 item 2, as the official FIFO PushConsumer sees it: a 30-message backlog in one
    message group is delivered in order, each message once, and every ack is accepted. (That an
    ack wakes the receive waiting for the group's next message, rather than the long poll running
    out, is asserted on the wire by test_messaging_api's
    test_an_ack_wakes_a_receive_waiting_for_the_next_message_of_its_fifo_group: this client's
    receive pattern does not let a deadline tell the two apart reliably.)"""
    cluster = make_cluster(
        master_role="ASYNC_MASTER", flush_disk_type="SYNC_FLUSH", slaves=0, settings={"fifoConsumerGroups": "backlog"}
    )
    endpoint = cluster.master.client_endpoint
    bodies = [f"b{i:02d}" for i in range(30)]
    with Producer(endpoint) as producer:
        assert all(producer.send("Backlog", b.encode(), message_group="one", queue_id=0).ok for b in bodies)
    stop = tmp_path / "stop"
    args = [endpoint, "Backlog", "backlog", str(stop), "0"]
    process = subprocess.Popen(
        [str(OFFICIAL_PYTHON), "-c", SLOW_PUSH_CONSUMER, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, HOME=str(tmp_path)),
    )
    try:
        with PullConsumer(endpoint, group="backlog") as consumer:
            assert poll_until(lambda: consumer.get_offset("Backlog", 0) == len(bodies), 150), "the backlog stalled"
    finally:
        stop.write_text("stop")
        out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert [tuple(d) for d in json.loads(out.strip().splitlines()[-1])] == [(b, 1) for b in bodies]


def test_forged_and_stale_receipt_handles_are_refused(make_cluster):
    cluster = make_cluster(master_role="SYNC_MASTER", flush_disk_type="SYNC_FLUSH", slaves=1)
    endpoint = cluster.master.client_endpoint
    with Producer(endpoint) as producer:
        assert producer.send("HandleTopic", b"one").ok
    pop = Pop(endpoint, "HandleTopic", "handles")
    try:
        code, [message] = pop.receive()
        assert code == pb.OK
        handle = message.system_properties.receipt_handle
        assert message.system_properties.delivery_attempt == 1
        queue_id, offset, token, until, signature = handle.split(".")
        forged = ".".join((queue_id, offset, str(int(token) + 1), until, signature))
        assert pop.ack(forged).entries[0].status.code == pb.INVALID_RECEIPT_HANDLE
        # Issue 30: a non-ASCII handle was an INTERNAL_ERROR (compare_digest's TypeError).
        for bad in (handle[:-1] + "é", handle.replace(".", "\u0661", 1)):
            assert pop.ack(bad).entries[0].status.code == pb.INVALID_RECEIPT_HANDLE
            assert pop.change(bad, 60).status.code == pb.INVALID_RECEIPT_HANDLE
            assert pop.forward_to_dead_letter(bad).status.code == pb.INVALID_RECEIPT_HANDLE
        assert Pop(endpoint, "HandleTopic", "other-group").ack(handle).status.code == pb.INVALID_RECEIPT_HANDLE
        changed = pop.change(handle, 60)
        assert changed.status.code == pb.OK and changed.receipt_handle != handle
        stale = pop.ack(handle)
        assert stale.status.code == pb.INVALID_RECEIPT_HANDLE and "stale" in stale.status.message
        assert pop.ack(changed.receipt_handle).status.code == pb.OK
        assert pop.ack(changed.receipt_handle).status.code == pb.OK  # a repeated ack is harmless
        code, none = pop.receive(wait_s=0.2)
        assert (code, none) == (pb.MESSAGE_NOT_FOUND, [])
    finally:
        pop.close()
    # A slave does not decide pop state: it relays pop calls to its master (proxy mode), which
    # answers them as it answered them above.
    on_slave = Pop(cluster.slave_brokers[0].client_endpoint, "HandleTopic", "handles")
    try:
        assert on_slave.receive(wait_s=0.2)[0] == pb.MESSAGE_NOT_FOUND
        assert on_slave.ack(changed.receipt_handle).status.code == pb.OK  # acked already: harmless
        assert on_slave.ack(forged).entries[0].status.code == pb.INVALID_RECEIPT_HANDLE
    finally:
        on_slave.close()


def test_pop_state_survives_a_broker_restart(make_cluster):
    cluster = make_cluster(master_role="ASYNC_MASTER", flush_disk_type="SYNC_FLUSH", slaves=0)
    master = cluster.master
    with Producer(master.client_endpoint) as producer:
        for i in range(6):
            assert producer.send("RestartTopic", f"m{i}".encode()).ok
    pop = Pop(master.client_endpoint, "RestartTopic", "restart-group")
    try:
        received = []
        assert poll_until(lambda: received.extend(pop.receive(invisible_s=3600)[1]) or len(received) == 6, 20)
        by_body = {m.body: m.system_properties.receipt_handle for m in received}
        assert pop.ack(by_body[b"m0"], by_body[b"m1"], by_body[b"m2"]).status.code == pb.OK
    finally:
        pop.close()
    master.stop()
    master.start()
    pop = Pop(master.client_endpoint, "RestartTopic", "restart-group")
    try:
        # Acked ones never come back; the others are still invisible (an hour), so nothing is due.
        assert pop.receive(wait_s=0.5) == (pb.MESSAGE_NOT_FOUND, [])
        # Handles given out before the restart still work: ack one, bring one back now.
        assert pop.ack(by_body[b"m3"]).status.code == pb.OK
        changed = pop.change(by_body[b"m4"], 1)
        assert changed.status.code == pb.OK
        got: list[pb.Message] = []
        assert poll_until(lambda: got.extend(pop.receive(wait_s=2)[1]) or got, 20)
        assert [(m.body, m.system_properties.delivery_attempt) for m in got] == [(b"m4", 2)]
        assert pop.ack(got[0].system_properties.receipt_handle, by_body[b"m5"]).status.code == pb.OK
        assert pop.receive(wait_s=0.2) == (pb.MESSAGE_NOT_FOUND, [])
    finally:
        pop.close()


TLS_ROUND_TRIP = r"""
import json, sys
from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

endpoint, topic = sys.argv[1], sys.argv[2]
config = ClientConfiguration(endpoint, Credentials(), request_timeout=10)
producer = Producer(config, (topic,), tls_enable=True)
producer.startup()
try:
    m = Message()
    m.topic, m.body = topic, b"over TLS"
    sent = producer.send(m).message_id
finally:
    producer.shutdown()
consumer = SimpleConsumer(config, "tls-group", {topic: FilterExpression("*")}, await_duration=3, tls_enable=True)
consumer.startup()
try:
    got = consumer.receive(16, 10)
    for message in got:
        consumer.ack(message)
finally:
    consumer.shutdown()
print(json.dumps({"sent": sent, "got": [(m.message_id, m.body.decode()) for m in got]}))
"""


def test_official_client_produces_and_consumes_over_tls(make_cluster, tmp_path):
    pki = tmp_path / "pki"
    settings = tls_broker_settings(pki)
    # No slave: the harness checks a slave's connection through the admin API in the clear.
    cluster = make_cluster(master_role="ASYNC_MASTER", flush_disk_type="SYNC_FLUSH", slaves=0, settings=settings)
    # The official client trusts the system roots only; gRPC reads this variable instead.
    env = {"GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(pki / "ca.crt")}
    out = json.loads(run_official(TLS_ROUND_TRIP, [cluster.master.client_endpoint, "TlsTopic"], tmp_path, env=env))
    assert out["got"] == [[out["sent"], "over TLS"]]


FIFO_CONSUMER = r"""
import json, sys, time
from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

endpoint, topic, group = sys.argv[1], sys.argv[2], sys.argv[3]
config = ClientConfiguration(endpoint, Credentials(), request_timeout=10)
producer = Producer(config, (topic,))
producer.startup()
try:
    for body in ("A1", "B1", "A2", "B2", "A3"):
        m = Message()
        m.topic, m.body, m.message_group = topic, body.encode(), body[0]
        producer.send(m)
finally:
    producer.shutdown()
consumer = SimpleConsumer(config, group, {topic: FilterExpression("*")}, await_duration=3)
consumer.startup()
deliveries, violations, acked, unacked = [], [], set(), {}
try:
    deadline = time.time() + 60
    while len(acked) < 5 and time.time() < deadline:
        for m in consumer.receive(16, 2):
            body = m.body.decode()
            deliveries.append((body, m.delivery_attempt))
            if m.message_group in unacked and unacked[m.message_group] != body:
                violations.append(f"{body} delivered while {unacked[m.message_group]} is not acked")
            if body == "A1" and m.delivery_attempt == 1:
                unacked["A"] = body  # left to come back when its 2 s are over
                continue
            consumer.ack(m)
            unacked.pop(m.message_group, None)
            acked.add(body)
finally:
    consumer.shutdown()
print(json.dumps({"deliveries": deliveries, "violations": violations}))
"""


def test_official_simple_consumer_of_a_fifo_group_gets_each_message_group_in_order(make_cluster, tmp_path):
    settings = {"fifoConsumerGroups": "fifo-group"}
    cluster = make_cluster(master_role="SYNC_MASTER", flush_disk_type="SYNC_FLUSH", slaves=1, settings=settings)
    out = json.loads(run_official(FIFO_CONSUMER, [cluster.master.client_endpoint, "FifoTopic", "fifo-group"], tmp_path))
    assert out["violations"] == []
    deliveries = [tuple(d) for d in out["deliveries"]]
    # The unacked A1 comes back before A2 and A3; B is unaffected by A's retry.
    assert [d for d in deliveries if d[0].startswith("A")] == [("A1", 1), ("A1", 2), ("A2", 1), ("A3", 1)]
    assert [d for d in deliveries if d[0].startswith("B")] == [("B1", 1), ("B2", 1)]


def test_a_redelivery_comes_back_through_the_groups_retry_topic(make_cluster):
    cluster = make_cluster(master_role="SYNC_MASTER", flush_disk_type="SYNC_FLUSH", slaves=1)
    endpoint = cluster.master.client_endpoint
    with Producer(endpoint) as producer:
        sent = producer.send("RetryTopic", b"again", keys=["k1"])
        assert sent.ok
    retry = "%RETRY%retry-group_RetryTopic"
    pop = Pop(endpoint, "RetryTopic", "retry-group")
    try:
        code, [first] = pop.receive(invisible_s=1)
        assert code == pb.OK and first.system_properties.delivery_attempt == 1
        # Not acked within its second: it is put into the group's retry topic and comes from there.
        got: list[pb.Message] = []
        assert poll_until(lambda: got.extend(pop.receive(invisible_s=60, wait_s=2)[1]) or got, 20)
        [again] = got
        assert again.topic.name == "RetryTopic" and again.body == b"again"
        assert again.system_properties.message_id == first.system_properties.message_id
        assert again.system_properties.delivery_attempt == 2
        # The first handle is stale now; the new one acks.
        stale = pop.ack(first.system_properties.receipt_handle)
        assert stale.status.code == pb.INVALID_RECEIPT_HANDLE and "retry topic" in stale.status.message
        changed = pop.change(again.system_properties.receipt_handle, 60)
        assert changed.status.code == pb.OK
        assert pop.ack(changed.receipt_handle).status.code == pb.OK
        assert pop.receive(wait_s=0.2) == (pb.MESSAGE_NOT_FOUND, [])
    finally:
        pop.close()
    # The retry topic is an ordinary topic to operators and other consumers.
    from client import AdminClient

    with AdminClient(endpoint, cluster.admin_secret()) as admin:
        assert retry in {t["name"] for t in admin.list_topics()}
    with PullConsumer(endpoint, group="retry-reader") as consumer:
        [copy] = consumer.pull(retry, 0, 0).messages
    assert copy.body == b"again" and copy.reconsume_times == 1
    assert copy.properties["RETRY_TOPIC"] == "RetryTopic" and copy.keys == ("k1",)
    # The group's progress in the retry topic is kept like any other.
    with PullConsumer(endpoint, group="retry-group") as consumer:
        assert consumer.get_offset(retry, 0) == 1


def test_redeliveries_across_many_groups_and_topics_stay_within_the_retry_topic_limits(make_cluster):
    """Issue 30: pop retry and dead-letter topics bypassed the auto-creation limits (2,642 topics
    in 60 s). They have limits of their own now; a redelivery they refuse comes back in place, a
    dead letter they refuse waits in flight, and nothing is lost."""
    from test_metrics import scrape, value

    from client import AdminClient

    settings = {
        "autoCreateRetryTopicMaxTopics": "2",
        "autoCreateRetryTopicPerMinute": "600",
        "retryMaxTimes": "1",  # a second unacked delivery is the last: then the dead-letter topic
        "metricsPort": "0",
    }
    cluster = make_cluster(master_role="ASYNC_MASTER", flush_disk_type="ASYNC_FLUSH", slaves=0, settings=settings)
    endpoint = cluster.master.client_endpoint
    topics, groups = ["LimitA", "LimitB", "LimitC"], ["lim-g0", "lim-g1"]
    with Producer(endpoint) as producer:
        assert all(producer.send(topic, topic.encode()).ok for topic in topics)
    pops = {(g, t): Pop(endpoint, t, g) for g in groups for t in topics}
    try:

        def deliveries(pop: Pop) -> list[pb.Message]:
            got: list[pb.Message] = []
            poll_until(lambda: got.extend(pop.receive(invisible_s=1, wait_s=1)[1]) or got, 30)
            return got

        first = {pair: deliveries(pop) for pair, pop in pops.items()}
        assert all([m.system_properties.delivery_attempt for m in got] == [1] for got in first.values())
        # None acked: each comes back once, through a retry topic while the limit allows, in place after.
        again = {pair: deliveries(pop) for pair, pop in pops.items()}
        for (group, topic), got in again.items():
            assert [(m.body, m.system_properties.delivery_attempt) for m in got] == [(topic.encode(), 2)], group
        with AdminClient(endpoint, cluster.admin_secret()) as admin:
            made = sorted(t["name"] for t in admin.list_topics() if t["name"].startswith(("%RETRY%", "%DLQ%")))
            assert len(made) == 2 and all(name.startswith("%RETRY%") for name in made), made
            # Past their last attempt the messages are due for dead-lettering, which the limit
            # refuses too: they wait in flight, and nothing comes out meanwhile.
            assert all(pop.receive(invisible_s=1, wait_s=1.5) == (pb.MESSAGE_NOT_FOUND, []) for pop in pops.values())
            samples = scrape(cluster.master.ready["metrics"])
            refused = value(
                samples, "rocketstore_topic_auto_create_refusals_total", limit="autoCreateRetryTopicMaxTopics"
            )
            assert refused >= 4 + 2  # four retry topics, at least one try per group's dead-letter topic
            admin.set_broker_config({"autoCreateRetryTopicMaxTopics": "10"})
            # Raised: the waiting messages are dead-lettered within their postponement (the
            # receive's 1 s, or the broker's revive round's 5 s).
            dead = {g: [] for g in groups}

            def dead_lettered() -> bool:
                for pop in pops.values():
                    pop.receive(invisible_s=1, wait_s=0.2)
                for group in groups:
                    with PullConsumer(endpoint, group="dlq-reader") as consumer:
                        topic_names = {t["name"] for t in admin.list_topics()}
                        if f"%DLQ%{group}" in topic_names:
                            dead[group] = consumer.pull(f"%DLQ%{group}", 0, 0, max_messages=32).messages
                return all(len(messages) == len(topics) for messages in dead.values())

            assert poll_until(dead_lettered, 30, max_delay_s=0.5), dead
        for group, messages in dead.items():
            expected = [(t.encode(), t) for t in topics]
            assert sorted((m.body, m.properties["RETRY_TOPIC"]) for m in messages) == expected, group
    finally:
        for pop in pops.values():
            pop.close()
