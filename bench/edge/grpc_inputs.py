"""Valid requests for every gRPC method the fuzzer calls, built from what the setup stored (topics,
message ids, receipt handles, transaction ids), and `defang`: what keeps an authenticated admin
call from changing the groups under the fuzzer's feet.

An admin holding the secret may elect another master, take over, make the broker read-only, set
retention to nothing or delete the topics the end-of-run check uses; those are an operator's
choices, not hostile input, and they would make the rest of a run measure another setup. So an
authenticated ElectMaster never names a broker of the group, TakeOver never asks for a master
role, SetBrokerConfig keeps only `autoCreateTopicPerMinute` (other keys it sends are ones a running
broker refuses), CreateTopic/DeleteTopic never touch the fuzzer's or the system's topics, and
ResendDeadLetter is always a dry run (a resend adds a message to a topic the end check counts).
Everything else goes as built or mutated.

Plain functions over a `FuzzContext`; every choice is drawn from the `random.Random` passed in.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from google.protobuf import duration_pb2, timestamp_pb2
from google.protobuf.message import DecodeError, Message

from store.message_store import LIVE_CONFIG_KEYS
from store.metadata.topic_config import SYSTEM_TOPICS
from wire.rpc import admin_pb2 as apb
from wire.rpc import ha_pb2 as hpb
from wire.rpc import messaging_pb2 as pb

from .brokers import GROUP, HEALTH_TOPIC, QUEUES, TOPIC

SETTABLE = "autoCreateTopicPerMinute"
PROTECTED_TOPICS = frozenset({TOPIC, HEALTH_TOPIC, *SYSTEM_TOPICS})


@dataclass
class FuzzContext:
    """What a valid request may name: filled by the fuzzer's setup."""

    topics: tuple[str, ...] = (TOPIC, HEALTH_TOPIC)
    groups: tuple[str, ...] = (GROUP, "FuzzGroup2")
    max_queue_offset: int = 0  # the highest queue offset the setup stored in any queue
    msg_ids: list[str] = field(default_factory=list)  # client message ids (UNIQ_KEY)
    offset_msg_ids: list[str] = field(default_factory=list)  # the broker's (host, CommitLog offset) ids
    commit_log_offsets: list[int] = field(default_factory=list)
    receipts: list[tuple[str, str, str, str]] = field(default_factory=list)  # (group, topic, message id, handle)
    transactions: list[tuple[str, str, str]] = field(default_factory=list)  # (topic, message id, transaction id)
    host: str = "127.0.0.1"
    port: int = 0
    broker_name: str = "broker-a"
    # Every time a request carries is counted from this one (the setup's clock): a seed and a
    # context give the same bytes.
    now_ms: int = field(default_factory=lambda: int(time.time() * 1000))

    def known(self) -> tuple[str, ...]:
        return (*self.topics, *self.groups, *self.msg_ids[:4], self.broker_name)


def _duration(ms: int) -> duration_pb2.Duration:
    d = duration_pb2.Duration()
    d.FromMilliseconds(ms)
    return d


def _timestamp(ms: int) -> timestamp_pb2.Timestamp:
    t = timestamp_pb2.Timestamp()
    t.FromMilliseconds(ms)
    return t


def _topic(rng: random.Random, ctx: FuzzContext) -> pb.Resource:
    return pb.Resource(name=rng.choice(ctx.topics))


def _group(rng: random.Random, ctx: FuzzContext) -> pb.Resource:
    return pb.Resource(name=rng.choice(ctx.groups))


def _queue(rng: random.Random, ctx: FuzzContext) -> pb.MessageQueue:
    return pb.MessageQueue(topic=_topic(rng, ctx), id=rng.randrange(QUEUES))


def _endpoints(ctx: FuzzContext) -> pb.Endpoints:
    return pb.Endpoints(scheme=pb.IPv4, addresses=[pb.Address(host=ctx.host, port=ctx.port)])


