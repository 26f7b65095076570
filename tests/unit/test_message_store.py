"""MessageStore's public API: puts and reads, the statuses a put answers with, durability waits,
bad input, transaction messages, the lock and abort files, and concurrent putters."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import errno
import gc
import os
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from store import (
    CorruptMessage,
    Message,
    MessageStore,
    PutMessageResult,
    PutMessageStatus,
    StoreConfig,
    StoreLockedError,
    decode_msg_id,
    make_msg_id,
)
from store.log import mapped_file as mapped_file_module
from store.log.put_wait import PutWait
from store.log.status_future import StatusFuture
from support import run_threads

OK = PutMessageStatus.PUT_OK
SNA = PutMessageStatus.SERVICE_NOT_AVAILABLE
ILLEGAL = PutMessageStatus.MESSAGE_ILLEGAL
BLANK_MAGIC = -875286124
REPO = Path(__file__).resolve().parents[2]
NOW_MS = 1_700_000_000_123


def config(tmp_path: Path, **kw) -> StoreConfig:
    kw.setdefault("mapped_file_size_commit_log", 64 * 1024)
    # Small ConsumeQueue and IndexFile geometry, as small segments: tests copy and scan whole stores.
    kw.setdefault("mapped_file_size_consume_queue", 1024 * 20)
    kw.setdefault("max_hash_slot_num", 512)
    kw.setdefault("max_index_num", 2048)
    return StoreConfig(store_path_root_dir=str(tmp_path / "store"), **kw)


def count_messages(cfg: StoreConfig) -> int:
    with MessageStore(cfg) as store:
        return sum(1 for _ in store.iter_messages())


# -- puts and reads ---------------------------------------------------------------------------------


def test_put_and_read_back(tmp_path):
    cfg = config(tmp_path)
    with MessageStore(cfg, clock_ms=lambda: NOW_MS) as store:
        m1 = Message(
            "OrderTopic",
            2,
            b"first body",
            properties={"TAGS": "tagA", "KEYS": "k1 k2", "custom": "v\u00e9"},
            flag=7,
            born_host=("10.0.0.9", 5555),
            born_timestamp_ms=NOW_MS - 50,
            reconsume_times=3,
        )
        r1 = store.put_message(m1)
        assert r1.status is OK and r1.ok
        assert (r1.wrote_offset, r1.queue_offset, r1.msg_num, r1.store_timestamp_ms) == (0, 0, 1, NOW_MS)
        assert r1.msg_id == make_msg_id(("127.0.0.1", 10911), 0)
        assert r1.msg_ids == (r1.msg_id,)
        assert store.max_offset == r1.next_offset

        got = store.read_message(r1.wrote_offset)
        assert (got.topic, got.queue_id, got.body, dict(got.properties)) == (
            "OrderTopic",
            2,
            b"first body",
            {"TAGS": "tagA", "KEYS": "k1 k2", "custom": "v\u00e9"},
        )
        assert (got.flag, got.born_host, got.born_timestamp_ms, got.reconsume_times) == (
            7,
            ("10.0.0.9", 5555),
            NOW_MS - 50,
            3,
        )
        assert (got.store_timestamp_ms, got.queue_offset, got.physical_offset) == (NOW_MS, 0, 0)
        assert (got.store_size, got.msg_id, got.tags, got.keys) == (r1.wrote_bytes, r1.msg_id, "tagA", "k1 k2")

        r2 = store.put_message(Message("OrderTopic", 2, b"second"))
        r3 = store.put_message(Message("OrderTopic", 3, b"other queue"))
        assert (r2.wrote_offset, r2.queue_offset) == (r1.next_offset, 1)
        assert (r3.wrote_offset, r3.queue_offset) == (r2.next_offset, 0)
        assert store.read_message(r2.wrote_offset).born_timestamp_ms == NOW_MS  # default: time of the put
        assert [m.body for m in store.iter_messages()] == [b"first body", b"second", b"other queue"]
        assert [m.body for m in store.iter_messages(r2.wrote_offset)] == [b"second", b"other queue"]
        assert (store.max_queue_offset("OrderTopic", 2), store.max_queue_offset("OrderTopic", 3)) == (2, 1)
        assert store.max_queue_offset("Nothing", 0) == 0

        # IPv6 hosts: flagged in SYSFLAG (bits 4 and 5), 16-byte addresses, a 28-byte msgId.
        r6 = store.put_message(Message("V6Topic", 0, b"six", born_host=("::1", 9), store_host=("fe80::2", 10911)))
        assert r6.status is OK
        assert decode_msg_id(r6.msg_id) == (("fe80::2", 10911), r6.wrote_offset)
        got6 = store.read_message(r6.wrote_offset)
        assert (got6.born_host, got6.store_host, got6.sys_flag & 0x30) == (("::1", 9), ("fe80::2", 10911), 0x30)
        assert got6.store_size == r6.wrote_bytes == 91 + 2 * 12 + len(b"six") + len("V6Topic")

        # Offsets that are not the start of a message are errors, not garbage.
        for offset in (1, r1.wrote_offset + 4, store.max_offset, store.max_offset + 10_000, -1):
            with pytest.raises(CorruptMessage):
                store.read_message(offset)
    with MessageStore(cfg) as store:
        assert store.read_message(r1.wrote_offset) == got
        assert store.read_message(r6.wrote_offset) == got6


def test_put_messages_batch(tmp_path):
    with MessageStore(config(tmp_path), clock_ms=lambda: NOW_MS) as store:
        store.put_message(Message("BatchTopic", 0, b"before"))
        batch = [Message("BatchTopic", 0, f"item-{i}".encode(), properties={"KEYS": str(i)}) for i in range(5)]
        r = store.put_messages(batch)
        assert r.status is OK
        assert (r.msg_num, r.queue_offset, len(r.msg_ids)) == (5, 1, 5)
        assert r.msg_id == ",".join(r.msg_ids)
        got = list(store.iter_messages(r.wrote_offset))
        assert [m.body for m in got] == [m.body for m in batch]
        assert [m.queue_offset for m in got] == [1, 2, 3, 4, 5]
        assert [m.msg_id for m in got] == list(r.msg_ids)
        assert sum(m.store_size for m in got) == r.wrote_bytes
        assert got[0].physical_offset == r.wrote_offset
        assert all(a.physical_offset + a.store_size == b.physical_offset for a, b in zip(got, got[1:]))
        assert store.max_offset == r.next_offset
        assert store.max_queue_offset("BatchTopic", 0) == 6


def test_async_put_message(tmp_path):
    with MessageStore(config(tmp_path, flush_disk_type="SYNC_FLUSH")) as store:

        async def main():
            one = await store.async_put_message(Message("AsyncTopic", 0, b"a"))
            many = await store.async_put_messages([Message("AsyncTopic", 0, b"b"), Message("AsyncTopic", 0, b"c")])
            return one, many

        one, many = asyncio.run(main())
        assert (one.status, one.queue_offset) == (OK, 0)
        assert (many.status, many.queue_offset, many.msg_num, many.wrote_offset) == (OK, 1, 2, one.next_offset)
        assert store.flushed_offset >= many.next_offset
        assert [m.body for m in store.iter_messages()] == [b"a", b"b", b"c"]


def _on_another_thread(call, *args) -> None:
    thread = threading.Thread(target=call, args=args)
    thread.start()
    thread.join()


def _counted_wakes(loop: asyncio.AbstractEventLoop) -> list[tuple]:
    """The calls of `loop.call_soon_threadsafe` from now on (each one a wake-up of the loop)."""
    wakes: list[tuple] = []
    real = loop.call_soon_threadsafe

    def counted(*args):
        wakes.append(args)
        return real(*args)

    loop.call_soon_threadsafe = counted  # type: ignore[method-assign]
    return wakes


# A deadline no test reaches: far past the tests' own waits (30 s), so a wait that is never woken
# fails on the test's timeout instead of finishing late with timeout statuses.
FAR_NS = 3600 * 10**9


def _put_wait(flush, replica, *, flush_in_ns: int = FAR_NS, replica_in_ns: int = FAR_NS):
    """A PutWait on the running loop, and the loop future its finish settles."""
    now = time.perf_counter_ns()
    finished: asyncio.Future = asyncio.get_running_loop().create_future()
    wait = PutWait(
        (
            (flush, now + flush_in_ns, PutMessageStatus.FLUSH_DISK_TIMEOUT),
            (replica, now + replica_in_ns, PutMessageStatus.FLUSH_SLAVE_TIMEOUT),
        ),
        finished.set_result,
    )
    return wait, finished


def test_a_put_on_a_loop_is_woken_once_when_both_the_flush_and_the_slaves_are_in():
    async def main():
        wakes = _counted_wakes(asyncio.get_running_loop())
        # The last outcome settles on another thread (the flush thread): one wake-up of the loop.
        flush, replica = StatusFuture(), StatusFuture()
        _, finished = _put_wait(flush, replica)
        replica.set_result(OK)  # on the loop, as a replication stream on this loop acks
        assert not finished.done() and wakes == []
        _on_another_thread(flush.set_result, OK)
        assert len(wakes) == 1 and not finished.done()
        assert await asyncio.wait_for(finished, 30) == (OK, OK)  # the one wake-up finishes it
        # The last settles on the loop's own thread (a slave's ack read by a stream on this loop):
        # finished there and then, without a wake-up through the loop's self-pipe.
        flush, replica = StatusFuture(), StatusFuture()
        _, finished = _put_wait(flush, replica)
        _on_another_thread(flush.set_result, OK)
        replica.set_result(PutMessageStatus.SLAVE_NOT_AVAILABLE)
        assert finished.done() and finished.result() == (OK, PutMessageStatus.SLAVE_NOT_AVAILABLE)
        # Settled outcomes and statuses: finished while it is made.
        settled = StatusFuture()
        settled.set_result(OK)
        _, finished = _put_wait(settled, PutMessageStatus.PUT_OK)
        assert finished.done() and finished.result() == (OK, OK)
        assert len(wakes) == 1

    asyncio.run(main())


def test_each_outcome_of_a_put_on_a_loop_waits_until_its_own_deadline():
    async def main():
        # The slaves' deadline passed, the flush's did not: the flush is still waited for, and
        # its settlement (from another thread) now wakes the loop at once.
        loop = asyncio.get_running_loop()
        wakes = _counted_wakes(loop)
        flush, replica = StatusFuture(), StatusFuture()
        _, finished = _put_wait(flush, replica, replica_in_ns=0)
        # The wait's timer (at the earlier deadline, now) is due no later than a timer set after
        # it for now: once that one has run, the wait's has too.
        timer_ran = loop.create_future()
        loop.call_later(0, timer_ran.set_result, None)
        await asyncio.wait_for(timer_ran, 30)
        assert not finished.done()
        _on_another_thread(flush.set_result, OK)
        assert len(wakes) == 1
        assert await asyncio.wait_for(finished, 30) == (OK, PutMessageStatus.FLUSH_SLAVE_TIMEOUT)
        # Neither settles: each its timeout status.
        _, finished = _put_wait(StatusFuture(), StatusFuture(), flush_in_ns=0, replica_in_ns=0)
        assert await asyncio.wait_for(finished, 30) == (
            PutMessageStatus.FLUSH_DISK_TIMEOUT,
            PutMessageStatus.FLUSH_SLAVE_TIMEOUT,
        )
        # A cancelled wait (its put's task was cancelled) finishes nothing, even when both settle.
        flush, replica = StatusFuture(), StatusFuture()
        wait, finished = _put_wait(flush, replica)
        wait.cancel()
        flush.set_result(OK)
        replica.set_result(OK)
        assert not finished.done()

    asyncio.run(main())


def test_a_put_on_a_loop_waits_on_any_future_of_a_status_a_replica_gate_returns():
    # A replica gate of one's own (`MessageStore.set_replica_gate`) may answer with a
    # concurrent.futures.Future: the wait takes any future with done, result and callbacks.
    async def main():
        flush, replica = StatusFuture(), concurrent.futures.Future()
        # Deadlines past the test's own wait (FAR_NS): only the replica's settlement can finish it.
        _, finished = _put_wait(flush, replica)
        flush.set_result(OK)
        assert not finished.done()
        _on_another_thread(replica.set_result, PutMessageStatus.SLAVE_NOT_AVAILABLE)
        assert await asyncio.wait_for(finished, 30) == (OK, PutMessageStatus.SLAVE_NOT_AVAILABLE)

    asyncio.run(main())


class _BrokenOutcome(StatusFuture):
    """An outcome whose reading fails: a bug between the outcome and the put's answer."""

    def result(self, timeout: float | None = None) -> PutMessageStatus:
        raise OSError(errno.EIO, "the outcome cannot be read")


