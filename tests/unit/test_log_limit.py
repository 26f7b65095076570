"""`wire.log_limit.LogLimiter`: one line per key per interval, the rest counted and summarised."""

from __future__ import annotations

import logging

from hypothesis import given
from hypothesis import strategies as st

from wire.log_limit import LogLimiter, peer_host


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def limiter(now: list[int], **kwargs) -> tuple[LogLimiter, Lines]:
    logger = logging.getLogger(f"test.log_limit.{id(now)}")
    logger.propagate = False
    lines = Lines()
    logger.handlers[:] = [lines]
    return LogLimiter(logger, clock_ms=lambda: now[0], **kwargs), lines


def test_one_line_per_key_per_interval_and_a_count_of_the_rest():
    now = [0]
    limit, out = limiter(now, interval_ms=10_000)
    assert limit.log("10.0.0.1", "refused %s: %s", "Replicate", "bad tag")
    for _ in range(500):
        now[0] += 10
        assert not limit.log("10.0.0.1", "refused %s: %s", "Replicate", "bad tag")
    assert limit.log("10.0.0.2", "refused %s", "GetEpochs")  # another key has its own window
    assert out.lines == ["refused Replicate: bad tag", "refused GetEpochs"]
    now[0] = 10_000
    assert limit.log("10.0.0.1", "refused %s: %s", "Replicate", "bad tag")
    assert out.lines[2:] == [
        "500 more like this in the last 10 s: refused Replicate: bad tag",
        "refused Replicate: bad tag",
    ]


def test_a_quiet_key_owes_its_count_until_any_later_event_or_flush():
    now = [0]
    limit, out = limiter(now, interval_ms=1000)
    limit.log("a", "first")
    limit.log("a", "first")
    now[0] = 999
    limit.flush()
    assert out.lines == ["first"]
    now[0] = 1000
    limit.log("b", "other")
    assert out.lines == ["first", "1 more like this in the last 1 s: first", "other"]
    now[0] = 5000
    limit.flush()  # "b" held nothing back: no summary
    assert out.lines[-1] == "other"


def test_many_keys_close_the_oldest_windows_early():
    now = [0]
    limit, out = limiter(now, interval_ms=60_000, max_keys=2)
    limit.log("a", "a")
    limit.log("a", "a")
    limit.log("b", "b")
    limit.log("c", "c")  # "a" is evicted: its count is written now
    assert out.lines == ["a", "b", "1 more like this in the last 0 s: a", "c"]


@given(st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 3000)), max_size=300))
def test_every_event_is_either_a_line_or_counted_in_one(events):
    now = [0]
    limit, out = limiter(now, interval_ms=1000)
    for key, gap in events:
        now[0] += gap
        limit.log(key, key)
    now[0] += 1000
    limit.flush()
    summarised = sum(int(line.split(" ", 1)[0]) for line in out.lines if " more like this" in line)
    written = sum(1 for line in out.lines if " more like this" not in line)
    assert written + summarised == len(events)


def test_peer_host_drops_the_port():
    assert peer_host("ipv4:127.0.0.1:50123") == "ipv4:127.0.0.1"
    assert peer_host("ipv6:[::1]:50123") == "ipv6:[::1]"
    assert peer_host("unix:/tmp/sock") == "unix:/tmp/sock"
