"""`Sampler`: the thread that polls the fleet every `interval_ms` into a `History`, and the one
place pages read the latest snapshot and the history from.

Events (a failover, a broker that stops answering) are logged as they are seen. A poll that
fails unexpectedly is logged and the next one runs on time; the thread ends at `stop()`.

Thread-safety: the history is read and written under one lock; `poll_now` may be called from any
thread (a page that just changed something wants the state after it).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TypeVar

from .fleet import Fleet, Snapshot
from .history import History

log = logging.getLogger("rocketstore.console.events")
# Events that need nobody's attention.
CALM = frozenset({"start", "back"})
T = TypeVar("T")


class Sampler:
    def __init__(self, fleet: Fleet, history: History, interval_ms: int) -> None:
        self.fleet = fleet
        self.interval_ms = interval_ms
        self._history = history
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="console-sampler", daemon=True)

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)

    def poll_now(self) -> Snapshot:
        snapshot = self.fleet.poll()
        with self._lock:
            for event in self._history.record(snapshot):
                log.log(logging.INFO if event.kind in CALM else logging.WARNING, "%s: %s", event.group, event.text)
        return snapshot

    def latest(self) -> Snapshot:
        """The latest snapshot, polling first when there is none yet."""
        with self._lock:
            latest = self._history.latest
        return latest if latest is not None else self.poll_now()

    def read(self, reader: Callable[[History], T]) -> T:
        with self._lock:
            return reader(self._history)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll_now()
            except Exception:
                log.exception("polling the brokers failed")
            self._stop.wait(self.interval_ms / 1000)
