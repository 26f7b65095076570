"""Reads through the MessageStore API, in the spirit of RocketMQ's DefaultMessageStoreTest,
ConsumeQueueTest and IndexFileTest: reads by queue offset (every GetMessageStatus a store can
reach, with RocketMQ's next-begin-offset corrections), tag filtering, reads by key and by msgId,
reads by time, transactions, arrival listeners, topics, consumer offsets and statistics.

Everything goes through `MessageStore`. Internals are only read (segment, ConsumeQueue and
IndexFile counts, to show a test spans several files), except in the retention-window test, which
drives a CleanService of its own over the store's segments; its comment says why.
"""

from __future__ import annotations

import json
import random
import threading
import time
from pathlib import Path

import pytest

from store import CorruptMessage, Message, MessageStore, PutMessageStatus, StoreConfig, make_msg_id
from store.log.codec import java_string_hash
from store.message import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
)
from store.metadata.topic_config import Permission, TopicConfig
from store.queue.message_filter import TagFilter
from store.queue.reads import assigned_not_dispatched
from store.retention import CleanPolicy, CleanService
from store.status import GetMessageStatus
from support import run_threads

OK = PutMessageStatus.PUT_OK
ILLEGAL = PutMessageStatus.MESSAGE_ILLEGAL
FOUND = GetMessageStatus.FOUND
NO_MATCHED = GetMessageStatus.NO_MATCHED_MESSAGE
REMOVING = GetMessageStatus.MESSAGE_WAS_REMOVING
OVERFLOW_BADLY = GetMessageStatus.OFFSET_OVERFLOW_BADLY
OVERFLOW_ONE = GetMessageStatus.OFFSET_OVERFLOW_ONE
TOO_SMALL = GetMessageStatus.OFFSET_TOO_SMALL
NO_QUEUE = GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
EMPTY_QUEUE = GetMessageStatus.NO_MESSAGE_IN_QUEUE

NOW_MS = 1_700_000_000_000
GROUP = "ReadGroup"
STORE_HOST = ("127.0.0.1", 10911)  # StoreConfig's default brokerIP1 and listenPort
HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS


class FakeClock:
    """A clock the test sets. The store reads the clock several times per put (put path, CommitLog
    lock, stats), so a test that wants one store timestamp per message sets it before each put
    rather than advancing on every read."""

    def __init__(self, now_ms: int) -> None:
        self.now = now_ms

    def __call__(self) -> int:
        return self.now


def config(tmp_path: Path, name: str = "store", **kw) -> StoreConfig:
    kw.setdefault("mapped_file_size_commit_log", 64 * 1024)
    kw.setdefault("mapped_file_size_consume_queue", 1024 * 20)
    kw.setdefault("max_hash_slot_num", 512)
    kw.setdefault("max_index_num", 2048)
    # The store's own cleaner thread only runs a round when a test asks for one
    # (request_delete_files_now wakes it): a fake clock may well fall on the deleteWhen hour.
    kw.setdefault("clean_resource_interval_ms", HOUR_MS)
    return StoreConfig(store_path_root_dir=str(tmp_path / name), **kw)


def wait_dispatched(store: MessageStore) -> None:
    """Reads by queue see a message once the dispatcher thread has passed it."""
    assert store.wait_dispatched(10), "the dispatcher did not reach the CommitLog end"


def put_ok(store: MessageStore, msg: Message):
    result = store.put_message(msg)
    assert result.status is OK, result.reason
    return result


def read_queue(
    store: MessageStore, topic: str, queue_id: int, *, start: int = 0, max_msg_nums: int = 32, tag_filter=None
):
    """Page through a queue with next_begin_offset up to its end, as a consumer does; returns
    every message handed out. Each step must move forward."""
    got = []
    offset = start
    while True:
        r = store.get_message(GROUP, topic, queue_id, offset, max_msg_nums, tag_filter=tag_filter)
        if r.status is OVERFLOW_ONE:
            assert r.next_begin_offset == offset
            return got
        assert r.status in (FOUND, NO_MATCHED), r
        assert r.next_begin_offset > offset
        got.extend(r.messages)
        offset = r.next_begin_offset


def assert_same_message(got, msg: Message, put) -> None:
    assert (got.topic, got.queue_id, got.body) == (msg.topic, msg.queue_id, msg.body)
    assert dict(got.properties) == dict(msg.properties)
    assert (got.physical_offset, got.queue_offset, got.store_size) == (
        put.wrote_offset,
        put.queue_offset,
        put.wrote_bytes,
    )
    assert got.msg_id == put.msg_id


# -- 1. write and read back across topics and queues ---------------------------------------------------


def test_many_topics_and_queues_read_back_exactly(tmp_path):
    topics = [f"ReadTopic{t}" for t in range(5)]
    queues = 4
    per_queue = 24
    expected: dict[tuple[str, int], list] = {}
    lock = threading.Lock()

    with MessageStore(config(tmp_path)) as store:

        def producer(topic: str, seed: int):
            # One thread per topic: the order within each queue is this thread's order.
            rng = random.Random(seed)
            slots = [q for q in range(queues) for _ in range(per_queue)]
            rng.shuffle(slots)
            for n, q in enumerate(slots):
                props = {"UNIQ_KEY": f"{topic}-{n}", "seq": str(n)}
                tags = rng.choice(["TagA", "TagB", "TagC", None])
                if tags:
                    props["TAGS"] = tags
                keys = " ".join(f"key{rng.randrange(1000)}" for _ in range(rng.randint(0, 3)))
                if keys:
                    props["KEYS"] = keys
                msg = Message(topic, q, rng.randbytes(rng.randint(0, 1500)), properties=props)
                result = put_ok(store, msg)
                with lock:
                    expected.setdefault((topic, q), []).append((msg, result))

        run_threads([lambda t=t, i=i: producer(t, 1000 + i) for i, t in enumerate(topics)])
        wait_dispatched(store)
        # Enough data to cross several 64 KiB segments (blank records at their ends).
        assert len(store.queue.files) >= 5

        rng = random.Random(7)
        for (topic, q), puts in sorted(expected.items()):
            assert [r.queue_offset for _, r in puts] == list(range(per_queue)), "queue offsets are dense from 0"
            assert store.max_queue_offset(topic, q) == per_queue
            assert store.dispatched_queue_offset(topic, q) == per_queue
            assert store.min_queue_offset(topic, q) == 0
            offset = 0
            got = []
            while offset < per_queue:
                wanted = rng.randint(1, 8)
                r = store.get_message(GROUP, topic, q, offset, wanted)
                assert r.status is FOUND
                assert (r.min_offset, r.max_offset) == (0, per_queue)
                assert 1 <= len(r.messages) <= wanted
                assert [m.queue_offset for m in r.messages] == list(range(offset, offset + len(r.messages)))
                assert r.next_begin_offset == offset + len(r.messages)
                assert r.buffer_total_size == sum(m.store_size for m in r.messages)
                got.extend(r.messages)
                offset = r.next_begin_offset
            for m, (msg, put) in zip(got, puts, strict=True):
                assert_same_message(m, msg, put)
                assert m.store_host == STORE_HOST
            end = store.get_message(GROUP, topic, q, per_queue)
            assert (end.status, end.next_begin_offset, end.messages) == (OVERFLOW_ONE, per_queue, ())

        # Physical offsets of all puts tile the CommitLog (apart from segment-end blanks).
        all_puts = sorted((r for puts in expected.values() for _, r in puts), key=lambda r: r.wrote_offset)
        assert [m.physical_offset for m in store.iter_messages()] == [r.wrote_offset for r in all_puts]


