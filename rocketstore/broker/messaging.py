"""The client API: `apache.rocketmq.v2.MessagingService` over the broker core (grpc.aio servicer).

Served: QueryRoute, Heartbeat, SendMessage, PullMessage, GetOffset, UpdateOffset, QueryOffset,
Telemetry, NotifyClientTermination, pop consumption (QueryAssignment, ReceiveMessage, AckMessage,
ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue: `pop_api.py`) and EndTransaction
(`transaction_api.py`). The official RocketMQ 5 clients produce and consume through it unmodified
(tests/integration/test_official_client.py and test_pop_consumption.py run them).

A protocol adapter: each call is decoded (`v2_messages`), handed to a service of the broker core
(`core/`: sends, pulls, offsets, routes, the role gate) and its result or refusal encoded with this
API's codes (`codes.py`). The rules themselves (what is refused, in which order, how a pull's store
status reads, when a long poll ends) are the core's, shared with the remoting API.

Wire facts this module and `v2_messages.py` own (the rest is messaging.proto):
- A v2 message becomes a store message with properties TAGS (tag), KEYS (keys joined by a space),
  `__SHARDINGKEY` (message_group), UNIQ_KEY (the client's message_id), TIMER_DELIVER_MS (a
  future delivery_timestamp: the message waits in the timer topic, `timer_service.py`), the user
  properties beside them; a TRANSACTION message becomes a half message (`transaction_service.py`);
  GZIP bodies are stored as sent with the COMPRESSED sys flag. A user property may not use a key
  the broker interprets. `system_properties.send_queue_id` (1005) names the queue.
- A SendMessageResponse has one entry per message and a status summing them up (`codes.summarize`).
- A stored message read back carries body_digest MD5 (upper-case hex; see `wire.digests`), message_type
  (NORMAL; FIFO with a group; DELAY once delayed; TRANSACTION once committed), delivery_attempt =
  reconsume times + 1, a timed message's delivery_timestamp (its TIMER_DELIVER_MS, as RocketMQ's
  proxy answers it), and the RocketStore extensions commit_log_offset, sys_flag, reconsume_times,
  flag.
- PullMessage streams one Status, then the messages, then next_offset.
- A call naming a namespace is refused UNSUPPORTED, naming it (`namespaces.py`): namespaces are
  not isolated here.

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

import grpc

from store.clock import wall_clock_ms
from store.pop.pop_journal import PopJournal
from store.pop.pop_state import Event as PopEvent
from wire.rpc import messaging_pb2 as pb
from wire.rpc import messaging_pb2_grpc

from . import codes
from .call_metadata import call_headers
from .client_sightings import LANGUAGE_HEADER, client_id_of
from .cluster_route import other_groups_assignments
from .core.long_polling import ArrivalWatch
from .core.pull import PullRequest
from .core.queues import group_problem
from .core.refusals import Refusal
from .core.sender import Sender
from .core.services import BrokerCore
from .namespaces import namespace_refusal
from .pop_api import PopApi
from .pop_service import PopService, PopStatus
from .receipt_handle import ReceiptSigner
from .telemetry import TelemetryCheck, TelemetryStreams
from .timer_service import TimerService
from .transaction_api import TransactionApi
from .transaction_service import TransactionService, TransactionSettings
from .v2_messages import (
    MAX_SEND_MESSAGES,
    MULTI_ADDRESS_LANGUAGES,
    OK,
    SUBSCRIPTION_LONG_POLLING_MS,
    _timestamp_ms,
    endpoints_of,
    filter_type,
    group_message_queues,
    peer_host,
    route_message_queues,
    send_item,
    send_response,
    settings_reply,
    status,
    to_pb_message,
)

log = logging.getLogger("rocketstore.broker.messaging")


def _guarded(response_type):
    """Unary methods: a namespace is refused (`namespaces.py`); an unexpected exception is logged
    and answered INTERNAL_ERROR."""

    def wrap(method):
        @functools.wraps(method)
        async def guarded(self, request, context):
            refused = namespace_refusal(call_headers(context), request)
            if refused is not None:
                return response_type(status=refused)
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
    """Server-streaming methods: a namespace is refused (`namespaces.py`); an unexpected exception
    is answered INTERNAL_ERROR as the stream's status, or, once a status went out, by aborting
    the call."""

    def wrap(method):
        @functools.wraps(method)
        async def guarded(self, request, context):
            refused = namespace_refusal(call_headers(context), request)
            if refused is not None:
                yield response_type(status=refused)
                return
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


class MessagingServicer(messaging_pb2_grpc.MessagingServiceServicer):
    def __init__(
        self,
        core: BrokerCore,
        *,
        clock_ms: Callable[[], int] = wall_clock_ms,
        receipt_secret: bytes = b"",
        pop_journal: PopJournal | None = None,
        telemetry_check: TelemetryCheck | None = None,
    ) -> None:
        store, configs = core.store, core.configs
        self._core = core
        self._store = store
        self._configs = configs
        self._view = core.view
        self._clock = clock_ms
        self._arrivals = ArrivalWatch()
        self._sender = Sender(core.sends)
        broker = configs.broker
        # Every broker of the group must verify the handles of the others: a group-wide secret.
        secret = receipt_secret or f"{broker.broker_cluster_name}/{broker.broker_name}".encode()
        max_attempts = broker.retry_max_times + 1
        self._pop_service = pop = PopService(
            store,
            ReceiptSigner(secret),
            clock_ms,
            max_attempts=lambda group: max_attempts,
            fifo=lambda group: group in broker.fifo_groups,
            journal=pop_journal or PopJournal(store.config.root),
        )
        roles = core.roles
        self._pop = PopApi(store, configs, pop, self._arrivals, roles.read_refusal, clock_ms)
        settings = TransactionSettings(
            broker.transaction_timeout_ms, broker.transaction_check_max, broker.transaction_check_interval_ms
        )
        # Checks are due at multiples of the two times: look twice as often as the shorter.
        period_s = min(max(min(settings.timeout_ms, settings.check_interval_ms) / 2000, 0.1), 5.0)
        transactions = TransactionService(store, clock_ms, settings)
        self._transactions = TransactionApi(transactions, roles.write_refusal, period_s)
        self._telemetry = TelemetryStreams(
            self._settings_answer, self._transactions, telemetry_check, on_end=self._pop.client_gone
        )
        self._timers = TimerService(store, clock_ms, roles.write_refusal)

    # -- long-poll wakes ------------------------------------------------------------------------

    def bind_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """Called on `loop`: long-poll wakes go to it and the transaction check-back runs on it."""
        self._arrivals.bind_loop(loop)
        self._transactions.start()
        self._timers.start()
        self._pop_service.start(self._configs.broker.revive_interval_ms / 1000)
        self._pop.start()

    async def close(self) -> None:
        self._sender.close()
        await self._transactions.stop()
        await self._timers.stop()
        await self._pop.stop()
        await self._pop_service.stop()
        await asyncio.to_thread(self._pop_service.close)

    def consumes_by_pop(self, group: str, topic: str) -> bool:
        return self._pop_service.consumes_by_pop(group, topic)

    async def merge_pop_events(self, events: Sequence[PopEvent]) -> tuple[bool, str]:
        """A slave hands back the pop state it decided while it acted for this master:
        (accepted, why not)."""
        answer = await self._pop_service.merge(events)
        return answer.status is PopStatus.OK, answer.reason

    def on_arrival(self, request) -> None:
        """Store dispatch thread: a message became readable (see `core.long_polling.ArrivalWatch`)."""
        self._arrivals.on_arrival(request)

    @property
    def waiting_pulls(self) -> int:
        """Long polls waiting for an arrival now (on the loop)."""
        return self._arrivals.waiting

    # -- QueryRoute -----------------------------------------------------------------------------

    @_guarded(pb.QueryRouteResponse)
    async def QueryRoute(self, request: pb.QueryRouteRequest, context) -> pb.QueryRouteResponse:
        route = self._core.routes.route(request.topic.name)
        if isinstance(route, Refusal):
            return pb.QueryRouteResponse(status=codes.refusal_status(route))
        if request.replicas:
            queues = route_message_queues(request.topic, route.brokers)
        else:
            # Every member of a group, where its slaves relay what they do not serve (proxy mode).
            language = call_headers(context).get(LANGUAGE_HEADER, "")
            all_members = self._configs.broker.relays_to_master and language in MULTI_ADDRESS_LANGUAGES
            queues = group_message_queues(request.topic, route.groups(), all_members=all_members)
        return pb.QueryRouteResponse(status=OK, message_queues=queues)

    # -- Heartbeat, NotifyClientTermination -----------------------------------------------------

    @_guarded(pb.HeartbeatResponse)
    async def Heartbeat(self, request: pb.HeartbeatRequest, context) -> pb.HeartbeatResponse:
        if request.HasField("group") and request.group.name:
            refused = group_problem(request.group.name)
            if refused is not None:
                return pb.HeartbeatResponse(status=codes.refusal_status(refused))
        return pb.HeartbeatResponse(status=OK)

    @_guarded(pb.NotifyClientTerminationResponse)
    async def NotifyClientTermination(self, request, context) -> pb.NotifyClientTerminationResponse:
        self._pop.client_gone(client_id_of(call_headers(context), context.peer()))
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
        born_host = peer_host(context.peer()) or ("127.0.0.1", 0)
        now = self._clock()
        return send_response(await self._sender.send([send_item(m, born_host, now) for m in messages]))

    # -- PullMessage ----------------------------------------------------------------------------

    @_guarded_stream(pb.PullMessageResponse)
    def PullMessage(self, request: pb.PullMessageRequest, context) -> AsyncIterator[pb.PullMessageResponse]:
        return self._pull(request, context)

    async def _pull(self, request: pb.PullMessageRequest, context) -> AsyncIterator[pb.PullMessageResponse]:
        queue = request.message_queue
        timeout = request.long_polling_timeout
        wanted = request.filter_expression
        pull = PullRequest(
            group=request.group.name,
            topic=queue.topic.name,
            queue_id=queue.id,
            offset=request.offset,
            max_messages=request.batch_size,
            wait_ms=-1 if timeout.seconds < 0 or timeout.nanos < 0 else timeout.ToMilliseconds(),
            filter_type=filter_type(wanted),
            filter_expression=wanted.expression,
            deadline_s=context.time_remaining(),
        )
        pulls = self._core.pulls
        refused = pulls.check(pull)
        if refused is not None:
            yield pb.PullMessageResponse(status=codes.refusal_status(refused))
            return
        result = await pulls.read(pull, self._arrivals)
        code = codes.PULL_CODES[result.action]
        yield pb.PullMessageResponse(status=OK if code == pb.OK else status(code, result.text))
        namespace = queue.topic.resource_namespace
        for ext in result.messages:
            yield pb.PullMessageResponse(message=to_pb_message(ext, namespace))
        yield pb.PullMessageResponse(next_offset=result.next_offset)

    # -- offsets --------------------------------------------------------------------------------

    @_guarded(pb.GetOffsetResponse)
    async def GetOffset(self, request: pb.GetOffsetRequest, context) -> pb.GetOffsetResponse:
        queue = request.message_queue
        offset = self._core.offsets.consumer_offset(request.group.name, queue.topic.name, queue.id)
        if isinstance(offset, Refusal):
            return pb.GetOffsetResponse(status=codes.refusal_status(offset))
        return pb.GetOffsetResponse(status=OK, offset=offset)

    @_guarded(pb.UpdateOffsetResponse)
    async def UpdateOffset(self, request: pb.UpdateOffsetRequest, context) -> pb.UpdateOffsetResponse:
        queue = request.message_queue
        refused = self._core.offsets.commit(request.group.name, queue.topic.name, queue.id, request.offset)
        return pb.UpdateOffsetResponse(status=OK if refused is None else codes.refusal_status(refused))

    @_guarded(pb.QueryOffsetResponse)
    async def QueryOffset(self, request: pb.QueryOffsetRequest, context) -> pb.QueryOffsetResponse:
        topic, queue_id = request.message_queue.topic.name, request.message_queue.id
        offsets = self._core.offsets
        policy = request.query_offset_policy
        offset: int | Refusal
        if policy == pb.BEGINNING:
            offset = offsets.min_offset(topic, queue_id)
        elif policy == pb.END:
            offset = offsets.max_offset(topic, queue_id)
        elif policy == pb.TIMESTAMP and request.HasField("timestamp"):
            when = _timestamp_ms(request.timestamp)
            offset = await asyncio.to_thread(offsets.offset_by_time, topic, queue_id, when)
        elif policy == pb.TIMESTAMP:
            return pb.QueryOffsetResponse(status=status(pb.BAD_REQUEST, "the TIMESTAMP policy needs a timestamp"))
        else:
            return pb.QueryOffsetResponse(status=status(pb.BAD_REQUEST, f"unknown query offset policy {policy}"))
        if isinstance(offset, Refusal):
            return pb.QueryOffsetResponse(status=codes.refusal_status(offset))
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
        refused = namespace_refusal(call_headers(context))
        if refused is not None:
            yield pb.TelemetryCommand(status=refused)
            return
        async for command in self._telemetry.serve(request_iterator, context):
            yield command
