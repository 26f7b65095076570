"""IndexFiles (`<root>/index/`): message lookup by key, RocketMQ's IndexFile and IndexService.

Each file is named by its creation time, local time formatted `yyyyMMddHHmmssSSS`, and is exactly
`40 + 4 * hash_slot_num + 20 * index_num` bytes (defaults 5,000,000 slots and 20,000,000 entries:
420,000,040 bytes). Big-endian:

    header  (40 bytes)
        0   beginTimestamp   i64  store time (ms) of the first indexed message
        8   endTimestamp     i64  store time (ms) of the last indexed message
        16  beginPhyOffset   i64  CommitLog offset of the first indexed message
        24  endPhyOffset     i64  CommitLog offset of the last indexed message
        32  hashSlotCount    i32  slots in use
        36  indexCount       i32  next entry number; starts at 1, so entry 0 is never written
    slots   (hash_slot_num x 4 bytes)
        i32 number of the newest entry whose key hashes to this slot; 0 = empty
    entries (index_num x 20 bytes)
        0   keyHash          i32  abs(Java String.hashCode of `topic#key`), Integer.MIN_VALUE -> 0
        4   phyOffset        i64  CommitLog offset of the message
        12  timeDiff         i32  (storeTimestamp - beginTimestamp) / 1000, clamped to [0, 2^31-1]
        16  prevIndex        i32  previous entry in the same slot's chain; 0 = end

A key is found by walking its slot's chain newest first. Only the 32-bit hash is kept, so two keys
with the same hash (e.g. "Aa" and "BB") return each other's offsets: callers check the messages'
keys, as RocketMQ's query path does. A file is full when indexCount >= index_num (so it holds
index_num - 1 entries); the next put starts a new file whose header carries the previous file's
end offset and timestamp until its first entry sets them.

On top of the files, `IndexService` keeps the directory: it indexes a dispatched message's unique
key and KEYS, queries across files newest first, deletes files the CommitLog no longer covers and
drops, on an abnormal restart, files written after the checkpoint's indexMsgTimestamp.

Thread-safety: one writer (the dispatcher) calls `build_index` / `put_key`; any number of readers
query concurrently; one cleaner may call `delete_expired_files` and one flusher `flush`. A put
writes the whole entry, then the slot, then the header (indexCount last), so a slot never points at
a half-written entry: a reader may follow a slot to entry number indexCount (the put in flight,
complete already) and ignores anything beyond it. Readers pin a file while
they read it; closing a pinned file (expiry, shutdown) unmaps it when the last reader leaves.
The file list is an immutable tuple swapped under a lock, so readers iterate a snapshot lock-free.
"""

from __future__ import annotations

import logging
import mmap
import os
import re
import struct
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path

from ..clock import wall_clock_ms
from ..log.codec import java_string_hash
from ..log.mapped_file import create_file_atomically, mkdir_durable, reserve_blocks
from ..message import TRANSACTION_ROLLBACK_TYPE, transaction_type

log = logging.getLogger(__name__)

HEADER_SIZE = 40
HASH_SLOT_SIZE = 4
INDEX_ENTRY_SIZE = 20
INVALID_INDEX = 0
DEFAULT_HASH_SLOT_NUM = 5_000_000
DEFAULT_INDEX_NUM = 5_000_000 * 4
KEY_SEPARATOR = " "  # RocketMQ's MessageConst.KEY_SEPARATOR
INT32_MAX = 2**31 - 1
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

_DIFF_LIMIT_MS = (INT32_MAX + 1) * 1000  # a timeDiff from here on is clamped to INT32_MAX
_HEADER = struct.Struct(">qqqqii")
_ENTRY = struct.Struct(">iqii")
_I32 = struct.Struct(">i")
_NAME_RE = re.compile(r"^\d{17}$")
_NAME_TIME_FORMAT = "%Y%m%d%H%M%S"


# ---------------------------------------------------------------------------------------------
# Sans-IO: layout, keys, hashing, header and entry codecs, chain walks over any buffer


# What `IndexService.build_index_many` takes per message: topic, KEYS (the property, or the keys),
# unique key, CommitLog offset, store timestamp (ms).
IndexedMessage = tuple[str, "Iterable[str] | str | None", "str | None", int, int]


@dataclass(frozen=True, slots=True)
class IndexHeader:
    begin_timestamp: int = 0
    end_timestamp: int = 0
    begin_phy_offset: int = 0
    end_phy_offset: int = 0
    hash_slot_count: int = 0
    index_count: int = 1


