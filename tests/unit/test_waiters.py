"""OffsetWaiters (store/waiters.py): group release by watermark, expiry by deadline."""

from __future__ import annotations

import itertools

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from store.log.waiters import OffsetWaiters


def waiters(*entries: tuple[int, int, str]) -> OffsetWaiters[str]:
    w: OffsetWaiters[str] = OffsetWaiters()
    for next_offset, deadline_ms, token in entries:
        w.add(next_offset, deadline_ms, token)
    return w


def test_release_by_watermark():
    w = waiters((100, 10, "a"), (200, 10, "b"), (300, 10, "c"))

    assert w.release(99) == []
    assert sorted(w.release(200)) == ["a", "b"]
    assert len(w) == 1
    assert w.release(1000) == ["c"]
    assert len(w) == 0


def test_expire_by_deadline():
    w = waiters((100, 50, "a"), (100, 60, "b"), (100, 70, "c"))

    assert w.expire(49) == []
    assert sorted(w.expire(60)) == ["a", "b"]
    assert w.expire(1000) == ["c"]
    assert len(w) == 0


def test_released_waiter_never_expires():
    w = waiters((100, 50, "a"), (200, 50, "b"))

    assert w.release(100) == ["a"]
    assert w.expire(50) == ["b"]
    assert w.release(10_000) == []
    assert w.expire(10_000) == []


def test_expired_waiter_never_released():
    w = waiters((100, 50, "a"), (200, 60, "b"))

    assert w.expire(50) == ["a"]
    assert w.release(10_000) == ["b"]
    assert w.expire(10_000) == []


def test_next_deadline_skips_removed_waiters():
    w = waiters((100, 70, "a"), (200, 50, "b"), (300, 60, "c"))

    assert w.next_deadline() == 50
    w.release(200)
    assert w.next_deadline() == 60
    w.expire(60)
    assert w.next_deadline() is None


def test_drain_takes_everything():
    w = waiters((100, 50, "a"), (200, 60, "b"))
    w.release(100)

    assert w.drain() == ["b"]
    assert len(w) == 0
    assert w.next_deadline() is None
    assert w.release(10_000) == [] and w.expire(10_000) == []


def test_max_next_offset_is_highest_ever_added():
    w: OffsetWaiters[str] = OffsetWaiters()
    assert w.max_next_offset == 0

    w.add(300, 10, "a")
    w.add(100, 10, "b")
    assert w.max_next_offset == 300
    w.release(300)
    assert w.max_next_offset == 300


def test_equal_offsets_and_deadlines_are_kept_apart():
    w = waiters((100, 50, "a"), (100, 50, "a"), (100, 50, "b"))

    assert sorted(w.release(100)) == ["a", "a", "b"]


def test_none_token_comes_out_too():
    # The class is generic in its token; a None token is still a waiter that must be handed back.
    w: OffsetWaiters[object] = OffsetWaiters()
    w.add(100, 50, None)
    w.add(200, 60, None)
    w.add(300, 70, 0)

    assert w.release(100) == [None]
    assert w.expire(60) == [None]
    assert w.drain() == [0]


class WaitersMachine(RuleBasedStateMachine):
    """Model: a dict of live waiters; every token handed out is recorded exactly once."""

    def __init__(self) -> None:
        super().__init__()
        self.waiters: OffsetWaiters[int] = OffsetWaiters()
        self.live: dict[int, tuple[int, int]] = {}
        self.added: list[int] = []
        self.out: list[int] = []
        self.tokens = itertools.count()
        self.max_offset = 0

    @rule(next_offset=st.integers(0, 1000), deadline_ms=st.integers(0, 1000))
    def add(self, next_offset, deadline_ms):
        token = next(self.tokens)
        self.waiters.add(next_offset, deadline_ms, token)
        self.live[token] = (next_offset, deadline_ms)
        self.added.append(token)
        self.max_offset = max(self.max_offset, next_offset)

    @rule(watermark=st.integers(-1, 1001))
    def release(self, watermark):
        done = self.waiters.release(watermark)
        assert sorted(done) == sorted(t for t, (o, _) in self.live.items() if o <= watermark)
        self._take(done)

    @rule(now_ms=st.integers(-1, 1001))
    def expire(self, now_ms):
        done = self.waiters.expire(now_ms)
        assert sorted(done) == sorted(t for t, (_, d) in self.live.items() if d <= now_ms)
        self._take(done)

    @precondition(lambda self: len(self.live) > 0)
    @rule()
    def drain(self):
        done = self.waiters.drain()
        assert sorted(done) == sorted(self.live)
        self._take(done)

    def _take(self, done):
        for token in done:
            del self.live[token]
        self.out.extend(done)

    @invariant()
    def bookkeeping_matches(self):
        assert len(self.waiters) == len(self.live)
        assert self.waiters.next_deadline() == min((d for _, d in self.live.values()), default=None)
        assert self.waiters.max_next_offset == self.max_offset

    def teardown(self):
        self._take(self.waiters.drain())
        assert sorted(self.out) == self.added


TestWaitersMachine = WaitersMachine.TestCase
TestWaitersMachine.settings = settings(max_examples=150, stateful_step_count=40)
