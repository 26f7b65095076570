"""StatusFuture: a put outcome's future, settled once from any thread."""

from __future__ import annotations

import gc
import threading
from concurrent.futures import InvalidStateError
from concurrent.futures import TimeoutError as FutureTimeout

import pytest

from store.log.status_future import StatusFuture, settle_all
from store.status import PutMessageStatus

OK = PutMessageStatus.PUT_OK


def test_callbacks_run_once_settled_and_at_once_after():
    future = StatusFuture()
    seen: list[PutMessageStatus] = []
    future.add_done_callback(lambda f: seen.append(f.result()))
    assert not future.done() and seen == []
    future.set_result(OK)
    assert future.done() and seen == [OK]
    future.add_done_callback(lambda f: seen.append(f.result()))
    assert seen == [OK, OK]


def test_a_second_settlement_is_a_bug_and_raises():
    future = StatusFuture()
    future.set_result(PutMessageStatus.FLUSH_DISK_TIMEOUT)
    with pytest.raises(InvalidStateError):
        future.set_result(OK)
    assert future.result() is PutMessageStatus.FLUSH_DISK_TIMEOUT


def test_a_failing_callback_reaches_neither_the_settler_nor_the_other_callbacks():
    future = StatusFuture()
    seen: list[str] = []

    def broken(_: StatusFuture) -> None:
        raise RuntimeError("a waiter's bug")

    future.add_done_callback(broken)
    future.add_done_callback(lambda _: seen.append("second"))
    future.set_result(OK)
    assert seen == ["second"]


def test_result_blocks_until_another_thread_settles_it():
    future = StatusFuture()
    with pytest.raises(FutureTimeout):
        future.result(timeout=0)
    waiting = threading.Event()
    got: list[PutMessageStatus] = []

    def wait() -> None:
        waiting.set()
        got.append(future.result(timeout=30))

    waiter = threading.Thread(target=wait)
    waiter.start()
    assert waiting.wait(30)
    future.set_result(PutMessageStatus.FLUSH_SLAVE_TIMEOUT)
    waiter.join(30)
    assert got == [PutMessageStatus.FLUSH_SLAVE_TIMEOUT]


def test_a_settled_future_keeps_no_callback_alive():
    # A waiter's callback refers back to the waiter, which refers to the future: kept after the
    # settlement, each put would leave a reference cycle for the collector.
    class Waiter:
        def __init__(self, future: StatusFuture) -> None:
            self.future = future
            future.add_done_callback(self.settled)

        def settled(self, _: StatusFuture) -> None:
            pass

    gc.collect()
    gc.disable()
    try:
        future = StatusFuture()
        Waiter(future)
        settle_all([future], OK)
        del future
        assert gc.collect() == 0
    finally:
        gc.enable()
