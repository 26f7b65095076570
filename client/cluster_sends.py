"""Spreading sends over the broker groups of a cluster and steering around a failing one, sans-IO.

A topic's route (QueryRoute on any broker of the cluster) names the writable queues of every
group's master (broker id 0). `ClusterRoute` holds them, with every entry the route named (slaves
and read-only queues too) and a version; `TopicRoutes` keeps a producer's routes per topic and
decides, in one place, whether a send chooses its group and queue from the route or follows the
group the producer was given (`spread_route`): once a route has named more than one group, the
producer is in a cluster and takes the route's writable queues, whichever groups they belong to,
for as long as it runs (the group it was given may lose its master, be drained, or leave; its
sends go on to the others and return when the route names it writable again). A producer whose
routes never named another group, or a topic whose route has no writable queue, follows the
given group's master as `client.failover` decides.

`QueueChooser` takes the writable queues round robin across all groups, as RocketMQ's producer
does, over the groups that `FaultRecord` does not hold out, so that a held-out group's share
spreads evenly over the others; a send with a message group always takes the queue its group
hashes to (crc32 over the writable queues), so that a group's messages stay in one queue, in
order.

`FaultRecord` is RocketMQ's send-latency fault tolerance: a send that took longer than a latency
step holds its group out of the rotation for that step's pause (550 ms -> 30 s, ... 15 s -> 10 min:
RocketMQ's tables); a send that failed (unreachable, timed out, not the master, drained) holds it
out for `failure_pause_s`. When every group is held out, the one whose pause ends first is used
anyway: sends never stop for the record's sake. A hold ends early when a route shows the group
is back: a route that names a new master for it (a failover), or a route of a topic that names
it writable after the topic's previous route did not (back from a drain, a master restarted).

A route answer gets the next version; a send that learns a group's new master from a not-master
answer writes it into the topic's route only while that route is still the one the send started
from, so a send in flight during a refresh never puts its older route back over the newer one.

`SpreadSend` decides, for one send, what to do after each attempt:

- success: RETURN (the latency is recorded);
- not master, naming the new master: SEND there at once (same group, same queue);
- a retryable failure (transport, timeout, not master unnamed, a drained group, a master that
  cannot acknowledge now): the group is held out and the send goes to another group at once;
  with a message group, or when every group failed this send, REFRESH the route after a pause
  and SEND again;
- anything else: GIVE_UP (raise it).

Every attempt re-sends the same message ids (at least once, as single-group sends). The budget is
the producer's `RetryPolicy.retry_timeout_s`, as in `client.failover`.

Thread-safety: `FaultRecord`, `QueueChooser` and `TopicRoutes` take a lock (a blocking producer's
threads share them); `ClusterRoute` and steps are immutable; a `SpreadSend` belongs to one send.
"""

from __future__ import annotations

import dataclasses
import enum
import itertools
import threading
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .convert import QueueInfo, home_group
from .errors import BrokerError, NotMasterError, RocketStoreError
from .failover import RetryPolicy, is_retryable

# RocketMQ's latencyMax and notAvailableDuration, in ms.
LATENCY_STEPS_MS = (50, 100, 550, 1000, 2000, 3000, 15000)
PAUSE_STEPS_MS = (0, 0, 30_000, 60_000, 120_000, 180_000, 600_000)
FAILURE_PAUSE_S = 30.0
# (latency ms, pause ms), longest first: the first step a send reaches decides its pause.
_STEPS_LONGEST_FIRST = tuple(reversed(tuple(zip(LATENCY_STEPS_MS, PAUSE_STEPS_MS))))


@dataclass(frozen=True, slots=True)
class Target:
    broker_name: str
    queue_id: int
    endpoint: str


