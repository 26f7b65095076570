"""The role policies of `rocketstore/failover/` over a recording replication side: what a static
take-over and controller mode's promotions ask of the `ReplicationSide`, in which order, and what
they undo when a step fails. The real side (`rocketstore.broker.replication_role`) binds ports;
`tests/integration/test_ha_cluster.py` and `test_failover.py` run it in broker processes."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from ha.epoch_keeper import EpochKeeper
from ha.group_state import MasterRecord
from ha.replica_tracker import ReplicaTracker
from rocketstore.failover import switchover
from rocketstore.failover.controller_roles import ControllerRoles
from slave.metadata_client import MetadataSyncFailed
from store import BrokerRole
from store.properties import ConfigError

MASTER_HA = "127.0.0.1:10912"


class FakeStore:
    """The part of `MessageStore` the policies read and set."""

    def __init__(self, root: Path, max_offset: int, dispatched_offset: int = 0) -> None:
        self.broker_role = BrokerRole.SLAVE
        self.max_offset = max_offset
        self.dispatched_offset = dispatched_offset
        self.config = SimpleNamespace(store_path_root_dir=str(root), root=root)
        self.put_fence = None
        self.dispatch_limit = None

    def set_put_fence(self, fence) -> None:
        self.put_fence = fence

    def set_dispatch_limit(self, limit) -> None:
        self.dispatch_limit = limit


class FakeReplicator:
    def __init__(self, confirmed_offset: int, metadata_error: str = "") -> None:
        self.confirmed_offset = confirmed_offset
        self.metadata = SimpleNamespace(sync_once=self._sync_once)
        self.metadata_error = metadata_error
        self.synced = 0

    def _sync_once(self) -> None:
        if self.metadata_error:
            raise MetadataSyncFailed(self.metadata_error)
        self.synced += 1


class RecordingSide:
    """A `ReplicationSide` that records its transitions; its tracker is a real one."""

    def __init__(self, store: FakeStore, role: BrokerRole, *, following: str = "", confirmed: int = 0) -> None:
        self.lock = threading.RLock()
        self.store = store
        self.role = role
        self.master_address = following
        self.ha_endpoint = ""
        self.tracker: ReplicaTracker | None = None
        self.replicator = FakeReplicator(confirmed) if following else None
        self.bind_error: Exception | None = None
        self.calls: list[tuple] = []

    def serve(self) -> ReplicaTracker:
        self.calls.append(("serve",))
        if self.bind_error is not None:
            raise self.bind_error
        if self.tracker is None:
            store = self.store
            self.tracker = ReplicaTracker(self.role, 2, 3000, 1 << 28, lambda: store.max_offset)
            self.ha_endpoint = "127.0.0.1:11912"
        return self.tracker

    def release(self) -> None:
        self.calls.append(("release",))
        self.tracker, self.ha_endpoint = None, ""

    def follow(self, master_address: str) -> None:
        self.calls.append(("follow", master_address))
        self.replicator, self.master_address = FakeReplicator(0), master_address

    def stop_following(self) -> int | None:
        self.calls.append(("stop_following",))
        replicator, self.replicator = self.replicator, None
        return replicator.confirmed_offset if replicator is not None else None

    def become_master(self, role: BrokerRole, *, confirmed_floor: int = 0, put_fence=None) -> None:
        self.calls.append(("become_master", role, confirmed_floor))
        assert self.tracker is not None
        self.replicator = None
        self.tracker.reset(role, confirmed_floor=confirmed_floor)
        if put_fence is not None:
            self.store.set_put_fence(put_fence)
        self.store.broker_role = self.role = role
        self.master_address = ""

    def step_down(self, reason: str, *, confirmed_floor: int = 0) -> None:
        self.calls.append(("step_down", confirmed_floor))
        assert self.tracker is not None
        self.tracker.reset(self.role, confirmed_floor=confirmed_floor)
        self.store.broker_role = BrokerRole.SLAVE

    def become_slave(self, master_address: str, reason: str) -> None:
        self.step_down(reason)
        self.role = BrokerRole.SLAVE
        self.follow(master_address)


def static_slave(tmp_path: Path, max_offset: int = 4096) -> RecordingSide:
    return RecordingSide(FakeStore(tmp_path, max_offset), BrokerRole.SLAVE, following=MASTER_HA)


def register_slave(tracker: ReplicaTracker, broker_id: int = 1) -> None:
    tracker.register(
        f"s{broker_id}", ha_peer="peer", broker_id=broker_id, client_endpoint="c", start_offset=0, now_ms=0
    )


# -- static mode: the slave's take-over -----------------------------------------------------------


def test_a_take_over_binds_first_copies_the_masters_metadata_and_becomes_master_at_its_end(tmp_path):
    side = static_slave(tmp_path)
    replicator = side.replicator
    switchover.take_over(side, 4096, "ASYNC_MASTER")
    assert side.calls == [("serve",), ("stop_following",), ("become_master", BrokerRole.ASYNC_MASTER, 0)]
    assert replicator is not None and replicator.synced == 1
    assert side.store.broker_role is BrokerRole.ASYNC_MASTER and side.replicator is None
    assert json.loads(switchover.override_path(tmp_path).read_text())["brokerRole"] == "ASYNC_MASTER"
    assert side.store.put_fence is None, "an ASYNC_MASTER takes puts at once"


def test_a_new_sync_master_refuses_puts_until_a_slave_connects(tmp_path):
    side = static_slave(tmp_path)
    switchover.take_over(side, 4096, "SYNC_MASTER")
    fence = side.store.put_fence
    assert fence is not None and "waiting for a replica" in fence()
    assert side.tracker is not None
    register_slave(side.tracker)
    assert fence() is None
    assert side.store.put_fence is None, "the fence removes itself once a slave connected"


def test_a_take_over_at_another_offset_changes_nothing(tmp_path):
    side = static_slave(tmp_path, max_offset=4000)
    with pytest.raises(ValueError, match="ends at 4000, not at the master's 4096"):
        switchover.take_over(side, 4096, "SYNC_MASTER")
    # The port bound for it is given back and replication resumes from the same master.
    assert side.calls == [("serve",), ("stop_following",), ("follow", MASTER_HA), ("release",)]
    assert side.store.broker_role is BrokerRole.SLAVE and side.tracker is None and side.replicator is not None
    assert not switchover.override_path(tmp_path).exists()


def test_a_slave_that_cannot_bind_its_port_does_not_take_over(tmp_path):
    side = static_slave(tmp_path)
    side.bind_error = ConfigError("cannot listen for the replication on 127.0.0.1:11912 (haListenPort)")
    with pytest.raises(ValueError, match="cannot take over: cannot listen"):
        switchover.take_over(side, 4096, "SYNC_MASTER")
    assert side.calls == [("serve",)]
    assert side.replicator is not None and not switchover.override_path(tmp_path).exists()


def test_a_take_over_goes_on_without_a_last_metadata_copy(tmp_path):
    side = static_slave(tmp_path)
    assert side.replicator is not None
    side.replicator.metadata_error = "the master did not answer"
    switchover.take_over(side, 4096, "ASYNC_MASTER")
    assert side.store.broker_role is BrokerRole.ASYNC_MASTER


@pytest.mark.parametrize("role, message", [("SLAVE", "take over as"), ("LEADER", "unknown role")])
def test_a_take_over_needs_a_master_role(tmp_path, role, message):
    side = static_slave(tmp_path)
    with pytest.raises(ValueError, match=message):
        switchover.take_over(side, 4096, role)
    assert side.calls == []


# -- controller mode ------------------------------------------------------------------------------


def controller(tmp_path: Path, *, confirmed: int = 0) -> tuple[ControllerRoles, RecordingSide]:
    store = FakeStore(tmp_path, max_offset=1000, dispatched_offset=300)
    side = RecordingSide(store, BrokerRole.SYNC_MASTER)
    roles = ControllerRoles(
        side, EpochKeeper(tmp_path), broker_id=1, client_endpoint="127.0.0.1:11911", in_sync_replicas=2
    )
    roles.open()
    if confirmed:
        side.replicator = FakeReplicator(confirmed)
    return roles, side


def test_open_serves_replication_alone_in_its_in_sync_set_and_fences_until_the_agent_joins(tmp_path):
    roles, side = controller(tmp_path)
    assert side.calls == [("serve",)]
    assert side.tracker is not None and side.tracker.in_sync() == (frozenset(), frozenset())
    assert side.store.dispatch_limit == roles.confirmed_offset and side.store.put_fence == roles.put_fence
    assert roles.confirmed_offset() == 300, "what was dispatched before stays visible"
    assert "not joined" in (roles.put_fence() or "")
    roles.attach(lambda: None)
    assert (roles.put_fence() or "").startswith("IN_SYNC_REPLICAS_NOT_ENOUGH")


def test_a_promotion_starts_the_epoch_at_the_log_end_from_what_the_old_master_confirmed(tmp_path):
    roles, side = controller(tmp_path, confirmed=800)
    assert roles.confirmed_offset() == 800
    roles.promote(3)
    assert side.calls[1:] == [("stop_following",), ("become_master", BrokerRole.SYNC_MASTER, 800)]
    assert roles.acting_epoch() == 3 and roles.epoch == 3
    assert roles.keeper.history.entry(3).start_offset == 1000
    roles.promote(3)
    assert len(side.calls) == 3, "promoting again for the same epoch does nothing"


def test_stepping_down_keeps_the_confirmed_floor_and_following_is_idempotent(tmp_path):
    roles, side = controller(tmp_path, confirmed=800)
    roles.promote(3)
    master = MasterRecord(broker_id=2, epoch=4, client_endpoint="127.0.0.1:12911", ha_endpoint="127.0.0.1:12912")
    roles.follow(master)
    roles.follow(master)
    # Alone in its in-sync set, the master confirmed its whole log: that is the floor it keeps.
    assert side.calls[3:] == [("step_down", 1000), ("follow", "127.0.0.1:12912")]
    assert roles.acting_epoch() is None and side.store.broker_role is BrokerRole.SLAVE
    assert roles.confirmed_offset() == 1000, "a new master's stream starts below the floor: it stays"
    roles.follow(MasterRecord(broker_id=1, epoch=5, client_endpoint="", ha_endpoint="127.0.0.1:11912"))
    assert len(side.calls) == 5, "this broker never follows itself"
