"""The `rocketstore` streaming source over a cluster of broker groups tied by one etcd: one endpoint
gives every group's queues, each message is read once with the group it came from, a group added
between runs is read from its first message, and a group that leaves keeps its place in the
checkpoint while the others go on."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from client import Producer, PullConsumer
from harness.local_cluster import LocalCluster, write_secret
from pipeline.stream_source import register
from stream_support import stream
from support import BROKER_TEST_SETTINGS, run_cli, wait_until

TOPIC = "Clustered"
QUEUES = 2


class Groups:
    """Broker groups (an ASYNC_MASTER each, no slaves: replication is not what is tested here) in
    one cluster on one etcd."""

    def __init__(self, base, etcd) -> None:
        self.base = base
        self.secret_file = write_secret(base / "secret")
        self.settings = dict(BROKER_TEST_SETTINGS)
        self.settings.update(
            brokerClusterName="StreamCluster",
            etcdEndpoints=etcd.endpoint,
            etcdPrefix="/stream-test",
            haSecretFile=str(self.secret_file),
            clusterRouteRefreshInterval="200",
        )
        self.groups: dict[str, LocalCluster] = {}

    def add(self, name: str) -> str:
        group = LocalCluster(
            self.base / name,
            master_role="ASYNC_MASTER",
            flush_disk_type="ASYNC_FLUSH",
            slaves=0,
            settings=dict(self.settings),
            broker_name=name,
        )
        group.secret_file = self.secret_file
        self.groups[name] = group.start()
        return group.master.client_endpoint

    def stop(self) -> None:
        for group in self.groups.values():
            group.stop()


@pytest.fixture
def groups(tmp_path, etcd, monkeypatch):
    made = Groups(tmp_path, etcd)
    monkeypatch.setenv("ROCKETSTORE_ADMIN_SECRET", made.secret_file.read_text().strip())
    yield made
    made.stop()


@pytest.fixture(scope="module")
def rs(spark):
    register(spark)
    return spark


def cli(*argv: str) -> str:
    code, out = run_cli(*argv)
    assert code == 0, out
    return out


def create_topic(endpoint: str, groups: str) -> None:
    cli("topic", "create", "--topic", TOPIC, "--queues", str(QUEUES), "--groups", groups, "--endpoint", endpoint)


def registered_groups(endpoint: str) -> set[str]:
    described = json.loads(cli("cluster", "list", "--endpoint", endpoint, "--json"))
    return {b["broker_name"] for b in described["brokers"]}


def routed_groups(endpoint: str) -> set[str]:
    with PullConsumer(endpoint) as consumer:
        return {q.broker_name for q in consumer.route(TOPIC) if q.readable}


def produce(endpoint: str, count: int, first: int) -> dict[str, tuple[str, bytes]]:
    """msg_id -> (the group that stored it, body)."""
    sent = {}
    with Producer(endpoint) as producer:
        for i in range(first, first + count):
            result = producer.send(TOPIC, b"m-%d" % i)
            assert result.ok
            sent[result.msg_id] = (result.broker_name, b"m-%d" % i)
    return sent


def assert_read_once(spark, out, sent) -> None:
    rows = spark.read.parquet(str(out)).collect()
    keys = Counter((r.broker_name, r.queue_id, r.queue_offset) for r in rows)
    assert max(keys.values()) == 1, [k for k, n in keys.items() if n > 1]
    assert len(rows) == len(sent)
    assert {r.msg_id: (r.broker_name, bytes(r.body)) for r in rows} == sent


def test_one_endpoint_streams_every_group_once_as_groups_come_and_go(rs, groups, tmp_path):
    seed = groups.add("broker-a")
    groups.add("broker-b")
    wait_until(lambda: registered_groups(seed) == {"broker-a", "broker-b"}, 15, "both groups registered")
    create_topic(seed, "all")
    wait_until(lambda: routed_groups(seed) == {"broker-a", "broker-b"}, 15, "a route naming both groups")
    sent = produce(seed, 40, 0)
    assert set(Counter(group for group, _ in sent.values())) == {"broker-a", "broker-b"}

    out, ck = tmp_path / "out", tmp_path / "ck"
    progress = stream(rs, seed, TOPIC, out, ck, maxMessagesPerTrigger=25)
    assert sum(p["numInputRows"] for p in progress) == 40
    end = json.loads(progress[-1]["sources"][0]["endOffset"])[TOPIC]
    assert set(end) == {f"{g}:{q}" for g in ("broker-a", "broker-b") for q in range(QUEUES)}
    assert_read_once(rs, out, sent)

    # A group added to the running cluster: the next run reads its queues from their first message.
    groups.add("broker-c")
    wait_until(lambda: "broker-c" in registered_groups(seed), 15, "broker-c registered")
    create_topic(seed, "broker-c")
    wait_until(lambda: routed_groups(seed) == {"broker-a", "broker-b", "broker-c"}, 15, "broker-c in the route")
    added = produce(seed, 30, 40)
    assert "broker-c" in {group for group, _ in added.values()}
    sent |= added
    stream(rs, seed, TOPIC, out, ck, maxMessagesPerTrigger=25)
    assert_read_once(rs, out, sent)

    # broker-b leaves (its lease revoked at a clean stop): the stream goes on with the others, and
    # b's queues keep their place in the checkpoint.
    groups.groups["broker-b"].stop()
    wait_until(lambda: routed_groups(seed) == {"broker-a", "broker-c"}, 15, "broker-b gone from the route")
    later = produce(seed, 20, 70)
    assert {group for group, _ in later.values()} == {"broker-a", "broker-c"}
    sent |= later
    progress = stream(rs, seed, TOPIC, out, ck, maxMessagesPerTrigger=25)
    assert "broker-b:0" in json.loads(progress[-1]["sources"][0]["endOffset"])[TOPIC]
    assert_read_once(rs, out, sent)
