"""The pipeline benchmark's synthetic store: CommitLog segments written with numpy, and a cache of
them between runs.

`write_store(root, messages, body, segment_size)` writes `root/commitlog/` with `messages`
messages in RocketMQ's format (IPv4 hosts), as a producer through the put path would leave them,
without the put path (which is not what the pipeline benchmark measures): message i goes to topic
`Bench{i % 4}`, queue `i % 8` at queue offset `i // 8`, with a `body`-byte body (i's ten digits
repeated), TAGS `tag{i % 10}`, KEYS `key{i}` and a 32-hex-digit UNIQ_KEY naming i; born and store
timestamps 1,700,000,000,000 + i ms. A segment ends with a blank record where the next message
does not fit with 8 bytes to spare (RocketMQ's rule). Messages whose i has the same number of
digits have the same size, so each such run is built as one (count, size) byte matrix from a
template and patched column by column; the first and last record of every block are checked
against `store.codec.encode_message`, so the layout cannot drift from the store's.

`cached_store(cache_dir, ...)` keeps a generated store (and a byte-for-byte copy, the replica the
audit compares) under `cache_dir/<parameters>-<generator digest>/`; a manifest records every
file's size and modification time, and the entry is written again when the parameters, this
module's source, or any file differs from it.

Single-threaded; files are written once and only read afterwards.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from store.log.codec import BLANK_MAGIC_CODE, encode_message
from store.message import Message

TOPICS = 4
QUEUES = 8
FIRST_TIMESTAMP_MS = 1_700_000_000_000
BORN_HOST = ("127.0.0.1", 40000)
STORE_HOST = ("127.0.0.1", 10911)
UNIQ_PREFIX = "7F0000010BB8"  # what a client's id carries before its counter: IP and pid
UNIQ_DIGITS = 20
BLOCK = 1 << 16  # messages built per matrix
MIN_BLANK = 8  # END_FILE_MIN_BLANK_LENGTH
HEAD = 88  # fixed fields of an IPv4 message up to and including the body length
_DIGITS = np.frombuffer(b"0123456789ABCDEF", np.uint8)


@dataclass(frozen=True, slots=True)
class StoreSummary:
    root: Path
    messages: int
    bytes_used: int  # the log's end offset
    segments: int
    seconds: float  # writing time (0 when taken from the cache)


def message(i: int, body: int) -> Message:
    props = {"TAGS": f"tag{i % 10}", "KEYS": f"key{i}", "UNIQ_KEY": f"{UNIQ_PREFIX}{i:0{UNIQ_DIGITS}X}"}
    payload = (b"%010d" % i) * (body // 10) + b"x" * (body % 10)
    return Message(
        f"Bench{i % TOPICS}",
        i % QUEUES,
        payload,
        props,
        born_host=BORN_HOST,
        born_timestamp_ms=FIRST_TIMESTAMP_MS + i,
    )


def encoded(i: int, body: int, physical_offset: int) -> bytes:
    """Message i as the store encodes it (the reference every block is checked against)."""
    enc = encode_message(message(i, body), default_store_host=STORE_HOST, max_message_size=4 << 20, now_ms=0)
    enc.stamp(physical_offset, i // QUEUES, FIRST_TIMESTAMP_MS + i)
    return bytes(enc.buf)


def _text_columns(values: np.ndarray, width: int, base: int) -> np.ndarray:
    """(n, width) ASCII digits of `values` in `base` (10 or 16, upper case), zero-padded."""
    out = np.empty((len(values), width), np.uint8)
    rest = values.astype(np.int64)
    for column in range(width - 1, -1, -1):
        rest, digit = np.divmod(rest, base)
        out[:, column] = _DIGITS[digit]
    return out


class _Layout:
    """Where message i's varying bytes lie, for every i with `digits` decimal digits."""

    def __init__(self, digits: int, body: int, first: int) -> None:
        self.digits = digits
        self.body = body
        self.template = np.frombuffer(encoded(first, body, 0), np.uint8).copy()
        self.size = len(self.template)
        self.topic_digit = HEAD + body + 1 + len("Bench")
        props = HEAD + body + 1 + len(f"Bench{first % TOPICS}") + 2
        self.tag_digit = props + len("TAGS\x01tag")
        self.key_digits = self.tag_digit + len("0\x02KEYS\x01key")
        self.uniq_digits = self.key_digits + digits + len("\x02UNIQ_KEY\x01") + len(UNIQ_PREFIX)

    def block(self, first: int, count: int) -> np.ndarray:
        i = np.arange(first, first + count, dtype=np.int64)
        out = np.empty((count, self.size), np.uint8)
        out[:] = self.template
        body = self.body
        digits10 = _text_columns(i, 10, 10)
        bodies = np.empty((count, body), np.uint8)
        bodies[:] = ord("x")
        reps = body // 10
        if reps:
            bodies[:, : reps * 10] = np.tile(digits10, reps)
        out[:, HEAD : HEAD + body] = bodies
        crcs = np.fromiter((zlib.crc32(row.data) & 0x7FFFFFFF for row in bodies), np.int64, count)
        out[:, 8:12] = crcs.astype(">i4").view(np.uint8).reshape(count, 4)
        out[:, 12:16] = (i % QUEUES).astype(">i4").view(np.uint8).reshape(count, 4)
        out[:, 20:28] = (i // QUEUES).astype(">i8").view(np.uint8).reshape(count, 8)
        stamps = (FIRST_TIMESTAMP_MS + i).astype(">i8").view(np.uint8).reshape(count, 8)
        out[:, 40:48] = stamps
        out[:, 56:64] = stamps
        out[:, self.topic_digit] = _DIGITS[i % TOPICS]
        out[:, self.tag_digit] = _DIGITS[i % 10]
        out[:, self.key_digits : self.key_digits + self.digits] = digits10[:, 10 - self.digits :]
        out[:, self.uniq_digits : self.uniq_digits + UNIQ_DIGITS] = _text_columns(i, UNIQ_DIGITS, 16)
        return out


def write_store(
    root: Path,
    messages: int,
    body: int = 120,
    segment_size: int = 1 << 30,
    on_progress: Callable[[str], None] | None = None,
) -> StoreSummary:
    began = time.perf_counter()
    log = Path(root) / "commitlog"
    log.mkdir(parents=True)
    seg_start = 0
    seg = np.zeros(segment_size, np.uint8)
    pos = 0
    segments = 0
    layouts: dict[int, _Layout] = {}
    i = 0

    def save() -> None:
        with open(log / f"{seg_start:020d}", "wb") as f:
            f.write(seg.data)
        if on_progress is not None:
            on_progress(f"store: segment {seg_start:020d} written ({i:,} messages so far)")

    while i < messages:
        digits = len(str(i))
        layout = layouts.get(digits)
        if layout is None:
            layout = layouts[digits] = _Layout(digits, body, i)
        size = layout.size
        if size + MIN_BLANK > segment_size:
            raise ValueError(f"a {size}-byte message does not fit a {segment_size}-byte segment")
        fit = (segment_size - pos - MIN_BLANK) // size
        count = min(messages, 10**digits) - i
        count = min(count, BLOCK, max(fit, 0))
        if count <= 0:
            seg[pos : pos + 8] = np.frombuffer(struct.pack(">ii", segment_size - pos, BLANK_MAGIC_CODE), np.uint8)
            save()
            segments += 1
            seg_start += segment_size
            seg[:] = 0
            pos = 0
            continue
        block = layout.block(i, count)
        block[:, 28:36] = (
            (seg_start + pos + np.arange(count, dtype=np.int64) * size).astype(">i8").view(np.uint8).reshape(count, 8)
        )
        for row, n in ((0, i), (count - 1, i + count - 1)):
            if block[row].tobytes() != encoded(n, body, seg_start + pos + row * size):
                raise AssertionError(f"message {n} differs from store.codec's encoding")
        seg[pos : pos + count * size] = block.ravel()
        pos += count * size
        i += count
    save()
    return StoreSummary(Path(root), messages, seg_start + pos, segments + 1, time.perf_counter() - began)


# ---------------------------------------------------------------------------------------------
# The cache

MANIFEST = "manifest.json"


def generator_digest() -> str:
    """Changes whenever this module (the generator) does."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


def _files(directory: Path) -> dict[str, list[int]]:
    found = {}
    for path in sorted(directory.rglob("*")):
        if path.is_file() and path.name != MANIFEST:
            st = path.stat()
            found[str(path.relative_to(directory))] = [st.st_size, st.st_mtime_ns]
    return found


def cached_store(
    cache_dir: Path,
    messages: int,
    body: int,
    segment_size: int,
    on_progress: Callable[[str], None] | None = None,
) -> tuple[StoreSummary, Path]:
    """(the store, its copy), from the cache when its manifest still holds, else written anew."""
    say = on_progress or (lambda text: None)
    digest = generator_digest()
    entry = Path(cache_dir) / f"m{messages}-b{body}-s{segment_size}-{digest}"
    manifest_path = entry / MANIFEST
    if manifest_path.is_file():
        manifest = json.loads(manifest_path.read_text())
        if manifest.get("files") == _files(entry):
            say(f"store: reusing {entry} (written in {manifest['seconds']:.1f} s)")
            summary = StoreSummary(entry / "store", messages, manifest["bytes_used"], manifest["segments"], 0.0)
            return summary, entry / "copy"
        say(f"store: {entry} changed since it was written; writing it again")
    if Path(cache_dir).is_dir():
        for stale in Path(cache_dir).iterdir():
            if stale.is_dir() and stale.name.startswith(f"m{messages}-b{body}-s{segment_size}-"):
                shutil.rmtree(stale)  # the same store from an older generator, or damaged
    entry.mkdir(parents=True)
    summary = write_store(entry / "store", messages, body, segment_size, say)
    say(f"store: {summary.bytes_used / 1e9:.2f} GB in {summary.seconds:.1f} s; copying it")
    shutil.copytree(entry / "store", entry / "copy")
    manifest = {
        "messages": messages,
        "body": body,
        "segment_size": segment_size,
        "generator": digest,
        "bytes_used": summary.bytes_used,
        "segments": summary.segments,
        "seconds": summary.seconds,
        "files": _files(entry),
    }
    tmp = entry / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=1))
    os.replace(tmp, manifest_path)
    return summary, entry / "copy"


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rocketstore" / "pipeline-bench"
