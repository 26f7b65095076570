"""Benchmark of the `rocketstore` streaming source: latency from SEND_OK to a row in the file sink,
and throughput on a topic of 8 queues.

    python -m bench.pipeline_stream_bench [--rate 1000] [--seconds 30] [--backlog 200000]
                                          [--queues 8] [--trigger-s 1] [--master local[2]]

One broker on 127.0.0.1 (ASYNC_MASTER, ASYNC_FLUSH, no slave: SEND_OK as soon as the message is
stored), a topic of `--queues` queues, and a Structured Streaming query from the `rocketstore`
source into Spark's Parquet file sink on a `--trigger-s` processing-time trigger.

- Latency: after a warm-up batch, a producer sends `--rate` messages a second for `--seconds`
  (batches of `rate / 100` every 10 ms, queues in turn) and records the wall-clock time each
  SEND_OK came back; a watcher reads every batch the sink commits (`_spark_metadata/N`, then the
  Parquet files it lists) and takes the commit file's modification time as the moment the rows
  became visible. Latency = that moment - SEND_OK, per message: p50, p99, max.
- Throughput: `--backlog` messages produced first into another topic of the same queues, then a
  new query (Trigger.availableNow) reads them all: messages per second from the query's start to
  its last commit, and per batch what Spark's progress reports.

Prints its configuration, the load average before and after, and the figures; asserts nothing but
that every message sent reached the sink once.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq

from client import AdminClient, Producer
from harness.local_cluster import LocalCluster

from .common import default_parent_dir, environment, load_average, percentile

QUERY_TIMEOUT_S = 600


class SinkWatcher:
    """Follows a file sink's commits: (commit time, msg ids) per batch, each file read once."""

    def __init__(self, out: Path) -> None:
        self.log_dir = out / "_spark_metadata"
        self.seen_files: set[str] = set()
        self.seen_logs: set[str] = set()
        self.arrivals: dict[str, float] = {}
        self.duplicates = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "SinkWatcher":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.poll()

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.poll()

    def poll(self) -> None:
        if not self.log_dir.is_dir():
            return
        for entry in sorted(self.log_dir.iterdir(), key=lambda p: p.stat().st_mtime_ns):
            if entry.name in self.seen_logs or entry.name.startswith(".") or entry.name.endswith(".tmp"):
                continue
            committed = entry.stat().st_mtime
            lines = entry.read_text().splitlines()[1:]
            self.seen_logs.add(entry.name)
            for line in lines:
                path = json.loads(line)["path"]
                if path in self.seen_files:
                    continue  # a compacted log repeats what earlier logs listed
                self.seen_files.add(path)
                for msg_id in pq.read_table(path.removeprefix("file://"), columns=["msg_id"]).column(0).to_pylist():
                    if msg_id in self.arrivals:
                        self.duplicates += 1
                    self.arrivals.setdefault(msg_id, committed)


def start_query(spark, endpoint: str, topic: str, out: Path, checkpoint: Path, trigger: dict, **options):
    reader = spark.readStream.format("rocketstore").option("endpoint", endpoint).option("topics", topic)
    for name, value in options.items():
        reader = reader.option(name, str(value))
    return (
        reader.load()
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(**trigger)
        .start()
    )


def wait_for(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.05)


