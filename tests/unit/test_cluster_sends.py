"""Spreading sends over a cluster's groups (`client.cluster_sends`): when a producer spreads at all,
round robin over every group's queues (evenly over the rest while one is held out), the
send-latency fault record and when a group's hold ends, the steps of one send when a group fails,
and a route refresh racing a send."""

from __future__ import annotations

import collections

from client.cluster_sends import (
    ClusterRoute,
    FaultRecord,
    QueueChooser,
    SpreadAction,
    SpreadSend,
    Target,
    TopicRoutes,
)
from client.convert import QueueInfo
from client.errors import BrokerError, NotMasterError, PartialBatchError, TransportError
from client.failover import RetryPolicy


def route(*groups: str, queues: int = 2, read_only: tuple[str, ...] = ()) -> ClusterRoute:
    """Each group's master at "<group>:1" with `queues` writable queues (read-only for a group in
    `read_only`: drained, or a slave standing in), one more read-only queue, and a slave."""
    perm = {g: "READ" if g in read_only else "READ_WRITE" for g in groups}
    infos = [QueueInfo("T", q, perm[g], g, 0, f"{g}:1") for g in groups for q in range(queues)]
    infos += [QueueInfo("T", 0, "READ", g, 1, f"{g}-slave:1") for g in groups]  # slaves: never written
    infos += [QueueInfo("T", queues, "READ", g, 0, f"{g}:1") for g in groups]  # read-only queue
    return ClusterRoute.of(infos)


def test_the_route_keeps_writable_master_queues_only():
    r = route("a", "b")
    assert r.groups == ("a", "b")
    assert r.queues == (Target("a", 0, "a:1"), Target("a", 1, "a:1"), Target("b", 0, "b:1"), Target("b", 1, "b:1"))
    assert r.moved("a", "a2:1").master_of("a") == "a2:1" and r.moved("a", "a2:1").master_of("b") == "b:1"
    # Groups without a writable queue are still named, and a broker's group is found by endpoint.
    drained = route("a", "b", read_only=("a",))
    assert drained.groups == ("b",) and drained.named_groups == {"a", "b"}
    assert drained.group_of("a-slave:1") == "a" and drained.group_of("b:1") == "b" and drained.group_of("x:1") == ""
    assert route("a").group_of("alias-of-a:1") == "a"  # a route of one group names its group


def test_round_robin_covers_every_queue_of_every_group_evenly():
    chooser, faults = QueueChooser(), FaultRecord()
    picks = collections.Counter(chooser.choose(route("a", "b", "c"), faults, 0.0, frozenset()) for _ in range(60))
    assert len(picks) == 6 and set(picks.values()) == {10}


def test_a_held_out_groups_share_spreads_evenly_over_the_others():
    chooser, faults = QueueChooser(), FaultRecord(failure_pause_s=30)
    r = route("a", "b", "c", "d", queues=4)
    faults.record("b", 0.01, now=0.0, failed=True)
    picks = collections.Counter(chooser.choose(r, faults, 1.0, frozenset()) for _ in range(120))
    per_group = collections.Counter(target.broker_name for target in picks.elements())
    # Not b's share to c (the group after it in order): a third each, every queue alike.
    assert per_group == {"a": 40, "c": 40, "d": 40}
    assert len(picks) == 12 and set(picks.values()) == {10}
    # The same for a group a send avoids after it failed there.
    fresh, clean = QueueChooser(), FaultRecord()
    avoided = collections.Counter(fresh.choose(r, clean, 1.0, frozenset({"a"})).broker_name for _ in range(120))
    assert avoided == {"b": 40, "c": 40, "d": 40}


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


def test_a_group_back_in_a_topics_route_returns_at_that_refresh_not_when_its_hold_ends():
    faults = FaultRecord(failure_pause_s=30)
    routes = TopicRoutes(10.0, faults)
    routes.answered("T", route("a", "b"), now=0.0)
    faults.record("a", 0.0, now=1.0, failed=True)  # drained: "brokerPermission=4"
    routes.answered("T", route("a", "b", read_only=("a",)), now=10.0)  # the route shows it
    assert not faults.available("a", 12.0)
    # Another topic's first route, or one where a was never writable, says nothing about a.
    routes.answered("U", route("a", "b"), now=12.0)
    routes.answered("V", route("b"), now=12.0)
    assert not faults.available("a", 12.0)
    routes.answered("T", route("a", "b"), now=20.0)  # `cluster drain --undo`, then a refresh
    assert faults.available("a", 20.0)
    # A master that died and left the registry, then came back at the same endpoint: the same.
    faults.record("b", 0.0, now=21.0, failed=True)
    routes.answered("T", route("a"), now=30.0)
    assert not faults.available("b", 30.0)
    routes.answered("T", route("a", "b"), now=40.0)
    assert faults.available("b", 40.0)