def test_an_outcome_that_fails_reaches_the_put_on_a_loop_as_its_exception():
    async def main():
        flush, replica = _BrokenOutcome(), StatusFuture()
        _, finished = _put_wait(flush, replica)
        replica.set_result(OK)
        _on_another_thread(flush.set_result, OK)
        failure = await asyncio.wait_for(finished, 30)
        assert isinstance(failure, OSError) and failure.errno == errno.EIO

    asyncio.run(main())


@contextlib.contextmanager
def _cyclic_garbage(found: list[int]):
    """What the garbage collector finds unreachable of what the block made (it does not run
    meanwhile): cyclic garbage, which only its passes free."""
    gc.collect()
    gc.disable()
    try:
        yield
        found.append(gc.collect())
    finally:
        gc.enable()


def test_a_finished_put_wait_leaves_no_reference_cycle():
    # Each put's outcomes, callback and result must be freed when it is answered: in a cycle
    # they waited for a collector pass, and at 8 clients those passes paused the loop for up to
    # 8 ms (`bench.put_switches --gc`).
    async def main():
        found: list[int] = []
        with _cyclic_garbage(found):
            flush, replica = StatusFuture(), StatusFuture()
            _, finished = _put_wait(flush, replica)
            replica.set_result(OK)
            _on_another_thread(flush.set_result, OK)
            await asyncio.wait_for(finished, 30)
            _, finished = _put_wait(StatusFuture(), StatusFuture(), flush_in_ns=0, replica_in_ns=0)
            await asyncio.wait_for(finished, 30)
            wait, _ = _put_wait(StatusFuture(), StatusFuture())
            wait.cancel()
            del flush, replica, finished, wait
        assert found == [0]

    asyncio.run(main())


def test_a_put_answered_through_a_callback_is_stored_and_answered_on_the_loop(tmp_path):
    with MessageStore(config(tmp_path, flush_disk_type="SYNC_FLUSH")) as store:

        async def main():
            loop = asyncio.get_running_loop()
            answers: list[tuple[object, int]] = []
            landed = loop.create_future()

            def then(result):
                answers.append((result, threading.get_ident()))
                if len(answers) == 2:
                    landed.set_result(None)

            store.put_message_then(Message("ThenTopic", 0, b"a"), then)
            store.put_messages_then([Message("ThenTopic", 0, b"b"), Message("ThenTopic", 0, b"c")], then)
            await asyncio.wait_for(landed, 30)
            return answers

        answers = asyncio.run(main())
        (one, one_thread), (many, many_thread) = answers
        assert one_thread == many_thread == threading.get_ident()  # asyncio.run's loop runs here
        assert (one.status, one.queue_offset) == (OK, 0)
        assert (many.status, many.queue_offset, many.msg_num) == (OK, 1, 2)
        assert store.flushed_offset >= many.next_offset
        assert [m.body for m in store.iter_messages()] == [b"a", b"b", b"c"]


# -- statuses -----------------------------------------------------------------------------------------


def _all_puts(store: MessageStore) -> list[PutMessageResult]:
    m = Message("StatusTopic", 0, b"x")
    return [store.put_message(m), store.put_messages([m, m]), asyncio.run(store.async_put_message(m))]


