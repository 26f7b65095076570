"""Pop consumption's state (store.pop_state) and receipt handles (rocketstore.broker.receipt_handle):
the decisions, and the property the broker's durability rests on: replaying the events from the
log (through their wire form) rebuilds the state the live decisions made."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore.broker.receipt_handle import InvalidReceiptHandle, Receipt, ReceiptSigner
from store.pop.pop_state import (
    RETRIED,
    Acked,
    Delivered,
    PassedOver,
    PopState,
    Refused,
    decode_events,
    encode_events,
)

KEY = ("g", "T", 0)


def started(start: int = 0) -> PopState:
    state = PopState()
    state.progress(KEY, start)
    return state


def test_a_delivery_is_in_flight_until_acked_and_the_committed_offset_follows_the_lowest():
    state = started(5)
    a = state.deliver(KEY, 5, 1, 1_000)
    b = state.deliver(KEY, 6, 1, 1_000)
    assert state.committed(KEY) == 5
    assert isinstance(state.ack(KEY, 6, b.token), Acked)
    assert state.committed(KEY) == 5  # 5 is still out
    assert isinstance(state.ack(KEY, 5, a.token), Acked)
    assert state.committed(KEY) == 7
    assert state.ack(KEY, 5, a.token) is None  # a repeated ack: nothing to record


def test_only_the_current_token_acks_or_changes_a_delivery():
    state = started()
    first = state.deliver(KEY, 0, 1, 1_000)
    changed = state.change(KEY, 0, first.token, 5_000)
    assert not isinstance(changed, Refused)
    assert isinstance(state.ack(KEY, 0, first.token), Refused)  # the old handle is stale
    assert isinstance(state.change(KEY, 0, first.token, 9_000), Refused)
    assert state.due(KEY, 4_999, 10) == []
    assert [o for o, _ in state.due(KEY, 5_000, 10)] == [0]
    again = state.deliver(KEY, 0, 2, 8_000)
    assert isinstance(state.ack(KEY, 0, changed.new_token), Refused)  # redelivered since
    assert isinstance(state.ack(KEY, 0, again.token), Acked)


def test_a_postponed_delivery_keeps_its_handle_and_replays_the_same():
    """The broker pushes a due delivery back when its retry or dead-letter topic is refused: the
    client's handle still acks it, and a replay of the events rebuilds the same state."""
    state = started()
    first = state.deliver(KEY, 0, 2, 1_000)
    assert [o for o, _ in state.due(KEY, 1_000, 10)] == [0]
    postponed = state.postpone(KEY, 0, first.token, 61_000)
    assert state.due(KEY, 60_999, 10) == [] and [o for o, _ in state.due(KEY, 61_000, 10)] == [0]
    assert state.inflight(KEY, 0).attempt == 2  # a postponement is not a delivery
    replayed = PopState()
    for event in decode_events(encode_events([first, postponed])):
        replayed.apply(event)
    assert replayed.inflight(KEY, 0) == state.inflight(KEY, 0)
    assert isinstance(state.ack(KEY, 0, first.token), Acked)
    with pytest.raises(ValueError):
        state.postpone(KEY, 0, first.token, 99_000)  # acked: nothing to postpone


def test_unknown_offsets_and_queues_are_refused_and_done_offsets_are_not_delivered_again():
    state = started(3)
    assert isinstance(state.ack(("other", "T", 0), 0, 1), Refused)
    assert isinstance(state.ack(KEY, 3, 1), Refused)  # never delivered
    assert isinstance(state.change(KEY, 3, 1, 10), Refused)
    state.pass_over(KEY, 10)
    assert state.committed(KEY) == 10
    assert state.pass_over(KEY, 4) is None  # never backwards
    with pytest.raises(ValueError):
        state.deliver(KEY, 4, 1, 10)


def test_next_due_is_the_earliest_invisible_time_of_the_queues():
    state = started()
    state.deliver(KEY, 0, 1, 700)
    state.deliver(KEY, 1, 1, 300)
    assert state.next_due_ms([KEY, ("g", "T", 1)]) == 300
    assert state.next_due_ms([("g", "T", 1)]) is None


def test_the_queues_due_for_a_revive_are_those_with_a_delivery_past_its_invisible_time():
    state = started()
    other = ("g", "T", 1)
    state.progress(other, 0)
    a = state.deliver(KEY, 0, 1, 300)
    state.deliver(other, 0, 1, 700)
    assert state.due_keys(299) == [] and state.due_keys(300) == [KEY]
    assert sorted(state.due_keys(700)) == [KEY, other]
    state.ack(KEY, 0, a.token)
    assert state.due_keys(10_000) == [other]


def test_a_replay_whose_older_events_were_deleted_starts_the_queue_at_the_events_base():
    state = PopState()
    state.apply(Delivered(KEY, 40, 42, 1, 7, 100))
    assert state.committed(KEY) == 42
    assert state.inflight(KEY, 42) is not None
    assert state.ack(KEY, 41, 1) is None  # below the base: done before the retained events


@pytest.mark.parametrize(
    "body",
    [b"", b"{}", b"[1]", b'[{"k":"Z","g":"g","t":"T","q":0,"b":0}]', b'[{"k":"D","g":"g"}]', b"\xff"],
)
def test_a_body_that_is_not_events_is_refused(body):
    with pytest.raises(ValueError):
        decode_events(body)


