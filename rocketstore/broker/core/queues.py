"""What a client may name: topics, groups, queues and committed offsets, the rules every service
of the core applies before it reads, writes or commits (so both front ends refuse alike).

- Names follow RocketMQ's rules (`store.topic_config`): a bad topic is ILLEGAL_TOPIC, a bad group
  ILLEGAL_GROUP.
- A queue id is 0..2^31-1 (ILLEGAL_QUEUE_ID), and below the topic's queue count unless the store
  holds that queue already (a slave knows queues from the data it replicated before its master's
  topic table reaches it).
- The topic exists (TOPIC_NOT_FOUND): reads and offsets never create topics.
- A committed offset is 0..2^63-1 (ILLEGAL_OFFSET) and, when it adds an entry to the consumer
  offset table, the table is below consumerOffsetMaxEntries (TABLE_FULL).

`topic_from_queues` is the topic a slave knows from its consume queues alone. Pure functions over
the store's tables; thread-safe as those are.
"""

from __future__ import annotations

from store import MessageStore
from store.metadata.consumer_offset import OffsetCommit
from store.metadata.topic_config import (
    MAX_QUEUE_NUMS,
    Permission,
    TopicConfig,
    validate_group_name,
    validate_topic_name,
)

from .refusals import Reason, Refusal

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


def name_problem(kind: str, name: str) -> str | None:
    """Why `name` is not a legal topic (`kind` "topic") or group name; None when it is."""
    try:
        (validate_topic_name if kind == "topic" else validate_group_name)(name)
    except ValueError as exc:
        return str(exc)
    return None


def topic_problem(topic: str) -> Refusal | None:
    problem = name_problem("topic", topic)
    return None if problem is None else Refusal(Reason.ILLEGAL_TOPIC, problem)


def group_problem(group: str) -> Refusal | None:
    problem = name_problem("group", group)
    return None if problem is None else Refusal(Reason.ILLEGAL_GROUP, problem)


def queue_id_problem(queue_id: int) -> Refusal | None:
    if 0 <= queue_id <= INT32_MAX:
        return None
    return Refusal(Reason.ILLEGAL_QUEUE_ID, f"queue id {queue_id} is out of range (0..{INT32_MAX})")


def name_and_queue_problem(topic: str, queue_id: int) -> Refusal | None:
    """The checks that need no table: the topic's name and the queue id's range."""
    return topic_problem(topic) or queue_id_problem(queue_id)


def topic_from_queues(store: MessageStore, topic: str) -> TopicConfig | None:
    """A read-only config covering the topic's consume queues: a slave knows topics its master
    created from the data it replicated before the master's topic table reaches it."""
    ids = [q.queue_id for q in store.consume_queues.queues() if q.topic == topic]
    if not ids:
        return None
    queues = min(max(ids) + 1, MAX_QUEUE_NUMS)
    return TopicConfig(topic, queues, queues, int(Permission.READ))


def queue_problem(store: MessageStore, topic: str, queue_id: int) -> Refusal | None:
    """Why (topic, queue) cannot be read or have offsets; None when it can."""
    refused = name_and_queue_problem(topic, queue_id)
    if refused is not None:
        return refused
    if store.find_consume_queue(topic, queue_id) is not None:
        return None
    config = store.topics.get(topic)
    if config is None:
        return Refusal(Reason.TOPIC_NOT_FOUND, f"topic {topic} does not exist")
    queues = max(config.read_queue_nums, config.write_queue_nums)
    if queue_id >= queues:
        return Refusal(
            Reason.ILLEGAL_QUEUE_ID, f"queue id {queue_id} is out of range: topic {topic} has {queues} queues"
        )
    return None


def offset_problem(store: MessageStore, group: str | None, topic: str, queue_id: int) -> Refusal | None:
    """Why the group's offset of (topic, queue) cannot be read or committed (no group: only the
    queue is checked)."""
    if group is not None:
        refused = group_problem(group)
        if refused is not None:
            return refused
    return queue_problem(store, topic, queue_id)


def commit_consumer_offset(store: MessageStore, group: str, topic: str, queue_id: int, offset: int) -> Refusal | None:
    """Commit a client's offset after every check above; None when it was committed."""
    refused = offset_problem(store, group, topic, queue_id)
    if refused is not None:
        return refused
    if not 0 <= offset <= INT64_MAX:
        return Refusal(Reason.ILLEGAL_OFFSET, f"offset {offset} is out of range (0..{INT64_MAX})")
    offsets = store.consumer_offsets
    if offsets.commit_offset(group, topic, queue_id, offset) is OffsetCommit.TABLE_FULL:
        return Refusal(Reason.TABLE_FULL, offsets.table_full_reason())
    return None
