"""The replica audit's statistics of one range of a store, and how they combine, without Spark.

`range_stats(batches, ...)` turns the Arrow batches of one `ScanRange` (columns `STATS_COLUMNS`,
read by `scan.read_range`) into a `RangeStats`: good messages per topic, the number of error rows
and the first of them, and for the master's records below the audit's bound two things that must
meet records of other ranges:

- queue-offset runs: per (topic, queue id), maximal runs of offsets v, v+1, ..., w in CommitLog
  order (prepared and rolled-back transaction messages take no queue offset and are left out);
  `gaps_of_runs` turns all runs of a queue into exactly the rows a window ordered by queue offset
  finds (each value is present as often as runs cover it; a value following a present value other
  than itself + 1 is a gap row (previous, value), a repeated value a row (value, value));
- duplicate-key hashes: a 64-bit hash of (topic, "UNIQ_KEY", the first UNIQ_KEY property) and of
  (topic, "KEYS", the KEYS property) per record, cut into buckets by hash; `repeated_hashes`
  finds the hashes seen more than once in a bucket. They are candidates only: the audit resolves
  them exactly against the records (`duplicate_keys`), so a collision costs time, never a result.

Memory: a range's stats hold its hashes (16 bytes per message) and runs (a few per queue); a bucket
holds the hashes of about `BUCKET_BYTES` of the store. Pure functions and values; thread-safe.
"""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .decode import property_values
from .strings import M1, mix, string_hashes

# What the audit reads of every record.
STATS_COLUMNS = (
    "physical_offset",
    "topic",
    "queue_id",
    "queue_offset",
    "sys_flag",
    "properties",
    "keys",
    "error",
)
UNIQ_KEY = "UNIQ_KEY"
KEYS = "KEYS"
# A transaction's prepared (4) and rolled-back (12) messages take no queue offset.
_TRANSACTION_MASK = 12
_NO_QUEUE_OFFSET = (4, 12)
# Store bytes whose key hashes go to one bucket: about 60 MB of hashes for ~290-byte messages.
BUCKET_BYTES = 1 << 30
_KIND_SEED = {UNIQ_KEY: np.uint64(0x9E3779B97F4A7C15), KEYS: np.uint64(0xC2B2AE3D27D4EB4F)}


def _topic_hashes(topics: pa.Array) -> np.ndarray:
    encoded = topics.dictionary_encode()
    names = encoded.dictionary.to_pylist()
    per_name = np.array(
        [int.from_bytes(hashlib.blake2b(t.encode(), digest_size=8).digest(), "little") for t in names], np.uint64
    )
    return per_name[np.asarray(encoded.indices)]


def key_hashes(kind: str, topics: pa.Array, values: pa.Array) -> np.ndarray:
    """The hash of (topic, kind, value) for aligned arrays without nulls."""
    with np.errstate(over="ignore"):
        return mix(string_hashes(values) ^ (_topic_hashes(topics) * M1) ^ _KIND_SEED[kind])


@dataclass
class RangeStats:
    """What one range contributes to the audit (see the module docstring)."""

    broker: str
    counts: dict[str, int] = field(default_factory=dict)  # topic -> good messages
    error_count: int = 0
    errors: list[tuple[int, str]] = field(default_factory=list)  # the first (offset, error), sorted
    runs: dict[tuple[str, int], list[list[int]]] = field(default_factory=dict)  # (topic, queue) -> [[v, w]]
    hashes: list[np.ndarray] = field(default_factory=list)  # per bucket


def range_stats(
    batches: Iterable[pa.RecordBatch],
    broker: str,
    *,
    examples: int,
    master_bound: int | None = None,
    buckets: int = 1,
) -> RangeStats:
    """Stats of one range's batches. `master_bound`: this is the master's range, and records below
    it get queue runs and key hashes (None: a slave's, counts and errors only)."""
    stats = RangeStats(broker)
    worst: list[tuple[int, str]] = []  # a max-heap (negated offsets) of the first errors
    hashes: list[list[np.ndarray]] = [[] for _ in range(buckets)]
    for batch in batches:
        error = batch.column("error")
        good = np.asarray(pc.is_null(error))
        if not good.all():
            bad = np.flatnonzero(~good)
            stats.error_count += len(bad)
            offsets = np.asarray(batch.column("physical_offset"))[bad]
            reasons = error.take(pa.array(bad)).to_pylist()
            for offset, reason in zip(offsets.tolist(), reasons):
                heapq.heappush(worst, (-offset, reason))
                if len(worst) > examples:
                    heapq.heappop(worst)
        topics = batch.column("topic").filter(pa.array(good))
        for entry in pc.value_counts(topics).to_pylist():
            stats.counts[entry["values"]] = stats.counts.get(entry["values"], 0) + entry["counts"]
        if master_bound is None:
            continue
        mine = good & (np.asarray(batch.column("physical_offset")) < master_bound)
        if not mine.any():
            continue
        chosen = batch.filter(pa.array(mine))
        _add_runs(stats.runs, chosen)
        for _, _, _, h in batch_keys(chosen):
            bucket = (h >> np.uint64(40)) % np.uint64(buckets)
            for b in range(buckets):
                picked = h[bucket == b]
                if len(picked):
                    hashes[b].append(picked)
    stats.errors = sorted((-negated, reason) for negated, reason in worst)
    stats.hashes = [np.concatenate(parts) if parts else np.zeros(0, np.uint64) for parts in hashes]
    return stats


