"""`OffsetService`: queue offsets for consumers, the group's committed offset (query, commit) and
a queue's bounds (min, max, by store time), decided once for both front ends.

Every call checks the names and the queue first (`queues`: a legal topic and group, a queue id in
range, and the topic exists: offsets of unknown topics are refused, never created). A group that
committed nothing for the queue answers OFFSET_NOT_FOUND; `start_offset` (RocketMQ 4.x's
QUERY_CONSUMER_OFFSET) answers 0 instead while the queue's minimum offset is still 0 (nothing
deleted from it yet), RocketMQ's rule, so a new group starting "from the last offset" reads what the
queue holds. A commit is refused on a slave
(NOT_MASTER: offsets are committed on the master, whose table the slaves copy), then checked for
its range and the table's bound (`queues.commit_consumer_offset`). A search by time reads the
queue's messages: call `offset_by_time` from a worker thread.

Thread-safety: as the store's tables (any thread).
"""

from __future__ import annotations

from store import MessageStore

from .queues import commit_consumer_offset, offset_problem
from .refusals import Reason, Refusal
from .roles import RoleGate


class OffsetService:
    def __init__(self, store: MessageStore, roles: RoleGate) -> None:
        self._store = store
        self._roles = roles

    def consumer_offset(self, group: str, topic: str, queue_id: int) -> int | Refusal:
        """The offset the group committed for the queue."""
        refused = offset_problem(self._store, group, topic, queue_id)
        if refused is not None:
            return refused
        offset = self._store.consumer_offsets.query_offset(group, topic, queue_id)
        if offset < 0:
            return Refusal(Reason.OFFSET_NOT_FOUND, f"group {group} has no offset for {topic}:{queue_id}")
        return offset

    def start_offset(self, group: str, topic: str, queue_id: int) -> int | Refusal:
        """Where a consumer of the group starts the queue: its committed offset, else 0 while the
        queue still begins at 0. RocketMQ's broker answers so (a 4.x client falls back to the end
        of the queue only on QUERY_NOT_FOUND), so a new group does not skip what was sent before
        it first came; once messages were deleted from the queue, OFFSET_NOT_FOUND."""
        offset = self.consumer_offset(group, topic, queue_id)
        if isinstance(offset, Refusal) and offset.reason is Reason.OFFSET_NOT_FOUND:
            if self._store.min_queue_offset(topic, queue_id) == 0:
                return 0
        return offset

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> Refusal | None:
        """Commit the group's offset; None when it was committed."""
        if self._roles.is_slave:
            master = self._roles.not_master()
            return Refusal(
                Reason.NOT_MASTER, f"offsets are committed on the master: {master.text}", master.master_endpoint
            )
        return commit_consumer_offset(self._store, group, topic, queue_id, offset)

    def min_offset(self, topic: str, queue_id: int) -> int | Refusal:
        return offset_problem(self._store, None, topic, queue_id) or self._store.min_queue_offset(topic, queue_id)

    def max_offset(self, topic: str, queue_id: int) -> int | Refusal:
        return offset_problem(self._store, None, topic, queue_id) or self._store.max_queue_offset(topic, queue_id)

    def offset_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int | Refusal:
        """Blocking (reads messages): the first queue offset stored at or after `timestamp_ms`."""
        refused = offset_problem(self._store, None, topic, queue_id)
        if refused is not None:
            return refused
        return self._store.get_offset_in_queue_by_time(topic, queue_id, timestamp_ms)
