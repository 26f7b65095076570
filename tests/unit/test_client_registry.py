"""The broker's one client registry (rocketstore/broker/client_registry.py): remoting heartbeats
(decoded by the remoting server's `heartbeat_of`) and gRPC sightings
(rocketstore/broker/client_sightings.py) in one record, read by the remoting API's consumer lists
and the admin API; bounded per API, expiring. Time is an argument."""

from __future__ import annotations

from rocketstore.broker.client_registry import ClientKind, ClientLimits, ClientProtocol, ClientRegistry, ClientSeen
from rocketstore.broker.client_sightings import ClientSightings
from rocketstore.broker.client_table import MAX_TOPICS_PER_CLIENT
from rocketstore.broker.remoting_server import heartbeat_of
from wire.rpc import messaging_pb2 as pb

HEARTBEAT = {
    "clientID": "10.0.0.5@4242",
    "language": "JAVA",
    "version": 453,
    "consumerDataSet": [
        {
            "groupName": "billing",
            "subscriptionDataSet": [{"topic": "Orders"}, {"topic": "%RETRY%billing"}],
        }
    ],
    "producerDataSet": [{"groupName": "order-producers"}, {"groupName": 7}],
}


def grpc_pop(registry: ClientRegistry, client_id: str, group: str, now_ms: int) -> str | None:
    pop, consumer = ClientProtocol.GRPC_POP, ClientKind.CONSUMER
    return registry.saw(ClientSeen.first(client_id, pop, consumer, group, "10.0.0.9:5000", now_ms, ("Orders",)))


def test_a_remoting_heartbeat_is_in_the_group_list_and_the_admin_list_a_grpc_consumer_in_the_admin_list_only():
    registry = ClientRegistry(ClientLimits())
    assert registry.remoting_heartbeat(heartbeat_of(HEARTBEAT, "10.0.0.5:6000"), 1000) is None
    assert grpc_pop(registry, "pop-1", "billing", 1000) is None
    # A 4.x consumer divides the queues among the 4.x consumers alone: a pop consumer takes none.
    assert registry.consumer_ids("billing", 1000) == ["10.0.0.5@4242"]
    members = registry.groups(1000)["billing"]
    assert [(m.client_id, m.protocol) for m in members] == [
        ("10.0.0.5@4242", ClientProtocol.REMOTING),
        ("pop-1", ClientProtocol.GRPC_POP),
    ]
    fourx = members[0]
    assert (fourx.address, fourx.topics, fourx.language, fourx.version) == (
        "10.0.0.5:6000",
        frozenset({"Orders"}),
        "JAVA",
        "453",
    )
    [producer] = registry.clients(1000, kind=ClientKind.PRODUCER)
    assert (producer.group, producer.protocol) == ("order-producers", ClientProtocol.REMOTING)
    assert registry.consumer_ids("order-producers", 1000) == []


def test_grpc_clients_filling_their_table_crowd_out_no_remoting_consumer():
    registry = ClientRegistry(ClientLimits(max_clients_per_group=2, max_groups=4, max_clients=3))
    assert [grpc_pop(registry, f"pop-{i}", "billing", 0) for i in range(3)] == [
        None,
        None,
        "group billing has 2 clients, the limit (remotingMaxClientsPerGroup)",
    ]
    assert registry.remoting_heartbeat(heartbeat_of(HEARTBEAT, "10.0.0.5:6000"), 0) is None
    assert registry.consumer_ids("billing", 0) == ["10.0.0.5@4242"]
    assert [c.client_id for c in registry.clients(0, group="billing")] == ["10.0.0.5@4242", "pop-0", "pop-1"]
    # Past its own table's limits a remoting consumer is refused, naming the key.
    second = dict(HEARTBEAT, clientID="10.0.0.6@1")
    third = dict(HEARTBEAT, clientID="10.0.0.7@1")
    assert registry.remoting_heartbeat(heartbeat_of(second, "10.0.0.6:6000"), 0) is None
    refused = registry.remoting_heartbeat(heartbeat_of(third, "10.0.0.7:6000"), 0)
    assert refused is not None and "remotingMaxClientsPerGroup" in refused and "10.0.0.7@1" in refused


