"""The CommitLog's ordered segments (RocketMQ's MappedFileQueue), the allocator that creates the
next segment ahead of need, and the transient write-buffer pool.

On disk: `commitlog/` holds segments `00000000000000000000`, `00000000001073741824`, ... each
`file_size` bytes, contiguous. Leftover `*.tmp` files are unfinished creations and are removed.

Global offsets: `flushed_where` and `committed_where` are CommitLog offsets up to which bytes are
durable, resp. in the page cache. Thread-safety: the segment list is a tuple replaced as a whole
(copy-on-write), so readers need no lock; appends and truncation are serialised by the caller.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from .mapped_file import MappedFile, fsync_dir, mkdir_durable, segment_name

log = logging.getLogger(__name__)

_CREATE_TIMEOUT_S = 30.0


class SegmentLayoutError(Exception):
    """The segment files on disk are not a contiguous run of full-size segments."""


class TransientStorePool:
    """At most `size` write buffers of one segment each; none left means direct writes."""

    def __init__(self, size: int, buffer_size: int) -> None:
        self._free: list[bytearray] = []
        self._lent = 0
        self._size = size
        self._buffer_size = buffer_size
        self._lock = threading.Lock()

    def borrow(self) -> bytearray | None:
        with self._lock:
            if self._free:
                self._lent += 1
                return self._free.pop()
            if self._lent < self._size:
                self._lent += 1
                return bytearray(self._buffer_size)
            return None

    def give_back(self, buffer: bytearray) -> None:
        with self._lock:
            self._lent -= 1
            self._free.append(buffer)

    @property
    def available(self) -> int:
        with self._lock:
            return self._size - self._lent


class SegmentAllocator:
    """Creates segments on a background thread, one ahead of the one asked for, so that an append
    crossing into a new segment does not wait for file creation (RocketMQ's
    AllocateMappedFileService)."""

    def __init__(self, directory: Path, file_size: int, *, warm: bool = False) -> None:
        self._directory = directory
        self._file_size = file_size
        self._warm = warm
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="allocate-segment")
        self._pending: dict[int, Future[MappedFile]] = {}
        self._lock = threading.Lock()
        self._closed = False

    def _submit(self, offset: int) -> Future[MappedFile]:
        future = self._pending.get(offset)
        if future is None:
            future = self._executor.submit(MappedFile.create, self._directory, offset, self._file_size, warm=self._warm)
            self._pending[offset] = future
        return future

    def prepare(self, offset: int) -> None:
        """Start creating the segment at `offset` unless it is under way."""
        with self._lock:
            if not self._closed:
                self._submit(offset)

    def wait_prepared(self, offset: int, timeout_s: float) -> bool:
        """Block until the segment at `offset`, if under way, is created; True when it exists."""
        with self._lock:
            future = self._pending.get(offset)
        if future is not None:
            try:
                future.result(timeout_s)
            except Exception:
                return False
        return (self._directory / segment_name(offset)).exists()

    def get(self, offset: int) -> MappedFile:
        """The segment at `offset`, created now if it was not prepared; prepares the next one."""
        with self._lock:
            if self._closed:
                raise RuntimeError("segment allocator is shut down")
            future = self._submit(offset)
        try:
            segment = future.result(timeout=_CREATE_TIMEOUT_S)
        finally:
            with self._lock:
                self._pending.pop(offset, None)
        self.prepare(offset + self._file_size)
        return segment

    def shutdown(self) -> list[MappedFile]:
        """Stop; return segments created ahead that nobody took (the caller closes them)."""
        with self._lock:
            self._closed = True
            pending = list(self._pending.values())
            self._pending.clear()
        self._executor.shutdown(wait=True)
        leftovers = []
        for future in pending:
            if future.done() and future.exception() is None:
                leftovers.append(future.result())
        return leftovers


class MappedFileQueue:
    def __init__(
        self,
        directory: Path,
        file_size: int,
        *,
        allocator: SegmentAllocator | None = None,
        pool: TransientStorePool | None = None,
        reserve_step: int = 0,
    ) -> None:
        self.directory = directory
        self.file_size = file_size
        # 0: every file fully reserved at creation; otherwise sparse, reserved step by step.
        self.reserve_step = reserve_step
        self.allocator = allocator
        self.pool = pool
        self.files: tuple[MappedFile, ...] = ()
        self.flushed_where = 0
        self.committed_where = 0
        # Told how long each fdatasync that moved the flushed offset took, in microseconds.
        self.on_fsync: Callable[[int], None] | None = None

    # -- loading -------------------------------------------------------------------------------

    def load(self) -> None:
        """Open every segment on disk; each is taken as full until recovery says otherwise."""
        mkdir_durable(self.directory)
        for tmp in self.directory.glob("*.tmp"):
            log.warning("removing unfinished segment creation %s", tmp)
            tmp.unlink()
        names = sorted(p.name for p in self.directory.iterdir() if p.is_file())
        files: list[MappedFile] = []
        for name in names:
            if len(name) != 20 or not name.isdigit():
                raise SegmentLayoutError(f"unexpected file {self.directory / name} in the commitlog directory")
            offset = int(name)
            if offset % self.file_size:
                raise SegmentLayoutError(
                    f"segment {name} does not start at a multiple of mappedFileSizeCommitLog={self.file_size}"
                )
            if files and files[-1].end_offset != offset:
                raise SegmentLayoutError(f"segment {name} does not follow {files[-1].path.name}: a segment is missing")
            try:
                segment = MappedFile.open(self.directory / name, self.file_size, reserve_step=self.reserve_step)
            except ValueError as exc:
                raise SegmentLayoutError(str(exc)) from None
            segment.set_positions(self.file_size)
            files.append(segment)
        self.files = tuple(files)
        end = self.files[-1].end_offset if self.files else 0
        self.flushed_where = self.committed_where = end

    # -- lookup --------------------------------------------------------------------------------

    @property
    def last(self) -> MappedFile | None:
        files = self.files
        return files[-1] if files else None

    @property
    def min_offset(self) -> int:
        files = self.files
        return files[0].file_from_offset if files else 0

    @property
    def max_offset(self) -> int:
        """CommitLog offset one past the last byte appended."""
        last = self.last
        return last.file_from_offset + last.wrote_position if last else 0

    @property
    def max_read_offset(self) -> int:
        """CommitLog offset one past the last byte readers may see. With write buffers, segments
        are committed in order, so a segment written directly (the pool ran dry) becomes visible
        only once every buffered segment before it is committed."""
        if self.pool is not None:
            return self.committed_where
        last = self.last
        return last.file_from_offset + last.read_position if last else 0

    def find(self, offset: int) -> MappedFile | None:
        files = self.files
        if not files or offset < files[0].file_from_offset:
            return None
        index = (offset - files[0].file_from_offset) // self.file_size
        if index < len(files):
            return files[index]
        return None

    # -- appending -----------------------------------------------------------------------------

    def last_for_append(self, start_offset: int = 0) -> MappedFile:
        """The segment to append to, a new one when the last is full (or none exists, then at
        `start_offset` rounded down). Raises OSError when a segment cannot be created."""
        last = self.last
        if last is not None and not last.is_full:
            return last
        if last is not None:
            last.advise_reads()
        if last is None:
            offset = start_offset - start_offset % self.file_size
        else:
            offset = last.end_offset
        if self.allocator:
            segment = self.allocator.get(offset)
        else:
            segment = MappedFile.create(self.directory, offset, self.file_size, reserve_step=self.reserve_step)
        if self.pool is not None:
            segment.write_buffer = self.pool.borrow()
        self.files = self.files + (segment,)
        return segment

    def reset_to(self, offset: int) -> None:
        """Start an empty queue at `offset` (a slave starting from its master's position)."""
        if self.files:
            raise RuntimeError("reset_to is only for an empty CommitLog")
        self.flushed_where = self.committed_where = offset

    # -- commit and flush ----------------------------------------------------------------------

    def commit(self, least_pages: int) -> bool:
        """Move write-buffer bytes into the page cache; True when anything moved."""
        segment = self.find(self.committed_where)
        if segment is None:
            return False
        before = self.committed_where
        moved = segment.commit(least_pages)
        self.committed_where = segment.file_from_offset + segment.committed_position
        moved = moved or self.committed_where != before
        if segment.write_buffer is not None and segment.committed_position >= segment.file_size:
            buffer, segment.write_buffer = segment.write_buffer, None
            if self.pool is not None:
                self.pool.give_back(buffer)
        return moved

    def flush(self, least_pages: int) -> bool:
        """fdatasync the segment holding the flushed offset; True when the flushed offset moved."""
        segment = self.find(self.flushed_where)
        if segment is None:
            return False
        started = time.perf_counter_ns()
        moved = segment.flush(least_pages)
        if moved and self.on_fsync is not None:
            self.on_fsync((time.perf_counter_ns() - started) // 1000)
        self.flushed_where = segment.file_from_offset + segment.flushed_position
        return moved

    def flush_to(self, target_offset: int) -> None:
        """Flush segment after segment until everything below `target_offset` is durable."""
        while self.flushed_where < target_offset:
            before = self.flushed_where
            self.flush(0)
            if self.flushed_where == before:
                break

    # -- truncation ----------------------------------------------------------------------------

    def truncate(self, offset: int, zero_bytes: int) -> None:
        """Make `offset` the end of the log: delete segments after it, set every position of the
        segment holding it, and zero the next `zero_bytes` bytes there so no stale record remains
        for a later scan to find. Later segments go first, so a crash midway leaves a prefix."""
        keep = [f for f in self.files if f.file_from_offset <= offset]
        drop = [f for f in self.files if f.file_from_offset > offset]
        for segment in reversed(drop):
            log.info("deleting segment %s beyond the end of the log at %d", segment.path.name, offset)
            segment.destroy()
        if drop:
            fsync_dir(self.directory)
        for segment in keep:
            if segment.end_offset <= offset:
                segment.set_positions(segment.file_size)
            else:
                position = offset - segment.file_from_offset
                if zero_bytes:
                    segment.zero_range(position, position + zero_bytes)
                    os.fdatasync(segment.fd)
                segment.set_positions(position)
        self.files = tuple(keep)
        self.flushed_where = self.committed_where = offset

    def delete_segment_files(self, segments: list[MappedFile]) -> None:
        gone = {id(s) for s in segments}
        self.files = tuple(f for f in self.files if id(f) not in gone)
        for segment in segments:
            segment.destroy()
        fsync_dir(self.directory)

    def close(self) -> None:
        for segment in self.files:
            segment.close()


__all__ = ["MappedFileQueue", "SegmentAllocator", "SegmentLayoutError", "TransientStorePool", "segment_name"]
