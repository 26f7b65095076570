"""`ClientTable`: clients as their calls announce them, by group, bounded and expiring, sans-IO
(time is an argument). `client_registry.ClientRegistry` holds one table for the remoting API's
consumers (RocketMQ's ConsumerManager: HEART_BEAT, UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP)
and one for every other client it hears of (the gRPC API's, 4.x producers).

Each (group, client id) entry holds a `ClientSeen`: how the client reaches the broker, whether it
produces or consumes, its address, the topics it named, when it was first and last seen. A
sighting refreshes its entry, or adds it while the limits allow: clients per group
(`remotingMaxClientsPerGroup`), groups (`remotingMaxConsumerGroups`) and entries in all
(`remotingMaxClients`); an entry it cannot add is refused with a reason naming the key, and the
rest of a heartbeat still counts. Entries older than `channelExpiredTimeout` are never listed,
and `housekeep` drops them on the table's own schedule (every `housekeeping_ms`, RocketMQ's
ClientHousekeepingService), whether or not anybody asks for the group, so a flood of client ids
costs at most the limits and only until it expires.

Thread-safety: not thread-safe; its owner (`ClientRegistry`) holds a lock around every call.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from itertools import islice

# A RocketMQ client id is ip@instance[@unit]: far below this.
MAX_CLIENT_ID_LENGTH = 255
# A client's language or version is a short word: what is kept of a longer one.
MAX_DETAIL_LENGTH = 64
# Topics remembered per client: enough for any real subscription, bounded against a client that
# names a new topic on every call.
MAX_TOPICS_PER_CLIENT = 64


@dataclass(frozen=True, slots=True)
class ClientLimits:
    expiry_ms: int = 120_000
    max_clients_per_group: int = 1024
    max_groups: int = 4096
    max_clients: int = 16_384

    @property
    def housekeeping_ms(self) -> int:
        return min(10_000, max(1, self.expiry_ms // 2))


class ClientProtocol(enum.Enum):
    """How a client reaches the broker (the admin API's enum of the same names)."""

    GRPC = 1  # RocketMQ 5's gRPC API, not consuming (a producer)
    GRPC_POP = 2  # the gRPC API consuming by pop: SimpleConsumer, PushConsumer
    GRPC_PULL = 3  # the gRPC API's pull calls: this project's PullConsumer
    REMOTING = 4  # RocketMQ 4.x's TCP remoting protocol


class ClientKind(enum.Enum):
    PRODUCER = 1
    CONSUMER = 2


@dataclass(frozen=True, slots=True)
class ClientSeen:
    client_id: str
    protocol: ClientProtocol
    kind: ClientKind
    group: str  # its consumer group, or a 4.x producer's producer group ("" when it names none)
    address: str  # host:port the broker saw it call from
    topics: frozenset[str]
    first_seen_ms: int
    last_seen_ms: int
    language: str = ""
    version: str = ""

    @classmethod
    def first(
        cls,
        client_id: str,
        protocol: ClientProtocol,
        kind: ClientKind,
        group: str,
        address: str,
        now_ms: int,
        topics: Iterable[str] = (),
        language: str = "",
        version: str = "",
    ) -> ClientSeen:
        """A sighting at `now_ms` (the topics its call named, empty names left out, as many as an
        entry keeps), as a new entry records it."""
        named = frozenset(islice((t for t in topics if t), MAX_TOPICS_PER_CLIENT))
        language, version = language[:MAX_DETAIL_LENGTH], version[:MAX_DETAIL_LENGTH]
        return cls(client_id, protocol, kind, group, address, named, now_ms, now_ms, language, version)


class ClientTable:
    def __init__(self, limits: ClientLimits) -> None:
        self.limits = limits
        self._groups: dict[str, dict[str, ClientSeen]] = {}
        self._entries = 0
        self._next_housekeeping_ms: int | None = None

    @property
    def entries(self) -> int:
        return self._entries

    def see(self, seen: ClientSeen) -> str | None:
        """Refresh (seen.group, seen.client_id) with this sighting, or add it within the limits;
        None when taken, else why not."""
        group, client_id = seen.group, seen.client_id
        clients = self._groups.get(group)
        known = clients.get(client_id) if clients is not None else None
        if clients is not None and known is not None:
            clients[client_id] = _merged(known, seen, self.limits.expiry_ms)
            return None
        refused = self._full(group, clients)
        if refused is not None:
            return refused
        if clients is None:
            clients = self._groups[group] = {}
        clients[client_id] = seen
        self._entries += 1
        return None

    def heartbeat(
        self,
        client_id: str,
        groups: Iterable[str],
        now_ms: int,
        *,
        address: str = "",
        topics: Mapping[str, frozenset[str]] | None = None,
        language: str = "",
        version: str = "",
    ) -> str | None:
        """A remoting consumer's heartbeat naming `groups` (and each one's subscribed `topics`):
        refresh or add (group, client_id) for every group; None when all were taken, else why the
        first one that could not be added was not (the others were taken)."""
        refused: str | None = None
        for group in groups:
            named = (topics or {}).get(group, frozenset())
            seen = ClientSeen.first(
                client_id,
                ClientProtocol.REMOTING,
                ClientKind.CONSUMER,
                group,
                address,
                now_ms,
                named,
                language,
                version,
            )
            reason = self.see(seen)
            refused = refused or reason
        if refused is None:
            return None
        limits = self.limits
        return f"client {client_id[:64]!r} not registered: {refused}; clients silent for {limits.expiry_ms} ms expire"

    def _full(self, group: str, clients: dict[str, ClientSeen] | None) -> str | None:
        limits = self.limits
        if self._entries >= limits.max_clients:
            return f"the broker holds {self._entries} consumer clients, the limit (remotingMaxClients)"
        if clients is None:
            if len(self._groups) >= limits.max_groups:
                return f"the broker holds {len(self._groups)} consumer groups, the limit (remotingMaxConsumerGroups)"
        elif len(clients) >= limits.max_clients_per_group:
            return f"group {group} has {len(clients)} clients, the limit (remotingMaxClientsPerGroup)"
        return None

    def unregister(self, group: str, client_id: str) -> bool:
        """Forget (group, client_id); whether it was there."""
        clients = self._groups.get(group)
        if clients is None or clients.pop(client_id, None) is None:
            return False
        self._entries -= 1
        if not clients:
            del self._groups[group]
        return True

    def gone(self, client_id: str, group: str | None = None) -> int:
        """Forget the client in `group`, or in every group when None; how many entries went."""
        if group is not None:
            return int(self.unregister(group, client_id))
        return sum(self.unregister(g, client_id) for g in [g for g, c in self._groups.items() if client_id in c])

    def clients(self, group: str, now_ms: int) -> list[str]:
        """The ids of the group's clients heard from within the expiry, sorted."""
        horizon = now_ms - self.limits.expiry_ms
        return sorted(c for c, seen in self._groups.get(group, {}).items() if seen.last_seen_ms >= horizon)

    def seen(self, now_ms: int, group: str | None = None) -> list[ClientSeen]:
        """The entries heard from within the expiry (of `group`), in no order."""
        horizon = now_ms - self.limits.expiry_ms
        tables = [self._groups.get(group, {})] if group is not None else list(self._groups.values())
        return [seen for clients in tables for seen in clients.values() if seen.last_seen_ms >= horizon]

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
            stale = [c for c, seen in clients.items() if seen.last_seen_ms < horizon]
            for client_id in stale:
                del clients[client_id]
            dropped += len(stale)
            if not clients:
                del self._groups[group]
        self._entries -= dropped
        return dropped


def _merged(known: ClientSeen, seen: ClientSeen, expiry_ms: int) -> ClientSeen:
    """An entry after another sighting: an entry past its expiry starts over (a new session)."""
    if seen.last_seen_ms - known.last_seen_ms > expiry_ms:
        return seen
    topics = known.topics | seen.topics if len(known.topics) < MAX_TOPICS_PER_CLIENT else known.topics
    return replace(
        known,
        protocol=seen.protocol,
        address=seen.address or known.address,
        topics=topics,
        last_seen_ms=max(seen.last_seen_ms, known.last_seen_ms),
        language=seen.language or known.language,
        version=seen.version or known.version,
    )
