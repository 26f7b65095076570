"""The audit at scale gives what the audit over every row gave: its counts, error rows, duplicates
and queue-offset gaps equal those of Spark's group-by and window over the `rocketstore-commitlog`
rows of every store (the audit's former implementation, kept here as the oracle), for replicas
that are identical, lag, diverge, differ only in their checkpoints, or cannot be compared."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import pytest

from pipeline.audit import audit_replicas
from speclog import LogWriter, Msg
from store.recovery.checkpoint import CheckpointState, encode_checkpoint

EXAMPLES = 20
SEGMENT = 16384


def oracle(spark, master: Path, slaves: list[Path], up_to: int | None, master_end: int) -> dict:
    """The statistics the audit reports, computed over every row of every store."""
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window

    reader = spark.read.format("rocketstore-commitlog").option("paths", ",".join(map(str, [master, *slaves])))
    if up_to is not None:
        reader = reader.option("endOffset", str(up_to))
    df = reader.load()
    counts = [
        (r["broker"], r["topic"], r["count"])
        for r in df.where("error is null").groupBy("broker", "topic").count().orderBy("broker", "topic").collect()
    ]
    errors = [
        (r["broker"], r["physical_offset"], r["error"])
        for r in df.where("error is not null").orderBy("broker", "physical_offset").collect()
    ]
    bound = up_to if up_to is not None else master_end
    m = df.where((F.col("broker") == str(master)) & F.col("error").isNull() & (F.col("physical_offset") < bound))
    dups = (
        m.where(F.col("properties").getItem("UNIQ_KEY").isNotNull())
        .groupBy("topic", F.col("properties").getItem("UNIQ_KEY").alias("value"))
        .count()
        .where("count > 1")
        .withColumn("kind", F.lit("UNIQ_KEY"))
        .unionByName(
            m.where(F.col("keys").isNotNull() & (F.col("keys") != ""))
            .groupBy("topic", F.col("keys").alias("value"))
            .count()
            .where("count > 1")
            .withColumn("kind", F.lit("KEYS"))
        )
        .orderBy(F.desc("count"), "topic", "value", "kind")
        .collect()
    )
    queued = m.where(~F.col("sys_flag").bitwiseAND(12).isin(4, 12))
    w = Window.partitionBy("topic", "queue_id").orderBy("queue_offset")
    gaps = (
        queued.withColumn("previous", F.lag("queue_offset").over(w))
        .where(F.col("previous").isNotNull() & (F.col("queue_offset") != F.col("previous") + 1))
        .select("topic", "queue_id", "previous", "queue_offset")
        .orderBy("topic", "queue_id", "queue_offset", "previous")
        .collect()
    )
    return {
        "topic_counts": tuple(counts),
        "error_rows": tuple(errors[:EXAMPLES]),
        "error_count": len(errors),
        "duplicate_keys": tuple((r["topic"], r["kind"], r["value"], r["count"]) for r in dups[:EXAMPLES]),
        "duplicate_count": len(dups),
        "gaps": tuple(tuple(r) for r in gaps[:EXAMPLES]),
        "gap_count": len(gaps),
    }


def assert_matches_oracle(spark, master: Path, slaves: list[Path], up_to: int | None = None):
    report = audit_replicas(spark, str(master), [str(s) for s in slaves], up_to, partition_bytes=12_000)
    want = oracle(spark, master, slaves, up_to, report.replicas[0].master_end)
    got = {name: getattr(report, name) for name in want}
    assert got == want
    return report


def checkpoint(store: Path, flushed: int) -> None:
    (store / "checkpoint").write_bytes(encode_checkpoint(CheckpointState(physic_flushed_offset=flushed)))


def master_log() -> LogWriter:
    """Two topics over many small segments: duplicate UNIQ_KEYs and KEYS, a UNIQ_KEY stored twice
    in one record (the first is the map's), queue-offset gaps and repeats, transaction messages
    (prepared and rolled back take no queue offset), a corrupt record and a body CRC mismatch."""
    log = LogWriter(SEGMENT)
    next_offset: dict[tuple[str, int], int] = {}
    for i in range(400):
        topic, queue = f"A{i % 2}", i % 3
        key = (topic, queue)
        qoff = next_offset.get(key, 0) + (2 if i in (50, 51) else 0) - (1 if i == 90 else 0)
        sys_flag = 4 if i % 37 == 0 else 12 if i % 41 == 0 else 8 if i % 43 == 0 else 0
        next_offset[key] = qoff + (0 if sys_flag in (4, 12) else 1)
        props = {"UNIQ_KEY": f"U{i % 380}", "KEYS": f"k{i % 390}" if i % 5 else "", "TAGS": "t"}
        if i == 7:
            props["UNIQ_KEX"] = "SECOND"
        log.add(Msg(topic, bytes([i % 251]) * (20 + i % 60), queue, qoff, props, sys_flag=sys_flag))
    seg = log.offsets[7] - log.offsets[7] % SEGMENT
    raw = log.segments[seg]
    at = raw.find(b"\x02UNIQ_KEX\x01", log.offsets[7] - seg)
    raw[at + 1 : at + 9] = b"UNIQ_KEY"
    log.patch(log.offsets[200] + 90, b"\xee")  # a body byte: CRC mismatch, the row keeps its fields
    log.patch(log.offsets[300] + record_size(log, 300) - 1, b"\x41")  # properties without their last separator
    return log


def record_size(log: LogWriter, index: int) -> int:
    offset = log.offsets[index]
    seg = log.segments[offset - offset % log.segment_size]
    return struct.unpack_from(">i", seg, offset % log.segment_size)[0]


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    base = tmp_path_factory.mktemp("audit-scale")
    master = master_log().save(base / "master")
    checkpoint(master, 10**9)
    return base, master


def copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def test_identical_and_lagging_replicas(spark, stores):
    base, master = stores
    same = copy(master, base / "same")
    lag = copy(master, base / "lag")
    sorted((lag / "commitlog").iterdir())[-1].unlink()
    report = assert_matches_oracle(spark, master, [same, lag])
    assert report.identical and report.duplicate_count > 0 and report.gap_count > 0 and report.error_count > 2
    assert report.replicas[1].lag_bytes > 0
    report = assert_matches_oracle(spark, master, [lag], up_to=report.replicas[0].master_end)
    assert not report.identical


def test_a_divergent_replica_and_a_bound(spark, stores):
    base, master = stores
    bad = copy(master, base / "bad")
    seg = sorted((bad / "commitlog").iterdir())[2]
    data = bytearray(seg.read_bytes())
    data[100] ^= 0x20
    seg.write_bytes(bytes(data))
    report = assert_matches_oracle(spark, master, [bad])
    assert report.replicas[0].first_divergence == int(seg.name) + 100
    assert_matches_oracle(spark, master, [bad], up_to=int(seg.name) + 2000)


def test_a_torn_tail_read_by_checkpoints_that_differ(spark, tmp_path):
    """The same bytes, a last record half written: the master's checkpoint puts it above the
    flushed offset (a torn tail, the end of the log), the slave's below it (a corrupt record)."""
    log = LogWriter(SEGMENT)
    for i in range(60):
        log.add(Msg("T", b"x" * 50, 0, i, {"UNIQ_KEY": f"u{i}"}))
    last = log.offsets[-1]
    log.patch(last + 40, bytes(record_size(log, len(log.offsets) - 1) - 40))
    master = log.save(tmp_path / "m")
    checkpoint(master, last)
    slave = copy(master, tmp_path / "s")
    checkpoint(slave, last + 200)
    report = assert_matches_oracle(spark, master, [slave])
    assert report.error_count == 1 and report.error_rows[0][:2] == (str(slave), last)


def test_segment_sizes_that_differ(spark, stores):
    base, master = stores
    other = LogWriter(2 * SEGMENT)
    for i in range(30):
        other.add(Msg("A0", b"y" * 30, 0, i, {"KEYS": f"k{i}"}))
    slave = other.save(base / "other-size")
    report = assert_matches_oracle(spark, master, [slave])
    assert "segment sizes differ" in report.replicas[0].reason
