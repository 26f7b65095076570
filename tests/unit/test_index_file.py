"""IndexFile and IndexService (store/index_file.py) against docs/design.md §3 and RocketMQ's rules."""

from __future__ import annotations

import os
import struct
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store.index import index_file as ix
from store.index.index_file import IndexEntry, IndexFile, IndexHeader, IndexService
from store.message import TRANSACTION_COMMIT_TYPE, TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE

SLOTS = 16
ENTRIES = 64  # 63 usable: entry 0 is never written
T0 = 1_700_000_000_000  # a store timestamp on a whole second
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)


def java_hash_by_formula(text: str) -> int:
    """String.hashCode as its documented closed form s[0]*31^(n-1) + ... + s[n-1], wrapped to a
    signed 32-bit int: independent of the iterative version under test."""
    units = text.encode("utf-16-be")
    codes = [int.from_bytes(units[i : i + 2], "big") for i in range(0, len(units), 2)]
    n = len(codes)
    h = sum(c * 31 ** (n - 1 - i) for i, c in enumerate(codes)) % 2**32
    return h - 2**32 if h >= 2**31 else h


def new_file(tmp_path: Path, slots: int = SLOTS, entries: int = ENTRIES, **kw) -> IndexFile:
    return IndexFile.create(tmp_path, "20240101000000000", slots, entries, **kw)


def service(tmp_path: Path, slots: int = SLOTS, entries: int = ENTRIES, clock_ms=lambda: T0) -> IndexService:
    svc = IndexService(tmp_path, hash_slot_num=slots, index_num=entries, clock_ms=clock_ms)
    svc.load(last_exit_ok=True)
    return svc


def colliding_keys(n: int, slots: int, prefix: str = "k") -> list[str]:
    """n keys with distinct hashes that all land in slot 0 of a `slots`-slot table."""
    found: list[str] = []
    i = 0
    seen: set[int] = set()
    while len(found) < n:
        key = f"{prefix}{i}"
        h = ix.key_hash(key)
        if h % slots == 0 and h not in seen:
            found.append(key)
            seen.add(h)
        i += 1
    return found


# ---------------------------------------------------------------------------------------------
# Sans-IO: layout, hashing, naming


def test_header_layout_matches_struct_pack():
    header = IndexHeader(T0, T0 + 5_000, 4096, 8192, 7, 12)
    raw = ix.encode_header(header)
    assert raw == struct.pack(">qqqqii", T0, T0 + 5_000, 4096, 8192, 7, 12)
    assert len(raw) == ix.HEADER_SIZE == 40
    # Field positions as RocketMQ's IndexHeader indexes them.
    assert struct.unpack_from(">q", raw, 0)[0] == T0
    assert struct.unpack_from(">q", raw, 8)[0] == T0 + 5_000
    assert struct.unpack_from(">q", raw, 16)[0] == 4096
    assert struct.unpack_from(">q", raw, 24)[0] == 8192
    assert struct.unpack_from(">i", raw, 32)[0] == 7
    assert struct.unpack_from(">i", raw, 36)[0] == 12


def test_entry_layout_matches_struct_pack():
    entry = IndexEntry(123456789, 2**40 + 3, 3600, 41)
    raw = ix.encode_entry(entry)
    assert raw == struct.pack(">iqii", 123456789, 2**40 + 3, 3600, 41)
    assert len(raw) == ix.INDEX_ENTRY_SIZE == 20


@given(INT64, INT64, INT64, INT64, INT32, INT32)
def test_header_round_trip(a, b, c, d, e, f):
    header = IndexHeader(a, b, c, d, e, f)
    assert ix.decode_header(b"\xff" * 3 + ix.encode_header(header), 3) == header


@given(INT32, INT64, INT32, INT32)
def test_entry_round_trip(h, off, diff, prev):
    entry = IndexEntry(h, off, diff, prev)
    assert ix.decode_entry(bytes(7) + ix.encode_entry(entry), 7) == entry


def test_geometry_positions():
    assert ix.index_file_size(5_000_000, 20_000_000) == 420_000_040  # RocketMQ's default file
    assert ix.index_file_size(ix.DEFAULT_HASH_SLOT_NUM, ix.DEFAULT_INDEX_NUM) == 420_000_040
    assert ix.slot_position(0) == 40 and ix.slot_position(3) == 52
    assert ix.entry_position(16, 0) == 40 + 64
    assert ix.entry_position(16, 5) == 40 + 64 + 100


