"""The operator's admin commands (`rocketstore topic|consumer|message|config`) run in-process against
a real SYNC_MASTER and its slave on 127.0.0.1: topics created with separate read and write
queues, described and deleted; a consumer group's lag after a partial consume; offsets reset by
time (a dry run first); messages looked up by key, by both forms of message id and by offset; the
config read (secrets hidden) and changed live."""

from __future__ import annotations

import base64
import io
import json
import sys
import time

import pytest

from client import BrokerError, Producer, PullConsumer, SendStatus
from pop_support import Pop
from support import cli, cli_json, wait_until

TOPIC = "AdminTopic"
GROUP = "admin-group"


@pytest.fixture
def cluster(admin_cluster):
    return admin_cluster


def test_topic_create_describe_and_delete(cluster, capsys):
    master, slave = cluster.master, cluster.slave_brokers[0]
    at = ("--endpoint", master.client_endpoint)
    spec = cli_json(
        capsys, "topic", "create", *at, "--topic", TOPIC, "--read-queues", "4", "--write-queues", "2", "--order"
    )
    assert (spec["read_queue_nums"], spec["write_queue_nums"], spec["order"]) == (4, 2, True)
    listed = {t["name"]: t for t in cli_json(capsys, "topic", "list", *at)}
    assert listed[TOPIC]["order"] is True

    with Producer(master.client_endpoint) as producer:
        sent = [producer.send(TOPIC, f"m{i}".encode(), queue_id=i % 2) for i in range(6)]
    assert {r.status for r in sent} == {SendStatus.SEND_OK}
    described = cli_json(capsys, "topic", "describe", *at, "--topic", TOPIC)
    assert described["role"] == "SYNC_MASTER" and described["master_client_endpoint"] == master.client_endpoint
    queues = {q["queue_id"]: q for q in described["queues"]}
    assert sorted(queues) == [0, 1, 2, 3]
    assert [(queues[q]["min_offset"], queues[q]["max_offset"]) for q in range(4)] == [(0, 3), (0, 3), (0, 0), (0, 0)]
    assert queues[0]["last_store_timestamp_ms"] > 0 and queues[2]["last_store_timestamp_ms"] == 0
    code, out, _ = cli(capsys, "topic", "describe", *at, "--topic", TOPIC)
    assert code == 0 and "last stored (UTC)" in out and "ordered" in out

    # A slave describes the topic too, once it copied the topic table, and names its master.
    on_slave = wait_until(
        lambda: (
            (a := cli(capsys, "topic", "describe", "--endpoint", slave.client_endpoint, "--topic", TOPIC, "--json"))
            and a[0] == 0
            and json.loads(a[1])
        ),
        timeout_s=20,
    )
    assert on_slave["role"] == "SLAVE" and on_slave["master_client_endpoint"] == master.client_endpoint
    # ... but does not delete it.
    code, _, err = cli(capsys, "topic", "delete", "--endpoint", slave.client_endpoint, "--topic", TOPIC, "--yes")
    assert code == 1 and "not master" in err and master.client_endpoint in err

    with PullConsumer(master.client_endpoint, group=GROUP) as consumer:
        consumer.update_offset(TOPIC, 0, 2)
    code, out, _ = cli(capsys, "topic", "delete", *at, "--topic", TOPIC)
    assert code == 0 and "Dry run" in out and "6 messages" in out
    assert TOPIC in {t["name"] for t in cli_json(capsys, "topic", "list", *at)}
    deleted = cli_json(capsys, "topic", "delete", *at, "--topic", TOPIC, "--yes")
    assert deleted == {"deleted": TOPIC, "groups": [GROUP]}
    code, _, err = cli(capsys, "topic", "describe", *at, "--topic", TOPIC)
    assert code == 1 and f"topic {TOPIC} does not exist" in err
    code, _, err = cli(capsys, "topic", "delete", *at, "--topic", "RS_SYS_POP_STATE", "--yes")
    assert code == 1 and ("system topic" in err or "does not exist" in err)


