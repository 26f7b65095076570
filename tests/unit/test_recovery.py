"""CommitLog recovery: torn tails are cut, durable data is never silently dropped, the segment
layout is checked at load.

Two levels: the sans-IO scan (`scan_commitlog`, `choose_scan_start`, `check_recoverable`) over
bytearrays built here from docs/design.md §3 with an encoder of our own, and whole stores written by
MessageStore, damaged on disk, and reopened.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import socket
import struct
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store import (
    Message,
    MessageStore,
    PutMessageStatus,
    SegmentLayoutError,
    StoreConfig,
    StoreCorruptedError,
)
from store.log.commitlog_scan import check_recoverable, choose_scan_start, scan_commitlog
from store.recovery.checkpoint import CheckpointState, StoreCheckpoint, decode_checkpoint, encode_checkpoint

MESSAGE_MAGIC = -626843481
BLANK_MAGIC = -875286124
SEG = 4096
STORE_HOST = socket.inet_aton("127.0.0.1") + struct.pack(">i", 10911)
BORN_HOST = socket.inet_aton("10.1.2.3") + struct.pack(">i", 40000)

# -- a CommitLog written from the spec --------------------------------------------------------------


def spec_message(
    *,
    topic: str,
    queue_id: int,
    body: bytes,
    properties: dict[str, str] | None = None,
    queue_offset: int,
    physical_offset: int,
    store_ts: int,
    sys_flag: int = 0,
) -> bytes:
    """One message in RocketMQ's CommitLog layout (IPv4 hosts)."""
    props = "".join(f"{k}\x01{v}\x02" for k, v in (properties or {}).items()).encode()
    topic_b = topic.encode()
    total = 48 + 8 + 8 + 8 + 4 + 8 + 4 + len(body) + 1 + len(topic_b) + 2 + len(props)
    return b"".join(
        [
            struct.pack(
                ">iiiiiqqiq",
                total,
                MESSAGE_MAGIC,
                zlib.crc32(body) & 0x7FFFFFFF,
                queue_id,
                0,
                queue_offset,
                physical_offset,
                sys_flag,
                store_ts - 5,
            ),
            BORN_HOST,
            struct.pack(">q", store_ts),
            STORE_HOST,
            struct.pack(">iqi", 0, 0, len(body)),
            body,
            struct.pack(">B", len(topic_b)),
            topic_b,
            struct.pack(">h", len(props)),
            props,
        ]
    )


