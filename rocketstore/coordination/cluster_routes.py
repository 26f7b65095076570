"""One cluster of broker groups on etcd: what each broker registers and the view built from it.

RocketMQ brokers register with the NameServer; here every broker registers in etcd, under a
lease of its own, the record a route is built from:

    <etcdPrefix>/_routes/<brokerClusterName>/<brokerName>/<brokerId>  ->  BrokerRegistration (JSON)

The record names the broker's role as it serves now (MASTER only while it may take writes), its
epoch (controller mode's term; 0 in static mode), its client and remoting endpoints, its
brokerPermission, whether it auto-creates topics (and with how many queues), and, on a master or
a slave standing in for one, its topic table as routes see it (queue counts, permission, order).
The key goes when the lease does: a broker that dies leaves routes one lease later, one that
stops cleanly at once. A controller-mode group's election keys live under
`<etcdPrefix>/<cluster>/<brokerName>/`; `_routes` is a separate subtree so that neither reads the
other's records.

`ClusterView` is the routes' picture of the cluster: per group, its master (the MASTER record with
the highest epoch: a deposed master whose lease has not yet run out is ignored once its successor
registers) and its slaves. It is a value taken at one read of etcd (`read_at_ms`); a broker uses it
only while it is fresh (`fresh`), and answers for its own group alone otherwise, so an etcd that
is away can make a route shorter, never point a client at a master that a newer record replaced
(a stale master refuses writes anyway: fenced or a slave by then).

Plain immutable values and pure functions; thread-safe.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

ROUTES_SUBTREE = "_routes"
MASTER = "MASTER"
SLAVE = "SLAVE"
PERM_READ = 4
PERM_WRITE = 2


class RegistrationError(ValueError):
    """A route record in etcd cannot be decoded."""


@dataclass(frozen=True, slots=True)
class TopicRoute:
    """A topic as one group serves it."""

    read_queues: int
    write_queues: int
    perm: int = PERM_READ | PERM_WRITE
    order: bool = False

    def to_json(self) -> list:
        return [self.read_queues, self.write_queues, self.perm, self.order]

    @classmethod
    def from_json(cls, value: Any) -> "TopicRoute":
        if not isinstance(value, list) or len(value) != 4:
            raise RegistrationError(f"a topic route is [read, write, perm, order], got {value!r}")
        read, write, perm, order = value
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (read, write, perm)):
            raise RegistrationError(f"a topic route's counts and permission are ints, got {value!r}")
        return cls(read, write, perm, bool(order))


def _frozen(topics: Mapping[str, TopicRoute]) -> Mapping[str, TopicRoute]:
    return MappingProxyType(dict(topics))


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    cluster: str
    broker_name: str
    broker_id: int
    role: str  # MASTER or SLAVE, as the broker serves now
    client_endpoint: str
    epoch: int = 0
    remoting_endpoint: str = ""
    # A slave serving reads for its master that is down (enableSlaveActingMaster).
    acting: bool = False
    broker_permission: int = PERM_READ | PERM_WRITE
    auto_create: bool = False
    default_queues: int = 4
    topics: Mapping[str, TopicRoute] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.role not in (MASTER, SLAVE):
            raise RegistrationError(f"role must be {MASTER} or {SLAVE}, got {self.role!r}")
        object.__setattr__(self, "topics", _frozen(self.topics))

    @property
    def writable(self) -> bool:
        return self.role == MASTER and bool(self.broker_permission & PERM_WRITE)

    def to_json(self) -> bytes:
        document = {
            "cluster": self.cluster,
            "brokerName": self.broker_name,
            "brokerId": self.broker_id,
            "role": self.role,
            "epoch": self.epoch,
            "client": self.client_endpoint,
            "remoting": self.remoting_endpoint,
            "acting": self.acting,
            "perm": self.broker_permission,
            "autoCreate": self.auto_create,
            "defaultQueues": self.default_queues,
            "topics": {name: route.to_json() for name, route in sorted(self.topics.items())},
        }
        return json.dumps(document, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes) -> "BrokerRegistration":
        try:
            document = json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise RegistrationError(f"a route record is not JSON: {exc}") from None
        if not isinstance(document, dict):
            raise RegistrationError("a route record is a JSON object")
        try:
            topics = document.get("topics", {})
            if not isinstance(topics, dict):
                raise RegistrationError("topics is an object")
            return cls(
                cluster=str(document["cluster"]),
                broker_name=str(document["brokerName"]),
                broker_id=int(document["brokerId"]),
                role=str(document["role"]),
                client_endpoint=str(document["client"]),
                epoch=int(document.get("epoch", 0)),
                remoting_endpoint=str(document.get("remoting", "")),
                acting=bool(document.get("acting", False)),
                broker_permission=int(document.get("perm", PERM_READ | PERM_WRITE)),
                auto_create=bool(document.get("autoCreate", False)),
                default_queues=int(document.get("defaultQueues", 4)),
                topics={str(name): TopicRoute.from_json(route) for name, route in topics.items()},
            )
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, RegistrationError):
                raise
            raise RegistrationError(f"a route record lacks or garbles a field: {exc!r}") from None


@dataclass(frozen=True, slots=True)
class RouteKeys:
    """The etcd keys of one cluster's route records."""

    prefix: str

    @classmethod
    def of(cls, etcd_prefix: str, cluster: str) -> "RouteKeys":
        if not cluster or "/" in cluster:
            raise ValueError(f"brokerClusterName {cluster!r} cannot name an etcd key (empty or holds '/')")
        return cls(f"{etcd_prefix}/{ROUTES_SUBTREE}/{cluster}/")

    def broker(self, broker_name: str, broker_id: int) -> str:
        if not broker_name or "/" in broker_name:
            raise ValueError(f"brokerName {broker_name!r} cannot name an etcd key (empty or holds '/')")
        return f"{self.prefix}{broker_name}/{broker_id}"


