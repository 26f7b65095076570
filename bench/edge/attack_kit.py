"""What every scenario of `bench.edge_attacks` uses: its `Result` (PASS or FAIL against the issue's
expectation, and the figures that decide it), the run's `AttackEnv` (where files go, how much to
enlarge sizes, the memory a flood may add), a broker group that is stopped whatever happens, and
small measures (a broker's RSS and CPU, gRPC put latency).

Thread-safety: none; scenarios run one after another on the caller's thread (those that need
threads of their own start and join them).
"""

from __future__ import annotations

import contextlib
import socket
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from client import Producer, RocketStoreError
from harness.local_cluster import LocalBroker, LocalCluster

from .brokers import start_group, stop_quietly
from .observe import MiB, cpu_seconds, rss_bytes


@dataclass
class Result:
    name: str
    item: str  # the item number
    expectation: str
    passed: bool | None = None  # None: the scenario could not run
    figures: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def figure(self, label: str, value: object) -> None:
        self.figures.append((label, str(value)))

    @property
    def verdict(self) -> str:
        return {True: "PASS", False: "FAIL", None: "ERROR"}[self.passed]


@dataclass
class AttackEnv:
    base_dir: Path
    scale: float = 1.0
    rss_limit_mib: float = 64.0
    groups: int = 0

    def count(self, n: int) -> int:
        return max(1, int(n * self.scale))

    def seconds(self, s: float) -> float:
        return max(0.5, s * self.scale)

    @contextlib.contextmanager
    def group(self, result: Result, **options) -> Iterator[LocalCluster]:
        """A started group (`bench.edge.brokers.start_group` options), stopped at the end; a
        broker that does not stop within 30 s of SIGTERM is killed and named in the notes."""
        self.groups += 1
        cluster = start_group(self.base_dir / f"{result.name}-{self.groups}", **options)
        try:
            yield cluster
        finally:
            for error in stop_quietly(cluster):
                result.notes.append(f"stopping the brokers: {error}")


def closed_by_peer(socks: list[socket.socket], hold_s: float) -> int:
    """How many of `socks` the broker closes within the next `hold_s` (what a client sent is left
    unanswered: a read sees only the close)."""
    held_until = time.monotonic() + hold_s
    closed = 0
    for sock in socks:
        sock.settimeout(max(0.01, held_until - time.monotonic()))
        try:
            closed += sock.recv(1) == b""
        except TimeoutError:
            pass
        except OSError:
            closed += 1
    return closed


def rss_mib(broker: LocalBroker) -> float:
    assert broker.process is not None
    return (rss_bytes(broker.process.pid) or 0) / MiB


def cpu_share(broker: LocalBroker, seconds: float) -> float:
    """The share of one core the broker used over the next `seconds` (1.0: a whole core)."""
    assert broker.process is not None
    pid = broker.process.pid
    before, started = cpu_seconds(pid) or 0.0, time.monotonic()
    time.sleep(seconds)  # a measuring interval, not a wait for a condition
    after = cpu_seconds(pid) or 0.0
    return (after - before) / (time.monotonic() - started)


def put_latencies_ms(
    cluster: LocalCluster, topic: str, count: int, timeout_s: float = 10.0
) -> tuple[float | None, int]:
    """(p50 in ms, failed sends) of `count` gRPC sends one after another to the master."""
    latencies = []
    failed = 0
    with Producer(cluster.master.client_endpoint, retry_timeout_s=0, timeout_s=timeout_s) as producer:
        for i in range(count):
            started = time.perf_counter()
            try:
                ok = producer.send(topic, f"latency {i}".encode()).ok
            except RocketStoreError:
                ok = False
            if ok:
                latencies.append((time.perf_counter() - started) * 1000)
            else:
                failed += 1
    return (statistics.median(latencies) if latencies else None), failed
