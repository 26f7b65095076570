"""`ClientRegistry`: the broker's one record of the producers and consumers it heard from lately,
by group: the remoting API's consumer lists (GET_CONSUMER_LIST_BY_GROUP, which 4.x consumers
rebalance by), the admin API (`ListConsumerGroups`, `ListClients`) and the refusal of an offset
reset under a running group all read it.

A client is known by (group, client id): the id the client sends (the official RocketMQ 5 clients'
`x-mq-client-id`, a 4.x client's `clientID`), else the address it calls from. Each sighting
records how it reaches the broker (`ClientProtocol`: gRPC pop, gRPC pull, plain gRPC, remoting
4.x), whether it produces or consumes, its address, the topics it named and when; a client is
online while its last sighting is younger than `channelExpiredTimeout` (RocketMQ's channel
expiry, 120 s: the official clients heartbeat every 10 s, 4.x clients every 30 s, pull consumers
call at every pull) and is forgotten at once when it says goodbye (`gone`:
NotifyClientTermination, UNREGISTER_CLIENT).

Two bounded tables (`client_table.ClientTable`, each within the same limits): the remoting API's
consumers, whose heartbeat is refused past the limits (`remotingMax*`, as RocketMQ's clients must
know they are not in their group's list), and every other client (the gRPC API's, 4.x
producers), which a full table only leaves out of the admin API's lists. Apart, so that neither
kind of traffic can crowd the other out. Expired entries are dropped on the tables' schedule,
at any sighting and at the remoting server's sweep.

Sans-IO: times are the caller's `now_ms`; the adapters that see calls (`client_sightings` for
gRPC, the remoting server) feed it.

Thread-safety: one lock; the gRPC loop and the remoting server's thread both write.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from .client_table import MAX_CLIENT_ID_LENGTH, ClientKind, ClientLimits, ClientProtocol, ClientSeen, ClientTable
from .queue_access import group_problem
from .v2_messages import name_problem

__all__ = ["ClientKind", "ClientLimits", "ClientProtocol", "ClientRegistry", "ClientSeen"]

# A 4.x consumer subscribes to its group's retry topic by itself: not a topic it chose.
RETRY_PREFIX = "%RETRY%"


class ClientRegistry:
    def __init__(self, limits: ClientLimits | None = None) -> None:
        limits = limits if limits is not None else ClientLimits()
        if limits.expiry_ms <= 0:
            raise ValueError(f"the client expiry must be positive, got {limits.expiry_ms} ms")
        self.limits = limits
        self._lock = threading.Lock()
        self._remoting_consumers = ClientTable(limits)
        self._others = ClientTable(limits)

    def saw(self, seen: ClientSeen) -> str | None:
        """A call from the client (`ClientSeen.first`); None when it is recorded, else why not (a
        name no client may have, its table full). Only valid topic names are kept."""
        if not 0 < len(seen.client_id) <= MAX_CLIENT_ID_LENGTH:
            return f"a client id of {len(seen.client_id)} characters (1 to {MAX_CLIENT_ID_LENGTH})"
        problem = group_problem(seen.group) if seen.group else None
        if problem is not None:
            return problem.text
        seen = replace(seen, topics=_valid(seen.topics))
        with self._lock:
            table = self._table(seen.protocol, seen.kind)
            table.housekeep(seen.last_seen_ms)
            return table.see(seen)

    def remoting_heartbeat(self, doc: dict[str, Any], address: str, now_ms: int) -> str | None:
        """A RocketMQ 4.x HEART_BEAT body (`clientID`, `language`, `version`, `producerDataSet`,
        `consumerDataSet` with each group's `subscriptionDataSet`), its consumer entries already
        checked by the remoting server: the client's consumer groups, within the limits (None,
        else the refusal its answer carries), and its producer groups (never refused)."""
        client_id = doc.get("clientID", "")
        if not isinstance(client_id, str) or not client_id or len(client_id) > MAX_CLIENT_ID_LENGTH:
            return None
        language, version = str(doc.get("language", "")), str(doc.get("version", ""))
        topics: dict[str, frozenset[str]] = {}
        for entry in doc.get("consumerDataSet") or ():
            subscriptions = entry.get("subscriptionDataSet")
            topics[entry["groupName"]] = _valid(
                s["topic"]
                for s in (subscriptions if isinstance(subscriptions, list) else ())
                if isinstance(s, dict) and isinstance(s.get("topic"), str) and not s["topic"].startswith(RETRY_PREFIX)
            )
        producers = doc.get("producerDataSet")
        for entry in producers if isinstance(producers, list) else ():
            group = entry.get("groupName") if isinstance(entry, dict) else None
            if isinstance(group, str) and group:
                kind = ClientKind.PRODUCER
                self.saw(
                    ClientSeen.first(
                        client_id, ClientProtocol.REMOTING, kind, group, address, now_ms, (), language, version
                    )
                )
        with self._lock:
            if not topics:
                return None
            table = self._remoting_consumers
            table.housekeep(now_ms)
            return table.heartbeat(
                client_id, list(topics), now_ms, address=address, topics=topics, language=language, version=version
            )

    def gone(self, client_id: str, group: str | None = None) -> int:
        """The client said goodbye (in `group`, or in every group when None): how many entries went."""
        with self._lock:
            return self._remoting_consumers.gone(client_id, group) + self._others.gone(client_id, group)

    def consumer_ids(self, group: str, now_ms: int) -> list[str]:
        """The ids of the group's remoting consumers online now, sorted: what a 4.x consumer
        divides the group's queues among."""
        with self._lock:
            return self._remoting_consumers.clients(group, now_ms)

    def clients(self, now_ms: int, *, group: str | None = None, kind: ClientKind | None = None) -> list[ClientSeen]:
        """The clients online now (of `group`, of `kind`), by group and id."""
        with self._lock:
            found = self._remoting_consumers.seen(now_ms, group) + self._others.seen(now_ms, group)
        return sorted((c for c in found if kind is None or c.kind is kind), key=lambda c: (c.group, c.client_id))

    def groups(self, now_ms: int) -> dict[str, list[ClientSeen]]:
        """The consumer groups with a member online, each with its members."""
        members: dict[str, list[ClientSeen]] = {}
        for client in self.clients(now_ms, kind=ClientKind.CONSUMER):
            members.setdefault(client.group, []).append(client)
        return members

    def housekeep(self, now_ms: int) -> int:
        """Drop expired entries when the tables' housekeeping is due; how many went."""
        with self._lock:
            return self._remoting_consumers.housekeep(now_ms) + self._others.housekeep(now_ms)

    def _table(self, protocol: ClientProtocol, kind: ClientKind) -> ClientTable:
        if protocol is ClientProtocol.REMOTING and kind is ClientKind.CONSUMER:
            return self._remoting_consumers
        return self._others


def _valid(topics: Iterable[str]) -> frozenset[str]:
    """The topic names a client may have named: a call's names are recorded before the call is
    checked, and the registry holds what it records for a while."""
    return frozenset(t for t in topics if name_problem("topic", t) is None)
