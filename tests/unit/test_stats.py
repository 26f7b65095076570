"""StoreStats (store/stats.py): put/get/dispatch counters, latency buckets and quantile
estimates, windowed rates from the sample ring, thread-safety, the frozen exportable snapshot.

No sleeps, no sockets: time is a fake clock and explicit `now_ms` arguments. Speed is never
asserted here.
"""

from __future__ import annotations

import dataclasses
import json
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from store.stats import (
    COARSE_LATENCY_LABELS,
    LATENCY_EDGES_US,
    LATENCY_LABELS,
    StoreStats,
    StoreStatsSnapshot,
    TopicStats,
    WindowRates,
)
from store.status import PutMessageStatus as S

BOOT_MS = 1_700_000_000_000


class FakeClock:
    def __init__(self, now_ms: int = BOOT_MS) -> None:
        self.now_ms = now_ms
        self.calls = 0

    def __call__(self) -> int:
        self.calls += 1
        return self.now_ms


def new_stats(**kwargs) -> StoreStats:
    return StoreStats(FakeClock(), **kwargs)


def snap(stats: StoreStats, now_ms: int = BOOT_MS, **overrides) -> StoreStatsSnapshot:
    args = dict(
        dispatch_lag_bytes=0,
        dispatch_lag_ms=0,
        commit_log_min_offset=0,
        commit_log_max_offset=0,
        flushed_offset=0,
    )
    args.update(overrides)
    return stats.snapshot(now_ms, **args)


def bucket_of(latency_us: int) -> str:
    """The label the stats should file `latency_us` under, per the spec (not per the code)."""
    spec = [
        (0, 100, "0-100us"),
        (100, 500, "100-500us"),
        (500, 1_000, "500-1000us"),
        (1_000, 5_000, "1-5ms"),
        (5_000, 10_000, "5-10ms"),
        (10_000, 50_000, "10-50ms"),
        (50_000, 100_000, "50-100ms"),
        (100_000, 500_000, "100-500ms"),
        (500_000, 1_000_000, "500-1000ms"),
        (1_000_000, 2_000_000, "1000-2000ms"),
        (2_000_000, 3_000_000, "2000-3000ms"),
        (3_000_000, 4_000_000, "3000-4000ms"),
        (4_000_000, 5_000_000, "4000-5000ms"),
        (5_000_000, 10_000_000, "5000-10000ms"),
    ]
    for low, high, label in spec:
        if low <= latency_us < high:
            return label
    return "10000ms+"


# -- puts ----------------------------------------------------------------------------------------


def test_counts_by_status_messages_and_failures():
    stats = new_stats()
    stats.record_put(S.PUT_OK, 1, 10)
    stats.record_put(S.PUT_OK, 32, 10)  # a batch: one call, 32 messages
    stats.record_put(S.FLUSH_DISK_TIMEOUT, 1, 10)  # stored, durability missing
    stats.record_put(S.FLUSH_SLAVE_TIMEOUT, 2, 10)
    stats.record_put(S.SLAVE_NOT_AVAILABLE, 1, 10)
    stats.record_put(S.MESSAGE_ILLEGAL, 1, 10)  # not stored
    stats.record_put(S.SERVICE_NOT_AVAILABLE, 5, 10)

    s = snap(stats)

    assert s.put_calls == 7
    assert s.put_messages == 1 + 32 + 1 + 2 + 1
    assert s.put_failures == 2
    assert set(s.put_by_status) == {status.value for status in S}
    assert s.put_by_status["PUT_OK"] == 2
    assert s.put_by_status["FLUSH_DISK_TIMEOUT"] == 1
    assert s.put_by_status["FLUSH_SLAVE_TIMEOUT"] == 1
    assert s.put_by_status["SLAVE_NOT_AVAILABLE"] == 1
    assert s.put_by_status["MESSAGE_ILLEGAL"] == 1
    assert s.put_by_status["SERVICE_NOT_AVAILABLE"] == 1
    assert s.put_by_status["UNKNOWN_ERROR"] == 0
    assert sum(s.put_by_status.values()) == s.put_calls


