"""ConsumeQueue: RocketMQ's 20-byte units on disk, the put rules (append, idempotent re-put,
conflicts, fillers over gaps), recovery after restarts and torn units, the maintenance operations
driven by the CommitLog (truncate_dirty, correct_min_offset, delete_expired_files), the lookup by
time, and the table of queues.

Two levels: the sans-IO unit codec and recovery walk over bytearrays (with hypothesis), and real
queues in tmp_path with a small file size (8 units) so that every test crosses file boundaries.
"""

from __future__ import annotations

import struct
import tempfile
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store.log.mapped_file_queue import SegmentLayoutError
from store.queue.consume_queue import (
    FILLER,
    FILLER_SIZE,
    UNIT_SIZE,
    ConsumeQueue,
    ConsumeQueueClosed,
    ConsumeQueueConflict,
    ConsumeQueueTable,
    CqUnit,
    decode_unit,
    decode_units,
    encode_unit,
    scan_units,
    tags_code,
    unit_problem,
)

UNITS = 8
FS = UNITS * UNIT_SIZE  # 160-byte files: 8 units each
SIZE = 100  # every test message is 100 bytes, so message i sits at CommitLog offset 100 * i


def pack(offset: int, size: int, tags: int) -> bytes:
    """A unit as docs/design.md §3 spells it, independent of the module under test."""
    return struct.pack(">qiq", offset, size, tags)


def name(offset: int) -> str:
    return f"{offset:020d}"


def new_queue(root: Path, topic: str = "TopicTest", queue_id: int = 0) -> ConsumeQueue:
    return ConsumeQueue(root, topic, queue_id, FS)


def reopen(root: Path, topic: str = "TopicTest", queue_id: int = 0) -> ConsumeQueue:
    queue = new_queue(root, topic, queue_id)
    queue.load()
    queue.recover()
    return queue


def fill(queue: ConsumeQueue, count: int, *, first: int = 0) -> None:
    for i in range(first, first + count):
        assert queue.put(i, SIZE * i, SIZE, i + 1000)


def qdir(root: Path, topic: str = "TopicTest", queue_id: int = 0) -> Path:
    return root / "consumequeue" / topic / str(queue_id)


def all_units(queue: ConsumeQueue) -> list[CqUnit]:
    out: list[CqUnit] = []
    offset = queue.min_offset
    while offset < queue.max_offset:
        chunk = queue.get_units(offset, 1000)
        assert chunk
        out.extend(chunk)
        offset += len(chunk)
    return out


# -- units, sans-IO -------------------------------------------------------------------------------


def test_unit_layout_matches_rocketmq():
    assert encode_unit(1234567890123, 312, -98765) == pack(1234567890123, 312, -98765)
    assert len(encode_unit(0, 1, 0)) == UNIT_SIZE == 20
    assert decode_unit(pack(5, 6, 7)) == CqUnit(5, 6, 7) == (5, 6, 7)
    assert struct.pack(">qiq", *FILLER) == pack(0, 0x7FFFFFFF, 0)
    assert FILLER.is_filler and not CqUnit(0, 100, 0).is_filler


@given(
    st.integers(0, (1 << 63) - 1),
    st.integers(1, FILLER_SIZE - 1),
    st.integers(-(1 << 63), (1 << 63) - 1),
)
def test_unit_roundtrip(offset, size, tags):
    raw = encode_unit(offset, size, tags)
    assert raw == pack(offset, size, tags)
    assert decode_unit(raw) == (offset, size, tags)
    assert decode_units(raw * 3) == [(offset, size, tags)] * 3
    assert unit_problem(decode_unit(raw), None) is None


@pytest.mark.parametrize(
    "offset,size,tags",
    [(-1, 10, 0), (0, 0, 0), (0, -5, 0), (0, FILLER_SIZE, 0), (0, 10, 1 << 63), (1 << 63, 10, 0)],
)
def test_encode_rejects_units_no_message_has(offset, size, tags):
    with pytest.raises(ValueError):
        encode_unit(offset, size, tags)


def test_tags_code_is_java_string_hash():
    assert tags_code(None) == 0
    assert tags_code("") == 0
    assert tags_code("abc") == 96354  # "abc".hashCode()
    assert tags_code("TagA||TagB") == tags_code("TagA||TagB")
    assert tags_code("polygenelubricants") == -(1 << 31)  # the classic Integer.MIN_VALUE hash