class Log:
    """Messages laid out into fixed-size segments as the spec says: a message that does not leave
    8 bytes in its segment moves to the next, and the segment ends with a blank record."""

    def __init__(self, segment_size: int) -> None:
        self.segment_size = segment_size
        self.flat = bytearray(segment_size)
        self.records: list[tuple[str, int, int]] = []  # (kind, start, size)
        self.messages: list[dict] = []
        self.end = 0
        self._queues: dict[tuple[str, int], int] = {}

    def add(self, topic: str, queue_id: int, body: bytes, properties=None, sys_flag: int = 0) -> int:
        props_len = len("".join(f"{k}\x01{v}\x02" for k, v in (properties or {}).items()).encode())
        size = 91 + len(body) + len(topic.encode()) + props_len
        assert size + 8 <= self.segment_size
        remaining = self.segment_size - self.end % self.segment_size
        if size + 8 > remaining:
            struct.pack_into(">ii", self.flat, self.end, remaining, BLANK_MAGIC)
            self.records.append(("blank", self.end, remaining))
            self.end += remaining
        segment_end = (self.end // self.segment_size + 1) * self.segment_size
        if len(self.flat) < segment_end:
            self.flat += bytes(segment_end - len(self.flat))
        key = (topic, queue_id)
        prepared = sys_flag & 12 in (4, 12)
        queue_offset = 0 if prepared else self._queues.get(key, 0)
        if not prepared:
            self._queues[key] = queue_offset + 1
        raw = spec_message(
            topic=topic,
            queue_id=queue_id,
            body=body,
            properties=properties,
            queue_offset=queue_offset,
            physical_offset=self.end,
            store_ts=1_700_000_000_000 + len(self.messages),
            sys_flag=sys_flag,
        )
        assert len(raw) == size
        self.flat[self.end : self.end + size] = raw
        self.records.append(("message", self.end, size))
        self.messages.append(
            dict(offset=self.end, size=size, topic=topic, queue_id=queue_id, body=body, queue_offset=queue_offset)
        )
        self.end += size
        return self.end - size

    def segments(self, flat: bytearray | None = None) -> list[tuple[int, bytearray]]:
        flat = self.flat if flat is None else flat
        n = self.segment_size
        return [(i, bytearray(flat[i : i + n])) for i in range(0, len(flat), n)]


def scan(log: Log, flat: bytearray | None = None, **kw):
    return scan_commitlog(log.segments(flat), log.segment_size, 0, **kw)


# -- store helpers ----------------------------------------------------------------------------------


def config(root: Path, **kw) -> StoreConfig:
    kw.setdefault("mapped_file_size_commit_log", SEG)
    # Small ConsumeQueue and IndexFile geometry, as small segments: tests copy and scan whole stores.
    kw.setdefault("mapped_file_size_consume_queue", 1024 * 20)
    kw.setdefault("max_hash_slot_num", 512)
    kw.setdefault("max_index_num", 2048)
    return StoreConfig(store_path_root_dir=str(root), **kw)


def segment_file(root: Path, offset: int) -> Path:
    return root / "commitlog" / f"{offset - offset % SEG:020d}"


def patch_file(root: Path, offset: int, data: bytes) -> None:
    """Overwrite CommitLog bytes at a global offset (within one segment)."""
    path = segment_file(root, offset)
    with open(path, "r+b") as f:
        f.seek(offset % SEG)
        f.write(data)


def read_log(root: Path, offset: int, n: int) -> bytes:
    with open(segment_file(root, offset), "rb") as f:
        f.seek(offset % SEG)
        return f.read(n)


def simulate_crash(root: Path, flushed_offset: int) -> None:
    """Make a cleanly shut down store look like one that crashed with `flushed_offset` durable."""
    (root / "abort").touch()
    checkpoint = StoreCheckpoint(root / "checkpoint")
    state = checkpoint.load()
    assert checkpoint.trusted
    checkpoint.update(physic_flushed_offset=flushed_offset)
    checkpoint.persist()
    checkpoint.close()
    expected = dataclasses.replace(state, physic_flushed_offset=flushed_offset)
    assert (root / "checkpoint").read_bytes() == encode_checkpoint(expected)


def snapshot(root: Path) -> dict[str, bytes]:
    files = {p.name: p.read_bytes() for p in sorted((root / "commitlog").iterdir())}
    files["checkpoint"] = (root / "checkpoint").read_bytes()
    return files


def body(i: int, n: int = 24) -> bytes:
    return bytes((i * 13 + j * 7 + 1) % 256 for j in range(n))


def write_store(root: Path, messages: list[Message]) -> list:
    with MessageStore(config(root)) as store:
        results = [store.put_message(m) for m in messages]
    assert all(r.status is PutMessageStatus.PUT_OK for r in results)
    return results


# -- torn last message, every byte ----------------------------------------------------------------


@pytest.mark.parametrize("placement", ["mid-segment", "first-in-segment"])
def test_recovery_cuts_last_message_torn_at_any_byte(tmp_path, placement):
    """Write N messages, then for every byte of the last message: zero it from there to its end,
    mark the store crashed with a checkpoint below the last message, reopen. The last message must
    be gone, the others intact, and the log must continue where the last message began."""
    src = tmp_path / "src"
    messages = [Message("TornTopic", i % 2, body(i), properties={"KEYS": f"k{i}", "TAGS": "t"}) for i in range(5)]
    if placement == "first-in-segment":
        filler = SEG - 4 * 140 - 20
        messages[3] = Message("TornTopic", 1, body(3, filler), properties={"KEYS": "k3", "TAGS": "t"})
    results = write_store(src, messages)
    last = results[-1]
    start, end = last.wrote_offset, last.next_offset
    if placement == "first-in-segment":
        assert start == SEG
    else:
        assert start % SEG != 0
    survivors = [(r.wrote_offset, m.body, r.queue_offset) for r, m in zip(results[:-1], messages[:-1])]

    failures = []
    for cut in range(start, end):
        root = tmp_path / f"cut{cut}"
        shutil.copytree(src, root)
        patch_file(root, cut, bytes(end - cut))
        simulate_crash(root, flushed_offset=start)
        try:
            with MessageStore(config(root)) as store:
                report = store.recovery
                got = [(m.physical_offset, m.body, m.queue_offset) for m in store.iter_messages()]
                problems = []
                if got != survivors:
                    problems.append(f"messages after recovery: {[g[0] for g in got]}")
                if store.max_offset != start:
                    problems.append(f"max_offset {store.max_offset} != {start}")
                if not report.abnormal:
                    problems.append("recovery did not see the crash")
                if report.end_offset != start:
                    problems.append(f"report.end_offset {report.end_offset}")
                if store.max_queue_offset("TornTopic", messages[-1].queue_id) != last.queue_offset:
                    problems.append("the last message still counts in its queue")
                if not problems:
                    again = store.put_message(messages[-1])
                    if (again.status, again.wrote_offset, again.queue_offset) != (
                        PutMessageStatus.PUT_OK,
                        start,
                        last.queue_offset,
                    ):
                        problems.append(f"next put: {again}")
                    elif store.read_message(start).body != messages[-1].body:
                        problems.append("next put does not read back")
                if problems:
                    failures.append((cut - start, problems))
        except Exception as exc:  # noqa: BLE001 - collected for the report below
            failures.append((cut - start, [repr(exc)]))
        shutil.rmtree(root)
    assert not failures, (
        f"last message is {end - start} bytes at {start}; {len(failures)} cut positions (bytes into "
        f"it) recovered wrongly: {[at for at, _ in failures]}; first: {failures[0][1][0][:300]}"
    )


def test_recovery_reports_the_cut_and_zeroes_the_torn_bytes(tmp_path):
    root = tmp_path / "s"
    results = write_store(root, [Message("T", 0, body(i, 60)) for i in range(4)])
    start = results[-1].wrote_offset
    patch_file(root, start + 40, bytes(results[-1].wrote_bytes - 40))
    simulate_crash(root, flushed_offset=start)
    with MessageStore(config(root)) as store:
        report = store.recovery
        assert report.abnormal
        assert (report.end_offset, report.truncated_from) == (start, start)
        assert report.reason
        assert report.messages_scanned == 3
        assert read_log(root, start, SEG - start % SEG) == bytes(SEG - start % SEG)
        assert store.max_queue_offset("T", 0) == 3


# -- the scan, sans-IO ------------------------------------------------------------------------------


def _five(segment_size: int = 1024) -> Log:
    log = Log(segment_size)
    for i in range(5):
        log.add("ScanTopic", i % 2, body(i, 150), {"KEYS": f"key-{i}"})
    return log


def test_scan_walks_a_spec_written_log_across_blank_records():
    log = _five(512)
    assert any(kind == "blank" for kind, _, _ in log.records)
    seen = []
    result = scan(log, on_message=lambda offset, rec: seen.append((offset, rec.queue_id, rec.queue_offset, rec.topic)))
    assert result.clean
    assert (result.end_offset, result.messages, result.bad_offset) == (log.end, 5, None)
    assert seen == [(m["offset"], m["queue_id"], m["queue_offset"], "ScanTopic") for m in log.messages]
    assert result.last_store_timestamp_ms == 1_700_000_000_004
    check_recoverable(result, log.end)


def test_scan_truncates_a_torn_tail():
    log = _five()
    last = log.messages[-1]
    flat = bytearray(log.flat)
    cut = last["offset"] + 30
    flat[cut : last["offset"] + last["size"]] = bytes(last["offset"] + last["size"] - cut)
    result = scan(log, flat)
    assert (result.end_offset, result.messages) == (last["offset"], 4)
    assert result.bad_offset == last["offset"]
    # The torn record's own surviving bytes are non-zero data past the end (its TOTALSIZE is small,
    # so its first non-zero byte is the third).
    assert result.data_after_end == last["offset"] + 2
    assert not result.clean
    check_recoverable(result, last["offset"])  # nothing durable was lost: no error
    with pytest.raises(StoreCorruptedError) as info:
        check_recoverable(result, last["offset"] + 1)
    assert info.value.offset == last["offset"]

    # A record whose TOTALSIZE never made it to disk is the end of the log, nothing torn.
    flat = bytearray(log.flat)
    flat[last["offset"] : last["offset"] + 4] = bytes(4)
    result = scan(log, flat)
    assert (result.end_offset, result.messages, result.bad_offset) == (last["offset"], 4, None)
    assert result.data_after_end == last["offset"] + 4


def test_scan_finds_a_flipped_body_byte():
    log = _five()
    victim = log.messages[2]
    flat = bytearray(log.flat)
    body_at = victim["offset"] + victim["size"] - len(b"key-2") - 6 - 2 - 1 - len("ScanTopic") - 10
    flat[body_at] ^= 0x40
    result = scan(log, flat)
    assert (result.end_offset, result.bad_offset, result.reason) == (
        victim["offset"],
        victim["offset"],
        "body CRC mismatch",
    )
    assert result.messages == 2
    with pytest.raises(StoreCorruptedError) as info:
        check_recoverable(result, log.end)
    assert info.value.offset == victim["offset"]
    assert str(victim["offset"]) in str(info.value)
    # Without CRC checks (or below where they start) the flip is not seen.
    assert scan(log, flat, verify_crc=False).end_offset == log.end
    after = log.messages[3]["offset"]
    assert scan(log, flat, crc_from_offset=after).end_offset == log.end
    assert scan(log, flat, crc_from_offset=victim["offset"]).end_offset == victim["offset"]


def test_choose_scan_start():
    starts = [0, 100, 200, 300, 400]
    assert choose_scan_start([], 50, normal=False) == 0
    assert choose_scan_start(starts, None, normal=False) == 0
    assert choose_scan_start(starts, None, normal=True) == 0
    assert choose_scan_start(starts, 250, normal=False) == 200
    assert choose_scan_start(starts, 400, normal=False) == 400
    assert choose_scan_start(starts, 450, normal=False) == 400
    # After a clean shutdown at most the last three segments.
    assert choose_scan_start(starts, 450, normal=True) == 200
    assert choose_scan_start(starts, 150, normal=True) == 100
    assert choose_scan_start([0, 100], 150, normal=True) == 0


# -- the property ---------------------------------------------------------------------------------

_topics = st.sampled_from(["A", "PropTopic", "x-y_z%1"])
_props = st.dictionaries(
    st.sampled_from(["KEYS", "TAGS", "UNIQ_KEY", "a"]), st.text("abcxyz019", min_size=0, max_size=12), max_size=3
)
_message = st.tuples(_topics, st.integers(0, 3), st.binary(min_size=0, max_size=300), _props)


def _expected_after_damage(log: Log, original: bytearray, damaged: bytearray) -> tuple[int, list[int]]:
    """End offset and kept messages: every record up to the first one whose checked bytes changed
    (a blank's checked bytes are its 8-byte header)."""
    kept = []
    for kind, start, size in log.records:
        checked = size if kind == "message" else 8
        if original[start : start + checked] != damaged[start : start + checked]:
            return start, kept
        if kind == "message":
            kept.append(start)
    return log.end, kept


def _build(messages) -> Log:
    log = Log(1024)
    for topic, qid, payload, props in messages:
        log.add(topic, qid, payload, props)
    return log


def _check(log: Log, damaged: bytearray) -> None:
    expected_end, kept = _expected_after_damage(log, log.flat, damaged)
    seen = []
    result = scan(log, damaged, on_message=lambda offset, rec: seen.append(offset))
    assert (result.end_offset, seen) == (expected_end, kept)
    assert result.messages == len(kept)
    check_recoverable(result, expected_end)
    if expected_end > 0:
        with pytest.raises(StoreCorruptedError):
            check_recoverable(result, expected_end + 1)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=st.lists(_message, min_size=1, max_size=25), data=st.data())
