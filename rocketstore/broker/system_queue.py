"""Reading a system queue (pop state, transaction halves and ops) in order, in worker threads.

`read_queue` reads one queue of a topic from a queue offset to what is dispatched now and calls
`on_message` with each message; it returns the queue offset to read from next time. A queue offset
below the queue's first kept entry (retention) starts at that entry. Blocking (file reads): call it
from a worker thread. Stateless, thread-safe.
"""

from __future__ import annotations

from collections.abc import Callable

from store import GetMessageStatus, MessageStore
from store.message import MessageExt

from .v2_messages import MAX_PULL_BYTES

_BATCH = 256


def read_queue(
    store: MessageStore, group: str, topic: str, queue_id: int, offset: int, on_message: Callable[[MessageExt], None]
) -> int:
    offset = max(offset, store.min_queue_offset(topic, queue_id))
    while True:
        result = store.get_message(group, topic, queue_id, offset, _BATCH, MAX_PULL_BYTES)
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
