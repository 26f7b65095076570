"""Proxy mode: the official RocketMQ 5 Python client connected to a slave sends, receives, acks and
answers transaction check-backs through it, the slave relaying each call to its master
(`rocketstore/broker/proxy_forwarder.py`); with the master gone and no new one, the slave answers at
once instead of holding the call.

The group's route names every member for the official Python client, which connects to the first
address (sorted as text) that answers: the slave's port is chosen to sort before the master's, so
the client talks to the slave whatever port the OS would have handed out. With proxyModeEnable=false
the same scripts fail (the slave refuses NOT_MASTER), which is what these tests tell apart.
"""

from __future__ import annotations

import json
import os
import subprocess

import grpc
from test_client_acl import OFFICIAL_PYTHON, OFFICIAL_SEND
from test_pop_consumption import SIMPLE_CONSUMER, run_official
from test_transactions import FAST_CHECKS, TRANSACTIONAL_PRODUCER

from client import Credentials, PullConsumer
from harness.local_cluster import start_slave_first
from wire.rpc import messaging_pb2 as pb
from wire.rpc import messaging_pb2_grpc


def slave_first_group(make_cluster, **settings: str):
    """A SYNC_MASTER and one slave whose client endpoint sorts before the master's."""
    cluster = make_cluster(
        start=False, master_role="SYNC_MASTER", flush_disk_type="SYNC_FLUSH", slaves=0, settings=settings
    )
    return start_slave_first(cluster)


def test_an_official_client_on_a_slave_sends_receives_and_acks_through_it(make_cluster, tmp_path):
    cluster = slave_first_group(make_cluster)
    slave = cluster.slave_brokers[0].client_endpoint
    assert slave < cluster.master.client_endpoint  # the client's channel takes the slave
    out = json.loads(run_official(SIMPLE_CONSUMER, [slave, "ProxyTopic", "proxy-group"], tmp_path))
    first = {body: msg_id for msg_id, _, body in out["first"]}
    assert set(first) == {"pop-0", "pop-1", "pop-2", "pop-3"}
    assert set(first.values()) == set(out["sent"])
    # The unacked and the shortened one come back; once acked, nothing is left.
    assert sorted(body for _, _, body in out["second"]) == ["pop-0", "pop-1"]
    assert out["third"] == []
    # The sends were stored by the master (and replicated: SYNC_MASTER).
    for endpoint in (cluster.master.client_endpoint, slave):
        with PullConsumer(endpoint, group="proxy-check") as consumer:
            stored = {
                m.msg_id for q in consumer.queues("ProxyTopic") for m in consumer.pull("ProxyTopic", q, 0).messages
            }
        assert stored == set(out["sent"]), endpoint


def test_transaction_check_backs_reach_a_producer_whose_telemetry_goes_through_a_slave(make_cluster, tmp_path):
    cluster = slave_first_group(make_cluster, **FAST_CHECKS)
    slave = cluster.slave_brokers[0].client_endpoint
    out = json.loads(run_official(TRANSACTIONAL_PRODUCER, [slave, "ProxyTxTopic"], tmp_path))
    sent = out["sent"]
    # Only the master checks transactions back: the answers came over the relayed Telemetry stream.
    assert out["checked"] == ["checked-commit", "checked-rollback"]
    assert out["got"] == [["checked-commit", sent["checked-commit"]], ["commit", sent["commit"]]]


def test_a_slave_without_a_reachable_master_answers_a_send_before_the_callers_deadline(make_cluster):
    cluster = make_cluster(master_role="ASYNC_MASTER", flush_disk_type="ASYNC_FLUSH", slaves=1)
    master, slave = cluster.master, cluster.slave_brokers[0]
    master.kill()
    message = pb.Message(topic=pb.Resource(name="ProxyTopic"), body=b"x")
    message.system_properties.message_id = "PROXY-NO-MASTER"
    with grpc.insecure_channel(slave.client_endpoint) as channel:
        stub = messaging_pb2_grpc.MessagingServiceStub(channel)
        # A deadline error would raise: the slave answers with its own refusal instead.
        response = stub.SendMessage(pb.SendMessageRequest(messages=[message]), timeout=30)
    assert response.status.code == pb.FORBIDDEN, response
    assert master.client_endpoint in response.status.message


def _acl_file(path, reader_perms: str):
    path.write_text(
        json.dumps(
            {
                "accounts": [
                    {"accessKey": "app", "secretKey": "app-secret-key-1", "topicPerms": ["Orders=PUB|SUB"]},
                    {"accessKey": "reader", "secretKey": "reader-secret-key", "topicPerms": [reader_perms]},
                ]
            }
        )
    )
    os.chmod(path, 0o600)
    return str(path)


def test_a_relayed_call_keeps_its_signature_and_the_master_checks_it(make_cluster, tmp_path):
    """The slave lets "reader" publish, the master does not: a send through the slave is the
    master's to refuse; "app" may on both, and its signature still verifies at the master."""
    master_acl = _acl_file(tmp_path / "master-acl.json", "Orders=SUB")
    slave_acl = _acl_file(tmp_path / "slave-acl.json", "Orders=PUB|SUB")
    cluster = make_cluster(
        start=False,
        master_role="SYNC_MASTER",
        flush_disk_type="SYNC_FLUSH",
        slaves=0,
        settings={"aclEnable": "true", "aclFile": master_acl},
        slave_settings={"aclFile": slave_acl},
    )
    start_slave_first(cluster)
    slave = cluster.slave_brokers[0].client_endpoint

    def send(ak: str, sk: str, home) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(OFFICIAL_PYTHON), "-c", OFFICIAL_SEND, slave, ak, sk],
            capture_output=True,
            text=True,
            timeout=120,
            env=dict(os.environ, HOME=str(home)),
        )

    good = send("app", "app-secret-key-1", tmp_path / "app")
    assert good.returncode == 0, good.stderr[-2000:]
    message_id = good.stdout.strip().splitlines()[-1]
    with PullConsumer(cluster.master.client_endpoint, credentials=Credentials("app", "app-secret-key-1")) as consumer:
        stored = {m.msg_id for q in consumer.queues("Orders") for m in consumer.pull("Orders", q, 0).messages}
    assert message_id in stored
    refused = send("reader", "reader-secret-key", tmp_path / "reader")
    assert refused.returncode != 0
    client_log = tmp_path / "reader" / "logs" / "rocketmq_python" / "rocketmq_client.log"
    said = refused.stderr + (client_log.read_text() if client_log.exists() else "")
    assert "lacks PUB on topic 'Orders'" in said, said[-2000:]
