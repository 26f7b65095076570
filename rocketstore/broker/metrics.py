"""Prometheus metrics and health answers on `metricsPort` (opt-in: -1, the default, serves none).

HTTP on `bindAddress:metricsPort` (the same host as the other servers; port 0 lets the OS choose):

    GET /metrics   the Prometheus text format (prometheus-client's exposition)
    GET /healthz   200 "ok" while the process answers (liveness)
    GET /readyz    200 "ready: <what it serves>" when the broker serves its role, else 503 and the
                   reason: a master whose store runs and that may acknowledge writes (not fenced
                   by its lease in controller mode): reads and writes; a slave whose replication
                   stream is up: reads, writes going to its master; a slave that stands in for
                   its master (enableSlaveActingMaster): reads only, its master unreachable

Nothing is recorded for metrics on the put path beyond the store's own counters: `BrokerCollector`
reads the store's statistics snapshot, the replica tracker, the replication client and a few
connection counts when Prometheus scrapes. Names follow RocketMQ 5's broker metrics where one
exists (`rocketmq_messages_in_total`, `rocketmq_storage_dispatch_behind_bytes` ...) and
`rocketstore_*` otherwise; durations are seconds and sizes bytes, as Prometheus's conventions ask.
The endpoint carries no secret and changes nothing, so it is not authenticated: keep it on an
address only the scraper reaches (the broker warns when it is not loopback).

Connections are bounded: at most `MAX_CONNECTIONS` at once, each served by a thread of its own, and
a connection that sends no complete request within `IDLE_TIMEOUT_S` is closed. When all are taken,
a new connection closes the oldest one that has not sent its request yet (else it is refused), so
a flood of idle connections costs at most that many threads and the scraper still gets in. A
burst of connections waits in a listen queue `LISTEN_BACKLOG` deep, not on the client's SYN retries.

Thread-safety: the HTTP server answers on its own threads (one per connection, bounded); everything
it reads is safe to read from any thread (the store's snapshots are frozen values, the tracker and
the replication client take their own locks); its table of connections is locked.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import socket
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from store import BrokerRole, MessageStore
from store.clock import wall_clock_ms
from store.metadata.topic_config import SYSTEM_TOPICS
from store.stats import LATENCY_EDGES_US, BucketCounts

from .admin_queries import queue_lags
from .config import BrokerConfigs
from .view import BrokerView

log = logging.getLogger("rocketstore.broker.metrics")

# A scraper opens one connection at a time (two, with a health checker beside it): room to spare.
MAX_CONNECTIONS = 32
# A request's head must arrive within this (the socket's read timeout); idle connections close.
IDLE_TIMEOUT_S = 10.0
# The listen backlog: connections the kernel completes before the server's thread accepts them.
# A burst larger than it has its SYNs dropped and waits 1 s, 3 s... on the client's retries: with
# 64, 374 of 1,000 connects from 50 threads waited a second or more (0 with 1,024), the
# scraper's among them. Capped by net.core.somaxconn (4,096 on current kernels).
LISTEN_BACKLOG = 1024

_BUCKET_EDGES_S = tuple(edge / 1_000_000 for edge in LATENCY_EDGES_US)


@dataclass(frozen=True)
class Connections:
    """Connection counts at scrape time."""

    telemetry_streams: int = 0  # official RocketMQ 5 clients (one Telemetry stream each)
    remoting: int = 0  # RocketMQ 4.x remoting connections
    etcd_failed_calls: int = 0


def _histogram(name: str, documentation: str, labels: Mapping[str, str], counts: BucketCounts) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, documentation, labels=list(labels))
    family.add_metric(list(labels.values()), _cumulative(counts), counts.sum_us / 1_000_000)
    return family


def _cumulative(counts: BucketCounts) -> list[tuple[str, float]]:
    buckets: list[tuple[str, float]] = []
    running = 0
    for edge, count in zip(_BUCKET_EDGES_S, counts.counts):
        running += count
        buckets.append((repr(edge), running))
    buckets.append(("+Inf", running + counts.counts[-1]))
    return buckets


def readiness(store: MessageStore, view: BrokerView) -> str | None:
    """Why the broker is not ready to serve its role now, or None when it is."""
    if not store.running:
        return "the store is not running"
    if view.role is BrokerRole.SLAVE:
        controller = view.controller_status() if view.controller_mode() else None
        if controller is not None and controller.master is None:
            return "no master is elected"
        state = view.replication_state()
        if state is None or state.connected or view.acting_master():
            return None
        master = state.master_address or "the master"
        return f"the replication stream to {master} is down: {state.last_error or 'connecting'}"
    return view.write_refusal()


def serving(view: BrokerView) -> str:
    """What a ready broker serves, for /readyz."""
    if view.role is not BrokerRole.SLAVE:
        return "reads and writes"
    if view.acting_master():
        state = view.replication_state()
        address = state.master_address if state is not None and state.master_address else "its address"
        return (
            f"reads only: the master at {address} is unreachable and this slave serves reads for it; "
            "no writes until a master is back"
        )
    return f"reads; writes go to the master at {view.master_client_endpoint() or 'an unknown endpoint'}"


class BrokerCollector:
    """A prometheus-client custom collector over one broker's state (read at scrape time)."""

    def __init__(
        self,
        store: MessageStore,
        configs: BrokerConfigs,
        view: BrokerView,
        connections: Callable[[], Connections],
    ) -> None:
        self._store = store
        self._configs = configs
        self._view = view
        self._connections = connections

    def collect(self) -> Iterator[Metric]:  # noqa: PLR0915 - one block per metric family, in the order /metrics prints them
        store, view = self._store, self._view
        broker = self._configs.broker
        role = view.role
        flush_mode = self._configs.store.flush_disk_type.name
        snap = store.stats_snapshot()

        info = GaugeMetricFamily(
            "rocketstore_broker_info",
            "The broker's identity and role (value 1)",
            labels=["cluster", "broker", "broker_id", "role", "flush_mode"],
        )
        info.add_metric(
            [broker.broker_cluster_name, broker.broker_name, str(broker.broker_id), role.name, flush_mode], 1
        )
        yield info
        yield GaugeMetricFamily(
            "rocketstore_broker_is_master",
            "1 when this broker takes writes now",
            value=int(role is not BrokerRole.SLAVE),
        )
        yield GaugeMetricFamily(
            "rocketstore_broker_epoch", "The controller epoch (0 in static mode)", value=view.epoch()
        )
        yield GaugeMetricFamily(
            "rocketstore_uptime_seconds", "Seconds since the store started", value=snap.uptime_ms / 1000
        )
        yield GaugeMetricFamily(
            "rocketstore_ready", "1 when /readyz answers ready", value=int(readiness(store, view) is None)
        )

        puts = CounterMetricFamily("rocketstore_puts", "Put calls answered, by PutMessageStatus", labels=["status"])
        for status, count in snap.put_by_status.items():
            puts.add_metric([status], count)
        yield puts
        latency = HistogramMetricFamily(
            "rocketstore_put_latency_seconds",
            "From a put's arrival at the store to its answer, by status and flush mode",
            labels=["status", "flush_mode"],
        )
        for status, counts in snap.put_latency_by_status.items():
            latency.add_metric([status, flush_mode], _cumulative(counts), counts.sum_us / 1_000_000)
        yield latency
        yield _histogram(
            "rocketstore_commitlog_fsync_latency_seconds",
            "CommitLog fdatasync calls, by how long each took",
            {"flush_mode": flush_mode},
            snap.fsync_latency,
        )

        gets = CounterMetricFamily(
            "rocketstore_gets", "Reads by queue offset, by whether they found messages", labels=["result"]
        )
        gets.add_metric(["found"], snap.get_found)
        gets.add_metric(["miss"], snap.get_miss)
        yield gets
        damage = snap.damage
        yield GaugeMetricFamily(
            "rocketstore_damaged_records",
            "CommitLog records found damaged (body CRC mismatch) since start, still in the log: not served",
            value=damage.record_count,
        )
        refused = CounterMetricFamily(
            "rocketstore_damaged_record_refusals",
            "Reads and replication shipments refused because the record was damaged",
            labels=["reader"],
        )
        refused.add_metric(["read"], damage.refused_reads)
        refused.add_metric(["replication"], damage.refused_shipments)
        yield refused
        held = GaugeMetricFamily(
            "rocketstore_replication_held_offset",
            "Where replication to a slave stops: the CommitLog offset of a damaged record (absent when none)",
            labels=["slave_id"],
        )
        for slave_id, offset in sorted(damage.held_replication.items()):
            held.add_metric([str(slave_id)], offset)
        yield held
        yield CounterMetricFamily("rocketmq_messages_out", "Messages handed to consumers", value=snap.get_messages)
        yield CounterMetricFamily("rocketmq_throughput_out", "Bytes handed to consumers", value=snap.get_bytes)
        messages_in = CounterMetricFamily("rocketmq_messages_in", "Messages stored, by topic", labels=["topic"])
        bytes_in = CounterMetricFamily("rocketmq_throughput_in", "Bytes stored, by topic", labels=["topic"])
        for topic, stats in snap.topics.items():
            messages_in.add_metric([topic], stats.messages)
            bytes_in.add_metric([topic], stats.bytes)
        yield messages_in
        yield bytes_in

        yield GaugeMetricFamily(
            "rocketmq_storage_dispatch_behind_bytes",
            "CommitLog bytes not yet in the consume queues",
            value=snap.dispatch_lag_bytes,
        )
        yield GaugeMetricFamily(
            "rocketmq_storage_flush_behind_bytes", "CommitLog bytes not yet on disk", value=snap.unflushed_bytes
        )
        offsets = GaugeMetricFamily("rocketstore_commitlog_offset", "CommitLog byte offsets", labels=["which"])
        offsets.add_metric(["min"], snap.commit_log_min_offset)
        offsets.add_metric(["max"], snap.commit_log_max_offset)
        offsets.add_metric(["flushed"], snap.flushed_offset)
        offsets.add_metric(["confirmed"], view.confirmed_offset())
        yield offsets
        yield GaugeMetricFamily(
            "rocketmq_storage_size",
            "Bytes of CommitLog segment files on disk",
            value=len(store.queue.files) * store.queue.file_size,
        )
        try:
            disk = shutil.disk_usage(store.config.root)
        except OSError:
            disk = None
        if disk is not None:
            yield GaugeMetricFamily("rocketstore_disk_free_bytes", "Free bytes on the store's disk", value=disk.free)
            yield GaugeMetricFamily("rocketstore_disk_total_bytes", "Size of the store's disk", value=disk.total)

        refusals = CounterMetricFamily(
            "rocketstore_topic_auto_create_refusals",
            "Topic auto-creations refused, by the broker.conf key of the limit that refused them "
            "(autoCreateRetryTopic*: consumer groups' retry and dead-letter topics, whose redeliveries wait)",
            labels=["limit"],
        )
        for limit, count in sorted(store.auto_create_refusals().items()):
            refusals.add_metric([limit], count)
        yield refusals
        yield from self._topics_and_groups()
        yield from self._replication(role)

        connections = self._connections()
        clients = GaugeMetricFamily("rocketstore_client_connections", "Open client connections, by API", labels=["api"])
        clients.add_metric(["grpc"], connections.telemetry_streams)
        clients.add_metric(["remoting"], connections.remoting)
        yield clients
        controller = view.controller_status()
        if controller is not None:
            yield CounterMetricFamily(
                "rocketstore_etcd_errors", "etcd calls that failed", value=connections.etcd_failed_calls
            )
            yield GaugeMetricFamily(
                "rocketstore_lease_valid_seconds",
                "How long this master may still acknowledge writes on its lease",
                value=controller.lease_valid_ms / 1000,
            )

    def _topics_and_groups(self) -> Iterator[Metric]:
        store = self._store
        topics = [t.topic_name for t in store.topics.topics() if t.topic_name not in SYSTEM_TOPICS]
        yield GaugeMetricFamily("rocketmq_topic_number", "Topics (system topics left out)", value=len(topics))
        offsets = store.consumer_offsets
        lag = GaugeMetricFamily(
            "rocketmq_consumer_lag_messages",
            "Messages stored and not yet consumed, by consumer group and topic",
            labels=["group", "topic"],
        )
        groups: set[str] = set()
        for topic in topics:
            for group in sorted(offsets.groups_of(topic)):
                groups.add(group)
                lag.add_metric([group, topic], sum(row[3] for row in queue_lags(store, group, topic)))
        yield lag
        yield GaugeMetricFamily("rocketmq_consumer_group_number", "Consumer groups with offsets", value=len(groups))

    def _replication(self, role: BrokerRole) -> Iterator[Metric]:
        view = self._view
        store = self._store
        if role is not BrokerRole.SLAVE:
            lag_bytes = GaugeMetricFamily(
                "rocketstore_replication_lag_bytes", "Bytes a slave is behind this master", labels=["slave_id"]
            )
            lag_seconds = GaugeMetricFamily(
                "rocketstore_replication_lag_seconds",
                "Seconds since a slave last held everything this master had (0 while it does)",
                labels=["slave_id"],
            )
            silent = GaugeMetricFamily(
                "rocketstore_replication_silent_seconds",
                "Seconds since a slave's last report (heartbeats count)",
                labels=["slave_id"],
            )
            fit = GaugeMetricFamily(
                "rocketstore_replication_slave_fit",
                "1 when a slave counts towards SYNC_MASTER acks",
                labels=["slave_id"],
            )
            snapshots = view.slave_snapshots(wall_clock_ms())
            for snap in snapshots:
                label = [str(snap.broker_id)]
                lag_bytes.add_metric(label, snap.lag_bytes)
                lag_seconds.add_metric(label, snap.lag_seconds)
                silent.add_metric(label, snap.silent_ms / 1000)
                fit.add_metric(label, int(snap.fit))
            yield lag_bytes
            yield lag_seconds
            yield silent
            yield fit
            yield GaugeMetricFamily(
                "rocketstore_replication_streams", "Slaves streaming from this master", value=len(snapshots)
            )
            yield GaugeMetricFamily(
                "rocketstore_in_sync_replicas",
                "Brokers holding everything acknowledged: this master and its fit slaves (the ISR in controller mode)",
                value=self._in_sync_size(snapshots),
            )
            return
        state = view.replication_state()
        if state is None:
            return
        yield GaugeMetricFamily(
            "rocketstore_replication_connected", "1 while the stream from the master is up", value=int(state.connected)
        )
        yield GaugeMetricFamily(
            "rocketstore_replication_behind_bytes",
            "Bytes this slave is behind its master's max offset, as the master last said",
            value=max(0, state.master_max_offset - store.max_offset),
        )
        yield GaugeMetricFamily(
            "rocketstore_acting_master", "1 while this slave stands in for its master", value=int(view.acting_master())
        )

    def _in_sync_size(self, snapshots: list[Any]) -> int:
        controller = self._view.controller_status()
        if controller is not None and controller.state is not None:
            return len(controller.state.isr)
        return 1 + sum(1 for snap in snapshots if snap.fit)


