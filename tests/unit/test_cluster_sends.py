"""Spreading sends over a cluster's groups (`client.cluster_sends`): round robin over every group's
queues, the send-latency fault record, and the steps of one send when a group fails."""

from __future__ import annotations

import collections

from client.cluster_sends import (
    ClusterRoute,
    FaultRecord,
    QueueChooser,
    SpreadAction,
    SpreadSend,
    Target,
)
from client.convert import QueueInfo
from client.errors import BrokerError, NotMasterError, PartialBatchError, TransportError
from client.failover import RetryPolicy


def route(*groups: str, queues: int = 2) -> ClusterRoute:
    infos = [QueueInfo("T", q, "READ_WRITE", g, 0, f"{g}:1") for g in groups for q in range(queues)]
    infos += [QueueInfo("T", 0, "READ", g, 1, f"{g}-slave:1") for g in groups]  # slaves: never written
    infos += [QueueInfo("T", queues, "READ", g, 0, f"{g}:1") for g in groups]  # read-only queue
    return ClusterRoute.of(infos)


def test_the_route_keeps_writable_master_queues_only():
    r = route("a", "b")
    assert r.groups == ("a", "b")
    assert r.queues == (Target("a", 0, "a:1"), Target("a", 1, "a:1"), Target("b", 0, "b:1"), Target("b", 1, "b:1"))
    assert r.moved("a", "a2:1").master_of("a") == "a2:1" and r.moved("a", "a2:1").master_of("b") == "b:1"


def test_round_robin_covers_every_queue_of_every_group_evenly():
    chooser, faults = QueueChooser(), FaultRecord()
    picks = collections.Counter(chooser.choose(route("a", "b", "c"), faults, 0.0, frozenset()) for _ in range(60))
    assert len(picks) == 6 and set(picks.values()) == {10}


def test_a_failed_group_is_held_out_for_the_pause_then_returns():
    chooser, faults = QueueChooser(), FaultRecord(failure_pause_s=30)
    faults.record("a", 0.01, now=100.0, failed=True)
    r = route("a", "b")
    during = {chooser.choose(r, faults, 110.0, frozenset()).broker_name for _ in range(10)}
    after = {chooser.choose(r, faults, 131.0, frozenset()).broker_name for _ in range(10)}
    assert during == {"b"} and after == {"a", "b"}


def test_slow_sends_hold_a_group_out_by_rocketmqs_latency_steps():
    faults = FaultRecord()
    faults.record("a", 0.04, now=0.0)
    assert faults.available("a", 0.0)
    faults.record("a", 0.6, now=0.0)  # 550 ms step: 30 s
    assert not faults.available("a", 29.9) and faults.available("a", 30.0)
    faults.record("a", 20.0, now=0.0)  # beyond 15 s: 10 minutes
    assert not faults.available("a", 599.0)
    faults.record("a", 0.01, now=1.0)  # a quick send clears it
    assert faults.available("a", 1.0)


def test_when_every_group_is_held_out_the_one_free_soonest_is_used():
    chooser, faults = QueueChooser(), FaultRecord(failure_pause_s=30)
    faults.record("a", 0.0, now=10.0, failed=True)
    faults.record("b", 0.0, now=5.0, failed=True)
    assert {chooser.choose(route("a", "b"), faults, 11.0, frozenset()).broker_name for _ in range(5)} == {"b"}
    assert chooser.choose(route("a", "b"), faults, 11.0, frozenset({"a", "b"})) is None


def test_a_new_master_in_the_route_clears_the_groups_record():
    faults = FaultRecord()
    faults.saw_route(route("a"))
    faults.record("a", 0.0, now=0.0, failed=True)
    faults.saw_route(route("a"))
    assert not faults.available("a", 1.0)
    faults.saw_route(route("a").moved("a", "a2:1"))
    assert faults.available("a", 1.0)


def test_a_message_group_always_maps_to_one_queue():
    r = route("a", "b", "c", queues=4)
    assert len({QueueChooser.for_message_group(r, "order-17") for _ in range(20)}) == 1
    assert len({QueueChooser.for_message_group(r, f"order-{i}") for i in range(200)}) == 12


POLICY = RetryPolicy(retry_timeout_s=10, backoff_min_s=0.02, backoff_max_s=0.1)


def spread(r: ClusterRoute, group: str = "", faults: FaultRecord | None = None) -> SpreadSend:
    return SpreadSend(r, faults or FaultRecord(), QueueChooser(), POLICY, 0.0, group)


def test_a_failing_group_sends_to_another_at_once_and_is_held_out():
    faults = FaultRecord()
    send = spread(route("a", "b"), faults=faults)
    first = send.first()
    assert first.action is SpreadAction.SEND and first.target.broker_name == "a"
    step = send.failed(TransportError("a:1", "UNAVAILABLE"), 0.1)
    assert step.action is SpreadAction.SEND and step.target.broker_name == "b" and step.delay_s == 0
    assert send.succeeded(0.12).action is SpreadAction.RETURN
    assert not faults.available("a", 1.0) and faults.available("b", 1.0)


def test_a_drained_group_is_steered_around_and_a_named_master_is_followed_in_the_group():
    send = spread(route("a", "b"))
    send.first()
    drained = BrokerError("FORBIDDEN", "a: the broker is not writable now (brokerPermission=4): it is drained")
    assert send.failed(drained, 0.1).target.broker_name == "b"
    moved = spread(route("a", "b"))
    target = moved.first().target
    step = moved.failed(NotMasterError("a2:1", "not master"), 0.1)
    assert step.target == Target("a", target.queue_id, "a2:1") and moved.route.master_of("a") == "a2:1"


def test_when_every_group_failed_the_route_is_asked_again_after_a_pause():
    send = spread(route("a", "b"))
    send.first()
    send.failed(TransportError("a:1", "UNAVAILABLE"), 0.1)
    step = send.failed(TransportError("b:1", "DEADLINE_EXCEEDED"), 0.2)
    assert step.action is SpreadAction.REFRESH and step.delay_s == POLICY.backoff_min_s
    step = send.refreshed(route("a", "c"), 0.3)
    assert step.action is SpreadAction.SEND and step.target.broker_name in ("a", "c")


def test_a_message_group_never_moves_to_another_group():
    r = route("a", "b", queues=4)
    pinned = QueueChooser.for_message_group(r, "g")
    send = spread(r, group="g")
    assert send.first().target == pinned
    step = send.failed(TransportError(pinned.endpoint, "UNAVAILABLE"), 0.1)
    assert step.action is SpreadAction.REFRESH
    assert send.refreshed(r, 0.2).target == pinned


def test_errors_that_are_not_the_groups_fault_are_raised_and_the_budget_ends_retries():
    send = spread(route("a", "b"))
    send.first()
    partial = PartialBatchError([], BrokerError("MESSAGE_BODY_TOO_LARGE", "too big"))
    assert send.failed(partial, 0.1).action is SpreadAction.GIVE_UP
    send = spread(route("a", "b"))
    send.first()
    step = send.failed(TransportError("a:1", "UNAVAILABLE"), 11.0)
    assert step.action is SpreadAction.GIVE_UP and step.attempts == 1 and isinstance(step.error, TransportError)
