"""CommitLog segment ends (RocketMQ's AppendMessageCallback END_OF_FILE cases), segment files on
disk, the allocator that prepares the next segment ahead, and the transient store pool.

Sizes are computed here from the on-disk format of docs/design.md §3, not taken from the store, so the
tests also check that the store writes exactly that format.
"""

from __future__ import annotations

import errno
import os
import random
import struct
import threading
from pathlib import Path

import pytest

from store import Message, MessageStore, PutMessageStatus, StoreConfig, decode_msg_id
from store.log import mapped_file as mapped_file_module
from support import small_store_config

SEG = 4096
MESSAGE_MAGIC = -626843481
BLANK_MAGIC = -875286124
TOPIC = "SegTopic"
# TOTALSIZE..BORNTIMESTAMP (48), BORNHOST v4 (8), STORETIMESTAMP (8), STOREHOST v4 (8),
# RECONSUMETIMES (4), PREPARED TX OFFSET (8), BODY length (4), TOPIC length (1), PROPERTIES length (2)
FIXED = 48 + 8 + 8 + 8 + 4 + 8 + 4 + 1 + 2


def encoded_size(body_len: int, topic: str = TOPIC, props: bytes = b"") -> int:
    return FIXED + body_len + len(topic.encode()) + len(props)


def body_of_total(total: int, seed: int = 0, topic: str = TOPIC) -> bytes:
    """A body that makes the encoded message exactly `total` bytes long."""
    n = total - encoded_size(0, topic)
    assert n >= 0
    return bytes((seed * 31 + i * 7 + 1) % 251 for i in range(n))


def msg(total: int, seed: int = 0, queue_id: int = 0) -> Message:
    return Message(TOPIC, queue_id, body_of_total(total, seed))


def config(tmp_path: Path, **kw) -> StoreConfig:
    return small_store_config(tmp_path / "store", SEG, **kw)


def commitlog_dir(cfg: StoreConfig) -> Path:
    return Path(cfg.store_path_root_dir) / "commitlog"


def segment_path(cfg: StoreConfig, offset: int) -> Path:
    return commitlog_dir(cfg) / f"{offset:020d}"


def raw_at(cfg: StoreConfig, offset: int, n: int) -> bytes:
    """Bytes of the CommitLog at a global offset, read from the segment file itself."""
    start = offset - offset % SEG
    with open(segment_path(cfg, start), "rb") as f:
        f.seek(offset - start)
        return f.read(n)


def header_at(cfg: StoreConfig, offset: int) -> tuple[int, int]:
    return struct.unpack(">ii", raw_at(cfg, offset, 8))


def segment_files(cfg: StoreConfig) -> list[Path]:
    return sorted(p for p in commitlog_dir(cfg).iterdir() if not p.name.endswith(".tmp"))


# -- end of segment -------------------------------------------------------------------------------


@pytest.mark.parametrize("spare", [0, 1, 4, 7, 8, 9, 300])
def test_message_stays_iff_eight_bytes_remain_after_it(tmp_path, spare):
    """A message fits a segment only if at least 8 bytes (room for a blank record) remain after it;
    otherwise the segment ends with a blank record and the message starts the next segment."""
    cfg = config(tmp_path)
    first_size = 1000
    second_size = SEG - first_size - spare
    with MessageStore(cfg) as store:
        r1 = store.put_message(msg(first_size, 1))
        assert r1.status is PutMessageStatus.PUT_OK
        assert (r1.wrote_offset, r1.wrote_bytes) == (0, first_size)
        r2 = store.put_message(msg(second_size, 2))
        assert r2.status is PutMessageStatus.PUT_OK
        assert r2.wrote_bytes == second_size
        assert r2.queue_offset == 1
        if spare >= 8:
            assert r2.wrote_offset == first_size
            assert store.max_offset == SEG - spare
            blank_at, blank_size = SEG - spare, spare
        else:
            assert r2.wrote_offset == SEG, "the message must start the next segment"
            assert store.max_offset == SEG + second_size
            blank_at, blank_size = first_size, SEG - first_size
            assert header_at(cfg, blank_at) == (blank_size, BLANK_MAGIC)
        assert store.read_message(r2.wrote_offset).body == body_of_total(second_size, 2)

        # The next message goes wherever there is room; where a segment ends early it carries a blank.
        r3 = store.put_message(msg(400, 3))
        assert r3.status is PutMessageStatus.PUT_OK
        if spare >= 8:
            assert r3.wrote_offset == SEG
            assert header_at(cfg, blank_at) == (blank_size, BLANK_MAGIC)
        else:
            assert r3.wrote_offset == SEG + second_size
        assert [m.body for m in store.iter_messages()] == [
            body_of_total(first_size, 1),
            body_of_total(second_size, 2),
            body_of_total(400, 3),
        ]
        assert [m.queue_offset for m in store.iter_messages()] == [0, 1, 2]
        end = store.max_offset

    # The blank survives a restart and recovery walks over it.
    with MessageStore(cfg) as store:
        assert store.recovery.truncated_from is None
        assert store.max_offset == end
        assert [m.physical_offset for m in store.iter_messages()] == [0, r2.wrote_offset, r3.wrote_offset]
        assert store.max_queue_offset(TOPIC, 0) == 3