def test_property_zeroed_suffix_keeps_exactly_the_whole_messages_before_it(messages, data):
    """A crash leaves the log's bytes from some point on as zeros (unwritten pages)."""
    log = _build(messages)
    cut = data.draw(st.integers(0, log.end), label="cut")
    damaged = bytearray(log.flat)
    damaged[cut:] = bytes(len(damaged) - cut)
    _check(log, damaged)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=st.lists(_message, min_size=1, max_size=25), data=st.data())
def test_property_garbage_after_a_record_boundary_is_cut(messages, data):
    """A crash leaves a record boundary followed by a torn record: zeros and then garbage (or
    garbage straight away), possibly reaching into later segments."""
    log = _build(messages)
    boundaries = [start for _, start, _ in log.records] + [log.end]
    boundary = data.draw(st.sampled_from(boundaries), label="boundary")
    gap = data.draw(st.integers(0, 64), label="zeros before the garbage")
    garbage = data.draw(st.binary(min_size=1, max_size=2048), label="garbage")
    damaged = bytearray(log.flat)
    damaged[boundary:] = bytes(len(damaged) - boundary)
    at = min(boundary + gap, len(damaged))
    damaged[at : at + len(garbage)] = garbage[: len(damaged) - at]
    del damaged[len(log.flat) :]
    _check(log, damaged)
    result = scan(log, damaged)
    # Non-zero bytes past the end of the valid data are reported (recovery zeroes them).
    n = log.segment_size
    seg = result.end_offset - result.end_offset % n
    rest = damaged[result.end_offset : seg + n] if result.end_offset < len(damaged) else b""
    if any(rest):
        assert result.data_after_end == result.end_offset + len(rest) - len(bytes(rest).lstrip(b"\x00"))


