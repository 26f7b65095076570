"""RocketMQ's ConsumeQueue: one index per (topic, queue id) from queue offsets to CommitLog
messages, and `ConsumeQueueTable`, the set of them under a store root.

Owns `<root>/consumequeue/<topic>/<queueId>/` and nothing else: the CommitLog, the checkpoint and
the dispatcher that feeds these queues live elsewhere and call in.

On-disk layout (docs/design.md §3, byte-compatible with RocketMQ). A queue directory holds files of
`file_size` bytes (`mapped_file_size_consume_queue`, default 300,000 units = 6,000,000 bytes), each
named by the byte offset of its first unit within the queue, 20 digits zero-padded; the files are
contiguous; each is sparse, its blocks reserved 64 KiB at a time ahead of the units written
(so a full disk fails a reservation, never a write through the mapping). Queue offset N is the
20-byte unit at byte N * 20, big-endian:

    0   commit log offset   i64   where the message starts in the CommitLog
    8   size                i32   the message's TOTALSIZE
    12  tags code           i64   Java String.hashCode of the TAGS property (0 without tags);
                                  for SCHEDULE_TOPIC_XXXX, the delivery timestamp in ms

Filler units (0, 0x7FFFFFFF, 0) hold places that carry no message: RocketMQ writes them in front of
the first unit of a queue that starts in the middle of a file (fillPreBlank), and so do we; we also
write them over a gap, when a put lands beyond the end of a non-empty queue (the files must stay
contiguous, so the gap costs what its messages would have). Readers get fillers like any unit
(index i of `get_units` is always queue offset start + i); `CqUnit.is_filler` tells them to skip.
A unit of zeros, or any unit with a negative offset, a non-positive size, or (ours) a CommitLog
offset below the end of the previous real unit, ends the queue at recovery: units of one queue are
written in CommitLog order, so that check catches torn units RocketMQ's own check would accept.

Crash behaviour: a unit's size field is written last, with one aligned 4-byte store, so a process
killed mid-put leaves either the unit or a zero size, which recovery reads as the end. Bytes past
the end of a queue are kept zero (truncation zeroes what it drops, recovery zeroes a torn tail) so
a later recovery never resurrects a stale unit behind a newer end.

Thread-safety: one writer, the dispatcher, calls `put`; the clean-up service may call
`correct_min_offset` and `delete_expired_files` at the same time, the flush service `flush`. Writers
serialise on a per-queue lock; `flush` runs under a second lock that only file deletion and
truncation also take, so an fdatasync never races a file being closed and puts never wait for a
disk sync. Readers (`get_unit`, `get_units`, `get_offset_in_queue_by_time`, the offsets) take no
lock: the file list is an immutable tuple replaced as a whole, and `max_offset` is published after
a unit's bytes are in place. A reader racing a deletion of the file it reads gets None / [] (the
unit is gone). `recover` and `truncate_dirty` run at start-up, before readers are admitted.
"""

from __future__ import annotations

import logging
import shutil
import struct
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from ..log.codec import java_string_hash
from ..log.commitlog_scan import first_nonzero
from ..log.mapped_file import MappedFile, fsync_dir, mkdir_durable
from ..log.mapped_file_queue import MappedFileQueue

log = logging.getLogger(__name__)

UNIT_SIZE = 20
DEFAULT_FILE_SIZE = 300_000 * UNIT_SIZE
FILLER_SIZE = 0x7FFFFFFF  # Integer.MAX_VALUE, RocketMQ's blank-unit size
RECOVER_FILES = 3  # RocketMQ scans the last three files of each queue at start-up
DEFAULT_PROBE_BYTES = 64 * 1024
# Files are sparse and take disk blocks this much at a time ahead of the units written: a queue
# with one message costs 64 KiB, not a whole preallocated file (6 MB by default), which a client
# creating topics could otherwise turn into a full disk.
RESERVE_STEP_BYTES = 64 * 1024

_UNIT = struct.Struct(">qiq")
_UNIT_HEAD = struct.Struct(">qi")
_SIZE = struct.Struct(">i")
_FILLER_SIZE_BYTES = _SIZE.pack(FILLER_SIZE)
_ZERO_UNIT = bytes(UNIT_SIZE)
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1
_CHUNK_UNITS = 512  # units read per step when walking over fillers
_SCAN_CHUNK = 3_276 * UNIT_SIZE  # bytes copied per step of the recovery walk (~64 KiB)

CONSUME_QUEUE_DIR = "consumequeue"


class ConsumeQueueConflict(Exception):
    """A put contradicts what the queue already holds (a different unit at that offset, or a
    CommitLog offset going backwards): the dispatcher and the queue disagree."""


