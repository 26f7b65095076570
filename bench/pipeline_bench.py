"""Benchmark of the Spark pipeline: scan, audit and rebuild rates on a synthetic store.

    python -m bench.pipeline_bench [--messages 1000000] [--body 120] [--master local[2]]

Writes a CommitLog of `--messages` messages (~200 B each by default: a 120-byte body, TAGS and
KEYS) into a temporary store (1 GiB segments by default, as RocketMQ), then measures, in the same
run: a single-process decode of the same files with the store's codec (check_record +
decode_checked: the baseline), the Spark source on `--master` into a noop sink with every column
and with a projected schema, the audit of the store against a copy of itself, and the offline
rebuild. Prints its configuration and every figure; asserts nothing.
"""

from __future__ import annotations

import argparse
import mmap
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from store.codec import CorruptMessage, RecordKind, check_record, decode_checked, encode_message
from store.message import Message

PROJECTED = "physical_offset bigint, topic string, queue_id int, queue_offset bigint, size int, store_timestamp bigint"


def write_store(root: Path, messages: int, body: int, segment_size: int) -> int:
    """Segments written directly (the put path is not what is measured); returns the bytes used."""
    log = root / "commitlog"
    log.mkdir(parents=True)
    offset = 0
    seg_start = 0
    seg = bytearray(segment_size)
    pos = 0
    template: dict[tuple[str, int], int] = {}  # the next queue offset per queue
    for i in range(messages):
        topic = f"Bench{i % 4}"
        msg = Message(topic, i % 8, (b"%010d" % i) * (body // 10), {"TAGS": f"tag{i % 10}", "KEYS": f"key{i}"})
        enc = encode_message(
            msg, default_store_host=("127.0.0.1", 10911), max_message_size=4 << 20, now_ms=1_700_000_000_000
        )
        if pos + enc.size > segment_size:
            seg[pos : pos + 8] = (segment_size - pos).to_bytes(4, "big") + (-875286124).to_bytes(4, "big", signed=True)
            (log / f"{seg_start:020d}").write_bytes(seg)
            seg_start += segment_size
            offset = seg_start
            seg = bytearray(segment_size)
            pos = 0
        qkey = (topic, i % 8)
        enc.stamp(offset, template.get(qkey, 0), 1_700_000_000_000 + i)
        template[qkey] = template.get(qkey, 0) + 1
        seg[pos : pos + enc.size] = enc.buf
        pos += enc.size
        offset += enc.size
    (log / f"{seg_start:020d}").write_bytes(seg)
    return offset


def baseline_decode(root: Path, segment_size: int) -> int:
    count = 0
    for path in sorted((root / "commitlog").iterdir()):
        start = int(path.name)
        with open(path, "rb") as f:
            buf = mmap.mmap(f.fileno(), segment_size, access=mmap.ACCESS_READ)
        pos = 0
        while pos < segment_size:
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
    return count


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--messages", type=int, default=1_000_000)
    p.add_argument("--body", type=int, default=120)
    p.add_argument("--segment-size", type=int, default=1 << 30)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--partition-bytes", type=int, default=32 << 20)
    p.add_argument("--skip-baseline", action="store_true")
    p.add_argument("--dir", help="work directory (default: a temporary one, removed after)")
    args = p.parse_args(argv)

    work = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="pipeline-bench-"))
    root = work / "store"
    print(
        f"config: messages={args.messages} body={args.body} B segment={args.segment_size} B "
        f"master={args.master} partitionBytes={args.partition_bytes} cpus={os.cpu_count()} "
        f"python={sys.version.split()[0]}"
    )
    try:
        t = time.perf_counter()
        used = write_store(root, args.messages, args.body, args.segment_size)
        print(
            f"wrote {used / 1e6:.1f} MB ({used / args.messages:.0f} B/message) in {time.perf_counter() - t:.1f} s",
            file=sys.stderr,
        )
        mb = used / 1e6

        def line(what: str, seconds: float, count: int) -> None:
            print(f"{what:44s} {seconds:7.2f} s  {count / seconds:12,.0f} msgs/s  {mb / seconds:8.1f} MB/s")

        if not args.skip_baseline:
            t = time.perf_counter()
            n = baseline_decode(root, args.segment_size)
            line("single-process decode (store.codec)", time.perf_counter() - t, n)

        from pipeline.spark import session

        spark = session(args.master, shuffle_partitions=4)
        reader = spark.read.format("rocketstore-commitlog").option("partitionBytes", str(args.partition_bytes))
        for label, df in (
            ("spark scan, all columns, CRC checked", reader.load(str(root))),
            ("spark scan, all columns, no CRC", reader.option("verifyCrc", "false").load(str(root))),
            (
                "spark scan, 6 columns, no CRC",
                spark.read.format("rocketstore-commitlog")
                .schema(PROJECTED)
                .option("partitionBytes", str(args.partition_bytes))
                .option("verifyCrc", "false")
                .load(str(root)),
            ),
        ):
            df.write.format("noop").mode("overwrite").save()  # warm-up: JVM, workers
            t = time.perf_counter()
            df.write.format("noop").mode("overwrite").save()
            line(label, time.perf_counter() - t, args.messages)

        from pipeline.audit import audit_replicas
        from pipeline.rebuild import rebuild_store

        copy = work / "copy"
        shutil.copytree(root, copy)
        t = time.perf_counter()
        report = audit_replicas(spark, str(root), [str(copy)])
        line(f"audit vs a copy (identical={report.identical})", time.perf_counter() - t, args.messages)
        t = time.perf_counter()
        rebuilt = rebuild_store(root, work / "rebuilt")
        line(f"rebuild ConsumeQueues + IndexFiles ({rebuilt.queues} queues)", time.perf_counter() - t, rebuilt.messages)
        spark.stop()
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
