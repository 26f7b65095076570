"""rocketstore.broker.core.queues: the rules every read and offset commit of the broker core
applies (issue 30, item 6): names, queue ranges, existing topics, offsets in range, the table's
bound."""

from __future__ import annotations

import pytest

from rocketstore.broker.core.queues import (
    commit_consumer_offset,
    name_and_queue_problem,
    offset_problem,
    queue_problem,
)
from rocketstore.broker.core.refusals import Reason
from store import MessageStore, StoreConfig
from store.metadata.topic_config import TopicConfig


@pytest.fixture
def store(tmp_path):
    config = StoreConfig(
        store_path_root_dir=str(tmp_path / "store"),
        mapped_file_size_commit_log=64 * 1024,
        mapped_file_size_consume_queue=1024 * 20,
        consumer_offset_max_entries=3,
    )
    with MessageStore(config) as opened:
        opened.topics.create_or_update(TopicConfig("Orders", 2, 2))
        yield opened


@pytest.mark.parametrize(
    ("group", "topic", "queue_id", "offset", "reason"),
    [
        ("g", "Nope", 0, 1, Reason.TOPIC_NOT_FOUND),
        ("g", "bad topic", 0, 1, Reason.ILLEGAL_TOPIC),
        ("bad@group", "Orders", 0, 1, Reason.ILLEGAL_GROUP),
        ("g", "Orders", 2, 1, Reason.ILLEGAL_QUEUE_ID),
        ("g", "Orders", -1, 1, Reason.ILLEGAL_QUEUE_ID),
        ("g", "Orders", 2**31, 1, Reason.ILLEGAL_QUEUE_ID),
        ("g", "Orders", 0, -1, Reason.ILLEGAL_OFFSET),
        ("g", "Orders", 0, 2**63, Reason.ILLEGAL_OFFSET),
    ],
)
def test_a_refused_commit_names_why_and_writes_nothing(store, group, topic, queue_id, offset, reason):
    refused = commit_consumer_offset(store, group, topic, queue_id, offset)
    assert refused is not None and refused.reason is reason
    assert store.consumer_offsets.entries == 0 and not store.consumer_offsets.dirty


def test_commits_fill_the_table_to_its_bound_and_then_only_held_entries_move(store):
    for group, queue_id in (("a", 0), ("a", 1), ("b", 0)):
        assert commit_consumer_offset(store, group, "Orders", queue_id, 5) is None
    refused = commit_consumer_offset(store, "c", "Orders", 0, 5)
    assert refused is not None and refused.reason is Reason.TABLE_FULL
    assert "consumerOffsetMaxEntries" in refused.text
    assert commit_consumer_offset(store, "a", "Orders", 1, 7) is None
    assert store.consumer_offsets.query_offset("a", "Orders", 1) == 7


def test_reads_check_the_same_queue_rules_and_names_alone_need_no_table(store):
    assert queue_problem(store, "Orders", 1) is None
    assert offset_problem(store, None, "Orders", 1) is None
    refused = offset_problem(store, "g", "Orders", 9)
    assert refused is not None and "has 2 queues" in refused.text
    # A topic not created yet: its name and queue id are fine, the table knows nothing of it.
    assert name_and_queue_problem("Later", 0) is None
    refused = queue_problem(store, "Later", 0)
    assert refused is not None and refused.reason is Reason.TOPIC_NOT_FOUND
