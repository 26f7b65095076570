"""Replica audit: are a master's and its slaves' CommitLogs byte-identical up to where they must be?

`audit_replicas(spark, master_dir, slave_dirs, up_to=None)` answers, per slave:

- the compared range: from the later of the two logs' first offsets to the bound, which is `up_to`
  (an acknowledged or confirmed offset: both logs must hold every byte below it) or else the
  slave's end (a lagging slave is fine: it must match the master as far as it goes). A slave whose
  log runs past the master's end diverges at the master's end; a log that stops before `up_to`
  diverges where it stops;
- the first divergent offset (bytes compared by Spark tasks, whole segments in `COMPARE_CHUNK`
  chunks) and the records around it on both sides (decoded by `store.codec`);
- and, over every store up to `up_to`: messages per broker and topic and error rows (corrupt
  records); over the master's log up to the bound: duplicates by UNIQ_KEY (the client's message
  id) and by KEYS within a topic, and gaps in queue offsets (per topic and queue; prepared and
  rolled-back transaction messages take no queue offset).

How it runs, in bounded memory whatever the store's size (`pipeline.audit_stats` holds the per-range
arithmetic):

1. One Spark job decodes the master's ranges (`RangeStats`: counts, errors, queue-offset runs, key
   hashes) while other tasks of the same job compare the segments of the master and each slave
   chunk by chunk. Hashes and runs go through a shuffle into buckets of bounded size, where the
   repeated hashes (duplicate candidates) and the queue-offset gaps are found; only those, the
   comparison results and the per-range counts reach the driver.
2. A slave's range is decoded only where its stats can differ from the master's: its segment is not
   byte-identical to the master's, or the master's range met something whose reading depends on
   the store's checkpoint (an error row, a stop, or the end of the data where the two stores'
   checkpoints differ; see `_reads_alike`). For an identical replica that is the range where the
   log ends.
3. Only when step 1 found candidates, a last job reads the master's records whose key hashes are
   candidates and counts their keys exactly.

`AuditReport.ok` is False on a divergence, a corrupt record or a queue-offset gap; duplicates are
reported but do not fail the audit (a producer's retry stores a message twice by design). The
comparison and statistics helpers are plain functions of paths, offsets and batches, run inside
Spark tasks; the report is a frozen dataclass (`to_dict()` for JSON, `format_audit` for text).
Driver-thread only.
"""

from __future__ import annotations

import heapq
import mmap
import os
import uuid
import zlib
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from operator import add
from typing import Any

import numpy as np

from .audit_stats import (
    BUCKET_BYTES,
    STATS_COLUMNS,
    RangeStats,
    batch_keys,
    gaps_of_runs,
    range_stats,
    repeated_hashes,
)
from .decode import decode_row, find_chain
from .layout import ScanRange, StoreLayout, plan_ranges, read_layout
from .scan import WalkOutcome, read_range
from .walk import chain_end, hop_chain

COMPARE_CHUNK = 64 << 20
# Bytes of the master's log per task: each task costs Spark a fixed overhead, and holds no more
# than its range's key hashes (16 bytes per message) whatever the range's size.
AUDIT_PARTITION_BYTES = 128 << 20
PIECE = 4 << 20


@dataclass(frozen=True, slots=True)
class RecordBrief:
    offset: int
    size: int | None
    topic: str | None
    queue_id: int | None
    queue_offset: int | None
    msg_id: str | None
    error: str | None


@dataclass(frozen=True, slots=True)
class ReplicaResult:
    slave: str
    compared_from: int
    compared_to: int
    master_end: int
    slave_end: int
    lag_bytes: int  # master end - slave end (negative: the slave is ahead)
    first_divergence: int | None
    reason: str | None
    master_context: tuple[RecordBrief, ...]
    slave_context: tuple[RecordBrief, ...]

    @property
    def identical(self) -> bool:
        return self.first_divergence is None


