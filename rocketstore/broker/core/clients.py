"""`ClientService`: the rules of a client's heartbeat and goodbye and of a group's consumer list
(RocketMQ's ConsumerManager), over the broker's one `client_registry.ClientRegistry`.

A heartbeat (`client_registry.Heartbeat`, decoded by the front end) names a client id and the
groups it consumes in: every group name must be legal (ILLEGAL_GROUP); a consumer's client id is
1 to MAX_CLIENT_ID_LENGTH characters (BAD_REQUEST); a heartbeat naming no consumer group is a
producer's, recorded for the admin API and never refused; an entry the registry's limits cannot
take is refused (TABLE_FULL, naming the key), the others still count. A goodbye names its group
(a consumer's or a producer's), or none: every group of the client. Listing a group with no
consumer online answers CONSUMER_NOT_ONLINE. Time is an argument (sans-IO).

Today the remoting API's HEART_BEAT, UNREGISTER_CLIENT and GET_CONSUMER_LIST_BY_GROUP use it; the
gRPC API's calls reach the same registry through its interceptor (`client_sightings`), and its
Heartbeat checks the group's name with `queues.group_problem`.

Thread-safety: as the registry (one lock).
"""

from __future__ import annotations

from ..client_registry import ClientRegistry, Heartbeat
from ..client_table import MAX_CLIENT_ID_LENGTH
from .queues import group_problem
from .refusals import Reason, Refusal


class ClientService:
    def __init__(self, registry: ClientRegistry) -> None:
        self.registry = registry

    def heartbeat(self, heartbeat: Heartbeat, now_ms: int) -> Refusal | None:
        for group in heartbeat.consumer_groups:
            refused = group_problem(group)
            if refused is not None:
                return refused
        client_id = heartbeat.client_id
        if heartbeat.consumer_groups and not 0 < len(client_id) <= MAX_CLIENT_ID_LENGTH:
            return Refusal(Reason.BAD_REQUEST, f"clientID must be 1 to {MAX_CLIENT_ID_LENGTH} characters")
        full = self.registry.remoting_heartbeat(heartbeat, now_ms)
        return None if full is None else Refusal(Reason.TABLE_FULL, full)

    def gone(self, client_id: str, group: str | None = None) -> None:
        if client_id:
            self.registry.gone(client_id, group)

    def consumers(self, group: str, now_ms: int) -> list[str] | Refusal:
        refused = group_problem(group)
        if refused is not None:
            return refused
        clients = self.registry.consumer_ids(group, now_ms)
        if not clients:
            return Refusal(Reason.CONSUMER_NOT_ONLINE, f"no consumer of group {group} is online")
        return clients

    def members(self, group: str, now_ms: int) -> list[str]:
        """The ids of the group's consumers online now; none for an illegal name."""
        return [] if group_problem(group) is not None else self.registry.consumer_ids(group, now_ms)

    def housekeep(self, now_ms: int) -> None:
        self.registry.housekeep(now_ms)
