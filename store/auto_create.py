"""`AutoCreateGate`: whether a topic nobody configured may be created by a client's first put,
sans-IO (time is an argument).

Why: auto-creation lets any client that reaches the broker add topics, each with queues and files.
Three limits keep that from filling the disk or the topic table: the switch itself
(autoCreateTopicEnable, off by default when the broker listens beyond loopback), a cap on the
number of topics in the table (autoCreateTopicMaxTopics: auto-creation stops there; operators
create more explicitly), and a rate (autoCreateTopicPerMinute, a token bucket holding a minute's
worth). A refusal is a reason naming the limit and the key that raises it.

Thread-safety: not thread-safe; the store calls it under its topic lock.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class AutoCreateLimits:
    enabled: bool = True
    max_topics: int = 1024
    per_minute: int = 60


class AutoCreateLimit(enum.Enum):
    DISABLED = "autoCreateTopicEnable"
    MAX_TOPICS = "autoCreateTopicMaxTopics"
    RATE = "autoCreateTopicPerMinute"


@dataclass(frozen=True, slots=True)
class AutoCreateRefusal:
    limit: AutoCreateLimit
    reason: str


class AutoCreateGate:
    def __init__(self, limits: AutoCreateLimits) -> None:
        if limits.max_topics < 0 or limits.per_minute < 0:
            raise ValueError("autoCreateTopicMaxTopics and autoCreateTopicPerMinute must not be negative")
        self.limits = limits
        self._tokens = float(limits.per_minute)
        self._last_ms: int | None = None

    def refusal(self, topic: str, topic_count: int, now_ms: int) -> AutoCreateRefusal | None:
        """None when `topic` may be created now (and a token is spent); otherwise why not."""
        limits = self.limits
        if not limits.enabled:
            return AutoCreateRefusal(
                AutoCreateLimit.DISABLED, f"topic {topic} does not exist and autoCreateTopicEnable is false"
            )
        if topic_count >= limits.max_topics:
            return AutoCreateRefusal(
                AutoCreateLimit.MAX_TOPICS,
                (
                    f"topic {topic} does not exist and the broker holds {topic_count} topics, the limit of "
                    f"auto-creation (autoCreateTopicMaxTopics={limits.max_topics}); create it explicitly"
                ),
            )
        self._refill(now_ms)
        if self._tokens < 1:
            return AutoCreateRefusal(
                AutoCreateLimit.RATE,
                (
                    f"topic {topic} does not exist and topics are being auto-created faster than "
                    f"autoCreateTopicPerMinute={limits.per_minute} allows; retry later or create it explicitly"
                ),
            )
        self._tokens -= 1
        return None

    def _refill(self, now_ms: int) -> None:
        last, self._last_ms = self._last_ms, now_ms
        if last is None or now_ms <= last:
            return
        capacity = float(self.limits.per_minute)
        self._tokens = min(capacity, self._tokens + (now_ms - last) * capacity / 60_000)