@dataclass(frozen=True, slots=True)
class ClusterRoute:
    """The writable master queues of a topic, per group, in a stable order; `named`, every entry
    of the answer it was read from; `version`, which answer (0: none, or read outside a
    `TopicRoutes`)."""

    queues: tuple[Target, ...]
    named: tuple[QueueInfo, ...] = ()
    version: int = 0

    @classmethod
    def of(cls, queues: Iterable[QueueInfo]) -> "ClusterRoute":
        named = tuple(queues)
        targets = {
            (q.broker_name, q.queue_id): Target(q.broker_name, q.queue_id, q.endpoint)
            for q in named
            if q.broker_id == 0 and q.writable and q.endpoint
        }
        return cls(tuple(targets[key] for key in sorted(targets)), named)

    @property
    def groups(self) -> tuple[str, ...]:
        """The groups with a writable queue."""
        return tuple(dict.fromkeys(t.broker_name for t in self.queues))

    @property
    def named_groups(self) -> frozenset[str]:
        """Every group the answer named, writable or not (a drained group, a group of slaves)."""
        return frozenset(q.broker_name for q in self.named)

    def master_of(self, broker_name: str) -> str:
        return next((t.endpoint for t in self.queues if t.broker_name == broker_name), "")

    def group_of(self, endpoint: str) -> str:
        """The group of the broker at `endpoint` (or the route's only group); "" when it cannot tell."""
        return home_group(self.named, endpoint) or ""

    def moved(self, broker_name: str, endpoint: str) -> "ClusterRoute":
        """The route with `broker_name`'s master at `endpoint` (a not-master answer named it)."""
        queues = tuple(
            Target(t.broker_name, t.queue_id, endpoint) if t.broker_name == broker_name else t for t in self.queues
        )
        return dataclasses.replace(self, queues=queues)


EMPTY_ROUTE = ClusterRoute(())


class FaultRecord:
    def __init__(self, failure_pause_s: float = FAILURE_PAUSE_S) -> None:
        self.failure_pause_s = failure_pause_s
        self._lock = threading.Lock()
        self._until: dict[str, float] = {}
        self._masters: dict[str, str] = {}

    def record(self, broker_name: str, latency_s: float, now: float, *, failed: bool = False) -> None:
        if failed:
            pause = self.failure_pause_s
        else:
            latency_ms = latency_s * 1000
            pause = next((p / 1000 for limit, p in _STEPS_LONGEST_FIRST if latency_ms >= limit), 0.0)
        with self._lock:
            if pause > 0:
                self._until[broker_name] = now + pause
            elif not failed:
                self._until.pop(broker_name, None)

    def available(self, broker_name: str, now: float) -> bool:
        with self._lock:
            return self._until.get(broker_name, 0.0) <= now

    def held_until(self, broker_name: str) -> float:
        with self._lock:
            return self._until.get(broker_name, 0.0)

    def saw_route(self, route: ClusterRoute, previous: ClusterRoute | None = None) -> None:
        """A group is back, and starts with a clean record, when its master changed since the
        last route that named it (any topic's), or when `previous`, the same topic's last route,
        did not have it writable (drained, no master, not registered) and `route` has."""
        back = set(route.groups) - set(previous.groups) if previous is not None else set()
        with self._lock:
            for name in route.groups:
                master = route.master_of(name)
                if name in back or self._masters.get(name, master) != master:
                    self._until.pop(name, None)
                self._masters[name] = master

    def held_out(self, now: float) -> list[str]:
        with self._lock:
            return sorted(name for name, until in self._until.items() if until > now)


class QueueChooser:
    def __init__(self, start: int = 0) -> None:
        self._lock = threading.Lock()
        self._next = start

    def choose(self, route: ClusterRoute, faults: FaultRecord, now: float, avoid: frozenset[str]) -> Target | None:
        """The next queue round robin over the queues of every group neither held out nor in
        `avoid` (so a held-out group's share spreads evenly over the rest); when all are held
        out, the queue of the group free soonest (outside `avoid`); None when every group is in
        `avoid`."""
        candidates = [t for t in route.queues if t.broker_name not in avoid] if avoid else route.queues
        if not candidates:
            return None
        with self._lock:
            start = self._next
            self._next = (self._next + 1) % (1 << 30)
        held = faults.held_out(now)
        ready = [t for t in candidates if t.broker_name not in held] if held else candidates
        if not ready:
            soonest = min(faults.held_until(t.broker_name) for t in candidates)
            ready = [t for t in candidates if faults.held_until(t.broker_name) == soonest]
        return ready[start % len(ready)]

    @staticmethod
    def for_message_group(route: ClusterRoute, message_group: str) -> Target | None:
        if not route.queues:
            return None
        return route.queues[zlib.crc32(message_group.encode()) % len(route.queues)]


