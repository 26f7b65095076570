"""One put's critical path, hop by hop, in syscalls (`python -m bench.put_timeline`).

What it measures: where the time of one synchronously replicated put goes, between the client, the
master and the slave, for RocketStore (a master and one slave, SYNC_MASTER + SYNC_FLUSH, the slave
SYNC_FLUSH too) and for its floor (`bench.front_end_floor`'s `replicated` mode: a master in Python
that keeps nothing and replicates over a `grpc.aio` stream to a floor slave that writes and
`fdatasync`s; with `--floor-mode replicated-work`, the same doing the broker's per-message work),
both with gRPC's EventEngine off in their processes, as the broker runs by default.

How: one remoting client in this process (`client.remoting.AsyncRemotingProducer`) sends 1 KiB
messages one after the other; after a warm-up, `perf record` records the syscall tracepoints of the
master, the slave and this process for `--seconds`, and `perf script` prints them. Each thread's role
is found by what it does (the master thread that reads the client's frame of over 1000 bytes is the
master's loop, the one that receives the slave's small report its poller; the slave thread that
receives the chunk is the slave's poller, the one that sends the report its loop), and each put is
cut into a cycle of markers, from the client's send to its receipt of the answer:

  c_send               the client sends the put (the syscall's entry)
  m_read               the master's loop has read it (exit)
  m_chunk              the master's loop sends the chunk to the slave (entry)
  s_recv               the slave has received the chunk (exit)
  s_poller_wakes_loop  the slave's poller wakes its loop (a 1-byte write), when they are two threads
  s_loop_wake          the slave's loop is awake (its 1-byte read)
  s_flush_request      the slave's loop hands the flush to a flush thread (futex), when it does
  s_fsync, s_fsync_end the slave's `fdatasync`, entry and exit
  s_flush_thread_wakes_loop, s_flushed_wake   the flush thread's wake-up of the loop, and the loop awake
  s_report             the slave sends its report of the flushed offset (entry)
  m_recv_report        the master has received it (exit)
  m_poller_wakes_loop, m_loop_wake   the master's poller wakes its loop, and the loop awake
  m_answer             the master's loop writes the answer (entry)
  c_recv               the client has read it (exit)

c_send, m_read, m_chunk, s_recv, s_fsync, s_fsync_end, s_report, m_recv_report, m_answer and c_recv
make a cycle complete; the others are optional (whether a slave flushes on its loop or on a flush
thread, whether a poller thread hands over to a loop, differs between the two systems and between
commits), and count where they are found in most cycles. Also the master's own `fdatasync` (m_fsync),
which runs beside the slave's round trip: where it starts after m_chunk and how long it lasts.

How to read it: per hop, the p50 and the mean in microseconds over the complete cycles, the broker
beside the floor, and the broker's p50 over the floor's. The required hops are the rows; below one,
indented, the finer hops a system's optional markers split it into ("-": that system has no such
hop). The round trip is the client's send to its receipt; the hops' p50s need not add up to it.
`perf` adds a few microseconds to every syscall on both sides, so compare the two columns rather
than the absolute times; the load average beside each system tells how busy the machine was.

Needs `perf` (Debian's linux-perf) with access to the syscall tracepoints: root, or
kernel.perf_event_paranoid at -1 and a readable tracefs. Refuses with a one-line error (exit
status 2) when perf is missing or cannot record.
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
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from bench.common import default_parent_dir, environment, load_average, percentile, print_environment, progress
from bench.front_end_floor import SLAVE_MODES
from bench.vs_redis import TOPIC, FloorProcess, _no_event_engine_env
from client.remoting import AsyncRemotingProducer
from harness.local_cluster import LocalCluster

SIZE = 1024
WARMUP_S = 2.0
# perf attaches to every thread of three processes before its `sleep` starts; past this much more
# than --seconds, it is stuck.
PERF_GRACE_S = 30.0
SYSCALLS = (
    "read",
    "write",
    "sendmsg",
    "recvmsg",
    "recvfrom",
    "sendto",
    "fdatasync",
    "futex",
    "epoll_pwait",
    "epoll_wait",
)

# A client's put frame and a chunk carrying it are above this; the slave's report below SMALL.
FRAME = 1000
SMALL = 300
ANSWER = (100, 1000)  # a SEND_MESSAGE_V2 answer's bytes
# How an asyncio loop reads and writes a socket, whichever its implementation uses.
READS = ("read", "recvfrom", "recvmsg")
WRITES = ("write", "sendto", "sendmsg")

REQUIRED = (
    "c_send",
    "m_read",
    "m_chunk",
    "s_recv",
    "s_fsync",
    "s_fsync_end",
    "s_report",
    "m_recv_report",
    "m_answer",
    "c_recv",
)
ORDER = (
    "c_send",
    "m_read",
    "m_chunk",
    "s_recv",
    "s_poller_wakes_loop",
    "s_loop_wake",
    "s_flush_request",
    "s_fsync",
    "s_fsync_end",
    "s_flush_thread_wakes_loop",
    "s_flushed_wake",
    "s_report",
    "m_recv_report",
    "m_poller_wakes_loop",
    "m_loop_wake",
    "m_answer",
    "c_recv",
)
# Markers taken when their syscall returns (the bytes are in); the others when it is entered.
AT_EXIT = frozenset({"m_read", "s_recv", "s_loop_wake", "s_flushed_wake", "m_recv_report", "m_loop_wake", "c_recv"})
# Only meaningful when the slave's fdatasync runs on another thread than its loop: on the loop, its
# futexes are GIL hand-offs and its 8-byte reads someone else's wake-ups.
FLUSH_THREAD = ("s_flush_request", "s_flush_thread_wakes_loop", "s_flushed_wake")


class PerfError(Exception):
    """perf is missing or could not record: the one line to print."""


# -- the parser (pure) ------------------------------------------------------------------------------


class Call(NamedTuple):
    """One syscall of one thread: entry and exit times in microseconds, the size it was asked
    for (count, size or len; None for others) and its return value (negative for an error)."""

    start: int
    end: int
    pid: int
    tid: int
    name: str
    size: int | None
    ret: int


_LINE = re.compile(r"^\s*.*?\s(\d+)/(\d+)\s+(\d+)\.(\d{6}):\s+syscalls:sys_(enter|exit)_(\w+):\s*(.*)$")
_SIZE = re.compile(r"\b(?:count|size|len): 0x([0-9a-f]+)")


def _microseconds(seconds: str, fraction: str) -> int:
    # Integers: perf prints microseconds, and differences of floats of ~1e10 us would not be exact.
    return int(seconds) * 1_000_000 + int(fraction)


def _signed(text: str) -> int:
    try:
        value = int(text.strip(), 16)
    except ValueError:
        return 0
    return value - (1 << 64) if value >= 1 << 63 else value


def parse_calls(lines: Iterable[str]) -> list[Call]:
    """`perf script -F comm,pid,tid,time,event,trace` lines to calls ordered by entry; an exit
    without its entry (recording began during the call) is left out."""
    entered: dict[int, tuple[str, int, int | None]] = {}
    calls = []
    for line in lines:
        m = _LINE.match(line)
        if m is None:
            continue
        pid, tid, seconds, fraction, kind, name, rest = m.groups()
        t = _microseconds(seconds, fraction)
        if kind == "enter":
            size = _SIZE.search(rest)
            entered[int(tid)] = (name, t, int(size.group(1), 16) if size else None)
            continue
        begun = entered.pop(int(tid), None)
        if begun is None or begun[0] != name:
            continue
        calls.append(Call(begun[1], t, int(pid), int(tid), name, begun[2], _signed(rest)))
    calls.sort()
    return calls


@dataclass(frozen=True)
class Roles:
    """The threads by what they do (None: not seen)."""

    master_loop: int | None
    master_poller: int | None
    slave_loop: int | None
    slave_poller: int | None


def _busiest(calls: Iterable[Call], pid: int, match: Callable[[Call], bool]) -> int | None:
    counts = Counter(c.tid for c in calls if c.pid == pid and match(c))
    return counts.most_common(1)[0][0] if counts else None


def find_roles(calls: Sequence[Call], master: int, slave: int) -> Roles:
    return Roles(
        master_loop=_busiest(calls, master, lambda c: c.name in READS and c.ret > FRAME),
        master_poller=_busiest(calls, master, lambda c: c.name == "recvmsg" and 0 < c.ret < SMALL),
        slave_loop=_busiest(calls, slave, lambda c: c.name == "sendmsg" and 0 < c.ret < SMALL),
        slave_poller=_busiest(calls, slave, lambda c: c.name == "recvmsg" and c.ret > FRAME),
    )


def _client_marker(c: Call) -> str | None:
    if c.name in WRITES and c.ret > SMALL:
        return "c_send"
    if c.name in READS and ANSWER[0] < c.ret < ANSWER[1]:
        return "c_recv"
    return None


def _is_wake(c: Call) -> bool:
    """A loop taking its wake-up: the byte of its self-pipe, or an eventfd's 8 bytes."""
    return (c.name == "recvfrom" and c.size == 1 and c.ret == 1) or (c.name == "read" and c.ret == 8)


