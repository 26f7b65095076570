"""`ClientService`: the consumers of each group as their heartbeats announce them (RocketMQ's
ConsumerManager), over the bounded, expiring `client_table.ClientTable`.

A heartbeat names a client id and the groups it consumes in: every group name must be legal
(ILLEGAL_GROUP); a heartbeat naming no group is a producer's, which is not tracked; a consumer's
client id is 1 to MAX_CLIENT_ID_LENGTH characters (BAD_REQUEST); an entry the table's limits
cannot take is refused (TABLE_FULL, naming the key), the others still count. Listing a group with
no consumer online answers CONSUMER_NOT_ONLINE. Time is an argument (sans-IO).

Today the remoting API's HEART_BEAT, UNREGISTER_CLIENT and GET_CONSUMER_LIST_BY_GROUP use it; the
gRPC API's Heartbeat checks the group's name with `queues.group_problem`.

Thread-safety: not thread-safe (as the table); the one event loop that serves those calls owns it.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..client_table import MAX_CLIENT_ID_LENGTH, ClientLimits, ClientTable
from .queues import group_problem
from .refusals import Reason, Refusal


class ClientService:
    def __init__(self, limits: ClientLimits) -> None:
        self._table = ClientTable(limits)

    @property
    def entries(self) -> int:
        return self._table.entries

    def heartbeat(self, client_id: str, groups: Sequence[str], now_ms: int) -> Refusal | None:
        for group in groups:
            refused = group_problem(group)
            if refused is not None:
                return refused
        if not groups:
            return None  # a producer's heartbeat: producers are not tracked
        if not client_id or len(client_id) > MAX_CLIENT_ID_LENGTH:
            return Refusal(Reason.BAD_REQUEST, f"clientID must be 1 to {MAX_CLIENT_ID_LENGTH} characters")
        full = self._table.heartbeat(client_id, groups, now_ms)
        return None if full is None else Refusal(Reason.TABLE_FULL, full)

    def unregister(self, group: str, client_id: str) -> None:
        self._table.unregister(group, client_id)

    def consumers(self, group: str, now_ms: int) -> list[str] | Refusal:
        refused = group_problem(group)
        if refused is not None:
            return refused
        clients = self._table.clients(group, now_ms)
        if not clients:
            return Refusal(Reason.CONSUMER_NOT_ONLINE, f"no consumer of group {group} is online")
        return clients

    def housekeep(self, now_ms: int) -> None:
        self._table.housekeep(now_ms)
