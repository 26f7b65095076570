"""The master's side of replication: `ReplicationServicer`, the gRPC adapter that streams the
CommitLog to slaves and feeds their acks to `ha.ReplicaTracker`."""

from .replication_server import ReplicationServicer

__all__ = ["ReplicationServicer"]
