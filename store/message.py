"""Message values: what a producer hands the store (`Message`) and what a read returns (`MessageExt`).

Also RocketMQ's system-flag bits, the property keys the store interprets and the range of born
times the store accepts (`MIN_BORN_TIMESTAMP_MS`..`MAX_BORN_TIMESTAMP_MS`). Immutable values,
thread-safe.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from dataclasses import fields as dataclass_fields
from typing import Any

Host = tuple[str, int]

# MessageSysFlag bits.
COMPRESSED_FLAG = 1
MULTI_TAGS_FLAG = 1 << 1
TRANSACTION_NOT_TYPE = 0
TRANSACTION_PREPARED_TYPE = 1 << 2
TRANSACTION_COMMIT_TYPE = 2 << 2
TRANSACTION_ROLLBACK_TYPE = 3 << 2
TRANSACTION_TYPE_MASK = 3 << 2
BORNHOST_V6_FLAG = 1 << 4
STOREHOST_V6_FLAG = 1 << 5

# Property keys with a meaning to the store (RocketMQ's MessageConst names).
PROPERTY_KEYS = "KEYS"
PROPERTY_TAGS = "TAGS"
PROPERTY_WAIT_STORE_MSG_OK = "WAIT"
PROPERTY_DELAY_TIME_LEVEL = "DELAY"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
# Written on a redelivery copy (retry topic, dead letter, send-back): where it came from.
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
PROPERTY_DLQ_ORIGIN_MESSAGE_ID = "DLQ_ORIGIN_MESSAGE_ID"

# The born times the store accepts: the years 1 to 9999, protobuf's Timestamp range. RocketMQ's
# field is any int64, but a RocketMQ 5 client reads it as a Timestamp, and a record whose time lies
# outside that range could not be served to one (issue 30); a clock, however wrong, is never there.
MIN_BORN_TIMESTAMP_MS = -62_135_596_800_000  # 0001-01-01T00:00:00Z
MAX_BORN_TIMESTAMP_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z


def clamp_timestamp_ms(ms: int) -> int:
    """`ms` within the range of born times the store accepts, which protobuf's Timestamp holds
    (for records stored before the store checked it)."""
    return min(max(ms, MIN_BORN_TIMESTAMP_MS), MAX_BORN_TIMESTAMP_MS)


def transaction_type(sys_flag: int) -> int:
    return sys_flag & TRANSACTION_TYPE_MASK


def producer_sys_flag(compressed: bool) -> int:
    """The sysFlag a producer's message is stored with, whatever flags the producer sent: only
    its body's compression is the producer's to say. The transaction type is the broker's (a
    half message is parked by the transaction service, commit and rollback records are written by
    `end_transaction`), and so are the host address kinds (the codec sets them)."""
    return COMPRESSED_FLAG if compressed else 0


@dataclass(frozen=True, slots=True)
class Message:
    """A message to put. `store_host` None means the store's own address; `born_timestamp_ms`
    None means the time of the put."""

    topic: str
    queue_id: int
    body: bytes
    properties: Mapping[str, str] = field(default_factory=dict)
    flag: int = 0
    sys_flag: int = 0
    born_host: Host = ("127.0.0.1", 0)
    store_host: Host | None = None
    born_timestamp_ms: int | None = None
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self) -> str | None:
        return self.properties.get(PROPERTY_KEYS)


def batch_messages(
    topic: str,
    queue_id: int,
    entries: Iterable[tuple[bytes, int, Mapping[str, str]]],
    sys_flag: int,
    born_host: Host,
    born_timestamp_ms: int | None,
    reconsume_times: int,
) -> list[Message]:
    """A front end's batch as `Message`s: one topic, queue and sender, each (body, flag,
    properties) entry a message. Equal to `Message(...)` made per entry, at about half its cost
    (`_message`), which matters at 32 messages per request on the loop."""
    return [
        _message(
            topic, queue_id, body, properties, flag, sys_flag, born_host, None, born_timestamp_ms, reconsume_times, 0
        )
        for body, flag, properties in entries
    ]


def with_queue_id(message: Message, queue_id: int) -> Message:
    """`dataclasses.replace(message, queue_id=queue_id)` at a fifth of its cost: the broker's
    planning makes one for every message whose queue it chooses."""
    if type(message) is not Message:
        return replace(message, queue_id=queue_id)
    m = message
    return _message(
        m.topic,
        queue_id,
        m.body,
        m.properties,
        m.flag,
        m.sys_flag,
        m.born_host,
        m.store_host,
        m.born_timestamp_ms,
        m.reconsume_times,
        m.prepared_transaction_offset,
    )


def _message(
    topic: str,
    queue_id: int,
    body: bytes,
    properties: Mapping[str, str],
    flag: int,
    sys_flag: int,
    born_host: Host,
    store_host: Host | None,
    born_timestamp_ms: int | None,
    reconsume_times: int,
    prepared_transaction_offset: int,
) -> Message:
    """`Message(...)` with each slot set through its descriptor: a frozen dataclass's `__init__`
    looks up `object.__setattr__` per field, which costs twice as much."""
    msg = object.__new__(Message)
    set_topic, set_queue, set_body, set_properties, set_flag, set_sys_flag = _SETTERS[:6]
    set_born_host, set_store_host, set_born_ms, set_reconsume, set_prepared = _SETTERS[6:]
    set_topic(msg, topic)
    set_queue(msg, queue_id)
    set_body(msg, body)
    set_properties(msg, properties)
    set_flag(msg, flag)
    set_sys_flag(msg, sys_flag)
    set_born_host(msg, born_host)
    set_store_host(msg, store_host)
    set_born_ms(msg, born_timestamp_ms)
    set_reconsume(msg, reconsume_times)
    set_prepared(msg, prepared_transaction_offset)
    return msg


# Message's slot setters in its fields' order (`_message`).
_SETTERS = tuple(getattr(Message, f.name).__set__ for f in dataclass_fields(Message))


@dataclass(frozen=True, slots=True)
class MessageExt:
    """A message as stored in the CommitLog, every field decoded."""

    topic: str
    queue_id: int
    body: bytes
    properties: Mapping[str, str]
    flag: int
    sys_flag: int
    born_host: Host
    store_host: Host
    born_timestamp_ms: int
    store_timestamp_ms: int
    reconsume_times: int
    prepared_transaction_offset: int
    queue_offset: int
    physical_offset: int
    store_size: int
    body_crc: int
    msg_id: str

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self) -> str | None:
        return self.properties.get(PROPERTY_KEYS)

    def to_message(self, **changes: Any) -> Message:
        """This stored message as a `Message` to put again (a delayed delivery, a transaction's
        end), with `changes` applied; properties are copied, never shared. A born time out of the
        range the store accepts (a record from before it checked) is clamped into it, so the put
        is not refused every time it is tried."""
        fields: dict[str, Any] = {
            "topic": self.topic,
            "queue_id": self.queue_id,
            "body": self.body,
            "properties": dict(self.properties),
            "flag": self.flag,
            "sys_flag": self.sys_flag,
            "born_host": self.born_host,
            "store_host": self.store_host,
            "born_timestamp_ms": clamp_timestamp_ms(self.born_timestamp_ms),
            "reconsume_times": self.reconsume_times,
            "prepared_transaction_offset": self.prepared_transaction_offset,
        }
        fields.update(changes)
        return Message(**fields)


def parked(msg: Message, topic: str, queue_id: int, extra: Mapping[str, str]) -> Message:
    """`msg` stored in a system topic consumers do not read (a delay level's queue, transaction
    halves, timers) until it is due: REAL_TOPIC / REAL_QID name where it belongs, `extra` is added."""
    properties = dict(msg.properties)
    properties[PROPERTY_REAL_TOPIC] = msg.topic
    properties[PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
    properties.update(extra)
    return replace(msg, topic=topic, queue_id=queue_id, properties=properties)
