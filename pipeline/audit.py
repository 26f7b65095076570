"""Replica audit: are a master's and its slaves' CommitLogs byte-identical up to where they must be?

`audit_replicas(spark, master_dir, slave_dirs, up_to=None)` answers, per slave:

- the compared range: from the later of the two logs' first offsets to the bound, which is `up_to`
  (an acknowledged or confirmed offset: both logs must hold every byte below it) or else the
  slave's end (a lagging slave is fine: it must match the master as far as it goes). A slave whose
  log runs past the master's end diverges at the master's end; a log that stops before `up_to`
  diverges where it stops;
- the first divergent offset (bytes compared by Spark tasks, one per segment range) and the
  records around it on both sides (decoded by `store.codec`);
- and, over the master's log up to the bound, with the Spark source: messages per broker and
  topic, error rows (corrupt records), duplicates by UNIQ_KEY (the client's message id) and by
  KEYS within a topic, and gaps in queue offsets (per topic and queue; prepared and rolled-back
  transaction messages take no queue offset).

`AuditReport.ok` is False on a divergence, a corrupt record or a queue-offset gap; duplicates are
reported but do not fail the audit (a producer's retry stores a message twice by design). The
comparison helpers are plain functions of paths and offsets, run inside Spark tasks; the report is
a frozen dataclass (`to_dict()` for JSON, `format_audit` for text). Driver-thread only.
"""

from __future__ import annotations

import mmap
import os
from dataclasses import asdict, dataclass

from .decode import decode_row
from .layout import StoreLayout, read_layout
from .walk import chain_end, hop_chain

COMPARE_CHUNK = 16 << 20
PIECE = 1 << 20


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
        return last + chain_end(buf, last, layout.segment_size)
    finally:
        buf.close()


def compare_chunk(task: tuple[str, str, int, int, int, int]) -> int | None:
    """First CommitLog offset in [start, end) where the two segment files differ (None: equal).
    `task` = (master path, slave path, segment start, segment size, start, end)."""
    master_path, slave_path, seg_start, seg_size, start, end = task
    for path in (master_path, slave_path):
        if not os.path.exists(path):
            return start
    with open(master_path, "rb") as fm, open(slave_path, "rb") as fs:
        pos = start - seg_start
        stop = end - seg_start
        while pos < stop:
            n = min(PIECE, stop - pos)
            fm.seek(pos)
            fs.seek(pos)
            a = fm.read(n)
            b = fs.read(n)
            if a != b:
                for i in range(min(len(a), len(b))):
                    if a[i] != b[i]:
                        return seg_start + pos + i
                return seg_start + pos + min(len(a), len(b))
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
# The audit


def audit_replicas(  # noqa: PLR0915 - the Spark job's steps in order: scan, compare, report
    spark,
    master_dir: str,
    slave_dirs: list[str] | tuple[str, ...],
    up_to: int | None = None,
    *,
    context: int = 3,
    examples: int = 20,
    on_progress=None,
) -> AuditReport:
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window

    from .spark import register

    register(spark)
    say = on_progress or (lambda text: None)
    master = read_layout(master_dir)
    master_end = log_end(master)
    replicas = []
    bound_for_stats = up_to if up_to is not None else master_end
    for slave_dir in slave_dirs:
        slave = read_layout(slave_dir)
        slave_end = log_end(slave)
        start = max(master.min_offset, slave.min_offset)
        bound = up_to if up_to is not None else slave_end
        first = None
        reason = None
        if slave.segment_size != master.segment_size and slave.segments and master.segments:
            first, reason = start, f"segment sizes differ: master {master.segment_size}, slave {slave.segment_size}"
        else:
            limit = min(bound, master_end, slave_end)
            tasks = compare_tasks(master, slave, start, limit)
            say(f"audit: comparing {slave_dir} with {master_dir} over [{start}, {limit}) in {len(tasks)} task(s)")
            found = []
            if tasks:
                found = [
                    o
                    for o in spark.sparkContext.parallelize(tasks, len(tasks)).map(compare_chunk).collect()
                    if o is not None
                ]
            if found:
                first, reason = min(found), "bytes differ"
            elif up_to is not None and min(master_end, slave_end) < up_to:
                first = min(master_end, slave_end)
                who = "master" if master_end < slave_end else "slave"
                reason = f"the {who}'s log ends at {first}, below the acknowledged offset {up_to}"
            elif up_to is None and slave_end > master_end:
                first, reason = master_end, f"the slave's log runs past the master's end {master_end} to {slave_end}"
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

    say("audit: counting messages, errors, duplicates and queue-offset gaps")
    stores = [str(master_dir), *map(str, slave_dirs)]
    reader = spark.read.format("rocketstore-commitlog").option("paths", ",".join(stores))
    if up_to is not None:
        reader = reader.option("endOffset", str(up_to))
    df = reader.load()
    df = df.select(
        "broker", "physical_offset", "topic", "queue_id", "queue_offset", "sys_flag", "properties", "keys", "error"
    )
    df.cache()
    try:
        counts = [
            (r["broker"], r["topic"], r["count"])
            for r in df.where("error is null").groupBy("broker", "topic").count().orderBy("broker", "topic").collect()
        ]
        errors_df = df.where("error is not null")
        error_count = errors_df.count()
        error_rows = [
            (r["broker"], r["physical_offset"], r["error"])
            for r in errors_df.orderBy("broker", "physical_offset").limit(examples).collect()
        ]
        m = df.where(
            (F.col("broker") == str(master_dir))
            & F.col("error").isNull()
            & (F.col("physical_offset") < F.lit(bound_for_stats))
        )
        dup_uniq = (
            m.where(F.col("properties").getItem("UNIQ_KEY").isNotNull())
            .groupBy("topic", F.col("properties").getItem("UNIQ_KEY").alias("value"))
            .count()
            .where("count > 1")
            .withColumn("kind", F.lit("UNIQ_KEY"))
        )
        dup_keys = (
            m.where(F.col("keys").isNotNull() & (F.col("keys") != ""))
            .groupBy("topic", F.col("keys").alias("value"))
            .count()
            .where("count > 1")
            .withColumn("kind", F.lit("KEYS"))
        )
        dups = dup_uniq.unionByName(dup_keys)
        duplicate_count = dups.count()
        duplicates = [
            (r["topic"], r["kind"], r["value"], r["count"])
            for r in dups.orderBy(F.desc("count"), "topic", "value").limit(examples).collect()
        ]
        queued = m.where(~((F.col("sys_flag").bitwiseAND(12) == 4) | (F.col("sys_flag").bitwiseAND(12) == 12)))
        w = Window.partitionBy("topic", "queue_id").orderBy("queue_offset")
        gaps_df = (
            queued.select("topic", "queue_id", "queue_offset")
            .withColumn("previous", F.lag("queue_offset").over(w))
            .where(F.col("previous").isNotNull() & (F.col("queue_offset") != F.col("previous") + 1))
        )
        gap_count = gaps_df.count()
        gaps = [
            (r["topic"], r["queue_id"], r["previous"], r["queue_offset"])
            for r in gaps_df.orderBy("topic", "queue_id", "queue_offset").limit(examples).collect()
        ]
    finally:
        df.unpersist()
    return AuditReport(
        master=str(master_dir),
        up_to=up_to,
        replicas=tuple(replicas),
        topic_counts=tuple(counts),
        error_rows=tuple(error_rows),
        error_count=error_count,
        duplicate_keys=tuple(duplicates),
        duplicate_count=duplicate_count,
        gaps=tuple(gaps),
        gap_count=gap_count,
    )


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