def test_a_message_group_always_maps_to_one_queue():
    r = route("a", "b", "c", queues=4)
    assert len({QueueChooser.for_message_group(r, "order-17") for _ in range(20)}) == 1
    assert len({QueueChooser.for_message_group(r, f"order-{i}") for i in range(200)}) == 12


def test_a_producer_spreads_once_a_route_names_several_groups_whichever_are_writable():
    routes = TopicRoutes(10.0, FaultRecord())
    assert routes.spread_route("T") is None  # nothing asked yet: follow the given group
    routes.answered("T", route("a"), now=0.0)
    assert routes.spread_route("T") is None  # a group standing alone: follow its master
    routes.answered("T", route("a", "b"), now=10.0)
    assert routes.spread_route("T").groups == ("a", "b")
    # The group the producer was given loses its master: its slaves stay in the route, read-only,
    # or nothing of it does. Sends go on to the other groups, never to its dead endpoint.
    routes.answered("T", route("a", "b", read_only=("a",)), now=20.0)
    assert routes.spread_route("T").groups == ("b",)
    routes.answered("T", route("b"), now=30.0)
    assert routes.spread_route("T").groups == ("b",)
    routes.answered("T", None, now=40.0)  # nobody answered: the last route stays
    assert routes.spread_route("T").groups == ("b",)
    routes.answered("T", route("a", "b"), now=50.0)  # it is back
    assert routes.spread_route("T").groups == ("a", "b")
    # A topic not asked for yet, or whose route has nothing writable (it exists nowhere, or every
    # group is drained): the given group answers, with its own refusal.
    assert routes.spread_route("U") is None
    routes.answered("U", route("a", "b", read_only=("a", "b")), now=50.0)
    assert routes.spread_route("U") is None
    assert routes.due("T", 59.9) is False and routes.due("T", 60.0) and routes.due("V", 0.0)


POLICY = RetryPolicy(retry_timeout_s=10, backoff_min_s=0.02, backoff_max_s=0.1)


def spread(r: ClusterRoute, group: str = "", faults: FaultRecord | None = None) -> SpreadSend:
    routes = TopicRoutes(10.0, faults or FaultRecord())
    return SpreadSend(routes, "T", routes.answered("T", r, 0.0), QueueChooser(), POLICY, 0.0, group)


def test_a_send_in_flight_during_a_refresh_never_puts_its_older_route_back():
    routes = TopicRoutes(10.0, FaultRecord())
    older = routes.answered("T", route("a", "b"), now=0.0)
    send = SpreadSend(routes, "T", older, QueueChooser(), POLICY, 0.0)
    assert send.first().target.broker_name == "a"
    # While the send is in flight, another thread's refresh answers: a moved to a3 and c joined.
    newer = routes.answered("T", route("a", "b", "c").moved("a", "a3:1"), now=1.0)
    # Then the send hears a's older news (a2) and finishes there.
    step = send.failed(NotMasterError("a2:1", "not master"), 1.1)
    assert step.target.endpoint == "a2:1" and send.succeeded(1.2).action is SpreadAction.RETURN
    assert routes.get("T") == newer and routes.get("T").groups == ("a", "b", "c")
    assert routes.get("T").master_of("a") == "a3:1" and not routes.due("T", 10.9)


def test_a_new_master_named_by_a_send_updates_the_route_it_started_from():
    routes = TopicRoutes(10.0, FaultRecord())
    current = routes.answered("T", route("a", "b"), now=0.0)
    first = SpreadSend(routes, "T", current, QueueChooser(), POLICY, 0.0)
    second = SpreadSend(routes, "T", current, QueueChooser(start=2), POLICY, 0.0)
    assert first.first().target.broker_name == "a" and second.first().target.broker_name == "b"
    first.failed(NotMasterError("a2:1", "not master"), 0.1)
    second.failed(NotMasterError("b2:1", "not master"), 0.1)
    # Both sends' news land, neither over the other's, and later sends start there.
    assert routes.get("T").master_of("a") == "a2:1" and routes.get("T").master_of("b") == "b2:1"
    assert routes.get("T").version == current.version


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


def test_a_route_is_asked_of_the_groups_not_held_out_before_the_given_endpoints():
    faults = FaultRecord(failure_pause_s=30)
    routes = TopicRoutes(10.0, faults)
    assert routes.askees("T", ["a:1", "a-slave:1"], 0.0) == ["a:1", "a-slave:1"]  # nothing known yet
    routes.answered("T", route("a", "b", "c"), now=0.0)
    faults.record("a", 0.0, now=1.0, failed=True)  # the given group's master died
    assert routes.askees("T", ["a:1", "a-slave:1"], 2.0) == ["b:1", "c:1", "a:1", "a-slave:1"]
    assert routes.askees("T", ["x:1"], 40.0) == ["a:1", "b:1", "c:1", "x:1"]
