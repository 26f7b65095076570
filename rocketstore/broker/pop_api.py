"""The client API's pop consumption calls (RocketMQ 5's SimpleConsumer and PushConsumer):
QueryAssignment, ReceiveMessage, AckMessage, ChangeInvisibleDuration, as `PopApi`, which the
`MessagingServicer` delegates to.

Wire facts owned here:
- QueryAssignment answers one assignment per topic on this broker, queue id -1: "any queue of
  the topic", as RocketMQ's proxy does for pop consumption. ReceiveMessage takes a queue id or -1
  and pops from every readable queue of the topic, starting at the one named.
- ReceiveMessage streams one Status, then the messages (each with receipt_handle,
  delivery_attempt and invisible_duration), then the delivery timestamp; no message within the
  long-polling time answers MESSAGE_NOT_FOUND, which the clients read as "nothing now". A
  receive that stopped at a message whose put was answered but which is not dispatched yet waits
  for it even with no long poll (read your writes, `long_polling.dispatch_wait_seconds`).
- Invisible durations are accepted from 1 s to 12 h (RocketMQ's proxy asks at least 10 s on
  receive; tests here use shorter ones); none given (PushConsumer) means defaultInvisibleTimeMills
  (60 s). Such a receive with auto_renew has its deliveries renewed (`pop_renewals.py`) until the
  client acks, nacks or dead-letters them (by the handle it got: the broker uses the current one)
  or goes away.
- An ack (or a dead-lettering) in a FIFO group, and any change of invisible time, wakes the
  receives long-polling the topic: a FIFO group's next message goes out as soon as the one before
  it is acked, not when a waiting receive's long poll runs out.
- A receipt handle that does not verify, or names a delivery no longer current, is refused
  INVALID_RECEIPT_HANDLE; an ack or change that is not durable answers MASTER_PERSISTENCE_TIMEOUT.

Pop calls are served by a master, and by a slave only while it acts for its master that is down
(`enableSlaveActingMaster`); otherwise a slave answers FORBIDDEN naming the master.

Thread-safety: one event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable

from google.protobuf import timestamp_pb2

from store import MessageStore
from store.metadata.topic_config import SYSTEM_TOPICS, TopicConfig
from wire.rpc import messaging_pb2 as pb

from . import codes
from .call_metadata import call_headers
from .client_sightings import client_id_of
from .config import BrokerConfigs
from .core.long_polling import ArrivalWatch, Read, Step, dispatch_wait_seconds, long_poll_seconds, poll
from .core.queues import group_problem, topic_from_queues, topic_problem
from .core.refusals import Reason, Refusal
from .pop_renewals import RenewalLimits, RenewalSchedule
from .pop_service import PopAnswer, Popped, PopService, PopStatus, retry_topic
from .repeating import Repeating
from .v2_messages import OK, duration_of, pop_assignment, status, tag_filter_of, to_pb_message

log = logging.getLogger("rocketstore.broker.pop")

MIN_INVISIBLE_MS = 1_000
MAX_INVISIBLE_MS = 12 * 3600 * 1000
# Deliveries renewed for their consumers at once; past that one keeps the time it was given.
MAX_RENEWALS = 100_000
MAX_RECEIVE_BATCH = 1024
MAX_ACK_ENTRIES = 1024


def _pop_status(answer: PopAnswer) -> pb.Status:
    if answer.status is PopStatus.OK:
        return OK
    if answer.status is PopStatus.INVALID_RECEIPT_HANDLE:
        return status(pb.INVALID_RECEIPT_HANDLE, answer.reason)
    return status(pb.MASTER_PERSISTENCE_TIMEOUT, answer.reason)


class PopApi:
    def __init__(
        self,
        store: MessageStore,
        configs: BrokerConfigs,
        pop: PopService,
        arrivals: ArrivalWatch,
        refusal: Callable[[], Refusal | None],
        clock_ms: Callable[[], int],
    ) -> None:
        self._clock = clock_ms
        self._store = store
        self._configs = configs
        self._pop = pop
        self._arrivals = arrivals
        self._refusal = refusal
        broker = configs.broker
        limits = RenewalLimits(
            broker.renew_ahead_time_ms, broker.renew_slice_time_ms, broker.renew_max_time_ms, MAX_RENEWALS
        )
        self._renewals = RenewalSchedule(limits)
        # Held while one delivery is renewed: a client's ack, nack or dead letter of it waits for
        # the renewal's new handle rather than racing it with the old one.
        self._renewing = asyncio.Lock()
        self._renew_rounds = Repeating(self.renew_due, self._renew_pause_s, "pop renewal")

    # -- checks ---------------------------------------------------------------------------------

    def _resource_problem(self, group: str, topic: str) -> pb.Status | None:
        refused = self._resource_refusal(group, topic)
        return None if refused is None else codes.refusal_status(refused)

    def _resource_refusal(self, group: str, topic: str) -> Refusal | None:
        refused = group_problem(group) or topic_problem(topic)
        if refused is not None:
            return refused
        if topic in SYSTEM_TOPICS:
            return Refusal(Reason.SYSTEM_TOPIC, f"{topic} is a system topic; consumers cannot pop it")
        refused = self._refusal()  # a slave names its master before it knows the topic
        if refused is not None:
            return refused
        config = self._topic(topic)
        if config is None:
            return Refusal(Reason.TOPIC_NOT_FOUND, f"topic {topic} does not exist")
        if not config.readable:
            return Refusal(Reason.TOPIC_NOT_READABLE, f"topic {topic} is not readable (perm {config.perm})")
        return None

    def _topic(self, topic: str) -> TopicConfig | None:
        # A slave serving reads may hold a topic's messages before its master's table reaches it.
        return self._store.topics.get(topic) or topic_from_queues(self._store, topic)

    def _queue_ids(self, topic: str, first: int) -> list[int]:
        config = self._topic(topic)
        count = config.read_queue_nums if config is not None else 0
        ids = list(range(count))
        if 0 < first < count:
            ids = ids[first:] + ids[:first]
        return ids

    # -- QueryAssignment ------------------------------------------------------------------------

    async def query_assignment(self, request: pb.QueryAssignmentRequest, endpoints: pb.Endpoints):
        refused = self._resource_problem(request.group.name, request.topic.name)
        if refused is not None:
            return pb.QueryAssignmentResponse(status=refused)
        assignment = pop_assignment(request.topic, self._configs.broker.broker_name, endpoints, pb.READ_WRITE)
        return pb.QueryAssignmentResponse(status=OK, assignments=[assignment])

    # -- ReceiveMessage -------------------------------------------------------------------------

    def _receive_problem(self, request: pb.ReceiveMessageRequest) -> pb.Status | None:
        refused = self._resource_problem(request.group.name, request.message_queue.topic.name)
        if refused is not None:
            return refused
        if request.batch_size <= 0:
            return status(pb.BAD_REQUEST, f"batch_size must be positive, got {request.batch_size}")
        if request.HasField("invisible_duration"):
            ms = request.invisible_duration.ToMilliseconds()
            if not MIN_INVISIBLE_MS <= ms <= MAX_INVISIBLE_MS:
                return status(
                    pb.ILLEGAL_INVISIBLE_TIME,
                    f"invisible_duration {ms} ms is outside {MIN_INVISIBLE_MS}..{MAX_INVISIBLE_MS} ms",
                )
        if request.HasField("long_polling_timeout"):
            timeout = request.long_polling_timeout
            if timeout.seconds < 0 or timeout.nanos < 0:
                return status(pb.ILLEGAL_POLLING_TIME, "long_polling_timeout is negative")
        return None

    def _wait_seconds(self, request: pb.ReceiveMessageRequest, context) -> float:
        broker_max_ms = self._configs.broker.long_polling_max_ms
        if request.HasField("long_polling_timeout"):
            wanted_ms = request.long_polling_timeout.ToMilliseconds()
        else:
            wanted_ms = broker_max_ms
        return long_poll_seconds(wanted_ms, broker_max_ms, context.time_remaining())

    async def receive(self, request: pb.ReceiveMessageRequest, context) -> AsyncIterator[pb.ReceiveMessageResponse]:
        refused = self._receive_problem(request)
        if refused is not None:
            yield pb.ReceiveMessageResponse(status=refused)
            return
        tag_filter = tag_filter_of(request.filter_expression)
        if isinstance(tag_filter, pb.Status):
            yield pb.ReceiveMessageResponse(status=tag_filter)
            return
        group = request.group.name
        queue = request.message_queue
        topic = queue.topic.name
        queue_ids = self._queue_ids(topic, queue.id)
        given = request.HasField("invisible_duration")
        invisible_ms = (
            request.invisible_duration.ToMilliseconds() if given else self._configs.broker.default_invisible_time_ms
        )
        # RocketMQ 5's PushConsumer asks the broker to keep its messages invisible while it works.
        renew_for = client_id_of(call_headers(context), context.peer())
        renew = request.auto_renew and not given
        batch = min(request.batch_size, MAX_RECEIVE_BATCH)
        fifo = group in self._configs.broker.fifo_groups

        async def pop(waited: bool) -> Read[list]:
            pending = self._pop.awaits_dispatch(group, topic, queue_ids, fifo)
            popped = await self._pop.receive(group, topic, queue_ids, tag_filter, batch, invisible_ms, fifo=fifo)
            if popped:
                return Read(Step.DONE, popped)
            return Read(Step.PENDING if pending else Step.WAIT, popped)

        def wake_in_s() -> float | None:
            # An in-flight message becomes visible again before the deadline: wake for it.
            due_ms = self._pop.next_due_ms(group, topic, queue_ids)
            return None if due_ms is None else max(0.0, (due_ms - self._clock()) / 1000) + 0.005

        keys = self._watched(group, topic, queue_ids)
        wait_s = self._wait_seconds(request, context)
        pending_wait_s = dispatch_wait_seconds(context.time_remaining())
        popped = await poll(self._arrivals, keys, wait_s, pop, wake_in_s, pending_wait_s=pending_wait_s)
        if not popped:
            yield pb.ReceiveMessageResponse(status=status(pb.MESSAGE_NOT_FOUND, "no new message"))
            return
        if renew:
            self._renew(renew_for, group, topic, popped)
        yield pb.ReceiveMessageResponse(status=OK)
        for item in popped:
            message = to_pb_message(item.message, queue.topic.resource_namespace)
            sp = message.system_properties
            sp.delivery_attempt = item.attempt
            sp.receipt_handle = item.receipt_handle
            sp.invisible_duration.CopyFrom(duration_of(item.invisible_ms))
            yield pb.ReceiveMessageResponse(message=message)
        now = timestamp_pb2.Timestamp()
        now.GetCurrentTime()
        yield pb.ReceiveMessageResponse(delivery_timestamp=now)

    @staticmethod
    def _watched(group: str, topic: str, queue_ids: list[int]) -> list[tuple[str, int]]:
        # Redeliveries come back through the group's retry topic: its arrivals wake the poll too.
        return [(topic, q) for q in queue_ids] + [(retry_topic(group, topic), 0)]

    def _release(self, group: str, topic: str, answers: list[PopAnswer], *, fifo_only: bool) -> None:
        """Receives waiting on the topic read again now that a call changed what they may get: an
        ack or dead-lettering lets a FIFO group's next message go out (issue 32: it waited for
        the long poll to run out), a new invisible time moves when a message comes back."""
        if fifo_only and group not in self._configs.broker.fifo_groups:
            return
        if any(a.status is PopStatus.OK for a in answers):
            self._arrivals.wake(self._watched(group, topic, self._queue_ids(topic, 0)))

    # -- auto-renew -----------------------------------------------------------------------------

    def start(self) -> None:
        self._renew_rounds.start()

    async def stop(self) -> None:
        await self._renew_rounds.stop()

    def _renew(self, client_id: str, group: str, topic: str, popped: list[Popped]) -> None:
        now = self._clock()
        for item in popped:
            if not self._renewals.add(client_id, group, topic, item.receipt_handle, now + item.invisible_ms, now):
                log.warning("%d deliveries are renewed already; those of %s now are not", MAX_RENEWALS, group)
                return

    def _renew_pause_s(self) -> float:
        # Never sleep past a renewal's time: at most half the margin before its delivery shows.
        ceiling = min(1.0, self._renewals.limits.ahead_ms / 2000)
        next_ms = self._renewals.next_due_ms()
        if next_ms is None:
            return ceiling
        return min(max((next_ms - self._clock()) / 1000, 0.01), ceiling)

    async def renew_due(self) -> int:
        """One round: the deliveries due for renewal get their new invisible time. How many."""
        slice_ms = self._renewals.limits.slice_ms
        renewed = 0
        for key, handle in self._renewals.due(self._clock()):
            group, topic, _ = key
            async with self._renewing:
                if self._renewals.handle_of(key) != handle:
                    continue  # the client took it (ack, nack, dead letter) since the round began
                answer = await self._pop.change_invisible(group, topic, handle, slice_ms)
                if answer.status is PopStatus.OK:
                    self._renewals.renewed(key, answer.receipt_handle, self._clock() + slice_ms)
                    renewed += 1
                elif answer.status is PopStatus.INVALID_RECEIPT_HANDLE:
                    self._renewals.drop(key)  # acked, or redelivered: nothing of this delivery to keep
                # NOT_DURABLE: the next round tries again, while the delivery is still invisible
        return renewed

    async def _current(self, group: str, topic: str, handles: list[str]) -> list[str]:
        """The handles to use for what a client names by the handles it got: a renewed delivery's
        current one (and its renewals end: the client is done with it)."""
        if not len(self._renewals):
            return handles
        async with self._renewing:
            return [self._renewals.take(group, topic, h) for h in handles]

    def client_gone(self, client_id: str) -> None:
        """A client went away (Telemetry ended, or NotifyClientTermination): its deliveries are not
        renewed any more; they come back when their invisible time runs out."""
        dropped = self._renewals.client_gone(client_id)
        if dropped:
            log.info("client %s went away: %d deliveries no longer renewed", client_id, dropped)

    # -- AckMessage, ChangeInvisibleDuration ----------------------------------------------------

    async def ack(self, request: pb.AckMessageRequest) -> pb.AckMessageResponse:
        refused = self._resource_problem(request.group.name, request.topic.name)
        if refused is None and not request.entries:
            refused = status(pb.BAD_REQUEST, "an AckMessageRequest needs at least one entry")
        if refused is None and len(request.entries) > MAX_ACK_ENTRIES:
            refused = status(pb.BAD_REQUEST, f"{len(request.entries)} entries in one ack; at most {MAX_ACK_ENTRIES}")
        if refused is not None:
            return pb.AckMessageResponse(status=refused)
        group, topic = request.group.name, request.topic.name
        handles = await self._current(group, topic, [e.receipt_handle for e in request.entries])
        answers = await self._pop.ack(group, topic, handles)
        self._release(group, topic, answers, fifo_only=True)
        entries = [
            pb.AckMessageResultEntry(message_id=e.message_id, receipt_handle=e.receipt_handle, status=_pop_status(a))
            for e, a in zip(request.entries, answers)
        ]
        failed = [e.status for e in entries if e.status.code != pb.OK]
        return pb.AckMessageResponse(status=failed[0] if failed else OK, entries=entries)

    async def forward_to_dead_letter(
        self, request: pb.ForwardMessageToDeadLetterQueueRequest
    ) -> pb.ForwardMessageToDeadLetterQueueResponse:
        refused = self._resource_problem(request.group.name, request.topic.name)
        if refused is not None:
            return pb.ForwardMessageToDeadLetterQueueResponse(status=refused)
        group, topic = request.group.name, request.topic.name
        [handle] = await self._current(group, topic, [request.receipt_handle])
        answer = await self._pop.dead_letter_now(group, topic, handle)
        self._release(group, topic, [answer], fifo_only=True)
        return pb.ForwardMessageToDeadLetterQueueResponse(status=_pop_status(answer))

    async def change_invisible(self, request: pb.ChangeInvisibleDurationRequest) -> pb.ChangeInvisibleDurationResponse:
        refused = self._resource_problem(request.group.name, request.topic.name)
        if refused is not None:
            return pb.ChangeInvisibleDurationResponse(status=refused)
        ms = request.invisible_duration.ToMilliseconds()
        # RocketMQ accepts 0 here: "visible again now" (a PushConsumer's immediate retry).
        if not 0 <= ms <= MAX_INVISIBLE_MS:
            return pb.ChangeInvisibleDurationResponse(
                status=status(
                    pb.ILLEGAL_INVISIBLE_TIME, f"invisible_duration {ms} ms is outside 0..{MAX_INVISIBLE_MS} ms"
                )
            )
        group, topic = request.group.name, request.topic.name
        [handle] = await self._current(group, topic, [request.receipt_handle])
        answer = await self._pop.change_invisible(group, topic, handle, ms)
        self._release(group, topic, [answer], fifo_only=False)
        if answer.status is PopStatus.INVALID_RECEIPT_HANDLE:
            return pb.ChangeInvisibleDurationResponse(status=_pop_status(answer))
        return pb.ChangeInvisibleDurationResponse(status=_pop_status(answer), receipt_handle=answer.receipt_handle)
