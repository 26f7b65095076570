"""One fixed-size, memory-mapped CommitLog segment (RocketMQ's MappedFile).

On disk: a file named by the CommitLog offset of its first byte, 20 digits zero-padded, exactly
`file_size` bytes, blocks reserved at creation (so a full disk shows up as a failed creation, not
as SIGBUS on a write through the mapping). With a `reserve_step` (ConsumeQueue files), the file is
created sparse and blocks are reserved `reserve_step` bytes at a time ahead of the writes
(`ensure_reserved`): a queue with one message costs one step of disk, not a whole file, and a full
disk still fails at a reservation, before the write. It is created under a `.tmp` name and renamed, so a
crash never leaves a short segment behind.

Positions, each relative to the segment start: `wrote_position` (bytes appended), `committed_position`
(bytes in the page cache; equal to wrote unless a transient write buffer is in use) and
`flushed_position` (bytes known durable). Appends write a record's TOTALSIZE last, so a process
killed in the middle of an append leaves zeros where a scan looks first: the record does not exist.

Page-cache advice: the part of a mapping that appends will write is advised MADV_RANDOM. With the
kernel's default readahead, write faults deep into a sequentially written file come back as large
page-cache folios (2 MiB here), and dirtying one byte of a folio makes the next fdatasync write all
of it: past the first 32 MiB of a segment, each 1 KiB append plus fdatasync wrote 2 MiB to the disk
(4 KiB with the advice; measured with /proc/self/io). Readahead stays on for what is read back: a
segment opened from disk keeps the default advice (recovery scans it cold, 10x faster with
readahead) until appends resume in it, and a full segment gets the default advice back.

Appends of a page or more are written with `pwrite`, not copied into the mapping (the mapping
and the file share the page cache, so readers see them the same): a store through the mapping
takes a page fault per page on every append after an fdatasync (the flush write-protects the
pages again): at 37 KB per append (a 32-message batch of 1 KiB, a slave's chunk) the write took
43 us of CPU through the mapping against 14 us with `pwrite`, and the append plus its fdatasync
256 us of wall time against 216, for the same bytes to the disk (`bench.append_cost_bench`);
below a page the two cost the same, and the mapping is kept there.

Thread-safety: one appender at a time (the CommitLog lock); a flusher and a committer may run
concurrently with it, each reading positions that only grow. fdatasync releases the GIL.
"""

from __future__ import annotations

import errno
import mmap
import os
import struct
from pathlib import Path

from .codec import encode_blank

_I32 = struct.Struct(">i")
OS_PAGE_SIZE = 4096
# From this size on an append is written with pwrite rather than copied into the mapping (see
# the module docstring): below it the two cost the same.
PWRITE_MIN_BYTES = OS_PAGE_SIZE


