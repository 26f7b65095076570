"""A broker with aclEnable: signed calls from our clients and from the official RocketMQ 5 Python
client are served within their account's permissions; unsigned or wrongly signed calls are
refused UNAUTHORIZED, calls beyond the permissions FORBIDDEN; the secret keys never reach the log."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from test_transactions import FAST_CHECKS

from client import BrokerError, Credentials, Producer, PullConsumer
from transaction_support import ProducerStream, Transactions
from wire.rpc import messaging_pb2 as pb

REPO = Path(__file__).resolve().parents[2]
OFFICIAL_PYTHON = REPO / ".venv-rocketmq" / "bin" / "python"

ACCOUNTS = {
    "accounts": [
        {"accessKey": "app", "secretKey": "app-secret-key-1", "topicPerms": ["Orders=PUB|SUB"]},
        {"accessKey": "reader", "secretKey": "reader-secret-key", "topicPerms": ["Orders=SUB"]},
        {"accessKey": "snoop", "secretKey": "snoop-secret-key", "topicPerms": ["Other=PUB"]},
    ]
}

OFFICIAL_SEND = r"""
import sys
from rocketmq import ClientConfiguration, Credentials, Message, Producer

endpoint, ak, sk = sys.argv[1], sys.argv[2], sys.argv[3]
producer = Producer(ClientConfiguration(endpoint, Credentials(ak, sk), request_timeout=5), ("Orders",))
producer.startup()
try:
    message = Message()
    message.topic = "Orders"
    message.body = b"from the official client"
    print(producer.send(message).message_id)
finally:
    producer.shutdown()
"""


@pytest.fixture
def broker(make_cluster, tmp_path):
    acl = tmp_path / "acl.json"
    acl.write_text(json.dumps(ACCOUNTS))
    os.chmod(acl, 0o600)
    settings = {"aclEnable": "true", "aclFile": str(acl), **FAST_CHECKS}
    return make_cluster(master_role="ASYNC_MASTER", slaves=0, settings=settings)


def test_signed_calls_within_permissions_are_served_and_others_refused(broker):
    endpoint = broker.master.client_endpoint
    app = Credentials("app", "app-secret-key-1")
    with Producer(endpoint, credentials=app, retry_timeout_s=0) as producer:
        sent = producer.send("Orders", b"signed")
        assert sent.ok
        with pytest.raises(BrokerError, match="FORBIDDEN.*lacks PUB on topic 'Audit'"):
            producer.send("Audit", b"not allowed")
    with Producer(endpoint, retry_timeout_s=0) as unsigned:
        with pytest.raises(BrokerError, match="UNAUTHORIZED"):
            unsigned.send("Orders", b"unsigned")
    with Producer(endpoint, credentials=Credentials("app", "not-the-secret"), retry_timeout_s=0) as wrong:
        with pytest.raises(BrokerError, match="UNAUTHORIZED.*does not match"):
            wrong.send("Orders", b"wrongly signed")
    with Producer(endpoint, credentials=Credentials("reader", "reader-secret-key"), retry_timeout_s=0) as reader:
        with pytest.raises(BrokerError, match="FORBIDDEN.*lacks PUB on topic 'Orders'"):
            reader.send("Orders", b"a reader may not write")
    with PullConsumer(endpoint, credentials=Credentials("reader", "reader-secret-key")) as consumer:
        # A long poll: the message is seen however far the broker's dispatch trails the put.
        pulled = consumer.pull("Orders", sent.queue_id, 0, long_polling_ms=20_000)
        assert [m.body for m in pulled.messages] == [b"signed"]
    with PullConsumer(endpoint) as anonymous:
        with pytest.raises(BrokerError, match="UNAUTHORIZED"):
            anonymous.pull("Orders", sent.queue_id, 0)
    log = (broker.master.directory / "logs" / "broker.log").read_text()
    assert "app-secret-key-1" not in log and "reader-secret-key" not in log


def test_the_official_client_signs_and_is_checked(broker, tmp_path):
    assert OFFICIAL_PYTHON.exists(), f"{OFFICIAL_PYTHON} is missing: `make test` creates it"
    env = dict(os.environ, HOME=str(tmp_path))
    endpoint = broker.master.client_endpoint

    def run(ak: str, sk: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(OFFICIAL_PYTHON), "-c", OFFICIAL_SEND, endpoint, ak, sk],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )

    good = run("app", "app-secret-key-1")
    assert good.returncode == 0, good.stderr[-2000:]
    message_id = good.stdout.strip().splitlines()[-1]
    with PullConsumer(endpoint, credentials=Credentials("app", "app-secret-key-1")) as consumer:
        bodies = {m.msg_id: m.body for q in consumer.queues("Orders") for m in consumer.pull("Orders", q, 0).messages}
    assert bodies.get(message_id) == b"from the official client"
    bad = run("app", "a-wrong-secret-key")
    assert bad.returncode != 0
    client_log = tmp_path / "logs" / "rocketmq_python" / "rocketmq_client.log"
    said = bad.stderr + (client_log.read_text() if client_log.exists() else "")
    assert "UNAUTHORIZED" in said or "40100" in said, said[-2000:]


def test_acl_with_the_remoting_api_is_refused_at_start(make_cluster, tmp_path):
    acl = tmp_path / "acl.json"
    acl.write_text(json.dumps(ACCOUNTS))
    os.chmod(acl, 0o600)
    cluster = make_cluster(
        start=False,
        slaves=0,
        settings={"aclEnable": "true", "aclFile": str(acl), "remotingListenPort": "0"},
    )
    with pytest.raises(Exception, match="remoting API does not check ACL signatures"):
        cluster.start(timeout_s=30)


def test_check_backs_go_only_to_producers_whose_account_may_publish_to_the_topic(broker):
    """Issue 30: an account with no right on `Orders` announced itself as its producer over
    Telemetry and received its transaction check-backs, message bodies included. Its settings
    are refused now, and the check-backs go to the entitled producer only."""
    endpoint = broker.master.client_endpoint
    app, snoop = Credentials("app", "app-secret-key-1"), Credentials("snoop", "snoop-secret-key")
    tx = Transactions(endpoint, app)
    snooper = ProducerStream(endpoint, "Orders", snoop)
    producer = ProducerStream(endpoint, "Orders", app)
    try:
        assert snooper.settled.wait(10) and producer.settled.wait(10)
        half = tx.send_half("Orders", b"secret order")
        assert half.status.code == pb.OK
        # Checked every second: several check-backs, all of them to the entitled producer.
        asked = [producer.checks.get(timeout=20) for _ in range(3)]
        assert {c.transaction_id for c in asked} == {half.transaction_id}
        assert asked[0].message.body == b"secret order"
        assert snooper.checks.empty()
        assert snooper.answer.code == pb.FORBIDDEN and "lacks PUB on topic 'Orders'" in snooper.answer.message
        assert producer.answer.code == pb.OK
        assert tx.end("Orders", half, False).code == pb.OK
    finally:
        producer.close()
        snooper.close()
        tx.close()
    # Its own topic is announced as usual.
    own = ProducerStream(endpoint, "Other", snoop)
    try:
        assert own.settled.wait(10) and own.answer.code == pb.OK
    finally:
        own.close()
