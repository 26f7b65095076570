from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ClientProtocol(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CLIENT_PROTOCOL_UNSPECIFIED: _ClassVar[ClientProtocol]
    GRPC: _ClassVar[ClientProtocol]
    GRPC_POP: _ClassVar[ClientProtocol]
    GRPC_PULL: _ClassVar[ClientProtocol]
    REMOTING: _ClassVar[ClientProtocol]

class ClientKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CLIENT_KIND_UNSPECIFIED: _ClassVar[ClientKind]
    PRODUCER: _ClassVar[ClientKind]
    CONSUMER: _ClassVar[ClientKind]
CLIENT_PROTOCOL_UNSPECIFIED: ClientProtocol
GRPC: ClientProtocol
GRPC_POP: ClientProtocol
GRPC_PULL: ClientProtocol
REMOTING: ClientProtocol
CLIENT_KIND_UNSPECIFIED: ClientKind
PRODUCER: ClientKind
CONSUMER: ClientKind

class SlaveStatus(_message.Message):
    __slots__ = ("ha_peer", "broker_id", "client_endpoint", "ack_offset", "lag_bytes", "lag_seconds", "fit", "connected_at_ms", "silent_ms")
    HA_PEER_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    ACK_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAG_BYTES_FIELD_NUMBER: _ClassVar[int]
    LAG_SECONDS_FIELD_NUMBER: _ClassVar[int]
    FIT_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    SILENT_MS_FIELD_NUMBER: _ClassVar[int]
    ha_peer: str
    broker_id: int
    client_endpoint: str
    ack_offset: int
    lag_bytes: int
    lag_seconds: float
    fit: bool
    connected_at_ms: int
    silent_ms: int
    def __init__(self, ha_peer: _Optional[str] = ..., broker_id: _Optional[int] = ..., client_endpoint: _Optional[str] = ..., ack_offset: _Optional[int] = ..., lag_bytes: _Optional[int] = ..., lag_seconds: _Optional[float] = ..., fit: _Optional[bool] = ..., connected_at_ms: _Optional[int] = ..., silent_ms: _Optional[int] = ...) -> None: ...

class BrokerStatus(_message.Message):
    __slots__ = ("cluster_name", "broker_name", "broker_id", "role", "epoch", "client_endpoint", "ha_endpoint", "flush_disk_type", "min_offset", "max_offset", "flushed_offset", "confirmed_offset", "dispatched_offset", "dispatch_lag_bytes", "slaves", "master_ha_address", "master_connected", "master_max_offset", "uptime_ms", "in_sync_replicas", "stats_json", "replication_error", "controller_mode", "master_broker_id", "in_sync_replica_ids", "lease_valid_ms", "controller_error", "unclean_lost_bytes", "master_client_endpoint", "group_max_offset", "metadata_synced_ms", "metadata_error", "master_last_contact_ms", "acting_master", "disk_total_bytes", "disk_free_bytes", "commit_log_file_bytes", "write_refusal")
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    HA_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    FLUSH_DISK_TYPE_FIELD_NUMBER: _ClassVar[int]
    MIN_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    FLUSHED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    CONFIRMED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    DISPATCHED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    DISPATCH_LAG_BYTES_FIELD_NUMBER: _ClassVar[int]
    SLAVES_FIELD_NUMBER: _ClassVar[int]
    MASTER_HA_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    MASTER_CONNECTED_FIELD_NUMBER: _ClassVar[int]
    MASTER_MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    UPTIME_MS_FIELD_NUMBER: _ClassVar[int]
    IN_SYNC_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    STATS_JSON_FIELD_NUMBER: _ClassVar[int]
    REPLICATION_ERROR_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_MODE_FIELD_NUMBER: _ClassVar[int]
    MASTER_BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    IN_SYNC_REPLICA_IDS_FIELD_NUMBER: _ClassVar[int]
    LEASE_VALID_MS_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_ERROR_FIELD_NUMBER: _ClassVar[int]
    UNCLEAN_LOST_BYTES_FIELD_NUMBER: _ClassVar[int]
    MASTER_CLIENT_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    GROUP_MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    METADATA_SYNCED_MS_FIELD_NUMBER: _ClassVar[int]
    METADATA_ERROR_FIELD_NUMBER: _ClassVar[int]
    MASTER_LAST_CONTACT_MS_FIELD_NUMBER: _ClassVar[int]
    ACTING_MASTER_FIELD_NUMBER: _ClassVar[int]
    DISK_TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    DISK_FREE_BYTES_FIELD_NUMBER: _ClassVar[int]
    COMMIT_LOG_FILE_BYTES_FIELD_NUMBER: _ClassVar[int]
    WRITE_REFUSAL_FIELD_NUMBER: _ClassVar[int]
    cluster_name: str
    broker_name: str
    broker_id: int
    role: str
    epoch: int
    client_endpoint: str
    ha_endpoint: str
    flush_disk_type: str
    min_offset: int
    max_offset: int
    flushed_offset: int
    confirmed_offset: int
    dispatched_offset: int
    dispatch_lag_bytes: int
    slaves: _containers.RepeatedCompositeFieldContainer[SlaveStatus]
    master_ha_address: str
    master_connected: bool
    master_max_offset: int
    uptime_ms: int
    in_sync_replicas: int
    stats_json: str
    replication_error: str
    controller_mode: bool
    master_broker_id: int
    in_sync_replica_ids: _containers.RepeatedScalarFieldContainer[int]
    lease_valid_ms: int
    controller_error: str
    unclean_lost_bytes: int
    master_client_endpoint: str
    group_max_offset: int
    metadata_synced_ms: int
    metadata_error: str
    master_last_contact_ms: int
    acting_master: bool
    disk_total_bytes: int
    disk_free_bytes: int
    commit_log_file_bytes: int
    write_refusal: str
    def __init__(self, cluster_name: _Optional[str] = ..., broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., role: _Optional[str] = ..., epoch: _Optional[int] = ..., client_endpoint: _Optional[str] = ..., ha_endpoint: _Optional[str] = ..., flush_disk_type: _Optional[str] = ..., min_offset: _Optional[int] = ..., max_offset: _Optional[int] = ..., flushed_offset: _Optional[int] = ..., confirmed_offset: _Optional[int] = ..., dispatched_offset: _Optional[int] = ..., dispatch_lag_bytes: _Optional[int] = ..., slaves: _Optional[_Iterable[_Union[SlaveStatus, _Mapping]]] = ..., master_ha_address: _Optional[str] = ..., master_connected: _Optional[bool] = ..., master_max_offset: _Optional[int] = ..., uptime_ms: _Optional[int] = ..., in_sync_replicas: _Optional[int] = ..., stats_json: _Optional[str] = ..., replication_error: _Optional[str] = ..., controller_mode: _Optional[bool] = ..., master_broker_id: _Optional[int] = ..., in_sync_replica_ids: _Optional[_Iterable[int]] = ..., lease_valid_ms: _Optional[int] = ..., controller_error: _Optional[str] = ..., unclean_lost_bytes: _Optional[int] = ..., master_client_endpoint: _Optional[str] = ..., group_max_offset: _Optional[int] = ..., metadata_synced_ms: _Optional[int] = ..., metadata_error: _Optional[str] = ..., master_last_contact_ms: _Optional[int] = ..., acting_master: _Optional[bool] = ..., disk_total_bytes: _Optional[int] = ..., disk_free_bytes: _Optional[int] = ..., commit_log_file_bytes: _Optional[int] = ..., write_refusal: _Optional[str] = ...) -> None: ...

class GetStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class TopicSpec(_message.Message):
    __slots__ = ("name", "read_queue_nums", "write_queue_nums", "perm", "order", "system")
    NAME_FIELD_NUMBER: _ClassVar[int]
    READ_QUEUE_NUMS_FIELD_NUMBER: _ClassVar[int]
    WRITE_QUEUE_NUMS_FIELD_NUMBER: _ClassVar[int]
    PERM_FIELD_NUMBER: _ClassVar[int]
    ORDER_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_FIELD_NUMBER: _ClassVar[int]
    name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    order: bool
    system: bool
    def __init__(self, name: _Optional[str] = ..., read_queue_nums: _Optional[int] = ..., write_queue_nums: _Optional[int] = ..., perm: _Optional[int] = ..., order: _Optional[bool] = ..., system: _Optional[bool] = ...) -> None: ...

class CreateTopicRequest(_message.Message):
    __slots__ = ("topic",)
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    topic: TopicSpec
    def __init__(self, topic: _Optional[_Union[TopicSpec, _Mapping]] = ...) -> None: ...

class CreateTopicResponse(_message.Message):
    __slots__ = ("topic",)
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    topic: TopicSpec
    def __init__(self, topic: _Optional[_Union[TopicSpec, _Mapping]] = ...) -> None: ...

class ListTopicsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListTopicsResponse(_message.Message):
    __slots__ = ("topics",)
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[TopicSpec]
    def __init__(self, topics: _Optional[_Iterable[_Union[TopicSpec, _Mapping]]] = ...) -> None: ...

class ClusterViewRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DescribeClusterRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RegisteredBroker(_message.Message):
    __slots__ = ("broker_name", "broker_id", "role", "epoch", "client_endpoint", "remoting_endpoint", "acting", "broker_permission", "topics", "superseded")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    REMOTING_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    ACTING_FIELD_NUMBER: _ClassVar[int]
    BROKER_PERMISSION_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDED_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    broker_id: int
    role: str
    epoch: int
    client_endpoint: str
    remoting_endpoint: str
    acting: bool
    broker_permission: int
    topics: int
    superseded: bool
    def __init__(self, broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., role: _Optional[str] = ..., epoch: _Optional[int] = ..., client_endpoint: _Optional[str] = ..., remoting_endpoint: _Optional[str] = ..., acting: _Optional[bool] = ..., broker_permission: _Optional[int] = ..., topics: _Optional[int] = ..., superseded: _Optional[bool] = ...) -> None: ...

class DescribeClusterResponse(_message.Message):
    __slots__ = ("cluster", "registry", "read_age_ms", "fresh", "brokers", "broker_name")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    REGISTRY_FIELD_NUMBER: _ClassVar[int]
    READ_AGE_MS_FIELD_NUMBER: _ClassVar[int]
    FRESH_FIELD_NUMBER: _ClassVar[int]
    BROKERS_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    registry: bool
    read_age_ms: int
    fresh: bool
    brokers: _containers.RepeatedCompositeFieldContainer[RegisteredBroker]
    broker_name: str
    def __init__(self, cluster: _Optional[str] = ..., registry: _Optional[bool] = ..., read_age_ms: _Optional[int] = ..., fresh: _Optional[bool] = ..., brokers: _Optional[_Iterable[_Union[RegisteredBroker, _Mapping]]] = ..., broker_name: _Optional[str] = ...) -> None: ...

class ClusterView(_message.Message):
    __slots__ = ("master", "self")
    MASTER_FIELD_NUMBER: _ClassVar[int]
    SELF_FIELD_NUMBER: _ClassVar[int]
    master: BrokerStatus
    self: BrokerStatus
    def __init__(self_, master: _Optional[_Union[BrokerStatus, _Mapping]] = ..., self: _Optional[_Union[BrokerStatus, _Mapping]] = ...) -> None: ...

class ElectMasterRequest(_message.Message):
    __slots__ = ("broker_id", "timeout_ms")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    timeout_ms: int
    def __init__(self, broker_id: _Optional[int] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class ElectMasterResponse(_message.Message):
    __slots__ = ("epoch", "master_broker_id", "master_client_endpoint", "handover_offset", "message")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    MASTER_BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    MASTER_CLIENT_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    HANDOVER_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    master_broker_id: int
    master_client_endpoint: str
    handover_offset: int
    message: str
    def __init__(self, epoch: _Optional[int] = ..., master_broker_id: _Optional[int] = ..., master_client_endpoint: _Optional[str] = ..., handover_offset: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class TakeOverRequest(_message.Message):
    __slots__ = ("expected_offset", "role")
    EXPECTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    expected_offset: int
    role: str
    def __init__(self, expected_offset: _Optional[int] = ..., role: _Optional[str] = ...) -> None: ...

class TakeOverResponse(_message.Message):
    __slots__ = ("ha_endpoint", "client_endpoint", "max_offset")
    HA_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    ha_endpoint: str
    client_endpoint: str
    max_offset: int
    def __init__(self, ha_endpoint: _Optional[str] = ..., client_endpoint: _Optional[str] = ..., max_offset: _Optional[int] = ...) -> None: ...

class QueueStatus(_message.Message):
    __slots__ = ("queue_id", "min_offset", "max_offset", "last_store_timestamp_ms")
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    MIN_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_STORE_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    queue_id: int
    min_offset: int
    max_offset: int
    last_store_timestamp_ms: int
    def __init__(self, queue_id: _Optional[int] = ..., min_offset: _Optional[int] = ..., max_offset: _Optional[int] = ..., last_store_timestamp_ms: _Optional[int] = ...) -> None: ...

class DescribeTopicRequest(_message.Message):
    __slots__ = ("topic",)
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    topic: str
    def __init__(self, topic: _Optional[str] = ...) -> None: ...

class TopicDescription(_message.Message):
    __slots__ = ("topic", "cluster_name", "broker_name", "role", "client_endpoint", "master_client_endpoint", "queues")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    MASTER_CLIENT_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    topic: TopicSpec
    cluster_name: str
    broker_name: str
    role: str
    client_endpoint: str
    master_client_endpoint: str
    queues: _containers.RepeatedCompositeFieldContainer[QueueStatus]
    def __init__(self, topic: _Optional[_Union[TopicSpec, _Mapping]] = ..., cluster_name: _Optional[str] = ..., broker_name: _Optional[str] = ..., role: _Optional[str] = ..., client_endpoint: _Optional[str] = ..., master_client_endpoint: _Optional[str] = ..., queues: _Optional[_Iterable[_Union[QueueStatus, _Mapping]]] = ...) -> None: ...

class DeleteTopicRequest(_message.Message):
    __slots__ = ("topic",)
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    topic: str
    def __init__(self, topic: _Optional[str] = ...) -> None: ...

class DeleteTopicResponse(_message.Message):
    __slots__ = ("groups",)
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, groups: _Optional[_Iterable[str]] = ...) -> None: ...

class QueueProgress(_message.Message):
    __slots__ = ("topic", "queue_id", "broker_offset", "consumer_offset", "lag", "last_consume_timestamp_ms")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_OFFSET_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAG_FIELD_NUMBER: _ClassVar[int]
    LAST_CONSUME_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    lag: int
    last_consume_timestamp_ms: int
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., broker_offset: _Optional[int] = ..., consumer_offset: _Optional[int] = ..., lag: _Optional[int] = ..., last_consume_timestamp_ms: _Optional[int] = ...) -> None: ...

class ConsumerProgressRequest(_message.Message):
    __slots__ = ("group", "topic")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    group: str
    topic: str
    def __init__(self, group: _Optional[str] = ..., topic: _Optional[str] = ...) -> None: ...

class ConsumerProgressResponse(_message.Message):
    __slots__ = ("queues",)
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    queues: _containers.RepeatedCompositeFieldContainer[QueueProgress]
    def __init__(self, queues: _Optional[_Iterable[_Union[QueueProgress, _Mapping]]] = ...) -> None: ...

class ResetOffsetRequest(_message.Message):
    __slots__ = ("group", "topic", "timestamp_ms", "queue_offset", "earliest", "latest", "dry_run", "queue_id", "force")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    EARLIEST_FIELD_NUMBER: _ClassVar[int]
    LATEST_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    group: str
    topic: str
    timestamp_ms: int
    queue_offset: int
    earliest: bool
    latest: bool
    dry_run: bool
    queue_id: int
    force: bool
    def __init__(self, group: _Optional[str] = ..., topic: _Optional[str] = ..., timestamp_ms: _Optional[int] = ..., queue_offset: _Optional[int] = ..., earliest: _Optional[bool] = ..., latest: _Optional[bool] = ..., dry_run: _Optional[bool] = ..., queue_id: _Optional[int] = ..., force: _Optional[bool] = ...) -> None: ...

class OffsetChange(_message.Message):
    __slots__ = ("queue_id", "old_offset", "new_offset")
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    OLD_OFFSET_FIELD_NUMBER: _ClassVar[int]
    NEW_OFFSET_FIELD_NUMBER: _ClassVar[int]
    queue_id: int
    old_offset: int
    new_offset: int
    def __init__(self, queue_id: _Optional[int] = ..., old_offset: _Optional[int] = ..., new_offset: _Optional[int] = ...) -> None: ...

class ResetOffsetResponse(_message.Message):
    __slots__ = ("queues", "applied")
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    APPLIED_FIELD_NUMBER: _ClassVar[int]
    queues: _containers.RepeatedCompositeFieldContainer[OffsetChange]
    applied: bool
    def __init__(self, queues: _Optional[_Iterable[_Union[OffsetChange, _Mapping]]] = ..., applied: _Optional[bool] = ...) -> None: ...

class QueryMessageRequest(_message.Message):
    __slots__ = ("key", "msg_id", "commit_log_offset", "topic", "max_messages")
    KEY_FIELD_NUMBER: _ClassVar[int]
    MSG_ID_FIELD_NUMBER: _ClassVar[int]
    COMMIT_LOG_OFFSET_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    MAX_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    key: str
    msg_id: str
    commit_log_offset: int
    topic: str
    max_messages: int
    def __init__(self, key: _Optional[str] = ..., msg_id: _Optional[str] = ..., commit_log_offset: _Optional[int] = ..., topic: _Optional[str] = ..., max_messages: _Optional[int] = ...) -> None: ...

class MessageView(_message.Message):
    __slots__ = ("topic", "queue_id", "queue_offset", "commit_log_offset", "offset_msg_id", "client_msg_id", "tags", "keys", "born_timestamp_ms", "store_timestamp_ms", "born_host", "store_host", "reconsume_times", "properties", "body", "consumed_by")
    class PropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    COMMIT_LOG_OFFSET_FIELD_NUMBER: _ClassVar[int]
    OFFSET_MSG_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_MSG_ID_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    BORN_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    STORE_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    BORN_HOST_FIELD_NUMBER: _ClassVar[int]
    STORE_HOST_FIELD_NUMBER: _ClassVar[int]
    RECONSUME_TIMES_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    CONSUMED_BY_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    offset_msg_id: str
    client_msg_id: str
    tags: str
    keys: str
    born_timestamp_ms: int
    store_timestamp_ms: int
    born_host: str
    store_host: str
    reconsume_times: int
    properties: _containers.ScalarMap[str, str]
    body: bytes
    consumed_by: _containers.RepeatedCompositeFieldContainer[GroupConsumption]
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., queue_offset: _Optional[int] = ..., commit_log_offset: _Optional[int] = ..., offset_msg_id: _Optional[str] = ..., client_msg_id: _Optional[str] = ..., tags: _Optional[str] = ..., keys: _Optional[str] = ..., born_timestamp_ms: _Optional[int] = ..., store_timestamp_ms: _Optional[int] = ..., born_host: _Optional[str] = ..., store_host: _Optional[str] = ..., reconsume_times: _Optional[int] = ..., properties: _Optional[_Mapping[str, str]] = ..., body: _Optional[bytes] = ..., consumed_by: _Optional[_Iterable[_Union[GroupConsumption, _Mapping]]] = ...) -> None: ...