def test_consumers_read_while_producers_put_across_consume_queue_files(tmp_path):
    # 100 units per ConsumeQueue file: a read stops at a file's end (RocketMQ's getIndexBuffer),
    # so pages come short at each boundary and the next page starts in the next file.
    cfg = config(tmp_path, mapped_file_size_consume_queue=100 * 20)
    per_queue = 250
    with MessageStore(cfg) as store:
        expected: dict[int, list] = {0: [], 1: []}
        got: dict[int, list] = {0: [], 1: []}
        short_pages: dict[int, int] = {0: 0, 1: 0}

        def producer(queue_id):
            for i in range(per_queue):
                expected[queue_id].append(put_ok(store, Message("LiveTopic", queue_id, f"{queue_id}:{i}".encode())))

        def consumer(queue_id):
            # Reads race the dispatcher: the end of the queue moves under the consumer, who waits
            # there and retries, as a long-polling pull does: OFFSET_OVERFLOW_ONE, or before the
            # first unit NO_MATCHED_LOGIC_QUEUE, then NO_MESSAGE_IN_QUEUE (the dispatcher registers
            # the queue just before writing its first unit).
            offset = 0
            deadline = time.monotonic() + 20
            while offset < per_queue:
                assert time.monotonic() < deadline, f"consumer {queue_id} stuck at {offset}"
                r = store.get_message(GROUP, "LiveTopic", queue_id, offset, 32)
                if r.status in (OVERFLOW_ONE, NO_QUEUE, EMPTY_QUEUE):
                    store.wait_dispatched(1)
                    continue
                assert r.status is FOUND, r
                assert [m.queue_offset for m in r.messages] == list(range(offset, offset + len(r.messages)))
                if len(r.messages) < 32 and r.next_begin_offset % 100 == 0 and r.next_begin_offset < r.max_offset:
                    short_pages[queue_id] += 1
                got[queue_id].extend(r.messages)
                offset = r.next_begin_offset

        run_threads([lambda: producer(0), lambda: producer(1), lambda: consumer(0), lambda: consumer(1)])
        for q in (0, 1):
            assert [m.physical_offset for m in got[q]] == [r.wrote_offset for r in expected[q]]
            assert [m.body for m in got[q]] == [f"{q}:{i}".encode() for i in range(per_queue)]
            assert len(store.find_consume_queue("LiveTopic", q).file_names) == 3
        # Once everything is in, paging by 32 meets the file ends at 100 and 200 with short pages.
        r = store.get_message(GROUP, "LiveTopic", 0, 96, 32)
        assert ([m.queue_offset for m in r.messages], r.next_begin_offset) == ([96, 97, 98, 99], 100)
        r = store.get_message(GROUP, "LiveTopic", 0, 100, 32)
        assert (r.messages[0].queue_offset, r.next_begin_offset) == (100, 132)
        # Reads by time search across the files too.
        for q in (0, 1):
            for i in (0, 99, 100, 150, 249):
                ts = expected[q][i].store_timestamp_ms
                at = store.get_offset_in_queue_by_time("LiveTopic", q, ts)
                assert at <= i and expected[q][at].store_timestamp_ms == ts


def test_batch_reads_back_as_single_messages(tmp_path):
    with MessageStore(config(tmp_path)) as store:
        first = put_ok(store, Message("BatchRead", 0, b"single"))
        batch = [
            Message(
                "BatchRead", 0, f"b{i}".encode(), properties={"TAGS": "TagA" if i % 2 else "TagB", "KEYS": f"bk{i}"}
            )
            for i in range(6)
        ]
        r = store.put_messages(batch)
        assert (r.status, r.queue_offset, r.msg_num) == (OK, 1, 6)
        wait_dispatched(store)
        got = read_queue(store, "BatchRead", 0, max_msg_nums=4)
        assert [m.queue_offset for m in got] == list(range(7))
        assert got[0].physical_offset == first.wrote_offset
        # Each message of the batch has its own unit, msgId and tags.
        assert [m.msg_id for m in got[1:]] == list(r.msg_ids)
        assert [m.body for m in got[1:]] == [m.body for m in batch]
        assert sum(m.store_size for m in got[1:]) == r.wrote_bytes
        tag_a = read_queue(store, "BatchRead", 0, tag_filter="TagA")
        assert [m.body for m in tag_a] == [b"b1", b"b3", b"b5"]


def test_reads_survive_a_clean_restart(tmp_path):
    cfg = config(tmp_path)
    with MessageStore(cfg) as store:
        puts = [
            put_ok(store, Message("RestartTopic", i % 2, f"m{i}".encode(), properties={"TAGS": "T"})) for i in range(30)
        ]
    with MessageStore(cfg) as store:
        wait_dispatched(store)
        for q in (0, 1):
            got = read_queue(store, "RestartTopic", q, max_msg_nums=7)
            assert [m.physical_offset for m in got] == [r.wrote_offset for r in puts[q::2]]
            assert [m.queue_offset for m in got] == list(range(15))
        # New puts continue the queue offsets recovered from the ConsumeQueues.
        assert put_ok(store, Message("RestartTopic", 0, b"next")).queue_offset == 15


# -- 2. every GetMessageStatus the API reaches -----------------------------------------------------------


