"""Timed messages on a master: a message sent with a delivery time waits in the timer topic and is
put to its real topic and queue when the time comes; over `store.timer_state`.

`timer_message` makes the waiting copy (REAL_TOPIC / REAL_QID / TIMER_DELIVER_MS). Each round wakes at
the earliest delivery time (at least every `poll_s`, which also picks up new timed messages) and
puts each due message to its real topic as the delay levels' schedule does
(`store.schedule.restore_real_message`: the copy keeps REAL_TOPIC, so consumers see a DELAY
message, and its put does not wait for durability; a record without a usable REAL_TOPIC / REAL_QID
is logged and dropped). Then it records the offsets as delivered, and that record's put waits: it
is later in the log, so once it is durable the deliveries are too. A master that dies between a
delivery and its record delivers the message again on the new master (at least once); nothing is
delivered early.

The state is read from the two system queues as they grow, from the start again when the store's
role generation changes (start, promotion, truncation). A slave delivers nothing: the loop skips
while `refusal()` says this broker may not write.

Thread-safety: one event loop; store calls run in worker threads.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import replace

from rocketstore.broker.timer_state import (
    PROPERTY_TIMER_DELIVER_MS,
    TimerState,
    decode_done,
    deliver_ms_of,
    encode_done,
)
from store import MessageStore
from store.log.codec import CorruptMessage
from store.message import PROPERTY_REAL_TOPIC, Message, MessageExt, parked
from store.metadata.topic_config import TIMER_DONE_TOPIC, TIMER_TOPIC
from store.schedule import restore_real_message

from .repeating import Repeating
from .system_queue import read_events, read_queue

log = logging.getLogger("rocketstore.broker.timer")

_READER_GROUP = "RS_SYS_TIMER"
_MAX_PER_ROUND = 256


def timer_message(msg: Message, deliver_ms: int) -> Message:
    return parked(msg, TIMER_TOPIC, 0, {PROPERTY_TIMER_DELIVER_MS: str(deliver_ms)})


class TimerService:
    def __init__(
        self,
        store: MessageStore,
        clock_ms: Callable[[], int],
        refusal: Callable[[], object | None],
        poll_s: float = 0.2,
    ) -> None:
        self._store = store
        self._clock = clock_ms
        self._refusal = refusal
        self._poll_s = poll_s
        self._state = TimerState()
        self._generation: int | None = None
        self._timers_next = 0
        self._done_next = 0
        self._rounds = Repeating(self.fire_due, self._sleep_s, "timer")

    def _catch_up(self) -> None:
        """Blocking: the timed messages and delivery records written since the last call."""
        store, state = self._store, self._state

        def on_timer(ext: MessageExt) -> None:
            at = deliver_ms_of(ext.properties)
            if at is None or PROPERTY_REAL_TOPIC not in ext.properties:
                log.error("timed message at %d has no delivery time or real topic; skipped", ext.physical_offset)
                return
            state.add(ext.physical_offset, at)

        self._done_next = read_events(
            store, _READER_GROUP, TIMER_DONE_TOPIC, self._done_next, decode_done, state.delivered, "timer"
        )
        self._timers_next = read_queue(store, _READER_GROUP, TIMER_TOPIC, 0, self._timers_next, on_timer)
        state.forget_below(store.min_offset)

    async def _ready(self) -> TimerState:
        generation = self._store.role_generation
        if generation != self._generation:
            self._state, self._timers_next, self._done_next = TimerState(), 0, 0
            self._generation = generation
            await asyncio.to_thread(self._store.wait_dispatched, 5.0)
        await asyncio.to_thread(self._catch_up)
        return self._state

    async def fire_due(self) -> int:
        """Deliver what is due now (on a master that may write); how many were delivered."""
        if self._refusal() is not None:
            return 0
        state = await self._ready()
        delivered: list[int] = []
        for offset in state.due(self._clock(), _MAX_PER_ROUND):
            try:
                ext = await asyncio.to_thread(self._store.read_message, offset)
                # This broker stores the delivery: its own address goes into the offset message id.
                real = replace(restore_real_message(ext), store_host=None)
            except (CorruptMessage, ValueError) as exc:
                log.error("timed message at %d unreadable (%s); dropped", offset, exc)
                delivered.append(offset)
                continue
            result = await self._store.async_put_message(real)
            if not result.status.is_stored:
                log.warning("timed message at %d not delivered (%s); retried", offset, result.status.name)
                break
            delivered.append(offset)
        if delivered:
            for offset in delivered:
                state.delivered(offset)
            await self._store.async_put_message(
                Message(topic=TIMER_DONE_TOPIC, queue_id=0, body=encode_done(delivered))
            )
        return len(delivered)

    def _sleep_s(self) -> float:
        next_ms = self._state.next_due_ms()
        if next_ms is None:
            return self._poll_s
        return min(max((next_ms - self._clock()) / 1000, 0.0), self._poll_s)

    def start(self) -> None:
        self._rounds.start()

    async def stop(self) -> None:
        await self._rounds.stop()
