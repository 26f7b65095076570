"""Offline rebuild of a store's ConsumeQueues and IndexFiles from its CommitLog.

`rebuild_store(store_dir, out_dir, ...)` walks the CommitLog in order exactly as the broker's
dispatcher does and writes what the store's dispatch consumers write, through the store's own
writers (`store.consume_queue.ConsumeQueueTable`, `store.index_file.IndexService`): the files are
byte for byte what the broker writes, given the same geometry (ConsumeQueue file size, hash slots,
index entries, delay levels). IndexFile names carry their creation time, as the broker's do; their
contents match.

The walk and the dispatch decisions are vectorised, a window of records at a time: the chain is
found with `pipeline.decode.find_chain`, the records are decoded with `decode_records` (without the
body CRC, as the dispatcher checks them: `check_record(verify_crc=False)`), and for the records up
to the first that fails its checks the window yields each queue's units (the tags code is the
Java hash of TAGS, or the delivery time for SCHEDULE_TOPIC_XXXX; prepared and rolled-back
transaction messages get none) and the index entries (the UNIQ_KEY, then every key of KEYS, a key
named twice once, `topic#key` hashed as Java's String.hashCode; rolled-back messages get none).
Units go to `ConsumeQueue.put_run` a run of consecutive queue offsets at a time, entries to
`IndexService.put_hashes`, which make the decisions `put` and `put_key` make for each.

Like the dispatcher, the walk stops at the first record failing its checks (it never skips one);
the report says where and why (a record whose properties the codec cannot parse stops it too,
where the broker's dispatcher would fail on it). It runs in one process: IndexFile hash chains are
built in CommitLog order across all topics. The source store is only read; `out_dir` gets
`consumequeue/` and `index/` (it must not hold them already). Not thread-safe: one rebuild per
output directory.
"""

from __future__ import annotations

import mmap
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from store.clock import wall_clock_ms
from store.config import DEFAULT_MESSAGE_DELAY_LEVEL
from store.index.index_file import DEFAULT_HASH_SLOT_NUM, DEFAULT_INDEX_NUM, INT32_MAX, KEY_SEPARATOR, IndexService
from store.log.codec import CorruptMessage, RecordKind, check_record
from store.message import (
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
)
from store.queue.consume_queue import CONSUME_QUEUE_DIR, DEFAULT_FILE_SIZE, ConsumeQueueTable, tags_code
from store.schedule import SCHEDULE_TOPIC, delay_level_of, delivery_time_ms, parse_delay_levels

from .decode import decode_records, find_chain, property_values
from .layout import read_layout
from .strings import java_hashes

PROGRESS_EVERY_BYTES = 64 << 20
WINDOW_BYTES = 8 << 20  # records decoded at a time
_COLUMNS = (
    "physical_offset",
    "size",
    "topic",
    "queue_id",
    "queue_offset",
    "sys_flag",
    "store_timestamp",
    "properties",
    "tags",
    "keys",
    "error",
)
_UNIT = np.dtype([("offset", ">i8"), ("size", ">i4"), ("tags", ">i8")])
_NO_QUEUE_OFFSET = (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)


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
    if indexes is not None:
        indexes.load(last_exit_ok=True)
    size = layout.segment_size
    offset = layout.min_offset
    total = layout.total_bytes
    messages = 0
    stopped_at: int | None = None
    reason: str | None = None
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
                    limit = min(size, pos + WINDOW_BYTES)
                    starts, pos = find_chain(buf, seg.start, size, pos, limit)
                    if len(starts):
                        dispatched, bad = _dispatch(buf, seg.start, size, starts, queues, indexes, levels)
                        messages += dispatched
                        if bad is not None:
                            stopped_at, reason = bad
                            ended = True
                            break
                    offset = seg.start + pos
                    if on_progress is not None and offset >= next_progress:
                        on_progress(offset - layout.min_offset, total)
                        next_progress = offset + PROGRESS_EVERY_BYTES
                    if pos >= limit:
                        continue  # a window's end, or the segment's
                    try:
                        record = check_record(buf, pos, size, offset, verify_crc=False)
                    except CorruptMessage as exc:
                        stopped_at, reason, ended = offset, exc.reason, True
                        break
                    if record.kind == RecordKind.END:
                        ended = True
                    break  # the end of the data, or a blank record ending the segment
                if not ended:
                    offset = seg.start + size
            finally:
                try:
                    buf.close()
                except BufferError:
                    pass  # an Arrow view of the mapping is still alive; the mapping goes with it
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


