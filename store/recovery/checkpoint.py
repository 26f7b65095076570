"""The store checkpoint file (`<root>/checkpoint`): 4 KiB, big-endian, RocketMQ's layout first.

    0   physicMsgTimestamp    i64  store time of the last CommitLog message known durable
    8   logicsMsgTimestamp    i64  store time of the last message durable in ConsumeQueues
    16  indexMsgTimestamp     i64  store time of the last message durable in IndexFiles
    24  physicFlushedOffset   i64  (ours) CommitLog offset below which every byte was fsynced
    32  confirmOffset         i64  (ours; RocketMQ 5 keeps confirmPhyOffset here too) offset the
                                   in-sync replicas acknowledged
    40  logicsFlushedOffset   i64  (ours) CommitLog offset below which every message is durable in
                                   its ConsumeQueue and IndexFile: re-dispatch starts here
    48  crc                   u32  (ours) zlib CRC-32 of bytes 0..48
    52  zeros

A file with zeros from byte 24 on was written by another RocketMQ store: its timestamps count and
the offsets are unknown (0). A CRC mismatch means a torn write: nothing in it is trusted. The file
is rewritten in place with one 4 KiB pwrite and an fdatasync; every field sits in the first
sector, which disks write atomically. Thread-safe: updates and persists are serialised by a lock
(the CommitLog flusher and the ConsumeQueue flusher both update it).
"""

from __future__ import annotations

import logging
import os
import struct
import threading
import zlib
from dataclasses import dataclass, replace
from pathlib import Path

log = logging.getLogger(__name__)

FILE_SIZE = 4096
_FIELDS = struct.Struct(">qqqqqq")
_CRC = struct.Struct(">I")


@dataclass(frozen=True, slots=True)
class CheckpointState:
    physic_msg_timestamp: int = 0
    logics_msg_timestamp: int = 0
    index_msg_timestamp: int = 0
    physic_flushed_offset: int = 0
    confirm_offset: int = 0
    logics_flushed_offset: int = 0

    @property
    def min_timestamp(self) -> int:
        return min(self.physic_msg_timestamp, self.logics_msg_timestamp)


def encode_checkpoint(state: CheckpointState) -> bytes:
    head = _FIELDS.pack(
        state.physic_msg_timestamp,
        state.logics_msg_timestamp,
        state.index_msg_timestamp,
        state.physic_flushed_offset,
        state.confirm_offset,
        state.logics_flushed_offset,
    )
    return head + _CRC.pack(zlib.crc32(head)) + bytes(FILE_SIZE - len(head) - 4)


def decode_checkpoint(raw: bytes) -> tuple[CheckpointState, bool]:
    """The state and whether it can be trusted (False for a torn or short file)."""
    if len(raw) < _FIELDS.size + _CRC.size:
        return CheckpointState(), False
    fields = _FIELDS.unpack_from(raw, 0)
    if not any(raw[24 : _FIELDS.size + _CRC.size]):
        return CheckpointState(*fields[:3]), True
    if _CRC.unpack_from(raw, _FIELDS.size)[0] != zlib.crc32(raw[: _FIELDS.size]):
        return CheckpointState(), False
    return CheckpointState(*fields), True


class StoreCheckpoint:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.state = CheckpointState()
        self.trusted = False
        self._fd = -1
        self._lock = threading.Lock()

    def load(self) -> CheckpointState:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            self.state, self.trusted = CheckpointState(), False
            return self.state
        self.state, self.trusted = decode_checkpoint(raw)
        if not self.trusted:
            log.warning("checkpoint %s is torn or short; recovery will not rely on it", self.path)
        return self.state

    def update(self, **changes: int) -> None:
        with self._lock:
            self.state = replace(self.state, **changes)

    def advance(self, **changes: int) -> None:
        """Update fields only upwards (offsets and timestamps never go back while running)."""
        with self._lock:
            current = self.state
            self.state = replace(current, **{k: max(v, getattr(current, k)) for k, v in changes.items()})

    def persist(self) -> None:
        with self._lock:
            if self._fd < 0:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            os.pwrite(self._fd, encode_checkpoint(self.state), 0)
            os.fdatasync(self._fd)

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
