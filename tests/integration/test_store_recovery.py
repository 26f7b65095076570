"""Whole-store recovery, delayed delivery and retention, end to end through `MessageStore`.

In the spirit of RocketMQ's recover tests, ScheduleMessageService tests and clean-expired-files
tests, but against the whole store (CommitLog, ConsumeQueues, IndexFiles, checkpoint) rather than
one component:

1. Crash recovery. A writer subprocess (this very file run with `--writer`) puts to several topics
   and queues with tags, keys and transactions; the test SIGKILLs it after a random, bounded number
   of acknowledgements and reopens the store. Then (a) every ConsumeQueue unit points at a message
   of its topic and queue with its queue offset, below the CommitLog's end; (b) every message the
   CommitLog holds that belongs in a queue is in it, at its queue offset, once dispatch caught up;
   (c) every acknowledged SYNC_FLUSH message is there; (d) a query by key finds every surviving
   message with that key. Rounds repeat on one store. Two hand-made crash states follow:
   ConsumeQueues lagging behind the CommitLog (rebuilt from the checkpoint) and ConsumeQueue units
   past a cut CommitLog end (dropped).
2. Delayed messages with a fake clock: held in SCHEDULE_TOPIC_XXXX until due, then delivered to
   their real queue, exactly once across a clean restart.
3. Retention with a fake clock: expired segments deleted at the deleteWhen hour, reads below the
   new minimum answered as RocketMQ answers them, the minimum kept across a restart.

Set ROCKETSTORE_RECOVERY_SEED to replay the kill points of a failed crash run.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import random
import shutil
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from store import CorruptMessage, Message, MessageStore, PutMessageStatus, StoreConfig
from store.message import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    transaction_type,
)
from store.queue.consume_queue import tags_code
from store.recovery.checkpoint import StoreCheckpoint
from store.schedule import SCHEDULE_TOPIC
from store.status import GetMessageStatus
from support import LineProcess

REPO = Path(__file__).resolve().parents[2]
SEGMENT_SIZE = 64 * 1024
CQ_FILE_SIZE = 1024 * 20
GROUP = "recovery-check"
OK = PutMessageStatus.PUT_OK

# The writer's routing: topics x queues, every TX_EVERY-th sequence number a transaction.
TOPICS = 3
QUEUES = 4
TX_EVERY = 11
WRITER_THREADS = 3
SEQ_STRIDE = 1_000_000  # round r writes sequence numbers from r * SEQ_STRIDE
READY_TIMEOUT_S = 20.0
ACK_TIMEOUT_S = 15.0
NO_QUEUE_TYPES = (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)


def config(root: Path, **kw) -> StoreConfig:
    # Small geometry, as tests/unit/test_message_store.py: many segments and files from few messages.
    kw.setdefault("mapped_file_size_commit_log", SEGMENT_SIZE)
    kw.setdefault("mapped_file_size_consume_queue", CQ_FILE_SIZE)
    kw.setdefault("max_hash_slot_num", 512)
    kw.setdefault("max_index_num", 2048)
    return StoreConfig(store_path_root_dir=str(root), **kw)


def wait_until(condition, what: str, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.005)


def wait_dispatched(store: MessageStore) -> None:
    """Messages are readable by queue and key only once the dispatcher has passed them."""
    wait_until(lambda: store.dispatched_offset >= store.max_offset, "dispatch to catch up with the CommitLog")


# -- the writer's messages: functions of a sequence number ----------------------------------------


def route_for(seq: int) -> tuple[str, int]:
    return f"RecTopic{seq % TOPICS}", (seq // TOPICS) % QUEUES


def body_for(seq: int) -> bytes:
    # Lengths vary so that segment ends fall at many places; the head names the message.
    n = 60 + (seq * 53) % 500
    return b"seq=%012d;" % seq + bytes((seq + i) % 251 for i in range(n))


def keys_for(seq: int) -> str:
    # A unique key and a key shared by a handful of neighbours: a query must return all of them.
    return f"k{seq} b{seq // 4}"


def message_for(seq: int, sys_flag: int = TRANSACTION_NOT_TYPE) -> Message:
    topic, queue_id = route_for(seq)
    properties = {"KEYS": keys_for(seq), "TAGS": f"tag{seq % 5}"}
    if sys_flag == TRANSACTION_PREPARED_TYPE:
        properties["TRAN_MSG"] = "true"
    return Message(topic, queue_id, body_for(seq), properties=properties, sys_flag=sys_flag)


def seq_of(body: bytes) -> int:
    assert body.startswith(b"seq=") and body[16:17] == b";", f"foreign body {body[:20]!r}"
    return int(body[4:16])


# -- the writer subprocess ------------------------------------------------------------------------


def _emit(line: str) -> None:
    # One write(2) per line, below PIPE_BUF: lines of several threads never interleave.
    data = line.encode()
    while data:
        data = data[os.write(1, data) :]


def run_writer(directory: str, flush: str, first_seq: int) -> int:
    store = MessageStore(
        config(
            Path(directory),
            flush_disk_type=flush,
            flush_interval_commit_log_ms=50,
            # Thorough queue flushes every few hundred ms, not every minute: the checkpoint's logics
            # offset and index time then move while the writer runs, so a kill finds queues and
            # IndexFiles partly newer than the checkpoint (dropped and re-dispatched at recovery).
            flush_interval_consume_queue_ms=100,
            flush_consume_queue_thorough_interval_ms=300,
        )
    )
    report = store.load()
    store.start()
    _emit(f"READY {int(report.abnormal)}\n")
    counter = itertools.count(first_seq)  # next() on a C iterator is atomic under the GIL

    def ack(kind: str, seq: int, result) -> None:
        if result.status is OK:
            _emit(
                f"ACK {kind} {seq} {result.queue_offset} {result.wrote_offset} {result.wrote_bytes} {result.msg_id}\n"
            )

    def work() -> None:
        while True:
            seq = next(counter)
            if seq % TX_EVERY == 5:
                # Prepared, then committed (even) or rolled back (odd): only the commit is queued.
                prepared = store.put_message(message_for(seq, TRANSACTION_PREPARED_TYPE))
                ack("P", seq, prepared)
                if prepared.status is OK:
                    ack("C" if seq % 2 == 0 else "R", seq, store.end_transaction(prepared.wrote_offset, seq % 2 == 0))
            else:
                ack("N", seq, store.put_message(message_for(seq)))

    threads = [threading.Thread(target=work, daemon=True) for _ in range(WRITER_THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()  # never returns: the parent kills the process
    return 0


@dataclass(frozen=True)
class Ack:
    kind: str  # N normal, P prepared, C commit, R rollback
    seq: int
    queue_offset: int
    offset: int
    size: int
    msg_id: str


class Writer(LineProcess):
    """The writer process; every wait on its output has a deadline."""

    def __init__(self, store_dir: Path, log_dir: Path, flush: str, first_seq: int) -> None:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "tests")]))
        command = [
            sys.executable,
            __file__,
            "--writer",
            str(store_dir),
            "--flush",
            flush,
            "--first-seq",
            str(first_seq),
        ]
        self.acks: list[Ack] = []
        self.abnormal: bool | None = None
        super().__init__(command, log_dir / f"writer-{flush}-{first_seq}.stderr", cwd=REPO, env=env)

    def on_line(self, line: str) -> None:
        parts = line.split()
        if parts[0] == "READY":
            self.abnormal = parts[1] == "1"
        elif parts[0] == "ACK":
            self.acks.append(Ack(parts[1], int(parts[2]), int(parts[3]), int(parts[4]), int(parts[5]), parts[6]))


@contextlib.contextmanager
def dump_on_failure(writer: Writer, seed: int):
    try:
        yield
    except BaseException:
        print(f"--- ROCKETSTORE_RECOVERY_SEED={seed} replays this run; writer stderr:\n{writer.stderr()}")
        raise


# -- invariants of a recovered store ----------------------------------------------------------------


def check_queues_point_into_log(store: MessageStore) -> int:
    """(a) Nothing visible that is not in the CommitLog: every unit of every ConsumeQueue indexes a
    queueable message of its topic and queue, at its queue offset, with its size and tags code,
    wholly below the CommitLog's end. Returns the number of units checked."""
    end = store.max_offset
    units_seen = 0
    for cq in store.consume_queues.queues():
        offset = cq.min_offset
        while offset < cq.max_offset:
            units = cq.get_units(offset, 512)
            assert units, f"{cq}: no units readable at {offset}, below its max offset"
            for unit in units:
                where = f"{cq.topic}-{cq.queue_id}@{offset}"
                assert not unit.is_filler, f"{where}: a filler, i.e. a hole in the queue"
                assert unit.commit_log_offset + unit.size <= end, f"{where}: unit {unit} past the CommitLog end {end}"
                msg = store.read_message(unit.commit_log_offset)
                assert (msg.topic, msg.queue_id, msg.queue_offset) == (cq.topic, cq.queue_id, offset), (
                    f"{where}: points at {msg.topic}-{msg.queue_id}@{msg.queue_offset}"
                )
                assert msg.store_size == unit.size, f"{where}: size {unit.size}, message {msg.store_size}"
                assert transaction_type(msg.sys_flag) not in NO_QUEUE_TYPES, f"{where}: a prepared/rolled-back message"
                if cq.topic != SCHEDULE_TOPIC:  # schedule units carry the delivery time instead
                    assert unit.tags_code == tags_code(msg.tags), f"{where}: tags code {unit.tags_code}"
                offset += 1
                units_seen += 1
    return units_seen


