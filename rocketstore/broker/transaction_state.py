"""Transactional messages' state: which half messages wait for their producer's commit or
rollback, how often the broker has asked about each, and how each ended.

Sans-IO. The log is the truth and this object is a view of it, rebuilt by reading two system
queues in order (the broker's transaction service does the reading and the writing):

    RMQ_SYS_TRANS_HALF_TOPIC, queue 0   the half messages themselves (the producer's message with
                                        REAL_TOPIC / REAL_QID naming where a commit puts it)
    RMQ_SYS_TRANS_OP_HALF_TOPIC, queue 0  this module's events, a JSON list per record

A half message is known by its CommitLog offset (`half_offset`, what the transaction id encodes).
Events are idempotent, so a broker can apply its own events at once and again when it reads them
back from the op queue, and the two queues can be read in either order:

    {"k": "R", "o": half_offset, "c": true|false, "s": source}   resolved: committed or rolled back
    {"k": "K", "o": half_offset, "n": checks, "x": next_check_ms}  checked back with the producer

A resolution is final: the other resolution of the same half is refused, the same one again is
answered as done (a producer's retry). Halves older than the store's retention are forgotten.

Thread-safety: none; the broker's transaction service serialises calls.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

# RocketMQ's broker defaults (transactionTimeOut, transactionCheckMax, transactionCheckInterval).
DEFAULT_TIMEOUT_MS = 6_000
DEFAULT_CHECK_MAX = 15
DEFAULT_CHECK_INTERVAL_MS = 30_000


@dataclass(frozen=True, slots=True)
class Half:
    half_offset: int
    topic: str
    message_id: str
    first_check_ms: int  # prepared time plus the longer of transactionTimeOut and the message's immunity


@dataclass(frozen=True, slots=True)
class Pending:
    half: Half
    checks: int
    next_check_ms: int


@dataclass(frozen=True, slots=True)
class Resolved:
    half_offset: int
    commit: bool
    source: str = "client"


@dataclass(frozen=True, slots=True)
class Checked:
    half_offset: int
    checks: int
    next_check_ms: int


Event = Resolved | Checked


@dataclass(frozen=True, slots=True)
class Refused:
    reason: str


class TransactionState:
    def __init__(self) -> None:
        self._pending: dict[int, Pending] = {}
        self._resolved: dict[int, bool] = {}
        # Checks read before their half (the op queue read first): applied when the half arrives.
        self._early_checks: dict[int, Checked] = {}
        self._kept_from = 0

    # -- building ---------------------------------------------------------------------------------

    def add_half(self, half: Half) -> None:
        offset = half.half_offset
        if offset in self._resolved or offset in self._pending:
            return
        pending = Pending(half, 0, half.first_check_ms)
        early = self._early_checks.pop(offset, None)
        if early is not None:
            pending = Pending(half, early.checks, max(early.next_check_ms, half.first_check_ms))
        self._pending[offset] = pending

    def apply(self, event: Event) -> None:
        offset = event.half_offset
        if isinstance(event, Resolved):
            self._pending.pop(offset, None)
            self._early_checks.pop(offset, None)
            self._resolved.setdefault(offset, event.commit)
            return
        if offset in self._resolved:
            return
        # Checks merge commutatively (the most made, the latest next time): any replay order agrees.
        current = self._pending.get(offset)
        if current is None:
            early = self._early_checks.get(offset)
            if early is not None:
                event = Checked(offset, max(early.checks, event.checks), max(early.next_check_ms, event.next_check_ms))
            self._early_checks[offset] = event
            return
        self._pending[offset] = Pending(
            current.half, max(current.checks, event.checks), max(current.next_check_ms, event.next_check_ms)
        )

    def forget_below(self, min_offset: int) -> None:
        """Drop what the log no longer holds (retention deleted those halves)."""
        if min_offset <= self._kept_from:
            return  # nothing deleted since the last call: no scan
        self._kept_from = min_offset
        for table in (self._pending, self._resolved, self._early_checks):
            for offset in [o for o in table if o < min_offset]:
                del table[offset]

    # -- decisions --------------------------------------------------------------------------------

    def pending(self, half_offset: int) -> Pending | None:
        return self._pending.get(half_offset)

    def outcome(self, half_offset: int) -> bool | None:
        """True committed, False rolled back, None still pending or unknown."""
        return self._resolved.get(half_offset)

    def resolve(self, half_offset: int, commit: bool, source: str = "client") -> Resolved | Refused | None:
        """The event ending a pending half; None when it already ended that way (nothing to do)."""
        done = self._resolved.get(half_offset)
        if done is not None:
            if done == commit:
                return None
            return Refused(f"the transaction was already {'committed' if done else 'rolled back'}")
        if half_offset not in self._pending:
            return Refused("no such half message is waiting for its transaction's end")
        event = Resolved(half_offset, commit, source)
        self.apply(event)
        return event

    def due(self, now_ms: int, limit: int) -> list[Pending]:
        """Pending halves whose next check-back time has come, oldest first."""
        ready = [p for p in self._pending.values() if p.next_check_ms <= now_ms]
        ready.sort(key=lambda p: (p.next_check_ms, p.half.half_offset))
        return ready[:limit]

    def check(self, half_offset: int, now_ms: int, interval_ms: int) -> Checked | None:
        current = self._pending.get(half_offset)
        if current is None:
            return None
        event = Checked(half_offset, current.checks + 1, now_ms + interval_ms)
        self.apply(event)
        return event

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    def pending_halves(self) -> list[Pending]:
        return sorted(self._pending.values(), key=lambda p: p.half.half_offset)


# -- the op queue's records ----------------------------------------------------------------------


def encode_events(events: Iterable[Event]) -> bytes:
    out: list[dict] = []
    for e in events:
        if isinstance(e, Resolved):
            out.append({"k": "R", "o": e.half_offset, "c": e.commit, "s": e.source})
        else:
            out.append({"k": "K", "o": e.half_offset, "n": e.checks, "x": e.next_check_ms})
    return json.dumps(out, separators=(",", ":")).encode()


def decode_events(body: bytes) -> list[Event]:
    """The events of one op record; ValueError names what is wrong with a malformed one."""
    try:
        raw = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(raw, list):
        raise ValueError("not a JSON list")
    events: list[Event] = []
    for item in raw:
        try:
            kind = item["k"]
            offset = _int(item["o"])
            if kind == "R":
                if not isinstance(item["c"], bool) or not isinstance(item.get("s", ""), str):
                    raise ValueError("bad resolution")
                events.append(Resolved(offset, item["c"], item.get("s", "")))
            elif kind == "K":
                events.append(Checked(offset, _int(item["n"]), _int(item["x"])))
            else:
                raise ValueError(f"unknown kind {kind!r}")
        except (KeyError, TypeError) as exc:
            raise ValueError(f"malformed event {item!r}: {exc}") from None
    return events


def _int(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{value!r} is not a non-negative integer")
    return value
