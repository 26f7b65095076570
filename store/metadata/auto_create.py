"""`AutoCreateGate`: whether a topic nobody configured may be created now, sans-IO (time is an
argument).

Why: auto-creation lets any client that reaches the broker add topics, each with queues and files.
Three limits keep that from filling the disk or the topic table: the switch itself
(autoCreateTopicEnable, off by default when the broker listens beyond loopback), a cap on the
number of topics in the table (autoCreateTopicMaxTopics: auto-creation stops there; operators
create more explicitly), and a rate (autoCreateTopicPerMinute, a token bucket holding a minute's
worth). A refusal is a reason naming the limit and the key that raises it.

Consumer groups' retry (`%RETRY%`) and dead-letter (`%DLQ%`) topics are topics a client causes
too: a consumer that never acks makes the broker create one per group and topic it pops. They have
a gate of their own (`retry=True`: autoCreateRetryTopicMaxTopics, autoCreateRetryTopicPerMinute),
counted apart from the other topics, so neither kind can use up the other's room; the broker
creates them whether or not autoCreateTopicEnable is on (consumption needs them).

Each gate counts its refusals by limit (for metrics). Thread-safety: not thread-safe; the store
calls it under its topic lock.
"""

from __future__ import annotations

import enum
from collections import Counter
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
    RETRY_MAX_TOPICS = "autoCreateRetryTopicMaxTopics"
    RETRY_RATE = "autoCreateRetryTopicPerMinute"

    @property
    def is_rate(self) -> bool:
        """A limit that lets the same topic through later (the client should retry)."""
        return self in (AutoCreateLimit.RATE, AutoCreateLimit.RETRY_RATE)


@dataclass(frozen=True, slots=True)
class AutoCreateRefusal:
    limit: AutoCreateLimit
    reason: str


class AutoCreateGate:
    def __init__(self, limits: AutoCreateLimits, *, retry: bool = False) -> None:
        if limits.max_topics < 0 or limits.per_minute < 0:
            raise ValueError(f"{self._keys(retry)} must not be negative")
        self.limits = limits
        self._retry = retry
        self._tokens = float(limits.per_minute)
        self._last_ms: int | None = None
        self.refused: Counter[AutoCreateLimit] = Counter()

    @staticmethod
    def _keys(retry: bool) -> str:
        if retry:
            return "autoCreateRetryTopicMaxTopics and autoCreateRetryTopicPerMinute"
        return "autoCreateTopicMaxTopics and autoCreateTopicPerMinute"

    def switched_off(self, topic: str) -> AutoCreateRefusal | None:
        """The refusal of the switch (autoCreateTopicEnable), counted; None when it is on."""
        if self.limits.enabled:
            return None
        return self._refuse(
            AutoCreateLimit.DISABLED, f"topic {topic} does not exist and autoCreateTopicEnable is false"
        )

    def refusal(self, topic: str, topic_count: int, now_ms: int) -> AutoCreateRefusal | None:
        """None when `topic` may be created now (and a token is spent); otherwise why not.
        `topic_count`: the topics of this gate's kind in the table."""
        off = self.switched_off(topic)
        if off is not None:
            return off
        limits = self.limits
        if self._retry:
            kind, cap, rate = (
                "retry and dead-letter topics",
                AutoCreateLimit.RETRY_MAX_TOPICS,
                AutoCreateLimit.RETRY_RATE,
            )
        else:
            kind, cap, rate = "topics", AutoCreateLimit.MAX_TOPICS, AutoCreateLimit.RATE
        if topic_count >= limits.max_topics:
            return self._refuse(
                cap,
                f"topic {topic} does not exist and the broker holds {topic_count} {kind}, the limit of "
                f"auto-creation ({cap.value}={limits.max_topics}); create it explicitly",
            )
        self._refill(now_ms)
        if self._tokens < 1:
            return self._refuse(
                rate,
                f"topic {topic} does not exist and {kind} are being auto-created faster than "
                f"{rate.value}={limits.per_minute} allows; retry later or create it explicitly",
            )
        self._tokens -= 1
        return None

    def _refuse(self, limit: AutoCreateLimit, reason: str) -> AutoCreateRefusal:
        self.refused[limit] += 1
        return AutoCreateRefusal(limit, reason)

    def _refill(self, now_ms: int) -> None:
        last, self._last_ms = self._last_ms, now_ms
        if last is None or now_ms <= last:
            return
        capacity = float(self.limits.per_minute)
        self._tokens = min(capacity, self._tokens + (now_ms - last) * capacity / 60_000)
