"""Conversions of the client API (`apache.rocketmq.v2`) to and from the store, pure functions.

v2 message -> store message properties (TAGS, KEYS, `__SHARDINGKEY`, UNIQ_KEY, TIMER_DELIVER_MS,
user properties) and the checks of what only this API carries (property keys, tags, message ids,
body encodings and digests), store message -> v2 message (digest, type, delivery attempt,
RocketStore's extension fields), the core's routes as message queues, endpoints and peers, and the
Telemetry settings reply. Refusals are the broker core's (`core.refusals`). No I/O; thread-safe
(stateless but for `peer_host`'s memo of the last peers it parsed, an `lru_cache`: one client's
connection names the same peer on every call).
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Iterable, Mapping, Sequence

from google.protobuf import duration_pb2, timestamp_pb2

from rocketstore.broker.timer_state import PROPERTY_TIMER_DELIVER_MS, deliver_ms_of
from store import Message, MessageExt, TagFilter
from store.log.codec import MAX_PROPERTIES_LENGTH, encode_properties
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
    producer_sys_flag,
)
from store.metadata.topic_config import Permission, TopicConfig
from wire.digests import digest_matches, md5_hex
from wire.rpc import messaging_pb2 as pb

from . import codes
from .core.pull import SQL92, TAG, tag_filter
from .core.refusals import Reason, Refusal
from .core.routes import RouteBroker, RouteGroup
from .core.send import PROPERTY_SHARDING_KEY, PutOutcomes, SendItem, SendOutcome

MAX_SEND_MESSAGES = 1024
SUBSCRIPTION_LONG_POLLING_MS = 20_000
MAX_MESSAGE_ID_LENGTH = 128
MAX_MESSAGE_GROUP_LENGTH = 64
MAX_TAG_LENGTH = 255
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


def _scheme(host: str) -> "pb.AddressScheme":
    try:
        return pb.IPv4 if ipaddress.ip_address(host).version == 4 else pb.IPv6
    except ValueError:
        return pb.DOMAIN_NAME


def endpoints_of(endpoint: str, *more: str) -> pb.Endpoints:
    """The v2 Endpoints of a host:port: IPv4 or IPv6 for address literals, else DOMAIN_NAME.
    With `more`, every distinct address when all are literals of `endpoint`'s IP version (the
    clients take several addresses of one IP scheme, never of DOMAIN_NAME); `endpoint` alone
    otherwise."""
    parts = split_endpoint(endpoint)
    if parts is None:
        return pb.Endpoints()
    scheme = _scheme(parts[0])
    addresses = [parts]
    if scheme != pb.DOMAIN_NAME:
        others = [split_endpoint(e) for e in more]
        if all(o is not None and _scheme(o[0]) == scheme for o in others):
            addresses += [o for o in others if o is not None and o not in addresses]
    return pb.Endpoints(scheme=scheme, addresses=[pb.Address(host=host, port=port) for host, port in addresses])


# Bounded: a peer string holds the client's port, so a client reconnecting makes new ones.
@functools.lru_cache(maxsize=1024)
def peer_host(peer: str) -> Host | None:
    """The client's (ip, port) from a gRPC peer string ("ipv4:1.2.3.4:5", "ipv6:[::1]:5"); the
    last 1,024 peers' answers are kept: ipaddress's check costs about 2 us a call, and each
    SendMessage asks."""
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


def route_queues(
    topic: pb.Resource, config: TopicConfig, broker_name: str, broker_id: int, endpoints: pb.Endpoints, read_only: bool
) -> list[pb.MessageQueue]:
    broker = pb.Broker(name=broker_name, id=broker_id, endpoints=endpoints)
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


def route_message_queues(topic: pb.Resource, brokers: Iterable[RouteBroker]) -> list[pb.MessageQueue]:
    """A route of the broker core as this API's message queues, broker by broker: every member of
    each group under its own id, slaves read-only (RocketStore's clients ask for it:
    `QueryRouteRequest.replicas`)."""
    return [
        queue
        for b in brokers
        for queue in route_queues(
            topic, b.config, b.broker_name, b.broker_id, endpoints_of(b.client_endpoint), b.read_only
        )
    ]


def group_message_queues(
    topic: pb.Resource, groups: Iterable[RouteGroup], *, all_members: bool = False
) -> list[pb.MessageQueue]:
    """A route as RocketMQ 5's clients take it: each group once, at broker id 0, with the queues
    and permissions of the broker serving there (they talk to no other id, and some clients would
    send receives to a slave's entry). Its endpoints are the serving broker's, or with
    `all_members` every member's (serving broker first): a client whose channel takes the first
    address that answers moves to a live member when one stops, and a slave relays what only the
    master serves (proxy mode). A group naming no broker at id 0 (electing a master) is left out."""
    queues = []
    for g in groups:
        serving = g.serving
        if serving is None:
            continue
        others = [m.client_endpoint for m in g.members if m is not serving] if all_members else []
        endpoints = endpoints_of(serving.client_endpoint, *others)
        queues += route_queues(topic, serving.config, g.broker_name, 0, endpoints, serving.read_only)
    return queues


# The clients known to connect to whichever address of several in one Endpoints answers (one
# channel over all of them), by their `x-mq-language` header: the official Python client. The
# Node.js client ("HTTP") keeps one address, as does any other client (not verified here).
MULTI_ADDRESS_LANGUAGES = frozenset(("PYTHON",))


# -- sends: v2 message -> store message -------------------------------------------------------


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
    # In this order (the first problem is the one answered); a field that is not there costs its
    # presence test only.
    refused = _user_properties(msg, properties) if msg.user_properties else None
    if refused is None and sp.HasField("tag"):
        refused = _system_property("tag", sp.tag, PROPERTY_TAGS, properties)
    if refused is None and sp.keys:
        refused = _message_keys(sp, properties)
    if refused is None and sp.HasField("message_group"):
        refused = _system_property("message_group", sp.message_group, PROPERTY_SHARDING_KEY, properties)
    if refused is None and sp.message_id:
        refused = _system_property("message_id", sp.message_id, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, properties)
    if refused is None and sp.HasField("delivery_timestamp"):
        refused = _delivery_time(sp, max_delay_ms, now_ms, properties)
    if refused is not None:
        return refused
    # A character is at most 4 bytes of UTF-8, with two separators per property: properties
    # surely within the limit (every client's) are not encoded to be measured.
    chars = sum(map(len, properties)) + sum(map(len, properties.values()))
    if 4 * chars + 2 * len(properties) <= MAX_PROPERTIES_LENGTH:
        return properties
    size = len(encode_properties(properties))
    if size > MAX_PROPERTIES_LENGTH:
        return Refusal(
            Reason.PROPERTIES_TOO_LARGE,
            f"the message's properties are {size} bytes; at most {MAX_PROPERTIES_LENGTH}",
        )
    return properties


def _user_properties(msg: pb.Message, properties: dict[str, str]) -> Refusal | None:
    for key, value in msg.user_properties.items():
        if not key or _has_separator(key) or key in RESERVED_PROPERTY_KEYS:
            reason = "is reserved by the broker" if key in RESERVED_PROPERTY_KEYS else "is empty or holds \\x01/\\x02"
            return Refusal(Reason.ILLEGAL_PROPERTY_KEY, f"user property key {key[:64]!r} {reason}")
        if _has_separator(value):
            return Refusal(Reason.ILLEGAL_PROPERTY_KEY, f"the value of user property {key[:64]!r} holds \\x01/\\x02")
        properties[key] = value
    return None


def _bad_tag(tag: str) -> bool:
    return not tag.strip() or "|" in tag or _has_separator(tag) or len(tag) > MAX_TAG_LENGTH


def _bad_group(group: str) -> bool:
    return not group.strip() or len(group) > MAX_MESSAGE_GROUP_LENGTH or _has_separator(group)


# A whitespace character as `str.isspace` says (the regular expression's \s for str patterns is the
# same test, one C scan instead of a Python generator per character).
_WHITESPACE = re.compile(r"\s")


def _bad_message_id(mid: str) -> bool:
    return len(mid) > MAX_MESSAGE_ID_LENGTH or _WHITESPACE.search(mid) is not None or _has_separator(mid)


# A system property of one string: what makes it illegal, and how it is refused.
_STRING_FIELDS = {
    "tag": (
        _bad_tag,
        Reason.ILLEGAL_TAG,
        f"must be non-blank, at most {MAX_TAG_LENGTH} characters, without '|', \\x01, \\x02",
    ),
    "message_group": (
        _bad_group,
        Reason.ILLEGAL_MESSAGE_GROUP,
        f"must be non-blank and at most {MAX_MESSAGE_GROUP_LENGTH} characters",
    ),
    "message_id": (
        _bad_message_id,
        Reason.ILLEGAL_MESSAGE_ID,
        f"must be at most {MAX_MESSAGE_ID_LENGTH} characters, without whitespace",
    ),
}
_FIELD_NAMES = {"tag": "tag", "message_group": "message group", "message_id": "message id"}


def _system_property(field: str, value: str, key: str, properties: dict[str, str]) -> Refusal | None:
    """The `value` of system property `field` (one that is set; a message id that is not empty)
    as the store property `key`."""
    bad, reason, rule = _STRING_FIELDS[field]
    if bad(value):
        return Refusal(reason, f"{_FIELD_NAMES[field]} {value[:64]!r} {rule}")
    properties[key] = value
    return None


def _message_keys(sp: pb.SystemProperties, properties: dict[str, str]) -> Refusal | None:
    for key in sp.keys:
        if not key or _WHITESPACE.search(key) is not None or _has_separator(key):
            return Refusal(Reason.ILLEGAL_KEY, f"message key {key[:64]!r} must be non-empty, without whitespace")
    properties[PROPERTY_KEYS] = " ".join(sp.keys)
    return None


def _delivery_time(
    sp: pb.SystemProperties, max_delay_ms: int, now_ms: int, properties: dict[str, str]
) -> Refusal | None:
    deliver_ms = _timestamp_ms(sp.delivery_timestamp)
    delay_ms = deliver_ms - now_ms
    if delay_ms > max_delay_ms:
        return Refusal(
            Reason.ILLEGAL_DELIVERY_TIME,
            f"delivery time is {delay_ms} ms away; at most {max_delay_ms} ms ahead is accepted",
        )
    if delay_ms > 0:
        properties[PROPERTY_TIMER_DELIVER_MS] = str(deliver_ms)
    return None


def encoding_problem(msg: pb.Message) -> Refusal | None:
    """What the broker cannot take in how a v2 message's body is encoded (its size and emptiness
    are the core's checks, `core.send`)."""
    sp = msg.system_properties
    if sp.body_encoding not in _BODY_ENCODINGS:
        return Refusal(Reason.BAD_REQUEST, f"unknown body encoding {sp.body_encoding}")
    digest = sp.body_digest  # unset: the default digest, whose checksum is empty
    if digest.checksum and not digest_matches(digest, msg.body):
        return Refusal(Reason.MESSAGE_CORRUPTED, "the body does not match its digest")
    return None


_BODY_ENCODINGS = frozenset((pb.ENCODING_UNSPECIFIED, pb.IDENTITY, pb.GZIP))


def send_item(msg: pb.Message, born_host: Host, now_ms: int) -> SendItem:
    """A v2 message as the broker core's send item: the store message, the queue it names, its
    delivery time or transaction, and what is wrong with it on this API's side (checked by the core
    after the topic, as RocketMQ checks the topic first)."""
    sp = msg.system_properties
    refused = encoding_problem(msg)
    properties: dict[str, str] = {}
    if refused is None:
        found = message_properties(msg, MAX_DELIVERY_DELAY_MS, now_ms)
        if isinstance(found, Refusal):
            refused = found
        else:
            properties = found
    born_ms = _timestamp_ms(sp.born_timestamp) if sp.HasField("born_timestamp") else 0
    message = Message(
        topic=msg.topic.name,
        queue_id=0,
        body=msg.body,
        properties=properties,
        sys_flag=producer_sys_flag(sp.body_encoding == pb.GZIP),
        born_host=born_host,
        born_timestamp_ms=born_ms if born_ms > 0 else None,
    )
    deliver_at = properties.get(PROPERTY_TIMER_DELIVER_MS)
    immunity_s = None
    if sp.message_type == pb.TRANSACTION:
        recovery = sp.orphaned_transaction_recovery_duration
        immunity_s = recovery.seconds if sp.HasField("orphaned_transaction_recovery_duration") else 0
    return SendItem(
        message,
        queue_id=sp.send_queue_id if sp.HasField("send_queue_id") else None,
        client_id=sp.message_id,
        deliver_at_ms=int(deliver_at) if deliver_at is not None else None,
        transaction_immunity_s=immunity_s,
        refused=refused,
    )


def send_entry(outcome: SendOutcome) -> pb.SendResultEntry:
    """One message's send outcome as this API's result entry."""
    entry = pb.SendResultEntry()
    _fill_entry(entry, outcome)
    return entry


def _fill_entry(entry: pb.SendResultEntry, outcome: SendOutcome) -> pb.Status:
    """`send_entry` into an empty `entry` (one a response's `entries.add()` made: the entry is
    written in place, not copied into the response); returns the entry's status."""
    entry_status = codes.outcome_status(outcome)
    entry.status.CopyFrom(entry_status)
    entry.message_id = outcome.client_id or outcome.msg_id
    if outcome.stored:
        if outcome.transactional:
            entry.transaction_id = outcome.msg_id
        entry.offset = outcome.queue_offset
        entry.queue_id = outcome.queue_id
        entry.commit_log_offset = outcome.commit_log_offset()
    return entry_status


def send_response(outcomes: Sequence[SendOutcome]) -> pb.SendMessageResponse:
    """The answer to a SendMessage: an entry per message, and the status summing them up. The
    stored messages of one put (`PutOutcomes`) are answered from the put's result: one status for
    all of them, and no `SendOutcome` made per message. The entries are made inside the response
    (`entries.add`): a response built from a list of entries copies each of them."""
    if isinstance(outcomes, PutOutcomes):
        response = _put_response(outcomes)
        if response is not None:
            return response
    response = pb.SendMessageResponse()
    add = response.entries.add
    statuses = [_fill_entry(add(), outcome) for outcome in outcomes]
    response.status.CopyFrom(codes.summarize(statuses))
    return response


def _put_response(outcomes: PutOutcomes) -> pb.SendMessageResponse | None:
    """`send_response` of several messages one put stored: the entries `send_entry` makes of each
    outcome, from the result directly. None when the result does not name every message's id
    (then each outcome answers for itself)."""
    result, first = outcomes.result, outcomes.first
    ids = result.msg_ids
    if len(ids) < first + len(outcomes):
        return None
    entry_status = codes.put_status(result)
    queue_offset, wrote_offset = result.queue_offset, result.wrote_offset
    response = pb.SendMessageResponse(status=codes.summarize((entry_status,)))
    add = response.entries.add
    for i, planned in enumerate(outcomes.planned, first):
        msg_id = ids[i]
        add(
            status=entry_status,
            message_id=planned.client_id or msg_id,
            transaction_id=msg_id if planned.transactional else "",
            offset=queue_offset + i,
            queue_id=planned.message.queue_id,
            commit_log_offset=wrote_offset if i == 0 else _stored_offset(msg_id),
        )
    return response


def _stored_offset(msg_id: str) -> int:
    """The CommitLog offset a msgId the store made names (`SendOutcome.commit_log_offset`): its
    last 16 hex digits, the host's part not decoded."""
    if len(msg_id) in (32, 56):
        try:
            return int(msg_id[-16:], 16)
        except ValueError:
            pass
    return -1


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
    deliver_ms = deliver_ms_of(properties)
    if deliver_ms is not None:
        sp.delivery_timestamp.CopyFrom(_timestamp(deliver_ms))
    user = {k: v for k, v in properties.items() if k not in RESERVED_PROPERTY_KEYS}
    return pb.Message(
        topic=pb.Resource(resource_namespace=namespace, name=ext.topic),
        user_properties=user,
        system_properties=sp,
        body=ext.body,
    )


# -- consumption ------------------------------------------------------------------------------


_FILTER_TYPES = {pb.FILTER_TYPE_UNSPECIFIED: TAG, pb.TAG: TAG, pb.SQL: SQL92}


def filter_type(expression: pb.FilterExpression) -> str:
    """The core's name of a subscription's filter type (`core.pull.tag_filter`)."""
    return _FILTER_TYPES.get(expression.type, str(expression.type))


def tag_filter_of(expression: pb.FilterExpression) -> TagFilter | None | pb.Status:
    """The store's filter for a subscription expression, or the status refusing it."""
    found = tag_filter(filter_type(expression), expression.expression)
    return codes.refusal_status(found) if isinstance(found, Refusal) else found


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