def _message(rng: random.Random, ctx: FuzzContext) -> pb.Message:
    kind = rng.choice((pb.NORMAL, pb.NORMAL, pb.NORMAL, pb.FIFO, pb.DELAY, pb.TRANSACTION))
    sp = pb.SystemProperties(
        message_id=uuid.UUID(int=rng.getrandbits(128)).hex.upper(),
        message_type=kind,
        born_timestamp=_timestamp(ctx.now_ms),
        born_host=ctx.host,
        body_encoding=pb.IDENTITY,
    )
    if rng.random() < 0.5:
        sp.tag = rng.choice(("a", "b", "created"))
    if rng.random() < 0.3:
        sp.keys.extend(["k" + str(rng.randrange(100))])
    if kind == pb.FIFO:
        sp.message_group = "order-" + str(rng.randrange(10))
    if kind == pb.DELAY:
        sp.delivery_timestamp.CopyFrom(_timestamp(ctx.now_ms + rng.randint(100, 5000)))
    body = rng.randbytes(rng.choice((0, 1, 16, 256, 1024, 4096)))
    user = {"k": "v"} if rng.random() < 0.3 else {}
    return pb.Message(topic=_topic(rng, ctx), body=body or b"x", system_properties=sp, user_properties=user)


def _settings(rng: random.Random, ctx: FuzzContext) -> pb.TelemetryCommand:
    if rng.random() < 0.5:
        settings = pb.Settings(
            client_type=pb.PRODUCER,
            access_point=_endpoints(ctx),
            request_timeout=_duration(3000),
            publishing=pb.Publishing(topics=[_topic(rng, ctx)]),
        )
    else:
        settings = pb.Settings(
            client_type=rng.choice((pb.PUSH_CONSUMER, pb.SIMPLE_CONSUMER)),
            access_point=_endpoints(ctx),
            subscription=pb.Subscription(
                group=_group(rng, ctx),
                subscriptions=[
                    pb.SubscriptionEntry(
                        topic=_topic(rng, ctx), expression=pb.FilterExpression(type=pb.TAG, expression="*")
                    )
                ],
            ),
        )
    return pb.TelemetryCommand(settings=settings)


def _receipt(rng: random.Random, ctx: FuzzContext) -> tuple[str, str, str, str]:
    if ctx.receipts:
        return rng.choice(ctx.receipts)
    return (GROUP, TOPIC, "00", "0.0.0.0." + "0" * 32)


def _ack(rng: random.Random, ctx: FuzzContext) -> pb.AckMessageRequest:
    group, topic, msg_id, handle = _receipt(rng, ctx)
    return pb.AckMessageRequest(
        group=pb.Resource(name=group),
        topic=pb.Resource(name=topic),
        entries=[pb.AckMessageEntry(message_id=msg_id, receipt_handle=handle)],
    )


def _named_receipt(rng: random.Random, ctx: FuzzContext) -> dict:
    """The group, topic, message id and receipt handle fields of a ChangeInvisibleDuration or a
    ForwardMessageToDeadLetterQueue request."""
    group, topic, msg_id, handle = _receipt(rng, ctx)
    return {
        "group": pb.Resource(name=group),
        "topic": pb.Resource(name=topic),
        "receipt_handle": handle,
        "message_id": msg_id,
    }


def _change(rng: random.Random, ctx: FuzzContext) -> pb.ChangeInvisibleDurationRequest:
    return pb.ChangeInvisibleDurationRequest(
        **_named_receipt(rng, ctx), invisible_duration=_duration(rng.choice((0, 1000, 30_000)))
    )


def _forward(rng: random.Random, ctx: FuzzContext) -> pb.ForwardMessageToDeadLetterQueueRequest:
    return pb.ForwardMessageToDeadLetterQueueRequest(
        **_named_receipt(rng, ctx), delivery_attempt=1, max_delivery_attempts=16
    )


def _end_transaction(rng: random.Random, ctx: FuzzContext) -> pb.EndTransactionRequest:
    topic, msg_id, tx = rng.choice(ctx.transactions) if ctx.transactions else (TOPIC, "00", "00")
    return pb.EndTransactionRequest(
        topic=pb.Resource(name=topic),
        message_id=msg_id,
        transaction_id=tx,
        resolution=rng.choice((pb.COMMIT, pb.ROLLBACK)),
        source=rng.choice((pb.SOURCE_CLIENT, pb.SOURCE_SERVER_CHECK)),
    )


def _offset(rng: random.Random, ctx: FuzzContext) -> int:
    return rng.randint(0, ctx.max_queue_offset + 1)


