"""Replication chunks, sans-IO: how a master cuts CommitLog bytes into chunks and how a slave
checks one before appending it.

A chunk (`rocketstore.ha.v1.Chunk`) carries `data` = whole CommitLog records (a segment's blank end
record included) starting at `start_offset`, never crossing a segment end, with `checksum` =
CRC-32C of `data`. Records are RocketMQ's (store/codec.py): TOTALSIZE, a big-endian i32, first;
MAGICCODE, a big-endian i32, second. A chunk never ends inside a record, so a slave's dispatcher
never sees half a message.

- `whole_records(data)`: length of the longest prefix made of whole records.
- `next_chunk(read, offset, readable_end, batch_size)`: the bytes a master sends next (at most
  `batch_size`, or a quarter more rather than leave a runt chunk behind).
- `intact_prefix(data, start_offset, check_below)`: how much of them may go: a master never
  ships a record damaged at rest (its body CRC, or any check of `store.codec.check_record`,
  failing). Only records below `check_below` are checked: the master's
  `MessageStore.crc_checked_from_offset`, past which every record was checked or written in
  this run (the cost stays off the live tail; docs/brokers.md says why that is safe).
- `crc32c(data)`: the chunk's checksum (google-crc32c's compiled code; crcmod's when that
  cannot load).
- `SlaveStreamCheck`: a slave's verdict on a received chunk (`ChunkCheck`). The chunk's
  CRC-32C (and, with a shared secret, its MAC) covers every byte in transit, so a slave does not
  check bodies again: what it appends is what the master checked.

No I/O, no clocks, no threads. `crc32c`, `whole_records`, `next_chunk` and `intact_prefix` are
pure functions; a `SlaveStreamCheck` belongs to one stream and is used from one thread.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable
from dataclasses import dataclass

import crcmod.predefined
import google_crc32c

from store.log.codec import BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE, CorruptMessage, check_record

_SIZE_MAGIC = struct.Struct(">ii")
_SIZE = struct.Struct(">i")
# The smallest record: a blank end of segment is TOTALSIZE and MAGICCODE, nothing else.
MIN_RECORD_SIZE = 8
# A chunk takes the rest of what is readable when that rest is a runt: at most a quarter batch,
# and at most 1 MiB (a slave's receive limit has 2 * maxMessageSize + 1 MiB over its batch size).
RUNT_DIVISOR = 4
RUNT_MAX_BYTES = 1024 * 1024


def runt_allowance(batch_size: int) -> int:
    """How far past `batch_size` a chunk may reach to take everything readable."""
    return min(batch_size // RUNT_DIVISOR, RUNT_MAX_BYTES)


# The chunk's checksum is computed by both ends of every chunk, over every replicated byte:
# google-crc32c's compiled code (SSE4.2's crc32 instruction where the CPU has it) is 20-55 times
# faster than crcmod's table (docs/benchmarks.md, "The put path, fifth round: the slave").
# Its pure-Python fallback (when its extension cannot load) is far slower than crcmod, which then
# computes the same value.
crcmod_crc32c: Callable[[bytes], int] = crcmod.predefined.mkCrcFun("crc-32c")
crc32c: Callable[[bytes], int] = google_crc32c.value if google_crc32c.implementation == "c" else crcmod_crc32c
"""CRC-32C (Castagnoli) of `data` (bytes), as `Chunk.checksum` carries it."""


class MalformedRecords(ValueError):
    """Bytes that cannot be CommitLog records (a bad TOTALSIZE or MAGICCODE): corruption on a
    master, a protocol error on a slave."""

    def __init__(self, position: int, reason: str) -> None:
        super().__init__(f"not a CommitLog record at byte {position} of the data: {reason}")
        self.position = position
        self.reason = reason


def whole_records(data: bytes | memoryview) -> int:
    """The length of the longest prefix of `data` made of whole records. A record whose header
    is cut short counts as incomplete; a complete header with a TOTALSIZE below 8 or an unknown
    MAGICCODE raises MalformedRecords."""
    size_of = _SIZE.unpack_from
    header_of = _SIZE_MAGIC.unpack_from
    end = len(data)
    pos = 0
    while end - pos >= 4:
        if end - pos >= 8:
            size, magic = header_of(data, pos)
            if magic != MESSAGE_MAGIC_CODE and magic != BLANK_MAGIC_CODE:
                raise MalformedRecords(pos, f"MAGICCODE {magic} is neither a message's nor a blank's")
        else:
            (size,) = size_of(data, pos)
        if size < MIN_RECORD_SIZE:
            raise MalformedRecords(pos, f"TOTALSIZE {size}")
        if size > end - pos:
            break
        pos += size
    return pos


def next_chunk(read: Callable[[int, int], bytes], offset: int, readable_end: int, batch_size: int) -> bytes:
    """The bytes a master sends from `offset` (a record boundary): whole records only, at most
    `batch_size` bytes, except that one record larger than `batch_size` goes whole, and that
    when everything readable is at most a quarter more than `batch_size` (`runt_allowance`) it
    goes as one chunk (a burst just over the batch, e.g. one put of 32 1 KiB messages against
    RocketMQ's 32 KiB default, would otherwise end in a runt chunk of a few records costing the
    slave a flush and a report of its own). b"" when no whole record is readable yet (or the bytes
    are gone: `read` returned nothing).

    `read(offset, size)` returns raw bytes from one segment, never past its end or past the
    readable data (`MessageStore.commit_log_data`); `readable_end` is where readable data ends
    (with write buffers it may cut a record, whose rest is not readable yet). A record that
    claims to reach past its segment raises MalformedRecords."""
    available = readable_end - offset
    if available <= 0:
        return b""
    # No runt chunk at the end of a burst: each chunk costs a send, a slave's append, flush and
    # report, so a tail of up to a quarter batch goes with the chunk before it.
    data = read(offset, available if available <= batch_size + runt_allowance(batch_size) else batch_size)
    if not data:
        return b""
    cut = whole_records(data)
    if cut:
        return data if cut == len(data) else data[:cut]
    if len(data) < MIN_RECORD_SIZE:
        if available < MIN_RECORD_SIZE:
            return b""
        data = read(offset, MIN_RECORD_SIZE)
        if len(data) < MIN_RECORD_SIZE:
            raise MalformedRecords(0, f"{len(data)} bytes left before the segment ends at offset {offset + len(data)}")
        whole_records(data)  # the header's sanity
    (size,) = _SIZE.unpack_from(data, 0)
    if size > available:
        return b""
    record = read(offset, size)
    if len(record) < size:
        if not record:
            return b""
        raise MalformedRecords(0, f"TOTALSIZE {size} at offset {offset} reaches past its segment")
    return record


def intact_prefix(data: bytes, start_offset: int, check_below: int) -> tuple[int, CorruptMessage | None]:
    """How many leading bytes of `data` (whole records from CommitLog offset `start_offset`, as
    `next_chunk` cut them) may be shipped, and why not more: the error of the first record that
    starts below `check_below` and fails its checks (None when none does). Records at or past
    `check_below` are not read."""
    end = len(data)
    pos = 0
    while pos < end and start_offset + pos < check_below:
        try:
            record = check_record(data, pos, end, start_offset + pos)
        except CorruptMessage as exc:
            return pos, exc
        if not record.size:  # zeros: not a record (next_chunk never cuts these)
            return pos, CorruptMessage(start_offset + pos, "zeros where a record must start")
        pos += record.size
    return end, None


# -- the slave's side ----------------------------------------------------------------------------------


class ChunkVerdict(enum.Enum):
    OK = "OK"
    HEARTBEAT = "HEARTBEAT"
    WRONG_OFFSET = "WRONG_OFFSET"
    BAD_CHECKSUM = "BAD_CHECKSUM"
    SEGMENT_SIZE_MISMATCH = "SEGMENT_SIZE_MISMATCH"
    MASTER_OFFSET_BEHIND = "MASTER_OFFSET_BEHIND"
    CROSSES_SEGMENT = "CROSSES_SEGMENT"
    PARTIAL_RECORD = "PARTIAL_RECORD"
    MALFORMED_RECORD = "MALFORMED_RECORD"

    @property
    def acceptable(self) -> bool:
        return self is ChunkVerdict.OK or self is ChunkVerdict.HEARTBEAT


@dataclass(frozen=True, slots=True)
class ChunkCheck:
    verdict: ChunkVerdict
    # Empty when the chunk is acceptable; else why the stream must close.
    reason: str = ""
    # Where the slave's log ends once the chunk is appended.
    end_offset: int = 0

    @property
    def ok(self) -> bool:
        return self.verdict.acceptable


class SlaveStreamCheck:
    """A slave's checks of the chunks of one stream, before anything is appended.

    `log_end` is where the slave's CommitLog ends when the stream opens; `log_empty` says it has
    no bytes, so the first chunk may start at any segment start (an empty slave starts where its
    master's log starts). A chunk is acceptable when it starts at the expected end, its checksum
    matches, its segment size is the slave's, the master's max offset covers it, and it holds
    whole records inside one segment. After an acceptable chunk, `accepted(check)` moves the
    expected end (the caller calls it once the bytes are appended)."""

    def __init__(self, segment_size: int, log_end: int, log_empty: bool) -> None:
        if segment_size <= 0:
            raise ValueError(f"segment size must be positive, got {segment_size}")
        self.segment_size = segment_size
        self.expected_offset = log_end
        self._any_segment_start = log_empty

    def check(
        self, start_offset: int, data: bytes, checksum: int, segment_size: int, master_max_offset: int
    ) -> ChunkCheck:
        size = len(data)
        end = start_offset + size
        if segment_size != self.segment_size:
            return ChunkCheck(
                ChunkVerdict.SEGMENT_SIZE_MISMATCH,
                f"the master's segment size is {segment_size}, this slave's mappedFileSizeCommitLog is "
                f"{self.segment_size}; they must be equal",
            )
        if self._any_segment_start:
            if start_offset < 0 or start_offset % self.segment_size:
                return ChunkCheck(
                    ChunkVerdict.WRONG_OFFSET,
                    f"a chunk for the empty log starts at {start_offset}, not at a segment start "
                    f"(segment size {self.segment_size})",
                )
        elif start_offset != self.expected_offset:
            return ChunkCheck(
                ChunkVerdict.WRONG_OFFSET,
                f"a chunk starts at {start_offset} but this slave's log ends at {self.expected_offset}",
            )
        if crc32c(data) != checksum:
            return ChunkCheck(
                ChunkVerdict.BAD_CHECKSUM,
                f"the chunk of {size} bytes at {start_offset} fails its CRC-32C "
                f"(carried {checksum:#010x}, computed {crc32c(data):#010x})",
            )
        if master_max_offset < end:
            return ChunkCheck(
                ChunkVerdict.MASTER_OFFSET_BEHIND,
                f"the chunk ends at {end}, past the master's max offset {master_max_offset}",
            )
        if not size:
            return ChunkCheck(ChunkVerdict.HEARTBEAT, end_offset=self.expected_offset)
        if start_offset // self.segment_size != (end - 1) // self.segment_size:
            return ChunkCheck(
                ChunkVerdict.CROSSES_SEGMENT,
                f"the chunk {start_offset}..{end} crosses a segment end (segment size {self.segment_size})",
            )
        try:
            whole = whole_records(data)
        except MalformedRecords as exc:
            return ChunkCheck(ChunkVerdict.MALFORMED_RECORD, f"the chunk at {start_offset}: {exc}")
        if whole != size:
            return ChunkCheck(
                ChunkVerdict.PARTIAL_RECORD,
                f"the chunk at {start_offset} ends inside a record ({size - whole} bytes of it at "
                f"{start_offset + whole})",
            )
        return ChunkCheck(ChunkVerdict.OK, end_offset=end)

    def accepted(self, check: ChunkCheck) -> None:
        """Record that an OK chunk was appended: the next one starts where it ended."""
        if check.verdict is not ChunkVerdict.OK:
            return
        self.expected_offset = check.end_offset
        self._any_segment_start = False
