"""Broker groups on 127.0.0.1 for the integration tests and benchmarks.

Broker processes and static groups (a master and its slaves) are the product's own runner,
`demos.local_brokers`, re-exported here so that tests and benchmarks import their rigs from one
place. This module adds what only they need: `ControllerCluster`, brokers of one group in
controller mode on an etcd, and `lone_master` / `settled_master`, which tell when an election has
settled (the container groups of `harness.containers` use them too).

Thread-safety: none; drive each object from one thread.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from demos.local_brokers import (
    LOCAL_DEFAULTS,
    BrokerSet,
    BrokerStartError,
    LocalBroker,
    LocalCluster,
    poll_until,
    write_secret,
)
from harness.ports import port_for_later

__all__ = [
    "LOCAL_DEFAULTS",
    "BrokerStartError",
    "ControllerCluster",
    "LocalBroker",
    "LocalCluster",
    "lone_master",
    "poll_until",
    "settled_master",
    "start_slave_first",
    "write_secret",
]

B = TypeVar("B")


def lone_master(brokers: Sequence[B], status: Callable[[B], dict | None]) -> B | None:
    """The one broker that says it is master on a live lease (None while there is none, or two)."""
    masters = []
    for broker in brokers:
        answer = status(broker)
        if answer is not None and answer["role"] != "SLAVE" and int(answer.get("lease_valid_ms", 0)) > 0:
            masters.append(broker)
    return masters[0] if len(masters) == 1 else None


def settled_master(brokers: Sequence[B], status: Callable[[B], dict | None], not_: B | None, in_sync: int) -> B | None:
    """`lone_master` once it is not `not_` and has at least `in_sync` in-sync replicas."""
    master = lone_master(brokers, status)
    if master is None or master is not_:
        return None
    answer = status(master)
    if answer is None or len(answer.get("in_sync_replica_ids", [])) < in_sync:
        return None
    return master


def start_slave_first(cluster: LocalCluster, timeout_s: float = 60.0) -> LocalCluster:
    """Start `cluster` (made with `slaves=0`) and one slave (id 1) whose client endpoint sorts
    before the master's as text: the official Python client, given a route naming both, connects
    to the first address of the sorted list, so it talks to the slave (proxy mode relays)."""
    first = port_for_later()
    second = port_for_later(avoid=(first,))
    slave_port, master_port = sorted((first, second), key=lambda port: f"127.0.0.1:{port}")
    cluster.settings["listenPort"] = str(master_port)
    cluster.start(timeout_s)
    cluster.add_slave(1, timeout_s, listenPort=str(slave_port))
    return cluster


@dataclass
class ControllerCluster(BrokerSet):
    """`size` brokers of one group in controller mode (ids 0..size-1), roles decided by elections
    on the etcd at `etcd_endpoints`; every broker is configured `master_role` for when it wins."""

    base_dir: Path
    etcd_endpoints: str
    size: int = 3
    master_role: str = "SYNC_MASTER"
    flush_disk_type: str = "SYNC_FLUSH"
    settings: dict[str, str] = field(default_factory=dict)
    broker_name: str = "broker-a"
    brokers: list[LocalBroker] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.secret_file = write_secret(self.base_dir / "secret")
        self.etcd_prefix = f"/rocketstore-test-{secrets.token_hex(4)}"

    def broker_settings(self, broker_id: int) -> dict[str, str]:
        settings = dict(LOCAL_DEFAULTS)
        settings.update(
            brokerName=self.broker_name,
            brokerId=str(broker_id),
            brokerIP1="127.0.0.1",
            brokerRole=self.master_role,
            flushDiskType=self.flush_disk_type,
            listenPort="0",
            haListenPort="0",
            haSecretFile=str(self.secret_file),
            enableControllerMode="true",
            etcdEndpoints=self.etcd_endpoints,
            etcdPrefix=self.etcd_prefix,
        )
        settings.update(self.settings)
        return settings

    def start(self, timeout_s: float = 60.0) -> "ControllerCluster":
        self.brokers = [
            LocalBroker(f"broker{i}", self.base_dir / f"broker{i}", self.broker_settings(i)) for i in range(self.size)
        ]
        with self._stopped_if_failing():
            for broker in self.brokers:
                broker.start(timeout_s)
        return self

    def restart(
        self, broker: LocalBroker, timeout_s: float = 60.0, env: Mapping[str, str] | None = None
    ) -> LocalBroker:
        """Start a stopped or killed broker again on the ports it had (clients keep its address)."""
        return broker.restart(timeout_s, env=env)

    def status(self, broker: LocalBroker, timeout_s: float = 2.0) -> dict | None:
        """The broker's admin status, or None when it is down or does not answer in time."""
        from client import AdminClient, RocketStoreError

        if not broker.running():
            return None
        try:
            with AdminClient(broker.client_endpoint, self.admin_secret(), timeout_s=timeout_s) as admin:
                return admin.status()
        except RocketStoreError:
            return None

    def acting_master(self) -> LocalBroker | None:
        """The broker that says it is master on a live lease (None while there is none)."""
        return lone_master(self.brokers, self.status)

    def wait_master(self, timeout_s: float = 30.0, *, not_: LocalBroker | None = None, in_sync: int = 2) -> LocalBroker:
        """Wait for a master (other than `not_`) with at least `in_sync` in-sync replicas."""
        master = poll_until(
            lambda: settled_master(self.brokers, self.status, not_, in_sync), timeout_s, max_delay_s=0.1
        )
        if master is None:
            raise BrokerStartError(f"no master with {in_sync} in-sync replicas within {timeout_s} s:\n{self.tails()}")
        return master

    def client_endpoints(self) -> str:
        return ";".join(b.client_endpoint for b in self.brokers if b.ready)
