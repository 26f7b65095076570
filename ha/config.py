"""`HaConfig`: replication settings, RocketMQ's keys and defaults (haListenPort, haMasterAddress,
haSendHeartbeatInterval, haHousekeepingInterval, haTransferBatchSize, haSlaveFallbehindMax,
inSyncReplicas) plus RocketStore's authentication keys. Frozen, thread-safe.

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
    # Authentication of the replication stream: a shared secret (inline or in a file) and/or
    # mutual TLS (the CA file makes the peer's certificate mandatory).
    ha_secret: str = field(default="", repr=False)
    ha_secret_file: str = ""
    ha_tls_cert_file: str = ""
    ha_tls_key_file: str = ""
    ha_tls_ca_file: str = ""

    def __post_init__(self) -> None:
        for name in ("ha_send_heartbeat_interval_ms", "ha_housekeeping_interval_ms", "ha_transfer_batch_size",
                     "ha_reconnect_backoff_min_ms", "ha_reconnect_backoff_max_ms"):
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
        if self.in_sync_replicas < 1:
            raise ConfigError(f"inSyncReplicas must be at least 1, got {self.in_sync_replicas}")
        if bool(self.ha_tls_cert_file) != bool(self.ha_tls_key_file):
            raise ConfigError("haTlsCertFile and haTlsKeyFile go together")
        if self.ha_tls_ca_file and not self.ha_tls_cert_file:
            raise ConfigError("haTlsCaFile needs haTlsCertFile and haTlsKeyFile (mutual TLS)")
        if self.ha_secret and self.ha_secret_file:
            raise ConfigError("set haSecret or haSecretFile, not both")

    @property
    def mutual_tls(self) -> bool:
        return bool(self.ha_tls_ca_file)

    @classmethod
    def from_properties(cls, props: dict[str, str], **fixed: Any) -> tuple["HaConfig", dict[str, str]]:
        return bind(cls, props, **fixed)
