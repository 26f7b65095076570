"""The pop journal of a slave serving reads while its master is down (`PopJournal`).

A slave cannot write to its CommitLog (it only holds its master's bytes), yet a consumer acked on
it must not be lost. So a slave acting for its master keeps the pop state events it decides
(`store.pop_state`) in this file, and hands them back to a master later: to its old master when
that one is back (over replication), or to its own log when it is promoted itself. Once the
events are in a master's log they are dropped from here.

Layout: `<storePathRootDir>/pop_journal`, UTF-8 lines, each one batch of events in
`store.pop_state.encode_events` form (a JSON list, no newline inside) followed by "\\n". A line is
on disk before `append` returns (write, fsync). A crash in the middle of an append leaves a last
line with no newline; it was never acknowledged, so reading ignores it and the next append cuts
it off first. `drop` removes the first n lines by writing the rest to a temporary file, fsyncing it
and renaming it over the journal (the journal is removed when nothing is left): a crash leaves the
old journal or the new one, never a mix.

Thread-safety: every method takes the journal's lock; `generation` counts drops, so a reader that
built state from the journal knows when it changed under it.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from ..log.mapped_file import fsync_dir, replace_durably, write_synced
from .pop_state import Event, decode_events, encode_events

FILE_NAME = "pop_journal"


class PopJournal:
    def __init__(self, root_dir: str | os.PathLike[str]) -> None:
        self.path = Path(root_dir) / FILE_NAME
        self._lock = threading.Lock()
        self._generation = 0
        self._trimmed = False

    @property
    def generation(self) -> int:
        with self._lock:
            return self._generation

    def append(self, events: list[Event]) -> None:
        """One batch, durable before this returns (OSError when it could not be made so)."""
        line = encode_events(events) + b"\n"
        with self._lock:
            self._trim_torn_tail()
            created = not self.path.exists()
            write_synced(self.path, line, os.O_APPEND)
            if created:
                fsync_dir(self.path.parent)  # the new file's name must survive a crash too

    def batches(self) -> list[bytes]:
        """Every complete line, oldest first."""
        with self._lock:
            return self._read()

    def events(self) -> list[Event]:
        """Every event of every complete line, oldest first (ValueError for a corrupt line)."""
        return [event for batch in self.batches() for event in decode_events(batch)]

    def drop(self, count: int) -> None:
        """Forget the first `count` batches (they are in a master's log now)."""
        with self._lock:
            rest = self._read()[count:]
            if rest:
                replace_durably(self.path, b"".join(line + b"\n" for line in rest))
            else:
                self.path.unlink(missing_ok=True)
                fsync_dir(self.path.parent)
            self._generation += 1

    def _read(self) -> list[bytes]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        lines = data.split(b"\n")
        return [line for line in lines[:-1] if line]  # the part after the last newline is torn

    def _trim_torn_tail(self) -> None:
        if self._trimmed:
            return
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            self._trimmed = True
            return
        keep = data.rfind(b"\n") + 1
        if keep != len(data):
            os.truncate(self.path, keep)
        self._trimmed = True
