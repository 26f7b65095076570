"""CommitLog recovery decisions, sans-IO: scan segment buffers, find where valid data ends, decide
whether that is a torn tail (truncate it) or corruption of durable data (refuse to start).

A scan walks records from a segment start: a message is valid when its magic, sizes, physical
offset field and body CRC all check, and its queue offset continues its queue (`QueueOffsets`:
the CRC covers only the body, so a damaged queue offset would otherwise pass and leave a queue
with a gap or a repeat); a blank record ends its segment; zeros at TOTALSIZE end the log.
Whatever stops the scan below the trusted flushed offset is corruption: those bytes were fsynced,
so losing them silently would lose acknowledged messages.

Inputs are (segment start offset, buffer) pairs (mmaps in the store, bytearrays in tests).
Pure functions; thread-safe.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..message import TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE, transaction_type
from .codec import MESSAGE_MAGIC_CODE, PHYSICAL_OFFSET_POS, CorruptMessage, RecordCheck, RecordKind, check_record

# Prepared and rolled-back transaction messages get no queue offset (as in store/commitlog.py).
_NO_QUEUE_OFFSET = (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)

Segment = tuple[int, object]  # (file_from_offset, buffer of the segment's bytes)
OnMessage = Callable[[int, RecordCheck], None]
# (offset, record) -> why the record is damaged despite its checks, or None.
RecordRule = Callable[[int, RecordCheck], "str | None"]
OnProgress = Callable[[int, int], None]
PROGRESS_EVERY_BYTES = 64 * 1024 * 1024


class StoreCorruptedError(RuntimeError):
    """Durable CommitLog data failed its checks; the store will not start over it."""

    def __init__(self, offset: int, reason: str, why_durable: str, root: str = "STORE_DIR") -> None:
        super().__init__(
            f"CommitLog's valid data ends at offset {offset} ({reason}), but {why_durable}: refusing to "
            f"start. Bodies below the recovery scan are not CRC-checked at start-up, so damage may "
            f"also lie earlier: run `rocketstore inspect --store-dir {root}` to see all of it, then "
            f"`rocketstore repair --store-dir {root} --truncate-at OFFSET --yes` to cut the log where "
            f"you decide (losing what follows)."
        )
        self.offset = offset
        self.reason = reason


@dataclass(frozen=True, slots=True)
class ScanResult:
    start_offset: int
    end_offset: int  # one past the last valid record
    messages: int
    bytes_scanned: int
    last_store_timestamp_ms: int
    bad_offset: int | None  # where an invalid record starts; None when the scan ended on zeros
    reason: str | None
    data_after_end: int | None  # first offset past end_offset holding non-zero bytes, if any
    # A whole valid record further on than one append could reach: not a torn append but damage
    # (or, after a power loss, an unflushed tail with holes).
    valid_after_end: int | None = None
    dirty_end: int | None = None  # one past the last non-zero byte of the segment the scan ended in

    @property
    def clean(self) -> bool:
        return self.bad_offset is None and self.data_after_end is None


def choose_scan_start(segment_starts: Sequence[int], flushed_offset: int | None, *, normal: bool) -> int:
    """Where recovery starts reading: the segment holding the trusted flushed offset (the whole
    log when there is none); after a clean shutdown at most three segments back, as RocketMQ."""
    if not segment_starts:
        return 0
    if flushed_offset is None:
        return segment_starts[0]
    index = 0
    for i, start in enumerate(segment_starts):
        if start <= flushed_offset:
            index = i
    if normal:
        index = min(index, max(0, len(segment_starts) - 3))
    return segment_starts[index]


_MAGIC = MESSAGE_MAGIC_CODE.to_bytes(4, "big", signed=True)


def find_valid_record(buf, start: int, size: int, segment_start: int) -> int | None:
    """The first position at or after `start` where a whole valid message begins: its MAGICCODE
    in place, its PHYSICALOFFSET naming that very position and every check passing, a signature
    that damage does not fake. None when there is none before `size`."""
    hit = buf.find(_MAGIC, start + 4, size)
    while hit != -1:
        pos = hit - 4
        field = int.from_bytes(buf[pos + PHYSICAL_OFFSET_POS : pos + PHYSICAL_OFFSET_POS + 8], "big", signed=True)
        if field == segment_start + pos:
            try:
                # A zeroed TOTALSIZE over an intact rest (an append cut before its last write)
                # checks as the end of the log, not as a message to resume at.
                if check_record(buf, pos, size, segment_start + pos).kind == RecordKind.MESSAGE:
                    return pos
            except CorruptMessage:
                pass
        hit = buf.find(_MAGIC, hit + 1, size)
    return None


def last_nonzero_end(buf, start: int, end: int) -> int:
    """One past the last non-zero byte in buf[start:end], or `start` when all are zero."""
    chunk = 4 << 20
    pos = end
    while pos > start:
        lo = max(start, pos - chunk)
        piece = bytes(buf[lo:pos])
        if piece.count(0) != len(piece):  # counting one byte value is the fastest all-zero test
            return lo + len(piece.rstrip(b"\x00"))
        pos = lo
    return start


def first_nonzero(buf, start: int, end: int) -> int | None:
    """Index of the first non-zero byte in buf[start:end], or None."""
    chunk = 1 << 20
    pos = start
    while pos < end:
        stop = min(end, pos + chunk)
        piece = bytes(buf[pos:stop])
        stripped = piece.lstrip(b"\x00")
        if stripped:
            return pos + len(piece) - len(stripped)
        pos = stop
    return None


def scan_commitlog(  # noqa: C901, PLR0915 - recovery's one pass over the log, a branch per record state
    segments: Sequence[Segment],
    segment_size: int,
    start_offset: int,
    *,
    verify_crc: bool = True,
    crc_from_offset: int = 0,
    on_message: OnMessage | None = None,
    on_progress: OnProgress | None = None,
    probe_bytes: int = 4 * 1024 * 1024 + 8,
    probe_tail: bool = True,
    rule: RecordRule | None = None,
) -> ScanResult:
    """Walk records from `start_offset` (a segment start) to the end of valid data.

    Body CRCs are checked from `crc_from_offset` on (when `verify_crc`). After the end, up to
    `probe_bytes` of the same segment and the start of every later segment are probed for
    non-zero bytes (a torn record, or data beyond a hole). With `probe_tail`, the rest of the
    segment is read too (to zero stale bytes and find whole records beyond a hole): after a crash,
    not after a clean shutdown, when it would cost a read of the whole unused tail.
    """
    starts = [s for s, _ in segments]
    index = next((i for i, s in enumerate(starts) if s == start_offset), None)
    if segments and index is None:
        raise ValueError(f"scan start {start_offset} is not a segment start")
    total = (starts[-1] + segment_size - start_offset) if segments else 0
    offset = start_offset
    messages = 0
    last_ts = 0
    bad_offset = None
    reason = None
    next_progress = start_offset + PROGRESS_EVERY_BYTES
    ended_in: int | None = None
    i = index or 0
    while segments and i < len(segments):
        seg_start, buf = segments[i]
        pos = offset - seg_start
        ended = False
        while pos < segment_size:
            try:
                record = check_record(
                    buf, pos, segment_size, offset, verify_crc=verify_crc and offset >= crc_from_offset
                )
            except CorruptMessage as exc:
                bad_offset, reason, ended = offset, exc.reason, True
                break
            if record.kind == RecordKind.END:
                ended = True
                break
            if record.kind == RecordKind.BLANK:
                offset += record.size
                break
            if rule is not None:
                damage = rule(offset, record)
                if damage is not None:
                    bad_offset, reason, ended = offset, damage, True
                    break
            if on_message is not None:
                on_message(offset, record)
            messages += 1
            last_ts = record.store_timestamp_ms
            offset += record.size
            pos += record.size
            if on_progress is not None and offset >= next_progress:
                on_progress(offset - start_offset, total)
                next_progress = offset + PROGRESS_EVERY_BYTES
        else:
            offset = seg_start + segment_size
        if ended:
            ended_in = i
            break
        i += 1
    data_after = valid_after = dirty_end = None
    if ended_in is not None:
        seg_start, buf = segments[ended_in]
        pos = offset - seg_start
        dirty = last_nonzero_end(buf, pos, segment_size if probe_tail else min(segment_size, pos + probe_bytes))
        if dirty > pos:
            dirty_end = seg_start + dirty
            first = first_nonzero(buf, pos, dirty)
            assert first is not None  # dirty > pos: a non-zero byte lies in [pos, dirty)
            data_after = seg_start + first
            # One append (a message or batch) is at most `probe_bytes`: a valid record beyond
            # that cannot belong to the append the crash interrupted.
            if pos + probe_bytes < dirty:
                hit = find_valid_record(buf, pos + probe_bytes, dirty, seg_start)
                if hit is not None:
                    valid_after = seg_start + hit
        for later_start, later_buf in segments[ended_in + 1 :]:
            found = first_nonzero(later_buf, 0, min(segment_size, 8))
            if found is not None:
                data_after = data_after if data_after is not None else later_start + found
                if valid_after is None:
                    try:
                        if check_record(later_buf, 0, segment_size, later_start).kind == RecordKind.MESSAGE:
                            valid_after = later_start
                    except CorruptMessage:
                        pass
                break
    if on_progress is not None:
        on_progress(offset - start_offset, total)
    return ScanResult(
        start_offset=start_offset,
        end_offset=offset,
        messages=messages,
        bytes_scanned=offset - start_offset,
        last_store_timestamp_ms=last_ts,
        bad_offset=bad_offset,
        reason=reason,
        data_after_end=data_after,
        valid_after_end=valid_after,
        dirty_end=dirty_end,
    )


class QueueOffsets:
    """A `RecordRule`: each message's queue offset must follow the previous message of its
    (topic, queue) in the walk; the first one seen of a queue must agree with what its ConsumeQueue
    already says (`indexed(topic, queue_id, queue_offset)`: the CommitLog offset of that unit, or
    None when the queue does not hold it). Prepared and rolled-back transaction messages carry no
    queue offset and are skipped. Not thread-safe: one walk."""

    def __init__(self, indexed: Callable[[str, int, int], "int | None"] | None = None) -> None:
        self._next: dict[tuple[str, int], int] = {}
        self._indexed = indexed

    def __call__(self, offset: int, record: RecordCheck) -> str | None:
        if transaction_type(record.sys_flag) in _NO_QUEUE_OFFSET:
            return None
        key = (record.topic, record.queue_id)
        qoff = record.queue_offset
        expected = self._next.get(key)
        if expected is None:
            if qoff < 0:
                return f"queue offset {qoff} of {record.topic}-{record.queue_id} is negative: a damaged header"
            held = self._indexed(record.topic, record.queue_id, qoff) if self._indexed is not None else None
            if held is not None and held != offset:
                return (
                    f"queue offset {qoff} of {record.topic}-{record.queue_id} belongs to the message at {held} "
                    "(its ConsumeQueue says so): a damaged header"
                )
        elif qoff != expected:
            return (
                f"queue offset {qoff} of {record.topic}-{record.queue_id}, where the queue's previous message "
                f"has {expected - 1}: a damaged header (the body CRC does not cover it)"
            )
        self._next[key] = qoff + 1
        return None


def check_recoverable(result: ScanResult, trusted_flushed_offset: int | None, root: str = "STORE_DIR") -> None:
    """Raise StoreCorruptedError when cutting the log at the scan's end could drop durable data:
    the end lies below the checkpoint's flushed offset, or, with no trustworthy checkpoint, whole
    valid records follow further on than one interrupted append could reach."""
    reason = result.reason or "zeros where a record should be"
    if trusted_flushed_offset is not None and result.end_offset < trusted_flushed_offset:
        raise StoreCorruptedError(
            result.end_offset, reason, f"everything below {trusted_flushed_offset} was fsynced", root
        )
    if trusted_flushed_offset is None and result.valid_after_end is not None:
        raise StoreCorruptedError(
            result.end_offset,
            reason,
            f"valid messages follow at {result.valid_after_end} and there is no checkpoint to say they were "
            "never fsynced",
            root,
        )