def test_goodbyes_leave_every_list_and_silent_clients_expire_on_schedule():
    registry = ClientRegistry(ClientLimits(expiry_ms=1000))
    registry.remoting_heartbeat(heartbeat_of(HEARTBEAT, "10.0.0.5:6000"), 0)
    grpc_pop(registry, "pop-1", "billing", 0)
    assert registry.gone("10.0.0.5@4242", "billing") == 1
    assert registry.consumer_ids("billing", 0) == []
    assert [c.group for c in registry.clients(0)] == ["billing", "order-producers"]
    assert registry.gone("10.0.0.5@4242") == 1  # no group named: every group of it
    grpc_pop(registry, "pop-2", "billing", 900)
    assert [c.client_id for c in registry.clients(1500)] == ["pop-2"]  # never listed once expired
    assert registry.housekeep(1500) == 1 and registry.housekeep(1600) == 0  # not due again yet
    # A client heard from again after its expiry starts a new session.
    grpc_pop(registry, "pop-2", "billing", 5000)
    [again] = registry.clients(5000)
    assert again.first_seen_ms == 5000


def test_a_client_naming_a_new_topic_at_every_call_is_remembered_with_a_bounded_set_of_valid_names():
    registry = ClientRegistry(ClientLimits())
    pull, consumer = ClientProtocol.GRPC_PULL, ClientKind.CONSUMER
    for i in range(MAX_TOPICS_PER_CLIENT + 20):
        registry.saw(ClientSeen.first("puller", pull, consumer, "g", "10.0.0.9:5000", i, (f"T{i}", "bad topic")))
    [puller] = registry.clients(100)
    assert len(puller.topics) == MAX_TOPICS_PER_CLIENT and puller.last_seen_ms == MAX_TOPICS_PER_CLIENT + 19
    assert "bad topic" not in puller.topics
    # Names no client may have are not recorded at all: the calls that carry them are refused later.
    assert registry.saw(ClientSeen.first("x" * 256, pull, consumer, "g", "a:1", 0)) is not None
    assert registry.saw(ClientSeen.first("puller2", pull, consumer, "g" * 300, "a:1", 0)) is not None
    assert [c.client_id for c in registry.clients(100)] == ["puller"]


def test_grpc_calls_name_their_client_its_kind_and_protocol():
    registry = ClientRegistry(ClientLimits())
    sightings = ClientSightings(registry, clock_ms=lambda: 1000)
    headers = {"x-mq-client-id": "app@1", "x-mq-language": "JAVA"}
    queue = pb.MessageQueue(topic=pb.Resource(name="Orders"))
    sightings.record("Heartbeat", pb.HeartbeatRequest(client_type=pb.PRODUCER), headers, "ipv4:10.0.0.9:5000")
    sightings.record("Heartbeat", pb.HeartbeatRequest(client_type=pb.SIMPLE_CONSUMER), headers, "ipv4:10.0.0.9:5000")
    receive = pb.ReceiveMessageRequest(group=pb.Resource(name="pop-group"), message_queue=queue)
    sightings.record("ReceiveMessage", receive, headers, "ipv4:10.0.0.9:5000")
    pull = pb.PullMessageRequest(group=pb.Resource(name="pull-group"), message_queue=queue)
    sightings.record("PullMessage", pull, {}, "ipv6:[::1]:6000")
    seen = {(c.group, c.client_id): c for c in registry.clients(1000)}
    assert {key: (c.kind, c.protocol) for key, c in seen.items()} == {
        ("", "app@1"): (ClientKind.PRODUCER, ClientProtocol.GRPC),
        ("pop-group", "app@1"): (ClientKind.CONSUMER, ClientProtocol.GRPC_POP),
        ("pull-group", "[::1]:6000"): (ClientKind.CONSUMER, ClientProtocol.GRPC_PULL),
    }
    assert seen[("pop-group", "app@1")].topics == frozenset({"Orders"}) and seen[("", "app@1")].language == "JAVA"
    assert registry.consumer_ids("pop-group", 1000) == []
    bye = pb.NotifyClientTerminationRequest(group=pb.Resource(name="pop-group"))
    sightings.record("NotifyClientTermination", bye, headers, "ipv4:10.0.0.9:5000")
    assert [(c.group, c.client_id) for c in registry.clients(1000)] == [("", "app@1"), ("pull-group", "[::1]:6000")]
