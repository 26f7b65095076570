"""The client API: `apache.rocketmq.v2.MessagingService` over the store (grpc.aio servicer).

Served: QueryRoute, Heartbeat, SendMessage, PullMessage, GetOffset, UpdateOffset, QueryOffset,
Telemetry, NotifyClientTermination. The official RocketMQ 5 clients produce through it unmodified
(see /work/shared/NOTES-rocketmq-v2-client.md for what they need).

Wire facts this module owns (the rest is messaging.proto):
- A v2 message becomes a store message with properties TAGS (tag), KEYS (keys joined by a space),
  `__SHARDINGKEY` (message_group), UNIQ_KEY (the client's message_id), DELAY (the delay level that
  covers delivery_timestamp), the user properties beside them; GZIP bodies are stored as sent
  with the COMPRESSED sys flag. A user property may not use a key the broker interprets.
- Queue choice: `system_properties.send_queue_id` (1005) when present, else the message group's
  Java String.hashCode (abs) modulo the write queues, else one round-robin queue per topic and
  request (a request's messages for one queue are one batch: one append, one durability wait).
- A stored message read back carries body_digest CRC32 (8 upper-case hex digits), message_type
  (NORMAL; FIFO with a group; DELAY once delayed; TRANSACTION once committed), delivery_attempt =
  reconsume times + 1, and the RocketStore extensions commit_log_offset, sys_flag,
  reconsume_times, flag.
- PullMessage streams one Status, then the messages, then next_offset. An empty queue is long
  polled: `on_arrival` (the store's dispatch thread) wakes the pulls waiting on that topic and
  queue through the event loop.

Every answer carries a status; expected failures are codes (`codes.py`), and an unexpected
exception is logged and answered INTERNAL_ERROR, never surfacing as a gRPC UNKNOWN. Bytes that
do not decode as the request never reach the servicer: `MalformedRequestGuard`, a grpc.aio
interceptor for the server, answers them INVALID_ARGUMENT (grpc.aio itself would say UNKNOWN).

Thread-safety: the servicer runs on one event loop; `on_arrival` is the one method other threads
call (it only reads a dict and schedules a callback on the loop). Store calls that read files or
fsync run in worker threads, never on the loop.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import inspect
import ipaddress
import logging
import time
import zlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass

import grpc
from google.protobuf import duration_pb2, timestamp_pb2

from rocketstore.rpc import messaging_pb2 as pb
from rocketstore.rpc import messaging_pb2_grpc
from store import BrokerRole, GetMessageResult, GetMessageStatus, Message, MessageExt, MessageStore, PutMessageResult, TagFilter
from store.codec import MAX_PROPERTIES_LENGTH, decode_msg_id, encode_properties, java_string_hash
from store.message import (
    COMPRESSED_FLAG,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TAGS,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_TYPE_MASK,
)
from store.topic_config import MAX_QUEUE_NUMS, SYSTEM_TOPICS, Permission, TopicConfig, validate_group_name, validate_topic_name

from . import codes
from .codes import PullAction
from .config import BrokerConfigs
from .view import BrokerView

log = logging.getLogger("rocketstore.broker.messaging")

MAX_SEND_MESSAGES = 1024
MAX_PULL_BATCH = 1024
# Bytes one pull reads at most (the first message is returned whatever its size).
MAX_PULL_BYTES = 4 * 1024 * 1024
SUBSCRIPTION_LONG_POLLING_MS = 20_000
# A pull answers this long before the client's deadline, so the answer beats the deadline.
DEADLINE_MARGIN_S = 0.5
MAX_MESSAGE_ID_LENGTH = 128
MAX_MESSAGE_GROUP_LENGTH = 64
MAX_TAG_LENGTH = 255
PROPERTY_SHARDING_KEY = "__SHARDINGKEY"
_INT32_MAX = 2**31 - 1
_SEPARATORS = ("\x01", "\x02")

# Keys the broker maps to system properties or the store acts on: a user property using one
# would change what the message means.
RESERVED_PROPERTY_KEYS = frozenset(
    {
        PROPERTY_TAGS,
        PROPERTY_KEYS,
        PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
        PROPERTY_SHARDING_KEY,
        PROPERTY_DELAY_TIME_LEVEL,
        PROPERTY_WAIT_STORE_MSG_OK,
        PROPERTY_REAL_TOPIC,
        PROPERTY_REAL_QUEUE_ID,
        PROPERTY_TRANSACTION_PREPARED,
    }
)

Host = tuple[str, int]


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def status(code: int, message: str = "", master_endpoint: str = "") -> pb.Status:
    return pb.Status(code=code, message=message or codes.code_name(code), master_endpoint=master_endpoint)


OK = pb.Status(code=pb.OK, message="OK")


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why one message (or request) is refused; nothing was stored for it."""

    code: int
    message: str

    def as_status(self) -> pb.Status:
        return status(self.code, self.message)


