"""Store statuses as client API codes (rocketstore/broker/codes.py), with the store's own reason
texts, and the pure conversions of the messaging servicer."""

from __future__ import annotations

import dataclasses
import hashlib
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketstore.broker import codes, remoting_codes
from rocketstore.broker.core.pull import PullAction
from rocketstore.broker.core.refusals import Reason, Refusal
from rocketstore.broker.core.routes import Route, RouteBroker
from rocketstore.broker.core.send import Planned, PutOutcomes, SendOutcome
from rocketstore.broker.remoting_routes import topic_route_data
from rocketstore.broker.v2_messages import (
    _WHITESPACE,
    _bad_message_id,
    _message_keys,
    encoding_problem,
    endpoints_of,
    group_message_queues,
    message_properties,
    peer_host,
    route_message_queues,
    send_entry,
    send_response,
    settings_reply,
    to_pb_message,
)
from store import Message, MessageExt, PutMessageResult, PutMessageStatus
from store.log.codec import (
    MAX_PROPERTIES_LENGTH,
    MessageRejected,
    encode_batch,
    encode_message,
    encode_properties,
    make_msg_id,
)
from store.message import MAX_BORN_TIMESTAMP_MS, MIN_BORN_TIMESTAMP_MS
from store.metadata.topic_config import TopicConfig
from store.schedule import to_schedule_message
from wire.rpc import messaging_pb2 as pb

P = PutMessageStatus


def test_every_put_status_maps_to_a_code_and_a_text():
    for put_status in PutMessageStatus:
        code = codes.put_code(put_status)
        assert code in pb.Code.values(), put_status
        assert put_status.name in codes.put_text(put_status)
    assert set(codes.PUT_CODES) == set(PutMessageStatus)


@pytest.mark.parametrize(
    ("put_status", "code"),
    [
        (P.PUT_OK, pb.OK),
        (P.FLUSH_DISK_TIMEOUT, pb.MASTER_PERSISTENCE_TIMEOUT),
        (P.FLUSH_SLAVE_TIMEOUT, pb.SLAVE_PERSISTENCE_TIMEOUT),
        (P.SLAVE_NOT_AVAILABLE, pb.HA_NOT_AVAILABLE),
        (P.IN_SYNC_REPLICAS_NOT_ENOUGH, pb.HA_NOT_AVAILABLE),
        (P.MESSAGE_ILLEGAL, pb.BAD_REQUEST),
        (P.PROPERTIES_SIZE_EXCEEDED, pb.MESSAGE_PROPERTIES_TOO_LARGE),
        (P.SERVICE_NOT_AVAILABLE, pb.INTERNAL_SERVER_ERROR),
        (P.OS_PAGE_CACHE_BUSY, pb.TOO_MANY_REQUESTS),
        (P.CREATE_MAPPED_FILE_FAILED, pb.INTERNAL_ERROR),
        (P.UNKNOWN_ERROR, pb.INTERNAL_ERROR),
    ],
)
def test_put_codes(put_status, code):
    assert codes.put_code(put_status) == code


def test_stored_statuses_are_exactly_the_stored_codes():
    for put_status in PutMessageStatus:
        assert (codes.put_code(put_status) in codes.STORED_CODES) == put_status.is_stored, put_status


def _rejection(build) -> MessageRejected:
    with pytest.raises(MessageRejected) as info:
        build()
    return info.value


def _encode(msg: Message, limit: int = 4096):
    return encode_message(msg, default_store_host=("127.0.0.1", 10911), max_message_size=limit, now_ms=0)


def test_illegal_message_reasons_from_the_store_map_to_precise_codes():
    cases = [
        (lambda: _encode(Message("bad topic!", 0, b"x")), pb.ILLEGAL_TOPIC),
        (lambda: _encode(Message("", 0, b"x")), pb.ILLEGAL_TOPIC),
        (lambda: _encode(Message("t" * 200, 0, b"x")), pb.ILLEGAL_TOPIC),
        (lambda: _encode(Message("T", 0, b"x" * 5000)), pb.MESSAGE_BODY_TOO_LARGE),
        (
            lambda: encode_batch(
                [Message("T", 0, b"x" * 3000)] * 2,
                default_store_host=("127.0.0.1", 1),
                max_message_size=4096,
                now_ms=0,
            ),
            pb.MESSAGE_BODY_TOO_LARGE,
        ),
        (lambda: to_schedule_message(Message("T", 0, b"x", {"DELAY": "soon"}), (1000,)), pb.ILLEGAL_DELIVERY_TIME),
        (lambda: _encode(Message("T", -1, b"x")), pb.BAD_REQUEST),
        (lambda: _encode(Message("T", 0, b"x", {"k\x01": "v"})), pb.BAD_REQUEST),
        (lambda: _encode(Message("T", 0, b"x", born_timestamp_ms=10**16)), pb.BAD_REQUEST),
    ]
    for build, code in cases:
        rejected = _rejection(build)
        assert rejected.status is P.MESSAGE_ILLEGAL
        assert codes.put_code(rejected.status, rejected.reason) == code, rejected.reason


