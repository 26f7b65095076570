"""The checkpoint file (store/checkpoint.py): RocketMQ's first 24 bytes, our CRC-guarded tail."""

from __future__ import annotations

import struct

from hypothesis import given
from hypothesis import strategies as st

from store.recovery.checkpoint import FILE_SIZE, CheckpointState, StoreCheckpoint, decode_checkpoint, encode_checkpoint

INT64 = st.integers(-(2**63), 2**63 - 1)
states = st.builds(
    CheckpointState,
    physic_msg_timestamp=INT64,
    logics_msg_timestamp=INT64,
    index_msg_timestamp=INT64,
    physic_flushed_offset=INT64,
    confirm_offset=INT64,
    logics_flushed_offset=INT64,
)

SAMPLE = CheckpointState(
    physic_msg_timestamp=1_700_000_000_001,
    logics_msg_timestamp=1_700_000_000_002,
    index_msg_timestamp=1_700_000_000_003,
    physic_flushed_offset=123_456,
    confirm_offset=120_000,
    logics_flushed_offset=110_000,
)


@given(state=states)
def test_round_trip(state):
    raw = encode_checkpoint(state)

    assert len(raw) == FILE_SIZE == 4096
    assert decode_checkpoint(raw) == (state, True)


def test_rocketmq_layout():
    raw = encode_checkpoint(SAMPLE)

    # RocketMQ's StoreCheckpoint reads these three longs, big-endian, at 0, 8 and 16.
    assert struct.unpack_from(">qqq", raw, 0) == (1_700_000_000_001, 1_700_000_000_002, 1_700_000_000_003)
    assert struct.unpack_from(">qqq", raw, 24) == (123_456, 120_000, 110_000)
    assert not any(raw[52:])


def test_rocketmq_written_file_is_trusted_without_offsets():
    raw = bytearray(FILE_SIZE)
    struct.pack_into(">qqq", raw, 0, 11, 22, 33)

    state, trusted = decode_checkpoint(bytes(raw))

    assert trusted
    assert state == CheckpointState(11, 22, 33, 0, 0, 0)
    assert state.min_timestamp == 11


def test_torn_file_is_not_trusted():
    raw = bytearray(encode_checkpoint(SAMPLE))
    raw[30] ^= 0xFF

    assert decode_checkpoint(bytes(raw)) == (CheckpointState(), False)


@given(position=st.integers(0, 51), flip=st.integers(1, 255))
def test_any_damaged_byte_is_detected(position, flip):
    raw = bytearray(encode_checkpoint(SAMPLE))
    raw[position] ^= flip

    # The CRC covers every field, RocketMQ's timestamps included.
    assert decode_checkpoint(bytes(raw)) == (CheckpointState(), False)


def test_short_file_is_not_trusted():
    assert decode_checkpoint(encode_checkpoint(SAMPLE)[:51]) == (CheckpointState(), False)
    assert decode_checkpoint(b"") == (CheckpointState(), False)


def test_min_timestamp_ignores_index():
    assert CheckpointState(physic_msg_timestamp=5, logics_msg_timestamp=9, index_msg_timestamp=1).min_timestamp == 5


def test_persist_and_load(tmp_path):
    path = tmp_path / "checkpoint"
    writer = StoreCheckpoint(path)
    writer.update(physic_msg_timestamp=10, physic_flushed_offset=4096)
    writer.persist()
    writer.update(confirm_offset=2048)
    writer.persist()  # rewrites in place through the open descriptor
    writer.close()
    writer.close()

    reader = StoreCheckpoint(path)
    state = reader.load()

    assert path.stat().st_size == FILE_SIZE
    assert reader.trusted
    assert (
        state
        == reader.state
        == CheckpointState(physic_msg_timestamp=10, physic_flushed_offset=4096, confirm_offset=2048)
    )


def test_load_missing_file(tmp_path):
    checkpoint = StoreCheckpoint(tmp_path / "checkpoint")

    assert checkpoint.load() == CheckpointState()
    assert not checkpoint.trusted


def test_load_torn_file(tmp_path):
    path = tmp_path / "checkpoint"
    raw = bytearray(encode_checkpoint(SAMPLE))
    raw[41] ^= 1
    path.write_bytes(bytes(raw))
    checkpoint = StoreCheckpoint(path)

    assert checkpoint.load() == CheckpointState()
    assert not checkpoint.trusted


def test_persist_overwrites_existing_bytes(tmp_path):
    path = tmp_path / "checkpoint"
    path.write_bytes(b"\xff" * FILE_SIZE)
    checkpoint = StoreCheckpoint(path)
    checkpoint.update(index_msg_timestamp=7)
    checkpoint.persist()
    checkpoint.close()

    assert decode_checkpoint(path.read_bytes()) == (CheckpointState(index_msg_timestamp=7), True)
