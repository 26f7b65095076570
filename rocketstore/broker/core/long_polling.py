"""Long polling, once for every reader of the core (pulls, pop receives): a read that finds
nothing waits for a message to arrive in the queues it reads, until a deadline.

`ArrivalWatch` wakes the waits of one event loop: the store's dispatch thread calls `on_arrival`
for every message it makes readable, and a wait registers an `asyncio.Event` for the (topic, queue
id) keys it reads. A burst of arrivals in one queue costs the loop one callback (a wake already
scheduled is not scheduled again). Each front end has its own watch on its own loop.

`wake` wakes the waits on some keys from the loop itself, for a change that is not an arrival
(a pop ack or a new invisible time that makes a message deliverable).

`poll` is the loop itself: read; when the read says WAIT, watch the keys and read again (an
arrival between the first read and the watch is not missed), then wait for an arrival or the
deadline (or an earlier wake the reader asks for) and read again. AGAIN reads again at once (a
read that moved past messages a filter dropped). The read decides what each outcome means; `poll`
only waits.

`long_poll_seconds` is how long a wait may last: what the client asks, within the broker's
longPollingMaxMs, ending `DEADLINE_MARGIN_S` before the call's own deadline when it has one.

Read your writes: a read that finds nothing where a put was already given a queue offset the
dispatcher has not queued yet says PENDING. `poll` then waits for that dispatch (an arrival wakes
it like a long poll) even when the client asked for no long poll, for at most
`dispatch_wait_seconds`: `DISPATCH_WAIT_MAX_S`, ending `DEADLINE_MARGIN_S` before the call's
deadline. A read past what was assigned answers at once as before.

Thread-safety: `ArrivalWatch.on_arrival` from any thread (it reads a dict and schedules a
callback on the loop); everything else on the loop bound with `bind_loop`.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

Key = tuple[str, int]
T = TypeVar("T")

# A long poll answers this long before the client's deadline, so the answer beats the deadline.
DEADLINE_MARGIN_S = 0.5
# How long a read waits at most for the dispatch of a message whose put was already given its
# queue offset (dispatch trails the put by far less on a healthy broker).
DISPATCH_WAIT_MAX_S = 1.0


def long_poll_seconds(wanted_ms: int, max_ms: int, remaining_s: float | None) -> float:
    """How long a long poll waits: what the client wants, within the broker's maximum, and ending
    DEADLINE_MARGIN_S before the call's deadline (`remaining_s`) so the answer still arrives."""
    wait_s = max(0.0, min(wanted_ms, max_ms) / 1000)
    if remaining_s is not None:
        wait_s = min(wait_s, max(0.0, remaining_s - DEADLINE_MARGIN_S))
    return wait_s


def dispatch_wait_seconds(remaining_s: float | None) -> float:
    """How long a read waits for an assigned message's dispatch: DISPATCH_WAIT_MAX_S, ending
    DEADLINE_MARGIN_S before the call's deadline (`remaining_s`) when it has one."""
    return long_poll_seconds(int(DISPATCH_WAIT_MAX_S * 1000), int(DISPATCH_WAIT_MAX_S * 1000), remaining_s)


class ArrivalWatch:
    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._watchers: dict[Key, set[asyncio.Event]] = {}
        self._wake_scheduled: set[Key] = set()

    def bind_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def on_arrival(self, request) -> None:
        """Store dispatch thread: a message became readable in (request.topic, request.queue_id)."""
        key = (request.topic, request.queue_id)
        loop = self._loop
        if loop is None or key not in self._watchers or key in self._wake_scheduled:
            return
        self._wake_scheduled.add(key)
        try:
            loop.call_soon_threadsafe(self._wake, key)
        except RuntimeError:  # the loop closed: nobody is waiting any more
            self._wake_scheduled.discard(key)

    def _wake(self, key: Key) -> None:
        self._wake_scheduled.discard(key)
        self.wake((key,))

    def wake(self, keys: Sequence[Key]) -> None:
        """On the loop: the waits on `keys` read again now (something other than an arrival may
        have given them a message: a pop ack releasing a FIFO group's next one)."""
        for key in keys:
            for event in self._watchers.get(key, ()):
                event.set()

    @property
    def waiting(self) -> int:
        """How many waits are registered now (a pop receive counts once per queue it watches)."""
        return sum(len(events) for events in self._watchers.values())

    def watch_all(self, keys: Sequence[Key]) -> asyncio.Event:
        """One event set by an arrival in any of `keys`."""
        event = asyncio.Event()
        for key in keys:
            self._watchers.setdefault(key, set()).add(event)
        return event

    def unwatch_all(self, keys: Sequence[Key], event: asyncio.Event) -> None:
        for key in keys:
            events = self._watchers.get(key)
            if events is not None:
                events.discard(event)
                if not events:
                    del self._watchers[key]


class Step(enum.Enum):
    """What a read in a long poll says."""

    DONE = "DONE"  # answer with this read's value
    AGAIN = "AGAIN"  # read again at once
    WAIT = "WAIT"  # nothing yet: wait for an arrival (or answer this value at the deadline)
    # Nothing yet, but a put was given an offset read here: as WAIT, waiting at least the
    # dispatch wait even when the long poll is shorter.
    PENDING = "PENDING"


class Read(Generic[T]):
    """A read's outcome in a long poll: the step and the value to answer with."""

    __slots__ = ("step", "value")

    def __init__(self, step: Step, value: T) -> None:
        self.step = step
        self.value = value


async def poll(
    watch: ArrivalWatch,
    keys: Sequence[Key],
    wait_s: float,
    read: Callable[[bool], Awaitable[Read[T]]],
    wake_in_s: Callable[[], float | None] | None = None,
    pending_wait_s: float = 0.0,
) -> T:
    """Read until a read is DONE or `wait_s` passed (`pending_wait_s`, when longer, while the
    read says PENDING); `read(waited)` is told whether a wait came before it. `wake_in_s` may
    shorten a wait (a pop's in-flight message becoming visible)."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    deadline = start + wait_s
    pending_deadline = start + max(wait_s, pending_wait_s)
    event: asyncio.Event | None = None
    waited = False
    try:
        while True:
            if event is not None:
                event.clear()
            outcome = await read(waited)
            if outcome.step is Step.DONE:
                return outcome.value
            if outcome.step is Step.AGAIN:
                continue
            remaining = (pending_deadline if outcome.step is Step.PENDING else deadline) - loop.time()
            if remaining <= 0:
                return outcome.value
            if event is None:
                event = watch.watch_all(keys)  # watch, then read again: no arrival is missed
                continue
            sooner = wake_in_s() if wake_in_s is not None else None
            if sooner is not None:
                remaining = min(remaining, max(0.0, sooner))
            try:
                await asyncio.wait_for(event.wait(), remaining)
            except asyncio.TimeoutError:
                pass
            waited = True
    finally:
        if event is not None:
            watch.unwatch_all(keys, event)
