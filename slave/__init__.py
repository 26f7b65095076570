"""The slave's side of replication: `SlaveReplicator`, the thread that streams the master's
CommitLog into the slave's store and acknowledges what is durable."""

from .replication_client import ReplicationState, SlaveReplicator

__all__ = ["ReplicationState", "SlaveReplicator"]
