"""`EpochKeeper`: a broker's epoch history in memory and in its epoch file, kept in step.

Every change is written (`ha.epoch_file`, crash-safe) before the caller acts on it:
- `begin(epoch, start)` before a new master takes its first put, and before a slave appends the
  first bytes of an epoch it receives;
- `truncate(offset)` after the CommitLog was cut at `offset` (the cut is crash-safe on its own),
  dropping the epochs that started at or past it;
- `open(max_offset)` at start-up applies the same rule to the recovered log: an entry starting
  at or past the log's end covers no byte (a crash between a cut and its epoch-file update, or
  between `begin` and the first append), so it goes.

Thread-safety: every method may be called from any thread; changes are serialised by a lock.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from .epoch_file import EpochFile, epoch_file_path
from .epochs import EpochHistory

log = logging.getLogger(__name__)


class EpochKeeper:
    def __init__(self, store_root: Path | str) -> None:
        self._file = EpochFile(epoch_file_path(Path(store_root)))
        self._lock = threading.Lock()
        self._history = self._file.load()

    @property
    def history(self) -> EpochHistory:
        return self._history

    @property
    def last_epoch(self) -> int:
        return self._history.last_epoch

    def open(self, max_offset: int) -> EpochHistory:
        """Drop the entries that cover no byte of a log ending at `max_offset`."""
        with self._lock:
            kept = self._history.before(max_offset)
            if kept != self._history:
                log.warning(
                    "epoch file: dropping epochs %s that start at or past the log's end %d",
                    [e.epoch for e in self._history.entries[len(kept) :]],
                    max_offset,
                )
                self._save(kept)
            return self._history

    def begin(self, epoch: int, start_offset: int) -> EpochHistory:
        with self._lock:
            self._save(self._history.with_entry(epoch, start_offset))
            return self._history

    def truncate(self, offset: int) -> EpochHistory:
        with self._lock:
            kept = self._history.before(offset)
            if kept != self._history:
                self._save(kept)
            return self._history

    def _save(self, history: EpochHistory) -> None:
        self._file.store(history)
        self._history = history
