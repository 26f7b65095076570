"""RocketMQ's remoting protocol (the TCP protocol of RocketMQ 4.x clients), sans-IO.

A frame on the wire, all integers big-endian:

    int32 length            bytes after this field: 4 + header length + body length
    int32 mark              serialization type in the high byte (0 JSON, 1 ROCKETMQ binary),
                            header length in the low three bytes
    header                  the command without its body
    body                    opaque bytes (a message body, a JSON document, stored records)

The JSON header is an object: `code` (request code, or response code in an answer), `language`,
`version`, `opaque` (matches an answer to its request), `flag` (bit 0: this is a response; bit 1:
one-way request, no answer), `remark` (text, for errors), `extFields` (string to string: the
command's own header fields). The binary header holds the same fields: code int16, language int8,
version int16, opaque int32, flag int32, remark (int32 length + UTF-8), extFields (int32 length,
then per entry int16 key length, key, int32 value length, value). An answer uses the
serialization of its request.

`RemotingCommand` is a frozen value; `encode` makes a frame, `FrameDecoder` takes bytes as they
arrive and returns whole commands (bounded by `max_frame_bytes`; a bad frame raises
`RemotingProtocolError` and the connection must close). Every length read from the wire (frame,
header, remark, extFields and each key and value, batch entries, bodies, properties, stored
records) is checked against what is left of its enclosing field before it is used: a negative or
overlong one is refused, never followed, and every parse step moves forward, so the work a
decoder does is bounded by the bytes it is given. Also the request and response codes
RocketStore speaks, the codec of a batch's body, and the decoder of the stored records a pull
returns (`decode_stored_records`). No I/O, no threads; a decoder belongs to one
connection.
"""

from __future__ import annotations

import enum
import json
import socket
import struct
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

JSON = 0
ROCKETMQ = 1
RESPONSE_FLAG = 1
ONEWAY_FLAG = 2
DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024 + 64 * 1024
# The version RocketMQ 4.9 clients send; answers carry it back.
PROTOCOL_VERSION = 399

_LANGUAGES = ("JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO", "PHP", "OMS")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_PREFIX = struct.Struct(">ii")
_BINARY_FIXED = struct.Struct(">hbhii")


class RemotingProtocolError(ValueError):
    """Bytes that are not a remoting frame: the connection that sent them is closed."""


class RequestCode(enum.IntEnum):
    SEND_MESSAGE = 10
    PULL_MESSAGE = 11
    QUERY_CONSUMER_OFFSET = 14
    UPDATE_CONSUMER_OFFSET = 15
    SEARCH_OFFSET_BY_TIMESTAMP = 29
    GET_MAX_OFFSET = 30
    GET_MIN_OFFSET = 31
    HEART_BEAT = 34
    UNREGISTER_CLIENT = 35
    CONSUMER_SEND_MSG_BACK = 36
    GET_CONSUMER_LIST_BY_GROUP = 38
    NOTIFY_CONSUMER_IDS_CHANGED = 40  # broker -> client, one-way
    GET_ROUTEINFO_BY_TOPIC = 105
    SEND_MESSAGE_V2 = 310
    SEND_BATCH_MESSAGE = 320


class ResponseCode(enum.IntEnum):
    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14
    VERSION_NOT_SUPPORTED = 15
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    PULL_NOT_FOUND = 19
    PULL_RETRY_IMMEDIATELY = 20
    PULL_OFFSET_MOVED = 21
    QUERY_NOT_FOUND = 22
    SUBSCRIPTION_PARSE_FAILED = 23
    INVALID_PARAMETER = 29


# SEND_MESSAGE_V2 names the fields of SEND_MESSAGE's header with one letter each.
SEND_V2_FIELDS = {
    "a": "producerGroup",
    "b": "topic",
    "c": "defaultTopic",
    "d": "defaultTopicQueueNums",
    "e": "queueId",
    "f": "sysFlag",
    "g": "bornTimestamp",
    "h": "flag",
    "i": "properties",
    "j": "reconsumeTimes",
    "k": "unitMode",
    "l": "maxReconsumeTimes",
    "m": "batch",
    "n": "brokerName",
}
SEND_V1_FIELDS = {long: short for short, long in SEND_V2_FIELDS.items()}