# -- the property: replay == live ----------------------------------------------------------------

operations = st.lists(
    st.tuples(
        st.sampled_from(["new", "redeliver", "retry", "ack", "ack_stale", "change", "pass"]),
        st.integers(0, 2),  # queue id
        st.integers(0, 50),  # an offset choice / a time step
    ),
    max_size=60,
)


def snapshot(state: PopState):
    progress = {key: state.progress(key, 0) for key in state.keys()}
    return {key: (p.next_offset, dict(p.inflight), p.next_token, dict(p.retried)) for key, p in progress.items()}


@settings(max_examples=200, deadline=None)
@given(operations)
def test_replaying_the_encoded_events_rebuilds_the_live_state(ops):
    live = PopState()
    events = []
    now = 0
    for op, queue_id, choice in ops:
        key = ("g", "T", queue_id)
        p = live.progress(key, 0)
        now += choice
        if op == "new":
            events.append(live.deliver(key, p.next_offset, 1, now + 100))
        elif op == "redeliver":
            for offset, held in live.due(key, now, 1):
                events.append(live.deliver(key, offset, held.attempt + 1, now + 100))
        elif op == "retry":
            for offset, held in live.due(key, now, 1):
                events.append(live.retry(key, offset, held.token))
        elif op in ("ack", "ack_stale", "change") and p.inflight:
            offset = sorted(p.inflight)[choice % len(p.inflight)]
            token = p.inflight[offset].token - (1 if op == "ack_stale" else 0)
            outcome = live.change(key, offset, token, now + 50) if op == "change" else live.ack(key, offset, token)
            if outcome is not None and not isinstance(outcome, Refused):
                events.append(outcome)
        elif op == "pass":
            passed = live.pass_over(key, p.next_offset + choice % 3)
            if passed is not None:
                events.append(passed)
    replayed = PopState()
    for i in range(0, len(events), 7):  # events go to the log in batches
        for event in decode_events(encode_events(events[i : i + 7])):
            replayed.apply(event)
    # Queues the live state only looked at carry no events: compare the ones that do.
    touched = {e.key for e in events}
    assert {k: v for k, v in snapshot(live).items() if k in touched} == snapshot(replayed)


def test_a_delivery_retried_elsewhere_is_done_here_and_its_old_handle_is_stale():
    state = started()
    first = state.deliver(KEY, 0, 1, 1_000)
    state.deliver(KEY, 1, 1, 1_000)
    retried = state.retry(KEY, 0, first.token)
    assert state.inflight(KEY, 0) is None and state.committed(KEY) == 1
    assert state.ack(KEY, 0, first.token) == Refused(RETRIED)
    assert state.change(KEY, 0, first.token, 9_000) == Refused(RETRIED)
    with pytest.raises(ValueError):
        state.retry(KEY, 0, first.token)  # not in flight any more
    replayed = PopState()
    for event in decode_events(encode_events([first, retried])):
        replayed.apply(event)
    assert replayed.ack(KEY, 0, first.token) == Refused(RETRIED)


def test_passed_over_events_round_trip():
    events = [PassedOver(KEY, 3, 9), Delivered(KEY, 3, 9, 2, 4, 77)]
    assert decode_events(encode_events(events)) == events


# -- receipt handles --------------------------------------------------------------------------------


def test_a_handle_verifies_for_its_group_and_topic_only():
    signer = ReceiptSigner(b"s3cret")
    receipt = Receipt(3, 1234, 7, 99_000)
    handle = signer.sign("g", "T", receipt)
    assert signer.verify("g", "T", handle) == receipt
    for group, topic in (("g2", "T"), ("g", "T2")):
        with pytest.raises(InvalidReceiptHandle):
            signer.verify(group, topic, handle)
    with pytest.raises(InvalidReceiptHandle):
        ReceiptSigner(b"another group's secret").verify("g", "T", handle)


@given(st.integers(0, 3), st.integers(0, 9))
def test_a_handle_with_any_field_changed_is_refused(position, digit):
    signer = ReceiptSigner(b"s3cret")
    handle = signer.sign("g", "T", Receipt(3, 1234, 7, 99_000))
    parts = handle.split(".")
    if parts[position] == str(digit):
        return
    parts[position] = str(digit)
    with pytest.raises(InvalidReceiptHandle):
        signer.verify("g", "T", ".".join(parts))


@pytest.mark.parametrize(
    "handle",
    ["", "x", "1.2.3.abc", "a.b.c.d.ffff", "1.2.3.4." + "0" * 300, "1.2.3.4.é", "\u0661.2.3.4." + "0" * 32],
)
def test_malformed_handles_are_refused(handle):
    with pytest.raises(InvalidReceiptHandle):
        ReceiptSigner(b"s").verify("g", "T", handle)


@given(st.text(max_size=80))
def test_any_text_is_a_valid_handle_or_refused_as_invalid(text):
    """Issue 30: a non-ASCII handle raised TypeError in hmac.compare_digest (INTERNAL_ERROR)."""
    signer = ReceiptSigner(b"s3cret")
    handle = signer.sign("g", "T", Receipt(1, 2, 3, 4))
    for candidate in (text, handle[:-1] + text, text + handle):
        try:
            signer.verify("g", "T", candidate)
        except InvalidReceiptHandle:
            pass
