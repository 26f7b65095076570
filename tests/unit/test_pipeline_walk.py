"""The pipeline's pure parts: partition planning, the record walk (chain, resync, torn tails,
holes), the vectorised finder and decoder against the store's codec, and the audit's byte
comparison. No Spark, no sockets."""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.audit import compare_chunk, compare_tasks, log_end
from pipeline.decode import DECODED_COLUMN_NAMES, decode_records, decode_row, find_chain, rows_to_batch
from pipeline.layout import ScanRange, Segment, StoreLayout, plan_ranges, read_layout
from pipeline.walk import KIND_HOLE, Stop, hop_chain, walk_segment
from store.log.codec import encode_blank, encode_message
from store.message import Message

SEG = 16 * 1024


def build(messages, seg_size=SEG, seg_start=0, store_host=("127.0.0.1", 10911)):
    """One segment holding as many of `messages` as fit; returns (buffer, record offsets)."""
    buf = bytearray(seg_size)
    pos = 0
    offsets = []
    for i, msg in enumerate(messages):
        enc = encode_message(msg, default_store_host=store_host, max_message_size=1 << 20, now_ms=1_700_000_000_000)
        if pos + enc.size > seg_size:
            buf[pos : pos + 8] = encode_blank(seg_size - pos)
            break
        enc.stamp(seg_start + pos, i, 1_700_000_000_000 + i)
        buf[pos : pos + enc.size] = enc.buf
        offsets.append(seg_start + pos)
        pos += enc.size
    return buf, offsets


def msgs(n, body=40):
    return [
        Message(
            f"T{i % 3}",
            i % 2,
            bytes([65 + i % 26]) * (body + i % 17),
            {"TAGS": f"tag{i % 4}", "KEYS": f"k{i} x{i}"} if i % 5 else {},
        )
        for i in range(n)
    ]


def walk_all(buf, lo=0, hi=SEG, *, last=True, flushed=None, finder=hop_chain, seg_start=0):
    positions, stops = [], []
    for item in walk_segment(
        buf, seg_start, len(buf), lo, hi, last_data_segment=last, flushed_offset=flushed, batch_records=7, finder=finder
    ):
        if isinstance(item, Stop):
            stops.append(item)
        else:
            positions.extend(int(p) for p in item)
    return positions, stops


# -- planning ------------------------------------------------------------------------------------


def layout(n_segments=3, size=1000, data=(True, True, False)):
    segs = tuple(Segment(i * size, f"/x/{i * size:020d}", data[i]) for i in range(n_segments))
    return StoreLayout("/x", size, segs, None, None, ())


def test_plan_covers_segments_up_to_the_last_holding_data():
    ranges = plan_ranges([layout()], partition_bytes=300)
    assert [(r.seg_start, r.lo, r.hi) for r in ranges] == [
        (0, 0, 300),
        (0, 300, 600),
        (0, 600, 900),
        (0, 900, 1000),
        (1000, 0, 300),
        (1000, 300, 600),
        (1000, 600, 900),
        (1000, 900, 1000),
    ]
    assert [r.last_data_segment for r in ranges] == [False] * 4 + [True] * 4


def test_plan_clips_to_offsets():
    ranges = plan_ranges([layout()], start_offset=950, end_offset=1100, partition_bytes=1000)
    assert [(r.start_offset, r.end_offset) for r in ranges] == [(950, 1000), (1000, 1100)]
    assert plan_ranges([layout()], start_offset=5000) == []
    with pytest.raises(ValueError):
        plan_ranges([layout()], partition_bytes=0)


def test_read_layout(tmp_path):
    (tmp_path / "commitlog").mkdir()
    buf, _ = build(msgs(10))
    (tmp_path / "commitlog" / f"{0:020d}").write_bytes(bytes(buf))
    (tmp_path / "commitlog" / f"{SEG:020d}").write_bytes(bytes(SEG))
    (tmp_path / "commitlog" / "junk").write_bytes(b"x")
    got = read_layout(tmp_path)
    assert got.segment_size == SEG
    assert [s.has_data for s in got.segments] == [True, False]
    assert got.last_data_start == 0
    assert got.flushed_offset is None
    assert any("junk" in p for p in got.problems)


