"""`BrokerConfig` and `load_broker_config`: a broker.conf split into its components' configs.

`BrokerConfig` holds the broker-level keys (names, ids, endpoints, the admin secret, TLS of the
client API). `load_broker_config` reads the file and `--key=value` overrides once and binds them
to `BrokerConfig`, `store.StoreConfig` and `ha.config.HaConfig`; a key none of them knows is an
error naming it. `load_secrets` reads the secrets the configs name and refuses a config that
would leave the replication or admin endpoint unauthenticated. `path_problem` turns an OSError on
a path the config names (a store or log directory that cannot be written, a file that is not
there) into a sentence naming the key, the path and the fix. Frozen, thread-safe.
"""

from __future__ import annotations

import dataclasses
import errno
import ipaddress
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from ha.config import HaConfig
from store.config import StoreConfig
from store.properties import ConfigError, bind, did_you_mean, key_of, load_properties, unknown_keys_text
from store.status import BrokerRole
from wire.admin_auth import BrokerIdentity
from wire.auth import load_secret

from .client_table import ClientLimits
from .remoting_limits import RemotingLimits


def _key(name: str) -> Any:
    return {"key": name}


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    broker_cluster_name: str = "DefaultCluster"
    broker_name: str = field(default_factory=socket.gethostname)
    # 0 for a master, anything else for a slave (RocketMQ's convention).
    broker_id: int = 0
    broker_ip1: str = field(default="127.0.0.1", metadata=_key("brokerIP1"))
    # Where slaves reach this broker's replication port (RocketMQ's brokerIP2), when that is not
    # brokerIP1: clients and peers on different networks (a compose cluster used from the host).
    broker_ip2: str = field(default="", metadata=_key("brokerIP2"))
    listen_port: int = 10911
    # RocketMQ's remoting protocol (4.x clients) on this port beside the gRPC API; -1: off,
    # 0: a port the OS chooses.
    remoting_listen_port: int = -1
    # Limits of the remoting API (rocketstore/broker/remoting_limits.py, client_table.py): a
    # consumer not heard from for channelExpiredTimeout leaves its group (RocketMQ's key and
    # default); heartbeats add clients within these counts; connections, the bytes their incomplete
    # frames (and the bodies of requests in progress) hold together, how long a connection may be
    # silent (RocketMQ's serverChannelMaxIdleTimeSeconds), how long one frame may take to arrive,
    # and requests in progress (puts waiting, long polls).
    channel_expired_timeout_ms: int = field(default=120_000, metadata=_key("channelExpiredTimeout"))
    remoting_max_clients_per_group: int = 1024
    remoting_max_consumer_groups: int = 4096
    remoting_max_clients: int = 16_384
    remoting_max_connections: int = 4096
    remoting_max_buffered_bytes: int = 32 * 1024 * 1024
    server_channel_max_idle_s: int = field(default=120, metadata=_key("serverChannelMaxIdleTimeSeconds"))
    remoting_frame_timeout_ms: int = field(default=30_000, metadata=_key("remotingFrameTimeout"))
    remoting_max_in_flight_requests: int = 65_536
    # Prometheus metrics and /healthz, /readyz over HTTP on this port (rocketstore/broker/metrics.py);
    # -1: off, 0: a port the OS chooses.
    metrics_port: int = -1
    # Where the client, admin and replication servers listen; empty: brokerIP1 (nothing listens
    # on other interfaces unless the config says so).
    bind_address: str = ""
    # Shared secret of the admin API (inline or in a file); empty: the replication secret.
    admin_secret: str = field(default="", repr=False)
    admin_secret_file: str = ""
    # Signed calls and per-topic/group permissions on the client API (rocketstore/broker/acl.py);
    # off by default, as in RocketMQ.
    acl_enable: bool = False
    acl_file: str = ""
    # TLS on the client API (off by default, as in RocketMQ).
    tls_enable: bool = False
    tls_server_cert_path: str = ""
    tls_server_key_path: str = ""
    # Proxy mode (rocketstore/broker/proxy_forwarder.py): a slave relays the client calls only a
    # master serves (sends, pop consumption, transactions, offset commits, Telemetry) to its
    # group's master instead of refusing them NOT_MASTER. Off under tlsEnable: the official client
    # fails TLS verification on a route naming several addresses (docs/brokers.md).
    proxy_mode_enable: bool = True
    # Longest a PullMessage long poll may wait.
    long_polling_max_ms: int = field(default=30_000, metadata=_key("longPollingMax"))
    # The broker's log file lives here; empty: <storePathRootDir>/logs. It is rotated by size
    # (keeping logFileBackups older files); logToFile=false logs to stderr only; logFormat=json
    # writes one JSON object per line (rocketstore/broker/logs.py).
    broker_log_dir: str = ""
    log_to_file: bool = True
    log_file_max_bytes: int = 100 * 1024 * 1024
    log_file_backups: int = 10
    log_format: str = "text"
    # Pop consumption: redeliveries after the first delivery before a message is dead-lettered
    # (RocketMQ's subscription group retryMaxTimes, here for every group).
    retry_max_times: int = 16
    # Consumer groups that consume in FIFO order (RocketMQ's consumeMessageOrderly), comma-separated:
    # within a queue, a message is delivered only when the ones before it are acked or dead-lettered.
    fifo_consumer_groups: str = ""
    # Pop deliveries whose invisible time ran out are revived (copied to the retry topic, or
    # dead-lettered past their last attempt) this often, with no receive needed (RocketMQ's name).
    revive_interval_ms: int = field(default=1000, metadata=_key("reviveInterval"))
    # A receive that gives no invisible duration (a PushConsumer's) gets this one, and with
    # auto_renew the broker renews it renewAheadTimeMillis before it runs out, by
    # renewSliceTimeMillis each time, for at most renewMaxTimeMillis (RocketMQ's proxy's names).
    default_invisible_time_ms: int = field(default=60_000, metadata=_key("defaultInvisibleTimeMills"))
    renew_ahead_time_ms: int = field(default=10_000, metadata=_key("renewAheadTimeMillis"))
    renew_slice_time_ms: int = field(default=60_000, metadata=_key("renewSliceTimeMillis"))
    renew_max_time_ms: int = field(default=3 * 3600 * 1000, metadata=_key("renewMaxTimeMillis"))
    # Transactions, with RocketMQ's names and defaults: a half message still open after
    # transactionTimeOut is checked back with a producer, then every transactionCheckInterval,
    # and rolled back after transactionCheckMax checks.
    transaction_timeout_ms: int = field(default=6_000, metadata=_key("transactionTimeOut"))
    transaction_check_max: int = 15
    transaction_check_interval_ms: int = field(default=30_000, metadata=_key("transactionCheckInterval"))
    # Reads from a slave while its master is down (RocketMQ 5's enableSlaveActingMaster): after
    # slaveActingMasterDelay without its master, a slave routes consumers to itself and serves pop
    # consumption, keeping what it decides in its pop journal until a master takes it back.
    enable_slave_acting_master: bool = True
    # With etcdEndpoints set, the broker registers its route record in etcd and reads the other
    # groups' this often (rocketstore/coordination/cluster_registrar.py), so that any broker's
    # QueryRoute answers for the whole cluster; without etcd the group stands alone.
    cluster_route_refresh_interval_ms: int = field(default=1000, metadata=_key("clusterRouteRefreshInterval"))
    slave_acting_master_delay_ms: int = field(default=10_000, metadata=_key("slaveActingMasterDelay"))

    def __post_init__(self) -> None:  # noqa: C901 - one independent check per broker.conf key
        if not 0 <= self.listen_port <= 65535:
            raise ConfigError(f"listenPort out of range: {self.listen_port}")
        if not -1 <= self.remoting_listen_port <= 65535:
            raise ConfigError(f"remotingListenPort out of range (-1 turns it off): {self.remoting_listen_port}")
        if not -1 <= self.metrics_port <= 65535:
            raise ConfigError(f"metricsPort out of range (-1 turns it off): {self.metrics_port}")
        if self.cluster_route_refresh_interval_ms <= 0:
            raise ConfigError(
                f"clusterRouteRefreshInterval must be positive (ms), got {self.cluster_route_refresh_interval_ms}"
            )
        if not 10 <= self.revive_interval_ms <= 3_600_000:
            raise ConfigError(f"reviveInterval out of range (10..3600000 ms): {self.revive_interval_ms}")
        self._check_renewals()
        if not 0 <= self.retry_max_times <= 1000:
            raise ConfigError(f"retryMaxTimes out of range (0..1000): {self.retry_max_times}")
        if self.transaction_timeout_ms <= 0 or self.transaction_check_interval_ms <= 0:
            raise ConfigError("transactionTimeOut and transactionCheckInterval must be positive (milliseconds)")
        if not 1 <= self.transaction_check_max <= 1000:
            raise ConfigError(f"transactionCheckMax out of range (1..1000): {self.transaction_check_max}")
        if self.broker_id < 0:
            raise ConfigError(f"brokerId must not be negative, got {self.broker_id}")
        if self.tls_enable and not (self.tls_server_cert_path and self.tls_server_key_path):
            raise ConfigError("tlsEnable=true needs tlsServerCertPath and tlsServerKeyPath")
        if self.admin_secret and self.admin_secret_file:
            raise ConfigError("set adminSecret or adminSecretFile, not both")
        if self.acl_enable and not self.acl_file:
            raise ConfigError("aclEnable=true needs aclFile (the accounts and their permissions)")
        if self.acl_enable and self.remoting_listen_port >= 0:
            raise ConfigError(
                "aclEnable=true with remotingListenPort: the remoting API does not check ACL signatures yet; "
                "set remotingListenPort=-1"
            )
        if self.log_format not in ("text", "json"):
            raise ConfigError(f"logFormat must be text or json, got {self.log_format!r}")
        if self.log_file_max_bytes < 1024 or self.log_file_backups < 1:
            raise ConfigError("logFileMaxBytes must be at least 1024 and logFileBackups at least 1")
        if self.slave_acting_master_delay_ms < 0:
            raise ConfigError(f"slaveActingMasterDelay must not be negative, got {self.slave_acting_master_delay_ms}")
        if self.long_polling_max_ms <= 0:
            raise ConfigError(f"longPollingMax must be positive, got {self.long_polling_max_ms}")
        for name in _REMOTING_LIMITS:
            if getattr(self, name) <= 0:
                raise ConfigError(f"{key_of(_FIELDS[name])} must be positive, got {getattr(self, name)}")

    @property
    def remoting_limits(self) -> RemotingLimits:
        return RemotingLimits(
            self.remoting_max_connections,
            self.remoting_max_buffered_bytes,
            self.server_channel_max_idle_s * 1000,
            self.remoting_frame_timeout_ms,
            self.remoting_max_in_flight_requests,
        )

    @property
    def relays_to_master(self) -> bool:
        """Proxy mode in force: on, and not under TLS (a relay does not verify the master yet)."""
        return self.proxy_mode_enable and not self.tls_enable

    @property
    def client_limits(self) -> ClientLimits:
        return ClientLimits(
            self.channel_expired_timeout_ms,
            self.remoting_max_clients_per_group,
            self.remoting_max_consumer_groups,
            self.remoting_max_clients,
        )

    def _check_renewals(self) -> None:
        twelve_hours = 12 * 3600 * 1000
        for key, value in (
            ("defaultInvisibleTimeMills", self.default_invisible_time_ms),
            ("renewSliceTimeMillis", self.renew_slice_time_ms),
        ):
            if not 1000 <= value <= twelve_hours:
                raise ConfigError(f"{key} out of range (1000..{twelve_hours} ms): {value}")
        shortest = min(self.default_invisible_time_ms, self.renew_slice_time_ms)
        if not 0 < self.renew_ahead_time_ms < shortest:
            raise ConfigError(
                f"renewAheadTimeMillis must be positive and below defaultInvisibleTimeMills and "
                f"renewSliceTimeMillis ({shortest} ms): {self.renew_ahead_time_ms}"
            )
        if self.renew_max_time_ms <= 0:
            raise ConfigError(f"renewMaxTimeMillis must be positive (ms): {self.renew_max_time_ms}")

    @property
    def fifo_groups(self) -> frozenset[str]:
        return frozenset(g.strip() for g in self.fifo_consumer_groups.split(",") if g.strip())

    @property
    def identity(self) -> BrokerIdentity:
        """Who this broker is to the admin API's signatures."""
        return BrokerIdentity(self.broker_cluster_name, self.broker_name, self.broker_id)

    @property
    def host(self) -> str:
        return self.bind_address or self.broker_ip1

    @property
    def ha_host(self) -> str:
        """The address the replication endpoint is advertised at."""
        return self.broker_ip2 or self.broker_ip1


