"""Caller-runs group commit on a troubled disk (issue 33 item 4): after a slow flush, a caller
(a master's replication stream) hands its flushes to the flush thread instead of waiting on the
disk itself, until that thread's flushes are quick again; every put is still released by a flush
that covered it."""

from __future__ import annotations

import threading

from store import PutMessageStatus
from store.log.flush import GroupCommitService
from store.log.status_future import StatusFuture


class FakeLog:
    """The parts of a MappedFileQueue the service uses; each flush advances a fake monotonic
    clock by `flush_s` and records the thread that ran it."""

    def __init__(self) -> None:
        self.max_offset = 0
        self.flushed_where = 0
        self.flush_s = 0.001
        self.now_s = 100.0
        self.flushed_by: list[str] = []

    def append(self, size: int) -> int:
        self.max_offset += size
        return self.max_offset

    def flush_to(self, target: int) -> None:
        self.now_s += self.flush_s
        self.flushed_where = max(self.flushed_where, target)
        self.flushed_by.append(threading.current_thread().name)

    def monotonic(self) -> float:
        return self.now_s


class CountingWakes(GroupCommitService):
    wakes = 0

    def wakeup(self) -> None:
        self.wakes += 1
        super().wakeup()


def service(log: FakeLog) -> CountingWakes:
    return CountingWakes(
        log,  # type: ignore[arg-type]
        timeout_ms=5_000,
        on_flushed=lambda offset: None,
        on_error=lambda exc: None,
        clock=lambda: 1_000,
        slow_flush_s=0.1,
        monotonic=log.monotonic,
    )


def put(log: FakeLog, svc: GroupCommitService) -> StatusFuture:
    return svc.request(log.append(100), 1_000, wake=False)


def test_after_a_slow_flush_the_caller_hands_flushes_to_the_flush_thread_until_they_are_quick():
    log = FakeLog()
    svc = service(log)
    first = put(log, svc)
    assert svc.flush_here() and first.result(0) is PutMessageStatus.PUT_OK  # a quick disk: here

    log.flush_s = 2.0  # the disk stalls during the caller's next flush
    second = put(log, svc)
    assert svc.flush_here() and second.result(0) is PutMessageStatus.PUT_OK

    third = put(log, svc)
    assert not svc.flush_here(), "the caller waited on a slow disk again"
    assert not third.done() and log.flushed_where < log.max_offset
    assert svc.wakes == 1, "the flush thread was not woken to take the flush"

    svc.run_once()  # the flush thread's round, still slow: the caller keeps handing over
    assert third.result(0) is PutMessageStatus.PUT_OK
    fourth = put(log, svc)
    assert not svc.flush_here() and not fourth.done()

    log.flush_s = 0.001  # the disk recovers: the flush thread's quick round gives the flush back
    svc.run_once()
    assert fourth.result(0) is PutMessageStatus.PUT_OK
    fifth = put(log, svc)
    assert svc.flush_here() and fifth.result(0) is PutMessageStatus.PUT_OK
    assert svc.wakes == 2 and len(log.flushed_by) == 5


def test_a_put_is_never_released_by_a_flush_that_did_not_cover_it():
    log = FakeLog()
    svc = service(log)
    log.flush_s = 1.0
    first = put(log, svc)
    assert svc.flush_here()  # slow
    late = put(log, svc)  # appended after that flush
    assert not svc.flush_here()
    assert first.result(0) is PutMessageStatus.PUT_OK and not late.done()
    svc.run_once()
    assert late.result(0) is PutMessageStatus.PUT_OK and log.flushed_where == log.max_offset


def test_a_caller_with_its_own_bound_hands_over_a_flush_slower_than_that_bound():
    # An event loop (a slave's stream) flushes itself only while flushes take at most its bound,
    # far below the troubled-disk threshold the flush thread's callers share.
    log = FakeLog()
    svc = service(log)
    log.flush_s = 0.005  # slower than the loop's 2 ms, quick for everyone else
    first = put(log, svc)
    assert svc.flush_here(0.002) and first.result(0) is PutMessageStatus.PUT_OK

    second = put(log, svc)
    assert not svc.flush_here(0.002), "the loop waited on a 5 ms flush again"
    assert not second.done() and svc.wakes == 1
    assert svc.flush_here() and second.result(0) is PutMessageStatus.PUT_OK  # no bound: here

    log.flush_s = 0.001  # quick again: the flush thread's round gives the flush back to the loop
    third = put(log, svc)
    svc.run_once()
    assert third.result(0) is PutMessageStatus.PUT_OK
    fourth = put(log, svc)
    assert svc.flush_here(0.002) and fourth.result(0) is PutMessageStatus.PUT_OK
    assert svc.wakes == 1 and len(log.flushed_by) == 4


class HeldLog(FakeLog):
    """A disk whose flush waits, once begun, until the test lets it end."""

    def __init__(self) -> None:
        super().__init__()
        self.begun = threading.Event()
        self.end = threading.Event()

    def flush_to(self, target: int) -> None:
        self.begun.set()
        assert self.end.wait(30), "the test never let the flush end"
        super().flush_to(target)


class ParkedService(CountingWakes):
    """Idles until woken (no idle timeout of its own), and says when it is idle."""

    idle = threading.Event()

    def wait_for_running(self, timeout_s: float) -> None:
        self.idle.set()
        super().wait_for_running(30)


def test_a_hand_over_waits_for_the_flush_thread_to_begin_the_flush_not_to_end_it():
    # A master's stream on an event loop hands the flush of the chunk it sends next to the flush
    # thread and lets it begin first: its fdatasync then runs beside the send.
    log = HeldLog()
    svc = ParkedService(
        log,  # type: ignore[arg-type]
        timeout_ms=5_000,
        on_flushed=lambda offset: None,
        on_error=lambda exc: None,
        clock=lambda: 1_000,
        monotonic=log.monotonic,
    )
    svc.idle = threading.Event()
    svc.start()
    try:
        assert svc.idle.wait(30)
        waiting = put(log, svc)  # registered without a wake-up, as a put that a stream flushes
        assert svc.hand_over(30), "the flush thread did not begin the flush"
        assert log.begun.is_set() and not waiting.done(), "the hand-over waited for the flush to end"
        late = put(log, svc)
        assert not svc.hand_over(30), "with a flush under way the hand-over returns at once"
        log.end.set()
        assert waiting.result(30) is PutMessageStatus.PUT_OK and late.result(30) is PutMessageStatus.PUT_OK
        assert set(log.flushed_by) == {"flush-group-commit"}
    finally:
        log.end.set()
        svc.stop()
    assert not svc.hand_over(0.001), "no thread runs the service: the bound ends the wait"