class GroupConsumption(_message.Message):
    __slots__ = ("group", "consumer_offset", "consumed")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_OFFSET_FIELD_NUMBER: _ClassVar[int]
    CONSUMED_FIELD_NUMBER: _ClassVar[int]
    group: str
    consumer_offset: int
    consumed: bool
    def __init__(self, group: _Optional[str] = ..., consumer_offset: _Optional[int] = ..., consumed: _Optional[bool] = ...) -> None: ...

class QueryMessageResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[MessageView]
    def __init__(self, messages: _Optional[_Iterable[_Union[MessageView, _Mapping]]] = ...) -> None: ...

class BrokerConfigEntry(_message.Message):
    __slots__ = ("key", "value", "changeable", "configured_value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    CHANGEABLE_FIELD_NUMBER: _ClassVar[int]
    CONFIGURED_VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: str
    changeable: bool
    configured_value: str
    def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ..., changeable: _Optional[bool] = ..., configured_value: _Optional[str] = ...) -> None: ...

class GetBrokerConfigRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class BrokerConfigResponse(_message.Message):
    __slots__ = ("entries",)
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[BrokerConfigEntry]
    def __init__(self, entries: _Optional[_Iterable[_Union[BrokerConfigEntry, _Mapping]]] = ...) -> None: ...

