"""The ConsumeQueue and IndexFile flusher (RocketMQ's FlushConsumeQueueService), which also owns
persisting the checkpoint.

Every `flushIntervalConsumeQueue` it flushes ConsumeQueues with at least
`flushConsumeQueueLeastPages` dirty pages and the IndexFiles. Every
`flushConsumeQueueThoroughInterval`, and at shutdown, it flushes everything and then records in the
checkpoint the dispatch offset captured before that flush: every message below it is durable in
its queue and index, so recovery re-dispatches from there. The checkpoint is written after those
fsyncs, never before. Thread-safety: its own thread; `flush_all` also runs at shutdown after the
thread stopped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..index.index_file import IndexService
from ..recovery.checkpoint import StoreCheckpoint
from ..service_thread import PagedService
from .consume_queue import ConsumeQueueTable
from .dispatch import Dispatcher

log = logging.getLogger(__name__)


class FlushConsumeQueueService(PagedService):
    name = "flush-consume-queue"

    def __init__(
        self,
        queues: ConsumeQueueTable,
        index: IndexService | None,
        dispatcher: Dispatcher,
        checkpoint: StoreCheckpoint,
        *,
        interval_ms: int,
        least_pages: int,
        thorough_interval_ms: int,
        clock_ms: Callable[[], int],
        on_round: Callable[[int], None] | None = None,
    ) -> None:
        super().__init__(interval_ms, least_pages, thorough_interval_ms, clock_ms)
        self._queues = queues
        self._index = index
        self._dispatcher = dispatcher
        self._checkpoint = checkpoint
        self._on_round = on_round

    def flush_all(self) -> None:
        """Flush every queue and index file, then move the checkpoint's logics offset."""
        dispatched = self._dispatcher.reput_from_offset
        timestamp = self._dispatcher.last_dispatched_store_timestamp_ms
        self._queues.flush(0)
        if self._index is not None:
            self._index.flush()
        # One millisecond lower for the index: messages of the same millisecond dispatched after
        # the capture may sit unflushed in a file whose end time equals it; after a crash such a
        # file must count as newer than the checkpoint, so that it is rebuilt.
        self._checkpoint.advance(
            logics_flushed_offset=dispatched,
            logics_msg_timestamp=timestamp,
            index_msg_timestamp=max(0, timestamp - 1),
        )
        self._checkpoint.persist()

    def run_once(self) -> None:
        least = self._next_round_least_pages()
        try:
            if least == 0:
                self.flush_all()
            else:
                self._queues.flush(least)
                if self._index is not None:
                    self._index.flush()
                self._checkpoint.persist()
        except OSError as exc:
            log.error("ConsumeQueue/IndexFile flush failed: %s", exc)
        if self._on_round is not None:
            self._on_round(self._clock())

    def on_stop(self) -> None:
        try:
            self.flush_all()
        except OSError as exc:
            log.error("final ConsumeQueue/IndexFile flush failed: %s", exc)
