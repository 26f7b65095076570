"""Controller mode's decisions (ha.controller, ha.group_state): elections, the in-sync set rule,
the lease fence, and the etcd records' codec."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ha.controller import Action, GroupView, IsrChanges, LeaseClock, ReplicaProgress, decide, isr_changes
from ha.group_state import BrokerRecord, GroupKeys, GroupState, GroupStateError, MasterRecord, decode, encode


def rec(broker_id: int, max_offset: int, *, candidate: int = -1, last_epoch: int = 0) -> BrokerRecord:
    return BrokerRecord(
        broker_id,
        f"127.0.0.1:{1000 + broker_id}",
        f"127.0.0.1:{2000 + broker_id}",
        max_offset,
        last_epoch=last_epoch,
        candidate_epoch=candidate,
    )


def view(*records: BrokerRecord, state: GroupState | None = None, master: MasterRecord | None = None) -> GroupView:
    return GroupView(master, state, 7 if state is not None else 0, {r.broker_id: r for r in records})


def run(v: GroupView, me: BrokerRecord, *, waited_ms: int = 0, unclean: bool = False):
    return decide(v, me, now_ms=1000 + waited_ms, no_master_since_ms=1000, declare_wait_ms=500, unclean_allowed=unclean)


STATE = GroupState(epoch=3, master_id=0, isr=frozenset({0, 1, 2}), master_max_offset=900)


def test_a_master_key_means_follow_or_lead():
    master = MasterRecord(1, 4, "127.0.0.1:1001", "127.0.0.1:2001")
    assert run(view(rec(0, 10), state=STATE, master=master), rec(0, 10)).action is Action.FOLLOW
    decision = run(view(rec(1, 10), state=STATE, master=master), rec(1, 10))
    assert decision.action is Action.LEAD and decision.master == master


def test_without_a_master_a_broker_declares_first_then_waits_for_the_others():
    me = rec(1, 500)
    assert run(view(rec(1, 500), state=STATE), me).action is Action.DECLARE
    # A declaration with a stale offset is made again.
    assert run(view(rec(1, 400, candidate=3), state=STATE), me).action is Action.DECLARE
    decision = run(view(rec(1, 500, candidate=3), rec(2, 600), state=STATE), me)
    assert decision.action is Action.WAIT and "declarations" in decision.reason


def test_the_highest_declared_in_sync_offset_wins_with_the_next_epoch():
    brokers = (rec(1, 500, candidate=3), rec(2, 600, candidate=3, last_epoch=3))
    assert run(view(*brokers, state=STATE), brokers[0]).action is Action.WAIT
    decision = run(view(*brokers, state=STATE), brokers[1])
    assert decision.action is Action.CAMPAIGN
    assert decision.new_state == GroupState(epoch=4, master_id=2, isr=frozenset({2}), master_max_offset=600)


def test_a_tie_goes_to_the_lowest_broker_id_and_a_handover_target_goes_first():
    brokers = (rec(1, 600, candidate=3), rec(2, 600, candidate=3))
    assert run(view(*brokers, state=STATE), brokers[0]).action is Action.CAMPAIGN
    handover = GroupState(epoch=3, master_id=0, isr=frozenset({0, 1, 2}), handover_to=2)
    brokers = (rec(1, 700, candidate=3), rec(2, 600, candidate=3))
    assert run(view(*brokers, state=handover), brokers[1]).action is Action.CAMPAIGN


def test_a_broker_outside_the_in_sync_set_never_wins_a_clean_election():
    state = GroupState(epoch=3, master_id=0, isr=frozenset({0, 1}))
    brokers = (rec(1, 100, candidate=3), rec(2, 900, candidate=3))
    assert run(view(*brokers, state=state), brokers[1]).action is Action.WAIT
    assert run(view(*brokers, state=state), brokers[0]).action is Action.CAMPAIGN


def test_missing_declarations_are_waited_for_only_until_the_deadline():
    brokers = (rec(1, 500, candidate=3), rec(2, 900))  # 2 is alive but has not declared
    assert run(view(*brokers, state=STATE), brokers[0], waited_ms=100).action is Action.WAIT
    assert run(view(*brokers, state=STATE), brokers[0], waited_ms=600).action is Action.CAMPAIGN


def test_with_no_in_sync_broker_alive_only_an_unclean_election_proceeds_and_it_counts_the_loss():
    state = GroupState(epoch=5, master_id=0, isr=frozenset({0}), master_max_offset=1000)
    me = rec(1, 700, candidate=5)
    decision = run(view(me, state=state), me)
    assert decision.action is Action.WAIT and "enableElectUncleanMaster" in decision.reason
    decision = run(view(me, state=state), me, unclean=True)
    assert decision.action is Action.CAMPAIGN
    assert decision.new_state.unclean_lost_bytes == 300 and decision.new_state.epoch == 6


def test_a_new_group_elects_among_all_registered_brokers_above_every_known_epoch():
    brokers = (rec(0, 0, candidate=0), rec(1, 50, candidate=0, last_epoch=9))
    decision = run(view(*brokers), brokers[1])
    assert decision.action is Action.CAMPAIGN and decision.new_state.epoch == 10


@given(st.lists(st.tuples(st.integers(0, 5), st.booleans()), min_size=1, max_size=6, unique_by=lambda t: t[0]))
def test_exactly_one_declared_broker_campaigns(members):
    """Whatever the offsets and the in-sync set, once all have declared exactly one campaigns,
    and it is in the set."""
    isr = frozenset(i for i, (_, inside) in enumerate(members) if inside) or frozenset({0})
    state = GroupState(epoch=2, master_id=99, isr=isr)
    brokers = [rec(i, offset * 100, candidate=2) for i, (offset, _) in enumerate(members)]
    v = view(*brokers, state=state)
    campaigners = [b.broker_id for b in brokers if run(v, b).action is Action.CAMPAIGN]
    assert len(campaigners) == 1 and campaigners[0] in isr
    best = max(b.max_offset for b in brokers if b.broker_id in isr)
    assert v.brokers[campaigners[0]].max_offset == best


def test_isr_changes_join_caught_up_slaves_and_drop_gone_or_lagging_members():
    connected = [ReplicaProgress(1, 100, 0, 0), ReplicaProgress(2, 50, 50, 20_000), ReplicaProgress(3, 90, 10, 100)]
    changes = isr_changes(frozenset({0, 2, 4}), 0, connected, max_time_not_catchup_ms=15_000)
    assert changes.joins == {1, 3}
    assert changes.leaves == {2, 4}
    assert not isr_changes(frozenset({0, 1}), 0, connected[:1], max_time_not_catchup_ms=15_000)


def test_a_silent_member_leaves_though_it_holds_everything_and_a_silent_slave_does_not_join():
    # Broker 1 holds everything (nothing new was written) but has not reported for 16 s: paused or
    # cut off. Broker 2 reported 1 s ago. Broker 3 is caught up but silent, outside the set.
    connected = [
        ReplicaProgress(1, 100, 0, 0, silent_ms=16_000),
        ReplicaProgress(2, 100, 0, 0, silent_ms=1_000),
        ReplicaProgress(3, 100, 0, 0, silent_ms=15_001),
    ]
    changes = isr_changes(frozenset({0, 1, 2}), 0, connected, max_time_not_catchup_ms=15_000)
    assert changes.leaves == {1}
    assert changes.joins == frozenset()
    # At the limit it still counts.
    at_limit = [ReplicaProgress(1, 100, 0, 0, silent_ms=15_000), ReplicaProgress(3, 100, 0, 0, silent_ms=15_000)]
    assert isr_changes(frozenset({0, 1}), 0, at_limit, max_time_not_catchup_ms=15_000) == IsrChanges(
        frozenset({3}), frozenset()
    )


def test_the_lease_clock_fences_before_the_lease_can_expire():
    clock = LeaseClock(margin_ms=500)
    assert not clock.valid(0)
    clock.renewed(sent_at_ms=1000, ttl_s=2)
    assert clock.valid(2499) and not clock.valid(2500)
    clock.renewed(sent_at_ms=900, ttl_s=2)  # a late answer to an older keepalive never shortens it
    assert clock.valid(2499)
    assert clock.remaining_ms(2000) == 500
    clock.renewed(sent_at_ms=3000, ttl_s=0)
    assert not clock.valid(3001)


def test_records_round_trip_and_garbage_is_an_error():
    for record in (STATE, rec(1, 5, candidate=2), MasterRecord(1, 2, "a:1", "a:2")):
        assert decode(type(record), encode(record)) == record
    assert decode(GroupState, b'{"epoch": 1, "isr": [2, 1], "future_field": true}') == GroupState(
        1, isr=frozenset({1, 2})
    )
    for raw in (b"", b"[1]", b'{"epoch": "1"}', b'{"isr": [true]}', b"\xff", b'{"broker_id": 1}'):
        with pytest.raises(GroupStateError):
            decode(BrokerRecord if b"broker_id" in raw else GroupState, raw)


def test_group_keys_refuse_names_that_would_escape_the_prefix():
    keys = GroupKeys.of("/rocketstore", "c", "broker-a")
    assert keys.master == "/rocketstore/c/broker-a/master"
    assert keys.broker(2) == "/rocketstore/c/broker-a/brokers/2"
    with pytest.raises(ValueError):
        GroupKeys.of("/rocketstore", "c", "a/b")
