"""A slave's store takes its master's bytes at exactly its end: the seam replication writes through."""

from __future__ import annotations

from pathlib import Path

import pytest

from ha.chunks import whole_records
from store import BrokerRole, Message, MessageStore, PutMessageStatus, ReplicatedAppendError, StoreConfig
from store.log.codec import check_record

SEGMENT = 64 * 1024


def config(tmp_path: Path, name: str, **kw) -> StoreConfig:
    return StoreConfig(
        store_path_root_dir=str(tmp_path / name),
        mapped_file_size_commit_log=SEGMENT,
        mapped_file_size_consume_queue=20480,
        max_hash_slot_num=512,
        max_index_num=2048,
        **kw,
    )


def copy_log(master: MessageStore, slave: MessageStore, chunk: int = 5000) -> None:
    offset = slave.max_offset
    while offset < master.max_offset:
        data = master.commit_log_data(offset, chunk)
        cut = whole_records(data) or len(data)
        offset = slave.append_replicated(offset, data[:cut])


@pytest.fixture
def pair(tmp_path):
    master = MessageStore(config(tmp_path, "master"))
    slave = MessageStore(config(tmp_path, "slave", broker_role="SLAVE", flush_disk_type="SYNC_FLUSH"))
    for store in (master, slave):
        store.load()
        store.start()
    yield master, slave
    master.shutdown()
    slave.shutdown()


def test_replicated_bytes_land_at_the_same_offsets_and_are_dispatched(pair):
    master, slave = pair
    results = [master.put_message(Message("T", i % 2, bytes([i % 256]) * 700)) for i in range(300)]
    assert {r.status for r in results} == {PutMessageStatus.PUT_OK}
    copy_log(master, slave)
    assert slave.max_offset == master.max_offset > 2 * SEGMENT  # segment ends were crossed
    assert slave.commit_log_data(0, SEGMENT) == master.commit_log_data(0, SEGMENT)
    future = slave.request_flush(slave.max_offset)
    assert future.result(10) is PutMessageStatus.PUT_OK
    assert slave.flushed_offset == slave.max_offset
    assert slave.wait_dispatched()
    assert slave.max_queue_offset("T", 0) == 150
    page = slave.get_message("g", "T", 1, 0, max_msg_nums=200, max_total_bytes=1 << 20)
    assert [m.physical_offset for m in page.messages] == [
        r.wrote_offset for r in results if r.queue_offset is not None
    ][1::2]


def test_bytes_for_any_other_offset_are_refused_and_nothing_is_written(pair):
    master, slave = pair
    master.put_message(Message("T", 0, b"x" * 100))
    copy_log(master, slave)
    end = slave.max_offset
    before = slave.commit_log_data(0, end)
    with pytest.raises(ReplicatedAppendError, match="ends at"):
        slave.append_replicated(end + 1, b"\0" * 16)
    with pytest.raises(ReplicatedAppendError, match="ends at"):
        slave.append_replicated(end - 4, b"\0" * 16)
    with pytest.raises(ReplicatedAppendError, match="cross the end"):
        slave.append_replicated(end, b"\0" * SEGMENT)
    assert slave.max_offset == end
    assert slave.commit_log_data(0, end + 100) == before


def test_an_empty_slave_starts_at_a_segment_boundary_only(tmp_path):
    slave = MessageStore(config(tmp_path, "slave", broker_role="SLAVE"))
    slave.load()
    slave.start()
    try:
        with pytest.raises(ReplicatedAppendError, match="segment boundary"):
            slave.append_replicated(100, b"\0" * 8)
        master = MessageStore(config(tmp_path, "master"))
        with master:
            record = master.put_message(Message("T", 0, b"y" * 50))
            data = master.commit_log_data(0, record.wrote_bytes)
        assert slave.append_replicated(2 * SEGMENT, b"") == 2 * SEGMENT  # nothing to place yet
        assert slave.max_offset == 0
        # A master whose older segments are deleted starts an empty slave at one of its segments.
        assert slave.append_replicated(2 * SEGMENT, data) == 2 * SEGMENT + len(data)
        with pytest.raises(ReplicatedAppendError, match="ends at"):
            slave.append_replicated(0, data)
        assert (slave.min_offset, slave.max_offset) == (2 * SEGMENT, 2 * SEGMENT + len(data))
    finally:
        slave.shutdown()
    assert check_record(data, 0, len(data), 0).size == len(data)


def test_a_master_does_not_take_replicated_bytes(pair):
    master, _ = pair
    with pytest.raises(ReplicatedAppendError, match="does not take"):
        master.append_replicated(master.max_offset, b"")
    assert master.broker_role is BrokerRole.ASYNC_MASTER


def test_the_ids_of_replicated_messages_are_remembered_by_the_dispatcher_and_of_own_puts_by_the_put(pair):
    """A slave's dispatcher remembers the producer ids of what it replicated (a promoted slave
    answers a retry of its old master's messages); a master's dispatcher leaves its own puts'
    ids to the put path that appended them (issue 33: it remembered each one twice)."""
    master, slave = pair
    ids = [f"C0A80001000118B4AAC20000000000{i:02X}" for i in range(40)]
    results = [master.put_message(Message("T", 0, b"m%d" % i, {"UNIQ_KEY": k})) for i, k in enumerate(ids)]
    assert {r.status for r in results} == {PutMessageStatus.PUT_OK}
    master.recent_ids.forget_from(0)  # what the put path remembered; the dispatcher must not bring it back
    assert master.wait_dispatched()
    assert [master.recent_ids.get("T", k) for k in ids] == [None] * len(ids)
    copy_log(master, slave)
    assert slave.wait_dispatched()
    landed = [slave.recent_ids.get("T", k) for k in ids]
    assert [(x.wrote_offset, x.queue_offset) for x in landed if x] == [
        (r.wrote_offset, r.queue_offset) for r in results
    ]


def test_the_ids_of_a_recovered_log_are_remembered_by_the_dispatcher(tmp_path):
    """What the log held at start went through no put path of this run: dispatching it (the
    catch-up after a crash) remembers its ids."""
    cfg = config(tmp_path, "m")
    with MessageStore(cfg) as store:
        store.set_dispatch_limit(lambda: 0)  # left undispatched, as a crash can leave it
        put = store.put_message(Message("T", 0, b"m", {"UNIQ_KEY": "C0A80001000118B4AAC2000000000001"}))
    restarted = MessageStore(cfg)
    restarted.load()  # nothing to seed the ids from: no queue holds the message yet
    assert len(restarted.recent_ids) == 0
    restarted.start()
    try:
        assert restarted.wait_dispatched()
        landed = restarted.recent_ids.get("T", "C0A80001000118B4AAC2000000000001")
        assert landed is not None and landed.wrote_offset == put.wrote_offset
    finally:
        restarted.shutdown()