def _master_marker(c: Call, roles: Roles) -> str | None:
    if c.name == "fdatasync":
        return "m_fsync"
    handed_over = roles.master_poller != roles.master_loop  # else no wake-up between them to time
    if c.tid == roles.master_loop:
        if c.name in READS and c.ret > FRAME:
            return "m_read"
        if c.name == "sendmsg" and c.ret > FRAME:
            return "m_chunk"
        if _is_wake(c) and handed_over:
            return "m_loop_wake"
        if c.name in WRITES and ANSWER[0] < c.ret < ANSWER[1]:
            return "m_answer"
    if c.tid == roles.master_poller:
        if c.name == "recvmsg" and 0 < c.ret < SMALL:
            return "m_recv_report"
        if c.name == "write" and c.ret == 1 and handed_over:
            return "m_poller_wakes_loop"
    return None


def _slave_marker(c: Call, roles: Roles, cycle: Mapping[str, int]) -> str | None:
    if c.name == "fdatasync":
        return "s_fsync"
    handed_over = roles.slave_poller != roles.slave_loop
    if c.tid == roles.slave_poller:
        if c.name == "recvmsg" and c.ret > FRAME:
            return "s_recv"
        if c.name == "write" and c.ret == 1 and handed_over:
            return "s_poller_wakes_loop"
    if c.tid == roles.slave_loop:
        if _is_wake(c):
            # Once flushed, the loop's wake-up is the flush thread's; before, the poller's.
            return "s_flushed_wake" if "s_fsync_end" in cycle else "s_loop_wake" if handed_over else None
        if c.name == "futex":
            return "s_flush_request"
        if c.name == "sendmsg" and 0 < c.ret < SMALL:
            return "s_report"
    elif c.name == "write" and c.ret == 8:
        return "s_flush_thread_wakes_loop"
    return None