def test_properties_too_large_from_the_store():
    rejected = _rejection(lambda: _encode(Message("T", 0, b"x", {"k": "v" * 40000}), limit=1 << 20))
    assert codes.put_code(rejected.status, rejected.reason) == pb.MESSAGE_PROPERTIES_TOO_LARGE


def test_topic_admission_and_service_reasons():
    assert (
        codes.put_code(P.MESSAGE_ILLEGAL, "topic T does not exist and autoCreateTopicEnable is false")
        == pb.TOPIC_NOT_FOUND
    )
    assert codes.put_code(P.MESSAGE_ILLEGAL, "topic T is not writable (perm 4)") == pb.FORBIDDEN
    assert codes.put_code(P.MESSAGE_ILLEGAL, "the message at 12 is not prepared") == pb.INVALID_TRANSACTION_ID
    assert codes.put_code(P.SERVICE_NOT_AVAILABLE, "a slave does not accept puts") == pb.FORBIDDEN
    assert codes.put_code(P.SERVICE_NOT_AVAILABLE, "the disk is full") == pb.INTERNAL_SERVER_ERROR


def test_put_status_keeps_the_reason():
    result = PutMessageResult(P.SERVICE_NOT_AVAILABLE, reason="the disk is full")
    st = codes.put_status(result)
    assert st.code == pb.INTERNAL_SERVER_ERROR
    assert "the disk is full" in st.message
    timeout = codes.put_status(PutMessageResult(P.FLUSH_DISK_TIMEOUT, wrote_offset=0, wrote_bytes=10))
    assert timeout.code == pb.MASTER_PERSISTENCE_TIMEOUT and "stored" in timeout.message


def test_summarize():
    ok = pb.Status(code=pb.OK)
    slow = pb.Status(code=pb.SLAVE_PERSISTENCE_TIMEOUT, message="late")
    assert codes.summarize([ok, ok]).code == pb.OK
    shared = codes.summarize([slow, slow])
    assert (shared.code, shared.message) == (pb.SLAVE_PERSISTENCE_TIMEOUT, "late")
    mixed = codes.summarize([ok, slow])
    assert mixed.code == pb.MULTIPLE_RESULTS and "SLAVE_PERSISTENCE_TIMEOUT x1" in mixed.message
    assert codes.summarize([]).code == pb.BAD_REQUEST


def test_every_pull_action_and_refusal_has_a_code_in_both_front_ends():
    assert set(codes.PULL_CODES) == set(PullAction) == set(remoting_codes.PULL_RESPONSE)
    assert {codes.PULL_CODES[a] for a in PullAction} == {
        pb.OK,
        pb.MESSAGE_NOT_FOUND,
        pb.ILLEGAL_OFFSET,
        pb.MESSAGE_CORRUPTED,
    }
    assert set(codes.REASON_CODES) == set(Reason) == set(remoting_codes.REASON_CODES)
    assert set(remoting_codes.SEND_REASON_CODES) == set(Reason)
    assert set(remoting_codes.PUT_RESPONSE) == set(PutMessageStatus)


def test_a_refusal_names_the_master_in_its_status():
    refused = codes.refusal_status(Refusal(Reason.NOT_MASTER, "not master: go there", "10.0.0.1:8081"))
    assert (refused.code, refused.message, refused.master_endpoint) == (
        pb.FORBIDDEN,
        "not master: go there",
        "10.0.0.1:8081",
    )


# -- conversions ---------------------------------------------------------------------------------


def test_endpoints_schemes():
    v4 = endpoints_of("10.0.0.1:8081")
    assert v4.scheme == pb.IPv4 and (v4.addresses[0].host, v4.addresses[0].port) == ("10.0.0.1", 8081)
    v6 = endpoints_of("[::1]:8081")
    assert v6.scheme == pb.IPv6 and v6.addresses[0].host == "::1"
    assert endpoints_of("broker-a.example:8081").scheme == pb.DOMAIN_NAME
    assert not endpoints_of("nonsense").addresses


