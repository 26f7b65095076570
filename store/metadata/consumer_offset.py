"""Consumer offsets: the next queue offset each consumer group reads, RocketMQ's
ConsumerOffsetManager.

Owns `<root>/config/consumerOffset.json`, in the Java broker's shape:

    {"offsetTable": {"TopicTest@group_a": {"0": 12, "1": 3}}}

The Java broker (fastjson) writes the queue-id keys unquoted (`{0:12,1:3}`); such files load, as do
RocketMQ 5's files with a `dataVersion` beside the table (ignored). A key splits at its one `@`,
which neither a topic nor a group may contain.

Commits are frequent (every consumer acknowledges every few seconds per queue), so
`commit_offset` only updates memory and marks the table dirty; the broker calls `persist` /
`persist_if_dirty` on RocketMQ's flushConsumerOffsetInterval (5 s) and at shutdown. A write goes
through `store.json_file.write_json_atomically`, so a crash leaves the previous or the new file,
and offsets committed since the last persist are lost: consumers then re-consume from the older
offset (RocketMQ's at-least-once).

The table is bounded: a commit that would add an entry (topic, group, queue) beyond `max_entries`
(consumerOffsetMaxEntries) is refused with TABLE_FULL, while entries that exist keep taking
commits, so clients naming new groups cannot grow the table, its file and the slaves' copies
without end. The operator's resets (`bounded=False`), a loaded file and a master's copy are not
held to it.

Thread-safety: one lock guards the table and the dirty flag; a second lock serialises persists, so
the file is never written under the table lock and commits do not wait for an fsync.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .json_file import read_json, write_json_atomically
from .topic_config import validate_group_name, validate_topic_name

log = logging.getLogger(__name__)

OFFSETS_FILE = "consumerOffset.json"
SEPARATOR = "@"
_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1
DEFAULT_MAX_ENTRIES = 100_000


class OffsetCommit(enum.Enum):
    COMMITTED = "COMMITTED"
    # A new (topic, group, queue) entry, and the table already holds max_entries.
    TABLE_FULL = "TABLE_FULL"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_queue_id(queue_id: Any) -> None:
    if not _is_int(queue_id) or not 0 <= queue_id <= _INT32_MAX:
        raise ValueError(f"queue id must be an int in 0..{_INT32_MAX}, got {queue_id!r}")


class ConsumerOffsetManager:
    """Committed offsets of every (topic, group, queue), persisted under
    `<root>/config/consumerOffset.json`."""

    def __init__(self, root: str | Path, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        if max_entries < 1:
            raise ValueError(f"consumerOffsetMaxEntries must be at least 1, got {max_entries}")
        self.path = Path(root) / "config" / OFFSETS_FILE
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._persist_lock = threading.Lock()
        # (topic, group) -> {queue id: offset}. Loaded keys are not held to the naming rules (a
        # Java broker's file may predate them); only what this API commits is.
        self._table: dict[tuple[str, str], dict[int, int]] = {}
        self._entries = 0  # queue offsets in the table, over every (topic, group)
        self._dirty = False

    # -- loading ---------------------------------------------------------------------------------

    def load(self) -> None:
        """Read consumerOffset.json (or its .bak); a missing file is an empty table. Raises
        ValueError naming the file when its content is not an offset table."""
        content = read_json(self.path)
        table = self._parse(content, str(self.path)) if content is not None else {}
        with self._lock:
            self._table = table
            self._entries = _count(table)
            self._dirty = False

    def _parse(self, content: Any, source: str) -> dict[tuple[str, str], dict[int, int]]:
        if not isinstance(content, dict):
            raise ValueError(f"{source}: expected a JSON object, got {type(content).__name__}")
        raw_table = content.get("offsetTable", {})
        if not isinstance(raw_table, dict):
            raise ValueError(f"{source}: offsetTable is not an object")
        return {
            self._parse_key(key, source): self._parse_queues(key, queues, source) for key, queues in raw_table.items()
        }

    @staticmethod
    def _parse_key(key: str, source: str) -> tuple[str, str]:
        topic, sep, group = key.partition(SEPARATOR)
        if not sep or not topic or not group or SEPARATOR in group:
            raise ValueError(f"{source}: offsetTable key {key!r} is not topic@group")
        return topic, group

    @staticmethod
    def _parse_queues(key: str, queues: Any, source: str) -> dict[int, int]:
        if not isinstance(queues, dict):
            raise ValueError(f"{source}: {key}: expected an object of queue id -> offset")
        parsed = {}
        for raw_id, offset in queues.items():
            # Plain digits only: int() would also take " 1", "+1" and "1_0".
            if not (isinstance(raw_id, str) and raw_id.isascii() and raw_id.isdigit()):
                raise ValueError(f"{source}: {key}: queue id {raw_id!r} is not a non-negative int")
            queue_id = int(raw_id)
            if not _is_int(offset) or offset < 0:
                raise ValueError(f"{source}: {key}: bad entry {raw_id!r}: {offset!r}")
            parsed[queue_id] = offset
        return parsed

    # -- copying between brokers (a slave follows its master's offsets) --------------------------

    def document(self) -> dict[str, Any]:
        """The table as consumerOffset.json holds it."""
        with self._lock:
            return self._snapshot()

    def merge_from(self, document: Any, source: str = "the master's consumer offsets") -> int:
        """Take another broker's offsets (a `document()`), as RocketMQ's slave does: each
        topic@group entry of the document replaces this broker's, entries it lacks stay. Marked
        dirty (written at the next persist) when anything changed; returns how many entries
        changed. ValueError (nothing changed) for a document that is not an offset table."""
        table = self._parse(document, source)
        with self._lock:
            changed = 0
            for key, queues in table.items():
                old = self._table.get(key)
                if old != queues:
                    self._entries += len(queues) - (len(old) if old is not None else 0)
                    self._table[key] = queues
                    changed += 1
            if changed:
                self._dirty = True
        return changed

    # -- commits and queries ---------------------------------------------------------------------

    def commit_offset(
        self, group: str, topic: str, queue_id: int, offset: int, *, bounded: bool = True
    ) -> OffsetCommit:
        """Record the group's next offset for the queue, in memory. Last commit wins, as in
        RocketMQ: an offset may move backwards (a consumer resetting its offset). TABLE_FULL
        (nothing changed) when it would add an entry past `max_entries`, unless not `bounded`
        (an operator's reset). ValueError for a bad name, queue id or offset."""
        validate_group_name(group)
        validate_topic_name(topic)
        _check_queue_id(queue_id)
        if not _is_int(offset) or not 0 <= offset <= _INT64_MAX:
            raise ValueError(f"offset must be an int in 0..{_INT64_MAX}, got {offset!r}")
        with self._lock:
            queues = self._table.get((topic, group))
            if queues is None or queue_id not in queues:
                if bounded and self._entries >= self.max_entries:
                    return OffsetCommit.TABLE_FULL
                self._entries += 1
                if queues is None:
                    queues = self._table[topic, group] = {}
            queues[queue_id] = offset
            self._dirty = True
        return OffsetCommit.COMMITTED

    def table_full_reason(self) -> str:
        """Why a commit answered TABLE_FULL, naming the key that raises the limit."""
        return (
            f"the consumer offset table holds {self.max_entries} entries (topic, group, queue), its limit "
            f"(consumerOffsetMaxEntries); offsets of groups and queues it holds are still committed"
        )

    @property
    def entries(self) -> int:
        with self._lock:
            return self._entries

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 (RocketMQ's "none yet") when there is none."""
        with self._lock:
            queues = self._table.get((topic, group))
            return -1 if queues is None else queues.get(queue_id, -1)

    def query_offsets(self, group: str, topic: str) -> dict[int, int]:
        """A copy of the group's offsets in the topic, by queue id (empty when none)."""
        with self._lock:
            return dict(self._table.get((topic, group), {}))

    def groups_of(self, topic: str) -> set[str]:
        with self._lock:
            return {g for (t, g) in self._table if t == topic}

    def groups(self) -> set[str]:
        """Every group with an offset in some topic."""
        with self._lock:
            return {g for (_, g) in self._table}

    def topics_of(self, group: str) -> set[str]:
        with self._lock:
            return {t for (t, g) in self._table if g == group}

    def remove_group(self, group: str) -> None:
        """Forget every offset of the group (RocketMQ's removeOffset), persisted at the next
        persist."""
        self._remove(lambda topic, g: g == group)

    def remove_topic(self, topic: str) -> list[str]:
        """Forget every group's offsets in the topic (a deleted topic); the groups, sorted."""
        return sorted(group for _, group in self._remove(lambda t, group: t == topic))

    def _remove(self, match: Callable[[str, str], bool]) -> list[tuple[str, str]]:
        """Drop the (topic, group) entries `match` picks; the keys dropped."""
        with self._lock:
            keys = [k for k in self._table if match(*k)]
            for key in keys:
                self._entries -= len(self._table.pop(key))
            if keys:
                self._dirty = True
        return keys

    def clamp_to_min(self, min_offsets: Callable[[str, int], int]) -> int:
        """Raise every committed offset below its queue's min offset to it (after retention
        deleted the messages it points at); returns how many were raised.

        `min_offsets(topic, queue_id)` is called without the lock held, since it reads the store
        and may take its locks; a commit racing with it is only overwritten if it is below the
        min too."""
        with self._lock:
            keys = [(topic, queue_id) for (topic, _), queues in self._table.items() for queue_id in queues]
        mins: dict[tuple[str, int], int] = {}
        for key in dict.fromkeys(keys):
            mins[key] = min_offsets(*key)
        raised = 0
        with self._lock:
            for (topic, group), queues in self._table.items():
                for queue_id, offset in queues.items():
                    floor = mins.get((topic, queue_id))
                    if floor is not None and offset < floor:
                        log.info(
                            "offset of %s@%s queue %d raised from %d to min %d", topic, group, queue_id, offset, floor
                        )
                        queues[queue_id] = floor
                        raised += 1
            if raised:
                self._dirty = True
        return raised

    # -- persistence -----------------------------------------------------------------------------

    @property
    def dirty(self) -> bool:
        return self._dirty

    def persist(self) -> None:
        """Write the table now. On failure the table stays dirty, so the next call retries."""
        with self._persist_lock:
            with self._lock:
                content = self._snapshot()
                self._dirty = False
            try:
                write_json_atomically(self.path, content)
            except BaseException:
                with self._lock:
                    self._dirty = True
                raise

    def persist_if_dirty(self) -> bool:
        """Persist when something changed since the last persist; whether it wrote."""
        # Unlocked peek: a commit racing past it is written by the next periodic call.
        if not self._dirty:
            return False
        self.persist()
        return True

    def _snapshot(self) -> dict[str, Any]:
        return {
            "offsetTable": {
                f"{topic}{SEPARATOR}{group}": {str(q): o for q, o in sorted(queues.items())}
                for (topic, group), queues in self._table.items()
            }
        }


def _count(table: dict[tuple[str, str], dict[int, int]]) -> int:
    return sum(len(queues) for queues in table.values())
