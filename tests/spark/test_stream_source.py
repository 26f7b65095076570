"""The `rocketstore` streaming source against a running master and slave: Trigger.availableNow
under maxMessagesPerTrigger, exactly-once Parquet across a restart that replays an uncommitted
batch, startingOffsets latest, reading from the slave, a failing query's error, and the
`pipeline stream` command."""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter

import pytest

from client import Producer, PullConsumer
from harness.local_cluster import LocalCluster
from pipeline.stream_source import lag_from_progress, register
from rocketstore.commands.common import CommandError
from rocketstore.commands.pipeline_stream import add_stream_arguments, query_error_line, run_stream
from stream_support import QUERY_TIMEOUT_S, stream
from support import BROKER_TEST_SETTINGS

SETTINGS = BROKER_TEST_SETTINGS
QUEUES = 4  # defaultTopicQueueNums


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = LocalCluster(
        tmp_path_factory.mktemp("stream-cluster"),
        master_role="ASYNC_MASTER",
        flush_disk_type="ASYNC_FLUSH",
        slaves=1,
        settings=dict(SETTINGS),
    )
    try:
        yield cluster.start()
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def rs(spark):
    register(spark)
    return spark


def produce(endpoint: str, topic: str, count: int, first: int = 0) -> dict[str, bytes]:
    """`count` messages spread over the topic's queues; msg_id -> body."""
    sent = {}
    with Producer(endpoint) as producer:
        for i in range(first, first + count):
            body = f"{topic}-{i}".encode()
            result = producer.send(
                topic, body, tag=f"t{i % 2}", keys=[f"k{i}"], properties={"n": str(i)}, queue_id=i % QUEUES
            )
            assert result.ok
            sent[result.msg_id] = body
    return sent


def rows_of(spark, out):
    return spark.read.parquet(str(out)).collect()


def assert_exactly_once(rows, sent: dict[str, bytes]) -> None:
    keys = Counter((r.topic, r.broker_name, r.queue_id, r.queue_offset) for r in rows)
    assert max(keys.values()) == 1, [k for k, n in keys.items() if n > 1]
    ids = Counter(r.msg_id for r in rows)
    assert max(ids.values()) == 1
    assert {r.msg_id: bytes(r.body) for r in rows} == sent


def test_available_now_with_a_cap_then_a_restart_reads_each_message_once(rs, cluster, tmp_path):
    ep = cluster.master.client_endpoint
    sent = produce(ep, "StreamA", 30) | produce(ep, "StreamB", 6)
    out, ck = tmp_path / "out", tmp_path / "ck"
    progress = stream(rs, ep, "StreamA,StreamB", out, ck, maxMessagesPerTrigger=12, group="spark-stream")
    counts = [p["numInputRows"] for p in progress]
    assert counts == [12, 12, 12], counts
    assert [lag_from_progress(p).total for p in progress] == [24, 12, 0]  # the lag each batch left
    last = progress[-1]["sources"][0]
    assert json.loads(last["endOffset"]) == json.loads(last["latestOffset"])  # no lag left
    assert json.loads(last["endOffset"])["StreamA"] == {
        "broker-a:0": 8,
        "broker-a:1": 8,
        "broker-a:2": 7,
        "broker-a:3": 7,
    }
    rows = rows_of(rs, out)
    assert_exactly_once(rows, sent)
    row = next(r for r in rows if r.topic == "StreamA" and r.queue_id == 1 and r.queue_offset == 2)
    assert (bytes(row.body), row.tags, row.keys, row.properties) == (b"StreamA-9", "t1", "k9", {"n": "9"})
    assert row.store_timestamp >= row.born_timestamp > 0 and row.commit_log_offset >= 0
    assert row.store_host and row.born_host and row.reconsume_times == 0
    # the broker's group offsets trail the checkpoint by at most one batch (Spark commits a batch
    # to the source when it plans the next one)
    with PullConsumer(ep, group="spark-stream") as consumer:
        committed = {q: consumer.get_offset("StreamA", q) for q in range(QUEUES)}
    assert all(c is not None and 0 < c <= 8 for c in committed.values()), committed

    # A crash after batch N's offsets were logged but before it was committed: the restart replays
    # N over the same range, then reads what arrived since.
    commits = sorted(int(p.name) for p in (ck / "commits").iterdir() if p.name.isdigit())
    replayed = commits[-1]
    for name in (str(replayed), f".{replayed}.crc"):
        (ck / "commits" / name).unlink(missing_ok=True)
    sent |= produce(ep, "StreamA", 12, first=30)
    progress = stream(rs, ep, "StreamA,StreamB", out, ck, maxMessagesPerTrigger=12, group="spark-stream")
    assert [p["batchId"] for p in progress] == [replayed, replayed + 1]
    assert progress[0]["sources"][0]["endOffset"] == last["endOffset"]  # the same range again
    assert progress[1]["numInputRows"] == 12
    assert_exactly_once(rows_of(rs, out), sent)


