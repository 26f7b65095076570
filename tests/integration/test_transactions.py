"""Transactional messages against real brokers: the official Python client's transactional
Producer commits, rolls back and answers check-backs; half messages stay invisible until
committed; transaction ids are verified; an open transaction survives a restart, and one nobody
answers is rolled back after transactionCheckMax checks."""

from __future__ import annotations

import json
import queue

from test_pop_consumption import run_official

from client import PullConsumer
from harness.local_cluster import poll_until
from transaction_support import ProducerStream, Transactions
from wire.rpc import messaging_pb2 as pb

# Check-backs a second after the send and every second after that (RocketMQ: 6 s, then 30 s).
FAST_CHECKS = {"transactionTimeOut": "1000", "transactionCheckInterval": "1000"}

TRANSACTIONAL_PRODUCER = r"""
import json, sys, threading, time
from rocketmq import (ClientConfiguration, Credentials, FilterExpression, Message, Producer,
                      SimpleConsumer, TransactionChecker, TransactionResolution)

endpoint, topic = sys.argv[1], sys.argv[2]
checked = []
answered = threading.Event()

class Checker(TransactionChecker):
    def check(self, message):
        body = message.body.decode()
        checked.append(body)
        if len(checked) >= 2:
            answered.set()
        return TransactionResolution.COMMIT if body == "checked-commit" else TransactionResolution.ROLLBACK

config = ClientConfiguration(endpoint, Credentials(), request_timeout=10)
producer = Producer(config, (topic,), Checker())
producer.startup()
sent = {}
try:
    for body in ("commit", "rollback", "checked-commit", "checked-rollback"):
        m = Message()
        m.topic, m.body, m.tag = topic, body.encode(), "tx"
        transaction = producer.begin_transaction()
        receipt = producer.send(m, transaction)
        sent[body] = receipt.message_id
        if body == "commit":
            transaction.commit()
        elif body == "rollback":
            transaction.rollback()
    # The last two stay open: the broker asks this producer about them.
    answered.wait(60)
    time.sleep(0.5)  # the checker's EndTransaction calls are asynchronous
finally:
    producer.shutdown()
consumer = SimpleConsumer(config, "tx-group", {topic: FilterExpression("*")}, await_duration=3)
consumer.startup()
got = []
try:
    deadline = time.time() + 30
    while len(got) < 2 and time.time() < deadline:
        for message in consumer.receive(16, 10):
            got.append((message.body.decode(), message.message_id))
            consumer.ack(message)
    for message in consumer.receive(16, 10):  # anything else visible would be a bug
        got.append((message.body.decode(), message.message_id))
finally:
    consumer.shutdown()
print(json.dumps({"sent": sent, "checked": sorted(set(checked)), "got": sorted(got)}))
"""


def test_official_transactional_producer_commits_rolls_back_and_answers_check_backs(make_cluster, tmp_path):
    cluster = make_cluster(master_role="SYNC_MASTER", flush_disk_type="SYNC_FLUSH", slaves=1, settings=FAST_CHECKS)
    out = json.loads(run_official(TRANSACTIONAL_PRODUCER, [cluster.master.client_endpoint, "TxTopic"], tmp_path))
    sent = out["sent"]
    assert out["checked"] == ["checked-commit", "checked-rollback"]
    # Only the committed ones are visible, once each, with the ids the producer was given.
    assert out["got"] == [["checked-commit", sent["checked-commit"]], ["commit", sent["commit"]]]
    # The slave holds the committed messages too (replicated like any other).
    slave = cluster.slave_brokers[0].client_endpoint
    with PullConsumer(slave, group="tx-reader") as consumer:
        bodies = sorted(m.body for q in consumer.queues("TxTopic") for m in consumer.pull("TxTopic", q, 0).messages)
    assert bodies == [b"checked-commit", b"commit"]


def _visible(endpoint: str, topic: str) -> list[bytes]:
    with PullConsumer(endpoint, group="tx-reader") as consumer:
        return sorted(m.body for q in consumer.queues(topic) for m in consumer.pull(topic, q, 0).messages)


