"""Conversions of the client API (`apache.rocketmq.v2`) to and from the store, pure functions.

v2 message -> store message (properties TAGS, KEYS, `__SHARDINGKEY`, UNIQ_KEY, DELAY, user
properties; the queue a send goes to), store message -> v2 message (digest, type, delivery
attempt, RocketStore's extension fields), routes, endpoints and peers, and the Telemetry settings
reply. No I/O; thread-safe (stateless).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from google.protobuf import duration_pb2, timestamp_pb2

from wire.rpc import messaging_pb2 as pb
from wire.digests import digest_matches, md5_hex
from store import MessageExt, MessageStore, TagFilter
from store.codec import MAX_PROPERTIES_LENGTH, encode_properties, java_string_hash
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
    clamp_timestamp_ms,
)
from store.timer_state import PROPERTY_TIMER_DELIVER_MS
from store.topic_config import MAX_QUEUE_NUMS, Permission, TopicConfig, validate_group_name, validate_topic_name

from . import codes


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
        PROPERTY_TIMER_DELIVER_MS,
        "CHECK_IMMUNITY_TIME_IN_SECONDS",
    }
)

Host = tuple[str, int]


def status(code: "pb.Code", message: str = "", master_endpoint: str = "") -> pb.Status:
    return pb.Status(code=code, message=message or codes.code_name(code), master_endpoint=master_endpoint)


OK = pb.Status(code=pb.OK, message="OK")


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why one message (or request) is refused; nothing was stored for it."""

    code: "pb.Code"
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


def queue_permission(perm: int, queue_id: int, config: TopicConfig, read_only: bool) -> "pb.Permission":
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


def pop_assignment(
    topic: pb.Resource, broker_name: str, endpoints: pb.Endpoints, permission: "pb.Permission"
) -> pb.Assignment:
    """Where a RocketMQ 5 push consumer pops from: queue id -1 (any queue) of the broker's id 0."""
    queue = pb.MessageQueue(
        topic=topic,
        id=-1,
        permission=permission,
        broker=pb.Broker(name=broker_name, id=0, endpoints=endpoints),
        accept_message_types=ACCEPTED_MESSAGE_TYPES,
    )
    return pb.Assignment(message_queue=queue)


def topic_from_queues(store: MessageStore, topic: str) -> TopicConfig | None:
    """A read-only config covering the topic's consume queues: a slave knows topics its master
    created from the data it replicated before the master's topic table reaches it."""
    ids = [q.queue_id for q in store.consume_queues.queues() if q.topic == topic]
    if not ids:
        return None
    queues = min(max(ids) + 1, MAX_QUEUE_NUMS)
    return TopicConfig(topic, queues, queues, int(Permission.READ))


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


def _timestamp_ms(ts: timestamp_pb2.Timestamp) -> int:
    return ts.seconds * 1000 + ts.nanos // 1_000_000


# RocketMQ 5's timerMaxDelaySec default: a delivery time at most 3 days ahead.
MAX_DELIVERY_DELAY_MS = 3 * 24 * 3600 * 1000


