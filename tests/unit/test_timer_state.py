"""The timed messages' state: due in time order, delivered once, any replay order agrees, and the
delivery records' codec."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketstore.broker.timer_state import TimerState, decode_done, encode_done


def test_messages_come_due_in_time_order_and_stay_due_until_delivered():
    state = TimerState()
    state.add(100, 5_000)
    state.add(200, 3_000)
    state.add(300, 9_000)
    assert state.due(2_999, 10) == []
    assert state.next_due_ms() == 3_000
    assert state.due(5_000, 10) == [200, 100]
    assert state.due(5_000, 1) == [200]
    state.delivered(200)
    assert state.due(5_000, 10) == [100]
    state.add(200, 3_000)  # read again after its delivery record: stays delivered
    assert state.due(9_000, 10) == [100, 300]
    assert state.waiting == 2


def test_forget_below_drops_what_retention_deleted():
    state = TimerState()
    state.add(10, 1)
    state.add(20, 1)
    state.forget_below(15)
    assert state.due(5, 10) == [20]


@given(st.dictionaries(st.integers(0, 50), st.integers(0, 1_000)), st.sets(st.integers(0, 50)), st.randoms())
def test_any_order_of_timers_and_delivery_records_gives_the_same_due_set(timers, done, rnd):
    items: list[tuple[str, int]] = [("t", o) for o in timers] + [("d", o) for o in done] * 2
    rnd.shuffle(items)
    state = TimerState()
    for kind, offset in items:
        state.add(offset, timers[offset]) if kind == "t" else state.delivered(offset)
    expected = sorted((at, o) for o, at in timers.items() if o not in done)
    assert state.due(1_000, 1_000) == [o for _, o in expected]


@given(st.lists(st.integers(0, 2**62)))
def test_delivery_records_round_trip(offsets):
    assert decode_done(encode_done(offsets)) == offsets


@pytest.mark.parametrize("body", [b"", b"{}", b"[-1]", b"[true]", b'["1"]', b"\xff"])
def test_malformed_delivery_records_are_refused_clearly(body):
    with pytest.raises(ValueError):
        decode_done(body)