def test_statuses_and_next_begin_offset_corrections(tmp_path):
    with MessageStore(config(tmp_path)) as store:
        unknown = store.get_message(GROUP, "NoSuchTopic", 0, 0)
        assert (unknown.status, unknown.next_begin_offset, unknown.min_offset, unknown.max_offset) == (
            NO_QUEUE,
            0,
            0,
            0,
        )
        assert not unknown.found and unknown.messages == ()

        for i in range(10):
            put_ok(store, Message("StatusTopic", 1, f"body-{i}".encode(), properties={"TAGS": "TagA"}))
        wait_dispatched(store)

        # A queue id the topic never wrote to has no ConsumeQueue either.
        assert store.get_message(GROUP, "StatusTopic", 0, 0).status is NO_QUEUE

        found = store.get_message(GROUP, "StatusTopic", 1, 3, 4)
        assert (found.status, found.next_begin_offset, found.min_offset, found.max_offset) == (FOUND, 7, 0, 10)
        assert [m.body for m in found.messages] == [b"body-3", b"body-4", b"body-5", b"body-6"]

        # At the end: wait there (long polling) - next begin is the same offset.
        one = store.get_message(GROUP, "StatusTopic", 1, 10)
        assert (one.status, one.next_begin_offset, one.min_offset, one.max_offset) == (OVERFLOW_ONE, 10, 0, 10)

        # Past the end: RocketMQ restarts a consumer at minOffset when it is 0, else at maxOffset
        # (the min > 0 branch is checked in the retention test).
        for offset in (11, 10_000):
            badly = store.get_message(GROUP, "StatusTopic", 1, offset)
            assert (badly.status, badly.next_begin_offset, badly.max_offset) == (OVERFLOW_BADLY, 0, 10)

        # Below the min: restart at the min (0 here; the retention test has min > 0).
        small = store.get_message(GROUP, "StatusTopic", 1, -1)
        assert (small.status, small.next_begin_offset, small.min_offset) == (TOO_SMALL, 0, 0)

        # A tag nothing in range carries: every unit up to the end is scanned and skipped.
        for start in (0, 6):
            none = store.get_message(GROUP, "StatusTopic", 1, start, 4, tag_filter="TagX")
            assert (none.status, none.next_begin_offset, none.messages, none.buffer_total_size) == (
                NO_MATCHED,
                10,
                (),
                0,
            )

        for bad in ({"max_msg_nums": 0}, {"max_msg_nums": -1}, {"max_total_bytes": 0}):
            with pytest.raises(ValueError):
                store.get_message(GROUP, "StatusTopic", 1, 0, **{"max_msg_nums": 4, "max_total_bytes": 1024, **bad})


def test_no_message_in_queue_for_a_queue_that_exists_empty(tmp_path):
    cfg = config(tmp_path)
    # A ConsumeQueue directory without files: what a queue looks like on disk before its first
    # unit (the store loads every queue directory it finds). Nothing in the API creates a queue
    # without a unit - ConsumeQueueTable.get_or_create runs on dispatch only - so this is the
    # state as a store finds it at load.
    (cfg.root / "consumequeue" / "EmptyTopic" / "0").mkdir(parents=True)
    with MessageStore(cfg) as store:
        for offset in (0, 5):
            r = store.get_message(GROUP, "EmptyTopic", 0, offset)
            # RocketMQ: nextOffsetCorrection(offset, 0).
            assert (r.status, r.next_begin_offset, r.min_offset, r.max_offset) == (EMPTY_QUEUE, 0, 0, 0)
        put = put_ok(store, Message("EmptyTopic", 0, b"first"))
        wait_dispatched(store)
        r = store.get_message(GROUP, "EmptyTopic", 0, 0)
        assert (r.status, [m.physical_offset for m in r.messages]) == (FOUND, [put.wrote_offset])