@dataclass(frozen=True, slots=True)
class RemotingCommand:
    code: int
    opaque: int = 0
    flag: int = 0
    ext_fields: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""
    remark: str | None = None
    language: str = "PYTHON"
    version: int = PROTOCOL_VERSION
    serialize_type: int = JSON

    @property
    def is_response(self) -> bool:
        return bool(self.flag & RESPONSE_FLAG)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & ONEWAY_FLAG)

    def answer(
        self, code: int, remark: str | None = None, ext_fields: Mapping[str, str] | None = None, body: bytes = b""
    ) -> RemotingCommand:
        """The response to this request: its opaque, its serialization, the response flag."""
        return RemotingCommand(
            code,
            self.opaque,
            RESPONSE_FLAG,
            ext_fields or {},
            body,
            remark,
            "JAVA",
            self.version,
            self.serialize_type,
        )


# -- encoding ---------------------------------------------------------------------------------------


# One encoder for every header: `json.dumps` with options builds a new one per call.
_HEADER_JSON = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


_JSON_TEXT = json.encoder.encode_basestring  # the C quoting `_HEADER_JSON` uses


def _json_header(cmd: RemotingCommand) -> bytes:
    """The header as `_HEADER_JSON` writes it, byte for byte; written directly where every field is
    a plain int or str (each answer: the encoder's object and its Python wrappers cost more than
    the text)."""
    code, opaque, flag, version, remark, ext = cmd.code, cmd.opaque, cmd.flag, cmd.version, cmd.remark, cmd.ext_fields
    if (
        type(code) is int
        and type(opaque) is int
        and type(flag) is int
        and type(version) is int
        and type(cmd.language) is str
        and (remark is None or type(remark) is str)
        and all(type(k) is str and type(v) is str for k, v in ext.items())
    ):
        text = _JSON_TEXT
        head = (
            f'{{"code":{code},"language":{text(cmd.language)},"version":{version},"opaque":{opaque},'
            f'"flag":{flag},"serializeTypeCurrentRPC":"JSON"'
        )
        if remark is not None:
            head += f',"remark":{text(remark)}'
        if ext:
            head += ',"extFields":{' + ",".join(f"{text(k)}:{text(v)}" for k, v in ext.items()) + "}"
        return (head + "}").encode()
    return _encoded_header(cmd)


def _encoded_header(cmd: RemotingCommand) -> bytes:
    header = {
        "code": cmd.code,
        "language": cmd.language,
        "version": cmd.version,
        "opaque": cmd.opaque,
        "flag": cmd.flag,
        "serializeTypeCurrentRPC": "JSON",
    }
    if cmd.remark is not None:
        header["remark"] = cmd.remark
    if cmd.ext_fields:
        header["extFields"] = dict(cmd.ext_fields)
    return _HEADER_JSON.encode(header).encode()


def _binary_header(cmd: RemotingCommand) -> bytes:
    language = _LANGUAGES.index(cmd.language) if cmd.language in _LANGUAGES else _LANGUAGES.index("OTHER")
    parts = [_BINARY_FIXED.pack(cmd.code, language, cmd.version, cmd.opaque, cmd.flag)]
    remark = (cmd.remark or "").encode()
    parts.append(_INT32.pack(len(remark)) + remark)
    ext = []
    for key, value in cmd.ext_fields.items():
        k, v = key.encode(), str(value).encode()
        ext.append(_INT16.pack(len(k)) + k + _INT32.pack(len(v)) + v)
    ext_bytes = b"".join(ext)
    parts.append(_INT32.pack(len(ext_bytes)) + ext_bytes)
    return b"".join(parts)


def encode(cmd: RemotingCommand) -> bytes:
    header = _binary_header(cmd) if cmd.serialize_type == ROCKETMQ else _json_header(cmd)
    if len(header) >= 1 << 24:
        raise RemotingProtocolError(f"a header of {len(header)} bytes does not fit a frame")
    mark = (cmd.serialize_type << 24) | len(header)
    return _PREFIX.pack(4 + len(header) + len(cmd.body), mark) + header + cmd.body


# -- decoding ---------------------------------------------------------------------------------------


def _text_fields(raw: object) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise RemotingProtocolError("extFields is not an object")
    if all(type(v) is str for v in raw.values()):
        return raw  # a JSON object's names are strings: the parsed object is the answer
    return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in raw.items()}


def _int32(doc: dict, name: str, default: int | None) -> int:
    raw = doc.get(name, default)
    if raw is None or isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
        raise RemotingProtocolError(f"the header's {name} is not an integer")
    try:
        value = int(raw)
    except (ValueError, OverflowError):
        raise RemotingProtocolError(f"the header's {name} is not an integer") from None
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise RemotingProtocolError(f"the header's {name} {value} is out of range (a 32-bit integer)")
    return value


_HEADER_SCAN = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # the C scanner, set by __init__


