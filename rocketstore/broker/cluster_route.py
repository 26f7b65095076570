"""The other groups' pop assignments, from the registry's `ClusterView`, for the gRPC client API's
QueryAssignment (their route is the broker core's: `core.routes.other_groups`).

Per other group that has the topic readable, one assignment (queue id -1: any queue) on the broker
serving it: its master, or a slave standing in for a master that is down. RocketMQ 5 push
consumers receive from there.

Pure functions over protobuf values; thread-safe.
"""

from __future__ import annotations

from rocketstore.coordination.cluster_routes import PERM_READ, ClusterView
from wire.rpc import messaging_pb2 as pb

from .v2_messages import endpoints_of, pop_assignment


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