# -- hosts and endpoints ----------------------------------------------------------------------


def split_endpoint(endpoint: str) -> tuple[str, int] | None:
    """("host", port) of "host:port" or "[v6]:port"; None when it is not one."""
    host, sep, port_text = endpoint.rpartition(":")
    if not sep or not host or not port_text.isdigit():
        return None
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    port = int(port_text)
    return (host, port) if 0 <= port <= 65535 else None


def endpoints_of(endpoint: str) -> pb.Endpoints:
    """The v2 Endpoints of a host:port: IPv4 or IPv6 for address literals, else DOMAIN_NAME."""
    parts = split_endpoint(endpoint)
    if parts is None:
        return pb.Endpoints()
    host, port = parts
    try:
        scheme = pb.IPv4 if ipaddress.ip_address(host).version == 4 else pb.IPv6
    except ValueError:
        scheme = pb.DOMAIN_NAME
    return pb.Endpoints(scheme=scheme, addresses=[pb.Address(host=host, port=port)])


def peer_host(peer: str) -> Host | None:
    """The client's (ip, port) from a gRPC peer string ("ipv4:1.2.3.4:5", "ipv6:[::1]:5")."""
    kind, _, rest = peer.partition(":")
    if kind not in ("ipv4", "ipv6"):
        return None
    parts = split_endpoint(rest)
    if parts is None:
        return None
    host, port = parts
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return None
    return host, port


def format_host(host: Host) -> str:
    ip, port = host
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


# -- routes -----------------------------------------------------------------------------------


def queue_permission(perm: int, queue_id: int, config: TopicConfig, read_only: bool) -> int:
    """A queue's v2 permission: the topic's, limited to the sides whose queue count covers the
    queue id, and to READ on a slave."""
    readable = bool(perm & Permission.READ) and queue_id < config.read_queue_nums
    writable = bool(perm & Permission.WRITE) and queue_id < config.write_queue_nums and not read_only
    if readable and writable:
        return pb.READ_WRITE
    if readable:
        return pb.READ
    if writable:
        return pb.WRITE
    return pb.NONE


ACCEPTED_MESSAGE_TYPES = (pb.NORMAL, pb.FIFO, pb.DELAY, pb.TRANSACTION)


def route_queues(
    topic: pb.Resource, config: TopicConfig, broker_name: str, broker_id: int, endpoint: str, read_only: bool
) -> list[pb.MessageQueue]:
    broker = pb.Broker(name=broker_name, id=broker_id, endpoints=endpoints_of(endpoint))
    return [
        pb.MessageQueue(
            topic=pb.Resource(resource_namespace=topic.resource_namespace, name=topic.name),
            id=queue_id,
            permission=queue_permission(config.perm, queue_id, config, read_only),
            broker=broker,
            accept_message_types=ACCEPTED_MESSAGE_TYPES,
        )
        for queue_id in range(max(config.read_queue_nums, config.write_queue_nums))
    ]


# -- sends: v2 message -> store message -------------------------------------------------------


def name_problem(kind: str, name: str) -> str | None:
    try:
        (validate_topic_name if kind == "topic" else validate_group_name)(name)
    except ValueError as exc:
        return str(exc)
    return None


def _has_separator(text: str) -> bool:
    return any(sep in text for sep in _SEPARATORS)


def _digest_matches(digest: pb.Digest, body: bytes) -> bool:
    expected = digest.checksum.strip()
    if digest.type == pb.CRC32:
        try:
            return int(expected, 16) == zlib.crc32(body)
        except ValueError:
            return False
    if digest.type == pb.MD5:
        return expected.lower() == hashlib.md5(body).hexdigest()
    if digest.type == pb.SHA1:
        return expected.lower() == hashlib.sha1(body).hexdigest()
    return True


def _timestamp_ms(ts: timestamp_pb2.Timestamp) -> int:
    return ts.seconds * 1000 + ts.nanos // 1_000_000