def test_retention_message_was_removing_then_offset_too_small(tmp_path):
    """Old CommitLog segments go; queues pointing into them answer MESSAGE_WAS_REMOVING until the
    ConsumeQueues learn the new CommitLog min, then OFFSET_TOO_SMALL from their corrected min."""
    clock = FakeClock(NOW_MS)
    topic = "RetentionTopic"
    # SYNC_FLUSH: every put is flushed before it returns, so every full segment is deletable.
    cfg = config(tmp_path, flush_disk_type="SYNC_FLUSH")
    with MessageStore(cfg, clock_ms=clock) as store:
        early = [put_ok(store, Message(topic, 2, b"gone" * 10)) for _ in range(3)]  # queue 2: all expire
        puts = [
            put_ok(store, Message(topic, 0, bytes([i % 251]) * 300, properties={"TAGS": "TagA", "KEYS": f"r{i}"}))
            for i in range(400)
        ]
        late = [put_ok(store, Message(topic, 1, b"late")) for _ in range(5)]  # queue 1: in the last segment
        wait_dispatched(store)
        assert len(store.queue.files) >= 3
        for queue_id, offset in ((0, 5), (1, 2), (2, 1)):
            store.consumer_offsets.commit_offset(GROUP, topic, queue_id, offset)

        # Step 1, the window. RocketMQ deletes CommitLog files (CleanCommitLogService) and only
        # afterwards corrects the ConsumeQueues (CleanConsumeQueueService); a read in between sees
        # units whose message is gone. The store's own cleaner does both in one round, so the
        # window is reproduced with a CleanService over the same segments that does not tell the
        # queues (as tests/unit/test_clean.py does), under the CommitLog lock puts take.
        window = CleanService(
            store.queue,
            CleanPolicy(file_reserved_ms=0, delete_interval_ms=0, delete_file_batch_max=1),
            clock_ms=clock,
            disk_usage_ratio=lambda: 0.5,
            mtime_of=lambda segment: 0,
            files_lock=store.commit_log.lock,
            deletable_below=lambda: min(store.flushed_offset, store.dispatched_offset),
        )
        window.request_delete_now()
        assert len(window.run_round(clock()).deleted) == 1
        commit_log_min = store.min_offset
        assert commit_log_min > 0
        first_live = next(r.queue_offset for r in puts if r.wrote_offset >= commit_log_min)
        assert first_live >= 128, "the test wants two whole read windows of removed units"
        assert store.min_queue_offset(topic, 0) == 0  # not corrected yet
        with pytest.raises(CorruptMessage):
            store.read_message(puts[0].wrote_offset)
        with pytest.raises(CorruptMessage):
            store.view_message_by_id(puts[0].msg_id)
        # The index still names the deleted message; the query skips what is gone.
        assert store.query_message(topic, "r0").messages == ()
        assert [m.physical_offset for m in store.query_message(topic, "r399").messages] == [puts[399].wrote_offset]

        offset, removing = 0, 0
        while True:
            r = store.get_message(GROUP, topic, 0, offset, 4)
            assert (r.min_offset, r.max_offset) == (0, 400)
            if r.status is not REMOVING:
                break
            removing += 1
            # Skip what is gone: next begin moves past the scanned units, never past a live one.
            assert r.messages == () and offset < r.next_begin_offset <= first_live
            offset = r.next_begin_offset
        assert removing >= 2
        assert r.status is FOUND
        assert [m.queue_offset for m in r.messages] == list(range(first_live, first_live + 4))
        assert r.messages[0].physical_offset == puts[first_live].wrote_offset
        assert r.next_begin_offset == first_live + 4

        # Step 2: the store's own retention, 100 days later (fileReservedTime is 72 h by default;
        # the segments' mtimes are the real time of this test), asked for through the API as an
        # operator does (RocketMQ's executeDeleteFilesManually). It deletes the remaining expired
        # segments but the last and corrects the queues.
        clock.now = int(time.time() * 1000) + 100 * DAY_MS
        store.request_delete_files_now()
        assert store.wait_cleaned(
            lambda: len(store.queue.files) == 1 and store.min_queue_offset(topic, 0) > first_live
        ), "retention did not delete the expired segments"
        commit_log_min = store.min_offset
        cq_min = next(r.queue_offset for r in puts if r.wrote_offset >= commit_log_min)
        assert store.min_queue_offset(topic, 0) == cq_min

        small = store.get_message(GROUP, topic, 0, 0)
        assert (small.status, small.next_begin_offset, small.min_offset, small.max_offset) == (
            TOO_SMALL,
            cq_min,
            cq_min,
            400,
        )
        r = store.get_message(GROUP, topic, 0, cq_min, 2)
        assert r.status is FOUND and r.messages[0].physical_offset == puts[cq_min].wrote_offset
        # With min > 0, a consumer past the end restarts at the max (RocketMQ's rule).
        badly = store.get_message(GROUP, topic, 0, 450)
        assert (badly.status, badly.next_begin_offset) == (OVERFLOW_BADLY, 400)

        # A queue whose every message expired: min == max.
        gone = store.get_message(GROUP, topic, 2, 0)
        assert (gone.status, gone.next_begin_offset, gone.min_offset, gone.max_offset) == (TOO_SMALL, 3, 3, 3)
        assert store.get_message(GROUP, topic, 2, 3).status is OVERFLOW_ONE
        assert store.get_offset_in_queue_by_time(topic, 2, 0) == 3
        assert early[0].wrote_offset < commit_log_min

        # The live queue is untouched.
        assert [m.physical_offset for m in read_queue(store, topic, 1)] == [r.wrote_offset for r in late]

        # Committed offsets below a queue's new min follow it up (RocketMQ's correction).
        assert store.consumer_offsets.query_offset(GROUP, topic, 0) == cq_min
        assert store.consumer_offsets.query_offset(GROUP, topic, 1) == 2
        assert store.consumer_offsets.query_offset(GROUP, topic, 2) == 3

        # Reads by time skip what is gone.
        assert store.get_offset_in_queue_by_time(topic, 0, 0) == cq_min
        # Puts go on with the next queue offset.
        assert put_ok(store, Message(topic, 0, b"after")).queue_offset == 400

    # A restart finds the same mins (recovery corrects the queues against the CommitLog's start).
    with MessageStore(cfg, clock_ms=clock) as store:
        wait_dispatched(store)
        small = store.get_message(GROUP, topic, 0, 0)
        assert (small.status, small.next_begin_offset, small.max_offset) == (TOO_SMALL, cq_min, 401)
        assert store.get_message(GROUP, topic, 2, 0).status is TOO_SMALL
        assert [m.queue_offset for m in read_queue(store, topic, 0, start=cq_min)] == list(range(cq_min, 401))
        assert store.consumer_offsets.query_offset(GROUP, topic, 0) == cq_min


# -- 3. tag filtering and limits -----------------------------------------------------------------------


def test_tag_filter_parse():
    assert TagFilter.parse(None) is None
    assert TagFilter.parse("") is None
    assert TagFilter.parse("  ") is None
    assert TagFilter.parse("*") is None
    assert TagFilter.parse("TagA || *") is None  # anything OR everything is everything
    f = TagFilter.parse(" TagA ||TagB|| TagA ")
    assert f.tags == frozenset({"TagA", "TagB"})
    assert f.codes == frozenset({java_string_hash("TagA"), java_string_hash("TagB")})
    assert f.matches_code(java_string_hash("TagB")) and not f.matches_code(java_string_hash("TagC"))
    assert f.matches_tags("TagA") and not f.matches_tags("TagC") and not f.matches_tags(None)
    with pytest.raises(ValueError):
        TagFilter.parse("||")


def test_tag_filtering_by_hash_code_then_exact_tag(tmp_path):
    # "Aa" and "BB" share a Java hashCode: the ConsumeQueue cannot tell them apart, the exact
    # check on the message's TAGS must.
    assert java_string_hash("Aa") == java_string_hash("BB")
    cycle = ["TagA", "TagB", "TagC", None, "BB"]
    with MessageStore(config(tmp_path)) as store:
        puts = []
        for i in range(40):
            tags = cycle[i % len(cycle)]
            props = {"TAGS": tags} if tags else {}
            puts.append((tags, put_ok(store, Message("TagTopic", 0, b"x" * (50 + i), properties=props))))
        wait_dispatched(store)

        def offsets_of(wanted):
            return [r.queue_offset for t, r in puts if t in wanted]

        for expression in ("TagA || TagB", "TagB||TagA", TagFilter.parse("TagA || TagB")):
            got = read_queue(store, "TagTopic", 0, max_msg_nums=3, tag_filter=expression)
            assert [m.queue_offset for m in got] == offsets_of({"TagA", "TagB"})
            assert all(m.tags in ("TagA", "TagB") for m in got)
        for everything in ("*", None, "", TagFilter.parse("*")):
            assert [m.queue_offset for m in read_queue(store, "TagTopic", 0, tag_filter=everything)] == list(range(40))
        assert [m.queue_offset for m in read_queue(store, "TagTopic", 0, tag_filter="BB")] == offsets_of({"BB"})

        # Hash match, tag mismatch: every "BB" unit passes the hash check and fails the exact one.
        aa = store.get_message(GROUP, "TagTopic", 0, 0, 32, tag_filter="Aa")
        assert (aa.status, aa.next_begin_offset, aa.messages) == (NO_MATCHED, 40, ())
        assert read_queue(store, "TagTopic", 0, tag_filter="Aa || TagX") == []

        # max_msg_nums counts matching messages only; next begin is just past the last one handed out.
        r = store.get_message(GROUP, "TagTopic", 0, 0, 3, tag_filter="TagC")
        assert [m.queue_offset for m in r.messages] == [2, 7, 12]
        assert (r.status, r.next_begin_offset) == (FOUND, 13)
        r = store.get_message(GROUP, "TagTopic", 0, r.next_begin_offset, 100, tag_filter="TagC")
        assert [m.queue_offset for m in r.messages] == [17, 22, 27, 32, 37]
        assert r.next_begin_offset == 40