@dataclass(frozen=True, slots=True)
class IndexEntry:
    key_hash: int
    phy_offset: int
    time_diff: int
    prev_index: int


def encode_header(header: IndexHeader) -> bytes:
    return _HEADER.pack(
        header.begin_timestamp,
        header.end_timestamp,
        header.begin_phy_offset,
        header.end_phy_offset,
        header.hash_slot_count,
        header.index_count,
    )


def decode_header(buf, offset: int = 0) -> IndexHeader:
    return IndexHeader(*_HEADER.unpack_from(buf, offset))


def encode_entry(entry: IndexEntry) -> bytes:
    return _ENTRY.pack(entry.key_hash, entry.phy_offset, entry.time_diff, entry.prev_index)


def decode_entry(buf, offset: int) -> IndexEntry:
    return IndexEntry(*_ENTRY.unpack_from(buf, offset))


def index_file_size(hash_slot_num: int, index_num: int) -> int:
    return HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE + index_num * INDEX_ENTRY_SIZE


def slot_position(slot: int) -> int:
    """Byte position of a hash slot."""
    return HEADER_SIZE + slot * HASH_SLOT_SIZE


def entry_position(hash_slot_num: int, index: int) -> int:
    """Byte position of entry number `index` (1-based in practice: entry 0 is never written)."""
    return HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE + index * INDEX_ENTRY_SIZE


def index_key(topic: str, key: str) -> str:
    return f"{topic}#{key}"


def key_hash(key: str) -> int:
    """RocketMQ's indexKeyHashMethod: Math.abs(key.hashCode()), whose one negative result
    (abs(Integer.MIN_VALUE) overflows to itself) becomes 0."""
    h = abs(java_string_hash(key))
    return 0 if h > INT32_MAX else h


# Java's hash of `topic#`, per topic: a key's hash goes on from its topic's (a bounded number).
_topic_prefix_hashes: dict[str, int] = {}


def topic_prefix_hash(topic: str) -> int:
    """Java's hash of `topic#`, the start every key's hash in the topic goes on from."""
    prefix = _topic_prefix_hashes.get(topic)
    if prefix is None:
        prefix = java_string_hash(index_key(topic, ""))
        if len(_topic_prefix_hashes) < 4096:
            _topic_prefix_hashes[topic] = prefix
    return prefix


def topic_key_hash(topic: str, key: str) -> int:
    """`key_hash(index_key(topic, key))`, without hashing the topic's characters again for every
    key (Java's hash of a concatenation goes on from the hash of its beginning)."""
    h = abs(java_string_hash(key, topic_prefix_hash(topic)))
    return 0 if h > INT32_MAX else h


def slot_of(hash_: int, hash_slot_num: int) -> int:
    return hash_ % hash_slot_num


