"""The store's bulk writers against their one-at-a-time forms: `ConsumeQueue.put_run` writes what
as many `put`s write, `IndexFile.put_hashes` / `IndexService.put_hashes` what as many `put_key`s
write (files, names and bytes), and both refuse bad input before writing anything."""

from __future__ import annotations

import struct
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store.index.index_file import IndexEntry, IndexService, decode_entry, entry_position, key_hash
from store.queue.consume_queue import ConsumeQueue, ConsumeQueueConflict, encode_unit

FILE = 20 * 6  # six units a file
T0 = 1_700_000_000_000


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


runs = st.lists(
    st.tuples(st.integers(0, 3), st.lists(st.tuples(st.integers(1, 500), st.integers(-(2**40), 2**40)), min_size=1)),
    min_size=1,
    max_size=5,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 20), runs)
def test_put_run_writes_what_puts_write(first, gaps_and_units):
    with tempfile.TemporaryDirectory() as tmp:
        one, bulk = ConsumeQueue(Path(tmp) / "one", "T", 0, FILE), ConsumeQueue(Path(tmp) / "bulk", "T", 0, FILE)
        queue_offset, offset = first, 1000
        for gap, units in gaps_and_units:
            queue_offset += gap
            encoded = b""
            for i, (size, tags) in enumerate(units):
                assert one.put(queue_offset + i, offset, size, tags)
                encoded += encode_unit(offset, size, tags)
                offset += size
            assert bulk.put_run(queue_offset, encoded) == len(units)
            queue_offset += len(units)
        assert (bulk.min_offset, bulk.max_offset, bulk.max_physic_offset) == (
            one.min_offset,
            one.max_offset,
            one.max_physic_offset,
        )
        one.close()
        bulk.close()
        assert tree(Path(tmp) / "bulk") == tree(Path(tmp) / "one")


def test_put_run_checks_every_unit_before_writing(tmp_path):
    queue = ConsumeQueue(tmp_path, "T", 0, FILE)
    queue.put_run(0, encode_unit(100, 10, 0))
    with pytest.raises(ValueError, match="no message's"):
        queue.put_run(1, encode_unit(200, 10, 0) + struct.pack(">qiq", 300, 0, 0))
    with pytest.raises(ValueError, match="before the previous unit's end"):
        queue.put_run(1, encode_unit(200, 10, 0) + encode_unit(205, 10, 0))
    with pytest.raises(ConsumeQueueConflict):
        queue.put_run(1, encode_unit(50, 10, 0))
    with pytest.raises(ValueError, match="below the end"):
        queue.put_run(0, encode_unit(300, 10, 0))
    with pytest.raises(ValueError, match="20 bytes each"):
        queue.put_run(1, b"x" * 21)
    assert queue.max_offset == 1 and queue.max_physic_offset == 110
    queue.close()


entries = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c", "Aa", "BB", "ключ", "k" * 40]), st.integers(1, 5), st.integers(0, 3000)),
    min_size=1,
    max_size=40,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(entries, min_size=1, max_size=4), st.integers(2, 9))
def test_put_hashes_writes_what_put_key_writes(batches, index_num):
    with tempfile.TemporaryDirectory() as tmp:
        services = []
        for name in ("one", "bulk"):
            ticks = iter(range(T0, T0 + 10_000_000, 1000))
            svc = IndexService(Path(tmp) / name, hash_slot_num=3, index_num=index_num, clock_ms=lambda t=ticks: next(t))
            svc.load(last_exit_ok=True)
            services.append(svc)
        one, bulk = services
        phy = 0
        written: list[tuple[int, int, int]] = []
        for batch in batches:
            hashes, offsets, stamps = [], [], []
            for key, step, millis in batch:
                phy += step
                stamp = T0 + phy * 1000 + millis
                assert one.build_index("T", [key], None, phy, stamp) == 1
                hashes.append(key_hash(f"T#{key}"))
                offsets.append(phy)
                stamps.append(stamp)
            bulk.put_hashes(hashes, offsets, stamps)
            written += zip(hashes, offsets, stamps)
        assert [f.header() for f in bulk.files] == [f.header() for f in one.files]
        expected = iter(written)
        for index_file in bulk.files:
            assert_entries(index_file, [next(expected) for _ in range(index_file.entry_count)])
        one.close()
        bulk.close()
        assert tree(Path(tmp) / "bulk") == tree(Path(tmp) / "one")


def assert_entries(index_file, entries: list[tuple[int, int, int]]) -> None:
    """The file's entries, read back, are RocketMQ's for these (hash, offset, timestamp)s: a slot
    chain to the previous entry of the same slot, seconds since the first entry's timestamp."""
    last_in_slot: dict[int, int] = {}
    begin = entries[0][2]
    for number, (hash_, phy, stamp) in enumerate(entries, start=1):
        got = decode_entry(index_file._buf, entry_position(index_file.hash_slot_num, number))
        slot = hash_ % index_file.hash_slot_num
        diff = 0 if number == 1 else min(max(stamp - begin, 0) // 1000, 2**31 - 1)
        assert got == IndexEntry(hash_, phy, diff, last_in_slot.get(slot, 0))
        last_in_slot[slot] = number


def test_put_hashes_keeps_what_it_wrote_before_a_bad_entry(tmp_path):
    svc = IndexService(tmp_path, hash_slot_num=3, index_num=10, clock_ms=lambda: T0)
    svc.load(last_exit_ok=True)
    with pytest.raises(ValueError, match="out of range"):
        svc.put_hashes([5, 6, -1], [10, 20, 30], [T0, T0, T0])
    (index_file,) = svc.files
    assert index_file.entry_count == 2 and index_file.end_phy_offset == 20
    assert svc.query_offsets("T", "x", 10, 0, T0 * 2) == []
    svc.close()
