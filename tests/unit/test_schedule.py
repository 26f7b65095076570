"""Delayed messages (store/schedule.py): the delay levels, the put-path transform, the dispatch
tags code, the delivery transform, and ScheduleMessageService driven by a fake clock over a fake
store (in-memory ConsumeQueue-like lists, or real ConsumeQueue files under tmp_path) that runs
messages through the real codec, as the wired MessageStore would. No sleeps, no sockets; the one
thread test waits on events.
"""

from __future__ import annotations

import json
import logging
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store.config import DEFAULT_MESSAGE_DELAY_LEVEL
from store.log import codec
from store.log.codec import CorruptMessage, MessageRejected
from store.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TAGS,
    PROPERTY_WAIT_STORE_MSG_OK,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    Message,
    MessageExt,
)
from store.queue.consume_queue import FILLER, UNIT_SIZE, ConsumeQueue, CqUnit, tags_code
from store.results import PutMessageResult
from store.schedule import (
    SCHEDULE_TOPIC,
    ScheduleMessageService,
    delay_level_of,
    delay_offset_path,
    delivery_time_ms,
    parse_delay_levels,
    restore_real_message,
    to_schedule_message,
)
from store.status import PutMessageStatus

OK = PutMessageStatus.PUT_OK
ILLEGAL = PutMessageStatus.MESSAGE_ILLEGAL
T0 = 1_700_000_000_000
STORE_HOST = ("10.0.0.7", 10911)
LEVELS = parse_delay_levels(DEFAULT_MESSAGE_DELAY_LEVEL)
SHORT_LEVELS = (1_000, 3_000, 7_000)


# -- fakes -----------------------------------------------------------------------------------------


class FakeClock:
    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> int:
        self.now += ms
        return self.now


