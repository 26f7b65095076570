"""`RouteService`: where a topic is served, protocol-neutral: the brokers of the route, each with
its broker id as routes name it, its endpoints, the topic's queue counts and permission there, and
whether it is read-only. Each front end encodes a `Route` its own way (gRPC: one MessageQueue per
queue, either per group at id 0 or per broker; remoting: RocketMQ's TopicRouteData).

This group's part, as this broker knows it first-hand (topic table, role, master):
- a master names itself as broker id 0, read-only while drained or while its put fence refuses
  writes (controller mode: a new SYNC_MASTER until a replica is in sync), then its connected slaves
  read-only (`slave_route_id`); a topic it does not have yet gets a route to write to when
  autoCreateTopicEnable is on (the first send creates it; a route never does), else
  TOPIC_NOT_FOUND;
- a slave names its master as id 0 (where clients write and pop) and itself, read-only, under its
  own id; it knows topics from its master's table or, before that arrives, from the queues it
  replicated (`queues.topic_from_queues`); a topic it does not know yet is routed to its master
  alone, as the master would route it (its first send creates it), when autoCreateTopicEnable
  is on;
- a slave acting for its master that is down names itself as id 0, read-only;
- in controller mode a slave names the elected master as id 0 (it creates the topic) and itself,
  read-only, when it has the topic (NO_MASTER while there is none and it does not act for one).
With a fresh cluster registry, the group's registered brokers complete this part (a slave's fellow
slaves, a master's slaves it has no stream from yet) and lend their remoting endpoints to its
entries: every broker of the group names the same members.

With a cluster registry (`BrokerView.cluster_view`), the other groups serving the topic follow
(`other_groups`): per group its master as id 0 (read-only when drained or the topic is), or a
slave standing in for it as id 0 read-only, and each slave read-only under its own id. A topic
this group would only create, while other groups have it, is routed to those alone.

This broker's own entry carries no remoting endpoint: its remoting adapter knows it.

`Route.groups` is the same route per group: the broker at id 0 and the group's other members, for
an encoding that names each group once (RocketMQ 5's clients talk to id 0 only).

Thread-safety: reads the store's tables and the view; no state of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from rocketstore.coordination.cluster_routes import ClusterView, ServedTopic
from store import MessageStore
from store.clock import wall_clock_ms
from store.metadata.topic_config import TopicConfig

from ..config import BrokerConfigs
from ..view import BrokerView
from .queues import topic_from_queues, topic_problem
from .refusals import Reason, Refusal
from .roles import RoleGate


@dataclass(frozen=True, slots=True)
class RouteBroker:
    """One broker of a route."""

    broker_name: str
    broker_id: int  # as routes name it: 0 for the master or a slave standing in for it
    client_endpoint: str
    config: TopicConfig  # the topic's queue counts and permission on that broker
    read_only: bool  # no writes there (a slave, or a drained group)
    remoting_endpoint: str = ""  # "" when this broker does not know it


@dataclass(frozen=True, slots=True)
class RouteGroup:
    """One group of a route: the broker clients write and pop at (id 0; None when the route names
    none, as while a group elects a master) and every broker of the group, id 0 first."""

    broker_name: str
    serving: RouteBroker | None
    members: tuple[RouteBroker, ...]


@dataclass(frozen=True, slots=True)
class Route:
    topic: str
    brokers: tuple[RouteBroker, ...]
    exists: bool  # False: no broker has the topic yet; the first send creates it

    def groups(self) -> tuple[RouteGroup, ...]:
        """The route per group, in the order the groups first appear."""
        by_name: dict[str, list[RouteBroker]] = {}
        for broker in self.brokers:
            by_name.setdefault(broker.broker_name, []).append(broker)
        groups = []
        for name, members in by_name.items():
            serving = next((b for b in members if b.broker_id == 0), None)
            ordered = ([serving] if serving is not None else []) + [b for b in members if b is not serving]
            groups.append(RouteGroup(name, serving, tuple(ordered)))
        return tuple(groups)


def slave_route_id(slave_id: int, master_id: int) -> int:
    """The id a route names a slave by. Routes name the master (or a slave standing in for it)
    id 0 whatever its brokerId; in controller mode, where any broker may be elected, a slave
    configured as 0 takes the master's own brokerId so that id 0 stays the master's alone."""
    return master_id if slave_id == 0 else slave_id


def _config(topic: str, served: ServedTopic) -> TopicConfig:
    route = served.route
    return TopicConfig(topic, route.read_queues, route.write_queues, route.perm, order=route.order)


def other_groups(topic: str, view: ClusterView) -> tuple[list[RouteBroker], bool]:
    """The brokers of the groups in `view` serving `topic`, and whether any of them has the
    topic (False: they would create it on a first send)."""
    brokers: list[RouteBroker] = []
    served = view.serving(topic)
    for item in served:
        group, config = item.group, _config(topic, item)
        serving = group.serving
        if serving is not None:
            brokers.append(
                RouteBroker(
                    group.broker_name,
                    0,
                    serving.client_endpoint,
                    config,
                    not group.writable,
                    serving.remoting_endpoint,
                )
            )
        serving_id = serving.broker_id if serving is not None else 0
        for slave in group.slaves:
            if slave is not serving:
                slave_id = slave_route_id(slave.broker_id, serving_id)
                brokers.append(
                    RouteBroker(
                        group.broker_name, slave_id, slave.client_endpoint, config, True, slave.remoting_endpoint
                    )
                )
    return brokers, any(item.exists for item in served)


class RouteService:
    def __init__(self, store: MessageStore, configs: BrokerConfigs, view: BrokerView, roles: RoleGate) -> None:
        self._store = store
        self._broker = configs.broker
        self._view = view
        self._roles = roles

    def route(self, topic: str) -> Route | Refusal:
        """The topic's whole route: this group's part, then the cluster's other groups'."""
        refused = topic_problem(topic)
        if refused is not None:
            return refused
        local = self._local(topic)
        if isinstance(local, Route):
            local = Route(topic, self._with_registered(local.brokers), local.exists)
        cluster = self._view.cluster_view()
        if cluster is None:
            return local
        others, elsewhere = other_groups(topic, cluster)
        if not others or (isinstance(local, Route) and local.exists and not elsewhere):
            return local
        if not isinstance(local, Route) or (elsewhere and not local.exists):
            # Not served by this group (or only as a topic this group would create, while other
            # groups have it): the other groups' brokers alone.
            return Route(topic, tuple(others), elsewhere)
        return Route(topic, local.brokers + tuple(others), local.exists)

    # -- this group --------------------------------------------------------------------------

    def _config(self, topic: str) -> tuple[TopicConfig, bool] | Refusal:
        """The topic as this broker serves it, and whether it exists here."""
        slave = self._roles.is_slave
        config = self._store.topics.get(topic)
        if config is None and slave:
            config = topic_from_queues(self._store, topic)
        if config is not None:
            return config, True
        if not slave and self._store.config.auto_create_topic_enable:
            # A route to write to, but no topic yet: reads never create topics. The first send
            # creates it, within the auto-creation limits, or says which one refused it.
            count = self._store.config.default_topic_queue_nums
            return TopicConfig(topic, count, count), False
        why = "" if slave else " and autoCreateTopicEnable is false"
        return Refusal(Reason.TOPIC_NOT_FOUND, f"topic {topic} does not exist{why}")

    def _self_entry(self, config: TopicConfig) -> RouteBroker:
        slave = self._roles.is_slave
        # A slave acting for its master that is down stands in as broker id 0, read-only:
        # RocketMQ 5 clients talk to id 0 only, and producers find nothing to write to.
        stands_in = not slave or self._view.acting_master()
        # A master its put fence holds back (a new SYNC_MASTER until a replica is in sync, a
        # handover) is routed read-only: a producer sent there would hold the group out.
        store = self._store
        read_only = slave or store.write_refusal() is not None or store.put_fence_reason() is not None
        broker_id = 0 if stands_in else slave_route_id(self._broker.broker_id, self._serving_id())
        return RouteBroker(self._broker.broker_name, broker_id, self._view.client_endpoint(), config, read_only)

    def _local(self, topic: str) -> Route | Refusal:
        slave = self._roles.is_slave
        if slave and self._view.controller_mode():
            elected = self._elected_master_route(topic)
            if elected is not None:
                return elected
        found = self._config(topic)
        if isinstance(found, Refusal):
            created_there = self._to_be_created_by_master(topic) if slave else None
            return created_there or found
        config, exists = found
        own = self._self_entry(config)
        if not slave:
            return Route(topic, (own, *self._connected_slaves(config)), exists)
        if self._view.acting_master():
            return Route(topic, (own,), exists)
        brokers: list[RouteBroker] = []
        master = self._view.master_client_endpoint()
        if master:
            # The master's permissions are its topic table's; a topic known here only from the
            # replicated queues is written there as any other.
            writes = self._store.topics.get(topic) or TopicConfig(topic, config.read_queue_nums, config.read_queue_nums)
            brokers.append(RouteBroker(self._broker.broker_name, 0, master, writes, False))
        brokers.append(own)
        return Route(topic, tuple(brokers), exists)

    def _to_be_created_by_master(self, topic: str) -> Route | None:
        """A topic a slave does not know yet, routed as its master would route it: to the master
        (id 0), whose first send creates it; None while the master cannot take writes from here (the
        slave acts for it, or knows no master) or does not auto-create topics."""
        master = self._view.master_client_endpoint()
        if not master or self._view.acting_master() or not self._store.config.auto_create_topic_enable:
            return None
        return self._master_alone(topic, master, None)

    def _master_alone(self, topic: str, master: str, known: TopicConfig | None) -> Route:
        """Writers led to the master (id 0) alone, with the topic's queues where this slave knows
        them and the defaults a first send creates otherwise."""
        count = known.write_queue_nums if known is not None else self._store.config.default_topic_queue_nums
        entry = RouteBroker(self._broker.broker_name, 0, master, TopicConfig(topic, count, count), False)
        return Route(topic, (entry,), known is not None)

    def _elected_master_route(self, topic: str) -> Route | Refusal | None:
        """Controller mode, on a slave: writers go to the elected master (it creates the topic),
        reads may come here when this slave has the topic; None when the slave acts for its
        master that is down (it routes as one)."""
        master = self._view.master_client_endpoint()
        if master:
            known = self._store.topics.get(topic) or topic_from_queues(self._store, topic)
            to_master = self._master_alone(topic, master, known)
            if known is None:
                return to_master
            return Route(topic, (*to_master.brokers, self._self_entry(known)), True)
        if self._view.acting_master():
            return None
        return Refusal(Reason.NO_MASTER, f"broker {self._broker.broker_name} has no master elected now")

    def _with_registered(self, brokers: tuple[RouteBroker, ...]) -> tuple[RouteBroker, ...]:
        """This group's first-hand entries completed from a fresh registry: the remoting endpoints
        of the brokers it names, then its registered slaves not named yet (read-only, as the other
        groups' slaves are). Unchanged without a registry or when its last read is stale."""
        group = self._registered_group()
        if group is None or not brokers:
            return brokers
        own = self._view.client_endpoint()
        registered = {r.client_endpoint: r for r in (*group.slaves, *([group.master] if group.master else ()))}

        def remoting(broker: RouteBroker) -> str:
            record = registered.get(broker.client_endpoint)
            # This broker's own is its remoting adapter's to fill in.
            return "" if broker.client_endpoint == own or record is None else record.remoting_endpoint

        named = [replace(b, remoting_endpoint=b.remoting_endpoint or remoting(b)) for b in brokers]
        # This broker is named first-hand or not at all (a slave without the topic).
        known = {own, *(b.client_endpoint for b in named)}
        serving_id, config = self._serving_id(), named[0].config
        for slave in group.slaves:
            if slave.client_endpoint and slave.client_endpoint not in known:
                slave_id = slave_route_id(slave.broker_id, serving_id)
                named.append(
                    RouteBroker(
                        slave.broker_name, slave_id, slave.client_endpoint, config, True, slave.remoting_endpoint
                    )
                )
                known.add(slave.client_endpoint)
        return tuple(named)

    def _registered_group(self):
        """This group as the registry's last fresh read shows it; None without one."""
        registry = self._view.cluster_registry()
        if registry is None:
            return None
        view, max_age_ms = registry
        if view is None or not view.fresh(wall_clock_ms(), max_age_ms):
            return None
        return view.groups.get(self._broker.broker_name)

    def _serving_id(self) -> int:
        """The brokerId of the broker this group's route names as id 0."""
        if not self._roles.is_slave or self._view.acting_master():
            return self._broker.broker_id
        master = getattr(self._view.controller_status(), "master", None)
        if master is None:
            group = self._registered_group()
            master = group.master if group is not None else None
        # Static mode: the master's brokerId is 0 (RocketMQ's rule).
        return master.broker_id if master is not None else 0

    def _connected_slaves(self, config: TopicConfig) -> list[RouteBroker]:
        """A master's slaves, read-only, as the other groups' brokers name them: those connected."""
        broker = self._broker
        return [
            RouteBroker(
                broker.broker_name,
                slave_route_id(replica.broker_id, broker.broker_id),
                replica.client_endpoint,
                config,
                True,
            )
            for replica in self._view.slave_snapshots(wall_clock_ms())
            if replica.client_endpoint
        ]
