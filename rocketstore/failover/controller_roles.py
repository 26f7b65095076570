"""`ControllerRoles`: a broker's role changes in controller mode, the `controller_agent.Roles`
the agent drives.

It owns what only controller mode has: the epoch history (`ha.epoch_keeper.EpochKeeper`), the
epoch this broker is master in (None while it is not), the master it follows, and the confirmed
offset it last knew (the floor of the dispatch limit across role changes). It carries its
decisions out on the broker's replication side (`replication_side.ReplicationSide`: the store,
the replica tracker, the replication server and client), never on the broker itself.

- `open()`: at start-up, the epochs made consistent with the recovered log, then a standby
  replication server (any broker may be elected), the store's dispatch limit and put fence.
- `promote(epoch)`: stop replicating, record the epoch at the log's end, reset the tracker (alone
  in its in-sync set), let the store take puts.
- `step_down(reason)`: end the replication streams, reset the tracker, the store refuses puts.
- `follow(master)`: a replicator streaming from `master` (reconciling epochs first).
- `put_fence()`: why a put must be refused before it is appended (not master, lease, handover,
  too few in-sync replicas), or None. `confirmed_offset()`: the dispatch limit.

`wait_caught_up` (also used by static mode's switchover) blocks until a slave acknowledged the
whole log with no put waiting.

Thread-safety: role changes run under the replication side's role lock (the agent's control
thread, an admin worker thread, the shutdown); `put_fence`, `confirmed_offset` and
`acting_epoch` are read from any thread without it (they read single attributes).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from ha.controller import ReplicaProgress
from ha.epoch_keeper import EpochKeeper
from ha.group_state import BrokerRecord, MasterRecord
from ha.replica_tracker import ReplicaTracker
from store import BrokerRole, MessageStore
from store.clock import wall_clock_ms

from .replication_side import ReplicationSide

log = logging.getLogger("rocketstore.broker")

CAUGHT_UP_POLL_S = 0.005


def wait_caught_up(store: MessageStore, tracker: ReplicaTracker, broker_id: int, timeout_s: float) -> int | None:
    """Block until `broker_id` acknowledged the store's whole log and no put waits for a slave
    (the caller has fenced puts); the offset, or None at the timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        target = store.max_offset
        acks = [s.ack_offset for s in tracker.snapshots(wall_clock_ms()) if s.broker_id == broker_id]
        if acks and max(acks) >= target and tracker.waiting == 0 and store.max_offset == target:
            return target
        if time.monotonic() >= deadline:
            return None
        time.sleep(CAUGHT_UP_POLL_S)


