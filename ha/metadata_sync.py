"""What a slave copies from its master besides the CommitLog (RocketMQ's slave synchronisation):
the topic table, the consumer offsets and the delay-level cursors. Sans-IO: the master's side
takes a snapshot of its store, the slave's side applies one to its store; the gRPC call
(`Replication/GetMetadata`) and the timer live in `slave.metadata_client` and
`master.replication_server`.

Wire layout: the slave asks with its durable log end (`MetadataRequest.durable_offset`); the
`MetadataResponse` holds three UTF-8 JSON documents in the shapes of their files under `config/`
(`topics.json`, `consumerOffset.json`, `delayOffset.json`), the last one empty when the master
cannot give delay cursors for that log end.

How a slave applies a snapshot, and why:
- Topics: the master's table replaces the slave's when the data versions differ (RocketMQ's
  rule), so a promoted slave serves the topics with the queue counts and permissions the
  producers and consumers already use.
- Consumer offsets: each topic@group entry of the master replaces the slave's; groups only the
  slave knows stay (RocketMQ's putAll). After a failover consumers resume from at most one sync
  interval back: re-delivery, never a skipped message, since consumers only commit what they
  read and a promoted slave holds what was acknowledged.
- Delay cursors: the master gives the cursors whose re-puts all lie in the slave's durable log
  (`ScheduleMessageService.cursors_at`), or none. A cursor past a re-put the slave does not hold
  would, after a promotion, skip that delayed message for good; held back, the worst case is
  delivering it twice.

Thread-safety: plain functions over a store whose managers lock themselves; `apply_snapshot`
must not race with a role change (the slave's sync thread is stopped before a promotion).
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["DelayCursors", "MetadataSnapshot", "SyncResult", "apply_snapshot", "take_snapshot"]


class _Store(Protocol):
    """What the functions use of `store.MessageStore`."""

    topics: Any
    consumer_offsets: Any
    schedule: Any


@dataclass(frozen=True, slots=True)
class MetadataSnapshot:
    topics: dict[str, Any]
    consumer_offsets: dict[str, Any]
    # None: the master cannot give cursors for the asking slave's log (yet).
    delay_offsets: dict[str, Any] | None

    def documents(self) -> tuple[bytes, bytes, bytes]:
        """The three JSON documents, for the wire (b"" for absent delay cursors)."""
        delay = _dump(self.delay_offsets) if self.delay_offsets is not None else b""
        return _dump(self.topics), _dump(self.consumer_offsets), delay

    @classmethod
    def from_documents(cls, topics: bytes, consumer_offsets: bytes, delay_offsets: bytes) -> "MetadataSnapshot":
        """ValueError naming the document that is not a JSON object."""
        return cls(
            _load("topics", topics),
            _load("consumer offsets", consumer_offsets),
            _load("delay offsets", delay_offsets) if delay_offsets else None,
        )


def _dump(document: dict[str, Any]) -> bytes:
    return json.dumps(document, separators=(",", ":")).encode("utf-8")


def _load(name: str, raw: bytes) -> dict[str, Any]:
    try:
        document = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"the master's {name} document is not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise ValueError(f"the master's {name} document is not a JSON object")
    return document


class DelayCursors(enum.Enum):
    UNCHANGED = "unchanged"
    REPLACED = "replaced"
    # The master gave none: the slave's durable log does not reach the re-puts behind its
    # cursors yet. Kept for a later sync.
    LOG_BEHIND = "log_behind"


@dataclass(frozen=True, slots=True)
class SyncResult:
    topics_replaced: bool
    offsets_changed: int
    delay_cursors: DelayCursors

    @property
    def changed(self) -> bool:
        return self.topics_replaced or self.offsets_changed > 0 or self.delay_cursors is DelayCursors.REPLACED


def take_snapshot(store: _Store, slave_durable_offset: int) -> MetadataSnapshot:
    """The master's side: its metadata as of now, for a slave whose durable log ends at
    `slave_durable_offset`."""
    return MetadataSnapshot(
        store.topics.document(), store.consumer_offsets.document(), store.schedule.cursors_at(slave_durable_offset)
    )


def apply_snapshot(store: _Store, snapshot: MetadataSnapshot) -> SyncResult:
    """The slave's side. ValueError for a document that is not what it claims (the parts before
    it are applied, each whole); RuntimeError when the store delivers delayed messages itself
    (it is a master)."""
    topics_replaced = store.topics.replace_with(snapshot.topics)
    offsets_changed = store.consumer_offsets.merge_from(snapshot.consumer_offsets)
    if snapshot.delay_offsets is None:
        delay = DelayCursors.LOG_BEHIND
    elif store.schedule.replace_offsets(snapshot.delay_offsets):
        delay = DelayCursors.REPLACED
    else:
        delay = DelayCursors.UNCHANGED
    return SyncResult(topics_replaced, offsets_changed, delay)
