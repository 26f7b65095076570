"""RocketStore beside Redis primary + replica, in one run (`python -m bench.vs_redis`).

What a user weighing RocketStore against the closest existing system would measure: durable,
synchronously replicated produce. Both sides get the same asyncio load generator in this process:

- Redis: `redis-server` primary and replica (`replicaof`) on 127.0.0.1, both `appendonly yes`,
  `appendfsync always`; a publish is `XADD <stream> * d <body>` followed by `WAIT 1 5000` in the
  same write (one round trip), acknowledged when WAIT answers 1 (a batch: B XADDs and one WAIT).
  One TCP connection per client, spoken in RESP by a minimal client here (no library needed).
- RocketStore: a master and one slave (`harness.local_cluster`), SYNC_MASTER + SYNC_FLUSH
  (acknowledged when flushed on the master and acknowledged by the slave) and, as the upper bound,
  ASYNC_MASTER + ASYNC_FLUSH (its slave ASYNC_FLUSH too); with `--overlap` also ASYNC_MASTER +
  SYNC_FLUSH and SYNC_MASTER + ASYNC_FLUSH, whose slave stays SYNC_FLUSH (the slave's round trip
  that SYNC/SYNC waits for includes the slave's flush); one producer (one connection) per client,
  over RocketMQ's remoting protocol (`client.remoting.AsyncRemotingProducer`) and over gRPC
  (`client.AsyncProducer`).

The cells: message size x clients x batch (default 1 KiB and 128 B; 1, 8 and 64 clients at batch
1; one client with batches of 32). Each cell runs every system in turn, for `--seconds` after a
warm-up, bounded by `--max-messages`. Per system and cell: msgs/s, MB/s, p50/p99 latency of a
publish (send to acknowledgement; a batch counts as one sample), CPU (% of one core) of all the
server processes of that system (and of its busiest process alone: is one core the limit?) and of
this load-generating process, the servers' CPU time and
context switches per message (`/proc/PID/task/*/status`: every hand-off between threads shows
there), disk bytes written per message (`/proc/PID/io` write_bytes of the server processes), and
the ratio to Redis. The
machine's other CPU load during the cell is printed beside it: the machine is shared, so ratios
within one run are what compare. With `--rounds N` each cell runs N times over (every system in
turn each round) and ends with each RocketStore system's median ratio to Redis over the rounds,
each round's RocketStore figure against the Redis figure of the same round, with the lowest and
highest: on a noisy machine that is the figure to quote.

With `--no-event-engine`, RocketStore SYNC/SYNC and each floor also run with gRPC's EventEngine
off in their processes (`GRPC_EXPERIMENTS`, gRPC's older pollers), named with "noEE", each such
system against the floor run the same way (gRPC's own hand-offs are a part of both), and every
SYNC/SYNC system also against the faster of the two floors in each round: a faster floor found is
the bar. A broker turns the EventEngine off in its own process unless the environment sets
`GRPC_EXPERIMENTS` (`wire.grpc_pollers`), so RocketStore's two runs differ only where a run
sets it otherwise (`GRPC_EXPERIMENTS=` in the environment of the benchmark: gRPC's defaults).

Requires `redis-server` on PATH (Debian's redis-server package); refuses clearly without it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from statistics import median

from bench.common import context_switches, default_parent_dir, environment, percentile, progress, size_label
from harness.local_cluster import LocalCluster, poll_until
from harness.ports import port_for_later

TOPIC = "VsRedis"
DEFAULT_CELLS = ("1x1", "8x1", "64x1", "1x32")


# -- /proc readings ---------------------------------------------------------------------------------


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def _write_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("write_bytes:"):
            return int(line.split()[1])
    return 0


def _machine_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine; busy leaves out idle and iowait."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    total = sum(values[:8])
    return total - values[3] - values[4], total


@dataclass
class Sample:
    """Counters of a set of server processes and of the machine, at one instant."""

    cpu_ticks: int
    write_bytes: int
    switches: int
    machine_busy: int
    machine_total: int
    own_ticks: int
    # Each server process's own, in the order of `pids`: is one process's core the limit?
    ticks_by_process: tuple[int, ...] = ()

    @classmethod
    def take(cls, pids: list[int]) -> Sample:
        busy, total = _machine_ticks()
        own = os.times()
        ticks = tuple(_cpu_ticks(p) for p in pids)
        return cls(
            sum(ticks),
            sum(_write_bytes(p) for p in pids),
            sum(context_switches(p) for p in pids),
            busy,
            total,
            int((own.user + own.system) * os.sysconf("SC_CLK_TCK")),
            ticks,
        )


# -- Redis ------------------------------------------------------------------------------------------


class RedisPair:
    """A Redis primary and its replica, both fsyncing their AOF on every write."""

    def __init__(self, base: Path) -> None:
        self.base = base
        primary = port_for_later()
        self.ports = (primary, port_for_later(avoid=(primary,)))
        self.procs: list[subprocess.Popen] = []

    def _conf(self, name: str, port: int, replica_of: int | None) -> Path:
        data = self.base / name
        data.mkdir(parents=True)
        lines = [
            "bind 127.0.0.1",
            f"port {port}",
            f"dir {data}",
            "appendonly yes",
            "appendfsync always",
            'save ""',
            "protected-mode yes",
            f"logfile {data / 'redis.log'}",
        ]
        if replica_of is not None:
            lines.append(f"replicaof 127.0.0.1 {replica_of}")
        conf = data / "redis.conf"
        conf.write_text("\n".join(lines) + "\n")
        return conf

    def start(self) -> RedisPair:
        primary, replica = self.ports
        for name, port, of in (("primary", primary, None), ("replica", replica, primary)):
            conf = self._conf(name, port, of)
            self.procs.append(subprocess.Popen(["redis-server", str(conf)], stdout=subprocess.DEVNULL))
        if not poll_until(self._replica_online, 30):
            raise RuntimeError(f"the Redis replica did not come online within 30 s (logs in {self.base})")
        return self

    def _replica_online(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.ports[0]), timeout=2) as s:
                s.sendall(b"*2\r\n$4\r\nINFO\r\n$11\r\nreplication\r\n")
                data = b""
                while not data.endswith(b"\r\n") or data.count(b"\r\n") < 2:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    data += chunk
            return b"state=online" in data
        except OSError:
            return False

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def stop(self) -> None:
        _terminate(self.procs)


def _terminate(procs: list[subprocess.Popen]) -> None:
    """SIGTERM every process, then wait for each (killed after 20 s)."""
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _resp(*parts: bytes) -> bytes:
    out = [b"*%d\r\n" % len(parts)]
    for part in parts:
        out.append(b"$%d\r\n%s\r\n" % (len(part), part))
    return b"".join(out)


class RespConnection:
    """Just enough RESP for XADD and WAIT: simple strings, errors, integers, bulk strings."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int) -> RespConnection:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer)

    async def reply(self) -> bytes | int:
        line = await self.reader.readline()
        kind, rest = line[:1], line[1:-2]
        if kind == b"$":
            size = int(rest)
            return b"" if size < 0 else (await self.reader.readexactly(size + 2))[:-2]
        if kind == b":":
            return int(rest)
        if kind == b"+":
            return rest
        raise RuntimeError(f"Redis answered {line!r}")

    def close(self) -> None:
        self.writer.close()


