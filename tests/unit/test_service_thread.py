"""ServiceThread's failure logging and PagedService's rounds (store/service_thread.py)."""

from __future__ import annotations

import logging

from store.service_thread import PagedService, ServiceThread


class Flaky(ServiceThread):
    name = "flaky"

    def __init__(self, outcomes: list[str]) -> None:
        super().__init__()
        self.outcomes = outcomes

    def run_once(self) -> None:
        outcome = self.outcomes.pop(0)
        if outcome != "ok":
            raise OSError(28, outcome)


def test_a_repeated_failure_is_logged_once_and_its_end_once(caplog):
    caplog.set_level(logging.INFO, logger="store.service_thread")
    rounds = ["No space left on device"] * 392 + ["Input/output error"] * 3 + ["ok", "ok"]
    service = Flaky(list(rounds))
    results = [service.guarded_round() for _ in rounds]
    assert results == [False] * 395 + [True, True]
    lines = [(r.levelname, r.getMessage(), r.exc_info is not None) for r in caplog.records]
    assert len(lines) == 3
    assert lines[0][0] == "ERROR" and lines[0][2] and "flaky failed a round" in lines[0][1]
    assert lines[1][0] == "ERROR" and lines[1][2]  # a different failure is news
    assert lines[2][0] == "INFO" and "works again after 395 failed round(s)" in lines[2][1]
    assert "Input/output error" in lines[2][1]


class Paged(PagedService):
    name = "paged"

    def run_once(self) -> None:
        raise AssertionError("rounds are driven by the test")


def test_a_paged_service_works_on_every_page_once_per_thorough_interval_even_when_the_clock_goes_back():
    now = [1_000_000]
    service = Paged(interval_ms=0, least_pages=4, thorough_interval_ms=10_000, clock=lambda: now[0])
    assert service._next_round_least_pages() == 4
    now[0] += 10_000
    assert service._next_round_least_pages() == 0  # thorough: every dirty page
    now[0] += 5_000
    assert service._next_round_least_pages() == 4
    now[0] -= 3_600_000  # the clock is set back an hour: the tail must not wait an hour
    assert service._next_round_least_pages() == 0
    now[0] += 9_999
    assert service._next_round_least_pages() == 4
    now[0] += 1
    assert service._next_round_least_pages() == 0
