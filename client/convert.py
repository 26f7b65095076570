"""The client's Python shapes of wire objects and the conversions between them (sans-IO).

Owns: `SendStatus`, `SendResult`, `ProducerMessage`, `PullStatus`, `ReceivedMessage`,
`PullResult`, `QueueInfo`; message ids; request builders and answer readers for the
`apache.rocketmq.v2` messaging API, and plain dicts of admin messages. No network I/O or threads
here, and callers pass the born time (the id generator's clock is injectable); the sync and
asyncio clients are thin adapters over this module.

Wire facts used (see proto/wire/rpc/messaging.proto):
- A send carries `system_properties.message_id` (made here, 32 upper-case hex digits),
  `body_digest` (CRC32 as 8 upper-case hex digits), `send_queue_id` (1005) to ask for a queue.
- Each `SendResultEntry` answers one message, in order: OK -> SEND_OK; MASTER_PERSISTENCE_TIMEOUT,
  SLAVE_PERSISTENCE_TIMEOUT, HA_NOT_AVAILABLE -> the stored-but-not-guaranteed statuses; any
  other code is a refusal (FORBIDDEN + master_endpoint: `NotMasterError`).
- A pull answers a stream: one Status, then Messages, then next_offset. OK -> FOUND (or
  NO_MATCHED_MSG without messages), MESSAGE_NOT_FOUND -> NO_NEW_MSG, ILLEGAL_OFFSET ->
  OFFSET_ILLEGAL (retry from next_offset).

Message id layout (16 bytes, hex): 6 random bytes drawn once per process (a MAC stand-in that
stays distinct across containers cloned from one image), pid (u16), seconds since 2021-01-01
UTC (u32), a per-process counter (u32). Two ids of one process differ in the counter unless
2^32 ids are made within one second; processes differ in the random bytes and pid.

Thread-safety: the dataclasses are immutable; `MessageIdGenerator.next_id` takes a lock;
`PullAssembler` belongs to one call.
"""

from __future__ import annotations

import datetime as _dt
import enum
import itertools
import json
import os
import socket
import struct
import threading
import time
import types
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import Message as _ProtoMessage

from wire.digests import crc32_hex, digest_matches
from wire.rpc import messaging_pb2 as pb

from .errors import BrokerError, NotMasterError, PartialBatchError, ProtocolError

# A FORBIDDEN starting so is a not-master answer even without an endpoint (the broker's
# `codes.NOT_MASTER`; the client does not import the broker).
NOT_MASTER_PREFIX = "not master"

MAX_BATCH = 1024  # the broker refuses larger SendMessage and pull batches
DEFAULT_GROUP = "DEFAULT_CONSUMER"  # RocketMQ's default consumer group name
_MAX_MESSAGE_ID = 128
_PROPERTY_SEPARATORS = ("\x01", "\x02")  # the store's property encoding uses them


# -- statuses and results ----------------------------------------------------------------------


class SendStatus(enum.Enum):
    """RocketMQ's SendStatus: the message was stored; the name says which guarantee is missing."""

    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


SEND_STATUS_BY_CODE: Mapping[int, SendStatus] = types.MappingProxyType(
    {
        pb.OK: SendStatus.SEND_OK,
        pb.MASTER_PERSISTENCE_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
        pb.SLAVE_PERSISTENCE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
        pb.HA_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
    }
)


@dataclass(frozen=True, slots=True)
class SendResult:
    status: SendStatus
    msg_id: str
    topic: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    # The broker group that stored it ("" when no route the producer asked for named it).
    broker_name: str = ""

    @property
    def ok(self) -> bool:
        return self.status is SendStatus.SEND_OK


class PullStatus(enum.Enum):
    """RocketMQ's PullStatus."""

    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


@dataclass(frozen=True, slots=True)
class ReceivedMessage:
    topic: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int  # -1 when the broker did not say
    msg_id: str
    body: bytes
    tag: str | None
    keys: tuple[str, ...]
    properties: Mapping[str, str]  # the user's properties only
    born_timestamp_ms: int
    store_timestamp_ms: int  # -1 when the broker did not say
    born_host: str
    store_host: str
    reconsume_times: int
    # False only when the message carries a digest that does not match its body.
    body_crc_ok: bool

    @property
    def size(self) -> int:
        return len(self.body)


