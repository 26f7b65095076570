"""Timed messages' state: which messages wait in the timer topic for their delivery time, and
which were delivered. Level-free: any delivery time, to the millisecond (RocketMQ 5's timer
messages; the 18 delay levels stay for RocketMQ 4.x clients' DELAY property).

Sans-IO. The log is the truth and this object a view of it, rebuilt by reading two system queues
(the broker's timer service does the reading and writing):

    TIMER_TOPIC, queue 0       the timed messages, with REAL_TOPIC / REAL_QID and TIMER_DELIVER_MS
    TIMER_DONE_TOPIC, queue 0  the events: a JSON list of CommitLog offsets of timed messages
                               delivered to their real topic

Events are idempotent (an offset is delivered or it is not), so the two queues can be read in any
order and a broker applies its own events at once and again when it reads them back. A timed
message is known by its CommitLog offset. What retention deleted is forgotten (`forget_below`).

Thread-safety: none; the broker's timer service serialises calls.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterable, Mapping

PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"


def deliver_ms_of(properties: Mapping[str, str]) -> int | None:
    """The delivery time a timed message carries (TIMER_DELIVER_MS); None for another message and
    for a value that is not a number (a damaged record is not a timed one)."""
    try:
        return int(properties.get(PROPERTY_TIMER_DELIVER_MS, ""))
    except ValueError:
        return None


class TimerState:
    def __init__(self) -> None:
        self._due: dict[int, int] = {}  # offset -> deliver at (ms)
        self._heap: list[tuple[int, int]] = []  # (deliver at, offset); entries of done offsets are stale
        self._done: set[int] = set()
        self._kept_from = 0

    def add(self, offset: int, deliver_ms: int) -> None:
        if offset in self._done or offset in self._due:
            return
        self._due[offset] = deliver_ms
        heapq.heappush(self._heap, (deliver_ms, offset))

    def delivered(self, offset: int) -> None:
        self._due.pop(offset, None)
        self._done.add(offset)

    def due(self, now_ms: int, limit: int) -> list[int]:
        """Offsets whose time has come, earliest first (they stay due until `delivered`)."""
        out: list[int] = []
        skipped: list[tuple[int, int]] = []
        while self._heap and len(out) < limit and self._heap[0][0] <= now_ms:
            at, offset = heapq.heappop(self._heap)
            if self._due.get(offset) == at:
                out.append(offset)
                skipped.append((at, offset))
        for item in skipped:
            heapq.heappush(self._heap, item)
        return out

    def next_due_ms(self) -> int | None:
        while self._heap and self._due.get(self._heap[0][1]) != self._heap[0][0]:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def forget_below(self, min_offset: int) -> None:
        if min_offset <= self._kept_from:
            return  # nothing deleted since the last call: no scan
        self._kept_from = min_offset
        for offset in [o for o in self._due if o < min_offset]:
            del self._due[offset]
        self._done = {o for o in self._done if o >= min_offset}

    @property
    def waiting(self) -> int:
        return len(self._due)


def encode_done(offsets: Iterable[int]) -> bytes:
    return json.dumps(list(offsets), separators=(",", ":")).encode()


def decode_done(body: bytes) -> list[int]:
    """The offsets of one record; ValueError says what is wrong with a malformed one."""
    try:
        raw = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(raw, list) or not all(isinstance(o, int) and not isinstance(o, bool) and o >= 0 for o in raw):
        raise ValueError("not a JSON list of non-negative integers")
    return raw
