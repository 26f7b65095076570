"""`ArrivalWatch`: wakes long-polling pulls of one event loop when a message becomes readable in
the queue they wait on.

The store's dispatch thread calls `on_arrival` for every message it makes readable; a pull that
found nothing registers an `asyncio.Event` for its (topic, queue id) with `watch` and waits on it.
A burst of arrivals in one queue costs the loop one callback (a wake already scheduled is not
scheduled again).

Thread-safety: `on_arrival` from any thread (it reads a dict and schedules a callback on the
loop); everything else on the loop bound with `bind_loop`.
"""

from __future__ import annotations

import asyncio

Key = tuple[str, int]


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
        for event in self._watchers.get(key, ()):
            event.set()

    @property
    def waiting(self) -> int:
        """How many waits are registered now (a pop receive counts once per queue it watches)."""
        return sum(len(events) for events in self._watchers.values())

    def watch(self, key: Key) -> asyncio.Event:
        event = asyncio.Event()
        self._watchers.setdefault(key, set()).add(event)
        return event

    def watch_all(self, keys: list[Key]) -> asyncio.Event:
        """One event set by an arrival in any of `keys` (a pop receive waits on a topic's queues)."""
        event = asyncio.Event()
        for key in keys:
            self._watchers.setdefault(key, set()).add(event)
        return event

    def unwatch_all(self, keys: list[Key], event: asyncio.Event) -> None:
        for key in keys:
            self.unwatch(key, event)

    def unwatch(self, key: Key, event: asyncio.Event) -> None:
        events = self._watchers.get(key)
        if events is not None:
            events.discard(event)
            if not events:
                del self._watchers[key]
