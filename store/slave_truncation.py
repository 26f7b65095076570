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

Functions, no state of their own, on the caller's thread; the caller holds the store quiet (no
puts, no services).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .mapped_file import fsync_dir, replace_durably
from .mapped_file_queue import MappedFileQueue

INTENT_NAME = "truncating"
STEPS = ("after_intent", "after_checkpoint", "after_commitlog", "after_queues")


@dataclass(frozen=True, slots=True)
class TruncateResult:
    offset: int
    previous_max_offset: int
    removed_bytes: int
    segments_deleted: int


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
