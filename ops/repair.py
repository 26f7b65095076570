"""Cutting a damaged CommitLog back to a record boundary: what `rocketstore repair` does.

`plan_repair` is read-only (no lock): from an inspection it works out where to cut (the first bad
offset unless the operator names one), checks that the offset is a record boundary inside the
valid prefix, and counts what would go (bytes, valid messages, whole segments). `repair` does it:
it takes the store lock (so no broker runs meanwhile), inspects again under the lock, lowers the
checkpoint's offsets (flushed, confirmed, ...) to the cut (first, so that a crash midway leaves a store
that starts and cuts the rest itself), then truncates the log with `MappedFileQueue.truncate`,
zeroing the cut bytes of the segment that keeps the boundary and deleting later segments.

`extend_short_segment` handles the other damage a copy or a full filesystem leaves: a last segment
file shorter than the segment size (its data intact as far as it goes). The store refuses to load
it; this zero-fills it back to size (the bytes past its data are zeros anyway: that is where the
log ends), fsyncs the file and the directory, under the store lock. What the checkpoint says was
flushed beyond the data is then missing, which the next inspection reports as such.

Nothing here truncates unless `repair` is called; the command line calls it only with both
`--truncate-at` and `--yes`. Functions are not meant to run concurrently on one store (the lock
makes a second `repair` fail). Single-threaded; the store lock keeps brokers out meanwhile.
"""

from __future__ import annotations

import dataclasses
import mmap
import os
from dataclasses import dataclass
from pathlib import Path

from ops.inspect import InspectReport, OnProgress, inspect_store
from store.log.codec import CorruptMessage, RecordKind, check_record
from store.log.mapped_file import fsync_dir, reserve_blocks
from store.log.mapped_file_queue import MappedFileQueue
from store.recovery.checkpoint import StoreCheckpoint
from store.recovery.lifecycle import StoreLock


class RepairError(Exception):
    """The repair cannot be done as asked; the message says why. Nothing was changed."""


@dataclass(frozen=True, slots=True)
class RepairPlan:
    store_dir: str
    offset: int  # where the log would end
    reason: str  # why there: the first bad offset's reason, or "requested"
    needed: bool  # the store does not start (or silently drops data) without a repair
    bytes_cut: int  # written bytes from `offset` to the high-water mark
    messages_cut: int  # valid messages at or after `offset`
    segments_deleted: tuple[str, ...]
    zero_bytes: int  # bytes zeroed in the segment that keeps `offset`
    flushed_before: int | None
    flushed_after: int | None
    # The last segment file is short: it is zero-filled back to size first (`extend_short_segment`),
    # since the store does not load it otherwise and `repair` refuses to cut before that.
    short_segment: str | None = None


@dataclass(frozen=True, slots=True)
class RepairResult:
    plan: RepairPlan
    report_after: InspectReport


def _boundary_walk(report: InspectReport, offset: int) -> int:
    """Check `offset` is a record boundary of the valid prefix; return how many messages of its
    segment lie below it. Raises RepairError otherwise."""
    segment = next((s for s in report.segments if s.start <= offset < s.start + s.size), None)
    if segment is None:
        if offset == report.end_offset:  # just past the last full segment
            return 0
        raise RepairError(f"offset {offset} lies in no segment of the log")
    with open(Path(report.store_dir) / "commitlog" / segment.name, "rb") as f:
        # A short last segment (cut by a copy or a full disk) is walked as far as its bytes go.
        length = min(segment.size, os.fstat(f.fileno()).st_size)
        buf = mmap.mmap(f.fileno(), length, access=mmap.ACCESS_READ) if length else b""
    try:
        pos = 0
        below = 0
        previous = segment.start
        while segment.start + pos < offset:
            current = segment.start + pos
            if pos >= length:
                raise RepairError(
                    f"offset {offset} lies past the end of the short segment {segment.name} "
                    f"(its data ends at {segment.start + length})"
                )
            try:
                record = check_record(buf, pos, length, current)
            except CorruptMessage as exc:  # cannot happen below end_offset, unless the file moved
                raise RepairError(f"record at {current} does not check ({exc.reason}); inspect again") from None
            if record.kind == RecordKind.END:
                break
            if record.kind == RecordKind.BLANK:
                raise RepairError(
                    f"offset {offset} is inside the blank end of segment {segment.name} "
                    f"(record boundaries around it: {current} and {segment.start + segment.size})"
                )
            if record.kind == RecordKind.MESSAGE:
                below += 1
            previous = current
            pos += record.size
        if segment.start + pos != offset:
            raise RepairError(
                f"offset {offset} is not a record boundary; the nearest ones are {previous} and {segment.start + pos}"
            )
        return below
    finally:
        if isinstance(buf, mmap.mmap):
            buf.close()


