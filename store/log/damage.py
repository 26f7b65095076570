"""`DamageLog`: the CommitLog records this store found damaged while it runs, for operators.

A record is damaged when it sits whole in its place but its body fails its BODYCRC
(`codec.DamagedMessage`): bytes changed at rest, below what the start-up scan checked. The
replication cut also reports any record that fails its checks where a record must start (it walks
from a record boundary of the log, so a failure there is damage too). Such a record is never
served nor replicated; everything that meets one reports it here:

- `found(error, reader)`: the first report of a record logs it at ERROR with where it belongs
  (topic, queue, queue offset) and what an operator can do; later reports only count. At most
  `LOG_LINES_PER_MINUTE` records are logged a minute: the rest are counted and the next line
  logged says how many were left out. Readers are the CommitLog's read of one message (every
  consumer read, query and service read goes through it) and the master's replication cut.
- `hold_replication(slave_id, offset)` / `release_replication(slave_id)`: the master's
  replication to a slave stops at a damaged record; the snapshot says where (and its record
  entry why).
- `snapshot(min_offset)`: a frozen `DamageReport` (records still in the log, lowest first).

Bounded: at most `MAX_RECORDS` records are remembered (past that, later ones are counted and
logged within the rate, never remembered); records retention deleted are dropped at the next
snapshot. Nothing is written to disk: after a restart, records are found again when read.

Thread-safety: any thread. One lock, held for a few dict updates; logging happens outside it.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ..clock import monotonic_ms, wall_clock_ms
from .codec import CorruptMessage, DamagedMessage

log = logging.getLogger("rocketstore.store.damage")

MAX_RECORDS = 1024
LOG_LINES_PER_MINUTE = 10
# Records a snapshot lists (the lowest offsets); the counts cover all of them.
SHOWN_RECORDS = 16
_MINUTE_MS = 60_000


class Reader(enum.Enum):
    """Who met a damaged record."""

    READ = "read"  # a read of the message: consumers, queries, the broker's own services
    REPLICATION = "replication"  # the master cutting bytes for a slave


@dataclass(frozen=True, slots=True)
class DamagedRecord:
    offset: int  # its CommitLog offset
    reason: str
    topic: str  # "" when the record's header could not say (replication found it)
    queue_id: int
    queue_offset: int
    first_seen_ms: int  # wall clock
    refusals: int  # reads and shipments refused because of it


@dataclass(frozen=True, slots=True)
class DamageReport:
    """What the store found damaged since it started (records below the log's start left out)."""

    records: tuple[DamagedRecord, ...]  # the lowest `SHOWN_RECORDS` offsets
    record_count: int  # damaged records remembered (at most MAX_RECORDS)
    refused_reads: int
    refused_shipments: int
    # slave broker id -> the CommitLog offset where replication to it stops (a damaged record)
    held_replication: Mapping[int, int]

    def as_dict(self) -> dict:
        return {
            "records": [
                {
                    "offset": r.offset,
                    "reason": r.reason,
                    "topic": r.topic,
                    "queue_id": r.queue_id,
                    "queue_offset": r.queue_offset,
                    "first_seen_ms": r.first_seen_ms,
                    "refusals": r.refusals,
                }
                for r in self.records
            ],
            "record_count": self.record_count,
            "refused_reads": self.refused_reads,
            "refused_shipments": self.refused_shipments,
            "held_replication": {str(k): v for k, v in sorted(self.held_replication.items())},
        }


class _Entry:
    __slots__ = ("reason", "topic", "queue_id", "queue_offset", "first_seen_ms", "refusals")

    def __init__(self, reason: str, topic: str, queue_id: int, queue_offset: int, first_seen_ms: int) -> None:
        self.reason = reason
        self.topic = topic
        self.queue_id = queue_id
        self.queue_offset = queue_offset
        self.first_seen_ms = first_seen_ms
        self.refusals = 0


def describe(error: CorruptMessage) -> str:
    """One line naming a damaged record: its offset, where it belongs when known, and why."""
    if isinstance(error, DamagedMessage):
        return (
            f"the message at CommitLog offset {error.offset} ({error.topic}:{error.queue_id}, queue offset "
            f"{error.queue_offset}) is damaged: {error.reason}"
        )
    return f"the record at CommitLog offset {error.offset} is damaged: {error.reason}"


class DamageLog:
    def __init__(
        self,
        *,
        wall_ms: Callable[[], int] = wall_clock_ms,
        monotonic_clock_ms: Callable[[], int] = monotonic_ms,
        max_records: int = MAX_RECORDS,
        log_lines_per_minute: int = LOG_LINES_PER_MINUTE,
    ) -> None:
        self._wall = wall_ms
        self._monotonic = monotonic_clock_ms
        self._max_records = max_records
        self._lines_per_minute = log_lines_per_minute
        self._lock = threading.Lock()
        self._records: dict[int, _Entry] = {}
        self._refused = {Reader.READ: 0, Reader.REPLICATION: 0}
        self._held: dict[int, int] = {}
        self._window_start_ms: int | None = None
        self._lines_in_window = 0
        self._left_out = 0

    def found(self, error: CorruptMessage, reader: Reader) -> bool:
        """`reader` refused the record `error` names. True when this is its first report (it was
        logged, or counted as left out of the log by the rate limit)."""
        offset = error.offset
        with self._lock:
            self._refused[reader] += 1
            entry = self._records.get(offset)
            if entry is not None:
                entry.refusals += 1
                return False
            if len(self._records) < self._max_records:
                if isinstance(error, DamagedMessage):
                    entry = _Entry(error.reason, error.topic, error.queue_id, error.queue_offset, self._wall())
                else:
                    entry = _Entry(error.reason, "", -1, -1, self._wall())
                entry.refusals = 1
                self._records[offset] = entry
            left_out = self._take_line()
        if left_out is None:
            return True
        more = f" ({left_out} more damaged records found and not logged, over the rate limit)" if left_out else ""
        log.error(
            "%s; it is not %s. Readers of its queue stop at it with MESSAGE_CORRUPTED; see "
            "docs/store.md, 'Damaged records'%s",
            describe(error),
            "replicated" if reader is Reader.REPLICATION else "served",
            more,
        )
        return True

    def _take_line(self) -> int | None:
        """Under the lock: None when the rate limit leaves this record out of the log, else how
        many were left out since the last line (and the count starts over)."""
        now = self._monotonic()
        if self._window_start_ms is None or now - self._window_start_ms >= _MINUTE_MS:
            self._window_start_ms = now
            self._lines_in_window = 0
        if self._lines_in_window >= self._lines_per_minute:
            self._left_out += 1
            return None
        self._lines_in_window += 1
        left_out, self._left_out = self._left_out, 0
        return left_out

    def hold_replication(self, slave_id: int, offset: int) -> bool:
        """Replication to `slave_id` stops at the damaged record at `offset`; True when that is
        news (it was not held there already)."""
        with self._lock:
            news = self._held.get(slave_id) != offset
            self._held[slave_id] = offset
            return news

    def held_offset(self, slave_id: int) -> int | None:
        with self._lock:
            return self._held.get(slave_id)

    def release_replication(self, slave_id: int | None = None) -> None:
        """Replication to `slave_id` went past its hold (None: every hold, this broker no longer
        serves slaves)."""
        with self._lock:
            if slave_id is None:
                self._held.clear()
            else:
                self._held.pop(slave_id, None)

    def snapshot(self, min_offset: int = 0) -> DamageReport:
        """The records at or above `min_offset` (those below went with their segments)."""
        with self._lock:
            for offset in [o for o in self._records if o < min_offset]:
                del self._records[offset]
            shown = sorted(self._records.items())[:SHOWN_RECORDS]
            records = tuple(
                DamagedRecord(o, e.reason, e.topic, e.queue_id, e.queue_offset, e.first_seen_ms, e.refusals)
                for o, e in shown
            )
            return DamageReport(
                records,
                len(self._records),
                self._refused[Reader.READ],
                self._refused[Reader.REPLICATION],
                MappingProxyType(dict(self._held)),
            )
