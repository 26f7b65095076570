"""Following the master of a broker group across failovers, sans-IO.

A producer knows several endpoints of one group (`KnownEndpoints`, shared by its sends) and, for
each send, keeps a `SendAttempts` that says what to do after each attempt:

| outcome of the attempt | next step |
|---|---|
| success | RETURN (the endpoint becomes the producer's current one) |
| `NotMasterError` naming another endpoint | RETRY there at once (after a pause if this send was already sent there since its last pause) |
| `NotMasterError` naming the endpoint just tried, or none, or one that does not parse | REDISCOVER after a pause |
| `TransportError` UNAVAILABLE, DEADLINE_EXCEEDED, or CANCELLED by the peer | REDISCOVER after a pause |
| a gRPC UNKNOWN/INTERNAL status saying the connection dropped (reset, stream removed) | REDISCOVER after a pause |
| `BrokerError` INTERNAL_SERVER_ERROR (the v2 API's "cannot serve this now": e.g. a new master whose in-sync set is still too small) | REDISCOVER after a pause |
| anything else, including a `PartialBatchError` (part of the batch is stored) and a call this process cancelled | GIVE_UP: raise it |

Until some broker of the group has answered the producer once (`KnownEndpoints.reached`), a
connection that cannot be made (`TransportError` UNAVAILABLE with gRPC's "failed to connect":
refused, or the endpoint is another kind of port) is no failover in progress but a broker that
is not there: each other known
endpoint is tried once at once, and when none answers the send fails then, not after the retry
budget, unless the policy says `wait_for_broker` (a producer started before its brokers).

A retryable failure while another send of the same producer has meanwhile found a different
master skips the rediscovery: the send goes straight there (once per pause). REDISCOVER carries
the endpoints to ask QueryRoute of, in order (the others first, the failed one last); the adapter
reports the broker id 0 endpoint it found (or None) with `found_master`, which joins the known
list and is tried next. Pauses double from `backoff_min_s` to `backoff_max_s`; a step that would
start past `retry_timeout_s` after the send began becomes GIVE_UP with the last error and the
number of attempts. The budget bounds when attempts start; each attempt is bounded by the
caller's own RPC deadline.

The send is re-sent as the same request, with the same message ids: a transport failure may hide
a stored message, so delivery is at least once, as with RocketMQ's own clients.

Thread-safety: `RetryPolicy` and `Step` are immutable; `KnownEndpoints` takes a lock (a blocking
producer shares it between threads); a `SendAttempts` belongs to one send.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from .endpoint import Endpoint, parse_endpoint
from .errors import BrokerError, EndpointError, NotMasterError, PartialBatchError, RocketStoreError, TransportError

RETRYABLE_TRANSPORT = frozenset({"UNAVAILABLE", "DEADLINE_EXCEEDED", "CANCELLED"})
# gRPC's own words for a call this process cancelled (a closed channel, a cancelled future).
LOCAL_CANCELLATION = ("Locally cancelled", "Channel closed")
# gRPC statuses (not messaging codes) that can stand for a dropped connection, and the details
# that say so: only those are retried, the rest are the broker's bugs.
DROPPED_CONNECTION_CODES = frozenset({"UNKNOWN", "INTERNAL"})
DROPPED_CONNECTION_DETAILS = ("connection reset", "stream removed", "socket closed", "broken pipe", "rst_stream")
RETRYABLE_CODES = frozenset({"INTERNAL_SERVER_ERROR"})


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How long one send may keep trying (`retry_timeout_s`; 0: the first failure is raised) and
    the pauses before rediscovering the master (doubling from `backoff_min_s` to `backoff_max_s`;
    the ceiling is low because an election takes a few hundred ms)."""

    retry_timeout_s: float = 10.0
    backoff_min_s: float = 0.02
    backoff_max_s: float = 0.1
    # Retry a group none of whose brokers ever answered as one that went away (see the module
    # docstring); False: such a send fails once every known endpoint refused it.
    wait_for_broker: bool = False

    def __post_init__(self) -> None:
        if not 0 <= self.retry_timeout_s < float("inf"):
            raise ValueError(f"retry_timeout_s must be 0 or more seconds, got {self.retry_timeout_s!r}")
        if not 0 < self.backoff_min_s <= self.backoff_max_s < float("inf"):
            raise ValueError("backoff_min_s must be positive and at most backoff_max_s")


