"""Reads by queue offset, by key and by msgId (RocketMQ's DefaultMessageStore.getMessage,
queryMessage and viewMessageById), over the ConsumeQueues, IndexFiles and the CommitLog.

Decisions follow RocketMQ: a queue offset below the queue's minimum answers OFFSET_TOO_SMALL, at
its end OFFSET_OVERFLOW_ONE, past it OFFSET_OVERFLOW_BADLY, each with the next offset to begin
from; units whose CommitLog bytes were deleted answer MESSAGE_WAS_REMOVING; a tag filter compares
hash codes first, then the message's TAGS.

A damaged message (its body fails its CRC: `codec.DamagedMessage`, reported to the store's
`DamageLog` by the CommitLog's read) is never handed out and never skipped: a read stops before
it, answering FOUND with the messages before it, or MESSAGE_CORRUPTED when it is the first one,
with `next_begin_offset` at its queue offset and `reason` naming it. Going past it is the
reader's decision (a read from the next queue offset serves what follows). A query by key leaves
damaged messages out of its answer and lists their offsets; a view by msgId raises.

`assigned_not_dispatched` is the read-your-writes decision: a queue offset the put path assigned
(its put may already be acknowledged) that the dispatcher has not queued yet; a reader that finds
nothing there waits for the dispatch instead of answering "no message".

Thread-safety: reads take no lock and may run on any number of threads beside the writer and the
dispatcher.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..index.index_file import IndexService
from ..log.codec import CorruptMessage, DamagedMessage, decode_msg_id
from ..log.commitlog import CommitLog
from ..log.damage import describe
from ..message import PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, MessageExt
from ..status import GetMessageStatus
from .consume_queue import ConsumeQueueTable
from .message_filter import TagFilter

Status = GetMessageStatus


@dataclass(frozen=True, slots=True)
class GetMessageResult:
    status: GetMessageStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: tuple[MessageExt, ...] = ()
    buffer_total_size: int = 0
    # MESSAGE_CORRUPTED: which message is damaged and why (its CommitLog offset, topic, queue).
    reason: str = ""

    @property
    def found(self) -> bool:
        return self.status is GetMessageStatus.FOUND


@dataclass(frozen=True, slots=True)
class QueryMessageResult:
    messages: tuple[MessageExt, ...]
    index_last_update_timestamp_ms: int
    index_last_update_phy_offset: int
    # CommitLog offsets of damaged messages the index named, left out of `messages`.
    damaged_offsets: tuple[int, ...] = ()


def assigned_not_dispatched(queue_offset: int, dispatched_next: int, assigned_next: int) -> bool:
    """Whether `queue_offset` holds a message the put path appended but the dispatcher has not
    queued yet: at or past the queue's dispatched end (`dispatched_next`, exclusive) and before
    the next offset a put would get (`assigned_next`)."""
    return dispatched_next <= queue_offset < assigned_next


class MessageReader:
    def __init__(
        self,
        commit_log: CommitLog,
        queues: ConsumeQueueTable,
        index: IndexService | None,
    ) -> None:
        self._commit_log = commit_log
        self._queues = queues
        self._index = index

    def get_message(  # noqa: C901 - RocketMQ's getMessage decision table, case by case
        self,
        group: str,
        topic: str,
        queue_id: int,
        queue_offset: int,
        max_msg_nums: int,
        max_total_bytes: int,
        tag_filter: TagFilter | None = None,
    ) -> GetMessageResult:
        if max_msg_nums <= 0 or max_total_bytes <= 0:
            raise ValueError("max_msg_nums and max_total_bytes must be positive")
        cq = self._queues.find(topic, queue_id)
        # Queue offsets the put path assigned (messages appended, maybe not dispatched yet), up
        # to the next one it will assign: a pull there is early, not wrong, and waits like one
        # at the end of the queue. Read before the queue's max offset, which never passes it, so
        # an offset a put was acknowledged with (or the one after it) is never answered as past
        # the end while the dispatcher catches up.
        assigned = self._commit_log.next_queue_offset(topic, queue_id)
        if cq is None:
            if 0 <= queue_offset <= assigned and assigned > 0:
                return GetMessageResult(Status.OFFSET_OVERFLOW_ONE, queue_offset, 0, 0)
            return GetMessageResult(Status.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
        min_offset, max_offset = cq.min_offset, cq.max_offset
        if max_offset == 0 and assigned == 0:
            return GetMessageResult(Status.NO_MESSAGE_IN_QUEUE, 0, min_offset, max_offset)
        if queue_offset < min_offset:
            return GetMessageResult(Status.OFFSET_TOO_SMALL, min_offset, min_offset, max_offset)
        if queue_offset == max_offset or max_offset < queue_offset <= assigned:
            return GetMessageResult(Status.OFFSET_OVERFLOW_ONE, queue_offset, min_offset, max_offset)
        if queue_offset > max_offset:
            correction = min_offset if min_offset == 0 else max_offset
            return GetMessageResult(Status.OFFSET_OVERFLOW_BADLY, correction, min_offset, max_offset)

        # Scan more units than wanted: filtered-out ones do not count towards max_msg_nums.
        units = cq.get_units(queue_offset, max(max_msg_nums, 16) * 4)
        if not units:
            # RocketMQ's rollNextFile: the units' file went away under us; go on at the next file.
            units_per_file = cq.file_size // 20
            next_file = (queue_offset // units_per_file + 1) * units_per_file
            return GetMessageResult(Status.OFFSET_FOUND_NULL, next_file, min_offset, max_offset)
        commit_log_min = self._commit_log.min_offset
        messages: list[MessageExt] = []
        total = 0
        status = Status.NO_MATCHED_MESSAGE
        next_offset = queue_offset
        for unit in units:
            if unit.is_filler:
                next_offset += 1
                continue
            if len(messages) >= max_msg_nums or (messages and total + unit.size > max_total_bytes):
                break
            next_offset += 1
            if tag_filter is not None and not tag_filter.matches_code(unit.tags_code):
                continue
            if unit.commit_log_offset < commit_log_min:
                if not messages:
                    status = Status.MESSAGE_WAS_REMOVING
                continue
            try:
                message = self._commit_log.read_message(unit.commit_log_offset)
            except DamagedMessage as exc:
                next_offset -= 1  # the read stops at it: the next one begins there
                if messages:
                    break
                return GetMessageResult(
                    Status.MESSAGE_CORRUPTED, next_offset, min_offset, max_offset, reason=describe(exc)
                )
            except CorruptMessage:
                if not messages:
                    status = Status.MESSAGE_WAS_REMOVING
                continue
            if tag_filter is not None and not tag_filter.matches_tags(message.tags):
                continue
            messages.append(message)
            total += unit.size
        if messages:
            status = Status.FOUND
        return GetMessageResult(status, next_offset, min_offset, max_offset, tuple(messages), total)

    def query_message(self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int) -> QueryMessageResult:
        """Messages of `topic` whose KEYS (or unique key) hold `key`, stored in [begin, end]."""
        if self._index is None:
            return QueryMessageResult((), 0, 0)
        offsets = self._index.query_offsets(topic, key, max_num, begin_ms, end_ms)
        found = []
        damaged = []
        for offset in offsets:
            try:
                message = self._commit_log.read_message(offset)
            except DamagedMessage as exc:
                # Its keys are not checked (a hash collision may have named it): listed when its
                # topic matches, so that the asker hears of it rather than of nothing.
                if exc.topic == topic:
                    damaged.append(offset)
                continue
            except CorruptMessage:
                continue  # deleted by retention since it was indexed
            keys = (message.keys or "").split()
            if message.topic == topic and (
                key in keys or message.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) == key
            ):
                found.append(message)
        return QueryMessageResult(
            tuple(found), self._index.last_update_timestamp, self._index.last_update_phy_offset, tuple(damaged)
        )

    def view_message_by_id(self, msg_id: str) -> MessageExt:
        """The message a msgId names; ValueError for a malformed id, CorruptMessage when no
        message is stored at its offset, DamagedMessage when it is stored damaged."""
        _, offset = decode_msg_id(msg_id)
        message = self._commit_log.read_message(offset)
        if message.msg_id != msg_id.upper():
            raise CorruptMessage(offset, f"the message at this offset has msgId {message.msg_id}")
        return message