@dataclass(frozen=True, slots=True)
class GroupRoute:
    """One broker group as the registry shows it."""

    broker_name: str
    master: BrokerRegistration | None
    slaves: tuple[BrokerRegistration, ...] = ()

    @property
    def serving(self) -> BrokerRegistration | None:
        """Whose topic table routes take: the master, else a slave standing in for it."""
        if self.master is not None:
            return self.master
        return next((s for s in self.slaves if s.acting), None)

    @property
    def writable(self) -> bool:
        return self.master is not None and self.master.writable

    def topic(self, name: str) -> TopicRoute | None:
        serving = self.serving
        return serving.topics.get(name) if serving is not None else None


@dataclass(frozen=True, slots=True)
class ServedTopic:
    """A group that serves (or, by auto-creation, would serve) a topic."""

    group: GroupRoute
    route: TopicRoute
    exists: bool  # False: the group's master would create it on the first send


@dataclass(frozen=True, slots=True)
class ClusterView:
    cluster: str
    groups: Mapping[str, GroupRoute] = field(default_factory=dict)
    # Wall-clock ms of the etcd read this view was taken at; 0: never read.
    read_at_ms: int = 0
    # Every record read, deposed masters included (for the admin listing).
    registrations: tuple[BrokerRegistration, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "groups", MappingProxyType(dict(self.groups)))

    def superseded(self, registration: BrokerRegistration) -> bool:
        """A MASTER record that is not its group's master: a deposed master's, still leased."""
        group = self.groups.get(registration.broker_name)
        return registration.role == MASTER and (group is None or group.master is not registration)

    @classmethod
    def from_registrations(
        cls, cluster: str, registrations: Iterable[BrokerRegistration], read_at_ms: int
    ) -> "ClusterView":
        mine = tuple(r for r in registrations if r.cluster == cluster)
        by_group: dict[str, list[BrokerRegistration]] = {}
        for registration in mine:
            by_group.setdefault(registration.broker_name, []).append(registration)
        groups = {}
        for name, members in sorted(by_group.items()):
            masters = [m for m in members if m.role == MASTER]
            master = max(masters, key=lambda m: (m.epoch, -m.broker_id)) if masters else None
            # A MASTER record of an older epoch is a deposed master whose lease is still running:
            # it is neither the master nor a slave to read from.
            slaves = tuple(sorted((m for m in members if m.role == SLAVE), key=lambda m: m.broker_id))
            groups[name] = GroupRoute(name, master, slaves)
        return cls(cluster, groups, read_at_ms, mine)

    def fresh(self, now_ms: int, max_age_ms: int) -> bool:
        return self.read_at_ms > 0 and now_ms - self.read_at_ms <= max_age_ms

    def serving(self, topic: str) -> list[ServedTopic]:
        """The groups that serve `topic`; when none does, those whose master would auto-create it
        (RocketMQ's autoCreateTopicEnable in a cluster: the first send to each creates it there)."""
        found = []
        for group in self.groups.values():
            route = group.topic(topic)
            if route is not None:
                found.append(ServedTopic(group, route, True))
        if found:
            return found
        return [
            ServedTopic(group, TopicRoute(group.master.default_queues, group.master.default_queues), False)
            for group in self.groups.values()
            if group.master is not None and group.master.auto_create and group.writable
        ]

    def without(self, broker_name: str) -> "ClusterView":
        groups = {name: group for name, group in self.groups.items() if name != broker_name}
        kept = tuple(r for r in self.registrations if r.broker_name != broker_name)
        return ClusterView(self.cluster, groups, self.read_at_ms, kept)