def test_every_status_is_accepted():
    stats = new_stats()
    for status in S:
        stats.record_put(status, 1, 0)
    s = snap(stats)
    assert all(n == 1 for n in s.put_by_status.values())
    assert s.put_failures == sum(1 for status in S if not status.is_stored)
    assert s.put_messages == sum(1 for status in S if status.is_stored)


def test_empty_snapshot():
    s = snap(new_stats())
    assert s.put_calls == s.put_messages == s.put_failures == 0
    assert s.put_latency.count == 0
    assert (s.put_latency.p50_ms, s.put_latency.p99_ms, s.put_latency.max_ms) == (0.0, 0.0, 0.0)
    assert s.put_tps == WindowRates(0.0, 0.0, 0.0)
    assert dict(s.topics) == {}


def test_uptime_from_the_clock_read_once():
    clock = FakeClock(BOOT_MS)
    stats = StoreStats(clock)
    stats.record_put(S.PUT_OK, 1, 1)
    assert snap(stats, BOOT_MS + 12_345).uptime_ms == 12_345
    assert clock.calls == 1  # hot paths and snapshots take time as an argument


# -- latency buckets and quantiles -----------------------------------------------------------------


def test_labels_line_up_with_edges():
    assert len(LATENCY_LABELS) == len(LATENCY_EDGES_US) + 1
    assert COARSE_LATENCY_LABELS[0] == "0-1ms"
    assert COARSE_LATENCY_LABELS[1:] == LATENCY_LABELS[3:]
    # RocketMQ's putMessageDistributeTime edges, in ms, from 1 ms on.
    assert [e // 1000 for e in LATENCY_EDGES_US[2:]] == [1, 5, 10, 50, 100, 500, 1000, 2000, 3000, 4000, 5000, 10000]


EDGE_CASES = [0, 1, 99, 100, 499, 500, 999, 1_000, 4_999, 5_000, 9_999, 10_000, 49_999, 50_000]
EDGE_CASES += [99_999, 100_000, 499_999, 500_000, 999_999, 1_000_000, 1_999_999, 2_000_000, 3_000_000]
EDGE_CASES += [3_999_999, 4_000_000, 4_999_999, 5_000_000, 9_999_999, 10_000_000, 3_600_000_000]


@pytest.mark.parametrize("latency_us", EDGE_CASES)
def test_latency_bucket_at_edges(latency_us):
    stats = new_stats()
    stats.record_put(S.PUT_OK, 1, latency_us)
    buckets = snap(stats).put_latency.buckets
    assert list(buckets) == list(LATENCY_LABELS)
    assert {k: v for k, v in buckets.items() if v} == {bucket_of(latency_us): 1}


def test_coarse_view_merges_sub_millisecond_buckets():
    stats = new_stats()
    for latency_us in (50, 150, 600, 999, 1_000, 12_000_000):
        stats.record_put(S.PUT_OK, 1, latency_us)
    lat = snap(stats).put_latency
    assert list(lat.coarse) == list(COARSE_LATENCY_LABELS)
    assert lat.coarse["0-1ms"] == 4
    assert lat.coarse["1-5ms"] == 1
    assert lat.coarse["10000ms+"] == 1
    assert sum(lat.coarse.values()) == lat.count == 6


def test_negative_latency_counts_as_fastest_bucket():
    stats = new_stats()
    stats.record_put(S.PUT_OK, 1, -5)
    lat = snap(stats).put_latency
    assert lat.buckets["0-100us"] == 1
    assert lat.max_ms == 0.0


def test_quantiles_are_bucket_upper_bounds():
    stats = new_stats()
    for _ in range(50):
        stats.record_put(S.PUT_OK, 1, 40)  # 0-100us
    for _ in range(49):
        stats.record_put(S.PUT_OK, 1, 700)  # 500-1000us
    stats.record_put(S.PUT_OK, 1, 20_000)  # 10-50ms: the single slowest

    lat = snap(stats).put_latency

    assert lat.count == 100
    assert lat.p50_ms == 0.1  # rank 50 is the last of the 0-100us bucket
    assert lat.p99_ms == 1.0  # rank 99 is the last of the 500-1000us bucket
    assert lat.max_ms == 20.0  # exact


@pytest.mark.parametrize(("fast", "expected_p50_ms"), [(50, 0.1), (49, 5.0)])
def test_quantile_moves_to_next_bucket_one_past_the_edge(fast, expected_p50_ms):
    stats = new_stats()
    for _ in range(fast):
        stats.record_put(S.PUT_OK, 1, 40)  # 0-100us
    for _ in range(99 - fast):
        stats.record_put(S.PUT_OK, 1, 3_000)  # 1-5ms
    stats.record_put(S.PUT_OK, 1, 8_000)  # 5-10ms, so that no cap applies below
    lat = snap(stats).put_latency
    assert lat.count == 100
    assert lat.p50_ms == expected_p50_ms  # rank 50: the last fast put, or the first 1-5ms one
    assert lat.p99_ms == 5.0


def test_quantile_capped_at_the_slowest_put():
    stats = new_stats()
    for _ in range(10):
        stats.record_put(S.PUT_OK, 1, 3_000)
    lat = snap(stats).put_latency
    assert lat.p50_ms == lat.p99_ms == lat.max_ms == 3.0  # bucket bound 5 ms, but none took > 3 ms


def test_p99_uses_integer_rank():
    # 0.99 * 1000 = 990 exactly; the 990th of 1000 is still in the first bucket.
    stats = new_stats()
    for _ in range(990):
        stats.record_put(S.PUT_OK, 1, 10)
    for _ in range(10):
        stats.record_put(S.PUT_OK, 1, 7_000)
    lat = snap(stats).put_latency
    assert lat.p99_ms == 0.1
    stats.record_put(S.PUT_OK, 1, 7_000)  # 1001 puts: rank 991 is in 5-10ms
    assert snap(stats).put_latency.p99_ms == 7.0  # 10 ms capped at the max, 7 ms


def test_quantile_in_open_ended_bucket_is_the_max():
    stats = new_stats()
    for _ in range(3):
        stats.record_put(S.PUT_OK, 1, 15_000_000)
    stats.record_put(S.PUT_OK, 1, 42_000_000)
    lat = snap(stats).put_latency
    assert lat.p50_ms == lat.p99_ms == lat.max_ms == 42_000.0


@given(st.lists(st.integers(min_value=0, max_value=20_000_000), min_size=1, max_size=300))
def test_quantile_estimate_bounds_the_true_quantile(latencies):
    stats = new_stats()
    for latency_us in latencies:
        stats.record_put(S.PUT_OK, 1, latency_us)
    lat = snap(stats).put_latency
    ordered = sorted(latencies)
    n = len(ordered)
    for q, estimate in ((50, lat.p50_ms), (99, lat.p99_ms)):
        true_us = ordered[max(1, -(-n * q // 100)) - 1]  # nearest rank
        # Compare in ms as the code computes them (us / 1000 is monotone; x * 1000 is not exact).
        assert estimate >= true_us / 1000  # an upper bound ...
        assert estimate <= max(ordered) / 1000  # ... never past the slowest put ...
        # ... and inside the true quantile's bucket.
        index = LATENCY_LABELS.index(bucket_of(true_us))
        lower = ([0] + list(LATENCY_EDGES_US))[index]
        upper = (list(LATENCY_EDGES_US) + [max(ordered)])[index]
        assert lower / 1000 <= estimate <= upper / 1000
    assert lat.max_ms == max(ordered) / 1000


# -- gets --------------------------------------------------------------------------------------


def test_get_counts():
    stats = new_stats()
    stats.record_get(True, 4, 4_096)
    stats.record_get(True, 1, 100)
    stats.record_get(False, 0, 0)
    s = snap(stats)
    assert (s.get_found, s.get_miss, s.get_messages, s.get_bytes) == (2, 1, 5, 4_196)


def test_miss_hands_out_nothing():
    stats = new_stats()
    stats.record_get(False, 3, 999)  # a caller passing figures with a miss: ignored
    s = snap(stats)
    assert (s.get_found, s.get_miss, s.get_messages, s.get_bytes) == (0, 1, 0, 0)


# -- dispatch ----------------------------------------------------------------------------------


def test_per_topic_counts():
    stats = new_stats()
    stats.record_dispatch("orders", 100, BOOT_MS + 1)
    stats.record_dispatch("payments", 250, BOOT_MS + 2)
    stats.record_dispatch("orders", 300, BOOT_MS + 3)

    s = snap(stats)

    assert dict(s.topics) == {
        "orders": TopicStats(messages=2, bytes=400, last_store_timestamp_ms=BOOT_MS + 3),
        "payments": TopicStats(messages=1, bytes=250, last_store_timestamp_ms=BOOT_MS + 2),
    }
    assert s.dispatched_messages == 3
    assert s.dispatched_bytes == 650
    assert s.last_dispatched_store_timestamp_ms == BOOT_MS + 3


def test_counts_of_many_messages_at_once_equal_counts_one_by_one():
    one_by_one, at_once = new_stats(), new_stats()
    for size, ts in ((100, BOOT_MS + 1), (300, BOOT_MS + 3)):
        one_by_one.record_dispatch("orders", size, ts)
    one_by_one.record_dispatch("payments", 250, BOOT_MS + 4)
    at_once.record_dispatched("orders", 2, 400, BOOT_MS + 3)
    at_once.record_dispatched("payments", 1, 250, BOOT_MS + 4)

    a, b = snap(one_by_one), snap(at_once)
    assert dict(a.topics) == dict(b.topics)
    assert (a.dispatched_messages, a.dispatched_bytes, a.last_dispatched_store_timestamp_ms) == (3, 650, BOOT_MS + 4)
    assert (b.dispatched_messages, b.dispatched_bytes, b.last_dispatched_store_timestamp_ms) == (3, 650, BOOT_MS + 4)


def test_topics_are_a_copy():
    stats = new_stats()
    stats.record_dispatch("orders", 100, 1)
    s = snap(stats)
    stats.record_dispatch("orders", 100, 2)
    stats.record_dispatch("new-topic", 1, 3)
    assert list(s.topics) == ["orders"]
    assert s.topics["orders"].messages == 1


def test_store_figures_passed_through():
    s = snap(
        new_stats(),
        dispatch_lag_bytes=4_096,
        dispatch_lag_ms=12,
        commit_log_min_offset=1_073_741_824,
        commit_log_max_offset=1_073_800_000,
        flushed_offset=1_073_790_000,
    )
    assert (s.dispatch_lag_bytes, s.dispatch_lag_ms) == (4_096, 12)
    assert (s.commit_log_min_offset, s.commit_log_max_offset, s.flushed_offset) == (
        1_073_741_824,
        1_073_800_000,
        1_073_790_000,
    )
    assert s.unflushed_bytes == 10_000


# -- rates over windows --------------------------------------------------------------------------


def run_steady(stats: StoreStats, seconds: int, *, puts_per_s: int, start_ms: int = BOOT_MS) -> int:
    """One sample per second with `puts_per_s` single-message puts between samples; returns the
    time of the last sample."""
    now = start_ms
    stats.sample(now)
    for _ in range(seconds):
        for _ in range(puts_per_s):
            stats.record_put(S.PUT_OK, 1, 10)
        now += 1_000
        stats.sample(now)
    return now


def test_no_rate_with_fewer_than_two_samples():
    stats = new_stats()
    stats.record_put(S.PUT_OK, 100, 10)
    assert snap(stats).put_tps == WindowRates(0.0, 0.0, 0.0)
    stats.sample(BOOT_MS)
    stats.record_put(S.PUT_OK, 100, 10)
    assert snap(stats).put_tps == WindowRates(0.0, 0.0, 0.0)
    stats.sample(BOOT_MS + 1_000)
    assert snap(stats).put_tps == WindowRates(100.0, 100.0, 100.0)  # the ring is younger: all of it


def test_windows_see_different_rates():
    stats = new_stats()
    # 10 minutes at 1 msg/s, then 50 s at 10 msgs/s, then 10 s at 100 msgs/s.
    now = run_steady(stats, 600, puts_per_s=1)
    now = run_steady(stats, 50, puts_per_s=10, start_ms=now)
    now = run_steady(stats, 10, puts_per_s=100, start_ms=now)

    rates = snap(stats, now).put_tps

    assert rates.last_10s == 100.0
    assert rates.last_1m == (50 * 10 + 10 * 100) / 60
    assert rates.last_10m == (540 * 1 + 50 * 10 + 10 * 100) / 600


def test_window_uses_newest_sample_at_least_that_old():
    stats = new_stats()
    stats.sample(BOOT_MS)
    stats.record_put(S.PUT_OK, 10, 10)
    stats.sample(BOOT_MS + 5_000)
    stats.record_put(S.PUT_OK, 90, 10)
    stats.sample(BOOT_MS + 10_500)  # a late sampler: 10.5 s after the first, 5.5 s after the second
    # 10 s window: the newest sample at least 10 s old is the first one.
    assert snap(stats).put_tps.last_10s == 100 * 1000 / 10_500


def test_ring_wraps_around():
    stats = new_stats(ring_capacity=5)
    now = run_steady(stats, 3, puts_per_s=1000)  # evicted below
    now = run_steady(stats, 20, puts_per_s=7, start_ms=now)
    # Only the last 5 samples (4 s of 7 msgs/s) are kept: every window sees those.
    rates = snap(stats, now).put_tps
    assert rates == WindowRates(7.0, 7.0, 7.0)


def test_ring_wrap_around_keeps_window_rates_exact():
    stats = new_stats(ring_capacity=15)
    now = run_steady(stats, 100, puts_per_s=3)
    now = run_steady(stats, 10, puts_per_s=9, start_ms=now)
    rates = snap(stats, now).put_tps
    assert rates.last_10s == 9.0  # exactly one 10 s span, still inside the ring
    assert rates.last_1m == (4 * 3 + 10 * 9) / 14  # the ring spans only 14 s


def test_samples_that_do_not_advance_are_dropped():
    stats = new_stats()
    stats.sample(BOOT_MS + 1_000)
    stats.record_put(S.PUT_OK, 10, 10)
    stats.sample(BOOT_MS + 1_000)  # same instant: dropped (would divide by zero)
    stats.sample(BOOT_MS)  # clock stepped back: dropped
    assert snap(stats).put_tps == WindowRates(0.0, 0.0, 0.0)
    stats.sample(BOOT_MS + 2_000)
    assert snap(stats).put_tps.last_10s == 10.0


def test_rejects_a_ring_too_small_for_a_rate():
    with pytest.raises(ValueError, match="ring_capacity"):
        new_stats(ring_capacity=1)


def test_get_and_dispatch_rates():
    stats = new_stats()
    stats.sample(BOOT_MS)
    for _ in range(20):
        stats.record_get(True, 2, 200)
    for _ in range(5):
        stats.record_get(False, 0, 0)
    for _ in range(30):
        stats.record_dispatch("t", 1_000, BOOT_MS)
    stats.sample(BOOT_MS + 10_000)

    s = snap(stats, BOOT_MS + 10_000)

    assert s.get_found_tps.last_10s == 2.0
    assert s.get_miss_tps.last_10s == 0.5
    assert s.get_messages_tps.last_10s == 4.0
    assert s.dispatch_tps.last_10s == 3.0
    assert s.dispatch_bytes_per_s.last_10s == 3_000.0


def test_rates_ignore_activity_after_the_newest_sample():
    stats = new_stats()
    run_steady(stats, 10, puts_per_s=5)
    for _ in range(1000):
        stats.record_put(S.PUT_OK, 1, 10)
    s = snap(stats)
    assert s.put_tps.last_10s == 5.0
    assert s.put_messages == 1050


def test_recent_latency_covers_the_last_minute_only():
    stats = new_stats()
    stats.sample(BOOT_MS)
    for _ in range(200):
        stats.record_put(S.PUT_OK, 1, 2_500_000)  # a bad stretch, long ago
    now = BOOT_MS
    for _ in range(120):
        now += 1_000
        stats.record_put(S.PUT_OK, 1, 300)
        stats.sample(now)

    s = snap(stats, now)

    assert s.put_latency.count == 320
    # Since start the slow puts are the majority: bucket 2000-3000ms, capped at the max, 2.5 s.
    assert s.put_latency.p50_ms == 2_500.0
    recent = s.put_latency_last_1m
    assert recent.count == 60
    assert recent.buckets["100-500us"] == 60
    assert recent.p50_ms == recent.p99_ms == recent.max_ms == 0.5


def test_recent_latency_empty_before_two_samples():
    stats = new_stats()
    stats.record_put(S.PUT_OK, 1, 300)
    stats.sample(BOOT_MS)
    recent = snap(stats).put_latency_last_1m
    assert recent.count == 0
    assert set(recent.buckets.values()) == {0}
    assert (recent.p50_ms, recent.p99_ms, recent.max_ms) == (0.0, 0.0, 0.0)


# -- threads -----------------------------------------------------------------------------------

THREADS = 8
PUTS_PER_THREAD = 5_000
STATUS_CYCLE = (S.PUT_OK, S.PUT_OK, S.PUT_OK, S.FLUSH_DISK_TIMEOUT, S.MESSAGE_ILLEGAL)
LATENCY_CYCLE = (50, 300, 800, 2_000, 7_000, 20_000, 70_000)


def test_concurrent_puts_give_exact_totals():
    stats = new_stats()
    start = threading.Barrier(THREADS + 2)
    stop = threading.Event()
    errors: list[BaseException] = []

    def putter(k: int) -> None:
        try:
            start.wait()
            for i in range(PUTS_PER_THREAD):
                stats.record_put(STATUS_CYCLE[i % len(STATUS_CYCLE)], k + 1, LATENCY_CYCLE[i % len(LATENCY_CYCLE)])
                stats.record_get(i % 2 == 0, 1, 10)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    def dispatcher_and_reader() -> None:
        # One dispatcher writes while this same role's reader snapshots: dict copies must never
        # see a half-updated topic nor fail with "changed size during iteration".
        try:
            start.wait()
            now = BOOT_MS
            n = 0
            while not stop.is_set() or n < 2_000:
                stats.record_dispatch(f"topic-{n % 50}", 10, now)
                n += 1
                if n % 100 == 0:
                    now += 1_000
                    stats.sample(now)
        except BaseException as e:  # pragma: no cover
            errors.append(e)

    def reader() -> None:
        try:
            start.wait()
            while not stop.is_set():
                s = snap(stats)
                for t in s.topics.values():
                    assert t.bytes == t.messages * 10
                assert s.put_calls == sum(s.put_latency.buckets.values())
        except BaseException as e:  # pragma: no cover
            errors.append(e)

    putters = [threading.Thread(target=putter, args=(k,)) for k in range(THREADS)]
    others = [threading.Thread(target=dispatcher_and_reader), threading.Thread(target=reader)]
    for t in putters + others:
        t.start()
    for t in putters:
        t.join(timeout=120)
    stop.set()
    for t in others:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in putters + others)
    assert errors == []

    s = snap(stats)
    total = THREADS * PUTS_PER_THREAD
    per_cycle = {status: 0 for status in STATUS_CYCLE}
    for i in range(PUTS_PER_THREAD):
        per_cycle[STATUS_CYCLE[i % len(STATUS_CYCLE)]] += 1
    assert s.put_calls == total
    assert s.put_latency.count == total
    assert s.put_by_status["PUT_OK"] == THREADS * per_cycle[S.PUT_OK]
    assert s.put_by_status["FLUSH_DISK_TIMEOUT"] == THREADS * per_cycle[S.FLUSH_DISK_TIMEOUT]
    assert s.put_failures == s.put_by_status["MESSAGE_ILLEGAL"] == THREADS * per_cycle[S.MESSAGE_ILLEGAL]
    stored_per_thread = per_cycle[S.PUT_OK] + per_cycle[S.FLUSH_DISK_TIMEOUT]
    assert s.put_messages == sum((k + 1) * stored_per_thread for k in range(THREADS))
    assert s.put_latency.max_ms == 70.0
    assert s.get_found == s.get_miss == total // 2
    assert s.get_messages == total // 2
    assert s.dispatched_messages == sum(t.messages for t in s.topics.values())
    assert s.dispatched_bytes == 10 * s.dispatched_messages


# -- the snapshot as a value -----------------------------------------------------------------------


def busy_snapshot() -> StoreStatsSnapshot:
    stats = new_stats()
    stats.sample(BOOT_MS)
    stats.record_put(S.PUT_OK, 3, 250)
    stats.record_put(S.FLUSH_SLAVE_TIMEOUT, 1, 4_000_000)
    stats.record_get(True, 3, 3_000)
    stats.record_dispatch("orders", 1_000, BOOT_MS + 10)
    stats.sample(BOOT_MS + 1_000)
    return snap(stats, BOOT_MS + 1_500, commit_log_max_offset=4_000, flushed_offset=3_000)


def test_snapshot_is_immutable():
    s = busy_snapshot()
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.put_calls = 0  # type: ignore[misc]
    with pytest.raises(TypeError):
        s.put_by_status["PUT_OK"] = 0  # type: ignore[index]
    with pytest.raises(TypeError):
        s.topics["evil"] = TopicStats(0, 0, 0)  # type: ignore[index]
    with pytest.raises(TypeError):
        s.put_latency.buckets["0-100us"] = 0  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.put_tps.last_10s = 0.0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.topics["orders"].messages = 0  # type: ignore[misc]
    assert not hasattr(s, "__dict__")  # slotted: no stray attributes either


def test_as_dict_is_json_serialisable():
    s = busy_snapshot()
    exported = json.loads(json.dumps(s.as_dict()))

    assert exported["put_calls"] == 2
    assert exported["put_messages"] == 4
    assert exported["put_by_status"]["FLUSH_SLAVE_TIMEOUT"] == 1
    assert exported["put_tps"] == {"last_10s": 4.0, "last_1m": 4.0, "last_10m": 4.0}
    assert exported["put_latency"]["buckets"]["100-500us"] == 1
    assert exported["put_latency"]["coarse"]["4000-5000ms"] == 1
    assert exported["put_latency"]["max_ms"] == 4_000.0
    assert exported["topics"] == {"orders": {"messages": 1, "bytes": 1_000, "last_store_timestamp_ms": BOOT_MS + 10}}
    assert exported["unflushed_bytes"] == 1_000
    assert exported["uptime_ms"] == 1_500
    assert {f.name for f in dataclasses.fields(StoreStatsSnapshot)} <= set(exported)


def test_as_dict_is_a_detached_copy():
    s = busy_snapshot()
    d = s.as_dict()
    d["put_by_status"]["PUT_OK"] = 999
    d["topics"]["orders"]["messages"] = 999
    assert s.put_by_status["PUT_OK"] == 1
    assert s.topics["orders"].messages == 1
