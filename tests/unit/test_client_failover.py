"""client/failover.py: what one send does after each outcome, with a fake clock (no sockets, no
sleeps): redirects, rediscovery, pauses, the retry budget, the endpoints a producer learns."""

from __future__ import annotations

import grpc
import pytest

from client.convert import SendResult, SendStatus
from client.endpoint import Endpoint, parse_endpoint
from client.errors import (
    AuthenticationError,
    BrokerError,
    NotMasterError,
    PartialBatchError,
    ProtocolError,
    RocketStoreError,
    TransportError,
    from_rpc_error,
)
from client.failover import Action, KnownEndpoints, RetryPolicy, SendAttempts, Step, is_retryable
from client.producer import master_of
from support import FakeRpcError
from wire.rpc import messaging_pb2 as pb

A, B, C = (parse_endpoint(t) for t in ("10.0.0.1:10911", "10.0.0.2:10911", "10.0.0.3:10911"))
T0 = 100.0
PAUSES = [0.02, 0.04, 0.08, 0.1, 0.1, 0.1]


def group(*endpoints: Endpoint, reached: bool = True) -> KnownEndpoints:
    """The endpoints of a producer that has reached its group before (failovers), unless `reached`
    is False (a producer's first sends)."""
    known = KnownEndpoints(list(endpoints or (A, B, C)))
    known.reached = reached
    return known


def start(known: KnownEndpoints | None = None, timeout_s: float = 10.0, wait_for_broker: bool = False) -> SendAttempts:
    policy = RetryPolicy(
        retry_timeout_s=timeout_s, backoff_min_s=0.02, backoff_max_s=0.1, wait_for_broker=wait_for_broker
    )
    return SendAttempts(policy, known if known is not None else group(), now=T0)


def rpc(code: grpc.StatusCode, details: str = "") -> RocketStoreError:
    return from_rpc_error(FakeRpcError(code, details), A.target)


def partial(code: str) -> PartialBatchError:
    stored = SendResult(SendStatus.SEND_OK, "ID", "T", 0, 0, 0)
    return PartialBatchError([stored, BrokerError(code)], BrokerError(code))