def test_unit_problem():
    assert unit_problem(CqUnit(0, 0, 0), None) == "zero size"
    assert unit_problem(CqUnit(-1, 10, 0), None) == "negative commit log offset"
    assert unit_problem(CqUnit(10, -1, 0), None) == "negative size"
    assert "below the previous" in unit_problem(CqUnit(150, 10, 0), 200)
    assert unit_problem(CqUnit(200, 10, 0), 200) is None
    assert unit_problem(FILLER, 10**9) is None


@st.composite
def queue_contents(draw):
    """Units of a valid queue: increasing CommitLog offsets, fillers here and there."""
    count = draw(st.integers(0, 40))
    units, offset = [], draw(st.integers(0, 10_000))
    for _ in range(count):
        if draw(st.booleans()) and draw(st.booleans()):
            units.append(FILLER)
            continue
        offset += draw(st.integers(0, 500))
        size = draw(st.integers(1, 400))
        units.append(CqUnit(offset, size, draw(st.integers(-(1 << 63), (1 << 63) - 1))))
        offset += size
    return units


def as_segments(units: list[CqUnit], files: int) -> list[tuple[int, bytearray]]:
    raw = bytearray(b"".join(pack(*u) for u in units))
    raw.extend(bytes(files * FS - len(raw)))
    return [(i * FS, raw[i * FS : (i + 1) * FS]) for i in range(files)]


@given(queue_contents(), st.data())
def test_scan_finds_the_end_of_a_valid_queue(units, data):
    files = len(units) // UNITS + 1
    keep = data.draw(st.integers(0, len(units)))
    segments = as_segments(units[:keep], files)
    scan = scan_units(segments, FS)
    assert scan.end_offset == keep * UNIT_SIZE
    assert scan.stop_reason is None and scan.data_after_end is None
    real = [u for u in units[:keep] if not u.is_filler]
    assert scan.last_unit == (real[-1] if real else None)