class TopicRoutes:
    """A producer's routes, per topic: the last one answered, when it was asked, and its version;
    the one place that decides whether sends spread over a cluster's groups (`spread_route`)."""

    def __init__(self, refresh_s: float, faults: FaultRecord) -> None:
        self.refresh_s = refresh_s
        self.faults = faults
        self._lock = threading.Lock()
        self._routes: dict[str, tuple[ClusterRoute, float]] = {}
        self._versions = itertools.count(1)
        self._cluster = False  # a route has named more than one group

    def due(self, topic: str, now: float) -> bool:
        with self._lock:
            cached = self._routes.get(topic)
        return cached is None or now - cached[1] >= self.refresh_s

    def get(self, topic: str) -> ClusterRoute:
        with self._lock:
            cached = self._routes.get(topic)
        return cached[0] if cached is not None else EMPTY_ROUTE

    def answered(self, topic: str, route: ClusterRoute | None, now: float) -> ClusterRoute:
        """Keeps the route asked for at `now` under the next version (None: nobody answered, the
        last one stays until the next refresh); returns the topic's route now."""
        with self._lock:
            cached = self._routes.get(topic)
            previous = cached[0] if cached is not None else None
            if route is None:
                kept = previous if previous is not None else EMPTY_ROUTE
            else:
                kept = dataclasses.replace(route, version=next(self._versions))
                self._cluster = self._cluster or len(route.named_groups) > 1
                self.faults.saw_route(kept, previous)
            self._routes[topic] = (kept, now)
        return kept

    def moved(self, topic: str, route: ClusterRoute, broker_name: str, endpoint: str) -> ClusterRoute:
        """`route` with `broker_name`'s master at `endpoint`, as a not-master answer said; the
        topic's route follows only if it is still the version `route` came from (a route
        answered since is newer and stays)."""
        with self._lock:
            cached = self._routes.get(topic)
            if cached is not None and cached[0].version == route.version:
                self._routes[topic] = (cached[0].moved(broker_name, endpoint), cached[1])
        return route.moved(broker_name, endpoint)

    def askees(self, topic: str, given: Sequence[str], now: float) -> list[str]:
        """Whom to ask for `topic`'s route, in order. Any broker of a cluster answers for all of
        it, so the masters of the groups the route names and the fault record does not hold out
        come first, then `given` (the producer's current and given endpoints: the group it was
        given may be the one that is down, and a dead host costs a route timeout), then the rest."""
        route = self.get(topic)
        masters = [route.master_of(name) for name in route.groups]
        held = set(self.faults.held_out(now))
        live = [m for name, m in zip(route.groups, masters) if name not in held]
        return list(dict.fromkeys([*live, *given, *masters]))

    def spread_route(self, topic: str) -> ClusterRoute | None:
        """The route a send without a queue id chooses its group and queue from; None while no
        route has named more than one group (a group standing alone: sends follow its master),
        and while the topic's route has no writable queue at all (none answered, the topic
        exists nowhere, every group drained): then the group the producer was given answers,
        with its own refusal."""
        with self._lock:
            cached = self._routes.get(topic)
            cluster = self._cluster
        return cached[0] if cluster and cached is not None and cached[0].queues else None


class SpreadAction(enum.Enum):
    SEND = "SEND"  # send to `target` after `delay_s`
    REFRESH = "REFRESH"  # after `delay_s`, ask for the topic's route again and report it
    RETURN = "RETURN"
    GIVE_UP = "GIVE_UP"  # raise `error` after `attempts` attempts


@dataclass(frozen=True, slots=True)
class SpreadStep:
    action: SpreadAction
    target: Target | None = None
    delay_s: float = 0.0
    error: RocketStoreError | None = None
    attempts: int = 0


