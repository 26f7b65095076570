"""Client API access control: the ACL file's model, the MQv2-HMAC-SHA1 signature as the official
clients make it, and the decision for each method."""

from __future__ import annotations

import json
import os
from binascii import hexlify
from hashlib import sha1
from hmac import new

import pytest

from rocketstore.broker.acl import AclConfig, Perm, decide, load_acl
from wire import client_signature
from wire.rpc import messaging_pb2 as pb

DOC = {
    "accounts": [
        {"accessKey": "app", "secretKey": "app-secret-key", "topicPerms": ["Orders=PUB|SUB", "Audit=SUB"]},
        {"accessKey": "reader", "secretKey": "reader-secret", "defaultTopicPerm": "SUB", "groupPerms": ["ops=DENY"]},
        {"accessKey": "root", "secretKey": "root-secret-key", "admin": True},
    ]
}
ACL = AclConfig.from_document(DOC, "test")


def signed(ak: str, sk: str, date_time: str = "20261125T010203Z") -> dict[str, str]:
    # The official Python client's own computation (rocketmq/v5/util/signature.py), restated.
    sign = hexlify(new(sk.encode(), date_time.encode(), sha1).digest()).decode()
    return {
        "x-mq-date-time": date_time,
        "authorization": f"MQv2-HMAC-SHA1 Credential={ak}, SignedHeaders=x-mq-date-time, Signature={sign}",
    }


def send(*topics: str) -> pb.SendMessageRequest:
    return pb.SendMessageRequest(messages=[pb.Message(topic=pb.Resource(name=t), body=b"x") for t in topics])


def pull(topic: str, group: str) -> pb.PullMessageRequest:
    return pb.PullMessageRequest(
        group=pb.Resource(name=group), message_queue=pb.MessageQueue(topic=pb.Resource(name=topic), id=0)
    )


def test_our_signature_is_the_official_clients():
    ours = dict(client_signature.metadata("app", "app-secret-key"))
    assert ours["authorization"] == signed("app", "app-secret-key", ours["x-mq-date-time"])["authorization"]
    assert decide(ACL, "SendMessage", ours, send("Orders")) is None


@pytest.mark.parametrize(
    "metadata, words",
    [
        ({}, "not MQv2-HMAC-SHA1"),
        (signed("app", "wrong-secret-key"), "does not match access key 'app'"),
        (signed("nobody", "app-secret-key"), "unknown access key 'nobody'"),
        ({**signed("app", "app-secret-key"), "x-mq-date-time": "20261125T010204Z"}, "does not match"),
        ({"authorization": signed("app", "app-secret-key")["authorization"]}, "no x-mq-date-time"),
    ],
)
def test_a_call_without_a_valid_signature_is_unauthorized(metadata, words):
    refused = decide(ACL, "QueryRoute", metadata, pb.QueryRouteRequest())
    assert refused is not None and refused[0] == pb.UNAUTHORIZED and words in refused[1]


def test_permissions_per_topic_and_group():
    app, reader, root = (
        signed("app", "app-secret-key"),
        signed("reader", "reader-secret"),
        signed("root", "root-secret-key"),
    )
    assert decide(ACL, "SendMessage", app, send("Orders", "Orders")) is None
    refused = decide(ACL, "SendMessage", app, send("Orders", "Audit"))
    assert refused == (pb.FORBIDDEN, "FORBIDDEN: access key 'app' lacks PUB on topic 'Audit'")
    assert decide(ACL, "SendMessage", app, send("Other"))[0] == pb.FORBIDDEN  # defaultTopicPerm DENY
    assert decide(ACL, "PullMessage", app, pull("Audit", "billing")) is None  # defaultGroupPerm SUB
    assert decide(ACL, "PullMessage", reader, pull("Anything", "billing")) is None
    assert "group 'ops'" in decide(ACL, "PullMessage", reader, pull("Anything", "ops"))[1]
    assert decide(ACL, "SendMessage", reader, send("Anything"))[0] == pb.FORBIDDEN
    assert decide(ACL, "SomeNewMethod", app, None)[0] == pb.FORBIDDEN
    assert decide(ACL, "SomeNewMethod", root, None) is None
    assert decide(ACL, "SendMessage", root, send("Audit")) is None


