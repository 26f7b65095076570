"""An independent CommitLog writer for the pipeline's tests, written from docs/design.md §3 alone (it
does not use `store.codec`): messages with IPv4 or IPv6 hosts and properties, blank segment ends,
torn tails and corruption, in segment files under `<root>/commitlog/`."""

from __future__ import annotations

import ipaddress
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

MAGIC = -626843481
BLANK = -875286124


def host_bytes(ip: str, port: int) -> bytes:
    return ipaddress.ip_address(ip).packed + struct.pack(">i", port)


@dataclass
class Msg:
    topic: str
    body: bytes
    queue_id: int = 0
    queue_offset: int = 0
    properties: dict = field(default_factory=dict)
    flag: int = 0
    sys_flag: int = 0
    born: tuple = ("10.0.0.1", 40000)
    store: tuple = ("10.0.0.2", 10911)
    born_ts: int = 1_700_000_000_000
    store_ts: int = 1_700_000_000_500
    reconsume: int = 0
    prepared: int = 0


def encode(m: Msg, offset: int) -> bytes:
    born = host_bytes(*m.born)
    store = host_bytes(*m.store)
    sys_flag = m.sys_flag | (16 if len(born) == 20 else 0) | (32 if len(store) == 20 else 0)
    props = "".join(f"{k}\x01{v}\x02" for k, v in m.properties.items()).encode()
    topic = m.topic.encode()
    tail = struct.pack(">i", len(m.body)) + m.body + bytes([len(topic)]) + topic + struct.pack(">h", len(props)) + props
    head_rest = (
        struct.pack(
            ">iiiqqiq", zlib.crc32(m.body) & 0x7FFFFFFF, m.queue_id, m.flag, m.queue_offset, offset, sys_flag, m.born_ts
        )
        + born
        + struct.pack(">q", m.store_ts)
        + store
        + struct.pack(">iq", m.reconsume, m.prepared)
    )
    total = 8 + len(head_rest) + len(tail)
    return struct.pack(">ii", total, MAGIC) + head_rest + tail


class LogWriter:
    """Appends messages to in-memory segments; `save(root)` writes them as files."""

    def __init__(self, segment_size: int, first_offset: int = 0) -> None:
        self.segment_size = segment_size
        self.segments: dict[int, bytearray] = {first_offset: bytearray(segment_size)}
        self.offset = first_offset
        self.offsets: list[int] = []

    def _current(self) -> tuple[int, bytearray]:
        start = self.offset - self.offset % self.segment_size
        return start, self.segments.setdefault(start, bytearray(self.segment_size))

    def add(self, m: Msg) -> int:
        data = encode(m, self.offset)
        start, seg = self._current()
        pos = self.offset - start
        if pos + len(data) > self.segment_size:
            left = self.segment_size - pos
            if left >= 8:
                seg[pos : pos + 8] = struct.pack(">ii", left, BLANK)
            self.offset = start + self.segment_size
            data = encode(m, self.offset)
            start, seg = self._current()
            pos = 0
        seg[pos : pos + len(data)] = data
        self.offsets.append(self.offset)
        self.offset += len(data)
        return self.offsets[-1]

    def patch(self, offset: int, data: bytes) -> None:
        start = offset - offset % self.segment_size
        seg = self.segments[start]
        seg[offset - start : offset - start + len(data)] = data

    def save(self, root: Path) -> Path:
        d = Path(root) / "commitlog"
        d.mkdir(parents=True, exist_ok=True)
        for start, seg in self.segments.items():
            (d / f"{start:020d}").write_bytes(bytes(seg))
        return Path(root)