def test_restart_with_exactly_eight_bytes_left_in_the_segment(tmp_path):
    cfg = config(tmp_path)
    with MessageStore(cfg) as store:
        store.put_message(msg(SEG - 8, 1))
    with MessageStore(cfg) as store:
        assert store.recovery.truncated_from is None
        assert store.max_offset == SEG - 8
        r = store.put_message(msg(100, 2))
        assert (r.wrote_offset, r.queue_offset) == (SEG, 1)
        assert header_at(cfg, SEG - 8) == (8, BLANK_MAGIC)
    with MessageStore(cfg) as store:
        assert [m.physical_offset for m in store.iter_messages()] == [0, SEG]


def test_blank_record_is_spec_layout_and_rest_of_segment_is_zero(tmp_path):
    cfg = config(tmp_path)
    with MessageStore(cfg) as store:
        store.put_message(msg(3000, 1))
        r = store.put_message(msg(1500, 2))
        assert r.wrote_offset == SEG
    blank = raw_at(cfg, 3000, SEG - 3000)
    assert struct.unpack(">ii", blank[:8]) == (SEG - 3000, BLANK_MAGIC)
    assert blank[8:] == bytes(len(blank) - 8)
    # The message at the next segment start is a whole, spec-encoded message.
    head = raw_at(cfg, SEG, 36)
    total, magic = struct.unpack_from(">ii", head, 0)
    (physical,) = struct.unpack_from(">q", head, 28)
    assert (total, magic, physical) == (1500, MESSAGE_MAGIC, SEG)


def test_batch_that_does_not_fit_moves_whole_to_next_segment(tmp_path):
    cfg = config(tmp_path)
    with MessageStore(cfg) as store:
        store.put_message(msg(SEG - 600, 1))
        # The first message of the batch alone would fit; the batch as a whole does not.
        batch = [msg(250, 10 + i) for i in range(3)]
        r = store.put_messages(batch)
        assert r.status is PutMessageStatus.PUT_OK
        assert (r.wrote_offset, r.wrote_bytes, r.msg_num, r.queue_offset) == (SEG, 750, 3, 1)
        assert header_at(cfg, SEG - 600) == (600, BLANK_MAGIC)
        offsets = [decode_msg_id(i)[1] for i in r.msg_ids]
        assert offsets == [SEG, SEG + 250, SEG + 500]
        assert r.msg_id == ",".join(r.msg_ids)
        for i, offset in enumerate(offsets):
            m = store.read_message(offset)
            assert (m.body, m.queue_offset, m.physical_offset) == (batch[i].body, 1 + i, offset)

        # A batch that leaves exactly 8 bytes stays in its segment, contiguous.
        rest = SEG - 750 - 8
        r2 = store.put_messages([msg(rest - 100, 20), msg(100, 21)])
        assert r2.status is PutMessageStatus.PUT_OK
        assert (r2.wrote_offset, r2.queue_offset) == (SEG + 750, 4)
        assert store.max_offset == 2 * SEG - 8
        r3 = store.put_message(msg(100, 22))
        assert r3.wrote_offset == 2 * SEG
        assert header_at(cfg, 2 * SEG - 8) == (8, BLANK_MAGIC)
        assert [m.queue_offset for m in store.iter_messages()] == list(range(7))


