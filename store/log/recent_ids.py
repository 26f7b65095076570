"""`RecentIds`: the unique keys (UNIQ_KEY, the id a producer gives a message and keeps across its
retries) of the last messages stored, so that a producer retrying a send whose answer it lost is
answered with the original's result instead of storing the message twice.

Keyed by (stored topic, unique key): a delayed message is stored in the schedule topic and later
re-put to its real topic with the same key, and a transaction's half message and its commit share
a key too; those are different stores of one message and must both happen. The value is where the
original landed: (CommitLog offset, size, queue offset, store timestamp). At most `capacity` entries,
the oldest forgotten first; a dict lookup, no I/O, on the put path. The store fills it as it
appends, and at start-up from the tail of what it holds (see `MessageStore`), so a retry after a
crash or a failover is recognised as well.

A retry that races its original (both before either is appended) is not caught: the window is the
time one append takes, and a producer retries only after a timeout.

Thread-safety: `get` and `add` take a lock; any thread.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import NamedTuple


class Landed(NamedTuple):
    wrote_offset: int
    wrote_bytes: int
    queue_offset: int
    store_timestamp_ms: int


class RecentIds:
    def __init__(self, capacity: int) -> None:
        if capacity < 0:
            raise ValueError(f"the capacity must not be negative, got {capacity}")
        self.capacity = capacity
        self._entries: OrderedDict[tuple[str, str], Landed] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, topic: str, uniq_key: str) -> Landed | None:
        with self._lock:
            return self._entries.get((topic, uniq_key))

    def add(self, topic: str, uniq_key: str, landed: Landed) -> None:
        if not self.capacity:
            return
        key = (topic, uniq_key)
        with self._lock:
            entries = self._entries
            if key in entries:
                return  # the first store wins: later ones are the duplicates
            entries[key] = landed
            if len(entries) > self.capacity:
                entries.popitem(last=False)

    def add_many(self, landings: Iterable[tuple[str, str, Landed]]) -> None:
        """`add` for each (topic, unique key, landed) in turn, under one hold of the lock: a
        batch's keys, or a dispatch round's."""
        if not self.capacity:
            return
        capacity = self.capacity
        with self._lock:
            entries = self._entries
            for topic, uniq_key, landed in landings:
                key = (topic, uniq_key)
                if key in entries:
                    continue  # the first store wins: later ones are the duplicates
                entries[key] = landed
                if len(entries) > capacity:
                    entries.popitem(last=False)

    def forget_from(self, offset: int) -> None:
        """Drop entries at or past `offset`: the log was truncated there, and a retry of a message
        that went with the cut must be stored again, not answered with a result that is gone."""
        with self._lock:
            self._entries = OrderedDict((k, v) for k, v in self._entries.items() if v.wrote_offset < offset)

    def __len__(self) -> int:
        return len(self._entries)
