"""The pipeline on a real Spark cluster: a standalone master and two workers on 127.0.0.1, started
from the PySpark installation itself. `rocketstore pipeline --master spark://...` scans, audits and
rebuilds with the same results as local mode, its executors given half a gigabyte audit a store
several times that size, and nothing of the cluster listens beyond loopback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.pipeline_store import write_store
from pipeline.walk import hop_chain
from standalone import StandaloneCluster, listening_addresses
from support import run_cli

pytestmark = pytest.mark.timeout(1200)  # JVMs on a shared 2-core machine: generous, never tight
CLI_TIMEOUT_S = 900
LOOPBACK = {"0100007F", "00000000000000000000000001000000", "0000000000000000FFFF00000100007F"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    spark_cluster = StandaloneCluster(tmp_path_factory.mktemp("spark-standalone"), workers=2, cores=1, memory="1g")
    try:
        spark_cluster.start()
        yield spark_cluster
    except BaseException:
        print(spark_cluster.logs(), file=sys.stderr)
        raise
    finally:
        spark_cluster.stop()


def cluster_cli(cluster: StandaloneCluster, *argv: str) -> tuple[int, str]:
    """`rocketstore pipeline --master <cluster> ARGV...` in a child process (this one holds the
    local session): its exit code and stdout."""
    done = subprocess.run(
        [sys.executable, "-m", "rocketstore.cli", "pipeline", "--master", cluster.url, *argv],
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        env=dict(os.environ, SPARK_LOCAL_IP="127.0.0.1"),
    )
    assert done.returncode in (0, 1), f"{done.stderr[-4000:]}\n{cluster.logs()}"
    return done.returncode, done.stdout


def tree(root: Path) -> list[bytes]:
    """File contents in name order (IndexFile names carry their creation time)."""
    return [p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()]


def test_scan_audit_and_rebuild_on_the_cluster_equal_local_mode(spark, cluster, tmp_path):
    store = write_store(tmp_path / "master", 200_000, body=120, segment_size=32 << 20).root
    slave = tmp_path / "slave"
    shutil.copytree(store, slave)
    second = sorted((slave / "commitlog").iterdir())[1]
    data = bytearray(second.read_bytes())
    records, _ = hop_chain(data, int(second.name), len(data), 0, 5_000_000)
    flipped = records[-1] + 88 + 10  # a body byte: the replicas diverge there, the slave's record fails its CRC
    data[flipped] ^= 0x01
    second.write_bytes(bytes(data))

    for argv in (
        ["scan", "--store-dir", str(store), "--store-dir", str(slave), "--json"],
        ["audit", "--master", str(store), "--slave", str(slave), "--json"],
    ):
        local_code, local_out = run_cli("pipeline", "--master", "local[2]", *argv)
        code, out = cluster_cli(cluster, *argv)
        assert (code, json.loads(out)) == (local_code, json.loads(local_out))
    report = json.loads(out)
    assert report["replicas"][0]["first_divergence"] == int(second.name) + flipped and report["error_count"] == 1

    local_code, local_out = run_cli("pipeline", "rebuild", "--store-dir", str(store), "--out-dir", str(tmp_path / "l"))
    code, out = cluster_cli(cluster, "rebuild", "--store-dir", str(store), "--out-dir", str(tmp_path / "c"), "--json")
    assert code == local_code == 0 and json.loads(out)["messages"] == 200_000
    assert tree(tmp_path / "c") == tree(tmp_path / "l")
    assert listening_addresses(cluster.pids()) <= LOOPBACK


def test_executors_with_half_a_gigabyte_audit_a_store_three_times_that(cluster, tmp_path):
    try:
        summary = write_store(tmp_path / "master", 1_400_000, body=1000, segment_size=256 << 20)
        assert summary.bytes_used > 3 * (512 << 20)
        slave = tmp_path / "slave" / "commitlog"
        slave.mkdir(parents=True)
        for segment in (summary.root / "commitlog").iterdir():
            os.link(segment, slave / segment.name)  # the same bytes, no second copy on disk
        code, out = cluster_cli(
            cluster,
            *("--conf", "spark.executor.memory=512m", "--conf", "spark.driver.memory=512m"),
            *("audit", "--master", str(summary.root), "--slave", str(slave.parent), "--json"),
        )
        report = json.loads(out)
        assert code == 0 and report["ok"] and report["replicas"][0]["first_divergence"] is None
        counts = {(broker, topic): n for broker, topic, n in report["topic_counts"]}
        assert counts == {
            (str(store), f"Bench{t}"): 350_000 for store in (summary.root, slave.parent) for t in range(4)
        }
    finally:
        shutil.rmtree(tmp_path, ignore_errors=True)