def _dispatch(
    buf,
    seg_start: int,
    seg_size: int,
    starts,
    queues: ConsumeQueueTable,
    indexes: IndexService | None,
    levels: tuple[int, ...],
) -> tuple[int, tuple[int, str] | None]:
    """Dispatch the chain records at `starts` up to the first failing its checks: (messages
    dispatched, (offset, reason) of that record or None)."""
    table = pa.Table.from_batches(
        decode_records(buf, seg_start, seg_size, starts, broker="", verify_crc=False, columns=_COLUMNS)
    )
    if table.num_rows != len(starts) or table.column("error").null_count != table.num_rows:
        table = table.sort_by("physical_offset")
    bad = None
    errors = table.column("error")
    if errors.null_count != table.num_rows:
        first = int(np.flatnonzero(np.asarray(errors.is_valid()))[0])
        bad = (table.column("physical_offset")[first].as_py(), errors[first].as_py())
        table = table.slice(0, first)
    if table.num_rows:
        table = table.combine_chunks()
        _to_queues(table, queues, levels)
        if indexes is not None:
            _to_index(table, indexes)
    return table.num_rows, bad


def _tags_codes(table: pa.Table, levels: tuple[int, ...]) -> np.ndarray:
    """The ConsumeQueue tags code of each record (the dispatcher's `build_dispatch_request`)."""
    tags = table.column("tags").combine_chunks().dictionary_encode()
    per_tag = np.array([tags_code(t) for t in tags.dictionary.to_pylist()], np.int64)
    indices = tags.indices
    codes = np.zeros(table.num_rows, np.int64)
    valid = np.asarray(indices.is_valid())
    codes[valid] = per_tag[np.asarray(indices.filter(indices.is_valid()))]
    scheduled = np.flatnonzero(np.asarray(pc.equal(table.column("topic"), SCHEDULE_TOPIC).fill_null(False)))
    if len(scheduled):
        properties = table.column("properties").take(pa.array(scheduled)).to_pylist()
        stamps = np.asarray(table.column("store_timestamp"))[scheduled]
        for row, pairs, stamp in zip(scheduled.tolist(), properties, stamps.tolist()):
            codes[row] = delivery_time_ms(delay_level_of(dict(pairs or ())), stamp, levels)
    return codes


def _to_queues(table: pa.Table, queues: ConsumeQueueTable, levels: tuple[int, ...]) -> None:
    kind = np.asarray(table.column("sys_flag")) & TRANSACTION_TYPE_MASK
    queued = np.flatnonzero(~np.isin(kind, _NO_QUEUE_OFFSET))
    if not len(queued):
        return
    units = np.empty(len(queued), _UNIT)
    units["offset"] = np.asarray(table.column("physical_offset"))[queued]
    units["size"] = np.asarray(table.column("size"))[queued]
    units["tags"] = _tags_codes(table, levels)[queued]
    topics = table.column("topic").take(pa.array(queued)).combine_chunks().dictionary_encode()
    names = topics.dictionary.to_pylist()
    queue_ids = np.asarray(table.column("queue_id"))[queued].astype(np.int64)
    queue_offsets = np.asarray(table.column("queue_offset"))[queued]
    key = (np.asarray(topics.indices).astype(np.int64) << 32) | (queue_ids & 0xFFFFFFFF)
    order = np.argsort(key, kind="stable")  # each queue's units in CommitLog order
    key, queue_offsets, units = key[order], queue_offsets[order], units[order]
    # Runs of consecutive queue offsets within a queue.
    new = np.ones(len(key), bool)
    new[1:] = (key[1:] != key[:-1]) | (queue_offsets[1:] != queue_offsets[:-1] + 1)
    firsts = np.flatnonzero(new)
    for first, stop in zip(firsts.tolist(), [*firsts[1:].tolist(), len(key)]):
        k = int(key[first])
        queue = queues.get_or_create(names[k >> 32], int(queue_ids[order][first]))
        run_start = int(queue_offsets[first])
        if run_start >= queue.max_offset:
            queue.put_run(run_start, units[first:stop].tobytes())
        else:  # below the queue's end: put() says whether it repeats what is there
            for unit, queue_offset in zip(units[first:stop].tolist(), queue_offsets[first:stop].tolist()):
                queue.put(queue_offset, *unit)