@dataclass(frozen=True, slots=True)
class PullResult:
    status: PullStatus
    messages: list[ReceivedMessage]
    next_offset: int


@dataclass(frozen=True, slots=True)
class QueueInfo:
    """One queue of a topic's route."""

    topic: str
    queue_id: int
    permission: str  # the v2 Permission name: READ, WRITE, READ_WRITE, NONE
    broker_name: str
    broker_id: int
    endpoint: str  # "host:port" of the broker serving it, "" when the route names none

    @property
    def readable(self) -> bool:
        return self.permission in ("READ", "READ_WRITE")

    @property
    def writable(self) -> bool:
        return self.permission in ("WRITE", "READ_WRITE")


# -- producer messages -------------------------------------------------------------------------


def _body_bytes(body: Any) -> bytes:
    if isinstance(body, str):
        data = body.encode("utf-8")
    elif isinstance(body, (bytes, bytearray, memoryview)):
        data = bytes(body)
    else:
        raise TypeError(f"a message body is bytes or str, not {type(body).__name__}")
    if not data:
        raise ValueError("a message body cannot be empty")
    return data


def _optional_text(name: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"{name} is a str, not {type(value).__name__}")
    if not value.strip():
        raise ValueError(f"{name} cannot be blank")
    return value


def _check_keys(keys: Any) -> tuple[str, ...]:
    items = (keys,) if isinstance(keys, str) else tuple(keys)
    for key in items:
        if not isinstance(key, str):
            raise TypeError(f"a message key is a str, not {type(key).__name__}")
        # The broker stores keys space-joined: a key with a space would come back as two.
        if not key or any(c.isspace() for c in key):
            raise ValueError(f"message key {key!r} must be non-empty and contain no whitespace")
    return items


def _check_properties(properties: Any) -> Mapping[str, str]:
    if properties is None:
        return types.MappingProxyType({})
    if not isinstance(properties, Mapping):
        raise TypeError(f"properties are a mapping of str to str, not {type(properties).__name__}")
    checked: dict[str, str] = {}
    for key, value in properties.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"property {key!r}: keys and values are str")
        if not key:
            raise ValueError("a property key cannot be empty")
        for sep in _PROPERTY_SEPARATORS:
            if sep in key or sep in value:
                raise ValueError(f"property {key!r} contains the control character {sep!r}")
        checked[key] = value
    return types.MappingProxyType(checked)


@dataclass(frozen=True, slots=True)
class ProducerMessage:
    """One message of a batch. `body` may be given as str (sent as UTF-8)."""

    body: bytes
    tag: str | None = None
    keys: tuple[str, ...] = ()
    properties: Mapping[str, str] = field(default_factory=lambda: types.MappingProxyType({}))
    message_group: str | None = None
    message_id: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "body", _body_bytes(self.body))
        tag = _optional_text("a tag", self.tag)
        if tag is not None and "|" in tag:
            raise ValueError(f"tag {tag!r} cannot contain '|' (it separates tags in filters)")
        object.__setattr__(self, "keys", _check_keys(self.keys))
        object.__setattr__(self, "properties", _check_properties(self.properties))
        _optional_text("a message group", self.message_group)
        message_id = _optional_text("a message id", self.message_id)
        if message_id is not None and (len(message_id) > _MAX_MESSAGE_ID or any(c.isspace() for c in message_id)):
            raise ValueError(
                f"message id {message_id[:40]!r} must be at most {_MAX_MESSAGE_ID} characters, without whitespace"
            )


# -- message ids -------------------------------------------------------------------------------

_ID_EPOCH_S = 1_609_459_200  # 2021-01-01T00:00:00Z