def check_log_is_in_queues(store: MessageStore) -> dict[tuple[str, int], list[int]]:
    """(b) Nothing in the CommitLog missing from its queue: every queueable message is at its
    queue offset in its ConsumeQueue, queue offsets are dense from 0, and get_message walks each
    queue returning exactly those messages in order. Returns the physical offsets per queue."""
    wait_dispatched(store)
    per_queue: dict[tuple[str, int], list[int]] = {}
    for msg in store.iter_messages():
        if transaction_type(msg.sys_flag) in NO_QUEUE_TYPES:
            continue
        key = (msg.topic, msg.queue_id)
        offsets = per_queue.setdefault(key, [])
        where = f"{msg.topic}-{msg.queue_id}@{msg.queue_offset} (CommitLog {msg.physical_offset})"
        assert msg.queue_offset == len(offsets), f"{where}: expected queue offset {len(offsets)}"
        cq = store.find_consume_queue(msg.topic, msg.queue_id)
        assert cq is not None, f"{where}: its ConsumeQueue does not exist"
        units = cq.get_units(msg.queue_offset, 1)
        assert units and units[0].commit_log_offset == msg.physical_offset, f"{where}: queue holds {units}"
        offsets.append(msg.physical_offset)
    for (topic, queue_id), offsets in per_queue.items():
        assert store.max_queue_offset(topic, queue_id) == len(offsets), f"{topic}-{queue_id}: next queue offset"
        assert store.dispatched_queue_offset(topic, queue_id) == len(offsets), f"{topic}-{queue_id}: queue end"
        read: list[int] = []
        offset = 0
        while offset < len(offsets):
            result = store.get_message(GROUP, topic, queue_id, offset, 32, 1 << 20)
            assert result.status is GetMessageStatus.FOUND, f"{topic}-{queue_id}@{offset}: {result.status}"
            read += [m.physical_offset for m in result.messages]
            offset = result.next_begin_offset
        assert read == offsets, f"{topic}-{queue_id}: get_message returns other messages than the log holds"
        tail = store.get_message(GROUP, topic, queue_id, len(offsets), 32, 1 << 20)
        assert tail.status is GetMessageStatus.OFFSET_OVERFLOW_ONE
    return per_queue