def test_store_not_started_or_shut_down_is_not_available(tmp_path):
    cfg = config(tmp_path)
    store = MessageStore(cfg)
    assert [r.status for r in _all_puts(store)] == [SNA] * 3
    store.load()
    try:
        assert [r.status for r in _all_puts(store)] == [SNA] * 3
        store.start()
        assert [r.status for r in _all_puts(store)] == [OK] * 3
    finally:
        store.shutdown()
    results = _all_puts(store)
    assert [r.status for r in results] == [SNA] * 3
    assert all(r.wrote_offset == -1 and r.reason for r in results)
    assert count_messages(cfg) == 4


def test_slave_refuses_puts(tmp_path):
    cfg = config(tmp_path, broker_role="SLAVE")
    with MessageStore(cfg) as store:
        assert [r.status for r in _all_puts(store)] == [SNA] * 3
        assert store.max_offset == 0
    assert count_messages(config(tmp_path)) == 0


def test_read_only_store_refuses_puts(tmp_path):
    with MessageStore(config(tmp_path)) as store:
        assert store.put_message(Message("T", 0, b"1")).status is OK
        end = store.max_offset
        store.set_read_only(True)
        assert [r.status for r in _all_puts(store)] == [SNA] * 3
        assert store.max_offset == end
        store.set_read_only(False)
        r = store.put_message(Message("T", 0, b"2"))
        assert (r.status, r.wrote_offset, r.queue_offset) == (OK, end, 1)


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_sync_master_without_slaves_stores_and_says_slave_not_available(tmp_path, flush):
    with MessageStore(config(tmp_path, broker_role="SYNC_MASTER", flush_disk_type=flush)) as store:
        results = _all_puts(store)
        assert [r.status for r in results] == [PutMessageStatus.SLAVE_NOT_AVAILABLE] * 3
        assert all(r.status.is_stored for r in results)
        for r in results:
            assert store.read_message(r.wrote_offset).body == b"x"
        assert store.max_queue_offset("StatusTopic", 0) == 4
        # A put that asks not to wait does not wait for slaves either.
        r = store.put_message(Message("StatusTopic", 0, b"y", properties={"WAIT": "false"}))
        assert r.status is OK


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_async_master_puts_are_ok(tmp_path, flush):
    with MessageStore(config(tmp_path, broker_role="ASYNC_MASTER", flush_disk_type=flush)) as store:
        assert [r.status for r in _all_puts(store)] == [OK] * 3


def test_sync_flush_put_returns_once_flushed(tmp_path):
    with MessageStore(config(tmp_path, flush_disk_type="SYNC_FLUSH", mapped_file_size_commit_log=4096)) as store:
        for i in range(40):  # crosses several segments
            r = store.put_message(Message("FlushTopic", 0, bytes(i % 7 for _ in range(300))))
            assert r.status is OK
            assert store.flushed_offset >= r.next_offset, f"put {i} returned before its bytes were flushed"

        async def main():
            return [await store.async_put_message(Message("FlushTopic", 1, b"z" * 500)) for _ in range(10)]

        for r in asyncio.run(main()):
            assert r.status is OK
            assert store.flushed_offset >= r.next_offset