class RedisDriver:
    name = "redis P+1R"

    def __init__(self, pair: RedisPair) -> None:
        self.pair = pair
        self.stream = b"bench"

    async def connect(self) -> RespConnection:
        return await RespConnection.open(self.pair.ports[0])

    async def publish(self, conn: RespConnection, bodies: list[bytes]) -> int:
        xadd = b"".join(_resp(b"XADD", self.stream, b"*", b"d", body) for body in bodies)
        conn.writer.write(xadd + _resp(b"WAIT", b"1", b"5000"))
        for _ in bodies:
            await conn.reply()
        replicas = await conn.reply()
        if replicas != 1:
            raise RuntimeError(f"WAIT answered {replicas!r}: the replica did not acknowledge")
        return len(bodies)

    async def close(self, conn: RespConnection) -> None:
        conn.close()

    async def reset(self) -> None:
        conn = await self.connect()
        conn.writer.write(_resp(b"UNLINK", self.stream))
        await conn.reply()
        conn.close()

    @property
    def pids(self) -> list[int]:
        return self.pair.pids


# -- RocketStore ------------------------------------------------------------------------------------


class RocketStoreDriver:
    """Over gRPC (`AsyncProducer`, the client API) or RocketMQ's remoting protocol
    (`AsyncRemotingProducer`); one producer, so one connection, per client."""

    def __init__(self, cluster: LocalCluster | None, label: str, transport: str) -> None:
        self.cluster = cluster
        self.name = label
        self.transport = transport

    def endpoint(self) -> str:
        assert self.cluster is not None
        master = self.cluster.master
        return master.remoting_endpoint if self.transport == "remoting" else master.client_endpoint

    async def connect(self):
        from client import AsyncProducer
        from client.remoting import AsyncRemotingProducer

        if self.transport == "remoting":
            return AsyncRemotingProducer(self.endpoint(), timeout_s=30)
        return AsyncProducer(self.endpoint(), timeout_s=30)

    async def publish(self, producer, bodies: list[bytes]) -> int:
        from client import ProducerMessage

        if len(bodies) == 1:
            results = [await producer.send(TOPIC, bodies[0])]
        else:
            results = await producer.send_batch(TOPIC, [ProducerMessage(b) for b in bodies])
        bad = [r.status.name for r in results if r.status.name != "SEND_OK"]
        if bad:
            raise RuntimeError(f"not acknowledged: {bad[0]}")
        return len(results)

    async def close(self, producer) -> None:
        await producer.close()

    async def reset(self) -> None:
        return None

    @property
    def pids(self) -> list[int]:
        if self.cluster is None:
            return []
        return [b.process.pid for b in self.cluster.brokers if b.process is not None]