def check_index_finds_survivors(store: MessageStore) -> int:
    """(d) A query by key returns exactly the surviving messages that carry the key (rolled-back
    records are never indexed, as in RocketMQ's IndexService). Returns the number of keys queried."""
    wait_dispatched(store)
    expected: dict[tuple[str, str], set[int]] = {}
    for msg in store.iter_messages():
        if transaction_type(msg.sys_flag) == TRANSACTION_ROLLBACK_TYPE:
            continue
        for key in (msg.keys or "").split():
            expected.setdefault((msg.topic, key), set()).add(msg.physical_offset)
    missing = []
    for (topic, key), offsets in expected.items():
        found = {m.physical_offset for m in store.query_message(topic, key, 64).messages}
        if found != offsets:
            missing.append((topic, key, sorted(offsets - found), sorted(found - offsets)))
    assert not missing, (
        f"{len(missing)} of {len(expected)} keys answer wrongly (topic, key, missing, extra); first: {missing[:5]}"
    )
    return len(expected)


def check_recovered(store: MessageStore) -> dict:
    """(a) on what recovery left, then dispatch, then (a), (b) and (d)."""
    before_dispatch = check_queues_point_into_log(store)
    store.start()
    wait_dispatched(store)
    units = check_queues_point_into_log(store)
    per_queue = check_log_is_in_queues(store)
    keys = check_index_finds_survivors(store)
    return {"units_at_load": before_dispatch, "units": units, "queues": len(per_queue), "keys": keys}


# -- 1. crash recovery --------------------------------------------------------------------------------


