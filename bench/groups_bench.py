"""Produce throughput over 1, 2 and 3 broker groups of one cluster (`python -m bench.groups_bench`).

Set-up per cell: one etcd (`harness.local_etcd`) and N static groups of the same
cluster on 127.0.0.1 (`harness.local_cluster`: a SYNC_MASTER + SYNC_FLUSH master and one slave
each, registered in etcd); a topic of `--queues` queues on every group. Then `--producers`
asyncio tasks share one `AsyncProducer` (which spreads over every group's queues from the route)
and send `--size`-byte messages for `--seconds` (at most `--max-messages`) after a one-second
warm-up. Printed per cell: msgs/s, MB/s, p50/p99 send latency (to the acknowledgement), each
group's share, and the machine's load average. All groups share this machine's cores and disk,
so the figures show the routing's overhead, not scaling; the last line is a paper estimate of N
groups on N machines from the one-group figure.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import tempfile
import time
from pathlib import Path

from bench.common import default_parent_dir, git_revision
from client import AdminClient, AsyncProducer
from harness.local_cluster import LocalCluster, write_secret
from harness.local_etcd import EtcdServer

TOPIC = "GroupsBench"


def start_groups(base: Path, etcd: EtcdServer, count: int, queues: int) -> tuple[list[LocalCluster], bytes]:
    secret = write_secret(base / "secret")
    settings = {
        "brokerClusterName": "BenchCluster",
        "etcdEndpoints": etcd.endpoint,
        "etcdPrefix": f"/bench-{count}",
        "haSecretFile": str(secret),
        "clusterRouteRefreshInterval": "200",
    }
    groups = []
    for i in range(count):
        group = LocalCluster(base / f"g{i}", slaves=1, settings=dict(settings), broker_name=f"broker-{chr(97 + i)}")
        group.secret_file = secret
        groups.append(group.start())
    for group in groups:
        with AdminClient(group.master.client_endpoint, group.admin_secret()) as admin:
            admin.create_topic(TOPIC, queues)
    return groups, secret.read_bytes()


async def produce(endpoint: str, groups: int, args) -> dict:
    body = b"x" * args.size
    latencies: list[float] = []
    shares: collections.Counter = collections.Counter()
    async with AsyncProducer(endpoint, route_refresh_s=0.5) as producer:
        # Until the route names every group (the registry's first rounds).
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            seen = {(await producer.send(TOPIC, body)).broker_name for _ in range(4 * groups)}
            if groups == 1 or len(seen) == groups:
                break
            await asyncio.sleep(0.2)
        sent = 0
        measuring = False
        stop_at = time.monotonic() + 1 + args.seconds

        async def worker() -> None:
            nonlocal sent
            while time.monotonic() < stop_at and sent < args.max_messages:
                started = time.perf_counter()
                result = await producer.send(TOPIC, body)
                if measuring:
                    latencies.append(time.perf_counter() - started)
                    shares[result.broker_name or "broker-a"] += 1
                    sent += 1

        async def clock() -> None:
            nonlocal measuring
            await asyncio.sleep(1)
            measuring = True

        began = time.monotonic() + 1
        await asyncio.gather(clock(), *(worker() for _ in range(args.producers)))
        elapsed = time.monotonic() - began
    latencies.sort()
    return {
        "msgs": len(latencies),
        "rate": len(latencies) / elapsed,
        "p50": latencies[len(latencies) // 2] * 1000 if latencies else 0.0,
        "p99": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000 if latencies else 0.0,
        "shares": dict(sorted(shares.items())),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.groups_bench", description=__doc__.splitlines()[0])
    p.add_argument("--groups", default="1,2,3", help="comma list of group counts (default 1,2,3)")
    p.add_argument("--producers", type=int, default=16, help="concurrent sends (default 16)")
    p.add_argument("--size", type=int, default=1024, help="message size in bytes (default 1024)")
    p.add_argument("--queues", type=int, default=8, help="queues of the topic on each group (default 8)")
    p.add_argument("--seconds", type=float, default=5.0, help="measured seconds per cell (default 5)")
    p.add_argument("--max-messages", type=int, default=200_000, help="message bound of one cell")
    args = p.parse_args(argv)
    counts = [int(c) for c in args.groups.split(",")]
    print(
        f"groups bench at {git_revision()}: SYNC_MASTER + SYNC_FLUSH, 1 slave per group, {args.producers} "
        f"producers, {args.size} B, {args.queues} queues per group, {args.seconds:g} s per cell; "
        f"{os.cpu_count()} CPUs"
    )
    results = {}
    with tempfile.TemporaryDirectory(prefix=".rocketstore-bench-", dir=default_parent_dir()) as tmp:
        etcd = EtcdServer(Path(tmp) / "etcd")
        etcd.start()
        try:
            for count in counts:
                groups, _ = start_groups(Path(tmp) / f"n{count}", etcd, count, args.queues)
                try:
                    load = os.getloadavg()[0]
                    result = asyncio.run(produce(groups[0].master.client_endpoint, count, args))
                finally:
                    for group in groups:
                        group.stop()
                results[count] = result
                print(
                    f"  {count} group(s): {result['rate']:8.0f} msgs/s {result['rate'] * args.size / 1e6:6.2f} MB/s "
                    f"p50 {result['p50']:6.1f} ms p99 {result['p99']:6.1f} ms  shares {result['shares']}  "
                    f"(load before {load:.2f})"
                )
        finally:
            etcd.stop()
    if 1 in results:
        one = results[1]["rate"]
        estimate = ", ".join(f"{n} groups ~{one * n:.0f} msgs/s" for n in (2, 3, 4))
        print(f"  paper estimate, one group per machine and clients not the limit: {estimate}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
