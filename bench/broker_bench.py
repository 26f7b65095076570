"""End-to-end broker benchmark over gRPC on 127.0.0.1 (`python -m bench.broker_bench`, from a checkout).

For each broker mode (ASYNC_MASTER / SYNC_MASTER x ASYNC_FLUSH / SYNC_FLUSH) it starts a master
and one slave (the slave flushes like its master) as broker processes, then runs the cells of the
matrix against the master: message size x concurrent producers x batch size. A cell runs for
`--seconds` (after a short warm-up) or until `--max-messages`, whichever comes first; each producer
is an asyncio task sending one request at a time (a batch is one SendMessage with B messages).
Figures per cell: msgs/s, MB/s, p50/p99 latency of a request (send to answer), statuses.

Then, per mode, replication: the steady-state lag (bytes and seconds, sampled from the admin API
during the load), and once per run the catch-up rate: a master is loaded with `--catch-up-size`
bytes, a fresh slave is started and timed until it acknowledged everything (MB/s).

The goal line compares SYNC_MASTER+SYNC_FLUSH to ASYNC_MASTER+ASYNC_FLUSH with 64 producers of
1 KiB messages, batch 1, in the same run (the issue's target: at least 60 %).

Everything runs on this machine: the brokers and the load generator share its cores, so figures
are comparable run to run, and ratios within a run most of all.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench.common import (
    default_parent_dir,
    environment,
    parse_size,
    percentile,
    print_environment,
    progress,
    size_label,
)
from client import AdminClient, AsyncProducer, ProducerMessage
from harness.local_cluster import LocalCluster, poll_until

MODES = [
    ("ASYNC_MASTER", "ASYNC_FLUSH"),
    ("ASYNC_MASTER", "SYNC_FLUSH"),
    ("SYNC_MASTER", "ASYNC_FLUSH"),
    ("SYNC_MASTER", "SYNC_FLUSH"),
]
SIZES = [128, 1024, 16 * 1024]
PRODUCERS = [1, 16, 64]
BATCHES = [1, 32]
QUICK = dict(sizes=[1024], producers=[1, 64], batches=[1, 32])
TOPIC = "BenchTopic"


@dataclass
class CellResult:
    role: str
    flush: str
    size: int
    producers: int
    batch: int
    messages: int = 0
    requests: int = 0
    elapsed_s: float = 0.0
    statuses: dict[str, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    lag_bytes_max: int = 0
    lag_bytes_p50: int = 0

    @property
    def msgs_per_s(self) -> float:
        return self.messages / self.elapsed_s if self.elapsed_s else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.msgs_per_s * self.size / 1e6

    def row(self) -> str:
        statuses = " ".join(f"{k}={v}" for k, v in sorted(self.statuses.items()))
        errors = " ".join(f"{k}={v}" for k, v in sorted(self.errors.items()))
        return (
            f"{self.role:<12} {self.flush:<11} {size_label(self.size):>6} {self.producers:>3}p b{self.batch:<3}"
            f" {self.msgs_per_s:>10,.0f} msgs/s {self.mb_per_s:>7.1f} MB/s"
            f"  p50 {self.p50_ms:>7.2f} ms  p99 {self.p99_ms:>7.2f} ms"
            f"  lag p50/max {self.lag_bytes_p50}/{self.lag_bytes_max} B  {statuses} {errors}"
        ).rstrip()


async def run_cell(endpoint: str, admin: AdminClient, cell: CellResult, seconds: float, max_messages: int) -> None:
    body = bytes(i % 251 for i in range(cell.size))
    latencies: list[float] = []
    lags: list[int] = []
    sent = 0
    stop_at = 0.0
    measuring = False

    async with AsyncProducer(endpoint, timeout_s=30) as producer:

        async def one_request() -> None:
            nonlocal sent
            started = time.perf_counter()
            try:
                if cell.batch == 1:
                    results = [await producer.send(TOPIC, body)]
                else:
                    results = await producer.send_batch(TOPIC, [ProducerMessage(body) for _ in range(cell.batch)])
            except Exception as exc:  # counted, never hidden
                name = type(exc).__name__
                cell.errors[name] = cell.errors.get(name, 0) + 1
                return
            if measuring:
                latencies.append((time.perf_counter() - started) * 1000)
                cell.requests += 1
                sent += len(results)
                for r in results:
                    cell.statuses[r.status.name] = cell.statuses.get(r.status.name, 0) + 1

        async def producer_task() -> None:
            while time.perf_counter() < stop_at and sent < max_messages:
                await one_request()

        async def lag_sampler() -> None:
            while time.perf_counter() < stop_at and sent < max_messages:
                await asyncio.sleep(0.1)  # a sampling period, not a wait for a condition
                status = await asyncio.to_thread(admin.status)
                slaves = status.get("slaves", [])
                if slaves:
                    lags.append(max(int(s["lag_bytes"]) for s in slaves))

        # Warm-up: connections, topic creation, first segments.
        stop_at = time.perf_counter() + min(0.5, seconds / 4)
        await asyncio.gather(*(producer_task() for _ in range(cell.producers)))
        measuring = True
        started = time.perf_counter()
        stop_at = started + seconds
        await asyncio.gather(lag_sampler(), *(producer_task() for _ in range(cell.producers)))
        cell.elapsed_s = time.perf_counter() - started
    cell.messages = sent
    ordered = sorted(latencies)
    cell.p50_ms, cell.p99_ms = percentile(ordered, 50), percentile(ordered, 99)
    if lags:
        cell.lag_bytes_max = max(lags)
        cell.lag_bytes_p50 = int(statistics.median(lags))


def measure_catch_up(run_dir: Path, size: int) -> dict:
    """Load a lone ASYNC_MASTER with `size` bytes, then time a fresh slave until it holds them."""
    cluster = LocalCluster(run_dir / "catch-up", master_role="ASYNC_MASTER", flush_disk_type="ASYNC_FLUSH", slaves=0)
    try:
        cluster.start()
        body = bytes(16 * 1024)

        async def load() -> None:
            async with AsyncProducer(cluster.master.client_endpoint) as producer:
                batch = [ProducerMessage(body) for _ in range(32)]

                async def task(n: int) -> None:
                    for _ in range(n):
                        await producer.send_batch(TOPIC, batch)

                per_task = max(1, size // (len(body) * 32 * 8))
                await asyncio.gather(*(task(per_task) for _ in range(8)))

        asyncio.run(load())
        started = time.monotonic()
        cluster.add_slave(1)
        if not poll_until(cluster.caught_up, 600):
            return {"error": "the slave did not catch up within 600 s"}
        elapsed = time.monotonic() - started
        total, _ = cluster.replication_progress()
        return {"bytes": total, "seconds": round(elapsed, 3), "mb_per_s": round(total / elapsed / 1e6, 1)}
    finally:
        cluster.stop()


def bench_arguments(p: argparse.ArgumentParser) -> None:
    """The benchmark's options."""
    p.add_argument("--quick", action="store_true", help="1 KiB only, 1 and 64 producers (the goal's cells)")
    p.add_argument(
        "--seconds", type=float, default=None, help="measured time of one cell (default 3; 1.5 with --quick)"
    )
    p.add_argument("--max-messages", type=int, default=2_000_000, help="message bound of one cell")
    p.add_argument("--modes", default="all", help="comma list of ROLE/FLUSH, e.g. SYNC_MASTER/SYNC_FLUSH (default all)")
    p.add_argument("--sizes", help="comma list of message sizes, e.g. 128,1KiB")
    p.add_argument("--producers", help="comma list of producer counts")
    p.add_argument("--batches", help="comma list of batch sizes")
    p.add_argument(
        "--catch-up-size", type=parse_size, default=256 * 1024 * 1024, help="bytes a new slave catches up on (0: skip)"
    )
    p.add_argument("--dir", type=Path, help="parent directory of the run (default: a disk-backed temp dir)")
    p.add_argument("--json", type=Path, metavar="PATH", help="also write the results as JSON to PATH")