def measure_latency(spark, endpoint: str, topic: str, work: Path, args) -> None:
    watcher = SinkWatcher(work / "latency-out").start()
    query = start_query(
        spark,
        endpoint,
        topic,
        work / "latency-out",
        work / "latency-ck",
        {"processingTime": f"{args.trigger_s} seconds"},
    )
    sent: dict[str, float] = {}
    try:
        with Producer(endpoint) as producer:
            warm = producer.send(topic, b"warm-up", queue_id=0)
            wait_for(lambda: warm.msg_id in watcher.arrivals, QUERY_TIMEOUT_S, "the warm-up message in the sink")
            per_tick = max(1, args.rate // 100)
            ticks = int(args.seconds * 100)
            began = time.monotonic()
            for tick in range(ticks):
                target = began + tick / 100
                delay = target - time.monotonic()
                if delay > 0:
                    time.sleep(delay)  # pacing the producer, not waiting for a condition
                bodies = [b"%012d" % (tick * per_tick + i) * 8 for i in range(per_tick)]
                results = producer.send_batch(topic, bodies, queue_id=tick % args.queues)
                now = time.time()
                for result in results:
                    sent[result.msg_id] = now
            produced_s = time.monotonic() - began
        wait_for(lambda: all(m in watcher.arrivals for m in sent), QUERY_TIMEOUT_S, "every message in the sink")
    finally:
        query.stop()
        watcher.stop()
    latencies = sorted(watcher.arrivals[m] - t for m, t in sent.items())
    print(
        f"latency, SEND_OK to a row in the sink ({len(sent):,} messages at {len(sent) / produced_s:,.0f} msgs/s, "
        f"trigger {args.trigger_s} s): p50 {percentile(latencies, 50) * 1000:,.0f} ms, "
        f"p99 {percentile(latencies, 99) * 1000:,.0f} ms, max {max(latencies) * 1000:,.0f} ms; "
        f"duplicates in the sink {watcher.duplicates}",
        flush=True,
    )


def measure_throughput(spark, endpoint: str, topic: str, work: Path, args) -> None:
    began = time.monotonic()
    produced = 0
    with Producer(endpoint) as producer:
        while produced < args.backlog:
            count = min(args.batch, args.backlog - produced)
            bodies = [b"%012d" % (produced + i) * 8 for i in range(count)]
            assert all(r.ok for r in producer.send_batch(topic, bodies, queue_id=(produced // count) % args.queues))
            produced += count
    print(f"backlog: {produced:,} messages in {args.queues} queues produced in {time.monotonic() - began:.1f} s")
    watcher = SinkWatcher(work / "backlog-out").start()
    began = time.monotonic()
    query = start_query(
        spark,
        endpoint,
        topic,
        work / "backlog-out",
        work / "backlog-ck",
        {"availableNow": True},
        pullBatchSize=args.pull_batch,
    )
    try:
        assert query.awaitTermination(QUERY_TIMEOUT_S), "the query did not finish"
        seconds = time.monotonic() - began
        assert query.exception() is None, query.exception()
        progress = query.recentProgress
    finally:
        query.stop()
        watcher.stop()
    rows = len(watcher.arrivals)
    print(
        f"throughput, Trigger.availableNow over the backlog (pullBatchSize {args.pull_batch}): {rows:,} rows in "
        f"{seconds:.1f} s = {rows / seconds:,.0f} msgs/s (query start to last commit, {len(progress)} batch(es)); "
        f"duplicates {watcher.duplicates}",
        flush=True,
    )
    for p in progress:
        print(
            f"  batch {p['batchId']}: {p['numInputRows']:,} rows, {p.get('processedRowsPerSecond', 0):,.0f} rows/s "
            f"processed, durations {json.dumps(p.get('durationMs', {}))}"
        )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rate", type=int, default=1000, help="messages a second in the latency run")
    p.add_argument("--seconds", type=float, default=30)
    p.add_argument("--backlog", type=int, default=200_000, help="messages read in the throughput run")
    p.add_argument("--batch", type=int, default=256, help="messages per send in the backlog")
    p.add_argument("--pull-batch", type=int, default=256, help="the source's pullBatchSize in the throughput run")
    p.add_argument("--queues", type=int, default=8)
    p.add_argument("--trigger-s", type=float, default=1.0)
    p.add_argument("--master", default="local[2]")
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="pipeline-stream-bench-", dir=default_parent_dir()))
    env = environment(work)
    print(
        f"config: rate={args.rate}/s seconds={args.seconds} backlog={args.backlog} queues={args.queues} "
        f"trigger={args.trigger_s} s master={args.master} broker=ASYNC_MASTER+ASYNC_FLUSH cpus={os.cpu_count()} "
        f"git={env['git']}"
    )
    print(f"load average at start: {load_average()}", flush=True)
    cluster = LocalCluster(work / "broker", master_role="ASYNC_MASTER", flush_disk_type="ASYNC_FLUSH", slaves=0)
    try:
        cluster.start()
        endpoint = cluster.master.client_endpoint
        with AdminClient(endpoint, cluster.admin_secret()) as admin:
            for topic in ("StreamLatency", "StreamBacklog"):
                admin.create_topic(topic, queues=args.queues)
        from pipeline.spark import session

        spark = session(args.master)
        measure_latency(spark, endpoint, "StreamLatency", work, args)
        measure_throughput(spark, endpoint, "StreamBacklog", work, args)
        spark.stop()
    finally:
        cluster.stop()
        print(f"load average at end: {load_average()}")
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