def test_official_clients_get_each_group_once_at_id_0_and_ours_every_broker():
    config = TopicConfig("T", 2, 2)
    brokers = [
        ("a", 0, "10.0.0.1:1", False),
        ("a", 1, "10.0.0.2:1", True),
        ("a", 2, "10.0.0.3:1", True),
        ("b", 0, "10.0.1.2:1", True),  # a slave standing in for its master: read-only
        ("c", 1, "10.0.2.2:1", True),  # electing a master: no broker at id 0
    ]
    route = Route("T", tuple(RouteBroker(n, i, e, config, ro) for n, i, e, ro in brokers), True)
    queues = group_message_queues(pb.Resource(name="T"), route.groups())
    named = {(q.broker.name, q.broker.id, q.permission, q.broker.endpoints.addresses[0].host) for q in queues}
    assert named == {("a", 0, pb.READ_WRITE, "10.0.0.1"), ("b", 0, pb.READ, "10.0.1.2")}
    assert [q.id for q in queues] == [0, 1, 0, 1]
    replicas = route_message_queues(pb.Resource(name="T"), route.brokers)
    assert {(q.broker.name, q.broker.id) for q in replicas} == {(n, i) for n, i, _, _ in brokers}


def route_of(*brokers: tuple[str, int, str, bool]) -> Route:
    config = TopicConfig("T", 2, 2)
    return Route(
        "T", tuple(RouteBroker(name, i, e, config, ro, e.replace(":1", ":3")) for name, i, e, ro in brokers), True
    )


def test_a_remoting_route_names_every_group_and_its_brokers_by_id():
    route = route_of(
        ("a", 0, "10.0.0.1:1", False),
        ("a", 1, "10.0.0.2:1", True),
        ("b", 0, "10.0.1.1:1", True),  # a slave standing in for its master: read-only
        ("c", 1, "10.0.2.2:1", True),  # electing a master: its slave still serves reads
    )
    # This broker (10.0.0.2:1) names itself by its own remoting endpoint.
    data = topic_route_data(route, "C", "10.0.0.2:1", "10.0.0.2:9")
    assert data["brokerDatas"] == [
        {"cluster": "C", "brokerName": "a", "brokerAddrs": {"0": "10.0.0.1:3", "1": "10.0.0.2:9"}},
        {"cluster": "C", "brokerName": "b", "brokerAddrs": {"0": "10.0.1.1:3"}},
        {"cluster": "C", "brokerName": "c", "brokerAddrs": {"1": "10.0.2.2:3"}},
    ]
    assert [(q["brokerName"], q["perm"], q["writeQueueNums"]) for q in data["queueDatas"]] == [
        ("a", 6, 2),
        ("b", 4, 2),
        ("c", 4, 2),
    ]
    # A group no broker of which has a remoting endpoint known is left out.
    bare = Route("T", (RouteBroker("d", 0, "10.0.3.1:1", TopicConfig("T", 2, 2), False),), True)
    assert topic_route_data(bare, "C", "x:1", "x:9")["brokerDatas"] == []


def test_peer_host():
    assert peer_host("ipv4:127.0.0.1:5000") == ("127.0.0.1", 5000)
    assert peer_host("ipv6:[::1]:5000") == ("::1", 5000)
    assert peer_host("unix:/tmp/sock") is None
    assert peer_host("ipv4:not-an-ip:1") is None