# -- the walk ------------------------------------------------------------------------------------


def test_walk_finds_every_record_and_stops_at_the_blank():
    buf, offsets = build(msgs(500))
    positions, stops = walk_all(buf)
    assert positions == offsets
    assert stops == []


@settings(max_examples=40)
@given(st.lists(st.integers(0, SEG), max_size=6))
def test_ranges_split_the_records_exactly(cuts):
    buf, offsets = build(msgs(120))
    # corruption in the middle: a record's body byte flipped keeps the chain; a smashed header
    # forces a resync
    bounds = sorted({0, SEG, *cuts})
    seen = []
    for lo, hi in zip(bounds, bounds[1:]):
        seen.extend(walk_all(buf, lo, hi)[0])
    assert seen == offsets


def test_smashed_header_resyncs_at_the_next_valid_record():
    buf, offsets = build(msgs(60))
    bad = offsets[10]
    buf[bad : bad + 8] = b"\xff" * 8
    positions, stops = walk_all(buf)
    assert positions == offsets[:10] + offsets[11:]
    assert stops == [Stop(bad, "bad", stops[0].reason, offsets[11], False)]
    # every split agrees with the whole walk
    for cut in range(0, SEG, 997):
        left = walk_all(buf, 0, cut)
        right = walk_all(buf, cut, SEG)
        assert left[0] + right[0] == positions
        assert left[1] + right[1] == stops


def test_torn_tail_is_the_end_unless_below_the_flushed_offset():
    buf, offsets = build(msgs(30))
    end = offsets[-1]
    size = struct.unpack_from(">i", buf, end)[0]
    buf[end + 60 : end + size] = bytes(size - 60)  # the tail of the last record never reached the disk
    buf[end + size : end + size + 8] = bytes(8)  # no blank after it
    positions, stops = walk_all(buf)
    assert positions == offsets[:-1]
    assert len(stops) == 1 and stops[0].torn and stops[0].offset == end
    # fsynced (below the flushed offset), or not the log's last segment: a record, decoded as an error row
    assert walk_all(buf, flushed=end + 1) == (offsets, [])
    positions, stops_not_last = walk_all(buf, last=False)
    assert positions == offsets and [s.kind for s in stops_not_last] == [KIND_HOLE]
    # a range ending right after the torn record sees the tail too
    assert walk_all(buf, 0, end + 1)[1] == stops
    assert walk_all(buf, end + 1, SEG) == ([], [])


def test_zeros_before_a_later_segment_with_data_are_a_hole():
    buf, offsets = build(msgs(5), seg_size=SEG)
    positions, stops = walk_all(buf, last=False)
    assert positions == offsets
    assert [s.kind for s in stops] == [KIND_HOLE]
    assert walk_all(buf, last=True)[1] == []


@settings(max_examples=40)
@given(st.data())
def test_vectorised_finder_agrees_with_the_hops(data):
    buf, offsets = build(msgs(150))
    for _ in range(data.draw(st.integers(0, 3))):
        at = data.draw(st.integers(0, SEG - 4))
        buf[at : at + 4] = data.draw(st.binary(min_size=4, max_size=4))
    for lo, hi in ((0, SEG), (0, 5000), (5000, SEG)):
        assert walk_all(buf, lo, hi, finder=find_chain) == walk_all(buf, lo, hi)


# -- decoding ------------------------------------------------------------------------------------


def reference(buf, positions, seg_start=0, columns=DECODED_COLUMN_NAMES, verify_crc=True):
    return rows_to_batch(
        [decode_row(buf, p, seg_start, len(buf), "b", verify_crc=verify_crc) for p in positions], columns
    )


def table(batches):
    return pa.Table.from_batches(batches).sort_by("physical_offset")


def test_vectorised_decode_agrees_with_the_codec():
    messages = msgs(200)
    messages[3] = Message("T0", 0, b"", {"K": "", "V": "v", "UNI": "日本"})
    messages[4] = Message("topic%|b", 1, b"x" * 3, {"TAGS": "a b", "KEYS": "ключ"})
    buf, offsets = build(messages, seg_start=3 * SEG)
    got = table(decode_records(buf, 3 * SEG, SEG, [o - 3 * SEG for o in offsets], broker="b"))
    want = table([reference(buf, [o - 3 * SEG for o in offsets], 3 * SEG)])
    assert got.equals(want)
    assert got.column("error").null_count == len(offsets)


