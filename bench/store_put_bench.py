"""Store put benchmark: throughput and latency of `MessageStore` puts, next to the disk's raw limits.

What it measures
    Every cell of the matrix
        flush type  ASYNC_FLUSH, SYNC_FLUSH
      x body        128 B, 1 KiB, 16 KiB
      x putters     1, 16, 64 threads putting at once (each to its own queue)
      x batch       1 (`put_message`) or 32 (`put_messages`, 32 messages to one queue)
    runs on a new store in its own temporary directory, prefilled with --prefill bytes (64 MiB by
    default: past the 32 MiB where readahead once made every small append write 2 MiB) before it
    is timed, and reports disk bytes written per message (/proc/diskstats), messages/s, MB/s of encoded
    records written (the sum of `wrote_bytes`; MB = 10^6 bytes), latency p50/p99 of one put call in
    ms, the count of non-PUT_OK results, and how many fdatasync calls the store made in the window.
    A cell ends after --seconds, --max-messages or --max-bytes, whichever comes first; before it,
    every putter warms up with a few untimed puts, then all start together on a barrier.

    In the same run, with plain os calls on a file in the same directory, the disk's raw limits:
    4 KiB pwrite + fdatasync latency, 1 KiB copied into a mapped file + fdatasync (the store's own
    way of writing), sequential 1 MiB writes each followed by fdatasync (both as
    appends that grow the file and inside a preallocated file, as the store's segments are), and
    after the matrix, writes of the same size as each 64-putter SYNC_FLUSH cell's put calls with an
    fdatasync each (what one fsync per put would cost). Each raw figure is the median of a few
    trials, printed with the spread: a shared virtual disk swings by 2-4x from second to second.
    The store's figures are printed as ratios to these, and the two performance targets are
    checked (PASS/MISS; nothing is asserted).

How to run (from the repository root)
    .venv/bin/python -m bench.store_put_bench                 # full matrix, 36 cells, about 2 minutes
    .venv/bin/python -m bench.store_put_bench --quick         # smoke run: 1 KiB, putters 1 and 16, 0.5 s cells
    .venv/bin/python -m bench.store_put_bench --only SYNC_FLUSH,p64 --json sync64.json
    .venv/bin/python -m bench.store_put_bench --help

Progress goes to stderr as cells complete; the configuration and the figures go to stdout. The
store files go under --dir (default: a temporary directory on the repository's filesystem, never
tmpfs) and are deleted at the end.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import math
import mmap
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from _typeshed import FileDescriptorLike

from bench.common import (
    MB,
    REPO_ROOT,
    GiB,
    KiB,
    MiB,
    default_parent_dir,
    environment,
    parse_size,
    print_environment,
    progress,
    size_label,
)
from store import BrokerRole, FlushDiskType, Message, MessageStore, PutMessageResult, PutMessageStatus, StoreConfig

FLUSH_TYPES = ("ASYNC_FLUSH", "SYNC_FLUSH")
BODY_SIZES = (128, 1024, 16 * 1024)
PUTTERS = (1, 16, 64)
BATCHES = (1, 32)
TOPIC = "BenchTopic"
PROPERTIES = {"TAGS": "bench"}

ASYNC_TARGET_MSGS = 100_000  # target (b): in-process ASYNC_FLUSH puts of 128 B
SYNC_TARGET_SHARE = 0.5  # target (a): share of raw sequential write-with-fsync bandwidth

# A put waits at most syncFlushTimeout (5 s) plus a grace second; a cell that outlives its bound
# by more than this is reported as hung instead of waited for.
JOIN_GRACE_S = 15.0
BARRIER_TIMEOUT_S = 60.0


# -- options -----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Profile:
    """What --quick changes; explicit options override it."""

    bodies: tuple[int, ...]
    putters: tuple[int, ...]
    seconds: float
    max_messages: int
    warmup_seconds: float
    fsync_rounds: int
    seq_bytes: int
    raw_seconds: float  # time bound of one raw trial
    raw_trials: int


FULL = Profile(BODY_SIZES, PUTTERS, 2.0, 500_000, 0.25, 400, 256 * MiB, 4.0, 5)
QUICK = Profile((1024,), (1, 16), 0.5, 100_000, 0.1, 150, 64 * MiB, 1.0, 2)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.store_put_bench",
        description="Measure MessageStore put throughput and latency against the disk's raw limits.",
    )
    parser.add_argument(
        "--quick", action="store_true", help="reduced matrix for a smoke run (1 KiB, putters 1 and 16, 0.5 s cells)"
    )
    parser.add_argument("--seconds", type=float, help="time bound of one cell (default 2.0; 0.5 with --quick)")
    parser.add_argument(
        "--max-messages", type=int, help="message bound of one cell (default 500000; 100000 with --quick)"
    )
    parser.add_argument(
        "--max-bytes", type=parse_size, default=512 * MiB, help="bytes bound of one cell (default 512MiB)"
    )
    parser.add_argument(
        "--warmup", type=float, help="untimed warm-up per cell in seconds (default 0.25; 0.1 with --quick)"
    )
    parser.add_argument(
        "--dir", type=Path, help="parent of the run's temporary directory (default: on the repository's filesystem)"
    )
    parser.add_argument("--segment-size", type=parse_size, default=GiB, help="CommitLog segment size (default 1GiB)")
    parser.add_argument(
        "--prefill",
        type=parse_size,
        default=64 * MiB,
        help="CommitLog bytes written (and flushed) into each cell's store before it is timed, so the timed puts "
        "land deep in a segment, as on a broker that has run a while (default 64MiB; 0: a fresh store)",
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the results as JSON to PATH")
    parser.add_argument(
        "--only",
        help="run only cells having every listed tag, e.g. 'SYNC_FLUSH,p64' or 'ASYNC,128B,p1,b1' "
        "(tags: ASYNC_FLUSH SYNC_FLUSH ASYNC SYNC 128B 1KiB 16KiB p1 p16 p64 b1 b32)",
    )
    args = parser.parse_args(argv)
    profile = QUICK if args.quick else FULL
    args.profile = profile
    args.seconds = profile.seconds if args.seconds is None else args.seconds
    args.max_messages = profile.max_messages if args.max_messages is None else args.max_messages
    args.warmup = profile.warmup_seconds if args.warmup is None else args.warmup
    if args.seconds <= 0 or args.max_messages <= 0 or args.max_bytes <= 0 or args.warmup < 0:
        parser.error("--seconds, --max-messages and --max-bytes must be positive, --warmup not negative")
    args.only_tags = _parse_only(parser, args.only)
    return args


# -- the matrix ----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Cell:
    flush: str
    body: int
    putters: int
    batch: int

    @property
    def name(self) -> str:
        return f"{self.flush} {size_label(self.body)} p{self.putters} b{self.batch}"

    @property
    def tags(self) -> frozenset[str]:
        short = self.flush.split("_")[0]
        return frozenset(
            t.lower() for t in (self.flush, short, size_label(self.body), f"p{self.putters}", f"b{self.batch}")
        )


ALL_TAGS = frozenset().union(
    *(Cell(f, b, p, n).tags for f in FLUSH_TYPES for b in BODY_SIZES for p in PUTTERS for n in BATCHES)
)


def _parse_only(parser: argparse.ArgumentParser, text: str | None) -> frozenset[str]:
    if not text:
        return frozenset()
    tags = frozenset(t.lower() for t in text.replace(",", " ").split())
    unknown = tags - ALL_TAGS
    if unknown:
        parser.error(f"--only: unknown tag(s) {', '.join(sorted(unknown))}")
    return tags


def build_matrix(args: argparse.Namespace) -> list[Cell]:
    cells = [
        Cell(flush, body, putters, batch)
        for flush in FLUSH_TYPES
        for body in args.profile.bodies
        for putters in args.profile.putters
        for batch in BATCHES
    ]
    # An explicit --only may name cells outside the quick profile; look in the full matrix then.
    if args.only_tags:
        pool = (
            cells
            if any(args.only_tags <= c.tags for c in cells)
            else [Cell(f, b, p, n) for f in FLUSH_TYPES for b in BODY_SIZES for p in PUTTERS for n in BATCHES]
        )
        cells = [c for c in pool if args.only_tags <= c.tags]
    return cells


# -- environment -------------------------------------------------------------------------------


def check_free_space(run_dir: Path, args: argparse.Namespace) -> None:
    # A cell holds its first segment and the one the allocator prepares, both fully reserved.
    need = 2 * args.segment_size + args.max_bytes + args.profile.seq_bytes + args.prefill
    stat = os.statvfs(run_dir)
    free = stat.f_bavail * stat.f_frsize
    if free < need:
        raise SystemExit(
            f"store_put_bench: {run_dir} has {free / GiB:.1f} GiB free; a cell needs about {need / GiB:.1f} GiB"
        )


# -- raw disk limits ---------------------------------------------------------------------------


@dataclasses.dataclass
class RawRun:
    """Rounds of one pwrite (or, `mapped`, one copy into a shared mapping of the file, as the
    store's segments are written) of `chunk` bytes followed by one fdatasync."""

    label: str
    chunk: int
    preallocated: bool
    rounds: int
    total_bytes: int
    seconds: float
    p50_ms: float
    p99_ms: float
    trials_mb_per_s: list[float] = dataclasses.field(default_factory=list)
    samples_ns: list[int] = dataclasses.field(default_factory=list, repr=False)
    mapped: bool = False

    @property
    def mb_per_s(self) -> float:
        return self.total_bytes / self.seconds / MB if self.seconds else 0.0

    @property
    def ops_per_s(self) -> float:
        return self.rounds / self.seconds if self.seconds else 0.0


def _pwrite_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        offset += written
        view = view[written:]


def write_sync_rounds(
    directory: Path,
    label: str,
    chunk: int,
    max_rounds: int,
    max_seconds: float,
    *,
    preallocate: bool,
    mapped: bool = False,
) -> RawRun:
    """Sequential pwrite (or mapped copy) + fdatasync rounds on a fresh file, bounded by rounds
    and time. A mapped file is always preallocated: a mapping cannot grow its file."""
    path = directory / f"raw-{os.getpid()}-{time.monotonic_ns()}"
    fd = os.open(path, (os.O_RDWR if mapped else os.O_WRONLY) | os.O_CREAT | os.O_TRUNC, 0o644)
    mapping: mmap.mmap | None = None
    try:
        if preallocate or mapped:
            # As the store's segments: blocks reserved up front, so the timed loop does not grow the file.
            os.posix_fallocate(fd, 0, chunk * max_rounds)
            os.fsync(fd)
        if mapped:
            mapping = mmap.mmap(fd, chunk * max_rounds)
            mapping.madvise(mmap.MADV_RANDOM)  # as the store's segments (see store/mapped_file.py)
        data = os.urandom(chunk)
        lat = [0] * max_rounds
        clock = time.perf_counter_ns
        start = last = clock()
        deadline = start + int(max_seconds * 1e9)
        done = 0
        while done < max_rounds:
            if mapping is not None:
                mapping[done * chunk : (done + 1) * chunk] = data
            else:
                _pwrite_all(fd, data, done * chunk)
            os.fdatasync(fd)
            now = clock()
            lat[done] = now - last
            last = now
            done += 1
            if now >= deadline:
                break
    finally:
        if mapping is not None:
            mapping.close()
        os.close(fd)
        path.unlink(missing_ok=True)
    samples = sorted(lat[:done])
    p50, p99 = percentiles_ms(samples, (0.50, 0.99))
    return RawRun(
        label,
        chunk,
        preallocate or mapped,
        done,
        done * chunk,
        (last - start) / 1e9,
        p50,
        p99,
        samples_ns=samples,
        mapped=mapped,
    )


def combine_trials(trials: list[RawRun]) -> RawRun:
    """The median trial by bandwidth, with latency percentiles over every trial's rounds: a
    virtual disk's bandwidth swings by 2-3x from one second to the next, one trial misleads."""
    median = sorted(trials, key=lambda run: run.mb_per_s)[len(trials) // 2]
    p50, p99 = percentiles_ms(sorted(ns for run in trials for ns in run.samples_ns), (0.50, 0.99))
    return dataclasses.replace(
        median, p50_ms=p50, p99_ms=p99, trials_mb_per_s=[run.mb_per_s for run in trials], samples_ns=[]
    )


def measure_median(
    directory: Path, label: str, chunk: int, max_rounds: int, max_seconds: float, trials: int, *, preallocate: bool
) -> RawRun:
    runs = [
        write_sync_rounds(directory, label, chunk, max_rounds, max_seconds, preallocate=preallocate)
        for _ in range(trials)
    ]
    return combine_trials(runs)


def measure_raw_limits(run_dir: Path, profile: Profile) -> dict[str, RawRun]:
    os.sync()  # start from a quiet disk
    seq_rounds = max(1, profile.seq_bytes // MiB)
    # (label, chunk, rounds, preallocated, mapped)
    plan = {
        "fsync_append": ("4 KiB append + fdatasync", 4 * KiB, profile.fsync_rounds, False, False),
        "fsync_prealloc": (
            "4 KiB write into preallocated file + fdatasync",
            4 * KiB,
            profile.fsync_rounds,
            True,
            False,
        ),
        # The store writes through a mapping: does the copy (page faults, write-protection after
        # each fdatasync) cost more than a pwrite of the same bytes?
        "fsync_mapped": ("1 KiB copy into a mapped file + fdatasync", KiB, profile.fsync_rounds, True, True),
        "seq_append": ("1 MiB sequential appends, fdatasync each", MiB, seq_rounds, False, False),
        "seq_prealloc": (
            "1 MiB sequential writes into preallocated file, fdatasync each",
            MiB,
            seq_rounds,
            True,
            False,
        ),
    }
    # Trials interleave the kinds, so a slow spell of the disk does not land on one kind only.
    trials: dict[str, list[RawRun]] = {key: [] for key in plan}
    for _ in range(profile.raw_trials):
        for key, (label, chunk, rounds, prealloc, mapped) in plan.items():
            trials[key].append(
                write_sync_rounds(
                    run_dir, label, chunk, rounds, profile.raw_seconds, preallocate=prealloc, mapped=mapped
                )
            )
    raw = {key: combine_trials(runs) for key, runs in trials.items()}
    for run in raw.values():
        progress(f"raw: {describe_raw(run)}")
    return raw


def describe_raw(run: RawRun) -> str:
    spread = ""
    if len(run.trials_mb_per_s) > 1:
        each = ", ".join(f"{v:,.1f}" for v in run.trials_mb_per_s)
        spread = f", median of {len(run.trials_mb_per_s)} trials [{each} MB/s]"
    return (
        f"{run.label}: {run.mb_per_s:,.1f} MB/s, {run.ops_per_s:,.0f} writes/s, p50 {run.p50_ms:.3f} ms,"
        f" p99 {run.p99_ms:.3f} ms ({run.rounds} x {run.chunk:,} B in {run.seconds:.2f} s{spread})"
    )


# -- one cell ------------------------------------------------------------------------------------


class FsyncCounter:
    """Counts os.fdatasync calls while active by wrapping `os.fdatasync`, which the store looks up
    at each call. The wrapper adds well under a microsecond to a call that takes hundreds."""

    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.Lock()
        self._real: Callable[..., None] | None = None

    def __enter__(self) -> "FsyncCounter":
        real = self._real = os.fdatasync

        def counted(fd: FileDescriptorLike) -> None:
            with self._lock:
                self.count += 1
            return real(fd)

        os.fdatasync = counted
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._real is not None:
            os.fdatasync = self._real


@dataclasses.dataclass
class Putter:
    """One putter thread's pre-built work and, afterwards, what it measured."""

    put: Callable[[Any], PutMessageResult]
    arg: Any
    lat_ns: list[int]  # preallocated: one slot per allowed call
    byte_budget: int
    calls: int = 0
    wrote: int = 0
    bad: list[PutMessageStatus] = dataclasses.field(default_factory=list)
    start_ns: int = 0
    end_ns: int = 0
    stop: str = ""
    error: BaseException | None = None


def make_putter(store: MessageStore, cell: Cell, index: int, body: bytes, args: argparse.Namespace) -> Putter:
    # Messages are immutable values, so one pre-built message (or batch list) serves every call.
    msg = Message(TOPIC, index, body, properties=PROPERTIES)
    put: Callable[[Any], PutMessageResult]
    arg: Any
    if cell.batch == 1:
        put, arg = store.put_message, msg
    else:
        put, arg = store.put_messages, [msg] * cell.batch
    quota = max(1, math.ceil(args.max_messages / cell.batch / cell.putters))
    return Putter(put, arg, [0] * quota, max(1, args.max_bytes // cell.putters))


def warm_up(putter: Putter, max_seconds: float, max_calls: int = 100) -> None:
    deadline = time.perf_counter() + max_seconds
    for _ in range(max_calls):
        if time.perf_counter() >= deadline:
            break
        putter.put(putter.arg)


def timed_loop(p: Putter, seconds: float) -> None:
    """The measured loop: one put, one clock read, a few integer ops per call."""
    put, arg, lat, budget = p.put, p.arg, p.lat_ns, p.byte_budget
    ok = PutMessageStatus.PUT_OK
    clock = time.perf_counter_ns
    quota = len(lat)
    bad = p.bad
    wrote = calls = 0
    stop = "count"
    start = last = clock()
    deadline = start + int(seconds * 1e9)
    while calls < quota:
        result = put(arg)
        now = clock()
        lat[calls] = now - last  # chained reads: one clock call per put
        last = now
        calls += 1
        wrote += result.wrote_bytes
        if result.status is not ok:
            bad.append(result.status)
        if now >= deadline:
            stop = "time"
            break
        if wrote >= budget:
            stop = "bytes"
            break
    p.start_ns, p.end_ns, p.calls, p.wrote, p.stop = start, last, calls, wrote, stop


def putter_main(p: Putter, barrier: threading.Barrier, args: argparse.Namespace) -> None:
    try:
        warm_up(p, args.warmup)
        barrier.wait()
        timed_loop(p, args.seconds)
    except BaseException as exc:  # reported with the cell; the other putters must not wait forever
        p.error = exc
        barrier.abort()


@dataclasses.dataclass
class CellResult:
    cell: Cell
    messages: int = 0
    calls: int = 0
    wrote_bytes: int = 0
    seconds: float = 0.0
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    max_ms: float = 0.0
    not_ok: int = 0
    not_ok_statuses: dict[str, int] = dataclasses.field(default_factory=dict)
    fsyncs: int = 0
    disk_bytes: int = -1  # written to the store's block device in the window (/proc/diskstats); -1: unknown
    stop: str = ""
    error: str = ""

    @property
    def disk_bytes_per_msg(self) -> float:
        return self.disk_bytes / self.messages if self.messages and self.disk_bytes >= 0 else -1.0

    @property
    def msgs_per_s(self) -> float:
        return self.messages / self.seconds if self.seconds else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.wrote_bytes / self.seconds / MB if self.seconds else 0.0

    @property
    def bytes_per_call(self) -> int:
        return round(self.wrote_bytes / self.calls) if self.calls else 0


def run_cell(cell: Cell, args: argparse.Namespace, run_dir: Path, fsyncs: FsyncCounter) -> CellResult:
    cell_dir = Path(tempfile.mkdtemp(prefix="cell-", dir=run_dir))
    try:
        config = StoreConfig(
            store_path_root_dir=str(cell_dir),
            flush_disk_type=FlushDiskType[cell.flush],
            broker_role=BrokerRole.ASYNC_MASTER,
            mapped_file_size_commit_log=args.segment_size,
        )
        body = os.urandom(cell.body)
        device = block_device_of(cell_dir)
        with MessageStore(config) as store:
            prefill(store, args.prefill)
            putters = [make_putter(store, cell, i, body, args) for i in range(cell.putters)]
            fsyncs_at_start = [fsyncs.count]
            disk_at_start = [sectors_written(device)]

            def mark_start() -> None:  # runs once, when every putter has warmed up
                fsyncs_at_start[0] = fsyncs.count
                disk_at_start[0] = sectors_written(device)

            barrier = threading.Barrier(cell.putters, action=mark_start, timeout=BARRIER_TIMEOUT_S)
            threads = [
                threading.Thread(target=putter_main, args=(p, barrier, args), name=f"putter-{i}", daemon=True)
                for i, p in enumerate(putters)
            ]
            for thread in threads:
                thread.start()
            hung = join_all(threads, args.warmup + args.seconds + JOIN_GRACE_S)
            # Read before shutdown: its final flush is not part of the window.
            fsync_calls = fsyncs.count - fsyncs_at_start[0]
            sectors = sectors_written(device)
        result = summarise(cell, putters, fsync_calls, hung)
        if sectors >= 0 and disk_at_start[0] >= 0:
            result.disk_bytes = (sectors - disk_at_start[0]) * 512
        return result
    finally:
        shutil.rmtree(cell_dir, ignore_errors=True)
        os.sync()  # let the next cell start from a quiet disk


PREFILL_BATCH = 64
PREFILL_BODY = 16 * KiB


def prefill(store: MessageStore, size: int) -> None:
    """Write about `size` bytes of records to a queue no putter uses, and flush them: the cell's
    puts then append deep in a segment, where a fresh store's benchmark would never reach."""
    body = os.urandom(PREFILL_BODY)
    batch = [Message("BenchPrefill", 0, body) for _ in range(PREFILL_BATCH)]
    while store.max_offset < size:
        result = store.put_messages(batch)
        if result.status is not PutMessageStatus.PUT_OK:
            raise RuntimeError(f"prefilling the store failed: {result.status.name} {result.reason}")
    if not store.wait_flushed(store.max_offset, 60):
        raise RuntimeError("the prefilled store did not flush within 60 s")
    os.sync()


def block_device_of(path: Path) -> str:
    """The name /proc/diskstats gives the block device holding `path` ("" when not found)."""
    dev = os.stat(path).st_dev
    wanted = f"{os.major(dev)} {os.minor(dev)}"
    try:
        for line in Path("/proc/diskstats").read_text().splitlines():
            fields = line.split()
            if f"{fields[0]} {fields[1]}" == wanted:
                return fields[2]
    except OSError:
        pass
    return ""


def sectors_written(device: str) -> int:
    """512-byte sectors written to `device` since boot, all processes together; -1: unknown."""
    if not device:
        return -1
    try:
        for line in Path("/proc/diskstats").read_text().splitlines():
            fields = line.split()
            if fields[2] == device:
                return int(fields[9])
    except (OSError, IndexError, ValueError):
        pass
    return -1


def join_all(threads: list[threading.Thread], limit_s: float) -> int:
    """Join every thread within one shared time limit; return how many are still running."""
    deadline = time.monotonic() + limit_s
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return sum(thread.is_alive() for thread in threads)


def percentiles_ms(sorted_ns: list[int], qs: Sequence[float]) -> list[float]:
    """Nearest-rank percentiles of sorted nanosecond samples, in ms."""
    if not sorted_ns:
        return [0.0 for _ in qs]
    n = len(sorted_ns)
    return [sorted_ns[min(n - 1, max(0, math.ceil(q * n) - 1))] / 1e6 for q in qs]


def summarise(cell: Cell, putters: list[Putter], fsync_calls: int, hung: int) -> CellResult:
    # A broken barrier only echoes another putter's failure; name the cause when there is one.
    errors = sorted(
        (p.error for p in putters if p.error is not None), key=lambda e: isinstance(e, threading.BrokenBarrierError)
    )
    if hung or errors:
        first = errors[0] if errors else None
        reason = (
            f"{hung} putter(s) still running after the cell's limit" if hung else f"{type(first).__name__}: {first}"
        )
        return CellResult(cell, error=reason)
    samples = sorted(ns for p in putters for ns in p.lat_ns[: p.calls])
    p50, p99, worst = percentiles_ms(samples, (0.50, 0.99, 1.0))
    bad = collections.Counter(status.name for p in putters for status in p.bad)
    calls = sum(p.calls for p in putters)
    return CellResult(
        cell=cell,
        messages=calls * cell.batch,
        calls=calls,
        wrote_bytes=sum(p.wrote for p in putters),
        seconds=(max(p.end_ns for p in putters) - min(p.start_ns for p in putters)) / 1e9,
        p50_ms=p50,
        p99_ms=p99,
        max_ms=worst,
        not_ok=sum(bad.values()),
        not_ok_statuses=dict(bad),
        fsyncs=fsync_calls,
        stop=collections.Counter(p.stop for p in putters).most_common(1)[0][0],
    )


def describe_cell(r: CellResult) -> str:
    if r.error:
        return f"{r.cell.name}: ERROR {r.error}"
    disk = f", disk {r.disk_bytes_per_msg:,.0f} B/msg" if r.disk_bytes_per_msg >= 0 else ""
    return (
        f"{r.cell.name}: {r.msgs_per_s:,.0f} msgs/s, {r.mb_per_s:,.1f} MB/s, p50 {r.p50_ms:.3f} ms, "
        f"p99 {r.p99_ms:.3f} ms, not-OK {r.not_ok}{disk} ({r.seconds:.2f} s, stop: {r.stop})"
    )


def run_matrix(cells: list[Cell], args: argparse.Namespace, run_dir: Path) -> list[CellResult]:
    results = []
    with FsyncCounter() as fsyncs:
        for n, cell in enumerate(cells, 1):
            result = run_cell(cell, args, run_dir, fsyncs)
            results.append(result)
            progress(f"[{n:>2}/{len(cells)}] {describe_cell(result)}")
    return results


def same_size_raw(results: list[CellResult], run_dir: Path, profile: Profile) -> list[tuple[CellResult, RawRun]]:
    """For each 64-putter SYNC_FLUSH cell: writes of its average put size, one fdatasync each."""
    pairs = []
    for r in results:
        if r.cell.flush == "SYNC_FLUSH" and r.cell.putters == 64 and r.calls:
            label = f"{r.bytes_per_call:,} B appends (as {r.cell.name} puts), fdatasync each"
            raw = measure_median(run_dir, label, r.bytes_per_call, 4000, profile.raw_seconds / 8, 3, preallocate=False)
            progress(f"raw: {describe_raw(raw)}")
            pairs.append((r, raw))
    return pairs


# -- report ------------------------------------------------------------------------------------


def find(results: list[CellResult], name: str) -> CellResult | None:
    return next((r for r in results if r.cell.name == name and not r.error), None)


def print_config(env: dict[str, str], args: argparse.Namespace, cells: list[Cell]) -> None:
    p = args.profile
    print_environment(
        "RocketStore store put benchmark (bench/store_put_bench.py)",
        env,
        ("started", "git", "python", "machine", "dir", "filesystem"),
        12,
    )
    if env["fstype"] in ("tmpfs", "ramfs"):
        print("  WARNING      the directory is in memory: fsync figures say nothing about a disk")
    print(
        f"  profile      {'quick' if args.quick else 'full'}"
        f"{', only ' + args.only if args.only else ''}: {len(cells)} cells"
    )
    print(
        f"  matrix       flush {','.join(FLUSH_TYPES)} x body {','.join(size_label(b) for b in p.bodies)}"
        f" x putters {','.join(map(str, p.putters))} x batch {','.join(map(str, BATCHES))}"
    )
    print(
        f"  cell bound   {args.seconds:g} s or {args.max_messages:,} messages or {size_label(args.max_bytes)} written,"
        f" whichever first; untimed warm-up up to {args.warmup:g} s / 100 calls per putter"
    )
    print(
        f"  store        new per cell, prefilled with {size_label(args.prefill)} (flushed) before it is timed,"
        f" broker_role ASYNC_MASTER, segment {size_label(args.segment_size)},"
        " other StoreConfig defaults; putter i puts to queue i"
    )
    print(f"  message      topic {TOPIC}, properties {PROPERTIES}, random body; pre-built, reused every call")
    print("  units        MB = 10^6 bytes of encoded records (sum of wrote_bytes); latency per put call;")
    print("               fsyncs = os.fdatasync calls in the window (counted by wrapping os.fdatasync)")
    print("               disk B/msg = bytes written to the store's block device in the window (/proc/diskstats,")
    print("               every process on the machine) per message")
    print()


def print_raw(raw: dict[str, RawRun]) -> None:
    print("Raw disk limits (plain os calls on a file in the same directory)")
    for run in raw.values():
        print(f"  {describe_raw(run)}")
    print()


TABLE_COLUMNS = (
    ("flush", 11),
    ("body", 5),
    ("putters", 7),
    ("batch", 5),
    ("msgs/s", 10),
    ("MB/s", 8),
    ("p50 ms", 8),
    ("p99 ms", 8),
    ("not-OK", 6),
    ("fsyncs", 7),
    ("msgs/fsync", 10),
    ("disk B/msg", 10),
    ("xraw MB/s", 9),
    ("stop", 5),
)


def table_row(r: CellResult, raw_seq: RawRun) -> list[str]:
    c = r.cell
    head = [c.flush, size_label(c.body), str(c.putters), str(c.batch)]
    if r.error:
        return head + [f"ERROR {r.error}"]
    per_fsync = f"{r.messages / r.fsyncs:,.1f}" if r.fsyncs else "-"
    ratio = f"{r.mb_per_s / raw_seq.mb_per_s:.3f}" if c.flush == "SYNC_FLUSH" and raw_seq.mb_per_s else "-"
    return head + [
        f"{r.msgs_per_s:,.0f}",
        f"{r.mb_per_s:,.2f}",
        f"{r.p50_ms:.3f}",
        f"{r.p99_ms:.3f}",
        str(r.not_ok),
        str(r.fsyncs),
        per_fsync,
        f"{r.disk_bytes_per_msg:,.0f}" if r.disk_bytes_per_msg >= 0 else "-",
        ratio,
        r.stop,
    ]


def format_row(cols: list[str]) -> str:
    """Fixed-width columns (text left, figures right) so runs line up; extra text (an error) trails."""
    last = len(TABLE_COLUMNS) - 1
    cells = [
        col.ljust(w) if i < 2 or i == last else col.rjust(w) for i, (col, (_, w)) in enumerate(zip(cols, TABLE_COLUMNS))
    ]
    return ("  " + "  ".join(cells + cols[len(TABLE_COLUMNS) :])).rstrip()


def print_table(results: list[CellResult], raw: dict[str, RawRun]) -> None:
    seq = raw["seq_append"]
    print(
        "Store puts (xraw MB/s = SYNC_FLUSH MB/s / raw 1 MiB sequential appends with fdatasync,"
        f" {seq.mb_per_s:,.1f} MB/s)"
    )
    print(format_row([name for name, _ in TABLE_COLUMNS]))
    for r in results:
        print(format_row(table_row(r, seq)))
    for r in results:
        if r.not_ok_statuses:
            print(f"  not-OK statuses in {r.cell.name}: {r.not_ok_statuses}")
    print()


def print_ratios(results: list[CellResult], raw: dict[str, RawRun], same_size: list[tuple[CellResult, RawRun]]) -> None:
    fsync = raw["fsync_append"]
    print(
        "Single SYNC_FLUSH put latency / raw 4 KiB append + fdatasync"
        f" (p50 {fsync.p50_ms:.3f} ms, p99 {fsync.p99_ms:.3f} ms)"
    )
    singles = [
        r for r in results if r.cell.flush == "SYNC_FLUSH" and r.cell.putters == 1 and r.cell.batch == 1 and not r.error
    ]
    for r in singles:
        print(
            f"  {r.cell.name:<24} p50 {r.p50_ms:.3f} ms = {r.p50_ms / fsync.p50_ms:.2f} x raw,"
            f"  p99 {r.p99_ms:.3f} ms = {r.p99_ms / fsync.p99_ms:.2f} x raw"
        )
    if not singles:
        print("  (no SYNC_FLUSH single-putter batch-1 cell in this run)")
    print()
    print("64-putter SYNC_FLUSH cells / raw appends of the same size as their puts, one fdatasync each")
    for r, run in same_size:
        print(
            f"  {r.cell.name:<24} {r.mb_per_s:8,.2f} MB/s {r.calls / r.seconds:9,.0f} calls/s"
            f"  vs raw {run.mb_per_s:8,.2f} MB/s {run.ops_per_s:9,.0f} writes/s ({run.chunk:,} B each)"
            f"  = {r.mb_per_s / run.mb_per_s if run.mb_per_s else 0:.2f} x"
        )
    if not same_size:
        print("  (no 64-putter SYNC_FLUSH cell in this run)")
    print()


@dataclasses.dataclass
class Target:
    label: str
    cell: str
    value: float | None
    threshold: float
    unit: str

    @property
    def verdict(self) -> str:
        if self.value is None:
            return "NOT RUN"
        return "PASS" if self.value >= self.threshold else "MISS"


def evaluate_targets(results: list[CellResult], raw: dict[str, RawRun]) -> list[Target]:
    seq = raw["seq_append"].mb_per_s
    targets = []
    for batch in BATCHES:
        name = f"SYNC_FLUSH 1KiB p64 b{batch}"
        r = find(results, name)
        targets.append(
            Target(
                "(a) SYNC_FLUSH 64 putters 1 KiB >= half raw sequential write-with-fsync",
                name,
                r.mb_per_s if r else None,
                SYNC_TARGET_SHARE * seq,
                "MB/s",
            )
        )
    for batch in BATCHES:
        name = f"ASYNC_FLUSH 128B p1 b{batch}"
        r = find(results, name)
        targets.append(
            Target(
                "(b) in-process ASYNC_FLUSH 128 B puts >= 100k msgs/s",
                name,
                r.msgs_per_s if r else None,
                ASYNC_TARGET_MSGS,
                "msgs/s",
            )
        )
    return targets


def print_targets(targets: list[Target]) -> None:
    print("Targets (from the issue)")
    print(
        f"  (a) SYNC_FLUSH, 64 putters, 1 KiB: at least {SYNC_TARGET_SHARE:g} x raw 1 MiB sequential appends"
        " with fdatasync"
    )
    print(f"  (b) in-process ASYNC_FLUSH puts of 128 B: at least {ASYNC_TARGET_MSGS:,} msgs/s")
    for t in targets:
        figure = "not in this run" if t.value is None else f"{t.value:,.1f} {t.unit}"
        print(f"  {t.verdict:<7} {t.label[:3]} {t.cell:<24} {figure:>18}  (target >= {t.threshold:,.1f} {t.unit})")
    print()


def write_json(
    path: Path,
    env: dict[str, str],
    args: argparse.Namespace,
    raw: dict[str, RawRun],
    results: list[CellResult],
    same_size: list[tuple[CellResult, RawRun]],
    targets: list[Target],
    elapsed_s: float,
) -> None:
    def raw_dict(run: RawRun) -> dict:
        return dataclasses.asdict(run, dict_factory=lambda kv: {k: v for k, v in kv if k != "samples_ns"}) | {
            "mb_per_s": run.mb_per_s,
            "ops_per_s": run.ops_per_s,
        }

    def cell_dict(r: CellResult) -> dict:
        data = dataclasses.asdict(r)
        data["cell"] = dataclasses.asdict(r.cell) | {"name": r.cell.name}
        return data | {"msgs_per_s": r.msgs_per_s, "mb_per_s": r.mb_per_s, "bytes_per_call": r.bytes_per_call}

    document = {
        "environment": env,
        "options": {
            "quick": args.quick,
            "seconds": args.seconds,
            "max_messages": args.max_messages,
            "max_bytes": args.max_bytes,
            "warmup_seconds": args.warmup,
            "segment_size": args.segment_size,
            "prefill": args.prefill,
            "only": args.only,
        },
        "raw": {key: raw_dict(run) for key, run in raw.items()},
        "cells": [cell_dict(r) for r in results],
        "same_size_raw": [{"cell": r.cell.name, "raw": raw_dict(run)} for r, run in same_size],
        "targets": [dataclasses.asdict(t) | {"verdict": t.verdict} for t in targets],
        "elapsed_seconds": elapsed_s,
    }
    path.write_text(json.dumps(document, indent=2) + "\n")


# -- main --------------------------------------------------------------------------------------


def make_run_dir(args: argparse.Namespace) -> Path:
    parent = args.dir if args.dir is not None else default_parent_dir()
    parent.mkdir(parents=True, exist_ok=True)
    # Hidden when it lands inside the repository, so a crashed run does not look like source.
    prefix = ".store-bench-" if parent.resolve() == REPO_ROOT else "rocketstore-bench-"
    return Path(tempfile.mkdtemp(prefix=prefix, dir=parent))


def main(argv: Sequence[str] | None = None) -> int:
    began = time.monotonic()
    args = parse_args(argv)
    cells = build_matrix(args)
    if not cells:
        progress("store_put_bench: --only matches no cell")
        return 2
    run_dir = make_run_dir(args)
    try:
        check_free_space(run_dir, args)
        env = environment(run_dir)
        print_config(env, args, cells)
        sys.stdout.flush()
        progress(f"store_put_bench: {len(cells)} cells in {run_dir} ({env['filesystem']})")
        raw = measure_raw_limits(run_dir, args.profile)
        results = run_matrix(cells, args, run_dir)
        same_size = same_size_raw(results, run_dir, args.profile)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    targets = evaluate_targets(results, raw)
    print_raw(raw)
    print_table(results, raw)
    print_ratios(results, raw, same_size)
    print_targets(targets)
    elapsed = time.monotonic() - began
    print(f"Finished in {elapsed:.1f} s")
    if args.json is not None:
        write_json(args.json, env, args, raw, results, same_size, targets, elapsed)
        print(f"JSON written to {args.json}")
    return 1 if any(r.error for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
