"""The client's sans-IO core: message ids, send requests and results, pull streams, routes,
offsets, admin dicts, error mapping and endpoint parsing. No sockets."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import re
import struct
import zlib

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from client import convert
from client.convert import (
    MessageIdGenerator,
    ProducerMessage,
    PullAssembler,
    PullStatus,
    SendStatus,
    broker_status_dict,
    build_pull_request,
    build_query_offset,
    build_send_request,
    committed_offset,
    proto_to_dict,
    queues_from_route,
    received_message,
    send_results,
)
from client.endpoint import Endpoint, parse_endpoint
from client.errors import (
    AuthenticationError,
    BrokerError,
    EndpointError,
    NotMasterError,
    PartialBatchError,
    ProtocolError,
    TransportError,
    from_rpc_error,
)
from support import run_threads
from wire.rpc import admin_pb2
from wire.rpc import messaging_pb2 as pb

HEX32 = re.compile(r"[0-9A-F]{32}")


# -- message ids -------------------------------------------------------------------------------


def test_message_ids_are_32_upper_hex_and_unique():
    gen = MessageIdGenerator()
    ids = [gen.next_id() for _ in range(50_000)]
    assert all(HEX32.fullmatch(i) for i in ids)
    assert len(set(ids)) == len(ids)


def test_message_ids_unique_across_threads():
    gen = MessageIdGenerator()
    per_thread: list[list[str]] = [[] for _ in range(4)]

    def make(bucket: list[str]):
        return lambda: bucket.extend(gen.next_id() for _ in range(10_000))

    run_threads([make(b) for b in per_thread], timeout_s=60)
    ids = [i for bucket in per_thread for i in bucket]
    assert len(ids) == 40_000 == len(set(ids))


def test_message_id_layout_host_pid_time_counter():
    host = bytes.fromhex("0A0B0C0D0E0F")
    gen = MessageIdGenerator(host_bytes=host, pid=0x12345, clock_s=lambda: 1_609_459_200 + 77.9)
    first, second = bytes.fromhex(gen.next_id()), bytes.fromhex(gen.next_id())
    assert first[:6] == host and second[:6] == host
    assert struct.unpack(">H", first[6:8]) == (0x2345,)
    assert struct.unpack(">II", first[8:]) == (77, 0)
    assert struct.unpack(">II", second[8:]) == (77, 1)


def test_generators_of_different_processes_differ_and_fork_resets():
    a, b = MessageIdGenerator(), MessageIdGenerator()
    assert a.next_id()[:12] != b.next_id()[:12]  # 48 random bits each
    before = convert._generator
    convert._reset_generator_after_fork()
    try:
        assert convert._generator is not before
        assert convert.new_message_id()[:12] != before.next_id()[:12]
    finally:
        convert._generator = before


def test_message_id_generator_rejects_wrong_host_bytes():
    with pytest.raises(ValueError):
        MessageIdGenerator(host_bytes=b"\x00" * 5)


# -- producer messages and send requests -------------------------------------------------------


def test_producer_message_normalises_and_validates():
    m = ProducerMessage("héllo", tag="TagA", keys="k1", properties={"a": "b"})
    assert m.body == "héllo".encode() and m.keys == ("k1",) and dict(m.properties) == {"a": "b"}
    assert ProducerMessage(bytearray(b"x"), keys=["a", "b"]).keys == ("a", "b")
    bad = [
        dict(body=b""),
        dict(body=b"x", tag="a|b"),
        dict(body=b"x", tag="  "),
        dict(body=b"x", keys=["has space"]),
        dict(body=b"x", keys=[""]),
        dict(body=b"x", properties={"": "v"}),
        dict(body=b"x", properties={"k": "v\x01"}),
        dict(body=b"x", message_group=""),
        dict(body=b"x", message_id="a b"),
        dict(body=b"x", message_id="x" * 129),
    ]
    for kwargs in bad:
        with pytest.raises(ValueError):
            ProducerMessage(**kwargs)
    for kwargs in (
        dict(body=42),
        dict(body=b"x", properties={"k": 1}),
        dict(body=b"x", keys=[1]),
        dict(body=b"x", properties=[("k", "v")]),
    ):
        with pytest.raises(TypeError):
            ProducerMessage(**kwargs)


def test_send_request_carries_ids_digest_queue_and_properties():
    messages = [
        ProducerMessage(b"one", tag="TagA", keys=("k1", "k2"), properties={"p": "v"}),
        ProducerMessage(b"two", message_group="g1", message_id="MY-ID"),
        b"three",
        "four",
    ]
    request, ids = build_send_request("Orders", messages, queue_id=3, born_ms=1_700_000_000_123, born_host="h1")
    assert len(request.messages) == 4 and len(ids) == 4
    assert ids[1] == "MY-ID" and all(HEX32.fullmatch(i) for i in (ids[0], ids[2], ids[3]))
    first, second = request.messages[0], request.messages[1]
    sp = first.system_properties
    assert first.topic.name == "Orders" and first.body == b"one"
    assert sp.tag == "TagA" and list(sp.keys) == ["k1", "k2"] and dict(first.user_properties) == {"p": "v"}
    assert sp.message_id == ids[0]
    assert sp.body_digest.type == pb.CRC32 and sp.body_digest.checksum == f"{zlib.crc32(b'one'):08X}"
    assert sp.body_encoding == pb.IDENTITY and sp.message_type == pb.NORMAL
    assert sp.born_timestamp.ToMilliseconds() == 1_700_000_000_123 and sp.born_host == "h1"
    assert sp.HasField("send_queue_id") and sp.send_queue_id == 3
    assert not sp.HasField("message_group")
    assert second.system_properties.message_group == "g1" and second.system_properties.message_type == pb.FIFO
    assert not second.system_properties.HasField("tag")
    assert request.messages[3].body == b"four"


def test_send_request_without_queue_leaves_send_queue_id_absent():
    request, _ = build_send_request("T", [b"x"], queue_id=None, born_ms=0)
    assert not request.messages[0].system_properties.HasField("send_queue_id")
    request, _ = build_send_request("T", [b"x"], queue_id=0, born_ms=0)
    assert request.messages[0].system_properties.HasField("send_queue_id")


def test_send_request_limits():
    with pytest.raises(ValueError, match="at least one"):
        build_send_request("T", [], queue_id=None, born_ms=0)
    with pytest.raises(ValueError, match="at most 1024"):
        build_send_request("T", [b"x"] * 1025, queue_id=None, born_ms=0)
    with pytest.raises(TypeError):
        build_send_request("T", [b"x"], queue_id=True, born_ms=0)
    with pytest.raises(ValueError):
        build_send_request("T", [b"x"], queue_id=-1, born_ms=0)
    with pytest.raises(ValueError):
        build_send_request(" ", [b"x"], queue_id=None, born_ms=0)
    with pytest.raises(TypeError):
        build_send_request(None, [b"x"], queue_id=None, born_ms=0)


def _entry(code: int, offset: int = 0, *, message: str = "", master: str = "", mid: str = "") -> pb.SendResultEntry:
    return pb.SendResultEntry(
        status=pb.Status(code=code, message=message, master_endpoint=master),
        message_id=mid,
        offset=offset,
        queue_id=2,
        commit_log_offset=1000 + offset,
    )


@pytest.mark.parametrize(
    "code,status",
    [
        (pb.OK, SendStatus.SEND_OK),
        (pb.MASTER_PERSISTENCE_TIMEOUT, SendStatus.FLUSH_DISK_TIMEOUT),
        (pb.SLAVE_PERSISTENCE_TIMEOUT, SendStatus.FLUSH_SLAVE_TIMEOUT),
        (pb.HA_NOT_AVAILABLE, SendStatus.SLAVE_NOT_AVAILABLE),
    ],
)
def test_send_codes_that_stored_the_message_are_results(code, status):
    response = pb.SendMessageResponse(status=pb.Status(code=code), entries=[_entry(code, 7, mid="BROKER-ID")])
    (result,) = send_results("Orders", response, ["CLIENT-ID"])
    assert result.status is status and result.ok == (status is SendStatus.SEND_OK)
    assert (result.msg_id, result.topic, result.queue_id, result.queue_offset, result.commit_log_offset) == (
        "BROKER-ID",
        "Orders",
        2,
        7,
        1007,
    )


def test_send_result_falls_back_to_the_client_id():
    response = pb.SendMessageResponse(status=pb.Status(code=pb.OK), entries=[_entry(pb.OK)])
    assert send_results("T", response, ["CLIENT-ID"])[0].msg_id == "CLIENT-ID"


def test_forbidden_with_master_endpoint_is_not_master():
    entry = _entry(pb.FORBIDDEN, message="broker-a (id 1) is a SLAVE", master="10.0.0.1:10911")
    response = pb.SendMessageResponse(status=entry.status, entries=[entry])
    with pytest.raises(NotMasterError) as info:
        send_results("T", response, ["ID"])
    assert info.value.master_endpoint == "10.0.0.1:10911" and info.value.code_name == "FORBIDDEN"
    assert "SLAVE" in str(info.value)
    plain = _entry(pb.FORBIDDEN, message="no")
    with pytest.raises(BrokerError) as info:
        send_results("T", pb.SendMessageResponse(status=plain.status, entries=[plain]), ["ID"])
    assert not isinstance(info.value, NotMasterError)


def test_mixed_batch_raises_partial_with_every_outcome():
    entries = [
        _entry(pb.OK, 0),
        _entry(pb.MESSAGE_BODY_TOO_LARGE, message="too big"),
        _entry(pb.MASTER_PERSISTENCE_TIMEOUT, 1),
    ]
    response = pb.SendMessageResponse(status=pb.Status(code=pb.MULTIPLE_RESULTS), entries=entries)
    with pytest.raises(PartialBatchError) as info:
        send_results("T", response, ["A", "B", "C"])
    err = info.value
    assert err.code_name == "MESSAGE_BODY_TOO_LARGE" and "2 of 3" in str(err)
    assert [type(o).__name__ for o in err.outcomes] == ["SendResult", "BrokerError", "SendResult"]
    assert err.outcomes[2].status is SendStatus.FLUSH_DISK_TIMEOUT


def test_all_refused_raises_the_first_refusal():
    entries = [_entry(pb.ILLEGAL_TOPIC, message="bad topic")] * 2
    response = pb.SendMessageResponse(status=pb.Status(code=pb.ILLEGAL_TOPIC), entries=entries)
    with pytest.raises(BrokerError, match="ILLEGAL_TOPIC: bad topic") as info:
        send_results("T", response, ["A", "B"])
    assert not isinstance(info.value, PartialBatchError)


def test_send_answers_that_break_the_contract():
    with pytest.raises(BrokerError, match="BAD_REQUEST"):
        send_results("T", pb.SendMessageResponse(status=pb.Status(code=pb.BAD_REQUEST, message="no messages")), ["A"])
    with pytest.raises(ProtocolError):
        send_results("T", pb.SendMessageResponse(status=pb.Status(code=pb.OK)), ["A"])
    with pytest.raises(ProtocolError, match="1 results for 2"):
        send_results("T", pb.SendMessageResponse(status=pb.Status(code=pb.OK), entries=[_entry(pb.OK)]), ["A", "B"])
    with pytest.raises(BrokerError, match="CODE_12345"):
        entry = _entry(12345)
        send_results("T", pb.SendMessageResponse(status=entry.status, entries=[entry]), ["A"])


# -- pulls -------------------------------------------------------------------------------------


def _pb_message(offset: int, body: bytes = b"body", *, digest: str | None = None, **sp_fields) -> pb.Message:
    sp = pb.SystemProperties(
        message_id=f"ID{offset}",
        body_encoding=pb.IDENTITY,
        queue_id=1,
        queue_offset=offset,
        born_host="client:1",
        store_host="10.0.0.1:10911",
        commit_log_offset=5000 + offset,
        reconsume_times=0,
        **sp_fields,
    )
    sp.body_digest.CopyFrom(
        pb.Digest(type=pb.CRC32, checksum=digest if digest is not None else f"{zlib.crc32(body):08X}")
    )
    sp.born_timestamp.FromMilliseconds(1_000)
    sp.store_timestamp.FromMilliseconds(2_000)
    return pb.Message(topic=pb.Resource(name="Orders"), user_properties={"u": "1"}, system_properties=sp, body=body)


def _stream(code: int, messages=(), next_offset: int | None = None) -> list[pb.PullMessageResponse]:
    out = [pb.PullMessageResponse(status=pb.Status(code=code))]
    out += [pb.PullMessageResponse(message=m) for m in messages]
    if next_offset is not None:
        out.append(pb.PullMessageResponse(next_offset=next_offset))
    return out


def _assemble(responses, offset: int = 0):
    assembler = PullAssembler(offset)
    for r in responses:
        assembler.feed(r)
    return assembler.result()


def test_pull_found():
    result = _assemble(_stream(pb.OK, [_pb_message(3, tag="TagA", keys=["k"]), _pb_message(4)], next_offset=9), 3)
    assert result.status is PullStatus.FOUND and result.next_offset == 9
    first = result.messages[0]
    assert (first.topic, first.queue_id, first.queue_offset, first.commit_log_offset, first.msg_id) == (
        "Orders",
        1,
        3,
        5003,
        "ID3",
    )
    assert (first.tag, first.keys, dict(first.properties)) == ("TagA", ("k",), {"u": "1"})
    assert (first.born_timestamp_ms, first.store_timestamp_ms, first.born_host, first.store_host) == (
        1000,
        2000,
        "client:1",
        "10.0.0.1:10911",
    )
    assert first.body == b"body" and first.size == 4 and first.body_crc_ok and first.reconsume_times == 0
    assert result.messages[1].tag is None


def test_pull_statuses():
    assert _assemble(_stream(pb.OK, [], 12), 5) == convert.PullResult(PullStatus.NO_MATCHED_MSG, [], 12)
    assert _assemble(_stream(pb.MESSAGE_NOT_FOUND, [], 5), 5).status is PullStatus.NO_NEW_MSG
    illegal = _assemble(_stream(pb.ILLEGAL_OFFSET, [], 42), 100)
    assert illegal.status is PullStatus.OFFSET_ILLEGAL and illegal.next_offset == 42
    with pytest.raises(BrokerError, match="TOPIC_NOT_FOUND"):
        _assemble(_stream(pb.TOPIC_NOT_FOUND))


def test_pull_next_offset_defaults():
    assert _assemble(_stream(pb.OK, [_pb_message(7), _pb_message(8)]), 7).next_offset == 9
    assert _assemble(_stream(pb.MESSAGE_NOT_FOUND), 7).next_offset == 7


def test_pull_streams_out_of_order_are_protocol_errors():
    with pytest.raises(ProtocolError):
        _assemble([pb.PullMessageResponse(message=_pb_message(0))])
    with pytest.raises(ProtocolError):
        _assemble([pb.PullMessageResponse(next_offset=3)])
    with pytest.raises(ProtocolError):
        _assemble(_stream(pb.OK) + _stream(pb.OK))
    with pytest.raises(ProtocolError):
        _assemble(_stream(pb.OK, [], 4) + [pb.PullMessageResponse(message=_pb_message(0))])
    with pytest.raises(ProtocolError, match="without a status"):
        _assemble([])


def test_received_message_digest_and_encoding():
    assert not received_message(_pb_message(0, b"abc", digest="00000000")).body_crc_ok
    assert not received_message(_pb_message(0, b"abc", digest="zz")).body_crc_ok
    no_digest = _pb_message(0, b"abc")
    no_digest.system_properties.ClearField("body_digest")
    assert received_message(no_digest).body_crc_ok
    md5 = _pb_message(0, b"abc")
    md5.system_properties.body_digest.CopyFrom(pb.Digest(type=pb.MD5, checksum="900150983CD24FB0D6963F7D28E17F72"))
    assert received_message(md5).body_crc_ok
    packed = gzip.compress(b"plain text")
    zipped = _pb_message(0, packed)
    zipped.system_properties.body_encoding = pb.GZIP
    got = received_message(zipped)
    assert got.body == b"plain text" and got.body_crc_ok


def test_received_message_reconsume_and_missing_extensions():
    m = _pb_message(0)
    sp = m.system_properties
    sp.ClearField("reconsume_times")
    sp.ClearField("commit_log_offset")
    sp.ClearField("store_timestamp")
    sp.delivery_attempt = 3
    got = received_message(m)
    assert (got.reconsume_times, got.commit_log_offset, got.store_timestamp_ms) == (2, -1, -1)


def test_pull_request_fields_and_validation():
    r = build_pull_request("G", "T", 2, 10, max_messages=16, tag_filter="A||B", long_polling_ms=1500)
    assert (r.group.name, r.message_queue.topic.name, r.message_queue.id, r.offset, r.batch_size) == (
        "G",
        "T",
        2,
        10,
        16,
    )
    assert r.filter_expression.type == pb.TAG and r.filter_expression.expression == "A||B"
    assert r.long_polling_timeout.ToMilliseconds() == 1500
    assert not build_pull_request("G", "T", 0, 0, max_messages=1, tag_filter=None, long_polling_ms=0).HasField(
        "filter_expression"
    )
    for kwargs in (dict(offset=-1), dict(max_messages=0), dict(max_messages=1025), dict(long_polling_ms=-5)):
        args = dict(offset=0, max_messages=1, long_polling_ms=0) | kwargs
        with pytest.raises(ValueError):
            build_pull_request(
                "G",
                "T",
                0,
                args["offset"],
                max_messages=args["max_messages"],
                tag_filter=None,
                long_polling_ms=args["long_polling_ms"],
            )
    with pytest.raises(TypeError):
        build_pull_request("G", "T", 0, 1.5, max_messages=1, tag_filter=None, long_polling_ms=0)
    with pytest.raises(ValueError):
        build_pull_request("", "T", 0, 0, max_messages=1, tag_filter=None, long_polling_ms=0)


# -- routes and offsets ------------------------------------------------------------------------


def test_queues_from_route():
    def queue(qid, perm, host, scheme=pb.IPv4):
        return pb.MessageQueue(
            topic=pb.Resource(name="T"),
            id=qid,
            permission=perm,
            broker=pb.Broker(
                name="broker-a",
                id=0,
                endpoints=pb.Endpoints(scheme=scheme, addresses=[pb.Address(host=host, port=10911)]),
            ),
        )

    response = pb.QueryRouteResponse(
        status=pb.Status(code=pb.OK),
        message_queues=[queue(1, pb.READ, "::1", pb.IPv6), queue(0, pb.READ_WRITE, "10.0.0.1")],
    )
    q0, q1 = queues_from_route("T", response)
    assert (q0.queue_id, q0.permission, q0.readable, q0.writable, q0.endpoint, q0.broker_name) == (
        0,
        "READ_WRITE",
        True,
        True,
        "10.0.0.1:10911",
        "broker-a",
    )
    assert (q1.queue_id, q1.readable, q1.writable, q1.endpoint) == (1, True, False, "[::1]:10911")
    write_only = queues_from_route(
        "T", pb.QueryRouteResponse(status=pb.Status(code=pb.OK), message_queues=[queue(2, pb.WRITE, "h")])
    )
    assert convert.readable_queue_ids([q1, q0, *write_only, q1]) == [0, 1]
    with pytest.raises(BrokerError, match="TOPIC_NOT_FOUND"):
        queues_from_route("T", pb.QueryRouteResponse(status=pb.Status(code=pb.TOPIC_NOT_FOUND)))


def test_offsets():
    assert committed_offset(pb.GetOffsetResponse(status=pb.Status(code=pb.OK), offset=17)) == 17
    assert committed_offset(pb.GetOffsetResponse(status=pb.Status(code=pb.OFFSET_NOT_FOUND))) is None
    with pytest.raises(BrokerError):
        committed_offset(pb.GetOffsetResponse(status=pb.Status(code=pb.ILLEGAL_CONSUMER_GROUP)))
    assert build_query_offset("T", 1, "beginning").query_offset_policy == pb.BEGINNING
    assert build_query_offset("T", 1, "END").query_offset_policy == pb.END
    by_ms = build_query_offset("T", 1, 1_700_000_000_000)
    assert by_ms.query_offset_policy == pb.TIMESTAMP and by_ms.timestamp.ToMilliseconds() == 1_700_000_000_000
    when = dt.datetime(2024, 1, 2, tzinfo=dt.timezone.utc)
    assert build_query_offset("T", 1, when).timestamp.ToMilliseconds() == int(when.timestamp() * 1000)
    with pytest.raises(ValueError):
        build_query_offset("T", 1, "LATEST")
    with pytest.raises(ValueError):
        build_query_offset("T", 1, dt.datetime(2024, 1, 2))
    with pytest.raises(ValueError):
        build_query_offset("T", 1, -1)
    with pytest.raises(TypeError):
        build_query_offset("T", 1, True)


# -- admin dicts -------------------------------------------------------------------------------


def test_broker_status_dict():
    status = admin_pb2.BrokerStatus(
        broker_name="broker-a",
        role="SYNC_MASTER",
        max_offset=2**40,
        stats_json=json.dumps({"puts": 3}),
        slaves=[admin_pb2.SlaveStatus(broker_id=1, client_endpoint="h:1", ack_offset=5, lag_seconds=1.5, fit=True)],
    )
    d = broker_status_dict(status)
    assert d["broker_name"] == "broker-a" and d["max_offset"] == 2**40 and d["flushed_offset"] == 0
    assert d["stats"] == {"puts": 3} and "stats_json" not in d
    assert d["slaves"] == [
        {
            "ha_peer": "",
            "broker_id": 1,
            "client_endpoint": "h:1",
            "ack_offset": 5,
            "lag_bytes": 0,
            "lag_seconds": 1.5,
            "fit": True,
            "connected_at_ms": 0,
            "silent_ms": 0,
        }
    ]
    assert broker_status_dict(admin_pb2.BrokerStatus(stats_json="{nope"))["stats"] is None
    view = proto_to_dict(admin_pb2.ClusterView(master=status))
    assert view["self"] is None and view["master"]["role"] == "SYNC_MASTER"
    route = proto_to_dict(
        pb.Message(user_properties={"a": "b"}, system_properties=pb.SystemProperties(message_type=pb.FIFO))
    )
    assert route["user_properties"] == {"a": "b"} and route["system_properties"]["message_type"] == "FIFO"


# -- gRPC errors -------------------------------------------------------------------------------


class _FakeRpcError(grpc.RpcError):
    def __init__(self, code, details=""):
        self._code, self._details = code, details

    def code(self):
        return self._code

    def details(self):
        return self._details


@pytest.mark.parametrize(
    "code,kind",
    [
        (grpc.StatusCode.UNAVAILABLE, TransportError),
        (grpc.StatusCode.DEADLINE_EXCEEDED, TransportError),
        (grpc.StatusCode.CANCELLED, TransportError),
        (grpc.StatusCode.UNAUTHENTICATED, AuthenticationError),
        (grpc.StatusCode.PERMISSION_DENIED, AuthenticationError),
        (grpc.StatusCode.FAILED_PRECONDITION, BrokerError),
        (grpc.StatusCode.INVALID_ARGUMENT, BrokerError),
        (grpc.StatusCode.UNIMPLEMENTED, BrokerError),
    ],
)
def test_rpc_errors_map_to_client_errors(code, kind):
    err = from_rpc_error(_FakeRpcError(code, "why"), "127.0.0.1:10911")
    assert type(err) is kind
    if kind is TransportError:
        assert "127.0.0.1:10911" in str(err) and code.name in str(err) and err.code == code.name
    if kind is BrokerError and code is not grpc.StatusCode.UNIMPLEMENTED:
        assert err.code_name == code.name and err.message == "why"


# -- endpoints ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,host,port,target",
    [
        ("127.0.0.1:10911", "127.0.0.1", 10911, "127.0.0.1:10911"),
        ("  broker-a.example.com:1 ", "broker-a.example.com", 1, "broker-a.example.com:1"),
        ("localhost:65535", "localhost", 65535, "localhost:65535"),
        ("[::1]:10911", "::1", 10911, "[::1]:10911"),
        ("[2001:DB8::0001]:80", "2001:db8::1", 80, "[2001:db8::1]:80"),
    ],
)
def test_parse_endpoint_valid(text, host, port, target):
    ep = parse_endpoint(text)
    assert (ep.host, ep.port, ep.target, str(ep)) == (host, port, target, target)


@pytest.mark.parametrize(
    "text,needle",
    [
        ("", "empty"),
        ("127.0.0.1", "no port"),
        ("127.0.0.1:", "no port"),
        (":10911", "no host"),
        ("host:port", "not a number"),
        ("host:0", "outside"),
        ("host:65536", "outside"),
        ("host:-1", "not a number"),
        ("::1:10911", "brackets"),
        ("[::1:10911", "without its"),
        ("::1]:10911", "without its"),
        ("[nothost]:1", "not an IPv6"),
        ("[::1]10911", "after"),
        ("999.1.1.1:1", "not an IPv4"),
        ("bad_host:1", "valid host name"),
        ("-bad:1", "valid host name"),
        ("http://h:1", "scheme"),
        ("h :1", "spaces"),
        ("h:1٣", "not a number"),
    ],
)
def test_parse_endpoint_garbage(text, needle):
    with pytest.raises(EndpointError, match=needle) as info:
        parse_endpoint(text)
    assert isinstance(info.value, ValueError)


def test_parse_endpoint_types_and_default_port():
    with pytest.raises(EndpointError):
        parse_endpoint(10911)
    assert parse_endpoint("h", default_port=9).port == 9
    assert parse_endpoint("[::1]", default_port=9).target == "[::1]:9"
    ep = Endpoint("h", 1)
    assert parse_endpoint(ep) is ep


@given(st.ip_addresses(), st.integers(1, 65535))
def test_endpoint_target_round_trips(address, port):
    ep = Endpoint(str(address), port)
    assert parse_endpoint(ep.target) == ep
    assert ep.is_ipv6 == (address.version == 6) and ep.is_ipv4 == (address.version == 4)


def test_digests_are_accepted_in_every_form_the_official_clients_send():
    from wire.digests import digest_matches, md5_hex

    body = b"abc"
    crc = zlib.crc32(body)
    assert digest_matches(pb.Digest(type=pb.CRC32, checksum=f"{crc:08X}"), body)  # Java, Python
    assert digest_matches(pb.Digest(type=pb.CRC32, checksum=str(crc)), body)  # Node.js
    assert not digest_matches(pb.Digest(type=pb.CRC32, checksum=str(crc + 1)), body)
    assert digest_matches(pb.Digest(type=pb.MD5, checksum=md5_hex(body)), body)
    assert md5_hex(body) == "900150983CD24FB0D6963F7D28E17F72"
