"""Dispatch hands each round's records to its consumers together (issue 33): a batch's units of
one queue go into the ConsumeQueue in one write, what lands is what record-by-record rounds
write, a round repeated after a failing consumer writes nothing twice, and a message is in its
queue before any arrival listener hears of it. A caller may run a round itself
(`ReputMessageService.dispatch_here`, a slave's replicator), one round at a time with the
dispatcher's thread."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from store import Message, MessageStore, StoreConfig
from store.message import TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE
from store.queue.dispatch import DispatchRequest, ReputMessageService, queue_runs


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


def _dispatched_tree(root: Path, max_records: int) -> dict[str, bytes | object]:
    """The ConsumeQueue files' bytes after dispatching in rounds of `max_records`, and the
    dispatch counts (per topic and in all) under the key "stats"."""
    with MessageStore(_config(root), clock_ms=lambda: 1_700_000_000_000) as store:
        store._reput.stop()  # dispatch by hand, in rounds of `max_records`
        for put in _messages():
            result = store.put_messages(put) if len(put) > 1 else store.put_message(put[0])
            assert result.status.is_stored
        while store.dispatcher.dispatch_available(max_records):
            pass
        assert store.dispatcher.reput_from_offset == store.max_offset
        assert store.max_queue_offset("Runs", 0) == 6 * 32 and store.max_queue_offset("Runs", 1) == 6
        snapshot = store.stats_snapshot()
    queues = root / "consumequeue"
    tree: dict[str, bytes | object] = {
        str(p.relative_to(queues)): p.read_bytes() for p in sorted(queues.rglob("*")) if p.is_file()
    }
    tree["stats"] = (
        dict(snapshot.topics),
        snapshot.dispatched_messages,
        snapshot.dispatched_bytes,
        snapshot.last_dispatched_store_timestamp_ms,
    )
    return tree


def test_rounds_of_many_records_write_what_rounds_of_one_write(tmp_path):
    one_by_one = _dispatched_tree(tmp_path / "one", 1)
    assert len([name for name in one_by_one if name.startswith("Runs/0/")]) > 1  # runs cross files
    assert _dispatched_tree(tmp_path / "many", 4096) == one_by_one
    assert _dispatched_tree(tmp_path / "batches", 32) == one_by_one
    # Rounds mix topics (the delayed messages go to the schedule topic); counted per topic alike.
    topics, messages, _, _ = one_by_one["stats"]  # type: ignore[misc]
    assert messages == 6 * 34 and topics["Runs"].messages == 6 * 33 and len(topics) == 2


def _fail_first_round(store: MessageStore) -> None:
    """A consumer that raises in the first round it is given, as a full index disk would."""
    failures = [RuntimeError("the index disk is gone")]

    def flaky(requests) -> None:
        if failures:
            raise failures.pop()

    store.dispatcher.add_consumer(flaky)


def test_a_round_repeated_after_a_failing_consumer_writes_each_unit_once(tmp_path):
    with MessageStore(_config(tmp_path), clock_ms=lambda: 1_700_000_000_000) as store:
        store._reput.stop()
        _fail_first_round(store)
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


class _Lent:
    """A `ReputMessageService` that is never started, lent to the test's threads, with its
    wake-ups counted (the store's own service is stopped)."""

    def __init__(self, store: MessageStore) -> None:
        store._reput.stop()
        self.store = store
        self.service = ReputMessageService(store.dispatcher, lambda: store.max_offset)
        self.wakeups = 0
        self.service.wakeup = self._count  # type: ignore[method-assign]
        self.threads: list[str] = []
        store.dispatcher.add_consumer(lambda requests: self.threads.append(threading.current_thread().name))

    def _count(self) -> None:
        self.wakeups += 1


def test_dispatch_here_dispatches_on_the_calling_thread_without_waking_the_service(tmp_path):
    with MessageStore(_config(tmp_path)) as store:
        lent = _Lent(store)
        store.put_messages([Message("Here", 0, b"m%d" % i) for i in range(8)])
        lent.service.dispatch_here()
        assert lent.threads == [threading.current_thread().name]
        assert store.dispatcher.reput_from_offset == store.max_offset
        assert len(store.get_message("g", "Here", 0, 0, 32).messages) == 8
        assert lent.wakeups == 0


def test_dispatch_here_leaves_bytes_held_back_to_the_service(tmp_path):
    with MessageStore(_config(tmp_path)) as store:
        lent = _Lent(store)
        store.put_message(Message("Held", 0, b"first"))
        confirmed = store.max_offset
        store.put_message(Message("Held", 0, b"second"))
        store.dispatcher.set_limit(lambda: confirmed)  # replication confirmed only the first
        lent.service.dispatch_here()
        assert store.dispatcher.reput_from_offset == confirmed
        assert lent.wakeups == 1  # the service polls for the rest as it does for its own rounds


def test_dispatch_here_hands_a_failed_round_to_the_service_thread_to_repeat(tmp_path):
    with MessageStore(_config(tmp_path)) as store:
        lent = _Lent(store)
        _fail_first_round(store)
        start = store.dispatcher.reput_from_offset
        store.put_messages([Message("Again", 0, b"m%d" % i) for i in range(4)])
        lent.service.dispatch_here()  # does not raise into the caller (a replicator's request thread)
        assert store.dispatcher.reput_from_offset == start and lent.wakeups == 1
        lent.service.run_once()  # the service's round repeats it whole
        assert store.dispatcher.reput_from_offset == store.max_offset
        assert len(store.get_message("g", "Again", 0, 0, 32).messages) == 4


def test_dispatch_here_does_not_wait_for_a_round_under_way(tmp_path):
    with MessageStore(_config(tmp_path)) as store:
        lent = _Lent(store)
        entered, release = threading.Event(), threading.Event()

        def slow(requests) -> None:
            entered.set()
            assert release.wait(30)

        store.dispatcher.add_consumer(slow)
        store.put_message(Message("Turns", 0, b"first"))
        first_end = store.max_offset
        first = threading.Thread(target=lent.service.dispatch_here, name="first-round")
        first.start()
        try:
            assert entered.wait(30)
            store.put_message(Message("Turns", 0, b"second"))
            lent.service.dispatch_here()  # a round is under way: returns at once, the service is woken
            assert lent.wakeups == 1
            assert lent.threads == ["first-round"]
        finally:
            release.set()
        first.join(30)
        assert not first.is_alive()
        assert store.dispatcher.reput_from_offset == first_end  # the second is left to the service thread