def test_consumer_progress_and_reset_by_time(cluster, capsys):
    master = cluster.master
    at = ("--endpoint", master.client_endpoint)
    cli_json(capsys, "topic", "create", *at, "--topic", TOPIC, "--queues", "2")
    with Producer(master.client_endpoint) as producer:
        first = [producer.send(TOPIC, f"a{i}".encode(), queue_id=i % 2) for i in range(10)]
        last_first = cli_json(capsys, "message", "query", *at, "--offset", str(first[-1].commit_log_offset))[0]
        # The second batch is stored in a later millisecond than every message of the first.
        wait_until(lambda: time.time() * 1000 > last_first["store_timestamp_ms"] + 1, timeout_s=5)
        second = [producer.send(TOPIC, f"b{i}".encode(), queue_id=i % 2) for i in range(6)]
    assert all(r.ok for r in first + second)

    code, _, err = cli(capsys, "consumer", "progress", *at, "--group", GROUP)
    assert code == 1 and f"consumer group {GROUP} has no offsets" in err
    # A partial consume: 4 of queue 0's 8 messages, none of queue 1's.
    with PullConsumer(master.client_endpoint, group=GROUP) as consumer:
        page = consumer.pull(TOPIC, 0, 0, max_messages=4)
        consumer.update_offset(TOPIC, 0, len(page.messages))
    progress = {q["queue_id"]: q for q in cli_json(capsys, "consumer", "progress", *at, "--group", GROUP)["queues"]}
    assert [(progress[q]["broker_offset"], progress[q]["consumer_offset"], progress[q]["lag"]) for q in (0, 1)] == [
        (8, 4, 4),
        (8, -1, 8),
    ]
    assert progress[0]["last_consume_timestamp_ms"] == page.messages[-1].store_timestamp_ms
    assert progress[1]["last_consume_timestamp_ms"] == 0
    code, out, _ = cli(capsys, "consumer", "progress", *at, "--group", GROUP, "--topic", TOPIC)
    assert code == 0 and "total lag: 12" in out

    when = str(last_first["store_timestamp_ms"] + 1)
    plan = cli_json(capsys, "consumer", "reset", *at, "--group", GROUP, "--topic", TOPIC, "--to-time", when)
    assert plan["applied"] is False
    assert [(q["queue_id"], q["old_offset"], q["new_offset"]) for q in plan["queues"]] == [(0, 4, 5), (1, -1, 5)]
    # The dry run changed nothing.
    assert cli_json(capsys, "consumer", "progress", *at, "--group", GROUP)["queues"][0]["consumer_offset"] == 4
    done = cli_json(
        capsys, "consumer", "reset", *at, "--group", GROUP, "--topic", TOPIC, "--to-time", when, "--execute"
    )
    assert done["applied"] is True
    progress = cli_json(capsys, "consumer", "progress", *at, "--group", GROUP)["queues"]
    assert [(q["consumer_offset"], q["lag"]) for q in progress] == [(5, 3), (5, 3)]
    with PullConsumer(master.client_endpoint, group=GROUP) as consumer:
        resumed = consumer.pull(TOPIC, 0, consumer.get_offset(TOPIC, 0), max_messages=10)
    assert [m.body for m in resumed.messages] == [b"b0", b"b2", b"b4"]

    for target, expected in (("--to-earliest", [0, 0]), ("--to-latest", [8, 8])):
        answer = cli_json(capsys, "consumer", "reset", *at, "--group", GROUP, "--topic", TOPIC, target, "--execute")
        assert [q["new_offset"] for q in answer["queues"]] == expected
    answer = cli_json(capsys, "consumer", "reset", *at, "--group", GROUP, "--topic", TOPIC, "--to-offset", "99")
    assert [q["new_offset"] for q in answer["queues"]] == [8, 8]
    code, out, _ = cli(capsys, "consumer", "reset", *at, "--group", GROUP, "--topic", TOPIC, "--to-earliest")
    assert code == 0 and "Dry run; nothing changed" in out
    code, _, err = cli(capsys, "consumer", "reset", *at, "--group", GROUP, "--topic", TOPIC)
    assert code == 2 and "one of the arguments --to-time --to-offset --to-earliest --to-latest is required" in err
    code, _, err = cli(capsys, "consumer", "reset", *at, "--group", GROUP, "--topic", TOPIC, "--to-time", "yesterday")
    assert code == 2 and "ISO 8601" in err