# -- the floor: a remoting server in Python that keeps nothing (bench/front_end_floor.py) -----------

# `--no-event-engine`: gRPC's EventEngine turned off in a server's process (gRPC reads the variable
# when it starts), which brings back its older pollers, where a thread that waits for a call polls
# for it itself instead of handing over to the EventEngine's threads. Systems run that way carry
# NO_EE after their name and are measured against the floor run the same way.
NO_EVENT_ENGINE = {
    "GRPC_EXPERIMENTS": "-event_engine_client,-event_engine_listener,-event_engine_callback_cq,"
    "-event_engine_for_all_other_endpoints"
}
NO_EE = " noEE"


def _no_event_engine_env() -> dict[str, str]:
    return {**os.environ, **NO_EVENT_ENGINE}


def _variant(system: str) -> tuple[str, str]:
    """A system's name without its `NO_EE` mark, and the mark ("" for none)."""
    return (system[: -len(NO_EE)], NO_EE) if system.endswith(NO_EE) else (system, "")


class FloorProcess:
    """One `bench.front_end_floor` process in `mode`, listening on 127.0.0.1; `env`: its
    environment (None: this process's)."""

    def __init__(
        self, base: Path, mode: str, slave: FloorProcess | None = None, env: dict[str, str] | None = None
    ) -> None:
        self.base = base
        self.mode = mode
        self.slave = slave
        self.env = env
        self.proc: subprocess.Popen | None = None
        self.endpoint = ""

    def start(self) -> FloorProcess:
        self.base.mkdir(parents=True, exist_ok=True)
        port_file = self.base / "port"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.front_end_floor", "--mode", self.mode, "--dir", str(self.base)]
            + ["--port-file", str(port_file)]
            + (["--slave", self.slave.endpoint] if self.slave is not None else []),
            cwd=Path(__file__).resolve().parent.parent,
            env=self.env,
        )
        if not poll_until(lambda: port_file.exists() or self.proc.poll() is not None, 30) or not port_file.exists():
            self.stop()
            raise RuntimeError(f"the floor server ({self.mode}) did not start listening within 30 s")
        self.endpoint = f"127.0.0.1:{int(port_file.read_text())}"
        return self

    def stop(self) -> None:
        _terminate([self.proc] if self.proc is not None else [])


