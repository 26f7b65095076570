"""The pipeline's vectorised rebuild against the broker's own dispatcher: for CommitLogs with
every kind of record the dispatch treats differently (transactions, delayed messages, UNIQ_KEYs,
several or repeated keys, non-ASCII keys and tags, IPv6 hosts, queue-offset gaps, segments ending
in blanks, a corrupt record), ConsumeQueue and IndexFile trees, names included, must be the same
bytes as `store.dispatch.Dispatcher` feeding the store's consumers writes. No Spark, no sockets."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.rebuild import rebuild_store
from store.config import DEFAULT_MESSAGE_DELAY_LEVEL
from store.index.index_file import IndexService
from store.log.codec import encode_blank, encode_message
from store.log.mapped_file_queue import MappedFileQueue
from store.message import Message
from store.queue.consume_queue import ConsumeQueueTable
from store.queue.dispatch import Dispatcher, index_consumer, queue_consumer
from store.schedule import SCHEDULE_TOPIC, delivery_time_ms, parse_delay_levels
from store.stats import StoreStats

SEG = 8192
CQ_FILE = 20 * 7  # seven units a file: queues roll often
SLOTS = 5
ENTRIES = 9  # eight entries a file: IndexFiles roll often

keys_text = st.lists(st.sampled_from(["a", "b", "ключ", "", "k1", "k2"]), max_size=4).map(" ".join)
# Written under these names, renamed to the real ones in the record's bytes: a property stored
# twice, which no Message can carry (the codec's dict keeps the last pair).
TWICE = {"UNIQ_KEX": b"UNIQ_KEY", "KEYX": b"KEYS", "TAGX": b"TAGS"}
message = st.builds(
    lambda topic, queue, body, tags, keys, uniq, tx, delay, v6, gap, again: (
        topic,
        queue,
        body,
        {
            **({"TAGS": tags} if tags is not None else {}),
            **({"KEYS": keys} if keys is not None else {}),
            **({"UNIQ_KEY": uniq} if uniq is not None else {}),
            **({"DELAY": delay} if topic == SCHEDULE_TOPIC else {}),
            **again,
        },
        tx,
        v6,
        gap,
    ),
    st.sampled_from(["TA", "TB", SCHEDULE_TOPIC]),
    st.integers(0, 2),
    st.binary(max_size=300),
    st.one_of(st.none(), st.sampled_from(["", "t1", "tag two", "ярлык"])),
    st.one_of(st.none(), keys_text),
    st.one_of(st.none(), st.sampled_from(["", "a", "U1", "U2"])),
    st.sampled_from([0, 4, 8, 12]),  # no transaction, prepared, commit, rolled back
    st.sampled_from(["1", "3", "18", "99", "x"]),
    st.booleans(),
    st.sampled_from([0, 0, 0, 2]),  # queue-offset gaps make fillers
    st.dictionaries(st.sampled_from(sorted(TWICE)), st.sampled_from(["", "b", "U3", "k1 k2"]), max_size=2),
)


def write_log(root: Path, messages, corrupt_at: int | None) -> None:
    segments: dict[int, bytearray] = {0: bytearray(SEG)}
    offset = 0
    next_queue_offset: dict[tuple[str, int], int] = {}
    for i, (topic, queue, body, props, tx, v6, gap) in enumerate(messages):
        msg = Message(
            topic, queue, body, props, sys_flag=tx, born_host=("::1", 5) if v6 else ("10.0.0.1", 5), born_timestamp_ms=0
        )
        enc = encode_message(
            msg, default_store_host=("127.0.0.1", 10911), max_message_size=1 << 20, now_ms=1_700_000_000_000
        )
        start = offset - offset % SEG
        if offset - start + enc.size + 8 > SEG:
            segments[start][offset - start : offset - start + 8] = encode_blank(SEG - (offset - start))
            offset = start + SEG
            start = offset
            segments[start] = bytearray(SEG)
        qkey = (topic, queue)
        queue_offset = next_queue_offset.get(qkey, 0) + gap
        next_queue_offset[qkey] = queue_offset + (0 if tx in (4, 12) else 1)
        enc.stamp(offset, queue_offset, 1_700_000_000_000 + i * 1500)
        data = bytearray(enc.buf)
        for written, real in TWICE.items():
            data = data.replace(b"\x02" + written.encode() + b"\x01", b"\x02" + real + b"\x01")
        if corrupt_at == i:
            data[-1] = 0x41  # properties no longer end with their separator (or a topic byte goes)
        segments[start][offset - start : offset - start + enc.size] = data
        offset += enc.size
    (root / "commitlog").mkdir(parents=True)
    for start, seg in segments.items():
        (root / "commitlog" / f"{start:020d}").write_bytes(bytes(seg))


def clock():
    now = [1_700_000_000_000]

    def tick() -> int:
        now[0] += 7
        return now[0]

    return tick


def dispatcher_rebuild(store: Path, out: Path) -> int | None:
    """What the broker's dispatcher writes from this CommitLog; the offset where it stopped."""
    log = MappedFileQueue(store / "commitlog", SEG)
    log.load()
    queues = ConsumeQueueTable(out, CQ_FILE)
    indexes = IndexService(out, hash_slot_num=SLOTS, index_num=ENTRIES, clock_ms=clock())
    indexes.load(last_exit_ok=True)
    levels = parse_delay_levels(DEFAULT_MESSAGE_DELAY_LEVEL)
    dispatcher = Dispatcher(log, 0, lambda: log.max_offset, lambda level, ts: delivery_time_ms(level, ts, levels))
    dispatcher.add_consumer(queue_consumer(queues, StoreStats(lambda: 0)))
    dispatcher.add_consumer(index_consumer(indexes))
    while dispatcher.dispatch_available():
        pass
    queues.close()
    indexes.close()
    log.close()
    return dispatcher.failed_at


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(message, min_size=1, max_size=60), st.data())
def test_rebuild_writes_what_the_dispatcher_writes(messages, data):
    corrupt_at = data.draw(st.one_of(st.none(), st.integers(0, len(messages) - 1)))
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        write_log(base / "store", messages, corrupt_at)
        failed_at = dispatcher_rebuild(base / "store", base / "want")
        report = rebuild_store(
            base / "store",
            base / "got",
            consume_queue_file_size=CQ_FILE,
            hash_slot_num=SLOTS,
            index_num=ENTRIES,
            clock_ms=clock(),
        )
        assert tree(base / "got") == tree(base / "want")
        assert report.stopped_at == failed_at
        assert report.ok == (failed_at is None)


def test_a_bad_record_stops_the_rebuild_with_its_reason(tmp_path):
    messages = [("TA", 0, b"x" * 20, {"KEYS": f"k{i}"}, 0, False, 0) for i in range(30)]
    write_log(tmp_path / "store", messages, corrupt_at=12)
    failed_at = dispatcher_rebuild(tmp_path / "store", tmp_path / "want")
    report = rebuild_store(tmp_path / "store", tmp_path / "out", consume_queue_file_size=CQ_FILE)
    assert report.messages == 12 and report.stopped_at == failed_at is not None
    assert report.reason == "properties do not end with a separator" and not report.ok