def plan_repair(report: InspectReport, truncate_at: int | None = None) -> RepairPlan | None:
    """What a repair would do; None when there is nothing to cut and no offset is asked for.
    Raises RepairError when the named offset is not a boundary of the valid prefix."""
    if report.layout_problems:
        raise RepairError(
            "the segment layout is broken (" + "; ".join(report.layout_problems) + "); "
            "repair only truncates, fix the files by hand first"
        )
    first = report.bad_offsets[0] if report.bad_offsets else None
    if truncate_at is None:
        if first is None:
            return None
        offset, reason = first.offset, f"{first.kind}: {first.reason}"
    else:
        offset, reason = truncate_at, "requested"
    if offset < report.min_offset:
        raise RepairError(f"offset {offset} is below the first offset of the log, {report.min_offset}")
    if offset > report.end_offset:
        where = (
            f"the first bad offset {first.offset} ({first.reason})"
            if first
            else f"the end of the log {report.end_offset}"
        )
        raise RepairError(f"offset {offset} is past {where}; a cut must be at or below it, or the damage stays")
    below = _boundary_walk(report, offset)
    kept = next((s for s in report.segments if s.start <= offset < s.start + s.size), None)
    cut = 0
    deleted = []
    for s in report.segments:
        if s.start > offset:
            cut += s.messages
            deleted.append(s.name)
    if kept is not None:
        cut += kept.messages - below
    zero = max(0, kept.data_end - offset) if kept is not None else 0
    flushed = report.checkpoint.physic_flushed_offset if report.checkpoint.trusted else None
    return RepairPlan(
        store_dir=report.store_dir,
        offset=offset,
        reason=reason,
        needed=report.problems_found,
        bytes_cut=max(0, report.data_end - offset),
        messages_cut=cut,
        segments_deleted=tuple(deleted),
        zero_bytes=zero,
        flushed_before=flushed,
        flushed_after=None if flushed is None else min(flushed, offset),
        short_segment=report.short_segment,
    )


def repair(root: str | os.PathLike, truncate_at: int, *, on_progress: OnProgress | None = None) -> RepairResult:
    """Truncate the CommitLog at `truncate_at` under the store lock. Raises StoreLockedError when a
    broker holds the store, RepairError when the offset is not a usable boundary."""
    root = Path(root)
    lock = StoreLock(root)
    lock.acquire()
    try:
        report = inspect_store(root, on_progress=on_progress)
        if report.short_segment:
            raise RepairError(
                f"the last segment {report.short_segment} is short: extend it first (--extend-short-segment)"
            )
        plan = plan_repair(report, truncate_at)
        assert plan is not None
        checkpoint = StoreCheckpoint(root / "checkpoint")
        state = checkpoint.load()
        # Every offset the checkpoint vouches for (flushed, confirmed, dispatched ...) comes down
        # to the cut: nothing above it exists any more. An untrusted checkpoint is left alone;
        # the store ignores it anyway.
        lowered = {
            f.name: plan.offset
            for f in dataclasses.fields(state)
            if f.name.endswith("_offset") and getattr(state, f.name) > plan.offset
        }
        if checkpoint.trusted and lowered:
            checkpoint.update(**lowered)
            checkpoint.persist()
        checkpoint.close()
        queue = MappedFileQueue(root / "commitlog", report.segment_size)
        queue.load()
        try:
            queue.truncate(plan.offset, zero_bytes=plan.zero_bytes)
        finally:
            queue.close()
        after = inspect_store(root)
    finally:
        lock.release()
    return RepairResult(plan, after)


@dataclass(frozen=True, slots=True)
class ExtendResult:
    segment: str
    size_before: int
    size_after: int
    report_after: InspectReport


def extend_short_segment(root: str | os.PathLike, *, on_progress: OnProgress | None = None) -> ExtendResult:
    """Zero-fill a short last segment back to the segment size under the store lock. Raises
    StoreLockedError when a broker holds the store, RepairError when there is no short segment."""
    root = Path(root)
    lock = StoreLock(root)
    lock.acquire()
    try:
        report = inspect_store(root, on_progress=on_progress)
        if not report.short_segment:
            raise RepairError("no short segment: the last segment file has the segment size")
        path = root / "commitlog" / report.short_segment
        fd = os.open(path, os.O_RDWR)
        try:
            before = os.fstat(fd).st_size
            os.ftruncate(fd, report.segment_size)
            reserve_blocks(fd, before, report.segment_size - before)
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_dir(path.parent)
        after = inspect_store(root)
    finally:
        lock.release()
    return ExtendResult(report.short_segment, before, report.segment_size, after)


def format_plan(plan: RepairPlan) -> str:
    lines = [
        f"Cut the CommitLog of {plan.store_dir} at offset {plan.offset} ({plan.reason}):",
        f"  {plan.bytes_cut} written bytes go, holding {plan.messages_cut} valid message(s)",
    ]
    if plan.short_segment:
        lines.insert(
            0,
            f"Zero-fill the short last segment {plan.short_segment} back to the segment size "
            "(--extend-short-segment), then:",
        )
    if plan.segments_deleted:
        lines.append(f"  segments deleted: {', '.join(plan.segments_deleted)}")
    if plan.flushed_before is not None and plan.flushed_after != plan.flushed_before:
        lines.append(f"  checkpoint flushed offset {plan.flushed_before} -> {plan.flushed_after}")
    return "\n".join(lines)
