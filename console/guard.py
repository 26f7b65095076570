"""The console's security decisions, sans-IO: CSRF tokens, what a role may do, how long a session
lasts unused, and throttling of failed log-ins by source address. `web` asks them on every
request; they take values and `now` and return answers.

- CSRF: every session holds a random token; every request that changes something (any method but
  GET and HEAD) must send it back, as the form field `csrf_token` or the `X-CSRF-Token` header,
  and is refused otherwise. The log-in form has one too (a pre-log-in session's).
- Roles: `read-only` sees every page; `admin` also changes things (topics, offsets, resends).
- Throttle: after `max_failures` failed log-ins from one address within `window_ms`, that address
  is refused until the oldest failure leaves the window. Memory is bounded (`max_sources`).

Thread-safety: `LoginThrottle` takes a lock; the rest are pure functions.
"""

from __future__ import annotations

import hmac
import secrets
import threading
from collections import OrderedDict, deque

from .accounts import Role

CSRF_FIELD = "csrf_token"
CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD"})


def new_csrf_token() -> str:
    return secrets.token_urlsafe(32)


def csrf_ok(expected: str | None, sent: str | None) -> bool:
    """Whether a request carries its session's token (compared in constant time)."""
    if not expected or not sent:
        return False
    return hmac.compare_digest(expected.encode(), sent.encode())


def may_change(role: Role | None) -> bool:
    return role is Role.ADMIN


def session_fresh(last_seen_ms: int | None, now_ms: int, idle_ms: int) -> bool:
    return last_seen_ms is not None and 0 <= now_ms - last_seen_ms < idle_ms


class LoginThrottle:
    def __init__(self, max_failures: int = 5, window_ms: int = 60_000, max_sources: int = 10_000) -> None:
        if max_failures < 1 or window_ms <= 0 or max_sources < 1:
            raise ValueError("max_failures, window_ms and max_sources must be positive")
        self.max_failures = max_failures
        self.window_ms = window_ms
        self._max_sources = max_sources
        self._failures: OrderedDict[str, deque[int]] = OrderedDict()
        self._lock = threading.Lock()

    def retry_after_ms(self, source: str, now_ms: int) -> int:
        """0 when `source` may try to log in now, else how long it must wait."""
        with self._lock:
            recent = self._recent(source, now_ms)
            if len(recent) < self.max_failures:
                return 0
            return recent[0] + self.window_ms - now_ms

    def failed(self, source: str, now_ms: int) -> None:
        with self._lock:
            self._recent(source, now_ms).append(now_ms)
            self._failures.move_to_end(source)
            while len(self._failures) > self._max_sources:
                self._failures.popitem(last=False)

    def succeeded(self, source: str) -> None:
        with self._lock:
            self._failures.pop(source, None)

    def _recent(self, source: str, now_ms: int) -> deque[int]:
        recent = self._failures.setdefault(source, deque())
        while recent and recent[0] <= now_ms - self.window_ms:
            recent.popleft()
        return recent
