"""Browsing messages and resending dead letters over the admin API, through the command line
(`rocketstore message list|resend|query`) against a real SYNC_MASTER and its slave: a topic paged
by store time across its queues (every message once, oldest first, the range's ends kept), which
groups consumed a message, and a dead letter put back into its topic once, however often the
same request is sent; and, on the admin servicer alone, a master fenced by its write refusal
resends nothing and its status says so beside its disk use."""

from __future__ import annotations

import base64
import time
from dataclasses import dataclass

import grpc
import pytest
from test_admin_api import expect_error, run, serving

from client import AdminClient, BrokerError, Producer, PullConsumer, new_message_id
from pop_support import Pop
from rocketstore.broker.view import StaticView
from store import BrokerRole, Message, TopicConfig
from support import cli, cli_json, wait_until
from wire.rpc import admin_pb2

TOPIC = "BrowseTopic"


@pytest.fixture
def cluster(admin_cluster):
    return admin_cluster


def _send(endpoint: str, bodies: list[str], queues: int) -> list:
    with Producer(endpoint) as producer:
        results = [producer.send(TOPIC, b.encode(), queue_id=i % queues, keys=[b]) for i, b in enumerate(bodies)]
    assert all(r.ok for r in results)
    return results


def test_a_topic_pages_by_store_time_across_its_queues(cluster, capsys):
    master = cluster.master
    at = ("--endpoint", master.client_endpoint)
    cli_json(capsys, "topic", "create", *at, "--topic", TOPIC, "--queues", "3")
    _send(master.client_endpoint, [f"early-{i}" for i in range(4)], 3)
    with AdminClient(master.client_endpoint, cluster.admin_secret()) as admin:

        def last_stored(begin: int, count: int) -> int:
            """The latest store time of the `count` messages stored since `begin`, once readable."""
            shown = wait_until(
                lambda: len(m := admin.list_messages(TOPIC, begin)["messages"]) == count and m, what="dispatch"
            )
            return max(m["store_timestamp_ms"] for m in shown)

        # The range starts after the last early message's store time and ends before the late ones.
        since = last_stored(0, 4) + 1
        wait_until(lambda: time.time() * 1000 > since + 5, timeout_s=5, what="the clock to pass since")
        _send(master.client_endpoint, [f"m-{i:02d}" for i in range(11)], 3)
        until = last_stored(since, 11)
        wait_until(lambda: time.time() * 1000 > until + 5, timeout_s=5, what="the clock to pass until")
        _send(master.client_endpoint, [f"late-{i}" for i in range(3)], 3)

    seen: list[dict] = []
    after: list[str] = []
    for _ in range(10):
        page = cli_json(
            capsys, "message", "list", *at, "--topic", TOPIC, "--since", str(since), "--until", str(until),
            "--max", "4", *after,
        )  # fmt: skip
        assert len(page["messages"]) <= 4
        seen += page["messages"]
        if not page["more"]:
            break
        after = ["--after", page["next_cursor"]]
    bodies = [base64.b64decode(m["body_base64"]).decode() for m in seen]
    assert sorted(bodies) == [f"m-{i:02d}" for i in range(11)]  # each once, none outside the range
    times = [(m["store_timestamp_ms"], m["queue_id"], m["queue_offset"]) for m in seen]
    assert times == sorted(times)
    assert {m["queue_id"] for m in seen} == {0, 1, 2}

    code, out, _ = cli(capsys, "message", "list", *at, "--topic", TOPIC, "--since", str(since), "--max", "2")
    assert code == 0 and "next page: --after " in out
    code, _, err = cli(capsys, "message", "list", *at, "--topic", TOPIC, "--since", "0", "--after", "0:x")
    assert code == 2 and "QUEUE:OFFSET" in err


def test_a_message_says_which_groups_consumed_it(cluster, capsys):
    master = cluster.master
    at = ("--endpoint", master.client_endpoint)
    cli_json(capsys, "topic", "create", *at, "--topic", TOPIC, "--queues", "1")
    sent = _send(master.client_endpoint, ["first", "second"], 1)
    with PullConsumer(master.client_endpoint, group="reader") as consumer:
        consumer.update_offset(TOPIC, 0, 1)  # consumed "first" only
    with PullConsumer(master.client_endpoint, group="idle") as consumer:
        consumer.update_offset(TOPIC, 0, 0)
    first = cli_json(capsys, "message", "query", *at, "--id", sent[0].msg_id, "--topic", TOPIC)[0]
    second = cli_json(capsys, "message", "query", *at, "--id", sent[1].msg_id, "--topic", TOPIC)[0]
    consumed = {c["group"]: c["consumed"] for c in first["consumed_by"]}
    assert consumed == {"reader": True, "idle": False}
    assert {c["group"]: c["consumed"] for c in second["consumed_by"]} == {"reader": False, "idle": False}
    code, out, _ = cli(capsys, "message", "query", *at, "--id", sent[0].msg_id)
    assert code == 0 and "consumed by idle (no), reader (yes)" in out


