"""The official RocketMQ 5 Node.js client (`rocketmq-client-nodejs`, pinned in
tests/node-client/package-lock.json, installed by `make test`) against real brokers: produce
sync and concurrently, SimpleConsumer receive / ack / change invisible duration / redelivery,
PushConsumer retry and dead letter, transactions with check-back, a delayed message, FIFO order,
wrong credentials refused, TLS. Each flow runs `tests/node-client/conformance.js` in a subprocess."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from test_client_acl import ACCOUNTS

from client import PullConsumer
from harness.local_cluster import poll_until
from pki_support import tls_broker_settings

NODE_DIR = Path(__file__).resolve().parents[1] / "node-client"


def node_process(
    flow: str, endpoint: str, topic: str, group: str, *credentials: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """One flow of conformance.js, run to its end (whatever its exit status)."""
    node = shutil.which("node")
    assert node is not None, "node is missing: .ci/run installs Debian's nodejs"
    assert (NODE_DIR / "node_modules" / "rocketmq-client-nodejs").is_dir(), "`make test` installs the client"
    return subprocess.run(
        [node, str(NODE_DIR / "conformance.js"), endpoint, flow, topic, group, *credentials],
        capture_output=True,
        text=True,
        timeout=150,
        cwd=NODE_DIR,
        env=dict(os.environ, **(env or {})),
    )


def run_node(
    flow: str,
    endpoint: str,
    topic: str,
    group: str = "node-group",
    *credentials: str,
    env: dict[str, str] | None = None,
) -> dict:
    done = node_process(flow, endpoint, topic, group, *credentials, env=env)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_node_client_produces_and_consumes_with_redelivery(make_cluster):
    cluster = make_cluster(master_role="SYNC_MASTER", flush_disk_type="SYNC_FLUSH", slaves=1)
    out = run_node("produceAndConsume", cluster.master.client_endpoint, "NodeTopic")
    first = {body: (msg_id, attempt) for msg_id, attempt, body in out["first"]}
    assert set(first) == {"n-0", "n-1", "n-2", "n-3"}
    assert {msg_id for msg_id, _ in first.values()} == set(out["sent"])
    assert {attempt for _, attempt in first.values()} == {1}
    assert sorted((body, attempt) for _, attempt, body in out["second"]) == [("n-0", 2), ("n-1", 2)]
    with PullConsumer(cluster.slave_brokers[0].client_endpoint, group="reader") as consumer:
        stored = sorted(m.body for q in consumer.queues("NodeTopic") for m in consumer.pull("NodeTopic", q, 0).messages)
    assert stored == [b"n-0", b"n-1", b"n-2", b"n-3"]


def test_node_push_consumer_retries_then_dead_letters(make_cluster):
    settings = {"retryMaxTimes": "2", "messageDelayLevel": "1s 1s 1s 1s"}
    cluster = make_cluster(master_role="SYNC_MASTER", flush_disk_type="SYNC_FLUSH", slaves=1, settings=settings)
    endpoint = cluster.master.client_endpoint
    out = run_node("pushRetry", endpoint, "NodePushTopic", "node-push")
    assert sorted(a for body, a in out["seen"] if body == "bad") == [1, 2, 3]
    assert [body for body, _ in out["seen"] if body != "bad"] == ["good"]

    def dead_letters() -> list[bytes]:
        with PullConsumer(endpoint, group="dlq-reader") as consumer:
            return [m.body for m in consumer.pull("%DLQ%node-push", 0, 0).messages]

    assert poll_until(lambda: dead_letters() == [b"bad"], 20)


def test_node_transactional_producer_commits_rolls_back_and_answers_check_backs(make_cluster):
    settings = {"transactionTimeOut": "1000", "transactionCheckInterval": "1000"}
    cluster = make_cluster(master_role="SYNC_MASTER", flush_disk_type="SYNC_FLUSH", slaves=1, settings=settings)
    out = run_node("transactions", cluster.master.client_endpoint, "NodeTxTopic", "node-tx")
    sent = out["sent"]
    assert out["checked"] == ["checked-commit", "checked-rollback"]
    assert out["got"] == [["checked-commit", sent["checked-commit"]], ["commit", sent["commit"]]]


def test_node_delayed_message_is_not_delivered_before_its_time(make_cluster):
    cluster = make_cluster(master_role="SYNC_MASTER", flush_disk_type="SYNC_FLUSH", slaves=1)
    out = run_node("delayed", cluster.master.client_endpoint, "NodeDelayTopic", "node-delay")
    assert out["receivedAfterMs"] is not None and out["receivedAfterMs"] >= 3000


def test_node_fifo_group_gets_each_message_group_in_order(make_cluster):
    settings = {"fifoConsumerGroups": "node-fifo"}
    cluster = make_cluster(master_role="SYNC_MASTER", flush_disk_type="SYNC_FLUSH", slaves=1, settings=settings)
    out = run_node("fifo", cluster.master.client_endpoint, "NodeFifoTopic", "node-fifo")
    deliveries = [tuple(d) for d in out["deliveries"]]
    assert [d for d in deliveries if d[0].startswith("A")] == [("A1", 1), ("A1", 2), ("A2", 1), ("A3", 1)]
    assert [d for d in deliveries if d[0].startswith("B")] == [("B1", 1), ("B2", 1)]


def test_node_client_with_wrong_credentials_is_refused(make_cluster, tmp_path):
    acl = tmp_path / "acl.json"
    acl.write_text(json.dumps(ACCOUNTS))
    os.chmod(acl, 0o600)
    cluster = make_cluster(
        master_role="ASYNC_MASTER",
        flush_disk_type="SYNC_FLUSH",
        slaves=0,
        settings={"aclEnable": "true", "aclFile": str(acl)},
    )
    endpoint = cluster.master.client_endpoint
    refused = run_node("send", endpoint, "Orders", "g", "app", "wrong-secret")
    assert not refused["ok"] and "UNAUTHORIZED" in refused["error"]
    signed = run_node("send", endpoint, "Orders", "g", "app", "app-secret-key-1")
    assert signed["ok"], signed


def test_node_client_produces_and_consumes_over_tls(make_cluster, tmp_path):
    pki = tmp_path / "pki"
    settings = tls_broker_settings(pki)
    cluster = make_cluster(master_role="ASYNC_MASTER", flush_disk_type="SYNC_FLUSH", slaves=0, settings=settings)
    env = {"ROCKETSTORE_TLS": "1", "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(pki / "ca.crt")}
    out = run_node("produceAndConsume", cluster.master.client_endpoint, "NodeTlsTopic", env=env)
    assert sorted(body for _, _, body in out["first"]) == ["n-0", "n-1", "n-2", "n-3"]
    # Without TLS the client cannot talk to the TLS port at all.
    plain = node_process("produceAndConsume", cluster.master.client_endpoint, "NodeTlsTopic", "g")
    assert plain.returncode != 0
