"""store/damage.py: damaged records are logged once each, within a rate, counted, and bounded."""

from __future__ import annotations

import logging

import pytest

from store.log.codec import CorruptMessage, DamagedMessage
from store.log.damage import DamageLog, Reader

LOGGER = "rocketstore.store.damage"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def damaged(offset: int, queue_offset: int = 0) -> DamagedMessage:
    return DamagedMessage(offset, "body CRC mismatch", "Orders", 2, queue_offset)


def lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_a_record_is_logged_once_and_every_refusal_counted(caplog, clock):
    damage = DamageLog(wall_ms=clock, monotonic_clock_ms=clock)
    with caplog.at_level(logging.ERROR, LOGGER):
        assert damage.found(damaged(4096, 7), Reader.READ)
        for _ in range(5):
            assert not damage.found(damaged(4096, 7), Reader.READ)
        assert not damage.found(damaged(4096, 7), Reader.REPLICATION)

    [line] = lines(caplog)
    assert "CommitLog offset 4096 (Orders:2, queue offset 7) is damaged: body CRC mismatch" in line
    assert "not served" in line and "MESSAGE_CORRUPTED" in line
    report = damage.snapshot()
    assert (report.record_count, report.refused_reads, report.refused_shipments) == (1, 6, 1)
    [record] = report.records
    assert (record.offset, record.topic, record.queue_id, record.queue_offset, record.refusals) == (
        4096,
        "Orders",
        2,
        7,
        7,
    )
    assert record.first_seen_ms == clock.now


def test_the_log_keeps_to_its_rate_and_says_how_many_it_left_out(caplog, clock):
    damage = DamageLog(wall_ms=clock, monotonic_clock_ms=clock, log_lines_per_minute=3)
    with caplog.at_level(logging.ERROR, LOGGER):
        for offset in range(10):
            assert damage.found(damaged(offset * 100), Reader.READ)
        assert len(lines(caplog)) == 3
        clock.now += 60_000
        damage.found(damaged(5000), Reader.REPLICATION)

    logged = lines(caplog)
    assert len(logged) == 4
    assert "(7 more damaged records found and not logged, over the rate limit)" in logged[-1]
    assert "not replicated" in logged[-1]
    # Left out of the log, not out of the count.
    assert damage.snapshot().record_count == 11


def test_memory_is_bounded_and_records_retention_deleted_are_dropped(clock):
    damage = DamageLog(wall_ms=clock, monotonic_clock_ms=clock, max_records=4)
    for offset in range(0, 1000, 100):
        damage.found(damaged(offset), Reader.READ)
    report = damage.snapshot()
    assert report.record_count == 4 and report.refused_reads == 10
    assert [r.offset for r in report.records] == [0, 100, 200, 300]

    assert [r.offset for r in damage.snapshot(min_offset=250).records] == [300]
    assert damage.snapshot().record_count == 1


def test_damage_found_by_replication_without_a_header_to_read(clock):
    damage = DamageLog(wall_ms=clock, monotonic_clock_ms=clock)
    damage.found(CorruptMessage(8192, "bad magic code 7"), Reader.REPLICATION)

    [record] = damage.snapshot().records
    assert (record.offset, record.topic, record.queue_id, record.reason) == (8192, "", -1, "bad magic code 7")


def test_replication_holds(clock):
    damage = DamageLog(wall_ms=clock, monotonic_clock_ms=clock)
    assert damage.hold_replication(2, 4096)
    assert not damage.hold_replication(2, 4096)  # a retry of the same slave is no news
    assert damage.hold_replication(3, 4096)
    assert damage.held_offset(2) == 4096 and damage.held_offset(9) is None
    assert dict(damage.snapshot().held_replication) == {2: 4096, 3: 4096}
    assert damage.snapshot().as_dict()["held_replication"] == {"2": 4096, "3": 4096}

    damage.release_replication(2)
    assert dict(damage.snapshot().held_replication) == {3: 4096}
    damage.release_replication()
    assert not damage.snapshot().held_replication
