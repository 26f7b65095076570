"""Mutations of valid inputs, for the fuzzer of both protocols: structure-aware changes of a
protobuf message (a field set to an edge value, cleared, repeated many times), raw changes of
bytes (flips, edge integers written over, spans cut, copied or inserted), and random bytes.

Every choice is drawn from the `random.Random` passed in, so a run is repeated exactly by its seed.
Plain functions; a mutation returns a new value and never changes its input.
"""

from __future__ import annotations

import random
import struct

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

INT32 = (-(1 << 31), (1 << 31) - 1)
INT64 = (-(1 << 63), (1 << 63) - 1)
UINT32 = (0, (1 << 32) - 1)
UINT64 = (0, (1 << 64) - 1)

EDGE_INTS = (
    0, 1, -1, 2, 3, 7, 8, 15, 16, 31, 32, 100, 127, 128, 255, 256, 1000, 1023, 1024, 4096, 65535, 65536,
    1 << 20, 1 << 24, (1 << 31) - 1, -(1 << 31), 1 << 31, (1 << 32) - 1, 1 << 32, (1 << 63) - 1, -(1 << 63),
    -2, -1000, -(1 << 20), 86_400_000, 3 * 86_400_000 + 1, 1_700_000_000_000, 4_102_444_800_000,
)  # fmt: skip

EDGE_TEXTS = (
    "", " ", "a", "*", "||", "a||b", "%", "%RETRY%", "%DLQ%", "%RETRY%FuzzGroup_FuzzTopic", "%DLQ%FuzzGroup",
    "TBW102", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC",
    "rmq_sys_wheel_timer", "DefaultCluster", "broker-a", "null", "{}", "[]", "{\"a\":1}", "-1", "0",
    "9223372036854775808", "1e999", "NaN", "true", "..", "../../etc/passwd", "a/b", "a\\b", "\n", "\r\n",
    "\t", "\x00", "\x01", "\x02", "a\x01b", "a\x02b", "k\x01v\x02", "é", "日本語", "\u200b", "\ufeff",
    "\U0001f600", "A" * 127, "A" * 128, "A" * 255, "A" * 256, "A" * 4096, "A" * 65536, "%s%n%x",
    "' OR 1=1 --", "<script>", "TAGS", "KEYS", "UNIQ_KEY", "DELAY", "__SHARDINGKEY", "TRAN_MSG",
    "MAX_OFFSET", "7F000001000022B80000000000000000", "0.0.0.0.00000000000000000000000000000000",
    "1.2.3.4." + "0" * 32, "v1 0 00000000 00", "SYNC_MASTER", "ASYNC_MASTER", "SLAVE",
)  # fmt: skip

EDGE_BYTES = (0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF, 0x01, 0x02, 0x22, 0x7B)


def _int_range(field: FieldDescriptor) -> tuple[int, int]:
    t = field.type
    if t in (FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_SINT32, FieldDescriptor.TYPE_SFIXED32):
        return INT32
    if t in (FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_FIXED32):
        return UINT32
    if t in (FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64):
        return UINT64
    return INT64


def edge_int(rng: random.Random, low: int = INT64[0], high: int = INT64[1]) -> int:
    value = rng.choice(EDGE_INTS) if rng.random() < 0.8 else rng.randint(-(1 << 40), 1 << 40)
    return min(max(value, low), high)


def edge_text(rng: random.Random, known: tuple[str, ...] = ()) -> str:
    roll = rng.random()
    if known and roll < 0.25:
        base = rng.choice(known)
        return base + rng.choice(EDGE_TEXTS)[:8] if rng.random() < 0.5 else base
    if roll < 0.85:
        return rng.choice(EDGE_TEXTS)
    return "".join(chr(rng.choice((rng.randint(32, 126), rng.randint(0x80, 0xD7FF), rng.randint(0, 31))))
                   for _ in range(rng.randint(1, 40)))  # fmt: skip


def random_bytes(rng: random.Random, max_len: int = 512) -> bytes:
    return rng.randbytes(rng.randint(0, max_len))


def _scalar(field: FieldDescriptor, rng: random.Random, known: tuple[str, ...]):
    t = field.type
    if t == FieldDescriptor.TYPE_BOOL:
        return rng.random() < 0.5
    if t == FieldDescriptor.TYPE_STRING:
        return edge_text(rng, known)
    if t == FieldDescriptor.TYPE_BYTES:
        return random_bytes(rng, rng.choice((0, 16, 512, 70_000)))
    if t in (FieldDescriptor.TYPE_FLOAT, FieldDescriptor.TYPE_DOUBLE):
        return rng.choice((0.0, -1.0, 1e30, float("inf"), float("-inf"), float("nan")))
    if t == FieldDescriptor.TYPE_ENUM:
        # proto3 enums are open: unknown numbers reach the servicer as they are.
        return rng.choice((0, 1, 2, 3, 4, 5, 99, -1, (1 << 31) - 1))
    return edge_int(rng, *_int_range(field))