class SetBrokerConfigRequest(_message.Message):
    __slots__ = ("values",)
    class ValuesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.ScalarMap[str, str]
    def __init__(self, values: _Optional[_Mapping[str, str]] = ...) -> None: ...

class QueueCursor(_message.Message):
    __slots__ = ("queue_id", "queue_offset")
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    queue_id: int
    queue_offset: int
    def __init__(self, queue_id: _Optional[int] = ..., queue_offset: _Optional[int] = ...) -> None: ...

class ListMessagesRequest(_message.Message):
    __slots__ = ("topic", "begin_timestamp_ms", "end_timestamp_ms", "max_messages", "cursor")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    BEGIN_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    END_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    topic: str
    begin_timestamp_ms: int
    end_timestamp_ms: int
    max_messages: int
    cursor: _containers.RepeatedCompositeFieldContainer[QueueCursor]
    def __init__(self, topic: _Optional[str] = ..., begin_timestamp_ms: _Optional[int] = ..., end_timestamp_ms: _Optional[int] = ..., max_messages: _Optional[int] = ..., cursor: _Optional[_Iterable[_Union[QueueCursor, _Mapping]]] = ...) -> None: ...

class ListMessagesResponse(_message.Message):
    __slots__ = ("messages", "next_cursor", "more", "damaged_offsets")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    NEXT_CURSOR_FIELD_NUMBER: _ClassVar[int]
    MORE_FIELD_NUMBER: _ClassVar[int]
    DAMAGED_OFFSETS_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[MessageView]
    next_cursor: _containers.RepeatedCompositeFieldContainer[QueueCursor]
    more: bool
    damaged_offsets: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, messages: _Optional[_Iterable[_Union[MessageView, _Mapping]]] = ..., next_cursor: _Optional[_Iterable[_Union[QueueCursor, _Mapping]]] = ..., more: _Optional[bool] = ..., damaged_offsets: _Optional[_Iterable[int]] = ...) -> None: ...

