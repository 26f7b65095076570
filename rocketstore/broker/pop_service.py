"""Pop consumption on a master: receive, ack and change invisible time over `store.pop_state`.

The decisions are `PopState`'s; this adapter reads messages from the store, writes the state's
events to `POP_TOPIC` through the put path, dead-letters messages past their last attempt, and
keeps the group's consumer offsets at the committed offsets (what admin tools show).

Durability: a decision is applied in memory and its events appended under one lock, so the log
holds them in decision order; the answer waits, outside the lock, for the put's durability. An
ack is answered OK only once its event is as durable as a message (PUT_OK): a master that dies
after that cannot make the new master deliver it again. Deliveries are answered without waiting for
their events' durability: at worst a new master delivers them again (at least once).

A revive round (`revive_due`, every `reviveInterval` on the loop) moves due deliveries to the
retry topic or the dead letters with no receive needed, under the same lock as the calls.

The state is rebuilt from `POP_TOPIC` when the store's role generation changes (start, promotion)
before the first call that needs it.

A slave serves pop calls only while it acts for a master that is down (the servicer decides when;
`rocketstore.broker.view.acts_for_master`). It cannot write its log, so its events go to its
`store.pop_journal.PopJournal` instead (an ack is answered once its line is fsynced), on top of
the state replayed from the `POP_TOPIC` it replicated. A master takes the journal back: its own,
when the slave is promoted (the first `_ready` after the role change appends the journal's events
to its log, then drops them), or a slave's, handed back over replication when the master returns
(`merge`). A slave does not dead-letter (that is a put): a message past its last attempt waits in
flight for a master. Events merged twice (a hand-back whose answer was lost is sent again) are
applied again in the same order, which leaves the same deliveries and acks.

Thread-safety: one event loop; store reads run in worker threads, journal appends in one writer
thread (so they land in decision order).
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import functools
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from rocketstore.broker.timer_state import PROPERTY_TIMER_DELIVER_MS
from store import BrokerRole, GetMessageStatus, MessageStore, TagFilter
from store.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_DLQ_ORIGIN_MESSAGE_ID,
    PROPERTY_RETRY_TOPIC,
    Message,
    MessageExt,
)
from store.metadata.auto_create import AutoCreateRefusal
from store.metadata.topic_config import DLQ_TOPIC_PREFIX, RETRY_TOPIC_PREFIX
from store.pop.pop_journal import PopJournal
from store.pop.pop_state import POP_TOPIC, STALE, Event, Inflight, Key, PopState, Refused, decode_events, encode_events
from store.results import PutMessageResult
from store.status import PutMessageStatus
from wire.log_limit import LogLimiter

from .core.pull import MAX_PULL_BYTES
from .core.queues import name_problem
from .core.send import PROPERTY_SHARDING_KEY
from .receipt_handle import InvalidReceiptHandle, Receipt, ReceiptSigner
from .repeating import Repeating
from .system_queue import read_events

log = logging.getLogger("rocketstore.broker.pop")

# A copy is a new message now: it is not delayed or timed again.
_NOT_COPIED = frozenset({PROPERTY_DELAY_TIME_LEVEL, PROPERTY_TIMER_DELIVER_MS})
# RocketMQ's default: a message is delivered at most 16 times, then dead-lettered.
DEFAULT_MAX_ATTEMPTS = 16
_REPLAY_GROUP = "RS_SYS_POP_REPLAY"
# A redelivery the broker cannot make now (its retry or dead-letter topic was refused, or the put
# failed) waits the receive's invisible time again, at most this long, then is tried again.
POSTPONE_MAX_MS = 60_000
# A revive round handles at most this many due deliveries of one queue (the next round goes on),
# and one it cannot move now (its topic refused, the put failed) is tried again this much later.
REVIVE_MAX_PER_QUEUE = 256
REVIVE_POSTPONE_MS = 5_000


@dataclass(frozen=True, slots=True)
class Popped:
    message: MessageExt
    attempt: int
    receipt_handle: str
    invisible_ms: int


class PopStatus(enum.Enum):
    OK = "OK"
    INVALID_RECEIPT_HANDLE = "INVALID_RECEIPT_HANDLE"
    NOT_DURABLE = "NOT_DURABLE"


@dataclass(frozen=True, slots=True)
class PopAnswer:
    status: PopStatus
    reason: str = ""
    receipt_handle: str = ""


def dlq_topic(group: str) -> str:
    return DLQ_TOPIC_PREFIX + group


def _attempts(topic: str, key: Key, ext: MessageExt | None, pops: int) -> int:
    """Deliveries of a message so far, counting `pops` from `key`'s queue: a copy in the retry
    topic (a queue of another topic than the one consumed) carries the attempts before it."""
    earlier = ext.reconsume_times if ext is not None and key[1] != topic else 0
    return pops + earlier


def retry_topic(group: str, topic: str) -> str:
    """Where a group's redeliveries of `topic` wait (RocketMQ 5's pop retry topic)."""
    return f"{RETRY_TOPIC_PREFIX}{group}_{topic}"


@dataclass(slots=True)
class _Round:
    """One receive in progress: what goes out and the events that record it."""

    state: PopState
    group: str
    topic: str
    batch: int
    invisible_ms: int
    now: int
    # False in a revive round: nobody receives, so nothing is delivered (what would be redelivered
    # in place stays due for the next receive).
    delivers: bool = True
    events: list[Event] = field(default_factory=list)
    popped: list[Popped] = field(default_factory=list)
    # Due deliveries out of attempts (or whose message is gone), and those going to the retry topic.
    dead: list[tuple[Key, int, int, int, MessageExt | None]] = field(default_factory=list)
    retries: list[tuple[Key, int, Inflight, int, MessageExt]] = field(default_factory=list)

    @property
    def until(self) -> int:
        return self.now + self.invisible_ms

    @property
    def postponed_until(self) -> int:
        return self.now + min(self.invisible_ms, POSTPONE_MAX_MS)

    @property
    def room(self) -> int:
        return self.batch - len(self.popped)

    @property
    def full(self) -> bool:
        return not self.delivers or len(self.popped) >= self.batch


class PopService:
    def __init__(
        self,
        store: MessageStore,
        signer: ReceiptSigner,
        clock_ms: Callable[[], int],
        *,
        max_attempts: Callable[[str], int] = lambda group: DEFAULT_MAX_ATTEMPTS,
        fifo: Callable[[str], bool] = lambda group: False,
        journal: PopJournal | None = None,
    ) -> None:
        self._store = store
        self._signer = signer
        self._clock = clock_ms
        self._max_attempts = max_attempts
        self._fifo = fifo
        self._revives: Repeating | None = None
        self._journal = journal
        self._journal_writer = ThreadPoolExecutor(1, thread_name_prefix="pop-journal") if journal else None
        self._state = PopState()
        self._built_for: tuple[int, int, int] | None = None
        self._lock = asyncio.Lock()
        self._pending: set[asyncio.Future] = set()  # delivery events not durable yet
        # Refused redeliveries come from consumers: one line per cause per interval.
        self._refusals = LogLimiter(log)

    def close(self) -> None:
        if self._journal_writer is not None:
            self._journal_writer.shutdown(wait=True)

    @property
    def _acting(self) -> bool:
        return self._store.broker_role is BrokerRole.SLAVE

    # -- the state, rebuilt from the log --------------------------------------------------------

    def _build_key(self) -> tuple[int, int, int]:
        # A master's state stays valid while its role does. A slave's is valid while its log and
        # its journal's drops stay as they were: its master coming back (the log grows) or taking
        # the journal back (a drop) makes the next acting episode start from the log again.
        store = self._store
        journal = self._journal.generation if self._journal is not None else 0
        return (store.role_generation, store.max_offset if self._acting else -1, journal)

    async def _ready(self) -> PopState:
        key = self._build_key()
        if key != self._built_for:
            acting = self._acting
            self._state = await asyncio.to_thread(self._replay, acting)
            self._built_for = key
            if not acting:
                await self._take_back_journal(self._state)
        return self._state

    def _replay(self, with_journal: bool) -> PopState:
        state = PopState()
        self._store.wait_dispatched(5.0)
        count = 0

        def apply(event: Event) -> None:
            nonlocal count
            state.apply(event)
            count += 1

        read_events(self._store, _REPLAY_GROUP, POP_TOPIC, 0, decode_events, apply, "pop state")
        journaled = self._journal.events() if with_journal and self._journal is not None else []
        for event in journaled:
            state.apply(event)
        log.info(
            "pop state rebuilt from %d events%s (%d queues)",
            count,
            f" and {len(journaled)} of the pop journal" if journaled else "",
            len(state.keys()),
        )
        return state

    async def _take_back_journal(self, state: PopState) -> None:
        """A promoted slave puts what it decided while acting into its log, then forgets it."""
        journal = self._journal
        if journal is None:
            return
        batches = await asyncio.to_thread(journal.batches)
        events = [event for batch in batches for event in decode_events(batch)]
        if not events:
            return
        result = await self._absorb(state, events)
        if result.status is not PutMessageStatus.PUT_OK:
            log.warning("the pop journal's %d events are not durable (%s); kept", len(events), result.status.name)
            self._built_for = None  # rebuilt, and taken back again, at the next call
            return
        await asyncio.to_thread(journal.drop, len(batches))
        self._built_for = self._build_key()
        self._commit_offsets(state, events)
        log.info("took %d pop events back from the pop journal into the log", len(events))

    def consumes_by_pop(self, group: str, topic: str) -> bool:
        """Whether the group pops from the topic here (its progress lives in the pop state)."""
        return any(key[0] == group and key[1] == topic for key in self._state.keys())

    async def merge(self, events: Sequence[Event]) -> PopAnswer:
        """A master takes a slave's pop journal back (the slave acted for it while it was down)."""
        async with self._lock:
            if self._acting:
                return PopAnswer(PopStatus.NOT_DURABLE, "this broker is a slave now")
            state = await self._ready()
            durable = self._absorb(state, events)
            self._commit_offsets(state, events)
        answer = self._durable_answer(await durable, "the handed-back pop state")
        if answer.status is PopStatus.OK:
            log.info("took %d pop events back from a slave that served reads while this master was down", len(events))
        return answer

    def _absorb(self, state: PopState, events: Sequence[Event]):
        """Events decided elsewhere (a slave's pop journal) join the state and this master's log:
        the awaitable of their put, as `_append`'s."""
        for event in events:
            state.apply(event)
        return self._append(events)

    def _start_offset(self, group: str, topic: str, queue_id: int) -> int:
        """Where a group new to the queue starts: its committed offset, else the queue's first
        message (a new group sees what is already stored, as RocketMQ does for young queues)."""
        committed = self._store.consumer_offsets.query_offset(group, topic, queue_id)
        return committed if committed >= 0 else self._store.min_queue_offset(topic, queue_id)

    def _append(self, events: Sequence[Event]):
        """An awaitable of the events' PutMessageResult: a put on a master, a journal line on a
        slave acting for its master (submitted in decision order to the journal's one writer)."""
        if self._acting:
            if self._journal is None or self._journal_writer is None:
                raise RuntimeError("a slave serves pop calls only with a pop journal")
            loop = asyncio.get_running_loop()
            return loop.run_in_executor(self._journal_writer, self._journal_put, list(events))
        body = encode_events(events)
        return self._store.begin_put_message(Message(topic=POP_TOPIC, queue_id=0, body=body))

    def _journal_put(self, events: list[Event]) -> PutMessageResult:
        assert self._journal is not None
        try:
            self._journal.append(events)
        except OSError as exc:
            log.error("the pop journal %s refused a write: %s", self._journal.path, exc)
            return PutMessageResult(PutMessageStatus.UNKNOWN_ERROR, reason=f"pop journal: {exc}")
        return PutMessageResult(PutMessageStatus.PUT_OK)

    def _commit_offsets(self, state: PopState, events: Sequence[Event]) -> None:
        """The groups' consumer offsets of the queues `events` touched follow the state."""
        for key in sorted({e.key for e in events}):
            committed = state.committed(key)
            if committed is not None:
                self._store.consumer_offsets.commit_offset(key[0], key[1], key[2], committed)

    # -- receive ------------------------------------------------------------------------------

    def next_due_ms(self, group: str, topic: str, queue_ids: Sequence[int]) -> int | None:
        keys = [(group, topic, q) for q in queue_ids]
        return self._state.next_due_ms([*keys, (group, retry_topic(group, topic), 0)])

    def awaits_dispatch(self, group: str, topic: str, queue_ids: Sequence[int], fifo: bool) -> bool:
        """Whether, in one of the receive's queues, the next message to pop was given its queue
        offset by a put but is not dispatched yet (read your writes: a receive that finds nothing
        waits for it). Asked before the receive, so that a dispatch ending during it is not taken
        for the queue's end. A FIFO queue with messages in flight gives nothing new anyway."""
        for key in self._sources(group, topic, queue_ids, fifo):
            progress = self._state.queue(key)
            if progress is not None and fifo and progress.inflight:
                continue
            next_offset = progress.next_offset if progress is not None else self._start_offset(*key)
            if self._store.queue_offset_undispatched(key[1], key[2], next_offset):
                return True
        return False

    def _sources(self, group: str, topic: str, queue_ids: Sequence[int], fifo: bool) -> list[Key]:
        """The queues a receive pops, in order: the group's retry queue of the topic first (when
        it exists), then the topic's queues."""
        keys = [(group, topic, q) for q in queue_ids]
        retry = retry_topic(group, topic)
        if not fifo and self._store.topics.get(retry) is not None:
            keys.insert(0, (group, retry, 0))
        return keys

    def _redeliver_in_place(self, group: str, topic: str, fifo: bool) -> bool:
        # FIFO groups keep a message group's order in its queue; a slave acting for its master
        # cannot put; a retry topic whose name would be too long cannot exist.
        return fifo or self._acting or name_problem("topic", retry_topic(group, topic)) is not None

    async def receive(
        self,
        group: str,
        topic: str,
        queue_ids: Sequence[int],
        tag_filter: TagFilter | None,
        batch: int,
        invisible_ms: int,
        *,
        fifo: bool = False,
    ) -> list[Popped]:
        """Up to `batch` messages: the retry queue's, then the topic's queues', each queue's due
        redeliveries (in place) before new ones.

        A delivery whose invisible time ran out goes to the group's retry topic of `topic`
        (`%RETRY%<group>_<topic>`, created on first use) with its attempts so far, and comes back
        from there, as RocketMQ 5 revives pops; when that topic may not be created now (the retry
        topics' own limits) or the copy fails, it comes back in place (or, with no room left in
        this batch, waits in flight a while longer). For a FIFO group it comes back in place instead,
        and a queue gives new messages only when none of its messages is in flight, at most one
        per message group at a time: a message goes out after the ones before it in its group are
        acked or dead-lettered, and its redeliveries come before anything later."""
        async with self._lock:
            state = await self._ready()
            now = self._clock()
            work = _Round(state, group, topic, batch, invisible_ms, now)
            in_place = self._redeliver_in_place(group, topic, fifo)
            for key in self._sources(group, topic, queue_ids, fifo):
                if work.full:
                    break
                _, source, queue_id = key
                # Where a new queue starts is looked up once, not on every receive.
                progress = state.queue(key) or state.progress(key, self._start_offset(group, source, queue_id))
                await self._take_due(work, key, in_place)
                if work.full:
                    break
                if fifo and progress.inflight:
                    continue  # its messages in flight come first
                await self._take_new(work, key, progress.next_offset, tag_filter, fifo)
            await self._settle_retries(work)
            await self._settle_dead(work)
            events = work.events
            durable = self._append(events) if events else None
            self._commit_offsets(state, events)
        if durable is not None:
            # The messages go out now: a delivery that does not become durable only means a new
            # master may deliver them again (at least once); the client need not wait for it.
            watch = asyncio.ensure_future(durable)
            self._pending.add(watch)
            watch.add_done_callback(functools.partial(self._delivery_settled, group))
        return work.popped

    async def _take_due(self, work: _Round, key: Key, in_place: bool) -> None:
        """The queue's deliveries whose invisible time ran out: again in place, to the retry topic
        (settled after the round), or to the dead letters once their attempts are spent."""
        group, topic, state = work.group, work.topic, work.state
        for offset, held in state.due(key, work.now, work.room):
            if in_place and not work.delivers and held.attempt < self._max_attempts(group):
                continue  # comes back in place at the next receive; a revive round only dead-letters it
            ext = await self._read_one(group, key[1], key[2], offset)
            attempts = _attempts(topic, key, ext, held.attempt)
            if ext is None or attempts >= self._max_attempts(group):
                work.dead.append((key, offset, held.token, attempts, ext))
            elif not in_place:
                work.retries.append((key, offset, held, attempts, ext))
            else:
                self._deliver(work, key, ext, offset, held.attempt + 1, attempts + 1)

    async def _take_new(
        self, work: _Round, key: Key, next_offset: int, tag_filter: TagFilter | None, fifo: bool
    ) -> None:
        """The queue's messages not delivered yet, from `next_offset`; a FIFO group's stop at the
        second message of a message group (it waits for the first one's ack)."""
        result = await asyncio.to_thread(
            self._store.get_message, work.group, key[1], key[2], next_offset, work.room, MAX_PULL_BYTES, tag_filter
        )
        groups_out: set[str] = set()
        stopped = False
        for ext in result.messages:
            if ext.queue_offset < next_offset:
                continue
            if fifo:
                message_group = ext.properties.get(PROPERTY_SHARDING_KEY, "")
                if message_group and message_group in groups_out:
                    stopped = True  # the rest of the queue waits for this one's ack
                    break
                groups_out.add(message_group)
            self._deliver(work, key, ext, ext.queue_offset, 1, _attempts(work.topic, key, ext, 1))
        if not stopped and result.status is not GetMessageStatus.OFFSET_OVERFLOW_BADLY:
            passed = work.state.pass_over(key, result.next_begin_offset)
            if passed is not None:
                work.events.append(passed)

    # -- revive: the broker's own schedule -----------------------------------------------------

    def start(self, interval_s: float) -> None:
        """Run `revive_due` every `interval_s` on the running loop (RocketMQ's reviveInterval)."""
        if self._revives is None:
            self._revives = Repeating(self.revive_due, lambda: interval_s, "pop revive")
            self._revives.start()

    async def stop(self) -> None:
        if self._revives is not None:
            await self._revives.stop()
            self._revives = None

    def _consumed_topic(self, group: str, source: str) -> str:
        """The topic a group consumes from a queue it pops: its retry topic's origin, or itself."""
        prefix = retry_topic(group, "")
        return source[len(prefix) :] if source.startswith(prefix) else source

    async def revive_due(self) -> int:
        """Deliveries whose invisible time ran out, handled with no receive needed: copied to the
        group's retry topic (where a receive finds them, its arrival waking waiting receives) or,
        past their last attempt, dead-lettered, as RocketMQ's revive service does; a FIFO
        group's that still have attempts stay in place for the group's next receive. A master's
        work: a slave acting for its master does not put. The number of events decided."""
        if self._acting:
            return 0
        async with self._lock:
            state = await self._ready()
            now = self._clock()
            events: list[Event] = []
            for key in state.due_keys(now):
                group = key[0]
                topic = self._consumed_topic(group, key[1])
                work = _Round(state, group, topic, REVIVE_MAX_PER_QUEUE, REVIVE_POSTPONE_MS, now, delivers=False)
                await self._take_due(work, key, self._redeliver_in_place(group, topic, self._fifo(group)))
                await self._settle_retries(work)
                await self._settle_dead(work)
                events += work.events
            durable = self._append(events) if events else None
            self._commit_offsets(state, events)
        if durable is not None:
            result = await durable
            if result.status is not PutMessageStatus.PUT_OK:
                log.warning(
                    "revived pop deliveries not durable (%s): a new master may revive them again", result.status.name
                )
        return len(events)

    def _deliver(self, work: _Round, key: Key, ext: MessageExt, offset: int, pops: int, attempt: int) -> None:
        event = work.state.deliver(key, offset, pops, work.until)
        work.events.append(event)
        work.popped.append(
            self._popped(work.group, work.topic, key, ext, attempt, event.token, work.until, work.invisible_ms)
        )

    async def _settle_retries(self, work: _Round) -> None:
        """Due deliveries copied to the group's retry topic; in place when that cannot be done now
        (or, with no room left in the batch, in flight a while longer)."""
        state, topic = work.state, work.topic
        for key, offset, held, attempts, ext in work.retries:
            if await self._put_copy(retry_topic(work.group, topic), topic, attempts, ext, "retry") is None:
                work.events.append(state.retry(key, offset, held.token))
            elif not work.full:
                # No retry topic for it now: redelivered where it is, as a FIFO group's are.
                self._deliver(work, key, ext, offset, held.attempt + 1, attempts + 1)
            else:
                work.events.append(state.postpone(key, offset, held.token, work.postponed_until))

    async def _settle_dead(self, work: _Round) -> None:
        """Deliveries out of attempts go to the dead letters (or wait, when they cannot now)."""
        state = work.state
        for key, offset, token, attempts, ext in work.dead:
            if ext is not None and await self._dead_letter(work.group, work.topic, attempts, ext) is not None:
                if not self._acting:  # an acting slave keeps it due: it waits for a master
                    work.events.append(state.postpone(key, offset, token, work.postponed_until))
                continue
            done = state.ack(key, offset, token)
            if done is not None and not isinstance(done, Refused):
                work.events.append(done)

    def _delivery_settled(self, group: str, watch: asyncio.Future) -> None:
        self._pending.discard(watch)
        if watch.cancelled():
            return
        exc = watch.exception()
        if exc is not None:
            reason = type(exc).__name__
        elif watch.result().status is not PutMessageStatus.PUT_OK:
            reason = watch.result().status.name
        else:
            return
        log.warning("pop deliveries to %s not durable (%s): a new master may deliver them again", group, reason)

    def _popped(
        self,
        group: str,
        topic: str,
        key: Key,
        ext: MessageExt,
        attempt: int,
        token: int,
        until: int,
        invisible_ms: int,
    ) -> Popped:
        # A handle names the queue it came from by the topic it is signed for (the retry topic's
        # or the topic's); the client sees the topic it asked for either way.
        receipt = Receipt(ext.queue_id, ext.queue_offset, token, until)
        shown = ext if ext.topic == topic else dataclasses.replace(ext, topic=topic)
        return Popped(shown, attempt, self._signer.sign(group, key[1], receipt), invisible_ms)

    async def _read_one(self, group: str, topic: str, queue_id: int, offset: int) -> MessageExt | None:
        result = await asyncio.to_thread(self._store.get_message, group, topic, queue_id, offset, 1, MAX_PULL_BYTES)
        for ext in result.messages:
            if ext.queue_offset == offset:
                return ext
        return None  # deleted by retention since it was delivered

    async def _put_copy(
        self, to_topic: str, origin: str, attempts: int, ext: MessageExt, what: str, extra: dict[str, str] | None = None
    ) -> str | None:
        """A copy of a delivered message into the group's retry or dead-letter topic (created on
        first use, within the limits of such topics), with the attempts it had, the topic it came
        from and `extra` properties. None when it is stored; otherwise why not (the message stays
        in flight where it is, and is tried again later)."""
        if self._acting:
            return "a slave serving reads for its master cannot put"  # it waits in flight for a master
        if self._store.topics.get(to_topic) is None:
            made = await asyncio.to_thread(self._store.create_retry_topic, to_topic)
            if isinstance(made, AutoCreateRefusal):
                self._refusals.log(
                    made.limit.value,
                    "%s of %s offset %d: %s; the message stays where it is",
                    what,
                    origin,
                    ext.queue_offset,
                    made.reason,
                )
                return made.reason
        properties = {k: v for k, v in ext.properties.items() if k not in _NOT_COPIED}
        properties[PROPERTY_RETRY_TOPIC] = origin
        properties.update(extra or {})
        copy = ext.to_message(topic=to_topic, queue_id=0, properties=properties, reconsume_times=attempts)
        result = await self._store.async_put_message(copy)
        if not result.status.is_stored:
            status = result.status.name
            self._refusals.log(
                status, "%s of %s offset %d failed (%s); tried again later", what, origin, ext.queue_offset, status
            )
            return f"the put into {to_topic} failed ({status})"
        return None

    async def _dead_letter(self, group: str, origin: str, attempts: int, ext: MessageExt) -> str | None:
        """A message past its last attempt (or given up by the client) goes to %DLQ%<group>: None,
        or why it could not (`_put_copy`)."""
        to_topic = dlq_topic(group)
        extra = {PROPERTY_DLQ_ORIGIN_MESSAGE_ID: ext.msg_id}
        refused = await self._put_copy(to_topic, origin, attempts, ext, "dead-letter", extra)
        if refused is None:
            log.info("%s offset %d dead-lettered to %s after %d attempts", origin, ext.queue_offset, to_topic, attempts)
        return refused

    # -- ack, change --------------------------------------------------------------------------

    def _verify(self, group: str, topic: str, handle: str) -> tuple[Key, Receipt] | PopAnswer:
        """The queue and delivery a handle names: signed for the topic, or for the group's retry
        topic of it (a redelivery)."""
        try:
            receipt = self._signer.verify(group, topic, handle)
            return (group, topic, receipt.queue_id), receipt
        except InvalidReceiptHandle as exc:
            refusal = PopAnswer(PopStatus.INVALID_RECEIPT_HANDLE, str(exc))
        retry = retry_topic(group, topic)
        try:
            receipt = self._signer.verify(group, retry, handle)
        except InvalidReceiptHandle:
            return refusal
        return (group, retry, receipt.queue_id), receipt

    async def ack(self, group: str, topic: str, handles: Sequence[str]) -> list[PopAnswer]:
        answers: list[PopAnswer | None] = [None] * len(handles)
        async with self._lock:
            state = await self._ready()
            events: list[Event] = []
            acked: list[int] = []
            for i, handle in enumerate(handles):
                verified = self._verify(group, topic, handle)
                if isinstance(verified, PopAnswer):
                    answers[i] = verified
                    continue
                key, receipt = verified
                outcome = state.ack(key, receipt.queue_offset, receipt.token)
                if isinstance(outcome, Refused):
                    answers[i] = PopAnswer(PopStatus.INVALID_RECEIPT_HANDLE, outcome.reason)
                elif outcome is None:
                    answers[i] = PopAnswer(PopStatus.OK)
                else:
                    events.append(outcome)
                    acked.append(i)
            durable = self._append(events) if events else None
            self._commit_offsets(state, events)
        if durable is not None:
            result = await durable
            answer = self._durable_answer(result, "the ack")
            for i in acked:
                answers[i] = answer
        return [a if a is not None else PopAnswer(PopStatus.OK) for a in answers]

    async def change_invisible(self, group: str, topic: str, handle: str, invisible_ms: int) -> PopAnswer:
        async with self._lock:
            state = await self._ready()
            verified = self._verify(group, topic, handle)
            if isinstance(verified, PopAnswer):
                return verified
            key, receipt = verified
            until = self._clock() + invisible_ms
            outcome = state.change(key, receipt.queue_offset, receipt.token, until)
            if isinstance(outcome, Refused):
                return PopAnswer(PopStatus.INVALID_RECEIPT_HANDLE, outcome.reason)
            durable = self._append([outcome])
        new = Receipt(receipt.queue_id, receipt.queue_offset, outcome.new_token, until)
        answer = self._durable_answer(await durable, "the new invisible time")
        return PopAnswer(answer.status, answer.reason, self._signer.sign(group, key[1], new))

    async def dead_letter_now(self, group: str, topic: str, handle: str) -> PopAnswer:
        """The client gives up on a delivery (ForwardMessageToDeadLetterQueue): dead-letter it, ack it."""
        async with self._lock:
            state = await self._ready()
            verified = self._verify(group, topic, handle)
            if isinstance(verified, PopAnswer):
                return verified
            key, receipt = verified
            held = state.inflight(key, receipt.queue_offset)
            if held is None or held.token != receipt.token:
                return PopAnswer(PopStatus.INVALID_RECEIPT_HANDLE, STALE if held is not None else "not in flight")
            if self._acting:
                return PopAnswer(
                    PopStatus.NOT_DURABLE, "a slave serving reads for its master cannot dead-letter; retry on a master"
                )
            ext = await self._read_one(group, key[1], receipt.queue_id, receipt.queue_offset)
            attempts = _attempts(topic, key, ext, held.attempt)
            refused = await self._dead_letter(group, topic, attempts, ext) if ext is not None else None
            if refused is not None:
                return PopAnswer(
                    PopStatus.NOT_DURABLE, f"the dead-letter queue did not take the message ({refused}); retry"
                )
            done = state.ack(key, receipt.queue_offset, receipt.token)
            if done is None or isinstance(done, Refused):
                return PopAnswer(PopStatus.OK)
            durable = self._append([done])
            self._commit_offsets(state, [done])
        return self._durable_answer(await durable, "the dead-lettering")

    @staticmethod
    def _durable_answer(result: PutMessageResult, what: str) -> PopAnswer:
        if result.status is PutMessageStatus.PUT_OK:
            return PopAnswer(PopStatus.OK)
        return PopAnswer(
            PopStatus.NOT_DURABLE,
            f"{what} is not durable ({result.status.name}): it may be lost if this master fails; retry it",
        )
