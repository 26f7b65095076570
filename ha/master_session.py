"""The master's side of one replication stream, sans-IO: where a slave's stream may start, what to
send it next, what to make of its acknowledgements, and when to give it up.

- `decide_start`: the handshake. A slave names its group and asks for the log from its durable
  end; the stream starts there, or at the start of the master's log for an empty slave, or is
  refused with the reason: the broker is not master (a passing condition), another group, a
  slave log longer than the master's, bytes the master no longer holds, an end that is not a
  record boundary of the master's log, or (with epochs) a last epoch the master does not have at
  that offset or a slave log past that epoch's end in the master's log (a divergent tail).
- `MasterSession`: one accepted stream. `next_step(now_ms, readable_end, log_min_offset)` says
  what the adapter does next: send a chunk from `sent` (at most up to `readable_end`, and never
  more than the window past the last ack), send a heartbeat (an empty chunk at `sent`) when the
  stream was idle for the heartbeat interval, close it (no report for the housekeeping interval,
  or the slave's next byte is gone from the log), or wait. `acknowledged` checks each report: an
  ack beyond what was sent is a protocol error. `window_was_full` says whether an ack may have
  freed a sender that waits on the window: only then does the adapter wake it (an ack that frees
  nothing would cost the sender a thread wake-up per message for nothing).

Plain objects: no sockets, threads or clocks (time is an argument); the gRPC adapter is
`master/replication_server.py`. Not thread-safe: the adapter serialises the calls of one session
(its response generator sends; its report reader acks under the session's own ordering).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from .epochs import EpochHistory


@dataclass(frozen=True, slots=True)
class SlaveHandshake:
    """What a slave's first report says (the protobuf `SlaveReport` has the same fields)."""

    broker_name: str
    durable_offset: int
    epoch: int = 0
    epoch_start_offset: int = 0


@dataclass(frozen=True, slots=True)
class StartDecision:
    start_offset: int
    refusal: str = ""

    @property
    def accepted(self) -> bool:
        return not self.refusal


def decide_start(
    handshake: SlaveHandshake,
    *,
    broker_name: str,
    serving: bool,
    log_min_offset: int,
    log_max_offset: int,
    record_starts_at: Callable[[int], bool | None],
    epochs: EpochHistory | None = None,
) -> StartDecision:
    """Where the slave's stream starts, or why it cannot. `serving`: this broker is master now.
    `record_starts_at(offset)`: whether a record starts there in the master's log (None: not
    readable yet, e.g. still in a write buffer: the stream's own checks decide then)."""
    if not serving:
        return StartDecision(0, "this broker is a slave, it does not serve replication")
    if handshake.broker_name != broker_name:
        return StartDecision(
            0, f"the slave belongs to broker {handshake.broker_name!r}, this master is {broker_name!r}"
        )
    durable = handshake.durable_offset
    if durable < 0:
        return StartDecision(0, f"the slave's offset {durable} is negative")
    if durable > log_max_offset:
        return StartDecision(
            0,
            f"the slave's log ({durable}) is longer than the master's ({log_max_offset}); it has to be truncated first",
        )
    if durable == 0:
        return StartDecision(log_min_offset)
    if durable < log_min_offset:
        return StartDecision(
            0,
            f"the slave's log ends at {durable} but the master's log now starts at {log_min_offset}: "
            "the master no longer has the bytes in between",
        )
    if epochs is not None and handshake.epoch > 0:
        divergence = _divergence(handshake, epochs, log_max_offset)
        if divergence:
            return StartDecision(0, divergence)
    # A record takes at least 8 bytes: an end closer than that to the master's is inside one.
    if durable < log_max_offset and (durable + 8 > log_max_offset or record_starts_at(durable) is False):
        return StartDecision(
            0,
            f"the slave's log ends at {durable}, which is not a record boundary of the master's log: the logs diverge",
        )
    return StartDecision(durable)


