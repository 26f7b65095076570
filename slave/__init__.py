"""The slave's side of replication: `SlaveReplicator`, the thread that streams the master's
CommitLog into the slave's store and acknowledges what is durable, and `MetadataSync`, which copies
the master's topics, consumer offsets and delay cursors beside it."""

from .metadata_client import MetadataSync, MetadataSyncFailed, MetadataSyncState
from .replication_client import ReplicationState, SlaveReplicator

__all__ = ["MetadataSync", "MetadataSyncFailed", "MetadataSyncState", "ReplicationState", "SlaveReplicator"]
