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

Layout: a plain dict from key to `Landed` (in insertion order, the oldest first) and the keys again
in insertion order, in chunks of up to `_CHUNK` (a deque of lists, the first read from `_head`),
which say what to forget: a batch's keys are added with one dict update and one list extend, and
the oldest are dropped a chunk slice at a time, both in C loops, instead of an `OrderedDict` entry,
a tuple and an eviction test per key. A single key costs what it cost in an `OrderedDict`. A
batch whose keys are all new and distinct takes that way; any other (a key stored already, twice
in the batch) is added key by key, the first store of a key winning, with exactly
the outcome of adding its keys one at a time.

A retry that races its original (both before either is appended) is not caught: the window is the
time one append takes, and a producer retries only after a timeout.

Thread-safety: `get` and the adds take a lock; any thread.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Sequence
from itertools import repeat
from typing import NamedTuple


class Landed(NamedTuple):
    wrote_offset: int
    wrote_bytes: int
    queue_offset: int
    store_timestamp_ms: int


Key = tuple[str, str]

# Keys per chunk of the insertion order: big enough that a batch of 32 is a slice of one or two
# chunks, small enough that slicing the oldest chunk costs little.
_CHUNK = 256


class RecentIds:
    def __init__(self, capacity: int) -> None:
        if capacity < 0:
            raise ValueError(f"the capacity must not be negative, got {capacity}")
        self.capacity = capacity
        self._entries: dict[Key, Landed] = {}
        self._order: deque[list[Key]] = deque([[]])
        self._head = 0  # where the oldest key still held is in the first chunk
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
            order = self._order
            last = order[-1]
            last.append(key)
            if len(last) >= _CHUNK:
                order.append([])
            if len(entries) > self.capacity:  # by one: the oldest key goes
                oldest = order[0]
                head = self._head
                del entries[oldest[head]]
                head += 1
                if head == len(oldest) and len(order) > 1:
                    order.popleft()
                    head = 0
                self._head = head

    def add_many(self, landings: Iterable[tuple[str, str, Landed]]) -> None:
        """`add` for each (topic, unique key, landed) in turn, under one hold of the lock: a
        batch's keys, or a dispatch round's."""
        if not self.capacity:
            return
        items = landings if isinstance(landings, list) else list(landings)
        new = {(topic, uniq_key): landed for topic, uniq_key, landed in items}
        with self._lock:
            if len(new) == len(items) and self._entries.keys().isdisjoint(new):
                self._add_new(new)
            else:
                self._add_each(((topic, key), landed) for topic, key, landed in items)

    def add_run(self, topic: str, uniq_keys: Sequence[str], landings: Iterable[Landed]) -> None:
        """`add_many` for keys of one topic, `landings` in the same order: a batch's messages."""
        if not self.capacity:
            return
        keys = list(zip(repeat(topic), uniq_keys))
        values = list(landings)
        new = dict(zip(keys, values))
        with self._lock:
            if len(new) == len(keys) and self._entries.keys().isdisjoint(new):
                self._add_new(new)
            else:
                self._add_each(zip(keys, values))

    def _add_new(self, new: dict[Key, Landed]) -> None:
        """Keys all absent and distinct, in order: one update, then what is past the capacity."""
        self._entries.update(new)
        self._append_order(new)
        self._forget_oldest()

    def _add_each(self, pairs: Iterable[tuple[Key, Landed]]) -> None:
        entries = self._entries
        capacity = self.capacity
        for key, landed in pairs:
            if key in entries:
                continue  # the first store wins: later ones are the duplicates
            entries[key] = landed
            self._append_order((key,))
            if len(entries) > capacity:
                self._forget_oldest()

    def _append_order(self, keys: Iterable[Key]) -> None:
        order = self._order
        last = order[-1]
        last.extend(keys)
        if len(last) >= _CHUNK:
            order.append([])

    def _forget_oldest(self) -> None:
        """Drop the oldest keys past the capacity: the first chunk's keys from `_head` on (a
        chunk is dropped from the deque once all its keys are, and never sliced in place)."""
        entries = self._entries
        excess = len(entries) - self.capacity
        order = self._order
        while excess > 0:
            oldest = order[0]
            head = self._head
            n = min(len(oldest) - head, excess)
            if n <= 0:  # the order holds every key entries holds: a bug, not an input
                raise RuntimeError(f"recent ids: {excess} keys past the capacity but none left to forget")
            deque(map(entries.__delitem__, oldest[head : head + n]), maxlen=0)
            head += n
            excess -= n
            if head == len(oldest) and len(order) > 1:
                order.popleft()
                head = 0
            self._head = head

    def forget_from(self, offset: int) -> None:
        """Drop entries at or past `offset`: the log was truncated there, and a retry of a message
        that went with the cut must be stored again, not answered with a result that is gone."""
        with self._lock:
            self._entries = {k: v for k, v in self._entries.items() if v.wrote_offset < offset}
            keys = list(self._entries)
            self._order = deque([keys[i : i + _CHUNK] for i in range(0, len(keys), _CHUNK)] + [[]])
            self._head = 0

    def __len__(self) -> int:
        return len(self._entries)