def _divergence(handshake: SlaveHandshake, history: EpochHistory, log_max_offset: int) -> str:
    """Why the slave's log is not a prefix of the master's, judged by epochs ("" when it is)."""
    entry = history.entry(handshake.epoch)
    if entry is None or entry.start_offset != handshake.epoch_start_offset:
        held = f"starting at {entry.start_offset}" if entry is not None else "unknown here"
        return (
            f"the slave's last epoch {handshake.epoch} (from offset {handshake.epoch_start_offset}) is {held} "
            "in the master's history: the logs diverge, the slave must truncate first"
        )
    end = history.end_offset(handshake.epoch, log_max_offset)
    if handshake.durable_offset > end:
        return (
            f"the slave's log ends at {handshake.durable_offset}, past the end of epoch {handshake.epoch} at {end} "
            "in the master's log: the slave must truncate first"
        )
    return ""


class Step(enum.Enum):
    SEND = "send"  # a chunk from `sent` up to `until` (cut at whole records by the adapter)
    HEARTBEAT = "heartbeat"  # an empty chunk at `sent`
    CLOSE = "close"  # end the stream: `reason`
    WAIT = "wait"  # nothing to do for `wait_ms`


class CloseKind(enum.Enum):
    SILENT = "silent"  # no report within the housekeeping interval (DEADLINE_EXCEEDED)
    GONE = "gone"  # the slave's next byte is no longer in the log (FAILED_PRECONDITION)
    PROTOCOL = "protocol"  # the slave broke the protocol (INVALID_ARGUMENT)


@dataclass(frozen=True, slots=True)
class NextStep:
    step: Step
    until: int = 0
    wait_ms: int = 0
    close: CloseKind | None = None
    reason: str = ""


class MasterSession:
    """One slave's accepted stream, from its start offset on."""

    def __init__(
        self, start_offset: int, now_ms: int, *, window_bytes: int, heartbeat_ms: int, housekeeping_ms: int
    ) -> None:
        self.start_offset = start_offset
        self.sent = start_offset  # exclusive end of what went out
        self.acked = start_offset  # the highest durable offset the slave reported
        self.window_bytes = window_bytes
        self.heartbeat_ms = heartbeat_ms
        self.housekeeping_ms = housekeeping_ms
        self.last_report_ms = now_ms
        self.last_send_ms = now_ms

    def acknowledged(self, durable_offset: int, now_ms: int) -> str | None:
        """A report: None when it is fine (a sign of life; the ack may move `acked`), else the
        protocol error that must end the stream."""
        if durable_offset > self.sent:
            return f"protocol error: the slave acknowledged offset {durable_offset}, beyond the {self.sent} sent"
        self.last_report_ms = now_ms
        if durable_offset > self.acked:
            self.acked = durable_offset
        return None

    def window_was_full(self, acked_before: int) -> bool:
        """Called after `acknowledged` with `acked` as it was before: could the sender's last
        decision have been a wait on the window? `sent` is read now, after the ack: it only grows,
        so a sender that decided with the old ack and any `sent` up to now is covered; one that
        decides later sees the new ack itself."""
        return self.acked > acked_before and self.sent - acked_before >= self.window_bytes

    def reported(self, now_ms: int) -> None:
        """Any report arrived (also the handshake): the slave is alive."""
        self.last_report_ms = now_ms

    def next_step(self, now_ms: int, readable_end: int, log_min_offset: int) -> NextStep:
        """What to do now, given how far the log may be read (`readable_end`: the log's end, or
        the end of the epoch holding `sent`) and where the log starts now."""
        if now_ms - self.last_report_ms > self.housekeeping_ms:
            return NextStep(
                Step.CLOSE,
                close=CloseKind.SILENT,
                reason=f"no report from the slave within {self.housekeeping_ms} ms (haHousekeepingInterval)",
            )
        if self.sent < log_min_offset:
            return NextStep(
                Step.CLOSE,
                close=CloseKind.GONE,
                reason=f"the master no longer has offset {self.sent}: its log now starts at {log_min_offset}",
            )
        if self.sent < readable_end and self.sent - self.acked < self.window_bytes:
            return NextStep(Step.SEND, until=readable_end)
        idle = now_ms - self.last_send_ms
        if idle >= self.heartbeat_ms:
            return NextStep(Step.HEARTBEAT)
        return NextStep(Step.WAIT, wait_ms=self.heartbeat_ms - idle)

    def sent_chunk(self, length: int, now_ms: int) -> None:
        """A chunk of `length` bytes from `sent` went out (0: a heartbeat)."""
        self.sent += length
        self.last_send_ms = now_ms