def _takes(cycle: Mapping[str, int], marker: str) -> bool:
    """A marker counts once, after the last required marker before it and before anything later
    in the chain: the first such syscall after the step that causes it."""
    i = ORDER.index(marker)
    before = next(m for m in reversed(ORDER[:i]) if m in REQUIRED)
    return marker not in cycle and before in cycle and not any(m in cycle for m in ORDER[i + 1 :])


def _complete(cycle: dict[str, int], fsync_tid: int | None, roles: Roles) -> dict[str, float] | None:
    if not all(m in cycle for m in REQUIRED):
        return None
    if fsync_tid == roles.slave_loop:
        for m in FLUSH_THREAD:
            cycle.pop(m, None)
    return {m: float(t) for m, t in cycle.items()}


def parse_cycles(lines: Iterable[str], master: int, slave: int, client: int) -> list[dict[str, float]]:
    """The complete cycles of a trace of one client's sequential puts: per put, marker -> time
    (microseconds, perf's clock), the required markers all there and the optional ones found;
    m_fsync and m_fsync_end when the master's fdatasync began between m_read and c_recv. A cycle
    missing a required marker (recording began or ended in it, a syscall not seen) is dropped."""
    return cycles_of(parse_calls(lines), master, slave, client)


def cycles_of(calls: Sequence[Call], master: int, slave: int, client: int) -> list[dict[str, float]]:
    """`parse_cycles` of calls already parsed."""
    roles = find_roles(calls, master, slave)
    cycles: list[dict[str, float]] = []
    cycle: dict[str, int] | None = None
    fsync_tid: int | None = None
    for c in calls:
        if c.pid == client:
            marker = _client_marker(c)
        elif c.pid == master:
            marker = _master_marker(c, roles)
        elif c.pid == slave:
            marker = _slave_marker(c, roles, cycle or {})
        else:
            marker = None
        if marker == "c_send":
            done = _complete(cycle, fsync_tid, roles) if cycle is not None else None
            cycles += [done] if done else []
            cycle, fsync_tid = {"c_send": c.start}, None
        elif marker is None or cycle is None:
            continue
        elif marker == "m_fsync":
            if "m_read" in cycle and "m_fsync" not in cycle and "c_recv" not in cycle:
                cycle.update(m_fsync=c.start, m_fsync_end=c.end)
        elif marker == "s_fsync":
            if _takes(cycle, "s_fsync"):
                cycle.update(s_fsync=c.start, s_fsync_end=c.end)
                fsync_tid = c.tid
        elif marker == "s_flush_thread_wakes_loop" and c.tid != fsync_tid:
            continue
        elif _takes(cycle, marker):
            cycle[marker] = c.end if marker in AT_EXIT else c.start
    done = _complete(cycle, fsync_tid, roles) if cycle is not None else None
    return cycles + ([done] if done else [])


