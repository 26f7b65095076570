"""Delayed messages: RocketMQ 4.x's ScheduleMessageService, sans-IO at the core.

What this module owns
---------------------
- The delay levels (`messageDelayLevel`, "1s 5s ... 2h"): `parse_delay_levels`.
- The put-path transform (RocketMQ does it in CommitLog.putMessage): a message whose DELAY property
  is a level > 0, and that is not a prepared or rolled-back transaction, is stored under
  `SCHEDULE_TOPIC_XXXX`, queue `level - 1`, with its real topic and queue id kept in the REAL_TOPIC
  and REAL_QID properties: `to_schedule_message`.
- The tags code the dispatcher writes for a schedule-topic unit: the delivery time (store time +
  the level's delay): `delivery_time_ms`.
- The reverse transform at delivery time (RocketMQ's messageTimeup): `restore_real_message`.
- `ScheduleMessageService`: one cursor per level over that level's ConsumeQueue; `deliver_due(now)`
  re-puts every due message under its real topic and queue, in queue order, and advances the
  level's cursor; `persist()` writes the cursors to `<storePathRootDir>/config/delayOffset.json`;
  `start()` / `shutdown()` run it on a ServiceThread. It owns that file and nothing else: the
  CommitLog, the ConsumeQueues and the dispatcher belong to the store, reached through the narrow
  `ScheduleStore` protocol.

delayOffset.json
----------------
RocketMQ's layout, level -> next queue offset to deliver in that level's queue (queue id
level - 1)::

    {"offsetTable": {"1": 5, "2": 0, ..., "18": 12}}

Java's broker writes the keys unquoted (`{1:5}`); `json_file.read_json` reads both. Levels the file
names but the configuration does not (the level list was shortened) are kept and written back, so
that restoring the configuration does not re-deliver those levels. A missing level starts at 0. The
file is written atomically (`json_file.write_json_atomically`: tmp + fsync + rename, `.bak` kept).

Delivery guarantees
-------------------
A level's cursor moves past a unit only once its message is handled: re-put and stored (PUT_OK or
any status whose message is in the CommitLog), or skipped because it can never be delivered
(a filler, a message retention already deleted, a corrupt or foreign record, a message the store
refuses as illegal). A put that fails for a passing reason (service not available, page cache busy,
an exception) stops the level without moving it; the level is retried `retry_delay_ms` later
(RocketMQ's DELAY_FOR_A_PERIOD, 10 s). Within a level messages are delivered in queue order; a level
stops at its first unit that is not yet due, because units of one level are due in store order.

Clean shutdown: `shutdown()` stops the thread after its last round and then persists, so the file
matches what was delivered: a restart neither loses nor re-delivers. When the service is given
`durable_offset` (the CommitLog's flushed offset), `persist()` writes, per level, only as far as
the messages it re-put are durable; the store's shutdown should call `persist()` once more after
its final CommitLog flush so that the file then covers everything.

Crash: delivery is at-least-once. The file is written every `flush_delay_offset_interval_ms`
(RocketMQ's flushDelayOffsetInterval, 10 s), so a crash re-delivers what was delivered since the
last write. With `durable_offset`, a crash never loses a message either: a cursor is never persisted
beyond a re-put message the CommitLog could still lose (the re-put does not wait for the flush,
WAIT=false, exactly as RocketMQ). Without it, a re-put lost with the unflushed CommitLog tail while
the file already counted it is lost (RocketMQ 4.x has that window too).

Deviations from RocketMQ 4.x, and why
-------------------------------------
- A stored-but-not-fully-durable status (FLUSH_DISK_TIMEOUT, ...) counts as delivered: the message
  is in the CommitLog, so a retry would deliver it twice.
- A re-put refused as MESSAGE_ILLEGAL / PROPERTIES_SIZE_EXCEEDED (or raising MessageRejected) is
  dropped with an error log instead of being retried forever: it can never succeed, and retrying
  would block every later message of its level.
- A cursor outside its queue is corrected at every round, not only at load: below the queue's min
  offset (retention deleted the messages) it moves up; above the max offset (the queue was
  truncated) it moves down, so that the messages stored there next are not skipped.

Thread-safety
-------------
`deliver_due` is meant to run on one thread (the service thread); calls are serialised by a lock
anyway, so a stray call from elsewhere cannot deliver a message twice. `persist`, `offsets`,
`stats` and `next_due_ms` may be called from any thread: they read the cursors under a short state
lock that is never held during a put. `load` runs before `start` and before any delivery. The pure
functions are thread-safe.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from .log.codec import CorruptMessage, MessageRejected
from .message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_WAIT_STORE_MSG_OK,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    Message,
    MessageExt,
    parked,
    transaction_type,
)
from .metadata.json_file import read_json, write_json_atomically
from .metadata.topic_config import SCHEDULE_TOPIC, TRANS_HALF_TOPIC
from .queue.consume_queue import CqUnit
from .results import PutMessageResult
from .service_thread import ServiceThread
from .status import PutMessageStatus

log = logging.getLogger(__name__)

# TRANS_HALF_TOPIC: a delayed message must never be re-put there (RocketMQ drops it with a
# "[BUG]" error too); a prepared transaction is never delayed in the first place.
DELAY_OFFSET_FILE = "delayOffset.json"

DEFAULT_FLUSH_DELAY_OFFSET_INTERVAL_MS = 10_000  # RocketMQ's flushDelayOffsetInterval
DEFAULT_RETRY_DELAY_MS = 10_000  # RocketMQ's DELAY_FOR_A_PERIOD after a failed re-put
DEFAULT_MAX_PER_LEVEL = 128
DELIVER_INTERVAL_MS = 100  # RocketMQ's DELAY_FOR_A_WHILE: each level's timer period

_UNIT_MS = {"s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_LEVEL_TOKEN = re.compile(r"([0-9]+)([a-zA-Z]?)")
# What Java's Integer.parseInt accepts (ASCII digits only here): an optional sign, then digits.
_JAVA_INT = re.compile(r"[+-]?[0-9]+")
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
# A delivery time (store time + delay) must fit the i64 tags code; store times are far below 2**62.
_MAX_DELAY_MS = 1 << 62
_PEEK_CHUNK = 512  # units read per step while looking past fillers
_MAX_MARKS = 4096  # per-level delivery marks kept for the durability guard (see _Level.marks)
# Statuses a re-put can never recover from: retrying would block the level forever.
_PERMANENT_FAILURES = frozenset({PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED})


# -- delay levels ----------------------------------------------------------------------------------


def parse_delay_levels(text: str) -> tuple[int, ...]:
    """Milliseconds per delay level from RocketMQ's `messageDelayLevel` ("1s 5s 10s ... 2h");
    level 1 is index 0. Units s, m, h, d (lower case, as RocketMQ's table). ValueError names the
    offending token."""
    if not isinstance(text, str):
        raise ValueError(f"messageDelayLevel must be a string, got {type(text).__name__}")
    tokens = text.split()
    if not tokens:
        raise ValueError("messageDelayLevel is empty; expected levels such as '1s 5s 10s 30s 1m'")
    levels = []
    for level, token in enumerate(tokens, start=1):
        match = _LEVEL_TOKEN.fullmatch(token)
        if match is None or match.group(2) not in _UNIT_MS:
            raise ValueError(
                f"messageDelayLevel level {level}: {token!r} is not a number followed by one of "
                f"s, m, h, d (e.g. '30s', '2h')"
            )
        delay = int(match.group(1)) * _UNIT_MS[match.group(2)]
        if delay >= _MAX_DELAY_MS:
            raise ValueError(f"messageDelayLevel level {level}: {token!r} is too long a delay")
        levels.append(delay)
    return tuple(levels)


def _check_levels(levels: Sequence[int]) -> tuple[int, ...]:
    result = tuple(levels)
    if not result:
        raise ValueError("at least one delay level is needed")
    for delay in result:
        if not isinstance(delay, int) or isinstance(delay, bool) or not 0 <= delay < _MAX_DELAY_MS:
            raise ValueError(f"delay levels must be non-negative ints (ms), got {delay!r}")
    return result


def _parse_java_int(text: object) -> int | None:
    """Integer.parseInt's accepted texts, as an int; None for anything it would reject."""
    if not isinstance(text, str) or not _JAVA_INT.fullmatch(text):
        return None
    value = int(text)
    return value if _INT32_MIN <= value <= _INT32_MAX else None


def delay_level_of(properties: Mapping[str, str]) -> int:
    """The DELAY level a stored message carries, 0 when none or not an integer. For readers of
    stored messages (the dispatcher): a CommitLog written elsewhere may hold any text there, and
    a read must not fail on it. The put path rejects such text instead (`to_schedule_message`)."""
    value = _parse_java_int(properties.get(PROPERTY_DELAY_TIME_LEVEL)) if properties else None
    return value if value is not None else 0


# -- the put-path and delivery transforms ----------------------------------------------------------


def to_schedule_message(msg: Message, levels: Sequence[int]) -> Message:
    """The message the put path stores for `msg` (RocketMQ's CommitLog.putMessage).

    A non-transactional or committed message whose DELAY property is a level > 0 goes to
    SCHEDULE_TOPIC, queue level - 1, a level above the highest becoming the highest (DELAY is
    rewritten to match, so the dispatcher computes the same delivery time), with REAL_TOPIC and
    REAL_QID recording where it belongs. Anything else (a message already on SCHEDULE_TOPIC
    included) is returned unchanged. A DELAY that is not an
    integer raises MessageRejected(MESSAGE_ILLEGAL)."""
    properties = msg.properties
    if not properties or PROPERTY_DELAY_TIME_LEVEL not in properties or msg.topic == SCHEDULE_TOPIC:
        # Already a schedule-topic record (a tool or a replay writing it as is): transforming it
        # again would overwrite REAL_TOPIC with the schedule topic and make it loop forever.
        return msg
    if not isinstance(msg.sys_flag, int) or transaction_type(msg.sys_flag) not in (
        TRANSACTION_NOT_TYPE,
        TRANSACTION_COMMIT_TYPE,
    ):
        # Prepared / rolled-back messages are never delayed (RocketMQ reads DELAY only for the other
        # two types). A non-int sys_flag is left for the codec to reject with its own message.
        return msg
    raw = properties[PROPERTY_DELAY_TIME_LEVEL]
    level = _parse_java_int(raw)
    if level is None:
        raise MessageRejected(
            PutMessageStatus.MESSAGE_ILLEGAL,
            f"property {PROPERTY_DELAY_TIME_LEVEL}={raw!r} is not a delay level (an integer)",
        )
    if level <= 0:
        return msg
    max_level = len(levels)
    if max_level == 0:
        raise ValueError("no delay levels configured")
    level = min(level, max_level)
    return parked(msg, SCHEDULE_TOPIC, level - 1, {PROPERTY_DELAY_TIME_LEVEL: str(level)})


def delivery_time_ms(level: int, store_timestamp_ms: int, levels: Sequence[int]) -> int:
    """The tags code the dispatcher writes for a SCHEDULE_TOPIC unit: when it becomes due.

    A level above the highest counts as the highest (RocketMQ's dispatch clamps the same way, and
    the level list may have been shortened since the message was stored). A level below 1 (no
    usable DELAY on a schedule-topic record: a foreign or damaged CommitLog) makes the message due
    at its store time: it was meant to be delivered, and there is no telling when."""
    if level < 1 or not levels:
        return store_timestamp_ms
    return store_timestamp_ms + levels[min(level, len(levels)) - 1]


def restore_real_message(msg: MessageExt) -> Message:
    """The message to re-put when a delayed message is due (RocketMQ's messageTimeup): topic and
    queue from REAL_TOPIC / REAL_QID, DELAY removed (else the put path would delay it again), WAIT
    set to "false" (delivery does not wait for the flush); body, flags, hosts, born time, reconsume
    times and every other property (REAL_TOPIC / REAL_QID included) kept. ValueError when
    REAL_TOPIC or REAL_QID is missing or REAL_QID is not a queue id: the record is corrupt."""
    properties = dict(msg.properties)
    real_topic = properties.get(PROPERTY_REAL_TOPIC)
    real_qid = properties.get(PROPERTY_REAL_QUEUE_ID)
    where = f"delayed message {msg.msg_id or '?'} at CommitLog offset {msg.physical_offset}"
    if not real_topic:
        raise ValueError(f"{where} has no {PROPERTY_REAL_TOPIC} property")
    if real_topic == SCHEDULE_TOPIC:
        # Re-putting it there would make it due again at once: a delivery loop.
        raise ValueError(f"{where} has {PROPERTY_REAL_TOPIC}={SCHEDULE_TOPIC}")
    queue_id = _parse_java_int(real_qid)
    if queue_id is None or queue_id < 0:
        raise ValueError(f"{where} has {PROPERTY_REAL_QUEUE_ID}={real_qid!r}, not a queue id")
    properties.pop(PROPERTY_DELAY_TIME_LEVEL, None)
    properties[PROPERTY_WAIT_STORE_MSG_OK] = "false"
    return msg.to_message(topic=real_topic, queue_id=queue_id, properties=properties)


def _parse_offset_table(content: Any, source: str) -> dict[int, int]:
    """Level -> cursor from a delayOffset.json document; ValueError when it is not one."""
    raw = content.get("offsetTable") if isinstance(content, dict) else None
    if not isinstance(raw, dict):
        raise ValueError(f'{source}: expected {{"offsetTable": {{level: offset}}}}, got {content!r:.200}')
    table: dict[int, int] = {}
    for key, value in raw.items():
        level = _parse_java_int(str(key))
        if level is None or level < 1:
            raise ValueError(f"{source}: {key!r} is not a delay level")
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{source}: level {level} has offset {value!r}, not a non-negative int")
        table[level] = value
    return table


def delay_offset_path(store_root: Path | str) -> Path:
    """Where RocketMQ keeps the delay offsets: `<storePathRootDir>/config/delayOffset.json`."""
    return Path(store_root) / "config" / DELAY_OFFSET_FILE


# -- what the service needs from the store ---------------------------------------------------------


class UnitQueue(Protocol):
    """The part of a ConsumeQueue the service reads (store.consume_queue.ConsumeQueue has it)."""

    @property
    def min_offset(self) -> int: ...

    @property
    def max_offset(self) -> int: ...

    def get_units(self, queue_offset: int, max_count: int) -> list[CqUnit]: ...


class ScheduleStore(Protocol):
    """The store as the service sees it (MessageStore provides it)."""

    def find_consume_queue(self, topic: str, queue_id: int) -> UnitQueue | None:
        """The ConsumeQueue of (topic, queue id), None when it does not exist (yet)."""
        ...

    def read_message(self, physical_offset: int) -> MessageExt:
        """The message at a CommitLog offset. Raises CorruptMessage (or LookupError / ValueError)
        when there is none there, e.g. because retention deleted its file."""
        ...

    def put_message(self, msg: Message) -> PutMessageResult:
        """Store a message; `result.status.is_stored` when it is in the CommitLog."""
        ...


# -- statistics ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LevelStats:
    level: int
    delay_ms: int
    offset: int  # the next queue offset to deliver
    max_offset: int  # the end of the level's queue (= offset when the queue does not exist)
    delivered: int  # re-put and stored since the service was created
    skipped: int  # units passed without a delivery: unreadable, corrupt, or refused as illegal
    failed_puts: int  # re-puts that failed for a passing reason (each retried later)
    lag_ms: int  # now - due time of the oldest undelivered due message; 0 when nothing is due

    @property
    def backlog(self) -> int:
        """Units not yet handled (fillers included)."""
        return max(0, self.max_offset - self.offset)


@dataclass(frozen=True, slots=True)
class ScheduleStats:
    now_ms: int
    levels: tuple[LevelStats, ...]

    @property
    def delivered(self) -> int:
        return sum(s.delivered for s in self.levels)

    @property
    def delivered_by_level(self) -> dict[int, int]:
        return {s.level: s.delivered for s in self.levels}

    @property
    def lag_ms(self) -> int:
        """The largest lag over all levels."""
        return max((s.lag_ms for s in self.levels), default=0)


# -- the service -----------------------------------------------------------------------------------


class _Level:
    """One level's cursor and counters. Mutated by the delivering thread under the state lock."""

    __slots__ = (
        "level",
        "delay_ms",
        "offset",
        "retry_at",
        "delivered",
        "skipped",
        "failed_puts",
        "marks",
        "end",
        "durable_cursor",
        "durable_end",
    )

    def __init__(self, level: int, delay_ms: int, offset: int) -> None:
        self.level = level
        self.delay_ms = delay_ms
        self.offset = offset
        self.retry_at: int | None = None  # no attempt before this time after a failed re-put
        self.delivered = 0
        self.skipped = 0
        self.failed_puts = 0
        # Durability guard: (cursor, CommitLog end of every re-put up to it) per cursor move since
        # the last persist; persist() writes the last cursor whose CommitLog end is durable.
        self.marks: deque[tuple[int, int]] = deque()
        self.end = 0  # CommitLog end of this level's latest re-put
        self.durable_cursor = offset  # the cursor persist() writes under the guard
        self.durable_end = 0  # every re-put behind durable_cursor ends at or below this


class ScheduleMessageService:
    def __init__(
        self,
        store: ScheduleStore,
        levels: Sequence[int] | str,
        offsets_path: Path | str,
        clock_ms: Callable[[], int],
        *,
        flush_delay_offset_interval_ms: int = DEFAULT_FLUSH_DELAY_OFFSET_INTERVAL_MS,
        max_per_level: int = DEFAULT_MAX_PER_LEVEL,
        retry_delay_ms: int = DEFAULT_RETRY_DELAY_MS,
        durable_offset: Callable[[], int] | None = None,
    ) -> None:
        """`levels`: ms per level (or the messageDelayLevel text). `offsets_path`: the
        delayOffset.json file (`delay_offset_path(root)`). `clock_ms`: wall-clock ms, the time base
        of store timestamps. `max_per_level`: most re-puts per level per `deliver_due` call.
        `durable_offset`: the CommitLog offset up to which data survives a crash (its flushed
        offset); None persists cursors as delivered."""
        self._store = store
        self._levels = parse_delay_levels(levels) if isinstance(levels, str) else _check_levels(levels)
        self._path = Path(offsets_path)
        self._clock_ms = clock_ms
        if flush_delay_offset_interval_ms <= 0 or max_per_level <= 0 or retry_delay_ms < 0:
            raise ValueError("flush interval and max_per_level must be positive, retry_delay_ms non-negative")
        self._flush_interval_ms = flush_delay_offset_interval_ms
        self._max_per_level = max_per_level
        self._retry_delay_ms = retry_delay_ms
        self._durable_offset = durable_offset
        self._state = {n: _Level(n, delay, 0) for n, delay in enumerate(self._levels, start=1)}
        self._unknown: dict[int, int] = {}  # levels in the file that the configuration lacks
        self._state_lock = threading.Lock()
        self._deliver_lock = threading.Lock()
        self._persist_lock = threading.Lock()
        self._last_written: dict[str, int] | None = None
        # Until load() succeeds the cursors are placeholders: persisting them would overwrite the
        # real file with zeros (a mass re-delivery), and delivering from them would re-deliver.
        self._loaded = False
        self._more_due = False
        self._thread: _ScheduleThread | None = None

    # -- configuration and cursors ---------------------------------------------------------------

    @property
    def levels(self) -> tuple[int, ...]:
        return self._levels

    @property
    def offsets_path(self) -> Path:
        return self._path

    @property
    def offsets(self) -> dict[int, int]:
        """Level -> next queue offset to deliver (in memory; may be ahead of the file)."""
        with self._state_lock:
            return {n: s.offset for n, s in self._state.items()}

    def delivery_time_ms(self, level: int, store_timestamp_ms: int) -> int:
        """`delivery_time_ms` with this service's levels (the dispatcher's callback)."""
        return delivery_time_ms(level, store_timestamp_ms, self._levels)

    def to_schedule_message(self, msg: Message) -> Message:
        """`to_schedule_message` with this service's levels (the put path's transform)."""
        return to_schedule_message(msg, self._levels)

    # -- load and persist ------------------------------------------------------------------------

    def load(self) -> None:
        """Read delayOffset.json (or its .bak) and move each cursor into its queue's range. Call it
        after the store recovered its ConsumeQueues and before puts are accepted. No file: every
        level starts at 0. ValueError for a file that does not parse or lacks RocketMQ's shape."""
        self._loaded = False
        content = read_json(self._path)
        table = _parse_offset_table(content, str(self._path)) if content is not None else {}
        # Cursors on disk were written only as far as their re-puts were durable: they all lie
        # in the log recovered before this call.
        durable_end = self._durable_now()
        with self._state_lock:
            self._set_cursors(table, durable_end)
            self._last_written = None
            self._loaded = True
        # RocketMQ's correctDelayOffset: recovery may have left a queue shorter than the file
        # says (or retention shorter at the front); fix the cursors before new puts land there.
        for state in self._state.values():
            queue = self._queue(state.level)
            if queue is not None:
                with self._state_lock:
                    self._corrected_offset(state, queue)
        if self._unknown:
            log.warning(
                "%s has offsets for delay levels %s beyond the %d configured; keeping them untouched",
                self._path,
                sorted(self._unknown),
                len(self._levels),
            )

    def _set_cursors(self, table: Mapping[int, int], durable_end: int) -> None:
        """Every level's cursor from `table` (0 where it has none), all of whose re-puts end at or
        below `durable_end`; state lock held."""
        for n, state in self._state.items():
            state.offset = state.durable_cursor = table.get(n, 0)
            state.durable_end = durable_end
            state.marks.clear()
            state.retry_at = None
        self._unknown = {n: off for n, off in table.items() if n not in self._state}

    def _durable_now(self) -> int:
        return self._durable_offset() if self._durable_offset is not None else 0

    # -- copying between brokers (a slave follows its master's cursors) ---------------------------

    def cursors_at(self, log_offset: int) -> dict[str, Any] | None:
        """The cursors (a delayOffset.json document) as a broker whose log ends at `log_offset`
        may take them over: every re-put behind them lies below that offset, so it holds every
        delivered message. None when the marks this service keeps cannot tell (the offset is
        below the re-puts behind the cursors last persisted), and before `load()`."""
        if not self._loaded:
            return None
        with self._state_lock:
            table = {str(n): off for n, off in self._unknown.items()}
            for n, state in self._state.items():
                if self._durable_offset is None:
                    # No marks are kept: only the in-memory cursor, behind the latest re-put.
                    if state.end > log_offset:
                        return None
                    table[str(n)] = state.offset
                    continue
                if state.durable_end > log_offset:
                    return None
                cursor = state.durable_cursor
                for mark_cursor, end in state.marks:
                    if end > log_offset:
                        break
                    cursor = mark_cursor
                table[str(n)] = cursor
        return {"offsetTable": table}

    def replace_offsets(self, document: Any, source: str = "the master's delay offsets") -> bool:
        """Take another broker's cursors (a `cursors_at` document) and write them. Only while no
        delivery runs (a slave); RuntimeError otherwise. False when they equal this broker's.
        ValueError (nothing changed) for a document that is not a delay offset table."""
        table = _parse_offset_table(document, source)
        with self._persist_lock:
            if self._thread is not None:
                raise RuntimeError("delay cursors are replaced only while deliveries are stopped")
            with self._state_lock:
                current = {n: s.offset for n, s in self._state.items()} | self._unknown
                wanted = {n: table.get(n, 0) for n in self._state} | table
                if current == wanted:
                    return False
                written = {str(n): off for n, off in wanted.items()}
            write_json_atomically(self._path, {"offsetTable": written})
            durable_end = self._durable_now()
            with self._state_lock:
                self._set_cursors(table, durable_end)
                self._last_written = written
                self._loaded = True
        return True

    def _persistable(self, durable: int | None) -> dict[str, int]:
        """The table to write (state lock held): cursors, held back to the last durable mark."""
        table = {str(n): off for n, off in self._unknown.items()}
        for n, state in self._state.items():
            if durable is None:
                state.marks.clear()
                table[str(n)] = state.offset
                continue
            # Marks come in cursor-move order with non-decreasing CommitLog ends: the durable ones
            # form a prefix, and the last of them is the cursor that survives a crash.
            while state.marks and state.marks[0][1] <= durable:
                state.durable_cursor, state.durable_end = state.marks.popleft()
            table[str(n)] = state.durable_cursor
        return table

    def persist(self) -> bool:
        """Write delayOffset.json when the cursors changed since the last write. True when written.
        With `durable_offset`, a level's cursor is written only as far as its re-puts are durable.
        Before a successful `load()` it writes nothing (the file on disk is the truth then)."""
        if not self._loaded:
            return False
        with self._persist_lock:
            durable = self._durable_offset() if self._durable_offset is not None else None
            with self._state_lock:
                table = self._persistable(durable)
            if table == self._last_written:
                return False
            write_json_atomically(self._path, {"offsetTable": table})
            self._last_written = table
            return True

    # -- delivery --------------------------------------------------------------------------------

    def _queue(self, level: int) -> UnitQueue | None:
        return self._store.find_consume_queue(SCHEDULE_TOPIC, level - 1)

    def _move(self, state: _Level, offset: int) -> None:
        """Set a level's cursor, leaving a durability mark (state lock held)."""
        state.offset = offset
        if self._durable_offset is None:
            return
        if state.marks and state.marks[-1][1] == state.end:
            # Same CommitLog end as the previous mark: both become durable at once, and the later
            # cursor is the one persist() would write.
            state.marks[-1] = (offset, state.end)
            return
        if len(state.marks) >= _MAX_MARKS:
            # Forgetting the oldest mark only holds persist() back until a later one is durable.
            state.marks.popleft()
        state.marks.append((offset, state.end))

    def _corrected_offset(self, state: _Level, queue: UnitQueue) -> int:
        """The level's cursor moved into its queue's [min, max] (state lock held)."""
        offset = state.offset
        low, high = queue.min_offset, queue.max_offset
        if offset < low:
            log.warning(
                "delay level %d: offset %d is below its queue's min offset %d (retention deleted %d "
                "messages before delivery); continuing from %d",
                state.level,
                offset,
                low,
                low - offset,
                low,
            )
            self._move(state, low)
        elif offset > high:
            log.warning(
                "delay level %d: offset %d is beyond its queue's end %d (the queue was truncated); continuing from %d",
                state.level,
                offset,
                high,
                high,
            )
            self._move(state, high)
        return state.offset

    def _due(self, unit: CqUnit, now_ms: int, delay_ms: int) -> int:
        # RocketMQ's correctDeliverTimestamp: a delivery time more than one delay beyond now can
        # only come from a clock that went back (or a damaged unit); deliver it now instead of
        # holding the whole level hostage to it.
        due = unit.tags_code
        return now_ms if due > now_ms + delay_ms else due

    def deliver_due(self, now_ms: int) -> int:
        """Re-put every message due at `now_ms`, level by level, at most `max_per_level` per level.
        Returns how many were delivered (stored). RuntimeError before `load()`."""
        if not self._loaded:
            raise RuntimeError("load() the schedule service before delivering")
        with self._deliver_lock:
            more = False
            delivered = 0
            for state in self._state.values():
                try:
                    count, level_more = self._deliver_level(state, now_ms)
                except Exception:
                    # One level's trouble (a queue file gone bad) must not stop the others.
                    log.exception("delay level %d: delivery failed; retrying later", state.level)
                    self._pause(state, now_ms)
                    continue
                delivered += count
                more = more or level_more
            self._more_due = more
            return delivered

    def _deliver_level(self, state: _Level, now_ms: int) -> tuple[int, bool]:
        """Deliver one level's due messages; (delivered, whether its budget ran out with more due)."""
        if state.retry_at is not None and now_ms < state.retry_at:
            return 0, False
        queue = self._queue(state.level)
        if queue is None:
            return 0, False
        with self._state_lock:
            state.retry_at = None
            offset = self._corrected_offset(state, queue)
        budget = self._max_per_level
        delivered = 0
        unreadable: list[int] = []
        try:
            while True:
                units = queue.get_units(offset, _PEEK_CHUNK)
                if not units:
                    return delivered, False
                for unit in units:
                    if unit.is_filler:
                        offset += 1
                        continue
                    if self._due(unit, now_ms, state.delay_ms) > now_ms:
                        return delivered, False
                    if budget == 0:
                        return delivered, True
                    budget -= 1
                    outcome = self._deliver_unit(state, offset, unit, now_ms, unreadable)
                    if outcome is None:
                        return delivered, False  # failed re-put: retry later, cursor stays
                    delivered += outcome
                    offset += 1
                    with self._state_lock:
                        self._move(state, offset)
        finally:
            with self._state_lock:
                if offset > state.offset:  # trailing fillers
                    self._move(state, offset)
            if unreadable:
                log.warning(
                    "delay level %d: skipped %d unit(s) whose message cannot be read (deleted by "
                    "retention or corrupt), queue offsets %d..%d",
                    state.level,
                    len(unreadable),
                    unreadable[0],
                    unreadable[-1],
                )

    def _deliver_unit(self, state: _Level, offset: int, unit: CqUnit, now_ms: int, unreadable: list[int]) -> int | None:
        """Handle one due unit: 1 when re-put and stored, 0 when skipped for good, None when the
        re-put failed and must be retried (the level is then paused for `retry_delay_ms`)."""
        try:
            stored = self._store.read_message(unit.commit_log_offset)
        except (CorruptMessage, LookupError, ValueError):
            unreadable.append(offset)
            self._count(state, "skipped")
            return 0
        except Exception:
            # An I/O error may pass; the message may still be there. Retry rather than lose it.
            log.exception("delay level %d: reading queue offset %d failed; retrying later", state.level, offset)
            self._pause(state, now_ms)
            return None
        if stored.topic != SCHEDULE_TOPIC or stored.physical_offset != unit.commit_log_offset:
            # The CommitLog under this unit holds something else (it was truncated and rewritten):
            # re-putting it would duplicate a message that was never delayed.
            log.error(
                "delay level %d: queue offset %d points at CommitLog offset %d, which holds a %r "
                "message, not a delayed one; skipping it",
                state.level,
                offset,
                unit.commit_log_offset,
                stored.topic,
            )
            self._count(state, "skipped")
            return 0
        try:
            real = restore_real_message(stored)
        except ValueError as exc:
            log.error("delay level %d: queue offset %d: %s; dropping it", state.level, offset, exc)
            self._count(state, "skipped")
            return 0
        if real.topic == TRANS_HALF_TOPIC:
            log.error(
                "delay level %d: queue offset %d: a delayed message for %s; dropping it",
                state.level,
                offset,
                real.topic,
            )
            self._count(state, "skipped")
            return 0
        try:
            result = self._store.put_message(real)
        except MessageRejected as exc:
            log.error(
                "delay level %d: queue offset %d: the store refuses the message (%s); dropping it",
                state.level,
                offset,
                exc.reason,
            )
            self._count(state, "skipped")
            return 0
        except Exception:
            log.exception("delay level %d: re-putting queue offset %d failed; retrying later", state.level, offset)
            self._pause(state, now_ms)
            return None
        status = result.status
        if status.is_stored:
            with self._state_lock:
                state.delivered += 1
                state.end = max(state.end, result.next_offset)
            return 1
        if status in _PERMANENT_FAILURES:
            log.error(
                "delay level %d: queue offset %d: the store refuses the message (%s %s); dropping it",
                state.level,
                offset,
                status.name,
                result.reason,
            )
            self._count(state, "skipped")
            return 0
        log.warning(
            "delay level %d: re-putting queue offset %d failed (%s); retrying in %d ms",
            state.level,
            offset,
            status.name,
            self._retry_delay_ms,
        )
        self._pause(state, now_ms)
        return None

    def _count(self, state: _Level, counter: str) -> None:
        with self._state_lock:
            setattr(state, counter, getattr(state, counter) + 1)

    def _pause(self, state: _Level, now_ms: int) -> None:
        with self._state_lock:
            state.failed_puts += 1
            state.retry_at = now_ms + self._retry_delay_ms

    # -- looking ahead ---------------------------------------------------------------------------

    def _head(self, state: _Level, now_ms: int) -> tuple[int, int | None]:
        """(end of the level's queue, due time of its first undelivered message or None)."""
        queue = self._queue(state.level)
        if queue is None:
            return state.offset, None
        with self._state_lock:
            offset = state.offset
        end = queue.max_offset
        if offset < queue.min_offset:
            return end, now_ms  # the next round corrects the cursor: work to do now
        while True:
            units = queue.get_units(offset, _PEEK_CHUNK)
            if not units:
                return end, None
            for unit in units:
                if not unit.is_filler:
                    return end, self._due(unit, now_ms, state.delay_ms)
            offset += len(units)

    def next_due_ms(self, now_ms: int | None = None) -> int | None:
        """The earliest time a delivery could happen on what is queued now (a level paused after a
        failed re-put counts from its retry time); None when every level is caught up. New
        messages arrive at any time, so a caller polls at least every DELIVER_INTERVAL_MS."""
        now = self._clock_ms() if now_ms is None else now_ms
        if self._more_due:
            return now
        earliest: int | None = None
        for state in self._state.values():
            _, due = self._head(state, now)
            retry_at = state.retry_at
            if due is not None and retry_at is not None:
                due = max(due, retry_at)
            if due is not None and (earliest is None or due < earliest):
                earliest = due
        return earliest

    def stats(self, now_ms: int | None = None) -> ScheduleStats:
        now = self._clock_ms() if now_ms is None else now_ms
        levels = []
        for state in self._state.values():
            end, due = self._head(state, now)
            with self._state_lock:
                levels.append(
                    LevelStats(
                        level=state.level,
                        delay_ms=state.delay_ms,
                        offset=state.offset,
                        max_offset=max(end, state.offset),
                        delivered=state.delivered,
                        skipped=state.skipped,
                        failed_puts=state.failed_puts,
                        lag_ms=max(0, now - due) if due is not None else 0,
                    )
                )
        return ScheduleStats(now_ms=now, levels=tuple(levels))

    # -- thread adapter --------------------------------------------------------------------------

    def start(self) -> None:
        """Run deliveries on a background thread (call `load()` first)."""
        if not self._loaded:
            raise RuntimeError("load() the schedule service before start()")
        if self._thread is not None:
            raise RuntimeError("the schedule service is already started")
        self._thread = _ScheduleThread(self)
        self._thread.start()

    def wakeup(self) -> None:
        if self._thread is not None:
            self._thread.wakeup()

    @property
    def running(self) -> bool:
        return self._thread is not None

    def shutdown(self, timeout_s: float = 30.0) -> None:
        """Stop the thread after its current round, then persist the cursors: the file then holds
        exactly what was delivered (with `durable_offset`: what is durable; call `persist()` again
        after the CommitLog's final flush). Idempotent; without a thread it only persists, and
        before `load()` it does nothing."""
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.stop(timeout_s)
        self.persist()


class _ScheduleThread(ServiceThread):
    """Calls deliver_due every DELIVER_INTERVAL_MS (at once again while a level has more due than
    one round's budget) and persists every flush_delay_offset_interval_ms."""

    name = "ScheduleMessageService"

    def __init__(self, service: ScheduleMessageService) -> None:
        super().__init__()
        self._service = service
        self._next_persist_ms: int | None = None

    def run_once(self) -> None:
        service = self._service
        now = service._clock_ms()
        service.deliver_due(now)
        if self._next_persist_ms is None:
            self._next_persist_ms = now + service._flush_interval_ms
        elif now >= self._next_persist_ms:
            self._next_persist_ms = now + service._flush_interval_ms
            try:
                service.persist()
            except OSError:
                log.exception("persisting delay offsets failed; retrying at the next interval")
        if service._more_due:
            return  # a level used its whole budget with more due: no idling (it made progress)
        self.wait_for_running(DELIVER_INTERVAL_MS / 1000)


__all__ = [
    "DEFAULT_FLUSH_DELAY_OFFSET_INTERVAL_MS",
    "DEFAULT_MAX_PER_LEVEL",
    "DEFAULT_RETRY_DELAY_MS",
    "DELAY_OFFSET_FILE",
    "DELIVER_INTERVAL_MS",
    "SCHEDULE_TOPIC",
    "TRANS_HALF_TOPIC",
    "LevelStats",
    "ScheduleMessageService",
    "ScheduleStats",
    "ScheduleStore",
    "UnitQueue",
    "delay_level_of",
    "delay_offset_path",
    "delivery_time_ms",
    "parse_delay_levels",
    "restore_real_message",
    "to_schedule_message",
]
