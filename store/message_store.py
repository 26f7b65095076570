"""`MessageStore`: the store's public face. It wires the CommitLog, the flush services, the
checkpoint, the lock and abort files and recovery together, and runs the put path:

    encode (no lock) -> CommitLog.append (lock) -> wait on flush and replica together (no lock)

Any non-OK durability status wins; the flush's first. Lifecycle: `load()` (lock, recover),
`start()` (abort file, services), `shutdown()` (flush everything, checkpoint, remove abort file);
as a context manager it does all three.

Thread-safety: puts from any number of threads and event loops at once; lifecycle calls from one.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout

from .checkpoint import StoreCheckpoint
from .codec import EncodedMessage, MessageRejected, encode_batch, encode_message
from .commitlog import NO_QUEUE_OFFSET_TYPES, AppendResult, CommitLog, CommitLogClosed
from .config import StoreConfig
from .flush import CommitRealTimeService, FlushRealTimeService, GroupCommitService, wall_clock_ms
from .lifecycle import AbortFile, StoreLock
from .mapped_file_queue import MappedFileQueue, SegmentAllocator, TransientStorePool
from .message import PROPERTY_WAIT_STORE_MSG_OK, Message, MessageExt, transaction_type
from .recovery import check_recoverable, choose_scan_start, scan_commitlog
from .replication import NoReplication, ReplicaGate
from .results import PutMessageResult, RecoveryReport
from .service_thread import ServiceThread
from .status import BrokerRole, FlushDiskType, PutMessageStatus

log = logging.getLogger(__name__)

_WAIT_GRACE_S = 1.0
Status = PutMessageStatus


class _Pending:
    """A put that is in the log and now waits for durability."""

    __slots__ = ("encoded", "appended", "flush", "replica")

    def __init__(self, encoded: EncodedMessage, appended: AppendResult, flush, replica) -> None:
        self.encoded = encoded
        self.appended = appended
        self.flush = flush
        self.replica = replica


class MessageStore:
    def __init__(
        self,
        config: StoreConfig,
        *,
        clock_ms: Callable[[], int] = wall_clock_ms,
        replica_gate: ReplicaGate | None = None,
    ) -> None:
        self.config = config
        self.broker_role = config.broker_role
        self._clock = clock_ms
        self._root = config.root
        self._lock = StoreLock(self._root)
        self._abort = AbortFile(self._root)
        self.checkpoint = StoreCheckpoint(self._root / "checkpoint")
        self._pool = (
            TransientStorePool(config.transient_store_pool_size, config.mapped_file_size_commit_log)
            if config.transient_store_pool_active
            else None
        )
        self.queue = MappedFileQueue(config.commit_log_dir, config.mapped_file_size_commit_log, pool=self._pool)
        self.commit_log = CommitLog(self.queue, clock_ms)
        self._replica: ReplicaGate = replica_gate or NoReplication(config.broker_role)
        self._store_host = config.store_host
        self._max_append = config.max_append_size
        self._sync_flush = config.flush_disk_type is FlushDiskType.SYNC_FLUSH
        self._wake_flusher_on_put = self._sync_flush or not config.flush_commit_log_timed
        self._flush_wait_s = config.sync_flush_timeout_ms / 1000 + _WAIT_GRACE_S
        self._replica_wait_s = config.slave_timeout_ms / 1000 + _WAIT_GRACE_S
        self._allocator: SegmentAllocator | None = None
        self._flusher: ServiceThread | None = None
        self._committer: CommitRealTimeService | None = None
        self._loaded = False
        self._running = False
        self._writable = True
        self._last_checkpoint_ms = 0
        self.recovery: RecoveryReport | None = None

    # -- lifecycle ----------------------------------------------------------------------------

    def __enter__(self) -> "MessageStore":
        self.load()
        try:
            self.start()
        except BaseException:
            self.shutdown()
            raise
        return self

    def __exit__(self, *exc_info) -> None:
        self.shutdown()

    def load(self) -> RecoveryReport:
        """Take the lock, open the segments and recover. Raises StoreLockedError,
        SegmentLayoutError or StoreCorruptedError; the lock is released on failure."""
        self._root.mkdir(parents=True, exist_ok=True)
        self._lock.acquire()
        try:
            self.recovery = self._recover()
        except BaseException:
            self.queue.close()
            self.checkpoint.close()
            self._lock.release()
            raise
        self._loaded = True
        return self.recovery

    def _recover(self) -> RecoveryReport:
        began = time.monotonic()
        abnormal = self._abort.exists()
        state = self.checkpoint.load()
        self.queue.load()
        trusted = state.physic_flushed_offset if self.checkpoint.trusted and state.physic_flushed_offset else None
        starts = [f.file_from_offset for f in self.queue.files]
        crc_start = choose_scan_start(starts, trusted, normal=not abnormal)
        table = self.commit_log.topic_queue_table
        table.clear()

        def on_message(offset, record) -> None:
            if transaction_type(record.sys_flag) not in NO_QUEUE_OFFSET_TYPES:
                table[f"{record.topic}-{record.queue_id}"] = record.queue_offset + 1

        def on_progress(done: int, total: int) -> None:
            log.info("recovery: scanned %d of %d MiB", done >> 20, total >> 20)

        result = scan_commitlog(
            [(f.file_from_offset, f.buf) for f in self.queue.files],
            self.config.mapped_file_size_commit_log,
            starts[0] if starts else 0,
            verify_crc=self.config.check_crc_on_recover,
            crc_from_offset=crc_start,
            on_message=on_message,
            on_progress=on_progress if starts and starts[-1] - starts[0] > (256 << 20) else None,
        )
        check_recoverable(result, trusted or 0)
        if not result.clean:
            log.warning(
                "CommitLog ends at %d (%s); cutting the torn tail%s",
                result.end_offset,
                result.reason or "zeros",
                f", non-zero bytes from {result.data_after_end}" if result.data_after_end is not None else "",
            )
        self.queue.truncate(result.end_offset, self._max_append if result.data_after_end is not None else 0)
        for segment in self.queue.files:
            if segment.end_offset > crc_start:
                os.fdatasync(segment.fd)
        self.checkpoint.update(
            physic_flushed_offset=result.end_offset,
            physic_msg_timestamp=max(state.physic_msg_timestamp, result.last_store_timestamp_ms),
        )
        self.checkpoint.persist()
        report = RecoveryReport(
            abnormal=abnormal,
            scan_start_offset=crc_start,
            end_offset=result.end_offset,
            messages_scanned=result.messages,
            truncated_from=None if result.clean else result.end_offset,
            reason=result.reason,
            seconds=time.monotonic() - began,
        )
        log.info(
            "store loaded (%s shutdown): CommitLog [%d, %d), %d messages checked from %d in %.2f s",
            "abnormal" if abnormal else "normal",
            self.queue.min_offset,
            result.end_offset,
            result.messages,
            crc_start,
            report.seconds,
        )
        return report

    def start(self) -> None:
        if not self._loaded:
            raise RuntimeError("load() the store before start()")
        config = self.config
        self._abort.create()
        self._allocator = SegmentAllocator(
            config.commit_log_dir, config.mapped_file_size_commit_log, warm=config.warm_mapped_file_enable
        )
        self.queue.allocator = self._allocator
        last = self.queue.last
        self._allocator.prepare(last.end_offset if last else self.queue.flushed_where)
        if self._sync_flush:
            self._flusher = GroupCommitService(
                self.queue, config.sync_flush_timeout_ms, self._on_flushed, self._on_disk_error, self._clock
            )
        else:
            self._flusher = FlushRealTimeService(
                self.queue,
                config.flush_interval_commit_log_ms,
                config.flush_commit_log_least_pages,
                config.flush_commit_log_thorough_interval_ms,
                self._on_flushed,
                self._on_disk_error,
                self._clock,
            )
        if self._pool is not None:
            self._committer = CommitRealTimeService(
                self.queue,
                config.commit_interval_commit_log_ms,
                config.commit_commit_log_least_pages,
                config.commit_commit_log_thorough_interval_ms,
                self._flusher,
                self._clock,
            )
        self._flusher.start()
        if self._committer is not None:
            self._committer.start()
        self.commit_log.accepting = True
        self._running = True

    def shutdown(self) -> None:
        """Refuse new puts, flush everything, persist the checkpoint, remove the abort file."""
        was_running = self._running
        self._running = False
        with self.commit_log.lock:
            # Appends already inside the lock finish first; later ones are refused.
            self.commit_log.accepting = False
        if self._committer is not None:
            self._committer.stop()
        if self._flusher is not None:
            self._flusher.stop()
        if self._allocator is not None:
            for unused in self._allocator.shutdown():
                unused.destroy()
            self._allocator = None
        if self._loaded:
            self.queue.flush_to(self.queue.max_read_offset)
            self._on_flushed(self.queue.flushed_where, force=True)
            self.queue.close()
            self.checkpoint.close()
            if was_running:
                self._abort.delete()
            self._lock.release()
            self._loaded = False

    # -- state --------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._running

    def set_read_only(self, read_only: bool) -> None:
        self._writable = not read_only

    def set_replica_gate(self, gate: ReplicaGate) -> None:
        """Install what SYNC_MASTER puts wait on besides the disk (the HA service)."""
        self._replica = gate

    def set_broker_role(self, role: BrokerRole) -> None:
        self.broker_role = role

    def _on_flushed(self, flushed_offset: int, force: bool = False) -> None:
        now = self._clock()
        last = self.queue.last
        self.checkpoint.update(
            physic_flushed_offset=flushed_offset,
            physic_msg_timestamp=max(self.checkpoint.state.physic_msg_timestamp, last.store_timestamp_ms if last else 0),
        )
        if force or now - self._last_checkpoint_ms >= self.config.flush_interval_consume_queue_ms:
            self._last_checkpoint_ms = now
            self.checkpoint.persist()

    def _on_disk_error(self, exc: BaseException) -> None:
        log.error("disk error, the store turns read-only: %s", exc)
        self._writable = False

    # -- puts -----------------------------------------------------------------------------------

    def _refusal(self, now_ms: int) -> PutMessageResult | None:
        if not self._running:
            return PutMessageResult(Status.SERVICE_NOT_AVAILABLE, reason="the store is not running")
        if self.broker_role is BrokerRole.SLAVE:
            return PutMessageResult(Status.SERVICE_NOT_AVAILABLE, reason="a slave does not accept puts")
        if not self._writable:
            return PutMessageResult(Status.SERVICE_NOT_AVAILABLE, reason="the store is read-only")
        if self.commit_log.is_os_page_cache_busy(now_ms, self.config.os_page_cache_busy_timeout_ms):
            return PutMessageResult(Status.OS_PAGE_CACHE_BUSY, reason="the CommitLog lock is held too long")
        return None

    def _begin(self, encode: Callable[[int], EncodedMessage], wait: bool) -> _Pending | PutMessageResult:
        now = self._clock()
        refusal = self._refusal(now)
        if refusal is not None:
            return refusal
        try:
            encoded = encode(now)
        except MessageRejected as exc:
            return PutMessageResult(exc.status, reason=exc.reason)
        try:
            appended = self.commit_log.append(encoded)
        except CommitLogClosed:
            return PutMessageResult(Status.SERVICE_NOT_AVAILABLE, reason="the store is shutting down")
        except OSError as exc:
            log.error("cannot create a CommitLog segment: %s", exc)
            return PutMessageResult(Status.CREATE_MAPPED_FILE_FAILED, reason=f"cannot create a segment: {exc.strerror}")
        next_offset = appended.wrote_offset + appended.wrote_bytes
        if self._sync_flush and wait:
            flush = self._flusher.request(next_offset, now)  # type: ignore[union-attr]
        else:
            if self._committer is not None:
                self._committer.wakeup()
            elif self._wake_flusher_on_put:
                self._flusher.wakeup()  # type: ignore[union-attr]
            flush = Status.PUT_OK
        replica = self._replica.request(next_offset, now) if wait else Status.PUT_OK
        return _Pending(encoded, appended, flush, replica)

    def _result(self, pending: _Pending, flush_status: Status, replica_status: Status) -> PutMessageResult:
        status = flush_status if flush_status is not Status.PUT_OK else replica_status
        appended = pending.appended
        ids = tuple(pending.encoded.msg_ids(appended.wrote_offset))
        return PutMessageResult(
            status=status,
            wrote_offset=appended.wrote_offset,
            wrote_bytes=appended.wrote_bytes,
            queue_offset=appended.queue_offset,
            msg_id=ids[0] if len(ids) == 1 else ",".join(ids),
            msg_ids=ids,
            msg_num=appended.msg_num,
            store_timestamp_ms=appended.store_timestamp_ms,
        )

    @staticmethod
    def _wait(outcome: Status | Future, timeout_s: float, on_timeout: Status) -> Status:
        if isinstance(outcome, Status):
            return outcome
        try:
            return outcome.result(timeout_s)
        except FutureTimeout:
            return on_timeout

    @staticmethod
    async def _await(outcome: Status | Future, timeout_s: float, on_timeout: Status) -> Status:
        if isinstance(outcome, Status):
            return outcome
        try:
            return await asyncio.wait_for(asyncio.wrap_future(outcome), timeout_s)
        except asyncio.TimeoutError:
            return on_timeout

    def _finish(self, pending: _Pending | PutMessageResult) -> PutMessageResult:
        if isinstance(pending, PutMessageResult):
            return pending
        flush = self._wait(pending.flush, self._flush_wait_s, Status.FLUSH_DISK_TIMEOUT)
        replica = self._wait(pending.replica, self._replica_wait_s, Status.FLUSH_SLAVE_TIMEOUT)
        return self._result(pending, flush, replica)

    async def _finish_async(self, pending: _Pending | PutMessageResult) -> PutMessageResult:
        if isinstance(pending, PutMessageResult):
            return pending
        flush = await self._await(pending.flush, self._flush_wait_s, Status.FLUSH_DISK_TIMEOUT)
        replica = await self._await(pending.replica, self._replica_wait_s, Status.FLUSH_SLAVE_TIMEOUT)
        return self._result(pending, flush, replica)

    def _encode_one(self, msg: Message) -> Callable[[int], EncodedMessage]:
        return lambda now: encode_message(
            msg, default_store_host=self._store_host, max_message_size=self._max_append, now_ms=now
        )

    def _encode_many(self, batch: Sequence[Message]) -> Callable[[int], EncodedMessage]:
        return lambda now: encode_batch(
            batch, default_store_host=self._store_host, max_message_size=self._max_append, now_ms=now
        )

    @staticmethod
    def _waits(msg: object) -> bool:
        properties = getattr(msg, "properties", None)
        return not properties or properties.get(PROPERTY_WAIT_STORE_MSG_OK) != "false"

    def put_message(self, msg: Message) -> PutMessageResult:
        """Store one message; returns once it is as durable as the role and flush type ask."""
        return self._finish(self._begin(self._encode_one(msg), self._waits(msg)))

    def put_messages(self, batch: Sequence[Message]) -> PutMessageResult:
        """Store a batch for one topic and queue, contiguously, with consecutive queue offsets."""
        first = batch[0] if batch else None
        return self._finish(self._begin(self._encode_many(batch), self._waits(first)))

    async def async_put_message(self, msg: Message) -> PutMessageResult:
        """As put_message, awaiting durability without blocking the event loop."""
        return await self._finish_async(self._begin(self._encode_one(msg), self._waits(msg)))

    async def async_put_messages(self, batch: Sequence[Message]) -> PutMessageResult:
        first = batch[0] if batch else None
        return await self._finish_async(self._begin(self._encode_many(batch), self._waits(first)))

    # -- reads ----------------------------------------------------------------------------------

    @property
    def min_offset(self) -> int:
        return self.commit_log.min_offset

    @property
    def max_offset(self) -> int:
        return self.commit_log.max_offset

    @property
    def flushed_offset(self) -> int:
        return self.commit_log.flushed_offset

    def read_message(self, physical_offset: int) -> MessageExt:
        return self.commit_log.read_message(physical_offset)

    def iter_messages(self, start_offset: int | None = None) -> Iterator[MessageExt]:
        return self.commit_log.iter_messages(start_offset)

    def commit_log_data(self, offset: int, size: int) -> bytes:
        return self.commit_log.read(offset, size)

    def max_queue_offset(self, topic: str, queue_id: int) -> int:
        """The next queue offset a put to this queue gets (0 for a queue never written)."""
        return self.commit_log.topic_queue_table.get(f"{topic}-{queue_id}", 0)
