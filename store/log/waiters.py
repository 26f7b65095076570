"""Sans-IO bookkeeping of puts waiting for an offset to become durable (on disk or on slaves).

Each waiter wants the watermark (flushed offset, or slaves' acknowledged offset) to reach its
`next_offset` before its `deadline_ms`. `release(watermark)` returns every waiter the watermark
satisfies, `expire(now_ms)` every waiter whose deadline passed: one fsync or one ack releases a
whole group (RocketMQ's GroupCommitRequest, without the per-request polling). No I/O, no clocks,
no threads: the owner serialises calls (the adapters hold a lock around them).
"""

from __future__ import annotations

import heapq
import itertools
from typing import Generic, TypeVar

T = TypeVar("T")
_MISSING = object()


class OffsetWaiters(Generic[T]):
    def __init__(self) -> None:
        self._by_offset: list[tuple[int, int, T]] = []
        self._by_deadline: list[tuple[int, int]] = []
        self._live: dict[int, T] = {}
        self._ids = itertools.count()
        self.max_next_offset = 0

    def __len__(self) -> int:
        return len(self._live)

    def add(self, next_offset: int, deadline_ms: int, token: T) -> None:
        ident = next(self._ids)
        self._live[ident] = token
        heapq.heappush(self._by_offset, (next_offset, ident, token))
        heapq.heappush(self._by_deadline, (deadline_ms, ident))
        if next_offset > self.max_next_offset:
            self.max_next_offset = next_offset

    def release(self, watermark: int) -> list[T]:
        """Waiters whose next_offset is at or below `watermark`, removed."""
        done = []
        heap = self._by_offset
        while heap and heap[0][0] <= watermark:
            _, ident, token = heapq.heappop(heap)
            if self._live.pop(ident, _MISSING) is not _MISSING:
                done.append(token)
        return done

    def expire(self, now_ms: int) -> list[T]:
        """Waiters whose deadline is at or before `now_ms`, removed."""
        done: list[T] = []
        heap = self._by_deadline
        while heap and heap[0][0] <= now_ms:
            _, ident = heapq.heappop(heap)
            token = self._live.pop(ident, _MISSING)
            if token is not _MISSING:
                done.append(token)  # type: ignore[arg-type]  # not the sentinel: a T
        self._compact()
        return done

    def drain(self) -> list[T]:
        """Every waiter, removed (shutdown)."""
        done = list(self._live.values())
        self._live.clear()
        self._by_offset.clear()
        self._by_deadline.clear()
        return done

    def next_deadline(self) -> int | None:
        heap = self._by_deadline
        while heap and heap[0][1] not in self._live:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def _compact(self) -> None:
        heap = self._by_offset
        while heap and heap[0][1] not in self._live:
            heapq.heappop(heap)
