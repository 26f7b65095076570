"""Following the master of a broker group across failovers, sans-IO.

A producer knows several endpoints of one group. `SendAttempts` decides, after each failed
attempt of one send, what to do next:

| outcome of the attempt | next step |
|---|---|
| `NotMasterError` naming another endpoint | retry there at once |
| `NotMasterError` naming the endpoint just tried, or none | rediscover after a backoff |
| `TransportError` (UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED) | rediscover after a backoff |
| `BrokerError` INTERNAL_SERVER_ERROR (the v2 API's "cannot serve this now": e.g. a new master whose in-sync set is still too small) | rediscover after a backoff |
| anything else | give up: raise it |

Rediscovering means asking QueryRoute of the known endpoints (others first) for the broker with
id 0; the adapter reports what it found with `found_master`. The backoff doubles from
`backoff_min_s` to `backoff_max_s`; past `retry_timeout_s` since the send began, the last error is
raised. A send is re-sent as the same request, with the same message ids: a transport failure may
hide a stored message, so delivery is at least once, as with RocketMQ's own clients.

Plain objects taking `now` (seconds, monotonic); not thread-safe (one per send).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from .errors import BrokerError, NotMasterError, RocketStoreError, TransportError

RETRYABLE_TRANSPORT = frozenset({"UNAVAILABLE", "DEADLINE_EXCEEDED", "CANCELLED", "UNKNOWN"})
RETRYABLE_CODES = frozenset({"INTERNAL_SERVER_ERROR"})


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    retry_timeout_s: float = 10.0
    backoff_min_s: float = 0.02
    backoff_max_s: float = 0.1

    def __post_init__(self) -> None:
        if not self.retry_timeout_s >= 0:
            raise ValueError(f"retry_timeout_s must not be negative, got {self.retry_timeout_s!r}")
        if not 0 < self.backoff_min_s <= self.backoff_max_s:
            raise ValueError("backoff_min_s must be positive and at most backoff_max_s")


class Action(enum.Enum):
    RETRY = "RETRY"  # send again to `endpoint` after `delay_s`
    REDISCOVER = "REDISCOVER"  # ask the group for its master after `delay_s`, then send there
    GIVE_UP = "GIVE_UP"  # raise the last error


@dataclass(frozen=True, slots=True)
class Step:
    action: Action
    endpoint: str = ""
    delay_s: float = 0.0


class SendAttempts:
    def __init__(self, policy: RetryPolicy, now: float) -> None:
        self.policy = policy
        self.deadline = now + policy.retry_timeout_s
        self.attempts = 0
        self.last_error: RocketStoreError | None = None
        self._backoff = policy.backoff_min_s

    def _pause(self) -> float:
        delay = self._backoff
        self._backoff = min(self._backoff * 2, self.policy.backoff_max_s)
        return delay

    def failed(self, error: RocketStoreError, tried: str, now: float) -> Step:
        """The attempt at `tried` failed with `error`: what next."""
        self.attempts += 1
        self.last_error = error
        if isinstance(error, NotMasterError):
            if error.master_endpoint and error.master_endpoint != tried:
                return self._within(Step(Action.RETRY, error.master_endpoint), now)
            return self._within(Step(Action.REDISCOVER, delay_s=self._pause()), now)
        if isinstance(error, TransportError) and error.code in RETRYABLE_TRANSPORT:
            return self._within(Step(Action.REDISCOVER, delay_s=self._pause()), now)
        if isinstance(error, BrokerError) and error.code_name in RETRYABLE_CODES:
            return self._within(Step(Action.REDISCOVER, delay_s=self._pause()), now)
        return Step(Action.GIVE_UP)

    def found_master(self, endpoint: str | None, now: float) -> Step:
        """What rediscovery found (None: no broker named a master): send there, or look again."""
        if endpoint:
            return self._within(Step(Action.RETRY, endpoint), now)
        return self._within(Step(Action.REDISCOVER, delay_s=self._pause()), now)

    def _within(self, step: Step, now: float) -> Step:
        if now + step.delay_s > self.deadline:
            return Step(Action.GIVE_UP)
        return step
