"""The record walk over one CommitLog segment: which byte positions hold records, sans-IO.

Every reader of a segment range (a Spark task, the audit, the benchmark's baseline) must agree on
where records start, so the walk is one deterministic function of the segment's bytes:

- The chain. From the segment start, a position holds a record when its header passes the chain
  rule: MAGICCODE is the message magic, MIN_RECORD_SIZE <= TOTALSIZE <= bytes left in the segment,
  and PHYSICALOFFSET names the position itself. The next record starts TOTALSIZE further on. The
  rule reads 36 bytes (one unpack); the rest of a record's checks (body CRC, field lengths,
  properties) belong to decoding, which reports a record failing them as an error row while the
  chain goes on: a header whose magic and own offset are intact carries a trustworthy size.
- Where the chain stops (`classify`): zeros at TOTALSIZE with nothing after them end the segment's
  data; a blank record ends the segment; anything else is a bad spot. After a bad spot the walk
  resyncs at the next whole valid record of the segment (`store.commitlog_scan.find_valid_record`: magic,
  a PHYSICALOFFSET naming its own position, every check passing, body CRC included), as
  `rocketstore inspect` does; the bytes between are reported once, as one bad spot.
- A bad spot with no valid record after it, in the last segment holding data, at or above the
  checkpoint's flushed offset (or with no trusted checkpoint) is a torn tail: the end of the log,
  as the store's recovery treats it (`torn=True`; readers drop it unless asked to report it).
  Zeros that end a segment's data while a later segment holds data are a hole (reported).

A range [lo, hi) of a segment owns the records and bad spots whose start lies in it. A task reading
a range replays the walk from the segment start up to lo (chain hops only, no decoding), so every
task cuts the log at the same boundaries and no record is read twice or lost. `walk_segment`
takes the chain finder as a parameter: `hop_chain` here (one unpack per record), or the vectorised
finder of `pipeline.decode`, which must return exactly the same positions.

Pure functions over any buffer (bytes, bytearray, mmap); thread-safe.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Generator, Sequence
from typing import NamedTuple

from store.log.codec import BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE, CorruptMessage, RecordKind, check_record
from store.log.commitlog_scan import find_valid_record, first_nonzero

# TOTALSIZE, MAGICCODE, PHYSICALOFFSET: the chain rule reads these three with one unpack.
CHAIN_HEAD = struct.Struct(">ii20xq")
CHAIN_HEAD_SIZE = CHAIN_HEAD.size  # 36
# The smallest message: IPv4 hosts, empty body, one-byte topic, no properties.
MIN_RECORD_SIZE = 88 + 1 + 1 + 2

# How far past a zero TOTALSIZE the walk looks for written bytes: one append at most (maxMessageSize
# plus a header), as the store's recovery and `rocketstore inspect` probe.
PROBE_BYTES = 4 * 1024 * 1024 + 8

KIND_BAD = "bad"
KIND_HOLE = "hole"


class Stop(NamedTuple):
    """A bad spot or a hole at CommitLog offset `offset`. `resume` is the CommitLog offset where
    the walk goes on (None: nothing valid follows in the segment); `torn` marks a torn tail."""

    offset: int
    kind: str
    reason: str
    resume: int | None
    torn: bool


# Finds chain records from `pos` while pos < limit: (positions, where it stopped). It stops at the
# first position that fails the chain rule, or at the first position >= limit.
ChainFinder = Callable[[object, int, int, int, int], tuple[Sequence[int], int]]


def hop_chain(buf, seg_start: int, seg_size: int, pos: int, limit: int) -> tuple[list[int], int]:
    """The chain from `pos`, one header unpack per record (the reference finder)."""
    out: list[int] = []
    append = out.append
    unpack = CHAIN_HEAD.unpack_from
    last_head = seg_size - CHAIN_HEAD_SIZE
    magic_ok = MESSAGE_MAGIC_CODE
    while pos < limit and pos <= last_head:
        size, magic, phys = unpack(buf, pos)
        if magic != magic_ok or size < MIN_RECORD_SIZE or size > seg_size - pos or phys != seg_start + pos:
            break
        append(pos)
        pos += size
    return out, pos


def skip_chain(buf, seg_start: int, seg_size: int, pos: int, limit: int) -> int:
    """`hop_chain` without collecting positions: the replay up to a range start."""
    unpack = CHAIN_HEAD.unpack_from
    last_head = seg_size - CHAIN_HEAD_SIZE
    magic_ok = MESSAGE_MAGIC_CODE
    while pos < limit and pos <= last_head:
        size, magic, phys = unpack(buf, pos)
        if magic != magic_ok or size < MIN_RECORD_SIZE or size > seg_size - pos or phys != seg_start + pos:
            break
        pos += size
    return pos


def classify(
    buf, seg_start: int, seg_size: int, pos: int, *, last_data_segment: bool, flushed_offset: int | None
) -> Stop | None:
    """What lies at `pos`, where the chain stopped below the segment end. None: the segment's data
    ends here cleanly (zeros to the end, or a blank record). Otherwise a `Stop`."""
    offset = seg_start + pos
    try:
        record = check_record(buf, pos, seg_size, offset, verify_crc=False)
    except CorruptMessage as exc:
        reason = exc.reason
    else:
        if record.kind == RecordKind.BLANK:
            return None
        if record.kind == RecordKind.END:
            later = first_nonzero(buf, pos, min(seg_size, pos + PROBE_BYTES))
            if later is None:
                if last_data_segment or seg_size - pos < 8:
                    return None
                return Stop(offset, KIND_HOLE, "zeros where the log goes on: a later segment holds data", None, False)
            reason = f"TOTALSIZE is zero, yet non-zero bytes follow at {seg_start + later}"
        else:
            # check_record accepts what the chain rule refused: only a record whose magic and
            # offset are right but whose header ends too close to the segment end can get here.
            reason = "record header does not fit the chain rule"
    resume = _resync(buf, pos, seg_size, seg_start)
    if resume is not None:
        return Stop(offset, KIND_BAD, reason, seg_start + resume, False)
    torn = last_data_segment and (flushed_offset is None or offset >= flushed_offset)
    return Stop(offset, KIND_BAD, reason, None, torn)


def _resync(buf, pos: int, seg_size: int, seg_start: int) -> int | None:
    """The first whole valid message after `pos` (find_valid_record also accepts a position whose
    TOTALSIZE is zero, which is no place to resume)."""
    start = pos
    while True:
        hit = find_valid_record(buf, start, seg_size, seg_start)
        if hit is None:
            return None
        if hit > pos and check_record(buf, hit, seg_size, seg_start + hit).kind == RecordKind.MESSAGE:
            return hit
        start = hit + 1


def blank_magic_at(buf, pos: int) -> bool:
    return len(buf) - pos >= 8 and struct.unpack_from(">i", buf, pos + 4)[0] == BLANK_MAGIC_CODE


def walk_segment(  # noqa: C901, PLR0915 - one walk of a segment, a branch per record state of the on-disk format
    buf,
    seg_start: int,
    seg_size: int,
    lo: int,
    hi: int,
    *,
    last_data_segment: bool,
    flushed_offset: int | None,
    batch_records: int = 32768,
    window_bytes: int = 8 << 20,
    finder: ChainFinder = hop_chain,
    start: int = 0,
) -> Generator[Sequence[int] | Stop, None, int | None]:
    """Record positions (relative to the segment start, in batches of at most about
    `batch_records`) and `Stop`s for the records and bad spots whose start lies in the
    segment-relative range [lo, hi). Batches are lists or numpy arrays, as the finder returns.

    `start` is a position the walk from the segment start visits (0, or a position an earlier
    walk of the same bytes returned): the walk replays from there up to lo. The generator returns
    the first position at or past hi that the walk visits, the `start` for a range beginning there;
    None when the walk ends before it.

    The last record of the chain is held back until the chain goes on past it: when it is the
    log's last record and fails its full check (a header that reached the disk before the rest of
    the record), it is part of a torn tail, not a record."""
    pos = start
    hi = min(hi, seg_size)
    ended = False
    pending: list[Sequence[int]] = []
    pending_count = 0
    held: int | None = None
    stop: Stop | None = None
    classified_at = -1
    while pos < hi:
        if pos < lo:
            skipped = advance(
                buf,
                seg_start,
                seg_size,
                pos,
                lo,
                last_data_segment=last_data_segment,
                flushed_offset=flushed_offset,
                finder=finder,
                window_bytes=window_bytes,
            )
            if skipped is None:
                ended = True
                break
            pos = skipped
            continue
        else:
            found, pos = finder(buf, seg_start, seg_size, pos, min(hi, pos + window_bytes))
            if len(found):
                if held is not None:
                    pending.append((held,))
                if len(found) > 1:
                    pending.append(found[:-1])
                pending_count += len(found)
                held = int(found[-1])
                if pending_count >= batch_records:
                    yield from pending
                    pending, pending_count = [], 0
        if pos >= hi or pos >= seg_size:
            break
        if _continues(buf, seg_start, seg_size, pos):
            continue  # the finder stopped at a window limit, not at a broken chain
        stop = classify(
            buf, seg_start, seg_size, pos, last_data_segment=last_data_segment, flushed_offset=flushed_offset
        )
        classified_at = pos
        if stop is None or stop.resume is None:
            ended = True
            break
        if pos >= lo:
            if held is not None:
                pending.append((held,))
                held = None
            yield from pending
            pending, pending_count = [], 0
            yield stop
        pos = stop.resume - seg_start
        stop = None
    if held is not None and last_data_segment:
        if pos >= seg_size:
            at_tail = True
        elif classified_at == pos:
            at_tail = stop is None or stop.resume is None
        elif _continues(buf, seg_start, seg_size, pos):
            at_tail = False
        else:
            after = classify(buf, seg_start, seg_size, pos, last_data_segment=True, flushed_offset=flushed_offset)
            at_tail = after is None or after.resume is None
        torn = _torn_record(buf, seg_start, seg_size, held, flushed_offset) if at_tail else None
        if torn is not None:
            yield from pending
            pending = []
            yield torn
            held = None
    if held is not None:
        pending.append((held,))
    yield from pending
    if stop is not None and pos >= lo and classified_at == pos:
        yield stop
    return None if ended else pos


def advance(
    buf,
    seg_start: int,
    seg_size: int,
    pos: int,
    lo: int,
    *,
    last_data_segment: bool,
    flushed_offset: int | None,
    finder: ChainFinder = hop_chain,
    window_bytes: int = 8 << 20,
) -> int | None:
    """From `pos`, a position the walk visits, the first position at or past `lo` it visits
    (chain hops and resyncs, no decoding); None when the walk ends before `lo`."""
    while pos < lo:
        pos = (
            skip_chain(buf, seg_start, seg_size, pos, lo)
            if finder is hop_chain
            else _skip_with(finder, buf, seg_start, seg_size, pos, lo, window_bytes)
        )
        if pos >= lo:
            break
        if _continues(buf, seg_start, seg_size, pos):
            continue  # the finder stopped at a window limit, not at a broken chain
        stop = classify(
            buf, seg_start, seg_size, pos, last_data_segment=last_data_segment, flushed_offset=flushed_offset
        )
        if stop is None or stop.resume is None:
            return None
        pos = stop.resume - seg_start
    return pos


def _torn_record(buf, seg_start: int, seg_size: int, pos: int, flushed_offset: int | None) -> Stop | None:
    offset = seg_start + pos
    if flushed_offset is not None and offset < flushed_offset:
        return None
    try:
        check_record(buf, pos, seg_size, offset)
    except CorruptMessage as exc:
        return Stop(offset, KIND_BAD, exc.reason, None, True)
    return None


def _continues(buf, seg_start: int, seg_size: int, pos: int) -> bool:
    if pos > seg_size - CHAIN_HEAD_SIZE:
        return False
    size, magic, phys = CHAIN_HEAD.unpack_from(buf, pos)
    return magic == MESSAGE_MAGIC_CODE and MIN_RECORD_SIZE <= size <= seg_size - pos and phys == seg_start + pos


def _skip_with(finder: ChainFinder, buf, seg_start: int, seg_size: int, pos: int, limit: int, window: int) -> int:
    while pos < limit:
        _, nxt = finder(buf, seg_start, seg_size, pos, min(limit, pos + window))
        if nxt == pos or not _continues(buf, seg_start, seg_size, nxt):
            return nxt
        pos = nxt
    return pos


def chain_end(buf, seg_start: int, seg_size: int, finder: ChainFinder = hop_chain) -> int:
    """Segment-relative position where the chain from the segment start first stops: the end of
    the segment's valid prefix (a blank record counts to the segment end)."""
    pos = (
        skip_chain(buf, seg_start, seg_size, 0, seg_size)
        if finder is hop_chain
        else _skip_with(finder, buf, seg_start, seg_size, 0, seg_size, 8 << 20)
    )
    if pos < seg_size and blank_magic_at(buf, pos):
        try:
            if check_record(buf, pos, seg_size, seg_start + pos, verify_crc=False).kind == RecordKind.BLANK:
                return seg_size
        except CorruptMessage:
            pass
    return pos
