"""Dispatch (RocketMQ's ReputMessageService): turn CommitLog records into ConsumeQueue units,
IndexFile entries and message-arrival notifications.

`build_dispatch_request` is sans-IO: bytes at an offset in, a `DispatchRequest` out (topic, queue,
offsets, size, tags code, keys). `Dispatcher.dispatch_available` walks the CommitLog from
`reput_from_offset` up to a limit (the CommitLog max offset, or the confirmed offset replication
sets) and hands the round's requests, in CommitLog order, to each registered consumer in turn
(the ConsumeQueues first, so a message is in its queue before any listener hears of it); it never
reads past the limit. A round is handed over whole so that per-batch work is done once: a batch's
consecutive units of one queue go into the ConsumeQueue in one write.
`ReputMessageService` is the thread that calls it, every millisecond when idle (RocketMQ's rhythm),
or lends it to a caller for one round (`dispatch_here`, a slave's replicator).

Thread-safety: one round at a time (`ReputMessageService` serialises its thread and
`dispatch_here` callers); `reput_from_offset` is read by others (an int, atomic under the GIL);
consumers are registered before start.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from itertools import groupby
from operator import attrgetter
from typing import NamedTuple

from ..index.index_file import IndexService
from ..log.codec import CorruptMessage, RecordKind, check_record, decode_properties
from ..log.commitlog import NO_QUEUE_OFFSET_TYPES
from ..log.mapped_file_queue import MappedFileQueue
from ..log.recent_ids import Landed, RecentIds
from ..message import (
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
    transaction_type,
)
from ..schedule import SCHEDULE_TOPIC, delay_level_of
from ..service_thread import ServiceThread
from ..stats import StoreStats
from .consume_queue import ConsumeQueueTable, encode_unit
from .consume_queue import tags_code as consume_queue_tags_code

log = logging.getLogger(__name__)


class DispatchRequest(NamedTuple):
    """One record to dispatch. (A named tuple: one is built per message on the hot path, and
    tuples are the cheapest immutable value.)"""

    topic: str
    queue_id: int
    commit_log_offset: int
    msg_size: int
    tags_code: int
    store_timestamp_ms: int
    queue_offset: int
    keys: str
    uniq_key: str | None
    sys_flag: int
    prepared_transaction_offset: int

    @property
    def next_offset(self) -> int:
        return self.commit_log_offset + self.msg_size

    @property
    def transaction_type(self) -> int:
        return transaction_type(self.sys_flag)


DelayTime = Callable[[int, int], int]  # (delay level, store timestamp) -> delivery time


def build_dispatch_request(record, buf, offset: int, delivery_time: DelayTime | None) -> DispatchRequest:
    """The request for a checked message record (`codec.check_record`) at `offset` in `buf`."""
    properties = (
        decode_properties(buf[record.properties_pos : record.properties_pos + record.properties_len])
        if record.properties_len
        else {}
    )
    if record.topic == SCHEDULE_TOPIC and delivery_time is not None:
        tags_code = delivery_time(delay_level_of(properties), record.store_timestamp_ms)
    else:
        tags_code = consume_queue_tags_code(properties.get(PROPERTY_TAGS))
    # Positional, in the fields' order: a keyword call costs a third more, once per message.
    return DispatchRequest(
        record.topic,
        record.queue_id,
        offset,
        record.size,
        tags_code,
        record.store_timestamp_ms,
        record.queue_offset,
        properties.get(PROPERTY_KEYS, ""),
        properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
        record.sys_flag,
        record.prepared_transaction_offset,
    )


# A dispatch round's requests, in CommitLog order; a consumer sees each request once (again
# only when a round is repeated after a consumer raised: consumers must take repeats).
Consumer = Callable[[Sequence[DispatchRequest]], None]


def recent_ids_consumer(recent: RecentIds, below: Callable[[], int] | None = None) -> Consumer:
    """Remembers each record's producer id (UNIQ_KEY) and where it landed (store/recent_ids.py);
    with `below`, only of the records below the CommitLog offset it returns (those the put path
    did not append, and so did not remember itself: a master's own puts cost it nothing here)."""

    def remember(requests: Sequence[DispatchRequest]) -> None:
        end = below() if below is not None else None
        if end is not None and requests[0].commit_log_offset >= end:
            return  # the master's own puts: all remembered already (the common case there)
        recent.add_many(
            (
                request.topic,
                request.uniq_key,
                Landed(request.commit_log_offset, request.msg_size, request.queue_offset, request.store_timestamp_ms),
            )
            for request in requests
            if request.uniq_key and (end is None or request.commit_log_offset < end)
        )

    return remember


def queue_runs(requests: Sequence[DispatchRequest]) -> Iterator[list[DispatchRequest]]:
    """The requests that get a ConsumeQueue unit, in runs of one queue's consecutive queue
    offsets (prepared and rolled-back transaction messages get none: never visible by queue)."""
    run: list[DispatchRequest] = []
    for request in requests:
        if (request.sys_flag & TRANSACTION_TYPE_MASK) in NO_QUEUE_OFFSET_TYPES:
            continue
        if run:
            last = run[-1]
            if (
                request.queue_id != last.queue_id
                or request.queue_offset != last.queue_offset + 1
                or request.topic != last.topic
            ):
                yield run
                run = []
        run.append(request)
    if run:
        yield run


_TOPIC = attrgetter("topic")
_MSG_SIZE = attrgetter("msg_size")


def queue_consumer(queues: ConsumeQueueTable, stats: StoreStats) -> Consumer:
    """Counts every record (`StoreStats.record_dispatched`, once per run of one topic's records
    in the round) and writes its ConsumeQueue unit. A run of one queue's units goes in
    one write (`ConsumeQueue.put_run`: a batch's messages cost one append, not one each); a run
    that starts below the queue's end (a round repeated after a failure) goes unit by unit, so
    `ConsumeQueue.put` checks each repeat against what is there."""

    def to_queue(requests: Sequence[DispatchRequest]) -> None:
        # Counted per run of one topic, not per message (a round is mostly one topic's).
        for topic, of_topic in groupby(requests, _TOPIC):
            same_topic = list(of_topic)
            stats.record_dispatched(
                topic, len(same_topic), sum(map(_MSG_SIZE, same_topic)), same_topic[-1].store_timestamp_ms
            )
        for run in queue_runs(requests):
            first = run[0]
            queue = queues.get_or_create(first.topic, first.queue_id)
            if len(run) > 1 and first.queue_offset >= queue.max_offset:
                units = b"".join(encode_unit(r.commit_log_offset, r.msg_size, r.tags_code) for r in run)
                queue.put_run(first.queue_offset, units)
                continue
            for r in run:
                queue.put(r.queue_offset, r.commit_log_offset, r.msg_size, r.tags_code)

    return to_queue


def index_consumer(index: IndexService) -> Consumer:
    """Indexes every record's keys and unique key, except rolled-back transaction messages."""

    def to_index(requests: Sequence[DispatchRequest]) -> None:
        # The round's messages in one write (one pin and one header update, not one per message).
        index.build_index_many(
            [
                (r.topic, r.keys, r.uniq_key, r.commit_log_offset, r.store_timestamp_ms)
                for r in requests
                if (r.sys_flag & TRANSACTION_TYPE_MASK) != TRANSACTION_ROLLBACK_TYPE
            ]
        )

    return to_index


class Dispatcher:
    def __init__(
        self,
        queue: MappedFileQueue,
        start_offset: int,
        limit: Callable[[], int],
        delivery_time: DelayTime | None = None,
    ) -> None:
        self._queue = queue
        self.reput_from_offset = start_offset
        self.last_dispatched_store_timestamp_ms = 0
        self._limit = limit
        self._delivery_time = delivery_time
        self._consumers: list[Consumer] = []
        self.failed_at: int | None = None

    def add_consumer(self, consumer: Consumer) -> None:
        self._consumers.append(consumer)

    def set_limit(self, limit: Callable[[], int]) -> None:
        self._limit = limit

    @property
    def limit(self) -> int:
        return self._limit()

    def dispatch_available(self, max_records: int = 4096) -> int:
        """Dispatch up to `max_records` records below the limit; return how many messages went.
        A record that fails its checks stops dispatch at its offset (it is never skipped); the
        records before it are dispatched. When a consumer raises, the round is not counted and the
        next round repeats it whole."""
        limit = self._limit()
        offset = self.reput_from_offset
        requests: list[DispatchRequest] = []
        segment = None
        last_store_timestamp_ms = self.last_dispatched_store_timestamp_ms
        while offset < limit and len(requests) < max_records:
            if segment is None or offset >= segment.end_offset:
                segment = self._queue.find(offset)
                if segment is None:
                    if offset < self._queue.min_offset:
                        offset = self._queue.min_offset  # retention removed what was not dispatched yet
                        continue
                    break
            pos = offset - segment.file_from_offset
            buf = segment.buf
            try:
                record = check_record(buf, pos, segment.file_size, offset, verify_crc=False)
            except CorruptMessage as exc:
                if self.failed_at != offset:
                    log.error("dispatch stopped at CommitLog offset %d: %s", offset, exc.reason)
                    self.failed_at = offset
                break
            if record.kind == RecordKind.BLANK:
                offset = segment.end_offset
                continue
            if record.kind == RecordKind.END:
                break
            requests.append(build_dispatch_request(record, buf, offset, self._delivery_time))
            offset += record.size
            last_store_timestamp_ms = record.store_timestamp_ms
        if requests:
            for consumer in self._consumers:
                consumer(requests)
        self.last_dispatched_store_timestamp_ms = last_store_timestamp_ms
        self.reput_from_offset = offset
        return len(requests)

    def lag_bytes(self) -> int:
        return max(0, self._limit() - self.reput_from_offset)


class ReputMessageService(ServiceThread):
    """Dispatches as appends wake it (`wakeup` on every put under ASYNC_FLUSH; under SYNC_FLUSH
    once the put's result is known, after its flush and its slaves' acks). While bytes
    of the log are held back (a dispatch limit, a record still in a write buffer) it looks again
    every `held_s`; otherwise it sleeps until woken, `quiet_s` at most.

    `dispatch_here` runs a round on the calling thread instead (a slave's replicator, once the
    replicated bytes' acknowledgement is on its way, has nothing else to do until the next one:
    waking this thread for each chunk cost more than the round itself). One round at a time: the
    two take turns under one lock, and a caller that finds a round under way leaves it to it."""

    name = "reput-message"

    def __init__(
        self, dispatcher: Dispatcher, log_end: Callable[[], int], held_s: float = 0.001, quiet_s: float = 0.1
    ) -> None:
        super().__init__()
        self.dispatcher = dispatcher
        self._log_end = log_end
        self._held_s = held_s
        self._quiet_s = quiet_s
        self._round = threading.Lock()

    def run_once(self) -> None:
        with self._round:
            dispatched = self.dispatcher.dispatch_available()
        if dispatched == 0:
            held = self.dispatcher.reput_from_offset < self._log_end()
            self.wait_for_running(self._held_s if held else self._quiet_s)

    def dispatch_here(self) -> None:
        """One round on the calling thread; the service thread is woken instead when a round is
        under way, when this one failed (it repeats the round and logs why) or left bytes behind
        (held back, or more than a round): it keeps looking as `run_once` does."""
        if not self._round.acquire(blocking=False):
            self.wakeup()
            return
        try:
            if self.stopping:
                return
            self.dispatcher.dispatch_available()
            behind = self.dispatcher.reput_from_offset < self._log_end()
        except Exception:  # noqa: BLE001 - the service thread repeats the round and logs its failure
            behind = True
        finally:
            self._round.release()
        if behind:
            self.wakeup()

    def on_stop(self) -> None:
        try:
            with self._round:
                while self.dispatcher.dispatch_available():
                    pass
        except Exception as exc:  # noqa: BLE001 - the last round must not kill shutdown
            # Not lost: the next start dispatches again from the checkpoint.
            log.warning(
                "dispatching the last records at shutdown failed (%s: %s); the next start does it",
                type(exc).__name__,
                exc,
            )