def test_bad_records_become_error_rows():
    buf, offsets = build(msgs(40))
    body_at = offsets[5] + 88
    buf[body_at] ^= 0xFF  # body CRC mismatch: every field kept
    size7 = struct.unpack_from(">i", buf, offsets[7])[0]
    buf[offsets[7] + size7 - 1] = 0x41  # properties no longer end with a separator
    got = table(decode_records(buf, 0, SEG, offsets, broker="b"))
    assert got.equals(table([reference(buf, offsets)]))
    errors = {r["physical_offset"]: r for r in got.to_pylist() if r["error"]}
    assert errors[offsets[5]]["error"] == "body CRC mismatch" and errors[offsets[5]]["topic"] == "T2"
    assert errors[offsets[5]]["body_crc_ok"] is False
    assert "separator" in errors[offsets[7]]["error"] and errors[offsets[7]]["topic"] is None
    assert len(errors) == 2


def test_properties_the_fast_path_refuses_still_decode_like_the_codec():
    messages = msgs(20)
    buf, offsets = build(messages)
    # "k\x01v\x01w\x02": a value holding \x01, which the codec keeps in the value
    at = offsets[1]
    size = struct.unpack_from(">i", buf, at)[0]
    props_len = struct.unpack_from(">h", buf, at + size - 2 - struct.unpack_from(">h", buf, at + size - 2)[0] - 2)
    assert props_len  # sanity: the record has properties
    end = at + size
    buf[end - 3] = 0x01
    got = table(decode_records(buf, 0, SEG, offsets, broker="b", columns=("physical_offset", "properties", "error")))
    want = table([reference(buf, offsets, columns=("physical_offset", "properties", "error"))])
    assert got.equals(want)


def test_ipv6_hosts_and_column_subsets():
    messages = [Message("T6", 0, b"body%d" % i, {"TAGS": "t"}, born_host=("::1", 5)) for i in range(10)]
    buf, offsets = build(messages, store_host=("fe80::1", 10911))
    cols = ("physical_offset", "born_host", "store_host", "msg_id", "tags")
    got = table(decode_records(buf, 0, SEG, offsets, broker="b", columns=cols))
    assert got.equals(table([reference(buf, offsets, columns=cols)]))
    row = got.to_pylist()[0]
    assert row["born_host"] == "[::1]:5" and row["store_host"] == "[fe80::1]:10911" and len(row["msg_id"]) == 56


def test_crc_off_leaves_the_flag_null():
    buf, offsets = build(msgs(10))
    got = table(decode_records(buf, 0, SEG, offsets, broker="b", verify_crc=False))
    assert got.column("body_crc_ok").null_count == 10


# -- audit helpers -------------------------------------------------------------------------------


def test_compare_chunk_and_log_end(tmp_path):
    buf, offsets = build(msgs(50))
    for name in ("m", "s"):
        (tmp_path / name / "commitlog").mkdir(parents=True)
    (tmp_path / "m" / "commitlog" / f"{0:020d}").write_bytes(bytes(buf))
    other = bytearray(buf)
    other[offsets[20] + 100] ^= 1
    (tmp_path / "s" / "commitlog" / f"{0:020d}").write_bytes(bytes(other))
    m, s = read_layout(tmp_path / "m"), read_layout(tmp_path / "s")
    assert log_end(m) == offsets[-1] + struct.unpack_from(">i", buf, offsets[-1])[0]
    tasks = compare_tasks(m, s, 0, SEG)
    assert [compare_chunk(t) for t in tasks] == [offsets[20] + 100]
    assert compare_chunk(tasks[0][:4] + (0, offsets[20])) is None
    missing = ("/nonexistent", *tasks[0][1:])
    assert compare_chunk(missing) == 0


def test_scan_range_offsets():
    r = ScanRange("b", "/p", 1000, 500, 10, 20, True, None)
    assert (r.start_offset, r.end_offset) == (1010, 1020)