class FakeQueue:
    """A ConsumeQueue's read API over a list; get_units stops at 8-unit "file" ends as the real
    one stops at file ends."""

    FILE_UNITS = 8

    def __init__(self, root: Path | None = None, topic: str = "", queue_id: int = 0) -> None:
        self.units: list[CqUnit] = []
        self._min = 0

    @property
    def min_offset(self) -> int:
        return self._min

    @property
    def max_offset(self) -> int:
        return len(self.units)

    def put(self, queue_offset: int, commit_log_offset: int, size: int, tags: int) -> bool:
        assert queue_offset >= len(self.units)
        while len(self.units) < queue_offset:
            self.units.append(FILLER)
        self.units.append(CqUnit(commit_log_offset, size, tags))
        return True

    def get_units(self, queue_offset: int, max_count: int) -> list[CqUnit]:
        if max_count <= 0 or not self._min <= queue_offset < len(self.units):
            return []
        file_end = (queue_offset // self.FILE_UNITS + 1) * self.FILE_UNITS
        return self.units[queue_offset : min(len(self.units), queue_offset + max_count, file_end)]

    def truncate(self, max_offset: int) -> None:
        del self.units[max_offset:]

    def close(self) -> None:
        pass


def real_queue_factory(root: Path):
    return lambda topic, queue_id: ConsumeQueue(root, topic, queue_id, file_size=8 * UNIT_SIZE)


@dataclass
class Delivered:
    at_ms: int
    msg: MessageExt


@dataclass
class FakeStore:
    """The ScheduleStore protocol, with the put path wired as MessageStore must wire it: the
    transform before encoding, the delivery time as the schedule-topic tags code at dispatch."""

    clock: FakeClock
    levels: tuple[int, ...] = LEVELS
    queue_factory: object = None
    log: dict[int, MessageExt] = field(default_factory=dict)
    queues: dict[tuple[str, int], object] = field(default_factory=dict)
    next_offset: int = 0
    min_offset: int = 0  # CommitLog offsets below this were deleted by retention
    flushed: int = 0
    answers: list[PutMessageStatus] = field(default_factory=list)  # statuses for the next puts
    raise_on_put: list[BaseException] = field(default_factory=list)
    puts: int = 0
    delivered: list[Delivered] = field(default_factory=list)
    on_put: object = None

    def queue(self, topic: str, queue_id: int):
        key = (topic, queue_id)
        if key not in self.queues:
            factory = self.queue_factory or (lambda t, q: FakeQueue())
            self.queues[key] = factory(topic, queue_id)
        return self.queues[key]

    # the protocol

    def find_consume_queue(self, topic: str, queue_id: int):
        return self.queues.get((topic, queue_id))

    def read_message(self, physical_offset: int) -> MessageExt:
        if physical_offset < self.min_offset:
            raise CorruptMessage(physical_offset, "no message at this offset (outside the log)")
        return self.log[physical_offset]

    def put_message(self, msg: Message) -> PutMessageResult:
        self.puts += 1
        if self.raise_on_put:
            raise self.raise_on_put.pop(0)
        answer = self.answers.pop(0) if self.answers else OK
        if not answer.is_stored:
            return PutMessageResult(answer, reason="fake refusal")
        msg = to_schedule_message(msg, self.levels)  # the put-path transform
        now = self.clock()
        queue = self.queue(msg.topic, msg.queue_id)
        encoded = codec.encode_message(msg, default_store_host=STORE_HOST, max_message_size=1 << 20, now_ms=now)
        offset, queue_offset = self.next_offset, queue.max_offset
        encoded.stamp(offset, queue_offset, now)
        ext = codec.decode_message(encoded.buf, 0, offset)
        self.log[offset] = ext
        self.next_offset += encoded.size
        if msg.topic == SCHEDULE_TOPIC:  # the dispatcher's tags code for the schedule topic
            code = delivery_time_ms(delay_level_of(ext.properties), ext.store_timestamp_ms, self.levels)
        else:
            code = tags_code(ext.tags)
            self.delivered.append(Delivered(now, ext))
        queue.put(queue_offset, offset, encoded.size, code)
        if ext.properties.get(PROPERTY_WAIT_STORE_MSG_OK) != "false":
            self.flushed = self.next_offset  # a producer's put waits for its flush
        if self.on_put is not None:
            self.on_put()
        return PutMessageResult(
            answer,
            wrote_offset=offset,
            wrote_bytes=encoded.size,
            queue_offset=queue_offset,
            msg_id=ext.msg_id,
            store_timestamp_ms=now,
        )

    # test helpers

    def produce(self, key: str, level: int | str, topic: str = "Orders", queue_id: int = 1, **props) -> MessageExt:
        properties = {PROPERTY_KEYS: key, PROPERTY_DELAY_TIME_LEVEL: str(level), **props}
        result = self.put_message(Message(topic, queue_id, key.encode(), properties))
        assert result.status is OK
        return self.log[result.wrote_offset]

    def flush(self) -> None:
        self.flushed = self.next_offset

    def crash(self) -> None:
        """Lose everything not flushed, as recovery would: the log tail and its units."""
        self.log = {o: m for o, m in self.log.items() if o < self.flushed}
        self.delivered = [d for d in self.delivered if d.msg.physical_offset < self.flushed]
        self.next_offset = self.flushed
        for queue in self.queues.values():
            keep = sum(1 for u in queue.units if u.is_filler or u.commit_log_offset < self.flushed)
            queue.truncate(keep)

    def delivered_keys(self) -> list[str]:
        return [d.msg.keys for d in self.delivered if d.msg.properties.get(PROPERTY_WAIT_STORE_MSG_OK) == "false"]

    def close(self) -> None:
        for queue in self.queues.values():
            queue.close()


def make_service(store: FakeStore, path: Path, **kw) -> ScheduleMessageService:
    service = ScheduleMessageService(store, store.levels, path, store.clock, **kw)
    service.load()
    return service


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(clock) -> FakeStore:
    return FakeStore(clock)


@pytest.fixture
def path(tmp_path) -> Path:
    return delay_offset_path(tmp_path / "store")


def drain(service: ScheduleMessageService, now: int, limit: int = 10_000) -> int:
    total = 0
    for _ in range(limit):
        count = service.deliver_due(now)
        total += count
        if not count and service.next_due_ms(now) != now:
            return total
    raise AssertionError("deliver_due kept finding work")


# -- delay levels ----------------------------------------------------------------------------------


def test_default_levels_are_18_from_1s_to_2h():
    assert len(LEVELS) == 18
    assert LEVELS[0] == 1_000 and LEVELS[3] == 30_000 and LEVELS[4] == 60_000
    assert LEVELS[-2] == 3_600_000 and LEVELS[-1] == 7_200_000
    assert list(LEVELS) == sorted(LEVELS)


def test_level_units_and_spacing():
    assert parse_delay_levels("1s 2m 3h 1d") == (1_000, 120_000, 10_800_000, 86_400_000)
    assert parse_delay_levels("  5s\t10s\n") == (5_000, 10_000)
    assert parse_delay_levels("0s") == (0,)


@pytest.mark.parametrize("text", ["", "   ", "1x", "s", "1.5s", "-1s", "1S", "1 s", "1s,2s", "10"])
def test_bad_level_text_is_a_clear_error(text):
    with pytest.raises(ValueError, match="messageDelayLevel"):
        parse_delay_levels(text)


def test_level_text_must_be_a_string():
    with pytest.raises(ValueError):
        parse_delay_levels(None)  # type: ignore[arg-type]


# -- put-path transform ----------------------------------------------------------------------------


def delayed(level: str, **kw) -> Message:
    kw.setdefault("properties", {PROPERTY_DELAY_TIME_LEVEL: level, PROPERTY_TAGS: "TagA"})
    return Message("Orders", 3, b"payload", flag=7, **kw)


def test_delayed_message_goes_to_the_schedule_topic():
    msg = delayed("3")
    out = to_schedule_message(msg, LEVELS)
    assert (out.topic, out.queue_id) == (SCHEDULE_TOPIC, 2)
    assert out.properties == {
        PROPERTY_DELAY_TIME_LEVEL: "3",
        PROPERTY_TAGS: "TagA",
        PROPERTY_REAL_TOPIC: "Orders",
        PROPERTY_REAL_QUEUE_ID: "3",
    }
    assert (out.body, out.flag, out.sys_flag) == (msg.body, msg.flag, msg.sys_flag)
    assert msg.topic == "Orders" and PROPERTY_REAL_TOPIC not in msg.properties  # input untouched


def test_level_above_max_becomes_the_max():
    out = to_schedule_message(delayed("99"), LEVELS)
    assert out.queue_id == 17 and out.properties[PROPERTY_DELAY_TIME_LEVEL] == "18"
    assert to_schedule_message(delayed("2"), (1_000, 2_000)).queue_id == 1
    assert to_schedule_message(delayed("5"), (1_000, 2_000)).queue_id == 1


@pytest.mark.parametrize("text, queue_id", [("1", 0), ("+2", 1), ("018", 17), ("2147483647", 17)])
def test_level_text_as_java_parses_it(text, queue_id):
    assert to_schedule_message(delayed(text), LEVELS).queue_id == queue_id


@pytest.mark.parametrize("text", ["0", "-1", "-2147483648"])
def test_level_zero_or_negative_is_not_delayed(text):
    msg = delayed(text)
    assert to_schedule_message(msg, LEVELS) is msg


def test_schedule_topic_record_is_not_transformed_again():
    record = Message(
        SCHEDULE_TOPIC,
        1,
        b"x",
        {PROPERTY_DELAY_TIME_LEVEL: "2", PROPERTY_REAL_TOPIC: "Orders", PROPERTY_REAL_QUEUE_ID: "0"},
    )
    assert to_schedule_message(record, LEVELS) is record


def test_message_without_delay_is_unchanged():
    plain = Message("Orders", 0, b"x", {PROPERTY_TAGS: "a"})
    assert to_schedule_message(plain, LEVELS) is plain
    bare = Message("Orders", 0, b"x")
    assert to_schedule_message(bare, LEVELS) is bare


@pytest.mark.parametrize(
    "sys_flag, transformed",
    [
        (0, True),
        (TRANSACTION_COMMIT_TYPE, True),
        (TRANSACTION_PREPARED_TYPE, False),
        (TRANSACTION_ROLLBACK_TYPE, False),
    ],
)
def test_transaction_types(sys_flag, transformed):
    msg = delayed("2", sys_flag=sys_flag)
    out = to_schedule_message(msg, LEVELS)
    assert (out.topic == SCHEDULE_TOPIC) is transformed
    if not transformed:
        assert out is msg


@pytest.mark.parametrize("text", ["abc", "1.5", "", " 3", "3 ", "1_0", "2147483648", "٣", "0x2"])
def test_bad_delay_is_rejected_as_illegal(text):
    with pytest.raises(MessageRejected) as info:
        to_schedule_message(delayed(text), LEVELS)
    assert info.value.status is ILLEGAL
    assert PROPERTY_DELAY_TIME_LEVEL in info.value.reason


def test_prepared_message_with_bad_delay_passes_untouched():
    # RocketMQ reads DELAY only for non-transactional and committed messages.
    msg = delayed("abc", sys_flag=TRANSACTION_PREPARED_TYPE)
    assert to_schedule_message(msg, LEVELS) is msg


def test_delivery_time_is_store_time_plus_the_levels_delay():
    assert delivery_time_ms(1, T0, LEVELS) == T0 + 1_000
    assert delivery_time_ms(4, T0, LEVELS) == T0 + 30_000
    assert delivery_time_ms(18, T0, LEVELS) == T0 + 7_200_000
    assert delivery_time_ms(40, T0, LEVELS) == T0 + 7_200_000  # levels shortened since the put
    assert delivery_time_ms(0, T0, LEVELS) == T0  # a schedule record without a level: due at once


def test_delay_level_of_stored_properties_never_raises():
    assert delay_level_of({PROPERTY_DELAY_TIME_LEVEL: "4"}) == 4
    assert delay_level_of({PROPERTY_DELAY_TIME_LEVEL: "junk"}) == 0
    assert delay_level_of({}) == 0


# -- delivery transform ----------------------------------------------------------------------------


def stored(msg: Message, physical_offset: int = 4096, store_ts: int = T0) -> MessageExt:
    encoded = codec.encode_message(msg, default_store_host=STORE_HOST, max_message_size=1 << 20, now_ms=T0 - 5)
    encoded.stamp(physical_offset, 0, store_ts)
    return codec.decode_message(encoded.buf, 0, physical_offset)


def test_restore_real_message_round_trip_through_the_codec():
    original = Message(
        "Orders",
        5,
        b"body bytes",
        {PROPERTY_DELAY_TIME_LEVEL: "2", PROPERTY_TAGS: "T", "custom": "v"},
        flag=9,
        sys_flag=TRANSACTION_COMMIT_TYPE,
        born_host=("192.168.1.2", 5555),
        born_timestamp_ms=T0 - 100,
        reconsume_times=3,
        prepared_transaction_offset=77,
    )
    ext = stored(to_schedule_message(original, LEVELS))
    real = restore_real_message(ext)
    assert (real.topic, real.queue_id) == ("Orders", 5)
    assert real.properties == {
        PROPERTY_TAGS: "T",
        "custom": "v",
        PROPERTY_REAL_TOPIC: "Orders",
        PROPERTY_REAL_QUEUE_ID: "5",
        PROPERTY_WAIT_STORE_MSG_OK: "false",
    }
    assert (real.body, real.flag, real.sys_flag, real.reconsume_times) == (b"body bytes", 9, ext.sys_flag, 3)
    assert (real.born_host, real.born_timestamp_ms) == (("192.168.1.2", 5555), T0 - 100)
    assert real.store_host == STORE_HOST and real.prepared_transaction_offset == 77
    # It encodes, and the put path does not delay it again.
    assert to_schedule_message(real, LEVELS) is real
    again = stored(real)
    assert again.topic == "Orders" and again.body == b"body bytes"


@pytest.mark.parametrize(
    "props, problem",
    [
        ({PROPERTY_REAL_QUEUE_ID: "1"}, "REAL_TOPIC"),
        ({PROPERTY_REAL_TOPIC: "Orders"}, "REAL_QID"),
        ({PROPERTY_REAL_TOPIC: "Orders", PROPERTY_REAL_QUEUE_ID: "x"}, "REAL_QID"),
        ({PROPERTY_REAL_TOPIC: "Orders", PROPERTY_REAL_QUEUE_ID: "-1"}, "REAL_QID"),
        ({PROPERTY_REAL_TOPIC: SCHEDULE_TOPIC, PROPERTY_REAL_QUEUE_ID: "0"}, "REAL_TOPIC"),
    ],
)
def test_restore_rejects_a_corrupt_schedule_message(props, problem):
    ext = stored(Message(SCHEDULE_TOPIC, 0, b"x", {PROPERTY_DELAY_TIME_LEVEL: "1", **props}))
    with pytest.raises(ValueError, match=problem):
        restore_real_message(ext)


# -- the service -----------------------------------------------------------------------------------


def test_delivers_only_when_due(store, clock, path):
    service = make_service(store, path)
    sent = store.produce("m1", 2)  # 5 s
    assert service.next_due_ms(clock.now) == sent.store_timestamp_ms + 5_000
    assert service.deliver_due(clock.advance(4_999)) == 0
    assert store.delivered == [] and service.offsets[2] == 0
    assert service.deliver_due(clock.advance(1)) == 1
    [done] = store.delivered
    assert done.at_ms == sent.store_timestamp_ms + 5_000
    assert (done.msg.topic, done.msg.queue_id, done.msg.body) == ("Orders", 1, b"m1")
    assert PROPERTY_DELAY_TIME_LEVEL not in done.msg.properties
    assert service.offsets[2] == 1
    assert service.deliver_due(clock.advance(60_000)) == 0 and len(store.delivered) == 1
    assert service.next_due_ms(clock.now) is None


def test_order_within_a_level(store, clock, path):
    service = make_service(store, path)
    for i in range(6):
        store.produce(f"m{i}", 1)
        clock.advance(200)
    # m0..m1 are due at +1000 and +1200 after the first put; the last put was at +1000.
    assert service.deliver_due(T0 + 1_200) == 2
    assert store.delivered_keys() == ["m0", "m1"]
    assert service.deliver_due(T0 + 10_000) == 4
    assert store.delivered_keys() == [f"m{i}" for i in range(6)]


def test_several_levels_each_on_its_own_time(store, clock, path):
    service = make_service(store, path)
    store.produce("L3", 3)  # 10 s
    store.produce("L1", 1)  # 1 s
    store.produce("L2", 2)  # 5 s
    store.produce("L1b", 1)
    seen = []
    for step in range(0, 12_000, 100):
        clock.now = T0 + step
        if service.deliver_due(clock.now):
            seen.append((step, store.delivered_keys()[-1]))
    assert store.delivered_keys() == ["L1", "L1b", "L2", "L3"]
    assert [s for s, _ in seen] == [1_000, 5_000, 10_000]
    assert service.offsets == {**{n: 0 for n in range(1, 19)}, 1: 2, 2: 1, 3: 1}
    stats = service.stats(clock.now)
    assert stats.delivered == 4 and stats.delivered_by_level[1] == 2 and stats.lag_ms == 0


def test_failed_put_is_retried_later_without_advancing(store, clock, path):
    service = make_service(store, path, retry_delay_ms=10_000)
    store.produce("a", 1)
    store.produce("b", 1)
    store.produce("other", 2)
    clock.advance(5_000)
    puts = store.puts
    store.answers = [PutMessageStatus.SERVICE_NOT_AVAILABLE]
    # Level 1 fails on "a" and stops; level 2 is not held up by it.
    assert service.deliver_due(clock.now) == 1
    assert store.delivered_keys() == ["other"] and service.offsets[1] == 0
    assert store.puts == puts + 2
    assert service.stats(clock.now).levels[0].failed_puts == 1
    assert service.next_due_ms(clock.now) == clock.now + 10_000
    assert service.deliver_due(clock.advance(9_999)) == 0 and store.puts == puts + 2  # paused
    assert service.deliver_due(clock.advance(1)) == 2
    assert store.delivered_keys() == ["other", "a", "b"] and service.offsets[1] == 2


def test_an_exception_from_put_is_retried_too(store, clock, path):
    service = make_service(store, path, retry_delay_ms=0)
    store.produce("a", 1)
    store.raise_on_put = [OSError("disk on fire")]
    assert service.deliver_due(clock.advance(1_000)) == 0 and service.offsets[1] == 0
    assert service.deliver_due(clock.now) == 1 and store.delivered_keys() == ["a"]


def test_a_broken_queue_pauses_only_its_level(store, clock, path, caplog):
    service = make_service(store, path, retry_delay_ms=0)
    store.produce("a", 1)
    store.produce("b", 2)
    queue = store.find_consume_queue(SCHEDULE_TOPIC, 0)
    queue.get_units = lambda offset, count: 1 / 0  # type: ignore[method-assign]
    with caplog.at_level(logging.ERROR, logger="store.schedule"):
        assert service.deliver_due(clock.advance(5_000)) == 1
    assert store.delivered_keys() == ["b"] and "delivery failed" in caplog.text
    del queue.get_units
    assert service.deliver_due(clock.now) == 1 and store.delivered_keys() == ["b", "a"]


@pytest.mark.parametrize("status", [PutMessageStatus.FLUSH_DISK_TIMEOUT, PutMessageStatus.SLAVE_NOT_AVAILABLE])
def test_stored_status_counts_as_delivered(store, clock, path, status):
    service = make_service(store, path)
    store.produce("a", 1)
    store.answers = [status]
    assert service.deliver_due(clock.advance(1_000)) == 1
    assert service.offsets[1] == 1 and store.delivered_keys() == ["a"]
    assert service.deliver_due(clock.advance(100_000)) == 0 and store.delivered_keys() == ["a"]


def test_message_the_store_refuses_is_dropped_not_retried_forever(store, clock, path, caplog):
    service = make_service(store, path)
    # A schedule record whose real topic the codec refuses: a re-put raises MessageRejected.
    store.put_message(
        Message(
            SCHEDULE_TOPIC,
            0,
            b"x",
            {PROPERTY_DELAY_TIME_LEVEL: "1", PROPERTY_REAL_TOPIC: "bad topic!", PROPERTY_REAL_QUEUE_ID: "0"},
        )
    )
    store.produce("refused by status", 1)
    store.produce("fine", 1)
    clock.advance(1_000)
    store.answers = [OK, ILLEGAL]  # the first answer is for the put that raises before it
    with caplog.at_level(logging.ERROR, logger="store.schedule"):
        assert service.deliver_due(clock.now) == 1
    assert store.delivered_keys() == ["fine"] and service.offsets[1] == 3
    assert service.stats(clock.now).levels[0].skipped == 2
    assert "refuses" in caplog.text


def test_corrupt_schedule_record_is_skipped(store, clock, path, caplog):
    service = make_service(store, path)
    store.put_message(Message(SCHEDULE_TOPIC, 0, b"x", {PROPERTY_DELAY_TIME_LEVEL: "1"}))  # no REAL_*
    store.produce("after", 1)
    with caplog.at_level(logging.ERROR, logger="store.schedule"):
        assert service.deliver_due(clock.advance(1_000)) == 1
    assert store.delivered_keys() == ["after"] and "REAL_TOPIC" in caplog.text


def test_unit_pointing_at_a_foreign_message_is_skipped(store, clock, path):
    service = make_service(store, path)
    plain = store.put_message(Message("Orders", 0, b"plain"))
    store.produce("real", 1)
    queue = store.find_consume_queue(SCHEDULE_TOPIC, 0)
    queue.units.insert(0, CqUnit(plain.wrote_offset, plain.wrote_bytes, T0))
    assert service.deliver_due(clock.advance(1_000)) == 1
    assert store.delivered_keys() == ["real"] and service.offsets[1] == 2


def test_unreadable_message_is_skipped_with_a_warning(store, clock, path, caplog):
    service = make_service(store, path)
    store.produce("gone", 1)
    store.produce("kept", 1)
    store.min_offset = store.find_consume_queue(SCHEDULE_TOPIC, 0).units[1].commit_log_offset  # retention
    with caplog.at_level(logging.WARNING, logger="store.schedule"):
        assert service.deliver_due(clock.advance(1_000)) == 1
    assert store.delivered_keys() == ["kept"] and service.offsets[1] == 2
    assert "cannot be read" in caplog.text
    assert service.stats(clock.now).levels[0].skipped == 1


def test_fillers_are_skipped(store, clock, path):
    service = make_service(store, path)
    queue = store.queue(SCHEDULE_TOPIC, 0)
    queue.units.extend([FILLER] * 11)  # a queue that starts mid-file, and a gap
    store.produce("a", 1)
    queue.units.extend([FILLER] * 3)
    store.produce("b", 1)
    queue.units.extend([FILLER] * 2)
    assert service.next_due_ms(clock.now) == T0 + 1_000
    assert service.deliver_due(clock.advance(1_000)) == 2
    assert store.delivered_keys() == ["a", "b"] and service.offsets[1] == 18


def test_cursor_below_the_queue_moves_up_and_above_it_moves_down(store, clock, path, caplog):
    service = make_service(store, path)
    for i in range(4):
        store.produce(f"m{i}", 1)
    queue = store.find_consume_queue(SCHEDULE_TOPIC, 0)
    queue._min = 2  # retention deleted offsets 0 and 1
    with caplog.at_level(logging.WARNING, logger="store.schedule"):
        assert service.next_due_ms(clock.now) == clock.now
        assert service.deliver_due(clock.advance(1_000)) == 2
    assert store.delivered_keys() == ["m2", "m3"] and "below its queue's min offset" in caplog.text
    queue.truncate(1)  # the queue lost its tail (rebuilt shorter): [1, 1), empty
    queue._min = 1
    with caplog.at_level(logging.WARNING, logger="store.schedule"):
        assert service.deliver_due(clock.now) == 0
    assert service.offsets[1] == 1 and "beyond its queue's end" in caplog.text
    store.produce("next", 1)  # lands at queue offset 1
    assert service.deliver_due(clock.advance(1_000)) == 1
    assert store.delivered_keys()[-1] == "next" and service.offsets[1] == 2


def test_load_corrects_cursors_against_the_queues(store, clock, path):
    path.parent.mkdir(parents=True)
    path.write_text('{"offsetTable": {"1": 7}}')  # the file is ahead of a queue recovery shortened
    store.produce("a", 1)
    service = make_service(store, path)
    assert service.offsets[1] == 1
    store.produce("b", 1)
    assert service.deliver_due(clock.advance(1_000)) == 1 and store.delivered_keys() == ["b"]


def test_clock_going_back_does_not_hold_a_level_hostage(store, clock, path):
    # RocketMQ's correctDeliverTimestamp: a due time more than one delay ahead of now is now.
    service = make_service(store, path)
    store.produce("future", 1)
    clock.now = T0 - 3_600_000
    assert service.next_due_ms(clock.now) == clock.now
    assert service.deliver_due(clock.now) == 1


def test_bounded_work_per_call(store, clock, path):
    service = make_service(store, path, max_per_level=3)
    for i in range(10):
        store.produce(f"a{i}", 1)
        store.produce(f"b{i}", 2)
    now = clock.advance(60_000)
    assert service.deliver_due(now) == 6
    assert service.next_due_ms(now) == now  # more is due: the thread goes again at once
    assert service.deliver_due(now) == 6
    assert drain(service, now) == 8
    assert sorted(store.delivered_keys()) == sorted([f"a{i}" for i in range(10)] + [f"b{i}" for i in range(10)])
    assert service.next_due_ms(now) is None


def test_fast_forward_delivers_everything_exactly_once(store, clock, path):
    service = make_service(store, path, max_per_level=16)
    keys = []
    for i in range(200):
        level = 1 + i % 18
        keys.append(f"m{i}")
        store.produce(f"m{i}", level)
        clock.advance(7)
    far = clock.advance(365 * 24 * 3_600_000)
    assert drain(service, far) == 200
    assert sorted(store.delivered_keys()) == sorted(keys)
    assert drain(service, far + 1) == 0
    for d in store.delivered:
        sent = store.log[min(o for o, m in store.log.items() if m.keys == d.msg.keys)]
        assert d.at_ms >= sent.store_timestamp_ms + LEVELS[int(sent.properties[PROPERTY_DELAY_TIME_LEVEL]) - 1]


def test_next_due_and_lag(store, clock, path):
    service = make_service(store, path)
    assert service.next_due_ms(clock.now) is None
    store.produce("a", 2)
    store.produce("b", 1)
    assert service.next_due_ms(clock.now) == T0 + 1_000
    stats = service.stats(T0 + 4_000)
    assert stats.lag_ms == 3_000 and stats.levels[0].lag_ms == 3_000 and stats.levels[1].lag_ms == 0
    assert stats.levels[0].backlog == 1 and stats.levels[2].max_offset == 0
    service.deliver_due(T0 + 4_000)
    assert service.stats(T0 + 4_000).lag_ms == 0


# -- persistence and restarts ----------------------------------------------------------------------


def test_restart_continues_without_redelivering(store, clock, path):
    service = make_service(store, path)
    for i in range(5):
        store.produce(f"m{i}", 1 + i % 2)
    service.deliver_due(clock.advance(1_000))  # the level-1 ones: m0, m2, m4
    assert service.persist() is True
    assert service.persist() is False  # nothing changed: no rewrite
    content = json.loads(path.read_text())
    assert content == {"offsetTable": {**{str(n): 0 for n in range(1, 19)}, "1": 3}}

    again = make_service(store, path)
    assert again.offsets[1] == 3 and again.offsets[2] == 0
    assert again.deliver_due(clock.advance(10_000)) == 2
    assert sorted(store.delivered_keys()) == [f"m{i}" for i in range(5)]


def test_missing_file_starts_every_level_at_zero(store, path):
    service = make_service(store, path)
    assert service.offsets == {n: 0 for n in range(1, 19)}


def test_loads_javas_unquoted_keys_and_keeps_unknown_levels(store, clock, path, caplog):
    path.parent.mkdir(parents=True)
    path.write_text('{"offsetTable":{1:4,2:0,40:9}}')
    with caplog.at_level(logging.WARNING, logger="store.schedule"):
        service = make_service(store, path)
    assert service.offsets[1] == 4 and 40 not in service.offsets and "40" in caplog.text
    service.persist()
    table = json.loads(path.read_text())["offsetTable"]
    assert table["1"] == 4 and table["40"] == 9


@pytest.mark.parametrize(
    "text",
    [
        '{"offsetTable": [1, 2]}',
        '{"other": {}}',
        '{"offsetTable": {"x": 1}}',
        '{"offsetTable": {"1": -3}}',
        '{"offsetTable": {"1": "5"}}',
        '{"offsetTable": {"0": 5}}',
        "[]",
    ],
)
def test_bad_offset_file_is_a_clear_error(store, path, text):
    path.parent.mkdir(parents=True)
    path.write_text(text)
    service = ScheduleMessageService(store, LEVELS, path, store.clock)
    with pytest.raises(ValueError, match="delayOffset.json"):
        service.load()


def test_an_unloaded_service_never_overwrites_the_file(store, path):
    path.parent.mkdir(parents=True)
    path.write_text('{"offsetTable": {"1": 42}}')
    service = ScheduleMessageService(store, LEVELS, path, store.clock)
    with pytest.raises(RuntimeError, match="load"):
        service.deliver_due(T0)
    with pytest.raises(RuntimeError, match="load"):
        service.start()
    assert service.persist() is False
    service.shutdown()  # e.g. a store shutting down after a failed load
    assert json.loads(path.read_text()) == {"offsetTable": {"1": 42}}
    # A file that does not load stays unloaded too: nothing overwrites it.
    path.write_text('{"offsetTable": {"1": "x"}}')
    with pytest.raises(ValueError):
        service.load()
    service.shutdown()
    assert path.read_text() == '{"offsetTable": {"1": "x"}}'


def test_durable_guard_holds_offsets_back_until_flushed_and_a_crash_redelivers(store, clock, path):
    service = make_service(store, path, durable_offset=lambda: store.flushed)
    for i in range(3):
        store.produce(f"m{i}", 1)
    service.deliver_due(clock.advance(1_000))
    assert service.offsets[1] == 3
    service.persist()
    assert json.loads(path.read_text())["offsetTable"]["1"] == 0  # re-puts not durable yet
    store.crash()  # the re-puts were never flushed: lost
    assert store.delivered_keys() == []

    again = make_service(store, path, durable_offset=lambda: store.flushed)
    assert again.deliver_due(clock.advance(1)) == 3  # at-least-once: nothing lost
    store.flush()
    again.persist()
    assert json.loads(path.read_text())["offsetTable"]["1"] == 3
    store.crash()
    third = make_service(store, path, durable_offset=lambda: store.flushed)
    assert third.deliver_due(clock.advance(1)) == 0
    assert sorted(store.delivered_keys()) == ["m0", "m1", "m2"]


def test_durable_guard_persists_a_durable_prefix(store, clock, path):
    service = make_service(store, path, durable_offset=lambda: store.flushed)
    store.produce("a", 1)
    store.produce("b", 1)
    service.deliver_due(clock.advance(1_000))
    [a] = [d.msg for d in store.delivered if d.msg.keys == "a"]
    store.flushed = a.physical_offset + a.store_size - 1
    service.persist()
    assert json.loads(path.read_text())["offsetTable"]["1"] == 0
    store.flushed += 1  # the first re-put (and what precedes it) is durable, the second is not
    service.persist()
    assert json.loads(path.read_text())["offsetTable"]["1"] == 1


def test_without_guard_a_crash_after_persist_redelivers_since_the_last_write(store, clock, path):
    service = make_service(store, path)
    store.produce("a", 1)
    service.deliver_due(clock.advance(1_000))
    store.flush()
    service.persist()
    store.produce("b", 1)
    service.deliver_due(clock.advance(1_000))
    store.flush()
    # crash before the next persist: "b" is delivered again after the restart
    again = make_service(store, path)
    assert again.deliver_due(clock.now) == 1
    assert store.delivered_keys() == ["a", "b", "b"]


def test_thread_delivers_and_shutdown_persists_exactly_what_was_delivered(store, clock, path):
    service = make_service(store, path, flush_delay_offset_interval_ms=10_000)
    for i in range(5):
        store.produce(f"m{i}", 1 + i % 3)
    clock.advance(60_000)
    done = threading.Event()
    store.on_put = lambda: len(store.delivered) == 5 and done.set()
    service.start()
    with pytest.raises(RuntimeError):
        service.start()
    try:
        assert done.wait(10), "the service thread did not deliver"
    finally:
        service.shutdown()
    assert not service.running
    table = json.loads(path.read_text())["offsetTable"]
    assert (table["1"], table["2"], table["3"]) == (2, 2, 1)
    again = make_service(store, path)
    assert again.deliver_due(clock.now) == 0
    assert sorted(store.delivered_keys()) == [f"m{i}" for i in range(5)]
    service.shutdown()  # idempotent


def test_thread_persists_on_its_interval(store, clock, path):
    service = make_service(store, path, flush_delay_offset_interval_ms=1_000)
    store.produce("a", 1)
    persisted = threading.Event()
    original = service.persist

    def spy() -> bool:
        written = original()
        if written:
            persisted.set()
        return written

    service.persist = spy  # type: ignore[method-assign]
    delivered = threading.Event()
    store.on_put = delivered.set
    service.start()
    try:
        clock.advance(1_000)  # the message is due; the next rounds see the interval pass too
        assert delivered.wait(10)
        clock.advance(1_000)
        service.wakeup()
        assert persisted.wait(10), "the thread did not persist on its interval"
    finally:
        service.shutdown()
    assert json.loads(path.read_text())["offsetTable"]["1"] == 1


# -- real ConsumeQueue files -----------------------------------------------------------------------


def test_with_real_consume_queue_files(tmp_path, clock):
    store = FakeStore(clock, queue_factory=real_queue_factory(tmp_path / "store"))
    path = delay_offset_path(tmp_path / "store")
    try:
        service = make_service(store, path, max_per_level=5)
        for i in range(20):  # 20 units over 8-unit files: the walk crosses file ends
            store.produce(f"m{i}", 1)
            clock.advance(50)
        queue = store.find_consume_queue(SCHEDULE_TOPIC, 0)
        assert isinstance(queue, ConsumeQueue) and queue.max_offset == 20
        assert service.deliver_due(T0 + 1_000 + 50 * 9) == 5  # m0..m9 due, budget 5
        assert service.deliver_due(T0 + 1_000 + 50 * 9) == 5
        assert service.deliver_due(T0 + 1_000 + 50 * 9) == 0
        service.persist()
        again = make_service(store, path, max_per_level=5)
        assert drain(again, clock.advance(10_000)) == 10
        assert store.delivered_keys() == [f"m{i}" for i in range(20)]
    finally:
        store.close()


# -- properties ------------------------------------------------------------------------------------

# Steps that land exactly on, and one ms short of, due times (delays are 1, 3 and 7 s) as well as
# arbitrary ones: delivering a message even 1 ms early must show.
STEPS = st.one_of(st.integers(0, 4_000), st.sampled_from([0, 1, 999, 1_000, 2_000, 2_999, 3_000, 6_999, 7_000]))
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.integers(1, 5), STEPS),  # level (4 and 5 clamp to 3), then wait
        st.tuples(st.just("tick"), STEPS),
        st.just(("next",)),  # to 1 ms before the next due time, then to it
        st.just(("restart",)),
    ),
    max_size=60,
)