@dataclass(frozen=True, slots=True)
class AuditReport:
    master: str
    up_to: int | None
    replicas: tuple[ReplicaResult, ...]
    topic_counts: tuple[tuple[str, str, int], ...]  # (broker, topic, messages)
    error_rows: tuple[tuple[str, int, str], ...]  # (broker, offset, error), first ones
    error_count: int
    duplicate_keys: tuple[tuple[str, str, str, int], ...]  # (topic, "UNIQ_KEY"|"KEYS", value, copies)
    duplicate_count: int
    gaps: tuple[tuple[str, int, int, int], ...]  # (topic, queue id, last offset seen, next offset seen)
    gap_count: int

    @property
    def identical(self) -> bool:
        return all(r.identical for r in self.replicas)

    @property
    def ok(self) -> bool:
        return self.identical and self.error_count == 0 and self.gap_count == 0

    def to_dict(self) -> dict:
        data = asdict(self)
        data["identical"] = self.identical
        data["ok"] = self.ok
        return data


# ---------------------------------------------------------------------------------------------
# Byte comparison (runs in Spark tasks)


def log_end(layout: StoreLayout) -> int:
    """One past the last valid record of the log (its first offset when it holds nothing)."""
    last = layout.last_data_start
    if last is None:
        return layout.min_offset
    seg = next(s for s in layout.segments if s.start == last)
    with open(seg.path, "rb") as f:
        buf = mmap.mmap(f.fileno(), layout.segment_size, access=mmap.ACCESS_READ)
    try:
        return last + chain_end(buf, last, layout.segment_size, finder=find_chain)
    finally:
        try:
            buf.close()
        except BufferError:
            pass  # a numpy view of the mapping is still alive; the mapping goes with it


def compare_chunk(task: tuple[str, str, int, int, int, int]) -> int | None:
    """First CommitLog offset in [start, end) where the two segment files differ (None: equal).
    `task` = (master path, slave path, segment start, segment size, start, end)."""
    master_path, slave_path, seg_start, seg_size, start, end = task
    for path in (master_path, slave_path):
        if not os.path.exists(path):
            return start
    with open(master_path, "rb", buffering=0) as fm, open(slave_path, "rb", buffering=0) as fs:
        pos = start - seg_start
        stop = end - seg_start
        while pos < stop:
            n = min(PIECE, stop - pos)
            a = os.pread(fm.fileno(), n, pos)
            b = os.pread(fs.fileno(), n, pos)
            if a != b:
                same = min(len(a), len(b))
                differ = np.flatnonzero(np.frombuffer(a, np.uint8, same) != np.frombuffer(b, np.uint8, same))
                return seg_start + pos + (int(differ[0]) if len(differ) else same)
            pos += n
    return None


def compare_tasks(master: StoreLayout, slave: StoreLayout, start: int, end: int) -> list[tuple]:
    size = master.segment_size
    m = {s.start: s.path for s in master.segments}
    s = {x.start: x.path for x in slave.segments}
    tasks = []
    seg = start - start % size if size else 0
    while size and seg < end:
        lo, hi = max(start, seg), min(end, seg + size)
        for cut in range(lo, hi, COMPARE_CHUNK):
            tasks.append(
                (
                    m.get(seg, "/nonexistent-master-segment"),
                    s.get(seg, "/nonexistent-slave-segment"),
                    seg,
                    size,
                    cut,
                    min(hi, cut + COMPARE_CHUNK),
                )
            )
        seg += size
    return tasks


def context_around(layout: StoreLayout, offset: int, count: int) -> tuple[RecordBrief, ...]:
    """Up to `count` records before the one holding `offset`, that one, and `count` after."""
    size = layout.segment_size
    seg = next((s for s in layout.segments if s.start <= offset < s.start + size), None)
    if seg is None:
        return ()
    with open(seg.path, "rb") as f:
        buf = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ)
    try:
        positions, stop = hop_chain(buf, seg.start, size, 0, size)
        rel = offset - seg.start
        index = max((i for i, p in enumerate(positions) if p <= rel), default=-1)
        chosen = positions[max(0, index - count) : index + count + 1] if index >= 0 else positions[:count]
        briefs = []
        for p in chosen:
            row = decode_row(buf, p, seg.start, size, layout.store_dir)
            briefs.append(
                RecordBrief(
                    row["physical_offset"],
                    row.get("size"),
                    row.get("topic"),
                    row.get("queue_id"),
                    row.get("queue_offset"),
                    row.get("msg_id"),
                    row.get("error"),
                )
            )
        if stop <= rel and (not chosen or chosen[-1] < stop):
            briefs.append(RecordBrief(seg.start + stop, None, None, None, None, None, "the record chain stops here"))
        return tuple(briefs)
    finally:
        try:
            buf.close()
        except BufferError:
            pass