# -- stores damaged on disk ---------------------------------------------------------------------------


@pytest.mark.parametrize("crashed", [False, True], ids=["clean-shutdown", "crash"])
def test_corruption_below_flushed_offset_refuses_to_load_and_touches_nothing(tmp_path, crashed):
    root = tmp_path / "s"
    results = write_store(root, [Message("CorruptTopic", 0, body(i, 80)) for i in range(8)])
    victim = results[5]
    body_at = victim.wrote_offset + victim.wrote_bytes - 2 - 1 - len("CorruptTopic") - 40
    original = read_log(root, body_at, 1)
    patch_file(root, body_at, bytes([original[0] ^ 0xFF]))
    if crashed:
        simulate_crash(root, flushed_offset=results[-1].next_offset)
    before = snapshot(root)
    for _ in range(2):  # the lock is released after the failure: a second try fails the same way
        with pytest.raises(StoreCorruptedError) as info:
            with MessageStore(config(root)):
                pass
        assert info.value.offset == victim.wrote_offset
        assert str(victim.wrote_offset) in str(info.value)
        assert "CRC" in str(info.value)
        assert snapshot(root) == before
    assert (root / "abort").exists() == crashed


def test_corruption_above_flushed_offset_is_truncated(tmp_path):
    root = tmp_path / "s"
    results = write_store(root, [Message("CorruptTopic", 0, body(i, 80)) for i in range(8)])
    victim = results[5]
    body_at = victim.wrote_offset + victim.wrote_bytes - 2 - 1 - len("CorruptTopic") - 40
    patch_file(root, body_at, bytes([read_log(root, body_at, 1)[0] ^ 0x01]))
    simulate_crash(root, flushed_offset=victim.wrote_offset)
    with MessageStore(config(root)) as store:
        assert store.recovery.truncated_from == victim.wrote_offset
        assert store.max_offset == victim.wrote_offset
        assert [m.body for m in store.iter_messages()] == [body(i, 80) for i in range(5)]
        assert store.max_queue_offset("CorruptTopic", 0) == 5
        r = store.put_message(Message("CorruptTopic", 0, b"after"))
        assert (r.wrote_offset, r.queue_offset) == (victim.wrote_offset, 5)
    with MessageStore(config(root)) as store:
        assert not store.recovery.abnormal
        assert [m.body for m in store.iter_messages()][-2:] == [body(4, 80), b"after"]


