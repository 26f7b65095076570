"""ha/chunks.py: record-aligned chunking (property tests over random logs) and the slave's checks."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ha import chunks
from ha.chunks import ChunkVerdict, MalformedRecords, SlaveStreamCheck, crc32c, intact_prefix, next_chunk, whole_records
from store.log.codec import BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE, DamagedMessage

HEADER = struct.Struct(">ii")


def record(size: int, fill: int = 0xAB) -> bytes:
    return HEADER.pack(size, MESSAGE_MAGIC_CODE) + bytes([fill]) * (size - 8)


def blank(size: int) -> bytes:
    return HEADER.pack(size, BLANK_MAGIC_CODE) + bytes(size - 8)


class FakeLog:
    """A CommitLog laid out as the store lays it out: a record that does not fit the rest of its
    segment (with room for a blank) goes to the next one, after a blank end record."""

    def __init__(self, segment_size: int, sizes: list[int], start: int = 0) -> None:
        self.segment_size = segment_size
        self.start = start
        self.data = bytearray()
        self.boundaries = [start]
        for i, size in enumerate(sizes):
            left = segment_size - (self.end % segment_size)
            if size + 8 > left:
                self._add(blank(left))
            self._add(record(size, i % 251))

    @property
    def end(self) -> int:
        return self.start + len(self.data)

    def _add(self, raw: bytes) -> None:
        self.data += raw
        self.boundaries.append(self.end)

    def reader(self, readable_end: int):
        def read(offset: int, size: int) -> bytes:
            segment_end = (offset // self.segment_size + 1) * self.segment_size
            stop = min(offset + size, segment_end, readable_end)
            return bytes(self.data[offset - self.start : max(offset, stop) - self.start])

        return read


@st.composite
def logs(draw):
    segment_size = draw(st.integers(64, 2048))
    sizes = draw(st.lists(st.integers(8, segment_size - 8), max_size=40))
    start = draw(st.integers(0, 3)) * segment_size
    log = FakeLog(segment_size, sizes, start)
    readable_end = draw(st.integers(log.start, log.end))
    batch_size = draw(st.integers(1, 3 * segment_size))
    return log, readable_end, batch_size


@given(logs())
def test_chunks_cover_every_whole_record_and_end_on_boundaries(case):
    log, readable_end, batch_size = case
    read = log.reader(readable_end)
    boundaries = set(log.boundaries)
    offset = log.start
    sent = bytearray()
    for _ in range(len(log.boundaries) + 1):
        chunk = next_chunk(read, offset, readable_end, batch_size)
        if not chunk:
            break
        end = offset + len(chunk)
        assert end in boundaries
        assert offset // log.segment_size == (end - 1) // log.segment_size, "a chunk crosses a segment end"
        assert whole_records(chunk) == len(chunk)
        if len(chunk) > batch_size and HEADER.unpack_from(chunk)[0] != len(chunk):
            # Only a single record, or a runt's worth more when that takes everything readable.
            assert readable_end - offset <= batch_size + chunks.runt_allowance(batch_size)
        sent += chunk
        offset = end
    else:
        pytest.fail("next_chunk never ran out")
    expected_end = max(b for b in log.boundaries if b <= readable_end)
    assert offset == expected_end
    assert bytes(sent) == bytes(log.data[: expected_end - log.start])


@given(logs())
def test_whole_records_of_any_prefix_is_the_last_boundary_in_it(case):
    log, readable_end, _ = case
    prefix = bytes(log.data[: readable_end - log.start])
    expected = max(b for b in log.boundaries if b <= readable_end) - log.start
    assert whole_records(prefix) == expected
    assert whole_records(memoryview(prefix)) == expected


def test_whole_records_stops_at_a_cut_header():
    data = record(20) + record(30)[:3]
    assert whole_records(data) == 20
    assert whole_records(record(20) + record(30)[:6]) == 20
    assert whole_records(b"") == 0
    assert whole_records(b"\x00\x00") == 0


@pytest.mark.parametrize(
    "raw, reason",
    [
        (HEADER.pack(0, MESSAGE_MAGIC_CODE), "TOTALSIZE 0"),
        (HEADER.pack(-5, BLANK_MAGIC_CODE), "TOTALSIZE -5"),
        (HEADER.pack(4, MESSAGE_MAGIC_CODE), "TOTALSIZE 4"),
        (HEADER.pack(16, 12345) + bytes(8), "MAGICCODE 12345"),
        (struct.pack(">i", 0) + b"\x01", "TOTALSIZE 0"),
    ],
)
def test_whole_records_rejects_garbage(raw, reason):
    with pytest.raises(MalformedRecords, match=reason) as info:
        whole_records(record(12) + raw)
    assert info.value.position == 12


def test_a_record_larger_than_the_batch_goes_whole():
    log = FakeLog(4096, [100, 1000, 50])
    read = log.reader(log.end)
    assert next_chunk(read, 0, log.end, 64) == record(100, 0)
    assert next_chunk(read, 100, log.end, 64) == record(1000, 1)
    assert next_chunk(read, 1100, log.end, 64) == record(50, 2)
    assert next_chunk(read, 1150, log.end, 64) == b""
    assert next_chunk(read, 0, log.end, 4) == record(100, 0)


def test_a_tail_of_at_most_a_quarter_batch_goes_with_the_chunk_before_it():
    log = FakeLog(1 << 20, [1000] * 10)  # a burst of 10,000 bytes
    read = log.reader(log.end)
    assert next_chunk(read, 0, log.end, 8000) == bytes(log.data)  # 2,000 past 8,000: one chunk
    two = [next_chunk(read, 0, log.end, 7000)]  # 3,000 past 7,000: more than a runt
    two.append(next_chunk(read, len(two[0]), log.end, 7000))
    assert [len(c) for c in two] == [7000, 3000]
    assert next_chunk(read, 0, 8500, 8000) == bytes(log.data[:8000])  # the 9th record is not whole yet


def test_the_runt_allowance_is_a_quarter_batch_up_to_a_mebibyte():
    assert chunks.runt_allowance(32 * 1024) == 8 * 1024
    assert chunks.runt_allowance(3) == 0
    assert chunks.runt_allowance(64 * 1024 * 1024) == chunks.RUNT_MAX_BYTES == 1024 * 1024


def test_nothing_whole_yet_gives_nothing():
    log = FakeLog(4096, [100, 1000])
    readable = 600  # the second record is half committed
    read = log.reader(readable)
    assert next_chunk(read, 0, readable, 10_000) == record(100, 0)
    assert next_chunk(read, 100, readable, 10_000) == b""
    assert next_chunk(read, 100, 104, 10_000) == b""


def test_gone_bytes_give_nothing():
    assert next_chunk(lambda offset, size: b"", 0, 1000, 64) == b""


def test_a_record_reaching_past_its_segment_is_corruption():
    data = record(40) + HEADER.pack(100, MESSAGE_MAGIC_CODE) + bytes(16)  # 64-byte segment

    def read(offset: int, size: int) -> bytes:
        return data[offset : min(offset + size, 64)]

    with pytest.raises(MalformedRecords, match="reaches past its segment"):
        next_chunk(read, 40, 200, 16)


# -- SlaveStreamCheck ---------------------------------------------------------------------------

SEGMENT = 1024


def check_of(chk: SlaveStreamCheck, start: int, data: bytes, *, checksum=None, segment_size=SEGMENT, master_max=None):
    return chk.check(
        start,
        data,
        crc32c(data) if checksum is None else checksum,
        segment_size,
        start + len(data) if master_max is None else master_max,
    )


def test_crc32c_is_castagnoli():
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(b"") == 0


def test_the_chunk_checksum_uses_the_compiled_crc32c():
    assert chunks.crc32c is not chunks.crcmod_crc32c  # google-crc32c's C extension loaded


@given(st.binary(max_size=70_000))
def test_the_compiled_crc32c_agrees_with_crcmod(data):
    assert crc32c(data) == chunks.crcmod_crc32c(data)


def test_chunks_at_the_log_end_are_accepted_in_order():
    chk = SlaveStreamCheck(SEGMENT, 2048, log_empty=False)
    first = check_of(chk, 2048, record(100))
    assert first.verdict is ChunkVerdict.OK and first.ok and first.end_offset == 2148
    chk.accepted(first)
    assert chk.expected_offset == 2148
    again = check_of(chk, 2048, record(100))
    assert again.verdict is ChunkVerdict.WRONG_OFFSET
    assert "starts at 2048 but this slave's log ends at 2148" in again.reason


def test_heartbeat_carries_the_expected_end():
    chk = SlaveStreamCheck(SEGMENT, 300, log_empty=False)
    beat = check_of(chk, 300, b"", master_max=5000)
    assert beat.verdict is ChunkVerdict.HEARTBEAT and beat.ok
    chk.accepted(beat)
    assert chk.expected_offset == 300
    assert check_of(chk, 400, b"", master_max=5000).verdict is ChunkVerdict.WRONG_OFFSET


def test_empty_log_takes_any_segment_start_once():
    chk = SlaveStreamCheck(SEGMENT, 0, log_empty=True)
    assert check_of(chk, 100, record(50)).verdict is ChunkVerdict.WRONG_OFFSET
    assert check_of(chk, 3 * SEGMENT, b"").verdict is ChunkVerdict.HEARTBEAT
    first = check_of(chk, 3 * SEGMENT, record(50))
    assert first.verdict is ChunkVerdict.OK
    chk.accepted(first)
    assert check_of(chk, 4 * SEGMENT, record(50)).verdict is ChunkVerdict.WRONG_OFFSET
    assert check_of(chk, 3 * SEGMENT + 50, record(50)).verdict is ChunkVerdict.OK


@pytest.mark.parametrize(
    "kwargs, verdict, words",
    [
        ({"checksum": 1}, ChunkVerdict.BAD_CHECKSUM, "CRC-32C"),
        ({"segment_size": 2048}, ChunkVerdict.SEGMENT_SIZE_MISMATCH, "must be equal"),
        ({"master_max": 10}, ChunkVerdict.MASTER_OFFSET_BEHIND, "past the master's max offset 10"),
    ],
)
def test_bad_chunks_are_protocol_errors(kwargs, verdict, words):
    chk = SlaveStreamCheck(SEGMENT, 0, log_empty=False)
    result = check_of(chk, 0, record(64), **kwargs)
    assert result.verdict is verdict and not result.ok
    assert words in result.reason
    chk.accepted(result)
    assert chk.expected_offset == 0


def test_chunk_must_hold_whole_records_inside_one_segment():
    chk = SlaveStreamCheck(SEGMENT, SEGMENT - 64, log_empty=False)
    crossing = check_of(chk, SEGMENT - 64, record(128))
    assert crossing.verdict is ChunkVerdict.CROSSES_SEGMENT
    partial = check_of(chk, SEGMENT - 64, record(40) + record(40)[:10])
    assert partial.verdict is ChunkVerdict.PARTIAL_RECORD
    garbage = check_of(chk, SEGMENT - 64, HEADER.pack(16, 7) + bytes(8))
    assert garbage.verdict is ChunkVerdict.MALFORMED_RECORD
    assert "MAGICCODE 7" in garbage.reason
    end = check_of(chk, SEGMENT - 64, record(40) + blank(24))
    assert end.verdict is ChunkVerdict.OK and end.end_offset == SEGMENT


# -- what a master may ship: intact_prefix ------------------------------------------------------------


def real_records(count: int, start: int = 0) -> tuple[bytearray, list[int]]:
    """`count` encoded messages as the CommitLog holds them from offset `start`; their offsets."""
    from store.log.codec import encode_message
    from store.message import Message

    data = bytearray()
    offsets = []
    for i in range(count):
        encoded = encode_message(
            Message("Orders", 0, f"body {i}".encode() * 8), default_store_host=("127.0.0.1", 10911),
            max_message_size=1 << 20, now_ms=1,
        )  # fmt: skip
        offsets.append(start + len(data))
        encoded.stamp(start + len(data), i, 2)
        data += encoded.buf
    return data, offsets


def damage_body(data: bytearray, offsets: list[int], start: int, index: int) -> None:
    data[offsets[index] - start + 100] ^= 0x01  # inside the body: the header ends before byte 100


def test_intact_chunks_go_whole():
    data, _ = real_records(5, start=4096)
    assert intact_prefix(bytes(data), 4096, 1 << 40) == (len(data), None)


def test_a_chunk_stops_before_a_damaged_record_and_names_it():
    start = 4096
    data, offsets = real_records(5, start)
    damage_body(data, offsets, start, 3)

    length, damage = intact_prefix(bytes(data), start, 1 << 40)
    assert length == offsets[3] - start
    assert isinstance(damage, DamagedMessage)
    assert (damage.offset, damage.queue_offset, damage.reason) == (offsets[3], 3, "body CRC mismatch")
    # The next chunk starts at the damaged record: nothing of it may go.
    length, again = intact_prefix(bytes(data[length:]), offsets[3], 1 << 40)
    assert length == 0 and again is not None and again.offset == offsets[3]


def test_records_at_or_past_the_checked_offset_are_not_read():
    start = 0
    data, offsets = real_records(4, start)
    damage_body(data, offsets, start, 2)

    assert intact_prefix(bytes(data), start, offsets[2]) == (len(data), None)
    assert intact_prefix(bytes(data), start, offsets[2] + 1)[0] == offsets[2]


def test_a_damaged_header_is_refused_too():
    data, offsets = real_records(3)
    struct.pack_into(">q", data, offsets[1] + 28, 12345)  # PHYSICALOFFSET names another position

    length, damage = intact_prefix(bytes(data), 0, 1 << 40)
    assert length == offsets[1]
    assert damage is not None and not isinstance(damage, DamagedMessage) and "physical offset" in damage.reason


def test_a_blank_end_of_segment_is_intact():
    data, _ = real_records(2)
    chunk = bytes(data) + blank(64)
    assert intact_prefix(chunk, 0, 1 << 40) == (len(chunk), None)
