"""Offline rebuild of a store's ConsumeQueues and IndexFiles from its CommitLog.

`rebuild_store(store_dir, out_dir, ...)` walks the CommitLog in order exactly as the broker's
dispatcher does (`store.codec.check_record` without the body CRC, `store.dispatch.
build_dispatch_request`) and hands every record to the store's own dispatch consumers
(`store.dispatch.queue_consumer`, `index_consumer`), which write through the store's writers
(`store.consume_queue.ConsumeQueueTable`, `store.index_file.IndexService`): the files are byte for
byte what the broker writes, given the same geometry (ConsumeQueue file size, hash slots, index
entries, delay levels). IndexFile names carry their creation time, as the broker's do; their
contents match.

Like the dispatcher, the walk stops at the first record failing its checks (it never skips one);
the report says where and why. It runs in one process: IndexFile hash chains are built in CommitLog
order across all topics, and the queue writes are sequential I/O. The source store is only read;
`out_dir` gets `consumequeue/` and `index/` (it must not hold them already). Not thread-safe: one
rebuild per output directory.
"""

from __future__ import annotations

import mmap
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from store.clock import wall_clock_ms
from store.codec import CorruptMessage, RecordKind, check_record
from store.config import DEFAULT_MESSAGE_DELAY_LEVEL
from store.consume_queue import CONSUME_QUEUE_DIR, DEFAULT_FILE_SIZE, ConsumeQueueTable
from store.dispatch import build_dispatch_request, index_consumer, queue_consumer
from store.index_file import DEFAULT_HASH_SLOT_NUM, DEFAULT_INDEX_NUM, IndexService
from store.schedule import delivery_time_ms, parse_delay_levels
from store.stats import StoreStats

from .layout import read_layout

PROGRESS_EVERY_BYTES = 64 << 20


class RebuildError(Exception):
    """The rebuild cannot start (the output already holds queues or indexes)."""


@dataclass(frozen=True, slots=True)
class RebuildReport:
    store_dir: str
    out_dir: str
    start_offset: int
    end_offset: int  # where the walk stopped: the end of the log, or a bad record
    messages: int
    queues: int
    index_files: int
    stopped_at: int | None  # offset of a record failing its checks, if the walk stopped on one
    reason: str | None
    seconds: float

    @property
    def ok(self) -> bool:
        return self.stopped_at is None


def rebuild_store(  # noqa: C901, PLR0915 - the rebuild's steps in order over one walk of the log
    store_dir: str | Path,
    out_dir: str | Path,
    *,
    consume_queue_file_size: int = DEFAULT_FILE_SIZE,
    hash_slot_num: int = DEFAULT_HASH_SLOT_NUM,
    index_num: int = DEFAULT_INDEX_NUM,
    message_delay_level: str = DEFAULT_MESSAGE_DELAY_LEVEL,
    index: bool = True,
    clock_ms: Callable[[], int] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> RebuildReport:
    began = time.monotonic()
    layout = read_layout(store_dir)
    out = Path(out_dir)
    for name in (CONSUME_QUEUE_DIR, "index"):
        target = out / name
        if target.exists() and any(target.iterdir()):
            raise RebuildError(f"{target} already holds files; rebuild into an empty directory")
    out.mkdir(parents=True, exist_ok=True)
    clock = clock_ms or wall_clock_ms
    queues = ConsumeQueueTable(out, consume_queue_file_size)
    indexes = IndexService(out, hash_slot_num=hash_slot_num, index_num=index_num, clock_ms=clock) if index else None
    levels = parse_delay_levels(message_delay_level)
    consumers = [queue_consumer(queues, StoreStats(clock))]
    if indexes is not None:
        indexes.load(last_exit_ok=True)
        consumers.append(index_consumer(indexes))

    def delivery(level: int, store_ts: int) -> int:
        return delivery_time_ms(level, store_ts, levels)

    size = layout.segment_size
    offset = layout.min_offset
    total = layout.total_bytes
    messages = 0
    stopped_at = reason = None
    next_progress = offset + PROGRESS_EVERY_BYTES
    try:
        for seg in layout.segments:
            if seg.start != offset:
                if seg.start < offset:
                    continue
                stopped_at, reason = offset, f"no segment file from {offset} to {seg.start}"
                break
            with open(seg.path, "rb") as f:
                buf = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ)
            try:
                pos = 0
                ended = False
                while pos < size:
                    try:
                        record = check_record(buf, pos, size, offset, verify_crc=False)
                    except CorruptMessage as exc:
                        stopped_at, reason, ended = offset, exc.reason, True
                        break
                    if record.kind == RecordKind.BLANK:
                        offset = seg.start + size
                        break
                    if record.kind == RecordKind.END:
                        ended = True
                        break
                    request = build_dispatch_request(record, buf, offset, delivery)
                    for consumer in consumers:
                        consumer(request)
                    messages += 1
                    pos += record.size
                    offset += record.size
                    if on_progress is not None and offset >= next_progress:
                        on_progress(offset - layout.min_offset, total)
                        next_progress = offset + PROGRESS_EVERY_BYTES
                else:
                    offset = seg.start + size
            finally:
                buf.close()
            if ended:
                break
        queue_count = len(queues)
        index_files = len(indexes.files) if indexes is not None else 0
    finally:
        queues.close()
        if indexes is not None:
            indexes.close()
    if on_progress is not None:
        on_progress(offset - layout.min_offset, total)
    return RebuildReport(
        store_dir=str(store_dir),
        out_dir=str(out),
        start_offset=layout.min_offset,
        end_offset=offset,
        messages=messages,
        queues=queue_count,
        index_files=index_files,
        stopped_at=stopped_at,
        reason=reason,
        seconds=time.monotonic() - began,
    )


def format_rebuild(report: RebuildReport) -> str:
    r = report
    lines = [
        f"Rebuilt {r.queues} ConsumeQueue(s) and {r.index_files} IndexFile(s) in {r.out_dir} from the CommitLog of "
        f"{r.store_dir}: {r.messages} messages, offsets [{r.start_offset}, {r.end_offset}), {r.seconds:.2f} s"
    ]
    if r.stopped_at is not None:
        lines.append(f"STOPPED at offset {r.stopped_at}: {r.reason} (the broker's dispatch stops there too)")
    return "\n".join(lines)
