from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class SlaveReport(_message.Message):
    __slots__ = ("durable_offset", "broker_name", "broker_id", "client_endpoint", "max_offset", "epoch")
    DURABLE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    durable_offset: int
    broker_name: str
    broker_id: int
    client_endpoint: str
    max_offset: int
    epoch: int
    def __init__(self, durable_offset: _Optional[int] = ..., broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., client_endpoint: _Optional[str] = ..., max_offset: _Optional[int] = ..., epoch: _Optional[int] = ...) -> None: ...

class Chunk(_message.Message):
    __slots__ = ("start_offset", "data", "master_max_offset", "epoch", "checksum", "confirmed_offset", "segment_size", "master_client_endpoint")
    START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    MASTER_MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    CHECKSUM_FIELD_NUMBER: _ClassVar[int]
    CONFIRMED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    SEGMENT_SIZE_FIELD_NUMBER: _ClassVar[int]
    MASTER_CLIENT_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    start_offset: int
    data: bytes
    master_max_offset: int
    epoch: int
    checksum: int
    confirmed_offset: int
    segment_size: int
    master_client_endpoint: str
    def __init__(self, start_offset: _Optional[int] = ..., data: _Optional[bytes] = ..., master_max_offset: _Optional[int] = ..., epoch: _Optional[int] = ..., checksum: _Optional[int] = ..., confirmed_offset: _Optional[int] = ..., segment_size: _Optional[int] = ..., master_client_endpoint: _Optional[str] = ...) -> None: ...