def test_queue_offsets_continue_after_restart(tmp_path):
    root = tmp_path / "s"
    expected: dict[tuple[str, int], int] = {}
    with MessageStore(config(root)) as store:
        for i in range(60):
            topic, qid = ("QA", "QB")[i % 2], i % 3
            sys_flag = 4 if i % 7 == 0 else (12 if i % 11 == 0 else 0)
            r = store.put_message(Message(topic, qid, body(i, 100), sys_flag=sys_flag))
            assert r.status is PutMessageStatus.PUT_OK
            if sys_flag:
                assert r.queue_offset == 0
            else:
                assert r.queue_offset == expected.get((topic, qid), 0)
                expected[(topic, qid)] = r.queue_offset + 1
        r = store.put_messages([Message("QA", 0, body(i)) for i in range(4)])
        assert r.queue_offset == expected[("QA", 0)]
        expected[("QA", 0)] += 4
        assert store.max_offset > 2 * SEG
    for crashed in (False, True):
        if crashed:
            simulate_crash(root, flushed_offset=0)
        with MessageStore(config(root)) as store:
            assert store.recovery.abnormal == crashed
            for (topic, qid), next_offset in expected.items():
                assert store.max_queue_offset(topic, qid) == next_offset, (topic, qid)
            assert store.max_queue_offset("QA", 7) == 0
            r = store.put_message(Message("QB", 1, b"more"))
            assert r.queue_offset == expected[("QB", 1)]
            expected[("QB", 1)] += 1