def _header_doc(header: bytes):
    """`json.loads(header)`, without its wrappers for a header that is one UTF-8 JSON value and
    nothing else (what clients send); any other text goes through `json.loads`, which reads it
    or says why not."""
    try:
        text = header.decode()
        doc, end = _HEADER_SCAN(text, 0)
    except (UnicodeDecodeError, StopIteration):
        return json.loads(header)
    return doc if end == len(text) else json.loads(header)


def _from_json(header: bytes, body: bytes) -> RemotingCommand:
    try:
        doc = _header_doc(header)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise RemotingProtocolError(f"the JSON header does not parse: {str(exc)[:200]}") from None
    if not isinstance(doc, dict):
        raise RemotingProtocolError("the JSON header is not an object")
    code, opaque, flag, version = doc.get("code"), doc.get("opaque", 0), doc.get("flag", 0), doc.get("version", 0)
    # Clients send plain JSON integers: checked inline; anything else goes the long way.
    if not (
        type(code) is int
        and type(opaque) is int
        and type(flag) is int
        and type(version) is int
        and _INT32_MIN <= code <= _INT32_MAX
        and _INT32_MIN <= opaque <= _INT32_MAX
        and _INT32_MIN <= flag <= _INT32_MAX
        and _INT32_MIN <= version <= _INT32_MAX
    ):
        if "code" not in doc:
            raise RemotingProtocolError("the header lacks an integer code")
        code, opaque, flag = _int32(doc, "code", None), _int32(doc, "opaque", 0), _int32(doc, "flag", 0)
        version = _int32(doc, "version", 0)
    remark, language = doc.get("remark"), doc.get("language")
    try:
        fields = _text_fields(doc.get("extFields"))
    except RecursionError:
        raise RemotingProtocolError("extFields nest too deeply") from None
    return RemotingCommand(
        code,
        opaque,
        flag,
        fields,
        body,
        remark if isinstance(remark, str) else None,
        language if isinstance(language, str) else "OTHER",
        version,
        JSON,
    )


def _sized(header: bytes, pos: int, width: int, end: int, what: str) -> tuple[bytes, int]:
    """The field at `pos`: a length of `width` bytes (2 or 4, signed), then that many bytes, all
    before `end`; and the position after it (always past `pos`: every read moves forward)."""
    if pos + width > end:
        raise RemotingProtocolError(f"the binary header ends inside the length of {what}")
    (length,) = (_INT16 if width == 2 else _INT32).unpack_from(header, pos)
    start = pos + width
    if length < 0 or length > end - start:
        raise RemotingProtocolError(f"{what} claims {length} bytes; {end - start} are left")
    return header[start : start + length], start + length


def _text(raw: bytes, what: str) -> str:
    try:
        return raw.decode()
    except UnicodeDecodeError:
        raise RemotingProtocolError(f"{what} is not UTF-8") from None


def _from_binary(header: bytes, body: bytes) -> RemotingCommand:
    size = len(header)
    if size < _BINARY_FIXED.size:
        raise RemotingProtocolError(f"a binary header of {size} bytes is shorter than its fixed fields")
    code, language, version, opaque, flag = _BINARY_FIXED.unpack_from(header, 0)
    remark, pos = _sized(header, _BINARY_FIXED.size, 4, size, "the remark")
    ext, _ = _sized(header, pos, 4, size, "extFields")
    fields: dict[str, str] = {}
    pos, end = 0, len(ext)
    while pos < end:
        key, pos = _sized(ext, pos, 2, end, "an extFields key")
        value, pos = _sized(ext, pos, 4, end, "an extFields value")
        fields[_text(key, "an extFields key")] = _text(value, "an extFields value")
    name = _LANGUAGES[language] if 0 <= language < len(_LANGUAGES) else "OTHER"
    text = _text(remark, "the remark") if remark else None
    return RemotingCommand(code, opaque, flag, fields, body, text, name, version, ROCKETMQ)