# -- the table (pure) -------------------------------------------------------------------------------


def chain(cycles: Sequence[Mapping[str, float]]) -> list[str]:
    """The required markers and the optional ones found in most cycles, in causal order."""
    return [m for m in ORDER if m in REQUIRED or 2 * sum(m in c for c in cycles) > len(cycles)]


def hop(cycles: Sequence[Mapping[str, float]], a: str, b: str) -> tuple[float, float] | None:
    """(p50, mean) of b - a in microseconds over the cycles that have both; None for none."""
    values = sorted(c[b] - c[a] for c in cycles if a in c and b in c)
    if not values:
        return None
    return percentile(values, 50), sum(values) / len(values)


def _fine_hops(systems: Mapping[str, Sequence[Mapping[str, float]]], a: str, b: str) -> list[tuple[str, str]]:
    """The hops between required markers a and b that any system's optional markers make."""
    hops: set[tuple[str, str]] = set()
    for cycles in systems.values():
        markers = chain(cycles)
        inner = markers[markers.index(a) : markers.index(b) + 1]
        if len(inner) > 2:
            hops.update(zip(inner, inner[1:]))
    return sorted(hops, key=lambda h: (ORDER.index(h[0]), ORDER.index(h[1])))


def _row(label: str, values: Sequence[tuple[float, float] | None]) -> str:
    cells = "".join(f"{v[0]:>14.0f}{v[1]:>8.1f}" if v else f"{'-':>14}{'-':>8}" for v in values)
    ratio = ""
    if len(values) == 2:
        first, second = values
        ratio = f"{first[0] / second[0]:>13.2f}x" if first and second and second[0] else f"{'-':>14}"
    return f"  {label:<50}{cells}{ratio}".rstrip()


def format_table(systems: Mapping[str, Sequence[Mapping[str, float]]]) -> list[str]:
    """Per hop, each system's p50 and mean (us) side by side, and the first's p50 over the
    second's when there are two. `systems`: name -> its complete cycles, in column order."""
    names = list(systems)
    header = "".join(f"{name + ' p50':>14}{'mean':>8}" for name in names)
    ratio = f"{names[0] + '/' + names[1]:>14}" if len(names) == 2 else ""
    lines = [f"  {'hop (microseconds)':<50}{header}{ratio}"]

    def row(label: str, a: str, b: str) -> None:
        lines.append(_row(label, [hop(systems[n], a, b) for n in names]))

    for a, b in zip(REQUIRED, REQUIRED[1:]):
        row(f"{a} -> {b}", a, b)
        for x, y in _fine_hops(systems, a, b):
            values = []
            for n in names:
                markers = chain(systems[n])
                own = x in markers and y in markers and markers.index(y) == markers.index(x) + 1
                values.append(hop(systems[n], x, y) if own else None)
            lines.append(_row(f"    {x} -> {y}", values))
    row("round trip (c_send -> c_recv)", "c_send", "c_recv")
    if any(hop(cycles, "m_chunk", "m_fsync") for cycles in systems.values()):
        row("master fdatasync: m_chunk -> its start", "m_chunk", "m_fsync")
        row("master fdatasync: its duration", "m_fsync", "m_fsync_end")
    return lines


# -- recording --------------------------------------------------------------------------------------


def perf_record_command(pids: Sequence[int], output: Path, seconds: float) -> list[str]:
    events = ",".join(f"syscalls:sys_{kind}_{name}" for name in SYSCALLS for kind in ("enter", "exit"))
    targets = ["-p", ",".join(map(str, pids)), "-o", str(output)]
    return ["perf", "record", "-e", events, *targets, "--", "sleep", f"{seconds:g}"]