@pytest.mark.parametrize(
    ("text", "java_hash"),
    [
        ("a", 97),
        ("ab", 97 * 31 + 98),  # 3105
        ("hello", 99162322),
        ("Hello World", -862545276),  # negative: the index stores its absolute value
        ("TopicTest#OrderID188", -1231271670),
        ("polygenelubricants", -(2**31)),  # Integer.MIN_VALUE: Math.abs overflows, RocketMQ uses 0
        ("", 0),
    ],
)
def test_key_hash_known_values(text, java_hash):
    assert java_hash_by_formula(text) == java_hash
    expected = 0 if java_hash == -(2**31) else abs(java_hash)
    assert ix.key_hash(text) == expected
    assert 0 <= ix.key_hash(text) <= 2**31 - 1


@given(st.text(max_size=40))
def test_key_hash_is_abs_of_java_hash(text):
    j = java_hash_by_formula(text)
    assert ix.key_hash(text) == (0 if j == -(2**31) else abs(j))


def test_index_key_and_split_keys():
    assert ix.index_key("TopicA", "order-1") == "TopicA#order-1"
    # Java's String.split(" ") + RocketMQ's non-empty filter: runs of spaces give no empty keys,
    # tabs are not separators.
    assert ix.split_keys("a  b c ") == ["a", "b", "c"]
    assert ix.split_keys("a\tb") == ["a\tb"]
    assert ix.split_keys("") == [] and ix.split_keys(None) == []


@pytest.mark.parametrize(
    ("store_ts", "begin", "expected"),
    [
        (T0 + 5_999, T0, 5),  # whole seconds, truncated
        (T0, 0, 0),  # no beginTimestamp yet
        (T0 - 3_000, T0, 0),  # the clock went backwards: clamped to 0
        (T0 + 2**31 * 1000 + 5_000, T0, 2**31 - 1),  # clamped to Integer.MAX_VALUE
    ],
)
def test_time_diff_seconds(store_ts, begin, expected):
    assert ix.time_diff_seconds(store_ts, begin) == expected