class FrameDecoder:
    """Whole commands out of a byte stream, as it arrives in pieces. After a RemotingProtocolError
    the stream has no frame boundary left to trust: every later `feed` raises it again."""

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self._buffer = bytearray()
        self._max = max_frame_bytes
        self._error: RemotingProtocolError | None = None

    def feed(self, data: bytes) -> list[RemotingCommand]:
        if self._error is not None:
            raise RemotingProtocolError(f"the stream broke earlier: {self._error}")
        try:
            return self._feed(data)
        except RemotingProtocolError as exc:
            self._error = exc
            self._buffer = bytearray()
            raise

    def _feed(self, data: bytes) -> list[RemotingCommand]:
        buffer = self._buffer
        # Frames that start the read (the common case: nothing held from the last one) are cut
        # from it directly; only an incomplete frame's bytes are kept in the buffer.
        source: bytes | bytearray = buffer if buffer or not isinstance(data, bytes) else data
        if source is buffer:
            buffer += data
        out: list[RemotingCommand] = []
        pos = 0
        while len(source) - pos >= 4:
            (length,) = _INT32.unpack_from(source, pos)
            if length < 4 or length > self._max:
                raise RemotingProtocolError(f"a frame of {length} bytes (the limit is {self._max})")
            if len(source) - pos - 4 < length:
                break
            (mark,) = _INT32.unpack_from(source, pos + 4)
            kind, header_len = (mark >> 24) & 0xFF, mark & 0xFFFFFF
            if header_len > length - 4:
                raise RemotingProtocolError(f"a header of {header_len} bytes in a frame of {length}")
            start = pos + 8
            header = bytes(source[start : start + header_len])
            body = bytes(source[start + header_len : pos + 4 + length])
            if kind == JSON:
                out.append(_from_json(header, body))
            elif kind == ROCKETMQ:
                out.append(_from_binary(header, body))
            else:
                raise RemotingProtocolError(f"unknown serialization type {kind}")
            pos += 4 + length
        if source is buffer:
            if pos:
                del buffer[:pos]
        elif pos < len(data):
            buffer += data[pos:]
        return out

    @property
    def buffered(self) -> int:
        return len(self._buffer)


# -- message properties and batches ----------------------------------------------------------------

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"


def properties_to_string(properties: Mapping[str, str]) -> str:
    return "".join(f"{k}{NAME_VALUE_SEPARATOR}{v}{PROPERTY_SEPARATOR}" for k, v in properties.items())


def string_to_properties(text: str) -> dict[str, str]:
    """The properties of RocketMQ's string form, read as RocketMQ's MessageDecoder reads them: a
    pair with an empty name or without a value separator is skipped (RocketMQ drops it, and stores
    the message without it). An empty value is kept (RocketMQ drops that too, but the store holds
    such values, from the gRPC API, and a pulled record must read back as stored). ValueError for
    a value holding a second separator, which RocketMQ keeps but the store could not write back."""
    out: dict[str, str] = {}
    for item in text.split(PROPERTY_SEPARATOR):
        key, sep, value = item.partition(NAME_VALUE_SEPARATOR)
        if not (key and sep):
            continue
        if NAME_VALUE_SEPARATOR in value:
            raise ValueError(f"a property with a \\x01 in its value: {item[:40]!r}")
        out[key] = value
    return out


@dataclass(frozen=True, slots=True)
class BatchItem:
    body: bytes
    flag: int
    properties: dict[str, str]


_BATCH_HEAD = struct.Struct(">iiiii")  # total size, magic, body CRC, flag, body length


def encode_batch_body(items: Iterable[BatchItem]) -> bytes:
    """A SEND_BATCH_MESSAGE body: per message its total size, a magic (unused), the body's CRC32,
    flag, body length, body, then properties length (int16) and properties."""
    parts = []
    for item in items:
        props = properties_to_string(item.properties).encode()
        total = _BATCH_HEAD.size + len(item.body) + 2 + len(props)
        parts.append(
            _BATCH_HEAD.pack(total, 0, zlib.crc32(item.body) & 0x7FFFFFFF, item.flag, len(item.body))
            + item.body
            + _INT16.pack(len(props))
            + props
        )
    return b"".join(parts)


def decode_batch_body(data: bytes) -> list[BatchItem]:
    """The messages of a SEND_BATCH_MESSAGE body; ValueError names what does not fit."""
    return [BatchItem(body, flag, properties) for body, flag, properties in batch_entries(data)]


def batch_entries(data: bytes) -> list[tuple[bytes, int, dict[str, str]]]:
    """`decode_batch_body` as (body, flag, properties) tuples: a server reads them once, into its
    own messages, and makes no `BatchItem` on the way."""
    entries: list[tuple[bytes, int, dict[str, str]]] = []
    data = bytes(data)  # slices of bytes are the one copy each body and properties text takes
    size = len(data)
    head, head_size = _BATCH_HEAD.unpack_from, _BATCH_HEAD.size
    pos = 0
    while pos < size:
        if size - pos < head_size:
            raise ValueError(f"a batch entry at byte {pos} is cut short")
        total, _magic, _crc, flag, body_len = head(data, pos)
        if total < head_size + 2 or total > size - pos or body_len < 0:
            raise ValueError(f"a batch entry at byte {pos} claims {total} bytes (body {body_len})")
        body_start = pos + head_size
        body_end = body_start + body_len
        if body_end + 2 > pos + total:
            raise ValueError(f"a batch entry at byte {pos}: its body runs past the entry")
        (props_len,) = _INT16.unpack_from(data, body_end)
        if props_len < 0 or body_end + 2 + props_len != pos + total:
            raise ValueError(f"a batch entry at byte {pos}: its properties do not end the entry")
        props = data[body_end + 2 : body_end + 2 + props_len].decode()
        entries.append((data[body_start:body_end], flag, string_to_properties(props)))
        pos += total
    return entries


