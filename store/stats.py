"""`StoreStats`: the store's statistics, the useful parts of RocketMQ's StoreStatsService.

This module owns the counters the store keeps about itself and the frozen `StoreStatsSnapshot`
the broker exports:

- puts: calls by `PutMessageStatus` name, messages stored, failures, and the put latency
  distribution (RocketMQ's putMessageDistributeTime buckets, with the first millisecond split
  into 0-100 us, 100-500 us and 500-1000 us so that fast puts get a usable p50/p99), overall and
  per status (`BucketCounts`, what a Prometheus histogram needs: counts and the sum);
- CommitLog fsyncs: how many and how long each took, in the same buckets;
- gets: found and missed reads, messages and bytes handed out;
- dispatch: per-topic messages, bytes and last store timestamp, as the dispatcher saw them;
- rates (msgs/s over 10 s, 1 min and 10 min: RocketMQ's TPS windows) from a bounded ring of
  samples that a store thread takes about once a second.

Sans-IO: no threads, no sleeps, no clock reads on the hot paths. Time comes in as an argument
(`sample(now_ms)`, `snapshot(now_ms, ...)`); the constructor's `clock_ms` is read once, for the
boot time that `uptime_ms` is measured from.

Thread-safety, precisely:

- `record_put` may be called by any number of threads at once. Its counters live behind one lock
  (`_put_lock`) that is held only for a handful of integer updates; everything that needs no
  shared state (status slot, latency bucket) is computed before taking it.
- `record_get` likewise, behind its own lock (`_get_lock`), so readers never contend with writers.
- `record_dispatch` and `record_dispatched` must be called by ONE thread at a time (the store's
  single dispatcher thread); two concurrent callers could lose updates. They take no lock: each
  new total is published as a fresh immutable tuple with a single assignment (an attribute, or
  one dict item), which is atomic under CPython, and snapshot readers copy the topic dict with
  `dict.copy()`, which runs in C without executing Python code (str keys, tuple values), so a reader sees every topic's
  (messages, bytes, timestamp) as a consistent triple, never a half-updated one.
- `sample` and `snapshot` may be called from any thread, concurrently with everything above. The
  ring of samples has its own lock. A snapshot is consistent within each group (puts, gets,
  dispatch), not across groups: a put recorded while a snapshot is taken may show in the put
  totals and not yet in the dispatch totals, as in RocketMQ.
- `StoreStatsSnapshot` and its parts are frozen values: safe to share between threads.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

from .log.damage import DamageReport
from .status import PutMessageStatus

__all__ = [
    "BucketCounts",
    "COARSE_LATENCY_LABELS",
    "LATENCY_EDGES_US",
    "LATENCY_LABELS",
    "WINDOWS_MS",
    "LatencyStats",
    "StoreStats",
    "StoreStatsSnapshot",
    "TopicStats",
    "WindowRates",
]

# Bucket i holds latencies in [LATENCY_EDGES_US[i-1], LATENCY_EDGES_US[i]) microseconds; the last
# bucket is open-ended. From 1 ms on these are RocketMQ's putMessageDistributeTime edges; below 1 ms
# RocketMQ has a single bucket, which would put every fast put (most of them, on a good disk) in
# [0, 1 ms) and make p50 and p99 both read "1 ms".
LATENCY_EDGES_US: tuple[int, ...] = (
    100,
    500,
    1_000,
    5_000,
    10_000,
    50_000,
    100_000,
    500_000,
    1_000_000,
    2_000_000,
    3_000_000,
    4_000_000,
    5_000_000,
    10_000_000,
)
LATENCY_LABELS: tuple[str, ...] = (
    "0-100us",
    "100-500us",
    "500-1000us",
    "1-5ms",
    "5-10ms",
    "10-50ms",
    "50-100ms",
    "100-500ms",
    "500-1000ms",
    "1000-2000ms",
    "2000-3000ms",
    "3000-4000ms",
    "4000-5000ms",
    "5000-10000ms",
    "10000ms+",
)
# RocketMQ's own view: the three sub-millisecond buckets merged into [0, 1 ms).
_SUB_MS_BUCKETS = 3
COARSE_LATENCY_LABELS: tuple[str, ...] = ("0-1ms",) + LATENCY_LABELS[_SUB_MS_BUCKETS:]
_N_BUCKETS = len(LATENCY_LABELS)
assert len(LATENCY_EDGES_US) + 1 == _N_BUCKETS
assert LATENCY_EDGES_US[_SUB_MS_BUCKETS - 1] == 1_000

# RocketMQ's TPS windows, and the names they are exported under.
WINDOWS_MS: tuple[tuple[str, int], ...] = (("last_10s", 10_000), ("last_1m", 60_000), ("last_10m", 600_000))
_LATENCY_WINDOW_MS = 60_000

# Enough one-second samples to span the 10-minute window, with slack for a late sampler.
DEFAULT_RING_CAPACITY = 660

_STATUSES: tuple[PutMessageStatus, ...] = tuple(PutMessageStatus)
# Keyed by the member's value (a str, whose hash is cached in C): hashing the enum member itself
# goes through Enum.__hash__, a Python-level call that costs more than the whole lock section.
_STATUS_SLOT: dict[str, int] = {s._value_: i for i, s in enumerate(_STATUSES)}
_STATUS_STORED: tuple[bool, ...] = tuple(s.is_stored for s in _STATUSES)


@dataclass(frozen=True, slots=True)
class WindowRates:
    """Per-second rates over RocketMQ's TPS windows. Each is measured between the newest sample
    and the newest sample at least that window older (or the oldest one kept, while the ring is
    younger than the window); 0.0 with fewer than two samples."""

    last_10s: float = 0.0
    last_1m: float = 0.0
    last_10m: float = 0.0


@dataclass(frozen=True, slots=True)
class LatencyStats:
    """A put latency distribution and quantiles estimated from it.

    `buckets` maps each of `LATENCY_LABELS` to a count (all labels present, in order); `coarse`
    is RocketMQ's putMessageDistributeTime view (`COARSE_LATENCY_LABELS`, sub-ms merged).

    The quantiles are estimates, not exact: `p50_ms` / `p99_ms` are the UPPER BOUND of the bucket
    holding the nearest-rank quantile, capped at the largest latency ever recorded (no put took
    longer, so the cap is still an upper bound); in the open-ended last bucket they are that
    largest latency. The true quantile is at most the estimate and at least the bucket's lower
    bound. `max_ms` is exact for the since-start distribution; for a windowed one (whose single
    largest sample is not kept) it is estimated the same way as the quantiles. All 0.0 when
    `count` is 0.
    """

    count: int
    buckets: Mapping[str, int]
    coarse: Mapping[str, int]
    p50_ms: float
    p99_ms: float
    max_ms: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "buckets": dict(self.buckets),
            "coarse": dict(self.coarse),
            "p50_ms": self.p50_ms,
            "p99_ms": self.p99_ms,
            "max_ms": self.max_ms,
        }


@dataclass(frozen=True, slots=True)
class BucketCounts:
    """A latency distribution as raw counts: `counts[i]` latencies fell in bucket i (upper edges
    `LATENCY_EDGES_US`, the last bucket open-ended) and they add up to `sum_us`."""

    counts: tuple[int, ...]
    sum_us: int

    @property
    def count(self) -> int:
        return sum(self.counts)


@dataclass(frozen=True, slots=True)
class TopicStats:
    """What the dispatcher saw of one topic since the store started."""

    messages: int
    bytes: int
    last_store_timestamp_ms: int


_NO_DAMAGE = DamageReport((), 0, 0, 0, MappingProxyType({}))


@dataclass(frozen=True, slots=True)
class StoreStatsSnapshot:
    """The store's statistics at `taken_at_ms`: a frozen value, safe to share and to export
    (`as_dict()` is JSON-serialisable). Totals count since the store started.

    Puts: `put_calls` counts every `record_put`; `put_by_status` the same by status name (every
    name present); `put_messages` the messages of puts whose status says the message is stored
    (`PutMessageStatus.is_stored`, so durability timeouts count as stored); `put_failures` the
    calls whose message was not stored (RocketMQ's putMessageFailedTimes); `put_tps` stored
    messages per second. `put_latency` is the distribution since start, `put_latency_last_1m` the
    one between the two samples the 1-minute rate uses (empty with fewer than two samples).

    Gets: `get_found` / `get_miss` count reads that found messages or not; `get_messages` and
    `get_bytes` what the found ones handed out (RocketMQ's getMessageTransferedMsgCount).

    Dispatch: totals and `topics` (name -> `TopicStats`, a copy) as the dispatcher recorded them;
    `dispatch_lag_*` and the CommitLog offsets are passed in by the store.

    Damage: the records found damaged and what they held up (`store.damage.DamageReport`),
    passed in by the store.
    """

    taken_at_ms: int
    uptime_ms: int
    put_calls: int
    put_messages: int
    put_failures: int
    put_by_status: Mapping[str, int]
    put_tps: WindowRates
    put_latency: LatencyStats
    put_latency_last_1m: LatencyStats
    get_found: int
    get_miss: int
    get_messages: int
    get_bytes: int
    get_found_tps: WindowRates
    get_miss_tps: WindowRates
    get_messages_tps: WindowRates
    dispatched_messages: int
    dispatched_bytes: int
    last_dispatched_store_timestamp_ms: int
    dispatch_tps: WindowRates
    dispatch_bytes_per_s: WindowRates
    topics: Mapping[str, TopicStats]
    dispatch_lag_bytes: int
    dispatch_lag_ms: int
    commit_log_min_offset: int
    commit_log_max_offset: int
    flushed_offset: int
    # Per status name, only statuses that were answered at least once.
    put_latency_by_status: Mapping[str, BucketCounts] = field(default_factory=lambda: MappingProxyType({}))
    fsync_latency: BucketCounts = field(default_factory=lambda: BucketCounts((0,) * _N_BUCKETS, 0))
    damage: DamageReport = field(default_factory=lambda: _NO_DAMAGE)

    @property
    def unflushed_bytes(self) -> int:
        """CommitLog bytes written but not yet on disk."""
        return max(0, self.commit_log_max_offset - self.flushed_offset)

    def as_dict(self) -> dict[str, Any]:
        """Plain dicts, lists, str, int and float only: ready for `json.dumps`."""
        out: dict[str, Any] = {}
        for f in fields(self):
            out[f.name] = _plain(getattr(self, f.name))
        out["unflushed_bytes"] = self.unflushed_bytes
        return out


def _plain(value: Any) -> Any:
    if isinstance(value, (LatencyStats, DamageReport)):
        return value.as_dict()
    if isinstance(value, BucketCounts):
        return {"counts": list(value.counts), "sum_us": value.sum_us}
    if isinstance(value, (WindowRates, TopicStats)):
        return {f.name: getattr(value, f.name) for f in fields(value)}
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


@dataclass(frozen=True, slots=True)
class _Sample:
    """Cumulative counters at one instant; rates come from differences between two samples."""

    at_ms: int
    put_messages: int
    get_found: int
    get_miss: int
    get_messages: int
    dispatched_messages: int
    dispatched_bytes: int
    latency: tuple[int, ...]


class StoreStats:
    """Counters of one store. See the module docstring for which thread may call what."""

    def __init__(self, clock_ms: Callable[[], int], *, ring_capacity: int = DEFAULT_RING_CAPACITY) -> None:
        if ring_capacity < 2:
            raise ValueError(f"ring_capacity must be at least 2 to compute a rate, got {ring_capacity}")
        self.boot_ms = clock_ms()

        self._put_lock = threading.Lock()
        self._put_messages = 0
        self._put_failures = 0
        self._put_max_latency_us = 0
        # Latency buckets per status: calls by status and the overall distribution are their sums.
        self._latency_by_status = [[0] * _N_BUCKETS for _ in _STATUSES]
        self._latency_sum_by_status = [0] * len(_STATUSES)

        self._fsync_lock = threading.Lock()
        self._fsync_latency = [0] * _N_BUCKETS
        self._fsync_sum_us = 0

        self._get_lock = threading.Lock()
        self._get_found = 0
        self._get_miss = 0
        self._get_messages = 0
        self._get_bytes = 0

        # Single writer (the dispatcher); each value is replaced whole, never mutated in place.
        self._dispatched: tuple[int, int, int] = (0, 0, 0)  # messages, bytes, last store timestamp
        self._topics: dict[str, tuple[int, int, int]] = {}

        self._ring_lock = threading.Lock()
        self._ring: deque[_Sample] = deque(maxlen=ring_capacity)

    # -- hot paths -------------------------------------------------------------------------------

    def record_put(self, status: PutMessageStatus, msg_num: int, latency_us: int) -> None:
        """Count one put of `msg_num` messages (a batch counts as one call) that took `latency_us`
        from arrival to answer. Any thread. Negative latencies (a clock step) count as 0."""
        slot = _STATUS_SLOT[status._value_]
        bucket = bisect_right(LATENCY_EDGES_US, latency_us)
        stored = _STATUS_STORED[slot]
        with self._put_lock:
            self._latency_by_status[slot][bucket] += 1
            self._latency_sum_by_status[slot] += latency_us
            if stored:
                self._put_messages += msg_num
            else:
                self._put_failures += 1
            if latency_us > self._put_max_latency_us:
                self._put_max_latency_us = latency_us

    def record_fsync(self, latency_us: int) -> None:
        """Count one CommitLog fdatasync that took `latency_us`. Any thread."""
        bucket = bisect_right(LATENCY_EDGES_US, latency_us)
        with self._fsync_lock:
            self._fsync_latency[bucket] += 1
            self._fsync_sum_us += max(0, latency_us)

    def record_get(self, found: bool, msg_num: int, total_bytes: int) -> None:
        """Count one read by queue offset; `msg_num` and `total_bytes` are what it handed out.
        Any thread."""
        with self._get_lock:
            if found:
                self._get_found += 1
                self._get_messages += msg_num
                self._get_bytes += total_bytes
            else:
                self._get_miss += 1

    def record_dispatch(self, topic: str, size_bytes: int, store_timestamp_ms: int) -> None:
        """Count one message the dispatcher handed to the ConsumeQueues and indexes. ONE thread
        only (the dispatcher): no lock, see the module docstring."""
        self.record_dispatched(topic, 1, size_bytes, store_timestamp_ms)

    def record_dispatched(self, topic: str, messages: int, size_bytes: int, last_store_timestamp_ms: int) -> None:
        """Count `messages` messages of `topic` (`size_bytes` in all, the last stored at
        `last_store_timestamp_ms`) that the dispatcher handed over: a round's messages of one
        topic in one call. ONE thread only, as `record_dispatch`."""
        total_messages, total_bytes, _ = self._dispatched
        self._dispatched = (total_messages + messages, total_bytes + size_bytes, last_store_timestamp_ms)
        topics = self._topics
        seen = topics.get(topic)
        if seen is None:
            topics[topic] = (messages, size_bytes, last_store_timestamp_ms)
        else:
            topics[topic] = (seen[0] + messages, seen[1] + size_bytes, last_store_timestamp_ms)

    # -- sampling and reading --------------------------------------------------------------------

    def sample(self, now_ms: int) -> None:
        """Keep the current totals as a sample taken at `now_ms`. Meant to be called about once a
        second: the ring keeps `ring_capacity` samples (the oldest fall off), so it spans capacity x
        interval, and a window longer than that is measured over what the ring holds. A sample not
        later than the newest one is dropped (a clock that stepped back would make rates wrong)."""
        with self._put_lock:
            put_messages = self._put_messages
            rows = [tuple(row) for row in self._latency_by_status]
        latency = _column_sums(rows)
        with self._get_lock:
            get_found, get_miss, get_messages = self._get_found, self._get_miss, self._get_messages
        dispatched_messages, dispatched_bytes, _ = self._dispatched
        entry = _Sample(
            now_ms, put_messages, get_found, get_miss, get_messages, dispatched_messages, dispatched_bytes, latency
        )
        with self._ring_lock:
            if self._ring and self._ring[-1].at_ms >= now_ms:
                return
            self._ring.append(entry)

    def snapshot(
        self,
        now_ms: int,
        *,
        dispatch_lag_bytes: int,
        dispatch_lag_ms: int,
        commit_log_min_offset: int,
        commit_log_max_offset: int,
        flushed_offset: int,
        damage: DamageReport = _NO_DAMAGE,
    ) -> StoreStatsSnapshot:
        """Current totals, rates from the sample ring, and the store's figures passed in. Any
        thread; copies under each group's lock, computes outside them."""
        with self._put_lock:
            rows = [tuple(row) for row in self._latency_by_status]
            sums = tuple(self._latency_sum_by_status)
            put_messages = self._put_messages
            put_failures = self._put_failures
            max_us = self._put_max_latency_us
        by_status = tuple(sum(row) for row in rows)
        latency = _column_sums(rows)
        by_status_latency = {
            s._value_: BucketCounts(row, total) for s, n, row, total in zip(_STATUSES, by_status, rows, sums) if n
        }
        with self._fsync_lock:
            fsync = BucketCounts(tuple(self._fsync_latency), self._fsync_sum_us)
        with self._get_lock:
            get_found, get_miss = self._get_found, self._get_miss
            get_messages, get_bytes = self._get_messages, self._get_bytes
        dispatched_messages, dispatched_bytes, last_ts = self._dispatched
        topics = self._topics.copy()  # atomic in CPython: see the module docstring
        with self._ring_lock:
            ring = list(self._ring)

        pairs = {name: _window_pair(ring, width) for name, width in WINDOWS_MS}

        def rates(counter: Callable[[_Sample], int]) -> WindowRates:
            return WindowRates(**{name: _rate(pair, counter) for name, pair in pairs.items()})

        recent = _window_pair(ring, _LATENCY_WINDOW_MS)
        if recent is None:
            recent_latency = _latency_stats((0,) * _N_BUCKETS, 0, exact_max=False)
        else:
            old, new = recent
            recent_latency = _latency_stats(
                tuple(b - a for a, b in zip(old.latency, new.latency)), max_us, exact_max=False
            )

        return StoreStatsSnapshot(
            taken_at_ms=now_ms,
            uptime_ms=now_ms - self.boot_ms,
            put_calls=sum(by_status),
            put_messages=put_messages,
            put_failures=put_failures,
            put_by_status=MappingProxyType({s._value_: n for s, n in zip(_STATUSES, by_status)}),
            put_tps=rates(lambda s: s.put_messages),
            put_latency=_latency_stats(latency, max_us, exact_max=True),
            put_latency_last_1m=recent_latency,
            get_found=get_found,
            get_miss=get_miss,
            get_messages=get_messages,
            get_bytes=get_bytes,
            get_found_tps=rates(lambda s: s.get_found),
            get_miss_tps=rates(lambda s: s.get_miss),
            get_messages_tps=rates(lambda s: s.get_messages),
            dispatched_messages=dispatched_messages,
            dispatched_bytes=dispatched_bytes,
            last_dispatched_store_timestamp_ms=last_ts,
            dispatch_tps=rates(lambda s: s.dispatched_messages),
            dispatch_bytes_per_s=rates(lambda s: s.dispatched_bytes),
            topics=MappingProxyType({name: TopicStats(*counts) for name, counts in sorted(topics.items())}),
            dispatch_lag_bytes=dispatch_lag_bytes,
            dispatch_lag_ms=dispatch_lag_ms,
            commit_log_min_offset=commit_log_min_offset,
            commit_log_max_offset=commit_log_max_offset,
            flushed_offset=flushed_offset,
            put_latency_by_status=MappingProxyType(by_status_latency),
            fsync_latency=fsync,
            damage=damage,
        )


def _column_sums(rows: list[tuple[int, ...]]) -> tuple[int, ...]:
    """Bucket by bucket, the counts of every status: the overall latency distribution."""
    return tuple(sum(column) for column in zip(*rows))


def _window_pair(ring: list[_Sample], width_ms: int) -> tuple[_Sample, _Sample] | None:
    """(older, newest) samples spanning at least `width_ms` if the ring reaches that far back,
    else the oldest and newest; None with fewer than two samples. Choosing the newest sample that
    is at least `width_ms` old (not the one nearest to it) keeps a jittery sampler from shortening
    the window."""
    if len(ring) < 2:
        return None
    newest = ring[-1]
    cutoff = newest.at_ms - width_ms
    # Samples are strictly increasing in time (sample() drops the rest): bisect on their times.
    i = bisect_right(ring, cutoff, key=lambda s: s.at_ms) - 1
    return (ring[max(i, 0)], newest)


def _rate(pair: tuple[_Sample, _Sample] | None, counter: Callable[[_Sample], int]) -> float:
    if pair is None:
        return 0.0
    old, new = pair
    return (counter(new) - counter(old)) * 1000.0 / (new.at_ms - old.at_ms)


def _latency_stats(counts: tuple[int, ...], max_us: int, *, exact_max: bool) -> LatencyStats:
    total = sum(counts)
    coarse = (sum(counts[:_SUB_MS_BUCKETS]),) + counts[_SUB_MS_BUCKETS:]
    if total == 0:
        p50 = p99 = top = 0.0
    else:
        p50 = _quantile_ms(counts, total, 50, 100, max_us)
        p99 = _quantile_ms(counts, total, 99, 100, max_us)
        top = max(0, max_us) / 1000.0 if exact_max else _quantile_ms(counts, total, 1, 1, max_us)
    return LatencyStats(
        count=total,
        buckets=MappingProxyType(dict(zip(LATENCY_LABELS, counts))),
        coarse=MappingProxyType(dict(zip(COARSE_LATENCY_LABELS, coarse))),
        p50_ms=p50,
        p99_ms=p99,
        max_ms=top,
    )


def _quantile_ms(counts: tuple[int, ...], total: int, num: int, den: int, max_us: int) -> float:
    """Upper bound, in ms, of the bucket holding the nearest-rank num/den quantile, capped at
    `max_us`. Integer rank arithmetic: 0.99 * n in floats can land just below an integer."""
    rank = max(1, -(-total * num // den))
    seen = 0
    for i, n in enumerate(counts):
        seen += n
        if seen >= rank:
            upper = LATENCY_EDGES_US[i] if i < len(LATENCY_EDGES_US) else max_us
            return max(0, min(upper, max_us)) / 1000.0
    raise AssertionError("rank beyond the counted total")  # unreachable: rank <= total
