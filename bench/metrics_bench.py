"""What a Prometheus scrape costs (`python -m bench.metrics_bench`).

A SYNC_MASTER + SYNC_FLUSH master and one slave (`harness.local_cluster`) on 127.0.0.1 with
`metricsPort=0`; `--topics` topics of `--queues` queues, `--messages` 100-byte messages spread over
them and a consumer group's offsets in each (so the lag series exist); then `--scrapes` GETs of the
master's `/metrics`, one after another. Prints the configuration, the exposition's size and sample
count, and scrape latency p50/p99 with the machine's load average beside them.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import urllib.request
from pathlib import Path

from bench.common import default_parent_dir, git_revision
from client import AdminClient, Producer, PullConsumer
from harness.local_cluster import LocalCluster


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.metrics_bench", description=__doc__.splitlines()[0])
    p.add_argument("--topics", type=int, default=100, help="topics to create (default 100)")
    p.add_argument("--queues", type=int, default=8, help="queues per topic (default 8)")
    p.add_argument("--messages", type=int, default=2000, help="messages produced before scraping (default 2000)")
    p.add_argument("--scrapes", type=int, default=50, help="GETs of /metrics measured (default 50)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix=".rocketstore-bench-", dir=default_parent_dir()) as tmp:
        cluster = LocalCluster(Path(tmp) / "group", settings={"metricsPort": "0"}).start()
        try:
            master = cluster.master
            with AdminClient(master.client_endpoint, cluster.admin_secret()) as admin:
                for t in range(args.topics):
                    admin.create_topic(f"Bench{t}", args.queues)
            with Producer(master.client_endpoint) as producer:
                for i in range(args.messages):
                    producer.send(f"Bench{i % args.topics}", b"x" * 100)
            with PullConsumer(master.client_endpoint, group="bench-group") as consumer:
                for t in range(args.topics):
                    consumer.update_offset(f"Bench{t}", 0, 0)
            url = f"http://{master.ready['metrics']}/metrics"
            latencies, body = [], b""
            for _ in range(args.scrapes):
                started = time.perf_counter()
                with urllib.request.urlopen(url, timeout=10) as answer:
                    body = answer.read()
                latencies.append(time.perf_counter() - started)
        finally:
            cluster.stop()
    latencies.sort()
    samples = sum(1 for line in body.decode().splitlines() if line and not line.startswith("#"))
    p50 = latencies[len(latencies) // 2] * 1000
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000
    print(f"metrics bench at {git_revision()}: {args.topics} topics x {args.queues} queues, {args.messages} messages")
    print(f"  /metrics: {len(body)} bytes, {samples} samples")
    print(f"  scrape latency over {args.scrapes} scrapes: p50 {p50:.1f} ms, p99 {p99:.1f} ms")
    print(f"  load average {os.getloadavg()[0]:.2f} ({os.cpu_count()} CPUs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