class FloorDriver(RocketStoreDriver):
    """The remoting producer (the gRPC one for the gRPC API's floor) against a floor process:
    what the brokers' puts cost without the store and replication behind them."""

    def __init__(self, floor: FloorProcess) -> None:
        from bench.front_end_floor import GRPC_API_MODES

        variant = NO_EE if floor.env is not None else ""
        super().__init__(None, f"floor: {floor.mode}{variant}", "grpc" if floor.mode in GRPC_API_MODES else "remoting")
        self.floor = floor

    def endpoint(self) -> str:
        return self.floor.endpoint

    @property
    def pids(self) -> list[int]:
        return [f.proc.pid for f in (self.floor, self.floor.slave) if f is not None and f.proc is not None]


# -- a cell -----------------------------------------------------------------------------------------


@dataclass
class Result:
    system: str
    size: int
    clients: int
    batch: int
    round: int = 1
    messages: int = 0
    elapsed_s: float = 0.0
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    server_cpu_pct: float = 0.0
    # The busiest server process alone (the primary or master, as a rule), % of one core.
    busiest_cpu_pct: float = 0.0
    client_cpu_pct: float = 0.0
    disk_bytes_per_msg: float = 0.0
    # Per message, of the server processes: CPU time and context switches (thread hand-offs).
    server_cpu_us_per_msg: float = 0.0
    switches_per_msg: float = 0.0
    other_cpu_pct: float = 0.0
    errors: dict[str, int] = field(default_factory=dict)

    @property
    def msgs_per_s(self) -> float:
        return self.messages / self.elapsed_s if self.elapsed_s else 0.0