def step_to_next_due(service: ScheduleMessageService, clock: FakeClock) -> None:
    """next_due_ms is exact: nothing is delivered 1 ms before it, something at it."""
    due = service.next_due_ms(clock.now)
    if due is None or due <= clock.now:
        service.deliver_due(clock.now)
        return
    clock.now = due - 1
    assert service.deliver_due(clock.now) == 0
    clock.now = due
    assert service.deliver_due(clock.now) >= 1


@settings(max_examples=60)
@given(ops=OPS, budget=st.integers(1, 4))
def test_random_delays_and_clock_steps_deliver_each_message_once_never_early(ops, budget):
    with tempfile.TemporaryDirectory() as tmp:
        clock = FakeClock()
        store = FakeStore(clock, levels=SHORT_LEVELS)
        path = delay_offset_path(tmp)
        service = make_service(store, path, max_per_level=budget)
        due: dict[str, int] = {}
        for op in ops:
            if op[0] == "put":
                key = f"m{len(due)}"
                sent = store.produce(key, op[1])
                due[key] = sent.store_timestamp_ms + SHORT_LEVELS[min(op[1], 3) - 1]
                clock.advance(op[2])
            elif op[0] == "tick":
                service.deliver_due(clock.advance(op[1]))
            elif op[0] == "next":
                step_to_next_due(service, clock)
            else:
                service.shutdown()
                service = make_service(store, path, max_per_level=budget)
        drain(service, clock.advance(10_000))
        keys = store.delivered_keys()
        assert sorted(keys) == sorted(due)  # every message, exactly once
        for d in store.delivered:
            assert d.at_ms >= due[d.msg.keys]  # never before its due time
        # within a level, delivery follows store order
        for level in (1, 2, 3):
            order = [
                d.msg.keys
                for d in store.delivered
                if d.msg.properties[PROPERTY_REAL_QUEUE_ID] == "1"
                and due[d.msg.keys] - store_time(store, d.msg.keys) == SHORT_LEVELS[level - 1]
            ]
            assert order == sorted(order, key=lambda k: int(k[1:]))


