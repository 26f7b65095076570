"""The auto-renew schedule (rocketstore/broker/pop_renewals.py): when a delivery is renewed, the
handle a client's ack is translated to, and what ends a renewal."""

from __future__ import annotations

from rocketstore.broker.pop_renewals import RenewalLimits, RenewalSchedule

LIMITS = RenewalLimits(ahead_ms=1_000, slice_ms=5_000, max_total_ms=20_000, max_entries=3)


def test_a_delivery_is_renewed_ahead_of_its_invisible_time_until_the_client_takes_it():
    schedule = RenewalSchedule(LIMITS)
    assert schedule.add("c1", "g", "T", "h1", until_ms=2_000, now_ms=0)
    assert schedule.next_due_ms() == 1_000
    assert schedule.due(999) == []
    [(key, handle)] = schedule.due(1_000)
    assert (key, handle) == (("g", "T", "h1"), "h1")
    schedule.renewed(key, "h2", until_ms=6_000)
    assert schedule.due(4_999) == [] and schedule.due(5_000) == [(key, "h2")]
    assert schedule.handle_of(key) == "h2"
    # The client acks with the handle it got: the current one is used, and renewals end.
    assert schedule.take("g", "T", "h1") == "h2"
    assert schedule.handle_of(key) is None
    assert len(schedule) == 0 and schedule.due(100_000) == []
    assert schedule.take("g", "T", "never-renewed") == "never-renewed"
    schedule.renewed(key, "h3", 9_000)  # a renewal that ended meanwhile leaves nothing behind
    assert len(schedule) == 0


def test_renewals_end_with_their_client_after_their_total_time_or_when_refused_and_are_bounded():
    schedule = RenewalSchedule(LIMITS)
    assert schedule.add("c1", "g", "T", "a", 2_000, 0)
    assert schedule.add("c2", "g", "T", "b", 2_000, 0)
    assert schedule.add("c2", "g", "T", "c", 2_000, 0)
    assert not schedule.add("c3", "g", "T", "d", 2_000, 0)  # full: keeps the time it was given
    assert schedule.client_gone("c2") == 2 and schedule.client_gone("c2") == 0
    assert [k for k, _ in schedule.due(1_500)] == [("g", "T", "a")]
    schedule.drop(("g", "T", "a"))
    assert len(schedule) == 0
    assert schedule.add("c1", "g", "T", "e", 2_000, 0)
    schedule.renewed(("g", "T", "e"), "e2", 30_000)
    assert schedule.due(20_000) == [] and len(schedule) == 0  # renewed for max_total_ms: dropped