class Action(enum.Enum):
    RETURN = "RETURN"  # the send succeeded at `endpoint`
    RETRY = "RETRY"  # send again to `endpoint` after `delay_s`
    REDISCOVER = "REDISCOVER"  # after `delay_s`, ask QueryRoute of `ask` (in order) for the master
    GIVE_UP = "GIVE_UP"  # raise `error`, the last one, after `attempts` attempts


@dataclass(frozen=True, slots=True)
class Step:
    action: Action
    endpoint: Endpoint | None = None
    delay_s: float = 0.0
    ask: tuple[Endpoint, ...] = ()
    error: RocketStoreError | None = None
    attempts: int = 0
    moved_from: Endpoint | None = None  # RETURN only: the current endpoint this success replaced


class KnownEndpoints:
    """The endpoints of one broker group a producer knows, in the order learnt, and `current`, the
    one new sends start at (the master, once one answered)."""

    def __init__(self, endpoints: Sequence[Endpoint]) -> None:
        if not endpoints:
            raise ValueError("a broker group needs at least one endpoint")
        self._lock = threading.Lock()
        self._known = list(dict.fromkeys(endpoints))
        self._current = self._known[0]
        # Some broker of the group answered once (a success or a refusal): failures since are
        # failovers, not a group that is not there.
        self.reached = False

    @property
    def current(self) -> Endpoint:
        return self._current

    @property
    def all(self) -> tuple[Endpoint, ...]:
        with self._lock:
            return tuple(self._known)

    def learn(self, target: str) -> Endpoint | None:
        """`target` (from a not-master answer or a route) joins the list; None when it does not parse."""
        try:
            endpoint = parse_endpoint(target)
        except EndpointError:
            return None
        with self._lock:
            if endpoint not in self._known:
                self._known.append(endpoint)
        return endpoint

    def route_order(self, failed: Endpoint) -> tuple[Endpoint, ...]:
        """Whom to ask for the master: the others first, since `failed` just let us down."""
        with self._lock:
            known = list(self._known)
        return tuple([e for e in known if e != failed] + ([failed] if failed in known else []))

    def settle(self, endpoint: Endpoint) -> Endpoint | None:
        """A send succeeded at `endpoint`: it is current now. Returns the one it replaced, if any."""
        self.reached = True
        with self._lock:
            if endpoint not in self._known:
                self._known.append(endpoint)
            previous, self._current = self._current, endpoint
        return previous if previous != endpoint else None


# gRPC's words for a channel that could not connect (refused, not gRPC, no such host), as opposed
# to an UNAVAILABLE a server answered.
NEVER_CONNECTED_DETAILS = ("failed to connect", "dns resolution failed")


def never_connected(error: RocketStoreError) -> bool:
    """The call found no broker to talk to: the connection was refused, the name did not resolve,
    or the endpoint is not a gRPC client API (a dropped connection, a timeout or a server's own
    UNAVAILABLE may be a broker that is there but busy)."""
    return (
        isinstance(error, TransportError)
        and error.code == "UNAVAILABLE"
        and any(marker in error.details.lower() for marker in NEVER_CONNECTED_DETAILS)
    )


def is_retryable(error: RocketStoreError) -> bool:
    """Whether `error` may pass once the group has a master again (see the table above)."""
    if isinstance(error, PartialBatchError):
        return False
    if isinstance(error, NotMasterError):
        return True
    if isinstance(error, TransportError):
        if error.code == "CANCELLED":
            return not any(marker in error.details for marker in LOCAL_CANCELLATION)
        return error.code in RETRYABLE_TRANSPORT
    if isinstance(error, BrokerError):
        if error.code_name in DROPPED_CONNECTION_CODES:
            details = error.message.lower()
            return any(marker in details for marker in DROPPED_CONNECTION_DETAILS)
        return error.code_name in RETRYABLE_CODES
    return False


