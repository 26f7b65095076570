"""A slave copies its master's topic table, consumer offsets and delay cursors
(`ha.metadata_sync`): two real stores, the log copied byte for byte, no sockets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ha.chunks import whole_records
from ha.metadata_sync import DelayCursors, MetadataSnapshot, apply_snapshot, take_snapshot
from store import Message, MessageStore, StoreConfig
from store.message import PROPERTY_DELAY_TIME_LEVEL
from store.metadata.topic_config import SCHEDULE_TOPIC, TopicConfig

T0 = 1_700_000_000_000


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


def config(tmp_path: Path, name: str, **kw) -> StoreConfig:
    return StoreConfig(
        store_path_root_dir=str(tmp_path / name),
        mapped_file_size_commit_log=64 * 1024,
        mapped_file_size_consume_queue=20480,
        max_hash_slot_num=512,
        max_index_num=2048,
        flush_disk_type="SYNC_FLUSH",
        **kw,
    )


def copy_log(master: MessageStore, slave: MessageStore, up_to: int | None = None) -> None:
    end = master.max_offset if up_to is None else up_to
    offset = slave.max_offset
    while offset < end:
        data = master.commit_log_data(offset, min(5000, end - offset))
        offset = slave.append_replicated(offset, data[: whole_records(data) or len(data)])
    assert slave.request_flush(offset).result(10).name == "PUT_OK"


def sync(master: MessageStore, slave: MessageStore):
    """One round as the wire carries it: the documents encoded, decoded, applied."""
    documents = take_snapshot(master, slave.flushed_offset).documents()
    return apply_snapshot(slave, MetadataSnapshot.from_documents(*documents))


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def pair(tmp_path, clock):
    master = MessageStore(config(tmp_path, "master"), clock_ms=clock)
    slave = MessageStore(config(tmp_path, "slave", broker_role="SLAVE"), clock_ms=clock)
    for store in (master, slave):
        store.load()
        store.start()
    yield master, slave
    master.shutdown()
    slave.shutdown()


def deliver_delayed(master: MessageStore, clock: Clock, count: int) -> int:
    """Put `count` messages at delay level 1, let them come due and re-put them; returns where
    the delayed messages end (the re-puts follow)."""
    for i in range(count):
        result = master.put_message(Message("Orders", 0, b"d%d" % i, {PROPERTY_DELAY_TIME_LEVEL: "1"}))
        assert result.status.name == "PUT_OK"
    puts_end = master.max_offset
    clock.now += 1_000
    while master.schedule.offsets[1] < count:
        master.schedule.deliver_due(clock.now)
    assert master.wait_flushed(master.max_offset)
    return puts_end


def test_a_slave_takes_the_masters_topics_offsets_and_delay_cursors(pair, clock):
    master, slave = pair
    master.topics.create_or_update(TopicConfig("Orders", 8, 8))
    master.consumer_offsets.commit_offset("billing", "Orders", 3, 42)
    deliver_delayed(master, clock, 3)
    copy_log(master, slave)

    result = sync(master, slave)

    assert result.topics_replaced and result.offsets_changed == 1
    assert result.delay_cursors is DelayCursors.REPLACED
    assert slave.topics.get("Orders") == TopicConfig("Orders", 8, 8)
    assert slave.topics.data_version == master.topics.data_version
    assert slave.consumer_offsets.query_offset("billing", "Orders", 3) == 42
    assert slave.schedule.offsets[1] == 3
    assert json.loads(slave.schedule.offsets_path.read_text())["offsetTable"]["1"] == 3
    again = sync(master, slave)
    assert not again.changed and again.delay_cursors is DelayCursors.UNCHANGED


def test_delay_cursors_wait_until_the_slave_holds_the_reputs(pair, clock):
    master, slave = pair
    puts_end = deliver_delayed(master, clock, 2)
    copy_log(master, slave, up_to=puts_end)
    held = slave.flushed_offset
    assert puts_end == held < master.max_offset

    # The master still knows where its cursor stood before those re-puts: 0.
    assert sync(master, slave).delay_cursors is DelayCursors.UNCHANGED
    assert slave.schedule.offsets[1] == 0  # taking 2 would skip both deliveries after a promotion
    master.schedule.persist()  # forgets that: its marks up to the flushed offset are dropped
    assert sync(master, slave).delay_cursors is DelayCursors.LOG_BEHIND
    assert slave.schedule.offsets[1] == 0

    copy_log(master, slave)
    assert slave.flushed_offset > held
    assert sync(master, slave).delay_cursors is DelayCursors.REPLACED
    assert slave.schedule.offsets[1] == 2


def test_master_entries_win_and_the_slaves_own_groups_stay(pair):
    master, slave = pair
    master.consumer_offsets.commit_offset("g", "T", 0, 10)
    slave.consumer_offsets.commit_offset("g", "T", 0, 99)
    slave.consumer_offsets.commit_offset("only-here", "T", 1, 5)

    assert sync(master, slave).offsets_changed == 1

    assert slave.consumer_offsets.query_offset("g", "T", 0) == 10
    assert slave.consumer_offsets.query_offset("only-here", "T", 1) == 5
    assert slave.consumer_offsets.dirty


def test_the_copied_tables_survive_the_slaves_restart(tmp_path, pair):
    master, slave = pair
    master.topics.create_or_update(TopicConfig("Wide", 16, 16))
    master.consumer_offsets.commit_offset("g", "Wide", 15, 7)
    sync(master, slave)
    slave.shutdown()

    reopened = MessageStore(config(tmp_path, "slave", broker_role="SLAVE"))
    reopened.load()
    try:
        assert reopened.topics.get("Wide") == TopicConfig("Wide", 16, 16)
        assert reopened.topics.get(SCHEDULE_TOPIC) is not None  # the system topics are kept
        assert reopened.consumer_offsets.query_offset("g", "Wide", 15) == 7
    finally:
        reopened.shutdown()


@pytest.mark.parametrize(
    ("documents", "message"),
    [
        ((b"{", b"{}", b""), "topics document is not JSON"),
        ((b"{}", b"[]", b""), "consumer offsets document is not a JSON object"),
        ((b"{}", b"{}", b"\xff"), "delay offsets document is not JSON"),
    ],
)
def test_documents_that_are_not_json_objects_are_refused(documents, message):
    with pytest.raises(ValueError, match=message):
        MetadataSnapshot.from_documents(*documents)


def test_a_bad_table_changes_nothing_of_its_kind(pair):
    master, slave = pair
    slave.consumer_offsets.commit_offset("g", "T", 0, 3)
    topics = slave.topics.document()
    bad_offsets = MetadataSnapshot(master.topics.document(), {"offsetTable": {"no-separator": {"0": 1}}}, None)

    with pytest.raises(ValueError, match="is not topic@group"):
        apply_snapshot(slave, bad_offsets)
    assert slave.consumer_offsets.query_offset("g", "T", 0) == 3

    with pytest.raises(ValueError, match="topicConfigTable is not an object"):
        apply_snapshot(slave, MetadataSnapshot({"topicConfigTable": []}, {}, None))
    assert slave.topics.document() == topics


def test_a_master_does_not_take_delay_cursors(pair):
    master, slave = pair
    with pytest.raises(RuntimeError, match="deliveries are stopped"):
        apply_snapshot(master, take_snapshot(slave, master.flushed_offset))
