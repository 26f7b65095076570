"""`StoreConfig`: the message store's settings, RocketMQ's keys and defaults in snake_case.

Field names carry units (`sync_flush_timeout_ms`); the broker.conf key each field reads is its
camelCase form unless its metadata names another (`syncFlushTimeout`). Frozen, thread-safe.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .properties import ConfigError, bind, key_of, load_properties
from .status import BrokerRole, FlushDiskType

DEFAULT_MESSAGE_DELAY_LEVEL = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
PAGE_SIZE = 4096
# What a record holds besides its body, at most: the fixed header and hosts (under 120 bytes), a
# topic (under 128) and properties (under 32 KiB: a 16-bit length).
RECORD_ENVELOPE_BYTES = 64 * 1024


def _key(name: str) -> Any:
    return {"key": name}


def _label(field_name: str) -> str:
    """How errors name a setting: the broker.conf key and the Python field."""
    f = StoreConfig.__dataclass_fields__[field_name]
    return f"{key_of(f)} ({field_name})"


@dataclass(frozen=True, slots=True)
class StoreConfig:
    store_path_root_dir: str = field(default_factory=lambda: os.path.join(os.path.expanduser("~"), "store"))
    broker_role: BrokerRole = BrokerRole.ASYNC_MASTER
    flush_disk_type: FlushDiskType = FlushDiskType.ASYNC_FLUSH
    # Address stamped into messages as STOREHOSTADDRESS and msgId (brokerIP1 and listenPort).
    broker_ip1: str = field(default="127.0.0.1", metadata=_key("brokerIP1"))
    listen_port: int = 10911

    mapped_file_size_commit_log: int = 1024 * 1024 * 1024
    mapped_file_size_consume_queue: int = 300_000 * 20
    max_message_size: int = 4 * 1024 * 1024

    sync_flush_timeout_ms: int = field(default=5000, metadata=_key("syncFlushTimeout"))
    slave_timeout_ms: int = field(default=3000, metadata=_key("slaveTimeout"))
    os_page_cache_busy_timeout_ms: int = field(default=1000, metadata=_key("osPageCacheBusyTimeOutMills"))

    flush_interval_commit_log_ms: int = field(default=500, metadata=_key("flushIntervalCommitLog"))
    flush_commit_log_least_pages: int = 4
    # RocketMQ 5's default: the ASYNC_FLUSH flusher runs on its interval instead of being woken
    # by every put (a wake per put turns into an fdatasync per few pages).
    flush_commit_log_timed: bool = True
    flush_commit_log_thorough_interval_ms: int = field(default=10_000, metadata=_key("flushCommitLogThoroughInterval"))
    commit_interval_commit_log_ms: int = field(default=200, metadata=_key("commitIntervalCommitLog"))
    commit_commit_log_least_pages: int = 4
    commit_commit_log_thorough_interval_ms: int = field(default=200, metadata=_key("commitCommitLogThoroughInterval"))
    flush_interval_consume_queue_ms: int = field(default=1000, metadata=_key("flushIntervalConsumeQueue"))
    transient_store_pool_enable: bool = False
    transient_store_pool_size: int = 5
    warm_mapped_file_enable: bool = False
    check_crc_on_recover: bool = field(default=True, metadata=_key("checkCRCOnRecover"))

    file_reserved_time_h: int = field(default=72, metadata=_key("fileReservedTime"))
    delete_when: str = "04"
    disk_max_used_space_ratio: int = 75
    disk_space_warning_level_ratio: float = 0.90
    disk_space_clean_forcibly_ratio: float = 0.85
    clean_file_forcibly_enable: bool = True
    # Forced clean-up (disk above diskSpaceCleanForciblyRatio) keeps segments younger than this,
    # and segments holding unconsumed messages unless cleanForciblyUnconsumedEnable (store/retention.py).
    clean_forcibly_min_age_ms: int = field(default=3_600_000, metadata=_key("cleanForciblyMinAge"))
    clean_forcibly_unconsumed_enable: bool = False
    clean_resource_interval_ms: int = field(default=10_000, metadata=_key("cleanResourceInterval"))
    delete_commit_log_files_interval_ms: int = field(default=100, metadata=_key("deleteCommitLogFilesInterval"))
    delete_consume_queue_files_interval_ms: int = field(default=100, metadata=_key("deleteConsumeQueueFilesInterval"))
    delete_file_batch_max: int = 10
    destroy_mapped_file_interval_forcibly_ms: int = field(
        default=120_000, metadata=_key("destroyMapedFileIntervalForcibly")
    )

    auto_create_topic_enable: bool = True
    # RocketMQ's brokerPermission (PermName bits: 4 read, 2 write, 6 both): 4 drains the broker,
    # which then refuses sends and is routed read-only, so producers go to the other groups.
    broker_permission: int = 6
    # How many recent producer message ids (UNIQ_KEY) a put is checked against, so a retry of a
    # stored message is answered, not stored again (store/recent_ids.py); 0 turns the check off.
    recent_message_ids_max: int = 100_000
    # Limits of auto-creation (store/auto_create.py): topics in the table, and topics per minute;
    # consumer groups' retry and dead-letter topics have limits of their own.
    auto_create_topic_max_topics: int = 1024
    auto_create_topic_per_minute: int = 60
    auto_create_retry_topic_max_topics: int = 4096
    auto_create_retry_topic_per_minute: int = 60
    default_topic_queue_nums: int = 4
    max_index_num: int = 20_000_000
    max_hash_slot_num: int = 5_000_000
    message_index_enable: bool = True
    duplication_enable: bool = False
    access_message_in_memory_max_ratio: int = 40
    max_transfer_bytes_on_message_in_memory: int = 256 * 1024
    max_transfer_count_on_message_in_memory: int = 32
    max_msgs_num_batch: int = 64
    default_query_max_num: int = 32
    # Entries (topic, group, queue) in the consumer offset table a client commit may add
    # (store/consumer_offset.py); beyond it commits for new ones are refused.
    consumer_offset_max_entries: int = 100_000
    flush_consume_queue_least_pages: int = 2
    flush_consume_queue_thorough_interval_ms: int = field(
        default=60_000, metadata=_key("flushConsumeQueueThoroughInterval")
    )
    enable_schedule_message_stats: bool = True
    message_delay_level: str = DEFAULT_MESSAGE_DELAY_LEVEL

    def __post_init__(self) -> None:
        for name, kind in (("broker_role", BrokerRole), ("flush_disk_type", FlushDiskType)):
            value = getattr(self, name)
            if isinstance(value, str):
                try:
                    object.__setattr__(self, name, kind[value.upper()])
                except KeyError:
                    choices = ", ".join(m.name for m in kind)
                    raise ConfigError(f"{_label(name)}={value!r}: expected one of {choices}") from None
        object.__setattr__(self, "store_path_root_dir", str(self.store_path_root_dir))
        if self.broker_permission not in (2, 4, 6):
            raise ConfigError(
                f"brokerPermission must be 6 (read and write), 4 (read only: drained) or 2 (write only), "
                f"got {self.broker_permission}"
            )
        positive = (
            "mapped_file_size_commit_log",
            "mapped_file_size_consume_queue",
            "max_message_size",
            "sync_flush_timeout_ms",
            "slave_timeout_ms",
            "os_page_cache_busy_timeout_ms",
            "flush_interval_commit_log_ms",
            "commit_interval_commit_log_ms",
            "flush_interval_consume_queue_ms",
            "transient_store_pool_size",
            "consumer_offset_max_entries",
        )
        for name in positive:
            if getattr(self, name) <= 0:
                raise ConfigError(f"{_label(name)} must be positive, got {getattr(self, name)}")
        limits = (
            "auto_create_topic_max_topics",
            "auto_create_topic_per_minute",
            "auto_create_retry_topic_max_topics",
            "auto_create_retry_topic_per_minute",
        )
        for name in limits:
            if getattr(self, name) < 0:
                raise ConfigError(
                    f"{_label(name)} must not be negative (0 stops auto-creation), got {getattr(self, name)}"
                )
        if self.mapped_file_size_commit_log < 4096:
            raise ConfigError(
                f"{_label('mapped_file_size_commit_log')} must be at least 4096, got {self.mapped_file_size_commit_log}"
            )
        if self.mapped_file_size_consume_queue % 20:
            raise ConfigError(f"{_label('mapped_file_size_consume_queue')} must be a multiple of 20 (the unit size)")
        if not 0 <= self.listen_port <= 65535:
            raise ConfigError(f"{_label('listen_port')} out of range: {self.listen_port}")

    # -- derived -------------------------------------------------------------------------------

    @property
    def root(self) -> Path:
        return Path(self.store_path_root_dir)

    @property
    def commit_log_dir(self) -> Path:
        return self.root / "commitlog"

    @property
    def store_host(self) -> tuple[str, int]:
        return (self.broker_ip1, self.listen_port)

    @property
    def transient_store_pool_active(self) -> bool:
        """RocketMQ uses the write buffer only for an ASYNC_FLUSH master."""
        return (
            self.transient_store_pool_enable
            and self.flush_disk_type is FlushDiskType.ASYNC_FLUSH
            and self.broker_role is not BrokerRole.SLAVE
        )

    @property
    def max_append_size(self) -> int:
        """The largest encoded message or batch the put path takes: maxMessageSize limits the body
        (what clients check before they send), so the record gets room for its header, topic and
        properties on top (the properties' length field is 16 bits); and it must fit a segment."""
        return min(self.max_message_size + RECORD_ENVELOPE_BYTES, self.mapped_file_size_commit_log - 8)

    # -- construction from broker.conf ------------------------------------------------------------

    @classmethod
    def from_properties(cls, props: dict[str, str], **fixed: Any) -> tuple["StoreConfig", dict[str, str]]:
        """Bind RocketMQ keys; returns the config and the keys this component does not know."""
        return bind(cls, props, **fixed)

    @classmethod
    def from_file(cls, path: str | Path, overrides: dict[str, str] | None = None) -> "StoreConfig":
        """Read a broker.conf holding only store keys; any other key is an error."""
        props = load_properties(path)
        props.update(overrides or {})
        config, unknown = cls.from_properties(props)
        if unknown:
            raise ConfigError(f"{path}: unknown keys: {', '.join(sorted(unknown))}")
        return config
