"""The replication seam of the put path: what a put waits on besides the disk.

A `ReplicaGate` answers, for a message ending at `next_offset`, either a status at once or a
future that completes with one (PUT_OK once enough slaves acknowledged, FLUSH_SLAVE_TIMEOUT at the
deadline, SLAVE_NOT_AVAILABLE when no slave is fit). The store's put path waits on it together with
the flush; the HA service installs its own gate with `MessageStore.set_replica_gate` and nothing in
the put path changes. Without HA, `NoReplication` answers by role. Thread-safe (stateless).
"""

from __future__ import annotations

from typing import Protocol

from .log.status_future import PendingStatus
from .status import BrokerRole, PutMessageStatus


class ReplicaGate(Protocol):
    def request(self, next_offset: int, now_ms: int) -> PutMessageStatus | PendingStatus:
        """A status now, or a future of one, for a message whose bytes end at `next_offset`."""


class NoReplication:
    """No slave can ever acknowledge: fine for ASYNC_MASTER, SLAVE_NOT_AVAILABLE for SYNC_MASTER."""

    def __init__(self, role: BrokerRole) -> None:
        self._status = (
            PutMessageStatus.SLAVE_NOT_AVAILABLE if role is BrokerRole.SYNC_MASTER else PutMessageStatus.PUT_OK
        )

    def request(self, next_offset: int, now_ms: int) -> PutMessageStatus:
        return self._status