def test_spec_checkpoint_with_zeros_past_byte_24_is_accepted(tmp_path):
    root = tmp_path / "s"
    results = write_store(root, [Message("CpTopic", 0, body(i, 300)) for i in range(30)])
    assert results[-1].wrote_offset > 2 * SEG
    last_ts = results[-1].store_timestamp_ms
    spec = struct.pack(">qqq", last_ts, last_ts, last_ts) + bytes(4096 - 24)
    state, trusted = decode_checkpoint(spec)
    assert trusted
    assert state == CheckpointState(last_ts, last_ts, last_ts, 0, 0)
    for crashed in (False, True):
        (root / "checkpoint").write_bytes(spec)
        if crashed:
            (root / "abort").touch()
        with MessageStore(config(root)) as store:
            assert store.recovery.abnormal == crashed
            assert store.recovery.scan_start_offset == 0  # no flushed offset known: check it all
            assert store.max_offset == results[-1].next_offset
            assert [m.body for m in store.iter_messages()] == [body(i, 300) for i in range(30)]
    # What the store writes back still reads as a spec checkpoint: timestamps at 0, 8, 16.
    raw = (root / "checkpoint").read_bytes()
    assert len(raw) == 4096
    assert struct.unpack_from(">q", raw, 0)[0] == last_ts


@pytest.mark.parametrize("damage", ["missing", "torn", "short"])
def test_untrusted_checkpoint_means_checking_the_whole_log(tmp_path, damage):
    root = tmp_path / "s"
    results = write_store(root, [Message("CpTopic", 0, body(i, 300)) for i in range(30)])
    checkpoint = root / "checkpoint"
    if damage == "missing":
        checkpoint.unlink()
    elif damage == "torn":
        raw = bytearray(checkpoint.read_bytes())
        raw[26] ^= 0xFF  # inside the flushed offset: the CRC no longer matches
        checkpoint.write_bytes(bytes(raw))
        assert decode_checkpoint(bytes(raw)) == (CheckpointState(), False)
    else:
        checkpoint.write_bytes(checkpoint.read_bytes()[:30])
    (root / "abort").touch()
    with MessageStore(config(root)) as store:
        assert store.recovery.abnormal
        assert store.recovery.scan_start_offset == 0
        assert store.max_offset == results[-1].next_offset
        assert [m.body for m in store.iter_messages()] == [body(i, 300) for i in range(30)]
    state, trusted = decode_checkpoint(checkpoint.read_bytes())
    assert trusted and state.physic_flushed_offset == results[-1].next_offset