class ControllerRoles:
    def __init__(
        self,
        side: ReplicationSide,
        keeper: EpochKeeper,
        *,
        broker_id: int,
        client_endpoint: str,
        in_sync_replicas: int,
    ) -> None:
        """`keeper` is the epoch history `side` serves to and records for its peers."""
        self._side = side
        self.keeper = keeper
        self._broker_id = broker_id
        self._client_endpoint = client_endpoint
        self._in_sync_replicas = in_sync_replicas
        self._may_acknowledge: Callable[[], str | None] | None = None
        self._acting_epoch: int | None = None
        self._following: MasterRecord | None = None
        self._confirmed_floor = 0

    def open(self) -> None:
        """At start-up, before the store starts: the epoch history made consistent with the
        recovered log and the confirmed floor (what was dispatched before stays visible), then
        replication served (alone in its in-sync set), the dispatch limit and the put fence."""
        side = self._side
        store = side.store
        history = self.keeper.open(store.max_offset)
        log.info("epochs: %s", list(history) or "none yet")
        self._confirmed_floor = store.dispatched_offset
        side.serve().set_isr(frozenset())
        store.set_dispatch_limit(self.confirmed_offset)
        store.set_put_fence(self.put_fence)

    def attach(self, may_acknowledge: Callable[[], str | None]) -> None:
        """The agent's lease fence (`ControllerAgent.may_acknowledge`), once the agent exists:
        until then every put is refused."""
        self._may_acknowledge = may_acknowledge

    def released(self) -> None:
        """The lease is given back (shutdown): not master any more."""
        with self._side.lock:
            self._acting_epoch = None

    @property
    def epoch(self) -> int:
        acting = self._acting_epoch
        return acting if acting is not None else self.keeper.last_epoch

    @property
    def _tracker(self) -> ReplicaTracker:
        tracker = self._side.tracker
        if tracker is None:
            raise RuntimeError("controller mode serves replication from open() on")
        return tracker

    # -- what the store asks on every put and dispatch round -----------------------------------

    def confirmed_offset(self) -> int:
        """What every in-sync replica holds, as far as this broker knows (the dispatch limit)."""
        side = self._side
        if self._acting_epoch is not None:
            return self._tracker.confirmed_offset
        replicator = side.replicator
        confirmed = max(self._confirmed_floor, replicator.confirmed_offset if replicator is not None else 0)
        return min(confirmed, side.store.max_offset)

    def put_fence(self) -> str | None:
        may_acknowledge = self._may_acknowledge
        if may_acknowledge is None:
            return "this broker has not joined its group in etcd yet"
        reason = may_acknowledge()
        if reason is not None:
            return reason
        tracker = self._tracker
        if tracker.role is BrokerRole.SYNC_MASTER:
            committed, proposed = tracker.in_sync() or (frozenset(), frozenset())
            replicas = len(committed | proposed) + 1
            needed = max(2, self._in_sync_replicas)
            if replicas < needed:
                return (
                    f"IN_SYNC_REPLICAS_NOT_ENOUGH: {replicas} in-sync replicas, "
                    f"a SYNC_MASTER needs {needed}: waiting for a replica to join"
                )
        return None

    # -- the agent's `Roles` -------------------------------------------------------------------

    def record(self) -> BrokerRecord:
        side = self._side
        max_offset = side.store.max_offset
        history = self.keeper.history
        epoch = history.epoch_at(max_offset - 1) if max_offset > 0 else None
        entry = history.entry(epoch) if epoch is not None else None
        return BrokerRecord(
            broker_id=self._broker_id,
            client_endpoint=self._client_endpoint,
            ha_endpoint=side.ha_endpoint,
            max_offset=max_offset,
            last_epoch=entry.epoch if entry is not None else 0,
            last_epoch_start=entry.start_offset if entry is not None else 0,
        )

    def acting_epoch(self) -> int | None:
        return self._acting_epoch

    def promote(self, epoch: int) -> None:
        side = self._side
        with side.lock:
            if self._acting_epoch == epoch:
                return
            if self._acting_epoch is not None:
                self.step_down(f"re-elected for epoch {epoch}")
            confirmed = side.stop_following()
            if confirmed is not None:
                self._confirmed_floor = max(self._confirmed_floor, confirmed)
            start = side.store.max_offset
            self.keeper.begin(epoch, start)
            side.become_master(side.role, confirmed_floor=min(self._confirmed_floor, start))
            self._following = None
            self._acting_epoch = epoch
            log.warning("master of epoch %d from offset %d (%s)", epoch, start, side.role.name)

    def step_down(self, reason: str) -> None:
        side = self._side
        with side.lock:
            if self._acting_epoch is None:
                return
            epoch, self._acting_epoch = self._acting_epoch, None
            self._confirmed_floor = max(self._confirmed_floor, self._tracker.confirmed_offset)
            side.step_down(reason, confirmed_floor=self._confirmed_floor)
            log.warning("no longer master of epoch %d: %s", epoch, reason)

    def follow(self, master: MasterRecord) -> None:
        side = self._side
        with side.lock:
            if master.broker_id == self._broker_id:
                return
            if self._acting_epoch is not None:
                self.step_down(f"broker {master.broker_id} is master of epoch {master.epoch}")
            current = self._following
            if current is not None and (current.ha_endpoint, current.epoch) == (master.ha_endpoint, master.epoch):
                return
            side.follow(master.ha_endpoint)
            self._following = master
            log.info("following broker %d (epoch %d) at %s", master.broker_id, master.epoch, master.ha_endpoint)

    def replica_progress(self) -> list[ReplicaProgress]:
        return [
            ReplicaProgress(s.broker_id, s.ack_offset, s.lag_bytes, int(s.lag_seconds * 1000), s.silent_ms)
            for s in self._tracker.snapshots(wall_clock_ms())
        ]

    def set_in_sync(self, slave_ids: frozenset[int]) -> None:
        tracker = self._tracker
        current = tracker.in_sync()
        if current is None or current[0] != slave_ids:
            tracker.set_isr(slave_ids)

    def propose_join(self, broker_id: int) -> bool:
        return self._tracker.propose_join(broker_id)

    def cancel_join(self, broker_id: int) -> None:
        self._tracker.cancel_join(broker_id)

    def wait_caught_up(self, broker_id: int, timeout_s: float) -> int | None:
        return wait_caught_up(self._side.store, self._tracker, broker_id, timeout_s)
