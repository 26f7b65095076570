"""The put path (docs/design.md §6):

    checks -> delay rewrite -> encode (no lock) -> producer retry? -> CommitLog.append (lock)
           -> wait on the flush and the replica outcome together (no lock)

A message whose producer id (UNIQ_KEY) the store holds among its recent ones for the same topic
(`recent_ids`) is a producer's retry (except in a `%RETRY%` topic, where each redelivery of one
message is a copy with the same id): it is not appended again but answered with the original's
result, after the same waits (the original may still be waiting for them itself). The messages of
a batch are remembered each where it landed (a retry of one of them alone is recognised), in one
update of the recent ids per batch (`RecentIds.add_run`); a batch itself is not checked against
them (a server that gathers single sends into a batch checks first).

A put that waits asks the replica side first: when it must wait for slaves, their replication
streams are woken for its bytes and flush the log once their chunk is out, so it does not wake the
flush thread (the flush then overlaps the slave's round trip; the flush thread's own rounds remain
the fallback). A put that waits gets a status or future from each side; any non-OK status wins,
the flush's first; each wait ends at its own deadline (syncFlushTimeout, slaveTimeout) with the
matching timeout status, and the message stays stored. A put on an event loop is woken once, when
both sides are in (or at the earlier deadline), not once per side (`put_wait.PutWait`); `put_then`
answers it through a callback, `put_async` through an awaited loop future. A put that does not
wait (ASYNC_FLUSH, or the WAIT property "false") only wakes the services. Bad input becomes a
status before anything is written.

Thread-safety: any number of threads and event loops put at once; the only shared mutable state
is behind the CommitLog lock, the stats' lock and the services' own locks.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from functools import partial
from itertools import repeat
from operator import attrgetter, sub
from typing import Protocol, cast

from ..config import StoreConfig
from ..message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_REAL_TOPIC,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
    Message,
)
from ..metadata.topic_config import RETRY_TOPIC_PREFIX
from ..replication import ReplicaGate
from ..results import PutMessageResult
from ..schedule import to_schedule_message
from ..stats import StoreStats
from ..status import PutMessageStatus
from .codec import EncodedMessage, MessageRejected, encode_batch, encode_message
from .commitlog import AppendResult, CommitLog, CommitLogClosed
from .put_wait import Outcome, PutWait, answer
from .recent_ids import Landed, RecentIds

log = logging.getLogger(__name__)

_PROPERTIES = attrgetter("properties")
_new_landed = partial(tuple.__new__, Landed)  # Landed from one (offset, size, queue offset, time) tuple

_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)

Status = PutMessageStatus


class _Pending:
    """A put that is in the log and now waits for durability. `msg_ids` for a retry answered
    with its original's result (nothing was encoded for it)."""

    __slots__ = ("encoded", "appended", "flush", "replica", "started_ns", "msg_ids")

    def __init__(
        self,
        encoded: EncodedMessage | None,
        appended: AppendResult,
        flush: Outcome,
        replica: Outcome,
        started_ns: int,
        msg_ids: tuple[str, ...] = (),
    ):
        self.encoded = encoded
        self.appended = appended
        self.flush = flush
        self.replica = replica
        self.started_ns = started_ns
        self.msg_ids = msg_ids


class FlushRequest(Protocol):
    """`GroupCommitService.request`: the flush outcome of everything below `next_offset`;
    `wake=False` leaves the flush thread asleep (someone else flushes soon)."""

    def __call__(self, next_offset: int, now_ms: int, *, wake: bool = True) -> Outcome: ...


@dataclass(frozen=True, slots=True)
class PutServices:
    """What a put waits on and wakes, from the store's running services: the flush request
    ((next_offset, now_ms) -> outcome; None under ASYNC_FLUSH), the replica gate, services to wake
    on every put, services to wake only when a put is about to block, services to wake for a put
    that does not wait (the group-commit flush thread, which a waiting put's flush request wakes
    itself), and services to wake once a put's result is known (`wake_after_answer`: the
    dispatcher under SYNC_FLUSH, whose work then runs after the answer instead of competing with
    the put's flush and replication for the GIL)."""

    request_flush: FlushRequest | None = None
    replica: ReplicaGate | None = None
    wake: tuple[Callable[[], None], ...] = ()
    wake_when_waiting: tuple[Callable[[], None], ...] = ()
    wake_unwaited: tuple[Callable[[], None], ...] = ()
    wake_after_answer: tuple[Callable[[], None], ...] = ()
    # The replication streams flush the log once their chunk is out (`flush_after_send`): a put
    # that waits for slaves leaves its flush to them instead of waking the flush thread.
    streams_flush: bool = False