def _to_index(table: pa.Table, indexes: IndexService) -> None:
    """Entries for every record but rolled-back transaction messages: `topic#key` for the
    UNIQ_KEY and each key of KEYS, in that order, a key named twice in a record once."""
    kind = np.asarray(table.column("sys_flag")) & TRANSACTION_TYPE_MASK
    rows = np.flatnonzero(kind != TRANSACTION_ROLLBACK_TYPE)
    if not len(rows):
        return
    table = table.take(pa.array(rows))
    properties = table.column("properties").combine_chunks()
    uniq = property_values(properties, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, last=True)
    uniq_rows = np.flatnonzero(np.asarray(pc.and_(uniq.is_valid(), pc.not_equal(uniq, "")).fill_null(False)))
    tokens = pc.split_pattern(table.column("keys").combine_chunks().fill_null(""), KEY_SEPARATOR)
    token_rows = np.asarray(pc.list_parent_indices(tokens))
    token_values = pc.list_flatten(tokens)
    filled = np.asarray(pc.not_equal(token_values, ""))
    token_rows, token_values = token_rows[filled], token_values.filter(pa.array(filled))
    # Every record's keys in order: its UNIQ_KEY (rank 0), then its KEYS in order.
    rows_of = np.concatenate([uniq_rows, token_rows])
    values = pa.concat_arrays([uniq.take(pa.array(uniq_rows)), token_values])
    rank = np.concatenate([np.zeros(len(uniq_rows), np.int64), 1 + np.arange(len(token_rows))])
    order = np.lexsort((rank, rows_of))
    rows_of, values = rows_of[order], values.take(pa.array(order))
    keep = _first_of_each_key(rows_of, values)
    rows_of, values = rows_of[keep], values.filter(pa.array(keep))
    topics = table.column("topic").combine_chunks().take(pa.array(rows_of))
    hashes = _index_key_hashes(topics, values)
    indexes.put_hashes(
        hashes.tolist(),
        np.asarray(table.column("physical_offset"))[rows_of].tolist(),
        np.asarray(table.column("store_timestamp"))[rows_of].tolist(),
    )


def _first_of_each_key(rows_of: np.ndarray, values: pa.Array) -> np.ndarray:
    """Mask of the keys that are not a repeat of an earlier key of the same record (`rows_of`
    sorted; within a record, keys in order)."""
    keep = np.ones(len(rows_of), bool)
    if len(rows_of) < 2:
        return keep
    same_row = rows_of[1:] == rows_of[:-1]
    if not same_row.any():
        return keep
    # Two keys of a record: the second goes when it equals the first. More: as the codec's
    # dict.fromkeys, record by record (rare: KEYS holding several keys).
    per_row = np.bincount(rows_of - rows_of[0])
    many = per_row[rows_of - rows_of[0]] > 2
    pairs = np.flatnonzero(same_row & ~many[1:])
    if len(pairs):
        equal = np.asarray(pc.equal(values.take(pa.array(pairs + 1)), values.take(pa.array(pairs))))
        keep[pairs[equal] + 1] = False
    crowded = np.flatnonzero(many)
    if len(crowded):
        seen: set[tuple[int, str]] = set()
        for i, row, value in zip(
            crowded.tolist(), rows_of[crowded].tolist(), values.take(pa.array(crowded)).to_pylist()
        ):
            if (row, value) in seen:
                keep[i] = False
            seen.add((row, value))
    return keep


def _index_key_hashes(topics: pa.Array, keys: pa.Array) -> np.ndarray:
    """RocketMQ's index key hash of `topic#key`: abs(String.hashCode), Integer.MIN_VALUE -> 0."""
    if len(keys) == 0:
        return np.zeros(0, np.int64)
    h = java_hashes(pc.binary_join_element_wise(topics, keys, "#"))
    h = np.abs(h)
    h[h > INT32_MAX] = 0
    return h


def format_rebuild(report: RebuildReport) -> str:
    r = report
    lines = [
        f"Rebuilt {r.queues} ConsumeQueue(s) and {r.index_files} IndexFile(s) in {r.out_dir} from the CommitLog of "
        f"{r.store_dir}: {r.messages} messages, offsets [{r.start_offset}, {r.end_offset}), {r.seconds:.2f} s"
    ]
    if r.stopped_at is not None:
        lines.append(f"STOPPED at offset {r.stopped_at}: {r.reason} (the broker's dispatch stops there too)")
    return "\n".join(lines)
