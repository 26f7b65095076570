"""What the operator's admin calls read and decide, over one store: a topic's queues, a consumer
group's progress and lag, the consumer groups known here and their clients, an offset reset's plan,
messages by key, id or offset, and the broker's effective config. Plain functions that take the
store (and configs) and return admin protos or plain values; `admin.AdminServicer` runs them off
the event loop and turns bad input into gRPC codes.

Definitions (mqadmin's consumerProgress and Kafka's --describe):
- a queue's broker offset is its max queue offset (one past the last message), its lag the broker
  offset minus the group's committed offset (a queue the group never committed counts from the
  queue's min offset);
- a queue's last consume time is the store time of the last message the group consumed
  (the one before its committed offset); 0 when it consumed none.

Thread-safety: everything here reads the store's thread-safe views; `apply_reset` writes the
consumer offset table, which takes its own lock.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence

from store import BrokerRole, MessageStore, TopicConfig
from store.log.codec import CorruptMessage, DamagedMessage
from store.message import PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, MessageExt
from store.message_store import LIVE_CONFIG_KEYS
from store.metadata.topic_config import SYSTEM_TOPICS
from store.properties import to_properties
from wire.rpc import admin_pb2

from .client_registry import ClientSeen
from .config import BrokerConfigs

HIDDEN = "<hidden>"
_SECRET_KEYS = ("secret", "password")


def store_time_at(store: MessageStore, topic: str, queue_id: int, queue_offset: int) -> int:
    """When the message at this queue offset was stored (Unix ms), 0 when there is none."""
    queue = store.find_consume_queue(topic, queue_id)
    if queue is None or queue_offset < queue.min_offset or queue_offset >= queue.max_offset:
        return 0
    unit = queue.get_unit(queue_offset)
    if unit is None or unit.is_filler:
        return 0
    try:
        return store.read_message(unit.commit_log_offset).store_timestamp_ms
    except CorruptMessage:
        return 0  # deleted by retention since


def storage_use(store: MessageStore) -> tuple[int, int, int]:
    """(bytes of the store's file system, free bytes there, bytes of CommitLog segment files);
    the first two are 0 when the file system cannot be asked."""
    files = len(store.queue.files) * store.queue.file_size
    try:
        disk = shutil.disk_usage(store.config.root)
    except OSError:
        return 0, 0, files
    return disk.total, disk.free, files


def queue_statuses(store: MessageStore, config: TopicConfig) -> list[admin_pb2.QueueStatus]:
    topic = config.topic_name
    out = []
    for queue_id in range(max(config.read_queue_nums, config.write_queue_nums)):
        high = store.dispatched_queue_offset(topic, queue_id)
        out.append(
            admin_pb2.QueueStatus(
                queue_id=queue_id,
                min_offset=store.min_queue_offset(topic, queue_id),
                max_offset=high,
                last_store_timestamp_ms=store_time_at(store, topic, queue_id, high - 1),
            )
        )
    return out


def queue_lags(store: MessageStore, group: str, topic: str) -> list[tuple[int, int, int, int]]:
    """(queue id, broker offset, consumer offset or -1, lag) of each queue of the topic (its read
    queues and any the group committed), by queue id: the one definition of lag, for the
    consumer progress call and for the metrics."""
    committed = store.consumer_offsets.query_offsets(group, topic)
    config = store.topics.get(topic)
    queue_ids = set(committed) | set(range(config.read_queue_nums if config is not None else 0))
    lags = []
    for queue_id in sorted(queue_ids):
        broker_offset = store.dispatched_queue_offset(topic, queue_id)
        consumer_offset = committed.get(queue_id, -1)
        start = consumer_offset if consumer_offset >= 0 else store.min_queue_offset(topic, queue_id)
        lags.append((queue_id, broker_offset, consumer_offset, max(0, broker_offset - start)))
    return lags


def consumer_progress(store: MessageStore, group: str, topics: Iterable[str]) -> list[admin_pb2.QueueProgress]:
    """Per queue of each topic (see `queue_lags`), sorted, with the last consume time."""
    return [
        admin_pb2.QueueProgress(
            topic=topic,
            queue_id=queue_id,
            broker_offset=broker_offset,
            consumer_offset=consumer_offset,
            lag=lag,
            last_consume_timestamp_ms=store_time_at(store, topic, queue_id, consumer_offset - 1)
            if consumer_offset > 0
            else 0,
        )
        for topic in sorted(topics)
        for queue_id, broker_offset, consumer_offset, lag in queue_lags(store, group, topic)
    ]


def reset_plan(store: MessageStore, group: str, config: TopicConfig, request: admin_pb2.ResetOffsetRequest):
    """The offset each queue of the topic would get, as `OffsetChange`s (old -1: none yet)."""
    topic = config.topic_name
    target = request.WhichOneof("to")
    changes = []
    queue_ids = [request.queue_id] if request.HasField("queue_id") else range(config.read_queue_nums)
    for queue_id in queue_ids:
        low = store.min_queue_offset(topic, queue_id)
        high = store.dispatched_queue_offset(topic, queue_id)
        if target == "earliest":
            new = low
        elif target == "latest":
            new = high
        elif target == "queue_offset":
            new = min(max(request.queue_offset, low), high)
        else:
            new = store.get_offset_in_queue_by_time(topic, queue_id, request.timestamp_ms)
            new = min(max(new, low), high)
        old = store.consumer_offsets.query_offset(group, topic, queue_id)
        changes.append(admin_pb2.OffsetChange(queue_id=queue_id, old_offset=old, new_offset=new))
    return changes


def apply_reset(store: MessageStore, group: str, topic: str, changes: Iterable[admin_pb2.OffsetChange]) -> None:
    for change in changes:
        store.consumer_offsets.commit_offset(group, topic, change.queue_id, change.new_offset, bounded=False)
    store.consumer_offsets.persist()


def _host(host) -> str:
    return f"{host[0]}:{host[1]}" if host else ""


def message_view(message: MessageExt, consumed_by: Iterable[admin_pb2.GroupConsumption] = ()) -> admin_pb2.MessageView:
    return admin_pb2.MessageView(
        topic=message.topic,
        queue_id=message.queue_id,
        queue_offset=message.queue_offset,
        commit_log_offset=message.physical_offset,
        offset_msg_id=message.msg_id,
        client_msg_id=message.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, ""),
        tags=message.tags or "",
        keys=message.keys or "",
        born_timestamp_ms=message.born_timestamp_ms,
        store_timestamp_ms=message.store_timestamp_ms,
        born_host=_host(message.born_host),
        store_host=_host(message.store_host),
        reconsume_times=message.reconsume_times,
        properties=dict(message.properties),
        body=message.body,
        consumed_by=consumed_by,
    )


def find_by_id(store: MessageStore, msg_id: str, topic: str, limit: int) -> list[MessageExt]:
    """The message a broker msgId (store host + CommitLog offset) names, else the messages whose
    client id (UNIQ_KEY) it is: in `topic`, or in every user topic when none is given.
    DamagedMessage when the msgId names a message stored damaged."""
    try:
        return [store.view_message_by_id(msg_id)]
    except DamagedMessage:
        raise
    except (ValueError, CorruptMessage):
        pass
    topics = [topic] if topic else [t.topic_name for t in store.topics.topics() if t.topic_name not in SYSTEM_TOPICS]
    found: dict[int, MessageExt] = {}
    # Client ids are hex, written upper-case by the official clients: a lower-case copy finds them.
    for name in topics:
        for key in dict.fromkeys((msg_id, msg_id.upper())):
            for m in store.query_message(name, key, max_num=limit).messages:
                if m.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, "").upper() == msg_id.upper():
                    found[m.physical_offset] = m
    return [found[offset] for offset in sorted(found)][:limit]


def config_entries(
    configs: BrokerConfigs, store: MessageStore, role: BrokerRole | None = None
) -> list[admin_pb2.BrokerConfigEntry]:
    """Every key of the broker's effective config (the store's as it runs now), secrets hidden;
    brokerRole is `role`, the one the broker serves now (an election or a switchover may have
    changed it), with the configured one beside it when they differ."""
    values: dict[str, str] = {}
    for config in (configs.broker, store.config, configs.ha):
        values.update(to_properties(config))
    configured: dict[str, str] = {}
    if role is not None:
        # The running store's own config may still say the role it opened with (controller
        # mode opens every store as a slave): the view knows the role now.
        values["brokerRole"] = role.name
        if role.name != configs.store.broker_role.name:
            configured["brokerRole"] = configs.store.broker_role.name
    entries = []
    for key in sorted(values, key=str.lower):
        value = values[key]
        if value and any(word in key.lower() for word in _SECRET_KEYS) and not key.lower().endswith("file"):
            value = HIDDEN
        entries.append(
            admin_pb2.BrokerConfigEntry(
                key=key, value=value, changeable=key in LIVE_CONFIG_KEYS, configured_value=configured.get(key, "")
            )
        )
    return entries


def client_connection(client: ClientSeen) -> admin_pb2.ClientConnection:
    return admin_pb2.ClientConnection(
        client_id=client.client_id,
        protocol=client.protocol.name,
        kind=client.kind.name,
        group=client.group,
        address=client.address,
        topics=sorted(client.topics),
        first_seen_ms=client.first_seen_ms,
        last_seen_ms=client.last_seen_ms,
        language=client.language,
        version=client.version,
    )


def consumer_groups(
    store: MessageStore,
    members: Mapping[str, Sequence[ClientSeen]],
    consumes_by_pop: Callable[[str, str], bool],
) -> list[admin_pb2.ConsumerGroupSummary]:
    """Every group with offsets here or a member online (`members`), by name, with its topics,
    members, how they connect, its lag over its committed offsets and whether it pops."""
    offsets = store.consumer_offsets
    summaries = []
    for group in sorted(offsets.groups() | set(members)):
        online = members.get(group, ())
        committed = offsets.topics_of(group)
        topics = sorted(committed | {t for c in online for t in c.topics})
        summaries.append(
            admin_pb2.ConsumerGroupSummary(
                group=group,
                topics=topics,
                online_clients=len(online),
                protocols=sorted({c.protocol.name for c in online}),
                lag=sum(lag for topic in committed for *_, lag in queue_lags(store, group, topic)),
                pop=any(consumes_by_pop(group, topic) for topic in topics),
                last_seen_ms=max((c.last_seen_ms for c in online), default=0),
            )
        )
    return summaries
