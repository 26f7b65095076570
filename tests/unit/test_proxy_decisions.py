"""Proxy mode's decision (`proxy_rules.relay_target`: which call, which role, which target), the
relay's fallback and metadata (`proxy_forwarder`, with stand-ins for the upstream call and the
servicer: no sockets), and the route rule that names a group by all its members for the official
Python client (`v2_messages.group_message_queues`)."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from rocketstore.broker.call_metadata import method_of
from rocketstore.broker.config import BrokerConfig
from rocketstore.broker.core.routes import Route, RouteBroker
from rocketstore.broker.proxy_forwarder import _passing_bytes, _relay_unary, _relay_unary_stream, relayed_metadata
from rocketstore.broker.proxy_rules import (
    FORWARDED_HEADER,
    MASTER_WRITES,
    POP_CALLS,
    RELAYED,
    SESSION_CALLS,
    Standing,
    relay_target,
)
from rocketstore.broker.v2_messages import endpoints_of, group_message_queues
from store.metadata.topic_config import TopicConfig
from wire.rpc import messaging_pb2 as pb

MASTER = "10.0.0.1:8081"
SELF = "10.0.0.2:8081"
SLAVE = Standing(is_slave=True, acting_master=False, own_endpoint=SELF, master_endpoint=MASTER)
ACTING = Standing(is_slave=True, acting_master=True, own_endpoint=SELF, master_endpoint=MASTER)
A_MASTER = Standing(is_slave=False, acting_master=False, own_endpoint=MASTER, master_endpoint=MASTER)
LOCAL_READS = ("QueryRoute", "PullMessage", "GetOffset", "QueryOffset", "Heartbeat")


def test_the_relayed_methods_are_the_ones_a_slave_refuses_or_the_master_keeps_state_for():
    assert MASTER_WRITES == {"SendMessage", "EndTransaction", "UpdateOffset"}
    assert POP_CALLS == {
        "QueryAssignment",
        "ReceiveMessage",
        "AckMessage",
        "ChangeInvisibleDuration",
        "ForwardMessageToDeadLetterQueue",
    }
    assert SESSION_CALLS == {"Telemetry", "NotifyClientTermination"}
    service = pb.DESCRIPTOR.services_by_name["MessagingService"]
    assert RELAYED <= set(service.methods_by_name)  # every name is a real method


@pytest.mark.parametrize("method", sorted(RELAYED))
def test_a_slave_relays_master_only_calls_to_its_master(method):
    assert relay_target(method, SLAVE, already_relayed=False) == MASTER


@pytest.mark.parametrize("method", LOCAL_READS)
def test_reads_a_slave_serves_stay_local(method):
    assert relay_target(method, SLAVE, already_relayed=False) is None


@pytest.mark.parametrize("method", sorted(RELAYED))
def test_a_master_serves_every_call_itself(method):
    assert relay_target(method, A_MASTER, already_relayed=False) is None


@pytest.mark.parametrize("method", sorted(RELAYED))
def test_a_call_relayed_once_is_never_relayed_again(method):
    assert relay_target(method, SLAVE, already_relayed=True) is None


def test_a_slave_acting_for_its_master_keeps_pop_and_session_calls_and_relays_writes():
    for method in POP_CALLS | SESSION_CALLS:
        assert relay_target(method, ACTING, already_relayed=False) is None, method
    for method in MASTER_WRITES:
        assert relay_target(method, ACTING, already_relayed=False) == MASTER, method


def test_no_master_known_or_the_master_is_this_broker_serves_locally():
    for standing in (
        Standing(True, False, SELF, ""),
        Standing(True, False, SELF, SELF),
    ):
        assert relay_target("SendMessage", standing, already_relayed=False) is None


def test_method_of_reads_only_the_messaging_service():
    assert method_of("/apache.rocketmq.v2.MessagingService/SendMessage") == "SendMessage"
    assert method_of("/rocketstore.Admin/Status") is None


def test_relayed_metadata_keeps_the_callers_headers_and_marks_the_call():
    metadata = (
        ("authorization", "MQv2-HMAC-SHA1 Credential=ak, SignedHeaders=x-mq-date-time, Signature=00"),
        ("x-mq-date-time", "20261127T010203Z"),
        ("x-mq-client-id", "client-1"),
        ("x-mq-language", "PYTHON"),
        ("user-agent", "grpc-python/1.85"),
        ("grpc-accept-encoding", "gzip"),
        (FORWARDED_HEADER, "1"),
    )
    relayed = relayed_metadata(metadata)
    assert relayed == (*metadata[:4], (FORWARDED_HEADER, "1"))


class _Context:
    def __init__(self) -> None:
        self.aborted: tuple[grpc.StatusCode, str] | None = None

    def time_remaining(self) -> float:
        return 5.0

    async def abort(self, code, details):
        self.aborted = (code, details)
        raise grpc.aio.AbortError()


def _error(code: grpc.StatusCode) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), "from upstream")


def _local_answer(text: str):
    async def local(request, context):
        return pb.SendMessageResponse(status=pb.Status(code=pb.MASTER_PERSISTENCE_TIMEOUT, message=text))

    return local


def test_an_unreachable_master_leaves_the_call_to_the_local_servicer():
    seen = {}

    async def upstream(request, *, metadata, timeout):
        seen.update(metadata=metadata, timeout=timeout)
        raise _error(grpc.StatusCode.UNAVAILABLE)

    relay = _relay_unary(upstream, _local_answer("local"), (("x-mq-client-id", "c"),))
    answer = asyncio.run(relay(pb.SendMessageRequest(), _Context()))
    assert answer.status.message == "local"
    assert seen == {"metadata": (("x-mq-client-id", "c"),), "timeout": 5.0}


def test_the_masters_answer_and_its_other_errors_reach_the_caller():
    async def answering(request, *, metadata, timeout):
        return pb.SendMessageResponse(status=pb.Status(code=pb.OK, message="master"))

    assert asyncio.run(_relay_unary(answering, _local_answer("local"), ())(None, _Context())).status.message == "master"

    async def failing(request, *, metadata, timeout):
        raise _error(grpc.StatusCode.DEADLINE_EXCEEDED)

    context = _Context()
    with pytest.raises(grpc.aio.AbortError):
        asyncio.run(_relay_unary(failing, _local_answer("local"), ())(None, context))
    assert context.aborted == (grpc.StatusCode.DEADLINE_EXCEEDED, "from upstream")


class _Stream:
    """A stand-in for a unary-stream call: `answers`, then `error` if any."""

    def __init__(self, answers, error=None) -> None:
        self._answers, self._error = answers, error
        self.cancelled = False

    def __aiter__(self):
        return self._run()

    async def _run(self):
        for answer in self._answers:
            yield answer
        if self._error is not None:
            raise self._error

    def cancel(self) -> None:
        self.cancelled = True


def _collect(relay, context):
    async def body():
        return [r.status.message async for r in relay(pb.ReceiveMessageRequest(), context)]

    return asyncio.run(body())


async def _local_stream(request, context):
    yield pb.ReceiveMessageResponse(status=pb.Status(code=pb.OK, message="local"))


def test_a_receive_falls_back_only_before_the_master_answered():
    call = _Stream([], _error(grpc.StatusCode.UNAVAILABLE))
    relay = _relay_unary_stream(lambda request, metadata, timeout: call, _local_stream, ())
    assert _collect(relay, _Context()) == ["local"]
    assert call.cancelled

    first = pb.ReceiveMessageResponse(status=pb.Status(code=pb.OK, message="master"))
    broken = _Stream([first], _error(grpc.StatusCode.UNAVAILABLE))
    relay = _relay_unary_stream(lambda request, metadata, timeout: broken, _local_stream, ())
    context = _Context()
    with pytest.raises(grpc.aio.AbortError):
        _collect(relay, context)
    # The master may have delivered (made invisible) messages: no second answer from here.
    assert context.aborted == (grpc.StatusCode.UNAVAILABLE, "from upstream")


# -- routes: a group named by all its members ---------------------------------------------------


def test_endpoints_of_several_addresses_of_one_ip_version():
    both = endpoints_of("10.0.0.1:1", "10.0.0.2:1", "10.0.0.1:1")
    assert both.scheme == pb.IPv4
    assert [(a.host, a.port) for a in both.addresses] == [("10.0.0.1", 1), ("10.0.0.2", 1)]
    # Mixed schemes (or a domain name) cannot share one Endpoints: the first alone.
    for mixed in (("10.0.0.1:1", "[::1]:1"), ("10.0.0.1:1", "broker-b.example:1"), ("broker-a.example:1", "b:1")):
        assert len(endpoints_of(*mixed).addresses) == 1, mixed


def test_official_python_clients_get_every_member_of_a_group_at_id_0():
    config = TopicConfig("T", 2, 2)
    brokers = [
        RouteBroker("a", 0, "10.0.0.1:1", config, False),
        RouteBroker("a", 1, "10.0.0.2:1", config, True),
        RouteBroker("a", 2, "10.0.0.3:1", config, True),
        RouteBroker("b", 0, "10.0.1.1:1", config, False),
    ]
    groups = Route("T", tuple(brokers), True).groups()
    every = group_message_queues(pb.Resource(name="T"), groups, all_members=True)
    hosts = {(q.broker.name, q.broker.id, tuple(a.host for a in q.broker.endpoints.addresses)) for q in every}
    assert hosts == {("a", 0, ("10.0.0.1", "10.0.0.2", "10.0.0.3")), ("b", 0, ("10.0.1.1",))}
    assert {q.permission for q in every} == {pb.READ_WRITE}  # the serving broker's permissions
    single = group_message_queues(pb.Resource(name="T"), groups)
    assert {len(q.broker.endpoints.addresses) for q in single} == {1}


def test_proxy_mode_is_on_by_default_and_off_under_tls():
    assert BrokerConfig().relays_to_master
    assert not BrokerConfig(proxy_mode_enable=False).relays_to_master
    tls = BrokerConfig(tls_enable=True, tls_server_cert_path="cert.pem", tls_server_key_path="key.pem")
    assert not tls.relays_to_master


def test_the_masters_answers_pass_as_bytes_and_local_answers_are_serialized():
    serializer = _passing_bytes(pb.SendMessageResponse.SerializeToString)
    answer = pb.SendMessageResponse(status=pb.Status(code=pb.OK, message="master"))
    raw = answer.SerializeToString()
    assert serializer(raw) is raw
    assert serializer(answer) == raw