_FIELDS = {f.name: f for f in dataclasses.fields(BrokerConfig)}
_REMOTING_LIMITS = (
    "channel_expired_timeout_ms",
    "remoting_max_clients_per_group",
    "remoting_max_consumer_groups",
    "remoting_max_clients",
    "remoting_max_connections",
    "remoting_max_buffered_bytes",
    "server_channel_max_idle_s",
    "remoting_frame_timeout_ms",
    "remoting_max_in_flight_requests",
)


def remoting_max_frame_bytes(store: StoreConfig) -> int:
    """The largest remoting frame a broker reads: a batch of maxMessageSize bodies with room for
    their headers and properties."""
    return store.max_message_size * 2 + 1024 * 1024


class BrokerConfigs(NamedTuple):
    broker: BrokerConfig
    store: StoreConfig
    ha: HaConfig


def is_loopback(host: str) -> bool:
    """Whether `host` (an IP literal or name) is only reachable from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def known_keys() -> set[str]:
    """Every key a broker.conf may hold."""
    return {key_of(f) for cls in (BrokerConfig, StoreConfig, HaConfig) for f in dataclasses.fields(cls) if f.init}


def _unknown_keys_error(unknown: set[str], source: str, flags: set[str]) -> ConfigError:
    """Names each unknown key where it came from (the file, or a --key=value flag) with the
    nearest known key."""
    known = known_keys()
    parts = []
    in_file = sorted(unknown - flags)
    if in_file:
        parts.append(f"{source}: {unknown_keys_text(in_file, known)}")
    as_flags = sorted(unknown & flags)
    if as_flags:
        label = "unknown option" if len(as_flags) == 1 else "unknown options"
        named = ", ".join(f"--{key}" + did_you_mean(key, known, "--") for key in as_flags)
        parts.append(f"command line: {label}: {named}")
    return ConfigError("; ".join(parts))


def configs_from_properties(
    props: dict[str, str], source: str = "<config>", flags: frozenset[str] = frozenset()
) -> BrokerConfigs:
    """The three configs from broker.conf keys; `flags` are the keys that came as --key=value
    overrides (an error about one names the flag, not the file)."""
    broker, rest_b = bind(BrokerConfig, props)
    store, rest_s = StoreConfig.from_properties(props)
    ha, rest_h = HaConfig.from_properties(props)
    unknown = set(rest_b) & set(rest_s) & set(rest_h)
    if unknown:
        raise _unknown_keys_error(unknown, source, set(flags))
    if broker.remoting_listen_port >= 0 and broker.remoting_max_buffered_bytes < remoting_max_frame_bytes(store):
        raise ConfigError(
            f"{source}: remotingMaxBufferedBytes={broker.remoting_max_buffered_bytes} is below the largest "
            f"remoting frame ({remoting_max_frame_bytes(store)} bytes: 2 x maxMessageSize + 1 MiB): "
            "such a send would never fit"
        )
    if "autoCreateTopicEnable" not in props and not is_loopback(broker.host):
        # Reachable from a network, a broker does not let any client create topics unless the
        # operator says so (each topic costs queues, files and a topic table entry).
        store = dataclasses.replace(store, auto_create_topic_enable=False)
    if ha.enable_controller_mode:
        if store.broker_role is BrokerRole.SLAVE:
            raise ConfigError(
                f"{source}: in controller mode elections choose the master; brokerRole says how this broker "
                "acknowledges when elected: SYNC_MASTER or ASYNC_MASTER, not SLAVE"
            )
        return BrokerConfigs(broker, store, ha)
    if store.broker_role is BrokerRole.SLAVE:
        if broker.broker_id == 0:
            raise ConfigError(f"{source}: a SLAVE needs brokerId > 0 (0 is the master's)")
        if not ha.ha_master_address:
            raise ConfigError(f"{source}: a SLAVE needs haMasterAddress (the master's host:haListenPort)")
    elif broker.broker_id != 0:
        raise ConfigError(f"{source}: a {store.broker_role.name} has brokerId 0, not {broker.broker_id}")
    return BrokerConfigs(broker, store, ha)


def load_broker_config(path: str | Path | None, overrides: dict[str, str] | None = None) -> BrokerConfigs:
    """The three configs from a broker.conf (or none) plus `--key=value` overrides."""
    props = load_properties(path) if path is not None else {}
    props.update(overrides or {})
    return configs_from_properties(props, str(path) if path is not None else "command line", frozenset(overrides or ()))


@dataclass(frozen=True)
class Secrets:
    ha: bytes
    admin: bytes
    # etcd's password (controller mode with etcdUser), "" without.
    etcd: str = ""

    def __repr__(self) -> str:
        return "Secrets(<hidden>)"


def load_secrets(configs: BrokerConfigs) -> Secrets:
    """The replication and admin secrets; ConfigError when an endpoint would be unauthenticated."""
    ha, broker = configs.ha, configs.broker
    try:
        ha_secret = load_secret(ha.ha_secret, ha.ha_secret_file)
        admin_secret = load_secret(broker.admin_secret, broker.admin_secret_file) or ha_secret
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot use the configured secret: {exc}") from None
    if not ha_secret and not ha.mutual_tls:
        raise ConfigError(
            "replication must be authenticated: set haSecret or haSecretFile (a shared secret of at "
            "least 16 bytes), or mutual TLS with haTlsCertFile, haTlsKeyFile and haTlsCaFile"
        )
    if not admin_secret:
        raise ConfigError("the admin API must be authenticated: set adminSecret or adminSecretFile")
    etcd_password = ""
    if ha.etcd_password_file:
        try:
            etcd_password = Path(ha.etcd_password_file).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ConfigError(f"cannot read etcdPasswordFile: {exc}") from None
        if not etcd_password:
            raise ConfigError(f"etcdPasswordFile {ha.etcd_password_file} is empty")
    return Secrets(ha_secret, admin_secret, etcd_password)


# What to do about a path the broker could not use, by errno.
_PATH_FIXES = {
    errno.EACCES: "give the broker's user (uid {uid}) that directory (chown or chmod), or point {key} elsewhere",
    errno.EPERM: "give the broker's user (uid {uid}) that directory (chown or chmod), or point {key} elsewhere",
    errno.ENOTDIR: "a part of that path is a file, not a directory: point {key} at a directory",
    errno.EISDIR: "that path is a directory: point {key} at a file",
    errno.ENOENT: "no such file or directory: create it, or point {key} at one that exists",
    errno.EROFS: "the file system is read-only: point {key} at a writable one",
    errno.ENOSPC: "the disk is full: free space, or point {key} at another disk",
}


def _paths(configs: BrokerConfigs) -> list[tuple[str, str]]:
    """(key, path) of every path the config names, the most specific first (a log directory
    inside the store directory is named as the log directory; without brokerLogDir the logs are
    the store directory's)."""
    broker, store, ha = configs
    named = [
        ("brokerLogDir", broker.broker_log_dir),
        ("haSecretFile", ha.ha_secret_file),
        ("adminSecretFile", broker.admin_secret_file),
        ("aclFile", broker.acl_file),
        ("tlsServerCertPath", broker.tls_server_cert_path),
        ("tlsServerKeyPath", broker.tls_server_key_path),
        ("haTlsCertFile", ha.ha_tls_cert_file),
        ("haTlsKeyFile", ha.ha_tls_key_file),
        ("haTlsCaFile", ha.ha_tls_ca_file),
        ("etcdPasswordFile", ha.etcd_password_file),
        ("storePathRootDir", store.store_path_root_dir),
    ]
    return [(key, path) for key, path in named if path]


def path_problem(exc: OSError, configs: BrokerConfigs) -> str | None:
    """What went wrong with a path of the config, for the operator: the key, its value, the path
    that failed and the fix; None when `exc` is about no path the config names."""
    failed = exc.filename if isinstance(exc.filename, str) else None
    if failed is None:
        return None
    target = Path(failed).absolute()
    for key, value in _paths(configs):
        root = Path(value).absolute()
        if target == root or target.is_relative_to(root):
            reason = exc.strerror or str(exc)
            fix = _PATH_FIXES.get(exc.errno or 0, "check the path, or point {key} elsewhere")
            return f"{key}={value}: cannot use {failed}: {reason}; {fix.format(key=key, uid=os.getuid())}"
    return None