def test_max_msg_nums_and_max_total_bytes(tmp_path):
    with MessageStore(config(tmp_path)) as store:
        puts = [put_ok(store, Message("LimitTopic", 0, b"y" * (100 * (i + 1)))) for i in range(10)]
        wait_dispatched(store)
        sizes = [r.wrote_bytes for r in puts]
        assert len(set(sizes)) == 10

        r = store.get_message(GROUP, "LimitTopic", 0, 0, 3)
        assert ([m.queue_offset for m in r.messages], r.next_begin_offset) == ([0, 1, 2], 3)
        assert r.buffer_total_size == sum(sizes[:3])

        # The byte limit stops before the message that would pass it...
        r = store.get_message(GROUP, "LimitTopic", 0, 0, 32, sizes[0] + sizes[1])
        assert ([m.queue_offset for m in r.messages], r.next_begin_offset) == ([0, 1], 2)
        assert r.buffer_total_size == sizes[0] + sizes[1]
        r = store.get_message(GROUP, "LimitTopic", 0, 0, 32, sum(sizes[:3]) - 1)
        assert [m.queue_offset for m in r.messages] == [0, 1]
        # ...but the first message always goes, however big (RocketMQ's isTheBatchFull).
        r = store.get_message(GROUP, "LimitTopic", 0, 5, 32, 1)
        assert (r.status, [m.queue_offset for m in r.messages], r.next_begin_offset) == (FOUND, [5], 6)
        assert r.buffer_total_size == sizes[5]
        # Both limits: whichever comes first.
        r = store.get_message(GROUP, "LimitTopic", 0, 2, 2, 10**6)
        assert [m.queue_offset for m in r.messages] == [2, 3]

        # Paging with a byte limit still hands out every message once, in order.
        offset, seen = 0, []
        while offset < 10:
            r = store.get_message(GROUP, "LimitTopic", 0, offset, 32, 1500)
            assert r.status is FOUND and (len(r.messages) == 1 or r.buffer_total_size <= 1500)
            seen += [m.queue_offset for m in r.messages]
            offset = r.next_begin_offset
        assert seen == list(range(10))


# -- 4. index: by key, by unique key, by msgId -----------------------------------------------------------


def _index_store_config(tmp_path):
    # Four hash slots and 15 entries a file: every chain mixes keys and the index spans many files.
    return config(tmp_path, max_hash_slot_num=4, max_index_num=16)


def _put_indexed(store: MessageStore, clock: FakeClock, count: int = 40):
    """Message i of IdxTopic: UNIQ_KEY UNIQ<i>, KEYS "order<i % 5> common", stored at
    NOW_MS + 10 s * i; OtherTopic gets the same keys to show topics do not mix."""
    puts = []
    for i in range(count):
        clock.now = NOW_MS + 10_000 * i
        keys = f"order{i % 5} common" + (" Aa" if i == 1 else " BB" if i == 2 else "")
        props = {"UNIQ_KEY": f"UNIQ{i:04d}", "KEYS": keys}
        puts.append(put_ok(store, Message("IdxTopic", i % 3, f"idx-{i}".encode(), properties=props)))
    other = [put_ok(store, Message("OtherTopic", 0, b"other", properties={"KEYS": "order3 common"})) for _ in range(3)]
    wait_dispatched(store)
    return puts, other


def test_query_message_by_key_across_colliding_index_files(tmp_path):
    clock = FakeClock(NOW_MS)
    with MessageStore(_index_store_config(tmp_path), clock_ms=clock) as store:
        puts, other = _put_indexed(store, clock)
        # 40 messages x 3 keys (+2) into files of 15 entries each.
        assert len(store.index.files) >= 8
        by_offset = {r.wrote_offset: i for i, r in enumerate(puts)}

        def query(key, **kw):
            result = store.query_message("IdxTopic", key, **kw)
            offsets = [m.physical_offset for m in result.messages]
            assert offsets == sorted(offsets, reverse=True), "newest first"
            assert all(m.topic == "IdxTopic" for m in result.messages)
            return [by_offset[o] for o in offsets]

        assert query("order3") == [i for i in reversed(range(40)) if i % 5 == 3]
        assert query("UNIQ0007") == [7]
        assert query("UNIQ0039") == [39]
        assert query("Aa") == [1]  # "BB" (message 2) hashes alike and is filtered out
        assert query("BB") == [2]
        assert query("nothing") == []
        assert query("common", max_num=4) == [39, 38, 37, 36]
        # RocketMQ caps a query at defaultQueryMaxNum (32).
        assert query("common", max_num=1000) == list(reversed(range(8, 40)))

        # Time range, inclusive (message i was stored at NOW_MS + 10 s * i).
        assert query("common", begin_ms=NOW_MS + 100_000, end_ms=NOW_MS + 190_000) == list(reversed(range(10, 20)))
        assert query("order0", begin_ms=NOW_MS + 100_000, end_ms=NOW_MS + 190_000) == [15, 10]
        assert query("common", begin_ms=NOW_MS + 400_000, end_ms=NOW_MS + 500_000) == []
        assert query("common", begin_ms=0, end_ms=NOW_MS - 1) == []

        # The other topic's messages with the same keys stay in the other topic.
        result = store.query_message("OtherTopic", "order3")
        assert [m.physical_offset for m in result.messages] == [r.wrote_offset for r in reversed(other)]
        assert result.index_last_update_phy_offset == other[-1].wrote_offset
        assert result.index_last_update_timestamp_ms == clock.now


def test_index_survives_a_restart(tmp_path):
    clock = FakeClock(NOW_MS)
    cfg = _index_store_config(tmp_path)
    with MessageStore(cfg, clock_ms=clock) as store:
        puts, _ = _put_indexed(store, clock, count=20)
    with MessageStore(cfg, clock_ms=clock) as store:
        wait_dispatched(store)
        assert [m.physical_offset for m in store.query_message("IdxTopic", "UNIQ0013").messages] == [
            puts[13].wrote_offset
        ]
        got = store.query_message("IdxTopic", "order2", begin_ms=0, end_ms=NOW_MS + DAY_MS).messages
        assert [m.physical_offset for m in got] == [puts[i].wrote_offset for i in (17, 12, 7, 2)]


