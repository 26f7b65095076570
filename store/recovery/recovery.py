"""Recovery of a whole store at load: the CommitLog, its ConsumeQueues and IndexFiles made
consistent with each other after a clean shutdown or a crash.

1. Load the checkpoint, the CommitLog segments, every ConsumeQueue (each recovered to its first
   invalid unit) and the IndexFiles (after a crash, files newer than the checkpoint's index time
   are dropped).
2. Walk the CommitLog from the earliest of: where CRC checks start (the segment of the trusted
   flushed offset; three segments back after a clean shutdown) and where re-dispatch starts (the
   checkpoint's logics offset: below it every message is durable in its queue and index).
3. Cut a torn tail, or refuse to start over damage to durable data (`recovery.check_recoverable`).
4. Drop queue units that point at or past the new end (nothing visible that is not in the log)
   and fsync the kept tail. The queue offset table is the queues' ends, raised by every message
   the walk saw (messages not yet in their queue keep their offsets after a restart).

Re-dispatch itself runs when the store starts, before it takes puts, so that nothing below the
recovery point is missing from its queue. Runs on the thread that loads the store.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass

from ..config import StoreConfig
from ..index.index_file import IndexService
from ..log.commitlog import NO_QUEUE_OFFSET_TYPES
from ..log.commitlog_scan import QueueOffsets, check_recoverable, choose_scan_start, scan_commitlog
from ..log.mapped_file_queue import MappedFileQueue
from ..message import transaction_type
from ..queue.consume_queue import ConsumeQueueTable
from ..results import RecoveryReport
from .checkpoint import StoreCheckpoint

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RecoveredStore:
    report: RecoveryReport
    dispatch_from_offset: int
    queue_offset_table: dict[str, int]


def _segment_start(starts: list[int], offset: int) -> int:
    chosen = starts[0]
    for start in starts:
        if start <= offset:
            chosen = start
    return chosen


def _indexed_by(consume_queues: ConsumeQueueTable):
    """Where a queue's ConsumeQueue puts a queue offset (None when it does not hold it)."""

    def indexed(topic: str, queue_id: int, queue_offset: int) -> int | None:
        queue = consume_queues.find(topic, queue_id)
        if queue is None or not queue.min_offset <= queue_offset < queue.max_offset:
            return None
        unit = queue.get_unit(queue_offset)
        return None if unit is None or unit.is_filler else unit.commit_log_offset

    return indexed


def recover_store(
    config: StoreConfig,
    checkpoint: StoreCheckpoint,
    queue: MappedFileQueue,
    consume_queues: ConsumeQueueTable,
    index: IndexService | None,
    *,
    abnormal: bool,
) -> RecoveredStore:
    began = time.monotonic()
    state = checkpoint.load()
    queue.load()
    queues_on_disk = consume_queues.load()
    consume_queues.recover()
    reindex_from = None
    if index is not None:
        reindex_from = index.load(
            last_exit_ok=not abnormal, index_msg_timestamp=state.index_msg_timestamp if checkpoint.trusted else 0
        )

    trusted = state.physic_flushed_offset if checkpoint.trusted and state.physic_flushed_offset else None
    starts = [f.file_from_offset for f in queue.files]
    crc_start = choose_scan_start(starts, trusted, normal=not abnormal)
    min_offset = queue.min_offset
    logics = state.logics_flushed_offset if checkpoint.trusted else 0
    if queues_on_disk == 0:
        logics = min_offset  # no queue files at all (e.g. copied from elsewhere): rebuild them all
    dispatch_from = max(min_offset, logics)
    if reindex_from is not None:
        # IndexFiles dropped at load are rebuilt by re-dispatch; queue puts it repeats are no-ops.
        dispatch_from = max(min_offset, min(dispatch_from, reindex_from))
    walk_start = min(crc_start, _segment_start(starts, dispatch_from)) if starts else 0

    seen: dict[str, int] = {}

    def on_message(offset, record) -> None:
        if transaction_type(record.sys_flag) not in NO_QUEUE_OFFSET_TYPES:
            seen[f"{record.topic}-{record.queue_id}"] = record.queue_offset + 1

    def on_progress(done: int, total: int) -> None:
        log.info("recovery: checked %d of %d MiB", done >> 20, total >> 20)

    result = scan_commitlog(
        [(f.file_from_offset, f.buf) for f in queue.files],
        config.mapped_file_size_commit_log,
        walk_start,
        verify_crc=config.check_crc_on_recover,
        crc_from_offset=crc_start,
        on_message=on_message,
        on_progress=on_progress if starts and starts[-1] - walk_start > (256 << 20) else None,
        probe_bytes=config.max_append_size + 8,
        probe_tail=abnormal or trusted is None,
        rule=QueueOffsets(_indexed_by(consume_queues)),
    )
    check_recoverable(result, trusted, config.store_path_root_dir)
    end = result.end_offset
    if not result.clean:
        log.warning(
            "CommitLog ends at %d (%s); cutting the torn tail%s%s",
            end,
            result.reason or "zeros",
            f", non-zero bytes from {result.data_after_end}" if result.data_after_end is not None else "",
            f"; whole records from {result.valid_after_end} were never known durable and are dropped"
            if result.valid_after_end is not None
            else "",
        )
    zero_to = result.dirty_end if result.dirty_end is not None else end
    queue.truncate(end, zero_to - end)
    for segment in queue.files:
        if segment.end_offset > walk_start:
            os.fdatasync(segment.fd)
    consume_queues.truncate_dirty(end)
    if index is not None:
        rebuild_from = index.truncate_past(end)
        if rebuild_from is not None:
            dispatch_from = max(min_offset, min(dispatch_from, rebuild_from))
    consume_queues.correct_min_offset(queue.min_offset)

    table = consume_queues.queue_offset_table()
    for key, next_offset in seen.items():
        if next_offset > table.get(key, 0):
            table[key] = next_offset
    checkpoint.update(
        physic_flushed_offset=end,
        physic_msg_timestamp=max(state.physic_msg_timestamp, result.last_store_timestamp_ms),
        logics_flushed_offset=min(dispatch_from, end),
    )
    checkpoint.persist()
    report = RecoveryReport(
        abnormal=abnormal,
        scan_start_offset=crc_start,
        end_offset=end,
        messages_scanned=result.messages,
        truncated_from=None if result.clean else end,
        reason=result.reason,
        seconds=time.monotonic() - began,
    )
    log.info(
        "store loaded (%s shutdown): CommitLog [%d, %d), CRCs checked from %d, %d queues, re-dispatch from %d, %.2f s",
        "abnormal" if abnormal else "normal",
        min_offset,
        end,
        crc_start,
        len(consume_queues),
        min(dispatch_from, end),
        report.seconds,
    )
    return RecoveredStore(report, min(dispatch_from, end), table)
