"""Reading a system queue (pop state, transaction halves and ops) in order, in worker threads.

`read_queue` reads one queue of a topic from a queue offset to what is dispatched now and calls
`on_message` with each message; it returns the queue offset to read from next time. A queue offset
below the queue's first kept entry (retention) starts at that entry. A damaged record
(MESSAGE_CORRUPTED: its body fails its CRC, and the store logged it) is passed over with an error
logged: these queues hold the broker's own state, which must not stop at one lost record, and
what the record said is decided again as for a record that does not decode (below). Blocking
(file reads): call it from a worker thread. `read_events` does the same for a topic of JSON event records. Stateless,
thread-safe.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from store import GetMessageStatus, MessageStore
from store.message import MessageExt

from .v2_messages import MAX_PULL_BYTES

_BATCH = 256
E = TypeVar("E")
log = logging.getLogger("rocketstore.broker.system_queue")


def read_queue(
    store: MessageStore, group: str, topic: str, queue_id: int, offset: int, on_message: Callable[[MessageExt], None]
) -> int:
    offset = max(offset, store.min_queue_offset(topic, queue_id))
    while True:
        result = store.get_message(group, topic, queue_id, offset, _BATCH, MAX_PULL_BYTES)
        if result.status is GetMessageStatus.MESSAGE_CORRUPTED:
            log.error("%s:%d: queue offset %d passed over: %s", topic, queue_id, offset, result.reason)
            offset = result.next_begin_offset + 1
            continue
        if result.status is not GetMessageStatus.FOUND:
            if result.status in (
                GetMessageStatus.OFFSET_TOO_SMALL,
                GetMessageStatus.OFFSET_FOUND_NULL,
                GetMessageStatus.MESSAGE_WAS_REMOVING,
            ):
                if result.next_begin_offset > offset:
                    offset = result.next_begin_offset
                    continue
            return offset
        for ext in result.messages:
            on_message(ext)
        offset = result.next_begin_offset


def read_events(
    store: MessageStore,
    group: str,
    topic: str,
    offset: int,
    decode: Callable[[bytes], list[E]],
    apply: Callable[[E], None],
    what: str,
) -> int:
    """`read_queue` over queue 0 of an event topic: each record's events decoded and applied in
    order. A record that does not decode is logged and skipped (its subject is decided again:
    redelivered, checked back, fired again), never stopping the broker."""

    def on_record(ext: MessageExt) -> None:
        try:
            events = decode(ext.body)
        except ValueError as exc:
            log.error("%s record at %d skipped: %s", what, ext.physical_offset, exc)
            return
        for event in events:
            apply(event)

    return read_queue(store, group, topic, 0, offset, on_record)