@given(queue_contents().filter(lambda u: any(not x.is_filler for x in u)), st.data())
def test_scan_stops_at_a_torn_unit_and_reports_what_follows(units, data):
    real_at = [i for i, u in enumerate(units) if not u.is_filler]
    torn = data.draw(st.sampled_from(real_at))
    segments = as_segments(units, len(units) // UNITS + 1)
    seg, pos = divmod(torn * UNIT_SIZE, FS)
    segments[seg][1][pos + 8 : pos + 12] = bytes(4)  # the size never reached the disk
    scan = scan_units(segments, FS, probe_bytes=10 * FS)
    assert scan.end_offset == torn * UNIT_SIZE
    before = [u for u in units[:torn] if not u.is_filler]
    assert scan.last_unit == (before[-1] if before else None)
    tail_nonzero = units[torn].commit_log_offset or units[torn].tags_code
    if tail_nonzero:
        assert scan.stop_reason == "zero size"
        assert torn * UNIT_SIZE <= scan.data_after_end < (torn + 1) * UNIT_SIZE
    elif torn + 1 < len(units) and (torn + 1) * UNIT_SIZE < (seg + 1) * FS:
        assert scan.data_after_end is not None and scan.data_after_end >= torn * UNIT_SIZE


@settings(max_examples=200)
@given(st.binary(min_size=0, max_size=3 * FS))
def test_scan_of_garbage_never_crashes_and_keeps_only_valid_units(junk):
    raw = bytearray(junk.ljust(3 * FS, b"\x00"))
    segments = [(i * FS, raw[i * FS : (i + 1) * FS]) for i in range(3)]
    scan = scan_units(segments, FS)
    assert scan.end_offset % UNIT_SIZE == 0 and 0 <= scan.end_offset <= 3 * FS
    previous = None
    for unit in decode_units(bytes(raw[: scan.end_offset])):
        assert unit_problem(unit, previous) is None
        if not unit.is_filler:
            previous = unit.commit_log_offset + unit.size


def test_scan_checks_order_against_the_unit_before_the_first_segment():
    segments = as_segments([CqUnit(500, 10, 0), CqUnit(510, 10, 0)], 1)
    assert scan_units(segments, FS, previous_end=500).end_offset == 2 * UNIT_SIZE
    scan = scan_units(segments, FS, previous_end=600)
    assert scan.end_offset == 0 and "below the previous" in scan.stop_reason


def test_scan_rejects_non_contiguous_segments():
    with pytest.raises(ValueError):
        scan_units([(0, bytearray(FS)), (2 * FS, bytearray(FS))], FS)
    with pytest.raises(ValueError):
        scan_units([(0, bytearray(FS))], FS + 1)


# -- put and read ---------------------------------------------------------------------------------


def test_put_and_read_back_across_files(tmp_path):
    queue = new_queue(tmp_path)
    fill(queue, 20)
    assert (queue.min_offset, queue.max_offset) == (0, 20)
    assert queue.max_physic_offset == SIZE * 19 + SIZE
    for i in range(20):
        assert queue.get_unit(i) == (SIZE * i, SIZE, i + 1000)
    assert queue.get_unit(20) is None and queue.get_unit(-1) is None
    # Bounded by the end of the file holding the first unit, and by the end of the queue.
    assert len(queue.get_units(0, 100)) == 8
    assert len(queue.get_units(5, 100)) == 3
    assert queue.get_units(6, 2) == [(600, SIZE, 1006), (700, SIZE, 1007)]
    assert len(queue.get_units(16, 100)) == 4
    assert queue.get_units(20, 5) == [] and queue.get_units(3, 0) == []
    assert all_units(queue) == [(SIZE * i, SIZE, i + 1000) for i in range(20)]
    queue.close()


def test_files_named_by_byte_offset_and_units_laid_out_as_rocketmq(tmp_path):
    queue = new_queue(tmp_path)
    fill(queue, 20)
    assert queue.flush(0)
    assert queue.file_names == [name(0), name(160), name(320)]
    assert sorted(p.name for p in qdir(tmp_path).iterdir()) == [name(0), name(160), name(320)]
    for path in qdir(tmp_path).iterdir():
        assert path.stat().st_size == FS
    raw = b"".join((qdir(tmp_path) / name(o)).read_bytes() for o in (0, 160, 320))
    expected = b"".join(pack(SIZE * i, SIZE, i + 1000) for i in range(20))
    assert raw == expected + bytes(3 * FS - len(expected))
    assert not queue.flush(0)
    queue.close()


def test_default_file_size_and_queue_directory(tmp_path):
    queue = ConsumeQueue(tmp_path, "T", 3)
    assert queue.file_size == 6_000_000
    assert queue.directory == tmp_path / "consumequeue" / "T" / "3"
    assert not queue.directory.exists()  # nothing on disk until the first put
    assert queue.put(0, 0, 10, 0)
    assert (queue.directory / name(0)).stat().st_size == 6_000_000
    queue.close()


def allocated(path: Path) -> int:
    return path.stat().st_blocks * 512


def test_a_queue_takes_disk_blocks_as_it_grows_not_a_whole_file_up_front(tmp_path):
    from store.queue.consume_queue import RESERVE_STEP_BYTES

    queue = ConsumeQueue(tmp_path, "T", 0)
    assert queue.put(0, 0, 10, 0)
    first = queue.directory / name(0)
    # Filesystems allocate in their own units; a step plus a little, never the 6 MB file.
    assert first.stat().st_size == 6_000_000 and allocated(first) <= 2 * RESERVE_STEP_BYTES
    units = 2 * RESERVE_STEP_BYTES // 20 + 10
    for i in range(1, units):
        assert queue.put(i, 10 * i, 10, 0)
    assert queue.flush()
    assert 2 * RESERVE_STEP_BYTES <= allocated(first) <= 4 * RESERVE_STEP_BYTES
    queue.close()
    # Reopened (sparse, reserved-end unknown), it recovers every unit and keeps growing.
    queue = ConsumeQueue(tmp_path, "T", 0)
    queue.load()
    queue.recover()
    assert queue.max_offset == units
    assert queue.put(units, 10 * units, 10, 0)
    assert queue.get_unit(units).commit_log_offset == 10 * units
    queue.close()


def test_a_full_disk_fails_the_reservation_before_any_unit_is_written(tmp_path, monkeypatch):
    import errno

    import store.log.mapped_file as mapped_file

    queue = ConsumeQueue(tmp_path, "T", 0, FS)
    fill(queue, 3)
    segment = queue._files.last

    def full(fd, offset, length):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(mapped_file.os, "posix_fallocate", full)
    segment.reserved_end = segment.wrote_position  # as after a reopen: the next unit must reserve
    with pytest.raises(OSError, match="No space"):
        queue.put(3, SIZE * 3, SIZE, 1003)
    assert queue.max_offset == 3 and queue.get_unit(3) is None
    monkeypatch.undo()
    assert queue.put(3, SIZE * 3, SIZE, 1003)
    assert queue.max_offset == 4
    queue.close()


def test_put_validates_its_arguments(tmp_path):
    queue = new_queue(tmp_path)
    for args in [(-1, 0, 10, 0), (0, -1, 10, 0), (0, 0, 0, 0), (0, 0, FILLER_SIZE, 0)]:
        with pytest.raises(ValueError):
            queue.put(*args)
    for topic, queue_id in [("", 0), ("..", 0), ("a/b", 0), ("T", -1)]:
        with pytest.raises(ValueError):
            ConsumeQueue(tmp_path, topic, queue_id, FS)
    with pytest.raises(ValueError):
        ConsumeQueue(tmp_path, "T", 0, 150)


def test_re_put_of_the_same_unit_is_ignored_and_a_different_one_raises(tmp_path):
    queue = new_queue(tmp_path)
    fill(queue, 10)
    assert not queue.put(3, 300, SIZE, 1003)
    assert not queue.put(9, 900, SIZE, 1009)
    with pytest.raises(ConsumeQueueConflict):
        queue.put(3, 300, SIZE, 7)
    with pytest.raises(ConsumeQueueConflict):
        queue.put(4, 999, SIZE, 1004)
    assert queue.max_offset == 10 and queue.get_unit(3) == (300, SIZE, 1003)
    queue.close()
    # After a restart the dispatcher replays from an earlier CommitLog offset: still idempotent.
    queue = reopen(tmp_path)
    for i in range(4, 10):
        assert not queue.put(i, SIZE * i, SIZE, i + 1000)
    assert queue.put(10, 1000, SIZE, 1010)
    assert queue.max_offset == 11
    queue.close()


def test_commit_log_offset_going_backwards_raises(tmp_path):
    queue = new_queue(tmp_path)
    fill(queue, 3)
    with pytest.raises(ConsumeQueueConflict):
        queue.put(3, 250, SIZE, 0)  # overlaps message 2 (200..300)
    assert queue.max_offset == 3
    assert queue.put(3, 300, SIZE, 0)
    queue.close()


def test_first_put_mid_queue_fills_the_file_head_like_rocketmq(tmp_path):
    queue = new_queue(tmp_path)
    assert queue.put(13, 5000, SIZE, 42)
    assert (queue.min_offset, queue.max_offset) == (13, 14)
    assert queue.file_names == [name(160)]  # the file holding byte 13 * 20 = 260
    raw = (qdir(tmp_path) / name(160)).read_bytes()
    assert raw[: 5 * UNIT_SIZE] == pack(0, 0x7FFFFFFF, 0) * 5  # fillPreBlank's units
    assert raw[5 * UNIT_SIZE : 6 * UNIT_SIZE] == pack(5000, SIZE, 42)
    assert queue.get_unit(12) is None and queue.get_units(8, 10) == []
    assert queue.get_unit(13) == (5000, SIZE, 42)
    assert queue.max_physic_offset == 5100
    queue.close()
    queue = reopen(tmp_path)
    assert (queue.min_offset, queue.max_offset, queue.max_physic_offset) == (13, 14, 5100)
    assert queue.put(14, 5100, SIZE, 0)
    queue.close()


def test_gap_in_a_queue_is_filled_with_fillers_across_files(tmp_path):
    queue = new_queue(tmp_path)
    fill(queue, 3)
    assert queue.put(20, 5000, SIZE, 1)
    assert (queue.min_offset, queue.max_offset) == (0, 21)
    assert queue.file_names == [name(0), name(160), name(320)]
    assert queue.get_units(3, 100) == [FILLER] * 5
    assert queue.get_units(8, 100) == [FILLER] * 8
    assert queue.get_units(16, 100) == [FILLER] * 4 + [(5000, SIZE, 1)]
    with pytest.raises(ConsumeQueueConflict):
        queue.put(10, 4000, SIZE, 0)  # a message where the queue recorded none
    queue.close()
    queue = reopen(tmp_path)
    assert (queue.min_offset, queue.max_offset, queue.max_physic_offset) == (0, 21, 5100)
    assert queue.get_unit(20) == (5000, SIZE, 1) and queue.get_unit(19) == FILLER
    queue.close()


def test_put_after_close_raises(tmp_path):
    queue = new_queue(tmp_path)
    fill(queue, 2)
    queue.close()
    queue.close()  # idempotent
    with pytest.raises(ConsumeQueueClosed):
        queue.put(2, 200, SIZE, 0)
    assert queue.get_unit(0) is None  # unmapped: readers find nothing rather than crash


def test_readers_concurrent_with_the_writer_see_only_whole_units(tmp_path):
    queue = new_queue(tmp_path)
    total = 400
    bad: list[object] = []
    done = threading.Event()

    def reader() -> None:
        while not done.is_set():
            end = queue.max_offset
            for i in range(max(0, end - 10), end):
                unit = queue.get_unit(i)
                if unit != (SIZE * i, SIZE, i + 1000):
                    bad.append((i, unit))
            chunk = queue.get_units(max(0, end - 5), 5)
            for k, unit in enumerate(chunk):
                i = max(0, end - 5) + k
                if unit != (SIZE * i, SIZE, i + 1000):
                    bad.append((i, unit))

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        fill(queue, total)
    finally:
        done.set()
        for t in threads:
            t.join()
    assert bad == []
    assert queue.max_offset == total
    queue.close()


# -- recovery -------------------------------------------------------------------------------------


def test_recovery_after_a_clean_restart(tmp_path):
    queue = new_queue(tmp_path)
    fill(queue, 19)
    queue.close()
    queue = reopen(tmp_path)
    assert (queue.min_offset, queue.max_offset, queue.max_physic_offset) == (0, 19, 1900)
    assert all_units(queue) == [(SIZE * i, SIZE, i + 1000) for i in range(19)]
    fill(queue, 5, first=19)
    queue.close()
    queue = reopen(tmp_path)
    assert queue.max_offset == 24 and queue.file_names == [name(0), name(160), name(320)]
    queue.close()


def test_recovery_when_the_last_file_is_exactly_full(tmp_path):
    queue = new_queue(tmp_path)
    fill(queue, 16)
    queue.close()
    queue = reopen(tmp_path)
    assert queue.max_offset == 16 and queue.file_names == [name(0), name(160)]
    fill(queue, 1, first=16)
    assert queue.file_names == [name(0), name(160), name(320)]
    queue.close()


def test_recovery_of_an_empty_directory_and_of_no_directory(tmp_path):
    queue = reopen(tmp_path)
    assert (queue.min_offset, queue.max_offset, queue.max_physic_offset) == (0, 0, 0)
    assert not qdir(tmp_path).exists()
    qdir(tmp_path).mkdir(parents=True)
    queue = reopen(tmp_path)
    assert queue.max_offset == 0
    fill(queue, 1)
    queue.close()


def zero_bytes(path: Path, start: int, end: int) -> None:
    raw = bytearray(path.read_bytes())
    raw[start:end] = bytes(end - start)
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize("field", [(8, 12), (0, 8), (0, 20)], ids=["size", "offset", "whole"])
def test_recovery_after_a_torn_last_unit(tmp_path, field):
    queue = new_queue(tmp_path)
    fill(queue, 12)
    queue.close()
    last = qdir(tmp_path) / name(160)
    pos = (11 - 8) * UNIT_SIZE
    zero_bytes(last, pos + field[0], pos + field[1])
    queue = reopen(tmp_path)
    assert queue.max_offset == 11 and queue.max_physic_offset == 1100
    assert last.read_bytes()[pos:] == bytes(FS - pos)  # the torn remains are gone
    assert queue.put(11, 1100, SIZE, 1011)
    queue.close()
    assert reopen(tmp_path).max_offset == 12


def test_recovery_zeroes_units_behind_a_hole_so_they_never_come_back(tmp_path):
    queue = new_queue(tmp_path)
    fill(queue, 6)
    queue.close()
    path = qdir(tmp_path) / name(0)
    zero_bytes(path, 3 * UNIT_SIZE + 8, 3 * UNIT_SIZE + 12)  # unit 3 lost its size; 4 and 5 survived
    queue = reopen(tmp_path)
    assert queue.max_offset == 3
    assert queue.put(3, 300, SIZE, 1003)
    queue.close()
    # Had units 4 and 5 stayed, this recovery would take them as the queue's continuation.
    queue = reopen(tmp_path)
    assert queue.max_offset == 4
    queue.close()


def test_recovery_deletes_files_after_the_end(tmp_path):
    queue = new_queue(tmp_path)
    fill(queue, 30)
    queue.close()
    zero_bytes(qdir(tmp_path) / name(320), 0, FS)  # the third file never reached the disk
    queue = reopen(tmp_path)
    assert queue.max_offset == 16
    assert queue.file_names == [name(0), name(160), name(320)]  # kept, empty, at the end
    assert not (qdir(tmp_path) / name(480)).exists()
    fill(queue, 2, first=16)
    queue.close()
    assert reopen(tmp_path).max_offset == 18


def test_recovery_walks_only_the_last_three_files(tmp_path):
    queue = new_queue(tmp_path)
    fill(queue, 40)
    queue.close()
    zero_bytes(qdir(tmp_path) / name(0), 0, FS)  # older than the last three: trusted, as RocketMQ
    queue = reopen(tmp_path)
    assert queue.max_offset == 40 and queue.max_physic_offset == 4000
    queue.close()


def test_recovery_checks_order_across_the_boundary_of_the_walk(tmp_path):
    queue = new_queue(tmp_path)
    fill(queue, 40)
    queue.close()
    # The first unit of the walk (queue offset 16) now points before the unit ahead of it.
    path = qdir(tmp_path) / name(320)
    raw = bytearray(path.read_bytes())
    raw[0:8] = struct.pack(">q", 50)
    path.write_bytes(bytes(raw))
    queue = reopen(tmp_path)
    assert queue.max_offset == 16 and queue.max_physic_offset == 1600
    queue.close()


def test_load_rejects_files_of_the_wrong_size(tmp_path):
    queue = new_queue(tmp_path)
    fill(queue, 3)
    queue.close()
    with open(qdir(tmp_path) / name(0), "ab") as f:
        f.write(b"\x00" * 20)
    with pytest.raises(SegmentLayoutError):
        new_queue(tmp_path).load()


@settings(max_examples=25)
@given(
    st.lists(st.tuples(st.integers(0, 12), st.integers(1, 300)), min_size=1, max_size=40),
    st.integers(0, 30),
)
def test_any_put_sequence_survives_a_restart(steps, start):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        queue = new_queue(root)
        expected: dict[int, CqUnit] = {}
        offset, clo = start, 0
        for gap, size in steps:
            offset += gap if gap > 9 else 0  # occasional gaps
            clo += size
            assert queue.put(offset, clo, size, gap)
            expected[offset] = CqUnit(clo, size, gap)
            offset += 1
            clo += size
        before = (queue.min_offset, queue.max_offset, queue.max_physic_offset)
        queue.close()
        queue = reopen(root)
        assert (queue.min_offset, queue.max_offset, queue.max_physic_offset) == before
        for q in range(queue.min_offset, queue.max_offset):
            assert queue.get_unit(q) == expected.get(q, FILLER)
        queue.close()


# -- maintenance ----------------------------------------------------------------------------------


def test_truncate_dirty_drops_units_at_and_beyond_the_commit_log_offset(tmp_path):
    queue = new_queue(tmp_path)
    fill(queue, 20)
    assert queue.truncate_dirty(1250) == 13  # message 12 (1200..1300) stays; 13 at 1300 goes
    assert (queue.max_offset, queue.max_physic_offset) == (13, 1300)
    assert queue.file_names == [name(0), name(160)]
    assert queue.get_unit(13) is None and queue.get_unit(12) == (1200, SIZE, 1012)
    assert queue.truncate_dirty(5000) == 13  # nothing beyond: no-op
    queue.close()
    queue = reopen(tmp_path)  # the dropped units were zeroed: recovery agrees
    assert (queue.max_offset, queue.max_physic_offset) == (13, 1300)
    fill(queue, 2, first=13)
    queue.close()


def test_truncate_dirty_at_a_file_boundary_and_to_nothing(tmp_path):
    queue = new_queue(tmp_path)
    fill(queue, 20)
    assert queue.truncate_dirty(800) == 8
    assert queue.file_names == [name(0), name(160)]
    assert queue.truncate_dirty(0) == 0
    assert (queue.min_offset, queue.max_offset, queue.max_physic_offset) == (0, 0, 0)
    fill(queue, 3)
    queue.close()
    assert reopen(tmp_path).max_offset == 3


def test_truncate_dirty_keeps_fillers_ahead_of_the_first_dirty_unit(tmp_path):
    queue = new_queue(tmp_path)
    fill(queue, 2)
    queue.put(6, 5000, SIZE, 0)
    assert queue.truncate_dirty(4000) == 6
    assert (queue.max_offset, queue.max_physic_offset) == (6, 200)
    assert queue.get_unit(5) == FILLER
    assert queue.put(6, 4000, SIZE, 0)
    queue.close()


def test_correct_min_offset_follows_the_commit_log_min(tmp_path):
    queue = new_queue(tmp_path)
    fill(queue, 20)
    assert queue.correct_min_offset(0) == 0
    assert queue.correct_min_offset(1050) == 11  # message 10 starts at 1000 < 1050: gone
    assert queue.min_offset == 11 and queue.get_unit(10) is None
    assert queue.get_units(11, 2) == [(1100, SIZE, 1011), (1200, SIZE, 1012)]
    assert queue.correct_min_offset(1200) == 12
    assert queue.correct_min_offset(10**9) == 20  # nothing left: empty, min == max
    assert queue.get_units(19, 5) == []
    queue.close()


def test_correct_min_offset_skips_fillers(tmp_path):
    queue = new_queue(tmp_path)
    queue.put(5, 500, SIZE, 0)
    queue.put(12, 1200, SIZE, 0)  # gap 6..11
    assert queue.correct_min_offset(0) == 5
    assert queue.correct_min_offset(600) == 12
    queue.close()


def test_delete_expired_files(tmp_path):
    queue = new_queue(tmp_path)
    fill(queue, 30)  # files at 0, 160, 320, 480 (units 24..29)
    assert queue.delete_expired_files(700) == 0  # file 0 still holds message 7 (700)
    assert queue.delete_expired_files(800) == 1
    assert queue.file_names == [name(160), name(320), name(480)]
    assert not (qdir(tmp_path) / name(0)).exists()
    assert queue.min_offset == 8
    assert queue.get_unit(7) is None and queue.get_unit(8) == (800, SIZE, 1008)
    assert not queue.put(3, 300, SIZE, 1003)  # re-dispatch into an expired file: already built
    with pytest.raises(ConsumeQueueConflict):
        queue.put(3, 2950, 100, 0)
    assert queue.delete_expired_files(10**9) == 2  # never the last file
    assert queue.file_names == [name(480)]
    assert (queue.min_offset, queue.max_offset) == (30, 30)
    fill(queue, 2, first=30)
    queue.close()
    queue = reopen(tmp_path)
    assert (queue.min_offset, queue.max_offset) == (24, 32)
    queue.correct_min_offset(10**9)
    assert queue.min_offset == 32
    queue.close()


def test_delete_expired_files_takes_all_filler_files(tmp_path):
    queue = new_queue(tmp_path)
    queue.put(20, 2000, SIZE, 0)  # file 320, fillers 16..19
    queue.put(40, 4000, SIZE, 0)  # fillers 21..39 through files 320, 480, 640
    assert queue.file_names == [name(320), name(480), name(640), name(800)]
    assert queue.delete_expired_files(2100) == 3  # 320 indexes only message 2000; 480, 640 nothing
    assert queue.file_names == [name(800)] and queue.min_offset == 40
    queue.close()


def test_flush_after_expiry_keeps_going(tmp_path):
    queue = new_queue(tmp_path)
    fill(queue, 20)
    queue.delete_expired_files(1600)
    fill(queue, 3, first=20)
    assert queue.flush(0)
    queue.close()


def test_destroy_removes_the_queue_and_leaves_it_usable(tmp_path):
    queue = new_queue(tmp_path)
    fill(queue, 10)
    queue.destroy()
    assert not qdir(tmp_path).exists() and not (tmp_path / "consumequeue" / "TopicTest").exists()
    assert (queue.min_offset, queue.max_offset, queue.max_physic_offset) == (0, 0, 0)
    queue.put(4, 100, SIZE, 0)
    assert (queue.min_offset, queue.max_offset) == (4, 5)
    queue.close()


# -- lookup by time -------------------------------------------------------------------------------


def store_times(base: int = 10_000, step: int = 10):
    calls = []

    def store_time_of(offset: int, size: int) -> int:
        assert size == SIZE
        calls.append(offset)
        return base + step * (offset // SIZE)

    return store_time_of, calls


def test_offset_by_time_is_the_first_unit_stored_at_or_after(tmp_path):
    queue = new_queue(tmp_path)
    fill(queue, 100)
    store_time_of, calls = store_times()
    assert queue.get_offset_in_queue_by_time(10_350, store_time_of) == 35  # exact
    assert queue.get_offset_in_queue_by_time(10_351, store_time_of) == 36  # between: the later one
    assert queue.get_offset_in_queue_by_time(0, store_time_of) == 0  # before everything: min
    assert queue.get_offset_in_queue_by_time(10_990, store_time_of) == 99
    assert queue.get_offset_in_queue_by_time(99_999, store_time_of) == 100  # after everything: max
    calls.clear()
    queue.get_offset_in_queue_by_time(10_500, store_time_of)
    assert len(calls) <= 8  # a binary search, not a walk
    queue.correct_min_offset(4000)
    assert queue.get_offset_in_queue_by_time(0, store_time_of) == 40  # clamped to min
    queue.close()


def test_offset_by_time_with_equal_times_and_missing_messages(tmp_path):
    queue = new_queue(tmp_path)
    fill(queue, 10)
    times = {0: 5, 100: 5, 200: 7, 300: 7, 400: 7, 500: 9}

    def store_time_of(offset: int, size: int):
        return times.get(offset, 20)

    assert queue.get_offset_in_queue_by_time(7, store_time_of) == 2  # first of equal times
    assert queue.get_offset_in_queue_by_time(8, store_time_of) == 5

    def gone_below_300(offset: int, size: int):
        return None if offset < 300 else -1 if offset < 400 else offset

    assert queue.get_offset_in_queue_by_time(0, gone_below_300) == 4
    queue.close()


def test_offset_by_time_over_fillers_and_empty_queues(tmp_path):
    queue = new_queue(tmp_path)
    assert queue.get_offset_in_queue_by_time(5, lambda o, s: 0) == 0
    queue.put(3, 300, SIZE, 0)
    queue.put(10, 1000, SIZE, 0)  # fillers 4..9
    queue.put(11, 1100, SIZE, 0)
    store_time_of, _ = store_times()
    assert queue.get_offset_in_queue_by_time(10_000, store_time_of) == 3
    assert queue.get_offset_in_queue_by_time(10_031, store_time_of) == 10
    assert queue.get_offset_in_queue_by_time(10_110, store_time_of) == 11
    assert queue.get_offset_in_queue_by_time(10_111, store_time_of) == 12
    queue.close()


# -- the table ------------------------------------------------------------------------------------


def test_table_loads_and_recovers_many_topics_and_queues(tmp_path):
    table = ConsumeQueueTable(tmp_path, FS)
    expected = {}
    clo = 0
    for t in range(5):
        topic = f"Topic-{t}" if t else "%RETRY%group_a"
        for q in range(4):
            queue = table.get_or_create(topic, q)
            assert table.get_or_create(topic, q) is queue
            count = (t * 4 + q) % 11
            for i in range(count):
                queue.put(i, clo, SIZE, 0)
                clo += SIZE
            if count:  # a queue never written has no directory, and nothing to load
                expected[f"{topic}-{q}"] = count
    assert len(table) == 20 and len(expected) == 18
    max_physic = table.max_physic_offset
    assert max_physic == clo
    table.close()
    # Things in the directory that are not queues are skipped.
    (tmp_path / "consumequeue" / "Topic-1" / "notaqueue").mkdir()
    (tmp_path / "consumequeue" / "Topic-1" / "007").mkdir()
    (tmp_path / "consumequeue" / "stray-file").write_bytes(b"x")

    table = ConsumeQueueTable(tmp_path, FS)
    assert table.load() == 18
    assert table.recover() == expected
    assert table.max_physic_offset == max_physic
    assert table.find("Topic-3", 2).max_offset == expected["Topic-3-2"]
    assert table.find("Topic-3", 9) is None and table.find("nope", 0) is None
    assert table.get_or_create("Topic-9", 0).max_offset == 0
    assert table.flush(0) is False  # loaded data is on disk already
    table.close()


def test_table_get_or_create_recovers_a_queue_it_did_not_load(tmp_path):
    table = ConsumeQueueTable(tmp_path, FS)
    fill(table.get_or_create("T", 1), 11)
    table.close()
    table = ConsumeQueueTable(tmp_path, FS)  # no load(): a lookup must not clobber the files
    queue = table.get_or_create("T", 1)
    assert queue.max_offset == 11
    fill(queue, 1, first=11)
    table.close()


def test_table_maintenance_reaches_every_queue(tmp_path):
    table = ConsumeQueueTable(tmp_path, FS)
    clo = 0
    for q in range(3):
        queue = table.get_or_create("T", q)
        for i in range(20):
            queue.put(i, clo, SIZE, 0)
            clo += SIZE
    # Queue q holds CommitLog [2000 q, 2000 (q + 1)).
    table.truncate_dirty(5000)
    assert table.queue_offset_table() == {"T-0": 20, "T-1": 20, "T-2": 10}
    # Queue 0's first two files (never its last), queue 1's first (units 0..7 end at 2800).
    assert table.delete_expired_files(2900) == 3
    table.correct_min_offset(2900)
    assert [table.find("T", q).min_offset for q in range(3)] == [20, 9, 0]
    assert table.remove("T", 2) and not table.remove("T", 2)
    assert not (tmp_path / "consumequeue" / "T" / "2").exists()
    assert table.flush(0)
    table.destroy()
    assert not (tmp_path / "consumequeue").exists() and len(table) == 0
