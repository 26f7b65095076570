"""CommitLog recovery decisions, sans-IO: scan segment buffers, find where valid data ends, decide
whether that is a torn tail (truncate it) or corruption of durable data (refuse to start).

A scan walks records from a segment start: a message is valid when its magic, sizes, physical
offset field and body CRC all check; a blank record ends its segment; zeros at TOTALSIZE end the
log. Whatever stops the scan below the trusted flushed offset is corruption: those bytes were
fsynced, so losing them silently would lose acknowledged messages.

Inputs are (segment start offset, buffer) pairs (mmaps in the store, bytearrays in tests).
Pure functions; thread-safe.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .codec import CorruptMessage, RecordCheck, RecordKind, check_record

Segment = tuple[int, object]  # (file_from_offset, buffer of the segment's bytes)
OnMessage = Callable[[int, RecordCheck], None]
OnProgress = Callable[[int, int], None]
PROGRESS_EVERY_BYTES = 64 * 1024 * 1024


class StoreCorruptedError(RuntimeError):
    """Durable CommitLog data failed its checks; the store will not start over it."""

    def __init__(self, offset: int, reason: str, flushed_offset: int) -> None:
        super().__init__(
            f"CommitLog is corrupt at offset {offset} ({reason}), below the flushed offset "
            f"{flushed_offset}: refusing to start. Run `rocketstore inspect` to see the damage and "
            f"`rocketstore repair --truncate-at {offset}` to cut the log there (losing what follows)."
        )
        self.offset = offset
        self.reason = reason
        self.flushed_offset = flushed_offset


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


def _first_nonzero(buf, start: int, end: int) -> int | None:
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


def scan_commitlog(
    segments: Sequence[Segment],
    segment_size: int,
    start_offset: int,
    *,
    verify_crc: bool = True,
    crc_from_offset: int = 0,
    on_message: OnMessage | None = None,
    on_progress: OnProgress | None = None,
    probe_bytes: int = 4 * 1024 * 1024 + 8,
) -> ScanResult:
    """Walk records from `start_offset` (a segment start) to the end of valid data.

    Body CRCs are checked from `crc_from_offset` on (when `verify_crc`). After the end, up to
    `probe_bytes` of the same segment and the start of every later segment are probed for
    non-zero bytes (a torn record, or data beyond a hole).
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
                record = check_record(buf, pos, segment_size, offset, verify_crc=verify_crc and offset >= crc_from_offset)
            except CorruptMessage as exc:
                bad_offset, reason, ended = offset, exc.reason, True
                break
            if record.kind == RecordKind.END:
                ended = True
                break
            if record.kind == RecordKind.BLANK:
                offset += record.size
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
    data_after = None
    if ended_in is not None:
        seg_start, buf = segments[ended_in]
        pos = offset - seg_start
        found = _first_nonzero(buf, pos, min(segment_size, pos + probe_bytes))
        if found is not None:
            data_after = seg_start + found
        else:
            for later_start, later_buf in segments[ended_in + 1 :]:
                found = _first_nonzero(later_buf, 0, min(segment_size, 8))
                if found is not None:
                    data_after = later_start + found
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
    )


def check_recoverable(result: ScanResult, trusted_flushed_offset: int) -> None:
    """Raise StoreCorruptedError when the valid log ends below what was known durable."""
    if result.end_offset < trusted_flushed_offset:
        reason = result.reason or "zeros where fsynced data should be"
        raise StoreCorruptedError(result.end_offset, reason, trusted_flushed_offset)
