"""Store read-side benchmark: dispatch, get_message and recovery of `MessageStore`.

What it measures
    A workload store is written first with ordinary puts (untimed here; bench/store_put_bench.py
    measures puts): --messages messages of --body-size random bytes, round robin over 8 topics x 4
    queues, each with a TAGS property (TagA..TagD, cycling within every queue, so a filter on one
    tag matches a quarter) and a KEYS property (one unique key per message). Then:

    1. Dispatch: CommitLog -> ConsumeQueues (and IndexFiles). The pieces MessageStore wires
       together are built directly over hard links of the workload's CommitLog segments (nothing is
       copied or written there) with empty consumequeue/ and index/ directories: MappedFileQueue,
       ConsumeQueueTable, IndexService, Dispatcher, and the store's own consumers
       (`store.dispatch.queue_consumer`, `index_consumer`). The timed loop calls
       `Dispatcher.dispatch_available(max_records=4096)` until the log's end. Three variants:
       ConsumeQueue + index (messageIndexEnable=true, the default), ConsumeQueue only
       (messageIndexEnable=false), and parse only (no consumer: the walk and the DispatchRequest
       alone, the floor of the other two). Figures: messages/s, MB/s of CommitLog records; the
       fdatasync of the new files afterwards is timed apart (the store does it on another thread).

    2. get_message: the workload store opened with MessageStore (load + start), every queue read
       from offset 0 to its end in pages of 32 (`max_total_bytes` 256 KiB) by 1 thread and by 4
       threads (queues split round robin), without a filter and with the tag filter 'TagA'
       (parsed once, as a broker holds a subscription). Figures: messages returned per second, MB/s
       of returned records, ConsumeQueue units walked per second.

    3. Recovery: a second store of --recovery-mib of ~1 KiB messages (same topics and properties),
       shut down cleanly. Then `MessageStore(cfg).load()` is timed, and `start()` (whose catch-up
       dispatch is what an abnormal recovery leaves to do), and `shutdown()`:
         normal   after the clean shutdown: CRCs are checked from the segment of the flushed
                  offset, at most 3 segments back (with 1 GiB segments and a smaller log: all of it)
         abnormal abort file present and the checkpoint's physicFlushedOffset, logicsFlushedOffset
                  and indexMsgTimestamp set to 0: the whole log is CRC-checked, the IndexFiles are
                  dropped, and start() re-dispatches every message
       each with a warm page cache (a process crash) and a cold one (every file of the store
       evicted with posix_fadvise(DONTNEED) after a sync; a machine restart). Figures: seconds,
       s/GiB extrapolated linearly from the log's size, MB/s. A load also looks for stray bytes
       in the unused tail of the last segment (`store.commitlog_scan.last_nonzero_end`), a cost set by
       the segment size rather than the log's: the time in that function is shown apart (it is
       timed by wrapping it, when the store has it), and "s/GiB w/o tail" leaves it out.

    With --profile, the first ConsumeQueue + index dispatch, the single-thread unfiltered read and
    the warm recoveries of the main store (load; start after an abnormal one) run under cProfile,
    and the top functions by own time are printed (those runs' figures include its overhead).

How to run (from the repository root)
    .venv/bin/python -m bench.store_read_bench                # 200k messages, 256 MiB recovery, ~1.5 min
    .venv/bin/python -m bench.store_read_bench --quick        # smoke run (64 MiB segments), under 30 s
    .venv/bin/python -m bench.store_read_bench --only recovery --recovery-mib 1024 --json rec.json
    .venv/bin/python -m bench.store_read_bench --only dispatch --profile
    .venv/bin/python -m bench.store_read_bench --help

Every loop stops at its count or after --seconds, whichever comes first. Progress goes to stderr;
the configuration and the figures go to stdout. The stores go under --dir (default: a temporary
directory on the repository's filesystem, never tmpfs) and are deleted at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import dataclasses
import json
import logging
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from bench.common import (
    MB,
    REPO_ROOT,
    GiB,
    MiB,
    default_parent_dir,
    environment,
    load_average,
    parse_size,
    print_environment,
    progress,
    size_label,
)
from store import Message, MessageStore, PutMessageStatus, StoreConfig
from store.index.index_file import IndexService, index_file_size
from store.log.flush import wall_clock_ms
from store.log.mapped_file_queue import MappedFileQueue
from store.queue.consume_queue import ConsumeQueueTable
from store.queue.dispatch import Dispatcher, index_consumer, queue_consumer
from store.queue.message_filter import TagFilter
from store.recovery import recovery as commitlog_recovery
from store.recovery.checkpoint import StoreCheckpoint
from store.recovery.lifecycle import AbortFile
from store.schedule import delivery_time_ms, parse_delay_levels
from store.stats import StoreStats

TOPICS = tuple(f"BenchTopic{t}" for t in range(8))
QUEUES = 4
TAGS = ("TagA", "TagB", "TagC", "TagD")
FILTER = "TagA"
GROUP = "BenchGroup"
PAGE = 32
PAGE_BYTES = 256 * 1024
READ_THREADS = (1, 4)
DISPATCH_BATCH = 4096  # max_records per dispatch_available call, as ReputMessageService
PROGRESS_EVERY_S = 2.0
CHECK_CLOCK_EVERY = 256  # puts between clock reads in the build loop
PROFILE_TOP = 14
SECTIONS = ("dispatch", "reads", "recovery")
# A reader thread that outlives the loop's bound by this much is reported, not waited for.
JOIN_GRACE_S = 30.0


class BenchError(RuntimeError):
    """A run that cannot give a figure (a put refused, dispatch stuck, a store that will not load)."""


# -- options -----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Profile:
    """What --quick changes; explicit options override it."""

    messages: int
    recovery_bytes: int
    segment_size: int
    seconds: float
    trials: int


FULL = Profile(200_000, 256 * MiB, GiB, 120.0, 3)
# Smaller segments in the smoke run: every load reads the unused tail of its last segment, which
# takes seconds for a 1 GiB segment (the "tail s" of the recovery figures).
QUICK = Profile(20_000, 24 * MiB, 64 * MiB, 10.0, 1)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.store_read_bench",
        description="Measure MessageStore dispatch, get_message and recovery throughput.",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="small sizes for a smoke run (20,000 messages, 24 MiB recovery log, 64 MiB segments)",
    )
    parser.add_argument("--messages", type=int, help="messages in the dispatch/read workload (default 200000)")
    parser.add_argument("--body-size", type=parse_size, default=200, help="workload body size (default 200)")
    parser.add_argument(
        "--recovery-mib", type=int, help="CommitLog MiB of the recovery store (default 256; 24 with --quick)"
    )
    parser.add_argument(
        "--recovery-body-size", type=parse_size, default=1024, help="recovery store body size (default 1KiB)"
    )
    parser.add_argument(
        "--segment-size", type=parse_size, help="CommitLog segment size (default 1GiB; 64MiB with --quick)"
    )
    parser.add_argument(
        "--seconds", type=float, help="time bound of every loop, in seconds (default 120; 10 with --quick)"
    )
    parser.add_argument("--trials", type=int, help="rounds of the dispatch variants (default 3; 1 with --quick)")
    parser.add_argument("--only", help=f"run only these sections, comma-separated: {','.join(SECTIONS)} (default: all)")
    parser.add_argument("--no-cold", action="store_true", help="skip the cold-page-cache recovery runs")
    parser.add_argument(
        "--profile", action="store_true", help="run dispatch, a read and abnormal recovery under cProfile"
    )
    parser.add_argument(
        "--dir", type=Path, help="parent of the run's temporary directory (default: on the repository's filesystem)"
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the results as JSON to PATH")
    args = parser.parse_args(argv)
    profile = QUICK if args.quick else FULL
    args.profile_name = "quick" if args.quick else "full"
    args.messages = profile.messages if args.messages is None else args.messages
    args.recovery_bytes = profile.recovery_bytes if args.recovery_mib is None else args.recovery_mib * MiB
    args.seconds = profile.seconds if args.seconds is None else args.seconds
    args.segment_size = profile.segment_size if args.segment_size is None else args.segment_size
    args.trials = profile.trials if args.trials is None else args.trials
    if args.trials <= 0:
        parser.error("--trials must be positive")
    if args.segment_size < 4096:
        parser.error("--segment-size must be at least 4096")
    if args.messages <= 0 or args.recovery_bytes <= 0 or args.seconds <= 0:
        parser.error("--messages, --recovery-mib and --seconds must be positive")
    if not 1 <= args.body_size <= 1 << 20 or not 1 <= args.recovery_body_size <= 1 << 20:
        parser.error("body sizes must be between 1 B and 1 MiB")
    sections = SECTIONS if not args.only else tuple(s.strip() for s in args.only.split(",") if s.strip())
    unknown = set(sections) - set(SECTIONS)
    if unknown or not sections:
        parser.error(f"--only: expected some of {','.join(SECTIONS)}, got {args.only!r}")
    args.sections = sections
    return args


# -- workload ------------------------------------------------------------------------------------


def workload_message(i: int, body: bytes) -> Message:
    """Message i: topic i % 8, queue (i // 8) % 4, tags cycling within each queue, a unique key."""
    per_round = len(TOPICS) * QUEUES
    return Message(
        TOPICS[i % len(TOPICS)],
        (i // len(TOPICS)) % QUEUES,
        body,
        properties={"TAGS": TAGS[(i // per_round) % len(TAGS)], "KEYS": f"key-{i:010d}"},
    )


@dataclasses.dataclass
class Built:
    label: str
    root: Path
    config: StoreConfig
    messages: int = 0
    log_bytes: int = 0
    end_offset: int = 0
    put_seconds: float = 0.0
    shutdown_seconds: float = 0.0
    stop: str = ""

    @property
    def record_size(self) -> float:
        return self.log_bytes / self.messages if self.messages else 0.0


def store_config(root: Path, args: argparse.Namespace, *, index: bool = True) -> StoreConfig:
    return StoreConfig(
        store_path_root_dir=str(root),
        mapped_file_size_commit_log=args.segment_size,
        message_index_enable=index,
    )


def build_store(
    label: str, root: Path, config: StoreConfig, body_size: int, max_messages: int, max_bytes: int, seconds: float
) -> Built:
    """Put workload messages until `max_messages` or `max_bytes` of CommitLog or `seconds`; then
    shut the store down cleanly (its dispatch drains: every message is in its queue)."""
    built = Built(label, root, config)
    body = os.urandom(body_size)
    ok = PutMessageStatus.PUT_OK
    start = time.perf_counter()
    deadline = start + seconds
    next_report = start + PROGRESS_EVERY_S
    with MessageStore(config) as store:
        first = store.max_offset
        end = first
        i = 0
        stop = "count"
        while i < max_messages:
            result = store.put_message(workload_message(i, body))
            if result.status is not ok:
                raise BenchError(f"{label}: put {i} answered {result.status.name} {result.reason}")
            i += 1
            end = result.wrote_offset + result.wrote_bytes
            if end - first >= max_bytes:
                stop = "bytes"
                break
            if i % CHECK_CLOCK_EVERY == 0:
                now = time.perf_counter()
                if now >= deadline:
                    stop = "time"
                    break
                if now >= next_report:
                    progress(f"{label}: {i:,} messages, {(end - first) / MiB:,.1f} MiB written")
                    next_report = now + PROGRESS_EVERY_S
        put_done = time.perf_counter()
        built.messages, built.log_bytes, built.end_offset, built.stop = i, end - first, end, stop
        built.put_seconds = put_done - start
    built.shutdown_seconds = time.perf_counter() - put_done
    progress(
        f"{label}: {built.messages:,} messages, {built.log_bytes / MiB:,.1f} MiB in {built.put_seconds:.1f} s"
        f" (stop: {stop}); clean shutdown {built.shutdown_seconds:.1f} s"
    )
    if stop == "time":
        progress(f"{label}: WARNING the build hit its {seconds:g} s bound; figures cover a smaller store")
    return built


# -- profiling -----------------------------------------------------------------------------------


@dataclasses.dataclass
class FunctionCost:
    where: str  # file:function
    own_s: float
    cumulative_s: float
    calls: int


class Profiler:
    """cProfile around named sections when enabled; a no-op otherwise. Profiles the calling
    thread only."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.sections: dict[str, tuple[float, list[FunctionCost]]] = {}

    @contextlib.contextmanager
    def section(self, name: str, enabled: bool = True) -> Iterator[None]:
        if not (self.enabled and enabled):
            yield
            return
        profile = cProfile.Profile()
        profile.enable()
        try:
            yield
        finally:
            profile.disable()
            stats = pstats.Stats(profile)
            self.sections[name] = (stats.total_tt, top_functions(stats, PROFILE_TOP))  # type: ignore[attr-defined]


def _where(filename: str, function: str) -> str:
    if filename == "~":
        return function  # a builtin, e.g. <built-in method posix.fdatasync>
    path = Path(filename)
    try:
        shown = str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        shown = path.name
    return f"{shown}:{function}"


def top_functions(stats: pstats.Stats, n: int) -> list[FunctionCost]:
    rows = [
        FunctionCost(_where(filename, function), tt, ct, nc)
        for (filename, _line, function), (_cc, nc, tt, ct, _callers) in stats.stats.items()  # type: ignore[attr-defined]
    ]
    rows.sort(key=lambda r: r.own_s, reverse=True)
    return rows[:n]


# -- 1. dispatch ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class DispatchVariant:
    name: str
    queues: bool
    index: bool


DISPATCH_VARIANTS = (
    DispatchVariant("cq+index", True, True),
    DispatchVariant("cq only", True, False),
    DispatchVariant("parse only", False, False),
)


@dataclasses.dataclass
class DispatchResult:
    variant: str
    messages: int = 0
    log_bytes: int = 0
    seconds: float = 0.0
    flush_seconds: float = 0.0
    queue_units: int = 0
    index_entries: int = 0
    index_files: int = 0
    stop: str = ""
    error: str = ""
    trials_msgs_per_s: list[float] = dataclasses.field(default_factory=list)

    @property
    def msgs_per_s(self) -> float:
        return self.messages / self.seconds if self.seconds else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.log_bytes / self.seconds / MB if self.seconds else 0.0

    @property
    def us_per_msg(self) -> float:
        return self.seconds / self.messages * 1e6 if self.messages else 0.0


def link_segments(source: Path, target: Path) -> None:
    """Hard-link every CommitLog segment of `source` into `target` (copy where links fail)."""
    target.mkdir(parents=True)
    for segment in sorted(source.iterdir()):
        try:
            os.link(segment, target / segment.name)
        except OSError:
            shutil.copy2(segment, target / segment.name)


def run_dispatch(
    variant: DispatchVariant, source: Built, run_dir: Path, seconds: float, profiler: Profiler, profile: bool
) -> DispatchResult:
    result = DispatchResult(variant.name)
    config = source.config
    root = Path(tempfile.mkdtemp(prefix="dispatch-", dir=run_dir))
    link_segments(source.root / "commitlog", root / "commitlog")
    log_queue = MappedFileQueue(root / "commitlog", config.mapped_file_size_commit_log)
    queues = ConsumeQueueTable(root, config.mapped_file_size_consume_queue)
    index = (
        IndexService(root, hash_slot_num=config.max_hash_slot_num, index_num=config.max_index_num)
        if variant.index
        else None
    )
    try:
        log_queue.load()
        levels = parse_delay_levels(config.message_delay_level)
        end = source.end_offset
        start_offset = log_queue.min_offset
        dispatcher = Dispatcher(
            log_queue, start_offset, lambda: end, lambda level, ts: delivery_time_ms(level, ts, levels)
        )
        if variant.queues:
            dispatcher.add_consumer(queue_consumer(queues, StoreStats(wall_clock_ms)))
        if index is not None:
            dispatcher.add_consumer(index_consumer(index))
        label = f"dispatch {variant.name}"
        dispatched = 0
        stop = "count"
        with profiler.section(f"dispatch {variant.name}", enabled=profile):
            began = time.perf_counter()
            deadline = began + seconds
            next_report = began + PROGRESS_EVERY_S
            while dispatched < source.messages:
                n = dispatcher.dispatch_available(max_records=DISPATCH_BATCH)
                if n == 0:
                    break
                dispatched += n
                now = time.perf_counter()
                if now >= deadline:
                    stop = "time"
                    break
                if now >= next_report:
                    progress(f"{label}: {dispatched:,} of {source.messages:,} messages")
                    next_report = now + PROGRESS_EVERY_S
            ended = time.perf_counter()
        result.messages = dispatched
        result.log_bytes = dispatcher.reput_from_offset - start_offset
        result.seconds = ended - began
        result.stop = stop
        if stop == "count" and dispatcher.reput_from_offset != end:
            result.stop, result.error = (
                "error",
                (
                    f"dispatch stopped at {dispatcher.reput_from_offset}, the log ends at {end}"
                    f" (failed_at={dispatcher.failed_at})"
                ),
            )
        flush_began = time.perf_counter()
        queues.flush(0)
        if index is not None:
            index.flush()
        result.flush_seconds = time.perf_counter() - flush_began
        result.queue_units = sum(q.max_offset - q.min_offset for q in queues.queues())
        if index is not None:
            result.index_files = len(index.files)
            result.index_entries = sum(f.entry_count for f in index.files)
        if not result.error and variant.queues and result.queue_units != dispatched:
            result.error = f"{result.queue_units:,} ConsumeQueue units for {dispatched:,} messages"
    finally:
        log_queue.close()
        queues.close()
        if index is not None:
            index.close()
        shutil.rmtree(root, ignore_errors=True)
    return result


def run_all_dispatch(
    source: Built, args: argparse.Namespace, run_dir: Path, profiler: Profiler
) -> list[DispatchResult]:
    """--trials rounds of every variant, interleaved (a slow spell of a shared machine does not
    land on one variant only); per variant, the median trial by msgs/s with every trial's rate."""
    trials: dict[str, list[DispatchResult]] = {v.name: [] for v in DISPATCH_VARIANTS}
    for n in range(args.trials):
        for variant in DISPATCH_VARIANTS:
            profile = n == 0 and variant.index
            result = run_dispatch(variant, source, run_dir, args.seconds, profiler, profile)
            progress(f"[dispatch {n + 1}/{args.trials}] {describe_dispatch(result)}")
            trials[variant.name].append(result)
    chosen = []
    for runs in trials.values():
        failed = [r for r in runs if r.error]
        if failed:
            chosen.append(failed[0])
            continue
        median = sorted(runs, key=lambda r: r.msgs_per_s)[len(runs) // 2]
        median.trials_msgs_per_s = [r.msgs_per_s for r in runs]
        chosen.append(median)
    return chosen


def describe_dispatch(r: DispatchResult) -> str:
    text = (
        f"{r.variant}: {r.messages:,} messages, {r.msgs_per_s:,.0f} msgs/s, {r.mb_per_s:,.1f} MB/s"
        f" ({r.seconds:.2f} s, flush {r.flush_seconds:.2f} s, stop: {r.stop})"
    )
    return text + (f" ERROR {r.error}" if r.error else "")


# -- 2. get_message ------------------------------------------------------------------------------


@dataclasses.dataclass
class Reader:
    """One reader thread's queues and, afterwards, what it read."""

    queues: list[tuple[str, int, int]]  # topic, queue id, end offset
    messages: int = 0
    bytes: int = 0
    units: int = 0
    calls: int = 0
    start_ns: int = 0
    end_ns: int = 0
    stop: str = ""
    error: BaseException | None = None


@dataclasses.dataclass
class ReadResult:
    threads: int
    tag_filter: str
    messages: int = 0
    bytes: int = 0
    units: int = 0
    calls: int = 0
    seconds: float = 0.0
    stop: str = ""
    error: str = ""

    @property
    def msgs_per_s(self) -> float:
        return self.messages / self.seconds if self.seconds else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.bytes / self.seconds / MB if self.seconds else 0.0

    @property
    def units_per_s(self) -> float:
        return self.units / self.seconds if self.seconds else 0.0


def read_loop(store: MessageStore, reader: Reader, tag_filter: TagFilter | None, deadline_ns: int) -> None:
    """Read every assigned queue from 0 to its end in pages of PAGE; bounded by the queues' units
    (each call moves forward or the loop stops) and by the deadline."""
    get = store.get_message
    clock = time.perf_counter_ns
    messages = size = units = calls = 0
    stop = "count"
    reader.start_ns = clock()
    for topic, queue_id, end in reader.queues:
        offset = 0
        while offset < end:
            result = get(GROUP, topic, queue_id, offset, PAGE, PAGE_BYTES, tag_filter)
            calls += 1
            next_offset = result.next_begin_offset
            if next_offset <= offset:
                raise BenchError(
                    f"get_message({topic}, {queue_id}, {offset}) answered {result.status.name}"
                    f" with next offset {next_offset}: no progress"
                )
            units += next_offset - offset
            messages += len(result.messages)
            size += result.buffer_total_size
            offset = next_offset
            if clock() >= deadline_ns:
                stop = "time"
                break
        if stop == "time":
            break
    reader.end_ns = clock()
    reader.messages, reader.bytes, reader.units, reader.calls, reader.stop = messages, size, units, calls, stop


def reader_main(
    store: MessageStore, reader: Reader, tag_filter: TagFilter | None, barrier: threading.Barrier, seconds: float
) -> None:
    try:
        barrier.wait()
        read_loop(store, reader, tag_filter, time.perf_counter_ns() + int(seconds * 1e9))
    except BaseException as exc:  # reported with the run; the other readers must not wait forever
        reader.error = exc
        barrier.abort()


def run_reads(store: MessageStore, threads: int, tag: str | None, seconds: float, profiler: Profiler) -> ReadResult:
    result = ReadResult(threads, tag or "*")
    ends = [(t, q, store.dispatched_queue_offset(t, q)) for t in TOPICS for q in range(QUEUES)]
    readers = [Reader(ends[i::threads]) for i in range(threads)]
    tag_filter = TagFilter.parse(tag) if tag else None
    if threads == 1:
        with profiler.section("get_message 1 thread, no filter", enabled=tag is None):
            try:
                read_loop(store, readers[0], tag_filter, time.perf_counter_ns() + int(seconds * 1e9))
            except Exception as exc:
                readers[0].error = exc
        hung = 0
    else:
        barrier = threading.Barrier(threads, timeout=60.0)
        workers = [
            threading.Thread(
                target=reader_main, args=(store, r, tag_filter, barrier, seconds), name=f"reader-{i}", daemon=True
            )
            for i, r in enumerate(readers)
        ]
        for worker in workers:
            worker.start()
        deadline = time.monotonic() + seconds + JOIN_GRACE_S
        for worker in workers:
            worker.join(max(0.0, deadline - time.monotonic()))
        hung = sum(worker.is_alive() for worker in workers)
    errors = [r.error for r in readers if r.error is not None and not isinstance(r.error, threading.BrokenBarrierError)]
    if hung or errors:
        result.stop = "error"
        result.error = f"{hung} reader(s) still running" if hung else f"{type(errors[0]).__name__}: {errors[0]}"
    else:
        result.messages = sum(r.messages for r in readers)
        result.bytes = sum(r.bytes for r in readers)
        result.units = sum(r.units for r in readers)
        result.calls = sum(r.calls for r in readers)
        result.seconds = (max(r.end_ns for r in readers) - min(r.start_ns for r in readers)) / 1e9
        result.stop = "time" if any(r.stop == "time" for r in readers) else "count"
    progress(f"[reads] {describe_read(result)}")
    return result


def describe_read(r: ReadResult) -> str:
    if r.error:
        return f"{r.threads} thread(s), filter {r.tag_filter}: ERROR {r.error}"
    return (
        f"{r.threads} thread(s), filter {r.tag_filter}: {r.messages:,} messages, {r.msgs_per_s:,.0f} msgs/s,"
        f" {r.mb_per_s:,.1f} MB/s, {r.units_per_s:,.0f} units/s ({r.seconds:.2f} s, stop: {r.stop})"
    )


def run_all_reads(source: Built, seconds: float, profiler: Profiler) -> tuple[list[ReadResult], float]:
    results = []
    began = time.perf_counter()
    with MessageStore(source.config) as store:
        opened = time.perf_counter() - began
        units = sum(store.dispatched_queue_offset(t, q) for t in TOPICS for q in range(QUEUES))
        if units != source.messages:
            raise BenchError(f"the workload store's queues hold {units:,} units for {source.messages:,} messages")
        for tag in (None, FILTER):
            for threads in READ_THREADS:
                results.append(run_reads(store, threads, tag, seconds, profiler))
    return results, opened


# -- 3. recovery ---------------------------------------------------------------------------------


@dataclasses.dataclass
class RecoveryResult:
    case: str  # normal | abnormal
    cache: str  # warm | cold
    log_bytes: int = 0
    resident_before: int | None = None  # bytes of the store's files in the page cache at load
    load_seconds: float = 0.0
    tail_seconds: float | None = None  # of load_seconds, in recovery.last_nonzero_end
    start_seconds: float = 0.0
    shutdown_seconds: float = 0.0
    crc_from: int = 0
    messages_scanned: int = 0
    redispatched_messages: int = 0
    redispatched_bytes: int = 0
    error: str = ""

    @property
    def total_seconds(self) -> float:
        return self.load_seconds + self.start_seconds

    @property
    def s_per_gib(self) -> float:
        return self.total_seconds / (self.log_bytes / GiB) if self.log_bytes else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.log_bytes / self.total_seconds / MB if self.total_seconds else 0.0

    @property
    def s_per_gib_without_tail(self) -> float | None:
        if self.tail_seconds is None or not self.log_bytes:
            return None
        return (self.total_seconds - self.tail_seconds) / (self.log_bytes / GiB)


class FunctionTimer:
    """Accumulates the time spent in `module.name` while active, by replacing the module
    attribute with a timing wrapper (callers look it up at each call); `seconds` stays None when
    the module has no such function (the store changed)."""

    def __init__(self, module: object, name: str) -> None:
        self._module = module
        self._name = name
        self._real: Callable | None = None
        self.seconds: float | None = None
        self.calls = 0

    def __enter__(self) -> "FunctionTimer":
        real = getattr(self._module, self._name, None)
        if not callable(real):
            return self
        self._real = real
        self.seconds = 0.0

        def timed(*args, **kwargs):
            began = time.perf_counter()
            try:
                return real(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - began
                self.calls += 1

        setattr(self._module, self._name, timed)
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._real is not None:
            setattr(self._module, self._name, self._real)
            self._real = None


def store_files(root: Path) -> list[Path]:
    return [p for p in sorted(root.rglob("*")) if p.is_file()]


def evict_page_cache(root: Path) -> None:
    """Drop every file of the store from the page cache (best effort: pages still mapped by a
    live process stay). Dirty pages are written first, so DONTNEED can drop them."""
    os.sync()
    for path in store_files(root):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def resident_bytes(root: Path) -> int | None:
    """Bytes of the store's files in the page cache, from util-linux `fincore`; None without it."""
    fincore = shutil.which("fincore")
    paths = [str(p) for p in store_files(root)]
    if fincore is None or not paths:
        return None
    try:
        out = subprocess.run(
            [fincore, "--bytes", "--noheadings", "--raw", "--output", "RES", *paths],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
        return sum(int(line) for line in out.split())
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


def make_abnormal(root: Path) -> None:
    """What a crash right after a thorough checkpoint of an empty store would leave: an abort file
    and a checkpoint whose offsets and index time are 0 (CRC-check everything, re-dispatch
    everything, drop the IndexFiles)."""
    checkpoint = StoreCheckpoint(root / "checkpoint")
    try:
        checkpoint.load()
        checkpoint.update(
            physic_flushed_offset=0, logics_flushed_offset=0, index_msg_timestamp=0, logics_msg_timestamp=0
        )
        checkpoint.persist()
    finally:
        checkpoint.close()
    AbortFile(root).create()


def run_recovery(case: str, cache: str, built: Built, profiler: Profiler, profile: bool) -> RecoveryResult:
    result = RecoveryResult(case, cache, log_bytes=built.log_bytes)
    root = built.root
    if case == "abnormal":
        make_abnormal(root)
    if cache == "cold":
        evict_page_cache(root)
    result.resident_before = resident_bytes(root)
    store = MessageStore(built.config)
    try:
        with profiler.section(f"recovery {case} {cache}: load()", enabled=profile):
            with FunctionTimer(commitlog_recovery, "last_nonzero_end") as tail:
                began = time.perf_counter()
                report = store.load()
                loaded = time.perf_counter()
        with profiler.section(f"recovery {case} {cache}: start()", enabled=profile and case == "abnormal"):
            store.start()
            started = time.perf_counter()
        snapshot = store.stats_snapshot()
        result.load_seconds = loaded - began
        result.tail_seconds = tail.seconds
        result.start_seconds = started - loaded
        result.crc_from = report.scan_start_offset
        result.messages_scanned = report.messages_scanned
        result.redispatched_messages = snapshot.dispatched_messages
        result.redispatched_bytes = snapshot.dispatched_bytes
        if report.end_offset != built.end_offset:
            result.error = f"recovered end {report.end_offset} != written end {built.end_offset}"
    except Exception as exc:  # reported in the table; the next case still runs
        result.error = f"{type(exc).__name__}: {exc}"
    finally:
        closing = time.perf_counter()
        store.shutdown()
        result.shutdown_seconds = time.perf_counter() - closing
    progress(f"[recovery] {describe_recovery(result)}")
    return result


def describe_recovery(r: RecoveryResult) -> str:
    if r.error and not r.load_seconds:
        return f"{r.case} {r.cache}: ERROR {r.error}"
    tail = "?" if r.tail_seconds is None else f"{r.tail_seconds:.2f}"
    text = (
        f"{r.case} {r.cache}: load {r.load_seconds:.2f} s (tail {tail} s), start {r.start_seconds:.2f} s,"
        f" {r.s_per_gib:.2f} s/GiB, {r.mb_per_s:,.1f} MB/s; {r.messages_scanned:,} scanned,"
        f" {r.redispatched_messages:,} re-dispatched; shutdown {r.shutdown_seconds:.2f} s"
    )
    return text + (f" ERROR {r.error}" if r.error else "")


def run_all_recovery(built: Built, args: argparse.Namespace, profiler: Profiler) -> list[RecoveryResult]:
    caches = ("warm",) if args.no_cold else ("warm", "cold")
    return [
        run_recovery(case, cache, built, profiler, profile=cache == "warm")
        for cache in caches
        for case in ("normal", "abnormal")
    ]


# -- report ------------------------------------------------------------------------------------


def check_free_space(run_dir: Path, args: argparse.Namespace) -> None:
    """Segments are reserved whole; a store also holds the segment prepared ahead and, with the
    index, one IndexFile."""
    config = StoreConfig()
    index = index_file_size(config.max_hash_slot_num, config.max_index_num)
    segment = args.segment_size
    workload = args.messages * (args.body_size + 200)
    need = 0
    if "dispatch" in args.sections or "reads" in args.sections:
        need += (workload // segment + 2) * segment + index
    if "recovery" in args.sections:
        need += (args.recovery_bytes // segment + 2) * segment + index
    stat = os.statvfs(run_dir)
    free = stat.f_bavail * stat.f_frsize
    if free < need:
        raise SystemExit(
            f"store_read_bench: {run_dir} has {free / GiB:.1f} GiB free; the run needs about {need / GiB:.1f} GiB"
        )


def print_config(env: dict[str, str], args: argparse.Namespace) -> None:
    config = StoreConfig()
    print_environment(
        "RocketStore store read-side benchmark (bench/store_read_bench.py)",
        env,
        ("started", "git", "python", "machine", "dir", "filesystem"),
        12,
    )
    if env["fstype"] in ("tmpfs", "ramfs"):
        print("  WARNING      the directory is in memory: cold-cache figures say nothing about a disk")
    print(
        f"  profile      {args.profile_name}: sections "
        f"{','.join(args.sections)}{', cProfile on' if args.profile else ''}"
    )
    print(
        f"  workload     {args.messages:,} messages, body {args.body_size:,} B random, {len(TOPICS)} topics x"
        f" {QUEUES} queues (message i: topic i%8, queue i/8%4), properties TAGS ({TAGS[0]}..{TAGS[-1]},"
        " cycling within each queue) and KEYS (one unique key each)"
    )
    print(
        f"  store        StoreConfig defaults (ASYNC_FLUSH, ASYNC_MASTER) but segment {size_label(args.segment_size)};"
        f" ConsumeQueue files {config.mapped_file_size_consume_queue:,} B; IndexFile"
        f" {config.max_hash_slot_num:,} slots x {config.max_index_num:,} entries"
        f" ({index_file_size(config.max_hash_slot_num, config.max_index_num) / MB:,.0f} MB)"
    )
    print(
        "  dispatch     over hard links of the workload's CommitLog, empty consumequeue/ and index/;"
        f" dispatch_available(max_records={DISPATCH_BATCH}) until the end; variants cq+index, cq only, parse only;"
    )
    print("               flush s = fdatasync of the new ConsumeQueue and IndexFiles afterwards (not in msgs/s)")
    print(
        f"  reads        get_message pages of {PAGE} ({PAGE_BYTES // 1024} KiB max), every queue from 0 to its end;"
        f" threads {','.join(map(str, READ_THREADS))} (queues split round robin); filter none and '{FILTER}'"
        " (a quarter of each queue)"
    )
    print(
        f"  recovery     {args.recovery_bytes / MiB:,.0f} MiB of {args.recovery_body_size:,} B bodies;"
        " normal = after a clean shutdown; abnormal = abort file + checkpoint flushed offsets and"
    )
    print(
        "               indexMsgTimestamp 0; cache warm, and cold (posix_fadvise DONTNEED on every file)"
        if not args.no_cold
        else "               indexMsgTimestamp 0; cache warm only (--no-cold)"
    )
    print(
        f"  bounds       every loop stops at its count or after {args.seconds:g} s;"
        f" dispatch runs {args.trials} trial(s) per variant, interleaved"
    )
    print(f"  load avg     {load_average()} (1, 5, 15 min) at start: other work on the machine skews every figure")
    print(
        "  units        MB = 10^6 bytes of CommitLog records; msgs/s over the timed loop; s/GiB = (load + start) / "
        "log GiB"
    )
    print()


def format_table(
    columns: Sequence[tuple[str, int]], rows: list[list[str]], left: int = 1, last_left: bool = False
) -> list[str]:
    """Fixed-width columns, the first `left` ones (and the last with `last_left`) left-aligned,
    the others right-aligned; extra cells (an error) trail."""
    last = len(columns) - 1

    def line(cells: list[str]) -> str:
        shown = [
            cell.ljust(width) if i < left or (last_left and i == last) else cell.rjust(width)
            for i, (cell, (_, width)) in enumerate(zip(cells, columns))
        ]
        return ("  " + "  ".join(shown + cells[len(columns) :])).rstrip()

    return [line([name for name, _ in columns])] + [line(row) for row in rows]


def print_builds(builds: list[Built], reads_open_s: float | None) -> None:
    print("Stores written (puts untimed here; see bench/store_put_bench.py)")
    for b in builds:
        print(
            f"  {b.label:<16} {b.messages:>9,} message(s), {b.log_bytes / MiB:8,.1f} MiB CommitLog"
            f" ({b.record_size:,.0f} B per record), put in {b.put_seconds:.1f} s, clean shutdown"
            f" {b.shutdown_seconds:.1f} s, stop: {b.stop}"
        )
    if reads_open_s is not None:
        print(f"  workload store reopened for reads (load + start, normal recovery) in {reads_open_s:.2f} s")
    print()


DISPATCH_COLUMNS = (
    ("consumers", 10),
    ("messages", 9),
    ("MB", 7),
    ("seconds", 7),
    ("msgs/s", 8),
    ("MB/s", 6),
    ("us/msg", 6),
    ("flush s", 7),
    ("units", 8),
    ("idx entries", 11),
    ("stop", 5),
    ("trials msgs/s", 13),
)


def print_dispatch(results: list[DispatchResult]) -> None:
    print("1. Dispatch: CommitLog -> ConsumeQueue (+ IndexFile), one thread; the median of the trials by msgs/s")
    rows = []
    for r in results:
        rows.append(
            [
                r.variant,
                f"{r.messages:,}",
                f"{r.log_bytes / MB:,.1f}",
                f"{r.seconds:.2f}",
                f"{r.msgs_per_s:,.0f}",
                f"{r.mb_per_s:,.1f}",
                f"{r.us_per_msg:.1f}",
                f"{r.flush_seconds:.2f}",
                f"{r.queue_units:,}",
                f"{r.index_entries:,}",
                r.stop,
                " ".join(f"{v:,.0f}" for v in r.trials_msgs_per_s),
            ]
            + ([f"ERROR {r.error}"] if r.error else [])
        )
    for line in format_table(DISPATCH_COLUMNS, rows, last_left=True):
        print(line)
    by_name = {r.variant: r for r in results if not r.error and r.messages}
    parse, cq, full = by_name.get("parse only"), by_name.get("cq only"), by_name.get("cq+index")
    if parse and cq and full:
        print(
            f"  per message: walk + parse {parse.us_per_msg:.1f} us, ConsumeQueue "
            f"{cq.us_per_msg - parse.us_per_msg:+.1f} us,"
            f" IndexFile {full.us_per_msg - cq.us_per_msg:+.1f} us (differences of medians; the CQ files' creation "
            "included)"
        )
    print()


READ_COLUMNS = (
    ("threads", 7),
    ("filter", 6),
    ("messages", 9),
    ("MB", 7),
    ("seconds", 7),
    ("msgs/s", 8),
    ("MB/s", 6),
    ("units/s", 9),
    ("calls", 7),
    ("stop", 5),
)


def print_reads(results: list[ReadResult]) -> None:
    print(
        f"2. get_message: every queue from offset 0, pages of {PAGE} (messages = returned, units = queue units walked)"
    )
    rows = []
    for r in results:
        head = [str(r.threads), r.tag_filter]
        if r.error:
            rows.append(head + [f"ERROR {r.error}"])
            continue
        rows.append(
            head
            + [
                f"{r.messages:,}",
                f"{r.bytes / MB:,.1f}",
                f"{r.seconds:.2f}",
                f"{r.msgs_per_s:,.0f}",
                f"{r.mb_per_s:,.1f}",
                f"{r.units_per_s:,.0f}",
                f"{r.calls:,}",
                r.stop,
            ]
        )
    for line in format_table(READ_COLUMNS, rows, left=2):
        print(line)
    print()


RECOVERY_COLUMNS = (
    ("shutdown", 8),
    ("cache", 5),
    ("log MiB", 7),
    ("cached MiB", 10),
    ("load s", 6),
    ("tail s", 6),
    ("start s", 7),
    ("s/GiB", 6),
    ("w/o tail", 8),
    ("MB/s", 6),
    ("CRC from", 8),
    ("scanned", 8),
    ("dispatched", 10),
    ("close s", 7),
)


def print_recovery(results: list[RecoveryResult], built: Built) -> None:
    print("3. Recovery: MessageStore(cfg).load(), then start() (catch-up dispatch); s/GiB and MB/s over load + start")
    rows = []
    for r in results:
        head = [r.case, r.cache]
        if r.error and not r.load_seconds:
            rows.append(head + [f"ERROR {r.error}"])
            continue
        cached = "?" if r.resident_before is None else f"{r.resident_before / MiB:,.1f}"
        tail = "?" if r.tail_seconds is None else f"{r.tail_seconds:.2f}"
        without = r.s_per_gib_without_tail
        rows.append(
            head
            + [
                f"{r.log_bytes / MiB:,.1f}",
                cached,
                f"{r.load_seconds:.2f}",
                tail,
                f"{r.start_seconds:.2f}",
                f"{r.s_per_gib:.2f}",
                "?" if without is None else f"{without:.2f}",
                f"{r.mb_per_s:,.1f}",
                f"{r.crc_from:,}",
                f"{r.messages_scanned:,}",
                f"{r.redispatched_messages:,}",
                f"{r.shutdown_seconds:.2f}",
            ]
            + ([f"ERROR {r.error}"] if r.error else [])
        )
    for line in format_table(RECOVERY_COLUMNS, rows, left=2):
        print(line)
    segment = built.config.mapped_file_size_commit_log
    segments = max(1, -(-built.end_offset // segment))
    unused = segments * segment - built.end_offset
    print(
        f"  {built.messages:,} messages in {segments} segment(s) of {size_label(segment)},"
        f" {unused / MiB:,.0f} MiB unused"
        " in the last; tail s = time in store.commitlog_scan.last_nonzero_end (the unused tail's scan), part of load s"
    )
    print(
        "  w/o tail = s/GiB without tail s; cached MiB = the store's files in the page cache at load (fincore);"
        " close s = shutdown() (flushes; not in s/GiB)"
    )
    print(
        "  normal recovery CRC-checks from the flushed offset's segment, at most 3 segments back:"
        " its s/GiB holds only while the log fits in 3 segments"
    )
    print()


def print_profiles(profiler: Profiler) -> None:
    if not profiler.sections:
        return
    print(f"Profiles (cProfile, top {PROFILE_TOP} functions by own time; these runs' figures include its overhead)")
    for name, (total, rows) in profiler.sections.items():
        print(f"  {name}: {total:.2f} s profiled")
        print(f"    {'own s':>7} {'own %':>6} {'cum s':>7} {'calls':>10}  function")
        for row in rows:
            share = row.own_s / total * 100 if total else 0.0
            print(f"    {row.own_s:7.3f} {share:5.1f}% {row.cumulative_s:7.3f} {row.calls:10,}  {row.where}")
    print()


def write_json(path: Path, document: dict) -> None:
    path.write_text(json.dumps(document, indent=2, default=str) + "\n")


# -- main --------------------------------------------------------------------------------------


def make_run_dir(args: argparse.Namespace) -> Path:
    parent = args.dir if args.dir is not None else default_parent_dir()
    parent.mkdir(parents=True, exist_ok=True)
    # Hidden when it lands inside the repository, so a crashed run does not look like source.
    prefix = ".store2-bench-" if parent.resolve() == REPO_ROOT else "rocketstore-bench2-"
    return Path(tempfile.mkdtemp(prefix=prefix, dir=parent))


def main(argv: Sequence[str] | None = None) -> int:
    began = time.monotonic()
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    run_dir = make_run_dir(args)
    profiler = Profiler(args.profile)
    builds: list[Built] = []
    dispatch: list[DispatchResult] = []
    reads: list[ReadResult] = []
    recovery: list[RecoveryResult] = []
    reads_open_s: float | None = None
    recovery_store: Built | None = None
    failed = False
    try:
        check_free_space(run_dir, args)
        env = environment(run_dir)
        print_config(env, args)
        sys.stdout.flush()
        progress(f"store_read_bench: {','.join(args.sections)} in {run_dir} ({env['filesystem']})")
        if "dispatch" in args.sections or "reads" in args.sections:
            root = run_dir / "workload"
            # The workload store's own dispatch is not measured: no IndexFile to build meanwhile.
            workload = build_store(
                "workload store",
                root,
                store_config(root, args, index=False),
                args.body_size,
                args.messages,
                1 << 62,
                args.seconds,
            )
            builds.append(workload)
            if "dispatch" in args.sections:
                dispatch = run_all_dispatch(workload, args, run_dir, profiler)
            if "reads" in args.sections:
                reads, reads_open_s = run_all_reads(workload, args.seconds, profiler)
            shutil.rmtree(root, ignore_errors=True)
        if "recovery" in args.sections:
            root = run_dir / "recovery"
            recovery_store = build_store(
                "recovery store",
                root,
                store_config(root, args),
                args.recovery_body_size,
                args.recovery_bytes // args.recovery_body_size + 1,
                args.recovery_bytes,
                args.seconds,
            )
            builds.append(recovery_store)
            recovery = run_all_recovery(recovery_store, args, profiler)
    except BenchError as exc:
        progress(f"store_read_bench: ERROR {exc}")
        failed = True
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    print_builds(builds, reads_open_s)
    if dispatch:
        print_dispatch(dispatch)
    if reads:
        print_reads(reads)
    if recovery and recovery_store is not None:
        print_recovery(recovery, recovery_store)
    print_profiles(profiler)
    elapsed = time.monotonic() - began
    print(f"Finished in {elapsed:.1f} s")
    if args.json is not None:
        document = {
            "environment": env,
            "options": {
                "quick": args.quick,
                "sections": list(args.sections),
                "messages": args.messages,
                "body_size": args.body_size,
                "recovery_bytes": args.recovery_bytes,
                "recovery_body_size": args.recovery_body_size,
                "segment_size": args.segment_size,
                "seconds": args.seconds,
                "trials": args.trials,
                "cold": not args.no_cold,
                "profile": args.profile,
            },
            "stores": [
                dataclasses.asdict(b) | {"root": str(b.root), "config": None, "record_size": b.record_size}
                for b in builds
            ],
            "dispatch": [
                dataclasses.asdict(r) | {"msgs_per_s": r.msgs_per_s, "mb_per_s": r.mb_per_s, "us_per_msg": r.us_per_msg}
                for r in dispatch
            ],
            "reads": [
                dataclasses.asdict(r)
                | {"msgs_per_s": r.msgs_per_s, "mb_per_s": r.mb_per_s, "units_per_s": r.units_per_s}
                for r in reads
            ],
            "reads_store_open_seconds": reads_open_s,
            "recovery": [
                dataclasses.asdict(r)
                | {
                    "total_seconds": r.total_seconds,
                    "s_per_gib": r.s_per_gib,
                    "s_per_gib_without_tail": r.s_per_gib_without_tail,
                    "mb_per_s": r.mb_per_s,
                }
                for r in recovery
            ],
            "profiles": {
                name: {"total_seconds": total, "top": [dataclasses.asdict(row) for row in rows]}
                for name, (total, rows) in profiler.sections.items()
            },
            "elapsed_seconds": elapsed,
        }
        write_json(args.json, document)
        print(f"JSON written to {args.json}")
    errors = failed or any(r.error for r in dispatch) or any(r.error for r in reads) or any(r.error for r in recovery)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