def test_view_message_by_id(tmp_path):
    clock = FakeClock(NOW_MS)
    with MessageStore(_index_store_config(tmp_path), clock_ms=clock) as store:
        puts, other = _put_indexed(store, clock, count=10)
        for r in puts + other:
            got = store.view_message_by_id(r.msg_id)
            assert got == store.read_message(r.wrote_offset)
            assert (got.msg_id, got.physical_offset) == (r.msg_id, r.wrote_offset)
            assert store.view_message_by_id(r.msg_id.lower()) == got

        for bad in ("", "not-hex", "ABCD", "0" * 31, "0" * 34, "ZZ" * 16):
            with pytest.raises(ValueError):
                store.view_message_by_id(bad)
        # Well-formed ids naming no message: inside one, past the end, or another broker's.
        for msg_id in (
            make_msg_id(STORE_HOST, puts[1].wrote_offset + 4),
            make_msg_id(STORE_HOST, store.max_offset),
            make_msg_id(STORE_HOST, store.max_offset + 10_000),
            make_msg_id(("10.1.2.3", 10911), puts[1].wrote_offset),
        ):
            with pytest.raises(CorruptMessage):
                store.view_message_by_id(msg_id)


# -- 5. offsets by time ---------------------------------------------------------------------------------


def test_get_offset_in_queue_by_time(tmp_path):
    clock = FakeClock(NOW_MS)
    # Message i of queue 0 is stored at NOW_MS + 1 s * i, except that 6 and 7 share 5's time;
    # queue 1 interleaves messages at half-seconds, which must not disturb queue 0's answers.
    times = [NOW_MS + 1000 * i for i in range(20)]
    times[6] = times[7] = times[5]
    with MessageStore(config(tmp_path), clock_ms=clock) as store:
        for t in times:
            clock.now = t
            assert put_ok(store, Message("TimeTopic", 0, b"t")).store_timestamp_ms == t
            clock.now = t + 500
            put_ok(store, Message("TimeTopic", 1, b"u"))
        wait_dispatched(store)

        def at(ts, queue_id=0):
            return store.get_offset_in_queue_by_time("TimeTopic", queue_id, ts)

        assert at(0) == at(NOW_MS - 1) == at(NOW_MS) == 0
        assert at(NOW_MS + 1) == 1
        assert at(NOW_MS + 1000) == 1
        assert at(times[5]) == 5  # the first of three equal times
        assert at(times[5] + 1) == at(NOW_MS + 6000) == 8
        assert at(times[19]) == 19
        assert at(times[19] + 1) == 20  # after everything: the max offset
        assert at(NOW_MS + 500, queue_id=1) == 0
        assert at(NOW_MS + 501, queue_id=1) == 1
        assert at(NOW_MS, queue_id=7) == 0  # no such queue
        assert store.get_offset_in_queue_by_time("NoTopic", 0, NOW_MS) == 0
        # Each answer reads back a message stored at or after the time asked.
        for ts in (NOW_MS + 2500, times[5], NOW_MS + 12_000):
            r = store.get_message(GROUP, "TimeTopic", 0, at(ts), 1)
            assert r.messages[0].store_timestamp_ms >= ts


# -- 6. transactions ------------------------------------------------------------------------------------


def test_transaction_prepare_commit_rollback(tmp_path):
    cfg = config(tmp_path)
    topic = "TxTopic"
    with MessageStore(cfg) as store:
        n0 = put_ok(store, Message(topic, 0, b"normal-0"))
        props = {"TAGS": "TagT", "KEYS": "tx1"}
        p1 = put_ok(store, Message(topic, 0, b"prepared-commit", properties=props, sys_flag=TRANSACTION_PREPARED_TYPE))
        p2 = put_ok(store, Message(topic, 0, b"prepared-rollback", sys_flag=TRANSACTION_PREPARED_TYPE))
        n1 = put_ok(store, Message(topic, 0, b"normal-1"))
        # Prepared messages take no queue offset: the queue stays dense.
        assert (n0.queue_offset, n1.queue_offset) == (0, 1)
        wait_dispatched(store)

        stored = store.read_message(p1.wrote_offset)
        assert (stored.body, stored.sys_flag & TRANSACTION_TYPE_MASK) == (b"prepared-commit", TRANSACTION_PREPARED_TYPE)
        assert [m.body for m in read_queue(store, topic, 0)] == [b"normal-0", b"normal-1"]

        commit = store.end_transaction(p1.wrote_offset, commit=True)
        rollback = store.end_transaction(p2.wrote_offset, commit=False)
        assert commit.status is OK and rollback.status is OK
        assert commit.queue_offset == 2
        n2 = put_ok(store, Message(topic, 0, b"normal-2"))
        assert n2.queue_offset == 3
        wait_dispatched(store)

        got = read_queue(store, topic, 0, max_msg_nums=2)
        assert [m.body for m in got] == [b"normal-0", b"normal-1", b"prepared-commit", b"normal-2"]
        assert [m.queue_offset for m in got] == [0, 1, 2, 3]
        committed = got[2]
        assert committed.sys_flag & TRANSACTION_TYPE_MASK == TRANSACTION_COMMIT_TYPE
        assert committed.prepared_transaction_offset == p1.wrote_offset
        assert committed.physical_offset == commit.wrote_offset
        assert dict(committed.properties) == dict(stored.properties)
        assert committed.tags == "TagT"
        assert store.get_message(GROUP, topic, 0, 0, 32, tag_filter="TagT").messages == (committed,)

        rolled = store.read_message(rollback.wrote_offset)
        assert rolled.sys_flag & TRANSACTION_TYPE_MASK == TRANSACTION_ROLLBACK_TYPE
        assert rolled.prepared_transaction_offset == p2.wrote_offset

        # Only a prepared message can be ended.
        for offset in (n0.wrote_offset, commit.wrote_offset, rollback.wrote_offset, 1, store.max_offset + 100):
            r = store.end_transaction(offset, commit=True)
            assert r.status is ILLEGAL and r.reason
        end = store.max_offset
        assert store.end_transaction(n1.wrote_offset, commit=False).status is ILLEGAL
        assert store.max_offset == end, "a refused end writes nothing"
        assert store.max_queue_offset(topic, 0) == 4

    # Recovery rebuilds the same queue offsets: prepared and rollback records count for nothing.
    with MessageStore(cfg) as store:
        wait_dispatched(store)
        assert [m.body for m in read_queue(store, topic, 0)] == [
            b"normal-0",
            b"normal-1",
            b"prepared-commit",
            b"normal-2",
        ]
        assert put_ok(store, Message(topic, 0, b"normal-3")).queue_offset == 4


# -- 7. arrival listeners ---------------------------------------------------------------------------------