def test_starting_offsets_latest(rs, cluster, tmp_path):
    ep = cluster.master.client_endpoint
    produce(ep, "StreamL", 5)
    out, ck = tmp_path / "out", tmp_path / "ck"
    progress = stream(rs, ep, "StreamL", out, ck, startingOffsets="latest")
    assert sum(p["numInputRows"] for p in progress) == 0
    later = produce(ep, "StreamL", 3, first=5)
    stream(rs, ep, "StreamL", out, ck, startingOffsets="latest")
    assert_exactly_once(rows_of(rs, out), later)


def test_reads_from_a_slave(rs, cluster, tmp_path):
    sent = produce(cluster.master.client_endpoint, "StreamS", 10)
    slave = cluster.slave_brokers[0].client_endpoint
    deadline = time.monotonic() + 30
    with PullConsumer(slave) as consumer:
        for _ in range(3000):  # the slave serves what it replicated and dispatched
            if sum(consumer.query_offset("StreamS", q, "END") for q in consumer.queues("StreamS")) >= 10:
                break
            assert time.monotonic() < deadline, "the slave did not catch up"
            time.sleep(0.01)
    out = tmp_path / "out"
    stream(rs, slave, "StreamS", out, tmp_path / "ck", maxMessagesPerTrigger=6)
    assert_exactly_once(rows_of(rs, out), sent)


def test_a_checkpoint_ahead_of_the_broker_fails_the_query_clearly(rs, cluster, tmp_path):
    ep = cluster.master.client_endpoint
    produce(ep, "StreamX", 4)
    query = (
        rs.readStream.format("rocketstore")
        .option("endpoint", ep)
        .option("topics", "StreamX")
        .option("startingOffsets", '{"StreamX": {"0": 1000}}')
        .load()
        .writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        with pytest.raises(Exception, match=r"queue StreamX:broker-a:0 lost offsets \[1, 1000\)"):
            query.awaitTermination(QUERY_TIMEOUT_S)
    finally:
        query.stop()
    # the one line `pipeline stream` prints for it
    assert query_error_line(str(query.exception())).startswith(
        "rocketstore: queue StreamX:broker-a:0 lost offsets [1, 1000)"
    )


def cli_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="rocketstore pipeline stream")
    add_stream_arguments(parser)
    args = parser.parse_args(argv)
    args.spark_master = "local[2]"
    return args


def test_cli_streams_to_parquet_and_reports_lag(rs, cluster, tmp_path, capsys):
    ep = cluster.master.client_endpoint
    sent = produce(ep, "StreamC", 9)
    argv = [
        "--endpoint",
        ep,
        "--topics",
        "StreamC",
        "--out-dir",
        str(tmp_path / "out"),
        "--checkpoint-dir",
        str(tmp_path / "ck"),
        "--max-messages-per-trigger",
        "5",
        "--json",
    ]
    assert run_stream(cli_args(*argv)) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert (summary["messages"], summary["lag_total"], summary["stopped"], summary["error"]) == (
        9,
        0,
        "caught up with the broker",
        None,
    )
    assert summary["batches"] == 2
    assert summary["end_offsets"] == {
        "StreamC:broker-a:0": 3,
        "StreamC:broker-a:1": 2,
        "StreamC:broker-a:2": 2,
        "StreamC:broker-a:3": 2,
    }
    assert "pipeline stream: batch" in captured.err and "lag" in captured.err
    assert_exactly_once(rows_of(rs, tmp_path / "out"), sent)
    # partitioned by topic
    assert (tmp_path / "out" / "topic=StreamC").is_dir()
    # nothing new: no batch, the end offsets come from the checkpoint
    assert run_stream(cli_args(*argv)) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["messages"], summary["lag_total"], summary["end_offsets"]["StreamC:broker-a:0"]) == (0, 0, 3)


def test_cli_fails_fast_on_an_unreachable_broker(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = cli_args(
        "--endpoint",
        f"127.0.0.1:{port}",
        "--topics",
        "T",
        "--out-dir",
        str(tmp_path / "o"),
        "--checkpoint-dir",
        str(tmp_path / "c"),
        "--request-timeout-s",
        "2",
    )
    with pytest.raises(CommandError, match=f"cannot reach the broker at 127.0.0.1:{port}"):
        run_stream(args)
    with pytest.raises(SystemExit):  # a usage error
        cli_args("--endpoint", "127.0.0.1", "--topics", "T", "--out-dir", "o", "--checkpoint-dir", "c")
    with pytest.raises(CommandError, match="--run-seconds goes with"):
        run_stream(cli_args("--topics", "T", "--out-dir", "o", "--checkpoint-dir", "c", "--run-seconds", "3"))