class ResendDeadLetterRequest(_message.Message):
    __slots__ = ("commit_log_offset", "msg_id", "dry_run", "new_client_msg_id")
    COMMIT_LOG_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MSG_ID_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    NEW_CLIENT_MSG_ID_FIELD_NUMBER: _ClassVar[int]
    commit_log_offset: int
    msg_id: str
    dry_run: bool
    new_client_msg_id: str
    def __init__(self, commit_log_offset: _Optional[int] = ..., msg_id: _Optional[str] = ..., dry_run: _Optional[bool] = ..., new_client_msg_id: _Optional[str] = ...) -> None: ...

class ResendDeadLetterResponse(_message.Message):
    __slots__ = ("dead_letter", "origin_topic", "queue_id", "resent", "put_status", "offset_msg_id", "client_msg_id", "queue_offset")
    DEAD_LETTER_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    RESENT_FIELD_NUMBER: _ClassVar[int]
    PUT_STATUS_FIELD_NUMBER: _ClassVar[int]
    OFFSET_MSG_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_MSG_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    dead_letter: MessageView
    origin_topic: str
    queue_id: int
    resent: bool
    put_status: str
    offset_msg_id: str
    client_msg_id: str
    queue_offset: int
    def __init__(self, dead_letter: _Optional[_Union[MessageView, _Mapping]] = ..., origin_topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., resent: _Optional[bool] = ..., put_status: _Optional[str] = ..., offset_msg_id: _Optional[str] = ..., client_msg_id: _Optional[str] = ..., queue_offset: _Optional[int] = ...) -> None: ...