def store_time(store: FakeStore, key: str) -> int:
    return next(m.store_timestamp_ms for m in store.log.values() if m.topic == SCHEDULE_TOPIC and m.keys == key)


ROUNDS = st.lists(
    st.tuples(
        st.lists(st.tuples(st.integers(1, 3), STEPS), max_size=3),  # puts: level, then wait
        st.one_of(STEPS, st.just("next")),  # the clock step before this round's delivery
        st.lists(st.sampled_from(["flush", "persist", "crash"]), max_size=3),  # then these, in order
    ),
    max_size=25,
)


def play(rounds, store: FakeStore, clock: FakeClock, fresh, key=lambda level, n: f"m{n}"):
    """Run ROUNDS against `store` and the service `fresh()` makes (again after each crash):
    returns the service in use at the end and the keys produced."""
    service = fresh()
    produced = []
    for puts, step, after in rounds:
        for level, wait in puts:
            produced.append(store.produce(key(level, len(produced)), level).keys)  # producers' puts flush
            clock.advance(wait)
        if step == "next":
            step_to_next_due(service, clock)
        else:
            service.deliver_due(clock.advance(step))
        for action in after:
            if action == "flush":
                store.flush()
            elif action == "persist":
                service.persist()
            else:
                store.crash()
                service = fresh()
    return service, produced