def test_arrival_listeners_see_every_dispatched_message_in_order(tmp_path):
    with MessageStore(config(tmp_path)) as store:
        seen = []
        visible_when_heard = []

        def broken(request):
            raise RuntimeError("a listener that fails must not stop dispatch")

        def listener(request):
            seen.append(request)
            # Long polling re-reads on this signal: the unit must already be readable.
            visible_when_heard.append(
                store.dispatched_queue_offset(request.topic, request.queue_id) > request.queue_offset
            )

        store.add_arrival_listener(broken)
        store.add_arrival_listener(listener)
        results = []
        lock = threading.Lock()

        def producer(topic):
            for i in range(30):
                props = {"TAGS": f"T{i % 3}", "KEYS": f"k{i}"}
                r = put_ok(store, Message(topic, i % 2, f"{topic}-{i}".encode(), properties=props))
                with lock:
                    results.append((topic, i % 2, f"T{i % 3}", f"k{i}", r))

        run_threads([lambda t=t: producer(t) for t in ("ArriveA", "ArriveB", "ArriveC")])
        wait_dispatched(store)

        results.sort(key=lambda x: x[-1].wrote_offset)
        assert len(seen) == len(results) == 90
        for request, (topic, queue_id, tags, keys, r) in zip(seen, results, strict=True):
            assert (request.topic, request.queue_id, request.queue_offset) == (topic, queue_id, r.queue_offset)
            assert (request.commit_log_offset, request.msg_size, request.store_timestamp_ms) == (
                r.wrote_offset,
                r.wrote_bytes,
                r.store_timestamp_ms,
            )
            assert (request.tags_code, request.keys) == (java_string_hash(tags), keys)
        assert all(visible_when_heard)
        for topic in ("ArriveA", "ArriveB", "ArriveC"):
            assert len(read_queue(store, topic, 0)) == len(read_queue(store, topic, 1)) == 15


# -- 8. topics -------------------------------------------------------------------------------------------


def test_topics_auto_created_read_only_and_persisted(tmp_path):
    cfg = config(tmp_path)
    with MessageStore(cfg) as store:
        assert store.topics.get("AutoTopic") is None
        put_ok(store, Message("AutoTopic", 0, b"a"))
        auto = store.topics.get("AutoTopic")
        assert (auto.read_queue_nums, auto.write_queue_nums, auto.perm) == (4, 4, int(Permission.READ_WRITE))
        put_ok(store, Message("WideTopic", 9, b"w"))
        wide = store.topics.get("WideTopic")
        assert (wide.read_queue_nums, wide.write_queue_nums) == (10, 10)

        # Read-only (PermName READ): puts are refused, nothing is written; reads go on.
        store.create_or_update_topic(TopicConfig("AutoTopic", 4, 4, perm=int(Permission.READ)))
        end = store.max_offset
        refused = store.put_message(Message("AutoTopic", 0, b"refused"))
        assert refused.status is ILLEGAL and "not writable" in refused.reason
        assert store.max_offset == end
        wait_dispatched(store)
        assert [m.body for m in read_queue(store, "AutoTopic", 0)] == [b"a"]
        # Writable again: the put path's cache of admitted topics must not hold the old answer.
        store.create_or_update_topic(TopicConfig("AutoTopic", 4, 4, perm=int(Permission.READ_WRITE)))
        assert put_ok(store, Message("AutoTopic", 0, b"b")).queue_offset == 1
        store.create_or_update_topic(TopicConfig("AutoTopic", 4, 4, perm=int(Permission.READ)))
        assert store.put_message(Message("AutoTopic", 0, b"refused again")).status is ILLEGAL
        # An explicitly created topic keeps its settings.
        store.create_or_update_topic(TopicConfig("MadeTopic", 2, 3, order=True))

    saved = json.loads((cfg.root / "config" / "topics.json").read_text())["topicConfigTable"]
    assert saved["AutoTopic"]["perm"] == int(Permission.READ)
    assert saved["WideTopic"]["readQueueNums"] == 10
    with MessageStore(cfg) as store:
        assert store.topics.get("AutoTopic") == TopicConfig("AutoTopic", 4, 4, perm=int(Permission.READ))
        assert store.topics.get("WideTopic") == TopicConfig("WideTopic", 10, 10)
        assert store.topics.get("MadeTopic") == TopicConfig("MadeTopic", 2, 3, order=True)
        assert store.put_message(Message("AutoTopic", 0, b"still read-only")).status is ILLEGAL


def test_auto_create_disabled_refuses_unknown_topics(tmp_path):
    with MessageStore(config(tmp_path, auto_create_topic_enable=False)) as store:
        r = store.put_message(Message("UnknownTopic", 0, b"nope"))
        assert r.status is ILLEGAL and "autoCreateTopicEnable" in r.reason
        assert r.wrote_offset == -1
        assert store.max_offset == 0 and list(store.iter_messages()) == []
        assert store.topics.get("UnknownTopic") is None
        assert store.get_message(GROUP, "UnknownTopic", 0, 0).status is NO_QUEUE

        store.create_or_update_topic(TopicConfig("UnknownTopic", 2, 2))
        assert put_ok(store, Message("UnknownTopic", 0, b"yes")).wrote_offset == 0
        wait_dispatched(store)
        assert [m.body for m in read_queue(store, "UnknownTopic", 0)] == [b"yes"]


# -- 9. consumer offsets -----------------------------------------------------------------------------------


def test_consumer_offsets_survive_a_clean_restart(tmp_path):
    cfg = config(tmp_path)
    with MessageStore(cfg) as store:
        for q in range(4):
            put_ok(store, Message("OffsetTopic", q, b"o"))
        store.consumer_offsets.commit_offset(GROUP, "OffsetTopic", 0, 1)
        store.consumer_offsets.commit_offset(GROUP, "OffsetTopic", 3, 1)
        store.consumer_offsets.commit_offset("OtherGroup", "OffsetTopic", 0, 0)
        store.consumer_offsets.commit_offset(GROUP, "OffsetTopic", 3, 0)  # last commit wins, even backwards
    assert (cfg.root / "config" / "consumerOffset.json").exists()
    with MessageStore(cfg) as store:
        offsets = store.consumer_offsets
        assert offsets.query_offset(GROUP, "OffsetTopic", 0) == 1
        assert offsets.query_offset(GROUP, "OffsetTopic", 3) == 0
        assert offsets.query_offset("OtherGroup", "OffsetTopic", 0) == 0
        assert offsets.query_offset(GROUP, "OffsetTopic", 1) == -1  # never committed
        assert offsets.query_offset("NoGroup", "OffsetTopic", 0) == -1
        assert offsets.query_offsets(GROUP, "OffsetTopic") == {0: 1, 3: 0}
        # A consumer resumes from its committed offset.
        wait_dispatched(store)
        r = store.get_message(GROUP, "OffsetTopic", 0, offsets.query_offset(GROUP, "OffsetTopic", 0))
        assert r.status is OVERFLOW_ONE


