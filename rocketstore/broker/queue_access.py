"""What a client may name when it reads a queue or commits an offset: the rules both client APIs
(gRPC's `messaging.py`, remoting's `remoting_server.py`) apply, so they refuse the same requests.

- Names follow RocketMQ's rules (`store.topic_config`): a bad topic is ILLEGAL_TOPIC, a bad group
  ILLEGAL_GROUP.
- A queue id is 0..2^31-1 (ILLEGAL_QUEUE_ID), and below the topic's queue count unless the store
  holds that queue already (a slave knows queues from the data it replicated before its master's
  topic table reaches it).
- The topic exists (TOPIC_NOT_FOUND): reads and offsets never create topics.
- A committed offset is 0..2^63-1 (ILLEGAL_OFFSET) and, when it adds an entry to the consumer
  offset table, the table is below consumerOffsetMaxEntries (TABLE_FULL).

Each front end maps a `QueueRefusal` to its own codes. Pure functions over the store's tables;
thread-safe as those are.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from store import MessageStore
from store.consumer_offset import OffsetCommit

from .v2_messages import _INT32_MAX, name_problem

_INT64_MAX = 2**63 - 1


class QueueRefusal(enum.Enum):
    ILLEGAL_TOPIC = "ILLEGAL_TOPIC"
    ILLEGAL_GROUP = "ILLEGAL_GROUP"
    ILLEGAL_QUEUE_ID = "ILLEGAL_QUEUE_ID"
    TOPIC_NOT_FOUND = "TOPIC_NOT_FOUND"
    ILLEGAL_OFFSET = "ILLEGAL_OFFSET"
    TABLE_FULL = "TABLE_FULL"


@dataclass(frozen=True, slots=True)
class Refused:
    kind: QueueRefusal
    text: str


def group_problem(group: str) -> Refused | None:
    problem = name_problem("group", group)
    return None if problem is None else Refused(QueueRefusal.ILLEGAL_GROUP, problem)


def queue_id_problem(queue_id: int) -> Refused | None:
    if 0 <= queue_id <= _INT32_MAX:
        return None
    return Refused(QueueRefusal.ILLEGAL_QUEUE_ID, f"queue id {queue_id} is out of range (0..{_INT32_MAX})")


def name_and_queue_problem(topic: str, queue_id: int) -> Refused | None:
    """The checks that need no table: the topic's name and the queue id's range."""
    problem = name_problem("topic", topic)
    if problem is not None:
        return Refused(QueueRefusal.ILLEGAL_TOPIC, problem)
    return queue_id_problem(queue_id)


def queue_problem(store: MessageStore, topic: str, queue_id: int) -> Refused | None:
    """Why (topic, queue) cannot be read or have offsets; None when it can."""
    refused = name_and_queue_problem(topic, queue_id)
    if refused is not None:
        return refused
    if store.find_consume_queue(topic, queue_id) is not None:
        return None
    config = store.topics.get(topic)
    if config is None:
        return Refused(QueueRefusal.TOPIC_NOT_FOUND, f"topic {topic} does not exist")
    queues = max(config.read_queue_nums, config.write_queue_nums)
    if queue_id >= queues:
        return Refused(
            QueueRefusal.ILLEGAL_QUEUE_ID, f"queue id {queue_id} is out of range: topic {topic} has {queues} queues"
        )
    return None


def offset_problem(store: MessageStore, group: str | None, topic: str, queue_id: int) -> Refused | None:
    """Why the group's offset of (topic, queue) cannot be read or committed (no group: only the
    queue is checked)."""
    if group is not None:
        refused = group_problem(group)
        if refused is not None:
            return refused
    return queue_problem(store, topic, queue_id)


def commit_consumer_offset(store: MessageStore, group: str, topic: str, queue_id: int, offset: int) -> Refused | None:
    """Commit a client's offset after every check above; None when it was committed."""
    refused = offset_problem(store, group, topic, queue_id)
    if refused is not None:
        return refused
    if not 0 <= offset <= _INT64_MAX:
        return Refused(QueueRefusal.ILLEGAL_OFFSET, f"offset {offset} is out of range (0..{_INT64_MAX})")
    offsets = store.consumer_offsets
    if offsets.commit_offset(group, topic, queue_id, offset) is OffsetCommit.TABLE_FULL:
        return Refused(QueueRefusal.TABLE_FULL, offsets.table_full_reason())
    return None