# -- stored records (PULL_MESSAGE's body) ------------------------------------------------------------

BORNHOST_V6_FLAG = 1 << 4
STOREHOST_V6_FLAG = 1 << 5
_RECORD_FIXED = {
    (born, store): struct.Struct(f">iiiiiqqiq{born}sq{store}siqi") for born in (8, 20) for store in (8, 20)
}


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """One message as the broker stored it (RocketMQ's CommitLog record), as a pull returns it."""

    topic: str
    queue_id: int
    queue_offset: int
    physical_offset: int
    body: bytes
    body_crc: int
    flag: int
    sys_flag: int
    properties: dict[str, str]
    born_timestamp_ms: int
    store_timestamp_ms: int
    born_host: tuple[str, int]
    store_host: tuple[str, int]
    store_host_raw: bytes
    reconsume_times: int

    @property
    def offset_msg_id(self) -> str:
        """The broker's message id: the store host's address and port, then the CommitLog offset."""
        return (self.store_host_raw + struct.pack(">q", self.physical_offset)).hex().upper()

    @property
    def body_crc_ok(self) -> bool:
        return zlib.crc32(self.body) & 0x7FFFFFFF == self.body_crc


def _host(raw: bytes) -> tuple[str, int]:
    family = socket.AF_INET if len(raw) == 8 else socket.AF_INET6
    return socket.inet_ntop(family, raw[:-4]), struct.unpack(">i", raw[-4:])[0]


def decode_stored_records(data: bytes) -> list[StoredRecord]:
    """The records of a PULL_MESSAGE body, back to back; ValueError names the one that is cut."""
    out: list[StoredRecord] = []
    pos = 0
    while pos < len(data):
        if len(data) - pos < 8:
            raise ValueError(f"a record at byte {pos} is cut short")
        size, _magic = struct.unpack_from(">ii", data, pos)
        if size < _RECORD_FIXED[8, 8].size or size > len(data) - pos:
            raise ValueError(f"a record at byte {pos} claims {size} bytes of {len(data) - pos}")
        end = pos + size
        (sys_flag,) = struct.unpack_from(">i", data, pos + 36)
        fixed = _RECORD_FIXED[20 if sys_flag & BORNHOST_V6_FLAG else 8, 20 if sys_flag & STOREHOST_V6_FLAG else 8]
        try:
            if fixed.size > size:
                raise ValueError(f"{size} bytes cannot hold its fixed fields")
            (_, _, crc, queue_id, flag, queue_offset, phys, _, born_ts, born_raw, store_ts, store_raw, reconsume, _,
             body_len) = fixed.unpack_from(data, pos)  # fmt: skip
            at = pos + fixed.size
            if not 0 <= body_len <= end - at - 3:
                raise ValueError(f"a body of {body_len} bytes does not fit the record")
            body = data[at : at + body_len]
            at += body_len
            topic_len = data[at]
            if at + 1 + topic_len + 2 > end:
                raise ValueError(f"a topic of {topic_len} bytes does not fit the record")
            topic = data[at + 1 : at + 1 + topic_len].decode()
            at += 1 + topic_len
            (props_len,) = _INT16.unpack_from(data, at)
            if not 0 <= props_len <= end - at - 2:
                raise ValueError(f"properties of {props_len} bytes do not fit the record")
            properties = string_to_properties(data[at + 2 : at + 2 + props_len].decode())
        except (struct.error, IndexError, UnicodeDecodeError, ValueError) as exc:
            raise ValueError(f"the record at byte {pos} does not decode: {exc}") from None
        out.append(
            StoredRecord(
                topic,
                queue_id,
                queue_offset,
                phys,
                body,
                crc,
                flag,
                sys_flag,
                properties,
                born_ts,
                store_ts,
                _host(born_raw),
                _host(store_raw),
                store_raw,
                reconsume,
            )  # fmt: skip
        )
        pos += size
    return out