def test_message_query_by_key_both_ids_and_offset(cluster, capsys):
    master = cluster.master
    at = ("--endpoint", master.client_endpoint)
    with Producer(master.client_endpoint) as producer:
        producer.send(TOPIC, b"other", keys="order-2")
        sent = producer.send(TOPIC, b"the body", keys=["order-1", "customer-9"], tag="paid", properties={"a": "b"})
    by_offset = cli_json(capsys, "message", "query", *at, "--offset", str(sent.commit_log_offset))
    assert len(by_offset) == 1
    found = by_offset[0]
    assert found["client_msg_id"] == sent.msg_id and found["tags"] == "paid" and found["properties"]["a"] == "b"
    assert found["keys"] == "order-1 customer-9" and found["body_base64"] == "dGhlIGJvZHk="
    assert found["offset_msg_id"] != sent.msg_id and found["store_host"].endswith(master.client_endpoint.split(":")[1])

    for argv in (
        ("--key", "order-1", "--topic", TOPIC),
        ("--key", "customer-9", "--topic", TOPIC),
        ("--id", found["offset_msg_id"]),
        ("--id", sent.msg_id),
        ("--id", sent.msg_id.lower(), "--topic", TOPIC),
    ):
        answer = cli_json(capsys, "message", "query", *at, *argv)
        assert [m["commit_log_offset"] for m in answer] == [sent.commit_log_offset], argv
    code, out, _ = cli(capsys, "message", "query", *at, "--key", "order-1", "--topic", TOPIC)
    assert code == 0 and "body the body" in out and sent.msg_id in out
    code, _, err = cli(capsys, "message", "query", *at, "--key", "nobody", "--topic", TOPIC)
    assert code == 1 and "no message found" in err
    code, _, err = cli(capsys, "message", "query", *at, "--key", "order-1")
    assert code == 2 and "--key needs --topic" in err
    code, _, err = cli(capsys, "message", "query", *at, "--offset", "3")
    assert code == 1 and "no message at offset 3" in err


def test_config_get_hides_secrets_and_set_changes_live_keys(cluster, capsys):
    master = cluster.master
    at = ("--endpoint", master.client_endpoint)
    entries = {e["key"]: e for e in cli_json(capsys, "config", "get", *at)}
    assert entries["brokerRole"]["value"] == "SYNC_MASTER" and not entries["brokerRole"]["changeable"]
    assert entries["autoCreateTopicEnable"]["changeable"]
    secret = cluster.admin_secret().decode()
    assert all(secret not in e["value"] for e in entries.values())
    assert entries["haSecretFile"]["value"].endswith("secret")
    # `broker config` is the same command.
    one = cli_json(capsys, "broker", "config", "get", *at, "--key", "flushDiskType")
    assert one == [{"key": "flushDiskType", "value": "SYNC_FLUSH", "changeable": False, "configured_value": ""}]
    code, _, err = cli(capsys, "config", "get", *at, "--key", "flushDiskTyp")
    assert code == 1 and "unknown key: flushDiskTyp (did you mean flushDiskType?)" in err

    changed = cli_json(capsys, "config", "set", *at, "autoCreateTopicEnable=false", "fileReservedTime=24")
    assert {e["key"]: e["value"] for e in changed} == {"autoCreateTopicEnable": "false", "fileReservedTime": "24"}
    with Producer(master.client_endpoint) as producer, pytest.raises(BrokerError, match="autoCreateTopicEnable"):
        producer.send("NeverCreated", b"x")
    code, _, err = cli(capsys, "config", "set", *at, "brokerRole=SLAVE")
    assert code == 1 and "not changeable on a running broker" in err and "autoCreateTopicEnable" in err
    code, _, err = cli(capsys, "config", "set", *at, "fileReservedTime=soon")
    assert code == 1 and "fileReservedTime" in err
    code, _, err = cli(capsys, "config", "set", *at, "novalue")
    assert code == 2 and "expected KEY=VALUE" in err
    cli_json(capsys, "config", "set", *at, "autoCreateTopicEnable=true")
    with Producer(master.client_endpoint) as producer:
        assert producer.send("NowCreated", b"x").ok


