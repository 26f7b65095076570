"""The pipeline's pure helpers added for scale: walks resumed from remembered positions, ranges read
in any order by one process, the CRC skipped only where no column shows it, vectorised string
hashes against Java's, and the audit's per-range statistics against what Spark's window and
group-by over every record give. No Spark, no sockets."""

from __future__ import annotations

import random
import struct
from collections import Counter

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_pipeline_walk import SEG, build, msgs

from pipeline.audit_stats import STATS_COLUMNS, gaps_of_runs, range_stats, repeated_hashes
from pipeline.decode import COLUMN_NAMES
from pipeline.layout import Segment, StoreLayout, plan_ranges, read_layout
from pipeline.scan import KnownStarts, WalkOutcome, read_range
from pipeline.strings import java_hashes, string_hashes
from pipeline.walk import Stop, advance, walk_segment
from store.log.codec import encode_message, java_string_hash
from store.message import Message

# -- walks resumed from a remembered position -------------------------------------------------------


def walk(buf, lo, hi, start=0):
    items = walk_segment(buf, 0, SEG, lo, hi, last_data_segment=True, flushed_offset=None, batch_records=5, start=start)
    found: list = []
    while True:
        try:
            item = next(items)
        except StopIteration as done:
            return found, done.value
        found.extend([item] if isinstance(item, Stop) else [int(p) for p in item])


@settings(max_examples=40)
@given(st.lists(st.integers(1, SEG - 1), max_size=6), st.data())
def test_a_range_started_where_the_previous_ended_reads_what_a_replay_reads(cuts, data):
    buf, offsets = build(msgs(120))
    for _ in range(data.draw(st.integers(0, 2))):  # smashed headers: stops and resyncs
        at = data.draw(st.sampled_from(offsets))
        buf[at : at + 8] = b"\xff" * 8
    bounds = sorted({0, SEG, *cuts})
    chained, start = [], 0
    for lo, hi in zip(bounds, bounds[1:]):
        replayed, _ = walk(buf, lo, hi)
        if start is None:  # the walk ended in an earlier range
            assert replayed == []
            continue
        found, start = walk(buf, lo, hi, start)
        assert found == replayed
        chained += found
        jumped = advance(buf, 0, SEG, 0, hi, last_data_segment=True, flushed_offset=None)
        assert start == jumped or start is None and hi >= SEG
    assert chained == walk(buf, 0, SEG)[0]


def test_known_starts_are_kept_per_plan_and_never_for_an_ended_walk():
    known = KnownStarts(max_segments=2)
    layout = StoreLayout("/x", 1000, (Segment(0, "/x/00000000000000000000", True),), None, None, ())
    r0, r1, r2 = plan_ranges([layout], partition_bytes=100, plan_id="p")[:3]
    assert known.start_for(r2) == 0
    known.learn(r0, r0.hi, 130)
    known.learn(r1, r1.hi, None)
    assert known.start_for(r1) == 130 and known.start_for(r2) == 130
    assert known.start_for(plan_ranges([layout], partition_bytes=100, plan_id="other")[2]) == 0
    assert known.start_for(plan_ranges([layout], partition_bytes=100)[2]) == 0  # no plan: no sharing


def test_ranges_read_in_any_order_by_one_process_read_what_each_reads_alone(tmp_path):
    buf, offsets = build(msgs(200))
    buf[offsets[50] : offsets[50] + 8] = b"\xff" * 8
    (tmp_path / "commitlog").mkdir()
    (tmp_path / "commitlog" / f"{0:020d}").write_bytes(bytes(buf))
    layout = read_layout(tmp_path)
    alone = [pa.Table.from_batches(list(read_range(r))) for r in plan_ranges([layout], partition_bytes=997)]
    shared = plan_ranges([layout], partition_bytes=997, plan_id="test-plan")
    order = list(range(len(shared)))
    random.Random(7).shuffle(order)
    together = {i: pa.Table.from_batches(list(read_range(shared[i]))) for i in order}
    assert [together[i] for i in range(len(shared))] == alone
    assert sum(t.num_rows for t in alone) == len(offsets)  # 199 records and the bad spot's row


def test_the_crc_is_checked_only_where_a_column_shows_it(tmp_path):
    buf, offsets = build(msgs(40))
    buf[offsets[5] + 88] ^= 0xFF  # a body byte: CRC mismatch
    (tmp_path / "commitlog").mkdir()
    (tmp_path / "commitlog" / f"{0:020d}").write_bytes(bytes(buf))
    (r,) = plan_ranges([read_layout(tmp_path)])
    every = pa.Table.from_batches(list(read_range(r))).sort_by("physical_offset")
    some = pa.Table.from_batches(list(read_range(r, columns=["physical_offset", "topic", "size"])))
    assert some.sort_by("physical_offset") == every.select(["physical_offset", "topic", "size"])
    assert every.column("error").to_pylist().count("body CRC mismatch") == 1


# -- string hashes --------------------------------------------------------------------------------------


@given(st.lists(st.text(max_size=30)))
def test_java_hashes_are_string_hashcode(texts):
    assert java_hashes(pa.array(texts, pa.string())).tolist() == [java_string_hash(t) for t in texts]


@given(st.lists(st.text(alphabet="ab\x00é", max_size=6), min_size=1))
def test_equal_strings_hash_equal(texts):
    hashes = string_hashes(pa.array(texts, pa.string())).tolist()
    for text, h in zip(texts, hashes):
        assert hashes[texts.index(text)] == h
    sliced = pa.array(["zz", *texts], pa.string()).slice(1)
    assert string_hashes(sliced).tolist() == hashes


# -- the audit's statistics ------------------------------------------------------------------------------


