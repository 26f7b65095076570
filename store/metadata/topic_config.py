"""Topic metadata: each topic's queue counts and permissions, RocketMQ's TopicConfigManager.

Owns `<root>/config/topics.json`, in the JSON shape of RocketMQ's TopicConfigSerializeWrapper:

    {"dataVersion": {"counter": 3, "timestamp": 1700000000000},
     "topicConfigTable": {"TopicTest": {"topicName": "TopicTest", "readQueueNums": 4,
                                        "writeQueueNums": 4, "perm": 6,
                                        "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0,
                                        "order": false}}}

A file written by the Java broker loads: fields this store does not model (RocketMQ 5's
`attributes`, `stateVersion`, the static-topic mapping tables) are ignored. An entry that breaks
this store's rules (the Java broker creates a topic named after its host name, dots included) is
kept verbatim and written back on every persist, but is not served: `get` does not return it.

Every change goes through `store.json_file.write_json_atomically` (tmp + fsync + rename, old file
kept as `.bak`) and bumps `data_version`; memory changes only once the file is written, so a
failed write leaves both as they were. The system topics the broker creates at start
(SCHEDULE_TOPIC_XXXX, one queue per delay level; the two transaction topics; pop state; the
timer's two topics) exist after `load`
without being written until the next change.

Thread-safety: one lock serialises changes (rare: admin updates, the first put to a new topic).
The table is copy-on-write: a change publishes a new dict, so the lookups every put and pull makes
(`get`, `check_writable`, `check_readable`) read it without taking the lock.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable, KeysView, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..clock import wall_clock_ms
from ..log.codec import MAX_TOPIC_LENGTH, NAME_PATTERN
from ..pop.pop_state import POP_TOPIC
from .json_file import read_json, write_json_atomically

log = logging.getLogger(__name__)

TOPICS_FILE = "topics.json"

# RocketMQ's TopicValidator / Validators: the character set, and the lengths.
TOPIC_MAX_LENGTH = MAX_TOPIC_LENGTH
GROUP_MAX_LENGTH = 255
MAX_QUEUE_NUMS = 1024
TOPIC_FILTER_TYPES = ("SINGLE_TAG", "MULTI_TAG")
_INT32_MAX = 2**31 - 1

# A consumer group's redeliveries and dead letters (RocketMQ's MixAll prefixes).
RETRY_TOPIC_PREFIX = "%RETRY%"
DLQ_TOPIC_PREFIX = "%DLQ%"


def is_retry_or_dlq(topic: str) -> bool:
    """A consumer group's retry or dead-letter topic (by name): auto-created within limits of
    their own (`store.auto_create`)."""
    return topic.startswith((RETRY_TOPIC_PREFIX, DLQ_TOPIC_PREFIX))


# System topics (RocketMQ's TopicValidator constants).
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
# Timed messages (the broker's rocketstore/broker/timer_state.py): those waiting, and those delivered.
TIMER_TOPIC = "rmq_sys_wheel_timer"
TIMER_DONE_TOPIC = "RS_SYS_TIMER_DONE"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
SYSTEM_TOPICS = frozenset(
    {SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, POP_TOPIC, TIMER_TOPIC, TIMER_DONE_TOPIC}
)
DEFAULT_DELAY_LEVELS = 18


class Permission(enum.IntFlag):
    """RocketMQ's PermName bits."""

    INHERIT = 0x1
    WRITE = 0x2
    READ = 0x4
    PRIORITY = 0x8
    READ_WRITE = READ | WRITE


def _check_name(kind: str, name: Any, max_length: int) -> None:
    if not isinstance(name, str):
        raise ValueError(f"{kind} name must be a string, got {type(name).__name__}")
    if not name:
        raise ValueError(f"{kind} name is empty")
    if len(name) > max_length:
        raise ValueError(f"{kind} name {name[:20]!r}... is {len(name)} characters; at most {max_length} allowed")
    if not NAME_PATTERN.fullmatch(name):
        raise ValueError(f"{kind} name {name!r} has characters outside [%|a-zA-Z0-9_-]")


