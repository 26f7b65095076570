"""The admin API's message browsing over a real store with a clock the test sets
(`rocketstore/broker/admin_messages.py`): pages of a topic by store time hold every message of the
range once, oldest first, whatever the page size and however the messages spread over queues; a
consumer group's committed offsets say which messages it consumed; a dead letter's copy for its
topic."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketstore.broker import admin_messages
from store import Message, MessageStore, PutMessageStatus
from store.metadata.topic_config import TopicConfig
from support import ManualClock, small_store_config

TOPIC = "Browse"
T0 = 1_700_000_000_000


def _store(tmp_path: Path, clock: ManualClock) -> MessageStore:
    return MessageStore(small_store_config(tmp_path / "store", 64 * 1024), clock_ms=clock)


def _put(store: MessageStore, clock: ManualClock, at_ms: int, queue_id: int, body: bytes, **properties: str):
    clock.now = at_ms
    result = store.put_message(Message(TOPIC, queue_id, body, properties=properties))
    assert result.status is PutMessageStatus.PUT_OK
    return result


def _all_pages(store: MessageStore, config: TopicConfig, begin: int, end: int, limit: int) -> list:
    seen, cursor = [], {}
    for _ in range(1000):
        page = admin_messages.list_messages(store, config, begin, end, limit, cursor)
        assert len(page.messages) <= limit
        seen += page.messages
        if not page.more:
            return seen
        cursor = page.next_cursor
    raise AssertionError("paging did not end")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    puts=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 3)), min_size=0, max_size=40),
    window=st.tuples(st.integers(0, 45), st.integers(0, 45)),
    limit=st.integers(1, 7),
    open_end=st.booleans(),
)
def test_pages_hold_the_range_once_oldest_first(tmp_path_factory, puts, window, limit, open_end):
    clock = ManualClock(T0)
    begin, end = T0 + min(window), T0 + max(window)
    with _store(tmp_path_factory.mktemp("pages"), clock) as store:
        config = store.create_or_update_topic(TopicConfig(TOPIC, 4, 4))
        at = T0
        expected = []
        for i, (step, queue_id) in enumerate(puts):
            at += step % 3  # store times grow (the clock never goes back), sometimes equal
            _put(store, clock, at, queue_id, f"m{i}".encode())
            if begin <= at and (open_end or at <= end):
                expected.append((at, queue_id, f"m{i}".encode()))
        assert store.wait_dispatched(10)
        seen = _all_pages(store, config, begin, 0 if open_end else end, limit)
    got = [(m.store_timestamp_ms, m.queue_id, m.body) for m in seen]
    assert sorted(got) == sorted(expected)
    assert [(t, q) for t, q, _ in got] == sorted((t, q) for t, q, _ in got)


def test_a_group_consumed_what_lies_below_its_committed_offset(tmp_path):
    clock = ManualClock(T0)
    with _store(tmp_path, clock) as store:
        store.create_or_update_topic(TopicConfig(TOPIC, 1, 1))
        for i in range(3):
            _put(store, clock, T0 + i, 0, b"x")
        store.consumer_offsets.commit_offset("billing", TOPIC, 0, 2)
        store.consumer_offsets.commit_offset("audit", "Other", 0, 9)
        assert store.wait_dispatched(10)
        seen = admin_messages.views(store, _all_pages(store, store.topics.get(TOPIC), 0, 0, 10))
    assert [[(c.group, c.consumed) for c in v.consumed_by] for v in seen] == [
        [("billing", True)],
        [("billing", True)],
        [("billing", False)],
    ]


def test_a_dead_letter_copy_goes_back_under_a_new_id(tmp_path):
    clock = ManualClock(T0)
    with _store(tmp_path, clock) as store:
        topic = store.create_or_update_topic(TopicConfig(TOPIC, 4, 4))
        store.create_or_update_topic(TopicConfig("%DLQ%g", 1, 1))
        clock.now = T0
        stored = store.put_message(
            Message(
                "%DLQ%g",
                0,
                b"poison",
                properties={"RETRY_TOPIC": TOPIC, "UNIQ_KEY": "OLD", "DLQ_ORIGIN_MESSAGE_ID": "X", "KEYS": "k"},
                reconsume_times=16,
            )
        )
        assert store.wait_dispatched(10)  # the index finds client ids
        dead = admin_messages.find_dead_letter(store, stored.wrote_offset, "")
        assert admin_messages.find_dead_letter(store, None, "OLD") == dead
        assert admin_messages.origin_topic(dead) == TOPIC
        copy = admin_messages.resent_copy(dead, topic, "NEW")
        other = _put(store, clock, T0 + 1, 0, b"plain")
        with pytest.raises(ValueError, match="not in a dead-letter topic"):
            admin_messages.find_dead_letter(store, other.wrote_offset, "")
    assert copy.topic == TOPIC and copy.queue_id == admin_messages.resend_queue(topic, "NEW") < 4
    assert dict(copy.properties) == {"UNIQ_KEY": "NEW", "ORIGIN_MESSAGE_ID": "OLD", "KEYS": "k"}
    assert copy.reconsume_times == 0 and copy.store_host is None and copy.body == b"poison"
    with pytest.raises(ValueError, match="1 to 128"):
        admin_messages.check_client_id("has space")
