"""Prometheus metrics and health answers (metricsPort) scraped over HTTP from a running SYNC_MASTER
and its slave, checked against what was produced and consumed."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from client import Producer, PullConsumer, SendStatus
from support import http_get as get
from support import wait_until

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


def test_idle_metrics_connections_are_bounded_and_timed_out(make_cluster):
    """Issue 30: the metrics server kept a thread per idle connection (1,000 connections, 1,046
    threads). Connections are bounded now (the oldest idle one makes room) and time out, and
    /metrics still answers."""
    import select
    import socket

    from rocketstore.broker.metrics import IDLE_TIMEOUT_S, MAX_CONNECTIONS
    from support import proc_status

    cluster = make_cluster(
        master_role="ASYNC_MASTER", flush_disk_type="ASYNC_FLUSH", slaves=0, settings={"metricsPort": "0"}
    )
    master = cluster.master
    assert master.process is not None
    host, port = master.ready["metrics"].rsplit(":", 1)
    assert get(master.ready["metrics"], "/healthz")[0] == 200
    baseline = proc_status(master.process.pid, "Threads")
    flood = [socket.create_connection((host, int(port)), timeout=10) for _ in range(1000)]
    poller = select.poll()
    by_fd = {s.fileno(): s for s in flood}
    for s in flood:
        poller.register(s, select.POLLIN)
    closed: set[int] = set()

    def closed_by_the_broker(at_least: int) -> bool:
        for fd, _ in poller.poll(100):
            try:
                data = by_fd[fd].recv(1, socket.MSG_DONTWAIT)
            except ConnectionResetError:
                data = b""
            assert data == b"", "the broker sent something to a connection that asked nothing"
            closed.add(fd)
            poller.unregister(fd)
        return len(closed) >= at_least

    try:
        # Each connection past the bound makes the broker close the oldest idle one.
        wait_until(lambda: closed_by_the_broker(1000 - MAX_CONNECTIONS), 60, "the broker to close idle connections")
        threads = proc_status(master.process.pid, "Threads")
        assert threads <= baseline + MAX_CONNECTIONS + 4, (baseline, threads)
        m = scrape(master.ready["metrics"])
        assert value(m, "rocketstore_broker_is_master") == 1
        # The rest time out.
        wait_until(lambda: closed_by_the_broker(1000), IDLE_TIMEOUT_S + 50, "idle connections to time out")
        wait_until(lambda: proc_status(master.process.pid, "Threads") <= baseline + 1, 30, "the threads to end")
    finally:
        for s in flood:
            s.close()
    assert get(master.ready["metrics"], "/healthz") == (200, "ok\n")


def test_a_burst_of_connections_waits_in_the_listen_queue_not_on_syn_retries():
    """Issue 30: with socketserver's backlog (5, then 64) a burst of connects overflowed the
    listen queue and the kernel dropped their SYNs: 374 of 1,000 connects from 50 threads waited
    a second or more for a retry. Here nothing accepts (the server listens, it does not serve):
    the kernel completes exactly the connections its queue holds, and every one of a burst of
    300 must be established."""
    import select
    import socket

    from rocketstore.broker.metrics import MetricsServer

    class NoMetrics:
        def collect(self):
            return []

    server = MetricsServer(NoMetrics(), lambda: None)
    port = server.listen("127.0.0.1", 0)
    burst: list[socket.socket] = []
    try:
        for _ in range(300):
            client = socket.socket()
            burst.append(client)
            client.setblocking(False)
            client.connect_ex(("127.0.0.1", port))
        established: set[socket.socket] = set()

        def all_established() -> bool:
            waiting = [c for c in burst if c not in established]
            _, writable, _ = select.select([], waiting, [], 0.2)
            for client in writable:
                assert client.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0
                established.add(client)
            return len(established) == len(burst)

        wait_until(all_established, 30, "every connection of the burst to be established")
    finally:
        for client in burst:
            client.close()
        server.stop()
