"""`ControllerAgent`: controller mode's adapter between etcd and the broker's roles.

Two threads:
- `lease`: grants this broker's etcd lease and keeps it alive every TTL/4. `LeaseClock` turns each
  answered keepalive into the deadline before which a master may acknowledge (the fence); a
  lease etcd no longer knows is replaced by a new one (the broker re-registers with it).
- `control`: every etcdPollInterval reads the group (`ha.group_state` keys, one range request),
  publishes this broker's record, and carries out `ha.controller.decide`: follow the master,
  declare, campaign (one transaction: state unchanged and master absent), or lead. As master it
  also keeps the in-sync set in etcd in step with its slaves (`ha.controller.isr_changes`):
  a join is proposed to the tracker first (which then requires that slave's acks), committed by
  a transaction, and cancelled when the transaction fails; a leave takes effect in the tracker
  only after its transaction succeeded.
  A planned switchover (`hand_over`) runs on the caller's thread: it fences puts, waits until
  the chosen slave acknowledged the master's whole log, and moves the master key to the chosen
  slave's lease with the next epoch in one transaction.

The broker's side is the `Roles` protocol (promote, follow, step down, offsets); etcd errors are
logged once per distinct message and retried every poll. Nothing here logs etcd values.

Thread-safety: `start`/`stop` from the owner; the views (`master`, `may_acknowledge`, `status`)
from any thread (they read immutable snapshots or take the agent's lock).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from ha.config import HaConfig
from ha.controller import Action, GroupView, LeaseClock, ReplicaProgress, decide, isr_changes
from ha.group_state import (
    NO_BROKER,
    BrokerRecord,
    GroupKeys,
    GroupState,
    GroupStateError,
    MasterRecord,
    decode,
    encode,
)
from rocketstore.coordination import Compare, Delete, EtcdClient, EtcdError, KeyValue, LeaseNotFound, Put
from store.clock import monotonic_ms

log = logging.getLogger(__name__)

# A published record is refreshed this often when its offsets moved (declarations go at once).
PUBLISH_INTERVAL_MS = 1000


class Roles(Protocol):
    """What the agent asks of and does to the broker (implemented by `controller_roles.ControllerRoles`)."""

    def record(self) -> BrokerRecord:
        """This broker's record as it would publish it now (endpoints, max offset, last epoch)."""

    def acting_epoch(self) -> int | None:
        """The epoch this broker is master in, or None."""

    def promote(self, epoch: int) -> None:
        """Become master at `epoch` (start offset: the log's end)."""

    def follow(self, master: MasterRecord) -> None:
        """Be a slave of `master` (idempotent for the same master and epoch)."""

    def step_down(self, reason: str) -> None:
        """Stop being master (idempotent)."""

    def replica_progress(self) -> list[ReplicaProgress]:
        """As master: the connected slaves' progress."""

    def set_in_sync(self, slave_ids: frozenset[int]) -> None: ...

    def propose_join(self, broker_id: int) -> bool: ...

    def cancel_join(self, broker_id: int) -> None: ...

    def wait_caught_up(self, broker_id: int, timeout_s: float) -> int | None:
        """As a fenced master: block until `broker_id` acknowledged the whole log (returns the
        offset) or None at the timeout."""


@dataclass(frozen=True, slots=True)
class ControllerStatus:
    master: MasterRecord | None
    state: GroupState | None
    lease_valid_ms: int
    last_error: str
    decision: str


class HandoverError(ValueError):
    """A planned switchover cannot be done (the reason says why)."""


class HandoverTimeout(TimeoutError):
    """The chosen slave did not catch up in time; nothing was handed over."""