def _perf_failure(what: str, returncode: int, stderr: str) -> PerfError:
    lines = [line.strip() for line in stderr.splitlines() if line.strip() and not line.startswith("[ perf")]
    said = " ".join(lines)[:300] or "no message"
    denied = any(word in said.lower() for word in ("permission", "paranoid", "access"))
    hint = " (syscall tracepoints need root or kernel.perf_event_paranoid=-1)" if denied else ""
    return PerfError(f"{what} failed (exit {returncode}): {said}{hint}")


@dataclass
class Load:
    """What the client did while perf recorded."""

    latencies_ms: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    load: str = ""


async def _send(producer: AsyncRemotingProducer, body: bytes, load: Load | None) -> None:
    started = time.perf_counter()
    try:
        result = await producer.send(TOPIC, body)
        status = result.status.name
    except Exception as exc:  # counted, never hidden
        status = f"{type(exc).__name__}: {str(exc)[:60]}"
    if load is None:
        return
    if status == "SEND_OK":
        load.latencies_ms.append((time.perf_counter() - started) * 1000)
    else:
        load.errors[status] += 1


async def _drive(endpoint: str, pids: Sequence[int], perf_file: Path, args: argparse.Namespace) -> Load:
    """Warm up, start `perf record`, and send until it ends (or --max-messages, or it hangs)."""
    producer = AsyncRemotingProducer(endpoint, timeout_s=30)
    body = os.urandom(SIZE // 2).hex().encode()
    load = Load()
    try:
        warm_until = time.perf_counter() + WARMUP_S
        while time.perf_counter() < warm_until:
            await _send(producer, body, None)
        with open(perf_file.with_suffix(".log"), "w") as log:
            perf = subprocess.Popen(
                perf_record_command(pids, perf_file, args.seconds), stdout=log, stderr=subprocess.STDOUT
            )
        give_up = time.perf_counter() + args.seconds + PERF_GRACE_S
        try:
            while perf.poll() is None and len(load.latencies_ms) < args.max_messages:
                if time.perf_counter() > give_up:
                    raise PerfError(f"perf record did not end within {args.seconds + PERF_GRACE_S:g} s")
                await _send(producer, body, load)
            load.load = load_average()
            try:
                returncode = await asyncio.to_thread(perf.wait, PERF_GRACE_S)
            except subprocess.TimeoutExpired:
                raise PerfError(f"perf record did not end {PERF_GRACE_S:g} s after the load stopped") from None
        finally:
            if perf.poll() is None:
                perf.kill()
                perf.wait()
    finally:
        await producer.close()
    if returncode != 0:
        raise _perf_failure("perf record", returncode, perf_file.with_suffix(".log").read_text(errors="replace"))
    return load


def _perf_script(perf_file: Path) -> Path:
    text = perf_file.with_suffix(".txt")
    with open(text, "w") as out:
        done = subprocess.run(
            ["perf", "script", "-i", str(perf_file), "-F", "comm,pid,tid,time,event,trace"],
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
        )
    if done.returncode != 0:
        raise _perf_failure("perf script", done.returncode, done.stderr)
    return text


@dataclass
class Traced:
    name: str
    cycles: list[dict[str, float]]
    puts: int  # the client's sends in the trace, complete or not
    load: Load
    text: Path


def trace(name: str, endpoint: str, pids: tuple[int, int, int], where: Path, args: argparse.Namespace) -> Traced:
    """Drive `endpoint`, record master, slave and client (`pids`), and cut the trace into cycles."""
    perf_file = where / f"{name}.perf"
    progress(f"{name}: warming up {WARMUP_S:g} s, then perf record for {args.seconds:g} s")
    load = asyncio.run(_drive(endpoint, pids, perf_file, args))
    text = _perf_script(perf_file)
    with open(text, errors="replace") as lines:
        calls = parse_calls(lines)
    puts = sum(1 for c in calls if c.pid == pids[2] and _client_marker(c) == "c_send")
    return Traced(name, cycles_of(calls, *pids), puts, load, text)


def trace_broker(run_dir: Path, args: argparse.Namespace) -> Traced:
    progress("starting RocketStore master + slave (SYNC_MASTER + SYNC_FLUSH, slave SYNC_FLUSH)")
    cluster = LocalCluster(
        run_dir / "broker-cluster",
        master_role="SYNC_MASTER",
        flush_disk_type="SYNC_FLUSH",
        settings={"remotingListenPort": "0"},
        slave_settings={"flushDiskType": "SYNC_FLUSH"},
        env=_no_event_engine_env(),
    )
    try:
        cluster.start()
        master, slave = cluster.master.process, cluster.slave_brokers[0].process
        assert master is not None and slave is not None
        return trace("broker", cluster.master.remoting_endpoint, (master.pid, slave.pid, os.getpid()), run_dir, args)
    finally:
        cluster.stop()


# The floors this can trace (`--floor-mode`), and each one's column name.
FLOOR_COLUMNS = {"replicated": "floor", "replicated-work": "work floor"}


def trace_floor(run_dir: Path, args: argparse.Namespace) -> Traced:
    mode = args.floor_mode
    progress(f"starting the floor: {mode} master + slave")
    env = _no_event_engine_env()
    slave = FloorProcess(run_dir / "floor-slave", SLAVE_MODES[mode], env=env).start()
    try:
        master = FloorProcess(run_dir / "floor-master", mode, slave=slave, env=env).start()
        try:
            assert master.proc is not None and slave.proc is not None
            pids = (master.proc.pid, slave.proc.pid, os.getpid())
            return trace(FLOOR_COLUMNS[mode], master.endpoint, pids, run_dir, args)
        finally:
            master.stop()
    finally:
        slave.stop()


# -- the run ----------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.put_timeline", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--seconds", type=float, default=2.0, help="perf recording per system (default 2)")
    p.add_argument("--max-messages", type=int, default=100_000, help="sends per recording at most (default 100000)")
    p.add_argument("--dir", type=Path, help="parent directory of the run (default: a disk-backed temp dir)")
    p.add_argument("--only", choices=("broker", "floor"), help="trace one system (default both)")
    p.add_argument(
        "--floor-mode",
        choices=tuple(FLOOR_COLUMNS),
        default="replicated",
        help="the floor to trace: replicated (keeps bodies), or replicated-work (does the broker's per-message"
        " work, bench/work_floor.py); default replicated",
    )
    p.add_argument("--keep", action="store_true", help="keep the run dir and the perf script texts; print their paths")
    return p.parse_args(argv)


def _summary(t: Traced) -> str:
    ordered = sorted(t.load.latencies_ms)
    sends = len(ordered)
    fsyncs = sum("m_fsync" in c for c in t.cycles)
    errors = ", errors " + ", ".join(f"{k} x{v}" for k, v in t.load.errors.items()) if t.load.errors else ""
    return (
        f"  {t.name:<12} {sends} sends while perf ran, client p50 {percentile(ordered, 50):.2f} ms;"
        f" {len(t.cycles)} of {t.puts} traced puts complete (master fdatasync in {fsyncs});"
        f" load {t.load.load}{errors}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if shutil.which("perf") is None:
        print("perf not found: apt-get install linux-perf", file=sys.stderr)
        return 2
    run_dir = Path(tempfile.mkdtemp(prefix="put-timeline-", dir=args.dir or default_parent_dir()))
    env = environment(run_dir)
    print_environment(
        "One put's critical path, hop by hop, in syscalls: RocketStore beside its floor", env, tuple(env), 12
    )
    print(
        f"  config       one remoting client, sequential sends, {SIZE} B bodies; perf record {args.seconds:g} s"
        f" after {WARMUP_S:g} s of sends; broker SYNC_MASTER + SYNC_FLUSH with a SYNC_FLUSH slave, floor"
        f" {args.floor_mode} (grpc.aio) to a slave that fdatasyncs; gRPC's EventEngine off in all server processes",
        flush=True,
    )
    traced: list[Traced] = []
    try:
        for name, run in (("broker", trace_broker), ("floor", trace_floor)):
            if args.only in (None, name):
                traced.append(run(run_dir, args))
    except PerfError as exc:
        print(exc, file=sys.stderr)
        return 2
    finally:
        if not args.keep:
            shutil.rmtree(run_dir, ignore_errors=True)
    print()
    for t in traced:
        print(_summary(t))
    print()
    print("\n".join(format_table({t.name: t.cycles for t in traced})))
    if any(not t.cycles for t in traced):
        print("  no complete cycle in a trace: run with --keep and read its perf script text")
    if args.keep:
        for t in traced:
            print(f"  {t.name} trace: {t.text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
