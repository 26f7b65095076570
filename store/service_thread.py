"""A named background thread that runs `run_once` until stopped, woken early by `wakeup`
(RocketMQ's ServiceThread). Subclasses decide what one round does and how long to idle.

A round that raises is logged once per state change: the first failure with its traceback, then
nothing while the same failure repeats (a full disk would otherwise get a traceback ten times a
second, written to the same full disk), a new line when the failure changes, and one line with the
count of failed rounds when a round succeeds again.

Thread-safety: `wakeup`, `stop` and `wait_round` may be called from any thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class ServiceThread:
    name = "service"

    def __init__(self) -> None:
        self._wake = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._rounds = 0
        self._round_done = threading.Condition()
        self._failure = ""  # the failure of the last round ("" after a good one)
        self._failed_rounds = 0

    @property
    def stopping(self) -> bool:
        return self._stopping

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def wakeup(self) -> None:
        if not self._wake.is_set():
            self._wake.set()

    def wait_for_running(self, timeout_s: float) -> None:
        self._wake.wait(timeout_s)
        self._wake.clear()

    def stop(self, timeout_s: float = 30.0) -> None:
        self._stopping = True
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                log.error("%s did not stop within %.0f s", self.name, timeout_s)

    def wait_round(self, timeout_s: float) -> bool:
        """Wake the service and block until it finishes a round that began after this call
        (so whatever the caller did before is seen by it). False at the timeout or once stopped."""
        with self._round_done:
            target = self._rounds + 2  # the round under way may have begun before the call
            self.wakeup()
            return self._round_done.wait_for(lambda: self._rounds >= target or self._stopping, timeout_s) and (
                self._rounds >= target
            )

    def guarded_round(self) -> bool:
        """One `run_once`, its failure logged as the module docstring says; False when it failed."""
        try:
            self.run_once()
        except Exception as exc:
            failure = f"{type(exc).__name__}: {exc}"
            self._failed_rounds += 1
            if failure != self._failure:
                log.exception(
                    "%s failed a round; it keeps retrying and logs again when the failure changes or ends", self.name
                )
                self._failure = failure
            return False
        if self._failure:
            log.info(
                "%s works again after %d failed round(s) (last: %s)", self.name, self._failed_rounds, self._failure
            )
            self._failure, self._failed_rounds = "", 0
        return True

    def _run(self) -> None:
        while not self._stopping:
            if not self.guarded_round():
                self.wait_for_running(0.1)
            with self._round_done:
                self._rounds += 1
                self._round_done.notify_all()
        self.on_stop()
        with self._round_done:
            self._round_done.notify_all()

    def run_once(self) -> None:
        raise NotImplementedError

    def on_stop(self) -> None:
        """Last words in the thread after the loop ends."""


class PagedService(ServiceThread):
    """A round every `interval_ms` that works on at least `least_pages` dirty pages, and on every
    dirty page once per `thorough_interval_ms` (RocketMQ's flush and commit services)."""

    def __init__(self, interval_ms: int, least_pages: int, thorough_interval_ms: int, clock: Callable[[], int]) -> None:
        super().__init__()
        self._interval_s = interval_ms / 1000
        self._least_pages = least_pages
        self._thorough_interval_ms = thorough_interval_ms
        self._clock = clock
        self._last_thorough_ms = clock()

    def _next_round_least_pages(self) -> int:
        """Wait for the next round; the least pages it works on (0: everything)."""
        self.wait_for_running(self._interval_s)
        now = self._clock()
        # A clock set back restarts the interval; else the tail pages would wait as long as the
        # step was before a round flushed them.
        if now < self._last_thorough_ms or now - self._last_thorough_ms >= self._thorough_interval_ms:
            self._last_thorough_ms = now
            return 0
        return self._least_pages
