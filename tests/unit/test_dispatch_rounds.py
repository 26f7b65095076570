"""Dispatch hands each round's records to its consumers together (issue 33): a batch's units of
one queue go into the ConsumeQueue in one write, what lands is what record-by-record rounds
write, a round repeated after a failing consumer writes nothing twice, and a message is in its
queue before any arrival listener hears of it."""

from __future__ import annotations

from pathlib import Path

import pytest

from store import Message, MessageStore, StoreConfig
from store.message import TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE
from store.queue.dispatch import DispatchRequest, queue_runs


def request(topic: str, queue_id: int, queue_offset: int, commit_log_offset: int, sys_flag: int = 0) -> DispatchRequest:
    return DispatchRequest(topic, queue_id, commit_log_offset, 100, 0, 0, queue_offset, "", None, sys_flag, 0)


def test_queue_runs_are_one_queues_consecutive_offsets_without_transaction_halves():
    requests = [
        request("A", 0, 5, 0),
        request("A", 0, 6, 100),
        request("A", 0, 7, 200, sys_flag=TRANSACTION_PREPARED_TYPE),  # no unit
        request("A", 0, 7, 300),
        request("A", 1, 8, 400),  # another queue
        request("B", 1, 9, 500),  # another topic, the next offset of the run before
        request("B", 1, 11, 600),  # a gap
        request("B", 1, 12, 700, sys_flag=TRANSACTION_ROLLBACK_TYPE),  # no unit
    ]
    runs = [[(r.topic, r.queue_id, r.queue_offset) for r in run] for run in queue_runs(requests)]
    assert runs == [[("A", 0, 5), ("A", 0, 6), ("A", 0, 7)], [("A", 1, 8)], [("B", 1, 9)], [("B", 1, 11)]]
    assert list(queue_runs([])) == []


def _config(root: Path) -> StoreConfig:
    return StoreConfig(
        store_path_root_dir=str(root),
        mapped_file_size_commit_log=256 * 1024,
        mapped_file_size_consume_queue=20 * 64,  # a batch's run crosses ConsumeQueue files
        max_hash_slot_num=512,
        max_index_num=2048,
    )


def _messages() -> list[list[Message]]:
    """Batches of one queue, singles of another and a delayed message between them."""
    puts: list[list[Message]] = []
    for i in range(6):
        batch = [Message("Runs", 0, b"b%d-%d" % (i, j), properties={"KEYS": f"k{i}-{j}"}) for j in range(32)]
        puts.append(batch)
        puts.append([Message("Runs", 1, b"single-%d" % i, properties={"TAGS": "t"})])
        puts.append([Message("Runs", 1, b"later-%d" % i, properties={"DELAY": "1"})])
    return puts


def _dispatched_tree(root: Path, max_records: int) -> dict[str, bytes]:
    with MessageStore(_config(root), clock_ms=lambda: 1_700_000_000_000) as store:
        store._reput.stop()  # dispatch by hand, in rounds of `max_records`
        for put in _messages():
            result = store.put_messages(put) if len(put) > 1 else store.put_message(put[0])
            assert result.status.is_stored
        while store.dispatcher.dispatch_available(max_records):
            pass
        assert store.dispatcher.reput_from_offset == store.max_offset
        assert store.max_queue_offset("Runs", 0) == 6 * 32 and store.max_queue_offset("Runs", 1) == 6
    queues = root / "consumequeue"
    return {str(p.relative_to(queues)): p.read_bytes() for p in sorted(queues.rglob("*")) if p.is_file()}


def test_rounds_of_many_records_write_what_rounds_of_one_write(tmp_path):
    one_by_one = _dispatched_tree(tmp_path / "one", 1)
    assert len([name for name in one_by_one if name.startswith("Runs/0/")]) > 1  # runs cross files
    assert _dispatched_tree(tmp_path / "many", 4096) == one_by_one
    assert _dispatched_tree(tmp_path / "batches", 32) == one_by_one


def test_a_round_repeated_after_a_failing_consumer_writes_each_unit_once(tmp_path):
    with MessageStore(_config(tmp_path), clock_ms=lambda: 1_700_000_000_000) as store:
        store._reput.stop()
        failures = [RuntimeError("the index disk is gone")]

        def flaky(requests) -> None:
            if failures:
                raise failures.pop()

        store.dispatcher.add_consumer(flaky)
        start = store.dispatcher.reput_from_offset
        store.put_messages([Message("Again", 0, b"m%d" % i) for i in range(32)])
        with pytest.raises(RuntimeError):
            store.dispatcher.dispatch_available()
        assert store.dispatcher.reput_from_offset == start  # the round does not count
        assert store.dispatcher.dispatch_available() == 32  # repeated whole: the units are there
        assert store.max_queue_offset("Again", 0) == 32
        got = store.get_message("g", "Again", 0, 0, 64)
        assert [m.body for m in got.messages] == [b"m%d" % i for i in range(32)]


def test_a_listener_hears_of_a_message_once_its_queue_holds_it(tmp_path):
    with MessageStore(_config(tmp_path)) as store:
        heard: list[tuple[int, int]] = []
        store.add_arrival_listener(
            lambda r: heard.append((r.queue_offset, store.max_queue_offset(r.topic, r.queue_id)))
        )
        store.put_messages([Message("Heard", 0, b"m%d" % i) for i in range(32)])
        assert store.wait_dispatched(10.0)
        assert [offset for offset, _ in heard] == list(range(32))
        assert all(end > offset for offset, end in heard)
