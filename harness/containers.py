"""A broker group in real containers (testcontainers): etcd and three brokers in controller mode on
a network of the test's own, each at a fixed address (so a broker keeps its address when it is
partitioned and reconnected), stores bind-mounted from the test's tmp dir so that the final checks
read them on the host once the containers are stopped.

Faults: `kill` (SIGKILL), `pause`/`unpause`, `disconnect`/`connect` (a partition), `stop`/`start`
of any container, etcd included. Everything this module creates carries the `LABEL` label; the
container suite (tests/cluster) and the cluster benchmark sweep by it before and after a run.
Needs the images `deploy/prepare.sh` builds and the `testcontainers` package (the test extras).
Thread-safety: one thread drives a group; `status` may be called from any thread.
"""

from __future__ import annotations

import ipaddress
import os
import random
import secrets

# Ryuk, the testcontainers reaper, needs an image pull; this module sweeps by label instead.
os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")
os.environ.setdefault("TC_POOLING_INTERVAL", "0.1")
from dataclasses import dataclass, field
from pathlib import Path

import docker
from docker.types import EndpointConfig, IPAMConfig, IPAMPool
from testcontainers.core.container import DockerContainer
from testcontainers.core.network import Network

from client import AdminClient, RocketStoreError
from harness.local_cluster import lone_master, poll_until, settled_master

LABEL = "org.rocketstore.test"
BROKER_IMAGE = "rocketstore:local"
ETCD_IMAGE = "rocketstore-etcd:local"
BROKER_UID = 10001
CLIENT_PORT = 10911

# Small segments and quick replication timeouts, as the process-level failover tests use.
GROUP_SETTINGS = {
    "brokerName": "broker-a",
    "brokerRole": "SYNC_MASTER",
    "flushDiskType": "SYNC_FLUSH",
    "enableControllerMode": "true",
    "bindAddress": "0.0.0.0",
    "listenPort": str(CLIENT_PORT),
    "haListenPort": "10912",
    "remotingListenPort": "10913",
    "storePathRootDir": "/var/lib/rocketstore/store",
    "brokerLogDir": "/var/lib/rocketstore/logs",
    "haSecretFile": "/run/rocketstore/replication_secret",
    "mappedFileSizeCommitLog": str(256 * 1024),
    "mappedFileSizeConsumeQueue": str(20480),
    "maxHashSlotNum": "512",
    "maxIndexNum": "2048",
    "slaveTimeout": "1000",
    "haSendHeartbeatInterval": "200",
    "haHousekeepingInterval": "2000",
    "haReconnectBackoffMin": "50",
    "haReconnectBackoffMax": "500",
}


def _labels(run: str) -> dict[str, str]:
    return {LABEL: run}


@dataclass
class Node:
    name: str
    ip: str
    container: DockerContainer
    store_dir: Path | None = None

    @property
    def wrapped(self):
        return self.container.get_wrapped_container()

    @property
    def client_endpoint(self) -> str:
        return f"{self.ip}:{CLIENT_PORT}"

    def logs(self, lines: int = 60) -> str:
        try:
            return self.wrapped.logs(tail=lines).decode(errors="replace")
        except docker.errors.APIError as exc:
            return f"(no logs: {exc})"