def _fields_of(msg: Message, depth: int, out: list[tuple[Message, FieldDescriptor]]) -> None:
    for field in msg.DESCRIPTOR.fields:
        out.append((msg, field))
        if depth <= 0 or field.type != FieldDescriptor.TYPE_MESSAGE or field.message_type.GetOptions().map_entry:
            continue
        if field.is_repeated:
            items = getattr(msg, field.name)
            for item in list(items)[:3]:
                _fields_of(item, depth - 1, out)
        elif msg.HasField(field.name):
            _fields_of(getattr(msg, field.name), depth - 1, out)


def _mutate_field(msg: Message, field: FieldDescriptor, rng: random.Random, known: tuple[str, ...]) -> None:
    name = field.name
    if field.type == FieldDescriptor.TYPE_MESSAGE and field.message_type.GetOptions().map_entry:
        entries = getattr(msg, name)
        value_field = field.message_type.fields_by_name["value"]
        for _ in range(rng.choice((1, 1, 2, 50, 2000))):
            key = edge_text(rng, known)
            if value_field.type == FieldDescriptor.TYPE_MESSAGE:
                entries[key].SetInParent()
            else:
                entries[key] = _scalar(value_field, rng, known)
        return
    if field.is_repeated:
        items = getattr(msg, name)
        roll = rng.random()
        if roll < 0.3:
            del items[:]
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            template = items[0] if len(items) else None
            for _ in range(rng.choice((1, 2, 10, 1000))):
                added = items.add()
                if template is not None and rng.random() < 0.7:
                    added.CopyFrom(template)
                elif rng.random() < 0.5:
                    mutate_message_in_place(added, rng, known, 1)
        else:
            for _ in range(rng.choice((1, 2, 10, 1000))):
                items.append(_scalar(field, rng, known))
        return
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        if msg.HasField(name) and rng.random() < 0.4:
            msg.ClearField(name)
        else:
            child = getattr(msg, name)
            child.SetInParent()
            if rng.random() < 0.7:
                mutate_message_in_place(child, rng, known, 1)
        return
    if rng.random() < 0.1 and (field.has_presence or field.containing_oneof is not None):
        msg.ClearField(name)
        return
    setattr(msg, name, _scalar(field, rng, known))


def mutate_message_in_place(msg: Message, rng: random.Random, known: tuple[str, ...], count: int) -> None:
    for _ in range(count):
        candidates: list[tuple[Message, FieldDescriptor]] = []
        _fields_of(msg, 3, candidates)
        if not candidates:
            return
        owner, field = rng.choice(candidates)
        _mutate_field(owner, field, rng, known)


def mutate_message(msg: Message, rng: random.Random, known: tuple[str, ...] = ()) -> Message:
    """A copy of `msg` with one to four fields changed (set to an edge value, cleared, repeated)."""
    copy = type(msg)()
    copy.CopyFrom(msg)
    mutate_message_in_place(copy, rng, known, rng.choice((1, 1, 2, 3, 4)))
    return copy


def mutate_bytes(data: bytes, rng: random.Random, *, keep_prefix: int = 0) -> bytes:
    """`data` with one to four raw changes after its first `keep_prefix` bytes."""
    out = bytearray(data)
    for _ in range(rng.choice((1, 1, 2, 3, 4))):
        n = len(out) - keep_prefix
        at = keep_prefix + (rng.randrange(n) if n > 0 else 0)
        op = rng.randrange(8)
        if op == 0 and n > 0:
            out[at] ^= 1 << rng.randrange(8)
        elif op == 1 and n > 0:
            out[at] = rng.choice(EDGE_BYTES)
        elif op == 2 and n >= 4:
            at = keep_prefix + rng.randrange(n - 3)
            out[at : at + 4] = struct.pack(">i", edge_int(rng, *INT32))
        elif op == 3 and n >= 2:
            at = keep_prefix + rng.randrange(n - 1)
            out[at : at + 2] = struct.pack(">h", edge_int(rng, -(1 << 15), (1 << 15) - 1))
        elif op == 4 and n > 0:
            del out[at : at + rng.randint(1, 16)]
        elif op == 5:
            out[at:at] = rng.randbytes(rng.randint(1, 16))
        elif op == 6 and n > 0:
            span = bytes(out[at : at + rng.randint(1, 32)])
            out[at:at] = span * rng.randint(1, 8)
        else:
            del out[keep_prefix + (rng.randrange(n) if n > 0 else 0) :]
    return bytes(out)