def batch_keys(batch: pa.RecordBatch) -> Iterator[tuple[str, pa.Array, pa.Array, np.ndarray]]:
    """(kind, topics, values, hashes) of a batch's good records that carry a key of that kind: the
    first UNIQ_KEY property, and the KEYS property when not empty."""
    topics = batch.column("topic")
    uniq = property_values(batch.column("properties"), UNIQ_KEY, last=False)
    keys = batch.column("keys")
    for kind, values, has in (
        (UNIQ_KEY, uniq, pc.is_valid(uniq)),
        (KEYS, keys, pc.and_(pc.is_valid(keys), pc.not_equal(keys, ""))),
    ):
        if pc.any(has).as_py():
            chosen_topics, chosen = topics.filter(has), values.filter(has)
            yield kind, chosen_topics, chosen, key_hashes(kind, chosen_topics, chosen)


def _add_runs(runs: dict[tuple[str, int], list[list[int]]], batch: pa.RecordBatch) -> None:
    sys_flag = np.asarray(batch.column("sys_flag"))
    queued = ~np.isin(sys_flag & _TRANSACTION_MASK, _NO_QUEUE_OFFSET)
    if not queued.any():
        return
    topics = batch.column("topic").filter(pa.array(queued)).dictionary_encode()
    names = topics.dictionary.to_pylist()
    queue = np.asarray(batch.column("queue_id"))[queued].astype(np.int64)
    value = np.asarray(batch.column("queue_offset"))[queued]
    key = (np.asarray(topics.indices).astype(np.int64) << 32) | (queue & 0xFFFFFFFF)
    order = np.argsort(key, kind="stable")  # each queue's records, in CommitLog order
    key, value = key[order], value[order]
    starts = np.ones(len(key), bool)
    starts[1:] = (key[1:] != key[:-1]) | (value[1:] != value[:-1] + 1)
    first = np.flatnonzero(starts)
    last = np.append(first[1:], len(key)) - 1
    for k, v, w in zip(key[first].tolist(), value[first].tolist(), value[last].tolist()):
        name = (names[k >> 32], _signed32(k & 0xFFFFFFFF))
        queue_runs = runs.setdefault(name, [])
        if queue_runs and queue_runs[-1][1] + 1 == v:
            queue_runs[-1][1] = w  # the run goes on from the previous batch
        else:
            queue_runs.append([v, w])


def _signed32(x: int) -> int:
    return x - (1 << 32) if x & 0x80000000 else x


# ---------------------------------------------------------------------------------------------
# Combining ranges


def gaps_of_runs(runs: Iterable[Sequence[int]], limit: int) -> tuple[int, list[tuple[int, int]]]:
    """(gap rows, the first `limit` of them as (previous, queue offset), ordered by queue offset
    then previous) for one queue whose offsets are the multiset covered by `runs` ([v, w] pairs)."""
    events: dict[int, int] = {}
    for v, w in runs:
        events[v] = events.get(v, 0) + 1
        events[w + 1] = events.get(w + 1, 0) - 1
    count = 0
    rows: list[tuple[int, int]] = []
    coverage = 0
    last_present: int | None = None
    points = sorted(events)
    for x, y in zip(points, points[1:]):
        coverage += events[x]
        if coverage <= 0:
            continue
        if last_present is not None and x != last_present + 1:
            count += 1
            if len(rows) < limit:
                rows.append((last_present, x))
        if coverage > 1:
            count += (coverage - 1) * (y - x)
            v = x
            while len(rows) < limit and v < y:
                rows.extend([(v, v)] * min(coverage - 1, limit - len(rows)))
                v += 1
        last_present = y - 1
    return count, rows


def repeated_hashes(parts: Iterable[np.ndarray]) -> np.ndarray:
    """The hashes that occur more than once in `parts` together."""
    arrays = [p for p in parts if len(p)]
    if not arrays:
        return np.zeros(0, np.uint64)
    h = np.sort(np.concatenate(arrays))
    same = h[1:] == h[:-1]
    return np.unique(h[1:][same])