@dataclass
class ContainerGroup:
    base_dir: Path
    run: str
    size: int = 3
    settings: dict[str, str] = field(default_factory=dict)
    network: Network | None = None
    etcd: Node | None = None
    brokers: list[Node] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.client = docker.from_env()
        self.secret = secrets.token_hex(32)
        self.secret_file = self.base_dir / "replication_secret"
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.secret_file.write_text(self.secret + "\n")
        os.chmod(self.secret_file, 0o600)

    # -- set-up -----------------------------------------------------------------------------------

    def _create_network(self) -> list[str]:
        """A network on a /24 of its own; returns its host addresses, gateway excluded."""
        last: Exception | None = None
        for _ in range(8):
            subnet = ipaddress.ip_network(f"10.{random.randint(64, 250)}.{random.randint(0, 255)}.0/24")
            gateway = str(subnet.network_address + 1)
            network = Network(
                docker_network_kw={
                    "ipam": IPAMConfig(pool_configs=[IPAMPool(subnet=str(subnet), gateway=gateway)]),
                    "labels": _labels(self.run),
                }
            )
            try:
                self.network = network.create()
            except docker.errors.APIError as exc:  # the subnet is taken: draw another
                last = exc
                continue
            return [str(subnet.network_address + n) for n in range(10, 200)]
        raise RuntimeError(f"no free subnet for the test network: {last}")

    def _container(self, image: str, name: str, ip: str, command: list[str]) -> DockerContainer:
        assert self.network is not None
        endpoint = EndpointConfig(docker.__version__, aliases=[name], ipv4_address=ip)
        return (
            DockerContainer(image)
            .with_command(command)
            .with_env("PYTHONUNBUFFERED", "1")
            .with_kwargs(
                labels=_labels(self.run),
                network=self.network.name,
                networking_config={self.network.name: endpoint},
                init=True,
                hostname=name,
            )
        )

    def broker_settings(self, broker_id: int) -> dict[str, str]:
        assert self.etcd is not None
        settings = dict(GROUP_SETTINGS)
        settings.update(
            brokerId=str(broker_id),
            brokerIP1=self.brokers[broker_id].ip if broker_id < len(self.brokers) else "",
            etcdEndpoints=f"http://{self.etcd.ip}:2379",
            etcdPrefix=f"/rocketstore-{self.run}",
        )
        settings.update(self.settings)
        return settings

    def start(self) -> ContainerGroup:
        addresses = self._create_network()
        etcd_ip = addresses[0]
        etcd = self._container(
            ETCD_IMAGE,
            "etcd",
            etcd_ip,
            [
                "--name=etcd",
                "--data-dir=/var/lib/etcd/data",
                "--listen-client-urls=http://0.0.0.0:2379",
                f"--advertise-client-urls=http://{etcd_ip}:2379",
                "--listen-peer-urls=http://127.0.0.1:2380",
                "--initial-advertise-peer-urls=http://127.0.0.1:2380",
                "--initial-cluster=etcd=http://127.0.0.1:2380",
            ],
        )
        self.etcd = Node("etcd", etcd_ip, etcd.start())
        for i in range(self.size):
            store_dir = self.base_dir / f"broker{i}"
            store_dir.mkdir(mode=0o700)
            os.chown(store_dir, BROKER_UID, BROKER_UID)
            ip = addresses[10 + i]
            self.brokers.append(Node(f"broker{i}", ip, None, store_dir))  # type: ignore[arg-type]
        for i, node in enumerate(self.brokers):
            args = [f"--{k}={v}" for k, v in self.broker_settings(i).items()]
            container = (
                self._container(BROKER_IMAGE, node.name, node.ip, args)
                .with_volume_mapping(str(node.store_dir), "/var/lib/rocketstore/store", "rw")
                .with_volume_mapping(str(self.secret_file), "/run/secrets/replication_secret", "ro")
            )
            node.container = container.start()
        return self

    def stop(self) -> None:
        for node in [*self.brokers, *([self.etcd] if self.etcd else [])]:
            if node.container is not None and node.container._container is not None:
                try:
                    node.container.stop()
                except docker.errors.APIError:
                    pass
        if self.network is not None:
            try:
                self.network.remove()
            except docker.errors.APIError:
                pass
            self.network = None

    def stop_brokers(self, timeout_s: int = 30) -> None:
        """A clean shutdown of every broker (their stores closed), containers kept."""
        for node in self.brokers:
            node.wrapped.reload()
            if node.wrapped.status == "paused":
                node.wrapped.unpause()
            if node.wrapped.status in ("running", "restarting"):
                node.wrapped.stop(timeout=timeout_s)

    # -- faults -----------------------------------------------------------------------------------

    def kill(self, node: Node) -> None:
        node.wrapped.kill(signal="SIGKILL")

    def start_again(self, node: Node) -> None:
        node.wrapped.start()

    def pause(self, node: Node) -> None:
        node.wrapped.pause()

    def unpause(self, node: Node) -> None:
        node.wrapped.unpause()

    def disconnect(self, node: Node) -> None:
        assert self.network is not None
        self.client.networks.get(self.network.name).disconnect(node.wrapped.id)

    def connect(self, node: Node) -> None:
        assert self.network is not None
        self.client.networks.get(self.network.name).connect(node.wrapped.id, aliases=[node.name], ipv4_address=node.ip)

    # -- observation ------------------------------------------------------------------------------

    def status(self, node: Node, timeout_s: float = 2.0) -> dict | None:
        try:
            with AdminClient(node.client_endpoint, self.secret.encode(), timeout_s=timeout_s) as admin:
                return admin.status()
        except RocketStoreError:
            return None

    def acting_master(self) -> Node | None:
        return lone_master(self.brokers, self.status)

    def wait_master(self, timeout_s: float = 60.0, *, not_: Node | None = None, in_sync: int = 2) -> Node:
        master = poll_until(
            lambda: settled_master(self.brokers, self.status, not_, in_sync), timeout_s, max_delay_s=0.1
        )
        if master is None:
            raise AssertionError(f"no master with {in_sync} in-sync replicas within {timeout_s} s:\n{self.tails()}")
        return master

    def create_topic(self, topic: str, queues: int = 4) -> None:
        """On the master (auto-creation is off on addresses beyond loopback); slaves copy it."""
        master = self.wait_master(90, in_sync=3)
        with AdminClient(master.client_endpoint, self.secret.encode(), timeout_s=10) as admin:
            admin.create_topic(topic, queues)

    def client_endpoints(self) -> str:
        return ";".join(node.client_endpoint for node in self.brokers)

    def tails(self) -> str:
        parts = []
        for node in [*([self.etcd] if self.etcd else []), *self.brokers]:
            if node.container is not None and node.container._container is not None:
                parts.append(f"--- {node.name} ({node.ip}) ---\n{node.logs()}")
        return "\n".join(parts)


COMPOSE_PROJECT = "com.docker.compose.project"


def remove_labelled(compose_prefix: str = "") -> None:
    """Remove the containers, networks and volumes runs of this module made (the `LABEL` label),
    and, with `compose_prefix`, those of compose projects whose names start with it."""

    def ours(labels: dict | None) -> bool:
        labels = labels or {}
        project = labels.get(COMPOSE_PROJECT, "")
        return LABEL in labels or bool(compose_prefix and project.startswith(compose_prefix))

    client = docker.from_env()
    for container in client.containers.list(all=True):
        if ours(container.labels):
            container.remove(force=True, v=True)
    for network in client.networks.list():
        if ours(network.attrs.get("Labels")):
            network.remove()
    for volume in client.volumes.list():
        if ours(volume.attrs.get("Labels")):
            volume.remove(force=True)
    # Layers a rebuild of the project's images left without a tag.
    client.images.prune(filters={"dangling": True, "label": "org.rocketstore.image=true"})
