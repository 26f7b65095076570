"""`RateLimitedLog`: log lines a peer can provoke at will (refused requests, bad frames, refused
calls), at most `per_interval` per key in each `interval_s`.

The rest of a key's lines in an interval are dropped and counted; the next line let through for
that key says how many were dropped and over how long. A key names a kind of event chosen by the
caller's code (say "remoting refused request"), never text from the peer; at most `max_keys` are
remembered (past that, the oldest is forgotten, so a flood of keys costs bounded memory and at
worst lets a few more lines through).

Thread-safe (one lock around a small dict); time comes from `clock` (monotonic seconds), so tests
pass their own.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(slots=True)
class _Window:
    start: float
    passed: int = 0
    dropped: int = 0
    # Dropped in the windows before this one, not told yet.
    untold: int = 0
    untold_since: float = 0.0


class RateLimitedLog:
    def __init__(
        self,
        logger: logging.Logger,
        *,
        per_interval: int = 5,
        interval_s: float = 60.0,
        max_keys: int = 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if per_interval < 1 or interval_s <= 0 or max_keys < 1:
            raise ValueError("per_interval and max_keys must be at least 1, interval_s positive")
        self.logger = logger
        self._per_interval = per_interval
        self._interval = interval_s
        self._max_keys = max_keys
        self._clock = clock
        self._lock = threading.Lock()
        self._windows: dict[str, _Window] = {}

    def log(self, level: int, key: str, msg: str, *args: object, exc_info: bool = False) -> bool:
        """Log `msg % args` at `level` unless `key` used up its lines this interval; whether it
        was logged."""
        if not self.logger.isEnabledFor(level):
            return False
        with self._lock:
            now = self._clock()
            window = self._window(key, now)
            if window.passed >= self._per_interval:
                window.dropped += 1
                return False
            window.passed += 1
            untold, since = window.untold, window.untold_since
            window.untold = 0
        if untold:
            msg = f"{msg} ({untold} more like it not logged in the last {now - since:.0f} s)"
        self.logger.log(level, msg, *args, exc_info=exc_info)
        return True

    def warning(self, key: str, msg: str, *args: object) -> bool:
        return self.log(logging.WARNING, key, msg, *args)

    def error(self, key: str, msg: str, *args: object, exc_info: bool = False) -> bool:
        return self.log(logging.ERROR, key, msg, *args, exc_info=exc_info)

    def _window(self, key: str, now: float) -> _Window:
        windows = self._windows
        window = windows.get(key)
        if window is not None and now - window.start < self._interval:
            return window
        if window is None:
            if len(windows) >= self._max_keys:
                del windows[next(iter(windows))]
            fresh = _Window(now)
        else:
            fresh = _Window(now, untold=window.untold + window.dropped, untold_since=window.untold_since)
            if not window.untold:
                fresh.untold_since = window.start
            del windows[key]  # re-inserted last: the dict stays ordered by window start
        windows[key] = fresh
        return fresh