_MESSAGING: dict[str, Callable[[random.Random, FuzzContext], Message | list[Message]]] = {
    "QueryRoute": lambda r, c: pb.QueryRouteRequest(topic=_topic(r, c), endpoints=_endpoints(c)),
    "Heartbeat": lambda r, c: pb.HeartbeatRequest(
        group=_group(r, c), client_type=r.choice((pb.PRODUCER, pb.PUSH_CONSUMER, pb.SIMPLE_CONSUMER))
    ),
    "SendMessage": lambda r, c: pb.SendMessageRequest(messages=[_message(r, c) for _ in range(r.choice((1, 1, 2, 4)))]),
    "PullMessage": lambda r, c: pb.PullMessageRequest(
        group=_group(r, c),
        message_queue=_queue(r, c),
        offset=_offset(r, c),
        batch_size=r.choice((1, 8, 32)),
        filter_expression=pb.FilterExpression(type=pb.TAG, expression=r.choice(("*", "a", "a||b"))),
        long_polling_timeout=_duration(r.choice((0, 0, 200))),
    ),
    "UpdateOffset": lambda r, c: pb.UpdateOffsetRequest(
        group=_group(r, c), message_queue=_queue(r, c), offset=_offset(r, c)
    ),
    "GetOffset": lambda r, c: pb.GetOffsetRequest(group=_group(r, c), message_queue=_queue(r, c)),
    "QueryOffset": lambda r, c: pb.QueryOffsetRequest(
        message_queue=_queue(r, c),
        query_offset_policy=r.choice((pb.BEGINNING, pb.END, pb.TIMESTAMP)),
        timestamp=_timestamp(c.now_ms - r.randint(0, 60_000)),
    ),
    "EndTransaction": _end_transaction,
    "Telemetry": lambda r, c: [_settings(r, c) for _ in range(r.choice((1, 1, 2, 3)))],
    "NotifyClientTermination": lambda r, c: pb.NotifyClientTerminationRequest(group=_group(r, c)),
    "QueryAssignment": lambda r, c: pb.QueryAssignmentRequest(
        topic=_topic(r, c), group=_group(r, c), endpoints=_endpoints(c)
    ),
    "ReceiveMessage": lambda r, c: pb.ReceiveMessageRequest(
        group=_group(r, c),
        message_queue=pb.MessageQueue(topic=_topic(r, c), id=-1),
        filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"),
        batch_size=r.choice((1, 4, 16)),
        invisible_duration=_duration(r.choice((1000, 5000, 30_000))),
        long_polling_timeout=_duration(r.choice((0, 200, 1000))),
    ),
    "AckMessage": _ack,
    "ChangeInvisibleDuration": _change,
    "ForwardMessageToDeadLetterQueue": _forward,
}


def _query_message(rng: random.Random, ctx: FuzzContext) -> apb.QueryMessageRequest:
    roll = rng.randrange(3)
    if roll == 0 and ctx.offset_msg_ids:
        return apb.QueryMessageRequest(msg_id=rng.choice(ctx.offset_msg_ids))
    if roll == 1 and ctx.commit_log_offsets:
        return apb.QueryMessageRequest(commit_log_offset=rng.choice(ctx.commit_log_offsets))
    key = rng.choice(ctx.msg_ids) if ctx.msg_ids else "k1"
    return apb.QueryMessageRequest(key=key, topic=TOPIC, max_messages=4)


def _reset(rng: random.Random, ctx: FuzzContext) -> apb.ResetOffsetRequest:
    request = apb.ResetOffsetRequest(
        group=rng.choice(ctx.groups), topic=TOPIC, dry_run=rng.random() < 0.5, force=rng.random() < 0.5
    )
    which = rng.randrange(4)
    if which == 0:
        request.timestamp_ms = ctx.now_ms - rng.randint(0, 60_000)
    elif which == 1:
        request.queue_offset = _offset(rng, ctx)
    elif which == 2:
        request.earliest = True
    else:
        request.latest = True
    return request


_KINDS = (apb.CLIENT_KIND_UNSPECIFIED, apb.PRODUCER, apb.CONSUMER)