# -- 10. statistics ----------------------------------------------------------------------------------------


def test_stats_after_puts_and_gets(tmp_path):
    clock = FakeClock(NOW_MS)
    with MessageStore(config(tmp_path), clock_ms=clock) as store:
        store.create_or_update_topic(TopicConfig("StatRO", 1, 1, perm=int(Permission.READ)))
        ok_a = [put_ok(store, Message("StatA", i % 2, b"a" * (10 + i))) for i in range(12)]
        ok_b = [put_ok(store, Message("StatB", 0, b"b" * 100)) for _ in range(5)]
        refused = [store.put_message(Message("StatRO", 0, b"r")) for _ in range(3)]
        assert all(r.status is ILLEGAL for r in refused)
        wait_dispatched(store)

        reads = [
            store.get_message(GROUP, "StatA", 0, 0, 4),  # found 4
            store.get_message(GROUP, "StatA", 0, 4, 4),  # found 2
            store.get_message(GROUP, "StatA", 1, 0),  # found 6
            store.get_message(GROUP, "StatB", 0, 0, 32, tag_filter="TagX"),  # no match
            store.get_message(GROUP, "StatB", 0, 5),  # overflow one
            store.get_message(GROUP, "StatRO", 0, 0),  # no queue
        ]
        assert [r.status for r in reads] == [FOUND, FOUND, FOUND, NO_MATCHED, OVERFLOW_ONE, NO_QUEUE]
        snap = store.stats_snapshot()

    assert snap.put_calls == 20
    assert snap.put_by_status["PUT_OK"] == 17 and snap.put_by_status["MESSAGE_ILLEGAL"] == 3
    assert sum(snap.put_by_status.values()) == 20
    assert (snap.put_messages, snap.put_failures) == (17, 3)
    assert snap.topics["StatA"].messages == 12 and snap.topics["StatA"].bytes == sum(r.wrote_bytes for r in ok_a)
    assert snap.topics["StatB"].messages == 5 and snap.topics["StatB"].bytes == sum(r.wrote_bytes for r in ok_b)
    assert "StatRO" not in snap.topics
    assert snap.dispatched_messages == 17
    assert snap.dispatched_bytes == sum(r.wrote_bytes for r in ok_a + ok_b)
    assert (snap.get_found, snap.get_miss) == (3, 3)
    assert snap.get_messages == 12
    assert snap.get_bytes == sum(r.buffer_total_size for r in reads) == sum(r.wrote_bytes for r in ok_a)
    # Every put call, refused ones too, lands in exactly one latency bucket.
    assert snap.put_latency.count == snap.put_calls
    assert sum(snap.put_latency.buckets.values()) == sum(snap.put_latency.coarse.values()) == snap.put_calls
    assert snap.commit_log_max_offset == ok_b[-1].next_offset
    assert snap.taken_at_ms == NOW_MS
    json.dumps(snap.as_dict())


def test_a_pull_at_an_assigned_but_undispatched_offset_waits_rather_than_resetting(tmp_path):
    with MessageStore(config(tmp_path)) as store:
        put_ok(store, Message("Race", 0, b"first"))
        wait_dispatched(store)
        held = store.max_offset
        store.set_dispatch_limit(lambda: held)  # later puts are appended, not dispatched
        put_ok(store, Message("Race", 0, b"second"))
        put_ok(store, Message("Fresh", 0, b"only"))  # a queue with no ConsumeQueue yet
        assert store.get_message("g", "Race", 0, 1, 32, 1 << 20).status is GetMessageStatus.OFFSET_OVERFLOW_ONE
        assert store.get_message("g", "Fresh", 0, 0, 32, 1 << 20).status is GetMessageStatus.OFFSET_OVERFLOW_ONE
        # The next offset after the last acknowledged put is the queue's end, not past it (issue
        # 30: a pull at the acknowledged offset + 1 answered ILLEGAL_OFFSET now and then).
        after_race = store.get_message("g", "Race", 0, 2, 32, 1 << 20)
        assert (after_race.status, after_race.next_begin_offset) == (GetMessageStatus.OFFSET_OVERFLOW_ONE, 2)
        after_fresh = store.get_message("g", "Fresh", 0, 1, 32, 1 << 20)
        assert (after_fresh.status, after_fresh.next_begin_offset) == (GetMessageStatus.OFFSET_OVERFLOW_ONE, 1)
        # Past what the put path assigned, the offset is wrong indeed.
        assert store.get_message("g", "Race", 0, 3, 32, 1 << 20).status is GetMessageStatus.OFFSET_OVERFLOW_BADLY
        assert store.get_message("g", "Fresh", 0, 2, 32, 1 << 20).status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
        # What a reader waits for (read your writes): the assigned offsets only, not the end.
        undispatched = [("Race", 0), ("Race", 1), ("Race", 2), ("Fresh", 0), ("Fresh", 1)]
        waits = [store.queue_offset_undispatched(t, 0, q) for t, q in undispatched]
        assert waits == [False, True, False, True, False]
        store.set_dispatch_limit(None)
        wait_dispatched(store)
        result = store.get_message("g", "Race", 0, 1, 32, 1 << 20)
        assert result.status is GetMessageStatus.FOUND and [m.body for m in result.messages] == [b"second"]
        assert not store.queue_offset_undispatched("Race", 0, 1) and not store.queue_offset_undispatched("Fresh", 0, 0)


@pytest.mark.parametrize(
    ("queue_offset", "dispatched_next", "assigned_next", "waits"),
    [
        (4, 5, 7, False),  # dispatched: readable now
        (5, 5, 7, True),  # assigned, the dispatcher's next
        (6, 5, 7, True),  # assigned, further on
        (7, 5, 7, False),  # the next put's offset: nothing to wait for
        (9, 5, 7, False),  # past what was assigned
        (0, 0, 0, False),  # a queue never written
        (0, 0, 1, True),  # the first message, its queue not dispatched yet
        (3, 3, 3, False),  # everything dispatched
    ],
)
def test_an_offset_is_assigned_not_dispatched_from_the_queue_end_up_to_the_next_put(
    queue_offset, dispatched_next, assigned_next, waits
):
    assert assigned_not_dispatched(queue_offset, dispatched_next, assigned_next) is waits
