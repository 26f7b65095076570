"""RocketMQ's CommitLog message format: encode, decode, validate, msgId.

Layout of one message, big-endian (docs/design.md §3)::

    0   TOTALSIZE            i32
    4   MAGICCODE            i32   -626843481 (message) / -875286124 (blank end of segment)
    8   BODYCRC              i32   zlib CRC-32 of the body & 0x7FFFFFFF
    12  QUEUEID              i32
    16  FLAG                 i32
    20  QUEUEOFFSET          i64
    28  PHYSICALOFFSET       i64
    36  SYSFLAG              i32
    40  BORNTIMESTAMP        i64
    48  BORNHOST             4+4 (IPv4) or 16+4 (IPv6, SYSFLAG bit 4)
    ..  STORETIMESTAMP       i64
    ..  STOREHOSTADDRESS     4+4 or 16+4 (SYSFLAG bit 5)
    ..  RECONSUMETIMES       i32
    ..  PREPARED TX OFFSET   i64
    ..  BODY                 i32 length + bytes
    ..  TOPIC                u8 length + bytes
    ..  PROPERTIES           i16 length + bytes (`key\\x01value\\x02` ...)

A blank end of segment is TOTALSIZE = bytes left in the segment, MAGICCODE blank, nothing else.

The put path encodes a message completely outside the store lock, with zeros where the queue offset,
the physical offset and the store timestamp go; under the lock `EncodedMessage.stamp` fills those
three in place. A front end's batch (its messages sharing topic, queue, flags and hosts) is encoded
once per batch where it can be (`encode_batch`: the shared fields checked and encoded once, the
properties of all its messages checked together), into the bytes its messages encode to one by
one. Functions here are pure; caches are dicts filled idempotently, so the module is thread-safe
under the GIL.
"""

from __future__ import annotations

import re
import socket
import struct
import zlib
from collections.abc import Iterable, Mapping, Sequence
from operator import attrgetter
from typing import NamedTuple
from zlib import crc32

from ..message import (
    BORNHOST_V6_FLAG,
    MAX_BORN_TIMESTAMP_MS,
    MIN_BORN_TIMESTAMP_MS,
    PROPERTY_DELAY_TIME_LEVEL,
    STOREHOST_V6_FLAG,
    TRANSACTION_TYPE_MASK,
    Host,
    Message,
    MessageExt,
)
from ..status import PutMessageStatus

MESSAGE_MAGIC_CODE = -626843481
BLANK_MAGIC_CODE = -875286124
END_FILE_MIN_BLANK_LENGTH = 8
MAX_TOPIC_LENGTH = 127
MAX_PROPERTIES_LENGTH = 32767
NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"

QUEUE_OFFSET_POS = 20
PHYSICAL_OFFSET_POS = 28
SYS_FLAG_POS = 36
BORN_HOST_POS = 48

_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
# RocketMQ's character set for topic and group names (TopicValidator).
NAME_PATTERN = re.compile(r"[%|a-zA-Z0-9_-]+")

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I16 = struct.Struct(">h")
_U8 = struct.Struct(">B")
_TWO_I64 = struct.Struct(">qq")
_SIZE_MAGIC = struct.Struct(">ii")


