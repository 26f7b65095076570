"""`ClientTable`: the consumers of each group as their heartbeats announce them (RocketMQ's
ConsumerManager, for the remoting API's HEART_BEAT, UNREGISTER_CLIENT and
GET_CONSUMER_LIST_BY_GROUP), bounded and expiring, sans-IO (time is an argument).

Each (group, client id) entry holds the time of the client's last heartbeat. A heartbeat refreshes
the entries it names and adds the missing ones while the limits allow: clients per group
(`remotingMaxClientsPerGroup`), groups (`remotingMaxConsumerGroups`) and entries in all
(`remotingMaxClients`); an entry it cannot add is refused with a reason naming the key, and the
rest of the heartbeat still counts. Entries older than `channelExpiredTimeout` are never listed,
and `housekeep` drops them on the table's own schedule (every `housekeeping_ms`, RocketMQ's
ClientHousekeepingService), whether or not anybody asks for the group, so a flood of client ids
costs at most the limits and only until it expires.

Thread-safety: not thread-safe; the remoting server's loop owns it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

# A RocketMQ client id is ip@instance[@unit]: far below this.
MAX_CLIENT_ID_LENGTH = 255


@dataclass(frozen=True, slots=True)
class ClientLimits:
    expiry_ms: int = 120_000
    max_clients_per_group: int = 1024
    max_groups: int = 4096
    max_clients: int = 16_384

    @property
    def housekeeping_ms(self) -> int:
        return min(10_000, max(1, self.expiry_ms // 2))


class ClientTable:
    def __init__(self, limits: ClientLimits) -> None:
        self.limits = limits
        self._groups: dict[str, dict[str, int]] = {}
        self._entries = 0
        self._next_housekeeping_ms: int | None = None

    @property
    def entries(self) -> int:
        return self._entries

    def heartbeat(self, client_id: str, groups: Iterable[str], now_ms: int) -> str | None:
        """Refresh or add (group, client_id) for every group; None when all were taken, else
        why the first one that could not be added was not (the others were taken)."""
        limits = self.limits
        refused: str | None = None
        for group in groups:
            clients = self._groups.get(group)
            if clients is not None and client_id in clients:
                clients[client_id] = now_ms
                continue
            reason = self._full(group, clients)
            if reason is not None:
                refused = refused or reason
                continue
            if clients is None:
                clients = self._groups[group] = {}
            clients[client_id] = now_ms
            self._entries += 1
        if refused is None:
            return None
        return f"client {client_id[:64]!r} not registered: {refused}; clients silent for {limits.expiry_ms} ms expire"

    def _full(self, group: str, clients: dict[str, int] | None) -> str | None:
        limits = self.limits
        if self._entries >= limits.max_clients:
            return f"the broker holds {self._entries} consumer clients, the limit (remotingMaxClients)"
        if clients is None:
            if len(self._groups) >= limits.max_groups:
                return f"the broker holds {len(self._groups)} consumer groups, the limit (remotingMaxConsumerGroups)"
        elif len(clients) >= limits.max_clients_per_group:
            return f"group {group} has {len(clients)} clients, the limit (remotingMaxClientsPerGroup)"
        return None

    def unregister(self, group: str, client_id: str) -> None:
        clients = self._groups.get(group)
        if clients is not None and clients.pop(client_id, None) is not None:
            self._entries -= 1
            if not clients:
                del self._groups[group]

    def clients(self, group: str, now_ms: int) -> list[str]:
        """The group's clients heard from within the expiry, sorted."""
        horizon = now_ms - self.limits.expiry_ms
        return sorted(c for c, seen in self._groups.get(group, {}).items() if seen >= horizon)

    def housekeep(self, now_ms: int) -> int:
        """Drop expired entries when the housekeeping interval has passed; how many were
        dropped."""
        due = self._next_housekeeping_ms
        if due is not None and now_ms < due:
            return 0
        self._next_housekeeping_ms = now_ms + self.limits.housekeeping_ms
        return self.expire(now_ms)

    def expire(self, now_ms: int) -> int:
        horizon = now_ms - self.limits.expiry_ms
        dropped = 0
        for group in list(self._groups):
            clients = self._groups[group]
            stale = [c for c, seen in clients.items() if seen < horizon]
            for client_id in stale:
                del clients[client_id]
            dropped += len(stale)
            if not clients:
                del self._groups[group]
        self._entries -= dropped
        return dropped