def test_commitlog_written_from_the_spec_loads_and_serves(tmp_path):
    root = tmp_path / "s"
    log = Log(SEG)
    for i in range(40):
        log.add("SpecTopic", i % 4, body(i, 200 + i), {"TAGS": f"tag{i % 3}", "KEYS": f"key{i}"})
    (root / "commitlog").mkdir(parents=True)
    for start, data in log.segments():
        (root / "commitlog" / f"{start:020d}").write_bytes(bytes(data))
    with MessageStore(config(root)) as store:
        assert store.max_offset == log.end
        for m in log.messages:
            got = store.read_message(m["offset"])
            assert (got.topic, got.queue_id, got.body, got.queue_offset) == (
                "SpecTopic",
                m["queue_id"],
                m["body"],
                m["queue_offset"],
            )
            assert got.born_host == ("10.1.2.3", 40000)
            assert got.properties["KEYS"] == f"key{log.messages.index(m)}"
        assert store.max_queue_offset("SpecTopic", 0) == 10
        r = store.put_message(Message("SpecTopic", 0, b"next"))
        assert (r.wrote_offset, r.queue_offset) == (log.end, 10)


# -- segment layout at load -----------------------------------------------------------------------


def test_unfinished_tmp_segments_are_removed_at_load(tmp_path):
    root = tmp_path / "s"
    results = write_store(root, [Message("T", 0, body(i, 1000)) for i in range(5)])
    next_segment = results[-1].wrote_offset - results[-1].wrote_offset % SEG + SEG
    tmp = root / "commitlog" / f"{next_segment:020d}.tmp"
    tmp.write_bytes(b"\x07" * 100)
    other_tmp = root / "commitlog" / f"{next_segment + SEG:020d}.tmp"
    other_tmp.write_bytes(b"")
    store = MessageStore(config(root))
    store.load()
    try:
        # Checked before start(): once started, the allocator may be creating a segment of its own.
        assert not tmp.exists() and not other_tmp.exists()
        assert store.max_offset == results[-1].next_offset
        store.start()
        store.put_message(Message("T", 0, body(9, 3000)))
        r = store.put_message(Message("T", 0, body(10, 3000)))
        assert r.wrote_offset >= next_segment
        assert store.read_message(r.wrote_offset).body == body(10, 3000)
    finally:
        store.shutdown()
    assert segment_file(root, next_segment).stat().st_size == SEG
    assert not list((root / "commitlog").glob("*.tmp"))


def _three_segments(root: Path) -> list:
    results = write_store(root, [Message("T", 0, body(i, 1500)) for i in range(8)])
    assert results[-1].wrote_offset >= 2 * SEG
    return results


def test_missing_middle_segment_is_a_layout_error(tmp_path):
    root = tmp_path / "s"
    _three_segments(root)
    segment_file(root, SEG).unlink()
    before = snapshot(root)
    for _ in range(2):  # the lock is released after the failure: a second try fails the same way
        with pytest.raises(SegmentLayoutError, match=f"{2 * SEG:020d}"):
            MessageStore(config(root)).load()
    assert snapshot(root) == before


