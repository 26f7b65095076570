"""The slave's side of one replication stream, sans-IO: what to make of each chunk, when to
acknowledge, when to give up, and how long to wait before the next stream.

- `SlaveSession` (one stream): checks each received chunk (`chunks.SlaveStreamCheck`), keeps
  what the master said (max and confirmed offsets, client endpoint), tracks the slave's durable
  offset and decides when a report is due: when the durable offset grew since the last report
  (coalesced: one report carries the newest) and at least every heartbeat interval. A stream
  with no chunk (heartbeats count) for the housekeeping interval is `silent`: give it up.
- `ReconnectPolicy` (across streams): the backoff before the next stream, doubling from the
  minimum to the maximum after failures, back to the minimum once a stream was accepted, the
  maximum after a refusal, each wait drawn between half the step and the step itself (jitter: the
  slaves of a restarted master do not all come back in the same instant, and no wait exceeds the
  configured maximum); and which failures deserve an ERROR line (each distinct refusal once,
  until a stream is accepted again) or a WARNING (a failure unlike the previous one).

Plain objects: no sockets, threads or clocks (time is an argument). Not thread-safe: the adapter
(slave/replication_client.py) serialises calls under its lock.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass

from .chunks import ChunkCheck, ChunkVerdict, SlaveStreamCheck


@dataclass(frozen=True, slots=True)
class ChunkFields:
    """What a slave checks of a received `Chunk` (the protobuf fields of the same names)."""

    start_offset: int
    data: bytes
    checksum: int
    segment_size: int
    master_max_offset: int
    confirmed_offset: int = 0
    master_client_endpoint: str = ""


class SlaveSession:
    def __init__(
        self,
        *,
        segment_size: int,
        log_end: int,
        log_empty: bool,
        durable_offset: int,
        now_ms: int,
        heartbeat_ms: int,
        housekeeping_ms: int,
    ) -> None:
        self._check = SlaveStreamCheck(segment_size, log_end, log_empty)
        self.heartbeat_ms = heartbeat_ms
        self.housekeeping_ms = housekeeping_ms
        self.durable_offset = durable_offset
        self.reported_offset = durable_offset  # the handshake reports it
        self.last_report_ms = now_ms
        self.last_chunk_ms = now_ms
        self.accepted = False  # the master accepted the handshake (a first chunk arrived)
        self.master_max_offset = 0
        self.confirmed_offset = 0
        self.master_client_endpoint = ""
        self.chunks = 0
        self.bytes = 0
        self._size = 0

    @property
    def expected_offset(self) -> int:
        return self._check.expected_offset

    # -- chunks --------------------------------------------------------------------------------

    def receive(self, chunk: ChunkFields, now_ms: int) -> ChunkCheck:
        """Check a received chunk (a `ChunkFields` or a protobuf `Chunk`: the same fields). An
        acceptable one counts as a sign of life and updates what the master said; the caller
        appends an OK chunk's data and then calls `appended`."""
        self._size = len(chunk.data)
        verdict = self._check.check(
            chunk.start_offset, chunk.data, chunk.checksum, chunk.segment_size, chunk.master_max_offset
        )
        if not verdict.ok:
            return verdict
        self.accepted = True
        self.last_chunk_ms = now_ms
        self.master_max_offset = chunk.master_max_offset
        self.confirmed_offset = chunk.confirmed_offset
        self.master_client_endpoint = chunk.master_client_endpoint
        return verdict

    def appended(self, check: ChunkCheck) -> None:
        """The OK chunk `check` approved is in the log: the next one starts where it ended."""
        if check.verdict is ChunkVerdict.OK:
            self.chunks += 1
            self.bytes += self._size
            self._check.accepted(check)

    # -- acks ----------------------------------------------------------------------------------

    def durable(self, offset: int) -> bool:
        """Every byte below `offset` is now durable; True when that moved the durable offset."""
        if offset > self.durable_offset:
            self.durable_offset = offset
            return True
        return False

    def report_due(self, now_ms: int) -> int | None:
        """The durable offset to report now (recorded as reported), or None when nothing is due."""
        if self.durable_offset > self.reported_offset or now_ms - self.last_report_ms >= self.heartbeat_ms:
            self.reported_offset = self.durable_offset
            self.last_report_ms = now_ms
            return self.durable_offset
        return None

    def silent(self, now_ms: int) -> bool:
        """No chunk for longer than the housekeeping interval: the master is gone or stuck."""
        return now_ms - self.last_chunk_ms > self.housekeeping_ms

    def wait_ms(self, now_ms: int) -> int:
        """How long until a heartbeat report or the housekeeping limit is due (>= 1 ms)."""
        heartbeat = self.last_report_ms + self.heartbeat_ms - now_ms
        housekeeping = self.last_chunk_ms + self.housekeeping_ms + 1 - now_ms
        return max(1, min(heartbeat, housekeeping))


class ReconnectPolicy:
    def __init__(self, backoff_min_ms: int, backoff_max_ms: int, uniform: Callable[[], float] = random.random) -> None:
        """`uniform` draws the jitter from [0, 1) (injected by tests)."""
        if not 0 < backoff_min_ms <= backoff_max_ms:
            raise ValueError(
                f"haReconnectBackoffMin ({backoff_min_ms} ms) must be positive and at most "
                f"haReconnectBackoffMax ({backoff_max_ms} ms)"
            )
        self.backoff_min_ms = backoff_min_ms
        self.backoff_max_ms = backoff_max_ms
        self._next_ms = backoff_min_ms
        self._uniform = uniform
        self._refusals_logged: set[str] = set()
        self._last_failure = ""

    def accepted(self) -> None:
        """A stream was accepted: the next failure starts the backoff over and is news again."""
        self._next_ms = self.backoff_min_ms
        self._refusals_logged.clear()
        self._last_failure = ""

    def delay_ms(self, *, refused: bool) -> int:
        """The wait before the next stream, after one that failed (or was refused)."""
        if refused:
            step = self.backoff_max_ms
        else:
            step = self._next_ms
            self._next_ms = min(self._next_ms * 2, self.backoff_max_ms)
        return max(1, step - int(step / 2 * self._uniform()))

    def log_level(self, message: str, *, refused: bool) -> int:
        """ERROR for a refusal not logged yet, WARNING for a failure unlike the previous one,
        DEBUG for repeats (a master that stays down must not flood the log)."""
        if refused:
            level = logging.DEBUG if message in self._refusals_logged else logging.ERROR
            self._refusals_logged.add(message)
        else:
            level = logging.DEBUG if message == self._last_failure else logging.WARNING
        self._last_failure = message
        return level
