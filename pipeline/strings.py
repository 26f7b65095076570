"""Hashes of Arrow string arrays, vectorised with numpy: a 64-bit hash for grouping and finding
repeats (`string_hashes`), and Java's String.hashCode (`java_hashes`), which RocketMQ's files
store (tags codes, IndexFile keys) and `store.codec.java_string_hash` computes one string at a time.

Strings are at most 64 KiB long here (a record's properties field is). Pure functions;
thread-safe.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from store.log.codec import java_string_hash

M1 = np.uint64(0xBF58476D1CE4E5B9)
M2 = np.uint64(0x94D049BB133111EB)
MAX_LENGTH = 1 << 16
# 31**k mod 2**32 for Java's hash, k from 0.
_POWERS_31 = np.concatenate(
    ([1], np.cumprod(np.full(MAX_LENGTH, 31, np.uint64), dtype=np.uint64) & np.uint64(0xFFFFFFFF))
).astype(np.uint64)


def mix(h: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: every input bit reaches every output bit."""
    with np.errstate(over="ignore"):
        h = (h ^ (h >> np.uint64(30))) * M1
        h = (h ^ (h >> np.uint64(27))) * M2
        return h ^ (h >> np.uint64(31))


def _bytes_of(values: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(offsets from 0, the bytes) of a string or binary array without nulls."""
    values = values.cast(pa.binary())
    n = len(values)
    offsets = np.frombuffer(values.buffers()[1], np.int32, count=n + 1, offset=values.offset * 4).astype(np.int64)
    base, end = int(offsets[0]), int(offsets[-1])
    data = values.buffers()[2]
    raw = np.frombuffer(data, np.uint8, count=end - base, offset=base) if end > base else np.zeros(0, np.uint8)
    return offsets - base, raw


def string_hashes(values: pa.Array) -> np.ndarray:
    """A 64-bit hash of each string of `values` (no nulls), a function of the string alone: its
    length, then each 8-byte word of its bytes (zero-padded) mixed in turn."""
    n = len(values)
    if n == 0:
        return np.zeros(0, np.uint64)
    lengths = np.asarray(pc.binary_length(values)).astype(np.int64)
    words = np.maximum(1, (lengths + 7) // 8)
    width = 8 * int(words.max())
    ascii_rows = np.asarray(pc.string_is_ascii(values))
    if ascii_rows.all():
        # Padding by characters is padding by bytes for ASCII: one kernel lays every string out
        # in `width` bytes.
        padded = pc.utf8_rpad(values, width=width, padding="\0")
        start = int(np.frombuffer(padded.buffers()[1], np.int32, count=1, offset=padded.offset * 4)[0])
        matrix = np.frombuffer(padded.buffers()[2], np.uint8, count=n * width, offset=start).reshape(n, width)
    else:
        matrix = np.zeros((n, width), np.uint8)
        for row, text in zip(range(n), values.to_pylist()):
            raw = text.encode()
            matrix[row, : len(raw)] = np.frombuffer(raw, np.uint8)
    grid = np.ascontiguousarray(matrix).view(np.uint64)
    with np.errstate(over="ignore"):
        out = lengths.astype(np.uint64) * M2
        for j in range(width // 8):
            out = np.where(words > j, mix(out ^ grid[:, j]), out)
    return out


def java_hashes(values: pa.Array) -> np.ndarray:
    """Java's String.hashCode of each string of `values` (no nulls), as int64 holding the signed
    32-bit value. Java hashes UTF-16 code units: an ASCII string's are its bytes; other strings
    go through `store.codec.java_string_hash` one by one."""
    n = len(values)
    if n == 0:
        return np.zeros(0, np.int64)
    offsets, raw = _bytes_of(values)
    lengths = np.diff(offsets)
    # Byte i of a string of length L weighs 31**(L - 1 - i): reversed positions, from the end.
    ends = np.repeat(offsets[1:], lengths)
    from_end = ends - 1 - np.arange(len(raw)) if len(raw) else np.zeros(0, np.int64)
    terms = raw.astype(np.uint64) * _POWERS_31[from_end] if len(raw) else np.zeros(0, np.uint64)
    sums = np.zeros(n, np.uint64)
    filled = lengths > 0
    if len(raw):
        sums[filled] = np.add.reduceat(terms, offsets[:-1][filled])
    h = (sums & np.uint64(0xFFFFFFFF)).astype(np.int64)
    h = np.where(h >= 1 << 31, h - (1 << 32), h)
    if len(raw) and (raw >= 0x80).any():
        wide = np.flatnonzero(np.add.reduceat((raw >= 0x80).astype(np.int64), offsets[:-1][filled]) > 0)
        rows = np.flatnonzero(filled)[wide]
        texts = values.take(pa.array(rows)).to_pylist()
        h[rows] = [java_string_hash(t) for t in texts]
    return h