def test_a_dead_letter_is_resent_to_its_topic_once(cluster, capsys):
    master, slave = cluster.master, cluster.slave_brokers[0]
    at = ("--endpoint", master.client_endpoint)
    cli_json(capsys, "topic", "create", *at, "--topic", TOPIC, "--queues", "2")
    original = _send(master.client_endpoint, ["poison"], 2)[0]
    pop = Pop(master.client_endpoint, TOPIC, "dlq-group")
    try:
        _, messages = pop.receive(batch=1)
        assert [m.body for m in messages] == [b"poison"]
        pop.forward_to_dead_letter(messages[0].system_properties.receipt_handle)
    finally:
        pop.close()
    dlq = "%DLQ%dlq-group"
    page = wait_until(
        lambda: (p := cli_json(capsys, "message", "list", *at, "--topic", dlq, "--since", "0"))["messages"] and p,
        timeout_s=20,
        what="the dead letter",
    )
    dead = page["messages"][0]
    assert dead["properties"]["RETRY_TOPIC"] == TOPIC and dead["client_msg_id"] == original.msg_id
    offset = str(dead["commit_log_offset"])

    code, out, _ = cli(capsys, "message", "resend", *at, "--offset", offset)
    assert code == 0 and "Dry run; nothing sent. It would go to BrowseTopic" in out
    with AdminClient(master.client_endpoint, cluster.admin_secret()) as admin:
        assert sum(q["max_offset"] for q in admin.describe_topic(TOPIC)["queues"]) == 1

        # A slave refuses (it takes no writes) and says where the master is.
        with AdminClient(slave.client_endpoint, cluster.admin_secret()) as on_slave:
            with pytest.raises(BrokerError, match="not master"):
                on_slave.resend_dead_letter(commit_log_offset=int(offset), dry_run=False)

        # The copy's id has a message id's shape, so that `message query --id` finds it.
        copy_id = new_message_id()
        answer = admin.resend_dead_letter(commit_log_offset=int(offset), dry_run=False, new_client_msg_id=copy_id)
        again = admin.resend_dead_letter(commit_log_offset=int(offset), dry_run=False, new_client_msg_id=copy_id)
        assert answer["resent"] and answer["origin_topic"] == TOPIC and answer["client_msg_id"] == copy_id
        assert (again["queue_id"], again["queue_offset"]) == (answer["queue_id"], answer["queue_offset"])
        copies = wait_until(lambda: admin.query_message(msg_id=copy_id, topic=TOPIC), what="the copy indexed")
        assert len(copies) == 1 and copies[0]["body"] == b"poison"
        assert copies[0]["properties"]["ORIGIN_MESSAGE_ID"] == original.msg_id
        assert "RETRY_TOPIC" not in copies[0]["properties"] and copies[0]["reconsume_times"] == 0

        with pytest.raises(BrokerError, match="not in a dead-letter topic"):
            admin.resend_dead_letter(commit_log_offset=copies[0]["commit_log_offset"], dry_run=False)

    code, out, _ = cli(capsys, "message", "resend", *at, "--id", dead["offset_msg_id"], "--execute")
    assert code == 0 and "resent to BrowseTopic" in out
    with AdminClient(master.client_endpoint, cluster.admin_secret()) as admin:
        stored = sum(q["max_offset"] for q in admin.describe_topic(TOPIC)["queues"])
    assert stored == 3  # the original and two resends with two different new ids


@dataclass
class FencedView(StaticView):
    """A master whose write fence the test sets (controller mode's lease, say)."""

    refusal: str | None = None

    def write_refusal(self) -> str | None:
        return self.refusal


def test_a_fenced_master_resends_nothing_and_says_why_in_its_status(tmp_path):
    async def body():
        view = FencedView(BrokerRole.ASYNC_MASTER)
        async with serving(tmp_path / "store", view) as h:
            h.store.create_or_update_topic(TopicConfig("Origin", 1, 1))
            h.store.create_or_update_topic(TopicConfig("%DLQ%g", 1, 1))
            properties = {"RETRY_TOPIC": "Origin", "UNIQ_KEY": "OLD"}
            dead = h.store.put_message(Message("%DLQ%g", 0, b"poison", properties=properties)).wrote_offset
            resend = admin_pb2.ResendDeadLetterRequest(commit_log_offset=dead, new_client_msg_id="NEW1")

            view.refusal = "the lease ran out"
            status = await h.call("GetStatus", admin_pb2.GetStatusRequest())
            assert status.write_refusal == "the lease ran out"
            assert status.disk_total_bytes >= status.disk_free_bytes > 0 and status.commit_log_file_bytes == 64 * 1024
            refused = await expect_error(h.call("ResendDeadLetter", resend), grpc.StatusCode.FAILED_PRECONDITION)
            assert "takes no writes now: the lease ran out" in refused
            assert h.store.wait_dispatched(10) and h.store.dispatched_queue_offset("Origin", 0) == 0

            view.refusal = None
            answer = await h.call("ResendDeadLetter", resend)
            assert (answer.resent, answer.origin_topic, answer.queue_offset, answer.put_status) == (
                True,
                "Origin",
                0,
                "PUT_OK",
            )
            assert (await h.call("GetStatus", admin_pb2.GetStatusRequest())).write_refusal == ""

    run(body())