class _Handler(BaseHTTPRequestHandler):
    server: "_Server"
    timeout = IDLE_TIMEOUT_S  # socketserver sets it on the connection: a silent client times out

    def do_GET(self) -> None:  # noqa: N802 (the standard library's name)
        self.server.answering(self.request)
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            self._answer(200, generate_latest(self.server.registry), CONTENT_TYPE_LATEST)
        elif path == "/healthz":
            self._answer(200, b"ok\n")
        elif path == "/readyz":
            reason = self.server.ready()
            if reason is None:
                serves = self.server.serving()
                self._answer(200, f"ready: {serves}\n".encode() if serves else b"ready\n")
            else:
                self._answer(503, f"not ready: {reason}\n".encode())
        else:
            self._answer(404, b"not found: try /metrics, /healthz or /readyz\n")

    def _answer(self, code: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the standard library's name)
        log.debug("metrics %s " + format, self.client_address[0], *args)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    registry: CollectorRegistry
    ready: Callable[[], str | None]
    serving: Callable[[], str]
    max_connections = MAX_CONNECTIONS
    request_queue_size = LISTEN_BACKLOG  # socketserver's default is 5

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Open connections in the order they came, and whether each has sent its request.
        self._open: OrderedDict[socket.socket, bool] = OrderedDict()
        self._open_lock = threading.Lock()

    def verify_request(self, request, client_address) -> bool:
        """Room for the connection, making it by closing the oldest idle one if need be; False
        (socketserver closes it) when every open connection is answering a request."""
        with self._open_lock:
            if len(self._open) >= self.max_connections:
                idle = next((conn for conn, answering in self._open.items() if not answering), None)
                if idle is None:
                    log.debug(
                        "metrics connection from %s refused: %d requests in progress",
                        client_address[0],
                        len(self._open),
                    )
                    return False
                del self._open[idle]
                with contextlib.suppress(OSError):
                    idle.shutdown(socket.SHUT_RDWR)  # its thread sees the end of the stream and exits
            self._open[request] = False
        return True

    def answering(self, request: socket.socket) -> None:
        with self._open_lock:
            if request in self._open:
                self._open[request] = True

    def process_request(self, request, client_address) -> None:
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._forget(request)  # no thread was started for it
            raise

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._forget(request)

    def _forget(self, request: socket.socket) -> None:
        with self._open_lock:
            self._open.pop(request, None)

    @property
    def open_connections(self) -> int:
        with self._open_lock:
            return len(self._open)


class _Server6(_Server):
    address_family = socket.AF_INET6


class MetricsServer:
    """The HTTP server of /metrics, /healthz and /readyz on its own thread."""

    def __init__(
        self, collector: BrokerCollector, ready: Callable[[], str | None], serving: Callable[[], str] = lambda: ""
    ) -> None:
        self._registry = CollectorRegistry(auto_describe=False)
        self._registry.register(collector)
        self._ready = ready
        self._serving = serving
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def listen(self, host: str, port: int) -> int:
        """Bind and listen, not serving yet (connections wait in the kernel's queue); the bound
        port. OSError when it cannot bind."""
        server_class = _Server6 if ":" in host else _Server
        server = server_class((host, port), _Handler, bind_and_activate=True)
        server.registry = self._registry
        server.ready = self._ready
        server.serving = self._serving
        self._server = server
        return server.server_address[1]

    def start(self, host: str, port: int) -> int:
        """Bind and serve; the bound port. OSError when it cannot bind."""
        bound = self.listen(host, port)
        assert self._server is not None
        self._thread = threading.Thread(target=self._server.serve_forever, name="metrics-http", daemon=True)
        self._thread.start()
        return bound

    def stop(self) -> None:
        server, self._server = self._server, None
        thread, self._thread = self._thread, None
        if server is not None:
            if thread is not None:
                server.shutdown()  # waits for serve_forever: only when it runs
            server.server_close()
        if thread is not None:
            thread.join(timeout=5)