def time_diff_seconds(store_timestamp_ms: int, begin_timestamp_ms: int) -> int:
    """The entry's timeDiff: whole seconds since the file's beginTimestamp. RocketMQ stores 0 while
    the file has no beginTimestamp, and clamps into an i32 (a clock that went backwards gives 0)."""
    if begin_timestamp_ms <= 0:
        return 0
    delta = store_timestamp_ms - begin_timestamp_ms
    if delta <= 0:
        return 0
    return min(delta // 1000, INT32_MAX)


def split_keys(keys_property: str | None) -> list[str]:
    """The KEYS property's keys: split on single spaces, empty pieces dropped (Java's
    String.split(" ") followed by RocketMQ's `key.length() > 0`)."""
    if not keys_property:
        return []
    return [k for k in keys_property.split(KEY_SEPARATOR) if k]


def iter_chain(buf, hash_slot_num: int, index_count: int, hash_: int) -> Iterator[IndexEntry]:
    """The entries in `hash_`'s slot chain, newest first. A slot may name entry `index_count`: the
    writer fills an entry before pointing the slot at it and publishes the count last, so a reader
    between the two must still follow the slot or it would lose the whole chain for a moment (as
    RocketMQ, which rejects only slots past the count). A link that does not go strictly backwards
    ends the walk; RocketMQ only checks self-loops, and a longer cycle in a damaged file would spin
    forever."""
    if index_count <= 1:
        return
    index = _I32.unpack_from(buf, slot_position(slot_of(hash_, hash_slot_num)))[0]
    if index <= INVALID_INDEX or index > index_count:
        return
    while True:
        entry = IndexEntry(*_ENTRY.unpack_from(buf, entry_position(hash_slot_num, index)))
        yield entry
        prev = entry.prev_index
        if prev <= INVALID_INDEX or prev >= index:
            return
        index = prev


def select_from(
    buf,
    hash_slot_num: int,
    index_count: int,
    begin_timestamp: int,
    hash_: int,
    max_num: int,
    begin_ms: int,
    end_ms: int,
) -> list[int]:
    """RocketMQ's selectPhyOffset over a buffer: offsets of entries with this hash whose time lies
    in [begin_ms, end_ms], newest first, at most max_num. The walk stops at the first entry older
    than begin_ms, since a chain runs backwards in store time."""
    found: list[int] = []
    if max_num <= 0:
        return found
    for entry in iter_chain(buf, hash_slot_num, index_count, hash_):
        if entry.time_diff < 0:  # never written by a put: a damaged entry ends the chain
            break
        time_read = begin_timestamp + entry.time_diff * 1000
        if entry.key_hash == hash_ and begin_ms <= time_read <= end_ms:
            found.append(entry.phy_offset)
            if len(found) >= max_num:
                break
        if time_read < begin_ms:
            break
    return found


def index_file_name(timestamp_ms: int) -> str:
    """`yyyyMMddHHmmssSSS` in local time, as RocketMQ's UtilAll.timeMillisToHumanString."""
    seconds, millis = divmod(timestamp_ms, 1000)
    return time.strftime(_NAME_TIME_FORMAT, time.localtime(seconds)) + f"{millis:03d}"


def next_index_file_name(timestamp_ms: int, last_name: str | None) -> str:
    """A name for a new file that sorts after `last_name`. Several files can be created in one
    millisecond (tiny test files; a burst of keys) and local time can step back (DST, NTP), and
    the directory order is the file order, so a name that would not sort last becomes the last
    name plus one millisecond."""
    name = index_file_name(timestamp_ms)
    if last_name is None or name > last_name:
        return name
    last = datetime.strptime(last_name[:14], _NAME_TIME_FORMAT) + timedelta(milliseconds=int(last_name[14:]) + 1)
    return last.strftime(_NAME_TIME_FORMAT) + f"{last.microsecond // 1000:03d}"


def _check_geometry(hash_slot_num: int, index_num: int) -> int:
    if hash_slot_num < 1:
        raise ValueError(f"hash_slot_num must be >= 1, not {hash_slot_num}")
    if index_num < 2:
        raise ValueError(f"index_num must be >= 2 (entry 0 is never used), not {index_num}")
    size = index_file_size(hash_slot_num, index_num)
    if size > INT32_MAX:
        # RocketMQ sizes the file with an int: a bigger file could not be opened by it.
        raise ValueError(
            f"an IndexFile of {hash_slot_num} slots and {index_num} entries is {size} bytes; max {INT32_MAX}"
        )
    return size


# ---------------------------------------------------------------------------------------------
# One file


_RESERVE_STEP = 1 << 20


class IndexFile:
    """One memory-mapped IndexFile. The header fields live both in the mapping and in attributes:
    readers use the attributes, which only change after the bytes they describe are written."""

    def __init__(self, path: Path, hash_slot_num: int, index_num: int, fd: int, header: IndexHeader) -> None:
        self.path = path
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.file_size = index_file_size(hash_slot_num, index_num)
        self._fd = fd
        self._buf = mmap.mmap(fd, self.file_size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        # Hash slots and entries are written and read at random: readahead would only grow the
        # page-cache folios each small write dirties, and every flush would write them whole
        # (see store/mapped_file.py).
        self._buf.madvise(mmap.MADV_RANDOM)
        self.begin_timestamp = header.begin_timestamp
        self.end_timestamp = header.end_timestamp
        self.begin_phy_offset = header.begin_phy_offset
        self.end_phy_offset = header.end_phy_offset
        self.hash_slot_count = header.hash_slot_count
        self.index_count = header.index_count
        self._dirty = True  # not known durable until the first flush
        # Blocks are reserved up to here; a mapped write beyond reserved blocks on a full disk
        # would be SIGBUS. Reopened files are taken as reserved up to their last entry.
        self._reserved_end = entry_position(hash_slot_num, max(1, header.index_count))
        self._pin_lock = threading.Lock()
        self._pins = 0
        self._available = True

    # -- lifecycle ---------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        directory: Path,
        name: str,
        hash_slot_num: int = DEFAULT_HASH_SLOT_NUM,
        index_num: int = DEFAULT_INDEX_NUM,
        *,
        end_phy_offset: int = 0,
        end_timestamp: int = 0,
    ) -> "IndexFile":
        """A new, empty file. `end_phy_offset` / `end_timestamp` are the previous file's ends: the
        new header starts from them (RocketMQ's constructor), so the re-index check and time
        matching hold across a roll before the first put. Created under a `.tmp` name with its
        blocks reserved, then renamed: a crash never leaves a short file, and a full disk fails
        here rather than as SIGBUS on a write through the mapping."""
        size = _check_geometry(hash_slot_num, index_num)
        path = directory / name
        if path.exists():
            raise FileExistsError(f"index file {path} already exists")
        header = IndexHeader(
            begin_timestamp=max(end_timestamp, 0),
            end_timestamp=max(end_timestamp, 0),
            begin_phy_offset=max(end_phy_offset, 0),
            end_phy_offset=max(end_phy_offset, 0),
        )
        # Header and slots are reserved now, entries as they come (`put_key`): a default file is
        # 420 MB, most of it entries that a quiet broker never writes.
        fd = create_file_atomically(path, size, reserve=entry_position(hash_slot_num, 1), head=encode_header(header))
        index_file = cls(path, hash_slot_num, index_num, fd, header)
        index_file._dirty = False
        return index_file

    @classmethod
    def open(
        cls, path: Path, hash_slot_num: int = DEFAULT_HASH_SLOT_NUM, index_num: int = DEFAULT_INDEX_NUM
    ) -> "IndexFile":
        """An existing file. ValueError when its size does not match the geometry (a changed
        maxHashSlotNum / maxIndexNum would misplace every slot) or its header is impossible."""
        size = _check_geometry(hash_slot_num, index_num)
        actual = path.stat().st_size
        if actual != size:
            raise ValueError(
                f"index file {path} is {actual} bytes; {hash_slot_num} slots and {index_num} entries make {size}"
            )
        fd = os.open(path, os.O_RDWR)
        try:
            header = decode_header(os.pread(fd, HEADER_SIZE, 0))
            if header.index_count <= 0:
                # Never published a put (RocketMQ writes the count with the first one).
                header = replace(header, index_count=1)
            if header.index_count > index_num:
                raise ValueError(f"index file {path} claims {header.index_count} entries; it has room for {index_num}")
            return cls(path, hash_slot_num, index_num, fd, header)
        except BaseException:
            os.close(fd)
            raise

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def is_available(self) -> bool:
        return self._available

    def close(self) -> None:
        """Unmap now, or when the last reader that pinned the file leaves."""
        with self._pin_lock:
            if not self._available:
                return
            self._available = False
            if self._pins == 0:
                self._unmap()

    def destroy(self) -> None:
        """Close and delete. Unlinking a file still mapped by a reader is safe on POSIX: the
        reader keeps the inode until it unpins."""
        self.close()
        self.path.unlink(missing_ok=True)

    def _pin(self) -> bool:
        with self._pin_lock:
            if not self._available:
                return False
            self._pins += 1
            return True

    def _unpin(self) -> None:
        with self._pin_lock:
            self._pins -= 1
            if self._pins == 0 and not self._available:
                self._unmap()

    def _unmap(self) -> None:
        self._buf.close()
        os.close(self._fd)
        self._fd = -1

    # -- header --------------------------------------------------------------------------------

    def header(self) -> IndexHeader:
        return IndexHeader(
            self.begin_timestamp,
            self.end_timestamp,
            self.begin_phy_offset,
            self.end_phy_offset,
            self.hash_slot_count,
            self.index_count,
        )

    @property
    def is_dirty(self) -> bool:
        """Whether puts happened since the last flush began."""
        return self._dirty

    @property
    def is_write_full(self) -> bool:
        return self.index_count >= self.index_num

    @property
    def entry_count(self) -> int:
        return self.index_count - 1

    def is_time_matched(self, begin_ms: int, end_ms: int) -> bool:
        """Whether [begin_ms, end_ms] overlaps [beginTimestamp, endTimestamp] (RocketMQ's test,
        which also matches a range strictly containing the file's)."""
        b, e = self.begin_timestamp, self.end_timestamp
        return (begin_ms < b and end_ms > e) or (b <= begin_ms <= e) or (b <= end_ms <= e)

    # -- writes --------------------------------------------------------------------------------

    def put_key(self, key: str, phy_offset: int, store_timestamp_ms: int) -> bool:
        """Index `key` (already `topic#key`); False when the file is full."""
        return self.put_hashes((key_hash(key),), (phy_offset,), (store_timestamp_ms,)) == 1

    def put_hashes(
        self, hashes: Sequence[int], phy_offsets: Sequence[int], timestamps: Sequence[int], start: int = 0
    ) -> int:
        """Entries for keys whose hashes (`key_hash` of `topic#key`) are given, from position
        `start` of the three sequences on, as many as fit: what `put_key` writes for each, in
        order. Returns how many were written (fewer when the file fills up). Each entry is written
        whole, then its slot, then published to readers (`index_count`, after a first entry's
        begin), one entry at a time: a reader racing a call of many entries (a dispatch round's)
        never meets a slot that names an entry beyond the count it bounds its walk by, except the
        one entry in flight, so it never loses a chain's older entries. The mapped header, with
        the count a restart reads, is written once at the end. ValueError for a hash, offset or
        timestamp out of range (the entries before it are kept)."""
        if not self._pin():
            raise ValueError(f"index file {self.path} is closed")
        try:
            count = first_count = self.index_count
            n = min(len(hashes) - start, self.index_num - count)
            if n <= 0:
                return 0
            slots = self.hash_slot_num
            end_pos = entry_position(slots, count + n)
            if end_pos > self._reserved_end:
                step = max(_RESERVE_STEP, end_pos - self._reserved_end)
                self._reserved_end = reserve_blocks(
                    self._fd, self._reserved_end, min(step, self.file_size - self._reserved_end)
                )
            buf = self._buf
            read_slot, write_slot, write_entry = _I32.unpack_from, _I32.pack_into, _ENTRY.pack_into
            entry_pos = entry_position(slots, count)
            begin_ts, begin_phy, used = self.begin_timestamp, self.begin_phy_offset, self.hash_slot_count
            end_phy, end_ts = self.end_phy_offset, self.end_timestamp
            try:
                for i in range(start, start + n):
                    hash_, phy, ts = hashes[i], phy_offsets[i], timestamps[i]
                    if not (0 <= hash_ <= INT32_MAX and 0 <= phy <= INT64_MAX and INT64_MIN <= ts <= INT64_MAX):
                        raise ValueError(f"key hash {hash_} / phy_offset {phy} / store timestamp {ts} out of range")
                    slot_pos = HEADER_SIZE + hash_ % slots * HASH_SLOT_SIZE
                    prev = read_slot(buf, slot_pos)[0]
                    if prev <= INVALID_INDEX or prev >= count:
                        prev = INVALID_INDEX  # empty, or left by a put the header never published
                        used += 1
                    if count <= 1:
                        # RocketMQ computes the first entry's timeDiff from the begin the header had
                        # before it (the previous file's end), then moves begin to this entry: the
                        # entry then reads as later than it was stored. It becomes the begin, so its
                        # diff is 0 here.
                        diff = 0
                        begin_ts, begin_phy = ts, phy
                        self.begin_timestamp, self.begin_phy_offset = ts, phy  # before the count
                    elif begin_ts <= 0 or ts <= begin_ts:
                        diff = 0  # time_diff_seconds, inlined: this loop runs per entry
                    else:
                        diff = (ts - begin_ts) // 1000 if ts - begin_ts < _DIFF_LIMIT_MS else INT32_MAX
                    write_entry(buf, entry_pos, hash_, phy, diff, prev)
                    write_slot(buf, slot_pos, count)
                    end_phy, end_ts = phy, ts
                    entry_pos += INDEX_ENTRY_SIZE
                    count += 1
                    self.index_count = count
            finally:
                if count > first_count:
                    self.begin_timestamp, self.begin_phy_offset, self.hash_slot_count = begin_ts, begin_phy, used
                    self.end_phy_offset, self.end_timestamp = end_phy, end_ts
                    _HEADER.pack_into(buf, 0, begin_ts, end_ts, begin_phy, end_phy, used, count)
                    self._dirty = True
            return n
        finally:
            self._unpin()

    def flush(self) -> bool:
        """fdatasync the file (a MAP_SHARED mapping's pages are the page cache's); True when there
        was anything to sync. The dirty mark is cleared first, so a put racing the sync marks the
        file again rather than being taken for durable."""
        if not self._dirty or not self._pin():
            return False
        try:
            self._dirty = False
            os.fdatasync(self._fd)
            return True
        except BaseException:
            self._dirty = True
            raise
        finally:
            self._unpin()

    # -- reads ---------------------------------------------------------------------------------

    def select_phy_offsets(self, key: str, max_num: int, begin_ms: int, end_ms: int) -> list[int]:
        """Offsets indexed under `key` (already `topic#key`), stored within [begin_ms, end_ms]
        (to the second the file keeps), newest first, at most max_num. May include offsets of a
        different key with the same hash."""
        if max_num <= 0 or not self._pin():
            return []
        try:
            # Count before begin: a put publishes begin before the count that makes it visible.
            count = self.index_count
            return select_from(
                self._buf,
                self.hash_slot_num,
                count,
                self.begin_timestamp,
                key_hash(key),
                max_num,
                begin_ms,
                end_ms,
            )
        finally:
            self._unpin()

    def contains(self, key: str, phy_offset: int) -> bool:
        """Whether an entry with `key`'s hash and this offset exists. Walks only the entries at or
        after `phy_offset` (a chain runs backwards in CommitLog order when filled by IndexService)."""
        if not self._pin():
            return False
        try:
            hash_ = key_hash(key)
            for entry in iter_chain(self._buf, self.hash_slot_num, self.index_count, hash_):
                if entry.phy_offset < phy_offset:
                    return False
                if entry.key_hash == hash_ and entry.phy_offset == phy_offset:
                    return True
            return False
        finally:
            self._unpin()

    def __repr__(self) -> str:
        return f"IndexFile({self.path.name}, entries={self.entry_count}/{self.index_num - 1})"


# ---------------------------------------------------------------------------------------------
# The directory of files


class IndexService:
    """`<root>/index/`: the IndexFiles oldest first, the last one taking new entries."""

    def __init__(
        self,
        store_path_root: Path | str,
        *,
        hash_slot_num: int = DEFAULT_HASH_SLOT_NUM,
        index_num: int = DEFAULT_INDEX_NUM,
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        _check_geometry(hash_slot_num, index_num)
        self.directory = Path(store_path_root) / "index"
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self._clock_ms = clock_ms or wall_clock_ms
        self._files: tuple[IndexFile, ...] = ()
        self._list_lock = threading.Lock()  # serializes swaps of _files (roll vs expiry vs close)
        self._durable_timestamp = 0
        self._closed = False

    @property
    def files(self) -> tuple[IndexFile, ...]:
        return self._files

    # -- lifecycle ---------------------------------------------------------------------------

    def load(self, last_exit_ok: bool, index_msg_timestamp: int = 0) -> int | None:
        """Open the directory's files in name order. After an abnormal exit, a file whose
        endTimestamp passes the checkpoint's indexMsgTimestamp may hold entries that never reached
        the disk, so it is deleted (RocketMQ's rule). Returns the lowest beginPhyOffset of the
        deleted files (None when none went): the CommitLog offset from which messages must be
        dispatched to `build_index` again, which skips what the kept files already hold.
        ValueError when a file does not match the geometry."""
        mkdir_durable(self.directory)
        loaded: list[IndexFile] = []
        reindex_from: int | None = None
        try:
            for path in sorted(self.directory.iterdir()):
                if path.name.endswith(".tmp") and _NAME_RE.match(path.name[:-4]):
                    path.unlink(missing_ok=True)  # a creation the process did not finish
                    continue
                if not _NAME_RE.match(path.name) or not path.is_file():
                    log.warning("ignoring %s: not an index file name", path)
                    continue
                index_file = IndexFile.open(path, self.hash_slot_num, self.index_num)
                if not last_exit_ok and index_file.end_timestamp > index_msg_timestamp:
                    log.warning(
                        "deleting index file %s: written up to %d, past the checkpoint's %d",
                        path,
                        index_file.end_timestamp,
                        index_msg_timestamp,
                    )
                    begin = index_file.begin_phy_offset
                    reindex_from = begin if reindex_from is None else min(reindex_from, begin)
                    index_file.destroy()
                    continue
                loaded.append(index_file)
        except BaseException:
            for index_file in loaded:
                index_file.close()
            raise
        with self._list_lock:
            self._files = tuple(loaded)
        return reindex_from

    def flush(self) -> int:
        """fdatasync every file with unsynced entries. Returns the indexMsgTimestamp the checkpoint
        may record: the endTimestamp of the newest full file now durable (0 if none). Only full
        files count, as in RocketMQ: `load` after a crash deletes every file ending past the
        recorded value, so recording a partly-written file's end would keep that file with its
        unsynced tail and no re-dispatch covering it."""
        for index_file in self._files:
            full = index_file.is_write_full
            end = index_file.end_timestamp
            index_file.flush()
            if full and not index_file.is_dirty:
                self._durable_timestamp = max(self._durable_timestamp, end)
        return self._durable_timestamp

    def close(self) -> None:
        self.flush()
        with self._list_lock:
            self._closed = True
            files, self._files = self._files, ()
        for index_file in files:
            index_file.close()

    def destroy(self) -> None:
        with self._list_lock:
            self._closed = True
            files, self._files = self._files, ()
        for index_file in files:
            index_file.destroy()

    # -- writes (the dispatcher) ------------------------------------------------------------------

    def build_index(
        self,
        topic: str,
        keys: Iterable[str] | str | None,
        uniq_key: str | None,
        phy_offset: int,
        store_timestamp_ms: int,
        *,
        sys_flag: int = 0,
    ) -> int:
        """Index a dispatched message under `topic#uniq_key` and `topic#key` for each key (a str is
        taken as the KEYS property and split). Returns how many entries were written.

        Skipped, as RocketMQ does: rolled-back transactional messages, and messages below the
        newest file's endPhyOffset (indexed before a restart re-dispatched them). The message at
        exactly endPhyOffset is the one RocketMQ indexes twice on re-dispatch; here each of its
        keys already present is skipped instead, so a replay adds nothing and a message cut off
        mid-way by a crash gets its missing keys."""
        if transaction_type(sys_flag) == TRANSACTION_ROLLBACK_TYPE:
            return 0
        return self.build_index_many(((topic, keys, uniq_key, phy_offset, store_timestamp_ms),))

    def build_index_many(self, messages: Iterable[IndexedMessage]) -> int:
        """`build_index` for messages in CommitLog order (none a rolled-back transaction message:
        the caller leaves those out), all in one write: one pin and one header update for a
        dispatch round instead of one per message. Returns how many entries were written."""
        # Read before any new file is made (a new file would carry the same endPhyOffset): a
        # replay after a full file must not create an empty one.
        files = self._files
        end_phy_offset = files[-1].end_phy_offset if files else 0
        hashes: list[int] = []
        phy_offsets: list[int] = []
        timestamps: list[int] = []
        topic_hash = java_string_hash
        last_topic, prefix = None, 0
        for topic, keys, uniq_key, phy_offset, store_timestamp_ms in messages:
            if phy_offset < end_phy_offset:
                continue
            # split_keys and topic_key_hash, inlined: this loop runs per message of every round.
            names = keys.split(KEY_SEPARATOR) if isinstance(keys, str) else list(keys) if keys else []
            if uniq_key:
                names.insert(0, uniq_key)
            if "" in names:
                names = [k for k in names if k]
            if len(names) > 1:
                # A key named twice (KEYS "a a", or equal to the unique key) is indexed once;
                # RocketMQ writes it twice and a query then returns the message twice.
                names = list(dict.fromkeys(names))
            if phy_offset == end_phy_offset:
                # Decided before writing anything: this message's own new entries must not pass
                # for earlier ones (two of its keys may share a hash).
                names = [k for k in names if not self._already_indexed(index_key(topic, k), phy_offset)]
            if topic != last_topic:
                last_topic, prefix = topic, topic_prefix_hash(topic)
            for name in names:
                h = abs(topic_hash(name, prefix))
                hashes.append(0 if h > INT32_MAX else h)
            phy_offsets += [phy_offset] * len(names)
            timestamps += [store_timestamp_ms] * len(names)
        if not hashes:
            return 0  # nothing to index: no need to create (420 MB of) file for it
        return self.put_hashes(hashes, phy_offsets, timestamps)

    def put_hashes(self, hashes: Sequence[int], phy_offsets: Sequence[int], timestamps: Sequence[int]) -> int:
        """Entries for keys whose hashes (`key_hash` of `topic#key`) are given, in CommitLog
        order, into the newest file and new ones as files fill: what `build_index` writes for
        them, without its per-message decisions (rolled-back transactions, re-dispatched messages,
        a key named twice), which the caller has made. For a bulk build alone with the files (see
        `IndexFile.put_hashes`; `build_index` hands it one message's keys). Returns how many were
        written (all of them)."""
        done = 0
        while done < len(hashes):
            index_file = self._writable_file()
            done += index_file.put_hashes(hashes, phy_offsets, timestamps, done)
            if done < len(hashes):
                log.info("index file %s is full; starting another", index_file.path)
        return done

    def _writable_file(self) -> IndexFile:
        if self._closed:
            raise RuntimeError("IndexService is closed")
        files = self._files
        if files and not files[-1].is_write_full:
            return files[-1]
        previous = files[-1] if files else None
        mkdir_durable(self.directory)
        name = next_index_file_name(self._clock_ms(), previous.name if previous else None)
        index_file = IndexFile.create(
            self.directory,
            name,
            self.hash_slot_num,
            self.index_num,
            end_phy_offset=previous.end_phy_offset if previous else 0,
            end_timestamp=previous.end_timestamp if previous else 0,
        )
        # The full file is synced by the next flush() (the store's flush service), not here: an
        # fdatasync of hundreds of MB would stall the dispatcher.
        with self._list_lock:
            self._files = self._files + (index_file,)
        return index_file

    def _already_indexed(self, idx_key: str, phy_offset: int) -> bool:
        # Only files ending at phy_offset can hold it; files are in CommitLog order, so the walk
        # stops at the first file that begins below it.
        for index_file in reversed(self._files):
            if index_file.end_phy_offset < phy_offset:
                break
            if index_file.contains(idx_key, phy_offset):
                return True
            if index_file.begin_phy_offset < phy_offset:
                break
        return False

    # -- reads (any thread) -----------------------------------------------------------------------

    def query_offsets(self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int) -> list[int]:
        """CommitLog offsets of messages indexed under `key` in `topic`, stored within
        [begin_ms, end_ms], newest first, at most max_num (RocketMQ also caps it with
        maxMsgsNumBatch: the caller's job). Offsets of other keys with the same hash may appear."""
        found: list[int] = []
        if max_num <= 0:
            return found
        idx_key = index_key(topic, key)
        for index_file in reversed(self._files):
            if index_file.is_time_matched(begin_ms, end_ms):
                found += index_file.select_phy_offsets(idx_key, max_num - len(found), begin_ms, end_ms)
            # Older files end before this one begins: none can reach begin_ms.
            if index_file.begin_timestamp < begin_ms or len(found) >= max_num:
                break
        return found

    @property
    def last_update_timestamp(self) -> int:
        """endTimestamp of the newest file (QueryOffsetResult.indexLastUpdateTimestamp)."""
        files = self._files
        return files[-1].end_timestamp if files else 0

    @property
    def last_update_phy_offset(self) -> int:
        """endPhyOffset of the newest file (QueryOffsetResult.indexLastUpdatePhyoffset)."""
        files = self._files
        return files[-1].end_phy_offset if files else 0

    # -- expiry (the clean service) ---------------------------------------------------------------

    def truncate_past(self, commit_log_end: int) -> int | None:
        """Drop the newest files that index a message at or past `commit_log_end` (the CommitLog
        was cut there at recovery): otherwise their endPhyOffset would make `build_index` skip the
        messages later written into the cut range. Returns the lowest beginPhyOffset dropped, from
        where re-dispatch rebuilds them, or None when nothing went. Runs before dispatch starts."""
        rebuild_from = None
        with self._list_lock:
            files = list(self._files)
            dropped = []
            while files and files[-1].entry_count > 0 and files[-1].end_phy_offset >= commit_log_end:
                dropped.append(files.pop())
            self._files = tuple(files)
        for index_file in dropped:
            log.info("dropping index file %s: it indexes past the CommitLog's end %d", index_file.path, commit_log_end)
            rebuild_from = index_file.begin_phy_offset
            index_file.destroy()
        return rebuild_from

    def delete_expired_files(self, commit_log_min_offset: int) -> int:
        """Delete the oldest files whose endPhyOffset is below the CommitLog's first offset, in
        order, never the newest (it takes the next entries). Returns how many went."""
        with self._list_lock:
            files = self._files
            expired: list[IndexFile] = []
            for index_file in files[:-1]:
                if index_file.end_phy_offset >= commit_log_min_offset:
                    break
                expired.append(index_file)
            if not expired:
                return 0
            self._files = files[len(expired) :]
        for index_file in expired:
            log.info("deleting expired index file %s (ends at %d)", index_file.path, index_file.end_phy_offset)
            index_file.destroy()
        return len(expired)
