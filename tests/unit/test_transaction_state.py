"""The transactional messages' state: resolutions are final, checks count, the events replay in
any order and any number of times to the same state, and the op records' codec."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketstore.broker.transaction_state import (
    Checked,
    Half,
    Pending,
    Refused,
    Resolved,
    TransactionState,
    decode_events,
    encode_events,
)


def half(offset: int, first_check_ms: int = 1_000) -> Half:
    return Half(offset, "T", f"id-{offset}", first_check_ms)


def test_a_resolution_is_final_and_a_repeat_of_it_is_nothing_to_do():
    state = TransactionState()
    state.add_half(half(10))
    assert state.resolve(10, True) == Resolved(10, True, "client")
    assert state.pending(10) is None and state.outcome(10) is True
    assert state.resolve(10, True) is None
    refused = state.resolve(10, False)
    assert isinstance(refused, Refused) and "already committed" in refused.reason
    assert isinstance(state.resolve(99, True), Refused)  # no such half
    # A half read again after its resolution (the half queue read after the op queue) stays done.
    state.add_half(half(10))
    assert state.pending(10) is None


def test_checks_come_due_in_time_order_and_count():
    state = TransactionState()
    state.add_half(half(1, first_check_ms=500))
    state.add_half(half(2, first_check_ms=300))
    state.add_half(half(3, first_check_ms=900))
    assert [p.half.half_offset for p in state.due(600, 10)] == [2, 1]
    assert [p.half.half_offset for p in state.due(600, 1)] == [2]
    assert state.check(2, 600, 1_000) == Checked(2, 1, 1_600)
    assert [p.half.half_offset for p in state.due(600, 10)] == [1]
    assert state.pending(2) == Pending(half(2, 300), 1, 1_600)
    state.check(2, 1_600, 1_000)
    assert state.pending(2).checks == 2
    assert state.check(42, 0, 1) is None


def test_forget_below_drops_what_retention_deleted():
    state = TransactionState()
    for offset in (1, 5, 9):
        state.add_half(half(offset))
    state.resolve(5, False)
    state.forget_below(6)
    assert [p.half.half_offset for p in state.pending_halves()] == [9]
    assert state.outcome(5) is None


def _apply_all(halves, events) -> tuple:
    state = TransactionState()
    for item in [*halves, *events]:
        state.add_half(item) if isinstance(item, Half) else state.apply(item)
    return _snapshot(state)


def _snapshot(state: TransactionState) -> tuple:
    pending = tuple((p.half.half_offset, p.checks, p.next_check_ms) for p in state.pending_halves())
    outcomes = tuple(state.outcome(o) for o in range(8))
    return pending, outcomes


offsets = st.integers(0, 7)
event = st.one_of(
    st.builds(Resolved, offsets, st.booleans(), st.just("client")),
    st.builds(Checked, offsets, st.integers(1, 5), st.integers(0, 10_000)),
)


@given(st.lists(offsets, unique=True), st.lists(event), st.randoms())
def test_replay_in_any_interleaving_and_twice_gives_the_same_state(half_offsets, events, rnd):
    """The service applies its own events at once and again when it reads them back, and reads
    the half queue and the op queue separately: none of that may change the state."""
    # Only the first resolution of a half counts, as `resolve` ensures when they are made.
    first: dict[int, bool] = {}
    events = [e for e in events if not isinstance(e, Resolved) or first.setdefault(e.half_offset, e.commit) == e.commit]
    halves = [half(o) for o in half_offsets]
    expected = _apply_all(halves, events)
    assert _apply_all([], [*events, *events]) == _apply_all([], events)
    # Events of one queue keep their order; the two queues interleave anyhow.
    merged, h, e = [], list(halves), list(events) * 2
    while h or e:
        source = h if (h and (not e or rnd.random() < 0.5)) else e
        merged.append(source.pop(0))
    state = TransactionState()
    for item in merged:
        state.add_half(item) if isinstance(item, Half) else state.apply(item)
    assert _snapshot(state) == expected


@given(st.lists(event))
def test_op_records_round_trip(events):
    assert decode_events(encode_events(events)) == events


@pytest.mark.parametrize(
    "body",
    [b"", b"{}", b"[1]", b'[{"k":"X","o":1}]', b'[{"k":"R","o":-1,"c":true}]', b'[{"k":"R","o":1,"c":1}]', b"\xff"],
)
def test_malformed_op_records_are_refused_clearly(body):
    with pytest.raises(ValueError):
        decode_events(body)