def test_the_acl_file_is_private_and_checked(tmp_path):
    path = tmp_path / "acl.json"
    path.write_text(json.dumps(DOC))
    os.chmod(path, 0o644)
    with pytest.raises(ValueError, match="chmod 600"):
        load_acl(str(path))
    os.chmod(path, 0o600)
    assert load_acl(str(path)).accounts["reader"].default_topic_perm is Perm.SUB
    for bad, words in [
        ({"accounts": []}, "no accounts"),
        ({"accounts": [{"accessKey": "a", "secretKey": "short"}]}, "at least 8"),
        ({"accounts": [{"accessKey": "a", "secretKey": "long-enough", "topicPerms": ["T=READ"]}]}, "not DENY"),
        ({"accounts": [{"accessKey": "a", "secretKey": "long-enough", "topicPerms": ["T"]}]}, "name=PERM"),
        ({"users": []}, "accounts"),
    ]:
        with pytest.raises(ValueError, match=words):
            AclConfig.from_document(bad, "acl.json")
    assert "app-secret-key" not in repr(ACL.accounts["app"])


def test_pop_calls_need_sub_on_the_topic_and_the_group():
    reader = signed("reader", "reader-secret")
    topic, ops, billing = pb.Resource(name="Anything"), pb.Resource(name="ops"), pb.Resource(name="billing")
    receive = pb.ReceiveMessageRequest(group=ops, message_queue=pb.MessageQueue(topic=topic, id=-1))
    calls = {
        "ReceiveMessage": receive,
        "AckMessage": pb.AckMessageRequest(group=ops, topic=topic),
        "ChangeInvisibleDuration": pb.ChangeInvisibleDurationRequest(group=ops, topic=topic),
        "ForwardMessageToDeadLetterQueue": pb.ForwardMessageToDeadLetterQueueRequest(group=ops, topic=topic),
        "QueryAssignment": pb.QueryAssignmentRequest(group=ops, topic=topic),
    }
    for method, request in calls.items():
        assert "SUB on group 'ops'" in decide(ACL, method, reader, request)[1], method
        request.group.CopyFrom(billing)
        assert decide(ACL, method, reader, request) is None, method
    app = signed("app", "app-secret-key")
    assert decide(ACL, "AckMessage", app, pb.AckMessageRequest(group=billing, topic=topic))[0] == pb.FORBIDDEN


def test_telemetry_settings_need_the_rights_of_what_they_announce():
    from rocketstore.broker.acl import AclGuard

    def producer(*topics: str) -> pb.TelemetryCommand:
        publishing = pb.Publishing(topics=[pb.Resource(name=t) for t in topics])
        return pb.TelemetryCommand(settings=pb.Settings(client_type=pb.PRODUCER, publishing=publishing))

    def consumer(group: str, *topics: str) -> pb.TelemetryCommand:
        entries = [pb.SubscriptionEntry(topic=pb.Resource(name=t)) for t in topics]
        subscription = pb.Subscription(group=pb.Resource(name=group), subscriptions=entries)
        return pb.TelemetryCommand(settings=pb.Settings(client_type=pb.SIMPLE_CONSUMER, subscription=subscription))

    app, reader = signed("app", "app-secret-key"), signed("reader", "reader-secret")
    check = AclGuard(ACL).telemetry_check
    assert decide(ACL, "Telemetry", app, None) is None  # the stream itself: a signature only
    assert check(app, producer("Orders")) is None
    refused = check(app, producer("Orders", "Audit"))
    assert refused.code == pb.FORBIDDEN and "lacks PUB on topic 'Audit'" in refused.message
    assert check(reader, producer("Orders")).code == pb.FORBIDDEN
    assert check(reader, consumer("billing", "Orders", "Audit")) is None
    assert "lacks SUB on group 'ops'" in check(reader, consumer("ops", "Orders")).message
    assert check({}, producer("Orders")).code == pb.UNAUTHORIZED
    assert check(reader, pb.TelemetryCommand(status=pb.Status(code=pb.OK))) is None  # nothing announced
