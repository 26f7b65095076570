"""The broker groups the edge tools start on 127.0.0.1 (port 0, files under a temporary
directory), and the good send and pull that shows whether a broker still serves afterwards.

A broker refuses `aclEnable=true` beside `remotingListenPort` (the remoting API checks no ACL
signature), so the tools start up to two SYNC_MASTER + SYNC_FLUSH groups with one slave each
(`harness.local_cluster.LocalCluster`): the *open* group serves remoting, with an unsigned client
API; the *acl* group checks every client call against `ACCOUNTS`. Both authenticate the admin API
and replication with the group's generated secret. Long polling is capped at
`LONG_POLLING_MAX_MS` so that a hostile wait costs a tool seconds, not half a minute.

Thread-safety: none; the tools call these from their main thread.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from client import Credentials, Producer, PullConsumer, PullStatus, RocketStoreError
from client.remoting import AsyncRemotingProducer, AsyncRemotingPullConsumer
from harness.local_cluster import LocalBroker, LocalCluster, poll_until

LONG_POLLING_MAX_MS = 2000
TOPIC = "FuzzTopic"
HEALTH_TOPIC = "FuzzHealth"
GROUP = "FuzzGroup"
QUEUES = 4

# The acl group's accounts: an admin, an application with rights on the tools' topics, and an
# outsider with none.
ADMIN = Credentials("fuzz-admin", "fuzz-admin-secret-key")
APP = Credentials("fuzz-app", "fuzz-app-secret-key")
OUTSIDER = Credentials("fuzz-outsider", "fuzz-outsider-secret-key")
ACCOUNTS = {
    "accounts": [
        {"accessKey": ADMIN.access_key, "secretKey": ADMIN.secret_key, "admin": True},
        {
            "accessKey": APP.access_key,
            "secretKey": APP.secret_key,
            "topicPerms": [f"{TOPIC}=PUB|SUB", f"{HEALTH_TOPIC}=PUB|SUB", "Orders=PUB|SUB"],
            "groupPerms": [f"{GROUP}=SUB"],
        },
        {"accessKey": OUTSIDER.access_key, "secretKey": OUTSIDER.secret_key, "defaultGroupPerm": "DENY"},
    ]
}


def write_acl(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(ACCOUNTS, f)
    return path


def start_group(
    base_dir: Path,
    *,
    remoting: bool = False,
    acl: bool = False,
    slaves: int = 1,
    master_role: str = "SYNC_MASTER",
    flush_disk_type: str = "SYNC_FLUSH",
    settings: dict[str, str] | None = None,
) -> LocalCluster:
    """A started group in `base_dir`: remoting on with `remoting`, the client API under ACL with
    `acl` (not both: the broker refuses it)."""
    options = {"longPollingMax": str(LONG_POLLING_MAX_MS)}
    if remoting:
        options["remotingListenPort"] = "0"
    if acl:
        options.update(aclEnable="true", aclFile=str(write_acl(base_dir / "acl.json")))
    options.update(settings or {})
    return LocalCluster(
        base_dir, master_role=master_role, flush_disk_type=flush_disk_type, slaves=slaves, settings=options
    ).start()


def stop_quietly(cluster: LocalCluster) -> list[str]:
    """Stop every broker (killing what does not stop); the errors, for the report."""
    try:
        cluster.stop()
    except RuntimeError as exc:
        return [str(exc).splitlines()[0]]
    return []


def stop_timed(broker: LocalBroker, timeout_s: float = 30.0) -> str:
    """SIGTERM the broker and say how long it took to exit (killed past `timeout_s`)."""
    began = time.monotonic()
    try:
        broker.stop(timeout_s=timeout_s)
    except RuntimeError:
        return f"did not exit within {timeout_s:g} s of SIGTERM: killed after {time.monotonic() - began:.1f} s"
    return f"exited {time.monotonic() - began:.1f} s after SIGTERM"


# -- a good send and pull -----------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    broker: str
    what: str
    ok: bool
    detail: str

    def line(self) -> str:
        return f"{self.broker:<14} {self.what:<16} {'ok' if self.ok else 'FAILED'}  {self.detail}"


def _grpc_pull_finds(
    broker: LocalBroker, sent, body: bytes, credentials: Credentials | None, timeout_s: float
) -> tuple[bool, str]:
    last = "no answer"

    def found() -> bool:
        nonlocal last
        try:
            with PullConsumer(broker.client_endpoint, group=GROUP, credentials=credentials, timeout_s=5) as consumer:
                page = consumer.pull(sent.topic, sent.queue_id, sent.queue_offset, max_messages=1)
        except RocketStoreError as exc:
            last = f"{type(exc).__name__}: {str(exc)[:120]}"
            return False
        last = page.status.name
        return page.status is PullStatus.FOUND and page.messages[0].body == body

    ok = bool(poll_until(found, timeout_s, max_delay_s=0.2))
    return ok, "the message read back" if ok else f"last answer: {last}"


def _slaves_connected(cluster: LocalCluster, timeout_s: float) -> bool:
    """Whether the master lists every slave as connected within `timeout_s` (after a restart a
    slave reconnects on its own schedule; a SYNC_MASTER put before that finds no slave)."""
    wanted = {int(b.settings["brokerId"]) for b in cluster.slave_brokers}

    def connected() -> bool:
        try:
            return wanted <= cluster.connected_slaves()
        except RocketStoreError:
            return False

    return bool(poll_until(connected, timeout_s, max_delay_s=0.2))


def grpc_health(
    cluster: LocalCluster, label: str, credentials: Credentials | None, timeout_s: float = 15
) -> list[Check]:
    """A send to the master over gRPC (once its slaves are connected, or after a minute), then a
    pull of it from the master and from every slave."""
    _slaves_connected(cluster, 60)
    body = f"health {uuid.uuid4().hex}".encode()
    master = cluster.master
    try:
        with Producer(master.client_endpoint, credentials=credentials, retry_timeout_s=0, timeout_s=10) as producer:
            sent = producer.send(HEALTH_TOPIC, body)
    except RocketStoreError as exc:
        return [Check(f"{label} master", "grpc send", False, f"{type(exc).__name__}: {str(exc)[:160]}")]
    checks = [Check(f"{label} master", "grpc send", sent.ok, sent.status.name)]
    for broker in cluster.brokers:
        ok, detail = _grpc_pull_finds(broker, sent, body, credentials, timeout_s)
        checks.append(Check(f"{label} {broker.name}", "grpc pull", ok, detail))
    return checks


async def _remoting_health(cluster: LocalCluster, label: str, timeout_s: float) -> list[Check]:
    body = f"health {uuid.uuid4().hex}".encode()
    try:
        async with AsyncRemotingProducer(cluster.master.remoting_endpoint, timeout_s=10) as producer:
            sent = await producer.send(HEALTH_TOPIC, body, queue_id=0)
    except (RocketStoreError, OSError) as exc:
        return [Check(f"{label} master", "remoting send", False, f"{type(exc).__name__}: {str(exc)[:160]}")]
    checks = [Check(f"{label} master", "remoting send", sent.ok, sent.status.name)]
    for broker in cluster.brokers:
        deadline = time.monotonic() + timeout_s
        last = "no answer"
        ok = False
        while not ok and time.monotonic() < deadline:
            try:
                async with AsyncRemotingPullConsumer(broker.remoting_endpoint, group=GROUP, timeout_s=5) as consumer:
                    page = await consumer.pull(HEALTH_TOPIC, sent.queue_id, sent.queue_offset, max_messages=1)
                last = page.status.name
                ok = page.status is PullStatus.FOUND and page.messages[0].body == body
            except (RocketStoreError, OSError) as exc:
                last = f"{type(exc).__name__}: {str(exc)[:120]}"
            if not ok:
                await asyncio.sleep(0.2)
        checks.append(Check(f"{label} {broker.name}", "remoting pull", ok, "the message read back" if ok else last))
    return checks


def remoting_health(cluster: LocalCluster, label: str, timeout_s: float = 15) -> list[Check]:
    """A send to the master over remoting, then a pull of it from the master and every slave."""
    return asyncio.run(_remoting_health(cluster, label, timeout_s))