class MessageRejected(Exception):
    """Bad input: the message cannot be stored. Carries the status a put answers with."""

    def __init__(self, status: PutMessageStatus, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class CorruptMessage(Exception):
    """Bytes at an offset are not a valid message."""

    def __init__(self, offset: int, reason: str) -> None:
        super().__init__(f"corrupt message at offset {offset}: {reason}")
        self.offset = offset
        self.reason = reason


class DamagedMessage(CorruptMessage):
    """A whole message in its place (its PHYSICALOFFSET names its position, its sizes add up)
    whose body fails its BODYCRC: bytes changed at rest, not a wrong offset nor a torn append.
    Carries where the message belongs, so that whoever meets it can say which one it is."""

    def __init__(self, offset: int, reason: str, topic: str, queue_id: int, queue_offset: int) -> None:
        super().__init__(offset, reason)
        self.topic = topic
        self.queue_id = queue_id
        self.queue_offset = queue_offset


# ---------------------------------------------------------------------------------------------
# Hosts and msgId


_host_cache: dict[Host, bytes] = {}


def encode_host(host: Host) -> bytes:
    """Address bytes (4 or 16) followed by the port as i32."""
    if type(host) is not tuple or len(host) != 2:
        raise MessageRejected(PutMessageStatus.MESSAGE_ILLEGAL, f"host must be an (ip, port) tuple, got {host!r}")
    try:
        cached = _host_cache.get(host)
    except TypeError:
        raise MessageRejected(PutMessageStatus.MESSAGE_ILLEGAL, f"host must be (str, int), got {host!r}") from None
    if cached is not None:
        return cached
    ip, port = host
    if not isinstance(port, int) or not 0 <= port <= 65535:
        raise MessageRejected(PutMessageStatus.MESSAGE_ILLEGAL, f"bad port in host {host!r}")
    try:
        packed = socket.inet_pton(socket.AF_INET, ip)
    except (OSError, TypeError):
        try:
            packed = socket.inet_pton(socket.AF_INET6, ip)
        except (OSError, TypeError):
            raise MessageRejected(PutMessageStatus.MESSAGE_ILLEGAL, f"bad IP address in host {host!r}") from None
    encoded = packed + _I32.pack(port)
    if len(_host_cache) < 4096:
        _host_cache[host] = encoded
    return encoded


def decode_host(raw: bytes | memoryview) -> Host:
    family = socket.AF_INET if len(raw) == 8 else socket.AF_INET6
    return socket.inet_ntop(family, bytes(raw[:-4])), _I32.unpack_from(raw, len(raw) - 4)[0]


def msg_id_from(store_host_bytes: bytes, physical_offset: int) -> str:
    return (store_host_bytes + _I64.pack(physical_offset)).hex().upper()


def msg_ids_from(store_host_bytes: bytes, physical_offsets: Iterable[int]) -> list[str]:
    """`msg_id_from` for offsets of one host, its hex made once: an offset (0..2**63-1) in 16
    upper-case hex digits is its i64's hex."""
    host = store_host_bytes.hex().upper()
    return [f"{host}{offset:016X}" for offset in physical_offsets]


def make_msg_id(store_host: Host, physical_offset: int) -> str:
    """RocketMQ's msgId: hex of store IP, store port (i32) and physical offset (i64), upper case."""
    return msg_id_from(encode_host(store_host), physical_offset)


def decode_msg_id(msg_id: str) -> tuple[Host, int]:
    """The store host and physical offset a msgId names; ValueError when it is not one."""
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError:
        raise ValueError(f"msgId {msg_id!r} is not hex") from None
    if len(raw) not in (16, 28):
        raise ValueError(f"msgId {msg_id!r} has {len(raw)} bytes; expected 16 (IPv4) or 28 (IPv6)")
    return decode_host(raw[:-8]), _I64.unpack_from(raw, len(raw) - 8)[0]


# ---------------------------------------------------------------------------------------------
# Properties and tags


def encode_properties(properties: Mapping[str, str]) -> bytes:
    if not properties:
        return b""
    parts = []
    for key, value in properties.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise MessageRejected(PutMessageStatus.MESSAGE_ILLEGAL, f"property {key!r}: keys and values must be str")
        if not key:
            raise MessageRejected(PutMessageStatus.MESSAGE_ILLEGAL, "property with an empty key")
        for text in (key, value):
            if NAME_VALUE_SEPARATOR in text or PROPERTY_SEPARATOR in text:
                raise MessageRejected(
                    PutMessageStatus.MESSAGE_ILLEGAL,
                    f"property {key!r} contains a separator character (\\x01 or \\x02)",
                )
        parts.append(f"{key}\x01{value}\x02")
    return "".join(parts).encode("utf-8")


def decode_properties(raw: bytes | memoryview) -> dict[str, str]:
    if not raw:
        return {}
    text = bytes(raw).decode("utf-8")
    properties = {}
    for pair in text.split(PROPERTY_SEPARATOR):
        if not pair:
            continue
        key, sep, value = pair.partition(NAME_VALUE_SEPARATOR)
        if not sep:
            raise ValueError(f"property {pair!r} has no name/value separator")
        properties[key] = value
    return properties


# Java's String.hashCode is the polynomial sum(unit[i] * 31**(n-1-i)) mod 2**32 over the UTF-16 code
# units. Python loops over characters at ~35 ns each; int(digits, 31) evaluates a polynomial at 31 in
# C, so each unit (byte) is split into two base-31 digits (unit = 31 * high + low, high <= 8) by two
# translate tables and the value is 31 * int(highs, 31) + int(lows, 31). Chunks stay below the
# smallest limit Python may set on the digits int() parses (640, sys.set_int_max_str_digits).
_BASE31_DIGITS = b"0123456789abcdefghijklmnopqrstu"
_HIGH_DIGIT = bytes(_BASE31_DIGITS[b // 31] for b in range(256))
_LOW_DIGIT = bytes(_BASE31_DIGITS[b % 31] for b in range(256))
_HASH_CHUNK = 512
_SHORT_TEXT = 12
_POWERS_OF_31 = [pow(31, n, 1 << 32) for n in range(_HASH_CHUNK + 1)]


def _base31_value(units: bytes) -> int:
    """sum(units[i] * 31**(len - 1 - i)) for non-empty bytes of at most _HASH_CHUNK, unreduced."""
    return 31 * int(units.translate(_HIGH_DIGIT), 31) + int(units.translate(_LOW_DIGIT), 31)


def java_string_hash(text: str, start: int = 0) -> int:
    """Java's String.hashCode over UTF-16 code units, as a signed 32-bit int. With `start`, the
    hash of a string that begins with one whose hash is `start` and goes on with `text`. Lone
    surrogates count as the code units they are, as in Java."""
    try:
        low = text.encode("latin-1")  # code points below 256 are their own UTF-16 code units
    except UnicodeEncodeError:
        data = text.encode("utf-16-be", "surrogatepass")
        high, low = data[0::2], data[1::2]
    else:
        if len(low) <= _SHORT_TEXT:  # Horner's rule: two int() parses cost more than a short loop
            h = start
            for unit in low:
                h = h * 31 + unit  # reduced once at the end: arithmetic mod 2**32 commutes with it
            h &= 0xFFFFFFFF
            return h - (1 << 32) if h & 0x80000000 else h
        if len(low) <= _HASH_CHUNK:  # the common case, without the chunk loop
            h = (start * _POWERS_OF_31[len(low)] + _base31_value(low)) & 0xFFFFFFFF
            return h - (1 << 32) if h & 0x80000000 else h
        high = b""
    h = start
    for i in range(0, len(low), _HASH_CHUNK):
        part = low[i : i + _HASH_CHUNK]
        h = h * _POWERS_OF_31[len(part)] + _base31_value(part)
        if high:
            h += _base31_value(high[i : i + _HASH_CHUNK]) << 8  # unit = 256 * high byte + low byte
        h &= 0xFFFFFFFF
    h &= 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def body_crc(body: bytes | memoryview) -> int:
    return zlib.crc32(body) & 0x7FFFFFFF


# ---------------------------------------------------------------------------------------------
# Encoding


# Valid topic names and their encoded TOPIC field, keyed by what producers send, so bounded: a
# flood of new names (refused later, by topic admission) once filled 65,536 entries, 23 MiB held for
# good, and no later topic was cached. Full, it starts over: the topics in use return at their next put.
TOPIC_CACHE_MAX = 4096
_valid_topics: dict[str, bytes] = {}


def _topic_suffix(topic: object) -> bytes:
    """The TOPIC field (u8 length + bytes) of a valid topic; MessageRejected otherwise."""
    if type(topic) is not str or not topic:
        raise MessageRejected(PutMessageStatus.MESSAGE_ILLEGAL, "topic must be a non-empty str")
    cached = _valid_topics.get(topic)
    if cached is not None:
        return cached
    encoded = topic.encode("utf-8")
    if len(encoded) > MAX_TOPIC_LENGTH:
        raise MessageRejected(
            PutMessageStatus.MESSAGE_ILLEGAL,
            f"topic is {len(encoded)} bytes long; the limit is {MAX_TOPIC_LENGTH}",
        )
    if not NAME_PATTERN.fullmatch(topic):
        raise MessageRejected(
            PutMessageStatus.MESSAGE_ILLEGAL, f"topic {topic!r} has characters outside [%|a-zA-Z0-9_-]"
        )
    suffix = _U8.pack(len(encoded)) + encoded
    if len(_valid_topics) >= TOPIC_CACHE_MAX:
        _valid_topics.clear()
    _valid_topics[topic] = suffix
    return suffix


_INT_FIELDS = (
    ("queue_id", 0, _INT32_MAX),
    ("flag", _INT32_MIN, _INT32_MAX),
    ("sys_flag", _INT32_MIN, _INT32_MAX),
    ("reconsume_times", _INT32_MIN, _INT32_MAX),
    ("prepared_transaction_offset", -(1 << 63), (1 << 63) - 1),
    ("born_timestamp_ms", MIN_BORN_TIMESTAMP_MS, MAX_BORN_TIMESTAMP_MS),
)


def _explain_bad_ints(msg: Message) -> MessageRejected:
    for name, low, high in _INT_FIELDS:
        value = getattr(msg, name)
        if name == "born_timestamp_ms" and value is None:
            continue
        if not isinstance(value, int) or not low <= value <= high:
            return MessageRejected(
                PutMessageStatus.MESSAGE_ILLEGAL, f"{name} must be an int in [{low}, {high}], got {value!r}"
            )
    return MessageRejected(PutMessageStatus.MESSAGE_ILLEGAL, "a numeric field is out of range")


# Everything from TOTALSIZE to the body length, per (born host, store host) address length.
_FIXED = {(born, store): struct.Struct(f">iiiiiqqiq{born}sq{store}siqi") for born in (8, 20) for store in (8, 20)}
_EMPTY_PROPERTIES = _I16.pack(0)


def record_size(topic: str, body_len: int, properties_len: int, *, ipv6_hosts: bool = True) -> int:
    """The TOTALSIZE a message encodes to: the fixed fields (with IPv6 host addresses unless told
    otherwise, the larger of the two), the body, the topic (u8 length and UTF-8) and the
    properties (i16 length and bytes, `properties_len` of them: `len(encode_properties(...))`)."""
    host = 20 if ipv6_hosts else 8
    return _FIXED[host, host].size + body_len + 1 + len(topic.encode("utf-8")) + 2 + properties_len


class EncodedMessage:
    """One message (or a batch) fully encoded, waiting for its offsets and store time.

    `buf` holds the messages back to back; `starts[i]` is where message i begins and
    `store_ts_pos[i]` where its store timestamp goes. All messages share `queue_key`.
    """

    __slots__ = ("buf", "starts", "store_ts_pos", "queue_key", "transaction_type", "store_host_bytes", "size")

    def __init__(
        self,
        buf: bytearray,
        starts: list[int],
        store_ts_pos: list[int],
        queue_key: str,
        transaction_type: int,
        store_host_bytes: bytes,
    ) -> None:
        self.buf = buf
        self.starts = starts
        self.store_ts_pos = store_ts_pos
        self.queue_key = queue_key
        self.transaction_type = transaction_type
        self.store_host_bytes = store_host_bytes
        self.size = len(buf)

    @property
    def count(self) -> int:
        return len(self.starts)

    def stamp(self, physical_offset: int, queue_offset: int, store_timestamp_ms: int) -> None:
        """Fill in offsets and store time; message i gets queue_offset + i."""
        buf = self.buf
        if len(self.starts) == 1:
            _TWO_I64.pack_into(buf, QUEUE_OFFSET_POS, queue_offset, physical_offset)
            _I64.pack_into(buf, self.store_ts_pos[0], store_timestamp_ms)
            return
        for i, start in enumerate(self.starts):
            _TWO_I64.pack_into(buf, start + QUEUE_OFFSET_POS, queue_offset + i, physical_offset + start)
            _I64.pack_into(buf, self.store_ts_pos[i], store_timestamp_ms)

    def msg_ids(self, physical_offset: int) -> list[str]:
        return msg_ids_from(self.store_host_bytes, [physical_offset + start for start in self.starts])


def _encode_one(msg: Message, store_host_bytes: bytes, now_ms: int) -> tuple[bytes, int]:
    """One message's bytes and the position of its store timestamp within them."""
    if not isinstance(msg, Message):
        raise MessageRejected(PutMessageStatus.MESSAGE_ILLEGAL, f"expected a Message, got {type(msg).__name__}")
    topic_suffix = _topic_suffix(msg.topic)
    born_host_bytes = encode_host(msg.born_host)
    head, body, props_field, _total, ts_pos = _record_parts(
        msg, topic_suffix, born_host_bytes, store_host_bytes, now_ms
    )
    return b"".join((head, body, topic_suffix, props_field)), ts_pos


def _with_host_flags(sys_flag: int, born_len: int, store_len: int) -> int:
    """SYSFLAG with its host address kinds set from the encoded hosts' lengths (8 or 20)."""
    sys_flag &= ~(BORNHOST_V6_FLAG | STOREHOST_V6_FLAG)
    if born_len == 20:
        sys_flag |= BORNHOST_V6_FLAG
    if store_len == 20:
        sys_flag |= STOREHOST_V6_FLAG
    return sys_flag


def _record_parts(
    msg: Message, topic_suffix: bytes, born_host_bytes: bytes, store_host_bytes: bytes, now_ms: int
) -> tuple[bytes, bytes, bytes, int, int]:
    """A message's record in the pieces that follow each other (the fixed fields, the body, then
    `topic_suffix` and the properties field), its TOTALSIZE and where its store timestamp goes:
    a batch joins all its records' pieces at once instead of each record's first."""
    body = msg.body
    if not isinstance(body, (bytes, bytearray)):
        raise MessageRejected(PutMessageStatus.MESSAGE_ILLEGAL, "body must be bytes")
    if msg.properties:
        props = encode_properties(msg.properties)
        if len(props) > MAX_PROPERTIES_LENGTH:
            raise MessageRejected(
                PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
                f"properties are {len(props)} bytes long; the limit is {MAX_PROPERTIES_LENGTH}",
            )
        props_field = _I16.pack(len(props)) + props
    else:
        props_field = _EMPTY_PROPERTIES
    born_len = len(born_host_bytes)
    store_len = len(store_host_bytes)
    sys_flag = msg.sys_flag
    if type(sys_flag) is int:
        sys_flag = _with_host_flags(sys_flag, born_len, store_len)
    fixed = _FIXED[born_len, store_len]
    total = fixed.size + len(body) + len(topic_suffix) + len(props_field)
    born_ts = now_ms if msg.born_timestamp_ms is None else msg.born_timestamp_ms
    if msg.queue_id < 0 if type(msg.queue_id) is int else True:
        raise _explain_bad_ints(msg)
    if type(born_ts) is int and not MIN_BORN_TIMESTAMP_MS <= born_ts <= MAX_BORN_TIMESTAMP_MS:
        raise MessageRejected(
            PutMessageStatus.MESSAGE_ILLEGAL,
            f"born timestamp {born_ts} ms is not a time of the years 1 to 9999 "
            f"([{MIN_BORN_TIMESTAMP_MS}, {MAX_BORN_TIMESTAMP_MS}] ms since the epoch)",
        )
    try:
        head = fixed.pack(
            total,
            MESSAGE_MAGIC_CODE,
            zlib.crc32(body) & 0x7FFFFFFF,
            msg.queue_id,
            msg.flag,
            0,
            0,
            sys_flag,
            born_ts,
            born_host_bytes,
            0,
            store_host_bytes,
            msg.reconsume_times,
            msg.prepared_transaction_offset,
            len(body),
        )
    except struct.error:
        raise _explain_bad_ints(msg) from None
    return head, body, props_field, total, 48 + born_len


def encode_message(msg: Message, *, default_store_host: Host, max_message_size: int, now_ms: int) -> EncodedMessage:
    """Encode one message; raises MessageRejected with RocketMQ's status for bad input."""
    if not isinstance(msg, Message):
        raise MessageRejected(PutMessageStatus.MESSAGE_ILLEGAL, f"expected a Message, got {type(msg).__name__}")
    store_host_bytes = encode_host(msg.store_host or default_store_host)
    data, ts_pos = _encode_one(msg, store_host_bytes, now_ms)
    if len(data) > max_message_size:
        raise MessageRejected(
            PutMessageStatus.MESSAGE_ILLEGAL,
            f"message is {len(data)} bytes encoded; the limit (maxMessageSize, within a segment) is {max_message_size}",
        )
    return EncodedMessage(
        bytearray(data),
        [0],
        [ts_pos],
        f"{msg.topic}-{msg.queue_id}",
        msg.sys_flag & TRANSACTION_TYPE_MASK,
        store_host_bytes,
    )


_NO_HOST = object()  # no born host encoded yet (None is a host, a bad one)


def encode_batch(
    batch: Sequence[Message], *, default_store_host: Host, max_message_size: int, now_ms: int
) -> EncodedMessage:
    """Encode a batch bound for one topic and queue; the batch as a whole may not exceed
    `max_message_size`. Delayed and transactional messages cannot be batched.

    A front end's batch (its messages sharing their topic, queue, flags and hosts as the same
    objects, plain `bytes` bodies, properties that need no refusal) is encoded by
    `_encode_uniform_batch`, which does per batch what can be done once; any other batch, and any
    batch that path declines, message by message (`_encode_batch_checked`), which refuses what
    must be refused with its reason. Both write the same bytes (tests/unit/test_codec.py)."""
    if not batch:
        raise MessageRejected(PutMessageStatus.MESSAGE_ILLEGAL, "empty batch")
    first = batch[0]
    if not isinstance(first, Message):
        raise MessageRejected(PutMessageStatus.MESSAGE_ILLEGAL, f"expected a Message, got {type(first).__name__}")
    store_host_bytes = encode_host(first.store_host or default_store_host)
    topic_suffix = _topic_suffix(first.topic)
    encoded = _encode_uniform_batch(batch, topic_suffix, store_host_bytes, max_message_size, now_ms)
    if encoded is not None:
        return encoded
    return _encode_batch_checked(batch, topic_suffix, store_host_bytes, default_store_host, max_message_size, now_ms)


# The fields every message of a uniform batch holds as the same object as its first message's.
_SHARED_FIELDS = attrgetter(
    "topic", "queue_id", "sys_flag", "born_host", "store_host", "reconsume_times", "prepared_transaction_offset"
)
_ONLY_MESSAGES = {Message}
_PROPERTIES = attrgetter("properties")
_PAIR = NAME_VALUE_SEPARATOR.join
_PAIRS = PROPERTY_SEPARATOR.join
# The TOPIC field followed by the properties' i16 length, per TOPIC field length.
_TOPIC_AND_PROPERTIES_LENGTH = {n: struct.Struct(f">{n}sh") for n in range(2, MAX_TOPIC_LENGTH + 2)}


def _uniform_properties(batch: Sequence[Message]) -> list[bytes] | None:
    """Each message's properties encoded (without their length), checked for the whole batch at
    once: each pair joined holds exactly one name/value separator and each message's pairs are
    joined by exactly one property separator, so counting both separators over the batch's joined
    text finds any key or value holding one. None when a message needs `encode_properties`' own
    checks (a key or value not text, an empty key, a separator inside one, a DELAY key)."""
    properties = list(map(_PROPERTIES, batch))
    try:
        texts = [_PAIRS(map(_PAIR, p.items())) if p else "" for p in properties]
        pairs = sum(map(len, filter(None, properties)))
    except (TypeError, AttributeError):
        return None
    whole = PROPERTY_SEPARATOR.join(texts)
    with_pairs = len(texts) - texts.count("")
    if (
        whole.count(NAME_VALUE_SEPARATOR) != pairs
        or whole.count(PROPERTY_SEPARATOR) != pairs - with_pairs + len(texts) - 1
        or whole.startswith(NAME_VALUE_SEPARATOR)
        or "\x02\x01" in whole
        or PROPERTY_DELAY_TIME_LEVEL + NAME_VALUE_SEPARATOR in whole
    ):
        return None
    try:
        return [(text + PROPERTY_SEPARATOR).encode("utf-8") if text else b"" for text in texts]
    except UnicodeEncodeError:  # a lone surrogate: the checked path meets it in its turn
        return None


def _encode_uniform_batch(
    batch: Sequence[Message], topic_suffix: bytes, store_host_bytes: bytes, max_message_size: int, now_ms: int
) -> EncodedMessage | None:
    """`encode_batch` for a front end's batch, or None when the batch is not one (then
    `_encode_batch_checked` encodes it, or refuses it with its reason). The topic, queue, flags
    and hosts are checked and encoded once; per message only its body's CRC, its properties
    (`_uniform_properties`), its flag and born time vary."""
    first = batch[0]
    if {*map(type, batch)} != _ONLY_MESSAGES:
        return None  # something else than a `Message`: refused by the checked path
    shared = _SHARED_FIELDS(first)
    topic, queue_id, raw_sys_flag, born_host, store_host, reconsume_times, prepared = shared
    if (
        type(queue_id) is not int
        or queue_id < 0
        or type(raw_sys_flag) is not int
        or raw_sys_flag & TRANSACTION_TYPE_MASK
        or type(reconsume_times) is not int
        or type(prepared) is not int
    ):
        return None
    properties = _uniform_properties(batch)
    if properties is None:
        return None
    try:
        born_host_bytes = encode_host(born_host)
    except MessageRejected:
        return None
    born_len = len(born_host_bytes)
    fixed = _FIXED[born_len, len(store_host_bytes)]
    pack = fixed.pack
    sys_flag = _with_host_flags(raw_sys_flag, born_len, len(store_host_bytes))
    pack_tail = _TOPIC_AND_PROPERTIES_LENGTH[len(topic_suffix)].pack
    overhead = fixed.size + len(topic_suffix) + 2
    ts_pos = 48 + born_len
    parts: list[bytes] = []
    starts: list[int] = []
    size = 0
    try:
        for msg, props in zip(batch, properties):
            if (
                msg.topic is not topic
                or msg.queue_id is not queue_id
                or msg.sys_flag is not raw_sys_flag
                or msg.born_host is not born_host
                or msg.store_host is not store_host
                or msg.reconsume_times is not reconsume_times
                or msg.prepared_transaction_offset is not prepared
                or len(props) > MAX_PROPERTIES_LENGTH
            ):
                return None
            body = msg.body
            born_ts = msg.born_timestamp_ms
            if born_ts is None:
                born_ts = now_ms
            elif type(born_ts) is not int or not MIN_BORN_TIMESTAMP_MS <= born_ts <= MAX_BORN_TIMESTAMP_MS:
                return None
            if type(body) is not bytes:
                return None
            body_len = len(body)
            total = overhead + body_len + len(props)
            parts += (
                pack(
                    total,
                    MESSAGE_MAGIC_CODE,
                    crc32(body) & 0x7FFFFFFF,
                    queue_id,
                    msg.flag,
                    0,
                    0,
                    sys_flag,
                    born_ts,
                    born_host_bytes,
                    0,
                    store_host_bytes,
                    reconsume_times,
                    prepared,
                    body_len,
                ),
                body,
                pack_tail(topic_suffix, len(props)),
                props,
            )
            starts.append(size)
            size += total
    except struct.error:
        return None
    if size > max_message_size:
        return None
    stamps = [start + ts_pos for start in starts]
    return EncodedMessage(bytearray().join(parts), starts, stamps, f"{topic}-{queue_id}", 0, store_host_bytes)


def _encode_batch_checked(
    batch: Sequence[Message],
    topic_suffix: bytes,
    store_host_bytes: bytes,
    default_store_host: Host,
    max_message_size: int,
    now_ms: int,
) -> EncodedMessage:
    """`encode_batch` message by message, each checked as `encode_message` checks it."""
    first = batch[0]
    topic, queue_id, store_host = first.topic, first.queue_id, first.store_host
    # A front end's batch comes from one connection: its messages share one born host object.
    born_host: object = _NO_HOST
    born_host_bytes = b""
    parts: list[bytes] = []
    starts: list[int] = []
    ts_positions: list[int] = []
    size = 0
    for msg in batch:
        if type(msg) is not Message and not isinstance(msg, Message):
            raise MessageRejected(PutMessageStatus.MESSAGE_ILLEGAL, f"expected a Message, got {type(msg).__name__}")
        if msg.topic != topic or msg.queue_id != queue_id:
            raise MessageRejected(
                PutMessageStatus.MESSAGE_ILLEGAL, "every message of a batch must have the same topic and queue"
            )
        if isinstance(msg.sys_flag, int) and msg.sys_flag & TRANSACTION_TYPE_MASK:
            raise MessageRejected(PutMessageStatus.MESSAGE_ILLEGAL, "a batch cannot carry transaction messages")
        delay = msg.properties.get(PROPERTY_DELAY_TIME_LEVEL) if msg.properties else None
        if delay not in (None, "", "0"):
            raise MessageRejected(PutMessageStatus.MESSAGE_ILLEGAL, "a batch cannot carry delayed messages")
        # The messages of a front end's batch share their store host (None): encoded once.
        if msg.store_host is not store_host and encode_host(msg.store_host or default_store_host) != store_host_bytes:
            raise MessageRejected(
                PutMessageStatus.MESSAGE_ILLEGAL, "every message of a batch must have the same store host"
            )
        if msg.born_host is not born_host:
            born_host, born_host_bytes = msg.born_host, encode_host(msg.born_host)
        head, body, props_field, total, ts_pos = _record_parts(
            msg, topic_suffix, born_host_bytes, store_host_bytes, now_ms
        )
        parts += (head, body, topic_suffix, props_field)
        starts.append(size)
        ts_positions.append(size + ts_pos)
        size += total
        if size > max_message_size:
            raise MessageRejected(
                PutMessageStatus.MESSAGE_ILLEGAL,
                f"batch is over {size} bytes encoded; the limit (maxMessageSize, within a segment) is "
                f"{max_message_size}",
            )
    return EncodedMessage(bytearray().join(parts), starts, ts_positions, f"{topic}-{queue_id}", 0, store_host_bytes)


def encode_blank(size: int) -> bytes:
    return _SIZE_MAGIC.pack(size, BLANK_MAGIC_CODE)


# ---------------------------------------------------------------------------------------------
# Decoding


class RecordKind:
    MESSAGE = "message"
    BLANK = "blank"
    END = "end"


class RecordCheck(NamedTuple):
    """What lies at a position: a message or blank of `size` bytes, or the end of written data.
    (A named tuple: scans build one per record, and tuples are the cheapest immutable value.)"""

    kind: str
    size: int
    queue_id: int = 0
    queue_offset: int = 0
    sys_flag: int = 0
    store_timestamp_ms: int = 0
    topic: str = ""
    properties_pos: int = 0  # where the properties' bytes start in the buffer checked
    properties_len: int = 0
    prepared_transaction_offset: int = 0


_END = RecordCheck(RecordKind.END, 0)
_MIN_MESSAGE_SIZE = _FIXED[8, 8].size + 1 + 2
# The fixed fields `check_record` reads, host addresses skipped (no bytes objects built for them).
_CHECKED = {(born, store): struct.Struct(f">iiiiiqqiq{born}xq{store}xiqi") for born in (8, 20) for store in (8, 20)}
_CHECKED_V4 = _CHECKED[8, 8]
_V6_HOSTS = BORNHOST_V6_FLAG | STOREHOST_V6_FLAG
_topic_names: dict[bytes, str] = {}


def _topic_name(raw: bytes, physical_offset: int) -> str:
    name = _topic_names.get(raw)
    if name is None:
        if 0 in raw:
            raise CorruptMessage(physical_offset, "topic contains a NUL byte")
        try:
            name = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise CorruptMessage(physical_offset, "topic is not UTF-8") from None
        if len(_topic_names) < 65536:
            _topic_names[raw] = name
    return name


def check_record(buf, pos: int, limit: int, physical_offset: int, *, verify_crc: bool = True) -> RecordCheck:  # noqa: C901 - one check per header field of the on-disk record
    """Check the record at `buf[pos:]` whose CommitLog offset is `physical_offset`.

    `limit` is the end of the segment within `buf`. Zeros at TOTALSIZE mean the end of written data.
    Raises CorruptMessage for anything that is neither a whole valid message nor a blank end;
    DamagedMessage (a CorruptMessage) for a whole message whose body fails its CRC.
    """
    remaining = limit - pos
    if remaining < 8:
        if remaining >= 4 and _I32.unpack_from(buf, pos)[0] == 0:
            return _END
        if remaining > 0 and any(buf[pos:limit]):
            raise CorruptMessage(physical_offset, "record header runs past the segment end")
        return _END
    size, magic = _SIZE_MAGIC.unpack_from(buf, pos)
    if size == 0:
        return _END
    if magic == BLANK_MAGIC_CODE:
        if size != remaining:
            raise CorruptMessage(
                physical_offset, f"blank record of {size} bytes, but {remaining} remain in the segment"
            )
        return RecordCheck(RecordKind.BLANK, size)
    if magic != MESSAGE_MAGIC_CODE:
        raise CorruptMessage(physical_offset, f"bad magic code {magic}")
    if size < _MIN_MESSAGE_SIZE or size > remaining:
        raise CorruptMessage(physical_offset, f"total size {size} out of range (remaining {remaining})")
    # Read as IPv4 hosts (what nearly every record has; the minimum size covers it), again when
    # SYSFLAG says otherwise: one unpack per record, not one for SYSFLAG and one for the rest.
    fields = _CHECKED_V4.unpack_from(buf, pos)
    sys_flag = fields[7]
    if sys_flag & _V6_HOSTS:
        checked = _CHECKED[20 if sys_flag & BORNHOST_V6_FLAG else 8, 20 if sys_flag & STOREHOST_V6_FLAG else 8]
        if size < checked.size + 1 + 2:
            raise CorruptMessage(physical_offset, f"total size {size} is too small for its host addresses")
        fields = checked.unpack_from(buf, pos)
        fixed_size = checked.size
    else:
        fixed_size = _CHECKED_V4.size
    (_, _, crc, queue_id, _, queue_offset, phys, _, _, store_ts, _, prepared, body_len) = fields
    if phys != physical_offset:
        raise CorruptMessage(physical_offset, f"physical offset field says {phys}")
    end = pos + size
    p = pos + fixed_size
    if body_len < 0 or p + body_len + 3 > end:
        raise CorruptMessage(physical_offset, f"body length {body_len} does not fit total size {size}")
    # Checked now, reported after the structure: a record whose sizes do not add up is not a
    # message at all, whatever its body holds.
    crc_ok = not verify_crc or zlib.crc32(memoryview(buf)[p : p + body_len]) & 0x7FFFFFFF == crc
    p += body_len
    topic_len = buf[p]
    topic_raw = buf[p + 1 : p + 1 + topic_len]
    p += 1 + topic_len
    if topic_len == 0 or p + 2 > end:
        raise CorruptMessage(physical_offset, f"topic length {topic_len} does not fit total size {size}")
    props_len = _I16.unpack_from(buf, p)[0]
    if props_len < 0 or p + 2 + props_len != end:
        raise CorruptMessage(physical_offset, f"properties length {props_len} does not add up to total size {size}")
    # The body CRC covers only the body; a record cut short leaves zeros at its end, which these
    # two checks see in the topic or in the properties' final separator.
    if props_len and buf[end - 1] != 0x02:
        raise CorruptMessage(physical_offset, "properties do not end with a separator")
    topic = _topic_name(bytes(topic_raw), physical_offset)
    if not crc_ok:
        raise DamagedMessage(physical_offset, "body CRC mismatch", topic, queue_id, queue_offset)
    return RecordCheck(
        RecordKind.MESSAGE, size, queue_id, queue_offset, sys_flag, store_ts, topic, p + 2, props_len, prepared
    )


def decode_message(buf, pos: int, physical_offset: int | None = None, *, verify_crc: bool = True) -> MessageExt:
    """Decode the whole message at `buf[pos:]`. Raises CorruptMessage when it is not one."""
    expected = _I64.unpack_from(buf, pos + PHYSICAL_OFFSET_POS)[0] if physical_offset is None else physical_offset
    check = check_record(buf, pos, len(buf), expected, verify_crc=verify_crc)
    if check.kind != RecordKind.MESSAGE:
        raise CorruptMessage(expected, f"no message here ({check.kind})")
    return decode_checked(buf, pos, check)


def decode_checked(buf, pos: int, check: RecordCheck) -> MessageExt:
    """The message at `buf[pos:]` that `check_record` just found valid (`check`): only what the
    check did not already read is parsed."""
    sys_flag = check.sys_flag
    fixed = _FIXED[20 if sys_flag & BORNHOST_V6_FLAG else 8, 20 if sys_flag & STOREHOST_V6_FLAG else 8]
    (_, _, crc, _, flag, _, phys, _, born_ts, born_host_raw, _, store_host_raw, reconsume, _, body_len) = (
        fixed.unpack_from(buf, pos)
    )
    body_pos = pos + fixed.size
    props_pos = check.properties_pos
    try:
        properties = decode_properties(buf[props_pos : props_pos + check.properties_len])
    except (UnicodeDecodeError, ValueError) as exc:
        raise CorruptMessage(phys, f"bad properties: {exc}") from None
    return MessageExt(
        topic=check.topic,
        queue_id=check.queue_id,
        body=bytes(buf[body_pos : body_pos + body_len]),
        properties=properties,
        flag=flag,
        sys_flag=sys_flag,
        born_host=decode_host(born_host_raw),
        store_host=decode_host(store_host_raw),
        born_timestamp_ms=born_ts,
        store_timestamp_ms=check.store_timestamp_ms,
        reconsume_times=reconsume,
        prepared_transaction_offset=check.prepared_transaction_offset,
        queue_offset=check.queue_offset,
        physical_offset=phys,
        store_size=check.size,
        body_crc=crc,
        msg_id=msg_id_from(store_host_raw, phys),
    )
