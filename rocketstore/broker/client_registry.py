"""`ClientRegistry`: the producers and consumers a broker has heard from lately, by group, for the
admin API (`ListConsumerGroups`, `ListClients`) and for refusing an offset reset under a running
group.

A client is known by (group, client id): the id the client sends (the official RocketMQ 5 clients'
`x-mq-client-id`, a 4.x client's `clientID`), else the address it calls from. Each sighting
(`saw`) records how it reaches the broker (`ClientProtocol`: gRPC pop, gRPC pull, plain gRPC,
remoting 4.x), whether it produces or consumes, its address, the topics it named and when; a
client is online while its last sighting is younger than `expiry_ms` (RocketMQ's channel expiry,
120 s: the official clients heartbeat every 10 s, 4.x clients every 30 s, pull consumers call at
every pull) and is forgotten at once when it says goodbye (`gone`: NotifyClientTermination,
UNREGISTER_CLIENT). Sans-IO: times are the caller's `now_ms`; the adapters that see calls
(`client_sightings` for gRPC, the remoting server) feed it.

Thread-safety: one lock; the gRPC loop and the remoting server's thread both write.
"""

from __future__ import annotations

import enum
import threading
from dataclasses import dataclass, replace
from typing import Any

# RocketMQ's channelExpiredTimeout: a client silent this long is gone.
CLIENT_EXPIRY_MS = 120_000
# A 4.x consumer subscribes to its group's retry topic by itself: not a topic it chose.
RETRY_PREFIX = "%RETRY%"
# Topics remembered per client: enough for any real subscription, bounded against a client that
# names a new topic on every call.
MAX_TOPICS_PER_CLIENT = 64


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


class ClientRegistry:
    def __init__(self, expiry_ms: int = CLIENT_EXPIRY_MS) -> None:
        if expiry_ms <= 0:
            raise ValueError(f"expiry_ms must be positive, got {expiry_ms}")
        self.expiry_ms = expiry_ms
        self._lock = threading.Lock()
        self._clients: dict[tuple[str, str], ClientSeen] = {}

    def saw(
        self,
        *,
        client_id: str,
        protocol: ClientProtocol,
        kind: ClientKind,
        group: str,
        address: str,
        now_ms: int,
        topics: tuple[str, ...] = (),
        language: str = "",
        version: str = "",
    ) -> None:
        """A call from the client now."""
        key = (group, client_id or address)
        named = frozenset(t for t in topics if t)
        with self._lock:
            known = self._clients.get(key)
            if known is None or now_ms - known.last_seen_ms > self.expiry_ms:
                self._clients[key] = ClientSeen(
                    key[1], protocol, kind, group, address, named, now_ms, now_ms, language, version
                )
                return
            merged = known.topics | named if len(known.topics) < MAX_TOPICS_PER_CLIENT else known.topics
            self._clients[key] = replace(
                known,
                protocol=protocol,
                address=address or known.address,
                topics=merged,
                last_seen_ms=max(now_ms, known.last_seen_ms),
                language=language or known.language,
                version=version or known.version,
            )

    def gone(self, client_id: str, group: str | None = None) -> int:
        """The client said goodbye (in `group`, or in every group when None): how many entries went."""
        with self._lock:
            keys = [k for k in self._clients if k[1] == client_id and (group is None or k[0] == group)]
            for key in keys:
                del self._clients[key]
            return len(keys)

    def clients(self, now_ms: int, *, group: str | None = None, kind: ClientKind | None = None) -> list[ClientSeen]:
        """The clients online now (of `group`, of `kind`), by group and id; expired ones are dropped."""
        with self._lock:
            for key in [k for k, c in self._clients.items() if now_ms - c.last_seen_ms > self.expiry_ms]:
                del self._clients[key]
            found = [
                c
                for c in self._clients.values()
                if (group is None or c.group == group) and (kind is None or c.kind is kind)
            ]
        return sorted(found, key=lambda c: (c.group, c.client_id))

    def groups(self, now_ms: int) -> dict[str, list[ClientSeen]]:
        """The consumer groups with a member online, each with its members."""
        members: dict[str, list[ClientSeen]] = {}
        for client in self.clients(now_ms, kind=ClientKind.CONSUMER):
            members.setdefault(client.group, []).append(client)
        return members


def record_heartbeat(registry: ClientRegistry, doc: dict[str, Any], address: str, now_ms: int) -> None:
    """A RocketMQ 4.x HEART_BEAT body (`clientID`, `language`, `version`, `producerDataSet`,
    `consumerDataSet` with each group's `subscriptionDataSet`) as sightings of that client."""
    client_id = str(doc.get("clientID", ""))
    language, version = str(doc.get("language", "")), str(doc.get("version", ""))
    if not client_id:
        return
    for kind, entries in ((ClientKind.PRODUCER, "producerDataSet"), (ClientKind.CONSUMER, "consumerDataSet")):
        for entry in doc.get(entries) or ():
            group = entry.get("groupName") if isinstance(entry, dict) else None
            if not isinstance(group, str) or not group:
                continue
            subscriptions = entry.get("subscriptionDataSet") or ()
            topics = tuple(
                s["topic"]
                for s in subscriptions
                if isinstance(s, dict) and isinstance(s.get("topic"), str) and not s["topic"].startswith(RETRY_PREFIX)
            )
            registry.saw(
                client_id=client_id,
                protocol=ClientProtocol.REMOTING,
                kind=kind,
                group=group,
                address=address,
                now_ms=now_ms,
                topics=topics,
                language=language,
                version=version,
            )