class ConsumeQueueClosed(RuntimeError):
    """A put after close()."""


class CqUnit(NamedTuple):
    commit_log_offset: int
    size: int
    tags_code: int

    @property
    def is_filler(self) -> bool:
        return self.size == FILLER_SIZE and self.commit_log_offset == 0 and self.tags_code == 0


FILLER = CqUnit(0, FILLER_SIZE, 0)


# -- units, sans-IO ------------------------------------------------------------------------------


_tags_codes: dict[str, int] = {}


def tags_code(tags: str | None) -> int:
    """The tags code of a message with these TAGS (RocketMQ's tagsString2tagsCode). Tags repeat
    across messages, so their hashes are remembered (a bounded number of them)."""
    if not tags:
        return 0
    code = _tags_codes.get(tags)
    if code is None:
        code = java_string_hash(tags)
        if len(_tags_codes) < 65536:
            _tags_codes[tags] = code
    return code


def encode_unit(commit_log_offset: int, size: int, tags_code: int) -> bytes:
    """One 20-byte unit. Raises ValueError for a unit no message can have; the filler size is
    reserved so a real unit can never read as a filler."""
    if not 0 <= commit_log_offset <= _I64_MAX:
        raise ValueError(f"commit log offset out of range: {commit_log_offset}")
    if not 0 < size < FILLER_SIZE:
        raise ValueError(f"message size out of range: {size}")
    if not _I64_MIN <= tags_code <= _I64_MAX:
        raise ValueError(f"tags code is not an i64: {tags_code}")
    return _UNIT.pack(commit_log_offset, size, tags_code)


def decode_unit(buf, pos: int = 0) -> CqUnit:
    return CqUnit._make(_UNIT.unpack_from(buf, pos))


def decode_units(data) -> list[CqUnit]:
    """Every unit of a buffer whose length is a multiple of 20."""
    return [CqUnit._make(u) for u in _UNIT.iter_unpack(data)]


def unit_problem(unit: CqUnit, previous_end: int | None) -> str | None:
    """Why a unit cannot be part of a queue (None when it can). `previous_end` is the CommitLog
    offset one past the previous real unit, None when unknown. Fillers are always fine."""
    offset, size, tags = unit
    if size == FILLER_SIZE and offset == 0 and tags == 0:
        return None
    if offset < 0:
        return "negative commit log offset"
    if size <= 0:
        return "zero size" if size == 0 else "negative size"
    if previous_end is not None and offset < previous_end:
        return f"commit log offset {offset} below the previous unit's end {previous_end}"
    return None


@dataclass(frozen=True, slots=True)
class UnitScan:
    end_offset: int  # queue byte offset one past the last valid unit
    units: int  # valid units walked, fillers included
    last_unit: CqUnit | None  # the last real (non-filler) unit walked
    stop_reason: str | None  # why a non-zero unit ended the walk; None for zeros or the last file's end
    data_after_end: int | None  # first queue byte offset >= end_offset holding a non-zero byte (probed)


def scan_units(
    segments: Sequence[tuple[int, Any]],
    file_size: int,
    *,
    previous_end: int | None = None,
    probe_bytes: int = DEFAULT_PROBE_BYTES,
) -> UnitScan:
    """Walk units from the start of the first of `segments` ((queue byte offset, buffer) pairs of
    contiguous files) to the first unit that cannot be part of the queue.

    `previous_end` is the CommitLog end of the last real unit before the first segment, when the
    caller knows it. After the end, up to `probe_bytes` of the same file are probed for non-zero
    bytes: a torn unit, or units written after a unit that did not reach the disk."""
    if file_size <= 0 or file_size % UNIT_SIZE:
        raise ValueError(f"file size must be a positive multiple of {UNIT_SIZE}: {file_size}")
    if not segments:
        return UnitScan(0, 0, None, None, None)
    for (before, _), (start, _) in zip(segments, segments[1:]):
        if start != before + file_size:
            raise ValueError(f"segment at {start} does not follow the one at {before}")
    prev_end = previous_end
    last: CqUnit | None = None
    units = 0
    expected = segments[0][0]
    for start, buf in segments:
        expected = start + file_size
        stop = None
        reason = None
        # Copied a slice at a time: the walk usually ends early in the last file, whose untouched
        # remainder need not be read at all. Unpacking from a bytes object is the fast path.
        for chunk_at in range(0, file_size, _SCAN_CHUNK):
            data = bytes(buf[chunk_at : min(file_size, chunk_at + _SCAN_CHUNK)])
            for index, (offset, size, tags) in enumerate(_UNIT.iter_unpack(data)):
                if size == FILLER_SIZE and offset == 0 and tags == 0:
                    continue
                if offset < 0 or size <= 0 or (prev_end is not None and offset < prev_end):
                    stop = chunk_at // UNIT_SIZE + index
                    reason = unit_problem(CqUnit(offset, size, tags), prev_end)
                    break
                prev_end = offset + size
                last = CqUnit(offset, size, tags)
            if stop is not None:
                break
        if stop is None:
            units += file_size // UNIT_SIZE
            continue
        units += stop
        pos = stop * UNIT_SIZE
        if bytes(buf[pos : pos + UNIT_SIZE]) == _ZERO_UNIT:
            reason = None
        found = first_nonzero(buf, pos, min(file_size, pos + max(probe_bytes, UNIT_SIZE)))
        return UnitScan(
            end_offset=start + pos,
            units=units,
            last_unit=last,
            stop_reason=reason,
            data_after_end=None if found is None else start + found,
        )
    return UnitScan(expected, units, last, None, None)


