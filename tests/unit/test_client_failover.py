"""client/failover.py: what a send does after each kind of failure, with a fake clock."""

from __future__ import annotations

import pytest

from client.errors import AuthenticationError, BrokerError, NotMasterError, TransportError
from client.failover import Action, RetryPolicy, SendAttempts


def attempts(timeout_s: float = 10.0) -> SendAttempts:
    return SendAttempts(RetryPolicy(retry_timeout_s=timeout_s, backoff_min_s=0.02, backoff_max_s=0.1), now=100.0)


def test_a_not_master_answer_naming_another_broker_is_followed_at_once():
    a = attempts()
    step = a.failed(NotMasterError("b:2"), "a:1", 100.0)
    assert (step.action, step.endpoint, step.delay_s) == (Action.RETRY, "b:2", 0.0)


@pytest.mark.parametrize(
    "error",
    [
        NotMasterError("a:1", "not master: not acknowledged: lease"),
        NotMasterError("", "not master: no master elected"),
        TransportError("a:1", "UNAVAILABLE"),
        TransportError("a:1", "DEADLINE_EXCEEDED"),
        BrokerError("INTERNAL_SERVER_ERROR", "IN_SYNC_REPLICAS_NOT_ENOUGH"),
    ],
)
def test_passing_conditions_rediscover_after_a_growing_pause(error):
    a = attempts()
    delays = [a.failed(error, "a:1", 100.0).delay_s for _ in range(5)]
    assert delays == [0.02, 0.04, 0.08, 0.1, 0.1]
    assert a.failed(error, "a:1", 100.0).action is Action.REDISCOVER


@pytest.mark.parametrize(
    "error",
    [BrokerError("TOPIC_NOT_FOUND"), BrokerError("FORBIDDEN", "topic not writable"), AuthenticationError("a:1"),
     TransportError("a:1", "RESOURCE_EXHAUSTED")],
)
def test_other_errors_are_final(error):
    a = attempts()
    assert a.failed(error, "a:1", 100.0).action is Action.GIVE_UP
    assert a.last_error is error and a.attempts == 1


def test_rediscovery_sends_to_what_it_found_or_looks_again():
    a = attempts()
    a.failed(TransportError("a:1", "UNAVAILABLE"), "a:1", 100.0)
    assert a.found_master("c:3", 100.1) == type(a.found_master("c:3", 100.1))(Action.RETRY, "c:3")
    step = a.found_master(None, 100.2)
    assert step.action is Action.REDISCOVER and step.delay_s > 0


def test_the_budget_ends_the_retries_with_the_last_error():
    a = attempts(timeout_s=1.0)
    error = TransportError("a:1", "UNAVAILABLE")
    assert a.failed(error, "a:1", 100.5).action is Action.REDISCOVER
    assert a.failed(error, "a:1", 100.99).action is Action.GIVE_UP  # its pause would end past the budget
    assert attempts(timeout_s=0).failed(NotMasterError("b:2"), "a:1", 100.0001).action is Action.GIVE_UP


def test_policy_validation():
    with pytest.raises(ValueError):
        RetryPolicy(retry_timeout_s=-1)
    with pytest.raises(ValueError):
        RetryPolicy(backoff_min_s=0.5, backoff_max_s=0.1)
