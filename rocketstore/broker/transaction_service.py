"""Transactional messages on a master: half messages, their end, and the check-back of the
ones whose producer went quiet; over `store.transaction_state`.

A half message is the producer's message stored in RMQ_SYS_TRANS_HALF_TOPIC (queue 0) with
REAL_TOPIC / REAL_QID naming its destination (`half_message`); consumers never see that topic.
Its transaction id is its offset message id (store host and CommitLog offset), so an end names
the half directly; the broker checks that the half there is for the request's topic and message id.

- Commit stores the message again in its real topic and queue with the COMMIT transaction type and
  the half's offset in PREPARED TX OFFSET, then the resolution event in the op queue. Rollback
  stores only the event. The answer waits for the commit's (or the rollback event's) durability:
  OK means a new master will not deliver a rolled-back message nor lose a committed one. A master
  that dies between a commit's message and its event leaves the half pending: the new master
  checks back and a producer that answers commit again gets its message twice (at least once).
- Check-back (`due_checks`): a half pending for transactionTimeOut (or the producer's longer
  orphaned-transaction recovery time) is checked with a producer of its topic, then every
  transactionCheckInterval; after transactionCheckMax checks it is rolled back and logged, as
  RocketMQ discards it. A check counts only when a producer of the topic is connected to ask.

The state is read from the two system queues (`system_queue.read_queue`) as they grow, and from
the start again when the store's role generation changes (start, promotion, truncation).

Thread-safety: one event loop; store reads run in worker threads.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

from rocketstore.broker.transaction_state import (
    Event,
    Half,
    Refused,
    TransactionState,
    decode_events,
    encode_events,
)
from store import MessageStore
from store.log.codec import CorruptMessage, decode_msg_id
from store.message import (
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_TYPE_MASK,
    Message,
    MessageExt,
    parked,
)
from store.metadata.topic_config import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from store.results import PutMessageResult
from store.status import PutMessageStatus

from .system_queue import read_events, read_queue

log = logging.getLogger("rocketstore.broker.transaction")

# RocketMQ's property for a producer's orphaned-transaction recovery time.
PROPERTY_CHECK_IMMUNITY_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
_READER_GROUP = "RS_SYS_TRANSACTION"
_MAX_CHECKS_PER_ROUND = 256


@dataclass(frozen=True, slots=True)
class TransactionSettings:
    timeout_ms: int
    check_max: int
    check_interval_ms: int


class EndStatus(enum.Enum):
    OK = "OK"
    INVALID_TRANSACTION_ID = "INVALID_TRANSACTION_ID"
    NOT_STORED = "NOT_STORED"


@dataclass(frozen=True, slots=True)
class EndAnswer:
    status: EndStatus
    reason: str = ""
    put: PutMessageResult | None = None


@dataclass(frozen=True, slots=True)
class CheckBack:
    """A check-back to send: the half as its producer sent it, and the transaction id."""

    topic: str
    message: MessageExt
    transaction_id: str


def half_message(msg: Message, immunity_s: int = 0) -> Message:
    """The half message of a transactional `msg`: stored where consumers do not read."""
    extra = {PROPERTY_TRANSACTION_PREPARED: "true"}
    if immunity_s > 0:
        extra[PROPERTY_CHECK_IMMUNITY_SECONDS] = str(immunity_s)
    half = parked(msg, TRANS_HALF_TOPIC, 0, extra)
    return replace(half, sys_flag=msg.sys_flag & ~TRANSACTION_TYPE_MASK)


def as_sent(half: MessageExt) -> MessageExt:
    """The half as its producer sent it: real topic and queue, no broker bookkeeping."""
    properties = dict(half.properties)
    topic = properties.pop(PROPERTY_REAL_TOPIC, half.topic)
    queue_id = _int_or(properties.pop(PROPERTY_REAL_QUEUE_ID, ""), half.queue_id)
    properties.pop(PROPERTY_CHECK_IMMUNITY_SECONDS, None)
    return replace(half, topic=topic, queue_id=queue_id, properties=properties)


def _int_or(text: str, default: int) -> int:
    try:
        return int(text)
    except ValueError:
        return default


class TransactionService:
    def __init__(self, store: MessageStore, clock_ms: Callable[[], int], settings: TransactionSettings) -> None:
        self._store = store
        self._clock = clock_ms
        self._settings = settings
        self._state = TransactionState()
        self._generation: int | None = None
        self._half_next = 0
        self._op_next = 0
        self._lock = asyncio.Lock()
        self._resolving: set[int] = set()

    # -- the state, read from the log --------------------------------------------------------------

    def _half_of(self, ext: MessageExt) -> Half | None:
        properties = ext.properties
        topic = properties.get(PROPERTY_REAL_TOPIC)
        if ext.topic != TRANS_HALF_TOPIC or not topic:
            return None
        immunity_ms = _int_or(properties.get(PROPERTY_CHECK_IMMUNITY_SECONDS, ""), 0) * 1000
        first = ext.store_timestamp_ms + max(self._settings.timeout_ms, immunity_ms)
        message_id = properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or ext.msg_id
        return Half(ext.physical_offset, topic, message_id, first)

    def _catch_up(self) -> None:
        """Blocking: the halves and events written since the last call."""
        store, state = self._store, self._state

        def on_half(ext: MessageExt) -> None:
            half = self._half_of(ext)
            if half is not None:
                state.add_half(half)

        self._op_next = read_events(
            store, _READER_GROUP, TRANS_OP_HALF_TOPIC, self._op_next, decode_events, state.apply, "transaction op"
        )
        self._half_next = read_queue(store, _READER_GROUP, TRANS_HALF_TOPIC, 0, self._half_next, on_half)
        state.forget_below(store.min_offset)

    async def _ready(self) -> TransactionState:
        generation = self._store.role_generation
        rebuild = generation != self._generation
        if rebuild:
            self._state, self._half_next, self._op_next = TransactionState(), 0, 0
            self._generation = generation
            await asyncio.to_thread(self._store.wait_dispatched, 5.0)
        await asyncio.to_thread(self._catch_up)
        if rebuild:
            log.info("transaction state rebuilt: %d pending", self._state.pending_count)
        return self._state

    def _append(self, events: list[Event]):
        body = encode_events(events)
        return self._store.begin_put_message(Message(topic=TRANS_OP_HALF_TOPIC, queue_id=0, body=body))

    # -- end ---------------------------------------------------------------------------------------

    async def end(self, transaction_id: str, topic: str, message_id: str, commit: bool, source: str) -> EndAnswer:
        try:
            half_offset = decode_msg_id(transaction_id)[1]
        except ValueError:
            return _invalid(f"transaction id {transaction_id!r} is not one this broker gave")
        async with self._lock:
            state = await self._ready()
            if half_offset in self._resolving:
                return _invalid("this transaction is being ended by another request; retry")
            ext = await self._read_half(half_offset)
            if ext is None:
                return _invalid(f"transaction id {transaction_id!r} names no half message")
            half = self._half_of(ext)
            if half is None or half.topic != topic or half.message_id != message_id:
                return _invalid(f"transaction {transaction_id} is not message {message_id} of topic {topic}")
            state.add_half(half)
            if state.outcome(half_offset) is not None:
                # Ended already: the same end again is done, the other is refused (the state says why).
                again = state.resolve(half_offset, commit, source)
                if isinstance(again, Refused):
                    return _invalid(again.reason)
                return EndAnswer(EndStatus.OK, "already done")
            self._resolving.add(half_offset)
        try:
            put = None
            if commit:
                put = await self._store.async_put_message(self._committed(ext))
                if not put.status.is_stored:
                    return EndAnswer(EndStatus.NOT_STORED, f"the commit was not stored ({put.status.name})", put)
            async with self._lock:
                state = await self._ready()
                state.add_half(half)
                event = state.resolve(half_offset, commit, source)
                if isinstance(event, Refused):
                    # The role changed while the commit was stored; the new state knows better.
                    return _invalid(event.reason)
                durable = self._append([event]) if event is not None else None
        finally:
            self._resolving.discard(half_offset)
        result = await durable if durable is not None else None
        if put is not None:
            if result is not None and not result.status.is_stored:
                # The message is committed; only a check-back may follow (the producer says commit again).
                log.warning("the end of committed transaction %s not recorded (%s)", message_id, result.status.name)
            return EndAnswer(EndStatus.OK, put=put)
        if result is not None and not result.status.is_stored:
            return EndAnswer(EndStatus.NOT_STORED, f"the rollback was not stored ({result.status.name})", result)
        return EndAnswer(EndStatus.OK, put=result)

    async def _read_half(self, half_offset: int) -> MessageExt | None:
        if not self._store.min_offset <= half_offset < self._store.max_offset:
            return None
        try:
            return await asyncio.to_thread(self._store.read_message, half_offset)
        except (CorruptMessage, ValueError):
            return None

    @staticmethod
    def _committed(half: MessageExt) -> Message:
        sent = as_sent(half)
        properties = dict(sent.properties)
        properties.pop(PROPERTY_TRANSACTION_PREPARED, None)
        return sent.to_message(
            properties=properties,
            sys_flag=(half.sys_flag & ~TRANSACTION_TYPE_MASK) | TRANSACTION_COMMIT_TYPE,
            prepared_transaction_offset=half.physical_offset,
            store_host=None,
        )

    # -- check-back --------------------------------------------------------------------------------

    async def due_checks(self, can_ask: Callable[[str], bool]) -> list[CheckBack]:
        """The check-backs due now for topics with a producer to ask (`can_ask`), counted as
        made; halves past transactionCheckMax checks are rolled back."""
        settings = self._settings
        out: list[CheckBack] = []
        async with self._lock:
            state = await self._ready()
            now = self._clock()
            events: list[Event] = []
            for pending in state.due(now, _MAX_CHECKS_PER_ROUND):
                half = pending.half
                if half.half_offset in self._resolving:
                    continue
                if pending.checks >= settings.check_max:
                    event = state.resolve(half.half_offset, False, "check-max")
                    if event is not None and not isinstance(event, Refused):
                        log.warning(
                            "transaction %s of topic %s rolled back after %d unanswered checks (transactionCheckMax)",
                            half.message_id,
                            half.topic,
                            pending.checks,
                        )
                        events.append(event)
                    continue
                if not can_ask(half.topic):
                    continue
                ext = await self._read_half(half.half_offset)
                if ext is None:
                    continue
                checked = state.check(half.half_offset, now, settings.check_interval_ms)
                if checked is not None:
                    events.append(checked)
                    out.append(CheckBack(half.topic, as_sent(ext), ext.msg_id))
            durable = self._append(events) if events else None
        if durable is not None:
            result = await durable
            if result.status is not PutMessageStatus.PUT_OK:
                log.warning("transaction check records not durable (%s)", result.status.name)
        return out


def _invalid(reason: str) -> EndAnswer:
    return EndAnswer(EndStatus.INVALID_TRANSACTION_ID, reason)
