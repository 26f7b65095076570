"""`Fleet`: the brokers the console knows, one admin client each, and `Snapshot`s of what they
answer.

The console starts from the endpoints it was given (one of any group is enough) and learns the
rest from the answers: a master names its slaves' client endpoints, a slave its master's, and a
broker of a cluster with a registry in etcd names every group's brokers (`DescribeCluster`). A
broker is known by its (group, broker id) once it has answered; it stays known when it stops
answering (shown unreachable, with what it last said), so a killed master stays on the page
beside the slave that took over. `poll` asks every known broker for its status at once (a thread
pool), so one that hangs costs one request timeout, not one per broker.

Thread-safety: `poll` and `admin` may be called from any thread (the sampler polls while page
handlers call brokers); one lock guards what is known. `Snapshot`s are immutable.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from client import AdminClient, RocketStoreError

log = logging.getLogger("rocketstore.console.fleet")

MAX_BROKERS = 256
SLAVE = "SLAVE"


def wall_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class BrokerState:
    endpoint: str
    group: str  # broker_name; "" until it answered
    broker_id: int  # -1 until it answered
    status: dict[str, Any] | None  # its admin status now; None when it did not answer
    error: str  # why it did not answer
    last_status: dict[str, Any] | None  # what it said last time it answered
    seen_ms: int  # when it last answered (0: never)

    @property
    def reachable(self) -> bool:
        return self.status is not None

    @property
    def role(self) -> str:
        return self.status["role"] if self.status is not None else "UNREACHABLE"

    @property
    def last_role(self) -> str:
        return self.last_status["role"] if self.last_status is not None else "unknown"


@dataclass(frozen=True)
class Snapshot:
    taken_at_ms: int
    brokers: tuple[BrokerState, ...]
    # DescribeCluster of one broker (its `registry` is False when it stands alone), or None.
    registry: dict[str, Any] | None = None

    def groups(self) -> dict[str, list[BrokerState]]:
        """Broker groups by name, each one's brokers by id (brokers never heard from under "")."""
        out: dict[str, list[BrokerState]] = {}
        for broker in sorted(self.brokers, key=lambda b: (b.group, b.broker_id, b.endpoint)):
            out.setdefault(broker.group, []).append(broker)
        return out

    def master(self, group: str) -> BrokerState | None:
        """The group's master: a reachable broker serving as master, of the highest epoch (a
        deposed master that still answers has an older one)."""
        masters = [b for b in self.brokers if b.group == group and b.reachable and b.role != SLAVE]
        return max(masters, key=lambda b: (b.status or {}).get("epoch", 0), default=None)

    def masters(self) -> dict[str, BrokerState]:
        found = {group: self.master(group) for group in self.groups() if group}
        return {group: broker for group, broker in found.items() if broker is not None}

    def reachable(self, group: str) -> list[BrokerState]:
        return [b for b in self.brokers if b.group == group and b.reachable]

    def slave_link(self, group: str, broker_id: int) -> dict[str, Any] | None:
        """The group master's view of one slave (ack offset, lag in bytes and seconds, fitness)."""
        master = self.master(group)
        if master is None or master.status is None:
            return None
        return next((s for s in master.status.get("slaves") or () if s["broker_id"] == broker_id), None)


