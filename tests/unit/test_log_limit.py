"""wire.log_limit.RateLimitedLog: a few lines per key and interval, the dropped ones counted and
told with the next line let through; keys bounded."""

from __future__ import annotations

import logging

import pytest

from wire.log_limit import RateLimitedLog


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def records(caplog):
    caplog.set_level(logging.INFO, logger="test.log_limit")
    return caplog


def test_a_key_logs_a_few_lines_per_interval_and_then_tells_how_many_it_dropped(records):
    clock = Clock()
    limited = RateLimitedLog(logging.getLogger("test.log_limit"), per_interval=2, interval_s=10, clock=clock)
    logged = [limited.warning("refused", "refused %s", i) for i in range(50)]
    assert logged == [True, True] + [False] * 48
    assert [r.getMessage() for r in records.records] == ["refused 0", "refused 1"]
    clock.now += 10
    assert limited.warning("refused", "refused %s", 50)
    assert records.records[-1].getMessage() == "refused 50 (48 more like it not logged in the last 10 s)"
    assert limited.warning("refused", "refused %s", 51)
    assert records.records[-1].getMessage() == "refused 51"
    assert all(r.levelno == logging.WARNING for r in records.records)


def test_keys_are_limited_apart_and_their_number_is_bounded(records):
    clock = Clock()
    limited = RateLimitedLog(logging.getLogger("test.log_limit"), per_interval=1, max_keys=3, clock=clock)
    assert limited.warning("a", "a") and not limited.warning("a", "a")
    assert limited.warning("b", "b")
    for i in range(100):
        limited.warning(f"flood-{i}", "flood")
    assert len(limited._windows) == 3
    # "a" was forgotten among the flood of keys: it may log again (bounded memory costs a line).
    assert limited.warning("a", "a again")


def test_tracebacks_go_with_error_lines_and_disabled_levels_cost_nothing(records):
    limited = RateLimitedLog(logging.getLogger("test.log_limit"), per_interval=1, clock=Clock())
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        assert limited.error("failed", "failed", exc_info=True)
    assert records.records[-1].exc_info is not None and records.records[-1].exc_info[0] is RuntimeError
    assert not limited.log(logging.DEBUG, "quiet", "not enabled")
    assert "quiet" not in limited._windows


def test_limits_must_make_sense():
    with pytest.raises(ValueError):
        RateLimitedLog(logging.getLogger("x"), per_interval=0)