def delay_level_for(delay_ms: int, levels: Sequence[int]) -> int | None:
    """The smallest delay level (1-based) that waits at least `delay_ms`; None when even the
    longest is shorter."""
    for index, level_ms in enumerate(levels):
        if level_ms >= delay_ms:
            return index + 1
    return None


def message_properties(msg: pb.Message, levels: Sequence[int], now_ms: int) -> dict[str, str] | Refusal:
    """The store properties of a v2 message, or why they cannot be."""
    sp = msg.system_properties
    properties: dict[str, str] = {}
    for key, value in msg.user_properties.items():
        if not key or _has_separator(key) or key in RESERVED_PROPERTY_KEYS:
            reason = "is reserved by the broker" if key in RESERVED_PROPERTY_KEYS else "is empty or holds \\x01/\\x02"
            return Refusal(pb.ILLEGAL_MESSAGE_PROPERTY_KEY, f"user property key {key[:64]!r} {reason}")
        if _has_separator(value):
            return Refusal(pb.ILLEGAL_MESSAGE_PROPERTY_KEY, f"the value of user property {key[:64]!r} holds \\x01/\\x02")
        properties[key] = value
    if sp.HasField("tag"):
        tag = sp.tag
        if not tag.strip() or "|" in tag or _has_separator(tag) or len(tag) > MAX_TAG_LENGTH:
            return Refusal(
                pb.ILLEGAL_MESSAGE_TAG,
                f"tag {tag[:64]!r} must be non-blank, at most {MAX_TAG_LENGTH} characters, without '|', \\x01, \\x02",
            )
        properties[PROPERTY_TAGS] = tag
    if sp.keys:
        for key in sp.keys:
            if not key or any(c.isspace() for c in key) or _has_separator(key):
                return Refusal(pb.ILLEGAL_MESSAGE_KEY, f"message key {key[:64]!r} must be non-empty, without whitespace")
        properties[PROPERTY_KEYS] = " ".join(sp.keys)
    if sp.HasField("message_group"):
        group = sp.message_group
        if not group.strip() or len(group) > MAX_MESSAGE_GROUP_LENGTH or _has_separator(group):
            return Refusal(
                pb.ILLEGAL_MESSAGE_GROUP,
                f"message group {group[:64]!r} must be non-blank and at most {MAX_MESSAGE_GROUP_LENGTH} characters",
            )
        properties[PROPERTY_SHARDING_KEY] = group
    if sp.message_id:
        mid = sp.message_id
        if len(mid) > MAX_MESSAGE_ID_LENGTH or any(c.isspace() for c in mid) or _has_separator(mid):
            return Refusal(
                pb.ILLEGAL_MESSAGE_ID,
                f"message id {mid[:64]!r} must be at most {MAX_MESSAGE_ID_LENGTH} characters, without whitespace",
            )
        properties[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = mid
    if sp.HasField("delivery_timestamp"):
        delay_ms = _timestamp_ms(sp.delivery_timestamp) - now_ms
        if delay_ms > 0:
            level = delay_level_for(delay_ms, levels)
            if level is None:
                return Refusal(
                    pb.ILLEGAL_DELIVERY_TIME,
                    f"delivery time is {delay_ms} ms away; this broker delays at most {max(levels)} ms (messageDelayLevel)",
                )
            properties[PROPERTY_DELAY_TIME_LEVEL] = str(level)
    size = len(encode_properties(properties))
    if size > MAX_PROPERTIES_LENGTH:
        return Refusal(
            pb.MESSAGE_PROPERTIES_TOO_LARGE, f"the message's properties are {size} bytes; at most {MAX_PROPERTIES_LENGTH}"
        )
    return properties


def body_problem(msg: pb.Message, max_body_size: int) -> Refusal | None:
    body = msg.body
    sp = msg.system_properties
    if not body:
        return Refusal(pb.MESSAGE_BODY_EMPTY, "the message body is empty")
    if len(body) > max_body_size:
        return Refusal(pb.MESSAGE_BODY_TOO_LARGE, f"the body is {len(body)} bytes; maxMessageSize is {max_body_size}")
    if sp.body_encoding not in (pb.ENCODING_UNSPECIFIED, pb.IDENTITY, pb.GZIP):
        return Refusal(pb.BAD_REQUEST, f"unknown body encoding {sp.body_encoding}")
    if sp.HasField("body_digest") and sp.body_digest.checksum and not _digest_matches(sp.body_digest, body):
        return Refusal(pb.MESSAGE_CORRUPTED, "the body does not match its digest")
    if sp.message_type == pb.TRANSACTION:
        return Refusal(pb.UNSUPPORTED, "transactional messages are not supported by this broker")
    return None


def choose_queue(sp: pb.SystemProperties, config: TopicConfig, round_robin: Callable[[], int]) -> int | Refusal:
    queues = config.write_queue_nums
    if sp.HasField("send_queue_id"):
        queue_id = sp.send_queue_id
        if not 0 <= queue_id < queues:
            return Refusal(
                pb.BAD_REQUEST,
                f"queue id {queue_id} is out of range: topic {config.topic_name} has {queues} write queues (0..{queues - 1})",
            )
        return queue_id
    if sp.HasField("message_group") and sp.message_group:
        return abs(java_string_hash(sp.message_group)) % queues
    return round_robin() % queues


# -- reads: store message -> v2 message -------------------------------------------------------


def _timestamp(ms: int) -> timestamp_pb2.Timestamp:
    ts = timestamp_pb2.Timestamp()
    ts.FromMilliseconds(ms)
    return ts


def message_type_of(ext: MessageExt) -> int:
    properties = ext.properties
    if ext.sys_flag & TRANSACTION_TYPE_MASK == TRANSACTION_COMMIT_TYPE:
        return pb.TRANSACTION
    if PROPERTY_REAL_TOPIC in properties or PROPERTY_DELAY_TIME_LEVEL in properties:
        return pb.DELAY
    if properties.get(PROPERTY_SHARDING_KEY):
        return pb.FIFO
    return pb.NORMAL


def to_pb_message(ext: MessageExt, namespace: str = "") -> pb.Message:
    properties: Mapping[str, str] = ext.properties
    sp = pb.SystemProperties(
        message_id=properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or ext.msg_id,
        body_digest=pb.Digest(type=pb.CRC32, checksum=f"{zlib.crc32(ext.body):08X}"),
        body_encoding=pb.GZIP if ext.sys_flag & COMPRESSED_FLAG else pb.IDENTITY,
        message_type=message_type_of(ext),
        born_timestamp=_timestamp(ext.born_timestamp_ms),
        born_host=format_host(ext.born_host),
        store_timestamp=_timestamp(ext.store_timestamp_ms),
        store_host=format_host(ext.store_host),
        queue_id=ext.queue_id,
        queue_offset=ext.queue_offset,
        delivery_attempt=ext.reconsume_times + 1,
        commit_log_offset=ext.physical_offset,
        sys_flag=ext.sys_flag,
        reconsume_times=ext.reconsume_times,
        flag=ext.flag,
    )
    tag = properties.get(PROPERTY_TAGS)
    if tag is not None:
        sp.tag = tag
    keys = properties.get(PROPERTY_KEYS)
    if keys:
        sp.keys.extend(keys.split())
    group = properties.get(PROPERTY_SHARDING_KEY)
    if group:
        sp.message_group = group
    user = {k: v for k, v in properties.items() if k not in RESERVED_PROPERTY_KEYS}
    return pb.Message(
        topic=pb.Resource(resource_namespace=namespace, name=ext.topic),
        user_properties=user,
        system_properties=sp,
        body=ext.body,
    )


# -- telemetry --------------------------------------------------------------------------------


def _duration(ms: int) -> duration_pb2.Duration:
    d = duration_pb2.Duration()
    d.FromMilliseconds(ms)
    return d


_CONSUMER_TYPES = frozenset({pb.PUSH_CONSUMER, pb.SIMPLE_CONSUMER, pb.PULL_CONSUMER})


def settings_reply(client: pb.Settings, *, max_body_size: int, long_polling_ms: int) -> pb.Settings:
    """The broker's answer to a client's settings: what it accepts and how the client retries."""
    reply = pb.Settings(metric=pb.Metric(on=False))
    if client.HasField("client_type"):
        reply.client_type = client.client_type
    if client.HasField("request_timeout"):
        reply.request_timeout.CopyFrom(client.request_timeout)
    if client.WhichOneof("pub_sub") == "subscription" or client.client_type in _CONSUMER_TYPES:
        wanted = client.subscription
        subscription = pb.Subscription(
            subscriptions=wanted.subscriptions,
            fifo=False,
            receive_batch_size=wanted.receive_batch_size if wanted.HasField("receive_batch_size") else 32,
            long_polling_timeout=_duration(long_polling_ms),
        )
        if wanted.HasField("group"):
            subscription.group.CopyFrom(wanted.group)
        reply.subscription.CopyFrom(subscription)
        backoff = pb.ExponentialBackoff(initial=_duration(1000), max=_duration(60_000), multiplier=2.0)
        attempts = 16
    else:
        reply.publishing.CopyFrom(
            pb.Publishing(topics=client.publishing.topics, max_body_size=max_body_size, validate_message_type=False)
        )
        backoff = pb.ExponentialBackoff(initial=_duration(10), max=_duration(1000), multiplier=2.0)
        attempts = 3
    if client.HasField("backoff_policy") and client.backoff_policy.max_attempts > 0:
        attempts = client.backoff_policy.max_attempts
    reply.backoff_policy.CopyFrom(pb.RetryPolicy(max_attempts=attempts, exponential_backoff=backoff))
    return reply


# -- undecodable requests ---------------------------------------------------------------------


class _Malformed:
    """Stands for a request message that did not decode."""

    __slots__ = ("error",)

    def __init__(self, error: str) -> None:
        self.error = error


def _safe_decoder(decode: Callable[[bytes], object]) -> Callable[[bytes], object]:
    def decoder(data: bytes) -> object:
        try:
            return decode(data)
        except Exception as exc:  # DecodeError, or whatever a hostile payload provokes
            return _Malformed(f"{type(exc).__name__}: {exc}")

    return decoder


async def _refuse_malformed(context, item: _Malformed) -> None:
    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"malformed request: {item.error}")


