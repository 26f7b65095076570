"""`rocketstore connections` against a real broker: a producer announced as the official clients
announce one, a gRPC pull consumer and a pop consumer, listed by protocol and filtered by kind and
group."""

from __future__ import annotations

from client import Producer, PullConsumer
from pop_support import Pop, heartbeat
from support import cli, cli_json

TOPIC = "ConnectionsTopic"


def test_the_clients_a_broker_heard_from_by_protocol(admin_cluster, capsys):
    master = admin_cluster.master
    at = ("--endpoint", master.client_endpoint)
    with Producer(master.client_endpoint) as producer:
        assert producer.send(TOPIC, b"x").ok
    assert heartbeat(master.client_endpoint, "producer-7") == 20000
    pop = Pop(master.client_endpoint, TOPIC, "popper")
    try:
        pop.receive(batch=1, wait_s=0.1)
        with PullConsumer(master.client_endpoint, group="puller") as consumer:
            consumer.pull(TOPIC, 0, 0)
            everyone = cli_json(capsys, "connections", *at)
            producers = cli_json(capsys, "connections", *at, "--kind", "producer")
            pullers = cli_json(capsys, "connections", *at, "--group", "puller")
            code, out, _ = cli(capsys, "connections", *at)
    finally:
        pop.close()
    seen = sorted((c["kind"], c["protocol"], c["group"]) for c in everyone)
    assert seen == [("CONSUMER", "GRPC_POP", "popper"), ("CONSUMER", "GRPC_PULL", "puller"), ("PRODUCER", "GRPC", "")]
    assert [c["client_id"] for c in producers] == ["producer-7"]
    assert [(c["protocol"], c["topics"]) for c in pullers] == [("GRPC_PULL", [TOPIC])]
    assert code == 0 and "producer-7" in out
    assert out.splitlines()[-1] == (
        "3 client(s) heard from in the last two minutes: 1 consumer GRPC_POP, 1 consumer GRPC_PULL, 1 producer GRPC"
    )
