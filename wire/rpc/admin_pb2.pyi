from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SlaveStatus(_message.Message):
    __slots__ = ("ha_peer", "broker_id", "client_endpoint", "ack_offset", "lag_bytes", "lag_seconds", "fit", "connected_at_ms")
    HA_PEER_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    ACK_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAG_BYTES_FIELD_NUMBER: _ClassVar[int]
    LAG_SECONDS_FIELD_NUMBER: _ClassVar[int]
    FIT_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    ha_peer: str
    broker_id: int
    client_endpoint: str
    ack_offset: int
    lag_bytes: int
    lag_seconds: float
    fit: bool
    connected_at_ms: int
    def __init__(self, ha_peer: _Optional[str] = ..., broker_id: _Optional[int] = ..., client_endpoint: _Optional[str] = ..., ack_offset: _Optional[int] = ..., lag_bytes: _Optional[int] = ..., lag_seconds: _Optional[float] = ..., fit: _Optional[bool] = ..., connected_at_ms: _Optional[int] = ...) -> None: ...

class BrokerStatus(_message.Message):
    __slots__ = ("cluster_name", "broker_name", "broker_id", "role", "epoch", "client_endpoint", "ha_endpoint", "flush_disk_type", "min_offset", "max_offset", "flushed_offset", "confirmed_offset", "dispatched_offset", "dispatch_lag_bytes", "slaves", "master_ha_address", "master_connected", "master_max_offset", "uptime_ms", "in_sync_replicas", "stats_json", "replication_error", "controller_mode", "master_broker_id", "in_sync_replica_ids", "lease_valid_ms", "controller_error", "unclean_lost_bytes", "master_client_endpoint", "group_max_offset", "metadata_synced_ms", "metadata_error")
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
    def __init__(self, cluster_name: _Optional[str] = ..., broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., role: _Optional[str] = ..., epoch: _Optional[int] = ..., client_endpoint: _Optional[str] = ..., ha_endpoint: _Optional[str] = ..., flush_disk_type: _Optional[str] = ..., min_offset: _Optional[int] = ..., max_offset: _Optional[int] = ..., flushed_offset: _Optional[int] = ..., confirmed_offset: _Optional[int] = ..., dispatched_offset: _Optional[int] = ..., dispatch_lag_bytes: _Optional[int] = ..., slaves: _Optional[_Iterable[_Union[SlaveStatus, _Mapping]]] = ..., master_ha_address: _Optional[str] = ..., master_connected: _Optional[bool] = ..., master_max_offset: _Optional[int] = ..., uptime_ms: _Optional[int] = ..., in_sync_replicas: _Optional[int] = ..., stats_json: _Optional[str] = ..., replication_error: _Optional[str] = ..., controller_mode: _Optional[bool] = ..., master_broker_id: _Optional[int] = ..., in_sync_replica_ids: _Optional[_Iterable[int]] = ..., lease_valid_ms: _Optional[int] = ..., controller_error: _Optional[str] = ..., unclean_lost_bytes: _Optional[int] = ..., master_client_endpoint: _Optional[str] = ..., group_max_offset: _Optional[int] = ..., metadata_synced_ms: _Optional[int] = ..., metadata_error: _Optional[str] = ...) -> None: ...

class GetStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class TopicSpec(_message.Message):
    __slots__ = ("name", "read_queue_nums", "write_queue_nums", "perm")
    NAME_FIELD_NUMBER: _ClassVar[int]
    READ_QUEUE_NUMS_FIELD_NUMBER: _ClassVar[int]
    WRITE_QUEUE_NUMS_FIELD_NUMBER: _ClassVar[int]
    PERM_FIELD_NUMBER: _ClassVar[int]
    name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    def __init__(self, name: _Optional[str] = ..., read_queue_nums: _Optional[int] = ..., write_queue_nums: _Optional[int] = ..., perm: _Optional[int] = ...) -> None: ...

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
