"""RocketStore's message store: RocketMQ's CommitLog on memory-mapped segments.

Public API: `MessageStore`, `StoreConfig`, `Message`, `MessageExt`, `PutMessageResult`, the status
enums, and the errors a load can raise.
"""

from .codec import CorruptMessage, decode_msg_id, make_msg_id
from .config import StoreConfig
from .lifecycle import StoreLockedError
from .mapped_file_queue import SegmentLayoutError
from .message import Message, MessageExt
from .message_store import MessageStore
from .properties import ConfigError
from .recovery import StoreCorruptedError
from .results import PutMessageResult, RecoveryReport
from .status import AppendMessageStatus, BrokerRole, FlushDiskType, PutMessageStatus

__all__ = [
    "AppendMessageStatus",
    "BrokerRole",
    "ConfigError",
    "CorruptMessage",
    "FlushDiskType",
    "Message",
    "MessageExt",
    "MessageStore",
    "PutMessageResult",
    "PutMessageStatus",
    "RecoveryReport",
    "SegmentLayoutError",
    "StoreConfig",
    "StoreCorruptedError",
    "StoreLockedError",
    "decode_msg_id",
    "make_msg_id",
]