async def run_cell(
    driver,
    size: int,
    clients: int,
    batch: int,
    seconds: float,
    max_messages: int,
    timeline: list[tuple[float, float]] | None = None,
) -> Result:
    """One system's cell. `timeline`, when given, receives each measured publish as (wall-clock
    time it was sent, latency in ms): to line the slowest ones up with what the servers did."""
    result = Result(driver.name, size, clients, batch)
    bodies = [os.urandom(size // 2).hex().encode()[:size] for _ in range(batch)]
    conns = [await driver.connect() for _ in range(clients)]
    latencies: list[float] = []
    measuring = False
    stop_at = time.perf_counter() + min(1.0, seconds / 4)

    async def client(conn) -> None:
        while time.perf_counter() < stop_at and result.messages < max_messages:
            started = time.perf_counter()
            sent_at = time.time()
            try:
                done = await driver.publish(conn, bodies)
            except Exception as exc:  # counted, never hidden
                name = f"{type(exc).__name__}: {str(exc)[:60]}"
                result.errors[name] = result.errors.get(name, 0) + 1
                continue
            if measuring:
                latency_ms = (time.perf_counter() - started) * 1000
                latencies.append(latency_ms)
                result.messages += done
                if timeline is not None:
                    timeline.append((sent_at, latency_ms))

    try:
        await asyncio.gather(*(client(c) for c in conns))  # warm-up
        before = Sample.take(driver.pids)
        measuring = True
        started = time.perf_counter()
        stop_at = started + seconds
        await asyncio.gather(*(client(c) for c in conns))
        result.elapsed_s = time.perf_counter() - started
        after = Sample.take(driver.pids)
    finally:
        for conn in conns:
            await driver.close(conn)
    hz = os.sysconf("SC_CLK_TCK")
    server_ticks = after.cpu_ticks - before.cpu_ticks
    result.server_cpu_pct = 100 * server_ticks / hz / result.elapsed_s
    per_process = [a - b for a, b in zip(after.ticks_by_process, before.ticks_by_process, strict=True)]
    result.busiest_cpu_pct = 100 * max(per_process, default=0) / hz / result.elapsed_s
    machine_busy = after.machine_busy - before.machine_busy
    machine_total = max(1, after.machine_total - before.machine_total)
    cores = os.cpu_count() or 1
    own = after.own_ticks - before.own_ticks
    result.client_cpu_pct = 100 * own / hz / result.elapsed_s
    other = max(0, machine_busy - server_ticks - own)
    result.other_cpu_pct = 100 * cores * other / machine_total
    result.disk_bytes_per_msg = (after.write_bytes - before.write_bytes) / max(1, result.messages)
    result.server_cpu_us_per_msg = 1e6 * server_ticks / hz / max(1, result.messages)
    result.switches_per_msg = (after.switches - before.switches) / max(1, result.messages)
    ordered = sorted(latencies)
    result.p50_ms, result.p99_ms = percentile(ordered, 50), percentile(ordered, 99)
    await driver.reset()
    return result


def row(r: Result, redis: Result | None) -> str:
    ratio = f"{r.msgs_per_s / redis.msgs_per_s:5.2f}x" if redis and redis.msgs_per_s else "     -"
    p99 = f"{r.p99_ms / redis.p99_ms:5.2f}x" if redis and redis.p99_ms else "     -"
    errors = " errors " + ", ".join(f"{k} x{v}" for k, v in r.errors.items()) if r.errors else ""
    return (
        f"  {r.system:<28} {r.msgs_per_s:>9,.0f} msgs/s {r.msgs_per_s * r.size / 1e6:>6.2f} MB/s"
        f"  p50 {r.p50_ms:>6.2f} ms  p99 {r.p99_ms:>7.2f} ms  CPU server {r.server_cpu_pct:>4.0f}%"
        f" (busiest {r.busiest_cpu_pct:>3.0f}%; {r.server_cpu_us_per_msg:>4.0f} us,"
        f" {r.switches_per_msg:>4.1f} switches /msg) client {r.client_cpu_pct:>3.0f}%"
        f"  disk {r.disk_bytes_per_msg:>7,.0f} B/msg  other CPU {r.other_cpu_pct:>4.0f}%"
        f"  | vs Redis: {ratio} throughput, {p99} p99{errors}"
    )


# -- the run ----------------------------------------------------------------------------------------


def parse_args(argv) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.vs_redis", description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=5.0, help="measured time per system and cell (default 5)")
    p.add_argument("--max-messages", type=int, default=1_000_000, help="message bound per system and cell")
    p.add_argument("--sizes", default="1024,128", help="comma list of body sizes in bytes (default 1024,128)")
    p.add_argument(
        "--cells", default=",".join(DEFAULT_CELLS), help="comma list of CLIENTSxBATCH (default 1x1,8x1,64x1,1x32)"
    )
    p.add_argument("--no-upper-bound", action="store_true", help="skip RocketStore ASYNC_MASTER + ASYNC_FLUSH")
    p.add_argument(
        "--transports",
        default="remoting,grpc",
        help="comma list of RocketStore client transports: remoting (RocketMQ's TCP protocol), grpc (default both)",
    )
    p.add_argument(
        "--rounds", type=int, default=1, help="run each cell this many times over, systems in turn (default 1)"
    )
    p.add_argument(
        "--floor",
        action="store_true",
        help="also run bench.front_end_floor (a server in Python that keeps nothing): over remoting answering"
        " at once, after an fdatasync per loop turn, and replicated to a slave over gRPC and over TCP; and over"
        " the gRPC client API replicated over gRPC; and both replicated over gRPC doing the per-message work"
        " a broker's guarantees ask (CommitLog records, producer ids, dispatch, chunk checksums and MACs)",
    )
    p.add_argument(
        "--floor-modes",
        help="with --floor, a comma list of its modes to run (default all: answer, fdatasync, replicated,"
        " replicated-tcp, grpc-api, replicated-work, grpc-api-work)",
    )
    p.add_argument(
        "--no-event-engine",
        action="store_true",
        help="also run RocketStore SYNC/SYNC and each floor with gRPC's EventEngine off in their processes"
        " (GRPC_EXPERIMENTS; gRPC's older pollers), named with 'noEE' and measured against the floor run"
        " the same way (the benchmark's own gRPC clients keep gRPC's defaults)",
    )
    p.add_argument(
        "--overlap",
        action="store_true",
        help="also run ASYNC_MASTER + SYNC_FLUSH and SYNC_MASTER + ASYNC_FLUSH, each with a SYNC_FLUSH slave"
        " (does SYNC/SYNC overlap its flush and its slave's round trip, or add them up?)",
    )
    p.add_argument("--dir", type=Path, help="parent directory of the run (default: a disk-backed temp dir)")
    p.add_argument("--json", type=Path, metavar="PATH", help="also write the results as JSON to PATH")
    p.add_argument(
        "--timeline",
        type=Path,
        metavar="DIR",
        help="also write each publish's send time and latency to a file per system, cell and round"
        " in DIR, and print each cell's latency histogram",
    )
    return p.parse_args(argv)


# The floor each RocketStore transport is measured against (bench/front_end_floor.py): the same
# client API, replicated to a slave over gRPC, keeping nothing.
FLOOR_OF_TRANSPORT = {"remoting": "floor: replicated", "grpc": "floor: grpc-api"}
# The same floors doing the broker's per-message work (bench/work_floor.py).
WORK_FLOOR_OF_TRANSPORT = {"remoting": "floor: replicated-work", "grpc": "floor: grpc-api-work"}


def _ratios(pairs: list[tuple[Result, Result]], value: Callable[[Result], float]) -> str:
    ratios = [value(r) / value(p) for r, p in pairs if value(p)]
    if not ratios:
        return "-"
    return f"{median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"


def _against(rounds: dict[int, Result], floor: dict[int, Result]) -> str:
    """A system's rounds against a floor's rounds of the same numbers: throughput, p99 and CPU per
    message, each as the median of the rounds' ratios with the range."""
    pairs = [(r, floor[n]) for n, r in rounds.items() if n in floor]
    return (
        f"throughput {_ratios(pairs, lambda r: r.msgs_per_s)}, p99 {_ratios(pairs, lambda r: r.p99_ms)},"
        f" CPU per message {_ratios(pairs, lambda r: r.server_cpu_us_per_msg)}"
    )


def summary(cell: list[Result]) -> list[str]:
    """Per RocketStore system of one cell's rounds: the median of its round-by-round ratios to
    Redis (throughput and p99), with the lowest and highest; and for SYNC_MASTER + SYNC_FLUSH,
    when its transport's floor ran, the same against that floor (and CPU per message)."""
    by_round: dict[str, dict[int, Result]] = {}
    for r in cell:
        by_round.setdefault(r.system, {})[r.round] = r
    redis = next((rounds for system, rounds in by_round.items() if system.startswith("redis")), {})
    lines = []
    for system, rounds in by_round.items():
        if system.startswith("redis"):
            continue
        pairs = [(r, redis[n]) for n, r in rounds.items() if n in redis]
        if not pairs:
            continue
        lines.append(
            f"  {system:<28} over {len(pairs)} rounds: throughput {_ratios(pairs, lambda r: r.msgs_per_s)} of Redis,"
            f" p99 {_ratios(pairs, lambda r: r.p99_ms)}"
        )
        base, variant = _variant(system)
        transport = base.rsplit(" ", 1)[-1]
        floor_name = FLOOR_OF_TRANSPORT.get(transport, "")
        floor = by_round.get(floor_name + variant, {})
        if " SYNC/SYNC " in system and floor:
            lines.append(f"  {'':<28} of its floor: {_against(rounds, floor)}")
            # Both ways of the floor ran: the faster of the two in each round is the bar.
            other = by_round.get(floor_name + ("" if variant else NO_EE), {})
            faster = {n: max(floor[n], other[n], key=lambda r: r.msgs_per_s) for n in floor.keys() & other.keys()}
            if faster:
                pairs = [(r, faster[n]) for n, r in rounds.items() if n in faster]
                lines.append(f"  {'':<28} of the faster floor: throughput {_ratios(pairs, lambda r: r.msgs_per_s)}")
            work = by_round.get(WORK_FLOOR_OF_TRANSPORT.get(transport, "") + variant, {})
            if work:
                lines.append(f"  {'':<28} of the floor with its work: {_against(rounds, work)}")
        if " SYNC/SYNC " in system and not variant:
            lines.extend(_overlap(system, rounds, by_round))
    return lines


def _overlap(system: str, rounds: dict[int, Result], by_round: dict[str, dict[int, Result]]) -> list[str]:
    """With `--overlap`: SYNC/SYNC's p50 over the slower of the two single-guarantee modes of the
    same transport and round (1.00x: the master's flush hides wholly behind the slave's round trip
    or the other way round; 2.00x: they add up)."""
    transport = system.rsplit(" ", 1)[-1]
    flush_only = by_round.get(f"rocketstore ASYNC/SYNC {transport}", {})
    slave_only = by_round.get(f"rocketstore SYNC/ASYNC {transport}", {})
    slower = {n: max(flush_only[n].p50_ms, slave_only[n].p50_ms) for n in flush_only.keys() & slave_only.keys()}
    ratios = [r.p50_ms / slower[n] for n, r in rounds.items() if slower.get(n)]
    if not ratios:
        return []
    return [
        f"  {'':<28} p50 over the slower of ASYNC/SYNC and SYNC/ASYNC: {median(ratios):.2f}x"
        f" ({min(ratios):.2f}-{max(ratios):.2f})"
    ]


def latency_histogram(latencies_ms: list[float]) -> str:
    """Counts per log-spaced latency bucket (0.25 ms doubling every two buckets, ~45 ms and
    above last), the empty buckets left out: "<=1.4:12 <=2:30 >45:1"."""
    bounds = [0.25 * 2 ** (i / 2) for i in range(16)]
    counts = [0] * (len(bounds) + 1)
    for ms in latencies_ms:
        counts[next((i for i, b in enumerate(bounds) if ms <= b), len(bounds))] += 1
    cells = [f"<={b:.2g}:{c}" for b, c in zip(bounds, counts, strict=False) if c]
    return " ".join(cells + ([f">{bounds[-1]:.2g}:{counts[-1]}"] if counts[-1] else []))


def _write_timeline(directory: Path, r: Result, timeline: list[tuple[float, float]]) -> None:
    """One file per system, cell and round: a line per publish, its send time (s since the epoch)
    and latency (ms); and the cell's latency histogram on stdout."""
    directory.mkdir(parents=True, exist_ok=True)
    name = f"{r.system.replace(' ', '_').replace('/', '-')}-{r.size}-{r.clients}x{r.batch}-r{r.round}.txt"
    (directory / name).write_text("".join(f"{t:.6f} {ms:.3f}\n" for t, ms in timeline))
    print(f"      histogram (ms) {latency_histogram([ms for _, ms in timeline])}", flush=True)


def _cell(text: str) -> tuple[int, int]:
    """A --cells item, CLIENTSxBATCH."""
    clients, batch = text.split("x")
    return int(clients), int(batch)


async def _run(drivers: list, sizes: list[int], cells: list[tuple[int, int]], args) -> list[Result]:
    results: list[Result] = []
    for size in sizes:
        for clients, batch in cells:
            print(f"\n{size_label(size)} bodies, {clients} client(s), batch {batch}:", flush=True)
            cell: list[Result] = []
            for round_ in range(1, args.rounds + 1):
                redis = None
                for driver in drivers:
                    timeline: list[tuple[float, float]] | None = [] if args.timeline else None
                    r = await run_cell(driver, size, clients, batch, args.seconds, args.max_messages, timeline)
                    r.round = round_
                    if timeline is not None:
                        _write_timeline(args.timeline, r, timeline)
                    redis = r if driver.name.startswith("redis") else redis
                    cell.append(r)
                    print(row(r, None if r is redis else redis), flush=True)
            if args.rounds > 1:
                print("\n".join(summary(cell)), flush=True)
            results.extend(cell)
    return results


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.rounds < 1:
        print(f"--rounds must be at least 1, got {args.rounds}", file=sys.stderr)
        return 2
    if shutil.which("redis-server") is None:
        print("redis-server is not on PATH: install Debian's redis-server package to compare.", file=sys.stderr)
        return 2
    sizes = [int(s) for s in args.sizes.split(",")]
    cells = [_cell(c) for c in args.cells.split(",")]
    run_dir = Path(tempfile.mkdtemp(prefix="vs-redis-", dir=args.dir or default_parent_dir()))
    started: list[Callable[[], None]] = []
    try:
        print("RocketStore beside Redis primary + replica (durable, synchronously replicated produce)")
        for key, value in environment(run_dir).items():
            print(f"  {key:<12} {value}")
        print(
            f"  config       {args.seconds:g} s per system and cell, at most {args.max_messages} messages,"
            f" {args.rounds} round(s)"
        )
        progress("starting Redis primary + replica")
        pair = RedisPair(run_dir / "redis").start()
        started.append(pair.stop)
        drivers: list = [RedisDriver(pair)]
        # (master role, master flush, slave flush). The overlap modes keep the SYNC_FLUSH slave of
        # SYNC/SYNC: its round trip, the slave's own flush included, is what the master's flush
        # should overlap, so SYNC_MASTER + ASYNC_FLUSH must still wait for that flush.
        modes = [("SYNC_MASTER", "SYNC_FLUSH", "SYNC_FLUSH")]
        if args.overlap:
            modes += [("ASYNC_MASTER", "SYNC_FLUSH", "SYNC_FLUSH"), ("SYNC_MASTER", "ASYNC_FLUSH", "SYNC_FLUSH")]
        if not args.no_upper_bound:
            modes.append(("ASYNC_MASTER", "ASYNC_FLUSH", "ASYNC_FLUSH"))
        variants = [("", None)] + ([(NO_EE, _no_event_engine_env())] if args.no_event_engine else [])
        for role, flush, slave_flush in modes:
            for variant, env in variants if role == "SYNC_MASTER" and flush == "SYNC_FLUSH" else variants[:1]:
                progress(f"starting RocketStore master + slave ({role} {flush}, slave {slave_flush}){variant}")
                cluster = LocalCluster(
                    run_dir / f"{role}-{flush}{variant.strip()}",
                    master_role=role,
                    flush_disk_type=flush,
                    settings={"remotingListenPort": "0"},
                    slave_settings={"flushDiskType": slave_flush},
                    env=env,
                ).start()
                started.append(cluster.stop)
                for transport in args.transports.split(","):
                    label = f"rocketstore {role[:-7]}/{flush[:-6]} {transport}{variant}"
                    drivers.append(RocketStoreDriver(cluster, label, transport))
        if args.floor:
            from bench.front_end_floor import MODES, SLAVE_MODES

            for mode in args.floor_modes.split(",") if args.floor_modes else MODES:
                if mode not in MODES:
                    raise SystemExit(f"--floor-modes: {mode!r} is not one of {', '.join(MODES)}")
                for variant, env in variants:
                    progress(f"starting the floor server ({mode}){variant}")
                    where = f"floor-{mode}{variant.strip()}"
                    slave = None
                    if mode in SLAVE_MODES:
                        slave = FloorProcess(run_dir / f"{where}-{SLAVE_MODES[mode]}", SLAVE_MODES[mode], env=env)
                        started.append(slave.start().stop)
                    floor = FloorProcess(run_dir / where, mode, slave, env=env).start()
                    started.append(floor.stop)
                    drivers.append(FloorDriver(floor))
        results = asyncio.run(_run(drivers, sizes, cells, args))
        if args.json:
            args.json.write_text(json.dumps([asdict(r) | {"msgs_per_s": r.msgs_per_s} for r in results], indent=2))
    finally:
        for stop in reversed(started):
            stop()
        shutil.rmtree(run_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
