"""`Sender`: the one put path of both front ends, the thin asynchronous layer over `SendService`'s
decisions. Each front end has one per event loop (the gRPC server's, the remoting server's).

`submit(items, done)` checks and plans a send (`SendService`), then queues its messages for the end
of the loop's turn: everything queued in one turn, from any request and connection, is grouped
(`SendService.put_groups`) and appended then, each group answered through the store's callback
(`MessageStore.put_messages_then`: no task per put to make and resume; a put always runs to its
answer, so its statistics and the dispatcher's wake-up happen even when the client has gone), and
`done` is called once with one `SendOutcome` per item after the fence is checked again (a sequence:
for several stored messages of one put, a `PutOutcomes` that makes each only when read). `send` is
the same as a coroutine. `submit_batch(batch, done)` takes a remoting batch as one value
(`SendBatch`): checked whole and queued as one entry, or, when it does not pass whole, submitted as
its items. Several items that are not a unit (a gRPC SendMessage) and pass the checks together
(`SendService.plan_whole`) are one entry too, put alone after the turn's other puts; each still gets
its own outcome. Such an entry whose messages hold a producer's retry (looked for right before its
put) or that the store refuses before writing is sent again message by message, as any send that
does not pass whole is from the start. A topic that must be created first is created in a worker
thread (one creation at a time per loop), and the send queued after it. A shared append that the
store refuses as illegal before writing anything (one bad message) is put again message by message,
so only the bad one is refused. A put that fails with an exception (a bug) answers INTERNAL_ERROR
for its messages; the traceback is logged, at most once per 10 s.

Thread-safety: one event loop (the one `submit` is first called on); the store answers puts
there, creations run in worker threads.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from collections.abc import Callable, Sequence
from functools import partial

from store import PutMessageResult, PutMessageStatus, TopicConfig
from wire.log_limit import LogLimiter

from .refusals import Refusal, internal_error
from .send import BatchPlan, Planned, PutEntry, SendBatch, SendItem, SendOutcome, SendService, refused

log = logging.getLogger("rocketstore.broker.send")

Done = Callable[[Sequence[SendOutcome]], None]
Topics = dict[str, TopicConfig | Refusal | None]
_REFUSED_BEFORE_WRITING = (PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED)


class _Request:
    """One submitted send: its outcomes as its puts finish, answered when the last one does."""

    __slots__ = ("_outcomes", "_left", "_done", "_sender")

    def __init__(self, size: int, done: Done, sender: Sender) -> None:
        self._outcomes: list[SendOutcome | None] = [None] * size
        self._left = size
        self._done = done
        self._sender = sender

    def settle(self, indices: Sequence[int], outcomes: Sequence[SendOutcome]) -> None:
        if len(indices) == self._left == len(self._outcomes):
            # One put for the whole request (a single message, a unit): its indices are 0..n-1.
            self._left = 0
            self._sender.answer(self._done, outcomes)
            return
        for index, outcome in zip(indices, outcomes):
            self._outcomes[index] = outcome
        self._left -= len(indices)
        if self._left == 0:
            self._sender.answer(self._done, [o for o in self._outcomes if o is not None])


class Sender:
    def __init__(self, service: SendService) -> None:
        self._service = service
        self._store = service.store
        self._pending: list[PutEntry] = []
        self._create_lock: asyncio.Lock | None = None
        self._tasks: set[asyncio.Task] = set()
        self._failures = LogLimiter(log, logging.ERROR)

    # -- the front ends' calls ------------------------------------------------------------------

    def submit(self, items: Sequence[SendItem], done: Done, *, unit: bool = False) -> None:
        """On the loop: check, plan and queue `items` (a `unit` is stored and refused whole);
        `done` gets their outcomes, in order, once."""
        service = self._service
        refusal = service.roles.write_refusal()
        if refusal is not None:
            self.answer(done, [refused(item, refusal) for item in items])
            return
        if not unit and len(items) > 1:
            planned = service.plan_whole(items)
            if planned is not None:
                self._enqueue(self._whole(items, planned, done))
                return
        self._submit_each(items, done, unit)

    def _submit_each(self, items: Sequence[SendItem], done: Done, unit: bool) -> None:
        topics, create = self._service.topics_of(items)
        if create:
            self._spawn(self._create_then_queue(items, topics, create, done, unit))
        else:
            self._queue(items, topics, done, unit)

    def submit_batch(self, batch: SendBatch, done: Done) -> None:
        """`submit` of a batch as one value: to a served topic, passing the checks as a whole, it
        is queued as one entry (its messages planned, and its outcomes made, only when read);
        anything else (a topic to create, a refusal to find) goes the way of its items."""
        service = self._service
        if batch.messages and service.roles.write_refusal() is None:
            config = service.known_topic(batch.messages[0].topic)
            if isinstance(config, TopicConfig) and service.batch_fits(batch, config):
                self._enqueue(PutEntry(BatchPlan(batch.messages), True, lambda o: self.answer(done, o), batch.messages))
                return
        self.submit(batch.items(), done, unit=True)

    async def send(self, items: Sequence[SendItem], *, unit: bool = False) -> Sequence[SendOutcome]:
        future: asyncio.Future[Sequence[SendOutcome]] = asyncio.get_running_loop().create_future()

        def done(outcomes: Sequence[SendOutcome]) -> None:
            if not future.done():  # the caller may have gone (a cancelled call)
                future.set_result(outcomes)

        self.submit(items, done, unit=unit)
        return await future

    def close(self) -> None:
        """Cancel the topic creations in progress (the server is stopping); puts in the log run
        to their answer, which a closed connection drops."""
        for task in list(self._tasks):
            task.cancel()

    # -- planning and queueing ------------------------------------------------------------------

    async def _create_then_queue(
        self, items: Sequence[SendItem], topics: Topics, create: list[str], done: Done, unit: bool
    ) -> None:
        try:
            if self._create_lock is None:
                self._create_lock = asyncio.Lock()
            for topic in create:
                async with self._create_lock:
                    topics[topic] = await asyncio.to_thread(self._service.create_topic, topic)
            self._queue(items, topics, done, unit)
        except Exception as exc:
            self._failed("creating a topic", exc)
            self.answer(done, [refused(item, internal_error(exc)) for item in items])

    def _queue(self, items: Sequence[SendItem], topics: Topics, done: Done, unit: bool) -> None:
        if not items:
            self.answer(done, [])
            return
        if len(items) == 1:
            # One message (or a unit of one): one put answers it, no request to gather.
            (plan,) = self._service.plan(items, topics, unit=unit)
            if isinstance(plan, Refusal):
                self.answer(done, [refused(items[0], plan)])
            else:
                self._enqueue(PutEntry([plan], unit, lambda outcomes: self.answer(done, outcomes)))
            return
        request = _Request(len(items), done, self)
        refusals: list[int] = []
        failed: list[SendOutcome] = []
        entries: list[PutEntry] = []
        ready: list[Planned] = []
        for index, plan in enumerate(self._service.plan(items, topics, unit=unit)):
            if isinstance(plan, Refusal):
                refusals.append(index)
                failed.append(refused(items[index], plan))
            else:
                ready.append(plan)
        if unit and ready:
            entries.append(self._entry(request, ready, unit=True))
        else:
            entries.extend(self._entry(request, [plan], unit=False) for plan in ready)
        for entry in entries:
            self._enqueue(entry)
        if refusals:
            request.settle(refusals, failed)

    def _enqueue(self, entry: PutEntry) -> None:
        pending = self._pending
        pending.append(entry)
        if len(pending) == 1:
            # Sends planned in this turn of the loop are put together, after it.
            asyncio.get_running_loop().call_soon(self._flush)

    def _whole(self, items: Sequence[SendItem], planned: list[Planned], done: Done) -> PutEntry:
        """Several messages planned whole, put as one append; sent again message by message (each
        then answered as a send that does not pass whole is) when the put finds a retry among them
        or the store refuses the append before writing it (one message it will not take)."""

        def each() -> None:
            self._submit_each(items, done, False)

        def finish(outcomes: Sequence[SendOutcome]) -> None:
            if outcomes[0].status in _REFUSED_BEFORE_WRITING:
                each()
            else:
                self.answer(done, outcomes)

        return PutEntry(planned, True, finish, split=each)

    @staticmethod
    def _entry(request: _Request, planned: list[Planned], unit: bool) -> PutEntry:
        indices = [p.position for p in planned]
        return PutEntry(planned, unit, lambda outcomes: request.settle(indices, outcomes))

    # -- the puts -------------------------------------------------------------------------------

    def _flush(self) -> None:
        entries, self._pending = self._pending, []
        try:
            puts = self._service.put_groups(entries)
        except Exception as exc:
            # A bug must not cost the turn's other sends their answers: each goes alone.
            self._failed("grouping sends", exc)
            puts = [[entry] for entry in entries]
        for put in puts:
            self._put(put)

    def _put(self, group: list[PutEntry]) -> None:
        """Append `group` now; its entries are answered by `_landed`, on this loop, once the put is
        as durable as it must be (no task per put: the store calls back)."""
        try:
            if len(group) == 1 and group[0].split is not None and self._service.holds_retry(group[0].messages):
                group[0].split()
                return
            then = partial(self._landed, group)
            if len(group) == 1 and not group[0].unit:
                self._store.put_message_then(group[0].planned[0].message, then)
            else:
                self._store.put_messages_then([m for entry in group for m in entry.messages], then)
        except Exception as exc:
            self._landed(group, exc)

    def _landed(self, group: list[PutEntry], result: PutMessageResult | BaseException) -> None:
        if isinstance(result, BaseException):
            self._failed("a put", result)
            for entry in group:
                entry.finish([refused_planned(p, internal_error(result)) for p in entry.planned])
            return
        if len(group) > 1 and result.status in _REFUSED_BEFORE_WRITING:
            # One bad message refused the shared append before anything was written: each alone.
            for entry in group:
                self._put([entry])
            return
        first = 0
        for entry in group:
            entry.finish(SendService.outcomes(entry.planned, result, first))
            first += len(entry.planned)

    def answer(self, done: Done, outcomes: Sequence[SendOutcome]) -> None:
        """Hand a request its outcomes, the fence checked again first: a master that lost its
        lease (or is handing over) while the puts waited acknowledges nothing."""
        if outcomes and (outcomes[0].stored or any(o.stored for o in outcomes)):
            late = self._service.roles.late_refusal()
            if late is not None:
                outcomes = [_fenced(o, late) if o.stored else o for o in outcomes]
        try:
            done(outcomes)
        except Exception as exc:
            self._failed("answering a send", exc)

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _failed(self, what: str, exc: BaseException) -> None:
        self._failures.log(what, "%s failed: %s", what, "".join(traceback.format_exception(exc)))


def _fenced(outcome: SendOutcome, late: Refusal) -> SendOutcome:
    """A stored message the fence says not to acknowledge: refused, its ids kept."""
    return SendOutcome(refusal=late, client_id=outcome.client_id, msg_id=outcome.msg_id)


def refused_planned(planned: Planned, refusal: Refusal) -> SendOutcome:
    return SendOutcome(refusal=refusal, client_id=planned.client_id)
