"""Thread hand-offs per message on the put path (`python -m bench.put_switches`).

A local master and one slave (SYNC_MASTER + SYNC_FLUSH by default, shared secret, as
`bench.vs_redis` starts them), driven by `bench.vs_redis`'s producers over remoting or gRPC; each
round sends a fixed number of messages and prints, per message, the voluntary context switches
of each server process (every wait: a thread woken by another, a GIL wait, an `fdatasync`) and
its CPU time, beside the rate and p50. Voluntary switches count the hand-offs of the code path
itself; a busy machine changes them far less than it changes rates, so two commits compare on a
shared machine where their rates do not (run them in turn, a few rounds each).

`--threads` adds, per round, each server thread's CPU per message (the top ones of each
process, from /proc/PID/task), named as Python names them when `py-spy` is installed beside the
interpreter (`py-spy dump`; by thread id otherwise): where a process's CPU goes, thread by thread.
`--pids` prints the two brokers' pids before the rounds (to attach `py-spy record` or `perf
record`), `--set KEY=VALUE` gives both brokers a broker.conf setting (A/B of a setting in one tree),
`--slave-flush` the slave a flushDiskType of its own (SYNC_MASTER + ASYNC_FLUSH beside a SYNC_FLUSH
slave is the slave's round trip alone, the other half of SYNC/SYNC's wait).

`--gc` times each broker's cyclic-collector passes (a `sitecustomize` put on the brokers'
PYTHONPATH registers a `gc.callbacks` hook that logs each pass's wall-clock start, duration and
generation) and prints, per round, each broker's passes by generation with their total and
longest time, and how many of the round's slowest 1% of publishes were under way during one:
whether the collector is where the tail goes.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import context_switches, default_parent_dir, environment, load_average, percentile, progress
from bench.vs_redis import RocketStoreDriver, _cell, _cpu_ticks, run_cell
from harness.local_cluster import LocalCluster

HZ = os.sysconf("SC_CLK_TCK")  # the unit of /proc/PID/stat's CPU times


def parse_args(argv) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.put_switches", description=__doc__.splitlines()[0])
    p.add_argument("--transport", choices=("remoting", "grpc"), default="remoting")
    p.add_argument("--cells", default="1x1,8x1", help="comma list of CLIENTSxBATCH (default 1x1,8x1)")
    p.add_argument("--messages", type=int, default=2000, help="messages per round and cell (default 2000)")
    p.add_argument("--rounds", type=int, default=3, help="rounds per cell (default 3)")
    p.add_argument("--size", type=int, default=1024, help="body bytes (default 1024)")
    p.add_argument("--role", choices=("SYNC_MASTER", "ASYNC_MASTER"), default="SYNC_MASTER")
    p.add_argument("--flush", choices=("SYNC_FLUSH", "ASYNC_FLUSH"), default="SYNC_FLUSH")
    p.add_argument(
        "--slave-flush",
        choices=("SYNC_FLUSH", "ASYNC_FLUSH"),
        help="the slave's flushDiskType (default: --flush's)",
    )
    p.add_argument("--dir", type=Path, help="parent directory of the run (default: a disk-backed temp dir)")
    p.add_argument("--threads", action="store_true", help="print each server thread's CPU per message too")
    p.add_argument("--pids", action="store_true", help="print the master's and slave's pids (to attach a profiler)")
    p.add_argument("--gc", action="store_true", help="time the brokers' garbage-collector passes, per round")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker.conf setting for both brokers (repeatable), e.g. --set haTransferBatchSize=65536",
    )
    return p.parse_args(argv)


def _thread_ticks(pid: int) -> dict[int, int]:
    """utime + stime of each thread of `pid` (threads that ended meanwhile are left out)."""
    ticks = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            ticks[int(task.name)] = _cpu_ticks_of(task / "stat")
        except (OSError, ValueError, IndexError):
            continue
    return ticks


def _cpu_ticks_of(stat: Path) -> int:
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def _thread_names(pid: int) -> dict[int, str]:
    """Python's names of `pid`'s threads by thread id, from `py-spy dump` when it is installed
    beside this interpreter or on PATH; the kernel's (comm) otherwise."""
    names: dict[int, str] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            names[int(task.name)] = (task / "comm").read_text().strip()
        except OSError:
            continue
    py_spy = shutil.which("py-spy", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    if py_spy:
        try:
            dump = subprocess.run([py_spy, "dump", "-p", str(pid)], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            dump = ""
        for tid, name in re.findall(r'^Thread (?:0x[0-9A-Fa-f]+ )?\(?(\d+)\)?[^"]*"([^"]*)"', dump, re.M):
            names[int(tid)] = name
    return names


_GC_PROBE = """import gc, os, time

_log = open(os.path.join(os.path.dirname(__file__), "%d.log" % os.getpid()), "a", buffering=1)
_started = [0.0, 0.0]


def _timed(phase, info):
    if phase == "start":
        _started[:] = time.time(), time.perf_counter()
    else:
        _log.write("%.6f %.6f %d\\n" % (_started[0], time.perf_counter() - _started[1], info["generation"]))


gc.callbacks.append(_timed)
"""


def _install_gc_probe(directory: Path) -> None:
    """Brokers started from now on log their collector passes to `directory`/PID.log."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "sitecustomize.py").write_text(_GC_PROBE)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(directory), os.environ.get("PYTHONPATH")]))


def _gc_passes(directory: Path, pid: int, since: float, until: float) -> list[tuple[float, float, int]]:
    """(start, duration s, generation) of `pid`'s collector passes that began in [since, until]."""
    try:
        lines = (directory / f"{pid}.log").read_text().splitlines()
    except OSError:
        return []
    passes = [(float(a), float(d), int(g)) for a, d, g in (line.split() for line in lines if line.count(" ") == 2)]
    return [p for p in passes if since <= p[0] <= until]


def _print_gc(role: str, passes: list[tuple[float, float, int]], timeline: list[tuple[float, float]]) -> None:
    by_gen = [[d for _, d, g in passes if g == gen] for gen in range(3)]
    counts = ", ".join(
        f"gen{gen} {len(ds)} ({1e3 * sum(ds):.1f} ms, longest {1e3 * max(ds, default=0):.2f})"
        for gen, ds in enumerate(by_gen)
    )
    cut = percentile(sorted(ms for _, ms in timeline), 99)
    slowest = [(t, ms) for t, ms in timeline if ms >= cut]
    hit = sum(1 for t, ms in slowest if any(a < t + ms / 1000 and a + d > t for a, d, _ in passes))
    print(f"      {role} collector passes: {counts}; slowest 1% under way during one: {hit}/{len(slowest)}")


def _print_threads(role: str, before: dict[int, int], after: dict[int, int], names: dict[int, str], n: int) -> None:
    used = sorted(((after[t] - before.get(t, 0), t) for t in after), reverse=True)
    top = [f"{names.get(t, str(t))} {1e6 * d / HZ / n:.1f}" for d, t in used[:8] if d > 0]
    print(f"      {role} CPU us/msg by thread: " + ", ".join(top), flush=True)


async def _rounds(driver: RocketStoreDriver, args, cells: list[tuple[int, int]]) -> None:
    pids = driver.pids
    if args.pids:
        print(f"  pids         master {pids[0]}, slave {pids[1]}", flush=True)
    await run_cell(driver, args.size, 1, 1, 2, 300)  # warm-up: connections, segments, JIT-free caches
    names = [_thread_names(p) for p in pids] if args.threads else []
    for clients, batch in cells:
        for round_ in range(1, args.rounds + 1):
            switches = [context_switches(p, voluntary_only=True) for p in pids]
            ticks = [_cpu_ticks(p) for p in pids]
            threads = [_thread_ticks(p) for p in pids] if args.threads else []
            timeline: list[tuple[float, float]] = []
            since = time.time()
            r = await run_cell(driver, args.size, clients, batch, 60, args.messages, timeline)
            n = max(1, r.messages)
            per_msg = [
                (
                    (context_switches(p, voluntary_only=True) - s) / n,
                    1e6 * (_cpu_ticks(p) - t) / HZ / n,
                )
                for p, s, t in zip(pids, switches, ticks)
            ]
            errors = f"  errors {r.errors}" if r.errors else ""
            print(
                f"  {clients}x{batch} round {round_}: {r.messages:>6} msgs {r.msgs_per_s:>7,.0f} msgs/s"
                f"  p50 {r.p50_ms:5.2f} ms  p99 {r.p99_ms:6.2f} ms  voluntary switches /msg master"
                f" {per_msg[0][0]:5.1f} slave {per_msg[1][0]:5.1f}  CPU /msg master {per_msg[0][1]:5.0f} us"
                f" slave {per_msg[1][1]:5.0f} us  load {load_average()}{errors}",
                flush=True,
            )
            for role, pid, before, pid_names in zip(("master", "slave"), pids, threads, names):
                _print_threads(role, before, _thread_ticks(pid), pid_names, n)
            if args.gc:
                for role, pid in zip(("master", "slave"), pids):
                    _print_gc(role, _gc_passes(args.run_dir / "gc", pid, since, time.time()), timeline)


def main(argv=None) -> int:
    args = parse_args(argv)
    cells = [_cell(c) for c in args.cells.split(",")]
    run_dir = Path(tempfile.mkdtemp(prefix="put-switches-", dir=args.dir or default_parent_dir()))
    print("Thread hand-offs per message on the put path")
    for key, value in environment(run_dir).items():
        print(f"  {key:<12} {value}")
    print(
        f"  config       {args.role} + {args.flush}, one {args.slave_flush or args.flush} slave,"
        f" {args.transport}, {args.size} B bodies,"
        f" {args.messages} messages per round, {args.rounds} rounds per cell"
        + (f", settings {' '.join(args.set)}" if args.set else "")
    )
    args.run_dir = run_dir
    if args.gc:
        _install_gc_probe(run_dir / "gc")
    progress("starting RocketStore master + slave")
    cluster = LocalCluster(
        run_dir / "cluster",
        master_role=args.role,
        flush_disk_type=args.flush,
        settings={"remotingListenPort": "0", **dict(s.split("=", 1) for s in args.set)},
        slave_settings={"flushDiskType": args.slave_flush} if args.slave_flush else {},
    ).start()
    try:
        driver = RocketStoreDriver(cluster, f"rocketstore {args.transport}", args.transport)
        asyncio.run(_rounds(driver, args, cells))
    finally:
        cluster.stop()
        shutil.rmtree(run_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
