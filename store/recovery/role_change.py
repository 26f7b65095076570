"""A running store's change of role in controller mode: promotion of a slave, demotion of a master.

A promoted store numbers its puts after every record already in its log: queue offsets continue
from the ConsumeQueues plus the records past the dispatch point (a dispatch limit may hold the
replicated tail back from the queues). A demoted store refuses puts from the moment its role
changes, stops delayed deliveries (a slave's arrive replicated) and flushes what it wrote. A
promoted store also serves every topic its log holds (`topics_in_log`): one created on the old
master after the slave's last metadata copy would otherwise be refused by the new master.

Functions over the store's parts, run on the caller's (the role-change) thread; what they change
under the CommitLog lock is what concurrent puts read.
"""

from __future__ import annotations

from collections.abc import Callable

from ..log.commitlog import NO_QUEUE_OFFSET_TYPES, CommitLog
from ..message import transaction_type
from ..queue.consume_queue import ConsumeQueueTable


def queue_offsets_through_log(
    commit_log: CommitLog, consume_queues: ConsumeQueueTable, dispatched_to: int
) -> dict[str, int]:
    """The next queue offset of every queue: the ConsumeQueues' own, raised by the records in
    [dispatched_to, end of log) that take a queue slot. The caller holds the CommitLog lock."""
    table = consume_queues.queue_offset_table()
    # Headers are all this needs: a damaged body must not stop a promotion (reads refuse it).
    for msg in commit_log.iter_messages(dispatched_to, verify_crc=False):
        if transaction_type(msg.sys_flag) in NO_QUEUE_OFFSET_TYPES:
            continue
        key = f"{msg.topic}-{msg.queue_id}"
        table[key] = max(table.get(key, 0), msg.queue_offset + 1)
    return table


def promote(
    commit_log: CommitLog, consume_queues: ConsumeQueueTable, dispatched_to: int, switch: Callable[[], None]
) -> dict[str, int]:
    """Renumber later puts after the whole log and run `switch` (the role flip and the caches it
    invalidates) in the same critical section, so no put sees the new role with old numbers.
    Returns the queue offset table ("topic-queueId" -> next queue offset)."""
    with commit_log.lock:
        table = queue_offsets_through_log(commit_log, consume_queues, dispatched_to)
        commit_log.reset_queue_offsets(table)
        switch()
    return table


def topics_in_log(table: dict[str, int], known: Callable[[str], bool]) -> dict[str, int]:
    """Topics the log holds messages of that `known` does not name, with the queue count their
    queue ids need (from a queue offset table's "topic-queueId" keys)."""
    found: dict[str, int] = {}
    for key in table:
        topic, _, queue = key.rpartition("-")
        if topic and queue.isdigit() and not known(topic):
            found[topic] = max(found.get(topic, 0), int(queue) + 1)
    return found


def demote(commit_log: CommitLog, switch: Callable[[], None]) -> None:
    """Run `switch` (the role flip) under the CommitLog lock: appends already inside it finish
    first, every later put sees the new role and is refused."""
    with commit_log.lock:
        switch()
