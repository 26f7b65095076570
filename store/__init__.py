"""RocketStore's message store: RocketMQ's CommitLog on memory-mapped segments.

Public API: `MessageStore`, `StoreConfig`, `Message`, `MessageExt`, `PutMessageResult`,
`GetMessageResult`, `QueryMessageResult`, `TagFilter`, `TopicConfig`, `StoreStatsSnapshot`, the
status enums, and the errors a load, a read of one message or a replicated append can raise.
"""

from .config import StoreConfig
from .log.codec import CorruptMessage, DamagedMessage, decode_msg_id, make_msg_id
from .log.commitlog import CommitLogClosed, ReplicatedAppendError
from .log.commitlog_scan import StoreCorruptedError
from .log.mapped_file_queue import SegmentLayoutError
from .message import Message, MessageExt
from .message_store import MessageStore
from .metadata.topic_config import TopicConfig
from .properties import ConfigError
from .queue.message_filter import TagFilter
from .queue.reads import GetMessageResult, QueryMessageResult
from .recovery.lifecycle import StoreLockedError
from .results import PutMessageResult, RecoveryReport
from .stats import StoreStatsSnapshot
from .status import BrokerRole, FlushDiskType, GetMessageStatus, PutMessageStatus

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