def check_after_kill(store_dir: Path, flush: str, acks: list[Ack], confirmed: dict[tuple[str, int], Ack]) -> dict:
    store = MessageStore(config(store_dir, flush_disk_type=flush))
    report = store.load()
    try:
        assert report.abnormal, "recovery did not notice the crash"
        counts = check_recovered(store)
        end = store.max_offset

        def in_place(ack: Ack) -> bool:
            if ack.offset + ack.size > end:
                return False
            msg = store.read_message(ack.offset)
            expected_type = {
                "N": TRANSACTION_NOT_TYPE,
                "P": TRANSACTION_PREPARED_TYPE,
                "C": TRANSACTION_COMMIT_TYPE,
                "R": TRANSACTION_ROLLBACK_TYPE,
            }[ack.kind]
            same = (seq_of(msg.body), msg.body, msg.msg_id, msg.store_size, transaction_type(msg.sys_flag)) == (
                ack.seq,
                body_for(ack.seq),
                ack.msg_id,
                ack.size,
                expected_type,
            )
            return same and (ack.kind in "PR" or msg.queue_offset == ack.queue_offset)

        # (c) SYNC_FLUSH acknowledged durability. ASYNC_FLUSH promised nothing, but whatever
        # acknowledged message lies below the recovered end must be intact and in place.
        lost = []
        for ack in acks:
            if flush == "SYNC_FLUSH" or ack.offset + ack.size <= end:
                assert in_place(ack), f"acknowledged {ack} is not in place after recovery"
                confirmed[(ack.kind, ack.seq)] = ack
            else:
                lost.append(ack)
        # What an earlier round found in place stays in place.
        for ack in confirmed.values():
            assert in_place(ack), f"{ack}, in place after an earlier round, is gone"
        counts.update(end=end, acked=len(acks), async_beyond_end=len(lost), truncated=report.truncated_from is not None)
        return counts
    finally:
        store.shutdown()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("flush", ["SYNC_FLUSH", "ASYNC_FLUSH"])