class ClientConnection(_message.Message):
    __slots__ = ("client_id", "protocol", "kind", "group", "address", "topics", "first_seen_ms", "last_seen_ms", "language", "version")
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    FIRST_SEEN_MS_FIELD_NUMBER: _ClassVar[int]
    LAST_SEEN_MS_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    protocol: ClientProtocol
    kind: ClientKind
    group: str
    address: str
    topics: _containers.RepeatedScalarFieldContainer[str]
    first_seen_ms: int
    last_seen_ms: int
    language: str
    version: str
    def __init__(self, client_id: _Optional[str] = ..., protocol: _Optional[_Union[ClientProtocol, str]] = ..., kind: _Optional[_Union[ClientKind, str]] = ..., group: _Optional[str] = ..., address: _Optional[str] = ..., topics: _Optional[_Iterable[str]] = ..., first_seen_ms: _Optional[int] = ..., last_seen_ms: _Optional[int] = ..., language: _Optional[str] = ..., version: _Optional[str] = ...) -> None: ...

class ListClientsRequest(_message.Message):
    __slots__ = ("group", "kind")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    group: str
    kind: ClientKind
    def __init__(self, group: _Optional[str] = ..., kind: _Optional[_Union[ClientKind, str]] = ...) -> None: ...

class ListClientsResponse(_message.Message):
    __slots__ = ("clients",)
    CLIENTS_FIELD_NUMBER: _ClassVar[int]
    clients: _containers.RepeatedCompositeFieldContainer[ClientConnection]
    def __init__(self, clients: _Optional[_Iterable[_Union[ClientConnection, _Mapping]]] = ...) -> None: ...

