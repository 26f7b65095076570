from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SlaveReport(_message.Message):
    __slots__ = ("durable_offset", "broker_name", "broker_id", "client_endpoint", "max_offset", "epoch", "epoch_start_offset", "mac")
    DURABLE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    EPOCH_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAC_FIELD_NUMBER: _ClassVar[int]
    durable_offset: int
    broker_name: str
    broker_id: int
    client_endpoint: str
    max_offset: int
    epoch: int
    epoch_start_offset: int
    mac: bytes
    def __init__(self, durable_offset: _Optional[int] = ..., broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., client_endpoint: _Optional[str] = ..., max_offset: _Optional[int] = ..., epoch: _Optional[int] = ..., epoch_start_offset: _Optional[int] = ..., mac: _Optional[bytes] = ...) -> None: ...

class Chunk(_message.Message):
    __slots__ = ("start_offset", "data", "master_max_offset", "epoch", "checksum", "confirmed_offset", "segment_size", "master_client_endpoint", "epoch_start_offset", "mac")
    START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    MASTER_MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    CHECKSUM_FIELD_NUMBER: _ClassVar[int]
    CONFIRMED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    SEGMENT_SIZE_FIELD_NUMBER: _ClassVar[int]
    MASTER_CLIENT_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    EPOCH_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAC_FIELD_NUMBER: _ClassVar[int]
    start_offset: int
    data: bytes
    master_max_offset: int
    epoch: int
    checksum: int
    confirmed_offset: int
    segment_size: int
    master_client_endpoint: str
    epoch_start_offset: int
    mac: bytes
    def __init__(self, start_offset: _Optional[int] = ..., data: _Optional[bytes] = ..., master_max_offset: _Optional[int] = ..., epoch: _Optional[int] = ..., checksum: _Optional[int] = ..., confirmed_offset: _Optional[int] = ..., segment_size: _Optional[int] = ..., master_client_endpoint: _Optional[str] = ..., epoch_start_offset: _Optional[int] = ..., mac: _Optional[bytes] = ...) -> None: ...

class EpochEntry(_message.Message):
    __slots__ = ("epoch", "start_offset")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    start_offset: int
    def __init__(self, epoch: _Optional[int] = ..., start_offset: _Optional[int] = ...) -> None: ...

class EpochsRequest(_message.Message):
    __slots__ = ("broker_name",)
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    def __init__(self, broker_name: _Optional[str] = ...) -> None: ...

class EpochsResponse(_message.Message):
    __slots__ = ("epochs", "min_offset", "max_offset", "confirmed_offset", "is_master", "mac")
    EPOCHS_FIELD_NUMBER: _ClassVar[int]
    MIN_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    CONFIRMED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    IS_MASTER_FIELD_NUMBER: _ClassVar[int]
    MAC_FIELD_NUMBER: _ClassVar[int]
    epochs: _containers.RepeatedCompositeFieldContainer[EpochEntry]
    min_offset: int
    max_offset: int
    confirmed_offset: int
    is_master: bool
    mac: bytes
    def __init__(self, epochs: _Optional[_Iterable[_Union[EpochEntry, _Mapping]]] = ..., min_offset: _Optional[int] = ..., max_offset: _Optional[int] = ..., confirmed_offset: _Optional[int] = ..., is_master: _Optional[bool] = ..., mac: _Optional[bytes] = ...) -> None: ...

class MetadataRequest(_message.Message):
    __slots__ = ("broker_name", "durable_offset")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    DURABLE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    durable_offset: int
    def __init__(self, broker_name: _Optional[str] = ..., durable_offset: _Optional[int] = ...) -> None: ...

class MetadataResponse(_message.Message):
    __slots__ = ("topics_json", "consumer_offsets_json", "delay_offsets_json", "is_master", "mac")
    TOPICS_JSON_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_OFFSETS_JSON_FIELD_NUMBER: _ClassVar[int]
    DELAY_OFFSETS_JSON_FIELD_NUMBER: _ClassVar[int]
    IS_MASTER_FIELD_NUMBER: _ClassVar[int]
    MAC_FIELD_NUMBER: _ClassVar[int]
    topics_json: bytes
    consumer_offsets_json: bytes
    delay_offsets_json: bytes
    is_master: bool
    mac: bytes
    def __init__(self, topics_json: _Optional[bytes] = ..., consumer_offsets_json: _Optional[bytes] = ..., delay_offsets_json: _Optional[bytes] = ..., is_master: _Optional[bool] = ..., mac: _Optional[bytes] = ...) -> None: ...

class HelloRequest(_message.Message):
    __slots__ = ("client_nonce", "broker_name", "broker_id")
    CLIENT_NONCE_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    client_nonce: bytes
    broker_name: str
    broker_id: int
    def __init__(self, client_nonce: _Optional[bytes] = ..., broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ...) -> None: ...

class HelloResponse(_message.Message):
    __slots__ = ("server_nonce", "server_proof", "broker_name", "broker_id")
    SERVER_NONCE_FIELD_NUMBER: _ClassVar[int]
    SERVER_PROOF_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    server_nonce: bytes
    server_proof: bytes
    broker_name: str
    broker_id: int
    def __init__(self, server_nonce: _Optional[bytes] = ..., server_proof: _Optional[bytes] = ..., broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ...) -> None: ...

class PopEventsRequest(_message.Message):
    __slots__ = ("broker_name", "broker_id", "batches", "mac")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BATCHES_FIELD_NUMBER: _ClassVar[int]
    MAC_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    broker_id: int
    batches: _containers.RepeatedScalarFieldContainer[bytes]
    mac: bytes
    def __init__(self, broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., batches: _Optional[_Iterable[bytes]] = ..., mac: _Optional[bytes] = ...) -> None: ...

class PopEventsResponse(_message.Message):
    __slots__ = ("accepted", "reason", "mac")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MAC_FIELD_NUMBER: _ClassVar[int]
    accepted: bool
    reason: str
    mac: bytes
    def __init__(self, accepted: _Optional[bool] = ..., reason: _Optional[str] = ..., mac: _Optional[bytes] = ...) -> None: ...
