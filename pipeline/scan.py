"""Reading one `ScanRange` of a CommitLog into Arrow batches: the work of one task of the
`rocketstore-commitlog` source and of the audit, usable without Spark.

`read_range(scan_range, columns=..., verify_crc=..., topics=..., torn_tail=..., batch_rows=...)`
opens the range's segment read-only (mmap), walks it (`pipeline.walk`) and decodes the records
(`pipeline.decode`) into batches of the requested columns; bad spots become error rows, a torn
tail ends the log (`torn_tail="end"`) or becomes one error row (`"report"`), a segment deleted
since planning becomes one error row. Nothing is dropped silently.

A range must start where the walk from its segment's start stands at its first byte. Replaying the
chain from the segment start costs every task the bytes before its range (a 1 GiB segment cut in
16 ranges replays 7.5 GiB), so each process remembers the positions its tasks of the same plan
reached at their range ends (`KNOWN_STARTS`, keyed by `ScanRange.plan_id`) and replays only from
the nearest one below: a worker running consecutive ranges of a segment replays nothing, all
workers together about one pass of each segment. Only positions the walk visits are kept (never
"the walk ended", which data appended to a live segment can undo), so a remembered start is exact.

Thread-safety: `KNOWN_STARTS` is per process and unlocked: one task at a time per process, as in
Spark's Python workers.
"""

from __future__ import annotations

import mmap
import os
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from .decode import COLUMN_NAMES, decode_records, error_row, find_chain, rows_to_batch
from .layout import ScanRange
from .walk import Stop, walk_segment

TORN_END = "end"
TORN_REPORT = "report"


class KnownStarts:
    """Walk positions learned by this process's tasks: (plan, segment path) -> {segment-relative
    cut: the first position at or past it that the walk visits}. Bounded (least recently used
    segments go first)."""

    def __init__(self, max_segments: int = 1024) -> None:
        self._max = max_segments
        self._known: OrderedDict[tuple[str, str], dict[int, int]] = OrderedDict()

    def start_for(self, r: ScanRange) -> int:
        """Where a task reading `r` starts its walk: the remembered position for the highest cut at
        or below `r.lo`, else the segment start."""
        if not r.plan_id:
            return 0
        cuts = self._known.get((r.plan_id, r.path))
        if not cuts:
            return 0
        self._known.move_to_end((r.plan_id, r.path))
        below = [cut for cut in cuts if cut <= r.lo]
        return cuts[max(below)] if below else 0

    def learn(self, r: ScanRange, cut: int, position: int | None) -> None:
        if not r.plan_id or position is None:
            return
        key = (r.plan_id, r.path)
        self._known.setdefault(key, {})[cut] = position
        self._known.move_to_end(key)
        while len(self._known) > self._max:
            self._known.popitem(last=False)


KNOWN_STARTS = KnownStarts()


@dataclass
class WalkOutcome:
    """How a range's walk went, filled in by `read_range` (for the audit: a range whose walk met
    nothing and went on past its end reads the same from any byte-identical copy of its segment)."""

    stops: int = 0  # bad spots, holes and torn tails met, reported as rows or not
    ended: bool = False  # the walk ended inside the range: the segment's data, or the log, ends there


def read_range(
    scan_range: ScanRange,
    *,
    columns: list[str] | tuple[str, ...] = COLUMN_NAMES,
    verify_crc: bool = True,
    topics: list[str] | None = None,
    torn_tail: str = TORN_END,
    batch_rows: int = 32768,
    outcome: WalkOutcome | None = None,
) -> Iterator[pa.RecordBatch]:
    """The Arrow batches of one range; usable without Spark (the audit, tests). `outcome`, when
    given, is filled in as the walk goes."""
    named = "broker_name" in columns
    for batch in _read_range(
        scan_range,
        columns=[c for c in columns if c != "broker_name"],
        verify_crc=verify_crc,
        topics=topics,
        torn_tail=torn_tail,
        batch_rows=batch_rows,
        outcome=outcome if outcome is not None else WalkOutcome(),
    ):
        if named:
            value = pa.array([scan_range.broker_name] * batch.num_rows, pa.string())
            batch = pa.RecordBatch.from_arrays([*batch.columns, value], names=[*batch.schema.names, "broker_name"])
            batch = batch.select(list(columns))
        yield batch


def _read_range(
    scan_range: ScanRange,
    *,
    columns: list[str],
    verify_crc: bool,
    topics: list[str] | None,
    torn_tail: str,
    batch_rows: int,
    outcome: WalkOutcome,
) -> Iterator[pa.RecordBatch]:
    r = scan_range
    wanted = pa.array(topics, pa.string()) if topics else None
    decoded = list(columns) if wanted is None or "topic" in columns else [*columns, "topic"]
    # The CRC shows only in these two columns: without them, checking it changes no row.
    verify_crc = verify_crc and bool({"error", "body_crc_ok"} & set(columns))
    try:
        fd = os.open(r.path, os.O_RDONLY)
    except FileNotFoundError:
        # Retention deleted the segment since planning: say so, never return nothing silently.
        yield rows_to_batch(
            [error_row(r.start_offset, f"segment {r.path} disappeared (deleted by retention?)", r.broker)], columns
        )
        return
    try:
        buf = mmap.mmap(fd, r.seg_size, access=mmap.ACCESS_READ)
    finally:
        os.close(fd)
    try:
        walk = walk_segment(
            buf,
            r.seg_start,
            r.seg_size,
            r.lo,
            r.hi,
            last_data_segment=r.last_data_segment,
            flushed_offset=r.flushed_offset,
            batch_records=batch_rows,
            finder=find_chain,
            start=KNOWN_STARTS.start_for(r),
        )
        while True:
            try:
                item = next(walk)
            except StopIteration as done:
                KNOWN_STARTS.learn(r, r.hi, done.value)
                outcome.ended = done.value is None
                break
            if isinstance(item, Stop):
                outcome.stops += 1
                if item.torn and torn_tail == TORN_END:
                    continue
                reason = item.reason
                if item.torn:
                    reason = f"torn tail: {reason}"
                elif item.resume is not None:
                    reason = (
                        f"{reason}; {item.resume - item.offset} bytes skipped to the next valid record at {item.resume}"
                    )
                elif item.kind == "bad":
                    reason = f"{reason}; no valid record follows in the segment"
                yield rows_to_batch([error_row(item.offset, reason, r.broker)], columns)
                continue
            for batch in decode_records(
                buf, r.seg_start, r.seg_size, item, broker=r.broker, verify_crc=verify_crc, columns=decoded
            ):
                if wanted is not None:
                    topic = batch.column("topic")
                    batch = batch.filter(pc.or_(pc.is_in(topic, value_set=wanted), pc.is_null(topic)))
                    if len(decoded) != len(columns):
                        batch = batch.select(list(columns))
                if batch.num_rows:
                    yield batch
    finally:
        try:
            buf.close()
        except BufferError:
            pass  # an Arrow view of the mapping is still alive; the mapping goes with it
