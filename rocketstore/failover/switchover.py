"""Planned switchover in static mode (no etcd): `rocketstore admin elect --broker ID` asked of a
master whose roles come from broker.conf.

1. The master fences its puts (refused before they are appended, so a client retry is safe) and
   waits until slave ID acknowledged its whole log and no put is waiting.
2. It records its own new role first (a role override: SLAVE of that slave) so that a crash from
   here on can never bring it back as a second master.
3. It asks the slave, over the slave's admin API (`TakeOver`, the shared admin secret), to take
   over at exactly that offset. The slave first acquires what it needs (it binds its
   haListenPort), then copies the master's metadata one last time (consumer offsets, delay
   cursors, topics), stops replicating, checks its log ends there, and only then records its
   override (master) and becomes master. Any failure undoes every step before it: the port is
   released, replication resumes, no override is left; the slave answers the refusal.
4. The old master steps down and follows the new one. A refused or failed step 3 removes the
   override of step 2 and lifts the fence: nothing changed.

The role override, `<storePathRootDir>/role.override` (JSON `{"brokerRole", "haMasterAddress"}`,
written to a temporary file, fsynced, renamed), takes precedence over broker.conf's brokerRole
and haMasterAddress at start-up, with a warning: the operator's last switchover wins over a config
file nobody edited. Delete it to go back to the configured roles.

Both steps act on the broker's replication side (`replication_side.ReplicationSide`), never on
the broker itself.

Thread-safety: `hand_over` and `take_over` run on a worker thread of the admin API, one at a
time per broker (the caller holds the replication side's role lock).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable
from pathlib import Path

import grpc

from rocketstore.broker.config import BrokerConfigs, Secrets
from slave.metadata_client import MetadataSyncFailed
from store import BrokerRole
from store.clock import monotonic_ms
from store.log.mapped_file import fsync_dir, replace_durably
from store.properties import ConfigError
from wire.admin_auth import AdminCaller
from wire.rpc import admin_pb2

from .controller_agent import HandoverError, HandoverTimeout
from .controller_roles import wait_caught_up
from .replication_side import ReplicationSide

log = logging.getLogger(__name__)

OVERRIDE_NAME = "role.override"
# How long a slave that took over as SYNC_MASTER refuses puts while no slave has connected to it.
TAKE_OVER_SLAVE_WAIT_MS = 10_000


def override_path(root: str | Path) -> Path:
    return Path(root) / OVERRIDE_NAME


def write_override(root: str | Path, role: BrokerRole, master_address: str = "") -> None:
    data = json.dumps({"brokerRole": role.name, "haMasterAddress": master_address}).encode()
    replace_durably(override_path(root), data)


def remove_override(root: str | Path) -> None:
    try:
        override_path(root).unlink()
    except FileNotFoundError:
        return
    fsync_dir(Path(root))


def apply_override(configs: BrokerConfigs) -> BrokerConfigs:
    """broker.conf's roles, or the last switchover's when a role override exists."""
    root = configs.store.store_path_root_dir
    try:
        raw = override_path(root).read_bytes()
    except FileNotFoundError:
        return configs
    data = json.loads(raw)
    role = BrokerRole[data["brokerRole"]]
    master = data.get("haMasterAddress", "") if role is BrokerRole.SLAVE else ""
    log.warning(
        "%s overrides broker.conf: brokerRole=%s%s (a planned switchover set it; delete the file to use broker.conf)",
        override_path(root),
        role.name,
        f" haMasterAddress={master}" if master else "",
    )
    return configs._replace(
        store=dataclasses.replace(configs.store, broker_role=role),
        ha=dataclasses.replace(configs.ha, ha_master_address=master),
    )


# How long a broker about to start as master asks its group's configured master whether it is one.
PEER_PROBE_TIMEOUT_S = 3.0


def start_up_configs(configured: BrokerConfigs, secrets: Secrets) -> BrokerConfigs:
    """Static mode, before anything opens: the roles to start with (`apply_override`), checked by
    `refuse_a_second_master` (ConfigError). Blocks up to PEER_PROBE_TIMEOUT_S."""
    effective = apply_override(configured)
    refuse_a_second_master(configured, effective, secrets)
    return effective


def refuse_a_second_master(
    configured: BrokerConfigs, effective: BrokerConfigs, secrets: Secrets, timeout_s: float = PEER_PROBE_TIMEOUT_S
) -> None:
    """A broker that broker.conf makes a slave but a role override makes master asks the master
    broker.conf names whether it is still master; ConfigError when it is (two masters of one group
    would both accept writes and their logs would diverge). An unreachable peer does not block the
    start: it is the normal case after a switchover whose old master is down."""
    address = configured.ha.ha_master_address
    if (
        effective.store.broker_role is BrokerRole.SLAVE
        or configured.store.broker_role is not BrokerRole.SLAVE
        or not address
    ):
        return
    if probe_is_master(address, configured, secrets, timeout_s):
        raise ConfigError(
            f"{override_path(configured.store.store_path_root_dir)} makes this broker a master, but the group's "
            f"master at {address} (haMasterAddress) answers as master: refusing to start as a second master. "
            "Delete the override to start as the slave broker.conf describes, or step that master down first"
        )


def probe_is_master(address: str, configs: BrokerConfigs, secrets: Secrets, timeout_s: float) -> bool:
    """Whether the broker serving replication at `address` authenticates as this group's master
    and says it is master now. False when it cannot be reached or does not authenticate."""
    from ha.peer_auth import EPOCHS, AuthenticationError, Identity, SlaveAuth, epochs_parts
    from slave.peer_login import LoginFailed, login
    from wire.auth import channel_credentials
    from wire.rpc import ha_pb2, ha_pb2_grpc

    ha = configs.ha
    credentials = (
        channel_credentials(ha.ha_tls_ca_file, ha.ha_tls_cert_file, ha.ha_tls_key_file) if ha.ha_tls_ca_file else None
    )
    channel = grpc.secure_channel(address, credentials) if credentials is not None else grpc.insecure_channel(address)
    with channel:
        try:
            session, metadata = None, None
            if secrets.ha:
                auth = SlaveAuth(secrets.ha, Identity(configs.broker.broker_name, configs.broker.broker_id))
                session, metadata = login(channel, auth, "GetEpochs", address, timeout_s)
            answer = ha_pb2_grpc.ReplicationStub(channel).GetEpochs(
                ha_pb2.EpochsRequest(broker_name=configs.broker.broker_name), metadata=metadata, timeout=timeout_s
            )
            if session is not None:
                session.open(EPOCHS, answer.mac, *epochs_parts(answer))
        except (grpc.RpcError, LoginFailed, AuthenticationError) as exc:
            log.info("the configured master at %s did not answer as master (%s)", address, exc)
            return False
    return answer.is_master


def hand_over(side: ReplicationSide, admin_secret: bytes, target_id: int, timeout_s: float) -> tuple[str, int]:
    """On the master: steps 1-4 (`admin_secret` signs the TakeOver call). Returns the new master's
    client endpoint and the offset it took over at; HandoverError / HandoverTimeout when nothing
    changed."""
    store, tracker = side.store, side.tracker
    master_role = store.broker_role
    if master_role is BrokerRole.SLAVE or tracker is None:
        raise HandoverError("this broker is a slave: ask its master")
    sessions = [s for s in tracker.snapshots(0) if s.broker_id == target_id]
    if not sessions or not sessions[0].client_endpoint:
        raise HandoverError(f"broker {target_id} is not a connected slave of this master")
    target_endpoint = sessions[0].client_endpoint
    reason = f"handing over to broker {target_id}"
    store.set_put_fence(lambda: reason)
    root = store.config.store_path_root_dir
    try:
        offset = wait_caught_up(store, tracker, target_id, timeout_s)
        if offset is None:
            raise HandoverTimeout(
                f"broker {target_id} did not catch up within {timeout_s:g} s; nothing was handed over"
            )
        write_override(root, BrokerRole.SLAVE, "")
        try:
            answer = _take_over(target_endpoint, admin_secret, offset, master_role, timeout_s)
        except grpc.RpcError as exc:
            remove_override(root)
            raise HandoverError(
                f"broker {target_id} did not take over: {exc.details() if hasattr(exc, 'details') else exc}"
            ) from None
        write_override(root, BrokerRole.SLAVE, answer.ha_endpoint)
        side.become_slave(answer.ha_endpoint, f"handed over to broker {target_id}")
    finally:
        store.set_put_fence(None)
    log.warning("handed over to broker %d at %s (offset %d)", target_id, answer.client_endpoint, offset)
    return answer.client_endpoint, offset


def _take_over(
    endpoint: str, secret: bytes, offset: int, role: BrokerRole, timeout_s: float
) -> admin_pb2.TakeOverResponse:
    with grpc.insecure_channel(endpoint) as channel:
        request = admin_pb2.TakeOverRequest(expected_offset=offset, role=role.name)
        return AdminCaller(channel, secret).call("TakeOver", request, timeout_s)


def take_over(side: ReplicationSide, expected_offset: int, role_name: str) -> None:
    """On the slave: step 3. ValueError (nothing changed) when it cannot."""
    try:
        role = BrokerRole[role_name]
    except KeyError:
        raise ValueError(f"unknown role {role_name!r}") from None
    if role is BrokerRole.SLAVE:
        raise ValueError("take over as SYNC_MASTER or ASYNC_MASTER")
    if side.store.broker_role is not BrokerRole.SLAVE:
        raise ValueError("this broker is already a master")
    # Everything the new role needs, acquired before anything is given up or recorded.
    started_server = side.tracker is None
    if started_server:
        try:
            side.serve()
        except ConfigError as exc:
            raise ValueError(f"cannot take over: {exc}") from None
    try:
        _take_over_steps(side, expected_offset, role)
    except BaseException:
        if started_server:
            side.release()
        raise
    log.warning("took over as %s at offset %d", role.name, expected_offset)


def _take_over_steps(side: ReplicationSide, expected_offset: int, role: BrokerRole) -> None:
    store = side.store
    replicator = side.replicator
    if replicator is not None:
        # The master is alive and fenced: one last copy of its consumer offsets and delay
        # cursors spares consumers the re-delivery of a sync interval.
        try:
            replicator.metadata.sync_once()
        except MetadataSyncFailed as exc:
            log.warning("taking over without a last copy of the master's metadata: %s", exc)
        side.stop_following()
    root = store.config.store_path_root_dir
    try:
        if store.max_offset != expected_offset:
            raise ValueError(f"this slave's log ends at {store.max_offset}, not at the master's {expected_offset}")
        write_override(root, role)
    except BaseException:
        if replicator is not None:
            side.follow(side.master_address)
        raise
    try:
        _become_master(side, role)
    except BaseException:
        remove_override(root)
        if store.broker_role is BrokerRole.SLAVE:
            side.follow(side.master_address)
        raise


def _become_master(side: ReplicationSide, role: BrokerRole) -> None:
    """A static slave whose replication stopped takes over as `role`."""
    fence = None
    if role is BrokerRole.SYNC_MASTER:
        fence = _until_a_slave_connects(side, monotonic_ms() + TAKE_OVER_SLAVE_WAIT_MS)
    side.become_master(role, put_fence=fence)


def _until_a_slave_connects(side: ReplicationSide, deadline_ms: int) -> Callable[[], str | None]:
    """A new static SYNC_MASTER refuses puts (before storing them: clients retry) until its old
    master has connected as its slave, or for TAKE_OVER_SLAVE_WAIT_MS at most; then the fence
    removes itself."""
    tracker, store = side.tracker, side.store
    assert tracker is not None, "a broker taking over serves replication"

    def fence() -> str | None:
        if tracker.session_count >= tracker.needed or monotonic_ms() > deadline_ms:
            store.set_put_fence(None)
            return None
        return "taking over: waiting for a replica to connect"

    return fence
