"""A body byte changed at rest in an old segment (below the start-up scan) of a broker's store:
the broker starts; pulls over gRPC and remoting stop at the damaged message with a clear status
and serve its neighbours; message queries refuse it; a fresh slave copies everything before it
and nothing from it on, and the master's status, metrics and logs say why (issue 30, item 10)."""

from __future__ import annotations

import asyncio
import json

import pytest
from support import flip_body_byte, run_cli, wait_until
from test_metrics import scrape, value

from client import AdminClient, BrokerError, Producer, PullConsumer, SendStatus
from client.remoting import AsyncRemotingPullConsumer

TOPIC = "Orders"
SEGMENT = 256 * 1024  # support.BROKER_TEST_SETTINGS's mappedFileSizeCommitLog
BATCH = 32
MESSAGES = 20 * BATCH  # 640 x 2 KiB: five segments, so that the first is below the start-up scan
DAMAGED = 5


def body(i: int) -> bytes:
    return f"message-{i:05d}|".encode().ljust(2048, b"x")


def pull_bodies(consumer: PullConsumer, offset: int, count: int) -> list[bytes]:
    return [m.body for m in consumer.pull(TOPIC, 0, offset, max_messages=count).messages]


async def remoting_pull(endpoint: str, offset: int):
    consumer = AsyncRemotingPullConsumer(endpoint, group="damage-remoting")
    try:
        return await consumer.pull(TOPIC, 0, offset, max_messages=4)
    finally:
        await consumer.close()


def test_a_damaged_old_record_is_neither_served_nor_replicated(make_cluster):
    cluster = make_cluster(
        master_role="ASYNC_MASTER", slaves=0, settings={"remotingListenPort": "0", "metricsPort": "0"}
    )
    master = cluster.master
    with Producer(master.client_endpoint) as producer:
        sent = [
            result
            for start in range(0, MESSAGES, BATCH)
            for result in producer.send_batch(TOPIC, [body(i) for i in range(start, start + BATCH)], queue_id=0)
        ]
    assert {r.status for r in sent} == {SendStatus.SEND_OK}
    assert [r.queue_offset for r in sent] == list(range(MESSAGES))
    damaged_at = sent[DAMAGED].commit_log_offset
    assert damaged_at < SEGMENT and sent[-1].commit_log_offset > 4 * SEGMENT

    assert master.stop() == 0
    flip_body_byte(master.store_dir / "commitlog", SEGMENT, damaged_at)
    master.restart()

    with PullConsumer(master.client_endpoint, group="damage-grpc") as consumer:
        # Everything before it, then the read stops there: never FOUND with its damaged body.
        page = consumer.pull(TOPIC, 0, 0, max_messages=32)
        assert [m.body for m in page.messages] == [body(i) for i in range(DAMAGED)]
        assert page.next_offset == DAMAGED
        with pytest.raises(BrokerError) as refused:
            consumer.pull(TOPIC, 0, DAMAGED, max_messages=32)
        assert refused.value.code_name == "MESSAGE_CORRUPTED"
        assert f"CommitLog offset {damaged_at} ({TOPIC}:0, queue offset {DAMAGED}) is damaged" in refused.value.message
        assert f"pull from offset {DAMAGED + 1} to go past it" in refused.value.message
        # Its neighbours are served.
        assert pull_bodies(consumer, DAMAGED + 1, 3) == [body(i) for i in range(DAMAGED + 1, DAMAGED + 4)]
        assert pull_bodies(consumer, MESSAGES - 1, 1) == [body(MESSAGES - 1)]

    with pytest.raises(BrokerError) as refused_remoting:
        asyncio.run(remoting_pull(master.remoting_endpoint, DAMAGED))
    assert refused_remoting.value.code_name == "SYSTEM_ERROR"
    assert refused_remoting.value.message.startswith("MESSAGE_CORRUPTED: ")
    assert [m.body for m in asyncio.run(remoting_pull(master.remoting_endpoint, DAMAGED + 1)).messages] == [
        body(i) for i in range(DAMAGED + 1, DAMAGED + 5)
    ]

    # A group whose offset the broker keeps stops at it too; the operator moves that one queue on.
    with PullConsumer(master.client_endpoint, group="damage-grpc") as consumer:
        consumer.update_offset(TOPIC, 0, DAMAGED)
        consumer.update_offset(TOPIC, 1, 0)
    at = ("--endpoint", master.client_endpoint, "--secret-file", str(cluster.secret_file))
    reset = ("consumer", "reset", *at, "--group", "damage-grpc", "--topic", TOPIC, "--to-offset", str(DAMAGED + 1))
    code, out = run_cli(*reset, "--queue", "0", "--execute", "--json")
    assert code == 0
    assert json.loads(out)["queues"] == [{"queue_id": 0, "old_offset": DAMAGED, "new_offset": DAMAGED + 1}]
    with PullConsumer(master.client_endpoint, group="damage-grpc") as consumer:
        assert (consumer.get_offset(TOPIC, 0), consumer.get_offset(TOPIC, 1)) == (DAMAGED + 1, 0)
    assert run_cli(*reset, "--queue", "4", "--json")[0] == 1  # Orders has queues 0..3

    with AdminClient(master.client_endpoint, cluster.admin_secret()) as admin:
        with pytest.raises(BrokerError) as by_offset:
            admin.query_message(commit_log_offset=damaged_at)
        assert by_offset.value.code_name == "DATA_LOSS"
        assert admin.query_message(commit_log_offset=sent[DAMAGED + 1].commit_log_offset)[0]["body"] == body(
            DAMAGED + 1
        )

    # A fresh slave copies the log up to the damaged record and stops there.
    slave = cluster.add_slave(1, wait_connected=False)

    def held() -> dict:
        with AdminClient(master.client_endpoint, cluster.admin_secret()) as admin:
            return dict(admin.status()["stats"]["damage"]["held_replication"])

    assert wait_until(held, what="the master to hold replication to slave 1") == {"1": damaged_at}
    with AdminClient(slave.client_endpoint, cluster.admin_secret()) as admin:
        slave_status = wait_until(
            lambda: (s := admin.status())["max_offset"] == damaged_at and "damaged" in s["replication_error"] and s,
            what="the slave to hold everything before the damaged record and name it",
        )
    assert f"CommitLog offset {damaged_at}" in slave_status["replication_error"]
    with PullConsumer(slave.client_endpoint, group="damage-slave") as consumer:
        # What it holds is served once its dispatcher has reached it.
        wait_until(
            lambda: pull_bodies(consumer, 0, 32) == [body(i) for i in range(DAMAGED)],
            what="the slave to serve the messages before the damaged one",
        )

    metrics = scrape(master.ready["metrics"])
    assert value(metrics, "rocketstore_damaged_records") == 1
    assert value(metrics, "rocketstore_replication_held_offset", slave_id="1") == damaged_at
    assert value(metrics, "rocketstore_damaged_record_refusals_total", reader="read") >= 2
    assert value(metrics, "rocketstore_damaged_record_refusals_total", reader="replication") >= 1

    code, out = run_cli("status", "--endpoint", master.client_endpoint, "--secret-file", str(cluster.secret_file))
    assert code == 1
    assert "DAMAGED RECORDS: 1" in out
    assert f"replication to slave 1 held at offset {damaged_at}" in out
    # Logged once for the operator, not once per refusal (the master's second run).
    assert master.tail(10_000).count("is damaged: body CRC mismatch; it is not") == 1
