"""A put's wait on an event loop, without a coroutine (`PutWait`): the flush and replica outcomes
of a put that is in the log (each a status, or a future of one, `StatusFuture`, settled on the flush
thread or wherever the slaves' acknowledgements are read), and a callback called once on the
loop's thread with the put's result.

The loop is woken once per put, when the last outcome settles, not once per outcome (each wake-up
from another thread is a hand-off through the loop's self-pipe and a GIL round trip); not at all
when that last outcome settles on the loop's own thread (a slave's ack read by a replication
stream on the same loop), where the callback runs there and then. Each outcome's wait ends at its
own deadline from the put's start (syncFlushTimeout, slaveTimeout): a timer on the loop at the
nearest one; past it, the outcome still pending answers its timeout status, and every settlement
after that wakes the loop at once for the other one. An outcome that ends with an exception (a
bug, or a flush's I/O error) reaches the callback as that exception.

`PutPath.put_then` is this with the append in front, for a caller that has a callback per put
and no task to resume (the broker core's `Sender`); `PutPath.put_async` awaits one loop future
that the callback settles.

Thread-safety: made and finished on the loop's thread; the outcomes' done callbacks run on any
thread and touch only the counter, under its lock.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from ..status import PutMessageStatus
from .status_future import PendingStatus

log = logging.getLogger(__name__)

Outcome = PutMessageStatus | PendingStatus
T = TypeVar("T")


class PutWait:
    __slots__ = ("_outcomes", "_finish", "_loop", "_owner", "_lock", "_left", "_late", "_timer", "_done")

    def __init__(
        self,
        outcomes: tuple[tuple[Outcome, int, PutMessageStatus], ...],
        finish: Callable[[tuple[PutMessageStatus, ...] | BaseException], None],
    ) -> None:
        """`outcomes`: (outcome, deadline in perf_counter_ns, status on timeout) each; `finish` is
        called once with their statuses in that order, or with the exception one ended with. Call
        on the loop's thread; `finish` may run before this returns (nothing left to wait for)."""
        self._outcomes = outcomes
        self._finish = finish
        self._done = False
        self._timer: asyncio.TimerHandle | None = None
        waiting = [o for o, _, _ in outcomes if not isinstance(o, PutMessageStatus) and not o.done()]
        if not waiting:
            self._check(0)
            return
        self._loop = asyncio.get_running_loop()
        self._owner = threading.get_ident()
        self._lock = threading.Lock()
        self._left = len(waiting)
        self._late = False
        self._arm(time.perf_counter_ns())
        for outcome in waiting:
            outcome.add_done_callback(self._settled)

    def cancel(self) -> None:
        """On the loop's thread: nobody waits for the result any more (its task was cancelled)."""
        self._release()

    # -- the outcomes' side (any thread) --------------------------------------------------------

    def _settled(self, _: PendingStatus) -> None:
        with self._lock:
            self._left -= 1
            due = self._left == 0 or self._late
        if not due:
            return
        if threading.get_ident() == self._owner:
            self._check(0)
            return
        try:
            self._loop.call_soon_threadsafe(self._check, 0)
        except RuntimeError:  # the loop closed: nobody awaits the answer any more
            pass

    # -- the loop's side ------------------------------------------------------------------------

    def _arm(self, now_ns: int) -> None:
        """The timer at the nearest deadline of an outcome still pending."""
        deadline = min(d for o, d, _ in self._outcomes if not isinstance(o, PutMessageStatus) and not o.done())
        self._timer = self._loop.call_later(max(0, deadline - now_ns) / 1e9, self._deadline, deadline)

    def _deadline(self, deadline_ns: int) -> None:
        with self._lock:
            self._late = True
        # The timer's clock and perf_counter may differ by a rounding: the deadline it was set
        # for has passed.
        self._check(deadline_ns)

    def _check(self, at_least_ns: int) -> None:
        if self._done:
            return
        now = max(time.perf_counter_ns(), at_least_ns)
        statuses = []
        try:
            for outcome, deadline, on_timeout in self._outcomes:
                if isinstance(outcome, PutMessageStatus):
                    statuses.append(outcome)
                elif outcome.done():
                    statuses.append(outcome.result())
                elif now >= deadline:
                    statuses.append(on_timeout)
                else:
                    if self._timer is not None:
                        self._timer.cancel()
                    self._arm(now)
                    return
        except Exception as exc:  # noqa: BLE001 - the outcome's error is the put's
            self._end(exc)
            return
        self._end(tuple(statuses))

    def _end(self, value: tuple[PutMessageStatus, ...] | BaseException) -> None:
        finish = self._finish
        self._release()
        answer(finish, value)

    def _release(self) -> None:
        """Done: drop what refers back to this wait. An outcome still pending at a deadline keeps
        its done callback (this wait's method) until it settles, and the timer refers to this
        wait too; kept, each put's outcomes, result and callback would live on in a reference
        cycle until a garbage collector pass, whose passes then paused the loop for up to 8 ms at
        8 clients (p99 2.7x)."""
        self._done = True
        self._outcomes = ()
        self._finish = _finished
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def _finished(_: object) -> None:
    """A finished wait's callback: never called (`_check` returns first)."""


def answer(then: Callable[[T], None], value: T) -> None:
    """`then(value)`, its failure logged: run from an outcome's settlement (a slave's ack read on
    the loop) or from inside a put, a bug in the answer must reach neither the replication stream
    nor the put, which would answer a second time."""
    try:
        then(value)
    except Exception:
        log.exception("answering a put failed")
