"""Flush and commit services: the threads that make appended CommitLog bytes durable.

- `GroupCommitService` (SYNC_FLUSH): puts register (next_offset, deadline) waiters; one fdatasync
  releases every waiter at or below the flushed offset; a waiter past its deadline gets
  FLUSH_DISK_TIMEOUT (its message stays stored). The decisions live in `OffsetWaiters`. A caller
  with nothing else to do may run the flush itself (`flush_here`, caller-runs group commit) instead
  of handing it to the service's thread and waiting to be handed back; one flush runs at a time.
  After a flush slower than `slow_flush_s` (a slow or stalled disk), callers hand their flushes to
  the service's thread until one of its flushes is quick again: the caller (a master's replication
  stream) then keeps sending chunks and heartbeats while the flush thread waits on the disk.
- `FlushRealTimeService` (ASYNC_FLUSH): flushes when at least `flush_commit_log_least_pages` pages
  are dirty, every page at least every `flush_commit_log_thorough_interval_ms`.
- `CommitRealTimeService` (transientStorePoolEnable): copies the write buffer into the file.

Each reports progress through `on_flushed(flushed_offset)`, on the thread that flushed. Thread-
safety: `request`, `flush_here` and `wakeup` may be called from any thread; the flushing happens
on the service's own thread (or a `flush_here` caller's), where fdatasync releases the GIL.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from ..clock import wall_clock_ms
from ..service_thread import PagedService, ServiceThread
from ..status import PutMessageStatus
from .mapped_file_queue import MappedFileQueue
from .status_future import StatusFuture, settle_all
from .waiters import OffsetWaiters

log = logging.getLogger(__name__)

Clock = Callable[[], int]
_IDLE_S = 0.05
# A flush this slow is a disk in trouble, not a busy one: a 4 KiB fdatasync takes 0.1-2 ms here.
SLOW_FLUSH_S = 0.1


class GroupCommitService(ServiceThread):
    name = "flush-group-commit"

    def __init__(
        self,
        queue: MappedFileQueue,
        timeout_ms: int,
        on_flushed: Callable[[int], None],
        on_error: Callable[[BaseException], None],
        clock: Clock = wall_clock_ms,
        *,
        slow_flush_s: float = SLOW_FLUSH_S,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self._queue = queue
        self._timeout_ms = timeout_ms
        self._on_flushed = on_flushed
        self._on_error = on_error
        self._clock = clock
        self._slow_flush_s = slow_flush_s
        self._monotonic = monotonic
        self._last_flush_s = 0.0  # how long the last flush took (whichever thread ran it)
        self._waiters: OffsetWaiters[StatusFuture] = OffsetWaiters()
        self._lock = threading.Lock()
        # One flush at a time, by the service's thread or by a caller (`flush_here`): the flushed
        # offset only moves forward, and a waiter is released by the flush that covered it.
        self._flushing = threading.Lock()
        self._finished = False  # on_stop's final flush is done
        # `hand_over`'s wait for the next flush to begin: set by the flushing thread right before
        # its fdatasync while `_announce` is up.
        self._began = threading.Event()
        self._announce = False

    def request(self, next_offset: int, now_ms: int, *, wake: bool = True) -> StatusFuture:
        """A future of the flush status of everything below `next_offset`. `wake=False` for a
        caller that calls `flush_here` next: the service's thread then has nothing to do."""
        future = StatusFuture()
        with self._lock:
            if self._queue.flushed_where >= next_offset:
                future.set_result(PutMessageStatus.PUT_OK)
                return future
            if self._finished:
                # The final flush is over; bytes appended before puts were refused are in it.
                done = self._queue.flushed_where >= next_offset
                future.set_result(PutMessageStatus.PUT_OK if done else PutMessageStatus.FLUSH_DISK_TIMEOUT)
                return future
            # While stopping, the final flush (on_stop) releases this waiter.
            self._waiters.add(next_offset, now_ms + self._timeout_ms, future)
        if wake:
            self.wakeup()
        return future

    def flush_here(self, within_s: float | None = None) -> bool:
        """Caller-runs group commit: flush everything appended so far on the calling thread and
        release every waiter that covers, with no hand-off to the service's thread and back (the
        fdatasync releases the GIL). False when another flush is under way, or the last one was
        slow (`slow_flush_s`, or `within_s` when given: a caller with other work to keep moving,
        such as an event loop, sets its own bound): the service's thread is woken instead, and
        its flush releases the rest; the caller does not wait on a troubled disk."""
        bound_s = self._slow_flush_s if within_s is None else min(within_s, self._slow_flush_s)
        slow = self._last_flush_s > bound_s
        if slow or not self._flushing.acquire(blocking=False):
            self.wakeup()
            return False
        try:
            if self._finished:
                return False
            self._flush_round(self._queue.max_offset)
        finally:
            self._flushing.release()
        return True

    def hand_over(self, within_s: float) -> bool:
        """Wake the service's thread to flush what is appended, and let it have the GIL until its
        flush has begun (at most `within_s`; the fdatasync releases the GIL again). For a caller
        on an event loop that sends what the flush covers next (a master's replication stream,
        its chunk): woken and left alone, the thread waits for the GIL until the loop's next idle
        moment, so its fdatasync began after the send instead of beside it, and ran on into the
        slave's own. True when the flush began in time; at once False when a flush is under way
        (the thread's next round covers the rest)."""
        if self._flushing.locked():
            self.wakeup()
            return False
        self._began.clear()
        self._announce = True
        self.wakeup()
        began = self._began.wait(within_s)
        self._announce = False
        return began

    def _flush_round(self, target: int) -> tuple[int, int]:
        """Flush to `target` and settle the waiters; (released, still waiting). Holds `_flushing`."""
        if self._announce:
            self._announce = False
            self._began.set()
        began = self._monotonic()
        try:
            self._queue.flush_to(target)
            self._last_flush_s = self._monotonic() - began
        except OSError as exc:
            log.error("CommitLog flush failed: %s", exc)
            self._on_error(exc)
            with self._lock:
                failed = self._waiters.drain()
            settle_all(failed, PutMessageStatus.FLUSH_DISK_TIMEOUT)
            return 0, 0
        flushed = self._queue.flushed_where
        with self._lock:
            released = self._waiters.release(flushed)
            expired = self._waiters.expire(self._clock())
            more = len(self._waiters)
        settle_all(released, PutMessageStatus.PUT_OK)
        settle_all(expired, PutMessageStatus.FLUSH_DISK_TIMEOUT)
        self._on_flushed(flushed)
        return len(released), more

    def run_once(self) -> None:
        with self._lock:
            pending = len(self._waiters)
            deadline = self._waiters.next_deadline()
        # Everything appended so far, not only what waiters ask for: puts that do not wait
        # (WAIT=false) and puts whose waiters already timed out must reach the disk too.
        target = self._queue.max_offset
        if not pending and self._queue.flushed_where >= target:
            self.wait_for_running(_IDLE_S)
            return
        with self._flushing:
            released, more = self._flush_round(target)
        if more and not released and deadline is not None:
            # Nothing moved (e.g. the disk is stalled); do not spin until the next deadline.
            self.wait_for_running(min(_IDLE_S, max(0.0, (deadline - self._clock()) / 1000)))

    def on_stop(self) -> None:
        with self._flushing:
            try:
                self._queue.flush_to(self._queue.max_offset)
            except OSError as exc:
                log.error("final CommitLog flush failed: %s", exc)
            flushed = self._queue.flushed_where
            with self._lock:
                released = self._waiters.release(flushed)
                rest = self._waiters.drain()
                self._finished = True
        settle_all(released, PutMessageStatus.PUT_OK)
        settle_all(rest, PutMessageStatus.FLUSH_DISK_TIMEOUT)
        self._on_flushed(flushed)


