"""Cutting a slave's CommitLog back to an offset (a divergent tail), crash-safely.

The cut is announced first by an intent file, `<storePathRootDir>/truncating`, holding the
target offset as decimal text (written to a temporary name, fsynced, renamed, directory
fsynced). Then, in this order:

1. the checkpoint's physical and logical offsets are lowered to at most the target and fsynced,
   so that recovery never takes bytes past the target for durable;
2. the CommitLog is cut (`cut_commit_log`): later segments deleted, newest first, the rest of the
   target's segment zeroed and fsynced; a target below the log's first offset empties the log;
3. ConsumeQueues drop units at or past the target, IndexFiles that index past it go, dispatch
   restarts from the target (or earlier, to rebuild a dropped IndexFile);
4. the intent file is removed (directory fsynced).

A crash anywhere leaves the intent file, and `MessageStore.load` finishes the cut after recovery
(which, thanks to step 1, accepts the half-cut tail as a torn one). Steps are named for tests that
inject a crash between them (`STEPS`).

`cut_store` is the whole sequence over the store's parts (`CutParts`); `finish_cut` is steps 1-4
alone, which recovery runs for an interrupted cut. Functions, no state of their own, on the
caller's thread; the caller holds the store quiet (no puts, no services).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..index.index_file import IndexService
from ..log.commitlog import CommitLog
from ..log.mapped_file import fsync_dir, replace_durably
from ..log.mapped_file_queue import MappedFileQueue
from ..log.recent_ids import RecentIds
from ..queue.consume_queue import ConsumeQueueTable
from ..queue.dispatch import Dispatcher
from .checkpoint import StoreCheckpoint

INTENT_NAME = "truncating"
STEPS = ("after_intent", "after_checkpoint", "after_commitlog", "after_queues")


@dataclass(frozen=True, slots=True)
class TruncateResult:
    offset: int
    previous_max_offset: int
    removed_bytes: int
    segments_deleted: int


@dataclass(frozen=True, slots=True)
class CutParts:
    """What a cut changes: the store's files and the state derived from them."""

    root: Path
    checkpoint: StoreCheckpoint
    commit_log: CommitLog
    consume_queues: ConsumeQueueTable
    index: IndexService | None
    dispatcher: Dispatcher
    recent_ids: RecentIds

    @property
    def queue(self) -> MappedFileQueue:
        return self.commit_log.queue


def intent_path(root: Path) -> Path:
    return Path(root) / INTENT_NAME


def write_intent(root: Path, offset: int) -> None:
    replace_durably(intent_path(root), f"{offset}\n".encode())


def read_intent(root: Path) -> int | None:
    """The target of an unfinished cut, or None. A torn intent (never renamed into place) is
    just absent; a file in place that does not hold a number is corruption and raises."""
    try:
        text = intent_path(root).read_text()
    except FileNotFoundError:
        return None
    if not text.strip().isdigit():
        raise ValueError(f"{intent_path(root)} holds {text!r}, not a CommitLog offset")
    return int(text)


def clear_intent(root: Path) -> None:
    path = intent_path(root)
    try:
        path.unlink()
    except FileNotFoundError:
        return
    fsync_dir(path.parent)


def cut_commit_log(queue: MappedFileQueue, offset: int) -> int:
    """Make `offset` the CommitLog's end (below its first offset: empty it). Returns the number
    of segments deleted."""
    before = len(queue.files)
    if not queue.files:
        return 0
    if offset < queue.min_offset:
        segments = list(queue.files)
        queue.delete_segment_files(list(reversed(segments)))
        queue.flushed_where = queue.committed_where = 0
        return before
    segment = queue.find(offset)
    zero = segment.end_offset - offset if segment is not None else 0
    queue.truncate(offset, zero)
    return before - len(queue.files)


def cut_store(
    parts: CutParts,
    offset: int,
    *,
    record_starts_at: Callable[[int], bool | None],
    quiesce: Callable[[], Callable[[], None]],
    step: Callable[[str], None],
) -> TruncateResult:
    """Cut the CommitLog back to `offset`, a record boundary in [min offset, end] (below the
    first offset: empty the log). `quiesce()` stops the store's services and returns what
    restarts them; `step(name)` runs between the steps (a test's crash point)."""
    log_ = parts.commit_log
    before = log_.max_offset
    if offset == before:
        return TruncateResult(offset, before, 0, 0)
    if not 0 <= offset < before:
        raise ValueError(f"cannot cut the CommitLog to {offset}: it ends at {before}")
    if offset >= log_.min_offset and not record_starts_at(offset):
        raise ValueError(f"{offset} is not a record boundary of the CommitLog")
    write_intent(parts.root, offset)
    step("after_intent")
    resume = quiesce()
    deleted = finish_cut(parts, offset, step)
    resume()
    return TruncateResult(log_.max_offset, before, before - log_.max_offset, deleted)


def finish_cut(parts: CutParts, offset: int, step: Callable[[str], None]) -> int:
    """Steps 1-4 for an announced cut to `offset`; returns the number of segments deleted."""
    parts.recent_ids.forget_from(offset)
    state = parts.checkpoint.state
    parts.checkpoint.update(
        physic_flushed_offset=min(state.physic_flushed_offset, offset),
        logics_flushed_offset=min(state.logics_flushed_offset, offset),
    )
    parts.checkpoint.persist()
    step("after_checkpoint")
    with parts.commit_log.lock:
        deleted = cut_commit_log(parts.queue, offset)
    step("after_commitlog")
    end = parts.commit_log.max_offset
    parts.consume_queues.truncate_dirty(end)
    reput_from = min(parts.dispatcher.reput_from_offset, end)
    if parts.index is not None:
        rebuild_from = parts.index.truncate_past(end)
        if rebuild_from is not None:
            reput_from = min(reput_from, rebuild_from)
    parts.dispatcher.reput_from_offset = max(parts.commit_log.min_offset, reput_from) if parts.queue.files else 0
    parts.commit_log.reset_queue_offsets(parts.consume_queues.queue_offset_table())
    step("after_queues")
    clear_intent(parts.root)
    return deleted
