"""MessageStore role changes (controller mode): cutting a slave's divergent tail crash-safely,
promotion with queue offsets that continue after undispatched records, demotion, the put fence."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_replicated_append import SEGMENT, config, copy_log

from store import BrokerRole, Message, MessageStore, PutMessageStatus
from store.recovery.slave_truncation import STEPS, intent_path, read_intent


class Crash(Exception):
    pass


def fill(master: MessageStore, count: int, size: int = 700, topic: str = "T") -> list:
    results = [master.put_message(Message(topic, i % 2, bytes([i % 256]) * size)) for i in range(count)]
    assert {r.status for r in results} == {PutMessageStatus.PUT_OK}
    return results


@pytest.fixture
def stores(tmp_path):
    opened: list[MessageStore] = []

    def open_(name: str, role: str = "ASYNC_MASTER", start: bool = True) -> MessageStore:
        store = MessageStore(config(tmp_path, name, broker_role=role))
        store.load()
        if start:
            store.start()
        opened.append(store)
        return store

    yield open_
    for store in opened:
        store.shutdown()


def slave_copy(stores, master: MessageStore, name: str = "slave") -> MessageStore:
    slave = stores(name, "SLAVE")
    copy_log(master, slave)
    assert slave.wait_dispatched()
    return slave


def test_cut_in_the_middle_of_a_segment_drops_the_tail_everywhere(stores):
    master = stores("master")
    results = fill(master, 200)
    slave = slave_copy(stores, master)
    cut = results[150].wrote_offset
    outcome = slave.truncate_to(cut)
    assert (outcome.offset, outcome.previous_max_offset) == (cut, master.max_offset)
    assert slave.max_offset == cut and slave.commit_log_data(cut, 100) == b""
    assert slave.commit_log_data(0, cut) == master.commit_log_data(0, cut) or cut > SEGMENT
    assert slave.max_queue_offset("T", 0) == 75 and slave.max_queue_offset("T", 1) == 75
    page = slave.get_message("g", "T", 0, 0, max_msg_nums=500, max_total_bytes=1 << 22)
    assert all(m.physical_offset < cut for m in page.messages) and len(page.messages) == 75
    assert read_intent(slave.config.root) is None
    # Replication continues at the cut.
    copy_log(master, slave)
    assert slave.max_offset == master.max_offset and slave.wait_dispatched()
    assert slave.max_queue_offset("T", 0) == 100


def test_cut_at_a_segment_start_several_segments_back_and_to_nothing(stores):
    master = stores("master")
    fill(master, 400)
    slave = slave_copy(stores, master)
    assert slave.max_offset > 3 * SEGMENT
    outcome = slave.truncate_to(SEGMENT)
    assert slave.max_offset == SEGMENT and outcome.segments_deleted >= 2
    slave.truncate_to(0)
    assert slave.max_offset == 0 and slave.max_queue_offset("T", 0) == 0
    copy_log(master, slave)
    assert slave.max_offset == master.max_offset
    assert slave.commit_log_data(2 * SEGMENT, SEGMENT) == master.commit_log_data(2 * SEGMENT, SEGMENT)


def test_refusals_a_master_a_non_boundary_and_a_no_op(stores):
    master = stores("master")
    results = fill(master, 10)
    with pytest.raises(RuntimeError):
        master.truncate_to(results[5].wrote_offset)
    slave = slave_copy(stores, master)
    with pytest.raises(ValueError):
        slave.truncate_to(results[5].wrote_offset + 3)
    with pytest.raises(ValueError):
        slave.truncate_to(slave.max_offset + 1)
    assert slave.truncate_to(slave.max_offset).removed_bytes == 0


@pytest.mark.parametrize("step", STEPS)
def test_a_crash_at_any_step_of_a_cut_is_finished_at_the_next_load(stores, tmp_path, step):
    master = stores("master")
    results = fill(master, 300)
    slave = slave_copy(stores, master)
    cut = results[120].wrote_offset

    def crash(name: str) -> None:
        if name == step:
            raise Crash(name)

    slave.truncation_hook = crash
    with pytest.raises(Crash):
        slave.truncate_to(cut)
    assert intent_path(slave.config.root).exists()
    # The process dies here: no clean shutdown (the abort file stays), files as they are.
    slave.truncation_hook = None
    slave._stop_services()
    slave._close_files()
    slave._lock.release()
    slave._loaded = slave._running = False
    again = MessageStore(config(tmp_path, "slave", broker_role="SLAVE"))
    again.load()
    again.start()
    try:
        assert again.max_offset == cut
        assert read_intent(again.config.root) is None
        assert again.wait_dispatched()
        assert again.max_queue_offset("T", 0) == 60
        copy_log(master, again)
        assert again.commit_log_data(cut, 700) == master.commit_log_data(cut, 700)
    finally:
        again.shutdown()


def test_promotion_continues_queue_offsets_after_undispatched_records(stores):
    master = stores("master")
    results = fill(master, 100)
    slave = stores("slave", "SLAVE")
    slave.set_dispatch_limit(lambda: results[40].wrote_offset)  # a confirmed offset holding back the rest
    copy_log(master, slave)
    assert slave.wait_dispatched()
    assert slave.max_queue_offset("T", 0) == 20
    refused = slave.put_message(Message("T", 0, b"x"))
    assert refused.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    slave.become_master(BrokerRole.SYNC_MASTER)
    slave.set_dispatch_limit(None)
    put = slave.put_message(Message("T", 0, b"after promotion"))
    assert put.queue_offset == 50 and put.wrote_offset == master.max_offset
    slave.become_slave()
    assert slave.put_message(Message("T", 0, b"x")).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    slave.become_master(BrokerRole.ASYNC_MASTER)
    assert slave.put_message(Message("T", 0, b"again")).queue_offset == 51


def test_a_promoted_slave_serves_topics_its_log_holds_but_its_topic_table_lacks(stores):
    master = stores("master")
    master.put_message(Message("Fresh-Orders", 5, b"created on the old master after the last metadata copy"))
    slave = stores("slave", "SLAVE")
    slave.set_dispatch_limit(lambda: 0)  # not even dispatched yet: only the log knows the topic
    copy_log(master, slave)
    assert slave.topics.get("Fresh-Orders") is None
    slave.become_master(BrokerRole.SYNC_MASTER)
    adopted = slave.topics.get("Fresh-Orders")
    assert adopted is not None and adopted.writable and adopted.write_queue_nums >= 6
    slave.set_dispatch_limit(None)
    put = slave.put_message(Message("Fresh-Orders", 5, b"served by the new master"))
    assert put.status is PutMessageStatus.PUT_OK and put.queue_offset == 1


def test_the_put_fence_refuses_before_anything_is_appended(stores):
    master = stores("master")
    reason = ["this master could not renew its lease in time"]
    master.set_put_fence(lambda: reason[0])
    before = master.max_offset
    refused = master.put_message(Message("T", 0, b"x"))
    assert refused.status is PutMessageStatus.SERVICE_NOT_AVAILABLE and "lease" in refused.reason
    assert master.max_offset == before
    reason[0] = None
    assert master.put_message(Message("T", 0, b"x")).status is PutMessageStatus.PUT_OK


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 150), st.data())
def test_a_cut_then_a_reopen_leaves_exactly_the_prefix(tmp_path_factory, count, data):
    root = tmp_path_factory.mktemp("prop")
    master = MessageStore(config(root, "master"))
    slave = MessageStore(config(root, "slave", broker_role="SLAVE"))
    for store in (master, slave):
        store.load()
        store.start()
    try:
        results = fill(master, count, size=data.draw(st.integers(1, 3000)))
        copy_log(master, slave)
        cut = results[data.draw(st.integers(0, count - 1))].wrote_offset
        slave.truncate_to(cut)
        slave.shutdown()
        slave = MessageStore(config(root, "slave", broker_role="SLAVE"))
        slave.load()
        slave.start()
        assert slave.max_offset == cut
        start = slave.min_offset
        assert (
            slave.commit_log_data(start, SEGMENT)
            == master.commit_log_data(start, SEGMENT)[: len(slave.commit_log_data(start, SEGMENT))]
        )
    finally:
        master.shutdown()
        slave.shutdown()
