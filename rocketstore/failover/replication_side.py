"""`ReplicationSide`: what failover needs of a broker's replication side, and all it may touch.

Elections (`controller_roles`) and planned switchovers (`switchover`) decide when a broker turns
master or slave; the broker's replication side carries the change out. The process wires its
implementation in (`rocketstore.broker.replication_role.ReplicationRole`): failover imports no
part of the broker process, and never reaches into it.

Thread-safety: as the implementation's docstring says. A caller that orders several transitions
holds `lock` around them; each transition takes it too (it is re-entrant).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

from ha.replica_tracker import ReplicaTracker
from slave.replication_client import SlaveReplicator
from store import BrokerRole, MessageStore


class ReplicationSide(Protocol):
    @property
    def lock(self) -> AbstractContextManager[Any]:
        """The role lock: held by whoever changes the broker's role."""

    @property
    def store(self) -> MessageStore: ...

    @property
    def role(self) -> BrokerRole:
        """brokerRole in force: the static role, or in controller mode how the broker acknowledges
        when it is master (SYNC_MASTER or ASYNC_MASTER)."""

    @property
    def master_address(self) -> str:
        """The master's replication endpoint followed (or last followed); "" once master."""

    @property
    def ha_endpoint(self) -> str:
        """The replication endpoint served; "" while not serving."""

    @property
    def tracker(self) -> ReplicaTracker | None:
        """The slaves' progress and the SYNC_MASTER gate, while serving replication."""

    @property
    def replicator(self) -> SlaveReplicator | None:
        """The stream from the master, while following one."""

    def serve(self) -> ReplicaTracker:
        """Serve replication (bound before anything is installed: ConfigError changes nothing)."""

    def release(self) -> None:
        """Undo `serve`."""

    def follow(self, master_address: str) -> None:
        """Stream from `master_address` instead of any master followed so far."""

    def stop_following(self) -> int | None:
        """Stop streaming; the master's confirmed offset as last reported, None when not following."""

    def become_master(
        self,
        role: BrokerRole,
        *,
        confirmed_floor: int = 0,
        put_fence: Callable[[], str | None] | None = None,
    ) -> None:
        """Stop following; take puts as `role` (the fence installed before the store takes any)."""

    def step_down(self, reason: str, *, confirmed_floor: int = 0) -> None:
        """End the replication streams; the store refuses puts. Replication is still served."""

    def become_slave(self, master_address: str, reason: str) -> None:
        """Step down and follow `master_address` as SLAVE (static mode)."""
