"""A store directory's CommitLog as the pipeline sees it, and the plan that splits it into ranges.

`read_layout(store_dir)` lists `commitlog/` (segment files named by their first offset, 20 digits,
all of one size: the commonest file size when some file is off), reads the checkpoint (its
flushed and confirm offsets, when its CRC holds) and probes the first 8 bytes of each segment to
find the last segment holding data. It reads nothing else and never writes.

`plan_ranges(layouts, ...)` is pure: it cuts every segment into byte ranges of at most
`partition_bytes`, clipped to [start_offset, end_offset); each `ScanRange` is one Spark input
partition. A range start need not be a record boundary: the task finds its first record by
replaying the segment's chain (`pipeline.walk`). Ranges are small frozen dataclasses of plain
values: Spark pickles them to its workers.

Thread-safety: pure functions and immutable values.
"""

from __future__ import annotations

import collections
import os
from dataclasses import dataclass
from pathlib import Path

from store.recovery.checkpoint import decode_checkpoint

COMMITLOG_DIR = "commitlog"
DEFAULT_PARTITION_BYTES = 64 << 20


class LayoutError(Exception):
    """The directory is not a store the pipeline can read."""


@dataclass(frozen=True, slots=True)
class Segment:
    start: int
    path: str
    has_data: bool  # its first 8 bytes are not all zero


@dataclass(frozen=True, slots=True)
class StoreLayout:
    store_dir: str  # as given: it names the broker in every row read from it
    segment_size: int
    segments: tuple[Segment, ...]
    flushed_offset: int | None  # the checkpoint's physic flushed offset, when trusted and set
    confirm_offset: int | None  # the checkpoint's confirm offset, when trusted and set
    problems: tuple[str, ...]  # files that cannot be part of the log (skipped)
    broker_name: str = ""  # the broker group it belongs to, when the reader was told

    @property
    def min_offset(self) -> int:
        return self.segments[0].start if self.segments else 0

    @property
    def last_data_start(self) -> int | None:
        """Start of the last segment holding data (None when no segment does)."""
        data = [s.start for s in self.segments if s.has_data]
        return data[-1] if data else None

    @property
    def total_bytes(self) -> int:
        return len(self.segments) * self.segment_size


@dataclass(frozen=True, slots=True)
class ScanRange:
    broker: str
    path: str
    seg_start: int
    seg_size: int
    lo: int  # segment-relative: records starting in [lo, hi) belong to this range
    hi: int
    last_data_segment: bool
    flushed_offset: int | None
    broker_name: str = ""
    # Names the plan the range belongs to: tasks of one plan share the walk positions they learn
    # (`pipeline.commitlog_source`); "" shares nothing.
    plan_id: str = ""

    @property
    def start_offset(self) -> int:
        return self.seg_start + self.lo

    @property
    def end_offset(self) -> int:
        return self.seg_start + self.hi


def read_layout(store_dir: str | os.PathLike, broker_name: str = "") -> StoreLayout:
    root = Path(store_dir)
    if not root.is_dir():
        raise LayoutError(f"{store_dir}: no such store directory")
    commitlog = root / COMMITLOG_DIR
    if not commitlog.is_dir():
        raise LayoutError(f"{store_dir}: not a store directory (no {COMMITLOG_DIR}/)")
    found: list[tuple[int, Path, int]] = []
    problems: list[str] = []
    for name in sorted(os.listdir(commitlog)):
        path = commitlog / name
        if len(name) != 20 or not name.isdigit() or not path.is_file():
            if not name.endswith(".tmp"):
                problems.append(f"{path}: not a segment file name")
            continue
        found.append((int(name), path, path.stat().st_size))
    sizes = collections.Counter(size for _, _, size in found if size)
    segment_size = max(sizes.items(), key=lambda kv: (kv[1], kv[0]))[0] if sizes else 0
    segments: list[Segment] = []
    for start, path, size in found:
        if size != segment_size or start % segment_size:
            problems.append(f"{path}: {size} bytes at offset {start}; segments here are {segment_size} bytes")
            continue
        if segments and start != segments[-1].start + segment_size:
            problems.append(f"{commitlog}: no segment file from {segments[-1].start + segment_size} to {start}")
        with open(path, "rb") as f:
            head = f.read(8)
        segments.append(Segment(start, str(path), any(head)))
    flushed = confirm = None
    checkpoint = root / "checkpoint"
    if checkpoint.is_file():
        state, trusted = decode_checkpoint(checkpoint.read_bytes())
        if trusted:
            flushed = state.physic_flushed_offset or None
            confirm = state.confirm_offset or None
    return StoreLayout(str(store_dir), segment_size, tuple(segments), flushed, confirm, tuple(problems), broker_name)


def plan_ranges(
    layouts: list[StoreLayout],
    *,
    start_offset: int = 0,
    end_offset: int | None = None,
    partition_bytes: int = DEFAULT_PARTITION_BYTES,
    plan_id: str = "",
) -> list[ScanRange]:
    """Byte ranges covering every segment of every layout within [start_offset, end_offset)."""
    if partition_bytes <= 0:
        raise ValueError(f"partition_bytes must be positive, not {partition_bytes}")
    ranges: list[ScanRange] = []
    for layout in layouts:
        size = layout.segment_size
        last_data = layout.last_data_start
        for seg in layout.segments:
            if last_data is None or seg.start > last_data:
                break  # nothing written from here on (the walk of the last data segment sees its end)
            lo = max(0, start_offset - seg.start)
            hi = size if end_offset is None else min(size, end_offset - seg.start)
            step = max(1, partition_bytes)
            for cut in range(lo, hi, step):
                ranges.append(
                    ScanRange(
                        layout.store_dir,
                        seg.path,
                        seg.start,
                        size,
                        cut,
                        min(hi, cut + step),
                        seg.start == last_data,
                        layout.flushed_offset,
                        layout.broker_name,
                        plan_id,
                    )
                )
    return ranges
