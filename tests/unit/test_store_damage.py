"""A message damaged at rest (a body byte changed on disk) through the MessageStore API: never
served, never skipped by a read on its own, counted, and a store with one below its start-up scan
still starts. The damage is done as a disk would do it: in the segment file, under the running
store's shared mapping (`support.flip_body_byte`)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from rocketstore.broker.system_queue import read_queue
from store import Message, MessageStore, PutMessageStatus, StoreConfig
from store.log.codec import DamagedMessage
from store.recovery.role_change import queue_offsets_through_log
from store.status import GetMessageStatus
from support import flip_body_byte, small_store_config

FOUND = GetMessageStatus.FOUND
CORRUPTED = GetMessageStatus.MESSAGE_CORRUPTED
SEGMENT = 64 * 1024
GROUP = "DamageGroup"


def config(tmp_path: Path, **kw) -> StoreConfig:
    return small_store_config(tmp_path / "store", SEGMENT, **kw)


def put_all(store: MessageStore, topic: str, count: int, size: int = 16) -> list[int]:
    offsets = []
    for i in range(count):
        body = f"body-{i:05d}".encode().ljust(size, b".")
        props = {"TAGS": "A" if i % 2 == 0 else "B", "KEYS": f"key-{i}"}
        result = store.put_message(Message(topic, 0, body, properties=props))
        assert result.status is PutMessageStatus.PUT_OK, result.reason
        offsets.append(result.wrote_offset)
    assert store.wait_dispatched(10), "the dispatcher did not reach the CommitLog end"
    return offsets


def bodies(result) -> list[int]:
    return [int(m.body[5:10]) for m in result.messages]


def test_a_read_stops_at_a_damaged_message_and_never_skips_it(tmp_path):
    cfg = config(tmp_path)
    with MessageStore(cfg) as store:
        offsets = put_all(store, "Orders", 10)
        flip_body_byte(cfg.commit_log_dir, SEGMENT, offsets[4])

        before = store.get_message(GROUP, "Orders", 0, 0, 32)
        assert (before.status, bodies(before), before.next_begin_offset) == (FOUND, [0, 1, 2, 3], 4)

        at = store.get_message(GROUP, "Orders", 0, 4, 32)
        assert (at.status, at.messages, at.next_begin_offset) == (CORRUPTED, (), 4)
        assert not at.found
        assert f"CommitLog offset {offsets[4]} (Orders:0, queue offset 4) is damaged: body CRC mismatch" in at.reason

        # Going past it is the reader's decision: the next offset serves its neighbours.
        after = store.get_message(GROUP, "Orders", 0, 5, 32)
        assert (after.status, bodies(after), after.next_begin_offset) == (FOUND, [5, 6, 7, 8, 9], 10)

        # A filter that would not take it is not held up by it (its tag hash is in the queue).
        others = store.get_message(GROUP, "Orders", 0, 0, 32, tag_filter="B")
        assert (others.status, bodies(others)) == (FOUND, [1, 3, 5, 7, 9])
        held = store.get_message(GROUP, "Orders", 0, 3, 32, tag_filter="A")
        assert (held.status, held.next_begin_offset) == (CORRUPTED, 4)

        with pytest.raises(DamagedMessage):
            store.read_message(offsets[4])
        with pytest.raises(DamagedMessage):
            store.view_message_by_id(before.messages[0].msg_id[:-16] + f"{offsets[4]:016X}")
        query = store.query_message("Orders", "key-4")
        assert (query.messages, query.damaged_offsets) == ((), (offsets[4],))
        assert [m.physical_offset for m in store.query_message("Orders", "key-5").messages] == [offsets[5]]

        damage = store.stats_snapshot().damage
        assert damage.record_count == 1
        assert damage.refused_reads >= 5
        assert damage.records[0].offset == offsets[4]
        assert store.stats_snapshot().as_dict()["damage"]["records"][0]["queue_offset"] == 4


def test_system_queues_pass_a_damaged_record_over_and_say_so(tmp_path, caplog):
    cfg = config(tmp_path)
    with MessageStore(cfg) as store:
        offsets = put_all(store, "rmq_sys_events", 6)
        flip_body_byte(cfg.commit_log_dir, SEGMENT, offsets[2])
        seen: list[int] = []
        with caplog.at_level(logging.ERROR):
            end = read_queue(store, GROUP, "rmq_sys_events", 0, 0, lambda m: seen.append(m.queue_offset))
    assert (seen, end) == ([0, 1, 3, 4, 5], 6)
    assert any("queue offset 2 passed over" in r.getMessage() for r in caplog.records)


def test_a_store_with_damage_below_its_start_up_scan_starts_and_refuses_it(tmp_path):
    cfg = config(tmp_path)
    with MessageStore(cfg) as store:
        offsets = put_all(store, "Orders", 300, size=1000)  # about 5 segments
        # A fresh store checked nothing at start-up: everything in it was written in this run.
        assert store.crc_checked_from_offset == 0
    flip_body_byte(cfg.commit_log_dir, SEGMENT, offsets[1])

    with MessageStore(cfg) as store:
        # After a clean shutdown the start-up scan checks the last three segments only.
        checked_from = store.crc_checked_from_offset
        assert checked_from == store.recovery.scan_start_offset
        assert offsets[1] < SEGMENT <= checked_from < store.max_offset
        result = store.get_message(GROUP, "Orders", 0, 1, 8)
        assert (result.status, result.next_begin_offset) == (CORRUPTED, 1)
        assert bodies(store.get_message(GROUP, "Orders", 0, 2, 2)) == [2, 3]
        end = store.max_offset

    with MessageStore(config(tmp_path, check_crc_on_recover=False)) as store:
        assert store.crc_checked_from_offset == end


def test_a_damaged_body_does_not_stop_a_promotion_from_counting_queue_offsets(tmp_path):
    cfg = config(tmp_path)
    with MessageStore(cfg) as store:
        offsets = put_all(store, "Orders", 5)
        flip_body_byte(cfg.commit_log_dir, SEGMENT, offsets[3])
        # What a promotion reads: every record past the dispatch point, headers only.
        table = queue_offsets_through_log(store.commit_log, store.consume_queues, offsets[1])
    assert table["Orders-0"] == 5
