"""Benchmark of the Spark pipeline at full size: scan, Parquet anchor, export, audit and rebuild.

    python -m bench.pipeline_bench [--messages 10000000] [--body 120] [--master local[2]]
                                   [--steps scan,export,parquet,audit,rebuild] [--cache-dir DIR | --no-cache]

The store is `bench.pipeline_store`'s: 10 million messages of ~290 B by default (a 120-byte body,
TAGS, KEYS and a UNIQ_KEY), 2.9 GB over three 1 GiB segments, with a byte-for-byte copy for the
audit; both are cached between runs (checked against a manifest, written again when stale). Then,
on `--master` with Spark's default memory settings, one timed run of each step (after a warm-up
over the first 64 MiB, which starts the JVM and the Python workers):

- a single-process decode with the store's codec (check_record + decode_checked) over the first
  `--baseline-messages` (the reference a Spark job must beat);
- the `rocketstore-commitlog` source into Spark's noop sink: every column with CRCs checked, every
  column without, and the six projected columns (`PROJECTED`);
- the export to Parquet (`pipeline.export`), then Spark reading those Parquet files back with the
  same six columns and with every column: the anchor the scan is compared with;
- the audit of the store against its copy, and the offline rebuild of ConsumeQueues and IndexFiles.

Each line gives seconds, msgs/s, MB/s of CommitLog, the peak resident memory of the process tree
(this process, the JVM, the Python workers) during the step, and where the CPU went: microseconds
of CPU per message in the JVM, in Spark's Python workers and in this process (the driver). CPU
time per message does not depend on what else the machine runs, unlike seconds: on a shared
machine it is the figure to compare. The first and last lines give the load average. Asserts
nothing.
"""

from __future__ import annotations

import argparse
import mmap
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from store.log.codec import CorruptMessage, RecordKind, check_record, decode_checked

from .common import default_parent_dir, environment, load_average, progress
from .pipeline_store import StoreSummary, cached_store, default_cache_dir, write_store

PROJECTED = "physical_offset bigint, topic string, queue_id int, queue_offset bigint, size int, store_timestamp bigint"
PROJECTED_COLUMNS = [c.split()[0] for c in PROJECTED.split(", ")]
STEPS = ("scan", "export", "parquet", "audit", "rebuild")
WARM_UP_BYTES = 64 << 20


def baseline_decode(root: Path, segment_size: int, limit: int) -> int:
    count = 0
    for path in sorted((root / "commitlog").iterdir()):
        start = int(path.name)
        with open(path, "rb") as f:
            buf = mmap.mmap(f.fileno(), segment_size, access=mmap.ACCESS_READ)
        pos = 0
        while pos < segment_size and count < limit:
            try:
                record = check_record(buf, pos, segment_size, start + pos)
            except CorruptMessage:
                break
            if record.kind != RecordKind.MESSAGE:
                break
            decode_checked(buf, pos, record)
            count += 1
            pos += record.size
        buf.close()
        if count >= limit:
            break
    return count