class ConsumerGroupSummary(_message.Message):
    __slots__ = ("group", "topics", "online_clients", "protocols", "lag", "pop", "last_seen_ms")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    ONLINE_CLIENTS_FIELD_NUMBER: _ClassVar[int]
    PROTOCOLS_FIELD_NUMBER: _ClassVar[int]
    LAG_FIELD_NUMBER: _ClassVar[int]
    POP_FIELD_NUMBER: _ClassVar[int]
    LAST_SEEN_MS_FIELD_NUMBER: _ClassVar[int]
    group: str
    topics: _containers.RepeatedScalarFieldContainer[str]
    online_clients: int
    protocols: _containers.RepeatedScalarFieldContainer[ClientProtocol]
    lag: int
    pop: bool
    last_seen_ms: int
    def __init__(self, group: _Optional[str] = ..., topics: _Optional[_Iterable[str]] = ..., online_clients: _Optional[int] = ..., protocols: _Optional[_Iterable[_Union[ClientProtocol, str]]] = ..., lag: _Optional[int] = ..., pop: _Optional[bool] = ..., last_seen_ms: _Optional[int] = ...) -> None: ...

class ListConsumerGroupsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListConsumerGroupsResponse(_message.Message):
    __slots__ = ("groups",)
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedCompositeFieldContainer[ConsumerGroupSummary]
    def __init__(self, groups: _Optional[_Iterable[_Union[ConsumerGroupSummary, _Mapping]]] = ...) -> None: ...

class IdentifyRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class BrokerIdentity(_message.Message):
    __slots__ = ("cluster_name", "broker_name", "broker_id")
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    cluster_name: str
    broker_name: str
    broker_id: int
    def __init__(self, cluster_name: _Optional[str] = ..., broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ...) -> None: ...