@settings(max_examples=100)
@given(rounds=ROUNDS)
def test_crashes_with_the_durable_guard_lose_nothing(rounds):
    """Re-puts do not wait for the flush; a crash loses the unflushed tail. Whatever the order of
    deliveries, persists, flushes and crashes, every produced message ends up delivered."""
    with tempfile.TemporaryDirectory() as tmp:
        clock = FakeClock()
        store = FakeStore(clock, levels=SHORT_LEVELS)
        path = delay_offset_path(tmp)

        def fresh() -> ScheduleMessageService:
            return make_service(store, path, durable_offset=lambda: store.flushed, max_per_level=2)

        service, produced = play(rounds, store, clock, fresh)
        drain(service, clock.advance(10_000))
        assert set(store.delivered_keys()) == set(produced)  # at least once, after any crash


# -- cursors another broker may take over (a slave copying its master's) ----------------------------


def reputs_ending_by(store: FakeStore, level: int, log_offset: int) -> int:
    """How many of the level's re-puts lie wholly below `log_offset` (keys say the level)."""
    return sum(
        1
        for d in store.delivered
        if d.msg.keys.startswith(f"L{level}-") and d.msg.physical_offset + d.msg.store_size <= log_offset
    )


@settings(max_examples=100)
@given(rounds=ROUNDS, cut=st.floats(0, 1))
def test_cursors_at_never_pass_a_reput_beyond_the_given_log_end(rounds, cut):
    """Whatever was delivered, flushed, persisted and lost in crashes, the cursors handed to a
    broker whose log ends at X only count re-puts below X: taking them over cannot skip a delayed
    message."""
    with tempfile.TemporaryDirectory() as tmp:
        clock = FakeClock()
        store = FakeStore(clock, levels=SHORT_LEVELS)
        path = delay_offset_path(tmp)

        def fresh() -> ScheduleMessageService:
            return make_service(store, path, durable_offset=lambda: store.flushed, max_per_level=2)

        service, _ = play(rounds, store, clock, fresh, key=lambda level, n: f"L{level}-{n}")
        log_end = int(store.next_offset * cut)
        document = service.cursors_at(log_end)
        if document is not None:
            for key, cursor in document["offsetTable"].items():
                assert cursor <= reputs_ending_by(store, int(key), log_end)
        # A broker holding the whole flushed log always gets the cursors persist() would write.
        store.flush()
        service.persist()
        assert service.cursors_at(store.next_offset) == {
            "offsetTable": {str(n): off for n, off in service.offsets.items()}
        }


def test_replaced_cursors_are_written_and_deliver_from_there(store, clock, path):
    service = make_service(store, path)
    for i in range(3):
        store.produce(f"m{i}", 1)

    assert service.replace_offsets({"offsetTable": {"1": 2, "40": 7}}) is True
    assert service.replace_offsets({"offsetTable": {"1": 2, "40": 7}}) is False

    assert json.loads(path.read_text())["offsetTable"]["1"] == 2
    assert json.loads(path.read_text())["offsetTable"]["40"] == 7  # a level not configured: kept
    assert service.deliver_due(clock.advance(1_000)) == 1
    assert store.delivered_keys() == ["m2"]


def test_cursors_are_not_replaced_under_a_running_delivery_or_from_a_bad_document(store, clock, path):
    service = make_service(store, path)
    with pytest.raises(ValueError, match="not a delay level"):
        service.replace_offsets({"offsetTable": {"zero": 1}})
    assert service.offsets[1] == 0 and not path.exists()
    service.start()
    try:
        with pytest.raises(RuntimeError, match="deliveries are stopped"):
            service.replace_offsets({"offsetTable": {"1": 5}})
    finally:
        service.shutdown()
    assert service.offsets[1] == 0