def message_properties(msg: pb.Message, max_delay_ms: int, now_ms: int) -> dict[str, str] | Refusal:
    """The store properties of a v2 message, or why they cannot be. A delivery time in the future
    becomes TIMER_DELIVER_MS (the broker's timer delivers it then, to the millisecond)."""
    sp = msg.system_properties
    properties: dict[str, str] = {}
    for key, value in msg.user_properties.items():
        if not key or _has_separator(key) or key in RESERVED_PROPERTY_KEYS:
            reason = "is reserved by the broker" if key in RESERVED_PROPERTY_KEYS else "is empty or holds \\x01/\\x02"
            return Refusal(pb.ILLEGAL_MESSAGE_PROPERTY_KEY, f"user property key {key[:64]!r} {reason}")
        if _has_separator(value):
            return Refusal(
                pb.ILLEGAL_MESSAGE_PROPERTY_KEY, f"the value of user property {key[:64]!r} holds \\x01/\\x02"
            )
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
                return Refusal(
                    pb.ILLEGAL_MESSAGE_KEY, f"message key {key[:64]!r} must be non-empty, without whitespace"
                )
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
        deliver_ms = _timestamp_ms(sp.delivery_timestamp)
        delay_ms = deliver_ms - now_ms
        if delay_ms > max_delay_ms:
            return Refusal(
                pb.ILLEGAL_DELIVERY_TIME,
                f"delivery time is {delay_ms} ms away; at most {max_delay_ms} ms ahead is accepted",
            )
        if delay_ms > 0:
            properties[PROPERTY_TIMER_DELIVER_MS] = str(deliver_ms)
    size = len(encode_properties(properties))
    if size > MAX_PROPERTIES_LENGTH:
        return Refusal(
            pb.MESSAGE_PROPERTIES_TOO_LARGE,
            f"the message's properties are {size} bytes; at most {MAX_PROPERTIES_LENGTH}",
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
    if sp.HasField("body_digest") and sp.body_digest.checksum and not digest_matches(sp.body_digest, body):
        return Refusal(pb.MESSAGE_CORRUPTED, "the body does not match its digest")
    return None


def choose_queue(sp: pb.SystemProperties, config: TopicConfig, round_robin: Callable[[], int]) -> int | Refusal:
    queues = config.write_queue_nums
    if sp.HasField("send_queue_id"):
        queue_id = sp.send_queue_id
        if not 0 <= queue_id < queues:
            return Refusal(
                pb.BAD_REQUEST,
                f"queue id {queue_id} is out of range: topic {config.topic_name} has {queues} write queues "
                f"(0..{queues - 1})",
            )
        return queue_id
    if sp.HasField("message_group") and sp.message_group:
        return abs(java_string_hash(sp.message_group)) % queues
    return round_robin() % queues


# -- reads: store message -> v2 message -------------------------------------------------------


def _timestamp(ms: int) -> timestamp_pb2.Timestamp:
    # A Timestamp holds the years 1 to 9999 only (FromMilliseconds raises past them): a record
    # stored before the store refused such born times is served with its time clamped.
    ts = timestamp_pb2.Timestamp()
    ts.FromMilliseconds(clamp_timestamp_ms(ms))
    return ts


def message_type_of(ext: MessageExt) -> "pb.MessageType":
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
        body_digest=pb.Digest(type=pb.MD5, checksum=md5_hex(ext.body)),
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


# -- consumption ------------------------------------------------------------------------------


def tag_filter_of(expression: pb.FilterExpression) -> TagFilter | None | pb.Status:
    """The store's filter for a subscription expression, or the status refusing it."""
    if expression.type == pb.SQL:
        return status(pb.UNSUPPORTED, "SQL92 filters are not supported; use a TAG expression")
    if expression.type not in (pb.FILTER_TYPE_UNSPECIFIED, pb.TAG):
        return status(pb.ILLEGAL_FILTER_EXPRESSION, f"unknown filter type {expression.type}")
    try:
        return TagFilter.parse(expression.expression)
    except ValueError as exc:
        return status(pb.ILLEGAL_FILTER_EXPRESSION, str(exc))


def long_poll_seconds(wanted_ms: int, max_ms: int, remaining_s: float | None) -> float:
    """How long a long poll waits: what the client wants, within the broker's maximum, and ending
    DEADLINE_MARGIN_S before the call's deadline (`remaining_s`) so the answer still arrives."""
    wait_s = max(0.0, min(wanted_ms, max_ms) / 1000)
    if remaining_s is not None:
        wait_s = min(wait_s, max(0.0, remaining_s - DEADLINE_MARGIN_S))
    return wait_s


# -- telemetry --------------------------------------------------------------------------------


def duration_of(ms: int) -> duration_pb2.Duration:
    d = duration_pb2.Duration()
    d.FromMilliseconds(ms)
    return d


_CONSUMER_TYPES = frozenset({pb.PUSH_CONSUMER, pb.SIMPLE_CONSUMER, pb.PULL_CONSUMER})


def settings_reply(
    client: pb.Settings,
    *,
    max_body_size: int,
    long_polling_ms: int,
    max_attempts: int,
    retry_delays_ms: Sequence[int],
    fifo_groups: frozenset[str] = frozenset(),
) -> pb.Settings:
    """The broker's answer to a client's settings: what it accepts and how the client retries.
    Consumers get RocketMQ's redelivery schedule as a customized backoff (`retry_delays_ms`, the
    delay levels from level 3 on) and the group's `max_attempts`."""
    reply = pb.Settings(metric=pb.Metric(on=False))
    if client.HasField("client_type"):
        reply.client_type = client.client_type
    if client.HasField("request_timeout"):
        reply.request_timeout.CopyFrom(client.request_timeout)
    if client.WhichOneof("pub_sub") == "subscription" or client.client_type in _CONSUMER_TYPES:
        wanted = client.subscription
        subscription = pb.Subscription(
            subscriptions=wanted.subscriptions,
            fifo=wanted.group.name in fifo_groups,
            receive_batch_size=wanted.receive_batch_size if wanted.HasField("receive_batch_size") else 32,
            long_polling_timeout=duration_of(long_polling_ms),
        )
        if wanted.HasField("group"):
            subscription.group.CopyFrom(wanted.group)
        reply.subscription.CopyFrom(subscription)
        # Whole seconds: the official clients read the seconds only.
        delays = [duration_of(max(1000, ms // 1000 * 1000)) for ms in retry_delays_ms] or [duration_of(1000)]
        reply.backoff_policy.CopyFrom(
            pb.RetryPolicy(max_attempts=max_attempts, customized_backoff=pb.CustomizedBackoff(next=delays))
        )
        return reply
    reply.publishing.CopyFrom(
        pb.Publishing(topics=client.publishing.topics, max_body_size=max_body_size, validate_message_type=False)
    )
    backoff = pb.ExponentialBackoff(initial=duration_of(10), max=duration_of(1000), multiplier=2.0)
    attempts = 3
    if client.HasField("backoff_policy") and client.backoff_policy.max_attempts > 0:
        attempts = client.backoff_policy.max_attempts
    reply.backoff_policy.CopyFrom(pb.RetryPolicy(max_attempts=attempts, exponential_backoff=backoff))
    return reply
