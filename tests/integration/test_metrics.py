"""Prometheus metrics and health answers (metricsPort) scraped over HTTP from a running SYNC_MASTER
and its slave, checked against what was produced and consumed."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from support import http_get as get, wait_until

from client import Producer, PullConsumer, SendStatus

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana-dashboard.json"
TOPIC = "MetricsTopic"
SENT = 30
CONSUMED = 12


def scrape(endpoint: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://{endpoint}/metrics", timeout=10) as answer:
        assert answer.status == 200
        assert answer.headers["Content-Type"].startswith("text/plain")
        text = answer.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def test_master_and_slave_serve_metrics_that_match_what_was_produced(make_cluster):
    cluster = make_cluster(settings={"metricsPort": "0"})
    master, slave = cluster.master, cluster.slave_brokers[0]
    with Producer(master.client_endpoint) as producer:
        results = [producer.send(TOPIC, b"x" * 100, queue_id=i % 2) for i in range(SENT)]
    assert {r.status for r in results} == {SendStatus.SEND_OK}
    with PullConsumer(master.client_endpoint, group="metrics-group") as consumer:
        page = consumer.pull(TOPIC, 0, 0, max_messages=CONSUMED)
        assert len(page.messages) == CONSUMED
        consumer.update_offset(TOPIC, 0, CONSUMED)
        consumer.update_offset(TOPIC, 1, 0)

    m = scrape(master.ready["metrics"])
    assert value(m, "rocketstore_broker_is_master") == 1
    assert value(m, "rocketstore_ready") == 1
    role = [k for k in m if k[0] == "rocketstore_broker_info"]
    assert dict(role[0][1])["role"] == "SYNC_MASTER" and dict(role[0][1])["flush_mode"] == "SYNC_FLUSH"
    # Every send was a put answered PUT_OK, and each one is in the latency histogram.
    put_ok = value(m, "rocketstore_puts_total", status="PUT_OK")
    assert put_ok >= SENT
    assert value(m, "rocketstore_put_latency_seconds_count", status="PUT_OK", flush_mode="SYNC_FLUSH") == put_ok
    assert value(m, "rocketstore_put_latency_seconds_bucket", status="PUT_OK", flush_mode="SYNC_FLUSH", le="+Inf") == (
        put_ok
    )
    assert value(m, "rocketstore_put_latency_seconds_sum", status="PUT_OK", flush_mode="SYNC_FLUSH") > 0
    # SYNC_FLUSH: at least one fdatasync, each counted with its duration.
    assert value(m, "rocketstore_commitlog_fsync_latency_seconds_count", flush_mode="SYNC_FLUSH") >= 1
    assert value(m, "rocketmq_messages_in_total", topic=TOPIC) == SENT
    assert value(m, "rocketmq_throughput_in_total", topic=TOPIC) > SENT * 100
    assert value(m, "rocketmq_messages_out_total") >= CONSUMED
    # Queue 0 holds 15 of which 12 were consumed; queue 1's 15 are all behind.
    assert value(m, "rocketmq_consumer_lag_messages", group="metrics-group", topic=TOPIC) == SENT - CONSUMED
    assert value(m, "rocketstore_in_sync_replicas") == 2
    assert value(m, "rocketstore_replication_streams") == 1
    assert value(m, "rocketstore_replication_slave_fit", slave_id="1") == 1
    assert value(m, "rocketstore_replication_lag_bytes", slave_id="1") == 0
    # The slave reports at least every haSendHeartbeatInterval; a stream silent for
    # haHousekeepingInterval (2 s here) would have been closed.
    assert 0 <= value(m, "rocketstore_replication_silent_seconds", slave_id="1") < 2.0
    assert value(m, "rocketstore_commitlog_offset", which="max") == value(
        m, "rocketstore_commitlog_offset", which="confirmed"
    )
    assert value(m, "rocketstore_disk_free_bytes") > 0
    assert value(m, "rocketmq_storage_size") > 0
    assert get(master.ready["metrics"], "/healthz") == (200, "ok\n")
    assert get(master.ready["metrics"], "/readyz") == (200, "ready: reads and writes\n")

    def slave_has_everything():
        samples = scrape(slave.ready["metrics"])
        return samples if samples.get(("rocketmq_messages_in_total", (("topic", TOPIC),))) == SENT else None

    s = wait_until(slave_has_everything, timeout_s=20)
    assert value(s, "rocketstore_broker_is_master") == 0
    assert value(s, "rocketstore_replication_connected") == 1
    assert value(s, "rocketstore_replication_behind_bytes") == 0
    assert value(s, "rocketstore_acting_master") == 0
    assert ("rocketstore_replication_lag_bytes", (("slave_id", "1"),)) not in s
    assert value(s, "rocketstore_puts_total", status="PUT_OK") == 0
    assert get(slave.ready["metrics"], "/readyz") == (
        200,
        f"ready: reads; writes go to the master at {master.client_endpoint}\n",
    )
    assert get(slave.ready["metrics"], "/nothing")[0] == 404

    # Every series the shipped Grafana dashboard plots is one a broker serves (etcd's only in
    # controller mode).
    exported = {name for name, _ in m} | {name for name, _ in s}
    plotted = {
        re.sub(r"_(bucket|count|sum)$", "", name)
        for panel in json.loads(DASHBOARD.read_text())["panels"]
        for target in panel["targets"]
        for name in re.findall(r"\b(rocket(?:mq|store)_[a-z_]+)", target["expr"])
    }
    exported_families = {re.sub(r"_(bucket|count|sum)$", "", name) for name in exported}
    assert plotted - exported_families == {"rocketstore_etcd_errors_total"}

    # With its master gone, the slave is no longer ready (until it stands in for it).
    master.kill()
    status, text = wait_until(
        lambda: (answer := get(slave.ready["metrics"], "/readyz"))[0] == 503 and answer, timeout_s=20
    )
    assert "replication stream" in text
