"""`bench.work_floor`: the floor's broker work is the broker's, and its checks bite: the records a
master encodes decode with the store's codec, a slave takes what the master wraps, the reports'
MACs check on the master, and a chunk altered in transit is refused."""

from __future__ import annotations

import pytest

from bench.work_floor import WorkMaster, WorkSlave
from ha.peer_auth import AuthenticationError
from store.log.codec import decode_message
from store.message import Message
from wire.rpc import ha_pb2


def _placer():
    ends = {"offset": 0, "queue": 0}

    def place(size: int, count: int, queue_id: int) -> tuple[int, int]:
        at = ends["offset"], ends["queue"]
        ends["offset"] += size
        ends["queue"] += count
        return at

    return place


def _message(body: bytes, uniq: str) -> Message:
    return Message("Floor", 2, body, {"UNIQ_KEY": uniq})


def test_records_cross_to_the_slave_and_the_report_checks_on_the_master():
    master, slave, place = WorkMaster(), WorkSlave(), _placer()
    sent: list[bytes] = []
    master.stream_to(sent.append)
    one, offsets_one, _, _ = master.encode([_message(b"one", "id-1")], 2, place, 1_000)
    batch, offsets_batch, queue_offset, ids = master.encode(
        [_message(b"two", "id-2"), _message(b"three", "id-3")], 2, place, 1_000
    )
    assert offsets_one == [0] and offsets_batch[0] == len(one) and queue_offset == 1 and len(ids) == 2
    master.queue(one + batch)
    data, start = slave.take(master.wrap(b"".join(sent)))
    assert start == 0 and data == one + batch
    bodies, pos = [], 0
    while pos < len(data):
        message = decode_message(data, pos, pos)
        bodies.append((message.body, message.queue_offset, message.properties["UNIQ_KEY"]))
        pos += message.store_size
    assert bodies == [(b"one", 0, "id-1"), (b"two", 1, "id-2"), (b"three", 2, "id-3")]
    slave.dispatch(data, start)
    assert slave.recent.get("Floor", "id-3") is not None
    assert master.recent.get("Floor", "id-2") is not None
    assert master.report(slave.report(len(data))) == len(data)


def test_a_chunk_altered_in_transit_is_refused():
    master, slave = WorkMaster(), WorkSlave()
    records, _, _, _ = master.encode([_message(b"body", "id")], 0, _placer(), 1_000)
    chunk = ha_pb2.Chunk.FromString(master.wrap(records))
    chunk.data = chunk.data[:-1] + bytes([chunk.data[-1] ^ 1])
    with pytest.raises(AuthenticationError):
        slave.take(chunk.SerializeToString())