# ---------------------------------------------------------------------------------------------
# The audit's Spark tasks (plain functions of plain values: they run in Spark's Python workers)

# What reaches the driver of a range: good messages per topic, error rows, the first of them, and
# how its walk went (`scan.WalkOutcome`: stops met, whether it ended inside the range).
Summary = tuple[dict[str, int], int, list[tuple[int, str]], int, bool]


def _read_stats(scan_range: ScanRange, **kwargs) -> tuple[RangeStats, Summary]:
    outcome = WalkOutcome()
    stats = range_stats(read_range(scan_range, columns=STATS_COLUMNS, outcome=outcome), scan_range.broker, **kwargs)
    return stats, (stats.counts, stats.error_count, stats.errors, outcome.stops, outcome.ended)


def _reads_alike(master: ScanRange, slave: ScanRange, summary: Summary) -> bool:
    """Whether the slave's range, its segment byte-identical to the master's, reads as the master's
    did. The walk's course depends on the bytes alone, except where it meets a bad spot, a hole,
    a torn tail or the end of the data: there whether the segment is the log's last holding data,
    and in it the checkpoint's flushed offset, decide. A range that met none of them (no error
    row, no stop) and went on past its end reads alike whatever its store's checkpoint says."""
    _, errors, _, stops, ended = summary
    if errors or stops:
        return False
    if not ended:
        return True
    return master.last_data_segment == slave.last_data_segment and (
        not master.last_data_segment or master.flushed_offset == slave.flushed_offset
    )


def _gap_bucket(topic: str, queue_id: int, buckets: int) -> int:
    return zlib.crc32(f"{queue_id}:{topic}".encode()) % buckets


def _first_stage(task: tuple, *, bound: int, examples: int, buckets: int) -> Iterator[tuple[int, object]]:
    """A master range (stats, key hashes by bucket, queue runs by bucket) or a chunk comparison.
    Keys: [0, buckets) hash buckets, [buckets, 2 * buckets) gap buckets, 2 * buckets the rest."""
    rest = 2 * buckets
    if task[0] == "compare":
        _, slave, chunks = task
        for chunk in chunks:
            yield rest, ("compare", slave, chunk, compare_chunk(chunk))
        return
    _, index, scan_range = task
    stats, summary = _read_stats(scan_range, examples=examples, master_bound=bound, buckets=buckets)
    yield rest, ("range", index, summary)
    for bucket, hashes in enumerate(stats.hashes):
        if len(hashes):
            yield bucket, hashes.tobytes()
    for (topic, queue_id), runs in stats.runs.items():
        yield buckets + _gap_bucket(topic, queue_id, buckets), (topic, queue_id, runs)


def _second_stage(index: int, items: Iterator[tuple[int, Any]], *, examples: int, buckets: int) -> Iterator:
    if index < buckets:
        repeated = repeated_hashes(np.frombuffer(value, np.uint64) for _, value in items)
        if len(repeated):
            yield "candidates", repeated.tobytes()
    elif index < 2 * buckets:
        queues: dict[tuple[str, int], list[list[int]]] = {}
        for _, (name, number, queue_runs) in items:
            queues.setdefault((name, number), []).extend(queue_runs)
        count = 0
        rows: list[tuple[str, int, int, int]] = []
        for (topic, queue_id), runs in queues.items():
            found, first = gaps_of_runs(runs, examples)
            count += found
            rows = heapq.nsmallest(
                examples, rows + [(topic, queue_id, before, after) for before, after in first], key=_gap_order
            )
        yield "gaps", count, rows
    else:
        for _, value in items:
            yield value


def _gap_order(row: tuple[str, int, int, int]) -> tuple:
    topic, queue_id, before, after = row
    return topic, queue_id, after, before


def _slave_range(task: tuple[int, ScanRange], *, examples: int) -> tuple[int, Summary]:
    slave, scan_range = task
    return slave, _read_stats(scan_range, examples=examples)[1]


