"""The other groups' part of a route or an assignment, from the registry's `ClusterView`.

A broker answers QueryRoute for its own group from what it knows first-hand (its topic table, its
master, its role) and adds the other groups' queues from the registry (`coordination.cluster_routes`):
per group serving the topic, its master as broker id 0 (writable unless the group is drained or
the topic is read-only), or a slave standing in for a master that is down as id 0 read-only, and
each slave under its own id, read-only, for reads (`slave_route_id`: in controller mode a slave
configured as id 0 takes the id of the master it stands beside). RocketMQ 5 clients write to and
pop from id 0 only; our pull consumer may read from the others.

Pure functions over protobuf values; thread-safe.
"""

from __future__ import annotations

from wire.rpc import messaging_pb2 as pb
from rocketstore.coordination.cluster_routes import PERM_READ, ClusterView, ServedTopic
from store.topic_config import TopicConfig

from .v2_messages import endpoints_of, pop_assignment, route_queues


def _config(topic: str, served: ServedTopic) -> TopicConfig:
    route = served.route
    return TopicConfig(topic, route.read_queues, route.write_queues, route.perm, order=route.order)


def slave_route_id(slave_id: int, master_id: int) -> int:
    """The id a route names a slave by. Routes name the master (or a slave standing in for it)
    id 0 whatever its brokerId; in controller mode, where any broker may be elected, a slave
    configured as 0 takes the master's own brokerId so that id 0 stays the master's alone."""
    return master_id if slave_id == 0 else slave_id


def other_groups_queues(resource: pb.Resource, view: ClusterView) -> tuple[list[pb.MessageQueue], bool]:
    """The queues of the groups in `view` serving `resource`'s topic, and whether any of them has
    the topic (False: they would create it on a first send)."""
    topic = resource.name
    queues: list[pb.MessageQueue] = []
    served = view.serving(topic)
    for item in served:
        group, config = item.group, _config(topic, item)
        serving = group.serving
        if serving is not None:
            read_only = not group.writable
            queues += route_queues(resource, config, group.broker_name, 0, serving.client_endpoint, read_only)
        serving_id = serving.broker_id if serving is not None else 0
        for slave in group.slaves:
            if slave is not serving:
                slave_id = slave_route_id(slave.broker_id, serving_id)
                queues += route_queues(resource, config, group.broker_name, slave_id, slave.client_endpoint, True)
    return queues, any(item.exists for item in served)


def other_groups_assignments(resource: pb.Resource, view: ClusterView) -> list[pb.Assignment]:
    """Pop assignments (queue id -1: any queue of the broker) on each other group that has the
    topic readable: where a RocketMQ 5 push consumer receives from."""
    assignments = []
    for item in view.serving(resource.name):
        serving = item.group.serving
        if serving is None or not item.exists or not item.route.perm & PERM_READ:
            continue
        permission = pb.READ_WRITE if item.group.writable else pb.READ
        endpoints = endpoints_of(serving.client_endpoint)
        assignments.append(pop_assignment(resource, item.group.broker_name, endpoints, permission))
    return assignments