class ProcessTree:
    """This process and its descendants (the JVM, Spark's Python workers) during a step: the peak
    resident memory and the CPU time each kind of process spent, sampled every half second (a
    process that ends between samples loses what it spent since the last one)."""

    KINDS = ("jvm", "workers", "driver")

    def __init__(self) -> None:
        self.peak = 0
        self.cpu = dict.fromkeys(self.KINDS, 0.0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._before: dict[int, float] = {}
        self._last: dict[int, Proc] = {}

    def __enter__(self) -> "ProcessTree":
        self._before = {p.pid: p.cpu_s for p in process_tree(os.getpid())}
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()
        for pid, proc in self._last.items():
            self.cpu[proc.kind] += proc.cpu_s - self._before.get(pid, 0.0)

    def _sample(self) -> None:
        procs = process_tree(os.getpid())
        self.peak = max(self.peak, sum(p.rss for p in procs))
        self._last.update((p.pid, p) for p in procs)

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            self._sample()


@dataclass(frozen=True, slots=True)
class Proc:
    pid: int
    kind: str  # jvm, workers or driver
    rss: int  # bytes
    cpu_s: float  # user + system, with that of children it has reaped


_TICK = os.sysconf("SC_CLK_TCK")


def process_tree(root: int) -> list[Proc]:
    children: dict[int, list[int]] = {}
    stats: dict[int, tuple[int, float, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/stat").read_text()
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        # The command name may hold spaces and parentheses: fields start after the last ')'.
        fields = raw[raw.rindex(")") + 2 :].split()
        ppid = int(fields[1])
        cpu = sum(int(x) for x in fields[11:15]) / _TICK
        rss = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        children.setdefault(ppid, []).append(int(entry))
        stats[int(entry)] = (rss, cpu, cmd.split(b"\0", 1)[0].decode(errors="replace"))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid in stats:
            rss, cpu, exe = stats[pid]
            kind = "driver" if pid == root else "jvm" if exe.endswith("java") else "workers"
            out.append(Proc(pid, kind, rss, cpu))
        todo += children.get(pid, [])
    return out


def cpu_by_kind(root: int) -> dict[str, float]:
    total: dict[str, float] = {}
    for proc in process_tree(root):
        total[proc.kind] = total.get(proc.kind, 0.0) + proc.cpu_s
    return total


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--messages", type=int, default=10_000_000)
    p.add_argument("--body", type=int, default=120)
    p.add_argument("--segment-size", type=int, default=1 << 30)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--partition-bytes", type=int, help="the source's partitionBytes (default: its own)")
    p.add_argument("--baseline-messages", type=int, default=1_000_000)
    p.add_argument("--steps", default=",".join(STEPS), help=f"comma-separated, of {','.join(STEPS)}")
    p.add_argument("--cache-dir", type=Path, default=default_cache_dir(), help="where generated stores are kept")
    p.add_argument("--no-cache", action="store_true", help="write the store into the run's directory")
    p.add_argument("--dir", type=Path, help="work directory (default: a temporary one, removed after)")
    args = p.parse_args(argv)
    steps = [s.strip() for s in args.steps.split(",") if s.strip()]
    unknown = set(steps) - set(STEPS)
    if unknown:
        p.error(f"unknown steps {sorted(unknown)}; choose from {','.join(STEPS)}")

    work = args.dir or Path(tempfile.mkdtemp(prefix="pipeline-bench-", dir=default_parent_dir()))
    work.mkdir(parents=True, exist_ok=True)
    env = environment(work)
    print(
        f"config: messages={args.messages} body={args.body} B segment={args.segment_size} B master={args.master} "
        f"partitionBytes={args.partition_bytes or 'default'} steps={','.join(steps)} cpus={os.cpu_count()} "
        f"python={sys.version.split()[0]} git={env['git']}"
    )
    print(f"load average at start: {load_average()}")
    try:
        if args.no_cache:
            summary: StoreSummary = write_store(work / "store", args.messages, args.body, args.segment_size, progress)
            copy = work / "copy"
            shutil.copytree(summary.root, copy)
        else:
            summary, copy = cached_store(args.cache_dir, args.messages, args.body, args.segment_size, progress)
        root = summary.root
        written = f"written in {summary.seconds:.1f} s" if summary.seconds else "from the cache"
        print(
            f"store: {summary.bytes_used / 1e9:.2f} GB in {summary.segments} segment(s), "
            f"{summary.bytes_used / args.messages:.0f} B/message, {written}"
        )
        mb = summary.bytes_used / 1e6

        def line(what: str, seconds: float, count: int, tree: ProcessTree, total_mb: float = mb) -> None:
            us = {kind: tree.cpu[kind] * 1e6 / count for kind in ProcessTree.KINDS}
            print(
                f"{what:44s} {seconds:7.2f} s {count / seconds:11,.0f} msgs/s {total_mb / seconds:7.1f} MB/s "
                f"peak RSS {tree.peak / 1e9:4.2f} GB  CPU us/msg: JVM {us['jvm']:5.2f} workers "
                f"{us['workers']:5.2f} driver {us['driver']:5.2f}",
                flush=True,
            )

        if args.baseline_messages:
            with ProcessTree() as tree:
                t = time.perf_counter()
                n = baseline_decode(root, args.segment_size, args.baseline_messages)
                seconds = time.perf_counter() - t
            line(f"single-process decode (store.codec), {n:,}", seconds, n, tree, mb * n / args.messages)

        from pipeline.spark import session

        spark = session(args.master)

        def source(schema: str | None = None, **options: str):
            reader = spark.read.format("rocketstore-commitlog")
            if schema:
                reader = reader.schema(schema)
            if args.partition_bytes:
                reader = reader.option("partitionBytes", str(args.partition_bytes))
            for key, value in options.items():
                reader = reader.option(key, value)
            return reader

        def timed(label: str, run, count: int) -> float:
            with ProcessTree() as tree:
                t = time.perf_counter()
                run()
                seconds = time.perf_counter() - t
            line(label, seconds, count, tree)
            return seconds

        source().option("endOffset", str(WARM_UP_BYTES)).load(str(root)).write.format("noop").mode("overwrite").save()
        results: dict[str, float] = {}
        if "scan" in steps:
            for key, label, df in (
                ("all_crc", "spark scan, all columns, CRC checked", source().load(str(root))),
                ("all", "spark scan, all columns, no CRC", source(verifyCrc="false").load(str(root))),
                ("projected", "spark scan, 6 columns", source(PROJECTED).load(str(root))),
            ):
                results[key] = timed(label, lambda: df.write.format("noop").mode("overwrite").save(), args.messages)
        parquet = work / "parquet"
        if "export" in steps or "parquet" in steps:
            from pipeline.export import export_topics

            shutil.rmtree(parquet, ignore_errors=True)
            timed("export to Parquet", lambda: export_topics(spark, [str(root)], str(parquet)), args.messages)
        if "parquet" in steps:
            for key, label, df in (
                ("parquet_all", "spark Parquet read, all columns", spark.read.parquet(str(parquet))),
                (
                    "parquet_projected",
                    "spark Parquet read, 6 columns",
                    spark.read.parquet(str(parquet)).select(*PROJECTED_COLUMNS),
                ),
            ):
                results[key] = timed(label, lambda: df.write.format("noop").mode("overwrite").save(), args.messages)
            if "projected" in results:
                print(f"6 columns: scan / Parquet = {results['parquet_projected'] / results['projected']:.2f}x speed")
            if "all" in results:
                print(f"all columns: scan (no CRC) / Parquet = {results['parquet_all'] / results['all']:.2f}x speed")
        if "audit" in steps:
            from pipeline.audit import audit_replicas

            report = None

            def audit() -> None:
                nonlocal report
                report = audit_replicas(spark, str(root), [str(copy)])

            timed("audit vs a copy", audit, args.messages)
            assert report is not None
            print(f"  identical={report.identical} ok={report.ok} counts={len(report.topic_counts)}")
        if "rebuild" in steps:
            from pipeline.rebuild import rebuild_store

            rebuilt = None

            def rebuild() -> None:
                nonlocal rebuilt
                rebuilt = rebuild_store(root, work / "rebuilt")

            shutil.rmtree(work / "rebuilt", ignore_errors=True)
            timed("rebuild ConsumeQueues + IndexFiles", rebuild, args.messages)
            assert rebuilt is not None
            print(f"  messages={rebuilt.messages} queues={rebuilt.queues} index files={rebuilt.index_files}")
        spark.stop()
    finally:
        print(f"load average at end: {load_average()}")
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