_ADMIN: dict[str, Callable[[random.Random, FuzzContext], Message]] = {
    "GetStatus": lambda r, c: apb.GetStatusRequest(),
    "Identify": lambda r, c: apb.IdentifyRequest(),
    "CreateTopic": lambda r, c: apb.CreateTopicRequest(
        topic=apb.TopicSpec(
            name=f"FuzzScratch{r.randrange(8)}",
            read_queue_nums=r.randint(1, 8),
            write_queue_nums=r.randint(1, 8),
            perm=6,
        )
    ),
    "ListTopics": lambda r, c: apb.ListTopicsRequest(),
    "GetClusterView": lambda r, c: apb.ClusterViewRequest(),
    "ElectMaster": lambda r, c: apb.ElectMasterRequest(broker_id=r.choice((7, 99)), timeout_ms=r.choice((100, 1000))),
    "TakeOver": lambda r, c: apb.TakeOverRequest(expected_offset=0, role=r.choice(("SLAVE", "NOT_A_ROLE"))),
    "DescribeTopic": lambda r, c: apb.DescribeTopicRequest(topic=r.choice(c.topics)),
    "DeleteTopic": lambda r, c: apb.DeleteTopicRequest(topic=f"FuzzScratch{r.randrange(8)}"),
    "ConsumerProgress": lambda r, c: apb.ConsumerProgressRequest(group=r.choice(c.groups), topic=r.choice(("", TOPIC))),
    "ResetOffset": _reset,
    "QueryMessage": _query_message,
    "GetBrokerConfig": lambda r, c: apb.GetBrokerConfigRequest(),
    "SetBrokerConfig": lambda r, c: apb.SetBrokerConfigRequest(values={SETTABLE: str(r.choice((60, 120)))}),
    "DescribeCluster": lambda r, c: apb.DescribeClusterRequest(),
    "ListMessages": lambda r, c: apb.ListMessagesRequest(
        topic=r.choice(c.topics),
        begin_timestamp_ms=r.choice((0, c.now_ms - 60_000)),
        end_timestamp_ms=r.choice((0, c.now_ms + 60_000)),
        max_messages=r.choice((1, 32)),
        cursor=[apb.QueueCursor(queue_id=0, queue_offset=r.randint(0, c.max_queue_offset + 1))]
        if r.random() < 0.5
        else [],
    ),
    "ResendDeadLetter": lambda r, c: apb.ResendDeadLetterRequest(
        commit_log_offset=r.choice(c.commit_log_offsets or [0]), dry_run=True, new_client_msg_id="FUZZRESEND"
    ),
    "ListConsumerGroups": lambda r, c: apb.ListConsumerGroupsRequest(),
    "ListClients": lambda r, c: apb.ListClientsRequest(group=r.choice(("", *c.groups)), kind=r.choice(_KINDS)),
}

_REPLICATION: dict[str, Callable[[random.Random, FuzzContext], Message | list[Message]]] = {
    "Hello": lambda r, c: hpb.HelloRequest(client_nonce=r.randbytes(32), broker_name=c.broker_name, broker_id=1),
    "Replicate": lambda r, c: [hpb.SlaveReport(durable_offset=0, broker_name=c.broker_name, broker_id=1)],
    "GetEpochs": lambda r, c: hpb.EpochsRequest(broker_name=c.broker_name),
    "GetMetadata": lambda r, c: hpb.MetadataRequest(broker_name=c.broker_name, durable_offset=0),
    "HandBackPopEvents": lambda r, c: hpb.PopEventsRequest(broker_name=c.broker_name, broker_id=1, batches=[b"[]"]),
}

BUILDERS = {"MessagingService": _MESSAGING, "Admin": _ADMIN, "Replication": _REPLICATION}


def valid_request(service: str, method: str, rng: random.Random, ctx: FuzzContext) -> list[Message]:
    """The request (one message, or a stream's messages) of a valid call."""
    built = BUILDERS[service][method](rng, ctx)
    return built if isinstance(built, list) else [built]


def defang(method: str, request: Message) -> Message:
    """`request` made harmless for an authenticated admin call (see the module docstring)."""
    if isinstance(request, apb.ElectMasterRequest) and 0 <= request.broker_id <= 8:
        request.broker_id = 99
    elif isinstance(request, apb.TakeOverRequest) and request.role.strip().upper() in ("SYNC_MASTER", "ASYNC_MASTER"):
        request.role = "SLAVE"
    elif isinstance(request, apb.SetBrokerConfigRequest):
        for key in [k for k in request.values if k.strip() != SETTABLE and k.strip() in LIVE_CONFIG_KEYS]:
            del request.values[key]
        if not request.values:
            request.values[SETTABLE] = "60"
    elif isinstance(request, apb.DeleteTopicRequest) and request.topic in PROTECTED_TOPICS:
        request.topic = "FuzzScratch0"
    elif isinstance(request, apb.CreateTopicRequest) and request.topic.name in PROTECTED_TOPICS:
        request.topic.name = "FuzzScratch0"
    elif isinstance(request, apb.ResendDeadLetterRequest):
        request.dry_run = True
    return request


def defang_bytes(method_request: type[Message], method: str, data: bytes) -> bytes:
    """Raw request bytes of an authenticated admin call: when they decode, what `defang` leaves of
    them; otherwise as they are (the broker refuses them)."""
    try:
        request = method_request.FromString(data)
    except DecodeError:
        return data
    before = request.SerializeToString()
    after = defang(method, request).SerializeToString()
    return data if after == before else after
