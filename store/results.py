"""Results of store operations: frozen values, thread-safe."""

from __future__ import annotations

from dataclasses import dataclass

from .status import PutMessageStatus


@dataclass(frozen=True, slots=True)
class PutMessageResult:
    """Outcome of a put. For a batch, offsets are the first message's, `wrote_bytes` the whole
    batch's, `msg_id` RocketMQ's comma-joined list and `msg_ids` the same as a tuple."""

    status: PutMessageStatus
    wrote_offset: int = -1
    wrote_bytes: int = 0
    queue_offset: int = -1
    msg_id: str = ""
    msg_ids: tuple[str, ...] = ()
    msg_num: int = 0
    store_timestamp_ms: int = 0
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.status is PutMessageStatus.PUT_OK

    @property
    def next_offset(self) -> int:
        """CommitLog offset just past what this put wrote."""
        return self.wrote_offset + self.wrote_bytes


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What load() found: the end of the log and what it cut."""

    abnormal: bool
    scan_start_offset: int
    end_offset: int
    messages_scanned: int
    truncated_from: int | None
    reason: str | None
    seconds: float
