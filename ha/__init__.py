"""Replication's sans-IO cores: chunking and chunk checks (`chunks`), the master's stream
decisions (`master_session`), the master's view of its slaves and its replica gate
(`replica_tracker`), a slave's stream decisions and reconnect policy (`slave_session`), mutual
authentication (`peer_auth`), epochs (`epochs`, `epoch_keeper`, `epoch_file`), the controller's
election and group state (`controller`, `group_state`), the metadata copy (`metadata_sync`), and
the settings (`config`). No sockets or sleeps here: the gRPC adapters live in
`master.replication_server` and `slave.replication_client`. Modules that guard shared state with
locks (`replica_tracker`, `peer_auth`'s nonce table, `epoch_keeper`) say so in their docstrings."""

from .chunks import (
    ChunkCheck,
    ChunkVerdict,
    MalformedRecords,
    SlaveStreamCheck,
    crc32c,
    intact_prefix,
    next_chunk,
    whole_records,
)
from .config import HaConfig
from .master_session import MasterSession, SlaveHandshake, StartDecision, decide_start
from .replica_tracker import ReplicaTracker, SlaveSnapshot
from .slave_session import ChunkFields, ReconnectPolicy, SlaveSession

__all__ = [
    "ChunkCheck",
    "ChunkFields",
    "ChunkVerdict",
    "HaConfig",
    "MalformedRecords",
    "MasterSession",
    "ReconnectPolicy",
    "ReplicaTracker",
    "SlaveHandshake",
    "SlaveSession",
    "SlaveSnapshot",
    "SlaveStreamCheck",
    "StartDecision",
    "crc32c",
    "decide_start",
    "intact_prefix",
    "next_chunk",
    "whole_records",
]