def test_largest_message_a_segment_takes_is_size_minus_eight(tmp_path):
    cfg = config(tmp_path)
    with MessageStore(cfg) as store:
        store.put_message(msg(100, 1))
        r = store.put_message(msg(SEG - 8, 2))
        assert r.status is PutMessageStatus.PUT_OK
        assert (r.wrote_offset, r.wrote_bytes) == (SEG, SEG - 8)
        assert header_at(cfg, 100) == (SEG - 100, BLANK_MAGIC)
        assert store.read_message(SEG).body == body_of_total(SEG - 8, 2)
        assert store.put_message(msg(100, 3)).wrote_offset == 2 * SEG


def _data_snapshot(cfg: StoreConfig, store: MessageStore) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in segment_files(cfg) if int(p.name) < store.max_offset}


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda: [msg(SEG - 7)], id="one-byte-over-segment-limit"),
        pytest.param(lambda: [msg(SEG)], id="segment-size"),
        pytest.param(lambda: [msg(3 * SEG)], id="three-segments"),
        pytest.param(lambda: [msg(1400, i) for i in range(3)], id="batch-over-segment"),
    ],
)
def test_message_larger_than_a_segment_is_illegal_and_writes_nothing(tmp_path, build):
    cfg = config(tmp_path)
    with MessageStore(cfg) as store:
        store.put_message(msg(500, 1))
        before_offset = store.max_offset
        before_bytes = _data_snapshot(cfg, store)
        messages = build()
        r = store.put_messages(messages) if len(messages) > 1 else store.put_message(messages[0])
        assert r.status is PutMessageStatus.MESSAGE_ILLEGAL
        assert r.reason
        assert store.max_offset == before_offset
        assert store.max_queue_offset(TOPIC, 0) == 1
        assert _data_snapshot(cfg, store) == before_bytes
        ok = store.put_message(msg(300, 2))
        assert (ok.status, ok.wrote_offset, ok.queue_offset) == (PutMessageStatus.PUT_OK, 500, 1)
        assert len(list(store.iter_messages())) == 2


def test_max_message_size_bounds_bodies_and_batches(tmp_path):
    # maxMessageSize limits the body, as clients count it; the record's header comes on top.
    cfg = config(tmp_path, max_message_size=1024)
    with MessageStore(cfg) as store:
        exact = store.put_message(Message(TOPIC, 0, b"e" * 1024))
        assert exact.status is PutMessageStatus.PUT_OK and exact.wrote_bytes > 1024
        end = store.max_offset
        over = store.put_message(Message(TOPIC, 0, b"o" * 1025))
        assert over.status is PutMessageStatus.MESSAGE_ILLEGAL
        assert "1024" in over.reason
        batch = store.put_messages([Message(TOPIC, 0, b"b" * 400) for _ in range(3)])  # 1200 bytes of bodies
        assert batch.status is PutMessageStatus.MESSAGE_ILLEGAL
        assert store.max_offset == end
        assert store.max_queue_offset(TOPIC, 0) == 1
        assert store.put_messages([msg(400, 7), msg(400, 8)]).status is PutMessageStatus.PUT_OK


# -- segment files ------------------------------------------------------------------------------


def test_segment_files_are_named_by_offset_and_have_the_configured_size(tmp_path):
    cfg = config(tmp_path)
    rng = random.Random(7)
    results = []
    with MessageStore(cfg) as store:
        for i in range(60):
            results.append(store.put_message(msg(rng.randrange(150, 1800), i, queue_id=i % 3)))
            for p in segment_files(cfg):
                assert p.stat().st_size == SEG, f"{p.name} is not full size while the store runs"
        assert all(r.status is PutMessageStatus.PUT_OK for r in results)
        last = results[-1]
    files = segment_files(cfg)
    names = [p.name for p in files]
    assert all(len(n) == 20 and n.isdigit() for n in names)
    offsets = [int(n) for n in names]
    assert offsets == [i * SEG for i in range(len(offsets))], "segments must be contiguous from 0"
    assert offsets[-1] == last.wrote_offset - last.wrote_offset % SEG, "no segment beyond the data"
    assert all(p.stat().st_size == SEG for p in files)
    assert not [p for p in commitlog_dir(cfg).iterdir() if p.name.endswith(".tmp")]
    with MessageStore(cfg) as store:
        assert [m.physical_offset for m in store.iter_messages()] == [r.wrote_offset for r in results]


