"""Timed messages against real brokers: a delivery time is kept to the millisecond (not rounded
up to a delay level), nothing is delivered early, and a timer waiting when the master restarts
or fails over fires on time afterwards."""

from __future__ import annotations

import time

import grpc

from client import PullConsumer
from harness.local_cluster import poll_until
from pop_support import Pop
from wire.rpc import messaging_pb2 as pb
from wire.rpc import messaging_pb2_grpc


def send_at(endpoint: str, topic: str, body: bytes, deliver_ms: int) -> pb.SendResultEntry:
    message = pb.Message(topic=pb.Resource(name=topic), body=body, system_properties=pb.SystemProperties(queue_id=0))
    message.system_properties.send_queue_id = 0
    message.system_properties.message_type = pb.DELAY
    message.system_properties.delivery_timestamp.FromMilliseconds(deliver_ms)
    with grpc.insecure_channel(endpoint) as channel:
        response = messaging_pb2_grpc.MessagingServiceStub(channel).SendMessage(
            pb.SendMessageRequest(messages=[message]), timeout=10
        )
    [entry] = response.entries
    assert entry.status.code == pb.OK, entry.status
    return entry


def visible(endpoint: str, topic: str) -> list[tuple[bytes, int]]:
    """(body, store time) of the messages readable in queue 0."""
    with PullConsumer(endpoint, group="timer-reader") as consumer:
        try:
            return [(m.body, m.store_timestamp_ms) for m in consumer.pull(topic, 0, 0).messages]
        except Exception as exc:  # the topic's queue appears with its first delivery
            assert "does not exist" in str(exc) or "no message" in str(exc).lower(), exc
            return []


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def test_a_timed_message_arrives_at_its_time_not_at_a_delay_level(make_cluster):
    cluster = make_cluster(master_role="SYNC_MASTER", flush_disk_type="SYNC_FLUSH", slaves=1)
    endpoint = cluster.master.client_endpoint
    start = now_ms()
    # 2.5 s: the delay levels (1 s, 5 s, ...) would round this up to 5 s.
    send_at(endpoint, "TimerTopic", b"at-2.5s", start + 2_500)
    send_at(endpoint, "TimerTopic", b"at-1.2s", start + 1_200)
    assert poll_until(lambda: len(visible(endpoint, "TimerTopic")) == 2, 20)
    got = visible(endpoint, "TimerTopic")
    assert [body for body, _ in got] == [b"at-1.2s", b"at-2.5s"]
    stored = dict(got)
    assert start + 1_200 <= stored[b"at-1.2s"] < start + 2_500
    assert start + 2_500 <= stored[b"at-2.5s"] < start + 5_000
    # The slave has them too, delivered once.
    slave = cluster.slave_brokers[0].client_endpoint
    assert poll_until(lambda: sorted(b for b, _ in visible(slave, "TimerTopic")) == [b"at-1.2s", b"at-2.5s"], 10)


def test_a_waiting_timer_survives_a_restart(make_cluster):
    cluster = make_cluster(master_role="ASYNC_MASTER", flush_disk_type="SYNC_FLUSH", slaves=0)
    master = cluster.master
    deliver_ms = now_ms() + 4_000
    send_at(master.client_endpoint, "RestartTimer", b"after-restart", deliver_ms)
    send_at(master.client_endpoint, "RestartTimer", b"before-restart", now_ms() + 300)
    assert poll_until(lambda: len(visible(master.client_endpoint, "RestartTimer")) == 1, 10)
    master.stop()
    master.start()
    assert poll_until(lambda: len(visible(master.client_endpoint, "RestartTimer")) == 2, 20)
    got = dict(visible(master.client_endpoint, "RestartTimer"))
    assert set(got) == {b"after-restart", b"before-restart"}  # each once: the fired one not again
    assert got[b"after-restart"] >= deliver_ms


def test_a_received_timed_message_carries_its_delivery_time(make_cluster):
    """Issue 32 item 5: a pop consumer received a delayed message without its delivery_timestamp."""
    cluster = make_cluster(master_role="ASYNC_MASTER", flush_disk_type="SYNC_FLUSH", slaves=0)
    endpoint = cluster.master.client_endpoint
    deliver_ms = now_ms() + 800
    send_at(endpoint, "TimedPop", b"timed", deliver_ms)
    pop = Pop(endpoint, "TimedPop", "timed-group")
    try:
        got: list[pb.Message] = []
        assert poll_until(lambda: got.extend(pop.receive(wait_s=2)[1]) or got, 20)
        [message] = got
        sp = message.system_properties
        assert message.body == b"timed" and sp.message_type == pb.DELAY
        assert sp.delivery_timestamp.ToMilliseconds() == deliver_ms
    finally:
        pop.close()
