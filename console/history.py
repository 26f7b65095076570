"""`History`: what the console keeps of past fleet snapshots, sans-IO: each broker's counters as
chart series (messages in and out per second, put latency p50/p99, each slave's replication lag)
over the last `window_ms`, and the events between snapshots (a master that stops answering, a
group without a master, a failover to another broker, a broker back) for the cluster page's
timeline.

Rates and latencies come from differences of the brokers' cumulative counters (`put_messages`,
`get_messages` and the put latency histogram of their statistics) between two snapshots of the
same broker; a counter that went down means the broker restarted, and that interval is left out.
A latency percentile is the upper edge of the histogram bucket that holds it (the brokers' own
convention, `store.stats.LatencyStats`).

Thread-safety: none; `sampler.Sampler` calls it under its lock.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from store.stats import LATENCY_EDGES_US, LATENCY_LABELS

from .fleet import Snapshot

MAX_EVENTS = 500
BrokerKey = tuple[str, int]  # (group, broker id)


@dataclass(frozen=True, slots=True)
class Sample:
    at_ms: int
    put_messages: int
    get_messages: int
    latency_counts: tuple[int, ...]
    # On a master: each slave's (lag bytes, lag seconds), by broker id.
    slave_lags: dict[int, tuple[int, float]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Event:
    at_ms: int
    group: str
    kind: str  # start, unreachable, back, no-master, failover, switchover, epoch
    text: str


@dataclass(frozen=True, slots=True)
class Point:
    at_ms: int
    messages_in_per_s: float
    messages_out_per_s: float
    put_p50_ms: float | None  # None: no put in the interval
    put_p99_ms: float | None


def percentile_ms(counts: Sequence[int], fraction: float) -> float | None:
    """The upper edge (ms) of the bucket holding the nearest-rank `fraction` quantile; the last,
    open-ended bucket answers the edge below it. None when the counts are all zero."""
    total = sum(counts)
    if total <= 0:
        return None
    rank = max(1, math.ceil(total * fraction))
    running = 0
    for i, count in enumerate(counts):
        running += count
        if running >= rank:
            edge = LATENCY_EDGES_US[min(i, len(LATENCY_EDGES_US) - 1)]
            return edge / 1000
    return LATENCY_EDGES_US[-1] / 1000


def _sample(at_ms: int, status: dict[str, Any]) -> Sample:
    stats = status.get("stats") or {}
    buckets = (stats.get("put_latency") or {}).get("buckets") or {}
    return Sample(
        at_ms=at_ms,
        put_messages=int(stats.get("put_messages", 0)),
        get_messages=int(stats.get("get_messages", 0)),
        latency_counts=tuple(int(buckets.get(label, 0)) for label in LATENCY_LABELS),
        slave_lags={
            int(s["broker_id"]): (int(s.get("lag_bytes", 0)), float(s.get("lag_seconds", 0.0)))
            for s in status.get("slaves") or ()
            if status.get("role") != "SLAVE"
        },
    )


@dataclass
class _GroupState:
    master_id: int | None = None  # the last master seen (kept while the group has none)
    epoch: int = 0
    has_master: bool = False


class History:
    def __init__(self, window_ms: int) -> None:
        if window_ms <= 0:
            raise ValueError(f"window_ms must be positive, got {window_ms}")
        self.window_ms = window_ms
        self._samples: dict[BrokerKey, deque[Sample]] = {}
        self._reachable: dict[BrokerKey, bool] = {}
        self._groups: dict[str, _GroupState] = {}
        self.events: deque[Event] = deque(maxlen=MAX_EVENTS)
        self.latest: Snapshot | None = None

    # -- recording ------------------------------------------------------------------------------

    def record(self, snapshot: Snapshot) -> list[Event]:
        """Keep a snapshot's counters; the events it shows since the previous one."""
        now = snapshot.taken_at_ms
        new: list[Event] = []
        for broker in snapshot.brokers:
            if not broker.group:
                continue
            key = (broker.group, broker.broker_id)
            if broker.status is not None:
                self._samples.setdefault(key, deque()).append(_sample(now, broker.status))
            was = self._reachable.get(key)
            if was and not broker.reachable:
                new.append(
                    Event(
                        now,
                        broker.group,
                        "unreachable",
                        f"broker {broker.broker_id} ({broker.last_role}) stopped answering: {broker.error}",
                    )
                )
            elif was is False and broker.reachable:
                new.append(
                    Event(now, broker.group, "back", f"broker {broker.broker_id} answers again as {broker.role}")
                )
            self._reachable[key] = broker.reachable
        for group in snapshot.groups():
            if group:
                new += self._group_events(snapshot, group, now)
        for samples in self._samples.values():
            while samples and samples[0].at_ms < now - self.window_ms:
                samples.popleft()
        self.events.extend(new)
        self.latest = snapshot
        return new

    def _group_events(self, snapshot: Snapshot, group: str, now: int) -> list[Event]:
        state = self._groups.get(group)
        master = snapshot.master(group)
        epoch = int((master.status or {}).get("epoch", 0)) if master is not None else 0
        if state is None:
            state = self._groups[group] = _GroupState()
            where = f"master broker {master.broker_id}, epoch {epoch}" if master is not None else "no master"
            state.master_id, state.epoch, state.has_master = (
                master.broker_id if master else None,
                epoch,
                master is not None,
            )
            return [Event(now, group, "start", f"console started watching {group}: {where}")]
        events = []
        if master is None:
            if state.has_master:
                events.append(Event(now, group, "no-master", f"{group} has no master answering"))
            state.has_master = False
            return events
        if state.master_id is not None and master.broker_id != state.master_id:
            old = next((b for b in snapshot.brokers if b.group == group and b.broker_id == state.master_id), None)
            kind = "switchover" if old is not None and old.reachable else "failover"
            events.append(
                Event(
                    now,
                    group,
                    kind,
                    f"{kind}: master broker {state.master_id} -> broker {master.broker_id} "
                    f"(epoch {state.epoch} -> {epoch})",
                )
            )
        elif epoch != state.epoch:
            events.append(Event(now, group, "epoch", f"broker {master.broker_id} is master at epoch {epoch}"))
        state.master_id, state.epoch, state.has_master = master.broker_id, epoch, True
        return events

    # -- reading --------------------------------------------------------------------------------

    def brokers(self) -> list[BrokerKey]:
        return sorted(self._samples)

    def points(self, key: BrokerKey) -> list[Point]:
        """Per interval between two samples of the broker: rates and put latency percentiles."""
        samples = list(self._samples.get(key, ()))
        points = []
        for before, after in zip(samples, samples[1:]):
            seconds = (after.at_ms - before.at_ms) / 1000
            puts = after.put_messages - before.put_messages
            gets = after.get_messages - before.get_messages
            latency = [a - b for a, b in zip(after.latency_counts, before.latency_counts)]
            if seconds <= 0 or puts < 0 or gets < 0 or any(d < 0 for d in latency):
                continue  # restarted in between: its counters began again
            points.append(
                Point(
                    after.at_ms,
                    puts / seconds,
                    gets / seconds,
                    percentile_ms(latency, 0.5),
                    percentile_ms(latency, 0.99),
                )
            )
        return points

    def slave_lags(self, group: str) -> dict[int, list[tuple[int, int, float]]]:
        """Each slave's (time, lag bytes, lag seconds) as the group's masters reported it."""
        out: dict[int, list[tuple[int, int, float]]] = {}
        for (g, _), samples in sorted(self._samples.items()):
            if g != group:
                continue
            for sample in samples:
                for slave_id, (lag_bytes, lag_s) in sample.slave_lags.items():
                    out.setdefault(slave_id, []).append((sample.at_ms, lag_bytes, lag_s))
        return {slave_id: sorted(points) for slave_id, points in sorted(out.items())}

    def last_rates(self, key: BrokerKey) -> Point | None:
        points = self.points(key)
        return points[-1] if points else None

    def recent_events(self, since_ms: int = 0, groups: Iterable[str] | None = None) -> list[Event]:
        wanted = None if groups is None else set(groups)
        return [e for e in self.events if e.at_ms >= since_ms and (wanted is None or e.group in wanted)]
