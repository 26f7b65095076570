"""ha/slave_session.py: a slave's stream decisions (chunks, acks, silence) and its reconnect
policy, with a fake clock."""

from __future__ import annotations

import logging
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ha.chunks import ChunkVerdict, crc32c
from ha.slave_session import ChunkFields, ReconnectPolicy, SlaveSession
from store.log.codec import MESSAGE_MAGIC_CODE

SEGMENT = 4096
HEARTBEAT = 200
HOUSEKEEPING = 2000


def record(size: int) -> bytes:
    return struct.pack(">ii", size, MESSAGE_MAGIC_CODE) + bytes(size - 8)


def chunk(
    start: int, data: bytes, *, master_max: int | None = None, checksum: int | None = None, confirmed: int = 0
) -> ChunkFields:
    return ChunkFields(
        start_offset=start,
        data=data,
        checksum=crc32c(data) if checksum is None else checksum,
        segment_size=SEGMENT,
        master_max_offset=start + len(data) if master_max is None else master_max,
        confirmed_offset=confirmed,
        master_client_endpoint="127.0.0.1:10911",
    )


def session(log_end: int = 1000, durable: int = 1000, now: int = 0, empty: bool = False) -> SlaveSession:
    return SlaveSession(
        segment_size=SEGMENT,
        log_end=log_end,
        log_empty=empty,
        durable_offset=durable,
        now_ms=now,
        heartbeat_ms=HEARTBEAT,
        housekeeping_ms=HOUSEKEEPING,
    )


def test_accepted_chunks_update_what_the_master_said():
    s = session()
    assert not s.accepted
    beat = s.receive(chunk(1000, b"", master_max=5000, confirmed=900), 10)
    assert beat.verdict is ChunkVerdict.HEARTBEAT
    assert s.accepted and s.master_max_offset == 5000 and s.confirmed_offset == 900 and s.last_chunk_ms == 10
    assert s.master_client_endpoint == "127.0.0.1:10911"
    ok = s.receive(chunk(1000, record(100), master_max=5000), 20)
    assert ok.verdict is ChunkVerdict.OK
    s.appended(ok)
    assert s.expected_offset == 1100 and s.chunks == 1 and s.bytes == 100


def test_a_bad_chunk_changes_nothing():
    s = session()
    bad = s.receive(chunk(1000, record(100), checksum=5), 50)
    assert bad.verdict is ChunkVerdict.BAD_CHECKSUM
    s.appended(bad)
    assert not s.accepted and s.last_chunk_ms == 0 and s.expected_offset == 1000 and s.chunks == 0
    assert s.receive(chunk(900, record(100)), 60).verdict is ChunkVerdict.WRONG_OFFSET


def test_empty_slave_counts_bytes_from_the_masters_start():
    s = session(log_end=0, durable=0, empty=True)
    first = s.receive(chunk(2 * SEGMENT, record(64)), 1)
    assert first.ok
    s.appended(first)
    assert s.expected_offset == 2 * SEGMENT + 64 and s.bytes == 64


def test_acks_are_coalesced_and_heartbeats_keep_them_coming():
    s = session(durable=1000, now=0)
    assert s.report_due(10) is None  # the handshake reported 1000
    assert s.durable(1100) and s.durable(1300)
    assert not s.durable(1200)  # never back
    assert s.report_due(20) == 1300  # one report for both
    assert s.report_due(30) is None
    assert s.wait_ms(30) == HEARTBEAT - 10
    assert s.report_due(20 + HEARTBEAT) == 1300  # heartbeat: the same offset again
    assert s.report_due(21 + HEARTBEAT) is None


def test_appended_bytes_are_reported_only_once_durable():
    """The master streams from its written end (before its own flush); the slave acknowledges what
    it flushed, never what it only appended, heartbeats included."""
    s = session(durable=1000, now=0)
    ok = s.receive(chunk(1000, record(100)), 10)
    s.appended(ok)
    assert s.expected_offset == 1100
    assert s.report_due(20) is None  # appended, not yet flushed
    assert s.report_due(HEARTBEAT + 1) == 1000  # a heartbeat repeats the durable offset only
    assert s.durable(1100)
    assert s.report_due(HEARTBEAT + 2) == 1100


def test_a_silent_master_is_given_up_after_housekeeping():
    s = session(now=0)
    s.receive(chunk(1000, b""), 100)
    assert not s.silent(100 + HOUSEKEEPING)
    assert s.silent(101 + HOUSEKEEPING)
    s.report_due(100 + HOUSEKEEPING)
    assert s.wait_ms(100 + HOUSEKEEPING) == 1


def test_backoff_doubles_to_the_max_and_restarts_after_an_accepted_stream():
    p = ReconnectPolicy(50, 500, uniform=lambda: 0.0)
    assert [p.delay_ms(refused=False) for _ in range(6)] == [50, 100, 200, 400, 500, 500]
    p.accepted()
    assert p.delay_ms(refused=False) == 50
    assert p.delay_ms(refused=True) == 500
    assert p.delay_ms(refused=False) == 100


@given(
    draws=st.lists(st.floats(min_value=0.0, max_value=0.999999), min_size=1, max_size=30),
    refusals=st.lists(st.booleans(), min_size=30, max_size=30),
)
def test_jittered_backoff_stays_between_half_the_step_and_the_configured_max(draws, refusals):
    values = iter(draws * 30)
    p = ReconnectPolicy(40, 1000, uniform=lambda: next(values))
    step = 40
    for refused in refusals[: len(draws)]:
        delay = p.delay_ms(refused=refused)
        expected_step = 1000 if refused else step
        assert expected_step // 2 <= delay <= expected_step <= 1000
        if not refused:
            step = min(step * 2, 1000)


def test_refusals_are_logged_once_per_message_and_failures_once_in_a_row():
    p = ReconnectPolicy(50, 500)
    longer = "FAILED_PRECONDITION: the slave's log (9) is longer than the master's (3)"
    assert p.log_level(longer, refused=True) == logging.ERROR
    assert p.log_level(longer, refused=True) == logging.DEBUG
    assert p.log_level("UNAUTHENTICATED: bad signature", refused=True) == logging.ERROR
    assert p.log_level(longer, refused=True) == logging.DEBUG
    assert p.log_level("UNAVAILABLE: connection refused", refused=False) == logging.WARNING
    assert p.log_level("UNAVAILABLE: connection refused", refused=False) == logging.DEBUG
    assert p.log_level("protocol error (WRONG_OFFSET): ...", refused=False) == logging.WARNING
    assert p.log_level("UNAVAILABLE: connection refused", refused=False) == logging.WARNING
    p.accepted()
    assert p.log_level(longer, refused=True) == logging.ERROR


def test_backoff_bounds_are_checked():
    with pytest.raises(ValueError):
        ReconnectPolicy(0, 10)
    with pytest.raises(ValueError):
        ReconnectPolicy(20, 10)
