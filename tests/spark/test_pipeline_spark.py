"""The Spark pipeline end to end: the commitlog source over stores written by MessageStore and
over CommitLogs written from the spec (speclog), the replica audit, the rebuild (byte-compared
with the broker's own files), export, and the CLI."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest

from pipeline.audit import audit_replicas
from pipeline.export import export_topics
from pipeline.rebuild import rebuild_store
from speclog import LogWriter, Msg
from store import Message, MessageStore, StoreConfig

SEG = 64 * 1024


def make_store(root: Path, count: int, *, topics=("TA", "TB")) -> Path:
    config = StoreConfig(
        store_path_root_dir=str(root),
        mapped_file_size_commit_log=SEG,
        mapped_file_size_consume_queue=20480,
        max_hash_slot_num=512,
        max_index_num=2048,
    )
    with MessageStore(config) as store:
        for i in range(count):
            props = {"TAGS": f"tag{i % 3}", "KEYS": f"key{i}"}
            store.put_message(Message(topics[i % len(topics)], i % 4, b"body-%05d" % i * (1 + i % 9), props))
        assert store.wait_dispatched()
    return root


def read(spark, *paths, **options):
    reader = spark.read.format("rocketstore-commitlog")
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load(list(map(str, paths)) if len(paths) > 1 else str(paths[0]))


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory):
    return make_store(tmp_path_factory.mktemp("store"), 1500)


def test_scan_of_a_store_matches_its_messages(spark, store_dir):
    df = read(spark, store_dir, partitionBytes=10_000)
    rows = df.orderBy("physical_offset").collect()
    assert len(rows) == 1500
    assert all(r["error"] is None and r["body_crc_ok"] for r in rows)
    with MessageStore(
        StoreConfig(
            store_path_root_dir=str(store_dir),
            mapped_file_size_commit_log=SEG,
            mapped_file_size_consume_queue=20480,
            max_hash_slot_num=512,
            max_index_num=2048,
        )
    ) as store:
        expected = list(store.iter_messages())
    assert [r["physical_offset"] for r in rows] == [m.physical_offset for m in expected]
    for r, m in zip(rows, expected):
        assert (r["topic"], r["queue_id"], r["queue_offset"], bytes(r["body"]), r["msg_id"], r["tags"], r["keys"]) == (
            m.topic,
            m.queue_id,
            m.queue_offset,
            m.body,
            m.msg_id,
            m.tags,
            m.keys,
        )
        assert dict(r["properties"]) == dict(m.properties)
        assert r["store_timestamp"] == m.store_timestamp_ms and r["broker"] == str(store_dir)
    # a column subset, a topic filter and an offset range
    sub = read(
        spark, store_dir, topics="TB", startOffset=rows[10]["physical_offset"], endOffset=rows[20]["physical_offset"]
    )
    picked = (
        spark.read.format("rocketstore-commitlog")
        .schema("physical_offset bigint, queue_id int")
        .option("topics", "TB")
        .option("startOffset", rows[10]["physical_offset"])
        .option("endOffset", rows[20]["physical_offset"])
        .load(str(store_dir))
        .collect()
    )
    want = [r["physical_offset"] for r in rows[10:20] if r["topic"] == "TB"]
    assert sorted(r["physical_offset"] for r in sub.collect()) == want
    assert sorted(r["physical_offset"] for r in picked) == want and picked[0].__fields__ == [
        "physical_offset",
        "queue_id",
    ]


def spec_log(tmp_path: Path) -> tuple[Path, LogWriter, dict]:
    log = LogWriter(8192)
    marks = {}
    for i in range(120):
        m = Msg(
            topic=f"S{i % 2}",
            body=bytes([i % 256]) * (50 + i * 7 % 300),
            queue_id=i % 3,
            queue_offset=i // 3,
            properties={"TAGS": "t", "KEYS": f"k{i}", "UNIQ_KEY": f"U{i}"} if i % 4 else {},
            born=("2001:db8::7", 4000 + i) if i % 5 == 0 else ("10.1.2.3", 5555),
            store=("fe80::2", 10911) if i % 7 == 0 else ("10.9.9.9", 10911),
        )
        log.add(m)
    offsets = log.offsets
    marks["crc"] = offsets[30]
    log.patch(offsets[30] + 120, b"\xee")  # in the body: CRC mismatch
    marks["smashed"] = offsets[60]
    log.patch(offsets[60], b"\x00\x00\x00\x07\x00\x00\x00\x00")  # header gone: resync at the next record
    marks["torn"] = offsets[-1]
    size = struct.unpack(">i", bytes(log.segments[offsets[-1] - offsets[-1] % 8192][offsets[-1] % 8192 :][:4]))[0]
    log.patch(offsets[-1] + 40, bytes(size - 40))  # the last record half written
    return log.save(tmp_path / "spec"), log, marks


def test_a_clusters_stores_read_together_carry_their_group_names(spark, store_dir, tmp_path):
    other = make_store(tmp_path / "b", 300, topics=("TA",))
    df = (
        spark.read.format("rocketstore-commitlog")
        .option("brokers", json.dumps({"broker-a": str(store_dir), "broker-b": str(other)}))
        .load()
    )
    counts = {r["broker_name"]: r["count"] for r in df.groupBy("broker_name").count().collect()}
    assert counts == {"broker-a": 1500, "broker-b": 300}
    by_topic = df.where("topic = 'TA'").groupBy("broker_name").count().collect()
    assert {r["broker_name"]: r["count"] for r in by_topic} == {"broker-a": 750, "broker-b": 300}
    # A pruned schema with the name only, a plain path beside named ones, and the NAME=DIR form.
    pruned = (
        spark.read.format("rocketstore-commitlog")
        .schema("broker_name string, physical_offset bigint")
        .option("brokers", f"broker-b={other}")
        .load(str(store_dir))
    )
    names = {r["broker_name"]: r["count"] for r in pruned.groupBy("broker_name").count().collect()}
    assert names == {"": 1500, "broker-b": 300}
    with pytest.raises(Exception, match="expected NAME=DIR"):
        spark.read.format("rocketstore-commitlog").option("brokers", "no-directory").load().count()


def test_spec_written_log_blank_ends_ipv6_torn_tail_and_corruption(spark, tmp_path):
    root, log, marks = spec_log(tmp_path)
    assert len(log.segments) > 3  # segments ended with blank records
    rows = {r["physical_offset"]: r for r in read(spark, root, partitionBytes=3000).collect()}
    good = [o for o in log.offsets if o not in (marks["crc"], marks["smashed"], marks["torn"])]
    assert all(rows[o]["error"] is None for o in good)
    assert rows[marks["crc"]]["error"] == "body CRC mismatch" and rows[marks["crc"]]["topic"] == "S0"
    assert "skipped" in rows[marks["smashed"]]["error"]
    assert marks["torn"] not in rows  # a torn tail ends the log
    assert len(rows) == len(good) + 2
    v6 = rows[log.offsets[0]]
    assert v6["born_host"] == "[2001:db8::7]:4000" and v6["store_host"] == "[fe80::2]:10911" and len(v6["msg_id"]) == 56
    assert (
        rows[log.offsets[1]]["store_host"] == "10.9.9.9:10911"
        and dict(rows[log.offsets[1]]["properties"])["UNIQ_KEY"] == "U1"
    )
    reported = read(spark, root, tornTail="report").where("error like 'torn tail%'").collect()
    assert [r["physical_offset"] for r in reported] == [marks["torn"]]


def copy_store(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def test_audit_identical_lagging_and_divergent(spark, store_dir, tmp_path):
    same = copy_store(store_dir, tmp_path / "same")
    lag = copy_store(store_dir, tmp_path / "lag")
    segs = sorted((lag / "commitlog").iterdir())
    segs[-1].unlink()  # the slave has not received the last segment yet
    report = audit_replicas(spark, str(store_dir), [str(same), str(lag)])
    assert report.ok and report.identical
    assert report.replicas[1].lag_bytes > 0 and report.replicas[0].lag_bytes == 0
    assert ("%s" % store_dir, "TA", 750) in report.topic_counts
    assert report.gap_count == 0 and report.error_count == 0

    bad = copy_store(store_dir, tmp_path / "bad")
    seg = sorted((bad / "commitlog").iterdir())[1]
    data = bytearray(seg.read_bytes())
    data[5000] ^= 0x40
    seg.write_bytes(bytes(data))
    divergence = int(seg.name) + 5000
    report = audit_replicas(spark, str(store_dir), [str(bad)])
    assert not report.ok and report.replicas[0].first_divergence == divergence
    assert any(b.offset <= divergence < b.offset + (b.size or 0) for b in report.replicas[0].master_context)

    # an acknowledged offset the lagging slave does not hold is a divergence
    end = report.replicas[0].master_end
    report = audit_replicas(spark, str(store_dir), [str(lag)], up_to=end)
    assert not report.identical and "below the acknowledged offset" in report.replicas[0].reason


def test_audit_finds_gaps_and_duplicates(spark, tmp_path):
    log = LogWriter(8192)
    for i, qoff in enumerate([0, 1, 2, 4, 5]):
        log.add(Msg(topic="G", body=b"x", queue_offset=qoff, properties={"UNIQ_KEY": "same" if i < 2 else f"u{i}"}))
    master = log.save(tmp_path / "m")
    slave = copy_store(master, tmp_path / "s")
    report = audit_replicas(spark, str(master), [str(slave)])
    assert report.identical and not report.ok
    assert report.gaps == (("G", 0, 2, 4),)
    assert report.duplicate_keys == (("G", "UNIQ_KEY", "same", 2),)


def test_rebuild_is_byte_identical_to_the_broker(store_dir, tmp_path):
    out = tmp_path / "rebuilt"
    report = rebuild_store(store_dir, out, consume_queue_file_size=20480, hash_slot_num=512, index_num=2048)
    assert report.ok and report.messages == 1500
    for name in ("consumequeue",):
        want = sorted(p.relative_to(store_dir / name) for p in (store_dir / name).rglob("*") if p.is_file())
        got = sorted(p.relative_to(out / name) for p in (out / name).rglob("*") if p.is_file())
        assert got == want
        for rel in want:
            assert (out / name / rel).read_bytes() == (store_dir / name / rel).read_bytes(), rel
    want_index = [p.read_bytes() for p in sorted((store_dir / "index").iterdir())]
    got_index = [p.read_bytes() for p in sorted((out / "index").iterdir())]
    assert len(want_index) >= 1 and got_index == want_index


def test_export_parquet_by_topic_and_date(spark, store_dir, tmp_path):
    out = tmp_path / "export"
    report = export_topics(spark, [str(store_dir)], str(out), topics=["TA"])
    assert report.rows == 750 and report.error_rows == 0
    assert [p[0] for p in report.partitions] == ["TA"]
    back = spark.read.parquet(str(out))
    assert back.count() == 750 and {r["topic"] for r in back.select("topic").distinct().collect()} == {"TA"}
    assert list(out.glob("topic=TA/date=*/*.parquet"))


def run_cli(monkeypatch, capsys, argv):
    import rocketstore.cli as cli

    code = cli.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_end_to_end(spark, store_dir, tmp_path, monkeypatch, capsys):
    code, out, err = run_cli(
        monkeypatch, capsys, ["pipeline", "--master", "local[2]", "scan", "--store-dir", str(store_dir), "--json"]
    )
    assert code == 0, err
    assert json.loads(out)["messages"] == 1500
    root, _, _ = spec_log(tmp_path)
    code, out, _ = run_cli(monkeypatch, capsys, ["pipeline", "scan", "--store-dir", str(root)])
    assert code == 1 and "RESULT: PROBLEMS FOUND" in out and "body CRC mismatch" in out
    same = copy_store(store_dir, tmp_path / "same")
    code, out, _ = run_cli(monkeypatch, capsys, ["pipeline", "audit", "--master", str(store_dir), "--slave", str(same)])
    assert code == 0 and "IDENTICAL" in out
    code, out, _ = run_cli(
        monkeypatch,
        capsys,
        [
            "pipeline",
            "rebuild",
            "--store-dir",
            str(store_dir),
            "--out-dir",
            str(tmp_path / "r"),
            "--consume-queue-file-size",
            "20480",
            "--hash-slot-num",
            "512",
            "--index-num",
            "2048",
        ],
    )
    assert code == 0 and "1500 messages" in out
    code, out, err = run_cli(
        monkeypatch, capsys, ["pipeline", "rebuild", "--store-dir", str(store_dir), "--out-dir", str(tmp_path / "r")]
    )
    assert code == 1 and "already holds files" in err and err.count("\n") == 1
    code, _, err = run_cli(monkeypatch, capsys, ["pipeline", "scan", "--store-dir", str(tmp_path / "nope")])
    assert code == 2
    code, out, _ = run_cli(
        monkeypatch, capsys, ["pipeline", "export", "--store-dir", str(store_dir), "--out-dir", str(tmp_path / "e")]
    )
    assert code == 0 and "Exported 1500 messages" in out
