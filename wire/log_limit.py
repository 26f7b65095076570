"""`LogLimiter`: at most one log line per key (a peer, a topic) per interval, with a count of the
events it held back, so a flood of refusals cannot fill the disk with log lines.

The first event of a key opens a window of `interval_ms` and is logged at once; further events of
that key in the window are only counted. When the window is over, its count is written as one line
("3021 more like this in the last 10 s: <the first line>"), at the next event of any key (windows
close in the order they opened) or at `flush`. At most `max_keys` windows are open: a flood from
many keys closes the oldest early.

Sans-IO in time (a clock is given; the default is monotonic). Thread-safe: one lock around the
table; lines are written outside it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

DEFAULT_INTERVAL_MS = 10_000
DEFAULT_MAX_KEYS = 1024


def _monotonic_ms() -> int:
    # Not store.clock's: the client imports wire and must not load the store package.
    return time.monotonic_ns() // 1_000_000


def peer_host(peer: str) -> str:
    """A gRPC peer string (`ipv4:127.0.0.1:50123`, `ipv6:[::1]:50123`) without its port: one
    client host opening many connections is one key."""
    head, sep, tail = peer.rpartition(":")
    return head if sep and tail.isdigit() else peer


@dataclass(slots=True)
class _Window:
    opened_ms: int
    line: str  # the line that opened it, repeated in its summary
    held: int = 0


class LogLimiter:
    def __init__(
        self,
        logger: logging.Logger,
        level: int = logging.WARNING,
        *,
        interval_ms: int = DEFAULT_INTERVAL_MS,
        max_keys: int = DEFAULT_MAX_KEYS,
        clock_ms: Callable[[], int] = _monotonic_ms,
    ) -> None:
        if interval_ms <= 0 or max_keys <= 0:
            raise ValueError("interval_ms and max_keys must be positive")
        self._logger = logger
        self._level = level
        self._interval_ms = interval_ms
        self._max_keys = max_keys
        self._clock = clock_ms
        # Ordered by when each window opened: the ones that are over are at the front.
        self._windows: OrderedDict[str, _Window] = OrderedDict()
        self._lock = threading.Lock()

    def log(self, key: str, message: str, *args: object) -> bool:
        """Log `message % args` for `key` unless a line of that key went out within the interval
        (then it is only counted). True when the line was written."""
        now = self._clock()
        with self._lock:
            owed = self._expired(now)
            window = self._windows.get(key)
            if window is not None:
                window.held += 1
                line = None
            else:
                line = message % args if args else message
                self._windows[key] = _Window(now, line)
                while len(self._windows) > self._max_keys:
                    self._owe(owed, self._windows.popitem(last=False)[1], now)
        self._write(owed)
        if line is not None:
            self._logger.log(self._level, "%s", line)
        return line is not None

    def flush(self) -> None:
        """Write the counts owed by keys whose interval is over."""
        with self._lock:
            owed = self._expired(self._clock())
        self._write(owed)

    def _expired(self, now: int) -> list[str]:
        """Close the windows that are over; the summary lines they owe."""
        owed: list[str] = []
        windows = self._windows
        while windows:
            window = next(iter(windows.values()))
            if now - window.opened_ms < self._interval_ms:
                break
            self._owe(owed, windows.popitem(last=False)[1], now)
        return owed

    @staticmethod
    def _owe(owed: list[str], window: _Window, now: int) -> None:
        if window.held:
            seconds = (now - window.opened_ms) / 1000
            owed.append(f"{window.held} more like this in the last {seconds:.0f} s: {window.line}")

    def _write(self, owed: list[str]) -> None:
        for line in owed:
            self._logger.log(self._level, "%s", line)
