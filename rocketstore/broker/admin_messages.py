"""What the admin API's message browsing reads and decides, over one store: a topic's messages
by store time (paged across its queues), which consumer groups consumed a message, and a dead
letter's copy for its original topic. Plain functions of the store; `admin.AdminServicer` runs
them off the event loop, turns their `ValueError`s into INVALID_ARGUMENT and does the put.

Paging (`ListMessages`): each queue's messages in [begin, end] form a run of queue offsets (store
times grow along a queue); a page reads up to `limit` messages from each queue's next offset,
keeps the `limit` oldest by (store time, queue id, queue offset), and its cursor is the next
offset of every queue that has more. Reads go through the consume queues and the CommitLog
directly, so browsing neither counts as consumption in the statistics nor moves any offset.

Dead letters: a message in `%DLQ%<group>` keeps the topic it came from in RETRY_TOPIC (the pop
service writes it, as RocketMQ does). Its copy gets the caller's new client id (so a request
sent twice stores one copy: the store answers a repeated id of a recent put with the first
result), ORIGIN_MESSAGE_ID = the old client id, no reconsume count, and loses the dead-letter
properties.

Thread-safety: reads the store's thread-safe views only.
"""

from __future__ import annotations

import heapq
import re
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from store import MessageStore, TopicConfig
from store.log.codec import CorruptMessage, DamagedMessage
from store.message import (
    PROPERTY_DLQ_ORIGIN_MESSAGE_ID,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    Message,
    MessageExt,
)
from store.metadata.topic_config import DLQ_TOPIC_PREFIX
from wire.rpc import admin_pb2

from .admin_queries import find_by_id, message_view

DEFAULT_PAGE = 32
MAX_PAGE = 256
_NOT_RESENT = frozenset({PROPERTY_RETRY_TOPIC, PROPERTY_DLQ_ORIGIN_MESSAGE_ID, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX})
# A client message id: what RocketMQ's clients make (hex), bounded like the v2 API's.
_CLIENT_ID = re.compile(r"[0-9A-Za-z_-]{1,128}")


def page_size(requested: int) -> int:
    if requested < 0:
        raise ValueError(f"max_messages must not be negative, got {requested}")
    return min(requested or DEFAULT_PAGE, MAX_PAGE)


# -- which groups consumed a message ------------------------------------------------------------


class Consumption:
    """The groups with offsets in one topic, read once, asked about many of its messages."""

    def __init__(self, store: MessageStore, topic: str) -> None:
        offsets = store.consumer_offsets
        self._committed = {group: offsets.query_offsets(group, topic) for group in sorted(offsets.groups_of(topic))}

    def of(self, queue_id: int, queue_offset: int) -> list[admin_pb2.GroupConsumption]:
        return [
            admin_pb2.GroupConsumption(
                group=group, consumer_offset=queues[queue_id], consumed=queues[queue_id] > queue_offset
            )
            for group, queues in self._committed.items()
            if queue_id in queues
        ]


def views(store: MessageStore, messages: Iterable[MessageExt]) -> list[admin_pb2.MessageView]:
    """`message_view`s with the groups that consumed each message."""
    consumption: dict[str, Consumption] = {}
    out = []
    for m in messages:
        if m.topic not in consumption:
            consumption[m.topic] = Consumption(store, m.topic)
        out.append(message_view(m, consumption[m.topic].of(m.queue_id, m.queue_offset)))
    return out


# -- a topic's messages by store time -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Page:
    messages: list[MessageExt]
    next_cursor: dict[int, int]  # queue id -> next queue offset, for the queues with more to read
    damaged_offsets: list[int]

    @property
    def more(self) -> bool:
        return bool(self.next_cursor)


def _start_offsets(store: MessageStore, config: TopicConfig, begin_ms: int, cursor: dict[int, int]) -> dict[int, int]:
    queues = max(config.read_queue_nums, config.write_queue_nums)
    if cursor:
        bad = sorted(q for q in cursor if not 0 <= q < queues)
        if bad:
            raise ValueError(f"topic {config.topic_name} has queues 0..{queues - 1}; the cursor names {bad}")
        return dict(cursor)
    starts = {}
    for queue_id in range(queues):
        low = store.min_queue_offset(config.topic_name, queue_id)
        starts[queue_id] = max(low, store.get_offset_in_queue_by_time(config.topic_name, queue_id, begin_ms))
    return starts


def _read_run(
    store: MessageStore, topic: str, queue_id: int, start: int, begin_ms: int, end_ms: int, limit: int
) -> tuple[list[MessageExt], int, bool, list[int]]:
    """Up to `limit` messages of one queue from `start` stored within [begin, end]: (messages,
    the offset after the last one read, whether the queue may hold more in range, damaged)."""
    queue = store.find_consume_queue(topic, queue_id)
    if queue is None:
        return [], start, False, []
    offset = max(start, queue.min_offset)
    high = store.dispatched_queue_offset(topic, queue_id)
    found: list[MessageExt] = []
    damaged: list[int] = []
    while offset < high and len(found) < limit:
        unit = queue.get_unit(offset)
        offset += 1
        if unit is None or unit.is_filler:
            continue
        try:
            message = store.read_message(unit.commit_log_offset)
        except DamagedMessage:
            damaged.append(unit.commit_log_offset)
            continue
        except CorruptMessage:
            continue  # its segment was deleted by retention since
        if message.store_timestamp_ms < begin_ms:
            continue
        if end_ms and message.store_timestamp_ms > end_ms:
            return found, offset - 1, False, damaged
        found.append(message)
    return found, offset, offset < high, damaged