class ControllerAgent:
    def __init__(
        self,
        etcd: EtcdClient,
        keys: GroupKeys,
        ha: HaConfig,
        roles: Roles,
        *,
        clock_ms: Callable[[], int] = monotonic_ms,
    ) -> None:
        self._etcd = etcd
        self._keys = keys
        self._ha = ha
        self._roles = roles
        self._clock = clock_ms
        self._lock = threading.Lock()
        self._lease_clock = LeaseClock(ha.etcd_lease_fence_margin_ms)
        self._lease_id = 0
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._master: MasterRecord | None = None
        self._state: GroupState | None = None
        self._last_error = ""
        self._decision = ""
        self._no_master_since = 0
        self._published: BrokerRecord | None = None
        self._published_lease = 0
        self._published_at = 0
        self._handing_over = False
        self._hint_at = 0
        self._declare_wait_ms = 3 * ha.etcd_poll_interval_ms + 200

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        for name, target in (("controller-lease", self._run_lease), ("controller", self._run_control)):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self, timeout_s: float = 3.0) -> None:
        """Stop both threads and give the lease back (a master's key goes with it at once)."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout_s)
        with self._lock:
            lease, self._lease_id = self._lease_id, 0
            self._lease_clock.lost()
        if lease:
            try:
                self._etcd.lease_revoke(lease)
            except EtcdError as exc:
                log.warning("could not revoke the etcd lease on shutdown (it expires on its own): %s", exc)
        self._etcd.close()

    # -- views ---------------------------------------------------------------------------------

    @property
    def master(self) -> MasterRecord | None:
        return self._master

    def may_acknowledge(self) -> str | None:
        """Why this broker must not acknowledge a write now, or None (a master on a live lease)."""
        if self._roles.acting_epoch() is None:
            return "this broker is not the master"
        if self._handing_over:
            return "this master is handing over to another broker"
        if not self._lease_clock.valid(self._clock()):
            return "this master could not renew its lease in time"
        return None

    def status(self) -> ControllerStatus:
        return ControllerStatus(
            master=self._master,
            state=self._state,
            lease_valid_ms=self._lease_clock.remaining_ms(self._clock())
            if self._roles.acting_epoch() is not None
            else 0,
            last_error=self._last_error,
            decision=self._decision,
        )

    # -- the lease -----------------------------------------------------------------------------

    def _run_lease(self) -> None:
        ttl_s = self._ha.etcd_lease_ttl_s
        while not self._stop.is_set():
            sent = self._clock()
            try:
                if not self._lease_id:
                    lease = self._etcd.lease_grant(ttl_s)
                    with self._lock:
                        self._lease_id = lease.id
                        self._lease_clock.renewed(sent, lease.ttl_s)
                    interval_ms = lease.ttl_s * 1000 // 4
                    log.info("etcd lease %x granted, TTL %d s", lease.id, lease.ttl_s)
                else:
                    granted = self._etcd.lease_keepalive(self._lease_id)
                    with self._lock:
                        self._lease_clock.renewed(sent, granted)
                    interval_ms = granted * 1000 // 4
                self._error_cleared("lease")
            except LeaseNotFound:
                with self._lock:
                    log.warning("etcd lease %x expired: this broker registers again", self._lease_id)
                    self._lease_id = 0
                    self._lease_clock.lost()
                interval_ms = 0
            except EtcdError as exc:
                self._error("lease", exc)
                interval_ms = 100
            self._stop.wait(max(0, interval_ms - (self._clock() - sent)) / 1000)

    # -- the control loop ----------------------------------------------------------------------

    def _run_control(self) -> None:
        interval_s = self._ha.etcd_poll_interval_ms / 1000
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self._round()
                self._error_cleared("control")
            except (EtcdError, GroupStateError) as exc:
                self._error("control", exc)
            except Exception:  # noqa: BLE001 - the control loop must outlive one bad round
                log.exception("controller round failed")
            self._stop.wait(max(0.0, interval_s - (time.monotonic() - started)))

    def _read(self) -> tuple[GroupView, dict[int, int], KeyValue | None]:
        """The group as etcd has it, each registered broker's lease, and the master key."""
        keys = self._keys
        result = self._etcd.get_prefix(keys.prefix)
        master = None
        state = None
        state_revision = 0
        brokers: dict[int, BrokerRecord] = {}
        leases: dict[int, int] = {}
        master_kv = None
        for kv in result.kvs:
            if kv.key == keys.master:
                master = decode(MasterRecord, kv.value)
                master_kv = kv
            elif kv.key == keys.state:
                state = decode(GroupState, kv.value)
                state_revision = kv.mod_revision
            elif kv.key.startswith(keys.brokers):
                record = decode(BrokerRecord, kv.value)
                brokers[record.broker_id] = record
                leases[record.broker_id] = kv.lease
        return GroupView(master, state, state_revision, brokers), leases, master_kv

    def _round(self) -> None:
        lease = self._lease_id
        if not lease:
            return  # the lease thread is getting one; nothing may be bound to no lease
        view, leases, master_kv = self._read()
        now = self._clock()
        self._master, self._state = view.master, view.state
        me = self._roles.record()
        if view.master is None:
            if self._no_master_since == 0:
                self._no_master_since = now
        else:
            self._no_master_since = 0
        acting = self._roles.acting_epoch()
        if acting is not None and not self._still_master(view, master_kv, lease, acting):
            self._roles.step_down("this broker no longer holds the master key in etcd")
            acting = None
        decision = decide(
            view,
            me,
            now_ms=now,
            no_master_since_ms=self._no_master_since or now,
            declare_wait_ms=self._declare_wait_ms,
            unclean_allowed=self._ha.enable_elect_unclean_master,
        )
        self._decision = f"{decision.action.name}: {decision.reason}"
        if decision.action is Action.DECLARE:
            self._publish(replace(me, candidate_epoch=decision.declare_epoch), lease, force=True)
            return
        published_candidate = view.brokers.get(me.broker_id)
        candidate_epoch = (
            published_candidate.candidate_epoch if published_candidate is not None and view.master is None else -1
        )
        self._publish(replace(me, candidate_epoch=candidate_epoch), lease, force=leases.get(me.broker_id) != lease)
        if decision.action is Action.FOLLOW and decision.master is not None:
            self._roles.follow(decision.master)
        elif decision.action is Action.LEAD and decision.master is not None:
            self._lead(view, decision.master, master_kv, lease)
        elif decision.action is Action.CAMPAIGN and decision.new_state is not None:
            self._campaign(view, decision.new_state, me, lease)

    def _still_master(self, view: GroupView, kv: KeyValue | None, lease: int, epoch: int) -> bool:
        master = view.master
        return (
            master is not None
            and kv is not None
            and master.broker_id == self._roles.record().broker_id
            and master.epoch == epoch
            and kv.lease == lease
        )

    def _publish(self, record: BrokerRecord, lease: int, *, force: bool) -> None:
        now = self._clock()
        previous = self._published
        if not force and previous is not None and self._published_lease == lease:
            if record == previous or (
                replace(record, max_offset=previous.max_offset) == previous
                and now - self._published_at < PUBLISH_INTERVAL_MS
            ):
                return
        self._etcd.put(self._keys.broker(record.broker_id), encode(record), lease=lease)
        self._published, self._published_lease, self._published_at = record, lease, now

    def _campaign(self, view: GroupView, new_state: GroupState, me: BrokerRecord, lease: int) -> None:
        if not self._lease_clock.valid(self._clock()):
            return  # a master must be able to acknowledge from its first moment
        keys = self._keys
        state_check = (
            Compare.mod_revision(keys.state, view.state_revision) if view.state_revision else Compare.absent(keys.state)
        )
        master = MasterRecord(me.broker_id, new_state.epoch, me.client_endpoint, me.ha_endpoint)
        result = self._etcd.txn(
            [state_check, Compare.absent(keys.master)],
            [Put(keys.state, encode(new_state)), Put(keys.master, encode(master), lease=lease)],
        )
        if not result.succeeded:
            log.info("lost the election for epoch %d (the group changed meanwhile)", new_state.epoch)
            return
        log.warning(
            "won the election: master of epoch %d at offset %d%s",
            new_state.epoch,
            me.max_offset,
            f" (unclean: up to {new_state.unclean_lost_bytes} bytes may be lost)"
            if new_state.unclean_lost_bytes
            else "",
        )
        self._master, self._state = master, new_state
        self._roles.promote(new_state.epoch)

    def _lead(self, view: GroupView, master: MasterRecord, kv: KeyValue | None, lease: int) -> None:
        if kv is not None and kv.lease != lease:
            # The key is bound to a lease of this broker's that is gone or going (a restart):
            # release it so that an election can run, rather than lead on a lease we do not hold.
            self._etcd.txn([Compare.lease(self._keys.master, kv.lease)], [Delete(self._keys.master)])
            return
        if self._roles.acting_epoch() != master.epoch:
            if not self._lease_clock.valid(self._clock()):
                return
            state = view.state
            if state is None or state.epoch != master.epoch or state.master_id != master.broker_id:
                return
            log.warning("taking over as master of epoch %d (handed over)", master.epoch)
            self._roles.promote(master.epoch)
        self._maintain_isr(view, master.broker_id)

    def _maintain_isr(self, view: GroupView, me: int) -> None:
        state = view.state
        if state is None or state.master_id != me:
            return
        self._roles.set_in_sync(state.isr - {me})
        changes = isr_changes(
            state.isr,
            me,
            self._roles.replica_progress(),
            max_time_not_catchup_ms=self._ha.ha_max_time_slave_not_catchup_ms,
        )
        if not changes:
            self._refresh_hint(view, state)
            return
        joins = frozenset(i for i in changes.joins if self._roles.propose_join(i))
        new_isr = (state.isr | joins) - changes.leaves
        if new_isr == state.isr:
            return
        new_state = replace(state, isr=new_isr, master_max_offset=self._roles.record().max_offset)
        result = self._etcd.txn(
            [Compare.mod_revision(self._keys.state, view.state_revision)], [Put(self._keys.state, encode(new_state))]
        )
        if result.succeeded:
            log.info(
                "in-sync replicas %s -> %s (joined %s, left %s)",
                sorted(state.isr),
                sorted(new_isr),
                sorted(joins),
                sorted(changes.leaves),
            )
            self._state = new_state
            self._roles.set_in_sync(new_isr - {me})
        else:
            for broker_id in joins:
                self._roles.cancel_join(broker_id)

    def _refresh_hint(self, view: GroupView, state: GroupState) -> None:
        """Keep `state.master_max_offset` within PUBLISH_INTERVAL_MS of the log's end: an unclean
        election reports how far beyond its own log the group had written from it."""
        max_offset = self._roles.record().max_offset
        now = self._clock()
        if max_offset == state.master_max_offset or now - self._hint_at < PUBLISH_INTERVAL_MS:
            return
        self._hint_at = now
        new_state = replace(state, master_max_offset=max_offset)
        if self._etcd.txn(
            [Compare.mod_revision(self._keys.state, view.state_revision)], [Put(self._keys.state, encode(new_state))]
        ).succeeded:
            self._state = new_state

    # -- planned switchover --------------------------------------------------------------------

    def hand_over(self, target_id: int, timeout_s: float) -> tuple[MasterRecord, int]:
        """Make `target_id` master with no acknowledged write lost; returns the new master and
        the offset it takes over at. HandoverError / HandoverTimeout when it cannot."""
        epoch = self._roles.acting_epoch()
        if epoch is None:
            raise HandoverError("this broker is not the master")
        view, leases, _ = self._read()
        state = view.state
        if state is None or state.master_id != self._roles.record().broker_id:
            raise HandoverError("the group's state in etcd does not name this broker as master")
        target = view.brokers.get(target_id)
        if target is None or target_id not in leases:
            raise HandoverError(f"broker {target_id} is not registered (not running, or not in this group)")
        if target_id not in state.isr:
            raise HandoverError(
                f"broker {target_id} is not in the in-sync set {sorted(state.isr)}: it may miss messages"
            )
        self._handing_over = True
        try:
            offset = self._roles.wait_caught_up(target_id, timeout_s)
            if offset is None:
                raise HandoverTimeout(
                    f"broker {target_id} did not catch up within {timeout_s:g} s; nothing was handed over"
                )
            view, leases, master_kv = self._read()
            keys = self._keys
            if (
                master_kv is None
                or view.master is None
                or view.state is None
                or view.master.broker_id != state.master_id
            ):
                raise HandoverError("this broker lost the master key meanwhile")
            target = view.brokers.get(target_id)
            if target is None:
                raise HandoverError(f"broker {target_id} went away meanwhile")
            new_epoch = view.state.epoch + 1
            # The successor starts alone in its in-sync set, as after an election: the others join
            # once they follow it (until then its puts are refused, before being stored).
            new_state = replace(
                view.state,
                epoch=new_epoch,
                master_id=target_id,
                isr=frozenset({target_id}),
                master_max_offset=offset,
                handover_to=NO_BROKER,
            )
            new_master = MasterRecord(target_id, new_epoch, target.client_endpoint, target.ha_endpoint)
            result = self._etcd.txn(
                [
                    Compare.mod_revision(keys.state, view.state_revision),
                    Compare.mod_revision(keys.master, master_kv.mod_revision),
                    Compare.lease(keys.broker(target_id), leases[target_id]),
                ],
                [Put(keys.state, encode(new_state)), Put(keys.master, encode(new_master), lease=leases[target_id])],
            )
            if not result.succeeded:
                raise HandoverError("the group changed in etcd during the switchover; nothing was handed over")
            log.warning("handed over to broker %d at offset %d: it is master of epoch %d", target_id, offset, new_epoch)
            self._roles.step_down(f"handed over to broker {target_id}")
            self._master, self._state = new_master, new_state
            self._roles.follow(new_master)
            return new_master, offset
        finally:
            self._handing_over = False

    # -- errors --------------------------------------------------------------------------------

    def _error(self, where: str, exc: Exception) -> None:
        message = f"{where}: {exc}"
        if message != self._last_error:
            log.warning("etcd %s", message)
        self._last_error = message

    def _error_cleared(self, where: str) -> None:
        if self._last_error.startswith(where + ":"):
            log.info("etcd %s: working again", where)
            self._last_error = ""
