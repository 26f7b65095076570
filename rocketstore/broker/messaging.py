"""The client API: `apache.rocketmq.v2.MessagingService` over the store (grpc.aio servicer).

Served: QueryRoute, Heartbeat, SendMessage, PullMessage, GetOffset, UpdateOffset, QueryOffset,
Telemetry, NotifyClientTermination, and pop consumption (QueryAssignment, ReceiveMessage,
AckMessage, ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue: `pop_api.py`). The official
RocketMQ 5 clients produce and consume through it unmodified (tests/integration/test_official_client.py
and test_pop_consumption.py run them).

Wire facts this module and its pure helpers in `v2_messages.py` own (the rest is messaging.proto):
- A v2 message becomes a store message with properties TAGS (tag), KEYS (keys joined by a space),
  `__SHARDINGKEY` (message_group), UNIQ_KEY (the client's message_id), TIMER_DELIVER_MS (a
  future delivery_timestamp: the message waits in the timer topic, `timer_service.py`), the user
  properties beside them; a TRANSACTION message becomes a half message (`transaction_service.py`);
  GZIP bodies are stored as sent with the COMPRESSED sys flag. A user property may not use a key the broker interprets.
- Queue choice: `system_properties.send_queue_id` (1005) when present, else the message group's
  Java String.hashCode (abs) modulo the write queues, else one round-robin queue per topic and
  request (a request's messages for one queue are one batch: one append, one durability wait).
- A stored message read back carries body_digest MD5 (upper-case hex; see `wire.digests`), message_type
  (NORMAL; FIFO with a group; DELAY once delayed; TRANSACTION once committed), delivery_attempt =
  reconsume times + 1, and the RocketStore extensions commit_log_offset, sys_flag,
  reconsume_times, flag.
- PullMessage streams one Status, then the messages, then next_offset. An empty queue is long
  polled: `on_arrival` (the store's dispatch thread) wakes the pulls waiting on that topic and
  queue through the event loop.

Every answer carries a status; expected failures are codes (`codes.py`), and an unexpected
exception is logged and answered INTERNAL_ERROR, never surfacing as a gRPC UNKNOWN. Bytes that
do not decode as the request never reach the servicer: `wire.request_guard.MalformedRequestGuard`,
a grpc.aio interceptor for the server, answers them INVALID_ARGUMENT (grpc.aio itself would say
UNKNOWN).

Thread-safety: the servicer runs on one event loop; `on_arrival` is the one method other threads
call (it only reads a dict and schedules a callback on the loop). Store calls that read files or
fsync run in worker threads, never on the loop.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass

import grpc

from wire.rpc import messaging_pb2 as pb
from wire.rpc import messaging_pb2_grpc
from store import BrokerRole, GetMessageResult, GetMessageStatus, Message, MessageStore, PutMessageResult
from store.auto_create import AutoCreateRefusal
from store.clock import wall_clock_ms
from store.codec import decode_msg_id
from store.message import producer_sys_flag
from store.pop_journal import PopJournal
from store.pop_state import Event as PopEvent
from store.timer_state import PROPERTY_TIMER_DELIVER_MS, TIMER_TOPIC
from store.topic_config import SYSTEM_TOPICS, TRANS_HALF_TOPIC, TopicConfig

from . import codes
from .arrivals import ArrivalWatch
from .batching import append_chunks
from .codes import NOT_MASTER
from .codes import PullAction
from .config import BrokerConfigs
from .pop_api import PopApi
from .pop_service import PopService, PopStatus
from .receipt_handle import ReceiptSigner
from .telemetry import TelemetryCheck, TelemetryStreams
from .timer_service import TimerService, timer_message
from .transaction_api import TransactionApi
from .transaction_service import TransactionService, TransactionSettings, half_message
from .view import BrokerView
from .cluster_route import other_groups_assignments, other_groups_queues, slave_route_id
from .queue_access import QueueRefusal, Refused, commit_consumer_offset, offset_problem, queue_problem

from .v2_messages import (
    Host,
    MAX_PULL_BATCH,
    MAX_DELIVERY_DELAY_MS,
    MAX_PULL_BYTES,
    MAX_SEND_MESSAGES,
    OK,
    Refusal,
    SUBSCRIPTION_LONG_POLLING_MS,
    _timestamp_ms,
    body_problem,
    choose_queue,
    endpoints_of,
    message_properties,
    name_problem,
    peer_host,
    route_queues,
    topic_from_queues,
    settings_reply,
    status,
    tag_filter_of,
    long_poll_seconds,
    to_pb_message,
)

log = logging.getLogger("rocketstore.broker.messaging")

# -- the servicer -----------------------------------------------------------------------------


_REFUSAL_CODES = {
    QueueRefusal.ILLEGAL_TOPIC: pb.ILLEGAL_TOPIC,
    QueueRefusal.ILLEGAL_GROUP: pb.ILLEGAL_CONSUMER_GROUP,
    QueueRefusal.ILLEGAL_QUEUE_ID: pb.BAD_REQUEST,
    QueueRefusal.TOPIC_NOT_FOUND: pb.TOPIC_NOT_FOUND,
    QueueRefusal.ILLEGAL_OFFSET: pb.ILLEGAL_OFFSET,
    QueueRefusal.TABLE_FULL: pb.TOO_MANY_REQUESTS,
}


def _refusal_status(refused: Refused | None) -> pb.Status | None:
    return None if refused is None else status(_REFUSAL_CODES[refused.kind], refused.text)


def _guarded(response_type):
    """Unary methods: an unexpected exception is logged and answered INTERNAL_ERROR."""

    def wrap(method):
        @functools.wraps(method)
        async def guarded(self, request, context):
            try:
                return await method(self, request, context)
            except grpc.aio.AbortError:
                raise
            except Exception as exc:
                log.exception("%s failed", method.__name__)
                return response_type(
                    status=status(pb.INTERNAL_ERROR, f"internal error ({type(exc).__name__}); see the broker log")
                )

        return guarded

    return wrap


def _guarded_stream(response_type):
    """Server-streaming methods: an unexpected exception is answered INTERNAL_ERROR as the
    stream's status, or, once a status went out, by aborting the call."""

    def wrap(method):
        @functools.wraps(method)
        async def guarded(self, request, context):
            sent_status = False
            try:
                async for response in method(self, request, context):
                    if response.WhichOneof("content") == "status":
                        sent_status = True
                    yield response
            except grpc.aio.AbortError:
                raise
            except Exception as exc:
                log.exception("%s failed", method.__name__)
                text = f"internal error ({type(exc).__name__}); see the broker log"
                if not sent_status:
                    yield response_type(status=status(pb.INTERNAL_ERROR, text))
                else:
                    await context.abort(grpc.StatusCode.INTERNAL, text)

        return guarded

    return wrap