class FlushRealTimeService(PagedService):
    name = "flush-real-time"

    def __init__(
        self,
        queue: MappedFileQueue,
        interval_ms: int,
        least_pages: int,
        thorough_interval_ms: int,
        on_flushed: Callable[[int], None],
        on_error: Callable[[BaseException], None],
        clock: Clock = wall_clock_ms,
    ) -> None:
        super().__init__(interval_ms, least_pages, thorough_interval_ms, clock)
        self._queue = queue
        self._on_flushed = on_flushed
        self._on_error = on_error

    def run_once(self) -> None:
        least = self._next_round_least_pages()
        before = self._queue.flushed_where
        try:
            while self._queue.flush(least):
                pass
        except OSError as exc:
            log.error("CommitLog flush failed: %s", exc)
            self._on_error(exc)
            return
        if self._queue.flushed_where != before:
            self._on_flushed(self._queue.flushed_where)

    def on_stop(self) -> None:
        try:
            self._queue.flush_to(self._queue.max_read_offset)
        except OSError as exc:
            log.error("final CommitLog flush failed: %s", exc)
        self._on_flushed(self._queue.flushed_where)


class CommitRealTimeService(PagedService):
    name = "commit-real-time"

    def __init__(
        self,
        queue: MappedFileQueue,
        interval_ms: int,
        least_pages: int,
        thorough_interval_ms: int,
        flusher: ServiceThread,
        clock: Clock = wall_clock_ms,
    ) -> None:
        super().__init__(interval_ms, least_pages, thorough_interval_ms, clock)
        self._queue = queue
        self._flusher = flusher

    def _commit(self, least: int) -> None:
        moved = False
        while self._queue.commit(least):
            moved = True
        if moved:
            self._flusher.wakeup()

    def run_once(self) -> None:
        self._commit(self._next_round_least_pages())

    def on_stop(self) -> None:
        self._commit(0)
