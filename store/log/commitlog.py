"""The CommitLog's append critical section and its reads (the concepts of RocketMQ's CommitLog,
without its size).

Under one lock a put only: picks the segment (ending a full one with a blank record), assigns the
queue offset per `topic-queueId`, stamps the physical offset and store time into the already
encoded bytes, and copies them into the mapping. Encoding happens before, durability waits after,
both outside the lock.

Reads of one message check it whole, its body CRC included: a message damaged at rest raises
`DamagedMessage` and is reported to `on_damage` first (the store's `DamageLog`), so every reader
(consumers, queries, the broker's services) meets the same check in this one place.

Thread-safety: `append` is serialised by `lock`; reads take no lock (segments are copy-on-write,
positions only grow while the store runs); `on_damage` must be callable from any thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ..clock import wall_clock_ms
from ..message import TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE, MessageExt
from .codec import (
    CorruptMessage,
    DamagedMessage,
    EncodedMessage,
    RecordKind,
    check_record,
    decode_checked,
    decode_message,
)
from .mapped_file_queue import MappedFileQueue

# Prepared and rolled-back transaction messages keep no queue offset (they are never dispatched).
NO_QUEUE_OFFSET_TYPES = (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)


class CommitLogClosed(Exception):
    """The CommitLog no longer takes appends (the store is shutting down)."""


class ReplicatedAppendError(Exception):
    """Replicated bytes that cannot go where they were sent; nothing was written."""


@dataclass(frozen=True, slots=True)
class AppendResult:
    wrote_offset: int
    wrote_bytes: int
    queue_offset: int
    store_timestamp_ms: int
    msg_num: int


class CommitLog:
    def __init__(
        self,
        queue: MappedFileQueue,
        clock_ms: Callable[[], int] | None = None,
        on_damage: Callable[[DamagedMessage], None] | None = None,
    ) -> None:
        self.queue = queue
        self.on_damage = on_damage
        self.lock = threading.Lock()
        self.topic_queue_table: dict[str, int] = {}
        self.begin_time_in_lock_ms = 0
        self.accepting = False
        self._clock = clock_ms or wall_clock_ms

    def reset_queue_offsets(self, table: dict[str, int]) -> None:
        """Make `table` ("topic-queueId" -> next queue offset) what later puts number from
        (after recovery, a cut, a promotion). The caller holds `lock` when puts may run."""
        self.topic_queue_table.clear()
        self.topic_queue_table.update(table)

    def next_queue_offset(self, topic: str, queue_id: int) -> int:
        """The queue offset the next put to this queue gets (0 for a queue never written)."""
        return self.topic_queue_table.get(f"{topic}-{queue_id}", 0)

    # -- the critical section -------------------------------------------------------------------

    def append(self, encoded: EncodedMessage) -> AppendResult:
        """Append a single message or a batch; OSError when a new segment cannot be created."""
        size = encoded.size
        with self.lock:
            if not self.accepting:
                raise CommitLogClosed()
            now = self._clock()
            self.begin_time_in_lock_ms = now
            try:
                segment = self.queue.last_for_append()
                if size + 8 > segment.file_size - segment.wrote_position:
                    segment.append_blank()
                    segment = self.queue.last_for_append()
                physical_offset = segment.file_from_offset + segment.wrote_position
                key = encoded.queue_key
                counted = encoded.transaction_type not in NO_QUEUE_OFFSET_TYPES
                queue_offset = self.topic_queue_table.get(key, 0) if counted else 0
                encoded.stamp(physical_offset, queue_offset, now)
                # The queue's next offset moves only once the bytes are written: a failed write
                # (EIO) must not leave a hole in the queue.
                segment.append(encoded.buf)
                if counted:
                    self.topic_queue_table[key] = queue_offset + encoded.count
                segment.store_timestamp_ms = now
            finally:
                self.begin_time_in_lock_ms = 0
        return AppendResult(physical_offset, size, queue_offset, now, encoded.count)

    def append_replicated(self, offset: int, data: bytes) -> int:
        """A slave's append of its master's bytes (whole records) at exactly `offset`, which must
        be the log's end, or a segment start when the log is empty. The bytes must not cross a
        segment end (masters send one segment's bytes at a time). Returns the new end offset;
        ReplicatedAppendError when the bytes cannot go there (nothing is written then)."""
        size = len(data)
        with self.lock:
            if not self.accepting:
                raise CommitLogClosed()
            queue = self.queue
            if not size and queue.last is None:
                return offset
            if queue.last is None:
                if offset % queue.file_size:
                    raise ReplicatedAppendError(
                        f"an empty CommitLog starts at a segment boundary, not at {offset} "
                        f"(segment size {queue.file_size})"
                    )
                if offset != queue.flushed_where:
                    queue.reset_to(offset)
            elif offset != queue.max_offset:
                raise ReplicatedAppendError(f"data for offset {offset} but the CommitLog ends at {queue.max_offset}")
            if not size:
                return offset
            segment = queue.last_for_append(offset)
            if size > segment.file_size - segment.wrote_position:
                raise ReplicatedAppendError(
                    f"{size} bytes at {offset} cross the end of segment {segment.file_from_offset} "
                    f"({segment.file_size - segment.wrote_position} bytes left)"
                )
            segment.append(data)
            return offset + size

    def is_os_page_cache_busy(self, now_ms: int, timeout_ms: int) -> bool:
        begin = self.begin_time_in_lock_ms
        return begin != 0 and now_ms - begin > timeout_ms

    # -- offsets ---------------------------------------------------------------------------------

    @property
    def min_offset(self) -> int:
        return self.queue.min_offset

    @property
    def max_offset(self) -> int:
        return self.queue.max_read_offset

    @property
    def flushed_offset(self) -> int:
        return self.queue.flushed_where

    # -- reads ------------------------------------------------------------------------------------

    def read(self, offset: int, size: int) -> bytes:
        """Raw bytes from `offset`, at most `size`, never past the segment end or readable data."""
        segment = self.queue.find(offset)
        if segment is None:
            return b""
        try:
            return segment.read(offset - segment.file_from_offset, size)
        except ValueError:  # retention or shutdown unmapped the segment after the lookup
            return b""

    def read_message(self, physical_offset: int) -> MessageExt:
        """The message stored at `physical_offset`; CorruptMessage when there is none,
        DamagedMessage (reported to `on_damage` first) when it is there but damaged."""
        segment = self.queue.find(physical_offset)
        if segment is None or physical_offset >= self.max_offset:
            raise CorruptMessage(physical_offset, "no message at this offset (outside the log)")
        pos = physical_offset - segment.file_from_offset
        try:
            view = memoryview(segment.buf)[: segment.read_position]
        except ValueError:  # retention or shutdown unmapped the segment after the lookup
            raise CorruptMessage(physical_offset, "its segment was deleted") from None
        try:
            return decode_message(view, pos, physical_offset)
        except DamagedMessage as exc:
            if self.on_damage is not None:
                self.on_damage(exc)
            raise
        finally:
            view.release()

    def iter_messages(self, start_offset: int | None = None, *, verify_crc: bool = True) -> Iterator[MessageExt]:
        """Every message from `start_offset` (a record boundary; default: the log's start);
        without `verify_crc`, bodies are not checked (for readers of headers only)."""
        offset = self.min_offset if start_offset is None else start_offset
        end = self.max_offset
        while offset < end:
            segment = self.queue.find(offset)
            if segment is None:
                return
            pos = offset - segment.file_from_offset
            limit = segment.read_position
            try:
                view = memoryview(segment.buf)
            except ValueError:  # retention or shutdown unmapped the segment after the lookup
                return
            try:
                record = check_record(view, pos, limit, offset, verify_crc=verify_crc)
                if record.kind == RecordKind.END:
                    return
                if record.kind == RecordKind.BLANK:
                    offset = segment.end_offset
                    continue
                message = decode_checked(view, pos, record)
            finally:
                view.release()
            yield message
            offset += record.size