def test_next_segment_is_prepared_ahead(tmp_path):
    cfg = config(tmp_path)
    with MessageStore(cfg) as store:
        store.put_message(msg(3000, 1))
        # Writing into segment 0 prepares segment 1 before anything needs it.
        assert store.queue.allocator.wait_prepared(SEG, 10), "segment 1 was not prepared"
        assert segment_path(cfg, SEG).stat().st_size == SEG
        assert store.max_offset == 3000
        # Crossing into segment 1 prepares segment 2.
        r = store.put_message(msg(2000, 2))
        assert r.wrote_offset == SEG
        assert store.queue.allocator.wait_prepared(2 * SEG, 10), "segment 2 was not prepared"
        assert segment_path(cfg, 2 * SEG).stat().st_size == SEG
        assert store.max_offset == SEG + 2000
        assert not segment_path(cfg, 3 * SEG).exists()
        # The prepared segment is the one the next crossing uses: it is empty and takes the data.
        r = store.put_message(msg(2500, 3))
        assert r.wrote_offset == 2 * SEG
        assert store.read_message(2 * SEG).body == body_of_total(2500, 3)
    # A segment prepared ahead but never written is not left behind.
    assert not segment_path(cfg, 3 * SEG).exists()
    # After a restart the segment after the last one is prepared ahead too.
    with MessageStore(cfg) as store:
        assert store.queue.allocator.wait_prepared(3 * SEG, 10), "segment 3 was not prepared after a restart"
        assert segment_path(cfg, 3 * SEG).stat().st_size == SEG
        assert store.max_offset == 2 * SEG + 2500
        r = store.put_message(msg(2000, 4))
        assert r.wrote_offset == 3 * SEG


# -- transient store pool -------------------------------------------------------------------------


def _transient_config(tmp_path: Path, **kw) -> StoreConfig:
    cfg = config(
        tmp_path,
        flush_disk_type="ASYNC_FLUSH",
        transient_store_pool_enable=True,
        commit_interval_commit_log_ms=20,
        commit_commit_log_thorough_interval_ms=20,
        **kw,
    )
    assert cfg.transient_store_pool_active
    return cfg


def _put_random(store: MessageStore, rng: random.Random, n: int, seed0: int) -> list[tuple[int, int, bytes]]:
    out = []
    for i in range(n):
        qid = rng.randrange(3)
        m = msg(rng.randrange(120, 1500), seed0 + i, queue_id=qid)
        r = store.put_message(m)
        assert r.status is PutMessageStatus.PUT_OK, r
        out.append((r.wrote_offset, r.queue_offset, m.body))
    return out


def _check_all(store: MessageStore, written: list[tuple[int, int, bytes]]) -> None:
    got = [(m.physical_offset, m.queue_offset, m.body) for m in store.iter_messages()]
    assert got == written


def test_transient_store_pool_round_trip_across_segments_and_restarts(tmp_path):
    cfg = _transient_config(tmp_path)
    rng = random.Random(11)
    with MessageStore(cfg) as store:
        written = _put_random(store, rng, 40, 0)
        end = written[-1][0] + len(written[-1][2]) + encoded_size(0)
        assert store.wait_readable(end, 10), "the write buffer was not committed"
        assert store.max_offset == end
        for offset, queue_offset, body in written:
            m = store.read_message(offset)
            assert (m.queue_offset, m.body) == (queue_offset, body)
        assert written[-1][0] >= 3 * SEG, "the data must cross several segments"
    with MessageStore(cfg) as store:
        assert store.recovery.truncated_from is None
        _check_all(store, written)
        written += _put_random(store, rng, 30, 100)
    with MessageStore(cfg) as store:
        _check_all(store, written)
        queues = {}
        for m in store.iter_messages():
            queues.setdefault(m.queue_id, []).append(m.queue_offset)
        assert all(v == list(range(len(v))) for v in queues.values())
    # The bytes on disk are the plain format: a store without the pool reads the same.
    with MessageStore(config(tmp_path)) as store:
        _check_all(store, written)


