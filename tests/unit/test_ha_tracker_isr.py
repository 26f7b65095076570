"""ha/replica_tracker.py in controller mode: every in-sync slave must acknowledge, joins are
admitted only when the slave holds everything confirmed, leaves take effect only when committed."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from test_ha_replica_tracker import Master, register

from ha.replica_tracker import ReplicaTracker
from store.log.status_future import StatusFuture
from store.status import BrokerRole
from store.status import PutMessageStatus as S


def isr_tracker(role: BrokerRole = BrokerRole.SYNC_MASTER, in_sync: int = 1) -> tuple[ReplicaTracker, Master]:
    master = Master()
    t = ReplicaTracker(role, in_sync, 1000, 10_000, lambda: master.max_offset)
    t.set_isr(frozenset())
    return t, master


def test_too_few_in_sync_replicas_refuse_at_once():
    t, master = isr_tracker()
    master.max_offset = 100
    register(t, "s1", 1)
    assert t.request(100, 0) is S.IN_SYNC_REPLICAS_NOT_ENOUGH


def test_every_member_must_acknowledge():
    t, master = isr_tracker()
    register(t, "s1", 1)
    register(t, "s2", 2)
    t.set_isr(frozenset({1, 2}))
    master.max_offset = 100
    waiting = t.request(100, 0)
    assert isinstance(waiting, StatusFuture)
    t.ack("s1", 100, 1)
    assert not waiting.done()  # the static rule (one slave) would have released it here
    t.ack("s2", 100, 2)
    assert waiting.result(0) is S.PUT_OK
    assert t.confirmed_offset == 100


def test_a_disconnected_member_stays_required_until_its_leave_is_committed():
    t, master = isr_tracker()
    register(t, "s1", 1)
    register(t, "s2", 2)
    t.set_isr(frozenset({1, 2}))
    master.max_offset = 100
    waiting = t.request(100, 0)
    t.ack("s1", 100, 1)
    t.remove("s2", 2)
    assert not waiting.done()
    t.set_isr(frozenset({1}))
    assert waiting.result(0) is S.PUT_OK


def test_shrinking_below_the_minimum_answers_waiters():
    t, master = isr_tracker()
    register(t, "s1", 1)
    t.set_isr(frozenset({1}))
    master.max_offset = 100
    waiting = t.request(100, 0)
    t.set_isr(frozenset())
    assert waiting.result(0) is S.IN_SYNC_REPLICAS_NOT_ENOUGH


def test_a_join_needs_everything_confirmed_and_is_required_while_proposed():
    t, master = isr_tracker()
    register(t, "s1", 1)
    register(t, "s2", 2)
    t.set_isr(frozenset({1}))
    master.max_offset = 100
    t.ack("s1", 100, 1)
    assert t.confirmed_offset == 100
    t.ack("s2", 60, 1)
    assert not t.propose_join(2)  # it misses confirmed bytes 60..100
    t.ack("s2", 100, 2)
    assert t.propose_join(2)
    master.max_offset = 200
    waiting = t.request(200, 3)
    t.ack("s1", 200, 4)
    assert not waiting.done()  # the proposed member is required already
    t.cancel_join(2)
    assert waiting.result(0) is S.PUT_OK


def test_reset_forgets_sessions_and_keeps_the_confirmed_floor():
    t, master = isr_tracker()
    register(t, "s1", 1)
    t.set_isr(frozenset({1}))
    master.max_offset = 100
    waiting = t.request(100, 0)
    t.reset(BrokerRole.SYNC_MASTER, confirmed_floor=40)
    assert waiting.result(0) is S.SLAVE_NOT_AVAILABLE
    assert t.in_sync() == (frozenset(), frozenset())
    assert t.confirmed_offset == 100  # no member required: the master's own end


@given(st.lists(st.tuples(st.sampled_from([1, 2, 3]), st.integers(0, 50)), max_size=30))
def test_the_confirmed_offset_is_held_by_every_member(acks):
    t, master = isr_tracker()
    for broker_id in (1, 2, 3):
        register(t, f"s{broker_id}", broker_id)
    t.set_isr(frozenset({1, 2, 3}))
    held = {1: 0, 2: 0, 3: 0}
    for now, (broker_id, step) in enumerate(acks):
        master.max_offset += step
        held[broker_id] = master.max_offset
        t.ack(f"s{broker_id}", master.max_offset, now)
        assert t.confirmed_offset <= min(held.values())