def test_kill_and_recover_whole_store_over_several_rounds(tmp_path, flush):
    seed = int(os.environ.get("ROCKETSTORE_RECOVERY_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    store_dir = tmp_path / "store"
    confirmed: dict[tuple[str, int], Ack] = {}
    rounds = []
    # After most kills the test reopens and checks the store, shutting it down cleanly; after the
    # others the next writer starts straight on the crashed store, so one check covers two crashes.
    check_after = [True, False, True, True, False, True]
    acks: list[Ack] = []
    for round_no, check in enumerate(check_after):
        kill_after = rng.randint(30, 400)
        writer = Writer(store_dir, tmp_path, flush, round_no * SEQ_STRIDE)
        with dump_on_failure(writer, seed):
            try:
                assert writer.wait_for(lambda: writer.abnormal is not None, READY_TIMEOUT_S), "the writer did not start"
                assert writer.abnormal is (round_no > 0 and not check_after[round_no - 1])
                writer.wait_for(lambda: len(writer.acks) >= kill_after, ACK_TIMEOUT_S)
                assert writer.proc.poll() is None, "the writer died before the kill"
            finally:
                writer.kill()
            assert writer.acks, "no acknowledgement before the deadline"
            acks += writer.acks
            if not check:
                continue
            counts = check_after_kill(store_dir, flush, acks, confirmed)
        acks = []
        counts.update(round=round_no, kill_after=kill_after)
        rounds.append(counts)
    print(f"seed {seed}: {rounds}")  # shown with -s, and with the failure report
    ends = [r["end"] for r in rounds]
    assert ends == sorted(ends), f"the log shrank between rounds: {ends}"
    assert all(r["queues"] == TOPICS * QUEUES for r in rounds[1:]), rounds


def put_batch(store: MessageStore, seqs) -> list:
    results = []
    for seq in seqs:
        result = store.put_message(message_for(seq))
        assert result.status is OK, result
        results.append(result)
    return results


@pytest.mark.timeout(60)
@pytest.mark.parametrize("lag", ["rolled-back", "all-deleted"])
def test_lagging_consume_queues_are_rebuilt_from_the_checkpoint(tmp_path, lag):
    """The CommitLog holds more than the ConsumeQueues, and the abort file says the store crashed.

    rolled-back: queues, IndexFiles and checkpoint hold only what was durable at an earlier
    checkpoint (the state a power loss leaves when the queue flusher's last thorough round is older
    than the CommitLog's last flush): existing queues' files end early, queues first written after
    that checkpoint have no files at all. Recovery re-dispatches from the checkpoint's logics offset.
    all-deleted: no queue files at all (a store copied without them): every queue is rebuilt from
    the CommitLog's start, though the checkpoint says they were complete.
    Either way every queue ends complete and nothing is indexed twice."""
    root = tmp_path / "store"
    saved = tmp_path / "saved"
    cfg = config(root)
    with MessageStore(cfg) as store:
        # Batch 1 reaches only topics 0 and 1 (seq % 3 != 2), so topic 2's queues start later.
        put_batch(store, [s for s in range(300) if s % TOPICS != 2])
        wait_dispatched(store)
        batch_1_units = sum(cq.max_offset for cq in store.consume_queues.queues())
    saved.mkdir()
    for name in ("consumequeue", "index"):
        shutil.copytree(root / name, saved / name)
    shutil.copy2(root / "checkpoint", saved / "checkpoint")
    logics_before = StoreCheckpoint(saved / "checkpoint").load().logics_flushed_offset

    with MessageStore(cfg) as store:
        put_batch(store, range(300, 900))
        end = store.max_offset
    assert end > logics_before + 3 * SEGMENT_SIZE, "batch 2 should span several segments"
    if lag == "rolled-back":
        # Roll queues, IndexFiles and checkpoint back to batch 1; keep the whole CommitLog.
        for name in ("consumequeue", "index"):
            shutil.rmtree(root / name)
            shutil.copytree(saved / name, root / name)
        shutil.copy2(saved / "checkpoint", root / "checkpoint")
        assert not (root / "consumequeue" / "RecTopic2").exists()
        redispatch_from, units_at_load = logics_before, batch_1_units
    else:
        shutil.rmtree(root / "consumequeue")
        redispatch_from, units_at_load = 0, 0
    (root / "abort").touch()

    store = MessageStore(cfg)
    report = store.load()
    try:
        assert report.abnormal and report.end_offset == end and report.truncated_from is None
        # Re-dispatch starts no later than where the queues stop being complete.
        assert store.dispatched_offset <= redispatch_from
        counts = check_recovered(store)
        assert counts["units_at_load"] == units_at_load
        assert counts["queues"] == TOPICS * QUEUES
        # Nothing was indexed twice by the re-dispatch over what the IndexFiles already held.
        for seq in (0, 1, 298, 300, 301, 899):
            topic, _ = route_for(seq)
            assert len(store.query_message(topic, f"k{seq}").messages) == 1, seq
    finally:
        store.shutdown()
    # And the rebuilt state survives a normal restart unchanged.
    with MessageStore(cfg) as store:
        assert not store.recovery.abnormal
        assert check_log_is_in_queues(store)[("RecTopic2", 0)]


@pytest.mark.timeout(60)
def test_queue_units_past_a_cut_commitlog_are_dropped(tmp_path):
    """The last messages' bytes never reached the disk (zeros), but their ConsumeQueue units and
    index entries did; the checkpoint's flushed offset is below them and the abort file is there
    (tests/unit/test_recovery.py's simulate_crash). Recovery cuts the CommitLog and drops every unit
    that points at or past the cut; the next puts reuse those queue offsets and CommitLog offsets."""
    root = tmp_path / "store"
    cfg = config(root)
    seqs = list(range(200))
    with MessageStore(cfg) as store:
        results = put_batch(store, seqs)
        end = store.max_offset
    lost = 5  # the last five messages: several queues lose their tails
    cut = results[-lost].wrote_offset
    segment_start = cut - cut % SEGMENT_SIZE
    assert end - segment_start <= SEGMENT_SIZE, "the lost messages should share the last segment"
    path = root / "commitlog" / f"{segment_start:020d}"
    with open(path, "r+b") as f:
        f.seek(cut - segment_start)
        f.write(bytes(end - cut))
    (root / "abort").touch()
    checkpoint = StoreCheckpoint(root / "checkpoint")
    checkpoint.load()
    assert checkpoint.trusted
    checkpoint.update(physic_flushed_offset=cut)
    checkpoint.persist()
    checkpoint.close()

    store = MessageStore(cfg)
    report = store.load()
    try:
        assert report.abnormal and store.max_offset == cut
        for seq, result in zip(seqs[-lost:], results[-lost:]):
            topic, queue_id = route_for(seq)
            cq = store.find_consume_queue(topic, queue_id)
            assert cq is not None and cq.max_offset <= result.queue_offset, f"{topic}-{queue_id}: {cq}"
        check_recovered(store)
        for seq, result in zip(seqs[-lost:], results[-lost:]):
            topic, queue_id = route_for(seq)
            # Its unit is gone; its index entry may remain, but no query may return it.
            assert store.query_message(topic, f"k{seq}").messages == ()
            assert store.get_message(GROUP, topic, queue_id, result.queue_offset).status in (
                GetMessageStatus.OFFSET_OVERFLOW_ONE,
                GetMessageStatus.OFFSET_OVERFLOW_BADLY,
            )
        # Put the lost messages again, in order, under other keys of the same length: same sizes,
        # so the same CommitLog and queue offsets, and the stale index entries there match nothing.
        for seq, old in zip(seqs[-lost:], results[-lost:]):
            again = store.put_message(_with_keys(message_for(seq), keys_for(seq).upper()))
            assert (again.status, again.wrote_offset, again.queue_offset) == (OK, old.wrote_offset, old.queue_offset)
        wait_dispatched(store)
        check_queues_point_into_log(store)
        check_log_is_in_queues(store)
        for seq, old in zip(seqs[-lost:], results[-lost:]):
            topic, _ = route_for(seq)
            assert store.query_message(topic, f"k{seq}").messages == ()
            # If recovery left the newest IndexFile's endPhyOffset past the cut, build_index would
            # skip every message put below it: these re-puts would never be found by key.
            found = store.query_message(topic, f"K{seq}").messages
            assert len(found) == 1, (
                f"K{seq}, re-put at {old.wrote_offset} after the cut at {cut}, is not indexed; "
                f"the newest IndexFile still ends at {store.index.last_update_phy_offset}"
            )
    finally:
        store.shutdown()


def _with_keys(msg: Message, keys: str) -> Message:
    return Message(msg.topic, msg.queue_id, msg.body, properties={**msg.properties, "KEYS": keys})


# -- 2. delayed messages ------------------------------------------------------------------------------

T0 = 1_700_000_000_000
LEVEL_3_MS = 10_000  # the default messageDelayLevel's third level, "10s"
LEVEL_18_MS = 2 * 3_600_000  # the highest default level, "2h"


def delayed(body: bytes, level: str, key: str) -> Message:
    return Message("DelayTopic", 1, body, properties={"DELAY": level, "KEYS": key, "TAGS": "tagD"})


def real_queue_bodies(store: MessageStore) -> list[bytes]:
    wait_dispatched(store)
    result = store.get_message(GROUP, "DelayTopic", 1, 0, 64, 1 << 20)
    if result.status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE:
        return []
    assert result.status is GetMessageStatus.FOUND, result.status
    return [m.body for m in result.messages]


# The schedule service's thread reads the same fake clock the store stamps messages with. Keeping
# that clock before every due time means only the test's explicit deliver_due(now) calls can
# deliver, so each call's count is exact; the thread still runs, and the service serialises its
# rounds with ours, so it could not deliver twice even if it did find something due.


@pytest.mark.timeout(60)
def test_delayed_message_waits_in_schedule_topic_then_reaches_its_queue(tmp_path):
    now = [T0]
    with MessageStore(config(tmp_path / "store"), clock_ms=lambda: now[0]) as store:
        first = store.put_message(delayed(b"ten seconds", "3", "d1"))
        clamped = store.put_message(delayed(b"beyond the last level", "99", "d2"))
        assert first.status is OK and clamped.status is OK
        wait_dispatched(store)

        # Stored under SCHEDULE_TOPIC_XXXX, queue level - 1, the real destination in properties.
        held = store.read_message(first.wrote_offset)
        assert (held.topic, held.queue_id) == (SCHEDULE_TOPIC, 2)
        assert {k: held.properties.get(k) for k in ("DELAY", "REAL_TOPIC", "REAL_QID")} == {
            "DELAY": "3",
            "REAL_TOPIC": "DelayTopic",
            "REAL_QID": "1",
        }
        unit = store.find_consume_queue(SCHEDULE_TOPIC, 2).get_units(0, 1)[0]
        assert (unit.commit_log_offset, unit.tags_code) == (first.wrote_offset, T0 + LEVEL_3_MS)
        # Level 99 is clamped to the highest level, 18 (queue 17), DELAY rewritten to match.
        held = store.read_message(clamped.wrote_offset)
        assert (held.topic, held.queue_id, held.properties["DELAY"]) == (SCHEDULE_TOPIC, 17, "18")
        unit = store.find_consume_queue(SCHEDULE_TOPIC, 17).get_units(0, 1)[0]
        assert (unit.commit_log_offset, unit.tags_code) == (clamped.wrote_offset, T0 + LEVEL_18_MS)

        # Not visible in the real topic before it is due, neither by queue nor by key.
        assert store.find_consume_queue("DelayTopic", 1) is None
        assert store.max_queue_offset("DelayTopic", 1) == 0
        assert real_queue_bodies(store) == []
        assert store.query_message("DelayTopic", "d1").messages == ()
        assert store.schedule.deliver_due(T0 + LEVEL_3_MS - 1) == 0
        assert real_queue_bodies(store) == []

        assert store.schedule.deliver_due(T0 + LEVEL_3_MS) == 1
        assert real_queue_bodies(store) == [b"ten seconds"]
        got = store.get_message(GROUP, "DelayTopic", 1, 0).messages[0]
        assert (got.topic, got.queue_id, got.queue_offset, got.body) == ("DelayTopic", 1, 0, b"ten seconds")
        assert "DELAY" not in got.properties
        assert (got.properties["REAL_TOPIC"], got.properties["REAL_QID"]) == ("DelayTopic", "1")
        assert (got.tags, got.keys) == ("tagD", "d1")
        assert store.find_consume_queue("DelayTopic", 1).get_units(0, 1)[0].tags_code == tags_code("tagD")
        assert [m.physical_offset for m in store.query_message("DelayTopic", "d1").messages] == [got.physical_offset]

        # The clamped message is due two hours after its store time, not later.
        assert store.schedule.deliver_due(T0 + LEVEL_18_MS - 1) == 0
        assert store.schedule.deliver_due(T0 + LEVEL_18_MS) == 1
        assert real_queue_bodies(store) == [b"ten seconds", b"beyond the last level"]
        assert store.schedule.deliver_due(T0 + 100 * LEVEL_18_MS) == 0
        assert real_queue_bodies(store) == [b"ten seconds", b"beyond the last level"]
        check_queues_point_into_log(store)


@pytest.mark.timeout(60)
def test_delayed_delivery_is_exactly_once_across_a_clean_restart(tmp_path):
    cfg = config(tmp_path / "store")
    now = [T0]
    with MessageStore(cfg, clock_ms=lambda: now[0]) as store:
        for body in (b"a", b"b"):
            assert store.put_message(delayed(body, "3", body.decode())).status is OK  # due at T0 + 10 s
        now[0] = T0 + 5_000
        for body in (b"c", b"d"):
            assert store.put_message(delayed(body, "3", body.decode())).status is OK  # due at T0 + 15 s
        wait_dispatched(store)
        assert store.schedule.deliver_due(T0 + LEVEL_3_MS) == 2
        assert real_queue_bodies(store) == [b"a", b"b"]
    # The cursor went to disk at shutdown (everything is flushed by then).
    assert read_json_offset_table(tmp_path / "store")["3"] == 2

    with MessageStore(cfg, clock_ms=lambda: now[0]) as store:
        assert not store.recovery.abnormal
        assert store.schedule.offsets[3] == 2
        assert real_queue_bodies(store) == [b"a", b"b"]
        # Only the two undelivered ones are delivered; a and b are not delivered again.
        assert store.schedule.deliver_due(T0 + 15_000) == 2
        assert store.schedule.deliver_due(T0 + 100 * LEVEL_3_MS) == 0
        assert Counter(real_queue_bodies(store)) == {b"a": 1, b"b": 1, b"c": 1, b"d": 1}

    with MessageStore(cfg, clock_ms=lambda: now[0]) as store:
        assert store.schedule.deliver_due(T0 + 100 * LEVEL_3_MS) == 0
        assert real_queue_bodies(store) == [b"a", b"b", b"c", b"d"]
        assert {k: len(store.query_message("DelayTopic", k).messages) for k in "abcd"} == dict.fromkeys("abcd", 1)


def read_json_offset_table(root: Path) -> dict:
    return json.loads((root / "config" / "delayOffset.json").read_text())["offsetTable"]


# -- 3. retention ---------------------------------------------------------------------------------------

HOUR_MS = 3_600_000
RESERVED_MS = 72 * HOUR_MS  # fileReservedTime's default
CQ_UNITS_PER_FILE = 64


def next_delete_hour_ms(after_ms: int) -> int:
    """The first 04:30 local time (deleteWhen's default hour, read in local time as RocketMQ
    does) after `after_ms`."""
    moment = datetime.fromtimestamp(after_ms / 1000)
    candidate = moment.replace(hour=4, minute=30, second=0, microsecond=0)
    if candidate <= moment:
        candidate += timedelta(days=1)
    ms = int(candidate.timestamp() * 1000)
    assert datetime.fromtimestamp(ms / 1000).hour == 4
    return ms


@dataclass(frozen=True)
class Put:
    i: int
    queue_id: int
    queue_offset: int
    offset: int


def expected_min(puts: list[Put], queue_id: int, commit_log_min: int) -> int:
    """RocketMQ's corrected ConsumeQueue min offset: the first unit whose message survived."""
    return next(p.queue_offset for p in puts if p.queue_id == queue_id and p.offset >= commit_log_min)


def cq_files(root: Path, queue_id: int) -> list[int]:
    directory = root / "consumequeue" / "RetainTopic" / str(queue_id)
    return sorted(int(name) for name in os.listdir(directory) if name.isdigit())


def wait_cleaned(store: MessageStore, puts: list[Put], min_before: int) -> int:
    """A round detaches segments, unlinks them, then corrects the queues: wait until the CommitLog
    moved past `min_before` and the queues match its new start. Returns that start."""

    def done() -> bool:
        now_min = store.min_offset
        return now_min > min_before and all(
            store.min_queue_offset("RetainTopic", q) == expected_min(puts, q, now_min) for q in range(3)
        )

    wait_until(done, f"retention to move the CommitLog's start past {min_before} and correct the queues")
    return store.min_offset


def check_retained(store: MessageStore, root: Path, puts: list[Put], commit_log_min: int) -> None:
    assert store.min_offset == commit_log_min
    # Only segment names count: the allocator may be creating the next segment as a .tmp file.
    assert min(int(n) for n in os.listdir(root / "commitlog") if n.isdigit()) <= commit_log_min
    assert next(store.iter_messages()).physical_offset == commit_log_min
    for q in range(3):
        new_min = expected_min(puts, q, commit_log_min)
        assert store.min_queue_offset("RetainTopic", q) == new_min
        # Below the queue's min, RocketMQ answers OFFSET_TOO_SMALL with nextBeginOffset = the min
        # (a master's nextOffsetCorrection). MESSAGE_WAS_REMOVING is its answer only while a unit
        # still points into a deleted segment, i.e. before CleanConsumeQueueService corrected the
        # queue; here the correction is part of the same round, so that window is over.
        for old in (0, new_min - 1):
            result = store.get_message(GROUP, "RetainTopic", q, old)
            assert (result.status, result.next_begin_offset, result.messages) == (
                GetMessageStatus.OFFSET_TOO_SMALL,
                new_min,
                (),
            ), (q, old, result)
        result = store.get_message(GROUP, "RetainTopic", q, new_min, 4)
        first = next(p for p in puts if p.queue_id == q and p.queue_offset == new_min)
        assert result.status is GetMessageStatus.FOUND and result.messages[0].physical_offset == first.offset
        # Files holding only deleted messages' units are gone; the first file left holds the min.
        start_unit = cq_files(root, q)[0] // 20
        assert start_unit <= new_min < start_unit + CQ_UNITS_PER_FILE, (q, cq_files(root, q), new_min)
    with pytest.raises(CorruptMessage):
        store.read_message(puts[0].offset)  # deleted: an error, never stale bytes
    for p in puts:
        found = store.query_message("RetainTopic", f"r{p.i}").messages
        if p.offset < commit_log_min:
            assert found == (), f"r{p.i} at {p.offset} was deleted but a query returns it"
        else:
            assert [m.physical_offset for m in found] == [p.offset]


@pytest.mark.timeout(60)
def test_retention_deletes_expired_segments_at_delete_when(tmp_path):
    root = tmp_path / "store"
    cfg = config(root, flush_disk_type="SYNC_FLUSH", mapped_file_size_consume_queue=CQ_UNITS_PER_FILE * 20)
    # Segment expiry compares real file modification times with the store's clock, which starts at
    # the wall clock here and is then moved days ahead.
    now = [int(time.time() * 1000)]
    with MessageStore(cfg, clock_ms=lambda: now[0]) as store:
        puts: list[Put] = []
        i = 0
        while len(store.queue.files) < 7 or store.max_offset - store.queue.files[-1].file_from_offset < 8 * 1100:
            r = store.put_message(
                Message("RetainTopic", i % 3, b"%06d" % i + bytes(1000), properties={"KEYS": f"r{i}"})
            )
            assert r.status is OK, r
            puts.append(Put(i, i % 3, r.queue_offset, r.wrote_offset))
            i += 1
        wait_dispatched(store)
        segments = store.queue.files
        starts = [s.file_from_offset for s in segments]
        assert all(len(cq_files(root, q)) >= 2 for q in range(3))

        # Day 3 + 1 h, 04:30: every segment is expired except segment 3, touched an hour ago.
        # Deletion stops at it: the CommitLog must stay contiguous.
        first_round = next_delete_hour_ms(now[0] + RESERVED_MS + HOUR_MS)
        touched_ns = (first_round - HOUR_MS) * 1_000_000
        os.utime(segments[3].path, ns=(touched_ns, touched_ns))
        now[0] = first_round
        store.request_delete_files_now()
        assert wait_cleaned(store, puts, starts[0]) == starts[3]
        assert [s.file_from_offset for s in store.queue.files] == starts[3:]
        check_retained(store, root, puts, starts[3])

        # Once segment 3 expires too, everything goes but the last segment, expired or not.
        now[0] = next_delete_hour_ms(first_round - HOUR_MS + RESERVED_MS)
        store.request_delete_files_now()
        assert wait_cleaned(store, puts, starts[3]) == starts[-1]
        assert [s.file_from_offset for s in store.queue.files] == starts[-1:]
        check_retained(store, root, puts, starts[-1])
        # The store goes on taking and serving messages.
        r = store.put_message(Message("RetainTopic", 0, b"after", properties={"KEYS": "after"}))
        assert r.status is OK and r.queue_offset == store.max_queue_offset("RetainTopic", 0) - 1
        wait_dispatched(store)
        assert store.get_message(GROUP, "RetainTopic", 0, r.queue_offset).messages[0].body == b"after"
        minimums = {q: store.min_queue_offset("RetainTopic", q) for q in range(3)}

    with MessageStore(cfg, clock_ms=lambda: now[0]) as store:
        assert not store.recovery.abnormal
        assert {q: store.min_queue_offset("RetainTopic", q) for q in range(3)} == minimums
        check_retained(store, root, puts, starts[-1])
        assert store.query_message("RetainTopic", "after").messages[0].body == b"after"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="the crash test's writer (internal)")
    parser.add_argument("--writer", required=True)
    parser.add_argument("--flush", required=True)
    parser.add_argument("--first-seq", type=int, required=True)
    args = parser.parse_args()
    sys.exit(run_writer(args.writer, args.flush, args.first_seq))