class _StalledDisk:
    """Stand-in for the `os` module inside store.mapped_file whose fdatasync blocks until released
    (or raises, when `error` is set)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()
        self.error: OSError | None = None

    def __getattr__(self, name):
        return getattr(os, name)

    def fdatasync(self, fd):
        self.entered.set()
        if self.error is not None:
            raise self.error
        self.release.wait(30)
        return os.fdatasync(fd)


def test_sync_flush_timeout_when_the_disk_stalls(tmp_path, monkeypatch):
    timeout_ms = 100
    cfg = config(tmp_path, flush_disk_type="SYNC_FLUSH", sync_flush_timeout_ms=timeout_ms)
    disk = _StalledDisk()
    with MessageStore(cfg) as store:
        monkeypatch.setattr(mapped_file_module, "os", disk)
        try:
            async_result: list[PutMessageResult] = []
            stalled_async = threading.Thread(
                target=lambda: async_result.append(
                    asyncio.run(store.async_put_message(Message("StallTopic", 1, b"async stalled")))
                )
            )
            began = time.monotonic()
            stalled_async.start()
            r = store.put_message(Message("StallTopic", 0, b"stalled"))
            waited = time.monotonic() - began
            stalled_async.join(30)
            assert disk.entered.is_set()
            assert r.status is PutMessageStatus.FLUSH_DISK_TIMEOUT
            assert async_result and async_result[0].status is PutMessageStatus.FLUSH_DISK_TIMEOUT
            assert waited >= timeout_ms / 1000
            # Stored all the same, and readable.
            assert r.status.is_stored and r.wrote_offset >= 0 and r.queue_offset == 0
            assert store.read_message(r.wrote_offset).body == b"stalled"
            assert store.read_message(async_result[0].wrote_offset).body == b"async stalled"
            assert store.flushed_offset < max(r.next_offset, async_result[0].next_offset)
        finally:
            disk.release.set()
        # Once the disk is back, puts are answered PUT_OK again, flushed.
        again = store.put_message(Message("StallTopic", 0, b"after"))
        assert (again.status, again.queue_offset) == (OK, 1)
        assert store.flushed_offset >= again.next_offset == store.max_offset
        monkeypatch.undo()
    assert count_messages(cfg) == 3


def test_sync_flush_flushes_bytes_of_timed_out_puts_once_the_disk_recovers(tmp_path, monkeypatch):
    """A put that got FLUSH_DISK_TIMEOUT is stored; its bytes must still reach the disk when the
    disk recovers, without waiting for some later put to come along and flush them."""
    cfg = config(tmp_path, flush_disk_type="SYNC_FLUSH", sync_flush_timeout_ms=100)
    disk = _StalledDisk()
    with MessageStore(cfg) as store:
        monkeypatch.setattr(mapped_file_module, "os", disk)
        late: list[PutMessageResult] = []

        def second_put() -> None:
            # Put while the flush of the first put is stuck in fdatasync.
            assert disk.entered.wait(30)
            late.append(store.put_message(Message("StallTopic", 0, b"second")))

        helper = threading.Thread(target=second_put)
        helper.start()
        try:
            first = store.put_message(Message("StallTopic", 0, b"first"))
            helper.join(30)
        finally:
            disk.release.set()
        assert first.status is PutMessageStatus.FLUSH_DISK_TIMEOUT
        assert late and late[0].status is PutMessageStatus.FLUSH_DISK_TIMEOUT
        assert store.wait_flushed(late[0].next_offset, 3), (
            f"the timed-out put's bytes (up to {late[0].next_offset}) were not flushed"
        )
        monkeypatch.undo()


def test_sync_flush_also_flushes_puts_that_do_not_wait(tmp_path):
    """RocketMQ's GroupCommitService flushes even when no put waits (WAIT=false messages);
    a SYNC_FLUSH store must not leave such bytes in the page cache indefinitely."""
    with MessageStore(config(tmp_path, flush_disk_type="SYNC_FLUSH")) as store:
        r = store.put_message(Message("NoWaitTopic", 0, b"fire and forget", properties={"WAIT": "false"}))
        assert r.status is OK
        assert store.wait_flushed(r.next_offset, 3), (
            f"the WAIT=false put's bytes (up to {r.next_offset}) were not flushed"
        )


def test_flush_error_times_out_the_put_and_turns_the_store_read_only(tmp_path, monkeypatch):
    cfg = config(tmp_path, flush_disk_type="SYNC_FLUSH")
    disk = _StalledDisk()
    disk.error = OSError(errno.EIO, "Input/output error")
    with MessageStore(cfg) as store:
        monkeypatch.setattr(mapped_file_module, "os", disk)
        try:
            r = store.put_message(Message("IoTopic", 0, b"unlucky"))
            assert r.status is PutMessageStatus.FLUSH_DISK_TIMEOUT
            assert store.read_message(r.wrote_offset).body == b"unlucky"
            later = store.put_message(Message("IoTopic", 0, b"refused"))
            assert later.status is SNA
        finally:
            monkeypatch.undo()  # the disk heals before the shutdown's final flush
    assert count_messages(cfg) == 1


def test_wait_false_does_not_wait_for_the_flush(tmp_path, monkeypatch):
    cfg = config(tmp_path, flush_disk_type="SYNC_FLUSH", sync_flush_timeout_ms=60_000)
    disk = _StalledDisk()
    with MessageStore(cfg) as store:
        monkeypatch.setattr(mapped_file_module, "os", disk)
        try:
            r = store.put_message(Message("NoWaitTopic", 0, b"fire and forget", properties={"WAIT": "false"}))
            assert r.status is OK
            assert store.flushed_offset < r.next_offset  # answered without the flush (which is stalled)
            batch = store.put_messages([Message("NoWaitTopic", 0, b"b", properties={"WAIT": "false"})] * 2)
            assert batch.status is OK
            assert (
                asyncio.run(
                    store.async_put_message(Message("NoWaitTopic", 0, b"c", properties={"WAIT": "false"}))
                ).status
                is OK
            )
            assert store.flushed_offset < r.next_offset
            assert [m.queue_offset for m in store.iter_messages()] == [0, 1, 2, 3]
        finally:
            disk.release.set()
        waited = store.put_message(Message("NoWaitTopic", 0, b"waits"))
        assert waited.status is OK
        assert store.flushed_offset >= waited.next_offset
        monkeypatch.undo()


# -- bad input ----------------------------------------------------------------------------------------

_BIG = 2048


def _bad_cases():
    good = dict(topic="GoodTopic", queue_id=0, body=b"body")

    def m(**kw):
        return Message(**{**good, **kw})

    return [
        ("empty-topic", lambda: m(topic=""), ILLEGAL),
        ("topic-128-bytes", lambda: m(topic="t" * 128), ILLEGAL),
        ("topic-bad-char", lambda: m(topic="bad topic"), ILLEGAL),
        ("topic-not-str", lambda: m(topic=42), ILLEGAL),
        ("negative-queue", lambda: m(queue_id=-1), ILLEGAL),
        ("queue-over-int32", lambda: m(queue_id=1 << 31), ILLEGAL),
        ("queue-not-int", lambda: m(queue_id="0"), ILLEGAL),
        ("body-str", lambda: m(body="text"), ILLEGAL),
        ("body-none", lambda: m(body=None), ILLEGAL),
        ("flag-over-int32", lambda: m(flag=1 << 31), ILLEGAL),
        ("sys-flag-over-int32", lambda: m(sys_flag=1 << 32), ILLEGAL),
        ("reconsume-not-int", lambda: m(reconsume_times=1.5), ILLEGAL),
        ("bad-born-host", lambda: m(born_host=("300.1.1.1", 1)), ILLEGAL),
        ("bad-born-port", lambda: m(born_host=("1.1.1.1", 70000)), ILLEGAL),
        ("property-key-separator", lambda: m(properties={"a\x01b": "v"}), ILLEGAL),
        ("property-value-separator", lambda: m(properties={"k": "v\x02"}), ILLEGAL),
        ("property-empty-key", lambda: m(properties={"": "v"}), ILLEGAL),
        ("property-value-not-str", lambda: m(properties={"k": 1}), ILLEGAL),
        (
            "properties-32768-bytes",
            lambda: m(properties={"k": "v" * (32768 - 3)}),
            PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
        ),
        (
            "properties-huge",
            lambda: m(properties={f"key{i}": "x" * 1000 for i in range(40)}),
            PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
        ),
        ("over-max-message-size", lambda: m(body=b"b" * (_BIG + 1)), ILLEGAL),
        ("not-a-message", lambda: {"topic": "GoodTopic"}, ILLEGAL),
        ("empty-batch", lambda: [], ILLEGAL),
        ("batch-mixed-topics", lambda: [m(), m(topic="OtherTopic")], ILLEGAL),
        ("batch-mixed-queues", lambda: [m(), m(queue_id=1)], ILLEGAL),
        ("batch-transaction", lambda: [m(), m(sys_flag=4)], ILLEGAL),
        ("batch-delayed", lambda: [m(), m(properties={"DELAY": "3"})], ILLEGAL),
        ("batch-one-bad", lambda: [m(), m(body="text")], ILLEGAL),
        ("batch-over-max-size", lambda: [m(body=b"b" * (_BIG // 3)) for _ in range(4)], ILLEGAL),
    ]


@pytest.mark.parametrize("build,expected", [pytest.param(b, e, id=i) for i, b, e in _bad_cases()])
def test_bad_input_gets_a_status_and_writes_nothing(tmp_path, build, expected):
    cfg = config(tmp_path, max_message_size=_BIG, mapped_file_size_commit_log=64 * 1024)
    with MessageStore(cfg) as store:
        first = store.put_message(Message("GoodTopic", 0, b"first"))
        assert first.status is OK
        end = store.max_offset
        bad = build()
        if isinstance(bad, list):
            results = [store.put_messages(bad), asyncio.run(store.async_put_messages(bad))]
        else:
            results = [store.put_message(bad), asyncio.run(store.async_put_message(bad))]
        for r in results:
            assert r.status is expected
            assert r.reason
            assert (r.wrote_offset, r.msg_num) == (-1, 0)
        assert store.max_offset == end
        assert store.max_queue_offset("GoodTopic", 0) == 1
        assert store.commit_log_data(end, 64) == b""
        after = store.put_message(Message("GoodTopic", 0, b"after"))
        assert (after.status, after.wrote_offset, after.queue_offset) == (OK, end, 1)
    assert count_messages(cfg) == 2


def test_limits_themselves_are_accepted(tmp_path):
    with MessageStore(config(tmp_path)) as store:
        assert store.put_message(Message("t" * 127, 0, b"long topic")).status is OK
        props = {"k": "v" * (32767 - 3)}  # exactly 32767 bytes encoded
        r = store.put_message(Message("T", (1 << 31) - 1, b"", properties=props))
        assert r.status is OK
        got = store.read_message(r.wrote_offset)
        assert (got.properties, got.queue_id, got.body) == (props, (1 << 31) - 1, b"")


# -- transactions ---------------------------------------------------------------------------------------


def test_prepared_and_rolled_back_messages_keep_no_queue_offset(tmp_path):
    cfg = config(tmp_path)
    with MessageStore(cfg) as store:
        kinds = [0, 4, 0, 12, 4, 8, 0]  # normal, prepared, normal, rollback, prepared, commit, normal
        results = [store.put_message(Message("TxTopic", 0, f"m{i}".encode(), sys_flag=f)) for i, f in enumerate(kinds)]
        assert all(r.status is OK for r in results)
        assert [r.queue_offset for r in results] == [0, 0, 1, 0, 0, 2, 3]
        assert store.max_queue_offset("TxTopic", 0) == 4
        prepared = store.read_message(results[1].wrote_offset)
        assert (prepared.sys_flag & 12, prepared.queue_offset, prepared.body) == (4, 0, b"m1")
    with MessageStore(cfg) as store:
        assert store.max_queue_offset("TxTopic", 0) == 4
        assert store.put_message(Message("TxTopic", 0, b"next")).queue_offset == 4
        assert store.put_message(Message("TxTopic", 0, b"p", sys_flag=4)).queue_offset == 0
        assert store.max_queue_offset("TxTopic", 0) == 5


# -- lock and abort files -----------------------------------------------------------------------------


def test_second_store_on_the_same_directory_is_refused(tmp_path):
    cfg = config(tmp_path)
    with MessageStore(cfg) as store:
        for attempt in (lambda: MessageStore(cfg).load(), lambda: MessageStore(cfg).__enter__()):
            with pytest.raises(StoreLockedError) as info:
                attempt()
            assert f"pid {os.getpid()}" in str(info.value)
        assert store.put_message(Message("T", 0, b"still mine")).status is OK
        assert (Path(cfg.store_path_root_dir) / "abort").exists()
    with MessageStore(cfg) as store:
        assert not store.recovery.abnormal
        assert store.put_message(Message("T", 0, b"next")).queue_offset == 1


_CHILD_TRY_LOCK = """
import sys
from store import MessageStore, StoreConfig, StoreLockedError
try:
    MessageStore(StoreConfig(store_path_root_dir=sys.argv[1], mapped_file_size_commit_log=65536, mapped_file_size_consume_queue=20480, max_hash_slot_num=512, max_index_num=2048)).load()
