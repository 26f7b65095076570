"""`BrokerView`: what the client and admin API servicers ask about the broker around the store.

The servicers read the store directly; everything else they report or decide on (the broker's
current role, its endpoints, its replication state, its epoch) comes through this protocol, so
they never import the replication modules and tests can hand them a `StaticView`.

`slave_snapshots` returns `ha.replica_tracker.SlaveSnapshot`s and `replication_state` a
`slave.replication_client.ReplicationState` (read by attribute, so the servicers import neither).

Thread-safety: the broker's implementation is called from its event loop; `StaticView` is a plain
value a test mutates between calls.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from store import BrokerRole


class BrokerView(Protocol):
    @property
    def role(self) -> BrokerRole:
        """The broker's role now (it may change at run time)."""

    def client_endpoint(self) -> str:
        """This broker's advertised client API endpoint, host:port."""

    def master_client_endpoint(self) -> str:
        """The master's client endpoint; on a master its own; "" when unknown."""

    def ha_endpoint(self) -> str:
        """The replication endpoint a master serves; "" on a slave."""

    def confirmed_offset(self) -> int:
        """CommitLog offset that enough replicas hold (inSyncReplicas)."""

    def slave_snapshots(self, now_ms: int) -> list:
        """On a master, one `SlaveSnapshot` per connected slave."""

    def replication_state(self) -> Any:
        """None on a master; on a slave its `ReplicationState`."""

    def epoch(self) -> int:
        """The replication epoch this broker serves under."""

    def started_at_ms(self) -> int:
        """Wall-clock ms at which the broker started serving (0: not yet)."""

    def controller_mode(self) -> bool:
        """True when elections on etcd decide the role (enableControllerMode)."""

    def write_refusal(self) -> str | None:
        """Controller mode: why this broker may not take or acknowledge a write now, or None."""

    def controller_status(self) -> Any:
        """Controller mode: `controller_agent.ControllerStatus`; None otherwise."""

    def in_sync(self) -> Any:
        """Controller mode: (committed, proposed) in-sync slave ids; None otherwise."""

    def acting_master(self) -> bool:
        """A slave serving reads for its master, which it has not heard from for
        slaveActingMasterDelay (`acts_for_master`); False on a master."""

    def cluster_registry(self) -> Any:
        """(`ClusterView` of the whole cluster as last read, its max usable age in ms), or None
        without a registry."""

    def cluster_view(self) -> Any:
        """The other groups of the cluster (`coordination.cluster_routes.ClusterView`, this group
        left out) while the registry's last read is fresh; None without a registry or when it is
        stale (routes then name this group alone)."""


def acts_for_master(connected: bool, quiet_ms: int, delay_ms: int) -> bool:
    """Whether a slave serves reads for its master now: its replication stream is down and it
    has not heard from the master for `delay_ms` (`quiet_ms`: since its last chunk, or since the
    slave's own start when that is later or no chunk came). The delay keeps a slave from acting
    for a master that merely restarts its stream."""
    return not connected and quiet_ms >= delay_ms


@dataclass
class StaticView:
    """A `BrokerView` whose answers are its fields (for tests and tools)."""

    broker_role: BrokerRole = BrokerRole.ASYNC_MASTER
    client: str = "127.0.0.1:10911"
    master_client: str = ""
    ha: str = ""
    confirmed: int = 0
    slaves: list = field(default_factory=list)
    replication: Any = None
    epoch_value: int = 0
    started_ms: int = 0
    acting: bool = False
    cluster: Any = None

    @property
    def role(self) -> BrokerRole:
        return self.broker_role

    def client_endpoint(self) -> str:
        return self.client

    def master_client_endpoint(self) -> str:
        if self.broker_role is not BrokerRole.SLAVE:
            return self.master_client or self.client
        return self.master_client

    def ha_endpoint(self) -> str:
        return self.ha

    def confirmed_offset(self) -> int:
        return self.confirmed

    def slave_snapshots(self, now_ms: int) -> list:
        return list(self.slaves)

    def replication_state(self) -> Any:
        return self.replication

    def epoch(self) -> int:
        return self.epoch_value

    def started_at_ms(self) -> int:
        return self.started_ms

    def controller_mode(self) -> bool:
        return False

    def write_refusal(self) -> str | None:
        return None

    def controller_status(self) -> Any:
        return None

    def in_sync(self) -> Any:
        return None

    def acting_master(self) -> bool:
        return self.acting

    def cluster_view(self) -> Any:
        return self.cluster

    def cluster_registry(self) -> Any:
        return (self.cluster, 0) if self.cluster is not None else None