RETRYABLE = [
    pytest.param(NotMasterError("", "not master: no master elected"), id="not-master-unknown"),
    pytest.param(NotMasterError(A.target, "not master: not acknowledged: lease"), id="not-master-self"),
    pytest.param(NotMasterError("not an endpoint"), id="not-master-garbled"),
    pytest.param(rpc(grpc.StatusCode.UNAVAILABLE, "failed to connect to all addresses"), id="unavailable"),
    pytest.param(rpc(grpc.StatusCode.UNAVAILABLE, "Connection reset by peer"), id="reset-unavailable"),
    pytest.param(rpc(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded"), id="deadline"),
    pytest.param(rpc(grpc.StatusCode.CANCELLED, "Cancelled"), id="cancelled-by-peer"),
    pytest.param(rpc(grpc.StatusCode.UNKNOWN, "Stream removed"), id="stream-removed"),
    pytest.param(rpc(grpc.StatusCode.INTERNAL, "Received RST_STREAM with error code 2"), id="rst-stream"),
    pytest.param(rpc(grpc.StatusCode.UNKNOWN, "recvmsg:Connection reset by peer"), id="reset-unknown"),
    pytest.param(BrokerError("INTERNAL_SERVER_ERROR", "in-sync replicas not enough"), id="cannot-serve-now"),
]

FINAL = [
    pytest.param(rpc(grpc.StatusCode.CANCELLED, "Locally cancelled by application!"), id="cancelled-here"),
    pytest.param(rpc(grpc.StatusCode.CANCELLED, "Channel closed!"), id="channel-closed-here"),
    pytest.param(TransportError(A.target, "UNKNOWN"), id="code-less-rpc-error"),
    pytest.param(rpc(grpc.StatusCode.UNKNOWN, "Exception calling application: boom"), id="servicer-bug"),
    pytest.param(rpc(grpc.StatusCode.INTERNAL, "failed to serialize"), id="internal"),
    pytest.param(rpc(grpc.StatusCode.RESOURCE_EXHAUSTED, "too large"), id="resource-exhausted"),
    pytest.param(rpc(grpc.StatusCode.UNAUTHENTICATED), id="unauthenticated"),
    pytest.param(rpc(grpc.StatusCode.UNIMPLEMENTED), id="unimplemented"),
    pytest.param(BrokerError("TOPIC_NOT_FOUND", "topic T does not exist"), id="topic-not-found"),
    pytest.param(BrokerError("FORBIDDEN", "topic not writable"), id="forbidden-not-a-slave"),
    pytest.param(BrokerError("MESSAGE_BODY_TOO_LARGE"), id="too-large"),
    pytest.param(AuthenticationError(A.target), id="auth"),
    pytest.param(ProtocolError("2 results for 3 messages"), id="protocol"),
    pytest.param(partial("INTERNAL_SERVER_ERROR"), id="partial-batch"),
    pytest.param(RocketStoreError("the producer was closed"), id="closed"),
]


# -- the policy --------------------------------------------------------------------------------


def test_policy_defaults_and_validation():
    assert RetryPolicy() == RetryPolicy(retry_timeout_s=10.0, backoff_min_s=0.02, backoff_max_s=0.1)
    RetryPolicy(retry_timeout_s=0)
    for bad in (
        dict(retry_timeout_s=-1),
        dict(retry_timeout_s=float("inf")),
        dict(retry_timeout_s=float("nan")),
        dict(backoff_min_s=0),
        dict(backoff_min_s=0.5, backoff_max_s=0.1),
        dict(backoff_max_s=float("inf")),
    ):
        with pytest.raises(ValueError):
            RetryPolicy(**bad)


@pytest.mark.parametrize("error", RETRYABLE)
def test_retryable_errors(error):
    assert is_retryable(error)


@pytest.mark.parametrize("error", FINAL)
def test_final_errors_are_raised_at_once(error):
    assert not is_retryable(error)
    attempts = start()
    step = attempts.failed(error, T0 + 0.001)
    assert step == Step(Action.GIVE_UP, A, error=error, attempts=1)


# -- one send ----------------------------------------------------------------------------------


def test_the_first_attempt_goes_to_the_current_endpoint_and_success_returns():
    known = group()
    attempts = start(known)
    assert attempts.first() == Step(Action.RETRY, A)
    assert attempts.succeeded(T0 + 0.001) == Step(Action.RETURN, A, attempts=1)
    assert known.current == A


def test_a_not_master_answer_naming_another_broker_is_followed_at_once_and_remembered():
    known = group(A)
    attempts = start(known)
    attempts.first()
    step = attempts.failed(NotMasterError(B.target), T0 + 0.001)
    assert step == Step(Action.RETRY, B)
    assert known.all == (A, B) and known.current == A  # learnt, but current only once B answers
    done = attempts.succeeded(T0 + 0.002)
    assert done == Step(Action.RETURN, B, attempts=2, moved_from=A)
    assert known.current == B
    again = start(known)
    assert again.first().endpoint == B
    assert again.succeeded(T0 + 0.003).moved_from is None


@pytest.mark.parametrize("error", RETRYABLE)
def test_passing_conditions_rediscover_after_a_growing_pause_asking_the_others_first(error):
    attempts = start()
    attempts.first()
    steps = []
    for _ in range(len(PAUSES)):
        steps.append(attempts.failed(error, T0))
    assert [s.action for s in steps] == [Action.REDISCOVER] * len(PAUSES)
    assert [s.delay_s for s in steps] == PAUSES
    assert steps[0].ask == (B, C, A)


def test_rediscovery_sends_to_what_it_found_or_looks_again():
    known = group(A, B)
    attempts = start(known)
    attempts.first()
    step = attempts.failed(TransportError(A.target, "UNAVAILABLE"), T0 + 0.01)
    assert step.action is Action.REDISCOVER and step.ask == (B, A)
    looked = attempts.found_master(None, T0 + 0.05)
    assert looked.action is Action.REDISCOVER and looked.delay_s == PAUSES[1] and looked.ask == (B, A)
    assert attempts.found_master("garbage", T0 + 0.1).action is Action.REDISCOVER
    found = attempts.found_master(C.target, T0 + 0.2)
    assert found == Step(Action.RETRY, C)
    assert known.all == (A, B, C)
    assert attempts.succeeded(T0 + 0.21) == Step(Action.RETURN, C, attempts=2, moved_from=A)


def test_a_rediscovered_master_that_fails_again_is_asked_about_last():
    attempts = start()
    attempts.first()
    attempts.failed(TransportError(A.target, "UNAVAILABLE"), T0)
    assert attempts.found_master(B.target, T0 + 0.1).endpoint == B
    step = attempts.failed(TransportError(B.target, "DEADLINE_EXCEEDED"), T0 + 0.2)
    assert step.action is Action.REDISCOVER and step.ask == (A, C, B)


def test_brokers_naming_each_other_do_not_spin():
    attempts = start(group(A, B), timeout_s=1.0)
    attempts.first()
    now, steps = T0, []
    for _ in range(10_000):
        tried = attempts.endpoint
        other = B if tried == A else A
        step = attempts.failed(NotMasterError(other.target, "not master: stale view"), now)
        steps.append(step)
        if step.action is Action.GIVE_UP:
            break
        now += step.delay_s + 0.001
    assert steps[-1].action is Action.GIVE_UP
    assert all(s.action is Action.RETRY for s in steps[:-1])
    # Every second redirect waits: an endpoint is sent to at most once between two pauses.
    assert [s.delay_s > 0 for s in steps[:6]] == [False, True, False, True, False, True]
    assert len(steps) < 40


def test_a_master_found_by_another_send_is_tried_without_asking():
    known = group()
    slow = start(known)
    slow.first()
    fast = start(known)
    fast.first()
    fast.failed(NotMasterError(C.target), T0 + 0.001)
    fast.succeeded(T0 + 0.002)
    assert known.current == C
    step = slow.failed(TransportError(A.target, "UNAVAILABLE"), T0 + 0.003)
    assert step == Step(Action.RETRY, C)
    again = slow.failed(TransportError(C.target, "UNAVAILABLE"), T0 + 0.004)
    assert again.action is Action.REDISCOVER and again.ask == (A, B, C)


def test_a_send_that_started_at_the_current_master_rediscovers():
    known = group()
    attempts = start(known)
    attempts.first()
    step = attempts.failed(NotMasterError(B.target), T0)
    assert step.endpoint == B
    # current is still A (this send started there): B failing means asking, not going back to A
    assert attempts.failed(TransportError(B.target, "UNAVAILABLE"), T0 + 0.01).action is Action.REDISCOVER


# -- the budget --------------------------------------------------------------------------------


def test_the_budget_ends_the_retries_with_the_last_error_and_the_attempt_count():
    attempts = start(timeout_s=1.0)
    attempts.first()
    first = TransportError(A.target, "UNAVAILABLE")
    assert attempts.failed(first, T0 + 0.5).action is Action.REDISCOVER
    assert attempts.found_master(B.target, T0 + 0.6).action is Action.RETRY
    last = NotMasterError("", "not master: no master elected")
    step = attempts.failed(last, T0 + 0.99)  # its pause would end past the budget
    assert step == Step(Action.GIVE_UP, B, error=last, attempts=2)
    assert attempts.last_error is last


def test_an_immediate_redirect_past_the_budget_gives_up():
    attempts = start(timeout_s=1.0)
    attempts.first()
    error = NotMasterError(B.target)
    assert attempts.failed(error, T0 + 1.0) == Step(Action.GIVE_UP, A, error=error, attempts=1)


def test_a_rediscovery_past_the_budget_gives_up():
    attempts = start(timeout_s=1.0)
    attempts.first()
    error = TransportError(A.target, "UNAVAILABLE")
    attempts.failed(error, T0 + 0.1)
    assert attempts.found_master(B.target, T0 + 1.0) == Step(Action.GIVE_UP, A, error=error, attempts=1)
    assert attempts.found_master(None, T0 + 0.995).action is Action.GIVE_UP


def test_a_zero_budget_raises_the_first_failure_even_with_a_master_named():
    attempts = start(timeout_s=0)
    attempts.first()
    error = NotMasterError(B.target)
    assert attempts.failed(error, T0) == Step(Action.GIVE_UP, A, error=error, attempts=1)


# -- a whole failover, driven by a fake clock --------------------------------------------------


def drive(known, outcomes, routes, timeout_s=10.0, rpc_s=0.001, wait_for_broker=False):
    """Runs one send against scripted brokers. `outcomes[endpoint]` is a list of what successive
    attempts there return (an exception, or "ok"); `routes` is a list of what successive
    rediscoveries find. Returns (final step, endpoints tried, rediscoveries, seconds spent)."""
    attempts = start(known, timeout_s, wait_for_broker)
    now, tried, asked = T0, [], []
    step = attempts.first()
    for _ in range(1000):
        now += step.delay_s
        if step.action is Action.REDISCOVER:
            asked.append(step.ask)
            now += rpc_s * len(step.ask)
            step = attempts.found_master(routes.pop(0) if routes else None, now)
        elif step.action is Action.RETRY:
            tried.append(step.endpoint)
            now += rpc_s
            outcome = outcomes[step.endpoint].pop(0) if outcomes[step.endpoint] else "ok"
            step = attempts.succeeded(now) if outcome == "ok" else attempts.failed(outcome, now)
        else:
            return step, tried, asked, now - T0
    raise AssertionError("the send never ended")


def test_failover_master_dies_a_slave_is_elected():
    known = group()
    outcomes = {
        A: [TransportError(A.target, "UNAVAILABLE")] * 50,  # the old master is gone
        B: [NotMasterError("", "not master: no master elected")],  # election under way
        C: [],
    }
    routes = [None, None, B.target, C.target]  # no master yet, then a stale answer, then C
    step, tried, asked, spent = drive(known, outcomes, routes)
    assert step.action is Action.RETURN and step.endpoint == C and step.moved_from == A
    assert tried == [A, B, C] and known.current == C
    assert asked == [(B, C, A)] * 3 + [(A, C, B)] and spent < 1.0


def test_failover_that_never_ends_gives_up_after_the_budget():
    known = group(A, B)
    outcomes = {
        A: [TransportError(A.target, "UNAVAILABLE")] * 1000,
        B: [TransportError(B.target, "UNAVAILABLE")] * 1000,
    }
    step, tried, asked, spent = drive(known, outcomes, [], timeout_s=2.0)
    assert step.action is Action.GIVE_UP and step.attempts == len(tried) == 1
    assert isinstance(step.error, TransportError) and 1.9 < spent < 2.1
    assert all(a == (B, A) for a in asked) and known.current == A


# -- a group never reached -----------------------------------------------------------------------


def refused(endpoint: Endpoint) -> TransportError:
    return TransportError(
        endpoint.target,
        "UNAVAILABLE",
        f"failed to connect to all addresses; last error: UNKNOWN: ipv4:{endpoint.target}: Failed to connect to "
        "remote host: Connection refused",
    )


def test_a_group_never_reached_fails_at_once_when_every_endpoint_refuses():
    known = group(reached=False)
    outcomes = {e: [refused(e)] * 100 for e in (A, B, C)}
    step, tried, asked, spent = drive(known, outcomes, [])
    assert step.action is Action.GIVE_UP and step.attempts == 3 and isinstance(step.error, TransportError)
    assert tried == [A, B, C] and asked == [] and spent < 0.01 and not known.reached


def test_a_group_never_reached_goes_on_at_the_first_endpoint_that_answers():
    known = group(reached=False)
    outcomes = {A: [refused(A)] * 100, B: [NotMasterError(C.target)], C: [refused(C), "ok"]}
    step, tried, asked, _ = drive(known, outcomes, [C.target])
    # B answered (a refusal is an answer): from then on C's refusal is a failover, retried.
    assert step.action is Action.RETURN and step.endpoint == C and known.reached
    assert tried == [A, B, C, C] and asked == [(A, B, C)]


def test_a_group_never_reached_is_waited_for_when_asked():
    known = group(A, B, reached=False)
    outcomes = {A: [refused(A)] * 1000, B: [refused(B)] * 1000}
    step, tried, asked, spent = drive(known, outcomes, [], timeout_s=2.0, wait_for_broker=True)
    assert step.action is Action.GIVE_UP and 1.9 < spent < 2.1 and len(asked) > 5


@pytest.mark.parametrize(
    "error",
    [TransportError(A.target, "DEADLINE_EXCEEDED"), TransportError(A.target, "UNAVAILABLE", "the broker is stopping")],
    ids=["timeout", "a server's unavailable"],
)
def test_a_first_answer_that_times_out_or_comes_from_a_server_is_retried_as_before(error):
    known = group(A, reached=False)
    outcomes = {A: [error, "ok"]}
    step, tried, _, _ = drive(known, outcomes, [A.target])
    assert step.action is Action.RETURN and tried == [A, A] and known.reached


# -- the endpoints a producer knows ------------------------------------------------------------


def test_known_endpoints():
    with pytest.raises(ValueError):
        KnownEndpoints([])
    known = KnownEndpoints([A, B, A])
    assert known.all == (A, B) and known.current == A
    assert known.learn(B.target) == B and known.all == (A, B)
    assert known.learn("[::1]:10911") == Endpoint("::1", 10911) and len(known.all) == 3
    assert known.learn("no port") is None and len(known.all) == 3
    assert known.route_order(A) == (B, Endpoint("::1", 10911), A)
    assert known.route_order(C) == known.all
    assert known.settle(A) is None
    assert known.settle(C) == A and known.current == C and known.all[-1] == C


def test_rediscovery_in_a_clusters_route_takes_the_master_of_the_group_asked_for():
    def queue(name: str, broker_id: int, port: int, permission=pb.READ_WRITE) -> pb.MessageQueue:
        address = pb.Endpoints(scheme=pb.IPv4, addresses=[pb.Address(host="10.0.0.9", port=port)])
        return pb.MessageQueue(
            id=0, permission=permission, broker=pb.Broker(name=name, id=broker_id, endpoints=address)
        )

    # broker-a has no master now (its slave stands in, read-only); broker-b has one.
    route = pb.QueryRouteResponse(
        status=pb.Status(code=pb.OK), message_queues=[queue("a", 0, 1, pb.READ), queue("b", 0, 2), queue("a", 1, 3)]
    )
    assert master_of("T", route) == ("10.0.0.9:2", "b")  # any group's, when the producer's is unknown
    assert master_of("T", route, "a") is None  # a queue id of broker-a's is never sent to broker-b
    route.message_queues[0].permission = pb.READ_WRITE
    assert master_of("T", route, "a") == ("10.0.0.9:1", "a") and master_of("T", route, "b") == ("10.0.0.9:2", "b")