def _rolled_back_by_broker(endpoint: str) -> bool:
    """Whether the op queue records a rollback after transactionCheckMax checks."""
    with PullConsumer(endpoint, group="tx-reader") as consumer:
        records = consumer.pull("RMQ_SYS_TRANS_OP_HALF_TOPIC", 0, 0).messages
    return any(e["k"] == "R" and e["s"] == "check-max" and not e["c"] for r in records for e in json.loads(r.body))


def test_transaction_ids_are_verified_and_an_end_is_final(make_cluster):
    cluster = make_cluster(master_role="SYNC_MASTER", flush_disk_type="SYNC_FLUSH", slaves=1)
    endpoint = cluster.master.client_endpoint
    tx = Transactions(endpoint)
    try:
        first, second = tx.send_half("EndTopic", b"first"), tx.send_half("EndTopic", b"second")
        assert first.status.code == pb.OK and first.transaction_id
        assert tx.end("EndTopic", first, True, transaction_id="not-an-id").code == pb.INVALID_TRANSACTION_ID
        # Another message's transaction id, or the right id under another topic, is refused.
        assert tx.end("EndTopic", first, True, transaction_id=second.transaction_id).code == pb.INVALID_TRANSACTION_ID
        assert tx.end("OtherTopic", first, True).code == pb.INVALID_TRANSACTION_ID
        assert _visible(endpoint, "EndTopic") == []
        assert tx.end("EndTopic", first, True).code == pb.OK
        assert tx.end("EndTopic", first, True).code == pb.OK  # a retried commit: done once
        undone = tx.end("EndTopic", first, False)
        assert undone.code == pb.INVALID_TRANSACTION_ID and "already committed" in undone.message
        assert tx.end("EndTopic", second, False).code == pb.OK
        assert tx.end("EndTopic", second, True).code == pb.INVALID_TRANSACTION_ID
        assert poll_until(lambda: _visible(endpoint, "EndTopic") == [b"first"], 10)
        # A slave does not end transactions: it relays the call to its master (proxy mode), which
        # answers it as above.
        on_slave = Transactions(cluster.slave_brokers[0].client_endpoint)
        try:
            assert on_slave.end("EndTopic", second, False).code == pb.OK  # a retried rollback
            assert on_slave.end("EndTopic", second, True).code == pb.INVALID_TRANSACTION_ID
        finally:
            on_slave.close()
    finally:
        tx.close()


def test_open_transactions_survive_a_restart_and_unanswered_ones_are_rolled_back(make_cluster):
    settings = dict(FAST_CHECKS, transactionCheckMax="2")
    cluster = make_cluster(master_role="ASYNC_MASTER", flush_disk_type="SYNC_FLUSH", slaves=0, settings=settings)
    master = cluster.master
    tx = Transactions(master.client_endpoint)
    try:
        committed, rolled, open_one = (tx.send_half("KeepTopic", b) for b in (b"committed", b"rolled", b"open"))
        assert tx.end("KeepTopic", committed, True).code == pb.OK
        assert tx.end("KeepTopic", rolled, False).code == pb.OK
    finally:
        tx.close()
    master.stop()
    master.start()
    tx = Transactions(master.client_endpoint)
    try:
        # The outcomes were kept: the other way is refused, the same way is done.
        assert tx.end("KeepTopic", committed, False).code == pb.INVALID_TRANSACTION_ID
        assert tx.end("KeepTopic", rolled, False).code == pb.OK
        # The open one is asked about, twice (transactionCheckMax), then rolled back.
        producer = ProducerStream(master.client_endpoint, "KeepTopic")
        try:
            asked = [producer.checks.get(timeout=20), producer.checks.get(timeout=20)]
            assert {c.transaction_id for c in asked} == {open_one.transaction_id}
            assert asked[0].message.body == b"open" and asked[0].message.topic.name == "KeepTopic"
            assert asked[0].message.system_properties.message_id == open_one.message_id
            assert poll_until(lambda: _rolled_back_by_broker(master.client_endpoint), 20), "not rolled back"
            assert tx.end("KeepTopic", open_one, True).code == pb.INVALID_TRANSACTION_ID
            try:
                extra = producer.checks.get(timeout=2.5)
            except queue.Empty:
                extra = None
            assert extra is None, "a rolled-back transaction was checked again"
        finally:
            producer.close()
        assert _visible(master.client_endpoint, "KeepTopic") == [b"committed"]
    finally:
        tx.close()