def _lower_bound(lo: int, hi: int, pred: Callable[[int], bool]) -> int:
    """The smallest p in [lo, hi) with pred(p), hi when none; pred must be monotone."""
    while lo < hi:
        mid = (lo + hi) // 2
        if pred(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _check_name(topic: str, queue_id: int) -> None:
    # The topic becomes a directory name: refuse anything that is not one plain path component.
    if not isinstance(topic, str) or not topic or topic in (".", "..") or "/" in topic or "\x00" in topic:
        raise ValueError(f"topic {topic!r} cannot name a consume queue directory")
    if not isinstance(queue_id, int) or queue_id < 0:
        raise ValueError(f"queue id must be a non-negative int: {queue_id!r}")


# -- one queue -----------------------------------------------------------------------------------


class ConsumeQueue:
    def __init__(self, root: Path | str, topic: str, queue_id: int, file_size: int = DEFAULT_FILE_SIZE) -> None:
        """`root` is the store root (storePathRootDir). Touches no file: call `load()` and
        `recover()` for a queue that may exist on disk."""
        _check_name(topic, queue_id)
        if file_size <= 0 or file_size % UNIT_SIZE:
            raise ValueError(f"file size must be a positive multiple of {UNIT_SIZE}: {file_size}")
        self.topic = topic
        self.queue_id = queue_id
        self.file_size = file_size
        self.directory = Path(root) / CONSUME_QUEUE_DIR / topic / str(queue_id)
        self._files = MappedFileQueue(self.directory, file_size, reserve_step=RESERVE_STEP_BYTES)
        self._units_per_file = file_size // UNIT_SIZE
        # Queue offsets in units. Readers read these without a lock; only writers assign them.
        self._min_offset = 0
        self._max_offset = 0
        self._max_physic_offset = 0
        self._write_lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._closed = False

    def __repr__(self) -> str:
        return f"ConsumeQueue({self.topic!r}, {self.queue_id}, [{self._min_offset}, {self._max_offset}))"

    # -- offsets -----------------------------------------------------------------------------------

    @property
    def min_offset(self) -> int:
        """The first queue offset a consumer can read."""
        return self._min_offset

    @property
    def max_offset(self) -> int:
        """One past the last queue offset written: the next put's queue offset."""
        return self._max_offset

    @property
    def max_physic_offset(self) -> int:
        """The CommitLog offset one past the last message this queue indexes (0 when none)."""
        return self._max_physic_offset

    @property
    def file_names(self) -> list[str]:
        return [f.path.name for f in self._files.files]

    # -- loading and recovery --------------------------------------------------------------------

    def load(self) -> None:
        """Open the queue's files, each taken as full until `recover()`. Raises
        SegmentLayoutError for files of the wrong size, with foreign names, or not contiguous."""
        with self._write_lock:
            if not self.directory.is_dir():
                return
            self._files.load()
            files = self._files.files
            if files:
                self._min_offset = files[0].file_from_offset // UNIT_SIZE
                self._max_offset = files[-1].end_offset // UNIT_SIZE

    def recover(self, *, probe_bytes: int = DEFAULT_PROBE_BYTES) -> int:
        """Find the end of the queue by walking the last (up to) three files; drop the files after
        it, zero a torn tail, and set the offsets. Returns the max offset."""
        with self._write_lock, self._flush_lock:
            files = self._files.files
            if not files:
                self._min_offset = self._max_offset = self._max_physic_offset = 0
                return 0
            first = max(0, len(files) - RECOVER_FILES)
            scan_from = files[first].file_from_offset // UNIT_SIZE
            previous = None
            if first:
                found = self._last_real(files[first - 1].file_from_offset // UNIT_SIZE, scan_from)
                previous = found[1] if found else None
            scan = scan_units(
                [(f.file_from_offset, f.buf) for f in files[first:]],
                self.file_size,
                previous_end=previous.commit_log_offset + previous.size if previous else None,
                probe_bytes=probe_bytes,
            )
            if scan.stop_reason is not None:
                log.warning(
                    "consume queue %s-%d: invalid unit at queue offset %d (%s); the queue ends there",
                    self.topic,
                    self.queue_id,
                    scan.end_offset // UNIT_SIZE,
                    scan.stop_reason,
                )
            elif scan.data_after_end is not None:
                log.warning(
                    "consume queue %s-%d ends at queue offset %d with non-zero bytes after it; zeroing them",
                    self.topic,
                    self.queue_id,
                    scan.end_offset // UNIT_SIZE,
                )
            # A torn tail is zeroed to the end of its file: a later put followed by a crash must
            # not leave a stale unit right behind it for the next recovery to accept.
            zero = self.file_size if scan.data_after_end is not None else 0
            self._files.truncate(scan.end_offset, zero)
            end = scan.end_offset // UNIT_SIZE
            last = scan.last_unit
            if last is None:
                found = self._last_real(files[0].file_from_offset // UNIT_SIZE, scan_from)
                last = found[1] if found else None
            self._max_physic_offset = last.commit_log_offset + last.size if last else 0
            head = self._files.files[0].file_from_offset // UNIT_SIZE
            real = self._next_real(head, end)
            self._min_offset = end if real is None else real
            self._max_offset = end
            return end

    # -- writing ---------------------------------------------------------------------------------

    def put(self, queue_offset: int, commit_log_offset: int, size: int, tags_code: int) -> bool:
        """Write the unit for `queue_offset` (RocketMQ's putMessagePositionInfo). True when
        written; False when the same unit is already there (a re-dispatch after recovery) or
        its file was already deleted as expired. Raises ConsumeQueueConflict when the queue holds
        a different unit there or the CommitLog offset goes backwards, ValueError for a unit no
        message can have, OSError when a file cannot be created."""
        data = encode_unit(commit_log_offset, size, tags_code)
        if queue_offset < 0:
            raise ValueError(f"negative queue offset {queue_offset}")
        with self._write_lock:
            if self._closed:
                raise ConsumeQueueClosed(f"consume queue {self.topic}-{self.queue_id} is closed")
            if queue_offset < self._max_offset:
                return self._check_repeat(queue_offset, CqUnit(commit_log_offset, size, tags_code))
            self._append(queue_offset, data, commit_log_offset)
            return True

    def put_run(self, queue_offset: int, units: bytes | bytearray | memoryview) -> int:
        """Append consecutive units, already encoded (20 bytes each, `encode_unit`'s layout), for
        queue offsets `queue_offset`, `queue_offset` + 1, ...: what as many `put` calls write when
        `queue_offset` is at or past the queue's end (a gap before it gets fillers, as `put` does).
        Their CommitLog offsets must ascend, each unit starting at or past the previous one's end.
        Every unit is checked before anything is written (ValueError for a unit no message can
        have or a run out of CommitLog order, ConsumeQueueConflict as `put`); units land in
        ascending order, each with its size last, so a crash leaves a prefix of them. Returns how
        many were written. For an offline rebuild: one call per run instead of one per message."""
        if queue_offset < 0:
            raise ValueError(f"negative queue offset {queue_offset}")
        if len(units) % UNIT_SIZE:
            raise ValueError(f"units are {UNIT_SIZE} bytes each; got {len(units)} bytes")
        if not units:
            return 0
        first = last_end = None
        for offset, size, _ in _UNIT.iter_unpack(units):
            if offset < 0 or not 0 < size < FILLER_SIZE:
                raise ValueError(f"unit ({offset}, {size}) is no message's")
            if last_end is not None and offset < last_end:
                raise ValueError(f"unit at CommitLog offset {offset} comes before the previous unit's end {last_end}")
            if first is None:
                first = offset
            last_end = offset + size
        assert first is not None and last_end is not None
        with self._write_lock:
            if self._closed:
                raise ConsumeQueueClosed(f"consume queue {self.topic}-{self.queue_id} is closed")
            if queue_offset < self._max_offset:
                raise ValueError(f"put_run appends: queue offset {queue_offset} is below the end {self._max_offset}")
            self._append(queue_offset, units, first)
        return len(units) // UNIT_SIZE

    def _append(self, queue_offset: int, units, first_offset: int) -> None:
        """Units for `queue_offset` on, at or past the end; under the write lock."""
        end = self._max_offset
        if first_offset < self._max_physic_offset:
            raise ConsumeQueueConflict(
                f"{self.topic}-{self.queue_id}: unit for queue offset {queue_offset} points at CommitLog "
                f"offset {first_offset}, below the end {self._max_physic_offset} already indexed"
            )
        if not self._files.files:
            self._start_at(queue_offset)
        elif queue_offset > end:
            log.warning(
                "consume queue %s-%d: put at queue offset %d beyond the end %d; filling %d places",
                self.topic,
                self.queue_id,
                queue_offset,
                end,
                queue_offset - end,
            )
            self._fill_to(queue_offset)
        done = 0
        total = len(units)
        while done < total:
            segment = self._files.last_for_append()
            pos = segment.wrote_position
            block = units[done : done + min(total - done, self.file_size - pos)]
            stop = pos + len(block)
            segment.ensure_reserved(stop)
            # Sizes last: until a unit's size lands it reads as zeros, the end of the queue.
            if len(block) == UNIT_SIZE:  # one unit (a round of one message): two writes, no views
                offset, size, tags = _UNIT.unpack(block)
                _UNIT.pack_into(segment.buf, pos, offset, 0, tags)
                _SIZE.pack_into(segment.buf, pos + 8, size)
                done += UNIT_SIZE
                self._publish(segment, stop, queue_offset + done // UNIT_SIZE, offset + size)
                continue
            unsized = bytearray(block)
            with memoryview(unsized).cast("i") as fields, memoryview(bytes(len(block) // 5)).cast("i") as zeros:
                fields[2::5] = zeros
            segment.write_at(pos, memoryview(unsized))
            with memoryview(segment.buf) as mapped, mapped[pos:stop].cast("i") as fields:
                with memoryview(block).cast("i") as given:
                    fields[2::5] = given[2::5]
            done += len(block)
            last_offset, last_size = _UNIT_HEAD.unpack_from(block, len(block) - UNIT_SIZE)
            self._publish(segment, stop, queue_offset + done // UNIT_SIZE, last_offset + last_size)

    def _publish(self, segment, stop: int, max_offset: int, max_physic_offset: int) -> None:
        """Units written up to `stop` in `segment` are whole: the queue's end moves past them."""
        segment.wrote_position = segment.committed_position = stop
        self._max_physic_offset = max_physic_offset
        self._max_offset = max_offset  # publish last: the units are complete

    def _check_repeat(self, queue_offset: int, unit: CqUnit) -> bool:
        existing = self._read_unit(queue_offset)
        if existing == unit:
            return False
        if existing is None and unit.commit_log_offset + unit.size <= self._max_physic_offset:
            # Its file expired; RocketMQ's rule: a unit below the indexed end was built already.
            return False
        raise ConsumeQueueConflict(
            f"{self.topic}-{self.queue_id}: queue offset {queue_offset} holds {existing}, not {tuple(unit)}"
        )

    def _start_at(self, queue_offset: int) -> None:
        """First unit of an empty queue: its file starts at the file boundary at or below it, with
        fillers in front (RocketMQ's fillPreBlank); nothing below it is readable."""
        byte_offset = queue_offset * UNIT_SIZE
        file_start = byte_offset - byte_offset % self.file_size
        mkdir_durable(self.directory)
        self._files.reset_to(file_start)
        self._files.last_for_append(file_start)
        self._max_offset = file_start // UNIT_SIZE
        self._min_offset = queue_offset
        self._fill_to(queue_offset)

    def _fill_to(self, queue_offset: int) -> None:
        """Fillers from the end up to `queue_offset`, creating files as needed."""
        while self._max_offset < queue_offset:
            segment = self._files.last_for_append()
            pos = segment.wrote_position
            count = min(queue_offset - self._max_offset, (self.file_size - pos) // UNIT_SIZE)
            stop = pos + count * UNIT_SIZE
            segment.ensure_reserved(stop)
            # A filler is all zeros but its size field; zero the run, then set the sizes one aligned
            # 4-byte store at a time in ascending order, so a crash leaves a prefix of fillers.
            segment.zero_range(pos, stop)
            for at in range(pos + 8, stop, UNIT_SIZE):
                segment.write_at(at, _FILLER_SIZE_BYTES)
            segment.wrote_position = segment.committed_position = stop
            self._max_offset += count  # fillers may be published as they land

    def flush(self, least_pages: int = 0) -> bool:
        """fdatasync written units, file after file, when at least `least_pages` pages are dirty in
        the file being flushed (a full file is always flushed). True when anything was synced."""
        with self._flush_lock:
            if self._closed:
                return False
            moved = False
            files = self._files
            while True:
                before = files.flushed_where
                files.flush(least_pages)
                if files.flushed_where == before:
                    return moved
                moved = True

    # -- reading ---------------------------------------------------------------------------------

    def get_unit(self, queue_offset: int) -> CqUnit | None:
        """The unit at `queue_offset`, or None outside [min_offset, max_offset) or when its file
        is gone. Fillers are returned as they are."""
        if not self._min_offset <= queue_offset < self._max_offset:
            return None
        return self._read_unit(queue_offset)

    def get_units(self, queue_offset: int, max_count: int) -> list[CqUnit]:
        """Up to `max_count` units from `queue_offset`, stopping at the end of its file (as
        RocketMQ's getIndexBuffer) and of the queue; element i is queue offset queue_offset + i."""
        end = self._max_offset
        if max_count <= 0 or not self._min_offset <= queue_offset < end:
            return []
        segment = self._files.find(queue_offset * UNIT_SIZE)
        if segment is None:
            return []
        pos = queue_offset * UNIT_SIZE - segment.file_from_offset
        count = min(max_count, (self.file_size - pos) // UNIT_SIZE, end - queue_offset)
        try:
            data = segment.buf[pos : pos + count * UNIT_SIZE]
        except ValueError:  # the file was deleted (closed) under us
            return []
        return decode_units(data)

    def get_offset_in_queue_by_time(self, timestamp_ms: int, store_time_of: Callable[[int, int], int | None]) -> int:
        """The first queue offset whose message was stored at or after `timestamp_ms`, max_offset
        when none, found by binary search. `store_time_of(commit_log_offset, size)` reads a
        message's store timestamp from the CommitLog; None or a negative value (the message is no
        longer there: it was older than what is left) counts as earlier. Fillers take the time of
        the next real unit."""
        lo, hi = self._min_offset, self._max_offset
        if lo >= hi:
            return hi

        def stored_at_or_after(p: int) -> bool:
            q = self._next_real(p, hi)
            if q is None:
                return True
            unit = self._read_unit(q)
            if unit is None:
                return False
            stored = store_time_of(unit.commit_log_offset, unit.size)
            return stored is not None and stored >= 0 and stored >= timestamp_ms

        p = _lower_bound(lo, hi, stored_at_or_after)
        if p >= hi:
            return hi
        q = self._next_real(p, hi)
        return hi if q is None else q

    # -- maintenance -----------------------------------------------------------------------------

    def truncate_dirty(self, commit_log_offset: int) -> int:
        """Drop every unit indexing a message at or beyond `commit_log_offset` (the CommitLog was
        cut there): the queue ends at the first such unit; fillers before it stay. Returns the new
        max offset."""
        with self._write_lock, self._flush_lock:
            files = self._files.files
            end = self._max_offset
            if not files:
                return end
            head = files[0].file_from_offset // UNIT_SIZE
            # A unit that cannot be read is dropped with the rest.
            p = self._first_from(head, end, commit_log_offset, unreadable=True)
            cut = self._next_real(p, end)
            if cut is None:
                return end  # only fillers (or nothing) from p on: nothing indexes the dropped range
            # The unit before p is real (see _lower_bound's contract), the new last one.
            last = self._read_unit(p - 1) if p > head else None
            log.info(
                "consume queue %s-%d: dropping queue offsets [%d, %d) at CommitLog offset %d",
                self.topic,
                self.queue_id,
                cut,
                end,
                commit_log_offset,
            )
            self._max_offset = cut  # readers stop before the bytes being zeroed
            # MappedFileQueue.truncate declares everything below the cut flushed: make it so.
            self._files.flush_to(self._files.max_offset)
            self._files.truncate(cut * UNIT_SIZE, (end - cut) * UNIT_SIZE)
            self._max_physic_offset = last.commit_log_offset + last.size if last is not None else 0
            self._min_offset = min(self._min_offset, cut)
            return cut

    def correct_min_offset(self, commit_log_min_offset: int) -> int:
        """Old CommitLog files are gone: the min offset becomes the first unit indexing a message
        at or beyond `commit_log_min_offset` (max_offset when none). Returns it."""
        with self._write_lock:
            return self._correct_min(commit_log_min_offset)

    def _correct_min(self, commit_log_min_offset: int) -> int:
        files = self._files.files
        end = self._max_offset
        if not files:
            return self._min_offset
        head = files[0].file_from_offset // UNIT_SIZE
        p = self._first_from(head, end, commit_log_min_offset, unreadable=False)
        q = self._next_real(p, end) if p < end else None
        self._min_offset = end if q is None else q
        return self._min_offset

    def delete_expired_files(self, commit_log_min_offset: int) -> int:
        """Delete files, from the first, whose every unit indexes a message below
        `commit_log_min_offset` (all-filler files included); never the last file. Corrects the
        min offset. Returns how many files were deleted."""
        with self._write_lock, self._flush_lock:
            files = self._files.files
            doomed: list[MappedFile] = []
            for segment in files[:-1]:
                start = segment.file_from_offset // UNIT_SIZE
                found = self._last_real(start, start + self._units_per_file)
                if found is not None and found[1].commit_log_offset >= commit_log_min_offset:
                    break
                doomed.append(segment)
            if not doomed:
                return 0
            for segment in doomed:
                log.info("consume queue %s-%d: deleting expired file %s", self.topic, self.queue_id, segment.path.name)
            new_head = files[len(doomed)].file_from_offset
            # Readers must not be sent into files about to close.
            self._min_offset = max(self._min_offset, new_head // UNIT_SIZE)
            self._files.delete_segment_files(doomed)
            queue = self._files
            queue.flushed_where = max(queue.flushed_where, new_head)
            queue.committed_where = max(queue.committed_where, new_head)
            self._correct_min(commit_log_min_offset)
            return len(doomed)

    def close(self) -> None:
        """Flush everything written, then unmap and close the files. Puts raise afterwards."""
        with self._write_lock:
            if self._closed:
                return
            self.flush(0)
            with self._flush_lock:
                self._closed = True
                self._files.close()

    def destroy(self) -> None:
        """Delete the queue's files and directory (and the topic's, once empty). The queue is
        empty afterwards and takes puts again, as RocketMQ's destroy leaves it."""
        with self._write_lock, self._flush_lock:
            for segment in self._files.files:
                segment.destroy()
            self._files.files = ()
            self._files.flushed_where = self._files.committed_where = 0
            self._min_offset = self._max_offset = self._max_physic_offset = 0
            self._closed = False
            shutil.rmtree(self.directory, ignore_errors=True)
            try:
                self.directory.parent.rmdir()
            except OSError:
                pass  # other queues of the topic remain, or it is already gone
            if self.directory.parent.parent.is_dir():
                fsync_dir(self.directory.parent.parent)

    # -- unit access (no lock: callers hold the write lock or tolerate races as readers) -----------

    def _read_unit(self, queue_offset: int) -> CqUnit | None:
        segment = self._files.find(queue_offset * UNIT_SIZE)
        if segment is None:
            return None
        pos = queue_offset * UNIT_SIZE - segment.file_from_offset
        try:
            return decode_unit(segment.buf[pos : pos + UNIT_SIZE])
        except ValueError:  # closed by a concurrent deletion
            return None

    def _chunks(self, lo: int, hi: int, *, backwards: bool = False) -> Iterator[tuple[int, bytes]]:
        """(first queue offset, raw bytes) of runs of at most _CHUNK_UNITS units within one file,
        covering [lo, hi) in order (or reverse order)."""
        while lo < hi:
            if backwards:
                last = hi - 1
                file_first = last - last % self._units_per_file
                start = max(lo, file_first, hi - _CHUNK_UNITS)
                stop = hi
            else:
                start = lo
                stop = min(hi, lo - lo % self._units_per_file + self._units_per_file, lo + _CHUNK_UNITS)
            segment = self._files.find(start * UNIT_SIZE)
            if segment is None:
                return
            pos = start * UNIT_SIZE - segment.file_from_offset
            try:
                data = segment.buf[pos : pos + (stop - start) * UNIT_SIZE]
            except ValueError:
                return
            yield start, data
            if backwards:
                hi = start
            else:
                lo = stop

    def _first_from(self, head: int, end: int, commit_log_offset: int, *, unreadable: bool) -> int:
        """The first queue offset p in [head, end) whose next real unit, if any, indexes a message
        at or beyond `commit_log_offset` (`end` when none); a real unit that cannot be read counts
        as beyond it when `unreadable`. Units index messages in CommitLog order: a bisection."""

        def from_here(p: int) -> bool:
            q = self._next_real(p, end)
            if q is None:
                return True
            unit = self._read_unit(q)
            return unreadable if unit is None else unit.commit_log_offset >= commit_log_offset

        return _lower_bound(head, end, from_here)

    def _next_real(self, lo: int, hi: int) -> int | None:
        """The first queue offset in [lo, hi) holding a real (non-filler) unit."""
        for start, data in self._chunks(lo, hi):
            for index, (offset, size, tags) in enumerate(_UNIT.iter_unpack(data)):
                if not (size == FILLER_SIZE and offset == 0 and tags == 0):
                    return start + index
        return None

    def _last_real(self, lo: int, hi: int) -> tuple[int, CqUnit] | None:
        """The last real unit in [lo, hi) and its queue offset."""
        for start, data in self._chunks(lo, hi, backwards=True):
            units = decode_units(data)
            for index in range(len(units) - 1, -1, -1):
                if not units[index].is_filler:
                    return start + index, units[index]
        return None


# -- the table -----------------------------------------------------------------------------------


class ConsumeQueueTable:
    """Every ConsumeQueue under `<root>/consumequeue/`, keyed by (topic, queue id) (RocketMQ's
    consumeQueueTable). Lookups take no lock; creation and removal take the table's lock."""

    def __init__(self, root: Path | str, file_size: int = DEFAULT_FILE_SIZE) -> None:
        self.root = Path(root)
        self.directory = self.root / CONSUME_QUEUE_DIR
        self.file_size = file_size
        self._queues: dict[tuple[str, int], ConsumeQueue] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._queues)

    def queues(self) -> list[ConsumeQueue]:
        with self._lock:
            return list(self._queues.values())

    def find(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self._queues.get((topic, queue_id))

    def get_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        """The queue for (topic, queue_id), created when absent. A queue whose directory exists
        on disk but was not loaded is loaded and recovered first, never overwritten."""
        queue = self._queues.get((topic, queue_id))
        if queue is not None:
            return queue
        with self._lock:
            queue = self._queues.get((topic, queue_id))
            if queue is None:
                queue = ConsumeQueue(self.root, topic, queue_id, self.file_size)
                if queue.directory.is_dir():
                    queue.load()
                    queue.recover()
                self._queues[(topic, queue_id)] = queue
            return queue

    def load(self) -> int:
        """Open every queue on disk (files taken as full until `recover`). Directories that cannot
        be a queue (a queue id that is not a canonical non-negative int) are skipped with a
        warning; a queue whose files are inconsistent raises SegmentLayoutError. Returns how many
        queues are loaded."""
        if not self.directory.is_dir():
            return 0
        loaded = {}
        for topic_dir in sorted(self.directory.iterdir()):
            if not topic_dir.is_dir():
                continue
            for queue_dir in sorted(topic_dir.iterdir()):
                name = queue_dir.name
                if not queue_dir.is_dir() or not name.isdigit() or str(int(name)) != name:
                    log.warning("ignoring %s: not a consume queue directory", queue_dir)
                    continue
                queue = ConsumeQueue(self.root, topic_dir.name, int(name), self.file_size)
                queue.load()
                loaded[(topic_dir.name, int(name))] = queue
        with self._lock:
            self._queues.update(loaded)
        return len(loaded)

    def recover(self, *, probe_bytes: int = DEFAULT_PROBE_BYTES) -> dict[str, int]:
        """Recover every queue; return the queue offset table ({"topic-queueId": max offset})."""
        for queue in self.queues():
            queue.recover(probe_bytes=probe_bytes)
        return self.queue_offset_table()

    def queue_offset_table(self) -> dict[str, int]:
        """{"topic-queueId": next queue offset} over every queue (RocketMQ's topicQueueTable)."""
        return {f"{q.topic}-{q.queue_id}": q.max_offset for q in self.queues()}

    @property
    def max_physic_offset(self) -> int:
        """The highest CommitLog end any queue indexes: where re-dispatch can start."""
        return max((q.max_physic_offset for q in self.queues()), default=0)

    def flush(self, least_pages: int = 0) -> bool:
        moved = False
        for queue in self.queues():
            moved = queue.flush(least_pages) or moved
        return moved

    def truncate_dirty(self, commit_log_offset: int) -> None:
        for queue in self.queues():
            queue.truncate_dirty(commit_log_offset)

    def correct_min_offset(self, commit_log_min_offset: int) -> None:
        for queue in self.queues():
            queue.correct_min_offset(commit_log_min_offset)

    def delete_expired_files(self, commit_log_min_offset: int) -> int:
        return sum(queue.delete_expired_files(commit_log_min_offset) for queue in self.queues())

    def remove(self, topic: str, queue_id: int) -> bool:
        """Destroy one queue and forget it; False when there was none."""
        with self._lock:
            queue = self._queues.pop((topic, queue_id), None)
        if queue is None:
            return False
        queue.destroy()
        return True

    def close(self) -> None:
        for queue in self.queues():
            queue.close()

    def destroy(self) -> None:
        with self._lock:
            queues = list(self._queues.values())
            self._queues.clear()
        for queue in queues:
            queue.destroy()
        shutil.rmtree(self.directory, ignore_errors=True)


__all__ = [
    "CONSUME_QUEUE_DIR",
    "DEFAULT_FILE_SIZE",
    "FILLER",
    "FILLER_SIZE",
    "UNIT_SIZE",
    "ConsumeQueue",
    "ConsumeQueueClosed",
    "ConsumeQueueConflict",
    "ConsumeQueueTable",
    "CqUnit",
    "UnitScan",
    "decode_unit",
    "decode_units",
    "encode_unit",
    "scan_units",
    "tags_code",
    "unit_problem",
]