except StoreLockedError as exc:
    print(exc)
    sys.exit(3)
sys.exit(0)
"""

_CHILD_HOLD_LOCK = """
import os, sys
from store import Message, MessageStore, StoreConfig
with MessageStore(StoreConfig(store_path_root_dir=sys.argv[1], mapped_file_size_commit_log=65536, mapped_file_size_consume_queue=20480, max_hash_slot_num=512, max_index_num=2048)) as store:
    store.put_message(Message("ChildTopic", 0, b"from the child"))
    print("ready", os.getpid(), flush=True)
    sys.stdin.read()
"""


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def test_second_process_is_refused_while_the_store_is_open(tmp_path):
    cfg = config(tmp_path)
    with MessageStore(cfg):
        done = subprocess.run(
            [sys.executable, "-c", _CHILD_TRY_LOCK, cfg.store_path_root_dir],
            capture_output=True,
            text=True,
            timeout=60,
            env=_child_env(),
            cwd=REPO,
        )
        assert done.returncode == 3, done.stderr
        assert f"pid {os.getpid()}" in done.stdout
    done = subprocess.run(
        [sys.executable, "-c", _CHILD_TRY_LOCK, cfg.store_path_root_dir],
        capture_output=True,
        text=True,
        timeout=60,
        env=_child_env(),
        cwd=REPO,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_store_open_in_another_process_is_refused_naming_its_pid(tmp_path):
    cfg = config(tmp_path)
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD_HOLD_LOCK, cfg.store_path_root_dir],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_child_env(),
        cwd=REPO,
    )
    try:
        line = child.stdout.readline().split()
        assert line == ["ready", str(child.pid)], child.stderr.read() if not line else line
        with pytest.raises(StoreLockedError, match=f"pid {child.pid}"):
            MessageStore(cfg).load()
    finally:
        child.stdin.close()
        assert child.wait(timeout=60) == 0
        child.stdout.close()
        child.stderr.close()
    with MessageStore(cfg) as store:
        assert not store.recovery.abnormal
        assert [m.body for m in store.iter_messages()] == [b"from the child"]


def test_abort_file_marks_a_crash(tmp_path):
    cfg = config(tmp_path)
    abort = Path(cfg.store_path_root_dir) / "abort"
    with MessageStore(cfg) as store:
        assert abort.exists()
        assert not store.recovery.abnormal
        store.put_message(Message("T", 0, b"1"))
    assert not abort.exists()
    with MessageStore(cfg) as store:
        assert not store.recovery.abnormal
    abort.touch()  # as a process killed while running leaves it
    with MessageStore(cfg) as store:
        assert store.recovery.abnormal
        assert [m.body for m in store.iter_messages()] == [b"1"]
    with MessageStore(cfg) as store:
        assert not store.recovery.abnormal


_CHILD_CRASH = """
import os, signal, sys
from store import Message, MessageStore, StoreConfig
store = MessageStore(StoreConfig(store_path_root_dir=sys.argv[1], mapped_file_size_commit_log=4096, mapped_file_size_consume_queue=20480, max_hash_slot_num=512, max_index_num=2048,
                                 flush_disk_type="SYNC_FLUSH"))
