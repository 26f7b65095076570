"""Epoch histories and the consistent point between two of them, sans-IO.

An epoch is one master term of a broker group: its number is won in an etcd transaction (so one
number names one master for good), and it starts at the new master's CommitLog max offset. A
broker's history is the list of (epoch, start offset) entries of the bytes in its log: a master
appends one when it takes over, a slave copies its master's entries as the bytes arrive.

Why the consistent point is safe: within one epoch every byte comes from that epoch's single
master, appended in order, so two logs that hold the same epoch starting at the same offset agree
on every byte of it that both hold. Walking the local history newest first, the first epoch the
remote history also holds with the same start gives the point: the smaller of that epoch's two
ends. Past it, the logs were written by different masters (or one of them has nothing), so the
slave truncates there. An epoch both hold with different starts, or one the other never saw, is a
divergence: an older epoch decides.

`EpochHistory` is an immutable value; `consistent_point` a pure function. Thread-safe.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True, slots=True, order=True)
class EpochEntry:
    epoch: int
    start_offset: int


class EpochHistory:
    __slots__ = ("entries",)

    def __init__(self, entries: Iterable[EpochEntry] = ()) -> None:
        checked = tuple(entries)
        previous: EpochEntry | None = None
        for entry in checked:
            if entry.epoch < 0 or entry.start_offset < 0:
                raise ValueError(f"epoch entry {entry} is negative")
            if previous is not None:
                if entry.epoch <= previous.epoch:
                    raise ValueError(f"epoch entry {entry} does not follow {previous}: epochs must grow")
                if entry.start_offset < previous.start_offset:
                    raise ValueError(f"epoch entry {entry} starts before {previous}")
            previous = entry
        self.entries: tuple[EpochEntry, ...] = checked

    @property
    def last_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else 0

    def last(self) -> EpochEntry | None:
        return self.entries[-1] if self.entries else None

    def entry(self, epoch: int) -> EpochEntry | None:
        for entry in self.entries:
            if entry.epoch == epoch:
                return entry
        return None

    def end_offset(self, epoch: int, max_offset: int) -> int:
        """Where `epoch` ends: the next entry's start, or `max_offset` for the last one."""
        for i, entry in enumerate(self.entries):
            if entry.epoch == epoch:
                return self.entries[i + 1].start_offset if i + 1 < len(self.entries) else max_offset
        raise KeyError(f"epoch {epoch} is not in {self!r}")

    def epoch_at(self, offset: int) -> int | None:
        """The epoch whose range holds `offset` (the last entry starting at or before it)."""
        found = None
        for entry in self.entries:
            if entry.start_offset <= offset:
                found = entry.epoch
            else:
                break
        return found

    def with_entry(self, epoch: int, start_offset: int) -> "EpochHistory":
        last = self.last()
        if last is not None and (epoch <= last.epoch or start_offset < last.start_offset):
            raise ValueError(f"epoch {epoch} at {start_offset} cannot follow {last}")
        return EpochHistory(self.entries + (EpochEntry(epoch, start_offset),))

    def before(self, offset: int) -> "EpochHistory":
        """The entries starting before `offset`: what survives cutting the log at `offset`."""
        return EpochHistory(e for e in self.entries if e.start_offset < offset)

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Iterator[EpochEntry]:
        return iter(self.entries)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EpochHistory) and self.entries == other.entries

    def __hash__(self) -> int:
        return hash(self.entries)

    def __repr__(self) -> str:
        return "EpochHistory(" + ", ".join(f"{e.epoch}@{e.start_offset}" for e in self.entries) + ")"


def consistent_point(local: EpochHistory, local_max: int, remote: EpochHistory, remote_max: int) -> int | None:
    """The offset up to which the two logs are the same, judged by their epochs; None when they
    share no epoch (same number, same start)."""
    for entry in reversed(local.entries):
        theirs = remote.entry(entry.epoch)
        if theirs is not None and theirs.start_offset == entry.start_offset:
            return min(local.end_offset(entry.epoch, local_max), remote.end_offset(entry.epoch, remote_max))
    return None