def parse_args(argv) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.broker_bench", description=__doc__.splitlines()[0])
    bench_arguments(p)
    return finish_args(p, p.parse_args(argv))


def finish_args(p: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.Namespace:
    """Defaults that depend on other options, and the lists the comma options name."""
    if args.seconds is None:
        args.seconds = 1.5 if args.quick else 3.0
    if args.seconds <= 0 or args.max_messages <= 0:
        p.error("--seconds and --max-messages must be positive")
    defaults = QUICK if args.quick else dict(sizes=SIZES, producers=PRODUCERS, batches=BATCHES)
    args.size_list = [parse_size(x) for x in args.sizes.split(",")] if args.sizes else defaults["sizes"]
    args.producer_list = [int(x) for x in args.producers.split(",")] if args.producers else defaults["producers"]
    args.batch_list = [int(x) for x in args.batches.split(",")] if args.batches else defaults["batches"]
    if args.modes == "all":
        args.mode_list = MODES
    else:
        args.mode_list = []
        for text in args.modes.split(","):
            role, _, flush = text.partition("/")
            if (role, flush) not in MODES:
                p.error(f"--modes: {text!r} is not one of {', '.join(r + '/' + f for r, f in MODES)}")
            args.mode_list.append((role, flush))
    return args


def main(argv=None) -> int:
    return run_parsed(parse_args(argv))


def run_parsed(args: argparse.Namespace) -> int:
    parent = args.dir or default_parent_dir()
    with tempfile.TemporaryDirectory(prefix=".rocketstore-bench-", dir=parent) as tmp:
        run_dir = Path(tmp)
        env = environment(run_dir)
        print_environment(
            "RocketStore end-to-end benchmark (gRPC on 127.0.0.1, one master + one slave)",
            env,
            ("started", "git", "python", "machine", "filesystem"),
            11,
        )
        print(
            f"  cells      sizes {[size_label(s) for s in args.size_list]}, producers {args.producer_list},"
            f" batches {args.batch_list}, {args.seconds} s each"
        )
        results: list[CellResult] = []
        for role, flush in args.mode_list:
            progress(f"bench: starting {role} + {flush} master and slave")
            cluster = LocalCluster(run_dir / f"{role}-{flush}", master_role=role, flush_disk_type=flush, slaves=1)
            try:
                cluster.start()
                with AdminClient(cluster.master.client_endpoint, cluster.admin_secret()) as admin:
                    for size in args.size_list:
                        for producers in args.producer_list:
                            for batch in args.batch_list:
                                cell = CellResult(role, flush, size, producers, batch)
                                asyncio.run(
                                    run_cell(
                                        cluster.master.client_endpoint, admin, cell, args.seconds, args.max_messages
                                    )
                                )
                                results.append(cell)
                                print(cell.row(), flush=True)
            finally:
                cluster.stop()
        catch_up = measure_catch_up(run_dir, args.catch_up_size) if args.catch_up_size else None
        if catch_up is not None:
            print(
                f"catch-up: a new slave copied {catch_up.get('bytes', 0)} B in {catch_up.get('seconds')} s:"
                f" {catch_up.get('mb_per_s')} MB/s {catch_up.get('error', '')}".rstrip()
            )
        goal = _goal(results)
        if goal:
            print(goal)
        if args.json:
            args.json.write_text(
                json.dumps(
                    {
                        "environment": env,
                        "cells": [asdict(c) | {"msgs_per_s": c.msgs_per_s, "mb_per_s": c.mb_per_s} for c in results],
                        "catch_up": catch_up,
                    },
                    indent=2,
                )
            )
    return 0


def _goal(results: list[CellResult]) -> str:
    def find(role: str, flush: str) -> CellResult | None:
        return next(
            (c for c in results if (c.role, c.flush, c.size, c.producers, c.batch) == (role, flush, 1024, 64, 1)), None
        )

    sync, base = find("SYNC_MASTER", "SYNC_FLUSH"), find("ASYNC_MASTER", "ASYNC_FLUSH")
    if sync is None or base is None or not base.msgs_per_s:
        return ""
    ratio = sync.msgs_per_s / base.msgs_per_s
    return (
        f"goal: SYNC_MASTER+SYNC_FLUSH 64p 1KiB b1 = {sync.msgs_per_s:,.0f} msgs/s, {ratio:.0%} of"
        f" ASYNC_MASTER+ASYNC_FLUSH ({base.msgs_per_s:,.0f} msgs/s); target 60%"
    )


if __name__ == "__main__":
    sys.exit(main())