class Fleet:
    def __init__(
        self,
        endpoints: Iterable[str],
        secret: bytes,
        *,
        timeout_s: float = 5.0,
        tls_ca_file: str | None = None,
        clock_ms: Callable[[], int] = wall_ms,
        client_factory: Callable[..., AdminClient] = AdminClient,
    ) -> None:
        self._new_client = client_factory
        self._secret = secret
        self._timeout_s = timeout_s
        self._tls_ca_file = tls_ca_file
        self._clock = clock_ms
        self._lock = threading.Lock()
        self._clients: dict[str, AdminClient] = {}
        self._pending: list[str] = list(dict.fromkeys(endpoints))  # not answered yet
        self._known: dict[tuple[str, int], str] = {}  # (group, broker id) -> endpoint
        self._last: dict[str, tuple[dict[str, Any], int]] = {}  # endpoint -> (status, when)
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="console-poll")
        self._closed = False

    def admin(self, endpoint: str) -> AdminClient:
        """The admin client of one broker (made once, shared: AdminClient is thread-safe)."""
        with self._lock:
            if self._closed:
                raise RocketStoreError("the console is shutting down")
            client = self._clients.get(endpoint)
            if client is None:
                client = self._new_client(
                    endpoint, self._secret, timeout_s=self._timeout_s, tls_ca_file=self._tls_ca_file
                )
                self._clients[endpoint] = client
            return client

    def endpoints(self) -> list[str]:
        with self._lock:
            return list(dict.fromkeys([*self._known.values(), *self._pending]))

    def _ask(self, endpoint: str) -> dict[str, Any] | str:
        try:
            return self.admin(endpoint).status()
        except RocketStoreError as exc:
            return str(exc)

    def poll(self) -> Snapshot:
        """Every known broker's status now, and what the answers say of brokers not known yet."""
        asked = self.endpoints()
        answers = dict(zip(asked, self._pool.map(self._ask, asked)))
        now = self._clock()
        registry = self._registry(answers)
        with self._lock:
            for endpoint, answer in answers.items():
                if isinstance(answer, dict):
                    self._learn(endpoint, answer, now)
            for endpoint in _named_endpoints(answers.values(), registry):
                if endpoint not in self._known.values() and endpoint not in self._pending:
                    if len(self._known) + len(self._pending) < MAX_BROKERS:
                        self._pending.append(endpoint)
            states = [self._state(endpoint, answers.get(endpoint), now) for endpoint in self._known.values()]
            states += [self._state(e, answers.get(e), now) for e in self._pending if e in answers]
        return Snapshot(now, tuple(states), registry)

    def _registry(self, answers: dict[str, dict[str, Any] | str]) -> dict[str, Any] | None:
        for endpoint, answer in answers.items():
            if isinstance(answer, dict):
                try:
                    return self.admin(endpoint).describe_cluster()
                except RocketStoreError as exc:
                    log.debug("DescribeCluster of %s: %s", endpoint, exc)
        return None

    def _learn(self, endpoint: str, status: dict[str, Any], now: int) -> None:
        identity = (status["broker_name"], int(status["broker_id"]))
        if endpoint in self._pending:
            self._pending.remove(endpoint)
        known = self._known.get(identity)
        # Another endpoint for a broker already known (a name and an address of one broker): the
        # first that answered stays, unless it no longer answers.
        if known is None or known == endpoint or known not in self._last or self._last[known][1] < now:
            self._known[identity] = endpoint
        self._last[endpoint] = (status, now)

    def _state(self, endpoint: str, answer: dict[str, Any] | str | None, now: int) -> BrokerState:
        last, seen = self._last.get(endpoint, (None, 0))
        identity = next((k for k, e in self._known.items() if e == endpoint), ("", -1))
        if isinstance(answer, dict):
            return BrokerState(endpoint, identity[0], identity[1], answer, "", answer, now)
        return BrokerState(endpoint, identity[0], identity[1], None, answer or "not asked", last, seen)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            clients, self._clients = list(self._clients.values()), {}
        self._pool.shutdown(wait=True)
        for client in clients:
            client.close()


def _named_endpoints(answers: Iterable[dict[str, Any] | str], registry: dict[str, Any] | None) -> list[str]:
    """Client endpoints the answers name: a master's slaves, a slave's master, the registry's."""
    named: list[str] = []
    for answer in answers:
        if not isinstance(answer, dict):
            continue
        named += [s["client_endpoint"] for s in answer.get("slaves") or () if s.get("client_endpoint")]
        if answer.get("master_client_endpoint"):
            named.append(answer["master_client_endpoint"])
    if registry and registry.get("registry"):
        named += [b["client_endpoint"] for b in registry.get("brokers") or () if b.get("client_endpoint")]
    return list(dict.fromkeys(named))
