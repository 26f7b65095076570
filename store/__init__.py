"""RocketStore's message store: RocketMQ's CommitLog on memory-mapped segments.

Public API: `MessageStore`, `StoreConfig`, `Message`, `MessageExt`, `PutMessageResult`,
`GetMessageResult`, `QueryMessageResult`, `TagFilter`, `TopicConfig`, `StoreStatsSnapshot`, the
status enums, and the errors a load, a read of one message or a replicated append can raise.
"""

from .commitlog import CommitLogClosed, ReplicatedAppendError
from .codec import CorruptMessage, DamagedMessage, decode_msg_id, make_msg_id
from .config import StoreConfig
from .lifecycle import StoreLockedError
from .mapped_file_queue import SegmentLayoutError
from .message import Message, MessageExt
from .message_filter import TagFilter
from .message_store import MessageStore
from .properties import ConfigError
from .reads import GetMessageResult, QueryMessageResult
from .commitlog_scan import StoreCorruptedError
from .results import PutMessageResult, RecoveryReport
from .stats import StoreStatsSnapshot
from .status import BrokerRole, FlushDiskType, GetMessageStatus, PutMessageStatus
from .topic_config import TopicConfig

__all__ = [
    "BrokerRole",
    "CommitLogClosed",
    "ConfigError",
    "CorruptMessage",
    "DamagedMessage",
    "FlushDiskType",
    "GetMessageResult",
    "GetMessageStatus",
    "Message",
    "MessageExt",
    "MessageStore",
    "PutMessageResult",
    "PutMessageStatus",
    "QueryMessageResult",
    "RecoveryReport",
    "ReplicatedAppendError",
    "SegmentLayoutError",
    "StoreConfig",
    "StoreCorruptedError",
    "StoreLockedError",
    "StoreStatsSnapshot",
    "TagFilter",
    "TopicConfig",
    "decode_msg_id",
    "make_msg_id",
]