store.load()
store.start()
for i in range(int(sys.argv[2])):
    r = store.put_message(Message("CrashTopic", i % 2, b"%d" % i * 40))
    assert r.status.name == "PUT_OK", r
    print(r.wrote_offset, r.queue_offset, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_killed_process_leaves_abort_and_loses_no_acknowledged_message(tmp_path):
    cfg = config(tmp_path, mapped_file_size_commit_log=4096)
    n = 60
    done = subprocess.run(
        [sys.executable, "-c", _CHILD_CRASH, cfg.store_path_root_dir, str(n)],
        capture_output=True,
        text=True,
        timeout=60,
        env=_child_env(),
        cwd=REPO,
    )
    assert done.returncode == -9, done.stderr
    acked = [tuple(map(int, line.split())) for line in done.stdout.split("\n") if line]
    assert len(acked) == n
    assert (Path(cfg.store_path_root_dir) / "abort").exists()
    with MessageStore(cfg) as store:
        assert store.recovery.abnormal
        for i, (offset, queue_offset) in enumerate(acked):
            m = store.read_message(offset)
            assert (m.body, m.queue_offset, m.queue_id) == (b"%d" % i * 40, queue_offset, i % 2)
        assert store.max_offset == store.read_message(acked[-1][0]).store_size + acked[-1][0]
        assert store.max_queue_offset("CrashTopic", 0) == n // 2
    names = sorted(p.name for p in (Path(cfg.store_path_root_dir) / "commitlog").iterdir())
    assert int(names[-1]) <= acked[-1][0], "a segment beyond the data survived recovery"


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_shutdown_while_threads_put(tmp_path, flush):
    """Puts racing a shutdown either are stored (and survive it) or are refused (and are not in
    the log); none raises."""
    cfg = config(tmp_path, flush_disk_type=flush, mapped_file_size_commit_log=4096)
    store = MessageStore(cfg)
    store.load()
    store.start()
    out: list[list[tuple[Message, PutMessageResult]]] = [[] for _ in range(8)]
    enough = threading.Barrier(9)

    def putter(t: int) -> None:
        for i in range(10_000):
            m = Message("ShutTopic", t % 2, b"%d-%d" % (t, i) * 20)
            r = store.put_message(m)
            out[t].append((m, r))
            if i == 20:
                enough.wait(30)
            if r.status is SNA:
                return

    def stopper() -> None:
        enough.wait(30)
        store.shutdown()

    run_threads([lambda t=t: putter(t) for t in range(8)] + [stopper])
    results = [mr for per in out for mr in per]
    assert {r.status for _, r in results} <= {OK, SNA, PutMessageStatus.FLUSH_DISK_TIMEOUT}
    stored = [(m, r) for m, r in results if r.status.is_stored]
    assert all(per[-1][1].status is SNA for per in out), "every putter ends on a refusal"
    assert all(r.status is not SNA for per in out for _, r in per[:-1])
    with MessageStore(cfg) as reopened:
        assert not reopened.recovery.abnormal
        for m, r in stored:
            got = reopened.read_message(r.wrote_offset)
            assert (got.body, got.queue_offset) == (m.body, r.queue_offset)
        assert sum(1 for _ in reopened.iter_messages()) == len(stored)


# -- concurrent putters -------------------------------------------------------------------------------

SEG = 16 * 1024
THREADS = 16
PER_PUTTER = 40
QUEUES = [("ConcA", 0), ("ConcA", 1), ("ConcB", 0)]


def _message(putter: int, i: int) -> Message:
    topic, qid = QUEUES[(putter + i) % len(QUEUES)]
    size = 50 + (putter * 37 + i * 101) % 500
    return Message(topic, qid, f"{putter}:{i}:".encode() + bytes([putter]) * size)


def _verify_tiling(store: MessageStore, results: list[tuple[Message, PutMessageResult]]) -> None:
    assert all(r.status is OK for _, r in results), {r.status for _, r in results}
    by_queue: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for m, r in results:
        by_queue.setdefault((m.topic, m.queue_id), []).append((r.queue_offset, r.wrote_offset))
    for key, entries in by_queue.items():
        entries.sort()
        assert [q for q, _ in entries] == list(range(len(entries))), f"queue offsets of {key} are not dense"
        physical = [p for _, p in entries]
        assert physical == sorted(physical), f"queue order of {key} disagrees with log order"
        assert store.max_queue_offset(*key) == len(entries)
    assert len({r.msg_id for _, r in results}) == len(results)

    ordered = sorted(results, key=lambda mr: mr[1].wrote_offset)
    assert ordered[0][1].wrote_offset == 0
    crossings = 0
    for (_, a), (_, b) in zip(ordered, ordered[1:]):
        if a.next_offset == b.wrote_offset:
            continue
        # The only gap allowed: a blank record ending a segment, the next message at the next start.
        segment_end = (a.next_offset // SEG + 1) * SEG
        assert b.wrote_offset == segment_end, f"gap or overlap between {a} and {b}"
        assert struct.unpack(">ii", store.commit_log_data(a.next_offset, 8)) == (
            segment_end - a.next_offset,
            BLANK_MAGIC,
        )
        crossings += 1
    assert crossings >= 2, "the test must cross segments"
    assert ordered[-1][1].next_offset == store.max_offset
    for m, r in results:
        got = store.read_message(r.wrote_offset)
        assert (got.topic, got.queue_id, got.body, got.queue_offset) == (m.topic, m.queue_id, m.body, r.queue_offset)
    assert sum(1 for _ in store.iter_messages()) == len(results)


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_concurrent_threads_get_dense_queue_offsets_and_a_tiled_log(tmp_path, flush):
    cfg = config(tmp_path, flush_disk_type=flush, mapped_file_size_commit_log=SEG)
    with MessageStore(cfg) as store:
        start = threading.Barrier(THREADS)
        out: list[list[tuple[Message, PutMessageResult]]] = [[] for _ in range(THREADS)]

        def putter(t: int) -> None:
            start.wait(30)
            for i in range(PER_PUTTER):
                m = _message(t, i)
                r = store.put_message(m)
                if flush == "SYNC_FLUSH":
                    assert store.flushed_offset >= r.next_offset
                out[t].append((m, r))

        run_threads([lambda t=t: putter(t) for t in range(THREADS)])
        results = [mr for per in out for mr in per]
        assert len(results) == THREADS * PER_PUTTER
        _verify_tiling(store, results)
    with MessageStore(cfg) as store:
        _verify_tiling(store, results)


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_concurrent_tasks_get_dense_queue_offsets_and_a_tiled_log(tmp_path, flush):
    cfg = config(tmp_path, flush_disk_type=flush, mapped_file_size_commit_log=SEG)
    with MessageStore(cfg) as store:

        async def putter(t: int) -> list[tuple[Message, PutMessageResult]]:
            done = []
            for i in range(PER_PUTTER):
                m = _message(t, i)
                done.append((m, await store.async_put_message(m)))
            return done

        async def main():
            return await asyncio.gather(*(putter(t) for t in range(THREADS)))

        results = [mr for per in asyncio.run(main()) for mr in per]
        assert len(results) == THREADS * PER_PUTTER
        if flush == "SYNC_FLUSH":
            assert store.flushed_offset >= max(r.next_offset for _, r in results)
        _verify_tiling(store, results)


def test_threads_event_loops_and_batches_at_once(tmp_path):
    cfg = config(tmp_path, flush_disk_type="SYNC_FLUSH", mapped_file_size_commit_log=SEG)
    with MessageStore(cfg) as store:
        out: list[tuple[Message, PutMessageResult]] = []
        lock = threading.Lock()

        def record(messages: list[Message], r: PutMessageResult) -> None:
            """One (message, result) per message, a batch's split at its records."""
            assert r.status is OK and r.msg_num == len(messages)
            offset, entries = r.wrote_offset, []
            for k, m in enumerate(messages):
                size = store.read_message(offset).store_size
                entries.append((m, PutMessageResult(OK, offset, size, r.queue_offset + k, msg_id=r.msg_ids[k])))
                offset += size
            assert offset == r.next_offset
            with lock:
                out.extend(entries)

        def sync_putter(t: int) -> None:
            for i in range(PER_PUTTER // 2):
                if i % 4 == 0:
                    first = _message(t, i)
                    batch = [Message(first.topic, first.queue_id, first.body + bytes([k])) for k in range(3)]
                    record(batch, store.put_messages(batch))
                else:
                    m = _message(t, i)
                    record([m], store.put_message(m))

        def loop_putter(t: int) -> None:
            async def task(k: int) -> None:
                for i in range(PER_PUTTER // 2):
                    m = _message(100 + t * 10 + k, i)
                    record([m], await store.async_put_message(m))

            async def main() -> None:
                await asyncio.gather(*(task(k) for k in range(4)))

            asyncio.run(main())

        run_threads([lambda t=t: sync_putter(t) for t in range(4)] + [lambda t=t: loop_putter(t) for t in range(2)])
        per_sync_thread = (PER_PUTTER // 2) + 2 * len(range(0, PER_PUTTER // 2, 4))
        assert len(out) == 4 * per_sync_thread + 2 * 4 * (PER_PUTTER // 2)
        _verify_tiling(store, out)


def test_a_full_disk_is_one_status_whether_measured_or_met_creating_a_segment(tmp_path, monkeypatch):
    with MessageStore(config(tmp_path, mapped_file_size_commit_log=4096)) as store:
        first = store.put_message(Message("Full", 0, b"x" * 1000))
        assert first.status is OK

        def no_space(*args, **kwargs):
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(mapped_file_module, "create_file_atomically", no_space)
        results = [store.put_message(Message("Full", 0, b"x" * 1000)) for _ in range(6)]
        refused = [r for r in results if r.status is not OK]
        assert refused and {r.status for r in refused} == {SNA}
        assert all("the disk is full" in r.reason for r in refused)
        monkeypatch.undo()


def test_first_unconsumed_offset_follows_the_slowest_group_of_each_queue(tmp_path):
    with MessageStore(config(tmp_path)) as store:
        put = [store.put_message(Message("Orders", q, f"m{i}".encode())) for i in range(6) for q in (0, 1)]
        assert store.wait_dispatched()
        offset_of = {(r.queue_offset, q): r.wrote_offset for r, q in zip(put, [0, 1] * 6)}
        # No group at all: nothing has been read, from the very first message.
        assert store.first_unconsumed_offset() == offset_of[(0, 0)]
        store.consumer_offsets.commit_offset("fast", "Orders", 0, 6)
        store.consumer_offsets.commit_offset("fast", "Orders", 1, 6)
        assert store.first_unconsumed_offset() == store.max_offset  # everything read
        store.consumer_offsets.commit_offset("slow", "Orders", 1, 2)
        # A group of the topic that has not read queue 0 at all holds it from its start.
        assert store.first_unconsumed_offset() == offset_of[(0, 0)]
        store.consumer_offsets.commit_offset("slow", "Orders", 0, 4)
        assert store.first_unconsumed_offset() == offset_of[(2, 1)]  # the slow group's queue 1


def test_a_producer_retry_of_a_stored_message_is_answered_not_stored_again(tmp_path):
    cfg = config(tmp_path, flush_disk_type="SYNC_FLUSH")
    retry = {"UNIQ_KEY": "C0A80001000118B4AAC2000000000001"}
    with MessageStore(cfg) as store:
        first = store.put_message(Message("Orders", 0, b"pay 10", dict(retry)))
        again = store.put_message(Message("Orders", 2, b"pay 10", dict(retry)))  # a retry may pick another queue
        assert first.status is OK and again.status is OK
        assert (again.wrote_offset, again.queue_offset, again.msg_id) == (
            first.wrote_offset,
            first.queue_offset,
            first.msg_id,
        )
        other_topic = store.put_message(Message("Audit", 0, b"pay 10", dict(retry)))  # another store of the message
        assert other_topic.wrote_offset != first.wrote_offset
        fresh = store.put_message(Message("Orders", 0, b"pay 10", {"UNIQ_KEY": "C0A80001000118B4AAC2000000000002"}))
        assert fresh.wrote_offset > first.wrote_offset
        assert store.wait_dispatched()
        assert store.max_queue_offset("Orders", 0) == 2 and store.max_queue_offset("Orders", 2) == 0
    # After a restart the ids come back from the log: the retry is still recognised.
    with MessageStore(cfg) as store:
        late = store.put_message(Message("Orders", 1, b"pay 10", dict(retry)))
        assert (late.status, late.wrote_offset, late.msg_id) == (OK, first.wrote_offset, first.msg_id)
        assert store.max_queue_offset("Orders", 1) == 0
    assert count_messages(cfg) == 3


def test_a_retry_of_one_message_of_a_batch_is_answered_with_where_it_landed(tmp_path):
    with MessageStore(config(tmp_path, flush_disk_type="SYNC_FLUSH")) as store:
        store.set_dispatch_limit(lambda: 0)  # nothing dispatched: the put path alone remembers the ids
        keys = [f"C0A80001000118B4AAC20000000001{i:02X}" for i in range(3)]
        batch = store.put_messages([Message("Orders", 0, b"m%d" % i, {"UNIQ_KEY": k}) for i, k in enumerate(keys)])
        assert batch.status is OK and batch.msg_num == 3
        retry = store.put_message(Message("Orders", 0, b"m1", {"UNIQ_KEY": keys[1]}))
        assert retry.status is OK
        assert (retry.queue_offset, retry.msg_id) == (batch.queue_offset + 1, batch.msg_ids[1])
        assert store.read_message(retry.wrote_offset).body == b"m1"
        assert store.max_offset == batch.wrote_offset + batch.wrote_bytes  # nothing appended for the retry


def test_a_batch_with_messages_without_a_producer_id_remembers_the_others_where_they_landed(tmp_path):
    with MessageStore(config(tmp_path, flush_disk_type="SYNC_FLUSH")) as store:
        store.set_dispatch_limit(lambda: 0)  # nothing dispatched: the put path alone remembers the ids
        keys = ["C0A80001000118B4AAC2000000000A00", None, "C0A80001000118B4AAC2000000000A02"]
        batch = store.put_messages(
            [Message("Orders", 0, b"m%d" % i, {"UNIQ_KEY": k} if k else {}) for i, k in enumerate(keys)]
        )
        assert batch.status is OK and batch.msg_num == 3
        retry = store.put_message(Message("Orders", 0, b"m2", {"UNIQ_KEY": keys[2]}))
        assert (retry.queue_offset, retry.msg_id) == (batch.queue_offset + 2, batch.msg_ids[2])
        assert store.read_message(retry.wrote_offset).body == b"m2"
        assert store.max_offset == batch.wrote_offset + batch.wrote_bytes  # nothing appended for the retry


def test_the_retry_check_can_be_turned_off(tmp_path):
    with MessageStore(config(tmp_path, recent_message_ids_max=0)) as store:
        results = [store.put_message(Message("Orders", 0, b"x", {"UNIQ_KEY": "same"})) for _ in range(2)]
        assert results[0].wrote_offset != results[1].wrote_offset


def test_max_message_size_limits_the_body_as_clients_count_it(tmp_path):
    with MessageStore(config(tmp_path, max_message_size=_BIG)) as store:
        exact = store.put_message(Message("GoodTopic", 0, b"b" * _BIG, {"KEYS": "k" * 300}))
        assert exact.status is OK and exact.wrote_bytes > _BIG
        over = store.put_message(Message("GoodTopic", 0, b"b" * (_BIG + 1)))
        assert over.status is ILLEGAL and "maxMessageSize" in over.reason


# -- caller-runs flushes and dispatch after flush -----------------------------------------------------


class _RecordingDisk:
    """Stand-in for the `os` module inside store.mapped_file that records which thread calls
    fdatasync; `stall` makes the next call block until `release` is set."""

    def __init__(self) -> None:
        self.threads: list[str] = []
        self.stall = False
        self.entered = threading.Event()
        self.release = threading.Event()

    def __getattr__(self, name):
        return getattr(os, name)

    def fdatasync(self, fd):
        self.threads.append(threading.current_thread().name)
        if self.stall:
            self.stall = False
            self.entered.set()
            self.release.wait(30)
        return os.fdatasync(fd)


def test_request_flush_here_flushes_on_the_calling_thread(tmp_path, monkeypatch):
    disk = _RecordingDisk()
    with MessageStore(config(tmp_path, flush_disk_type="SYNC_FLUSH")) as store:
        r = store.put_message(Message("HereTopic", 0, b"x", properties={"WAIT": "false"}))
        end = store.max_offset
        monkeypatch.setattr(mapped_file_module, "os", disk)
        if store.flushed_offset < end:
            future = store.request_flush(end, flush_here=True)
            assert future is not None and future.done() and future.result() is OK
            assert disk.threads == [threading.current_thread().name]
        assert store.flushed_offset >= r.next_offset
        # Nothing left to flush: answered at once, no fdatasync.
        calls = len(disk.threads)
        again = store.request_flush(end, flush_here=True)
        assert again is not None and again.result(0) is OK and len(disk.threads) == calls
        monkeypatch.undo()


def test_request_flush_here_leaves_the_flush_to_the_service_while_another_is_under_way(tmp_path, monkeypatch):
    disk = _RecordingDisk()
    with MessageStore(config(tmp_path, flush_disk_type="SYNC_FLUSH")) as store:
        monkeypatch.setattr(mapped_file_module, "os", disk)
        disk.stall = True
        first: list[PutMessageResult] = []
        putter = threading.Thread(target=lambda: first.append(store.put_message(Message("HereTopic", 0, b"1"))))
        putter.start()
        try:
            assert disk.entered.wait(30)  # the service's flush of the first put is in fdatasync
            store.put_message(Message("HereTopic", 0, b"2", properties={"WAIT": "false"}))
            future = store.request_flush(store.max_offset, flush_here=True)
            assert future is not None and not future.done()  # did not block behind the stalled flush
        finally:
            disk.release.set()
        putter.join(30)
        assert future.result(30) is OK and first[0].status is OK
        assert threading.current_thread().name not in disk.threads
        monkeypatch.undo()


def test_request_flush_is_none_under_async_flush(tmp_path):
    with MessageStore(config(tmp_path, flush_disk_type="ASYNC_FLUSH")) as store:
        store.put_message(Message("HereTopic", 0, b"x"))
        assert store.request_flush(store.max_offset, flush_here=True) is None


@pytest.mark.parametrize("flush", ["SYNC_FLUSH", "ASYNC_FLUSH"])
def test_every_put_is_dispatched_without_the_dispatchers_idle_timeout(tmp_path, monkeypatch, flush):
    """Under SYNC_FLUSH a put wakes the dispatcher once its result is known, under ASYNC_FLUSH as it
    appends: with an idle timeout far beyond the test's deadline, each message arrives at once."""
    from store.queue.dispatch import ReputMessageService

    monkeypatch.setattr(ReputMessageService.__init__, "__defaults__", (0.001, 60.0))
    with MessageStore(config(tmp_path, flush_disk_type=flush)) as store:
        arrived = threading.Semaphore(0)
        store.add_arrival_listener(lambda request: arrived.release())
        for i, wait in enumerate(("true", "false", "true")):
            store.put_message(Message("WakeTopic", 0, b"m%d" % i, properties={"WAIT": wait}))
            assert arrived.acquire(timeout=10), f"message {i} (WAIT={wait}) was not dispatched"


class _HeldGate:
    """A replica gate whose slaves acknowledge when the test says so."""

    def __init__(self) -> None:
        self.outcome: StatusFuture = StatusFuture()
        self.asked = threading.Event()

    def request(self, next_offset: int, now_ms: int) -> StatusFuture:
        self.asked.set()
        return self.outcome


def _counted_wakeups(monkeypatch, service_class, note=lambda: 1) -> list:
    """Every `wakeup` of `service_class` from now on appends `note()` to the list returned (and
    still wakes the service); a `ReputMessageService`'s idle look is put beyond the tests'
    deadlines, so only a wake-up makes it dispatch."""
    from store.queue.dispatch import ReputMessageService

    if service_class is ReputMessageService:
        monkeypatch.setattr(ReputMessageService.__init__, "__defaults__", (0.001, 60.0))
    wakes: list = []
    real_wakeup = service_class.wakeup

    def wakeup(service) -> None:
        wakes.append(note())
        real_wakeup(service)

    monkeypatch.setattr(service_class, "wakeup", wakeup)
    return wakes


@contextlib.contextmanager
def _put_waiting_for_its_slave(tmp_path, topic: str, mode: str, gate: _HeldGate, prepare=lambda store: None):
    """A SYNC_MASTER + SYNC_FLUSH store whose slave acknowledges when `gate` says so, `prepare`d
    (listeners, a dispatch limit), with one put to `topic` under way (`mode` "sync" or "async")
    that has asked the gate: yields (store, the putting thread, its results)."""
    cfg = config(tmp_path, broker_role="SYNC_MASTER", flush_disk_type="SYNC_FLUSH")
    with MessageStore(cfg) as store:
        prepare(store)
        store.set_replica_gate(gate)
        results: list[PutMessageResult] = []
        putter = _start_put(store, Message(topic, 0, b"x"), mode, results)
        assert gate.asked.wait(10)
        yield store, putter, results


def _start_put(store: MessageStore, message: Message, mode: str, results: list[PutMessageResult]) -> threading.Thread:
    """A thread putting `message` with the store's sync call or, `mode` "async", its asyncio one."""

    def put() -> None:
        if mode == "sync":
            results.append(store.put_message(message))
        else:
            results.append(asyncio.run(store.async_put_message(message)))

    putter = threading.Thread(target=put)
    putter.start()
    return putter


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_sync_flush_put_is_dispatched_after_its_answer_not_during_its_waits(tmp_path, monkeypatch, mode):
    """The dispatcher's work (ConsumeQueue, index) is kept off a waiting put's critical path: nothing
    dispatches while the put waits for its flush and its slave; its result does, at once (the
    dispatcher's idle look is far beyond the test's deadline). A put from a plain thread wakes the
    dispatcher's thread; an asyncio put has the round run on its own loop, waking nobody."""
    from store.queue.dispatch import ReputMessageService

    gate = _HeldGate()
    # For each wake-up of the dispatcher: had the slave acknowledged yet?
    wakes = _counted_wakeups(monkeypatch, ReputMessageService, gate.outcome.done)
    arrived: list[str] = []
    arrival = threading.Event()

    def listen(store: MessageStore) -> None:
        def note(request) -> None:
            arrived.append(threading.current_thread().name)
            arrival.set()

        store.add_arrival_listener(note)

    with _put_waiting_for_its_slave(tmp_path, "AfterTopic", mode, gate, listen) as (store, putter, results):
        assert store.wait_flushed(store.max_offset, 10)  # flushed, still waiting for its slave
        assert store.dispatched_offset == 0 and wakes == [] and arrived == []
        gate.outcome.set_result(OK)
        putter.join(10)
        assert [r.status for r in results] == [OK]
        assert arrival.wait(10), "the answered put was not dispatched"
        if mode == "sync":
            assert wakes and all(wakes), "the dispatcher was woken while the put waited"
            assert arrived == [ReputMessageService.name]
        else:
            assert wakes == [], "an asyncio put's answer woke the dispatcher's thread"
            assert arrived == [putter.name], "not dispatched on the put's own loop"


def test_the_answers_of_one_loop_turn_share_one_dispatch_round(tmp_path, monkeypatch):
    """Every asyncio put answered in one turn of a loop asks for its record's dispatch; the loop
    runs one round for all of them, after the turn, on its own thread."""
    from store.queue.dispatch import ReputMessageService

    # The dispatcher's thread neither looks on its own nor wakes within the test: only rounds
    # run elsewhere dispatch (`stop` still wakes it).
    monkeypatch.setattr(ReputMessageService.__init__, "__defaults__", (60.0, 60.0))
    monkeypatch.setattr(ReputMessageService, "wakeup", lambda service: None)
    rounds: list[str] = []
    real_dispatch_here = ReputMessageService.dispatch_here

    def dispatch_here(service) -> None:
        rounds.append(threading.current_thread().name)
        real_dispatch_here(service)

    monkeypatch.setattr(ReputMessageService, "dispatch_here", dispatch_here)
    with MessageStore(config(tmp_path, flush_disk_type="SYNC_FLUSH")) as store:
        for body in (b"a", b"b", b"c"):  # from this thread: their answers only wake (nobody)
            assert store.put_message(Message("TurnTopic", 0, body)).status is OK
        assert store.dispatched_offset == 0 and rounds == []

        async def one_turn() -> None:
            loop = asyncio.get_running_loop()
            for _ in range(3):  # three answers in one turn
                store._dispatch_after_answer()
            assert rounds == [], "a round ran inside the turn that asked for it"
            # Callbacks run in the order they were queued: one queued after the answers marks
            # the turn's end, and the round queued by them has run by then.
            turn_over = loop.create_future()
            loop.call_soon(turn_over.set_result, None)
            await turn_over
            assert rounds == [threading.current_thread().name]

        asyncio.run(one_turn())
        assert store.dispatched_offset == store.max_offset and len(rounds) == 1


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_replication_stream_with_nothing_to_send_dispatches_and_the_answer_then_wakes_nobody(
    tmp_path, monkeypatch, mode
):
    """While a put waits for its slave, the stream that sent its bytes and has nothing else to send
    dispatches them (`dispatch_while_waiting`, on the stream's thread); the put's answer then finds
    nothing left to dispatch and does not wake the dispatcher's thread."""
    from store.queue.dispatch import ReputMessageService

    wakes = _counted_wakeups(monkeypatch, ReputMessageService)
    gate = _HeldGate()
    arrived: list[str] = []

    def listen(store: MessageStore) -> None:
        store.add_arrival_listener(lambda request: arrived.append(threading.current_thread().name))

    with _put_waiting_for_its_slave(tmp_path, "WhileWaitingTopic", mode, gate, listen) as (store, putter, results):
        store.flush_after_send()
        store.dispatch_while_waiting()
        assert store.dispatched_offset == store.max_offset and results == []
        assert arrived == [threading.current_thread().name], "not dispatched on the calling thread"
        gate.outcome.set_result(OK)
        putter.join(10)
        assert [r.status for r in results] == [OK]
        assert wakes == [], "the answer woke the dispatcher though its record was dispatched"


def test_a_dispatch_limit_keeps_a_waiting_puts_record_from_the_streams_dispatch(tmp_path, monkeypatch):
    """Where the dispatch limit holds records back (controller mode: the confirmed offset), a stream
    with nothing to send dispatches nothing and wakes nobody; the answer wakes the dispatcher."""
    from store.queue.dispatch import ReputMessageService

    wakes = _counted_wakeups(monkeypatch, ReputMessageService)
    gate = _HeldGate()
    confirmed = [0]
    arrived = threading.Semaphore(0)

    def prepare(store: MessageStore) -> None:
        store.set_dispatch_limit(lambda: confirmed[0])
        store.add_arrival_listener(lambda request: arrived.release())

    with _put_waiting_for_its_slave(tmp_path, "HeldBackTopic", "sync", gate, prepare) as (store, putter, results):
        store.flush_after_send()
        store.dispatch_while_waiting()
        assert store.dispatched_offset == 0 and wakes == []
        confirmed[0] = store.max_offset
        gate.outcome.set_result(OK)
        putter.join(10)
        assert [r.status for r in results] == [OK]
        assert wakes, "the answer did not wake the dispatcher"
        assert arrived.acquire(timeout=10), "the confirmed record was not dispatched"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_put_waiting_for_its_slave_leaves_its_flush_to_the_replication_stream(tmp_path, monkeypatch, mode):
    """A SYNC_FLUSH put that waits for a slave does not wake the flush thread: the stream that sends
    its bytes flushes them once its chunk is out (`flush_after_send`). Its answer still waits for
    that flush, even after the slave acknowledged (the flush thread's idle round is set beyond the
    test's deadline here, so only the stream's flush can release it)."""
    from store.log import flush as flush_module
    from store.log.flush import GroupCommitService

    monkeypatch.setattr(flush_module, "_IDLE_S", 60.0)
    wakes = _counted_wakeups(monkeypatch, GroupCommitService)
    gate = _HeldGate()
    with _put_waiting_for_its_slave(tmp_path, "StreamFlushTopic", mode, gate) as (store, putter, results):
        gate.outcome.set_result(OK)  # the slave acknowledged; the master's own flush is still due
        putter.join(0.2)
        assert putter.is_alive() and results == [], "answered before its flush"
        assert store.flushed_offset < store.max_offset and wakes == []
        store.flush_after_send()
        putter.join(10)
        assert [r.status for r in results] == [OK]
        assert store.flushed_offset == store.max_offset