def test_message_properties_mapping_and_refusals():
    max_delay = 10_000
    msg = pb.Message(
        topic=pb.Resource(name="T"),
        user_properties={"a": "1"},
        system_properties=pb.SystemProperties(tag="TagA", keys=["k1", "k2"], message_id="ID1", message_group="g"),
        body=b"x",
    )
    msg.system_properties.delivery_timestamp.FromMilliseconds(1_000 + 4_000)
    props = message_properties(msg, max_delay, now_ms=1_000)
    assert props == {
        "a": "1",
        "TAGS": "TagA",
        "KEYS": "k1 k2",
        "UNIQ_KEY": "ID1",
        "__SHARDINGKEY": "g",
        "TIMER_DELIVER_MS": "5000",
    }
    past = pb.Message(topic=pb.Resource(name="T"), body=b"x")
    past.system_properties.delivery_timestamp.FromMilliseconds(500)
    assert message_properties(past, max_delay, now_ms=1_000) == {}  # due already: delivered now

    def refused(**fields) -> int:
        m = pb.Message(topic=pb.Resource(name="T"), body=b"x", **fields)
        outcome = message_properties(m, max_delay, now_ms=0)
        assert isinstance(outcome, Refusal)
        return codes.REASON_CODES[outcome.reason]

    assert refused(user_properties={"TAGS": "x"}) == pb.ILLEGAL_MESSAGE_PROPERTY_KEY
    assert refused(user_properties={"TIMER_DELIVER_MS": "1"}) == pb.ILLEGAL_MESSAGE_PROPERTY_KEY
    assert refused(user_properties={"k": "a\x01b"}) == pb.ILLEGAL_MESSAGE_PROPERTY_KEY
    assert refused(system_properties=pb.SystemProperties(tag="a||b")) == pb.ILLEGAL_MESSAGE_TAG
    assert refused(system_properties=pb.SystemProperties(keys=["has space"])) == pb.ILLEGAL_MESSAGE_KEY
    assert refused(system_properties=pb.SystemProperties(message_group=" ")) == pb.ILLEGAL_MESSAGE_GROUP
    assert refused(system_properties=pb.SystemProperties(message_id="x" * 200)) == pb.ILLEGAL_MESSAGE_ID
    assert refused(user_properties={"big": "v" * 40000}) == pb.MESSAGE_PROPERTIES_TOO_LARGE
    far = pb.SystemProperties()
    far.delivery_timestamp.FromMilliseconds(max_delay + 1)
    assert refused(system_properties=far) == pb.ILLEGAL_DELIVERY_TIME