def segment_name(offset: int) -> str:
    return f"{offset:020d}"


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_synced(path: Path, data: bytes, flags: int = os.O_TRUNC) -> None:
    """Write all of `data` to `path` (opened with `flags` beside O_WRONLY|O_CREAT; created mode
    600) and fsync it: on disk when this returns. Naming a new file durably is the caller's part
    (`fsync_dir`)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | flags, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_durably(path: Path, data: bytes, *, backup: Path | None = None) -> None:
    """Make `data` the content of `path`, all or nothing across a crash: written to `NAME.tmp`,
    fsynced, renamed over `path`, the directory fsynced. With `backup` (in the same directory),
    the current `path` is renamed to it first."""
    tmp = path.with_name(path.name + ".tmp")
    write_synced(tmp, data)
    if backup is not None:
        os.replace(path, backup)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def mkdir_durable(directory: Path) -> None:
    """Create `directory` and any missing parents, fsyncing the parent of each one created, so
    that a power loss cannot take away a directory whose files were fsynced."""
    missing = []
    path = Path(directory)
    while not path.exists():
        missing.append(path)
        path = path.parent
    for created in reversed(missing):
        try:
            created.mkdir(mode=0o700)
        except FileExistsError:
            continue
        fsync_dir(created.parent)


def reserve_blocks(fd: int, offset: int, length: int) -> int:
    """Reserve disk blocks for [offset, offset + length), so that a full disk fails here
    (OSError ENOSPC) rather than as SIGBUS on a write through a mapping. Returns the new reserved
    end. Filesystems that cannot reserve are left sparse."""
    if length > 0:
        try:
            os.posix_fallocate(fd, offset, length)
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                raise
    return offset + max(length, 0)


def create_file_atomically(path: Path, size: int, *, reserve: int, head: bytes = b"") -> int:
    """Create `path` of `size` bytes (zeros but `head` at 0, the first `reserve` bytes' blocks
    reserved) under a `.tmp` name, fsync it, rename it in place and fsync the directory: a crash
    never leaves a short or half-initialised file under the real name. Returns an O_RDWR fd."""
    if path.exists():
        raise FileExistsError(f"{path} already exists")
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.ftruncate(fd, size)
        reserve_blocks(fd, 0, reserve)
        if head:
            os.pwrite(fd, head, 0)
        os.fsync(fd)
        os.rename(tmp, path)
        fsync_dir(path.parent)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    return fd


def map_for_writing(fd: int, size: int) -> mmap.mmap:
    """A shared read-write mapping of `size` bytes of `fd`."""
    return mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)


class MappedFile:
    __slots__ = (
        "path",
        "file_from_offset",
        "file_size",
        "fd",
        "buf",
        "write_buffer",
        "wrote_position",
        "committed_position",
        "flushed_position",
        "store_timestamp_ms",
        "reserve_step",
        "reserved_end",
    )

    def __init__(
        self, path: Path, file_from_offset: int, file_size: int, fd: int, write_buffer: bytearray | None = None
    ):
        self.path = path
        self.file_from_offset = file_from_offset
        self.file_size = file_size
        self.fd = fd
        self.buf = map_for_writing(fd, file_size)
        self.write_buffer = write_buffer
        self.wrote_position = 0
        self.committed_position = 0
        self.flushed_position = 0
        self.store_timestamp_ms = 0
        # Fully reserved unless created or opened with a step (then reserved up to reserved_end).
        self.reserve_step = 0
        self.reserved_end = file_size

    # -- lifecycle ---------------------------------------------------------------------------

    @classmethod
    def create(
        cls, directory: Path, file_from_offset: int, file_size: int, *, warm: bool = False, reserve_step: int = 0
    ) -> "MappedFile":
        """Create a new, zero-filled segment crash-safely, its blocks all reserved or (with
        `reserve_step`) the first step of them. Raises OSError (e.g. ENOSPC)."""
        path = directory / segment_name(file_from_offset)
        reserved = min(reserve_step, file_size) if reserve_step > 0 else file_size
        fd = create_file_atomically(path, file_size, reserve=reserved)
        segment = cls(path, file_from_offset, file_size, fd)
        segment.advise_appends_from(0)
        if reserve_step > 0:
            segment.reserve_step = reserve_step
            segment.reserved_end = reserved
        if warm:
            segment.warm()
        return segment

    @classmethod
    def open(cls, path: Path, file_size: int, *, reserve_step: int = 0) -> "MappedFile":
        actual = path.stat().st_size
        if actual != file_size:
            raise ValueError(f"file {path} is {actual} bytes; the configured file size is {file_size}")
        fd = os.open(path, os.O_RDWR)
        segment = cls(path, int(path.name), file_size, fd)
        if reserve_step > 0:
            # Which blocks a sparse file holds is not worth a lookup: the next write reserves from
            # 0 again, and reserving blocks a file already has costs no space.
            segment.reserve_step = reserve_step
            segment.reserved_end = 0
        return segment

    def ensure_reserved(self, end: int) -> None:
        """Reserve blocks up to at least `end` (a step ahead) before bytes are written there.
        Raises OSError (ENOSPC) when the disk is full; nothing was written then."""
        if end <= self.reserved_end:
            return
        step = self.reserve_step or self.file_size
        target = min(self.file_size, max(end, self.reserved_end + step))
        self.reserved_end = reserve_blocks(self.fd, self.reserved_end, target - self.reserved_end)

    def warm(self) -> None:
        """Touch every page so the first appends do not fault (RocketMQ's warmMappedFile)."""
        buf = self.buf
        for pos in range(0, self.file_size, OS_PAGE_SIZE):
            buf[pos] = 0

    def close(self) -> None:
        if self.fd < 0:
            return
        try:
            self.buf.close()
        except BufferError:
            # A reader still holds a view; the mapping goes when the last view does.
            pass
        os.close(self.fd)
        self.fd = -1

    def destroy(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)

    # -- positions ---------------------------------------------------------------------------

    @property
    def end_offset(self) -> int:
        return self.file_from_offset + self.file_size

    @property
    def is_full(self) -> bool:
        return self.wrote_position >= self.file_size

    @property
    def read_position(self) -> int:
        """Bytes a reader may see: committed ones when a write buffer holds the rest."""
        return self.committed_position if self.write_buffer is not None else self.wrote_position

    def set_positions(self, position: int) -> None:
        self.wrote_position = self.committed_position = self.flushed_position = position
        if position < self.file_size:
            self.advise_appends_from(position)

    def advise_appends_from(self, position: int) -> None:
        """No readahead where appends will write (see the module docstring)."""
        start = position - position % mmap.PAGESIZE
        if start < self.file_size:
            self.buf.madvise(mmap.MADV_RANDOM, start, self.file_size - start)

    def advise_reads(self) -> None:
        """The segment is full: readahead again for whoever reads it back."""
        self.buf.madvise(mmap.MADV_NORMAL)

    # -- writes --------------------------------------------------------------------------------

    def append(self, data: bytes | bytearray | memoryview) -> int:
        """Copy `data` (whole records back to back) at the wrote position; return where it went.
        The first record's TOTALSIZE lands after every other byte, so a process killed in the
        middle leaves either the whole append or none of it visible to a scan. An append of a page
        or more goes through `pwrite` (see the module docstring); OSError when it fails (EIO), and
        the positions do not move then: nothing of it is visible."""
        pos = self.wrote_position
        n = len(data)
        view = memoryview(data)
        if self.write_buffer is None and n >= PWRITE_MIN_BYTES:
            self._pwrite_all(view[4:], pos + 4)
            self._pwrite_all(view[:4], pos)
            self.wrote_position = self.committed_position = pos + n
            return pos
        target: bytearray | mmap.mmap = self.write_buffer if self.write_buffer is not None else self.buf
        target[pos + 4 : pos + n] = view[4:]
        target[pos : pos + 4] = view[:4]
        self.wrote_position = pos + n
        if self.write_buffer is None:
            self.committed_position = pos + n
        return pos

    def append_blank(self) -> int:
        """Fill the rest of the segment with a blank end record; return its size."""
        pos = self.wrote_position
        remaining = self.file_size - pos
        header = encode_blank(remaining)
        target = self.write_buffer if self.write_buffer is not None else self.buf
        if remaining >= 8:
            target[pos + 4 : pos + 8] = header[4:8]
            target[pos : pos + 4] = header[:4]
        self.wrote_position = self.file_size
        if self.write_buffer is None:
            self.committed_position = self.file_size
        return remaining

    def write_at(self, position: int, data: bytes | memoryview) -> None:
        """Raw bytes at a position: used by replication and recovery, which place bytes that are
        already whole records."""
        self.buf[position : position + len(data)] = data

    def _pwrite_all(self, data: memoryview, position: int) -> None:
        while data:
            written = os.pwrite(self.fd, data, position)
            position += written
            data = data[written:]

    def zero_range(self, start: int, end: int) -> None:
        end = min(end, self.file_size)
        step = 4 << 20
        zeros = bytes(min(step, max(0, end - start)))
        for pos in range(start, end, step):
            stop = min(end, pos + step)
            self.buf[pos:stop] = zeros[: stop - pos]

    def commit(self, least_pages: int) -> bool:
        """Copy the write buffer's new bytes into the file; True when anything moved."""
        if self.write_buffer is None:
            return False
        wrote = self.wrote_position
        committed = self.committed_position
        if wrote <= committed or not self._enough(wrote, committed, least_pages):
            return False
        self._pwrite_all(memoryview(self.write_buffer)[committed:wrote], committed)
        self.committed_position = wrote
        return True

    def flush(self, least_pages: int) -> bool:
        """fdatasync when enough is dirty; True when the flushed position moved."""
        committed = self.committed_position
        flushed = self.flushed_position
        if committed <= flushed or not self._enough(committed, flushed, least_pages):
            return False
        os.fdatasync(self.fd)
        self.flushed_position = committed
        return True

    def _enough(self, high: int, low: int, least_pages: int) -> bool:
        if high >= self.file_size or least_pages <= 0:
            return True
        return high // OS_PAGE_SIZE - low // OS_PAGE_SIZE >= least_pages

    # -- reads ---------------------------------------------------------------------------------

    def read(self, position: int, size: int) -> bytes:
        end = min(position + size, self.read_position)
        return bytes(self.buf[position:end]) if position < end else b""
