"""Replication's sans-IO cores: chunking and chunk checks (`chunks`), the master's view of its
slaves and its replica gate (`replica_tracker`), a slave's stream decisions and reconnect policy
(`slave_session`), and the settings (`config`). No sockets, threads or sleeps here: the gRPC
adapters live in `master.replication_server` and `slave.replication_client`."""

from .chunks import ChunkCheck, ChunkVerdict, MalformedRecords, SlaveStreamCheck, crc32c, next_chunk, whole_records
from .config import HaConfig
from .replica_tracker import ReplicaTracker, SlaveSnapshot
from .slave_session import ChunkFields, ReconnectPolicy, SlaveSession

__all__ = [
    "ChunkCheck",
    "ChunkFields",
    "ChunkVerdict",
    "HaConfig",
    "MalformedRecords",
    "ReconnectPolicy",
    "ReplicaTracker",
    "SlaveSession",
    "SlaveSnapshot",
    "SlaveStreamCheck",
    "crc32c",
    "next_chunk",
    "whole_records",
]
