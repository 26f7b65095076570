"""`ReplicaTracker`: the master's view of its slaves, and its `ReplicaGate` (store/replication.py).

Replication sessions register, report acknowledgements (every byte below `durable_offset` is
durable on that slave) and go away. A SYNC_MASTER put ending at `next_offset` asks `request`:

- ASYNC_MASTER: PUT_OK;
- fewer *fit* slaves than needed (`in_sync_replicas - 1`, but at least one: RocketMQ's default
  `inSyncReplicas` is 1, and a SYNC_MASTER's promise is that a slave holds the message, as in
  RocketMQ 4.x): SLAVE_NOT_AVAILABLE at once; a slave
  is fit while connected and no more than `fallbehind_max` bytes behind the master's max offset;
- the needed-th highest ack already at `next_offset`: PUT_OK;
- else a `StatusFuture`, settled by `ack` (PUT_OK once the needed-th highest ack reaches it), by
  `remove` (SLAVE_NOT_AVAILABLE when fewer than needed fit slaves remain) or by `expire`
  (FLUSH_SLAVE_TIMEOUT past `slave_timeout_ms`; the put path stops waiting at that deadline on
  its own, expiry only keeps the waiter list short).

One slave (broker id) counts once: a slave that reconnects before its old stream is known dead
replaces the old session. `request` is also the "new data" signal: it calls every listener added
with `add_new_data_listener`, so streaming sessions send a put's bytes at once.

Controller mode (`set_isr`): the in-sync set in etcd replaces "the needed-th highest ack". A
SYNC_MASTER put is PUT_OK once every slave of the set (and every slave proposed to join it:
`propose_join`, which admits only a slave that holds everything confirmed) acknowledged it;
with fewer than `max(2, in_sync_replicas)` replicas in the set (the master counts) it is
IN_SYNC_REPLICAS_NOT_ENOUGH at once. A member whose stream ends stays required until the
controller has removed it from the set in etcd (`set_isr` again): acknowledging without it
before that could lose a message it alone was missing if it were elected.

`confirmed_offset` is what the needed slaves hold (the master's max offset on an ASYNC_MASTER);
it never goes back. `snapshots(now_ms)` describe the slaves for the admin API.
`lag_seconds` is the time since the slave last held everything the master had: the tracker keeps
a few (time, master max offset) marks, taken when puts or acks see the max offset grow, and an
ack at or above a mark's offset proves the slave caught up with the master as it was then.
`silent_ms` is the time since the slave's last report: a caught-up slave that stopped reporting
(paused, cut off) keeps `lag_seconds` at 0 while nothing new is written, and this says it is not
keeping up all the same.

Thread-safety: every method may be called from any thread; state is behind one lock. Futures are
completed and listeners called outside it.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from store.log.status_future import StatusFuture, settle_all
from store.log.waiters import OffsetWaiters
from store.status import BrokerRole, PutMessageStatus

log = logging.getLogger(__name__)

Status = PutMessageStatus
# Marks of the master's max offset over time, for lag_seconds: at most one per interval, and a
# bounded number (dropping the oldest only makes lag_seconds read higher, never lower).
MARK_INTERVAL_MS = 10
MAX_MARKS = 4096


@dataclass(frozen=True, slots=True)
class SlaveSnapshot:
    ha_peer: str
    broker_id: int
    client_endpoint: str
    ack_offset: int
    lag_bytes: int
    lag_seconds: float
    fit: bool
    connected_at_ms: int
    # How long since the slave's last report (any report: heartbeats count). A slave sends one
    # at least every haSendHeartbeatInterval, so a longer silence means it is stopped or cut off.
    silent_ms: int = 0


class _Session:
    __slots__ = (
        "session_id",
        "ha_peer",
        "broker_id",
        "client_endpoint",
        "ack_offset",
        "connected_at_ms",
        "caught_up_at_ms",
        "last_report_ms",
    )

    def __init__(
        self, session_id: Hashable, ha_peer: str, broker_id: int, client_endpoint: str, start_offset: int, now_ms: int
    ):
        self.session_id = session_id
        self.ha_peer = ha_peer
        self.broker_id = broker_id
        self.client_endpoint = client_endpoint
        self.ack_offset = start_offset
        self.connected_at_ms = now_ms
        self.caught_up_at_ms = now_ms
        self.last_report_ms = now_ms


class ReplicaTracker:
    def __init__(
        self,
        role: BrokerRole,
        in_sync_replicas: int,
        slave_timeout_ms: int,
        fallbehind_max: int,
        master_max_offset: Callable[[], int],
    ) -> None:
        if in_sync_replicas < 1:
            raise ValueError(f"in_sync_replicas must be at least 1, got {in_sync_replicas}")
        self.role = role
        self.in_sync_replicas = in_sync_replicas
        self.needed = max(1, in_sync_replicas - 1) if role is BrokerRole.SYNC_MASTER else 0
        self.slave_timeout_ms = slave_timeout_ms
        self.fallbehind_max = fallbehind_max
        self._master_max_offset = master_max_offset
        self._lock = threading.Lock()
        self._sessions: dict[Hashable, _Session] = {}
        self._waiters: OffsetWaiters[StatusFuture] = OffsetWaiters()
        self._confirmed = 0
        self._marks: deque[tuple[int, int]] = deque(maxlen=MAX_MARKS)
        self._listeners: tuple[Callable[[], None], ...] = ()
        # Controller mode: committed in-sync slave ids (None: static mode) and proposed joiners.
        self._isr: frozenset[int] | None = None
        self._pending: frozenset[int] = frozenset()
        self._min_isr = max(2, in_sync_replicas)

    # -- the new-data signal -------------------------------------------------------------------

    def add_new_data_listener(self, listener: Callable[[], None]) -> None:
        """`listener()` runs on the putting thread at every `request`: keep it short."""
        with self._lock:
            self._listeners = self._listeners + (listener,)

    def remove_new_data_listener(self, listener: Callable[[], None]) -> None:
        # Equality, not identity: a bound method (`servicer._wake_all`) is a new object at every
        # attribute access, equal to the one added but never the same.
        with self._lock:
            self._listeners = tuple(fn for fn in self._listeners if fn != listener)

    def _signal_new_data(self) -> None:
        for listener in self._listeners:
            listener()

    # -- sessions ------------------------------------------------------------------------------

    def register(
        self,
        session_id: Hashable,
        *,
        ha_peer: str,
        broker_id: int,
        client_endpoint: str,
        start_offset: int,
        now_ms: int,
    ) -> list[Hashable]:
        """A slave's stream starts at `start_offset` (it holds every byte the master still has
        below it). Returns the ids of older sessions of the same broker id, which it replaces."""
        with self._lock:
            if session_id in self._sessions:
                raise ValueError(f"replication session {session_id!r} is already registered")
            replaced = [s.session_id for s in self._sessions.values() if s.broker_id == broker_id]
            for old in replaced:
                del self._sessions[old]
            session = _Session(session_id, ha_peer, broker_id, client_endpoint, start_offset, now_ms)
            self._sessions[session_id] = session
            self._mark(now_ms)
            self._caught_up(session, now_ms, first=True)
            released = self._release()
        settle_all(released, Status.PUT_OK)
        return replaced

    def ack(self, session_id: Hashable, durable_offset: int, now_ms: int) -> bool:
        """The slave holds every byte below `durable_offset`. False for an unknown (removed or
        replaced) session. Also expires waiters past their deadline."""
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None:
                return False
            if durable_offset > session.ack_offset:
                session.ack_offset = durable_offset
            session.last_report_ms = max(session.last_report_ms, now_ms)
            self._mark(now_ms)
            self._caught_up(session, now_ms)
            released = self._release()
            expired = self._waiters.expire(now_ms)
        settle_all(released, Status.PUT_OK)
        settle_all(expired, Status.FLUSH_SLAVE_TIMEOUT)
        return True

    def remove(self, session_id: Hashable, now_ms: int) -> bool:
        """The session's stream ended. False when it was not registered (or already replaced)."""
        with self._lock:
            if self._sessions.pop(session_id, None) is None:
                return False
            unavailable = []
            shortage = self._shortage()
            if self._waiters and shortage is not None:
                unavailable = self._waiters.drain()
            expired = self._waiters.expire(now_ms)
        settle_all(unavailable, shortage or Status.SLAVE_NOT_AVAILABLE)
        settle_all(expired, Status.FLUSH_SLAVE_TIMEOUT)
        return True

    def expire(self, now_ms: int) -> int:
        """Complete waiters past their deadline with FLUSH_SLAVE_TIMEOUT; returns how many."""
        with self._lock:
            expired = self._waiters.expire(now_ms)
        settle_all(expired, Status.FLUSH_SLAVE_TIMEOUT)
        return len(expired)

    def close(self) -> None:
        """Shutdown: every waiter gets SLAVE_NOT_AVAILABLE, sessions are forgotten."""
        with self._lock:
            pending = self._waiters.drain()
            self._sessions.clear()
        settle_all(pending, Status.SLAVE_NOT_AVAILABLE)

    # -- the gate ------------------------------------------------------------------------------

    def request(self, next_offset: int, now_ms: int) -> Status | StatusFuture:
        """The ReplicaGate: a status now, or a future of one, for a put ending at `next_offset`."""
        try:
            if self.role is not BrokerRole.SYNC_MASTER or self.needed <= 0:
                return Status.PUT_OK
            with self._lock:
                self._mark(now_ms)
                expired = self._waiters.expire(now_ms)
                shortage = self._shortage()
                if shortage is not None:
                    outcome: Status | StatusFuture = shortage
                elif self._watermark() >= next_offset:
                    outcome = Status.PUT_OK
                else:
                    outcome = StatusFuture()
                    self._waiters.add(next_offset, now_ms + self.slave_timeout_ms, outcome)
            settle_all(expired, Status.FLUSH_SLAVE_TIMEOUT)
            return outcome
        finally:
            self._signal_new_data()

    # -- controller mode -----------------------------------------------------------------------

    def set_isr(self, slave_ids: frozenset[int] | None) -> None:
        """The in-sync slaves as committed in etcd (the master not included); None: static mode.
        Waiters are released or, when the set became too small, answered at once."""
        with self._lock:
            self._isr = frozenset(slave_ids) if slave_ids is not None else None
            self._pending = self._pending - (self._isr or frozenset())
            released = self._release()
            shortage = self._shortage()
            short = self._waiters.drain() if shortage is not None and self._waiters else []
        settle_all(released, Status.PUT_OK)
        settle_all(short, shortage or Status.IN_SYNC_REPLICAS_NOT_ENOUGH)

    def propose_join(self, broker_id: int) -> bool:
        """Require `broker_id`'s acks from now on, if it holds everything confirmed so far (so
        that it holds every acknowledged message once the controller commits it to the set)."""
        with self._lock:
            if self._isr is None or broker_id in self._isr:
                return False
            acks = [s.ack_offset for s in self._sessions.values() if s.broker_id == broker_id]
            if not acks or max(acks) < self._confirm():
                return False
            self._pending = self._pending | {broker_id}
            return True

    def cancel_join(self, broker_id: int) -> None:
        """The join was not committed: stop requiring `broker_id` (releases waiters)."""
        with self._lock:
            self._pending = self._pending - {broker_id}
            released = self._release()
        settle_all(released, Status.PUT_OK)

    def reset(self, role: BrokerRole, confirmed_floor: int = 0) -> None:
        """A role change: sessions are forgotten, waiters answered SLAVE_NOT_AVAILABLE, the
        in-sync set emptied (controller mode stays on), and the confirmed offset starts at
        `confirmed_floor` (what the new master knows was confirmed by its predecessor)."""
        with self._lock:
            pending = self._waiters.drain()
            self._sessions.clear()
            self._marks.clear()
            self.role = role
            self.needed = max(1, self.in_sync_replicas - 1) if role is BrokerRole.SYNC_MASTER else 0
            if self._isr is not None:
                self._isr = frozenset()
            self._pending = frozenset()
            self._confirmed = confirmed_floor
        settle_all(pending, Status.SLAVE_NOT_AVAILABLE)

    def in_sync(self) -> tuple[frozenset[int], frozenset[int]] | None:
        """(committed, proposed) in-sync slave ids; None in static mode."""
        with self._lock:
            return None if self._isr is None else (self._isr, self._pending)

    # -- views ---------------------------------------------------------------------------------

    @property
    def confirmed_offset(self) -> int:
        if self.needed <= 0 and self._isr is None:
            return self._master_max_offset()
        with self._lock:
            return self._confirm()

    @property
    def session_count(self) -> int:
        with self._lock:
            return len(self._sessions)

    @property
    def waiting(self) -> int:
        with self._lock:
            return len(self._waiters)

    def snapshots(self, now_ms: int) -> list[SlaveSnapshot]:
        master_max = self._master_max_offset()
        with self._lock:
            sessions = sorted(self._sessions.values(), key=lambda s: (s.broker_id, s.connected_at_ms))
            out = []
            for s in sessions:
                behind = max(0, master_max - s.ack_offset)
                lag_s = 0.0 if behind == 0 else max(0, now_ms - s.caught_up_at_ms) / 1000
                out.append(
                    SlaveSnapshot(
                        ha_peer=s.ha_peer,
                        broker_id=s.broker_id,
                        client_endpoint=s.client_endpoint,
                        ack_offset=s.ack_offset,
                        lag_bytes=behind,
                        lag_seconds=lag_s,
                        fit=behind <= self.fallbehind_max,
                        connected_at_ms=s.connected_at_ms,
                        silent_ms=max(0, now_ms - s.last_report_ms),
                    )
                )
        return out

    # -- under the lock ------------------------------------------------------------------------

    def _fit_count(self) -> int:
        master_max = self._master_max_offset()
        limit = self.fallbehind_max
        return sum(1 for s in self._sessions.values() if master_max - s.ack_offset <= limit)

    def _shortage(self) -> Status | None:
        """Why a SYNC_MASTER put cannot be acknowledged at all now, or None."""
        if self._isr is not None:
            if len(self._isr | self._pending) + 1 < self._min_isr:
                return Status.IN_SYNC_REPLICAS_NOT_ENOUGH
            return None
        if self._fit_count() < self.needed:
            return Status.SLAVE_NOT_AVAILABLE
        return None

    def _watermark(self) -> int:
        """Static mode: the needed-th highest ack, every byte below it is on `needed` slaves.
        Controller mode: the lowest ack of the required slaves (the master's end without any)."""
        if self._isr is not None:
            required = self._isr | self._pending
            if not required:
                return self._master_max_offset()
            by_broker: dict[int, int] = {}
            for s in self._sessions.values():
                if s.broker_id in required:
                    by_broker[s.broker_id] = max(by_broker.get(s.broker_id, 0), s.ack_offset)
            return min(by_broker.get(i, 0) for i in required)
        needed = self.needed
        if needed <= 0 or len(self._sessions) < needed:
            return 0
        acks = sorted((s.ack_offset for s in self._sessions.values()), reverse=True)
        return acks[needed - 1]

    def _release(self) -> list[StatusFuture]:
        self._confirm()
        if not self._waiters or (self._isr is not None and self._shortage() is not None):
            return []
        return self._waiters.release(self._watermark())

    def _confirm(self) -> int:
        watermark = min(self._watermark(), self._master_max_offset())
        if watermark > self._confirmed:
            self._confirmed = watermark
        return self._confirmed

    def _mark(self, now_ms: int) -> None:
        master_max = self._master_max_offset()
        marks = self._marks
        if marks and marks[-1][1] >= master_max:
            return
        if marks and now_ms - marks[-1][0] < MARK_INTERVAL_MS:
            # Moving the newest mark later keeps lag_seconds on the safe (higher) side.
            marks[-1] = (now_ms, master_max)
        else:
            marks.append((now_ms, master_max))

    def _caught_up(self, session: _Session, now_ms: int, first: bool = False) -> None:
        """Move the session's caught-up time to the newest mark its ack covers. A new session
        without such a mark counts from its connection (the tracker knows no better)."""
        ack = session.ack_offset
        marks = self._marks
        if marks and ack >= marks[-1][1]:
            session.caught_up_at_ms = now_ms
        else:
            since = next((time_ms for time_ms, master_max in reversed(marks) if master_max <= ack), None)
            if since is not None and (first or since > session.caught_up_at_ms):
                session.caught_up_at_ms = since
        # Marks no session needs any more: every slave's ack is past them.
        floor = min(s.ack_offset for s in self._sessions.values())
        while len(marks) > 1 and marks[1][1] <= floor:
            marks.popleft()