def validate_topic_name(topic: Any) -> None:
    """Raise ValueError unless `topic` meets RocketMQ's topic rules."""
    _check_name("topic", topic, TOPIC_MAX_LENGTH)


def validate_group_name(group: Any) -> None:
    """Raise ValueError unless `group` meets RocketMQ's consumer group rules."""
    _check_name("group", group, GROUP_MAX_LENGTH)


def _is_int(value: Any) -> bool:
    # bool is an int subclass; a JSON `true` where a number belongs is a broken file, not 1.
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """One topic's settings; defaults are RocketMQ's TopicConfig's."""

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = int(Permission.READ_WRITE)
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False

    def __post_init__(self) -> None:
        validate_topic_name(self.topic_name)
        for name in ("read_queue_nums", "write_queue_nums"):
            value = getattr(self, name)
            if not _is_int(value) or not 1 <= value <= MAX_QUEUE_NUMS:
                raise ValueError(f"{self.topic_name}: {name} must be an int in 1..{MAX_QUEUE_NUMS}, got {value!r}")
        if not _is_int(self.perm) or not 0 <= self.perm <= 15:
            raise ValueError(f"{self.topic_name}: perm must be an int in 0..15 (PermName bits), got {self.perm!r}")
        # A Permission member compares equal to its int, but a plain int keeps repr and JSON simple.
        object.__setattr__(self, "perm", int(self.perm))
        if self.topic_filter_type not in TOPIC_FILTER_TYPES:
            raise ValueError(
                f"{self.topic_name}: topic_filter_type must be one of {', '.join(TOPIC_FILTER_TYPES)}, "
                f"got {self.topic_filter_type!r}"
            )
        if not _is_int(self.topic_sys_flag) or not 0 <= self.topic_sys_flag <= _INT32_MAX:
            raise ValueError(
                f"{self.topic_name}: topic_sys_flag must be a non-negative int, got {self.topic_sys_flag!r}"
            )
        if not isinstance(self.order, bool):
            raise ValueError(f"{self.topic_name}: order must be a bool, got {self.order!r}")

    @property
    def readable(self) -> bool:
        return bool(self.perm & Permission.READ)

    @property
    def writable(self) -> bool:
        return bool(self.perm & Permission.WRITE)

    def to_json(self) -> dict[str, Any]:
        return {
            "topicName": self.topic_name,
            "readQueueNums": self.read_queue_nums,
            "writeQueueNums": self.write_queue_nums,
            "perm": self.perm,
            "topicFilterType": self.topic_filter_type,
            "topicSysFlag": self.topic_sys_flag,
            "order": self.order,
        }

    @classmethod
    def from_json(cls, name: str, entry: Mapping[str, Any]) -> "TopicConfig":
        """An entry of topicConfigTable; missing fields take RocketMQ's defaults, as fastjson
        does. The table key is the name the Java broker looks the topic up by, so it wins."""
        if not isinstance(entry, Mapping):
            raise ValueError(f"{name}: expected an object, got {type(entry).__name__}")
        fields = {
            "readQueueNums": "read_queue_nums",
            "writeQueueNums": "write_queue_nums",
            "perm": "perm",
            "topicFilterType": "topic_filter_type",
            "topicSysFlag": "topic_sys_flag",
            "order": "order",
        }
        return cls(name, **{py: entry[js] for js, py in fields.items() if js in entry})


@dataclass(frozen=True, slots=True)
class DataVersion:
    """RocketMQ's DataVersion: a counter and the time (ms) of the last change. Name servers and
    slaves compare it to tell whether the topic table changed."""

    counter: int = 0
    timestamp: int = 0

    def next(self, timestamp: int) -> "DataVersion":
        return DataVersion(self.counter + 1, timestamp)

    def to_json(self) -> dict[str, int]:
        return {"counter": self.counter, "timestamp": self.timestamp}