def window_gaps(values: list[int]) -> list[tuple[int, int]]:
    """What lag() over the queue offsets ordered finds: (previous, offset) where offset != previous + 1."""
    ordered = sorted(values)
    return [(a, b) for a, b in zip(ordered, ordered[1:]) if b != a + 1]


@settings(max_examples=200)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 6)), max_size=8), st.integers(0, 30))
def test_gaps_of_runs_are_the_window_gaps(runs, limit):
    runs = [(v, v + length) for v, length in runs]
    values = [x for v, w in runs for x in range(v, w + 1)]
    want = sorted(window_gaps(values), key=lambda row: (row[1], row[0]))
    count, first = gaps_of_runs(runs, limit)
    assert count == len(want)
    assert first == want[:limit]


def test_repeated_hashes():
    parts = [pa.array([5, 1], pa.uint64()).to_numpy(), pa.array([7, 5, 9, 9, 9], pa.uint64()).to_numpy()]
    assert repeated_hashes(parts).tolist() == [5, 9]
    assert repeated_hashes([]).tolist() == []


@pytest.mark.parametrize("bound_index", [None, 25])
def test_range_stats_count_runs_and_hash_what_the_master_holds(tmp_path, bound_index):
    messages = []
    for i in range(60):
        props = {"UNIQ_KEY": f"U{i % 50}", "KEYS": "" if i % 7 == 0 else f"k{i % 45}"}
        # queue 0 of T0 skips offset 5; queue 1 repeats offset 3; prepared messages take no offset
        messages.append(Message(f"T{i % 2}", i % 3, b"x", props, sys_flag=4 if i == 13 else 0))
    buf = bytearray(SEG)
    pos, offsets, queue_offsets = 0, [], Counter()
    for msg in messages:
        key = (msg.topic, msg.queue_id)
        qoff = queue_offsets[key]
        if key == ("T0", 0) and qoff == 5:
            qoff = queue_offsets[key] = 6
        enc = encode_message(msg, default_store_host=("127.0.0.1", 1), max_message_size=1 << 20, now_ms=0)
        enc.stamp(pos, qoff if not (key == ("T1", 1) and qoff == 4) else 3, 1)
        queue_offsets[key] += 0 if msg.sys_flag == 4 else 1
        buf[pos : pos + enc.size] = enc.buf
        offsets.append(pos)
        pos += enc.size
    size = struct.unpack_from(">i", buf, offsets[40])[0]
    buf[offsets[40] + size - 1] = 0x41  # a corrupt record: an error row
    (tmp_path / "commitlog").mkdir()
    (tmp_path / "commitlog" / f"{0:020d}").write_bytes(bytes(buf))
    (r,) = plan_ranges([read_layout(tmp_path)])
    bound = offsets[bound_index] if bound_index is not None else SEG
    stats = range_stats(read_range(r, columns=STATS_COLUMNS), r.broker, examples=5, master_bound=bound, buckets=3)
    rows = pa.Table.from_batches(list(read_range(r, columns=list(COLUMN_NAMES)))).to_pylist()
    good = [row for row in rows if row["error"] is None]
    assert stats.counts == dict(Counter(row["topic"] for row in good))
    assert stats.error_count == 1 and stats.errors == [(offsets[40], rows_error(rows))]
    mine = [row for row in good if row["physical_offset"] < bound]
    for (topic, queue_id), runs in stats.runs.items():
        values = [
            row["queue_offset"]
            for row in mine
            if (row["topic"], row["queue_id"]) == (topic, queue_id) and row["sys_flag"] & 12 not in (4, 12)
        ]
        assert sorted(x for v, w in runs for x in range(v, w + 1)) == sorted(values)
    all_runs = {key: gaps_of_runs(runs, 10)[0] for key, runs in stats.runs.items()}
    if bound_index is None:  # both lie past the bound's record
        assert all_runs[("T0", 0)] == 1  # 4, then 6
        assert all_runs[("T1", 1)] == 2  # offset 3 twice, then 5: a repeat and a hole
    keys = [(row["topic"], "UNIQ_KEY", dict(row["properties"])["UNIQ_KEY"]) for row in mine]
    keys += [(row["topic"], "KEYS", row["keys"]) for row in mine if row["keys"]]
    repeats = sum(n - 1 for n in Counter(keys).values() if n > 1)
    found = repeated_hashes(stats.hashes)
    assert len(found) == len({k for k, n in Counter(keys).items() if n > 1}) and len(found) <= repeats
    assert sum(len(h) for h in stats.hashes) == len(keys)


def rows_error(rows):
    return next(row["error"] for row in rows if row["error"])


def test_the_walk_outcome_says_where_a_range_met_something(tmp_path):
    buf, offsets = build(msgs(60))
    buf[offsets[20] : offsets[20] + 8] = b"\xff" * 8  # a bad spot, resynced at the next record
    (tmp_path / "commitlog").mkdir()
    (tmp_path / "commitlog" / f"{0:020d}").write_bytes(bytes(buf))
    ranges = plan_ranges([read_layout(tmp_path)], partition_bytes=offsets[30])
    outcomes = []
    for r in ranges:
        outcome = WalkOutcome()
        rows = sum(b.num_rows for b in read_range(r, columns=["physical_offset"], outcome=outcome))
        outcomes.append((rows, outcome.stops, outcome.ended))
    end = offsets[-1] + struct.unpack_from(">i", buf, offsets[-1])[0]
    assert outcomes[0] == (30, 1, False)  # 29 records and the bad spot's row
    for r, (rows, stops, ended) in zip(ranges[1:], outcomes[1:]):
        assert stops == 0 and ended == (r.hi > end)  # the data ends in one range; after it, nothing
        assert rows == 0 or r.lo < end