@given(
    st.integers(MAX_PROPERTIES_LENGTH // 4 - 20, MAX_PROPERTIES_LENGTH + 4),
    st.sampled_from(["v", "\u00e9", "\u20ac", "\U0001f600"]),
)
def test_properties_are_refused_exactly_when_their_encoding_passes_the_limit(length, char):
    """Only properties that may pass the limit are encoded to be measured: the refusal is still
    exactly where the encoding's bytes pass it, for characters of 1 to 4 bytes of UTF-8."""
    value = char * (length // len(char.encode()))
    msg = pb.Message(topic=pb.Resource(name="T"), body=b"x", user_properties={"big": value})
    found = message_properties(msg, 10_000, now_ms=0)
    too_large = len(encode_properties({"big": value})) > MAX_PROPERTIES_LENGTH
    assert isinstance(found, Refusal) == too_large
    if too_large:
        assert isinstance(found, Refusal) and found.reason is Reason.PROPERTIES_TOO_LARGE
    else:
        assert found == {"big": value}


def test_a_body_is_refused_for_an_unknown_encoding_or_a_digest_it_does_not_match():
    def problem(body: bytes = b"body", **sp) -> Reason | None:
        refusal = encoding_problem(pb.Message(topic=pb.Resource(name="T"), body=body, system_properties=sp))
        return None if refusal is None else refusal.reason

    good = pb.Digest(type=pb.CRC32, checksum=f"{zlib.crc32(b'body'):08X}")
    assert problem() is None and problem(body_digest=good) is None and problem(body_digest=pb.Digest()) is None
    assert problem(b"other", body_digest=good) is Reason.MESSAGE_CORRUPTED
    assert problem(body_encoding=pb.GZIP) is None and problem(body_encoding=99) is Reason.BAD_REQUEST


def test_a_message_id_or_key_is_refused_for_exactly_the_characters_str_isspace_names():
    """Ids and keys are scanned with one regular expression: its \\s is `str.isspace`, every
    code point checked."""
    spaces = [chr(c) for c in range(0x110000) if chr(c).isspace()]
    not_spaces = "x\u200b\ufeff"  # a zero-width space and a BOM are not spaces
    assert [c for c in map(chr, range(0x110000)) if _WHITESPACE.search(c)] == spaces
    for c in spaces:
        assert _bad_message_id(f"id{c}1") and _message_keys(pb.SystemProperties(keys=[f"k{c}"]), {}) is not None
    for c in not_spaces:
        assert not _bad_message_id(f"id{c}1") and _message_keys(pb.SystemProperties(keys=[f"k{c}"]), {}) is None


def test_stored_message_to_v2():
    ext = MessageExt(
        topic="T",
        queue_id=2,
        body=b"hello",
        properties={"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "ID1", "__SHARDINGKEY": "g", "user": "u"},
        flag=7,
        sys_flag=0,
        born_host=("10.0.0.2", 4000),
        store_host=("::1", 10911),
        born_timestamp_ms=1_700_000_000_123,
        store_timestamp_ms=1_700_000_000_456,
        reconsume_times=2,
        prepared_transaction_offset=0,
        queue_offset=41,
        physical_offset=9000,
        store_size=120,
        body_crc=0,
        msg_id="00",
    )
    m = to_pb_message(ext, "ns")
    sp = m.system_properties
    assert (m.topic.resource_namespace, m.topic.name, m.body) == ("ns", "T", b"hello")
    assert dict(m.user_properties) == {"user": "u"}
    assert (sp.tag, list(sp.keys), sp.message_id, sp.message_group) == ("TagA", ["k1", "k2"], "ID1", "g")
    assert sp.body_digest.type == pb.MD5 and sp.body_digest.checksum == hashlib.md5(b"hello").hexdigest().upper()
    assert sp.body_encoding == pb.IDENTITY and sp.message_type == pb.FIFO
    assert sp.born_timestamp.ToMilliseconds() == 1_700_000_000_123
    assert sp.store_timestamp.ToMilliseconds() == 1_700_000_000_456
    assert (sp.born_host, sp.store_host) == ("10.0.0.2:4000", "[::1]:10911")
    assert (sp.queue_id, sp.queue_offset, sp.delivery_attempt) == (2, 41, 3)
    assert (sp.commit_log_offset, sp.sys_flag, sp.reconsume_times, sp.flag) == (9000, 0, 2, 7)


def test_a_timed_message_is_served_with_its_delivery_time_and_others_without_one():
    """Issue 32 item 5: a received delayed or timed message carried no delivery_timestamp."""
    ext = MessageExt("T", 0, b"x", {}, 0, 0, ("10.0.0.2", 1), ("10.0.0.1", 2), 1_000, 2_000, 0, 0, 0, 0, 90, 0, "")
    timed = dataclasses.replace(ext, properties={"TIMER_DELIVER_MS": "1700000000123", "REAL_TOPIC": "T"})
    sp = to_pb_message(timed).system_properties
    assert sp.message_type == pb.DELAY and sp.delivery_timestamp.ToMilliseconds() == 1_700_000_000_123
    assert not to_pb_message(ext).system_properties.HasField("delivery_timestamp")
    damaged = dataclasses.replace(ext, properties={"TIMER_DELIVER_MS": "soon"})
    assert not to_pb_message(damaged).system_properties.HasField("delivery_timestamp")


def test_a_stored_time_beyond_what_a_timestamp_holds_is_served_clamped():
    """Issue 30: a born time past the year 9999 (stored before the store refused one) made every
    read of its queue fail (`Timestamp is not valid`). It is served clamped into the range."""
    ext = MessageExt("T", 0, b"x", {}, 0, 0, ("10.0.0.2", 1), ("10.0.0.1", 2), 10**16, 2**63 - 1, 0, 0, 0, 0, 90, 0, "")
    sp = to_pb_message(ext).system_properties
    assert sp.born_timestamp.ToMilliseconds() == MAX_BORN_TIMESTAMP_MS
    assert sp.store_timestamp.ToMilliseconds() == MAX_BORN_TIMESTAMP_MS
    early = to_pb_message(dataclasses.replace(ext, born_timestamp_ms=-(2**63), store_timestamp_ms=-1))
    assert early.system_properties.born_timestamp.ToMilliseconds() == MIN_BORN_TIMESTAMP_MS
    assert early.system_properties.store_timestamp.ToMilliseconds() == -1


def test_settings_reply_for_producer_and_consumer():
    producer = pb.Settings(client_type=pb.PRODUCER, publishing=pb.Publishing(topics=[pb.Resource(name="T")]))
    reply = settings_reply(producer, max_body_size=4096, long_polling_ms=20_000, max_attempts=17, retry_delays_ms=[])
    assert reply.client_type == pb.PRODUCER and reply.publishing.max_body_size == 4096
    assert [t.name for t in reply.publishing.topics] == ["T"]
    assert not reply.metric.on and reply.backoff_policy.max_attempts > 0
    consumer = pb.Settings(client_type=pb.PUSH_CONSUMER, subscription=pb.Subscription(group=pb.Resource(name="G")))
    reply = settings_reply(
        consumer, max_body_size=4096, long_polling_ms=20_000, max_attempts=17, retry_delays_ms=[10_000, 1500, 60_000]
    )
    assert reply.subscription.long_polling_timeout.ToMilliseconds() == 20_000
    assert reply.subscription.HasField("fifo") and not reply.subscription.fifo
    assert reply.subscription.group.name == "G"
    # RocketMQ's schedule as whole seconds (the official clients read the seconds only).
    assert reply.backoff_policy.max_attempts == 17
    assert [d.seconds for d in reply.backoff_policy.customized_backoff.next] == [10, 1, 60]
    fifo = settings_reply(
        consumer, max_body_size=1, long_polling_ms=1, max_attempts=1, retry_delays_ms=[], fifo_groups=frozenset({"G"})
    )
    assert fifo.subscription.fifo


@given(
    st.sampled_from([s for s in PutMessageStatus if s.is_stored]),
    st.sampled_from(["", "the slave did not answer"]),
    st.lists(st.tuples(st.sampled_from(["", "C1", "C2"]), st.booleans(), st.integers(0, 7)), min_size=1, max_size=6),
    st.integers(0, 3),
    st.integers(0, 2**40),
    st.sampled_from([("10.0.0.1", 10911), ("::1", 10911)]),
)
def test_a_puts_answer_made_from_its_result_is_the_answer_made_outcome_by_outcome(
    status, reason, messages, first, wrote_offset, host
):
    """`send_response` of a `PutOutcomes` (from the put's result) equals the entries `send_entry`
    makes of each outcome and the status `codes.summarize` makes of them."""
    planned = [
        Planned(i, Message("T", queue_id, b"x"), client_id, transactional)
        for i, (client_id, transactional, queue_id) in enumerate(messages)
    ]
    count = first + len(planned)
    offsets = [wrote_offset + 100 * i for i in range(count)]
    ids = tuple(make_msg_id(host, offset) for offset in offsets)
    result = PutMessageResult(status, wrote_offset, 100 * count, 5, ",".join(ids), ids, count, reason=reason)
    outcomes = PutOutcomes(planned, result, first)
    entries = [send_entry(outcome) for outcome in outcomes]
    expected = pb.SendMessageResponse(status=codes.summarize(e.status for e in entries), entries=entries)
    assert send_response(outcomes) == expected
    assert send_response(list(outcomes)) == expected


def _entry_as_built_by_fields(outcome: SendOutcome) -> pb.SendResultEntry:
    """A result entry as the API defines it, field by field (the reference for `send_response`)."""
    entry_status = codes.outcome_status(outcome)
    if not outcome.stored:
        return pb.SendResultEntry(status=entry_status, message_id=outcome.client_id or outcome.msg_id)
    return pb.SendResultEntry(
        status=entry_status,
        message_id=outcome.client_id or outcome.msg_id,
        transaction_id=outcome.msg_id if outcome.transactional else "",
        offset=outcome.queue_offset,
        queue_id=outcome.queue_id,
        commit_log_offset=outcome.commit_log_offset(),
    )


_OUTCOMES = st.one_of(
    st.builds(
        SendOutcome,
        refusal=st.sampled_from(
            [Refusal(Reason.NOT_MASTER, "not the master"), Refusal(Reason.BODY_TOO_LARGE, "too large")]
        ),
        client_id=st.sampled_from(["", "C1"]),
    ),
    st.builds(
        SendOutcome,
        status=st.sampled_from(list(PutMessageStatus)),
        reason=st.sampled_from(["", "the slave did not answer"]),
        client_id=st.sampled_from(["", "C1", "C2"]),
        msg_id=st.sampled_from(["", make_msg_id(("10.0.0.1", 10911), 4096), "not-an-id"]),
        queue_id=st.integers(-1, 7),
        queue_offset=st.integers(-1, 2**40),
        wrote_offset=st.integers(-1, 2**40),
        transactional=st.booleans(),
    ),
)


@given(st.lists(_OUTCOMES, min_size=1, max_size=5))
def test_a_send_response_is_its_entries_made_field_by_field_and_their_summary(outcomes):
    """`send_response` (entries written in place) answers the bytes of the entries made field by
    field and the status `codes.summarize` makes of them, for any mix of refused, failed and
    stored outcomes."""
    entries = [_entry_as_built_by_fields(outcome) for outcome in outcomes]
    expected = pb.SendMessageResponse(status=codes.summarize(e.status for e in entries), entries=entries)
    response = send_response(outcomes)
    assert response == expected
    assert response.SerializeToString(deterministic=True) == expected.SerializeToString(deterministic=True)
    assert [send_entry(outcome) for outcome in outcomes] == entries
