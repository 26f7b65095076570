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

Sans-IO: times are the caller's `now_ms`; the adapters that see calls feed it: `client_sightings`
for gRPC, the remoting server's heartbeats (decoded into a `Heartbeat`) through the core's
`core.clients.ClientService`, which checks their names and turns a refusal into its reason.

Thread-safety: one lock; the gRPC loop and the remoting server's thread both write.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from .client_table import MAX_CLIENT_ID_LENGTH, ClientKind, ClientLimits, ClientProtocol, ClientSeen, ClientTable
from .core.queues import group_problem, name_problem

__all__ = ["ClientKind", "ClientLimits", "ClientProtocol", "ClientRegistry", "ClientSeen", "Heartbeat"]


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """What a client's heartbeat announces, decoded by its front end: each consumer group it is a
    member of with the topics it chose there, its producer groups, and how it describes itself."""

    client_id: str
    address: str  # host:port the broker saw it call from
    consumer_groups: Mapping[str, frozenset[str]]
    producer_groups: tuple[str, ...] = ()
    language: str = ""
    version: str = ""


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

    def remoting_heartbeat(self, heartbeat: Heartbeat, now_ms: int) -> str | None:
        """A remoting client's heartbeat, its names already checked by the core
        (`core.clients.ClientService`): its consumer groups, within the limits (None, else the
        refusal its answer carries), and its producer groups (never refused)."""
        for group in heartbeat.producer_groups:
            kind = ClientKind.PRODUCER
            self.saw(
                ClientSeen.first(
                    heartbeat.client_id,
                    ClientProtocol.REMOTING,
                    kind,
                    group,
                    heartbeat.address,
                    now_ms,
                    (),
                    heartbeat.language,
                    heartbeat.version,
                )
            )
        topics = {group: _valid(named) for group, named in heartbeat.consumer_groups.items()}
        with self._lock:
            if not topics:
                return None
            table = self._remoting_consumers
            table.housekeep(now_ms)
            return table.heartbeat(
                heartbeat.client_id,
                list(topics),
                now_ms,
                address=heartbeat.address,
                topics=topics,
                language=heartbeat.language,
                version=heartbeat.version,
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