def _candidate_keys(scan_range: ScanRange, *, bound: int, candidates) -> Iterator[tuple[tuple[str, str, str], int]]:
    wanted = np.frombuffer(candidates.value, np.uint64)
    for batch in read_range(scan_range, columns=STATS_COLUMNS):
        good = np.asarray(batch.column("error").is_null()) & (np.asarray(batch.column("physical_offset")) < bound)
        for kind, topics, values, hashes in batch_keys(batch.filter(good)):
            hit = np.isin(hashes, wanted)
            if hit.any():
                keep = np.flatnonzero(hit)
                for topic, value in zip(topics.take(keep).to_pylist(), values.take(keep).to_pylist()):
                    yield (topic, kind, value), 1


def _duplicate_order(row: tuple[str, str, str, int]) -> tuple:
    topic, kind, value, copies = row
    return -copies, topic, value, kind


def _top_duplicates(items: Iterator[tuple[tuple[str, str, str], int]], *, examples: int) -> Iterator:
    count = 0
    best: list[tuple[str, str, str, int]] = []
    for (topic, kind, value), copies in items:
        count += 1
        best = heapq.nsmallest(examples, [*best, (topic, kind, value, copies)], key=_duplicate_order)
    yield count, best


# ---------------------------------------------------------------------------------------------
# The audit


