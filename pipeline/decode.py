"""CommitLog records to Arrow: the scan's columns, a vectorised decoder, and the reference decoder
it must agree with.

Columns (`COLUMNS`, Spark DDL `SCHEMA_DDL`), one row per record:

    physical_offset  bigint   CommitLog offset of the record
    size             int      TOTALSIZE
    topic, queue_id, queue_offset, flag, sys_flag,
    born_timestamp   bigint   ms since the epoch, as stored
    born_host        string   "ip:port" ("[v6]:port" for IPv6)
    store_timestamp  bigint   ms
    store_host       string
    reconsume_times, prepared_transaction_offset,
    body             binary
    properties       map<string,string>  the pairs in stored order
    tags, keys       string   the TAGS and KEYS properties (null when absent)
    msg_id           string   RocketMQ's offset msgId (store host + physical offset, hex)
    body_crc_ok      boolean  null when CRC checking is off
    broker           string   the store directory the row was read from
    error            string   null for a good record; else why the record (or the bytes from
                              `physical_offset` on) is bad; only `physical_offset`, `size`,
                              `broker` and `error` are set then, except for a body CRC mismatch,
                              which keeps every decoded field
    broker_name      string   the broker group the store belongs to (the source's `brokers`
                              option; "" when the store was given by path alone); set on every
                              row, error rows included, by the source (`commitlog_source`)

`decode_row` is the reference: one record through `store.codec` (check_record, decode_checked).
`decode_records` does the same for a batch of chain positions (`pipeline.walk`) with numpy and
Arrow kernels: fixed header fields come from `binary_slice` over a zero-copy array of the
records, variable fields (body, topic, properties) from a binary-view array cast to binary (one
C++ copy). Any record the vectorised checks refuse, and any batch whose topics or properties
the fast path cannot parse exactly as the codec would (NUL or bad UTF-8 in a topic, a pair without
a separator, an empty pair), goes through `decode_row`. The properties map keeps pairs as stored:
a key written twice appears twice (the codec's dict keeps the last; so do `tags` and `keys`).

`find_chain` is the vectorised chain finder for `pipeline.walk.walk_segment`: candidates are the
positions whose MAGICCODE bytes match and whose PHYSICALOFFSET names themselves; when they link up
(each start + TOTALSIZE is the next start) they are the chain; otherwise it defers to `hop_chain`.

Pure functions; thread-safe.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from typing import cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from store.log.codec import CorruptMessage, RecordKind, check_record, decode_checked, decode_host, msg_id_from
from store.message import BORNHOST_V6_FLAG, STOREHOST_V6_FLAG

from .walk import CHAIN_HEAD, MESSAGE_MAGIC_CODE, MIN_RECORD_SIZE, hop_chain

COLUMNS: tuple[tuple[str, str], ...] = (
    ("physical_offset", "bigint"),
    ("size", "int"),
    ("topic", "string"),
    ("queue_id", "int"),
    ("queue_offset", "bigint"),
    ("flag", "int"),
    ("sys_flag", "int"),
    ("born_timestamp", "bigint"),
    ("born_host", "string"),
    ("store_timestamp", "bigint"),
    ("store_host", "string"),
    ("reconsume_times", "int"),
    ("prepared_transaction_offset", "bigint"),
    ("body", "binary"),
    ("properties", "map<string,string>"),
    ("tags", "string"),
    ("keys", "string"),
    ("msg_id", "string"),
    ("body_crc_ok", "boolean"),
    ("broker", "string"),
    ("error", "string"),
    ("broker_name", "string"),
)
COLUMN_NAMES = tuple(name for name, _ in COLUMNS)
# What the decoder builds from a record: every column but `broker_name`, which the source adds.
DECODED_COLUMN_NAMES = tuple(name for name in COLUMN_NAMES if name != "broker_name")
SCHEMA_DDL = ", ".join(f"{name} {kind}" for name, kind in COLUMNS)

_ARROW_TYPES = {
    "bigint": pa.int64(),
    "int": pa.int32(),
    "string": pa.string(),
    "binary": pa.binary(),
    "boolean": pa.bool_(),
    "map<string,string>": pa.map_(pa.string(), pa.string()),
}
ARROW_SCHEMA = pa.schema([pa.field(name, _ARROW_TYPES[kind]) for name, kind in COLUMNS])


def arrow_schema(columns: Sequence[str]) -> pa.Schema:
    return pa.schema([ARROW_SCHEMA.field(name) for name in columns])


_HEAD48 = np.dtype(
    [
        ("size", ">i4"),
        ("magic", ">i4"),
        ("crc", ">i4"),
        ("queue_id", ">i4"),
        ("flag", ">i4"),
        ("queue_offset", ">i8"),
        ("phys", ">i8"),
        ("sys_flag", ">i4"),
        ("born_ts", ">i8"),
    ]
)


def _tail_dtype(born: int, store: int) -> np.dtype:
    return np.dtype(
        [
            ("born", f"V{born}"),
            ("store_ts", ">i8"),
            ("store", f"V{store}"),
            ("reconsume", ">i4"),
            ("prepared", ">i8"),
            ("body_len", ">i4"),
        ]
    )


_TAILS = {(b, s): _tail_dtype(b, s) for b in (8, 20) for s in (8, 20)}
_HEX = np.frombuffer(b"".join(f"{i:02X}".encode() for i in range(256)), np.uint8).reshape(256, 2)
_MAGIC0, _MAGIC1, _MAGIC2, _MAGIC3 = struct.pack(">i", MESSAGE_MAGIC_CODE)


# ---------------------------------------------------------------------------------------------
# The reference: one record through the store's codec


def format_host(raw: bytes) -> str:
    ip, port = decode_host(raw)
    return f"[{ip}]:{port}" if len(raw) == 20 else f"{ip}:{port}"


def error_row(offset: int, reason: str, broker: str, size: int | None = None) -> dict:
    return {"physical_offset": offset, "size": size, "broker": broker, "error": reason}


def decode_row(buf, pos: int, seg_start: int, seg_size: int, broker: str, *, verify_crc: bool = True) -> dict:
    """The row for the record at segment-relative `pos`, decoded by `store.codec`."""
    offset = seg_start + pos
    try:
        record = check_record(buf, pos, seg_size, offset, verify_crc=False)
        if record.kind != RecordKind.MESSAGE:
            raise CorruptMessage(offset, f"no message here ({record.kind})")
        msg = decode_checked(buf, pos, record)
    except CorruptMessage as exc:
        size = struct.unpack_from(">i", buf, pos)[0] if seg_size - pos >= 4 else None
        return error_row(offset, exc.reason, broker, size)
    crc_ok = None
    if verify_crc:
        crc_ok = zlib.crc32(msg.body) & 0x7FFFFFFF == msg.body_crc
    born_len = 20 if msg.sys_flag & BORNHOST_V6_FLAG else 8
    store_len = 20 if msg.sys_flag & STOREHOST_V6_FLAG else 8
    born_raw = bytes(buf[pos + 48 : pos + 48 + born_len])
    store_at = pos + 56 + born_len
    store_raw = bytes(buf[store_at : store_at + store_len])
    return {
        "physical_offset": offset,
        "size": msg.store_size,
        "topic": msg.topic,
        "queue_id": msg.queue_id,
        "queue_offset": msg.queue_offset,
        "flag": msg.flag,
        "sys_flag": msg.sys_flag,
        "born_timestamp": msg.born_timestamp_ms,
        "born_host": format_host(born_raw),
        "store_timestamp": msg.store_timestamp_ms,
        "store_host": format_host(store_raw),
        "reconsume_times": msg.reconsume_times,
        "prepared_transaction_offset": msg.prepared_transaction_offset,
        "body": msg.body,
        "properties": list(msg.properties.items()),
        "tags": msg.properties.get("TAGS"),
        "keys": msg.properties.get("KEYS"),
        "msg_id": msg_id_from(store_raw, offset),
        "body_crc_ok": crc_ok,
        "broker": broker,
        "error": None if crc_ok is not False else "body CRC mismatch",
    }


def rows_to_batch(rows: list[dict], columns: Sequence[str]) -> pa.RecordBatch:
    schema = arrow_schema(columns)
    return pa.RecordBatch.from_pylist([{c: r.get(c) for c in columns} for r in rows], schema=schema)


# ---------------------------------------------------------------------------------------------
# Vectorised pieces


def _records_array(buf_pa: pa.Buffer, starts: np.ndarray, end: int) -> pa.Array:
    """Zero-copy binary array whose element i is the bytes from starts[i] to the next start."""
    base = int(starts[0])
    offsets = np.empty(len(starts) + 1, np.int32)
    offsets[:-1] = starts - base
    offsets[-1] = end - base
    return pa.Array.from_buffers(
        pa.binary(), len(starts), [None, pa.py_buffer(offsets), buf_pa.slice(base, end - base)]
    )


def _fixed_block(records: pa.Array, a: np.ndarray, starts: np.ndarray, begin: int, width: int) -> np.ndarray:
    """An (n, width) uint8 matrix: bytes [begin, begin + width) of every record."""
    n = len(starts)
    sliced = pc.binary_slice(records, begin, begin + width)
    data = sliced.buffers()[2]
    if data is not None and data.size == n * width and sliced.null_count == 0:
        offsets = np.frombuffer(sliced.buffers()[1], np.int32, count=n + 1, offset=sliced.offset * 4)
        if offsets[0] == 0:
            return np.frombuffer(data, np.uint8, count=n * width).reshape(n, width)
    return a[(starts + begin)[:, None] + np.arange(width)]


def _tokens(buf_pa: pa.Buffer, bounds: np.ndarray) -> pa.Array:
    """Zero-copy binary array over the buffer whose element i is buf[bounds[i] : bounds[i + 1]]
    (bounds non-decreasing; the span must stay below 2 GiB)."""
    base = int(bounds[0])
    span = int(bounds[-1]) - base
    offsets = (bounds - base).astype(np.int32)
    return pa.Array.from_buffers(pa.binary(), len(bounds) - 1, [None, pa.py_buffer(offsets), buf_pa.slice(base, span)])


def _pick(tokens: pa.Array, first: int, step: int, n: int) -> pa.Array:
    """Elements first, first + step, ... (n of them) of `tokens`, copied into a new array."""
    return tokens.take(pa.array(np.arange(first, first + step * n, step, dtype=np.int64)))


def _constant_strings(text: str, n: int) -> pa.Array:
    raw = text.encode("utf-8")
    offsets = np.arange(n + 1, dtype=np.int32) * len(raw)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(raw * n)])


def _hosts_v4(raw: np.ndarray) -> pa.Array:
    """'ip:port' strings for (n, 8) IPv4 host bytes; distinct hosts are formatted once."""
    keys = raw.copy().view(">u8").ravel()
    unique, inverse = np.unique(keys, return_inverse=True)
    names = [format_host(int(k).to_bytes(8, "big")) for k in unique]
    return pa.array(names, pa.string()).take(pa.array(inverse.astype(np.int32)))


def _msg_ids_v4(store_raw: np.ndarray, phys: np.ndarray) -> pa.Array:
    n = len(phys)
    raw = np.empty((n, 16), np.uint8)
    raw[:, :8] = store_raw
    raw[:, 8:] = phys.astype(">i8").view(np.uint8).reshape(n, 8)
    text = raw.tobytes().hex().upper().encode("ascii")
    offsets = np.arange(n + 1, dtype=np.int32) * 32
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(text)])


class _NotFast(Exception):
    """The batch holds something only the reference decoder handles exactly."""


def _parse_properties(raw: pa.Array, n: int) -> tuple[pa.Array, pa.Array, pa.Array]:
    """(map array, tags, keys) from the properties bytes of n records (each empty or ending in
    \\x02). Raises _NotFast unless every pair is exactly `key\\x01value\\x02`."""
    offsets = np.frombuffer(raw.buffers()[1], np.int32, count=n + 1, offset=raw.offset * 4).astype(np.int64)
    base = int(offsets[0])
    total = int(offsets[-1]) - base
    data_buf = raw.buffers()[2]
    if total and data_buf is not None:
        data = np.frombuffer(data_buf, np.uint8, count=int(offsets[-1]))[base:]
    else:
        data = np.zeros(0, np.uint8)
    seps = np.flatnonzero((data == 1) | (data == 2))
    kinds = data[seps]
    if len(seps) % 2 or not (kinds[0::2] == 1).all() or not (kinds[1::2] == 2).all():
        raise _NotFast("properties need the codec (a pair without its separators, or an empty pair)")
    seps1, seps2 = seps[0::2], seps[1::2]
    pairs = len(seps2)
    pairs_per_record = np.diff(np.searchsorted(seps2, offsets - base))
    if pairs:
        # Tokens key, \x01, value, \x02 for every pair, back to back over the properties bytes.
        bounds = np.empty(4 * pairs + 1, np.int64)
        bounds[0] = 0
        bounds[4::4] = seps2 + 1
        bounds[1::4] = seps1
        bounds[2::4] = seps1 + 1
        bounds[3::4] = seps2
        tokens = _tokens(pa.py_buffer(data), bounds)
        try:
            keys_s = _pick(tokens, 0, 4, pairs).cast(pa.string())
            vals_s = _pick(tokens, 2, 4, pairs).cast(pa.string())
        except pa.ArrowInvalid:
            raise _NotFast("properties are not UTF-8") from None
    else:
        keys_s = vals_s = pa.array([], pa.string())
    map_offsets = np.zeros(n + 1, np.int32)
    np.cumsum(pairs_per_record, out=map_offsets[1:])
    mapped = pa.MapArray.from_arrays(pa.array(map_offsets), keys_s, vals_s)
    record_of_pair = np.repeat(np.arange(n), pairs_per_record)
    picked = []
    for name in ("TAGS", "KEYS"):
        hit = np.flatnonzero(np.asarray(pc.equal(keys_s, name).fill_null(False))) if pairs else np.zeros(0, np.int64)
        index = np.full(n, -1, np.int64)
        index[record_of_pair[hit]] = hit  # a key written twice: the last one wins, as in the codec's dict
        picked.append(vals_s.take(pa.array(index, mask=index < 0)))
    return mapped, picked[0], picked[1]


def property_values(properties: pa.MapArray, name: str, *, last: bool) -> pa.Array:
    """Per record, the value of the first (or last) pair named `name` in its properties map, null
    when none: the last is what the codec's dict keeps, the first what Spark's `properties[name]`
    finds."""
    n = len(properties)
    offsets = np.asarray(properties.offsets)  # n + 1 positions into the (unsliced) child arrays
    lo, hi = int(offsets[0]), int(offsets[-1])
    index = np.full(n, -1, np.int64)
    if hi > lo:
        named = pc.equal(properties.keys.slice(lo, hi - lo), name).fill_null(False)
        hit = lo + np.flatnonzero(np.asarray(named))
        if len(hit):
            record = np.searchsorted(offsets, hit, side="right") - 1
            if last:
                record, hit = record[::-1], hit[::-1]
            records, chosen = np.unique(record, return_index=True)
            index[records] = hit[chosen]
    if properties.null_count:
        index[np.asarray(properties.is_null())] = -1
    return properties.items.take(pa.array(index, mask=index < 0))


def _crc_ok(bodies: pa.Array, crcs: np.ndarray) -> np.ndarray:
    computed = np.fromiter(map(zlib.crc32, bodies.to_pylist()), np.int64, count=len(bodies))
    return (computed & 0x7FFFFFFF) == crcs


def decode_records(
    buf,
    seg_start: int,
    seg_size: int,
    positions: Sequence[int],
    *,
    broker: str,
    verify_crc: bool = True,
    columns: Sequence[str] = DECODED_COLUMN_NAMES,
) -> list[pa.RecordBatch]:
    """Batches of rows (only `columns`) for chain records at segment-relative `positions`."""
    starts = np.asarray(positions, dtype=np.int64)
    if len(starts) == 0:
        return []
    a = np.frombuffer(buf, np.uint8, count=seg_size)
    buf_pa = pa.py_buffer(buf)
    end = int(starts[-1]) + struct.unpack_from(">i", buf, int(starts[-1]))[0]
    records = _records_array(buf_pa, starts, end)
    head = _fixed_block(records, a, starts, 0, 48).view(_HEAD48).ravel()
    sizes = head["size"].astype(np.int64)
    sys_flag = head["sys_flag"].astype(np.int32)
    hosts = sys_flag & (BORNHOST_V6_FLAG | STOREHOST_V6_FLAG)
    if hosts.any():
        # IPv6 hosts shift every later field: the reference decoder takes those batches.
        return [
            rows_to_batch(
                [decode_row(buf, int(p), seg_start, seg_size, broker, verify_crc=verify_crc) for p in starts], columns
            )
        ]
    tail = _fixed_block(records, a, starts, 48, 40).view(_TAILS[8, 8]).ravel()
    body_len = tail["body_len"].astype(np.int64)
    ok = body_len >= 0
    ok &= 88 + body_len + 3 <= sizes
    topic_at = starts + 88 + np.where(ok, body_len, 0)
    topic_len = a[np.minimum(topic_at, seg_size - 1)].astype(np.int64)
    ok &= topic_len > 0
    props_len_at = topic_at + 1 + topic_len
    ok &= props_len_at + 2 <= starts + sizes
    pl_at = np.minimum(props_len_at, seg_size - 2)
    props_len = ((a[pl_at].astype(np.int64) << 8) | a[pl_at + 1]).astype(np.int16).astype(np.int64)
    ok &= props_len >= 0
    ok &= props_len_at + 2 + props_len == starts + sizes
    last_byte = a[np.minimum(starts + sizes - 1, seg_size - 1)]
    ok &= (props_len == 0) | (last_byte == 2)
    out: list[pa.RecordBatch] = []
    if not ok.all():
        bad = np.flatnonzero(~ok)
        out.append(
            rows_to_batch(
                [decode_row(buf, int(starts[i]), seg_start, seg_size, broker, verify_crc=verify_crc) for i in bad],
                columns,
            )
        )
        keep = np.flatnonzero(ok)
        if len(keep) == 0:
            return out
        starts, sizes, head, tail = starts[keep], sizes[keep], head[keep], tail[keep]
        body_len, topic_at, topic_len, props_len_at, props_len = (
            body_len[keep],
            topic_at[keep],
            topic_len[keep],
            props_len_at[keep],
            props_len[keep],
        )
    n = len(starts)
    need = set(columns)
    try:
        built = _build_columns(
            a,
            buf_pa,
            seg_start,
            starts,
            sizes,
            head,
            tail,
            body_len,
            topic_at,
            topic_len,
            props_len_at,
            props_len,
            broker,
            verify_crc,
            need,
        )
    except _NotFast:
        out.append(
            rows_to_batch(
                [decode_row(buf, int(p), seg_start, seg_size, broker, verify_crc=verify_crc) for p in starts], columns
            )
        )
        return out
    out.append(pa.RecordBatch.from_arrays([built[c] for c in columns], schema=arrow_schema(columns)))
    assert out[-1].num_rows == n
    return out


def _build_columns(  # noqa: PLR0915 - one vectorised column per statement, in the schema's order
    a,
    buf_pa,
    seg_start,
    starts,
    sizes,
    head,
    tail,
    body_len,
    topic_at,
    topic_len,
    props_len_at,
    props_len,
    broker,
    verify_crc,
    need,
) -> dict[str, pa.Array]:
    n = len(starts)
    cols: dict[str, pa.Array] = {}
    ends = starts + sizes
    # Seven tokens per record, back to back over the segment: header, body, topic length, topic,
    # properties length, properties, and the gap to the next record (empty along the chain).
    bounds = np.empty(7 * n + 1, np.int64)
    bounds[0 : 7 * n : 7] = starts
    bounds[1 : 7 * n : 7] = starts + 88
    bounds[2 : 7 * n : 7] = topic_at
    bounds[3 : 7 * n : 7] = topic_at + 1
    bounds[4 : 7 * n : 7] = props_len_at
    bounds[5 : 7 * n : 7] = props_len_at + 2
    bounds[6 : 7 * n : 7] = ends
    bounds[7 * n] = ends[-1]
    tokens = _tokens(buf_pa, bounds)
    topics = _pick(tokens, 3, 7, n)
    topic_data = topics.buffers()[2]
    if topic_data is not None and topic_data.size and (np.frombuffer(topic_data, np.uint8) == 0).any():
        raise _NotFast("a topic holds a NUL byte")
    try:
        cols["topic"] = pc.cast(topics, pa.string())
    except pa.ArrowInvalid:
        raise _NotFast("a topic is not UTF-8") from None
    if need & {"properties", "tags", "keys"}:
        raw_props = _pick(tokens, 5, 7, n)
        cols["properties"], cols["tags"], cols["keys"] = _parse_properties(raw_props, n)
    cols["physical_offset"] = pa.array(seg_start + starts)
    cols["size"] = pa.array(sizes.astype(np.int32))
    cols["queue_id"] = pa.array(head["queue_id"].astype(np.int32))
    cols["queue_offset"] = pa.array(head["queue_offset"].astype(np.int64))
    cols["flag"] = pa.array(head["flag"].astype(np.int32))
    cols["sys_flag"] = pa.array(head["sys_flag"].astype(np.int32))
    cols["born_timestamp"] = pa.array(head["born_ts"].astype(np.int64))
    cols["store_timestamp"] = pa.array(tail["store_ts"].astype(np.int64))
    cols["reconsume_times"] = pa.array(tail["reconsume"].astype(np.int32))
    cols["prepared_transaction_offset"] = pa.array(tail["prepared"].astype(np.int64))
    store_raw = np.ascontiguousarray(tail["store"]).view(np.uint8).reshape(n, 8)
    if "born_host" in need:
        cols["born_host"] = _hosts_v4(np.ascontiguousarray(tail["born"]).view(np.uint8).reshape(n, 8))
    if "store_host" in need:
        cols["store_host"] = _hosts_v4(store_raw)
    if "msg_id" in need:
        cols["msg_id"] = _msg_ids_v4(store_raw, seg_start + starts)
    body = None
    if "body" in need or verify_crc:
        body = _pick(tokens, 1, 7, n)
        cols["body"] = body
    if verify_crc:
        crc_ok = _crc_ok(body, head["crc"].astype(np.int64))
        cols["body_crc_ok"] = pa.array(crc_ok)
        bad = ~crc_ok
        if bad.any():
            cols["error"] = pa.array(["body CRC mismatch" if b else None for b in bad.tolist()], pa.string())
        else:
            cols["error"] = pa.nulls(n, pa.string())
    else:
        cols["body_crc_ok"] = pa.nulls(n, pa.bool_())
        cols["error"] = pa.nulls(n, pa.string())
    cols["broker"] = _constant_strings(broker, n)
    return cols


# ---------------------------------------------------------------------------------------------
# The vectorised chain finder


def find_chain(buf, seg_start: int, seg_size: int, pos: int, limit: int) -> tuple[Sequence[int], int]:
    """Same contract and result as `pipeline.walk.hop_chain`, found with numpy."""
    last_head = seg_size - CHAIN_HEAD.size
    stop = min(limit, last_head + 1)
    if pos >= stop:
        return [], pos
    a = np.frombuffer(buf, np.uint8, count=seg_size)
    window = a[pos + 4 : stop + 7]
    cand = np.flatnonzero(window[: stop - pos] == _MAGIC0)
    if len(cand):
        cand = cand[(window[cand + 1] == _MAGIC1) & (window[cand + 2] == _MAGIC2) & (window[cand + 3] == _MAGIC3)]
    if len(cand) == 0 or cand[0] != 0:
        return hop_chain(buf, seg_start, seg_size, pos, limit)
    starts = cand + pos
    end_guess = min(seg_size, int(starts[-1]) + CHAIN_HEAD.size)
    records = _records_array(pa.py_buffer(buf), starts, end_guess)
    block = _fixed_block(records, a, starts, 0, CHAIN_HEAD.size)
    sizes = block[:, 0:4].copy().view(">i4").ravel().astype(np.int64)
    phys = block[:, 28:36].copy().view(">i8").ravel()
    valid = (phys == seg_start + starts) & (sizes >= MIN_RECORD_SIZE) & (sizes <= seg_size - starts)
    if not valid.all():
        starts, sizes = starts[valid], sizes[valid]
        if len(starts) == 0 or starts[0] != pos:
            return hop_chain(buf, seg_start, seg_size, pos, limit)
    nexts = starts + sizes
    if not (nexts[:-1] == starts[1:]).all():
        return hop_chain(buf, seg_start, seg_size, pos, limit)
    # An int64 array indexes and iterates as the finder's contract asks of a sequence.
    return cast(Sequence[int], starts), int(nexts[-1])