class MessageIdGenerator:
    """Unique message ids: see the module docstring for the layout."""

    def __init__(
        self,
        host_bytes: bytes | None = None,
        pid: int | None = None,
        clock_s: Callable[[], float] = time.time,
    ) -> None:
        host = os.urandom(6) if host_bytes is None else host_bytes
        if len(host) != 6:
            raise ValueError("host_bytes must be 6 bytes")
        self._prefix = host + struct.pack(">H", (os.getpid() if pid is None else pid) & 0xFFFF)
        self._clock = clock_s
        self._counter = itertools.count()
        self._lock = threading.Lock()

    def next_id(self) -> str:
        with self._lock:
            n = next(self._counter)
        seconds = (int(self._clock()) - _ID_EPOCH_S) & 0xFFFFFFFF
        return (self._prefix + struct.pack(">II", seconds, n & 0xFFFFFFFF)).hex().upper()


_generator = MessageIdGenerator()


def _reset_generator_after_fork() -> None:
    # A forked child would repeat its parent's ids (same random bytes, same counter).
    global _generator
    _generator = MessageIdGenerator()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_generator_after_fork)


def new_message_id() -> str:
    return _generator.next_id()


_born_host: str | None = None


def local_host_name() -> str:
    global _born_host
    if _born_host is None:
        _born_host = socket.gethostname() or "localhost"
    return _born_host


# -- sending -----------------------------------------------------------------------------------


def check_queue_id(queue_id: Any) -> int | None:
    if queue_id is None:
        return None
    if not isinstance(queue_id, int) or isinstance(queue_id, bool):
        raise TypeError(f"a queue id is an int, not {type(queue_id).__name__}")
    if not 0 <= queue_id < 2**31:
        raise ValueError(f"queue id {queue_id} is out of range")
    return queue_id


def check_name(kind: str, name: Any) -> str:
    # Full name rules are the broker's (it answers ILLEGAL_TOPIC / ILLEGAL_CONSUMER_GROUP).
    if not isinstance(name, str):
        raise TypeError(f"a {kind} name is a str, not {type(name).__name__}")
    if not name.strip():
        raise ValueError(f"the {kind} name is empty")
    return name


# Hex digits of a message id: the broker's (store host, port and CommitLog offset: 16 bytes for an
# IPv4 host, 28 for IPv6) or a producer's (16 bytes from this client and RocketMQ 4.x, a version
# byte and 16 from RocketMQ 5's clients).
MESSAGE_ID_HEX_DIGITS = (32, 34, 56)


def check_message_id(text: Any) -> str:
    """`text` if it has the shape of a message id (see MESSAGE_ID_HEX_DIGITS), else ValueError
    saying which shapes there are."""
    if not isinstance(text, str):
        raise TypeError(f"a message id is a str, not {type(text).__name__}")
    digits = text.strip()
    if len(digits) not in MESSAGE_ID_HEX_DIGITS or not all(c in "0123456789abcdefABCDEF" for c in digits):
        raise ValueError(
            f"{text!r} is not a message id: expected the broker's (32 hex digits, 56 for an IPv6 store host) "
            "or the producer's (32 hex digits, 34 from RocketMQ 5 clients)"
        )
    return digits


def _timestamp_ms(ts) -> int:
    return ts.seconds * 1000 + ts.nanos // 1_000_000


def _fill_message(
    target: pb.Message,
    topic: str,
    body: bytes,
    message: ProducerMessage | None,
    message_id: str,
    queue_id: int | None,
    born: tuple[int, int, str],
) -> None:
    # Field by field into the request's own sub-message: building each piece with keyword
    # constructors and copying it in costs several times more per message.
    target.topic.name = topic
    target.body = body
    sp = target.system_properties
    sp.message_id = message_id
    sp.body_digest.type = pb.CRC32
    sp.body_digest.checksum = crc32_hex(body)
    sp.body_encoding = pb.IDENTITY
    sp.born_timestamp.seconds, sp.born_timestamp.nanos, sp.born_host = born
    if queue_id is not None:
        sp.send_queue_id = queue_id
    if message is None:
        sp.message_type = pb.NORMAL
        return
    sp.message_type = pb.FIFO if message.message_group else pb.NORMAL
    if message.tag is not None:
        sp.tag = message.tag
    if message.keys:
        sp.keys.extend(message.keys)
    if message.message_group:
        sp.message_group = message.message_group
    if message.properties:
        target.user_properties.update(message.properties)