class SendAttempts:
    """One send's attempts: `first()`, then `succeeded` or `failed` after each attempt and
    `found_master` after each rediscovery; each returns the next `Step`. Times are seconds on a
    monotonic clock."""

    def __init__(self, policy: RetryPolicy, known: KnownEndpoints, now: float) -> None:
        self.policy = policy
        self.known = known
        self.started = now
        self.deadline = now + policy.retry_timeout_s
        self.attempts = 0
        self.last_error: RocketStoreError | None = None
        self.endpoint = known.current  # where the attempt under way was sent
        self._start_endpoint = self.endpoint
        self._backoff = policy.backoff_min_s
        self._sent_since_pause: set[Endpoint] = set()
        self._refused: set[Endpoint] = set()  # endpoints that never connected, before any answer

    def first(self) -> Step:
        return self._retry(self.endpoint, 0.0)

    def succeeded(self, now: float) -> Step:
        self.attempts += 1
        moved_from = self.known.settle(self.endpoint)
        return Step(Action.RETURN, self.endpoint, attempts=self.attempts, moved_from=moved_from)

    def failed(self, error: RocketStoreError, now: float) -> Step:
        """The attempt at `self.endpoint` failed with `error`: what next."""
        self.attempts += 1
        self.last_error = error
        if not isinstance(error, TransportError):
            self.known.reached = True  # the broker answered, if only to refuse
        if self.policy.retry_timeout_s == 0 or not is_retryable(error):
            return self._give_up()
        tried = self.endpoint
        if not self.known.reached and not self.policy.wait_for_broker and never_connected(error):
            self._refused.add(tried)
            untried = [e for e in self.known.all if e not in self._refused]
            return self._retry(untried[0], 0.0) if untried else self._give_up()
        if isinstance(error, NotMasterError) and error.master_endpoint:
            named = self.known.learn(error.master_endpoint)
            if named is not None and named != tried:
                return self._go(named, now)
        current = self.known.current
        if current != tried and current != self._start_endpoint:
            return self._go(current, now)  # another send has found the master meanwhile
        return self._within(Step(Action.REDISCOVER, delay_s=self._pause(), ask=self.known.route_order(tried)), now)

    def found_master(self, target: str | None, now: float) -> Step:
        """What rediscovery found (None: no endpoint named a master): send there, or look again."""
        master = self.known.learn(target) if target else None
        if master is not None:
            return self._go(master, now)
        return self._within(
            Step(Action.REDISCOVER, delay_s=self._pause(), ask=self.known.route_order(self.endpoint)), now
        )

    def _go(self, endpoint: Endpoint, now: float) -> Step:
        # Two brokers naming each other (stale views during an election) must not spin.
        delay = self._pause() if endpoint in self._sent_since_pause else 0.0
        return self._within(Step(Action.RETRY, endpoint, delay_s=delay), now)

    def _pause(self) -> float:
        delay = self._backoff
        self._backoff = min(self._backoff * 2, self.policy.backoff_max_s)
        self._sent_since_pause.clear()
        return delay

    def _within(self, step: Step, now: float) -> Step:
        if now + step.delay_s >= self.deadline:
            return self._give_up()
        if step.action is Action.RETRY:
            return self._retry(step.endpoint, step.delay_s)
        return step

    def _retry(self, endpoint: Endpoint | None, delay_s: float) -> Step:
        assert endpoint is not None
        self.endpoint = endpoint
        self._sent_since_pause.add(endpoint)
        return Step(Action.RETRY, endpoint, delay_s=delay_s)

    def _give_up(self) -> Step:
        return Step(Action.GIVE_UP, self.endpoint, error=self.last_error, attempts=self.attempts)