def test_produce_sends_real_messages_and_stops_on_a_repeated_refusal(cluster, capsys, monkeypatch):
    master = cluster.master
    at = ("--endpoint", master.client_endpoint)
    summary = cli_json(
        capsys,
        "produce", *at, "--topic", TOPIC, "--body", "hello, broker", "--keys", "k1,k2",
        "--tag", "greeting", "--property", "origin=cli", "--property", "n=1",
    )  # fmt: skip
    assert summary["count"] == 1 and summary["statuses"] == {"SEND_OK": 1} and summary["ok"]
    # SEND_OK comes once the message is stored; the key index follows when it is dispatched.
    [found] = wait_until(
        lambda: (
            (a := cli(capsys, "message", "query", *at, "--key", "k2", "--topic", TOPIC, "--json"))[0] == 0
            and json.loads(a[1])
        ),
        timeout_s=20,
        what="the message to be found by its key",
    )
    assert base64.b64decode(found["body_base64"]) == b"hello, broker"
    assert (found["tags"], found["keys"]) == ("greeting", "k1 k2")
    assert found["properties"]["origin"] == "cli" and found["properties"]["n"] == "1"

    monkeypatch.setattr(sys, "stdin", io.StringIO("first line\nsecond line\r\n\nlast\n"))
    summary = cli_json(capsys, "produce", *at, "--topic", "Lines", "--stdin", "--queue", "0")
    assert summary["count"] == 3 and summary["statuses"] == {"SEND_OK": 3}
    with PullConsumer(master.client_endpoint) as consumer:
        page = consumer.pull("Lines", 0, 0, max_messages=10)
    assert [m.body for m in page.messages] == [b"first line", b"second line", b"last"]

    cli_json(capsys, "config", "set", *at, "autoCreateTopicEnable=false")
    code, out, _ = cli(capsys, "produce", *at, "--topic", "Unknown", "--count", "500", "--concurrency", "4")
    assert code == 1
    assert "the first 10 answers were all TOPIC_NOT_FOUND, so the rest would be too" in out
    assert "autoCreateTopicEnable is false" in out  # the broker's own words
    sent = sum(int(line.split()[-1]) for line in out.splitlines() if line.strip().startswith("error "))
    assert sent < 500


def test_a_reset_of_a_group_that_consumes_by_pop_is_refused(cluster, capsys):
    master = cluster.master
    at = ("--endpoint", master.client_endpoint)
    with Producer(master.client_endpoint) as producer:
        assert producer.send(TOPIC, b"popped").ok
    pop = Pop(master.client_endpoint, TOPIC, "pop-group")
    try:
        _, messages = pop.receive(batch=1)
        assert [m.body for m in messages] == [b"popped"]
    finally:
        pop.close()
    code, _, err = cli(capsys, "consumer", "reset", *at, "--group", "pop-group", "--topic", TOPIC, "--to-earliest")
    assert code == 1 and "consumes AdminTopic by pop" in err
