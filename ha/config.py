"""`HaConfig`: replication settings, RocketMQ's keys and defaults (haListenPort, haMasterAddress,
haSendHeartbeatInterval, haHousekeepingInterval, haTransferBatchSize, haSlaveFallbehindMax,
inSyncReplicas, haMaxTimeSlaveNotCatchup, enableElectUncleanMaster) plus RocketStore's
haMetadataSyncInterval, authentication keys and the controller mode's etcd keys (enableControllerMode, etcdEndpoints,
etcdPrefix, etcdLeaseTtlSeconds, etcdPollInterval, etcdRequestTimeout, etcdLeaseFenceMargin,
etcdCaFile, etcdCertFile, etcdKeyFile, etcdUser, etcdPasswordFile).
Frozen, thread-safe.

`slaveTimeout` (how long a SYNC_MASTER put waits for its slaves) belongs to the put path and lives
in `store.StoreConfig`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from store.properties import ConfigError, bind


def _key(name: str) -> Any:
    return {"key": name}


@dataclass(frozen=True, slots=True)
class HaConfig:
    ha_listen_port: int = 10912
    # host:port of the master's haListenPort; a SLAVE streams from it.
    ha_master_address: str = ""
    ha_send_heartbeat_interval_ms: int = field(default=5000, metadata=_key("haSendHeartbeatInterval"))
    ha_housekeeping_interval_ms: int = field(default=20_000, metadata=_key("haHousekeepingInterval"))
    ha_transfer_batch_size: int = 32 * 1024
    ha_slave_fallbehind_max: int = 256 * 1024 * 1024
    # Replicas (the master included) that must hold a message before a SYNC_MASTER put is PUT_OK.
    in_sync_replicas: int = 1
    # A slave's reconnect backoff after a lost or refused stream, doubling up to the max.
    ha_reconnect_backoff_min_ms: int = field(default=100, metadata=_key("haReconnectBackoffMin"))
    ha_reconnect_backoff_max_ms: int = field(default=5000, metadata=_key("haReconnectBackoffMax"))
    # How often a slave copies its master's topic table, consumer offsets and delay cursors
    # (RocketMQ's slave synchronisation, every 10 s there): after a failover consumers resume
    # from at most this far back.
    ha_metadata_sync_interval_ms: int = field(default=3000, metadata=_key("haMetadataSyncInterval"))
    # Authentication of the replication stream: a shared secret (inline or in a file) and/or
    # mutual TLS (the CA file makes the peer's certificate mandatory).
    ha_secret: str = field(default="", repr=False)
    ha_secret_file: str = ""
    ha_tls_cert_file: str = ""
    ha_tls_key_file: str = ""
    ha_tls_ca_file: str = ""
    # Both ends of a stream on event loops (grpc.aio), on the loop that serves both client APIs
    # (`broker-loop`), where puts run: "auto" (the default) and "true"; "false": on threads (gRPC's
    # sync API). "auto" chose threads in a broker without the remoting API while its gRPC puts ran
    # on another loop than their stream; on one loop the official Producer measured 0.79x and 0.83x
    # of its floor at 1 and 8 clients with loops against 0.73x and 0.75x with threads.
    ha_stream_on_event_loop: str = "auto"
    # Controller mode: roles decided by elections on etcd instead of brokerRole/haMasterAddress.
    enable_controller_mode: bool = False
    # etcd client URLs, separated by ';' or ',' (http://127.0.0.1:2379).
    etcd_endpoints: str = ""
    etcd_prefix: str = "/rocketstore"
    # etcd's own security: TLS (https:// endpoints; a CA to trust, a client certificate for
    # --client-cert-auth) and/or a user whose password is read from a file.
    etcd_ca_file: str = ""
    etcd_cert_file: str = ""
    etcd_key_file: str = ""
    etcd_user: str = ""
    etcd_password_file: str = ""
    # The master's lease: when it is not renewed for this long, a slave is elected. etcd
    # grants at least its own minimum (2 s with etcd's default timings).
    etcd_lease_ttl_s: int = field(default=2, metadata=_key("etcdLeaseTtlSeconds"))
    etcd_poll_interval_ms: int = field(default=100, metadata=_key("etcdPollInterval"))
    etcd_request_timeout_ms: int = field(default=500, metadata=_key("etcdRequestTimeout"))
    # A master stops acknowledging this long before its lease can expire at etcd.
    etcd_lease_fence_margin_ms: int = field(default=500, metadata=_key("etcdLeaseFenceMargin"))
    # An in-sync slave that has not caught up with the master for this long leaves the set.
    ha_max_time_slave_not_catchup_ms: int = field(default=15_000, metadata=_key("haMaxTimeSlaveNotCatchup"))
    # Allow electing a slave outside the in-sync set when none in it is alive (may lose messages).
    enable_elect_unclean_master: bool = False

    def streams_on_event_loop(self) -> bool:
        """Whether replication streams run on event loops (`auto` and `true`) or on threads."""
        return self.ha_stream_on_event_loop != "false"

    def __post_init__(self) -> None:  # noqa: C901 - one independent check per config key
        for name in (
            "ha_send_heartbeat_interval_ms",
            "ha_housekeeping_interval_ms",
            "ha_transfer_batch_size",
            "ha_reconnect_backoff_min_ms",
            "ha_reconnect_backoff_max_ms",
            "ha_metadata_sync_interval_ms",
        ):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)}")
        if self.ha_reconnect_backoff_min_ms > self.ha_reconnect_backoff_max_ms:
            raise ConfigError(
                f"haReconnectBackoffMin ({self.ha_reconnect_backoff_min_ms}) must not exceed "
                f"haReconnectBackoffMax ({self.ha_reconnect_backoff_max_ms})"
            )
        if not 0 <= self.ha_listen_port <= 65535:
            raise ConfigError(f"haListenPort (ha_listen_port) out of range: {self.ha_listen_port}")
        if self.ha_slave_fallbehind_max < 0:
            raise ConfigError(f"haSlaveFallbehindMax must not be negative, got {self.ha_slave_fallbehind_max}")
        if self.ha_stream_on_event_loop not in ("auto", "true", "false"):
            raise ConfigError(f"haStreamOnEventLoop must be auto, true or false, got {self.ha_stream_on_event_loop!r}")
        if self.in_sync_replicas < 1:
            raise ConfigError(f"inSyncReplicas must be at least 1, got {self.in_sync_replicas}")
        if bool(self.ha_tls_cert_file) != bool(self.ha_tls_key_file):
            raise ConfigError("haTlsCertFile and haTlsKeyFile go together")
        if self.ha_tls_ca_file and not self.ha_tls_cert_file:
            raise ConfigError("haTlsCaFile needs haTlsCertFile and haTlsKeyFile (mutual TLS)")
        if self.ha_secret and self.ha_secret_file:
            raise ConfigError("set haSecret or haSecretFile, not both")
        for name in (
            "etcd_lease_ttl_s",
            "etcd_poll_interval_ms",
            "etcd_request_timeout_ms",
            "etcd_lease_fence_margin_ms",
            "ha_max_time_slave_not_catchup_ms",
        ):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)}")
        if self.enable_controller_mode:
            if not self.etcd_endpoints.strip():
                raise ConfigError("enableControllerMode=true needs etcdEndpoints")
            if self.ha_master_address:
                raise ConfigError("haMasterAddress is not used in controller mode: elections choose the master")
            if self.etcd_lease_fence_margin_ms * 2 > self.etcd_lease_ttl_s * 1000:
                raise ConfigError(
                    f"etcdLeaseFenceMargin ({self.etcd_lease_fence_margin_ms} ms) must be at most half of "
                    f"etcdLeaseTtlSeconds ({self.etcd_lease_ttl_s} s)"
                )
            if self.ha_send_heartbeat_interval_ms * 2 > self.ha_max_time_slave_not_catchup_ms:
                # A slave reports at least once a heartbeat interval; the in-sync set drops a slave
                # silent for haMaxTimeSlaveNotCatchup, which must leave room for a late report.
                raise ConfigError(
                    f"haSendHeartbeatInterval ({self.ha_send_heartbeat_interval_ms} ms) must be at most half of "
                    f"haMaxTimeSlaveNotCatchup ({self.ha_max_time_slave_not_catchup_ms} ms)"
                )
            if bool(self.etcd_user) != bool(self.etcd_password_file):
                raise ConfigError("etcdUser and etcdPasswordFile go together")
            if bool(self.etcd_cert_file) != bool(self.etcd_key_file):
                raise ConfigError("etcdCertFile and etcdKeyFile go together")
            if not self.etcd_prefix.startswith("/") or self.etcd_prefix.endswith("/"):
                raise ConfigError(f"etcdPrefix must start with '/' and not end with it, got {self.etcd_prefix!r}")

    @property
    def mutual_tls(self) -> bool:
        return bool(self.ha_tls_ca_file)

    @classmethod
    def from_properties(cls, props: dict[str, str], **fixed: Any) -> tuple["HaConfig", dict[str, str]]:
        return bind(cls, props, **fixed)