@pytest.mark.parametrize("size", [SEG // 2, SEG + 1, 0])
def test_wrong_size_segment_is_a_layout_error(tmp_path, size):
    root = tmp_path / "s"
    _three_segments(root)
    os.truncate(segment_file(root, SEG), size)
    with pytest.raises(SegmentLayoutError, match=f"{SEG:020d}"):
        with MessageStore(config(root)):
            pass
    with pytest.raises(SegmentLayoutError):
        MessageStore(config(root)).load()


def test_segment_not_on_a_segment_boundary_is_a_layout_error(tmp_path):
    root = tmp_path / "s"
    _three_segments(root)
    os.rename(segment_file(root, 2 * SEG), root / "commitlog" / f"{2 * SEG + 10:020d}")
    with pytest.raises(SegmentLayoutError):
        MessageStore(config(root)).load()


# -- header fields the body CRC does not cover ------------------------------------------------------


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=st.lists(_message, min_size=2, max_size=25), data=st.data())
def test_property_a_damaged_queue_offset_stops_the_scan_at_its_record(messages, data):
    from store.log.commitlog_scan import QueueOffsets

    log = _build(messages)
    index = data.draw(st.integers(1, len(log.messages) - 1), label="message")
    target = log.messages[index]
    earlier_of_queue = any(
        m["topic"] == target["topic"] and m["queue_id"] == target["queue_id"] for m in log.messages[:index]
    )
    bit = data.draw(st.integers(0, 63), label="bit")
    damaged = bytearray(log.flat)
    at = target["offset"] + 20 + (7 - bit // 8)  # QUEUEOFFSET is 8 big-endian bytes at 20
    damaged[at] ^= 1 << (bit % 8)
    result = scan(log, damaged, rule=QueueOffsets())
    if earlier_of_queue or target["queue_offset"] ^ (1 << bit) >= 1 << 63:
        # A queue's later message out of sequence, or a first one with a negative offset.
        assert result.bad_offset == target["offset"] and "queue offset" in result.reason
        assert result.end_offset == target["offset"]
        with pytest.raises(StoreCorruptedError, match=str(target["offset"])):
            check_recoverable(result, log.end)
    else:
        # The first message of its queue in the walk: nothing earlier to compare it with (the
        # store compares it with its ConsumeQueue).
        assert result.bad_offset is None or result.bad_offset > target["offset"]


def test_the_first_message_of_a_queue_is_checked_against_its_consume_queue():
    from store.log.commitlog_scan import QueueOffsets

    log = Log(1024)
    first = log.add("T", 0, b"a")
    second = log.add("T", 0, b"b")
    damaged = bytearray(log.flat)
    struct.pack_into(">q", damaged, first + 20, 1)  # claims the queue offset of the next message
    indexed = {("T", 0, 0): first, ("T", 0, 1): second}
    result = scan(log, damaged, rule=QueueOffsets(lambda t, q, o: indexed.get((t, q, o))))
    assert result.bad_offset == first and f"belongs to the message at {second}" in result.reason


def test_inspect_and_recovery_name_a_damaged_queue_offset(tmp_path):
    from ops.inspect import inspect_store

    cfg = config(tmp_path)
    written = write_store(tmp_path, [Message("T", i % 2, body(i)) for i in range(12)])
    victim = written[7]
    patch_file(tmp_path, victim.wrote_offset + 20, struct.pack(">q", victim.queue_offset + 256))
    report = inspect_store(cfg.store_path_root_dir)
    assert report.problems_found
    assert report.bad_offsets[0].offset == victim.wrote_offset
    assert "queue offset" in report.bad_offsets[0].reason
    store = MessageStore(cfg)
    with pytest.raises(StoreCorruptedError, match=str(victim.wrote_offset)):
        store.load()


def test_a_short_last_segment_is_inspected_as_such_and_repair_extends_it(tmp_path):
    from ops.inspect import inspect_store
    from ops.repair import RepairError, extend_short_segment, repair

    cfg = config(tmp_path)
    written = write_store(tmp_path, [Message("T", 0, body(i, 200)) for i in range(20)])
    last = segment_file(tmp_path, written[-1].wrote_offset)
    end = written[-1].wrote_offset + written[-1].wrote_bytes
    used = end - int(last.name)
    assert used <= SEG // 2
    os.truncate(last, SEG // 2)  # half the file: the data intact
    with pytest.raises(Exception, match="bytes"):
        MessageStore(cfg).load()
    report = inspect_store(cfg.store_path_root_dir)
    assert report.short_segment == last.name and report.problems_found
    assert report.end_offset == end and report.messages == 20
    assert not any("fsynced data is missing" in b.reason for b in report.bad_offsets)
    with pytest.raises(RepairError, match="extend it first"):
        repair(cfg.store_path_root_dir, end)
    result = extend_short_segment(cfg.store_path_root_dir)
    assert result.size_after == SEG and last.stat().st_size == SEG
    assert not result.report_after.problems_found and result.report_after.messages == 20
    with MessageStore(cfg) as store:
        assert store.max_offset == end
        assert [store.read_message(r.wrote_offset).body for r in written] == [body(i, 200) for i in range(20)]