def _guard_handler(handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    serializer = handler.response_serializer
    decoder = _safe_decoder(handler.request_deserializer)

    async def checked(requests, context):
        async for item in requests:
            if isinstance(item, _Malformed):
                await _refuse_malformed(context, item)
            yield item

    if handler.unary_unary is not None and inspect.iscoroutinefunction(handler.unary_unary):
        inner_uu = handler.unary_unary

        async def unary_unary(request, context):
            if isinstance(request, _Malformed):
                await _refuse_malformed(context, request)
            return await inner_uu(request, context)

        return grpc.unary_unary_rpc_method_handler(unary_unary, decoder, serializer)
    if handler.unary_stream is not None and inspect.isasyncgenfunction(handler.unary_stream):
        inner_us = handler.unary_stream

        async def unary_stream(request, context):
            if isinstance(request, _Malformed):
                await _refuse_malformed(context, request)
            async for response in inner_us(request, context):
                yield response

        return grpc.unary_stream_rpc_method_handler(unary_stream, decoder, serializer)
    if handler.stream_stream is not None and inspect.isasyncgenfunction(handler.stream_stream):
        inner_ss = handler.stream_stream

        async def stream_stream(requests, context):
            async for response in inner_ss(checked(requests, context), context):
                yield response

        return grpc.stream_stream_rpc_method_handler(stream_stream, decoder, serializer)
    if handler.stream_unary is not None and inspect.iscoroutinefunction(handler.stream_unary):
        inner_su = handler.stream_unary

        async def stream_unary(requests, context):
            return await inner_su(checked(requests, context), context)

        return grpc.stream_unary_rpc_method_handler(stream_unary, decoder, serializer)
    return handler


class MalformedRequestGuard(grpc.aio.ServerInterceptor):
    """Answers a request that does not decode INVALID_ARGUMENT (grpc.aio's own answer is UNKNOWN,
    "Unexpected DecodeError"). Wraps async handlers of every method; others pass unchanged."""

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if handler is None or handler.request_deserializer is None:
            return handler
        return _guard_handler(handler)


# -- the servicer -----------------------------------------------------------------------------


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
                return response_type(status=status(pb.INTERNAL_ERROR, f"internal error ({type(exc).__name__}); see the broker log"))

        return guarded

    return wrap


@dataclass(slots=True)
class _Planned:
    """A message ready for the store, at position `index` of the request."""

    index: int
    message: Message
    client_id: str
    delayed: bool


class MessagingServicer(messaging_pb2_grpc.MessagingServiceServicer):
    def __init__(
        self,
        store: MessageStore,
        configs: BrokerConfigs,
        view: BrokerView,
        *,
        clock_ms: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self._store = store
        self._configs = configs
        self._view = view
        self._clock = clock_ms
        self._loop: asyncio.AbstractEventLoop | None = None
        self._round_robin: dict[str, int] = {}
        self._create_lock = asyncio.Lock()
        # (topic, queue id) -> events of the pulls long polling it; changed on the loop only.
        self._watchers: dict[tuple[str, int], set[asyncio.Event]] = {}
        # Keys with a wake already scheduled: a burst of arrivals costs the loop one callback.
        self._wake_scheduled: set[tuple[str, int]] = set()

    # -- long-poll wakes ------------------------------------------------------------------------

    def bind_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def on_arrival(self, request) -> None:
        """Store dispatch thread: a message became readable in (request.topic, request.queue_id)."""
        key = (request.topic, request.queue_id)
        loop = self._loop
        if loop is None or key not in self._watchers or key in self._wake_scheduled:
            return
        self._wake_scheduled.add(key)
        try:
            loop.call_soon_threadsafe(self._wake, key)
        except RuntimeError:  # the loop closed: nobody is waiting any more
            self._wake_scheduled.discard(key)

    def _wake(self, key: tuple[str, int]) -> None:
        self._wake_scheduled.discard(key)
        for event in self._watchers.get(key, ()):
            event.set()

    def _watch(self, key: tuple[str, int]) -> asyncio.Event:
        event = asyncio.Event()
        self._watchers.setdefault(key, set()).add(event)
        return event

    def _unwatch(self, key: tuple[str, int], event: asyncio.Event) -> None:
        events = self._watchers.get(key)
        if events is not None:
            events.discard(event)
            if not events:
                del self._watchers[key]

    # -- shared checks --------------------------------------------------------------------------

    def _not_master(self) -> pb.Status:
        broker = self._configs.broker
        master = self._view.master_client_endpoint()
        where = f"send to its master at {master}" if master else "its master's client endpoint is not known yet"
        return status(
            pb.FORBIDDEN, f"{broker.broker_name} (id {broker.broker_id}) is a SLAVE: {where}", master_endpoint=master
        )

    @property
    def _is_slave(self) -> bool:
        return self._view.role is BrokerRole.SLAVE

    async def _topic_config(self, topic: str, create: bool) -> TopicConfig | None:
        config = self._store.topics.get(topic)
        if config is not None or not create or not self._store.config.auto_create_topic_enable:
            return config
        async with self._create_lock:
            config = self._store.topics.get(topic)
            if config is None:
                queues = self._store.config.default_topic_queue_nums
                # The topic table is written and fsynced: a worker thread's job.
                config = await asyncio.to_thread(self._store.create_or_update_topic, TopicConfig(topic, queues, queues))
                log.info("auto-created topic %s with %d queues", topic, queues)
        return config

    def _topic_from_queues(self, topic: str) -> TopicConfig | None:
        """A read-only config covering the topic's consume queues: a slave knows topics its
        master created from the data it replicated, not from the master's topic table."""
        ids = [q.queue_id for q in self._store.consume_queues.queues() if q.topic == topic]
        if not ids:
            return None
        queues = min(max(ids) + 1, MAX_QUEUE_NUMS)
        return TopicConfig(topic, queues, queues, int(Permission.READ))

    def _queue_problem(self, topic: str, queue_id: int) -> pb.Status | None:
        """Why (topic, queue) cannot be read or have offsets; None when it can."""
        problem = name_problem("topic", topic)
        if problem is not None:
            return status(pb.ILLEGAL_TOPIC, problem)
        if not 0 <= queue_id <= _INT32_MAX:
            return status(pb.BAD_REQUEST, f"queue id {queue_id} is out of range (0..{_INT32_MAX})")
        config = self._store.topics.get(topic)
        if self._store.find_consume_queue(topic, queue_id) is not None:
            return None
        # A slave's topic table is its own (topics are not replicated): it knows queues by data.
        if config is None:
            if self._is_slave:
                return None
            return status(pb.TOPIC_NOT_FOUND, f"topic {topic} does not exist")
        queues = max(config.read_queue_nums, config.write_queue_nums)
        if queue_id >= queues:
            return status(pb.BAD_REQUEST, f"queue id {queue_id} is out of range: topic {topic} has {queues} queues")
        return None

    # -- QueryRoute -----------------------------------------------------------------------------

    @_guarded(pb.QueryRouteResponse)
    async def QueryRoute(self, request: pb.QueryRouteRequest, context) -> pb.QueryRouteResponse:
        topic = request.topic.name
        problem = name_problem("topic", topic)
        if problem is not None:
            return pb.QueryRouteResponse(status=status(pb.ILLEGAL_TOPIC, problem))
        slave = self._is_slave
        config = await self._topic_config(topic, create=not slave)
        if config is None and slave:
            config = self._topic_from_queues(topic)
        if config is None:
            why = "" if slave else " and autoCreateTopicEnable is false"
            return pb.QueryRouteResponse(status=status(pb.TOPIC_NOT_FOUND, f"topic {topic} does not exist{why}"))
        broker = self._configs.broker
        queues = route_queues(
            request.topic,
            config,
            broker.broker_name,
            broker.broker_id if slave else 0,
            self._view.client_endpoint(),
            read_only=slave,
        )
        return pb.QueryRouteResponse(status=OK, message_queues=queues)

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
            return pb.SendMessageResponse(status=status(pb.BAD_REQUEST, "a SendMessageRequest needs at least one message"))
        if len(messages) > MAX_SEND_MESSAGES:
            return pb.SendMessageResponse(
                status=status(pb.BAD_REQUEST, f"{len(messages)} messages in one request; at most {MAX_SEND_MESSAGES}")
            )
        if self._is_slave:
            refused = self._not_master()
            entries = [pb.SendResultEntry(status=refused, message_id=m.system_properties.message_id) for m in messages]
            return pb.SendMessageResponse(status=refused, entries=entries)
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
        return pb.SendMessageResponse(status=codes.summarize(e.status for e in done), entries=done)

    async def _plan(
        self, messages: Sequence[pb.Message], born_host: Host, entries: list[pb.SendResultEntry | None]
    ) -> list[_Planned]:
        """Store messages for the acceptable ones; refusal entries for the others."""
        now = self._clock()
        max_body = self._store.config.max_message_size
        levels = self._store.delay_levels
        topics: dict[str, TopicConfig | Refusal] = {}
        round_robin: dict[str, int] = {}
        planned: list[_Planned] = []
        for index, msg in enumerate(messages):
            outcome = await self._plan_one(msg, born_host, now, max_body, levels, topics, round_robin)
            if isinstance(outcome, Refusal):
                entries[index] = pb.SendResultEntry(status=outcome.as_status(), message_id=msg.system_properties.message_id)
            else:
                planned.append(_Planned(index, outcome, msg.system_properties.message_id, PROPERTY_DELAY_TIME_LEVEL in outcome.properties))
        return planned

    async def _plan_one(
        self,
        msg: pb.Message,
        born_host: Host,
        now: int,
        max_body: int,
        levels: Sequence[int],
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
        properties = message_properties(msg, levels, now)
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
        return Message(
            topic=topic,
            queue_id=queue_id,
            body=msg.body,
            properties=properties,
            sys_flag=COMPRESSED_FLAG if sp.body_encoding == pb.GZIP else 0,
            born_host=born_host,
            born_timestamp_ms=born_ms if born_ms > 0 else None,
        )

    async def _writable_topic(self, topic: str) -> TopicConfig | Refusal:
        problem = name_problem("topic", topic)
        if problem is not None:
            return Refusal(pb.ILLEGAL_TOPIC, problem)
        if topic in SYSTEM_TOPICS:
            return Refusal(pb.ILLEGAL_TOPIC, f"{topic} is a system topic; producers cannot send to it")
        config = await self._topic_config(topic, create=True)
        if config is None:
            return Refusal(pb.TOPIC_NOT_FOUND, f"topic {topic} does not exist and autoCreateTopicEnable is false")
        if not config.writable:
            return Refusal(pb.FORBIDDEN, f"topic {topic} is not writable (perm {config.perm})")
        return config

    def _put_groups(self, planned: list[_Planned]) -> list[list[_Planned]]:
        """Messages for one topic and queue form one batch (cut where it would pass the store's
        append limit); delayed messages, which the store cannot batch, go one by one."""
        if len(planned) <= 1:
            return [planned] if planned else []
        limit = self._store.config.max_append_size
        by_queue: dict[tuple[str, int], list[_Planned]] = {}
        groups: list[list[_Planned]] = []
        for item in planned:
            if item.delayed:
                groups.append([item])
            else:
                by_queue.setdefault((item.message.topic, item.message.queue_id), []).append(item)
        for items in by_queue.values():
            batch: list[_Planned] = []
            size = 0
            for item in items:
                # An upper bound of the encoded size: fixed fields with IPv6 hosts, topic, properties.
                estimate = 128 + len(item.message.body) + len(item.message.topic) + len(encode_properties(item.message.properties))
                if batch and size + estimate > limit:
                    groups.append(batch)
                    batch, size = [], 0
                batch.append(item)
                size += estimate
            groups.append(batch)
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
                        offset=result.queue_offset + i,
                        queue_id=item.message.queue_id,
                        commit_log_offset=commit_log_offset,
                    ),
                )
            )
        return out

    # -- PullMessage ----------------------------------------------------------------------------

    async def PullMessage(self, request: pb.PullMessageRequest, context) -> AsyncIterator[pb.PullMessageResponse]:
        sent_status = False
        try:
            async for response in self._pull(request, context):
                if response.WhichOneof("content") == "status":
                    sent_status = True
                yield response
        except grpc.aio.AbortError:
            raise
        except Exception as exc:
            log.exception("PullMessage failed")
            text = f"internal error ({type(exc).__name__}); see the broker log"
            if not sent_status:
                yield pb.PullMessageResponse(status=status(pb.INTERNAL_ERROR, text))
            else:
                await context.abort(grpc.StatusCode.INTERNAL, text)

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

    def _tag_filter(self, expression: pb.FilterExpression) -> TagFilter | None | pb.Status:
        if expression.type == pb.SQL:
            return status(pb.UNSUPPORTED, "SQL92 filters are not supported; use a TAG expression")
        if expression.type not in (pb.FILTER_TYPE_UNSPECIFIED, pb.TAG):
            return status(pb.ILLEGAL_FILTER_EXPRESSION, f"unknown filter type {expression.type}")
        try:
            return TagFilter.parse(expression.expression)
        except ValueError as exc:
            return status(pb.ILLEGAL_FILTER_EXPRESSION, str(exc))

    def _wait_seconds(self, request: pb.PullMessageRequest, context) -> float:
        wanted_ms = min(request.long_polling_timeout.ToMilliseconds(), self._configs.broker.long_polling_max_ms)
        wait_s = max(0.0, wanted_ms / 1000)
        remaining = context.time_remaining()
        if remaining is not None:
            wait_s = min(wait_s, max(0.0, remaining - DEADLINE_MARGIN_S))
        return wait_s

    async def _read(self, group: str, topic: str, queue_id: int, offset: int, batch: int, tag_filter) -> GetMessageResult:
        return await asyncio.to_thread(
            self._store.get_message, group, topic, queue_id, offset, batch, MAX_PULL_BYTES, tag_filter
        )

    async def _pull(self, request: pb.PullMessageRequest, context) -> AsyncIterator[pb.PullMessageResponse]:
        refused = self._pull_problem(request)
        if refused is not None:
            yield pb.PullMessageResponse(status=refused)
            return
        tag_filter = self._tag_filter(request.filter_expression)
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
                if action is PullAction.RESET:
                    text = f"offset {offset} is outside queue {topic}:{queue_id} [{result.min_offset}, {result.max_offset}]"
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
                    event = self._watch(key)
                    continue
                try:
                    await asyncio.wait_for(event.wait(), remaining)
                except asyncio.TimeoutError:
                    pass
                waited = True
        finally:
            if event is not None:
                self._unwatch(key, event)

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
        if group is not None:
            problem = name_problem("group", group.name)
            if problem is not None:
                return status(pb.ILLEGAL_CONSUMER_GROUP, problem)
        return self._queue_problem(queue.topic.name, queue.id)

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
        refused = self._offset_problem(request.group, request.message_queue)
        if refused is not None:
            return pb.UpdateOffsetResponse(status=refused)
        if request.offset < 0:
            return pb.UpdateOffsetResponse(status=status(pb.ILLEGAL_OFFSET, f"offset {request.offset} is negative"))
        queue = request.message_queue
        self._store.consumer_offsets.commit_offset(request.group.name, queue.topic.name, queue.id, request.offset)
        return pb.UpdateOffsetResponse(status=OK)

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

    # -- Telemetry ------------------------------------------------------------------------------

    async def Telemetry(self, request_iterator, context) -> AsyncIterator[pb.TelemetryCommand]:
        max_body = self._store.config.max_message_size
        long_polling_ms = min(SUBSCRIPTION_LONG_POLLING_MS, self._configs.broker.long_polling_max_ms)
        try:
            async for command in request_iterator:
                if command.WhichOneof("command") != "settings":
                    continue  # commands this broker does not serve carry nothing to answer
                settings = settings_reply(command.settings, max_body_size=max_body, long_polling_ms=long_polling_ms)
                yield pb.TelemetryCommand(status=OK, settings=settings)
        except grpc.aio.AbortError:
            raise
        except Exception as exc:
            log.exception("Telemetry failed")
            await context.abort(grpc.StatusCode.INTERNAL, f"internal error ({type(exc).__name__}); see the broker log")