def build_send_request(
    topic: str,
    messages: Iterable[Any],
    *,
    queue_id: int | None,
    born_ms: int,
    born_host: str | None = None,
) -> tuple[pb.SendMessageRequest, list[str]]:
    """The request for `messages` (bytes, str or ProducerMessage) and the message ids it carries."""
    check_name("topic", topic)
    check_queue_id(queue_id)
    items = messages if isinstance(messages, (list, tuple)) else list(messages)
    if not items:
        raise ValueError("a batch needs at least one message")
    if len(items) > MAX_BATCH:
        raise ValueError(f"a batch holds at most {MAX_BATCH} messages, got {len(items)}")
    born = (born_ms // 1000, born_ms % 1000 * 1_000_000, born_host if born_host is not None else local_host_name())
    request = pb.SendMessageRequest()
    ids: list[str] = []
    add = request.messages.add
    for item in items:
        if isinstance(item, ProducerMessage):
            message, body = item, item.body
            message_id = item.message_id or new_message_id()
        else:
            message, body = None, _body_bytes(item)
            message_id = new_message_id()
        _fill_message(add(), topic, body, message, message_id, queue_id, born)
        ids.append(message_id)
    return request, ids


def code_name(code: int) -> str:
    try:
        return pb.Code.Name(code)
    except ValueError:
        return f"CODE_{code}"


def status_error(status: pb.Status) -> BrokerError:
    """The exception a non-OK broker status stands for."""
    if status.code == pb.FORBIDDEN and (status.master_endpoint or status.message.startswith(NOT_MASTER_PREFIX)):
        return NotMasterError(status.master_endpoint, status.message)
    return BrokerError(code_name(status.code), status.message)


def check_ok(status: pb.Status) -> None:
    if status.code != pb.OK:
        raise status_error(status)


def send_results(topic: str, response: pb.SendMessageResponse, message_ids: list[str]) -> list[SendResult]:
    """One SendResult per message sent, or the refusal (see PartialBatchError for mixed batches)."""
    entries = response.entries
    if not entries:
        if response.status.code in SEND_STATUS_BY_CODE:
            raise ProtocolError(f"the broker answered {code_name(response.status.code)} without a result per message")
        raise status_error(response.status)
    if len(entries) != len(message_ids):
        raise ProtocolError(f"the broker answered {len(entries)} results for {len(message_ids)} messages")
    outcomes: list[SendResult | BrokerError] = []
    for entry, message_id in zip(entries, message_ids):
        status = SEND_STATUS_BY_CODE.get(entry.status.code)
        if status is None:
            outcomes.append(status_error(entry.status))
            continue
        outcomes.append(
            SendResult(
                status=status,
                msg_id=entry.message_id or message_id,
                topic=topic,
                queue_id=entry.queue_id,
                queue_offset=entry.offset,
                commit_log_offset=entry.commit_log_offset,
            )
        )
    errors = [o for o in outcomes if isinstance(o, BrokerError)]
    if not errors:
        return outcomes  # type: ignore[return-value]
    if len(errors) == len(outcomes):
        raise errors[0]
    raise PartialBatchError(outcomes, errors[0])


# -- routes and offsets ------------------------------------------------------------------------


def message_queue(topic: str, queue_id: int) -> pb.MessageQueue:
    check_name("topic", topic)
    if check_queue_id(queue_id) is None:
        raise TypeError("a queue id is required")
    return pb.MessageQueue(topic=pb.Resource(name=topic), id=queue_id)


def _endpoint_text(endpoints: pb.Endpoints) -> str:
    if not endpoints.addresses:
        return ""
    address = endpoints.addresses[0]
    if endpoints.scheme == pb.IPv6 or ":" in address.host:
        return f"[{address.host}]:{address.port}"
    return f"{address.host}:{address.port}"


def queues_from_route(topic: str, response: pb.QueryRouteResponse) -> list[QueueInfo]:
    check_ok(response.status)
    queues = [
        QueueInfo(
            topic=q.topic.name or topic,
            queue_id=q.id,
            permission=pb.Permission.Name(q.permission) if q.permission in pb.Permission.values() else "NONE",
            broker_name=q.broker.name,
            broker_id=q.broker.id,
            endpoint=_endpoint_text(q.broker.endpoints),
        )
        for q in response.message_queues
    ]
    return sorted(queues, key=lambda q: (q.queue_id, q.broker_id))


def home_group(route: Iterable[QueueInfo], endpoint: str) -> str | None:
    """The group the broker at `endpoint` belongs to: the one whose route entries name that
    endpoint, else the route's only group; None when the route cannot tell."""
    route = list(route)
    named = {q.broker_name for q in route if q.endpoint == endpoint}
    if len(named) == 1:
        return named.pop()
    groups = {q.broker_name for q in route}
    return groups.pop() if len(groups) == 1 else None


def readable_queue_ids(queues: Iterable[QueueInfo]) -> list[int]:
    return sorted({q.queue_id for q in queues if q.readable})


def committed_offset(response: pb.GetOffsetResponse) -> int | None:
    """A group's committed offset; None when it has none."""
    if response.status.code == pb.OFFSET_NOT_FOUND:
        return None
    check_ok(response.status)
    return response.offset


def build_query_offset(topic: str, queue_id: int, policy: Any) -> pb.QueryOffsetRequest:
    """`policy`: "BEGINNING", "END", a time in ms since the epoch, or an aware datetime."""
    request = pb.QueryOffsetRequest(message_queue=message_queue(topic, queue_id))
    if isinstance(policy, str):
        name = policy.strip().upper()
        if name not in ("BEGINNING", "END"):
            raise ValueError(f"offset policy {policy!r}: expected BEGINNING, END or a timestamp")
        request.query_offset_policy = pb.BEGINNING if name == "BEGINNING" else pb.END
        return request
    if isinstance(policy, _dt.datetime):
        if policy.tzinfo is None:
            raise ValueError("a datetime offset policy needs a time zone")
        ms = int(policy.timestamp() * 1000)
    elif isinstance(policy, int) and not isinstance(policy, bool):
        ms = policy
    else:
        raise TypeError(
            f"offset policy is BEGINNING, END, ms since the epoch or a datetime; not {type(policy).__name__}"
        )
    if ms < 0:
        raise ValueError(f"a timestamp cannot be negative: {ms}")
    request.query_offset_policy = pb.TIMESTAMP
    request.timestamp.FromMilliseconds(ms)
    return request


# -- pulling -----------------------------------------------------------------------------------


def build_pull_request(
    group: str,
    topic: str,
    queue_id: int,
    offset: int,
    *,
    max_messages: int,
    tag_filter: str | None,
    long_polling_ms: int,
) -> pb.PullMessageRequest:
    check_name("group", group)
    for name, value, low in (
        ("offset", offset, 0),
        ("max_messages", max_messages, 1),
        ("long_polling_ms", long_polling_ms, 0),
    ):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{name} is an int, not {type(value).__name__}")
        if value < low:
            raise ValueError(f"{name} must be at least {low}, got {value}")
    if max_messages > MAX_BATCH:
        raise ValueError(f"max_messages is at most {MAX_BATCH}, got {max_messages}")
    request = pb.PullMessageRequest(
        group=pb.Resource(name=group),
        message_queue=message_queue(topic, queue_id),
        offset=offset,
        batch_size=max_messages,
    )
    if tag_filter is not None:
        if not isinstance(tag_filter, str):
            raise TypeError(f"a tag filter is a str such as 'TagA||TagB', not {type(tag_filter).__name__}")
        request.filter_expression.CopyFrom(pb.FilterExpression(type=pb.TAG, expression=tag_filter))
    request.long_polling_timeout.FromMilliseconds(long_polling_ms)
    return request


def received_message(message: pb.Message) -> ReceivedMessage:
    sp = message.system_properties
    body = message.body
    ok = digest_matches(sp.body_digest, body) if sp.HasField("body_digest") else True
    if sp.body_encoding == pb.GZIP and ok:
        try:
            body = zlib.decompress(body, wbits=47)  # 32 + 15: a gzip or a zlib header
        except zlib.error:
            ok = False
    if sp.HasField("reconsume_times"):
        reconsume = sp.reconsume_times
    elif sp.HasField("delivery_attempt"):
        reconsume = max(sp.delivery_attempt - 1, 0)
    else:
        reconsume = 0
    return ReceivedMessage(
        topic=message.topic.name,
        queue_id=sp.queue_id,
        queue_offset=sp.queue_offset,
        commit_log_offset=sp.commit_log_offset if sp.HasField("commit_log_offset") else -1,
        msg_id=sp.message_id,
        body=body,
        tag=sp.tag if sp.HasField("tag") else None,
        keys=tuple(sp.keys),
        properties=types.MappingProxyType(dict(message.user_properties)),
        born_timestamp_ms=_timestamp_ms(sp.born_timestamp),
        store_timestamp_ms=_timestamp_ms(sp.store_timestamp) if sp.HasField("store_timestamp") else -1,
        born_host=sp.born_host,
        store_host=sp.store_host,
        reconsume_times=reconsume,
        body_crc_ok=ok,
    )


class PullAssembler:
    """Reads one PullMessage answer stream: feed each response, then take `result()`."""

    def __init__(self, request_offset: int) -> None:
        self._request_offset = request_offset
        self._status: pb.Status | None = None
        self._messages: list[ReceivedMessage] = []
        self._next_offset: int | None = None

    def feed(self, response: pb.PullMessageResponse) -> None:
        kind = response.WhichOneof("content")
        if kind == "status":
            if self._status is not None:
                raise ProtocolError("the pull stream carried a second status")
            self._status = response.status
        elif kind == "message":
            if self._status is None or self._next_offset is not None:
                raise ProtocolError("the pull stream carried a message outside status ... next_offset")
            self._messages.append(received_message(response.message))
        elif kind == "next_offset":
            if self._status is None:
                raise ProtocolError("the pull stream carried next_offset before its status")
            self._next_offset = response.next_offset

    def result(self) -> PullResult:
        if self._status is None:
            raise ProtocolError("the pull stream ended without a status")
        code = self._status.code
        if code == pb.OK:
            status = PullStatus.FOUND if self._messages else PullStatus.NO_MATCHED_MSG
        elif code == pb.MESSAGE_NOT_FOUND:
            status = PullStatus.NO_NEW_MSG
        elif code == pb.ILLEGAL_OFFSET:
            status = PullStatus.OFFSET_ILLEGAL
        else:
            raise status_error(self._status)
        if self._next_offset is not None:
            next_offset = self._next_offset
        elif self._messages:
            next_offset = self._messages[-1].queue_offset + 1
        else:
            next_offset = self._request_offset
        return PullResult(status, self._messages, next_offset)


# -- admin messages as dicts -------------------------------------------------------------------


def proto_to_dict(message: _ProtoMessage) -> dict[str, Any]:
    """Every field of `message` under its proto name (defaults included); enums by name."""
    out: dict[str, Any] = {}
    for fd in message.DESCRIPTOR.fields:
        value = getattr(message, fd.name)
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            out[fd.name] = {k: proto_to_dict(v) if isinstance(v, _ProtoMessage) else v for k, v in value.items()}
        elif fd.is_repeated:
            out[fd.name] = [_scalar_or_dict(fd, v) for v in value]
        elif fd.message_type is not None:
            out[fd.name] = proto_to_dict(value) if message.HasField(fd.name) else None
        else:
            out[fd.name] = _scalar_or_dict(fd, value)
    return out


def _scalar_or_dict(fd, value: Any) -> Any:
    if isinstance(value, _ProtoMessage):
        return proto_to_dict(value)
    if fd.enum_type is not None:
        known = fd.enum_type.values_by_number.get(value)
        return known.name if known is not None else value
    return value


def broker_status_dict(status: _ProtoMessage) -> dict[str, Any]:
    """A BrokerStatus as a dict, with `stats_json` parsed into `stats` (None when unreadable)."""
    out = proto_to_dict(status)
    text = out.pop("stats_json", "")
    try:
        stats = json.loads(text) if text else None
    except ValueError:
        stats = None
    out["stats"] = stats
    return out