class _StalledPwrite:
    """Stand-in for the `os` module inside store.mapped_file whose pwrite (the commit of a write
    buffer into the file) blocks until released."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()

    def __getattr__(self, name):
        return getattr(os, name)

    def pwrite(self, fd, data, offset):
        self.entered.set()
        self.release.wait(30)
        return os.pwrite(fd, data, offset)


def test_transient_pool_every_message_below_max_offset_is_readable(tmp_path, monkeypatch):
    """Readers trust max_offset: every message below it must be readable, also while the write
    buffer of an earlier segment is not committed yet and a later segment (the pool being
    exhausted) is written directly."""
    cfg = _transient_config(tmp_path, transient_store_pool_size=1)
    stall = _StalledPwrite()
    with MessageStore(cfg) as store:
        monkeypatch.setattr(mapped_file_module, "os", stall)
        try:
            results = []
            for i in range(6):  # 3 per segment: the 4th crosses into segment 1
                r = store.put_message(msg(1300, i))
                assert r.status is PutMessageStatus.PUT_OK
                results.append(r)
            assert results[-1].wrote_offset > SEG
            visible = store.max_offset
            unreadable = []
            for i, r in enumerate(results):
                if r.next_offset <= visible:
                    try:
                        assert store.read_message(r.wrote_offset).body == body_of_total(1300, i)
                    except Exception as exc:  # noqa: BLE001 - collected for the message below
                        unreadable.append((r.wrote_offset, repr(exc)))
            assert not unreadable, f"max_offset={visible}, yet these messages below it cannot be read: {unreadable}"
        finally:
            stall.release.set()
        # Once commits go through, everything becomes visible, in order, and readable.
        assert store.wait_readable(results[-1].next_offset, 10), "the stalled commit did not finish"
        assert store.max_offset == results[-1].next_offset
        for i, r in enumerate(results):
            assert store.read_message(r.wrote_offset).body == body_of_total(1300, i)
        monkeypatch.undo()
    with MessageStore(cfg) as store:
        assert [m.physical_offset for m in store.iter_messages()] == [r.wrote_offset for r in results]


def test_an_append_of_a_page_or_more_is_in_the_file_and_in_the_mapping(tmp_path):
    """Appends from a page on go through pwrite, the smaller ones through the mapping: both are
    read back the same through either, in order, before and after a restart."""
    cfg = small_store_config(tmp_path / "store", 256 * 1024)
    sizes = [mapped_file_module.PWRITE_MIN_BYTES * 3, 300, mapped_file_module.PWRITE_MIN_BYTES, 1200]
    with MessageStore(cfg) as store:
        results = [store.put_message(Message(TOPIC, 0, body_of_total(size, i))) for i, size in enumerate(sizes)]
        assert [r.status for r in results] == [PutMessageStatus.PUT_OK] * len(sizes)
        segment = store.commit_log.queue.last
        for i, r in enumerate(results):
            in_file = os.pread(segment.fd, r.wrote_bytes, r.wrote_offset)
            assert bytes(segment.buf[r.wrote_offset : r.next_offset]) == in_file
            assert store.read_message(r.wrote_offset).body == body_of_total(sizes[i], i)
    with MessageStore(cfg) as store:
        assert [m.body for m in store.iter_messages()] == [body_of_total(s, i) for i, s in enumerate(sizes)]


class _FailingPwrite:
    """`os` for store.log.mapped_file whose pwrite fails once with EIO after writing nothing."""

    def __init__(self) -> None:
        self.failed = False

    def __getattr__(self, name):
        return getattr(os, name)

    def pwrite(self, fd, data, offset):
        if not self.failed:
            self.failed = True
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return os.pwrite(fd, data, offset)


def test_a_failed_write_stores_nothing_and_leaves_no_hole_in_the_queue(tmp_path, monkeypatch):
    cfg = small_store_config(tmp_path / "store", 256 * 1024)
    big = mapped_file_module.PWRITE_MIN_BYTES * 2
    with MessageStore(cfg) as store:
        failing = _FailingPwrite()
        monkeypatch.setattr(mapped_file_module, "os", failing)
        refused = store.put_message(Message(TOPIC, 0, body_of_total(big, 1)))
        assert failing.failed
        assert refused.status is PutMessageStatus.CREATE_MAPPED_FILE_FAILED
        assert store.max_offset == 0
        stored = store.put_message(Message(TOPIC, 0, body_of_total(big, 2)))
        assert stored.status is PutMessageStatus.PUT_OK
        assert (stored.wrote_offset, stored.queue_offset) == (0, 0)
        monkeypatch.undo()
    with MessageStore(cfg) as store:
        assert [m.body for m in store.iter_messages()] == [body_of_total(big, 2)]
