"""`ConsumerConnections`: the remoting connection each consumer client heartbeats on, so that a
connection that closes takes its clients out of their groups at once and the broker can tell the
groups' other members (RocketMQ's NOTIFY_CONSUMER_IDS_CHANGED: a one-way request, code 40, with
the group in `consumerGroup`; a 4.x consumer rebalances on it), as RocketMQ's broker does when a
client's channel closes, instead of waiting for the client's heartbeat to expire (120 s).

A client id belongs to the connection it last heartbeated on: a client that reconnected is not
removed when its old connection closes. Only clients the registry took are added, so its limits
bound this table too.

Thread-safety: none; the remoting server's loop thread alone uses it.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Generic, TypeVar

C = TypeVar("C", bound=Hashable)


class ConsumerConnections(Generic[C]):
    def __init__(self) -> None:
        self._owner: dict[str, C] = {}
        self._clients: dict[C, dict[str, frozenset[str]]] = {}

    def heard(self, conn: C, client_id: str, groups: Iterable[str]) -> None:
        """`client_id` heartbeated on `conn` as a member of `groups`."""
        previous = self._owner.get(client_id)
        if previous is not None and previous != conn:
            self._drop(previous, client_id)
        self._owner[client_id] = conn
        self._clients.setdefault(conn, {})[client_id] = frozenset(groups)

    def groups_of(self, client_id: str) -> frozenset[str]:
        conn = self._owner.get(client_id)
        return self._clients.get(conn, {}).get(client_id, frozenset()) if conn is not None else frozenset()

    def forget(self, client_id: str) -> None:
        """The client said goodbye."""
        conn = self._owner.pop(client_id, None)
        if conn is not None:
            self._drop(conn, client_id)

    def lost(self, conn: C) -> dict[str, frozenset[str]]:
        """`conn` closed: the clients it carried (those that did not move to another connection),
        each with its groups."""
        clients = self._clients.pop(conn, {})
        for client_id in clients:
            if self._owner.get(client_id) == conn:
                del self._owner[client_id]
        return clients

    def connection_of(self, client_id: str) -> C | None:
        return self._owner.get(client_id)

    def _drop(self, conn: C, client_id: str) -> None:
        clients = self._clients.get(conn)
        if clients is not None:
            clients.pop(client_id, None)
            if not clients:
                del self._clients[conn]