class TopicConfigManager:
    """The topic table of one store, persisted under `<root>/config/topics.json`."""

    def __init__(
        self,
        root: str | Path,
        *,
        auto_create_topic_enable: bool = True,
        default_topic_queue_nums: int = 4,
        delay_levels: int = DEFAULT_DELAY_LEVELS,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> None:
        if not _is_int(default_topic_queue_nums) or not 1 <= default_topic_queue_nums <= MAX_QUEUE_NUMS:
            raise ValueError(
                f"default_topic_queue_nums must be in 1..{MAX_QUEUE_NUMS}, got {default_topic_queue_nums!r}"
            )
        if not _is_int(delay_levels) or not 1 <= delay_levels <= MAX_QUEUE_NUMS:
            raise ValueError(f"delay_levels must be in 1..{MAX_QUEUE_NUMS}, got {delay_levels!r}")
        self.path = Path(root) / "config" / TOPICS_FILE
        self.auto_create_topic_enable = auto_create_topic_enable
        self.default_topic_queue_nums = default_topic_queue_nums
        self.delay_levels = delay_levels
        self._clock = clock
        self._lock = threading.Lock()
        # Published snapshots, replaced whole under the lock and never mutated after publishing.
        self._table: dict[str, TopicConfig] = self._with_system_topics({})
        self._foreign: dict[str, Any] = {}
        self._version = DataVersion(0, clock())

    @classmethod
    def from_store_config(cls, config: Any, **kwargs: Any) -> "TopicConfigManager":
        """A manager set up from a StoreConfig (auto-create, queue count, delay levels)."""
        return cls(
            config.store_path_root_dir,
            auto_create_topic_enable=config.auto_create_topic_enable,
            default_topic_queue_nums=config.default_topic_queue_nums,
            delay_levels=len(config.message_delay_level.split()),
            **kwargs,
        )

    # -- loading ---------------------------------------------------------------------------------

    def load(self) -> None:
        """Read topics.json (or its .bak), then add the system topics it lacks. Never writes.
        Raises ValueError when the file is not a topic table."""
        content = read_json(self.path)
        version = DataVersion(0, self._clock())
        table: dict[str, TopicConfig] = {}
        foreign: dict[str, Any] = {}
        if content is not None:
            table, foreign, version = self._parse(content, version, str(self.path))
        with self._lock:
            self._table = self._with_system_topics(table)
            self._foreign = foreign
            self._version = version

    def _parse(
        self, content: Any, default_version: DataVersion, source: str
    ) -> tuple[dict[str, TopicConfig], dict[str, Any], DataVersion]:
        if not isinstance(content, dict):
            raise ValueError(f"{source}: expected a JSON object, got {type(content).__name__}")
        version = self._parse_version(content.get("dataVersion"), default_version, source)
        raw_table = content.get("topicConfigTable", {})
        if not isinstance(raw_table, dict):
            raise ValueError(f"{source}: topicConfigTable is not an object")
        table: dict[str, TopicConfig] = {}
        foreign: dict[str, Any] = {}
        for name, entry in raw_table.items():
            try:
                table[name] = TopicConfig.from_json(name, entry)
            except (ValueError, TypeError) as exc:
                # Keep it for the Java broker's sake (it may be its own brokerName topic);
                # dropping it would delete it from disk at the next persist.
                log.warning("%s: topic %r kept as is but not served: %s", source, name, exc)
                foreign[name] = entry
        return table, foreign, version

    @staticmethod
    def _parse_version(raw: Any, default: DataVersion, source: str) -> DataVersion:
        if raw is None:
            return default
        if not isinstance(raw, dict):
            raise ValueError(f"{source}: dataVersion is not an object")
        counter, timestamp = raw.get("counter", 0), raw.get("timestamp", default.timestamp)
        if not _is_int(counter) or not _is_int(timestamp):
            raise ValueError(f"{source}: dataVersion counter and timestamp must be ints, got {raw!r}")
        return DataVersion(counter, timestamp)

    # -- copying between brokers (a slave follows its master's table) ----------------------------

    def document(self) -> dict[str, Any]:
        """The table as topics.json holds it (data version included)."""
        with self._lock:
            return self._document(self._table, self._foreign, self._version)

    def replace_with(self, document: Any, source: str = "the master's topic table") -> bool:
        """Take another broker's table (a `document()`) whole, as RocketMQ's slave does: written,
        then served; the system topics this broker needs are kept. Nothing changes when the data
        versions are equal. True when it changed; ValueError (nothing changed) for a document that
        is not a topic table."""
        if isinstance(document, dict):
            # Compared before the entries are parsed: an unchanged table costs nothing, and its
            # unservable entries are not warned about at every copy.
            if self._parse_version(document.get("dataVersion"), DataVersion(-1, 0), source) == self._version:
                return False
        table, foreign, version = self._parse(document, DataVersion(0, self._clock()), source)
        with self._lock:
            table = self._with_system_topics(table)
            self._write(table, foreign, version)
            self._table, self._foreign, self._version = table, foreign, version
        log.info("topic table replaced from %s (version %d, %d topics)", source, version.counter, len(table))
        return True

    def _with_system_topics(self, table: dict[str, TopicConfig]) -> dict[str, TopicConfig]:
        """`table` plus the topics RocketMQ's broker creates at start. A stored entry wins (as in
        Java, where the file overwrites the defaults), except that the schedule topic always has
        a queue per delay level: the schedule service writes level N to queue N-1."""
        table = dict(table)
        schedule = table.get(SCHEDULE_TOPIC)
        if schedule is None:
            table[SCHEDULE_TOPIC] = TopicConfig(SCHEDULE_TOPIC, self.delay_levels, self.delay_levels)
        elif schedule.read_queue_nums < self.delay_levels or schedule.write_queue_nums < self.delay_levels:
            log.info("%s widened to %d queues, one per delay level", SCHEDULE_TOPIC, self.delay_levels)
            table[SCHEDULE_TOPIC] = TopicConfig(
                SCHEDULE_TOPIC,
                max(schedule.read_queue_nums, self.delay_levels),
                max(schedule.write_queue_nums, self.delay_levels),
                schedule.perm,
                schedule.topic_filter_type,
                schedule.topic_sys_flag,
                schedule.order,
            )
        # RocketMQ's TransactionalMessageBridge creates both with one queue, read/write.
        # Pop consumption's events: one queue, so a replay reads them in log order.
        # Timed messages and their delivery records: one queue each, read in log order.
        for name in (TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, POP_TOPIC, TIMER_TOPIC, TIMER_DONE_TOPIC):
            table.setdefault(name, TopicConfig(name, 1, 1))
        return table

    # -- queries ---------------------------------------------------------------------------------

    @property
    def data_version(self) -> DataVersion:
        return self._version

    def get(self, topic: str) -> TopicConfig | None:
        return self._table.get(topic)

    def names(self) -> KeysView[str]:
        """Every served topic's name, unordered (a view of a snapshot: the table is replaced whole,
        never changed in place)."""
        return self._table.keys()

    def topics(self) -> list[TopicConfig]:
        """Every served topic, by name."""
        table = self._table
        return [table[name] for name in sorted(table)]

    def check_writable(self, topic: str, queue_id: int) -> str | None:
        """Why a put to (topic, queue_id) must be refused, or None. A missing topic is created
        here when auto-creation is on: this is the put path's "first put" hook."""
        config = self._table.get(topic)
        if config is None:
            try:
                config = self.auto_create(topic)
            except ValueError as exc:
                return str(exc)
            if config is None:
                return f"topic {topic!r} does not exist and autoCreateTopicEnable is false"
        if not config.writable:
            return f"topic {topic!r} is not writable (perm {config.perm})"
        return self._check_queue(config, queue_id, config.write_queue_nums, "write")

    def check_readable(self, topic: str, queue_id: int) -> str | None:
        """Why a read of (topic, queue_id) must be refused, or None. Reads never create topics."""
        config = self._table.get(topic)
        if config is None:
            return f"topic {topic!r} does not exist"
        if not config.readable:
            return f"topic {topic!r} is not readable (perm {config.perm})"
        return self._check_queue(config, queue_id, config.read_queue_nums, "read")

    @staticmethod
    def _check_queue(config: TopicConfig, queue_id: int, nums: int, kind: str) -> str | None:
        if not _is_int(queue_id) or not 0 <= queue_id < nums:
            return f"queue id {queue_id!r} out of range for topic {config.topic_name!r}: {kind}QueueNums is {nums}"
        return None

    # -- changes ---------------------------------------------------------------------------------

    def create_or_update(self, config: TopicConfig) -> TopicConfig:
        """Store `config` (replacing the topic's entry) and persist. An identical entry is not a
        change: neither the file nor the data version moves."""
        if not isinstance(config, TopicConfig):
            raise TypeError(f"expected a TopicConfig, got {type(config).__name__}")
        with self._lock:
            if self._table.get(config.topic_name) == config:
                return config
            table = dict(self._table)
            table[config.topic_name] = config
            foreign = {k: v for k, v in self._foreign.items() if k != config.topic_name}
            self._commit(table, foreign)
        log.info("topic %s created or updated: %s", config.topic_name, config)
        return config

    def auto_create(self, topic: str) -> TopicConfig | None:
        """The topic's config, created with default_topic_queue_nums read/write queues when it
        does not exist; None when it does not exist and auto-creation is off. ValueError for a
        name RocketMQ would refuse."""
        existing = self._table.get(topic)
        if existing is not None:
            return existing
        if not self.auto_create_topic_enable:
            return None
        validate_topic_name(topic)
        with self._lock:
            # Another thread's first put may have created it while we waited for the lock.
            existing = self._table.get(topic)
            if existing is not None:
                return existing
            n = self.default_topic_queue_nums
            config = TopicConfig(topic, n, n, int(Permission.READ_WRITE))
            table = dict(self._table)
            table[topic] = config
            foreign = {k: v for k, v in self._foreign.items() if k != topic}
            self._commit(table, foreign)
        log.info("topic %s auto-created with %d queues", topic, n)
        return config

    def delete(self, topic: str) -> bool:
        """Remove the topic (also an unserved entry kept from a Java file); False when absent.
        System topics cannot be deleted: the broker would recreate them at the next start."""
        if topic in SYSTEM_TOPICS:
            raise ValueError(f"{topic} is a system topic and cannot be deleted")
        with self._lock:
            if topic not in self._table and topic not in self._foreign:
                return False
            table = {k: v for k, v in self._table.items() if k != topic}
            foreign = {k: v for k, v in self._foreign.items() if k != topic}
            self._commit(table, foreign)
        log.info("topic %s deleted", topic)
        return True

    def persist(self) -> None:
        """Write the current table without bumping the version (e.g. to write the system topics
        load added)."""
        with self._lock:
            self._write(self._table, self._foreign, self._version)

    def _commit(self, table: dict[str, TopicConfig], foreign: dict[str, Any]) -> None:
        """Caller holds the lock. Write first, publish after: a failed write changes nothing."""
        version = self._version.next(self._clock())
        self._write(table, foreign, version)
        self._table, self._foreign, self._version = table, foreign, version

    def _write(self, table: Mapping[str, TopicConfig], foreign: Mapping[str, Any], version: DataVersion) -> None:
        write_json_atomically(self.path, self._document(table, foreign, version))

    @staticmethod
    def _document(table: Mapping[str, TopicConfig], foreign: Mapping[str, Any], version: DataVersion) -> dict[str, Any]:
        entries: dict[str, Any] = dict(foreign)
        entries.update((name, config.to_json()) for name, config in table.items())
        return {"dataVersion": version.to_json(), "topicConfigTable": entries}