class PutPath:
    """Immutable once built: the store builds a new one when its services or its replica gate
    change (a put in flight finishes on the one it started with)."""

    def __init__(
        self,
        config: StoreConfig,
        commit_log: CommitLog,
        stats: StoreStats,
        *,
        clock_ms: Callable[[], int],
        refusal: Callable[[int], PutMessageResult | None],
        admit_topic: Callable[[str, int], str | None],
        delay_levels: Sequence[int],
        services: PutServices = PutServices(),
        recent: RecentIds | None = None,
        msg_id_at: Callable[[int], str] | None = None,
    ) -> None:
        self._commit_log = commit_log
        self._stats = stats
        self._clock = clock_ms
        self._refusal = refusal
        self._admit_topic = admit_topic
        self._delay_levels = tuple(delay_levels)
        self._store_host = config.store_host
        self._max_append = config.max_append_size
        self._max_body = config.max_message_size
        self._flush_wait_s = config.sync_flush_timeout_ms / 1000
        self._replica_wait_s = config.slave_timeout_ms / 1000
        self._request_flush = services.request_flush
        self._replica = services.replica
        self._wake = services.wake
        # Woken only by puts about to block on a future: the wake costs them nothing then, and
        # the service works while they wait (the dispatcher, during an fsync).
        self._wake_when_waiting = services.wake_when_waiting
        self._wake_after_answer = services.wake_after_answer
        self._wake_unwaited = services.wake_unwaited
        self._streams_flush = services.streams_flush
        # Producer retries of stored messages: the recent ids, and how to name the original's id.
        self._recent = recent
        self._msg_id_at = msg_id_at

    # -- the steps ---------------------------------------------------------------------------

    def _prepare(self, msg: Message) -> Message:
        properties = getattr(msg, "properties", None)
        if properties and PROPERTY_DELAY_TIME_LEVEL in properties:
            return to_schedule_message(msg, self._delay_levels)
        return msg

    def _begin(self, messages: Sequence[Message], batch: bool, wait: bool) -> _Pending | PutMessageResult:
        started = time.perf_counter_ns()
        now = self._clock()
        refusal = self._refusal(now)
        if refusal is not None:
            return refusal
        # maxMessageSize limits the body, as the clients count it (a batch: its bodies together);
        # the encoded record gets room for its header and properties on top (max_append_size).
        body_bytes = sum(
            len(b) for b in (getattr(m, "body", b"") for m in messages) if isinstance(b, (bytes, bytearray))
        )
        if body_bytes > self._max_body:
            what = "the bodies of the batch are" if batch else "the body is"
            return PutMessageResult(
                Status.MESSAGE_ILLEGAL,
                reason=f"{what} {body_bytes} bytes; the limit (maxMessageSize) is {self._max_body}",
            )
        try:
            if batch:
                encoded = encode_batch(
                    messages, default_store_host=self._store_host, max_message_size=self._max_append, now_ms=now
                )
                first = messages[0]
            else:
                first = self._prepare(messages[0])
                encoded = encode_message(
                    first, default_store_host=self._store_host, max_message_size=self._max_append, now_ms=now
                )
        except MessageRejected as exc:
            return PutMessageResult(exc.status, reason=exc.reason)
        reason = self._admit_topic(messages[0].topic, messages[0].queue_id)
        if reason is not None:
            return PutMessageResult(Status.MESSAGE_ILLEGAL, reason=reason)
        recent = self._recent
        uniq_key = (
            None if batch or recent is None else (first.properties or {}).get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        )
        # A redelivery delayed on its way to a %RETRY% topic is parked first (REAL_TOPIC names it).
        home = (first.properties or {}).get(PROPERTY_REAL_TOPIC, first.topic)
        if uniq_key and recent is not None and not home.startswith(RETRY_TOPIC_PREFIX):
            landed = recent.get(first.topic, uniq_key)
            if landed is not None:
                return self._retry_of(landed, wait, now, started)
        try:
            appended = self._commit_log.append(encoded)
        except CommitLogClosed:
            return PutMessageResult(Status.SERVICE_NOT_AVAILABLE, reason="the store is shutting down")
        except OSError as exc:
            if exc.errno in _DISK_FULL:
                # The same condition as the disk-full state the clean-up service sets: one status.
                return PutMessageResult(Status.SERVICE_NOT_AVAILABLE, reason=f"the disk is full ({exc.strerror})")
            # A segment that cannot be created, or an append through pwrite that failed (EIO);
            # either way nothing of the put is visible.
            log.error("cannot create or write a CommitLog segment: %s", exc)
            return PutMessageResult(
                Status.CREATE_MAPPED_FILE_FAILED, reason=f"cannot create or write a segment: {exc.strerror}"
            )
        if recent is not None:
            if uniq_key:
                recent.add(
                    first.topic,
                    uniq_key,
                    Landed(
                        appended.wrote_offset, appended.wrote_bytes, appended.queue_offset, appended.store_timestamp_ms
                    ),
                )
            elif batch:
                self._remember_batch(recent, messages, encoded, appended)
        for wake in self._wake:
            wake()
        return self._pending(encoded, appended, wait, now, started)

    @staticmethod
    def _remember_batch(
        recent: RecentIds, messages: Sequence[Message], encoded: EncodedMessage, appended: AppendResult
    ) -> None:
        """A batch's producer ids, each where its record landed: a retry of one message of the
        batch, sent alone, is answered with its original's result. The `Landed` values are made
        by C loops (no Python frame per message) and added as one run of the batch's topic."""
        keys: list[str | None] = [
            p.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) if p else None for p in map(_PROPERTIES, messages)
        ]
        starts = encoded.starts
        ends = starts[1:]
        ends.append(encoded.size)
        wrote, queue_offset = appended.wrote_offset, appended.queue_offset
        landings = map(
            _new_landed,
            zip(
                map(wrote.__add__, starts),
                map(sub, ends, starts),
                range(queue_offset, queue_offset + len(starts)),
                repeat(appended.store_timestamp_ms),
            ),
        )
        if all(keys):
            recent.add_run(messages[0].topic, cast("list[str]", keys), landings)
        else:
            recent.add_run(
                messages[0].topic,
                [key for key in keys if key],
                [landed for key, landed in zip(keys, landings) if key],
            )

    def _retry_of(self, landed: Landed, wait: bool, now: int, started: int) -> _Pending:
        """A producer's retry of a message the log holds: nothing is appended, and the retry
        waits for the same durability as its original (which may still be waiting itself)."""
        appended = AppendResult(
            landed.wrote_offset, landed.wrote_bytes, landed.queue_offset, landed.store_timestamp_ms, 1
        )
        msg_id = self._msg_id_at(landed.wrote_offset) if self._msg_id_at is not None else ""
        log.debug("a retry of the message at %d: answered with its result", landed.wrote_offset)
        return self._pending(None, appended, wait, now, started, (msg_id,))

    def _pending(
        self,
        encoded: EncodedMessage | None,
        appended: AppendResult,
        wait: bool,
        now: int,
        started: int,
        msg_ids: tuple[str, ...] = (),
    ) -> _Pending:
        next_offset = appended.wrote_offset + appended.wrote_bytes
        flush: Outcome = Status.PUT_OK
        replica: Outcome = Status.PUT_OK
        if wait:
            if self._replica is not None:
                replica = self._replica.request(next_offset, now)
            if self._request_flush is not None:
                # A put that waits for slaves has woken their replication streams, and a stream
                # flushes the log once its chunk is out (`MessageStore.flush_after_send`): the
                # flush overlaps the slave's round trip without a hand-off to the flush thread,
                # whose own rounds remain the fallback (a stream that cannot send).
                streams = self._streams_flush and not isinstance(replica, Status)
                flush = self._request_flush(next_offset, now, wake=not streams)
            if not (isinstance(flush, Status) and isinstance(replica, Status)):
                for wake in self._wake_when_waiting:
                    wake()
        else:
            for wake in self._wake_unwaited:
                wake()
        return _Pending(encoded, appended, flush, replica, started, msg_ids)

    def _result(self, pending: _Pending, flush_status: Status, replica_status: Status) -> PutMessageResult:
        status = flush_status if flush_status is not Status.PUT_OK else replica_status
        appended = pending.appended
        ids = pending.msg_ids if pending.encoded is None else tuple(pending.encoded.msg_ids(appended.wrote_offset))
        self._stats.record_put(status, appended.msg_num, (time.perf_counter_ns() - pending.started_ns) // 1000)
        for wake in self._wake_after_answer:
            wake()
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

    def _failed(self, result: PutMessageResult) -> PutMessageResult:
        self._stats.record_put(result.status, 0, 0)
        return result

    @staticmethod
    def _wait(outcome: Outcome, timeout_s: float, on_timeout: Status) -> Status:
        if isinstance(outcome, Status):
            return outcome
        try:
            return outcome.result(timeout_s)
        except FutureTimeout:
            return on_timeout

    @staticmethod
    def _waits(msg: object) -> bool:
        properties = getattr(msg, "properties", None)
        return not properties or properties.get(PROPERTY_WAIT_STORE_MSG_OK) != "false"

    # -- the public calls ----------------------------------------------------------------------

    def put(self, messages: Sequence[Message], batch: bool) -> PutMessageResult:
        pending = self._begin(messages, batch, self._waits(messages[0] if messages else None))
        if isinstance(pending, PutMessageResult):
            return self._failed(pending)
        flush = self._wait(pending.flush, self._remaining(pending, self._flush_wait_s), Status.FLUSH_DISK_TIMEOUT)
        replica = self._wait(
            pending.replica, self._remaining(pending, self._replica_wait_s), Status.FLUSH_SLAVE_TIMEOUT
        )
        return self._result(pending, flush, replica)

    @staticmethod
    def _remaining(pending: _Pending, timeout_s: float) -> float:
        """What is left of a wait that started with the put: the flush and replica waits run one
        after the other, and each must end at its own deadline from the put, not add up."""
        return max(0.0, timeout_s - (time.perf_counter_ns() - pending.started_ns) / 1e9)

    async def put_async(self, messages: Sequence[Message], batch: bool) -> PutMessageResult:
        return await self._settle_async(self._begin(messages, batch, self._waits(messages[0] if messages else None)))

    def begin_async(self, messages: Sequence[Message], batch: bool) -> Awaitable[PutMessageResult]:
        """As put_async, but the append happens in this call: callers that order appends under a
        lock of their own await durability after releasing it."""
        return self._settle_async(self._begin(messages, batch, self._waits(messages[0] if messages else None)))

    def put_then(
        self, messages: Sequence[Message], batch: bool, then: Callable[[PutMessageResult | BaseException], None]
    ) -> None:
        """As put_async without a coroutine, on an event loop's thread: appends in this call and
        calls `then` on this thread with the result (or the exception the flush or replica wait
        ended with, which put_async would raise), at once when there is nothing to wait for.
        For a caller with a callback per put, which then has no task to make and resume."""
        pending = self._begin(messages, batch, self._waits(messages[0] if messages else None))
        if isinstance(pending, PutMessageResult):
            answer(then, self._failed(pending))
            return
        self._answer_on_loop(pending, then)

    def _answer_on_loop(self, pending: _Pending, then: Callable[[PutMessageResult | BaseException], None]) -> PutWait:
        """Wait for `pending`'s outcomes on this loop (`PutWait`), then call `then` with its result,
        or with the exception the wait, or building the result (a bug), ended with."""

        def finish(statuses: tuple[Status, ...] | BaseException) -> None:
            if isinstance(statuses, BaseException):
                then(statuses)
                return
            try:
                result = self._result(pending, *statuses)
            except Exception as exc:  # noqa: BLE001 - a bug: the put's answer says so
                then(exc)
                return
            then(result)

        started = pending.started_ns
        return PutWait(
            (
                (pending.flush, started + int(self._flush_wait_s * 1e9), Status.FLUSH_DISK_TIMEOUT),
                (pending.replica, started + int(self._replica_wait_s * 1e9), Status.FLUSH_SLAVE_TIMEOUT),
            ),
            finish,
        )

    async def _settle_async(self, pending: _Pending | PutMessageResult) -> PutMessageResult:
        if isinstance(pending, PutMessageResult):
            return self._failed(pending)
        waiter: asyncio.Future[PutMessageResult] = asyncio.get_running_loop().create_future()

        def settle(result: PutMessageResult | BaseException) -> None:
            if waiter.done():
                return  # the awaiting task was cancelled
            if isinstance(result, BaseException):
                waiter.set_exception(result)
            else:
                waiter.set_result(result)

        wait = self._answer_on_loop(pending, settle)
        if not waiter.done():
            try:
                await waiter
            except asyncio.CancelledError:
                wait.cancel()
                raise
        return waiter.result()