def list_messages(
    store: MessageStore, config: TopicConfig, begin_ms: int, end_ms: int, limit: int, cursor: dict[int, int]
) -> Page:
    """One page of the topic's messages stored within [begin_ms, end_ms] (end 0: no bound),
    oldest first; `cursor` is the previous page's `next_cursor` ({} for the first)."""
    if begin_ms < 0 or end_ms < 0:
        raise ValueError("times are Unix milliseconds, not negative")
    if end_ms and end_ms < begin_ms:
        raise ValueError(f"the range ends ({end_ms}) before it begins ({begin_ms})")
    topic = config.topic_name
    runs: dict[int, tuple[list[MessageExt], int, bool]] = {}
    damaged: list[int] = []
    for queue_id, start in sorted(_start_offsets(store, config, begin_ms, cursor).items()):
        found, after, more, bad = _read_run(store, topic, queue_id, start, begin_ms, end_ms, limit)
        runs[queue_id] = (found, after, more)
        damaged += bad
    oldest = heapq.nsmallest(
        limit,
        (m for found, _, _ in runs.values() for m in found),
        key=lambda m: (m.store_timestamp_ms, m.queue_id, m.queue_offset),
    )
    taken: dict[int, int] = {}
    for m in oldest:
        taken[m.queue_id] = max(taken.get(m.queue_id, -1), m.queue_offset)
    next_cursor = {}
    for queue_id, (found, after, more) in runs.items():
        if queue_id in taken and taken[queue_id] < found[-1].queue_offset:
            next_cursor[queue_id] = taken[queue_id] + 1  # read but not on this page
        elif queue_id not in taken and found:
            next_cursor[queue_id] = found[0].queue_offset
        elif more:
            next_cursor[queue_id] = after
    oldest.sort(key=lambda m: (m.store_timestamp_ms, m.queue_id, m.queue_offset))
    return Page(oldest, next_cursor, sorted(damaged))


# -- dead letters -------------------------------------------------------------------------------


def is_dead_letter_topic(topic: str) -> bool:
    return topic.startswith(DLQ_TOPIC_PREFIX)


def find_dead_letter(store: MessageStore, commit_log_offset: int | None, msg_id: str) -> MessageExt:
    """The dead letter at a CommitLog offset or with a message id (either form; a client id is
    looked up in every dead-letter topic). ValueError when there is none, it is not a dead letter
    or the id names several; DamagedMessage when it is stored damaged."""
    if commit_log_offset is not None:
        try:
            found: Sequence[MessageExt] = [store.read_message(commit_log_offset)]
        except DamagedMessage:
            raise
        except CorruptMessage:
            raise ValueError(f"no message at CommitLog offset {commit_log_offset}") from None
    else:
        found = []
        for topic in sorted(t.topic_name for t in store.topics.topics() if is_dead_letter_topic(t.topic_name)):
            found.extend(m for m in find_by_id(store, msg_id, topic, 2) if m not in found)
        if not found:
            found = find_by_id(store, msg_id, "", 1)  # an offset msgId of a message that is no dead letter
        if not found:
            raise ValueError(f"no dead letter has message id {msg_id}")
        if len(found) > 1:
            raise ValueError(
                f"{len(found)} dead letters have client id {msg_id}; name one by its CommitLog offset "
                f"({', '.join(str(m.physical_offset) for m in found)})"
            )
    message = found[0]
    if not is_dead_letter_topic(message.topic):
        raise ValueError(
            f"the message at CommitLog offset {message.physical_offset} is in {message.topic}, "
            f"not in a dead-letter topic ({DLQ_TOPIC_PREFIX}<group>)"
        )
    return message


def origin_topic(dead_letter: MessageExt) -> str:
    origin = dead_letter.properties.get(PROPERTY_RETRY_TOPIC, "")
    if not origin:
        raise ValueError(
            f"the dead letter at CommitLog offset {dead_letter.physical_offset} does not say which topic it "
            f"came from (no {PROPERTY_RETRY_TOPIC} property)"
        )
    return origin


def check_client_id(new_client_msg_id: str) -> None:
    if not _CLIENT_ID.fullmatch(new_client_msg_id):
        raise ValueError(
            f"new_client_msg_id must be 1 to 128 letters, digits, '-' or '_', got {new_client_msg_id[:40]!r}"
        )


def resend_queue(config: TopicConfig, new_client_msg_id: str) -> int:
    """The write queue the copy goes to: fixed by its id, so a repeated request picks the same."""
    return zlib.crc32(new_client_msg_id.encode()) % config.write_queue_nums


def resent_copy(dead_letter: MessageExt, config: TopicConfig, new_client_msg_id: str) -> Message:
    """The message to put into the original topic (`config`) for a dead letter."""
    properties = {k: v for k, v in dead_letter.properties.items() if k not in _NOT_RESENT}
    properties[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = new_client_msg_id
    old_id = dead_letter.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    if old_id:
        properties[PROPERTY_ORIGIN_MESSAGE_ID] = old_id
    return dead_letter.to_message(
        topic=config.topic_name,
        queue_id=resend_queue(config, new_client_msg_id),
        properties=properties,
        reconsume_times=0,
        store_host=None,
    )