def audit_replicas(
    spark,
    master_dir: str,
    slave_dirs: list[str] | tuple[str, ...],
    up_to: int | None = None,
    *,
    context: int = 3,
    examples: int = 20,
    on_progress: Callable[[str], None] | None = None,
    partition_bytes: int = AUDIT_PARTITION_BYTES,
) -> AuditReport:
    from functools import partial

    say = on_progress or (lambda text: None)
    sc = spark.sparkContext
    master = read_layout(master_dir)
    slaves = [read_layout(d) for d in slave_dirs]
    with ThreadPoolExecutor(max_workers=2) as pool:
        master_end, *slave_ends = pool.map(log_end, [master, *slaves])
    bound_for_stats = up_to if up_to is not None else master_end
    master_ranges = plan_ranges([master], end_offset=up_to, partition_bytes=partition_bytes, plan_id=uuid.uuid4().hex)
    buckets = max(1, -(-sum(r.hi - r.lo for r in master_ranges) // BUCKET_BYTES))
    compare: list[tuple] = []
    for i, slave in enumerate(slaves):
        if _comparable(master, slave):
            by_segment: dict[int, list[tuple]] = {}
            for chunk in compare_tasks(master, slave, *_extent(master, slave)):
                by_segment.setdefault(chunk[2], []).append(chunk)
            compare += [("compare", i, chunks) for chunks in by_segment.values()]
    # One comparison task per segment (its chunks in turn), first: they are the longest.
    tasks: list[tuple] = compare + [("range", k, r) for k, r in enumerate(master_ranges)]
    say(f"audit: {len(master_ranges)} range(s) of the master, {len(compare)} segment comparison(s) with the slaves")
    results = (
        sc.parallelize(tasks, len(tasks))
        .flatMap(partial(_first_stage, bound=bound_for_stats, examples=examples, buckets=buckets))
        .partitionBy(2 * buckets + 1, _bucket_of)
        .mapPartitionsWithIndex(partial(_second_stage, examples=examples, buckets=buckets))
        .collect()
        if tasks
        else []
    )
    stage = _FirstStage.of(results, len(slaves), examples)
    master_summaries, compared, candidates = stage.master_summaries, stage.compared, stage.candidates

    replicas = []
    identical_segments: list[set[int]] = []
    for i, (slave_dir, slave, slave_end) in enumerate(zip(slave_dirs, slaves, slave_ends)):
        start = max(master.min_offset, slave.min_offset)
        bound = up_to if up_to is not None else slave_end
        first, reason = _divergence(master, slave, compared[i], start, bound, master_end, slave_end, up_to)
        identical_segments.append(_identical_segments(compared[i]))
        replicas.append(
            ReplicaResult(
                slave=str(slave_dir),
                compared_from=start,
                compared_to=bound,
                master_end=master_end,
                slave_end=slave_end,
                lag_bytes=master_end - slave_end,
                first_divergence=first,
                reason=reason,
                master_context=context_around(master, first, context) if first is not None else (),
                slave_context=context_around(slave, first, context) if first is not None else (),
            )
        )

    # Every store's counts and errors; a slave's ranges come from the master's where they must agree.
    by_range = {(r.seg_start, r.lo, r.hi): (r, master_summaries[k]) for k, r in enumerate(master_ranges)}
    summaries: list[tuple[str, Summary]] = [(master.store_dir, s) for s in master_summaries.values()]
    to_read: list[tuple[int, ScanRange]] = []
    seen = {master.store_dir}
    for i, slave in enumerate(slaves):
        if slave.store_dir in seen:
            continue  # a store named twice is counted once
        seen.add(slave.store_dir)
        for r in plan_ranges([slave], end_offset=up_to, partition_bytes=partition_bytes, plan_id=uuid.uuid4().hex):
            same = by_range.get((r.seg_start, r.lo, r.hi))
            if same is not None and r.seg_start in identical_segments[i] and _reads_alike(same[0], r, same[1]):
                summaries.append((slave.store_dir, same[1]))
            else:
                to_read.append((i, r))
    say(f"audit: {len(to_read)} range(s) of the slaves differ from the master's or end a log; reading them")
    if to_read:
        for i, summary in sc.parallelize(to_read, len(to_read)).map(partial(_slave_range, examples=examples)).collect():
            summaries.append((slaves[i].store_dir, summary))
    counts: dict[tuple[str, str], int] = {}
    error_count = 0
    error_rows: list[tuple[str, int, str]] = []
    for broker, (topic_counts, errors, first_errors, _, _) in summaries:
        for topic, n in topic_counts.items():
            counts[(broker, topic)] = counts.get((broker, topic), 0) + n
        error_count += errors
        error_rows = heapq.nsmallest(examples, error_rows + [(broker, o, e) for o, e in first_errors])

    duplicate_count, duplicates = _duplicate_keys(sc, master_ranges, candidates, bound_for_stats, examples, say)
    return AuditReport(
        master=str(master_dir),
        up_to=up_to,
        replicas=tuple(replicas),
        topic_counts=tuple((broker, topic, n) for (broker, topic), n in sorted(counts.items())),
        error_rows=tuple(error_rows),
        error_count=error_count,
        duplicate_keys=tuple((topic, kind, value, copies) for topic, kind, value, copies in duplicates),
        duplicate_count=duplicate_count,
        gaps=tuple(stage.gaps),
        gap_count=stage.gap_count,
    )


@dataclass
class _FirstStage:
    """What the first Spark stage found: each master range's summary, each slave's compared
    chunks, the key hashes seen more than once, and the queue gaps."""

    master_summaries: dict[int, Summary]
    compared: dict[int, list[tuple[tuple, int | None]]]
    candidates: list[np.ndarray]
    gap_count: int = 0
    gaps: list[tuple[str, int, int, int]] = field(default_factory=list)

    @classmethod
    def of(cls, results: Iterable[tuple], slaves: int, examples: int) -> _FirstStage:
        found = cls({}, {i: [] for i in range(slaves)}, [])
        for result in results:
            if result[0] == "range":
                found.master_summaries[result[1]] = result[2]
            elif result[0] == "compare":
                found.compared[result[1]].append((result[2], result[3]))
            elif result[0] == "candidates":
                found.candidates.append(np.frombuffer(result[1], np.uint64))
            else:
                found.gap_count += result[1]
                found.gaps = heapq.nsmallest(examples, found.gaps + result[2], key=_gap_order)
        return found


def _divergence(
    master: StoreLayout,
    slave: StoreLayout,
    compared: list[tuple[tuple, int | None]],
    start: int,
    bound: int,
    master_end: int,
    slave_end: int,
    up_to: int | None,
) -> tuple[int | None, str | None]:
    """Where a slave's log first departs from the master's, and why (None, None: nowhere)."""
    if not _comparable(master, slave):
        return start, f"segment sizes differ: master {master.segment_size}, slave {slave.segment_size}"
    limit = min(bound, master_end, slave_end)
    found = [o for chunk, o in compared if o is not None and start <= o < limit and chunk[4] < limit]
    if found:
        return min(found), "bytes differ"
    if up_to is not None and min(master_end, slave_end) < up_to:
        first = min(master_end, slave_end)
        who = "master" if master_end < slave_end else "slave"
        return first, f"the {who}'s log ends at {first}, below the acknowledged offset {up_to}"
    if up_to is None and slave_end > master_end:
        return master_end, f"the slave's log runs past the master's end {master_end} to {slave_end}"
    return None, None


def _duplicate_keys(
    sc,
    master_ranges: list[ScanRange],
    candidates: list[np.ndarray],
    bound: int,
    examples: int,
    say: Callable[[str], None],
) -> tuple[int, list[tuple[str, str, str, int]]]:
    """The keys stored more than once among the candidate hashes, resolved exactly: how many, and
    the first `examples` of them."""
    from functools import partial

    duplicate_count = 0
    duplicates: list[tuple[str, str, str, int]] = []
    if not candidates or not master_ranges:
        return duplicate_count, duplicates
    wanted = np.unique(np.concatenate(candidates))
    say(f"audit: resolving {len(wanted)} repeated key hash(es) exactly")
    shared = sc.broadcast(wanted.tobytes())
    try:
        for count, best in (
            sc.parallelize(master_ranges, len(master_ranges))
            .flatMap(partial(_candidate_keys, bound=bound, candidates=shared))
            .reduceByKey(add)
            .filter(lambda kv: kv[1] > 1)
            .mapPartitions(partial(_top_duplicates, examples=examples))
            .collect()
        ):
            duplicate_count += count
            duplicates = heapq.nsmallest(examples, duplicates + best, key=_duplicate_order)
    finally:
        shared.unpersist()
    return duplicate_count, duplicates


def _bucket_of(key: int) -> int:
    return key


def _comparable(master: StoreLayout, slave: StoreLayout) -> bool:
    return not (slave.segment_size != master.segment_size and slave.segments and master.segments)


def _extent(master: StoreLayout, slave: StoreLayout) -> tuple[int, int]:
    """From the first segment of either store to the end of the last one."""
    segments = [*master.segments, *slave.segments]
    if not segments:
        return 0, 0
    size = master.segment_size or slave.segment_size
    return min(s.start for s in segments), max(s.start for s in segments) + size


def _identical_segments(compared: list[tuple[tuple, int | None]]) -> set[int]:
    """Segment starts whose every chunk compared equal (both files present)."""
    differ = {chunk[2] for chunk, found in compared if found is not None}
    return {chunk[2] for chunk, _ in compared} - differ


def format_audit(report: AuditReport) -> str:
    out = [f"Audit of master {report.master}" + (f" up to offset {report.up_to}" if report.up_to is not None else "")]
    for r in report.replicas:
        state = "IDENTICAL" if r.identical else f"DIVERGES at offset {r.first_divergence} ({r.reason})"
        out.append(
            f"  slave {r.slave}: {state}; compared [{r.compared_from}, "
            f"{min(r.compared_to, r.master_end, r.slave_end)}), "
            f"master end {r.master_end}, slave end {r.slave_end}, lag {r.lag_bytes} bytes"
        )
        for side, records in (("master", r.master_context), ("slave", r.slave_context)):
            for b in records:
                mark = "  <-" if b.offset <= (r.first_divergence or -1) < b.offset + (b.size or 1) else ""
                out.append(
                    f"      {side:6} {b.offset:>12} size={b.size} topic={b.topic} queue={b.queue_id} "
                    f"qoff={b.queue_offset} msgId={b.msg_id}" + (f" error={b.error}" if b.error else "") + mark
                )
    out.append("  messages per broker and topic:")
    for broker, topic, count in report.topic_counts:
        out.append(f"    {broker}  {topic}  {count}")
    out.append(f"  corrupt records: {report.error_count}")
    for broker, offset, error in report.error_rows:
        out.append(f"    {broker} @ {offset}: {error}")
    out.append(f"  duplicates (same UNIQ_KEY or KEYS within a topic, master): {report.duplicate_count}")
    for topic, kind, value, copies in report.duplicate_keys:
        out.append(f"    {topic} {kind}={value} x{copies}")
    out.append(f"  queue-offset gaps (master): {report.gap_count}")
    for topic, qid, before, after in report.gaps:
        out.append(f"    {topic}-{qid}: {before} then {after}")
    out.append("RESULT: OK" if report.ok else "RESULT: PROBLEMS FOUND")
    return "\n".join(out)
