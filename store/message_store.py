"""`MessageStore`: the store's public face (RocketMQ's DefaultMessageStore, without its size).

It owns the components and their lifecycle, and delegates the work:

| concern | module |
|---|---|
| puts | `put_path.PutPath` over `commitlog.CommitLog` |
| durability | `flush` services, `logic_flush.FlushConsumeQueueService` (checkpoint) |
| queues, index, arrival | `dispatch.Dispatcher` feeding `consume_queue`, `index_file`, listeners |
| reads | `reads.MessageReader` |
| recovery | `recovery.recover_store` |
| metadata | `topic_config`, `consumer_offset` (under `config/`) |
| delayed messages | `schedule.ScheduleMessageService` |
| retention | `retention.CleanService` |
| statistics | `stats.StoreStats` |

Role changes while running (controller mode): `become_master`, `become_slave` (the work:
`store.role_change`), `truncate_to` (a slave's divergent tail, crash-safe: `store.slave_truncation`),
and `set_put_fence` (puts refused before they are appended while a master may not acknowledge).

Lifecycle: `load()` (lock, recover), `start()` (abort file, catch-up dispatch, services),
`shutdown()` (deliveries stop, puts refused, everything flushed and dispatched, checkpoint and
metadata written, abort file removed); as a context manager it does all three.

Thread-safety: puts and reads from any number of threads and event loops; lifecycle calls and the
`set_*` configuration calls from one thread.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence

from .config import StoreConfig
from .index.index_file import IndexService
from .log.codec import BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE, CorruptMessage, DamagedMessage
from .log.commitlog import CommitLog, ReplicatedAppendError
from .log.damage import DamageLog, Reader
from .log.flush import CommitRealTimeService, FlushRealTimeService, GroupCommitService, wall_clock_ms
from .log.mapped_file_queue import MappedFileQueue, SegmentAllocator, TransientStorePool
from .log.put_path import PutPath, PutServices
from .log.recent_ids import RecentIds
from .log.status_future import StatusFuture
from .message import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
    Message,
    MessageExt,
)
from .metadata.auto_create import AutoCreateGate, AutoCreateLimits, AutoCreateRefusal
from .metadata.consumer_offset import ConsumerOffsetManager
from .metadata.topic_config import (
    MAX_QUEUE_NUMS,
    SCHEDULE_TOPIC,
    SYSTEM_TOPICS,
    Permission,
    TopicConfig,
    TopicConfigManager,
    is_retry_or_dlq,
)
from .properties import ConfigError, replace_from_properties
from .queue.consume_queue import ConsumeQueue, ConsumeQueueTable
from .queue.dispatch import (
    Dispatcher,
    DispatchRequest,
    ReputMessageService,
    index_consumer,
    queue_consumer,
    recent_ids_consumer,
)
from .queue.logic_flush import FlushConsumeQueueService
from .queue.message_filter import TagFilter
from .queue.reads import GetMessageResult, MessageReader, QueryMessageResult, assigned_not_dispatched
from .recovery.checkpoint import StoreCheckpoint
from .recovery.lifecycle import AbortFile, StoreLock
from .recovery.recovery import recover_store
from .recovery.role_change import demote, promote, topics_in_log
from .recovery.slave_truncation import CutParts, TruncateResult, cut_store, finish_cut, read_intent
from .replication import NoReplication, ReplicaGate
from .results import PutMessageResult, RecoveryReport
from .retention import CleanPolicy, CleanService
from .schedule import ScheduleMessageService, delay_offset_path, delivery_time_ms, parse_delay_levels
from .service_thread import ServiceThread
from .stats import StoreStats, StoreStatsSnapshot
from .status import BrokerRole, FlushDiskType, PutMessageStatus

log = logging.getLogger(__name__)

# How long a master's replication stream on an event loop lets the flush thread have the GIL to
# begin the flush of the chunk it sends next (`GroupCommitService.hand_over`): the hand-over takes
# 20-60 us here; the bound keeps a busy machine from holding the loop.
HAND_OVER_WITHIN_MS = 0.5

# StoreConfig keys a running store takes (`update_config`): the ones read afresh on each use.
LIVE_CONFIG_KEYS = frozenset(
    {
        "autoCreateTopicEnable",
        "brokerPermission",
        "autoCreateTopicMaxTopics",
        "autoCreateTopicPerMinute",
        "autoCreateRetryTopicMaxTopics",
        "autoCreateRetryTopicPerMinute",
        "fileReservedTime",
        "deleteWhen",
        "diskMaxUsedSpaceRatio",
        "diskSpaceWarningLevelRatio",
        "diskSpaceCleanForciblyRatio",
        "cleanFileForciblyEnable",
    }
)

Status = PutMessageStatus
ArrivalListener = Callable[[DispatchRequest], None]


def _auto_create_limits(config: StoreConfig) -> AutoCreateLimits:
    return AutoCreateLimits(
        config.auto_create_topic_enable, config.auto_create_topic_max_topics, config.auto_create_topic_per_minute
    )


def _retry_create_limits(config: StoreConfig) -> AutoCreateLimits:
    return AutoCreateLimits(True, config.auto_create_retry_topic_max_topics, config.auto_create_retry_topic_per_minute)


class MessageStore:
    def __init__(  # noqa: PLR0915 - the store's parts wired in dependency order
        self,
        config: StoreConfig,
        *,
        clock_ms: Callable[[], int] = wall_clock_ms,
        replica_gate: ReplicaGate | None = None,
    ) -> None:
        self.config = config
        self._writable_config: StoreConfig | None = None  # the config `write_refusal` found writable
        self.broker_role = config.broker_role
        # Bumped by every role change and truncation: state derived from the log (pop
        # consumption's) is rebuilt when it differs from the generation it was built at.
        self.role_generation = 0
        self._clock = clock_ms
        root = config.root
        self._root = root
        self._lock = StoreLock(root)
        self._abort = AbortFile(root)
        self.checkpoint = StoreCheckpoint(root / "checkpoint")
        self._pool = (
            TransientStorePool(config.transient_store_pool_size, config.mapped_file_size_commit_log)
            if config.transient_store_pool_active
            else None
        )
        self.queue = MappedFileQueue(config.commit_log_dir, config.mapped_file_size_commit_log, pool=self._pool)
        # Damaged records met by any reader; the CommitLog reports those its reads refuse.
        self.damage = DamageLog(wall_ms=clock_ms)
        self.commit_log = CommitLog(self.queue, clock_ms, on_damage=self._read_refused)
        # Set by load(): below it, no record's body CRC was checked in this run (see the property).
        self._crc_checked_from = 0
        self.consume_queues = ConsumeQueueTable(root, config.mapped_file_size_consume_queue)
        self.index = (
            IndexService(
                root, hash_slot_num=config.max_hash_slot_num, index_num=config.max_index_num, clock_ms=clock_ms
            )
            if config.message_index_enable
            else None
        )
        self.delay_levels = parse_delay_levels(config.message_delay_level)
        self.topics = TopicConfigManager(
            root,
            auto_create_topic_enable=config.auto_create_topic_enable,
            default_topic_queue_nums=config.default_topic_queue_nums,
            delay_levels=len(self.delay_levels),
            clock=clock_ms,
        )
        self.consumer_offsets = ConsumerOffsetManager(root, config.consumer_offset_max_entries)
        self.stats = StoreStats(clock_ms)
        self.queue.on_fsync = self.stats.record_fsync
        self.dispatcher = Dispatcher(self.queue, 0, self._default_dispatch_limit, self._delivery_time)
        self.dispatcher.add_consumer(queue_consumer(self.consume_queues, self.stats))
        if self.index is not None:
            self.dispatcher.add_consumer(index_consumer(self.index))
        self.dispatcher.add_consumer(self._dispatch_to_listeners)
        self._reader = MessageReader(self.commit_log, self.consume_queues, self.index)
        self.schedule = ScheduleMessageService(
            self,
            self.delay_levels,
            delay_offset_path(root),
            clock_ms,
            durable_offset=lambda: self.flushed_offset,
        )
        self._replica: ReplicaGate = replica_gate or NoReplication(config.broker_role)
        self.recent_ids = RecentIds(config.recent_message_ids_max)
        # Records below this offset did not come through this run's put path, which remembers
        # the ids of what it appends itself: the recovered log and every replicated byte (so a
        # promoted slave knows its old master's ids). The dispatcher remembers only those.
        self._ids_by_dispatch_below = 0
        # The event loops with a dispatch round queued by `_dispatch_after_answer` (set operations
        # are atomic under the GIL; a loop's own callback removes it).
        self._dispatch_queued_on: set[asyncio.AbstractEventLoop] = set()
        if config.recent_message_ids_max:
            self.dispatcher.add_consumer(
                recent_ids_consumer(self.recent_ids, below=lambda: self._ids_by_dispatch_below)
            )
        # Puts refuse until start(); the put path is rebuilt whenever what it waits on changes.
        self._put_services = PutServices()
        self._put_path = self._build_put_path()
        self._listeners: list[ArrivalListener] = []
        self._flush_listeners: list[Callable[[int], None]] = []
        self._writable_topics: set[str] = set()  # the put path's cache of admitted topics
        self._topic_lock = threading.Lock()
        self._auto_create = AutoCreateGate(_auto_create_limits(config))
        self._retry_create = AutoCreateGate(_retry_create_limits(config), retry=True)
        self._allocator: SegmentAllocator | None = None
        self._flusher: ServiceThread | None = None
        self._committer: CommitRealTimeService | None = None
        self._reput: ReputMessageService | None = None
        self._logic_flusher: FlushConsumeQueueService | None = None
        self._cleaner: CleanService | None = None
        self._loaded = False
        self._running = False
        self._writable = True
        self._disk_full = False
        self._fence: Callable[[], str | None] | None = None
        # Tests inject a crash between the steps of a cut (`slave_truncation.STEPS`).
        self.truncation_hook: Callable[[str], None] | None = None
        self.recovery: RecoveryReport | None = None

    # -- lifecycle ------------------------------------------------------------------------------

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
        """Take the lock, load metadata and recover. Raises StoreLockedError, SegmentLayoutError
        or StoreCorruptedError; everything is closed and the lock released on failure."""
        self._root.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._lock.acquire()
        try:
            self.topics.load()
            self.consumer_offsets.load()
            recovered = recover_store(
                self.config,
                self.checkpoint,
                self.queue,
                self.consume_queues,
                self.index,
                abnormal=self._abort.exists(),
            )
            self.schedule.load()
        except BaseException:
            self._close_files()
            self._lock.release()
            raise
        self.commit_log.reset_queue_offsets(recovered.queue_offset_table)
        self.dispatcher.reput_from_offset = recovered.dispatch_from_offset
        self.recovery = recovered.report
        report = recovered.report
        self._crc_checked_from = report.scan_start_offset if self.config.check_crc_on_recover else report.end_offset
        self._loaded = True
        pending = read_intent(self._root)
        if pending is not None:
            log.warning("a cut of the CommitLog to %d was interrupted (a crash): finishing it", pending)
            finish_cut(self._cut_parts(), pending, self._step)
        self._seed_recent_ids()
        self._ids_by_dispatch_below = self.commit_log.max_offset
        return self.recovery

    def _seed_recent_ids(self) -> None:
        """Refill the recent message ids from the tail of the dispatched log (the rest follows as
        it is dispatched), so a producer's retry after a restart or failover is still recognised.
        Bounded: from where each ConsumeQueue's share of the window starts."""
        capacity = self.recent_ids.capacity
        queues = self.consume_queues.queues()
        if not capacity or not queues:
            return
        share = max(1, capacity // len(queues))
        starts = []
        for queue in queues:
            for unit in queue.get_units(max(queue.min_offset, queue.max_offset - share), 64):
                if not unit.is_filler:
                    starts.append(unit.commit_log_offset)
                    break
        end = self.dispatcher.reput_from_offset
        start = max(min(starts, default=end), self.min_offset)
        scan = Dispatcher(self.queue, start, lambda: end)
        scan.add_consumer(recent_ids_consumer(self.recent_ids))
        while scan.dispatch_available():
            pass
        if len(self.recent_ids):
            log.info("recent message ids: %d from CommitLog [%d, %d)", len(self.recent_ids), start, end)

    def start(self) -> None:
        if not self._loaded:
            raise RuntimeError("load() the store before start()")
        self._abort.create()
        while self.dispatcher.dispatch_available():
            pass  # what recovery left undispatched reaches its queues before any put or read
        self._start_services()
        self.commit_log.accepting = True
        self._running = True
        if self.broker_role is not BrokerRole.SLAVE:
            self.schedule.start()  # a slave's deliveries arrive replicated from its master

    def _start_services(self) -> None:
        config = self.config
        self._allocator = SegmentAllocator(
            config.commit_log_dir, config.mapped_file_size_commit_log, warm=config.warm_mapped_file_enable
        )
        self.queue.allocator = self._allocator
        last = self.queue.last
        if last is not None or self.broker_role is not BrokerRole.SLAVE:
            # An empty slave learns where its log starts from its master's first chunk.
            self._allocator.prepare(last.end_offset if last else self.queue.flushed_where)
        self._start_flush_services()
        self._reput = ReputMessageService(self.dispatcher, lambda: self.commit_log.max_offset)
        self._logic_flusher = FlushConsumeQueueService(
            self.consume_queues,
            self.index,
            self.dispatcher,
            self.checkpoint,
            interval_ms=config.flush_interval_consume_queue_ms,
            least_pages=config.flush_consume_queue_least_pages,
            thorough_interval_ms=config.flush_consume_queue_thorough_interval_ms,
            clock_ms=self._clock,
            on_round=self._on_logic_flush_round,
        )
        self._cleaner = CleanService(
            self.queue,
            CleanPolicy.from_config(config),
            clock_ms=self._clock,
            on_commit_log_deleted=self._on_commit_log_deleted,
            on_disk_full=self._on_disk_full,
            files_lock=self.commit_log.lock,
            deletable_below=lambda: min(self.flushed_offset, self.dispatcher.reput_from_offset),
            first_unconsumed=self.first_unconsumed_offset,
        )
        # Under SYNC_FLUSH a put's result waits for its flush (and its slaves' acks): its record
        # is dispatched once the result is known (`_dispatch_after_answer`), so that the work
        # (ConsumeQueue, index) runs after the answer instead of taking the GIL from the flush,
        # the replication stream and the acks on the put's critical path. Otherwise every append
        # wakes the dispatcher. Either way (a no-op while it is awake) it never polls an idle log.
        flusher = self._flusher
        group_commit = isinstance(flusher, GroupCommitService)
        # SYNC_FLUSH straight to the log; with a write buffer (transientStorePoolEnable) the
        # committer wakes the flush thread instead.
        direct_group_commit = group_commit and self._committer is None
        wake = [] if direct_group_commit else [self._reput.wakeup]
        if self._committer is not None:
            wake.append(self._committer.wakeup)
        elif self._wake_flusher_on_put() and not group_commit:
            wake.append(flusher.wakeup)  # type: ignore[union-attr]
        self._put_services = PutServices(
            request_flush=flusher.request if isinstance(flusher, GroupCommitService) else None,
            replica=self._replica,
            wake=tuple(wake),
            # Group commit: a waiting put's flush request wakes the flush thread when nobody else
            # flushes for it (`PutPath._pending`); a put that does not wait wakes it here.
            wake_unwaited=(flusher.wakeup,) if direct_group_commit else (),  # type: ignore[union-attr]
            wake_after_answer=(self._dispatch_after_answer,) if direct_group_commit else (),
            streams_flush=direct_group_commit,
        )
        self._put_path = self._build_put_path()
        for service in (self._reput, self._logic_flusher, self._cleaner):
            service.start()

    def _stop_services(self) -> None:
        for service in (self._cleaner, self._committer, self._flusher, self._reput, self._logic_flusher):
            if service is not None:
                service.stop()
        self._cleaner = self._committer = self._flusher = self._reput = self._logic_flusher = None
        if self._allocator is not None:
            for unused in self._allocator.shutdown():
                unused.destroy()
            self._allocator = None
            self.queue.allocator = None

    def _wake_flusher_on_put(self) -> bool:
        return self.config.flush_disk_type is FlushDiskType.SYNC_FLUSH or not self.config.flush_commit_log_timed

    def _start_flush_services(self) -> None:
        config = self.config
        flusher: ServiceThread
        if config.flush_disk_type is FlushDiskType.SYNC_FLUSH:
            flusher = GroupCommitService(
                self.queue, config.sync_flush_timeout_ms, self._on_flushed, self._on_disk_error, self._clock
            )
        else:
            flusher = FlushRealTimeService(
                self.queue,
                config.flush_interval_commit_log_ms,
                config.flush_commit_log_least_pages,
                config.flush_commit_log_thorough_interval_ms,
                self._on_flushed,
                self._on_disk_error,
                self._clock,
            )
        self._flusher = flusher
        if self._pool is not None:
            self._committer = CommitRealTimeService(
                self.queue,
                config.commit_interval_commit_log_ms,
                config.commit_commit_log_least_pages,
                config.commit_commit_log_thorough_interval_ms,
                flusher,
                self._clock,
            )
        flusher.start()
        if self._committer is not None:
            self._committer.start()

    def shutdown(self) -> None:
        """Stop deliveries, refuse puts, flush and dispatch everything, persist the checkpoint
        and metadata, remove the abort file. Safe to call more than once."""
        was_running = self._running
        self.schedule.shutdown()
        self._running = False
        with self.commit_log.lock:
            # Appends already inside the lock finish first; later ones are refused.
            self.commit_log.accepting = False
        self._stop_services()
        if self._loaded:
            self.queue.flush_to(self.queue.max_read_offset)
            self._on_flushed(self.queue.flushed_where)
            self.checkpoint.persist()
            # Delay offsets are written only up to flushed deliveries; everything is flushed now.
            self.schedule.persist()
            self.consumer_offsets.persist_if_dirty()
            self._close_files()
            if was_running:
                self._abort.delete()
            self._lock.release()
            self._loaded = False

    def _close_files(self) -> None:
        self.queue.close()
        self.consume_queues.close()
        if self.index is not None:
            self.index.close()
        self.checkpoint.close()

    # -- callbacks from services ---------------------------------------------------------------

    def _on_flushed(self, flushed_offset: int) -> None:
        last = self.queue.last
        self.checkpoint.advance(
            physic_flushed_offset=flushed_offset, physic_msg_timestamp=last.store_timestamp_ms if last else 0
        )
        for listener in self._flush_listeners:
            try:
                listener(flushed_offset)
            except Exception:
                log.exception("flush listener failed")

    def _on_disk_error(self, exc: BaseException) -> None:
        log.error("disk error, the store turns read-only: %s", exc)
        self._writable = False

    def _on_disk_full(self, full: bool) -> None:
        if full != self._disk_full:
            log.warning(
                "disk %s: puts are %s", "full" if full else "no longer full", "refused" if full else "taken again"
            )
        self._disk_full = full

    def _on_commit_log_deleted(self, min_offset: int) -> None:
        self.consume_queues.delete_expired_files(min_offset)
        self.consume_queues.correct_min_offset(min_offset)
        if self.index is not None:
            self.index.delete_expired_files(min_offset)
        self.consumer_offsets.clamp_to_min(self.min_queue_offset)

    def _on_logic_flush_round(self, now_ms: int) -> None:
        self.stats.sample(now_ms)
        self.consumer_offsets.persist_if_dirty()

    # -- dispatch ----------------------------------------------------------------------------------

    def _default_dispatch_limit(self) -> int:
        return self.commit_log.max_offset

    def set_dispatch_limit(self, limit: Callable[[], int] | None) -> None:
        """Never dispatch past `limit()` (replication's confirmed offset); None: the log's end."""
        self.dispatcher.set_limit(limit or self._default_dispatch_limit)

    def _delivery_time(self, level: int, store_timestamp_ms: int) -> int:
        return delivery_time_ms(level, store_timestamp_ms, self.delay_levels)

    def _dispatch_to_listeners(self, requests: Sequence[DispatchRequest]) -> None:
        listeners = self._listeners
        if not listeners:
            return
        for request in requests:
            for listener in listeners:
                try:
                    listener(request)
                except Exception:
                    log.exception("message-arrival listener failed")

    def add_flush_listener(self, listener: Callable[[int], None]) -> None:
        """Called with the flushed offset after every flush round that ran, on the thread that
        flushed: the flush thread, or a caller of `request_flush(..., flush_here=True)`."""
        self._flush_listeners.append(listener)

    def add_arrival_listener(self, listener: ArrivalListener) -> None:
        """Called on the dispatch thread for every message as it becomes readable (long polling)."""
        self._listeners.append(listener)

    # -- state ---------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._running

    def set_read_only(self, read_only: bool) -> None:
        self._writable = not read_only

    def set_replica_gate(self, gate: ReplicaGate) -> None:
        """Install what SYNC_MASTER puts wait on besides the disk (the HA service)."""
        self._replica = gate
        if self._put_services.replica is not None:  # running: puts wait on the new gate from now on
            self._put_services = dataclasses.replace(self._put_services, replica=gate)
            self._put_path = self._build_put_path()

    def _build_put_path(self) -> PutPath:
        recent = self.recent_ids if self.config.recent_message_ids_max else None
        return PutPath(
            self.config,
            self.commit_log,
            self.stats,
            clock_ms=self._clock,
            refusal=self._refusal,
            admit_topic=self._admit_topic,
            delay_levels=self.delay_levels,
            services=self._put_services,
            recent=recent,
            msg_id_at=(lambda offset: self.read_message(offset).msg_id) if recent is not None else None,
        )

    def set_broker_role(self, role: BrokerRole) -> None:
        self.broker_role = role

    def set_put_fence(self, fence: Callable[[], str | None] | None) -> None:
        """`fence()` runs before every put: a reason refuses it (SERVICE_NOT_AVAILABLE) before
        anything is appended. Called on the put path: keep it cheap."""
        self._fence = fence

    # -- role changes (controller mode) --------------------------------------------------------

    def become_master(self, role: BrokerRole) -> None:
        """SLAVE -> `role` while running (`store.role_change.promote`)."""
        if role is BrokerRole.SLAVE:
            raise ValueError("become_master needs SYNC_MASTER or ASYNC_MASTER")
        if self.broker_role is role:
            return
        if not self._running:
            raise RuntimeError("become_master needs a running store")

        def switch() -> None:
            self._writable_topics.clear()
            self.broker_role = role
            last = self.queue.last
            if self._allocator is not None:
                self._allocator.prepare(last.end_offset if last else self.queue.flushed_where)

        table = promote(self.commit_log, self.consume_queues, self.dispatcher.reput_from_offset, switch)
        self.role_generation += 1
        self._adopt_topics_of(table)
        if not self.schedule.running:
            self.schedule.start()
        log.info("the store is %s now (log end %d)", role.name, self.max_offset)

    def _adopt_topics_of(self, table: dict[str, int]) -> None:
        """Topics this store holds messages of but has no config for (created on the old master
        after the last metadata copy) get one, writable, so a promoted slave serves them."""
        missing = topics_in_log(table, lambda topic: self.topics.get(topic) is not None or topic in SYSTEM_TOPICS)
        for topic, queues in sorted(missing.items()):
            count = max(queues, self.config.default_topic_queue_nums)
            self.topics.create_or_update(TopicConfig(topic, count, count))
            log.warning(
                "topic %s was not in this store's topic table but its log holds it: serving it with %d queues",
                topic,
                count,
            )

    def become_slave(self) -> None:
        """A master -> SLAVE while running (`store.role_change.demote`), then delayed deliveries
        stop and everything written is flushed."""
        if self.broker_role is BrokerRole.SLAVE:
            return
        demote(self.commit_log, lambda: setattr(self, "broker_role", BrokerRole.SLAVE))
        self.role_generation += 1
        self.schedule.shutdown()
        if not self.wait_flushed(self.max_offset, self.config.sync_flush_timeout_ms / 1000 + 5):
            log.warning("demotion: the CommitLog is not flushed to %d yet", self.max_offset)
        log.info("the store is SLAVE now (log end %d)", self.max_offset)

    def truncate_to(self, offset: int) -> TruncateResult:
        """Cut a slave's CommitLog back to `offset`, a record boundary in [min_offset, max_offset]
        (below min_offset: empty it). Crash-safe (`store.slave_truncation`); services pause meanwhile."""
        if self.broker_role is not BrokerRole.SLAVE:
            raise RuntimeError(f"only a SLAVE's log is cut, this store is {self.broker_role.name}")
        if not self._loaded:
            raise RuntimeError("load() the store before truncate_to()")
        result = cut_store(
            self._cut_parts(), offset, record_starts_at=self.record_starts_at, quiesce=self._quiesce, step=self._step
        )
        if result.removed_bytes:
            log.info(
                "CommitLog cut from %d to %d (%d bytes removed)",
                result.previous_max_offset,
                result.offset,
                result.removed_bytes,
            )
        return result

    def _quiesce(self) -> Callable[[], None]:
        if not self._running:
            return lambda: None
        self._stop_services()
        return self._start_services

    def _cut_parts(self) -> CutParts:
        return CutParts(
            self._root,
            self.checkpoint,
            self.commit_log,
            self.consume_queues,
            self.index,
            self.dispatcher,
            self.recent_ids,
        )

    def _step(self, name: str) -> None:
        if self.truncation_hook is not None:
            self.truncation_hook(name)

    def record_starts_at(self, offset: int) -> bool | None:
        """Whether a record (a message or a segment's blank end) starts at `offset`; None when
        its header cannot be read in full (not written, or still in a write buffer)."""
        header = self.commit_log.read(offset, 8)
        if len(header) < 8:
            return None
        size = int.from_bytes(header[:4], "big", signed=True)
        magic = int.from_bytes(header[4:], "big", signed=True)
        return size >= 8 and magic in (MESSAGE_MAGIC_CODE, BLANK_MAGIC_CODE)

    # -- replication (slave side) ------------------------------------------------------------------

    def append_replicated(self, offset: int, data: bytes, *, wake_dispatcher: bool = True) -> int:
        """Append bytes replicated from the master (whole records) at exactly `offset`; returns
        the new end. ReplicatedAppendError when they do not belong there (nothing is written),
        CommitLogClosed once the store is shutting down. Only a SLAVE takes replicated bytes.
        `wake_dispatcher=False`: the caller has them dispatched itself later (a replicator calls
        `dispatch_here` once its acknowledgement is on its way: the dispatch is off the ack's path)."""
        if self.broker_role is not BrokerRole.SLAVE:
            raise ReplicatedAppendError(f"a {self.broker_role.name} does not take replicated data")
        # Raised before the bytes are in the log, where the dispatcher may find them at once (too
        # high when the append fails: the dispatcher then remembers ids it need not, no harm).
        self._ids_by_dispatch_below = max(self._ids_by_dispatch_below, offset + len(data))
        end = self.commit_log.append_replicated(offset, data)
        if wake_dispatcher:
            self.wake_dispatcher()
        return end

    def dispatch_here(self) -> None:
        """Dispatch what the log holds now on the calling thread, unless the dispatcher's thread is
        at it (`ReputMessageService.dispatch_here`): a thread with nothing else to do meanwhile
        saves the wake-up of the dispatcher's thread (a slave's replicator, per acknowledgement)."""
        reput = self._reput
        if reput is not None:
            reput.dispatch_here()

    def dispatch_while_waiting(self) -> None:
        """A SYNC_MASTER's replication stream with nothing to send while its chunks' puts wait for
        the slave's ack: dispatch on that thread what the dispatch limit lets through
        (`ReputMessageService.dispatch_here`). The GIL is idle then (the puts' loop and the ack
        reader wait), and a put whose record is already dispatched by its answer does not wake
        the dispatcher's thread (`_dispatch_after_answer`): one hand-off less per put at one
        client. Nothing happens where the limit holds the records back (controller mode: the
        confirmed offset, which moves with the slaves' acks) or when the dispatcher is not behind."""
        reput = self._reput
        if reput is None or not self._streams_serve_puts():
            return
        dispatcher = self.dispatcher
        if dispatcher.reput_from_offset < dispatcher.limit:
            reput.dispatch_here()

    def _dispatch_after_answer(self) -> None:
        """Once a SYNC_FLUSH put's result is known, unless a replication stream has already
        dispatched everything appended so far (`dispatch_while_waiting`): on an event loop (an
        asyncio put, a front end's), one dispatch round on that loop once its current turn's
        callbacks (the answers) have run, one round per turn for all the turn's puts; elsewhere
        (a put from a plain thread) a wake-up of the dispatcher's thread. Where the loop is the
        busy thread (many clients), a wake-up made the dispatcher's thread take the GIL from it
        for every round; the round on the loop costs the same work without that hand-off. The
        round is `ReputMessageService.dispatch_here`: a round already under way, records the
        dispatch limit holds back and what a round leaves behind are the service thread's."""
        reput = self._reput
        if reput is None or self.dispatcher.reput_from_offset >= self.commit_log.max_offset:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            reput.wakeup()
            return
        if loop not in self._dispatch_queued_on:
            self._dispatch_queued_on.add(loop)
            loop.call_soon(self._dispatch_on_loop, loop)

    def _dispatch_on_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        self._dispatch_queued_on.discard(loop)
        if self.dispatcher.reput_from_offset < self.commit_log.max_offset:
            self.dispatch_here()

    def wake_dispatcher(self) -> None:
        """Have the dispatcher take what the log holds now (it also looks on its own every
        100 ms, so a missed wake-up delays readability, never loses anything)."""
        reput = self._reput
        if reput is not None:
            reput.wakeup()

    def flush_after_send(self) -> None:
        """A master's replication stream, once a chunk is out: under SYNC_FLUSH, flush what the
        log holds on the calling thread (caller-runs group commit; the fdatasync releases the GIL),
        so the local flush overlaps the slave's round trip with no hand-off to the flush thread.
        Puts that wait for a slave leave their flush to this (`PutPath._pending`); only a
        SYNC_MASTER's puts wait for slaves, so elsewhere the flush thread, which every put wakes,
        keeps the whole flush. When another flush is under way the flush thread is woken instead."""
        flusher = self._flusher
        if not isinstance(flusher, GroupCommitService) or not self._streams_serve_puts():
            return
        if self.queue.flushed_where < self.queue.max_offset:
            flusher.flush_here()

    def hand_flush_after_send(self, next_offset: int) -> None:
        """A master's replication stream on an event loop, as a chunk ending at `next_offset` goes
        out: under SYNC_FLUSH, hand the flush thread the flush of the puts waiting on the stream
        (their flush is the stream's, as in `flush_after_send`) and let it begin (at most
        `HAND_OVER_WITHIN_MS`), so the `fdatasync` overlaps the send and the slave's round trip
        from its start and never blocks the loop for longer."""
        flusher = self._flusher
        if isinstance(flusher, GroupCommitService) and self._streams_serve_puts():
            if self.queue.flushed_where < next_offset:
                flusher.hand_over(HAND_OVER_WITHIN_MS / 1000)

    def _streams_serve_puts(self) -> bool:
        """A SYNC_MASTER whose puts go straight to group commit (no write buffer): its replication
        streams flush the log for the puts waiting on them (`flush_after_send`) and, idle,
        dispatch their records (`dispatch_while_waiting`)."""
        return self._put_services.streams_flush and self.broker_role is BrokerRole.SYNC_MASTER

    def request_flush(
        self, next_offset: int, *, flush_here: bool = False, here_within_ms: int | None = None
    ) -> StatusFuture | None:
        """Ask for the CommitLog to be flushed up to `next_offset`: a future of the flush's status
        under SYNC_FLUSH; under ASYNC_FLUSH None (the flusher flushes on its own rhythm).
        `flush_here`: the calling thread does the flush itself (`GroupCommitService.flush_here`),
        unless another flush is under way or the disk is slow (the last flush took longer than
        `here_within_ms`, when given); a thread with nothing else to do meanwhile saves the
        hand-off to the flush thread and back."""
        flusher = self._flusher
        if self.config.flush_disk_type is not FlushDiskType.SYNC_FLUSH or not isinstance(flusher, GroupCommitService):
            return None
        future = flusher.request(next_offset, self._clock(), wake=not flush_here)
        if flush_here and not future.done():
            flusher.flush_here(None if here_within_ms is None else here_within_ms / 1000)
        return future

    def request_delete_files_now(self) -> None:
        """Delete expired CommitLog segments now (RocketMQ's executeDeleteFilesManually)."""
        if self._cleaner is not None:
            self._cleaner.request_delete_now()

    # -- barriers: block until a background service has caught up (tools, tests, shutdown paths) --

    @staticmethod
    def _await(service: ServiceThread | None, condition: Callable[[], bool], timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while not condition():
            left = deadline - time.monotonic()
            if service is None or left <= 0:
                return False
            service.wait_round(left)
        return True

    def wait_dispatched(self, timeout_s: float = 10.0) -> bool:
        """Block until every message appended before the call is readable by queue (within the
        dispatch limit); False at the timeout."""
        target = self.max_offset
        return self._await(
            self._reput, lambda: self.dispatcher.reput_from_offset >= min(target, self.dispatcher.limit), timeout_s
        )

    def wait_flushed(self, offset: int, timeout_s: float = 10.0) -> bool:
        """Block until the CommitLog is fsynced up to `offset`; False at the timeout."""
        return self._await(self._flusher, lambda: self.flushed_offset >= offset, timeout_s)

    def wait_readable(self, offset: int, timeout_s: float = 10.0) -> bool:
        """Block until CommitLog bytes up to `offset` are readable (with write buffers: committed)."""
        return self._await(self._committer or self._flusher, lambda: self.max_offset >= offset, timeout_s)

    def wait_cleaned(self, condition: Callable[[], bool], timeout_s: float = 10.0) -> bool:
        """Block, one retention round at a time, until `condition()` holds; False at the timeout."""
        return self._await(self._cleaner, condition, timeout_s)

    # -- puts ----------------------------------------------------------------------------------

    def _refusal(self, now_ms: int) -> PutMessageResult | None:
        if not self._running:
            return PutMessageResult(Status.SERVICE_NOT_AVAILABLE, reason="the store is not running")
        fence = self._fence
        if fence is not None:
            reason = fence()
            if reason is not None:
                return PutMessageResult(Status.SERVICE_NOT_AVAILABLE, reason=reason)
        if self.broker_role is BrokerRole.SLAVE:
            return PutMessageResult(Status.SERVICE_NOT_AVAILABLE, reason="a slave does not accept puts")
        if not self._writable:
            return PutMessageResult(Status.SERVICE_NOT_AVAILABLE, reason="the store is read-only")
        if self._disk_full:
            return PutMessageResult(Status.SERVICE_NOT_AVAILABLE, reason="the disk is full")
        if self.commit_log.is_os_page_cache_busy(now_ms, self.config.os_page_cache_busy_timeout_ms):
            return PutMessageResult(Status.OS_PAGE_CACHE_BUSY, reason="the CommitLog lock is held too long")
        return None

    def first_unconsumed_offset(self) -> int:
        """The lowest CommitLog offset of a message some reader still has to read: for each
        ConsumeQueue, the first unit not consumed by every consumer group of its topic (by the
        delay service, for the schedule topic); a queue no group consumes counts as unread from its
        start. The log's max offset when everything was read. For forced clean-up (store/retention.py)."""
        lowest = self.max_offset
        delay = self.schedule.offsets
        offsets = self.consumer_offsets
        for queue in self.consume_queues.queues():
            start, end = queue.min_offset, queue.max_offset
            if end <= start:
                continue
            if queue.topic == SCHEDULE_TOPIC:
                consumed = delay.get(queue.queue_id + 1, start)
            else:
                groups = offsets.groups_of(queue.topic)
                consumed = min((offsets.query_offset(g, queue.topic, queue.queue_id) for g in groups), default=start)
            for unit in queue.get_units(max(consumed, start), 64):
                if not unit.is_filler:
                    lowest = min(lowest, unit.commit_log_offset)
                    break
        return lowest

    def _admit_topic(self, topic: str, queue_id: int) -> str | None:
        """None when the topic takes writes; auto-creates it on its first put. Which queue ids a
        producer may use is the broker's decision (it picks queues); the store records topics and
        honours their write permission."""
        if topic in self._writable_topics:
            return None
        with self._topic_lock:
            config = self._auto_created(topic, queue_id)
            if isinstance(config, AutoCreateRefusal):
                return config.reason
            if not config.perm & Permission.WRITE:
                return f"topic {topic} is not writable (perm {config.perm})"
            self._writable_topics.add(topic)
        return None

    def auto_create_topic(self, topic: str, queue_id: int = 0) -> TopicConfig | AutoCreateRefusal:
        """The topic's config, created now when it does not exist and auto-creation allows it;
        otherwise the reason it may not be created (which limit, which key raises it)."""
        with self._topic_lock:
            return self._auto_created(topic, queue_id)

    def _auto_created(self, topic: str, queue_id: int) -> TopicConfig | AutoCreateRefusal:
        config = self.topics.get(topic)
        if config is not None:
            return config
        if is_retry_or_dlq(topic):
            # A client's send to a retry or dead-letter name: the switch, then their own limits.
            refusal = self._auto_create.switched_off(topic) or self._retry_refusal(topic)
        else:
            users = sum(1 for name in self.topics.names() if not is_retry_or_dlq(name))
            refusal = self._auto_create.refusal(topic, users, self._clock())
        if refusal is not None:
            log.debug("auto-creation refused: %s", refusal.reason)
            return refusal
        queues = min(MAX_QUEUE_NUMS, max(self.config.default_topic_queue_nums, queue_id + 1))
        config = self.topics.create_or_update(TopicConfig(topic, read_queue_nums=queues, write_queue_nums=queues))
        log.info("auto-created topic %s with %d queues", topic, queues)
        return config

    def _retry_refusal(self, topic: str) -> AutoCreateRefusal | None:
        retries = sum(1 for name in self.topics.names() if is_retry_or_dlq(name))
        return self._retry_create.refusal(topic, retries, self._clock())

    def create_retry_topic(self, topic: str) -> TopicConfig | AutoCreateRefusal:
        """A consumer group's retry or dead-letter topic (one queue), created by the broker on
        first use whether or not autoCreateTopicEnable is on, within the retry topics' own limits
        (autoCreateRetryTopicMaxTopics, autoCreateRetryTopicPerMinute); the refusal otherwise."""
        if not is_retry_or_dlq(topic):
            raise ValueError(f"{topic} is not a retry or dead-letter topic")
        with self._topic_lock:
            config = self.topics.get(topic)
            if config is not None:
                return config
            refusal = self._retry_refusal(topic)
            if refusal is not None:
                return refusal
            config = self.topics.create_or_update(TopicConfig(topic, 1, 1))
        log.info("created %s for a consumer group's redeliveries", topic)
        return config

    def auto_create_refusals(self) -> dict[str, int]:
        """Auto-creations refused since the start, by the key of the limit that refused them."""
        with self._topic_lock:
            gates = (self._auto_create, self._retry_create)
            return {limit.value: count for gate in gates for limit, count in gate.refused.items()}

    def create_or_update_topic(self, config: TopicConfig) -> TopicConfig:
        with self._topic_lock:
            stored = self.topics.create_or_update(config)
            self._writable_topics.discard(config.topic_name)
        return stored

    def put_fence_reason(self) -> str | None:
        """Why the put fence (`set_put_fence`) refuses every put now, or None: in controller mode
        a broker that is not master, has no lease, or (a SYNC_MASTER) has too few in-sync
        replicas, as just after its election; a master handing over. Any thread."""
        fence = self._fence
        return fence() if fence is not None else None

    def write_refusal(self) -> str | None:
        """Why this broker takes no sends now (brokerPermission without the write bit), or None."""
        config = self.config
        if config is self._writable_config:  # every send asks; the answer changes with the config
            return None
        permission = config.broker_permission
        if permission & Permission.WRITE:
            self._writable_config = config
            return None
        return f"the broker is not writable now (brokerPermission={permission}): it is drained"

    def update_config(self, changes: Mapping[str, str]) -> StoreConfig:
        """Change keys of `LIVE_CONFIG_KEYS` on the running store (auto-creation and retention);
        the new config. ConfigError naming a key that cannot change live or a bad value; nothing
        changes then."""
        fixed = sorted(set(changes) - LIVE_CONFIG_KEYS)
        if fixed:
            raise ConfigError(
                f"{', '.join(fixed)}: not changeable on a running broker (change broker.conf and restart); "
                f"changeable: {', '.join(sorted(LIVE_CONFIG_KEYS))}"
            )
        config = replace_from_properties(self.config, changes)
        policy = CleanPolicy.from_config(config)
        with self._topic_lock:
            self.config = config
            self.topics.auto_create_topic_enable = config.auto_create_topic_enable
            self._auto_create.limits = _auto_create_limits(config)
            self._retry_create.limits = _retry_create_limits(config)
        if self._cleaner is not None:
            self._cleaner.policy = policy
        log.info("config changed: %s", ", ".join(f"{k}={v}" for k, v in sorted(changes.items())))
        return config

    def delete_topic(self, topic: str) -> bool:
        with self._topic_lock:
            self._writable_topics.discard(topic)
            return self.topics.delete(topic)

    def put_message(self, msg: Message) -> PutMessageResult:
        """Store one message; returns once it is as durable as the role and flush type ask."""
        return self._put_path.put((msg,), batch=False)

    def put_messages(self, batch: Sequence[Message]) -> PutMessageResult:
        """Store a batch for one topic and queue, contiguously, with consecutive queue offsets."""
        return self._put_path.put(batch, batch=True)

    async def async_put_message(self, msg: Message) -> PutMessageResult:
        """As put_message, awaiting durability without blocking the event loop."""
        return await self._put_path.put_async((msg,), batch=False)

    async def async_put_messages(self, batch: Sequence[Message]) -> PutMessageResult:
        return await self._put_path.put_async(batch, batch=True)

    def put_message_then(self, msg: Message, then: Callable[[PutMessageResult | BaseException], None]) -> None:
        """As async_put_message through a callback, on an event loop's thread: appended now, `then`
        called on this thread with the result (or the exception the wait ended with)."""
        self._put_path.put_then((msg,), False, then)

    def put_messages_then(
        self, batch: Sequence[Message], then: Callable[[PutMessageResult | BaseException], None]
    ) -> None:
        self._put_path.put_then(batch, True, then)

    def begin_put_message(self, msg: Message) -> Awaitable[PutMessageResult]:
        """Append `msg` now (on the calling event loop's thread); the awaitable answers when it is
        as durable as async_put_message would. For callers whose appends must keep their order."""
        return self._put_path.begin_async((msg,), batch=False)

    def end_transaction(self, prepared_offset: int, commit: bool) -> PutMessageResult:
        """Commit or roll back the prepared message at `prepared_offset`: a commit stores the
        message again with the COMMIT type, visible in its queue; a rollback stores a ROLLBACK
        record, never visible. Each keeps the prepared offset in PREPARED TX OFFSET."""
        try:
            prepared = self.read_message(prepared_offset)
        except CorruptMessage as exc:
            return PutMessageResult(
                Status.MESSAGE_ILLEGAL, reason=f"no prepared message at {prepared_offset}: {exc.reason}"
            )
        if prepared.sys_flag & TRANSACTION_TYPE_MASK != TRANSACTION_PREPARED_TYPE:
            return PutMessageResult(Status.MESSAGE_ILLEGAL, reason=f"the message at {prepared_offset} is not prepared")
        end_type = TRANSACTION_COMMIT_TYPE if commit else TRANSACTION_ROLLBACK_TYPE
        return self.put_message(
            prepared.to_message(
                sys_flag=(prepared.sys_flag & ~TRANSACTION_TYPE_MASK) | end_type,
                prepared_transaction_offset=prepared_offset,
            )
        )

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

    @property
    def dispatched_offset(self) -> int:
        return self.dispatcher.reput_from_offset

    def read_message(self, physical_offset: int) -> MessageExt:
        """The message at `physical_offset`: CorruptMessage when there is none, DamagedMessage
        (a CorruptMessage, counted in `damage`) when its body fails its CRC."""
        return self.commit_log.read_message(physical_offset)

    def _read_refused(self, error: DamagedMessage) -> None:
        self.damage.found(error, Reader.READ)

    @property
    def crc_checked_from_offset(self) -> int:
        """The CommitLog offset from which every record had its body CRC checked in this run or
        was written in it: the start-up scan checked from here to the log's end (from the end
        when checkCRCOnRecover is off), and later records were encoded from their bodies by the
        put path or received whole under the replication stream's checksum. Records below it
        were stored before this run and never checked since: what replication checks before
        shipping (reads check every message)."""
        return self._crc_checked_from

    def iter_messages(self, start_offset: int | None = None) -> Iterator[MessageExt]:
        return self.commit_log.iter_messages(start_offset)

    def commit_log_data(self, offset: int, size: int) -> bytes:
        return self.commit_log.read(offset, size)

    def max_queue_offset(self, topic: str, queue_id: int) -> int:
        """The next queue offset a put to this queue gets (0 for a queue never written); on a
        slave, whose puts arrive replicated, the end of the queue as dispatched."""
        if self.broker_role is BrokerRole.SLAVE:
            return self.dispatched_queue_offset(topic, queue_id)
        return self.commit_log.next_queue_offset(topic, queue_id)

    def find_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self.consume_queues.find(topic, queue_id)

    def min_queue_offset(self, topic: str, queue_id: int) -> int:
        queue = self.consume_queues.find(topic, queue_id)
        return queue.min_offset if queue is not None else 0

    def dispatched_queue_offset(self, topic: str, queue_id: int) -> int:
        """One past the last queue offset a reader can see now."""
        queue = self.consume_queues.find(topic, queue_id)
        return queue.max_offset if queue is not None else 0

    def queue_offset_undispatched(self, topic: str, queue_id: int, queue_offset: int) -> bool:
        """Whether a put was given `queue_offset` in this queue but the dispatcher has not made it
        readable yet (a read there will find it soon: read your writes). Always False on a
        slave, which assigns no queue offsets."""
        if self.broker_role is BrokerRole.SLAVE:
            return False
        # The assigned end first: the dispatched end never passes it, so a stale pair errs
        # towards "dispatched" (the reader answers as now), never towards a wait for nothing.
        assigned_next = self.commit_log.next_queue_offset(topic, queue_id)
        return assigned_not_dispatched(queue_offset, self.dispatched_queue_offset(topic, queue_id), assigned_next)

    def get_message(
        self,
        group: str,
        topic: str,
        queue_id: int,
        queue_offset: int,
        max_msg_nums: int = 32,
        max_total_bytes: int = 256 * 1024,
        tag_filter: TagFilter | str | None = None,
    ) -> GetMessageResult:
        """Up to `max_msg_nums` messages of a queue from `queue_offset` (RocketMQ's getMessage)."""
        if isinstance(tag_filter, str):
            tag_filter = TagFilter.parse(tag_filter)
        result = self._reader.get_message(
            group, topic, queue_id, queue_offset, max_msg_nums, max_total_bytes, tag_filter
        )
        self.stats.record_get(result.found, len(result.messages), result.buffer_total_size)
        return result

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        queue = self.consume_queues.find(topic, queue_id)
        if queue is None:
            return 0

        def store_time_of(offset: int, size: int) -> int | None:
            try:
                return self.commit_log.read_message(offset).store_timestamp_ms
            except CorruptMessage:
                return None

        return queue.get_offset_in_queue_by_time(timestamp_ms, store_time_of)

    def query_message(
        self, topic: str, key: str, max_num: int = 32, begin_ms: int = 0, end_ms: int | None = None
    ) -> QueryMessageResult:
        end = self._clock() if end_ms is None else end_ms
        return self._reader.query_message(topic, key, min(max_num, self.config.default_query_max_num), begin_ms, end)

    def view_message_by_id(self, msg_id: str) -> MessageExt:
        return self._reader.view_message_by_id(msg_id)

    # -- statistics ------------------------------------------------------------------------------

    def stats_snapshot(self) -> StoreStatsSnapshot:
        now = self._clock()
        lag_bytes = self.dispatcher.lag_bytes()
        last_ts = self.dispatcher.last_dispatched_store_timestamp_ms
        return self.stats.snapshot(
            now,
            dispatch_lag_bytes=lag_bytes,
            dispatch_lag_ms=max(0, now - last_ts) if lag_bytes and last_ts else 0,
            commit_log_min_offset=self.min_offset,
            commit_log_max_offset=self.max_offset,
            flushed_offset=self.flushed_offset,
            damage=self.damage.snapshot(self.min_offset),
        )