def steers_away(error: RocketStoreError) -> bool:
    """Whether another group (or the same one later) may take what this one did not: retryable
    failures, and a drained group's refusal (FORBIDDEN that is not a not-master answer)."""
    if is_retryable(error):
        return True
    return (
        isinstance(error, BrokerError)
        and not isinstance(error, NotMasterError)
        and error.code_name == "FORBIDDEN"
        and "brokerPermission" in error.message
    )


class SpreadSend:
    """One send over `route`, the topic's route in `routes` when the send began."""

    def __init__(
        self,
        routes: TopicRoutes,
        topic: str,
        route: ClusterRoute,
        chooser: QueueChooser,
        policy: RetryPolicy,
        now: float,
        message_group: str = "",
    ) -> None:
        self._routes = routes
        self._topic = topic
        self._route = route
        self._faults = routes.faults
        self._chooser = chooser
        self._policy = policy
        self._group = message_group
        self._started = now
        self._avoid: set[str] = set()
        self._attempts = 0
        self._pauses = 0
        self._target: Target | None = None
        self._sent_at = now
        self._last_error: RocketStoreError | None = None

    @property
    def route(self) -> ClusterRoute:
        return self._route

    def first(self) -> SpreadStep:
        return self._next(self._started)

    def _next(self, now: float, delay_s: float = 0.0) -> SpreadStep:
        if self._group:
            target = self._chooser.for_message_group(self._route, self._group)
            if target is not None and target.broker_name in self._avoid:
                return self._refresh(now)
        else:
            target = self._chooser.choose(self._route, self._faults, now, frozenset(self._avoid))
        if target is None:
            return self._refresh(now)
        return self._send(target, now, delay_s)

    def _send(self, target: Target, now: float, delay_s: float) -> SpreadStep:
        if self._attempts and now + delay_s - self._started > self._policy.retry_timeout_s:
            return self._give_up()
        self._target = target
        self._attempts += 1
        self._sent_at = now + delay_s
        return SpreadStep(SpreadAction.SEND, target, delay_s)

    def _refresh(self, now: float) -> SpreadStep:
        delay = min(self._policy.backoff_min_s * (2**self._pauses), self._policy.backoff_max_s)
        if now + delay - self._started > self._policy.retry_timeout_s or self._policy.retry_timeout_s == 0:
            return self._give_up()
        self._pauses += 1
        return SpreadStep(SpreadAction.REFRESH, delay_s=delay)

    def _give_up(self) -> SpreadStep:
        error = self._last_error or RocketStoreError("no writable queue in the topic's route")
        return SpreadStep(SpreadAction.GIVE_UP, error=error, attempts=self._attempts)

    def succeeded(self, now: float) -> SpreadStep:
        target = self._target
        assert target is not None
        self._faults.record(target.broker_name, now - self._sent_at, now)
        return SpreadStep(SpreadAction.RETURN, target, attempts=self._attempts)

    def failed(self, error: RocketStoreError, now: float) -> SpreadStep:
        target = self._target
        assert target is not None
        self._last_error = error
        if self._policy.retry_timeout_s == 0:
            return self._give_up()
        if isinstance(error, NotMasterError) and error.master_endpoint and error.master_endpoint != target.endpoint:
            self._route = self._routes.moved(self._topic, self._route, target.broker_name, error.master_endpoint)
            return self._send(Target(target.broker_name, target.queue_id, error.master_endpoint), now, 0.0)
        if not steers_away(error):
            return self._give_up()
        self._faults.record(target.broker_name, now - self._sent_at, now, failed=True)
        self._avoid.add(target.broker_name)
        return self._next(now)

    def refreshed(self, route: ClusterRoute | None, now: float) -> SpreadStep:
        """The route asked for after REFRESH (None: nobody answered), kept in `routes`; every
        group is tried again, over the topic's newest route that has a writable queue."""
        current = self._routes.answered(self._topic, route, now)
        if current.queues:
            self._route = current
        self._avoid.clear()
        return self._next(now)