@dataclass(slots=True)
class _Planned:
    """A message ready for the store, at position `index` of the request."""

    index: int
    message: Message
    client_id: str
    alone: bool  # delayed or transactional: the store puts it on its own
    transactional: bool = False


def _message_of(item: _Planned) -> Message:
    return item.message


class MessagingServicer(messaging_pb2_grpc.MessagingServiceServicer):
    def __init__(
        self,
        store: MessageStore,
        configs: BrokerConfigs,
        view: BrokerView,
        *,
        clock_ms: Callable[[], int] = wall_clock_ms,
        receipt_secret: bytes = b"",
        pop_journal: PopJournal | None = None,
        telemetry_check: TelemetryCheck | None = None,
    ) -> None:
        self._store = store
        self._configs = configs
        self._view = view
        self._clock = clock_ms
        self._round_robin: dict[str, int] = {}
        self._create_lock = asyncio.Lock()
        self._arrivals = ArrivalWatch()
        broker = configs.broker
        # Every broker of the group must verify the handles of the others: a group-wide secret.
        secret = receipt_secret or f"{broker.broker_cluster_name}/{broker.broker_name}".encode()
        max_attempts = broker.retry_max_times + 1
        self._pop_service = pop = PopService(
            store,
            ReceiptSigner(secret),
            clock_ms,
            max_attempts=lambda group: max_attempts,
            journal=pop_journal or PopJournal(store.config.root),
        )
        self._pop = PopApi(store, configs, pop, self._arrivals, self._read_refusal, clock_ms)
        settings = TransactionSettings(
            broker.transaction_timeout_ms, broker.transaction_check_max, broker.transaction_check_interval_ms
        )
        # Checks are due at multiples of the two times: look twice as often as the shorter.
        period_s = min(max(min(settings.timeout_ms, settings.check_interval_ms) / 2000, 0.1), 5.0)
        self._transactions = TransactionApi(TransactionService(store, clock_ms, settings), self._pop_refusal, period_s)
        self._telemetry = TelemetryStreams(self._settings_answer, self._transactions, telemetry_check)
        self._timers = TimerService(store, clock_ms, self._pop_refusal)

    # -- long-poll wakes ------------------------------------------------------------------------

    def bind_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """Called on `loop`: long-poll wakes go to it and the transaction check-back runs on it."""
        self._arrivals.bind_loop(loop)
        self._transactions.start()
        self._timers.start()

    async def close(self) -> None:
        await self._transactions.stop()
        await self._timers.stop()
        await asyncio.to_thread(self._pop_service.close)

    def consumes_by_pop(self, group: str, topic: str) -> bool:
        return self._pop_service.consumes_by_pop(group, topic)

    async def merge_pop_events(self, events: Sequence[PopEvent]) -> tuple[bool, str]:
        """A slave hands back the pop state it decided while it acted for this master:
        (accepted, why not)."""
        answer = await self._pop_service.merge(events)
        return answer.status is PopStatus.OK, answer.reason

    def on_arrival(self, request) -> None:
        """Store dispatch thread: a message became readable (see `arrivals.ArrivalWatch`)."""
        self._arrivals.on_arrival(request)

    @property
    def waiting_pulls(self) -> int:
        """Long polls waiting for an arrival now (on the loop)."""
        return self._arrivals.waiting

    # -- shared checks --------------------------------------------------------------------------

    def _not_master(self) -> pb.Status:
        broker = self._configs.broker
        master = self._view.master_client_endpoint()
        where = f"send to its master at {master}" if master else "its master's client endpoint is not known yet"
        return status(
            pb.FORBIDDEN,
            f"{NOT_MASTER}: {broker.broker_name} (id {broker.broker_id}) is a SLAVE: {where}",
            master_endpoint=master,
        )

    def _fenced(self, reason: str | None, late: bool = False) -> pb.Status | None:
        """Controller mode's refusal of a write this broker may not take or acknowledge now."""
        if reason is None:
            return None
        # The master as far as this broker knows: possibly itself, fenced (the client then asks
        # again after a pause: its lease may come back, or a new master be elected).
        master = self._view.master_client_endpoint()
        outcome = "the write may or may not be kept: retry it" if late else "nothing was written"
        return status(pb.FORBIDDEN, f"{NOT_MASTER}: not acknowledged: {reason}; {outcome}", master_endpoint=master)

    def _pop_refusal(self) -> pb.Status | None:
        return self._not_master() if self._is_slave else self._fenced(self._view.write_refusal())

    def _read_refusal(self) -> pb.Status | None:
        """Pop consumption: a master's, or a slave's while it acts for its master (it is down)."""
        if self._is_slave and self._view.acting_master():
            return None
        return self._pop_refusal()

    @property
    def _is_slave(self) -> bool:
        return self._view.role is BrokerRole.SLAVE

    async def _created_topic(self, topic: str) -> TopicConfig | Refusal:
        """The topic's config, auto-created for a first send when the store's limits allow."""
        config = self._store.topics.get(topic)
        if config is not None:
            return config
        async with self._create_lock:
            # The topic table is written and fsynced: a worker thread's job.
            made = await asyncio.to_thread(self._store.auto_create_topic, topic)
        if isinstance(made, AutoCreateRefusal):
            code = pb.TOO_MANY_REQUESTS if made.limit.is_rate else pb.TOPIC_NOT_FOUND
            return Refusal(code, made.reason)
        return made

    def _queue_problem(self, topic: str, queue_id: int) -> pb.Status | None:
        """Why (topic, queue) cannot be read or have offsets; None when it can."""
        return _refusal_status(queue_problem(self._store, topic, queue_id))

    # -- QueryRoute -----------------------------------------------------------------------------

    @_guarded(pb.QueryRouteResponse)
    async def QueryRoute(self, request: pb.QueryRouteRequest, context) -> pb.QueryRouteResponse:
        topic = request.topic.name
        problem = name_problem("topic", topic)
        if problem is not None:
            return pb.QueryRouteResponse(status=status(pb.ILLEGAL_TOPIC, problem))
        local, here = self._local_route(request)
        cluster = self._view.cluster_view()
        if cluster is None:
            return local
        others, elsewhere = other_groups_queues(request.topic, cluster)
        if not others or (local.status.code == pb.OK and here and not elsewhere):
            return local
        if local.status.code != pb.OK or (elsewhere and not here):
            # Not served by this group (or only as a topic this group would create, while other
            # groups have it): the other groups' queues alone.
            return pb.QueryRouteResponse(status=OK, message_queues=others)
        local.message_queues.extend(others)
        return local

    def _local_route(self, request: pb.QueryRouteRequest) -> tuple[pb.QueryRouteResponse, bool]:
        """This group's part of the route, and whether the topic exists here (False: the route
        is one to a topic the first send would create)."""
        topic = request.topic.name
        slave = self._is_slave
        acting = slave and self._view.acting_master()
        if slave and self._view.controller_mode():
            # Controller mode: route writers to the elected master (it creates the topic).
            master = self._view.master_client_endpoint()
            if master:
                known = self._store.topics.get(topic) or topic_from_queues(self._store, topic)
                exists = known is not None
                count = known.write_queue_nums if known is not None else self._store.config.default_topic_queue_nums
                queues = route_queues(
                    request.topic,
                    TopicConfig(topic, count, count),
                    self._configs.broker.broker_name,
                    0,
                    master,
                    read_only=False,
                )
                return pb.QueryRouteResponse(status=OK, message_queues=queues), exists
            if not acting:
                return pb.QueryRouteResponse(
                    status=status(
                        pb.HA_NOT_AVAILABLE, f"broker {self._configs.broker.broker_name} has no master elected now"
                    )
                ), False
        config = self._store.topics.get(topic)
        if config is None and slave:
            config = topic_from_queues(self._store, topic)
        exists = config is not None
        if config is None and not slave and self._store.config.auto_create_topic_enable:
            # A route to write to, but no topic yet: reads never create topics. The first send
            # creates it, within the auto-creation limits, or says which one refused it.
            count = self._store.config.default_topic_queue_nums
            config = TopicConfig(topic, count, count)
        if config is None:
            why = "" if slave else " and autoCreateTopicEnable is false"
            return pb.QueryRouteResponse(status=status(pb.TOPIC_NOT_FOUND, f"topic {topic} does not exist{why}")), False
        broker = self._configs.broker
        here = self._view.client_endpoint()
        if not slave or acting:
            # A slave acting for its master that is down stands in as broker id 0, read-only:
            # RocketMQ 5 clients talk to id 0 only, and producers find nothing to write to.
            read_only = slave or self._store.write_refusal() is not None
            queues = route_queues(request.topic, config, broker.broker_name, 0, here, read_only=read_only)
            if not slave:
                # Its slaves, read-only, as the other groups' brokers name them: those connected.
                for replica in self._view.slave_snapshots(wall_clock_ms()):
                    if replica.client_endpoint:
                        replica_id = slave_route_id(replica.broker_id, broker.broker_id)
                        queues += route_queues(
                            request.topic, config, broker.broker_name, replica_id, replica.client_endpoint, True
                        )
            return pb.QueryRouteResponse(status=OK, message_queues=queues), exists
        # A slave names its master as id 0 (where clients write and pop) and itself for reads.
        queues = []
        master = self._view.master_client_endpoint()
        if master:
            # The master's permissions are its topic table's; a topic known here only from the
            # replicated queues is written there as any other.
            writes = self._store.topics.get(topic) or TopicConfig(topic, config.read_queue_nums, config.read_queue_nums)
            queues += route_queues(request.topic, writes, broker.broker_name, 0, master, read_only=False)
        queues += route_queues(request.topic, config, broker.broker_name, broker.broker_id, here, read_only=True)
        return pb.QueryRouteResponse(status=OK, message_queues=queues), exists

    # -- Heartbeat, NotifyClientTermination -----------------------------------------------------

    @_guarded(pb.HeartbeatResponse)
    async def Heartbeat(self, request: pb.HeartbeatRequest, context) -> pb.HeartbeatResponse:
        if request.HasField("group") and request.group.name:
            problem = name_problem("group", request.group.name)
            if problem is not None:
                return pb.HeartbeatResponse(status=status(pb.ILLEGAL_CONSUMER_GROUP, problem))
        return pb.HeartbeatResponse(status=OK)

    @_guarded(pb.NotifyClientTerminationResponse)
    async def NotifyClientTermination(self, request, context) -> pb.NotifyClientTerminationResponse:
        return pb.NotifyClientTerminationResponse(status=OK)

    # -- SendMessage ----------------------------------------------------------------------------

    @_guarded(pb.SendMessageResponse)
    async def SendMessage(self, request: pb.SendMessageRequest, context) -> pb.SendMessageResponse:
        messages = request.messages
        if not messages:
            return pb.SendMessageResponse(
                status=status(pb.BAD_REQUEST, "a SendMessageRequest needs at least one message")
            )
        if len(messages) > MAX_SEND_MESSAGES:
            return pb.SendMessageResponse(
                status=status(pb.BAD_REQUEST, f"{len(messages)} messages in one request; at most {MAX_SEND_MESSAGES}")
            )
        refused = self._not_master() if self._is_slave else self._fenced(self._view.write_refusal())
        if refused is not None:
            refusals = [pb.SendResultEntry(status=refused, message_id=m.system_properties.message_id) for m in messages]
            return pb.SendMessageResponse(status=refused, entries=refusals)
        entries: list[pb.SendResultEntry | None] = [None] * len(messages)
        planned = await self._plan(messages, peer_host(context.peer()) or ("127.0.0.1", 0), entries)
        groups = self._put_groups(planned)
        if len(groups) == 1:
            outcomes = [await self._put(groups[0])]  # the common case: no task to schedule
        else:
            outcomes = await asyncio.gather(*(self._put(group) for group in groups))
        for placed in outcomes:
            for index, entry in placed:
                entries[index] = entry
        done = [e if e is not None else pb.SendResultEntry(status=status(pb.INTERNAL_ERROR)) for e in entries]
        # The fence again, as late as possible: a master that lost its lease (or is handing over)
        # while these puts waited must not acknowledge them; a retry is safe, a false OK is not.
        late = self._fenced(self._view.write_refusal(), late=True)
        if late is not None:
            done = [
                pb.SendResultEntry(status=late, message_id=e.message_id) if e.status.code in codes.STORED_CODES else e
                for e in done
            ]
        return pb.SendMessageResponse(status=codes.summarize(e.status for e in done), entries=done)

    async def _plan(
        self, messages: Sequence[pb.Message], born_host: Host, entries: list[pb.SendResultEntry | None]
    ) -> list[_Planned]:
        """Store messages for the acceptable ones; refusal entries for the others."""
        now = self._clock()
        max_body = self._store.config.max_message_size
        topics: dict[str, TopicConfig | Refusal] = {}
        round_robin: dict[str, int] = {}
        planned: list[_Planned] = []
        for index, msg in enumerate(messages):
            outcome = await self._plan_one(msg, born_host, now, max_body, topics, round_robin)
            if isinstance(outcome, Refusal):
                entries[index] = pb.SendResultEntry(
                    status=outcome.as_status(), message_id=msg.system_properties.message_id
                )
            else:
                planned.append(
                    _Planned(
                        index,
                        outcome,
                        msg.system_properties.message_id,
                        outcome.topic in (TRANS_HALF_TOPIC, TIMER_TOPIC),
                        outcome.topic == TRANS_HALF_TOPIC,
                    )
                )
        return planned

    async def _plan_one(
        self,
        msg: pb.Message,
        born_host: Host,
        now: int,
        max_body: int,
        topics: dict[str, TopicConfig | Refusal],
        round_robin: dict[str, int],
    ) -> Message | Refusal:
        topic = msg.topic.name
        config = topics.get(topic)
        if config is None:
            config = topics[topic] = await self._writable_topic(topic)
        if isinstance(config, Refusal):
            return config
        refusal = body_problem(msg, max_body)
        if refusal is not None:
            return refusal
        properties = message_properties(msg, MAX_DELIVERY_DELAY_MS, now)
        if isinstance(properties, Refusal):
            return properties

        def next_round_robin() -> int:
            # One queue per topic and request: the request's messages for it form one batch.
            if topic not in round_robin:
                round_robin[topic] = self._round_robin.get(topic, -1) + 1
                self._round_robin[topic] = round_robin[topic] % (1 << 30)
            return round_robin[topic]

        queue_id = choose_queue(msg.system_properties, config, next_round_robin)
        if isinstance(queue_id, Refusal):
            return queue_id
        sp = msg.system_properties
        born_ms = _timestamp_ms(sp.born_timestamp) if sp.HasField("born_timestamp") else 0
        message = Message(
            topic=topic,
            queue_id=queue_id,
            body=msg.body,
            properties=properties,
            sys_flag=producer_sys_flag(sp.body_encoding == pb.GZIP),
            born_host=born_host,
            born_timestamp_ms=born_ms if born_ms > 0 else None,
        )
        deliver_at = properties.get(PROPERTY_TIMER_DELIVER_MS)
        if sp.message_type != pb.TRANSACTION:
            return message if deliver_at is None else timer_message(message, int(deliver_at))
        if deliver_at is not None:
            return Refusal(pb.BAD_REQUEST, "a transactional message cannot have a delivery time")
        immunity_s = (
            sp.orphaned_transaction_recovery_duration.seconds
            if sp.HasField("orphaned_transaction_recovery_duration")
            else 0
        )
        return half_message(message, immunity_s)

    async def _writable_topic(self, topic: str) -> TopicConfig | Refusal:
        problem = name_problem("topic", topic)
        if problem is not None:
            return Refusal(pb.ILLEGAL_TOPIC, problem)
        if topic in SYSTEM_TOPICS:
            return Refusal(pb.ILLEGAL_TOPIC, f"{topic} is a system topic; producers cannot send to it")
        drained = self._store.write_refusal()
        if drained is not None:
            return Refusal(pb.FORBIDDEN, f"{self._configs.broker.broker_name}: {drained}")
        config = await self._created_topic(topic)
        if isinstance(config, Refusal):
            return config
        if not config.writable:
            return Refusal(pb.FORBIDDEN, f"topic {topic} is not writable (perm {config.perm})")
        return config

    def _put_groups(self, planned: list[_Planned]) -> list[list[_Planned]]:
        """Messages for one topic and queue form one batch (cut where it would pass the store's
        append limit, or its bodies maxMessageSize); delayed messages, which the store cannot batch, go one by one."""
        if len(planned) <= 1:
            return [planned] if planned else []
        limit = self._store.config.max_append_size
        by_queue: dict[tuple[str, int], list[_Planned]] = {}
        groups: list[list[_Planned]] = []
        for item in planned:
            if item.alone:
                groups.append([item])
            else:
                by_queue.setdefault((item.message.topic, item.message.queue_id), []).append(item)
        max_bodies = self._store.config.max_message_size
        for items in by_queue.values():
            groups.extend(append_chunks(items, _message_of, limit, max_bodies))
        return groups

    async def _put(self, group: list[_Planned]) -> list[tuple[int, pb.SendResultEntry]]:
        try:
            if len(group) == 1:
                result = await self._store.async_put_message(group[0].message)
            else:
                result = await self._store.async_put_messages([item.message for item in group])
        except Exception as exc:
            log.exception("a put of %d messages failed", len(group))
            failed = status(pb.INTERNAL_ERROR, f"internal error ({type(exc).__name__}); see the broker log")
            return [(item.index, pb.SendResultEntry(status=failed, message_id=item.client_id)) for item in group]
        return self._entries(group, result)

    @staticmethod
    def _entries(group: list[_Planned], result: PutMessageResult) -> list[tuple[int, pb.SendResultEntry]]:
        entry_status = codes.put_status(result)
        if not result.status.is_stored:
            return [(item.index, pb.SendResultEntry(status=entry_status, message_id=item.client_id)) for item in group]
        out = []
        for i, item in enumerate(group):
            store_id = result.msg_ids[i] if i < len(result.msg_ids) else result.msg_id
            if i == 0:
                commit_log_offset = result.wrote_offset
            else:
                try:
                    commit_log_offset = decode_msg_id(store_id)[1]
                except ValueError:
                    commit_log_offset = -1
            out.append(
                (
                    item.index,
                    pb.SendResultEntry(
                        status=entry_status,
                        message_id=item.client_id or store_id,
                        transaction_id=store_id if item.transactional else "",
                        offset=result.queue_offset + i,
                        queue_id=item.message.queue_id,
                        commit_log_offset=commit_log_offset,
                    ),
                )
            )
        return out

    # -- PullMessage ----------------------------------------------------------------------------

    @_guarded_stream(pb.PullMessageResponse)
    def PullMessage(self, request: pb.PullMessageRequest, context) -> AsyncIterator[pb.PullMessageResponse]:
        return self._pull(request, context)

    def _pull_problem(self, request: pb.PullMessageRequest) -> pb.Status | None:
        problem = name_problem("group", request.group.name)
        if problem is not None:
            return status(pb.ILLEGAL_CONSUMER_GROUP, problem)
        queue = request.message_queue
        refused = self._queue_problem(queue.topic.name, queue.id)
        if refused is not None:
            return refused
        config = self._store.topics.get(queue.topic.name)
        if config is not None and not config.readable:
            return status(pb.FORBIDDEN, f"topic {config.topic_name} is not readable (perm {config.perm})")
        if request.batch_size <= 0:
            return status(pb.BAD_REQUEST, f"batch_size must be positive, got {request.batch_size}")
        timeout = request.long_polling_timeout
        if timeout.seconds < 0 or timeout.nanos < 0:
            return status(pb.ILLEGAL_POLLING_TIME, "long_polling_timeout is negative")
        return None

    def _wait_seconds(self, request: pb.PullMessageRequest, context) -> float:
        return long_poll_seconds(
            request.long_polling_timeout.ToMilliseconds(),
            self._configs.broker.long_polling_max_ms,
            context.time_remaining(),
        )

    async def _read(
        self, group: str, topic: str, queue_id: int, offset: int, batch: int, tag_filter
    ) -> GetMessageResult:
        return await asyncio.to_thread(
            self._store.get_message, group, topic, queue_id, offset, batch, MAX_PULL_BYTES, tag_filter
        )

    async def _pull(self, request: pb.PullMessageRequest, context) -> AsyncIterator[pb.PullMessageResponse]:
        refused = self._pull_problem(request)
        if refused is not None:
            yield pb.PullMessageResponse(status=refused)
            return
        tag_filter = tag_filter_of(request.filter_expression)
        if isinstance(tag_filter, pb.Status):
            yield pb.PullMessageResponse(status=tag_filter)
            return
        group = request.group.name
        topic = request.message_queue.topic.name
        queue_id = request.message_queue.id
        namespace = request.message_queue.topic.resource_namespace
        offset = request.offset
        if offset < 0:
            yield pb.PullMessageResponse(status=status(pb.ILLEGAL_OFFSET, f"offset {offset} is negative"))
            yield pb.PullMessageResponse(next_offset=self._store.min_queue_offset(topic, queue_id))
            return
        batch = min(request.batch_size, MAX_PULL_BATCH)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._wait_seconds(request, context)
        key = (topic, queue_id)
        event: asyncio.Event | None = None
        waited = False
        try:
            while True:
                if event is not None:
                    event.clear()
                result = await self._read(group, topic, queue_id, offset, batch, tag_filter)
                action = self._classify(result, offset)
                if action is PullAction.DELIVER:
                    yield pb.PullMessageResponse(status=OK)
                    for ext in result.messages:
                        yield pb.PullMessageResponse(message=to_pb_message(ext, namespace))
                    yield pb.PullMessageResponse(next_offset=result.next_begin_offset)
                    return
                if action is PullAction.REFUSE:
                    yield pb.PullMessageResponse(status=status(pb.MESSAGE_CORRUPTED, codes.corrupted_text(result)))
                    yield pb.PullMessageResponse(next_offset=result.next_begin_offset)
                    return
                if action is PullAction.RESET:
                    bounds = f"[{result.min_offset}, {result.max_offset}]"
                    text = f"offset {offset} is outside queue {topic}:{queue_id} {bounds}"
                    yield pb.PullMessageResponse(status=status(pb.ILLEGAL_OFFSET, text))
                    yield pb.PullMessageResponse(next_offset=result.next_begin_offset)
                    return
                if action is PullAction.SKIP:
                    if not waited or result.next_begin_offset <= offset:
                        yield pb.PullMessageResponse(status=OK)
                        yield pb.PullMessageResponse(next_offset=result.next_begin_offset)
                        return
                    # Arrivals that the filter drops: keep waiting for one it keeps.
                    offset = result.next_begin_offset
                    continue
                remaining = deadline - loop.time()
                if remaining <= 0:
                    yield pb.PullMessageResponse(status=status(pb.MESSAGE_NOT_FOUND, "no new message"))
                    yield pb.PullMessageResponse(next_offset=offset)
                    return
                if event is None:
                    # Watch first, then read again: an arrival between the two reads is not missed.
                    event = self._arrivals.watch(key)
                    continue
                try:
                    await asyncio.wait_for(event.wait(), remaining)
                except asyncio.TimeoutError:
                    pass
                waited = True
        finally:
            if event is not None:
                self._arrivals.unwatch(key, event)

    def _classify(self, result: GetMessageResult, offset: int) -> PullAction:
        if result.status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE:
            # A queue no message reached yet (the request's queue was checked): an empty queue.
            return PullAction.WAIT if offset == 0 else PullAction.RESET
        action = codes.pull_action(result.status)
        if action is PullAction.WAIT and result.next_begin_offset != offset:
            return PullAction.RESET  # an empty queue read past its start: begin again at 0
        return action

    # -- offsets --------------------------------------------------------------------------------

    def _offset_problem(self, group: pb.Resource | None, queue: pb.MessageQueue) -> pb.Status | None:
        name = None if group is None else group.name
        return _refusal_status(offset_problem(self._store, name, queue.topic.name, queue.id))

    @_guarded(pb.GetOffsetResponse)
    async def GetOffset(self, request: pb.GetOffsetRequest, context) -> pb.GetOffsetResponse:
        refused = self._offset_problem(request.group, request.message_queue)
        if refused is not None:
            return pb.GetOffsetResponse(status=refused)
        queue = request.message_queue
        offset = self._store.consumer_offsets.query_offset(request.group.name, queue.topic.name, queue.id)
        if offset < 0:
            return pb.GetOffsetResponse(
                status=status(
                    pb.OFFSET_NOT_FOUND, f"group {request.group.name} has no offset for {queue.topic.name}:{queue.id}"
                )
            )
        return pb.GetOffsetResponse(status=OK, offset=offset)

    @_guarded(pb.UpdateOffsetResponse)
    async def UpdateOffset(self, request: pb.UpdateOffsetRequest, context) -> pb.UpdateOffsetResponse:
        queue = request.message_queue
        refused = commit_consumer_offset(self._store, request.group.name, queue.topic.name, queue.id, request.offset)
        return pb.UpdateOffsetResponse(status=_refusal_status(refused) or OK)

    @_guarded(pb.QueryOffsetResponse)
    async def QueryOffset(self, request: pb.QueryOffsetRequest, context) -> pb.QueryOffsetResponse:
        refused = self._offset_problem(None, request.message_queue)
        if refused is not None:
            return pb.QueryOffsetResponse(status=refused)
        topic, queue_id = request.message_queue.topic.name, request.message_queue.id
        policy = request.query_offset_policy
        if policy == pb.BEGINNING:
            offset = self._store.min_queue_offset(topic, queue_id)
        elif policy == pb.END:
            offset = self._store.max_queue_offset(topic, queue_id)
        elif policy == pb.TIMESTAMP:
            if not request.HasField("timestamp"):
                return pb.QueryOffsetResponse(status=status(pb.BAD_REQUEST, "the TIMESTAMP policy needs a timestamp"))
            when = _timestamp_ms(request.timestamp)
            offset = await asyncio.to_thread(self._store.get_offset_in_queue_by_time, topic, queue_id, when)
        else:
            return pb.QueryOffsetResponse(status=status(pb.BAD_REQUEST, f"unknown query offset policy {policy}"))
        return pb.QueryOffsetResponse(status=OK, offset=offset)

    # -- pop consumption (pop_api) ---------------------------------------------------------------

    @_guarded(pb.QueryAssignmentResponse)
    async def QueryAssignment(self, request: pb.QueryAssignmentRequest, context) -> pb.QueryAssignmentResponse:
        answer = await self._pop.query_assignment(request, endpoints_of(self._view.client_endpoint()))
        cluster = self._view.cluster_view()
        if cluster is not None and answer.status.code == pb.OK:
            answer.assignments.extend(other_groups_assignments(request.topic, cluster))
        return answer

    @_guarded_stream(pb.ReceiveMessageResponse)
    def ReceiveMessage(self, request: pb.ReceiveMessageRequest, context) -> AsyncIterator[pb.ReceiveMessageResponse]:
        return self._pop.receive(request, context)

    @_guarded(pb.AckMessageResponse)
    async def AckMessage(self, request: pb.AckMessageRequest, context) -> pb.AckMessageResponse:
        return await self._pop.ack(request)

    @_guarded(pb.ChangeInvisibleDurationResponse)
    async def ChangeInvisibleDuration(
        self, request: pb.ChangeInvisibleDurationRequest, context
    ) -> pb.ChangeInvisibleDurationResponse:
        return await self._pop.change_invisible(request)

    @_guarded(pb.ForwardMessageToDeadLetterQueueResponse)
    async def ForwardMessageToDeadLetterQueue(
        self, request: pb.ForwardMessageToDeadLetterQueueRequest, context
    ) -> pb.ForwardMessageToDeadLetterQueueResponse:
        return await self._pop.forward_to_dead_letter(request)

    # -- transactions ---------------------------------------------------------------------------

    @_guarded(pb.EndTransactionResponse)
    async def EndTransaction(self, request: pb.EndTransactionRequest, context) -> pb.EndTransactionResponse:
        return await self._transactions.end(request)

    # -- Telemetry ------------------------------------------------------------------------------

    def _settings_answer(self, command: pb.TelemetryCommand) -> pb.TelemetryCommand:
        settings = settings_reply(
            command.settings,
            max_body_size=self._store.config.max_message_size,
            long_polling_ms=min(SUBSCRIPTION_LONG_POLLING_MS, self._configs.broker.long_polling_max_ms),
            max_attempts=self._configs.broker.retry_max_times + 1,
            # RocketMQ's redelivery schedule: the delay levels from level 3 (10 s by default).
            retry_delays_ms=self._store.delay_levels[2:],
            fifo_groups=self._configs.broker.fifo_groups,
        )
        return pb.TelemetryCommand(status=OK, settings=settings)

    @property
    def telemetry_streams(self) -> int:
        """Open Telemetry streams: one per connected official RocketMQ 5 client (metrics)."""
        return self._telemetry.count

    async def Telemetry(self, request_iterator, context) -> AsyncIterator[pb.TelemetryCommand]:
        async for command in self._telemetry.serve(request_iterator, context):
            yield command