def test_file_name_is_local_time_with_millis():
    ms = 1_700_000_123_456
    expected = datetime.fromtimestamp(ms // 1000).strftime("%Y%m%d%H%M%S") + "456"
    assert ix.index_file_name(ms) == expected
    assert len(expected) == 17


def test_next_file_name_always_sorts_last():
    assert ix.next_index_file_name(T0, None) == ix.index_file_name(T0)
    assert ix.next_index_file_name(T0 + 1, ix.index_file_name(T0)) == ix.index_file_name(T0 + 1)
    # Same millisecond, or the clock stepped back: one millisecond after the last name.
    assert ix.next_index_file_name(T0, "20231114221320999") == "20231114221321000"
    assert ix.next_index_file_name(T0 - 10_000, "20231231235959999") == "20240101000000000"


def test_chain_walk_survives_a_cycle():
    """A damaged file whose links loop (3 -> 2 -> 3) must not hang a query."""
    slots = 4
    buf = bytearray(ix.index_file_size(slots, 8))
    h = 8  # slot 0
    struct.pack_into(">i", buf, ix.slot_position(0), 3)
    struct.pack_into(">iqii", buf, ix.entry_position(slots, 3), h, 300, 0, 2)
    struct.pack_into(">iqii", buf, ix.entry_position(slots, 2), h, 200, 0, 3)
    assert ix.select_from(buf, slots, 5, T0, h, 100, 0, 2**62) == [300, 200]


# ---------------------------------------------------------------------------------------------
# IndexFile


def test_put_writes_rocketmq_bytes(tmp_path):
    f = new_file(tmp_path)
    k1, k2 = "TopicA#id-1", "TopicA#id-2"
    assert f.put_key(k1, 1000, T0 + 250)
    assert f.put_key(k2, 2000, T0 + 3_900)
    assert f.put_key(k1, 3000, T0 + 7_000)
    f.flush()
    raw = (tmp_path / f.name).read_bytes()
    assert len(raw) == 40 + SLOTS * 4 + ENTRIES * 20
    # Header: first entry set begin; hashSlotCount counts slots taken (k1's twice -> once).
    slots_used = 1 if ix.key_hash(k1) % SLOTS == ix.key_hash(k2) % SLOTS else 2
    assert raw[:40] == struct.pack(">qqqqii", T0 + 250, T0 + 7_000, 1000, 3000, slots_used, 4)
    h1, h2 = ix.key_hash(k1), ix.key_hash(k2)
    entries = 40 + SLOTS * 4
    assert raw[entries : entries + 20] == bytes(20)  # entry 0 is never used
    assert raw[entries + 20 : entries + 40] == struct.pack(">iqii", h1, 1000, 0, 0)
    prev2 = 1 if h1 % SLOTS == h2 % SLOTS else 0
    assert raw[entries + 40 : entries + 60] == struct.pack(">iqii", h2, 2000, 3, prev2)
    assert raw[entries + 60 : entries + 80] == struct.pack(">iqii", h1, 3000, 6, 2 if prev2 else 1)
    # k1's slot holds its newest entry, 3.
    assert struct.unpack_from(">i", raw, 40 + (h1 % SLOTS) * 4)[0] == 3
    f.close()


def test_new_file_carries_previous_ends_until_first_put(tmp_path):
    f = new_file(tmp_path, end_phy_offset=5_000, end_timestamp=T0)
    assert f.header() == IndexHeader(T0, T0, 5_000, 5_000, 0, 1)
    assert ix.decode_header((tmp_path / f.name).read_bytes()) == f.header()
    # RocketMQ would store this first entry's diff from the carried begin (60 s); it becomes the
    # begin, so it is 0 and the entry reads back at its own time.
    assert f.put_key("t#k", 6_000, T0 + 60_000)
    assert (f.begin_timestamp, f.begin_phy_offset, f.end_phy_offset) == (T0 + 60_000, 6_000, 6_000)
    assert f.select_phy_offsets("t#k", 10, T0 + 60_000, T0 + 60_000) == [6_000]
    f.close()


def test_slot_collisions_keep_keys_apart(tmp_path):
    keys = colliding_keys(5, SLOTS, "T#")
    f = new_file(tmp_path)
    expected: dict[str, list[int]] = {k: [] for k in keys}
    offset = 0
    for round_ in range(3):
        for k in keys:
            offset += 100
            assert f.put_key(k, offset, T0 + round_ * 1000)
            expected[k].insert(0, offset)
    assert f.hash_slot_count == 1  # one chain of 15 entries
    for k in keys:
        assert f.select_phy_offsets(k, 100, 0, 2**62) == expected[k]
    assert f.select_phy_offsets("T#absent", 100, 0, 2**62) == []
    f.close()


def test_same_hash_keys_share_results(tmp_path):
    """Only the hash is stored: "Aa" and "BB" have the same String.hashCode, so a query returns
    both keys' offsets (callers check the message's keys)."""
    assert ix.key_hash("t#Aa") == ix.key_hash("t#BB")
    f = new_file(tmp_path)
    f.put_key("t#Aa", 10, T0)
    f.put_key("t#BB", 20, T0)
    assert f.select_phy_offsets("t#Aa", 10, 0, 2**62) == [20, 10]
    f.close()


def test_time_range_filter_and_max_num(tmp_path):
    f = new_file(tmp_path)
    for i in range(10):
        f.put_key("t#k", i * 100, T0 + i * 1000)
    assert f.select_phy_offsets("t#k", 100, T0 + 3000, T0 + 6000) == [600, 500, 400, 300]
    assert f.select_phy_offsets("t#k", 2, T0 + 3000, T0 + 6000) == [600, 500]
    assert f.select_phy_offsets("t#k", 100, T0 + 9001, T0 + 99_000) == []
    assert f.select_phy_offsets("t#k", 0, 0, 2**62) == []
    assert f.select_phy_offsets("t#k", 100, 0, 2**62) == [i * 100 for i in range(9, -1, -1)]
    f.close()


def test_times_are_kept_to_the_second(tmp_path):
    f = new_file(tmp_path)
    f.put_key("t#k", 1, T0 + 400)  # begin = T0 + 400
    f.put_key("t#k", 2, T0 + 2_300)  # 1.9 s later: stored as 1 s -> reads as T0 + 1_400
    assert f.select_phy_offsets("t#k", 10, T0 + 1_400, T0 + 1_400) == [2]
    assert f.select_phy_offsets("t#k", 10, T0 + 2_300, T0 + 9_999) == []
    f.close()


def test_is_time_matched(tmp_path):
    f = new_file(tmp_path)
    f.put_key("t#k", 1, T0)
    f.put_key("t#k", 2, T0 + 10_000)
    assert f.is_time_matched(T0 - 5, T0 + 20_000)  # contains the file's range
    assert f.is_time_matched(T0 + 5, T0 + 20_000)  # begins inside
    assert f.is_time_matched(T0 - 5, T0 + 5)  # ends inside
    assert f.is_time_matched(T0 + 10_000, T0 + 10_000)
    assert not f.is_time_matched(T0 + 10_001, T0 + 20_000)
    assert not f.is_time_matched(0, T0 - 1)
    f.close()


def test_full_file_refuses_puts(tmp_path):
    f = new_file(tmp_path, entries=4)
    assert [f.put_key("t#k", i, T0) for i in range(4)] == [True, True, True, False]
    assert f.is_write_full and f.index_count == 4 and f.entry_count == 3
    f.close()


def test_reopen_file_and_validate_size(tmp_path):
    f = new_file(tmp_path)
    f.put_key("t#k", 77, T0)
    f.close()
    g = IndexFile.open(tmp_path / f.name, SLOTS, ENTRIES)
    assert g.header() == IndexHeader(T0, T0, 77, 77, 1, 2)
    assert g.select_phy_offsets("t#k", 5, 0, 2**62) == [77]
    g.close()
    with pytest.raises(ValueError, match="bytes"):
        IndexFile.open(tmp_path / f.name, SLOTS * 2, ENTRIES)


def test_zero_index_count_on_disk_reads_as_empty(tmp_path):
    f = new_file(tmp_path)
    f.close()
    path = tmp_path / f.name
    with open(path, "r+b") as fh:
        fh.write(struct.pack(">qqqqii", 0, 0, 0, 0, 0, 0))
    g = IndexFile.open(path, SLOTS, ENTRIES)
    assert g.index_count == 1
    assert g.put_key("t#k", 5, T0)
    assert g.select_phy_offsets("t#k", 5, 0, 2**62) == [5]
    g.close()


def test_slot_at_the_unpublished_entry(tmp_path):
    """A slot naming entry indexCount: readers follow it (a put in flight has filled the entry
    already); the writer, about to fill that very entry, must not chain to it (a torn file: slot
    on disk, header not)."""
    f = new_file(tmp_path)
    f.put_key("t#k", 5, T0)
    h = ix.key_hash("t#zz")
    f._buf[ix.slot_position(h % SLOTS) : ix.slot_position(h % SLOTS) + 4] = struct.pack(">i", 2)
    assert f.select_phy_offsets("t#zz", 5, 0, 2**62) == []  # entry 2 is zeros: another hash
    f._buf[ix.entry_position(SLOTS, 2) : ix.entry_position(SLOTS, 2) + 20] = struct.pack(">iqii", h, 8, 0, 0)
    assert f.select_phy_offsets("t#zz", 5, 0, 2**62) == [8]  # the put in flight is visible
    assert f.put_key("t#zz", 9, T0)  # written at entry 2, must not link to itself
    assert ix.decode_entry(f._buf, ix.entry_position(SLOTS, 2)).prev_index == 0
    assert f.select_phy_offsets("t#zz", 5, 0, 2**62) == [9]
    f.close()


def test_close_waits_for_pinned_reader(tmp_path):
    f = new_file(tmp_path)
    f.put_key("t#k", 1, T0)
    assert f._pin()
    f.destroy()
    assert not (tmp_path / f.name).exists()
    assert not f._buf.closed  # the reader still maps it
    assert ix.select_from(f._buf, SLOTS, f.index_count, f.begin_timestamp, ix.key_hash("t#k"), 5, 0, 2**62) == [1]
    f._unpin()
    assert f._buf.closed
    assert f.select_phy_offsets("t#k", 5, 0, 2**62) == []
    with pytest.raises(ValueError, match="closed"):
        f.put_key("t#k", 2, T0)


def test_create_leaves_no_tmp_and_refuses_existing(tmp_path):
    f = new_file(tmp_path)
    assert sorted(os.listdir(tmp_path)) == [f.name]
    with pytest.raises(FileExistsError):
        new_file(tmp_path)
    f.close()


def test_geometry_limits(tmp_path):
    with pytest.raises(ValueError):
        IndexFile.create(tmp_path, "20240101000000000", 0, 10)
    with pytest.raises(ValueError):
        IndexFile.create(tmp_path, "20240101000000000", 10, 1)
    with pytest.raises(ValueError, match="max"):
        IndexService(tmp_path, hash_slot_num=5_000_000, index_num=120_000_000)


# ---------------------------------------------------------------------------------------------
# IndexService


def test_build_index_uniq_key_and_keys(tmp_path):
    svc = service(tmp_path)
    assert svc.build_index("TopicA", ["order-1", "", "user-9"], "UNIQ1", 0, T0) == 3
    assert svc.build_index("TopicA", "order-2  user-9", None, 200, T0 + 1000) == 2
    assert svc.query_offsets("TopicA", "UNIQ1", 10, 0, 2**62) == [0]
    assert svc.query_offsets("TopicA", "user-9", 10, 0, 2**62) == [200, 0]
    assert svc.query_offsets("TopicA", "order-2", 10, 0, 2**62) == [200]
    assert svc.query_offsets("TopicB", "user-9", 10, 0, 2**62) == []  # keys are per topic
    assert (svc.last_update_phy_offset, svc.last_update_timestamp) == (200, T0 + 1000)
    svc.close()


def test_build_index_skips_rollback_and_keyless(tmp_path):
    svc = service(tmp_path)
    assert svc.build_index("T", ["k"], None, 0, T0, sys_flag=TRANSACTION_ROLLBACK_TYPE) == 0
    assert svc.build_index("T", [], None, 0, T0) == 0
    assert svc.files == ()  # nothing to index creates no file
    assert svc.build_index("T", ["k"], None, 10, T0, sys_flag=TRANSACTION_PREPARED_TYPE) == 1
    assert svc.build_index("T", ["k"], None, 20, T0, sys_flag=TRANSACTION_COMMIT_TYPE) == 1
    assert svc.query_offsets("T", "k", 10, 0, 2**62) == [20, 10]
    svc.close()


def test_duplicate_keys_in_one_message_index_once(tmp_path):
    svc = service(tmp_path)
    assert svc.build_index("T", ["a", "a", "U"], "U", 50, T0) == 2
    assert svc.query_offsets("T", "a", 10, 0, 2**62) == [50]
    svc.close()


def test_full_file_rolls_and_queries_span_files(tmp_path):
    svc = service(tmp_path, entries=8)  # 7 entries per file
    for i in range(20):
        assert svc.build_index("T", ["k", f"m{i}"], None, i * 100, T0 + i * 1000) == 2
    files = svc.files
    assert [f.entry_count for f in files] == [7, 7, 7, 7, 7, 5]
    names = [f.name for f in files]
    assert names == sorted(names) and len(set(names)) == len(names)  # one clock ms: bumped names
    # Message 3's keys straddle the first roll: k in file 0, m3 in file 1.
    assert files[0].end_phy_offset == files[1].begin_phy_offset == 300
    assert svc.query_offsets("T", "k", 100, 0, 2**62) == [i * 100 for i in range(19, -1, -1)]
    assert svc.query_offsets("T", "k", 5, 0, 2**62) == [1900, 1800, 1700, 1600, 1500]
    assert svc.query_offsets("T", "k", 100, T0 + 4000, T0 + 12_000) == [i * 100 for i in range(12, 3, -1)]
    assert svc.query_offsets("T", "m2", 100, 0, 2**62) == [200]
    assert svc.query_offsets("T", "k", 0, 0, 2**62) == []
    svc.close()


def test_max_num_counts_across_files(tmp_path):
    svc = service(tmp_path, entries=5)  # 4 entries per file
    for i in range(5):
        svc.build_index("T", ["k"], None, i * 10, T0 + i * 1000)
    assert [f.entry_count for f in svc.files] == [4, 1]
    assert svc.query_offsets("T", "k", 3, 0, 2**62) == [40, 30, 20]
    svc.close()


def test_rolled_file_starts_from_previous_ends(tmp_path):
    svc = service(tmp_path, entries=4)
    for i in range(3):
        svc.build_index("T", ["k"], None, i * 10, T0 + i * 1000)
    assert len(svc.files) == 1
    svc.build_index("T", ["k"], None, 30, T0 + 9000)
    first, second = svc.files
    assert first.is_write_full
    assert second.header() == IndexHeader(T0 + 9000, T0 + 9000, 30, 30, 1, 2)
    svc.close()


def test_reopen_after_close(tmp_path):
    svc = service(tmp_path, entries=8)
    for i in range(10):
        svc.build_index("T", ["k"], f"u{i}", i * 100, T0 + i * 1000)
    names = [f.name for f in svc.files]
    svc.close()
    with pytest.raises(RuntimeError):
        svc.build_index("T", ["k"], None, 5000, T0)
    again = service(tmp_path, entries=8)
    assert [f.name for f in again.files] == names
    assert again.query_offsets("T", "k", 100, 0, 2**62) == [i * 100 for i in range(9, -1, -1)]
    assert again.query_offsets("T", "u3", 100, 0, 2**62) == [300]
    # Appends continue in the last file.
    assert again.build_index("T", ["k"], None, 1000, T0 + 10_000) == 1
    assert [f.name for f in again.files] == names
    assert again.query_offsets("T", "k", 2, 0, 2**62) == [1000, 900]
    again.close()


def test_load_rejects_other_geometry_and_ignores_strangers(tmp_path):
    svc = service(tmp_path)
    svc.build_index("T", ["k"], None, 0, T0)
    svc.close()
    (tmp_path / "index" / "README").write_text("not an index file")
    (tmp_path / "index" / "20240101000000000.tmp").write_bytes(b"half")
    again = service(tmp_path)
    assert len(again.files) == 1
    assert not (tmp_path / "index" / "20240101000000000.tmp").exists()
    again.close()
    with pytest.raises(ValueError):
        service(tmp_path, slots=SLOTS * 2)


def test_abnormal_load_deletes_files_past_the_checkpoint(tmp_path):
    svc = service(tmp_path, entries=4)  # 3 entries per file
    for i in range(9):
        svc.build_index("T", ["k"], None, i * 10, T0 + i * 1000)
    ends = [f.end_timestamp for f in svc.files]
    assert ends == [T0 + 2000, T0 + 5000, T0 + 8000]
    assert svc.flush() == T0 + 8000  # all three are full and synced
    svc.close()
    # A normal exit keeps everything regardless of the checkpoint.
    kept = IndexService(tmp_path, hash_slot_num=SLOTS, index_num=4)
    assert kept.load(last_exit_ok=True, index_msg_timestamp=0) is None
    assert len(kept.files) == 3
    kept.close()
    crashed = IndexService(tmp_path, hash_slot_num=SLOTS, index_num=4)
    assert crashed.load(last_exit_ok=False, index_msg_timestamp=T0 + 5000) == 60  # re-index from here
    assert [f.end_timestamp for f in crashed.files] == ends[:2]
    assert len(os.listdir(tmp_path / "index")) == 2
    assert crashed.query_offsets("T", "k", 100, 0, 2**62) == [50, 40, 30, 20, 10, 0]
    # Re-dispatching from the returned offset restores the lost entries, and only those.
    for i in range(6, 9):
        assert crashed.build_index("T", ["k"], None, i * 10, T0 + i * 1000) == 1
    assert crashed.query_offsets("T", "k", 100, 0, 2**62) == [i * 10 for i in range(8, -1, -1)]
    crashed.close()


def test_flush_reports_only_full_durable_files(tmp_path):
    svc = service(tmp_path, entries=4)
    assert svc.flush() == 0
    for i in range(4):
        svc.build_index("T", ["k"], None, i, T0 + i * 1000)
    first, second = svc.files
    assert first.is_dirty and second.is_dirty
    assert svc.flush() == T0 + 2000  # the full file's end; the open one does not count
    assert not first.is_dirty and not second.is_dirty
    assert svc.flush() == T0 + 2000
    svc.close()


def test_delete_expired_files(tmp_path):
    svc = service(tmp_path, entries=4)  # 3 entries per file
    for i in range(9):
        svc.build_index("T", ["k"], None, i * 10, T0 + i * 1000)
    first, second, third = svc.files
    assert [f.end_phy_offset for f in svc.files] == [20, 50, 80]
    assert svc.delete_expired_files(20) == 0  # endPhyOffset must be below the minimum
    assert svc.delete_expired_files(21) == 1
    assert svc.files == (second, third) and not first.path.exists()
    assert svc.delete_expired_files(10**9) == 1  # never the last file
    assert svc.files == (third,) and third.path.exists()
    assert svc.query_offsets("T", "k", 100, 0, 2**62) == [80, 70, 60]
    svc.close()


def test_reindex_skips_already_indexed_messages(tmp_path):
    svc = service(tmp_path, entries=8)
    messages = [(f"u{i}", ["k", f"m{i}"], i * 100, T0 + i * 1000) for i in range(10)]
    for uniq, keys, off, ts in messages:
        assert svc.build_index("T", keys, uniq, off, ts) == 3
    counts = [f.entry_count for f in svc.files]
    # A restart re-dispatches from an earlier offset: nothing is indexed twice, including the
    # message at exactly endPhyOffset (which RocketMQ would index again).
    for uniq, keys, off, ts in messages:
        assert svc.build_index("T", keys, uniq, off, ts) == 0
    assert [f.entry_count for f in svc.files] == counts
    assert svc.query_offsets("T", "k", 100, 0, 2**62) == [i * 100 for i in range(9, -1, -1)]
    # New messages are indexed again.
    assert svc.build_index("T", ["k"], None, 1000, T0 + 10_000) == 1
    svc.close()


def test_reindex_completes_a_message_cut_off_midway(tmp_path):
    svc = service(tmp_path)
    svc.build_index("T", ["a"], None, 0, T0)
    # A crash after the first of the message's keys was written.
    svc.files[-1].put_key("T#U", 100, T0 + 1000)
    assert svc.build_index("T", ["x", "y"], "U", 100, T0 + 1000) == 2
    assert svc.query_offsets("T", "U", 10, 0, 2**62) == [100]
    assert svc.query_offsets("T", "y", 10, 0, 2**62) == [100]
    assert svc.build_index("T", ["z"], None, 50, T0) == 0  # below endPhyOffset
    svc.close()


def test_reindex_boundary_across_a_roll(tmp_path):
    """A message whose keys straddle two files: on replay each file is asked."""
    svc = service(tmp_path, entries=4)  # 3 entries per file
    svc.build_index("T", ["a", "b"], None, 0, T0)
    assert svc.build_index("T", ["c", "d"], None, 100, T0 + 1000) == 2  # c in file 1, d in file 2
    assert len(svc.files) == 2
    assert svc.build_index("T", ["c", "d"], None, 100, T0 + 1000) == 0
    assert svc.build_index("T", ["d"], None, 100, T0 + 1000) == 0
    svc.build_index("T", ["e", "f"], None, 200, T0 + 2000)  # fills the second file
    assert svc.files[-1].is_write_full
    assert svc.build_index("T", ["e", "f"], None, 200, T0 + 2000) == 0
    assert len(svc.files) == 2  # a replay does not start an empty file
    assert svc.query_offsets("T", "c", 10, 0, 2**62) == [100]
    assert svc.query_offsets("T", "d", 10, 0, 2**62) == [100]
    svc.close()


def test_query_across_time_stops_at_older_files(tmp_path):
    svc = service(tmp_path, entries=4)
    for i in range(9):
        svc.build_index("T", ["k"], None, i * 10, T0 + i * 1000)
    # The newest file starts after `begin`, the middle one before: the oldest is not read.
    oldest = svc.files[0]
    oldest.close()  # a closed file answers nothing; the result proves it was not needed
    assert svc.query_offsets("T", "k", 100, T0 + 4000, T0 + 7000) == [70, 60, 50, 40]
    svc.close()


def test_concurrent_reader_and_writer(tmp_path):
    """Readers querying while the writer appends and rolls always see whole puts."""
    svc = service(tmp_path, entries=32)
    stop = threading.Event()
    errors: list[BaseException] = []

    def reader():
        try:
            while not stop.is_set():
                got = svc.query_offsets("T", "k", 1000, 0, 2**62)
                assert got == sorted(got, reverse=True)
                assert all(off % 10 == 0 for off in got)
        except BaseException as exc:  # noqa: BLE001 - reported to the main thread
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for i in range(300):
        svc.build_index("T", ["k"], None, i * 10, T0 + i)
    stop.set()
    for t in threads:
        t.join()
    assert not errors
    assert svc.query_offsets("T", "k", 1000, 0, 2**62) == [i * 10 for i in range(299, -1, -1)]
    svc.close()


# ---------------------------------------------------------------------------------------------
# Model test: random messages against a dict-of-lists model

TOPICS = ["t1", "t2"]
KEY_POOL = ["k0", "k1", "k2", "Aa", "BB", "polygenelubricants"]

messages_st = st.lists(
    st.tuples(
        st.sampled_from(TOPICS),
        st.lists(st.sampled_from(KEY_POOL), max_size=3),  # few keys: long chains, many matches
        st.one_of(st.none(), st.sampled_from(["u0", "u1", "u2"])),
        st.integers(1, 500),  # offset step
        st.integers(0, 2),  # time step, whole seconds
        st.booleans(),  # replay this message (a restart re-dispatching it)
    ),
    min_size=8,  # hypothesis favours short lists; chains and rolls need a few dozen entries
    max_size=40,
)
queries_st = st.lists(
    st.tuples(
        st.integers(0, 2**16),  # which (topic, key): picked among those indexed, plus an absent one
        st.integers(0, 6),  # max_num: small, so it cuts results within and across files
        st.one_of(st.just(0), st.integers(0, 40)),  # begin, seconds after T0: often everything
        st.one_of(st.just(100), st.integers(0, 60)),  # span, seconds
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=100)
@given(
    messages=messages_st,
    queries=queries_st,
    slots=st.sampled_from([1, 3, 8]),
    entries=st.sampled_from([3, 5, 5, 16]),
    reopen_at=st.integers(0, 40),
)
def test_model(messages, queries, slots, entries, reopen_at):
    model: dict[int, list[tuple[int, int]]] = {}  # key hash -> [(offset, store time)], oldest first
    with tempfile.TemporaryDirectory() as root:
        clock = iter(range(T0, T0 + 10_000))  # file names: any increasing times
        svc = IndexService(root, hash_slot_num=slots, index_num=entries, clock_ms=lambda: next(clock))
        svc.load(last_exit_ok=True)
        offset, ts = 0, T0
        for n, (topic, keys, uniq, d_off, d_ts, replay) in enumerate(messages):
            if n == reopen_at:
                svc.close()
                svc = IndexService(root, hash_slot_num=slots, index_num=entries, clock_ms=lambda: next(clock))
                svc.load(last_exit_ok=True)
            offset += d_off
            ts += d_ts * 1000
            written = svc.build_index(topic, keys, uniq, offset, ts)
            idx_keys = list(dict.fromkeys(ix.index_key(topic, k) for k in ([uniq] if uniq else []) + keys))
            assert written == len(idx_keys)
            for k in idx_keys:
                model.setdefault(ix.key_hash(k), []).append((offset, ts))
            if replay:
                assert svc.build_index(topic, keys, uniq, offset, ts) == 0
        pairs = sorted({(topic, k) for topic, keys, uniq, *_ in messages for k in keys + ([uniq] if uniq else [])})
        pairs.append(("t1", "absent"))
        for which, max_num, lo, span in queries:
            topic, key = pairs[which % len(pairs)]
            begin = T0 + lo * 1000
            end = begin + span * 1000
            expected = [
                off for off, t in reversed(model.get(ix.key_hash(ix.index_key(topic, key)), [])) if begin <= t <= end
            ][:max_num]
            assert svc.query_offsets(topic, key, max_num, begin, end) == expected
        for f in svc.files:
            assert f.entry_count <= entries - 1
        svc.close()


def test_file_name_clock_is_wall_clock_by_default(tmp_path):
    svc = IndexService(tmp_path, hash_slot_num=SLOTS, index_num=ENTRIES)
    svc.load(last_exit_ok=True)
    before = ix.index_file_name(time.time_ns() // 1_000_000)
    svc.build_index("T", ["k"], None, 0, T0)
    after = ix.index_file_name(time.time_ns() // 1_000_000)
    assert before <= svc.files[0].name <= after
    svc.close()


# ---------------------------------------------------------------------------------------------
# A dispatch round's keys in one write (issue 33)


@given(st.text(max_size=20), st.text(max_size=40))
def test_topic_key_hash_is_the_hash_of_the_index_key(topic, key):
    assert ix.topic_key_hash(topic, key) == ix.key_hash(ix.index_key(topic, key))


def _index_tree(root: Path, rounds: list[list[tuple]], replays: list[bool], one_by_one: bool) -> dict[str, bytes]:
    clock = iter(range(T0, T0 + 10_000))
    svc = IndexService(root, hash_slot_num=3, index_num=5, clock_ms=lambda: next(clock))
    svc.load(last_exit_ok=True)
    for messages, replay in zip(rounds, replays, strict=True):
        if one_by_one:
            written = sum(svc.build_index(*m) for m in messages)
        else:
            written = svc.build_index_many(messages)
        assert written == sum(len(dict.fromkeys(([m[2]] if m[2] else []) + m[1])) for m in messages)
        if replay and messages:  # a restart re-dispatching the round's last message
            assert svc.build_index_many(messages[-1:]) == 0
    svc.close()
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@settings(max_examples=50)
@given(messages=messages_st, cuts=st.lists(st.integers(1, 6), min_size=1, max_size=20))
def test_a_round_in_one_write_writes_what_one_message_at_a_time_writes(messages, cuts):
    offset, ts = 0, T0
    flat = []
    for topic, keys, uniq, d_off, d_ts, _replay in messages:
        offset += d_off
        ts += d_ts * 1000
        flat.append((topic, keys, uniq, offset, ts))
    rounds, replays, i = [], [], 0
    for cut in cuts * len(flat):
        if i >= len(flat):
            break
        rounds.append(flat[i : i + cut])
        replays.append(messages[min(i + cut, len(flat)) - 1][5])
        i += cut
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        assert _index_tree(Path(a), rounds, replays, True) == _index_tree(Path(b), rounds, replays, False)


def test_a_reader_during_a_many_entry_write_keeps_the_chains_older_entries(tmp_path):
    """Each entry is published as it is written: a query in the middle of a round's write finds
    every entry written before it (the slot it walks from may already name a newer one)."""
    f = new_file(tmp_path, slots=1, entries=ENTRIES)  # one slot: every entry is in one chain
    h = ix.key_hash("T#k")
    assert f.put_hashes([h] * 3, [0, 10, 20], [T0] * 3) == 3
    seen: list[list[int]] = []

    class QueryingTimestamps(list):
        def __getitem__(self, i):
            seen.append(f.select_phy_offsets("T#k", 100, 0, 2**62))
            return super().__getitem__(i)

    assert f.put_hashes([h] * 4, [30, 40, 50, 60], QueryingTimestamps([T0 + 1000] * 4)) == 4
    assert seen == [[20, 10, 0], [30, 20, 10, 0], [40, 30, 20, 10, 0], [50, 40, 30, 20, 10, 0]]
    assert f.select_phy_offsets("T#k", 100, 0, 2**62) == [60, 50, 40, 30, 20, 10, 0]
    f.close()
