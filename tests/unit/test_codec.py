"""CommitLog message codec (store/codec.py, store/message.py) against docs/design.md §3."""

from __future__ import annotations

import dataclasses
import ipaddress
import string
import struct
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from store.log import codec
from store.log.codec import CorruptMessage, DamagedMessage, MessageRejected, RecordKind
from store.message import (
    COMPRESSED_FLAG,
    MAX_BORN_TIMESTAMP_MS,
    MIN_BORN_TIMESTAMP_MS,
    MULTI_TAGS_FLAG,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    Message,
)
from store.status import PutMessageStatus

ILLEGAL = PutMessageStatus.MESSAGE_ILLEGAL
STORE_HOST = ("10.0.6.82", 8123)
MAX_SIZE = 4 * 1024 * 1024
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
BORN_MS = st.integers(MIN_BORN_TIMESTAMP_MS, MAX_BORN_TIMESTAMP_MS)
OFFSETS = st.integers(0, 2**62)


def encode(msg: Message, *, store_host=STORE_HOST, max_size: int = MAX_SIZE, now_ms: int = 1_700_000_000_000):
    return codec.encode_message(msg, default_store_host=store_host, max_message_size=max_size, now_ms=now_ms)


def encode_batch(batch, *, max_size: int = MAX_SIZE, now_ms: int = 1_700_000_000_000):
    return codec.encode_batch(batch, default_store_host=STORE_HOST, max_message_size=max_size, now_ms=now_ms)


def stamped(
    msg: Message, physical_offset: int = 0, queue_offset: int = 0, store_ts: int = 1_700_000_000_123
) -> bytearray:
    encoded = encode(msg)
    encoded.stamp(physical_offset=physical_offset, queue_offset=queue_offset, store_timestamp_ms=store_ts)
    return encoded.buf


def same_host(a, b) -> bool:
    # inet_ntop may spell an IPv6 address differently from the input; the address is what counts.
    return ipaddress.ip_address(a[0]) == ipaddress.ip_address(b[0]) and a[1] == b[1]


# ---------------------------------------------------------------------------------------------
# Strategies

topics = st.text(string.ascii_letters + string.digits + "%|_-", min_size=1, max_size=127)
prop_text = st.text(st.characters(codec="utf-8", exclude_characters="\x01\x02"), max_size=16)
properties = st.dictionaries(prop_text.filter(bool), prop_text, max_size=4)
hosts = st.tuples(st.ip_addresses().map(str), st.integers(0, 65535))


@st.composite
def messages(draw, topic=topics, queue_id=st.integers(0, 2**31 - 1), sys_flag=INT32):  # noqa: B008 - strategies are values
    return Message(
        topic=draw(topic),
        queue_id=draw(queue_id),
        body=draw(st.binary(max_size=300)),
        properties=draw(properties),
        flag=draw(INT32),
        sys_flag=draw(sys_flag),
        born_host=draw(hosts),
        store_host=draw(st.none() | hosts),
        born_timestamp_ms=draw(st.none() | BORN_MS),
        reconsume_times=draw(INT32),
        prepared_transaction_offset=draw(INT64),
    )


# ---------------------------------------------------------------------------------------------
# Reference encoder, written from docs/design.md §3 alone


def reference_encode(
    msg: Message, *, store_host, born_ts: int, store_ts: int, queue_offset: int, physical_offset: int
) -> bytes:
    born_addr = ipaddress.ip_address(msg.born_host[0]).packed
    store_addr = ipaddress.ip_address(store_host[0]).packed
    sys_flag = msg.sys_flag & ~(0x10 | 0x20)
    if len(born_addr) == 16:
        sys_flag |= 0x10
    if len(store_addr) == 16:
        sys_flag |= 0x20
    props = "".join(f"{k}\x01{v}\x02" for k, v in msg.properties.items()).encode("utf-8")
    topic = msg.topic.encode("utf-8")
    rest = b"".join(
        (
            struct.pack(">i", -626843481),
            struct.pack(">i", zlib.crc32(msg.body) & 0x7FFFFFFF),
            struct.pack(">ii", msg.queue_id, msg.flag),
            struct.pack(">qq", queue_offset, physical_offset),
            struct.pack(">iq", sys_flag, born_ts),
            born_addr + struct.pack(">i", msg.born_host[1]),
            struct.pack(">q", store_ts),
            store_addr + struct.pack(">i", store_host[1]),
            struct.pack(">iq", msg.reconsume_times, msg.prepared_transaction_offset),
            struct.pack(">i", len(msg.body)) + msg.body,
            struct.pack(">B", len(topic)) + topic,
            struct.pack(">h", len(props)) + props,
        )
    )
    return struct.pack(">i", 4 + len(rest)) + rest


# ---------------------------------------------------------------------------------------------
# The seed vector


SEED = Message(topic="FooBar", queue_id=0, body=b"Once, there was a chance for me!")


def test_seed_vector():
    encoded = encode(SEED)
    encoded.stamp(physical_offset=0, queue_offset=0, store_timestamp_ms=1_700_000_000_123)

    assert encoded.size == len(encoded.buf) == 129
    assert struct.unpack_from(">i", encoded.buf, 8)[0] == 151131488
    assert encoded.msg_ids(0) == ["0A00065200001FBB0000000000000000"]
    assert codec.make_msg_id(STORE_HOST, 0) == "0A00065200001FBB0000000000000000"


def test_seed_vector_decodes():
    msg = codec.decode_message(stamped(SEED, store_ts=42), 0)

    assert (msg.topic, msg.queue_id, msg.body) == ("FooBar", 0, SEED.body)
    assert msg.store_host == STORE_HOST
    assert msg.born_timestamp_ms == 1_700_000_000_000  # now_ms stands in for a missing born time
    assert msg.store_timestamp_ms == 42
    assert msg.store_size == 129
    assert msg.body_crc == 151131488
    assert msg.msg_id == "0A00065200001FBB0000000000000000"


def test_encoded_message_metadata():
    encoded = encode(Message(topic="T", queue_id=3, body=b"x", sys_flag=TRANSACTION_PREPARED_TYPE | COMPRESSED_FLAG))

    assert encoded.count == 1
    assert encoded.queue_key == "T-3"
    assert encoded.transaction_type == TRANSACTION_PREPARED_TYPE


def test_tags_and_keys_read_from_properties():
    msg = Message(topic="T", queue_id=0, body=b"", properties={"TAGS": "TagA", "KEYS": "k1 k2"})

    decoded = codec.decode_message(stamped(msg), 0)

    assert (msg.tags, msg.keys) == ("TagA", "k1 k2")
    assert (decoded.tags, decoded.keys) == ("TagA", "k1 k2")
    assert Message(topic="T", queue_id=0, body=b"").tags is None


# ---------------------------------------------------------------------------------------------
# Round trips


@given(msg=messages(), physical_offset=OFFSETS, queue_offset=OFFSETS, store_ts=INT64)
def test_round_trip(msg, physical_offset, queue_offset, store_ts):
    now_ms = 1_234_567
    encoded = encode(msg, now_ms=now_ms)
    encoded.stamp(physical_offset=physical_offset, queue_offset=queue_offset, store_timestamp_ms=store_ts)
    store_host = msg.store_host or STORE_HOST

    decoded = codec.decode_message(encoded.buf, 0, physical_offset)

    assert decoded.topic == msg.topic
    assert decoded.queue_id == msg.queue_id
    assert decoded.body == msg.body
    assert decoded.properties == msg.properties
    assert decoded.flag == msg.flag
    v6_bits = (0x10 if ":" in msg.born_host[0] else 0) | (0x20 if ":" in store_host[0] else 0)
    assert decoded.sys_flag == (msg.sys_flag & ~0x30) | v6_bits
    assert same_host(decoded.born_host, msg.born_host)
    assert same_host(decoded.store_host, store_host)
    assert decoded.born_timestamp_ms == (now_ms if msg.born_timestamp_ms is None else msg.born_timestamp_ms)
    assert decoded.store_timestamp_ms == store_ts
    assert decoded.reconsume_times == msg.reconsume_times
    assert decoded.prepared_transaction_offset == msg.prepared_transaction_offset
    assert decoded.queue_offset == queue_offset
    assert decoded.physical_offset == physical_offset
    assert decoded.store_size == encoded.size
    assert decoded.body_crc == zlib.crc32(msg.body) & 0x7FFFFFFF
    assert decoded.msg_id == codec.make_msg_id(store_host, physical_offset) == encoded.msg_ids(physical_offset)[0]
    assert encoded.transaction_type == msg.sys_flag & 0b1100

    check = codec.check_record(encoded.buf, 0, len(encoded.buf), physical_offset)
    assert (check.kind, check.size) == (RecordKind.MESSAGE, encoded.size)
    assert (check.topic, check.queue_id, check.queue_offset) == (msg.topic, msg.queue_id, queue_offset)
    assert check.store_timestamp_ms == store_ts


@given(msg=messages(), physical_offset=OFFSETS, queue_offset=OFFSETS, store_ts=INT64)
def test_bytes_equal_reference_encoder(msg, physical_offset, queue_offset, store_ts):
    encoded = encode(msg, now_ms=99)
    encoded.stamp(physical_offset=physical_offset, queue_offset=queue_offset, store_timestamp_ms=store_ts)

    expected = reference_encode(
        msg,
        store_host=msg.store_host or STORE_HOST,
        born_ts=99 if msg.born_timestamp_ms is None else msg.born_timestamp_ms,
        store_ts=store_ts,
        queue_offset=queue_offset,
        physical_offset=physical_offset,
    )
    assert bytes(encoded.buf) == expected


@given(msg=messages(), lead=st.integers(0, 64), physical_offset=OFFSETS, queue_offset=OFFSETS, store_ts=INT64)
def test_decodes_reference_bytes(msg, lead, physical_offset, queue_offset, store_ts):
    store_host = msg.store_host or STORE_HOST
    raw = reference_encode(
        msg,
        store_host=store_host,
        born_ts=7,
        store_ts=store_ts,
        queue_offset=queue_offset,
        physical_offset=physical_offset,
    )
    # Placed mid-buffer, as a reader finds it inside a segment.
    segment = bytearray(lead) + raw + bytearray(16)

    decoded = codec.decode_message(segment, lead)

    assert (decoded.topic, decoded.queue_id, decoded.body) == (msg.topic, msg.queue_id, msg.body)
    assert decoded.properties == msg.properties
    assert (decoded.flag, decoded.reconsume_times) == (msg.flag, msg.reconsume_times)
    assert decoded.prepared_transaction_offset == msg.prepared_transaction_offset
    assert (decoded.queue_offset, decoded.physical_offset) == (queue_offset, physical_offset)
    assert (decoded.born_timestamp_ms, decoded.store_timestamp_ms) == (7, store_ts)
    assert same_host(decoded.born_host, msg.born_host) and same_host(decoded.store_host, store_host)
    assert decoded.store_size == len(raw)
    assert codec.check_record(segment, lead, len(segment), physical_offset).size == len(raw)


same_queue_messages = messages(
    topic=st.just("BatchTopic"),
    queue_id=st.just(5),
    sys_flag=st.sampled_from([0, COMPRESSED_FLAG, MULTI_TAGS_FLAG, 0x30]),
)


@given(
    batch=st.lists(same_queue_messages.map(lambda m: dataclasses.replace(m, store_host=None)), min_size=1, max_size=6),
    physical_offset=OFFSETS,
    queue_offset=OFFSETS,
)
def test_batch_round_trip(batch, physical_offset, queue_offset):
    encoded = encode_batch(batch)
    encoded.stamp(physical_offset=physical_offset, queue_offset=queue_offset, store_timestamp_ms=5)

    assert encoded.count == len(batch)
    assert encoded.queue_key == "BatchTopic-5"
    assert encoded.starts[0] == 0
    ids = encoded.msg_ids(physical_offset)
    ends = encoded.starts[1:] + [encoded.size]
    for i, (msg, start, end) in enumerate(zip(batch, encoded.starts, ends)):
        decoded = codec.decode_message(encoded.buf, start, physical_offset + start)
        assert decoded.body == msg.body and decoded.properties == msg.properties
        assert decoded.queue_offset == queue_offset + i
        assert decoded.physical_offset == physical_offset + start
        assert decoded.store_size == end - start
        assert decoded.store_timestamp_ms == 5
        assert decoded.msg_id == ids[i] == codec.make_msg_id(STORE_HOST, physical_offset + start)


@st.composite
def uniform_batches(draw, property_values=prop_text):  # noqa: B008 - strategies are values
    """A batch as a front end makes it: the topic, queue, flags and hosts one object for every
    message, bodies, properties, flags and born times of each message's own."""
    shared = {
        "topic": draw(topics),
        "queue_id": draw(st.integers(0, 2**31 - 1)),
        "sys_flag": draw(st.sampled_from([0, COMPRESSED_FLAG, MULTI_TAGS_FLAG, 0x30])),
        "born_host": draw(hosts),
        "store_host": draw(st.none() | hosts),
        "reconsume_times": draw(INT32),
        "prepared_transaction_offset": draw(INT64),
    }
    size = draw(st.integers(1, 8))
    return [
        Message(
            body=draw(st.binary(max_size=300)),
            properties=draw(st.dictionaries(prop_text.filter(bool), property_values, max_size=4)),
            flag=draw(INT32),
            born_timestamp_ms=draw(st.none() | BORN_MS),
            **shared,
        )
        for _ in range(size)
    ]


def one_by_one(batch, now_ms: int = 1_700_000_000_000) -> bytes:
    """A batch's records as `encode_message` encodes each of its messages alone."""
    return b"".join(bytes(encode(msg, now_ms=now_ms).buf) for msg in batch)


@given(batch=uniform_batches())
def test_a_uniform_batch_is_encoded_once_per_batch_into_the_bytes_of_its_messages_one_by_one(batch):
    store_host_bytes = codec.encode_host(batch[0].store_host or STORE_HOST)
    topic_suffix = codec._topic_suffix(batch[0].topic)
    uniform = codec._encode_uniform_batch(batch, topic_suffix, store_host_bytes, MAX_SIZE, 1_700_000_000_000)
    checked = codec._encode_batch_checked(
        batch, topic_suffix, store_host_bytes, STORE_HOST, MAX_SIZE, 1_700_000_000_000
    )
    assert uniform is not None  # the per-batch path took it
    assert bytes(uniform.buf) == bytes(checked.buf) == one_by_one(batch)
    assert (uniform.starts, uniform.store_ts_pos, uniform.queue_key) == (
        checked.starts,
        checked.store_ts_pos,
        checked.queue_key,
    )
    assert encode_batch(batch).buf == uniform.buf


@given(batch=uniform_batches(property_values=st.text(alphabet="ab\x01\x02", max_size=3)), data=st.data())
def test_a_batch_the_uniform_path_declines_is_encoded_or_refused_message_by_message(batch, data):
    """Separators inside values, a DELAY, a message whose fields are equal but other objects:
    `encode_batch` answers as encoding each message alone does (the same bytes, or a refusal)."""
    if data.draw(st.booleans()):
        batch[-1] = dataclasses.replace(
            batch[-1], properties={**batch[-1].properties, "DELAY": data.draw(st.sampled_from(["", "0", "2"]))}
        )
    if data.draw(st.booleans()):
        batch.append(dataclasses.replace(batch[0], born_host=tuple(batch[0].born_host)[::-1][::-1]))
    try:
        expected = one_by_one(batch)
        refused = None
    except MessageRejected as exc:
        refused = exc.status
    delay = any(m.properties.get("DELAY") not in (None, "", "0") for m in batch)
    if refused is not None or delay:
        with pytest.raises(MessageRejected) as info:
            encode_batch(batch)
        assert info.value.status is (refused or ILLEGAL)
    else:
        assert bytes(encode_batch(batch).buf) == expected


# ---------------------------------------------------------------------------------------------
# msgId, properties, tags hash


@given(host=hosts, offset=INT64)
def test_msg_id_round_trip(host, offset):
    msg_id = codec.make_msg_id(host, offset)

    assert msg_id == msg_id.upper()
    assert len(msg_id) == (32 if ":" not in host[0] else 56)
    decoded_host, decoded_offset = codec.decode_msg_id(msg_id)
    assert same_host(decoded_host, host)
    assert decoded_offset == offset


def test_msg_id_ipv6_layout():
    msg_id = codec.make_msg_id(("::1", 10911), 4096)

    assert msg_id == "0" * 31 + "1" + "00002A9F" + "0000000000001000"
    assert codec.decode_msg_id(msg_id) == (("::1", 10911), 4096)


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "XYZ",
        "0A00065200001FBB000000000000000",  # odd number of digits
        "0A00065200001FBB00000000000000",  # 15 bytes
        "0A00065200001FBB000000000000000000",  # 17 bytes
    ],
)
def test_decode_msg_id_rejects(bad):
    with pytest.raises(ValueError):
        codec.decode_msg_id(bad)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("", 0),
        ("a", 97),
        ("TagA", ((84 * 31 + 97) * 31 + 103) * 31 + 65),  # 'T' 'a' 'g' 'A'
        ("\u00e9", 0xE9),
        ("\U0001f600", 0xD83D * 31 + 0xDE00),  # one code point, two UTF-16 units
        # The rest were printed by String.hashCode() on a JVM.
        ("hello world", 1794106052),
        ("TopicTest", -1902610879),  # overflows to negative
        ("polygenelubricants", -(2**31)),
        ("\u7eff\u8272-tag", -468830688),
        ("a\U0001f600b", 57849694),
    ],
)
def test_java_string_hash(text, expected):
    assert codec.java_string_hash(text) == expected


def _java_hash_reference(text: str, start: int = 0) -> int:
    """String.hashCode as Java defines it: h = 31 * h + unit over the UTF-16 code units, in 32 bits."""
    data = text.encode("utf-16-be", "surrogatepass")
    h = start & 0xFFFFFFFF
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i : i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


# Every code point, lone surrogates included (Java hashes them as the units they are); long texts
# cross the chunks the implementation evaluates at once; `start` is any signed 32-bit hash.
_ANY_TEXT = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, blacklist_categories=()))


@given(
    text=st.one_of(
        _ANY_TEXT, st.text(st.characters(max_codepoint=0xFF), max_size=2000), _ANY_TEXT.map(lambda t: t * 300)
    ),
    start=st.integers(-(2**31), 2**31 - 1),
)
def test_java_string_hash_equals_javas_definition(text, start):
    assert codec.java_string_hash(text, start) == _java_hash_reference(text, start)
    assert codec.java_string_hash(text) == _java_hash_reference(text)


def test_java_string_hash_of_lone_surrogates_and_chunk_edges():
    for text in ("\ud800", "a\udfffb", "\xff" * 511, "\xfe" * 512, "x" * 513, "\u7eff" * 1025 + "z"):
        assert codec.java_string_hash(text, -7) == _java_hash_reference(text, -7), repr(text[:8])


@given(a=st.text(), b=st.text())
def test_java_string_hash_composes_like_java(a, b):
    # s.hashCode() is a polynomial over UTF-16 units mod 2**32, so it composes over concatenation.
    units_b = len(b.encode("utf-16-be")) // 2
    combined = (codec.java_string_hash(a) * pow(31, units_b) + codec.java_string_hash(b)) & 0xFFFFFFFF
    assert codec.java_string_hash(a + b) == combined - (1 << 32) * (combined >> 31)
    assert -(2**31) <= codec.java_string_hash(a + b) < 2**31


@given(props=properties)
def test_properties_round_trip(props):
    raw = codec.encode_properties(props)

    assert codec.decode_properties(raw) == props
    assert raw == "".join(f"{k}\x01{v}\x02" for k, v in props.items()).encode("utf-8")


@given(
    props=st.dictionaries(
        st.one_of(st.text(alphabet="ab\x01\x02", max_size=3), st.integers(0, 2)),
        st.one_of(st.text(alphabet="xy\x01\x02", max_size=3), st.none()),
        max_size=4,
    )
)
def test_properties_that_cannot_be_stored_are_refused_with_a_reason(props):
    """Empty keys, keys or values that are not text, and separators inside either are refused;
    anything else is encoded as key \\x01 value \\x02."""
    valid = all(
        isinstance(k, str) and isinstance(v, str) and k and not ({"\x01", "\x02"} & set(k + v))
        for k, v in props.items()
    )
    if valid:
        assert codec.encode_properties(props) == "".join(f"{k}\x01{v}\x02" for k, v in props.items()).encode()
    else:
        with pytest.raises(MessageRejected) as refused:
            codec.encode_properties(props)
        assert refused.value.status is ILLEGAL and "propert" in refused.value.reason


def test_decode_properties_rejects_pair_without_separator():
    with pytest.raises(ValueError):
        codec.decode_properties(b"key-without-value\x02")


# ---------------------------------------------------------------------------------------------
# Bad input


def rejected(status: PutMessageStatus = ILLEGAL, **fields):
    msg = Message(**{"topic": "T", "queue_id": 0, "body": b"b", **fields})
    with pytest.raises(MessageRejected) as info:
        encode(msg)
    assert info.value.status is status


def test_topic_length_limit():
    encode(Message(topic="t" * 127, queue_id=0, body=b""))
    rejected(topic="t" * 128)


@pytest.mark.parametrize("topic", ["", "a b", "a/b", "a.b", "topic\u00e9", "\u4e3b\u9898", "a\tb", None, 7])
def test_topic_must_be_legal(topic):
    rejected(topic=topic)


def test_the_topic_cache_stays_small_and_still_caches_after_a_flood_of_names():
    """Issue 30 (memory under fuzzing): the cache of encoded topic names is keyed by what clients
    send. A flood of new names filled 65,536 entries (23 MiB at 127 bytes a name) for good, and no
    topic after it was cached."""
    for i in range(70_000):
        encode(Message(topic=f"Flood{i}", queue_id=0, body=b"x"))
    assert len(codec._valid_topics) <= codec.TOPIC_CACHE_MAX
    encode(Message(topic="Orders", queue_id=0, body=b"x"))
    assert "Orders" in codec._valid_topics


def test_topic_with_trailing_newline_rejected():
    # A topic names a ConsumeQueue directory; "\n" is outside [%|a-zA-Z0-9_-] like any other.
    rejected(topic="FooBar\n")


def test_properties_size_limit():
    # "k\x01" + value + "\x02" is 32767 bytes: exactly the i16 maximum.
    encode(Message(topic="T", queue_id=0, body=b"", properties={"k": "v" * 32764}))
    rejected(PutMessageStatus.PROPERTIES_SIZE_EXCEEDED, properties={"k": "v" * 32765})


def test_message_size_limit():
    size = len(stamped(Message(topic="T", queue_id=0, body=b"x" * 100)))
    assert encode(Message(topic="T", queue_id=0, body=b"x" * 100), max_size=size).size == size
    with pytest.raises(MessageRejected) as info:
        encode(Message(topic="T", queue_id=0, body=b"x" * 101), max_size=size)
    assert info.value.status is ILLEGAL


@pytest.mark.parametrize(
    "props",
    [{"a\x01": "v"}, {"a": "v\x01"}, {"a\x02": "v"}, {"a": "\x02"}, {"": "v"}, {"a": 1}, {1: "a"}],
)
def test_bad_properties(props):
    rejected(properties=props)


@pytest.mark.parametrize(
    "fields",
    [
        {"queue_id": -1},
        {"queue_id": 2**31},
        {"queue_id": "0"},
        {"flag": 2**31},
        {"sys_flag": -(2**31) - 1},
        {"reconsume_times": 2**31},
        {"prepared_transaction_offset": 2**63},
        {"born_timestamp_ms": -(2**63) - 1},
        {"born_timestamp_ms": 1.5},
    ],
)
def test_bad_numbers(fields):
    rejected(**fields)


@pytest.mark.parametrize("born_ms", [MAX_BORN_TIMESTAMP_MS + 1, 10**16, 2**63 - 1, MIN_BORN_TIMESTAMP_MS - 1, -(2**63)])
def test_a_born_time_past_the_years_1_to_9999_is_refused_with_its_reason(born_ms):
    """Issue 30: such a time fits the record but no RocketMQ 5 client can read it back (protobuf's
    Timestamp range); a send carrying one is refused, over every front end, here."""
    with pytest.raises(MessageRejected) as info:
        encode(Message(topic="T", queue_id=0, body=b"b", born_timestamp_ms=born_ms))
    assert info.value.status is ILLEGAL and "years 1 to 9999" in str(info.value), info.value
    for edge in (MIN_BORN_TIMESTAMP_MS, MAX_BORN_TIMESTAMP_MS):
        stored = codec.decode_message(stamped(Message(topic="T", queue_id=0, body=b"b", born_timestamp_ms=edge)), 0)
        assert stored.born_timestamp_ms == edge


def test_a_stored_born_time_out_of_range_is_clamped_when_put_again():
    """A record stored before the store checked born times (a timed or delayed message, a
    transaction half) is put again at its delivery: the copy's time is clamped, not refused forever."""
    for stored, put in ((10**16, MAX_BORN_TIMESTAMP_MS), (-(2**63), MIN_BORN_TIMESTAMP_MS), (5, 5)):
        ext = codec.decode_message(stamped(Message(topic="T", queue_id=0, body=b"b", born_timestamp_ms=1)), 0)
        again = dataclasses.replace(ext, born_timestamp_ms=stored).to_message(topic="U")
        assert again.born_timestamp_ms == put
        assert codec.decode_message(stamped(again), 0).born_timestamp_ms == put


@pytest.mark.parametrize("body", ["text", None, 5, [1, 2]])
def test_body_must_be_bytes(body):
    rejected(body=body)


def test_bytearray_body_accepted():
    assert codec.decode_message(stamped(Message(topic="T", queue_id=0, body=bytearray(b"xy"))), 0).body == b"xy"


BAD_HOSTS = [
    ("300.1.1.1", 80),
    ("not-an-ip", 80),
    ("10.0.0.1", -1),
    ("10.0.0.1", 65536),
    ("10.0.0.1", "80"),
    ("10.0.0.1", 80, 1),
    "10.0.0.1:80",
    (None, 80),
]


@pytest.mark.parametrize("host", BAD_HOSTS)
def test_bad_born_host(host):
    rejected(born_host=host)


@pytest.mark.parametrize("host", [None, *BAD_HOSTS])
def test_bad_born_host_in_a_batch(host):
    """A batch encodes a born host once per host object: a bad one is refused all the same, first
    or after good ones."""
    good = Message(topic="T", queue_id=0, body=b"a")
    batch_rejected([Message(topic="T", queue_id=0, body=b"b", born_host=host)])
    batch_rejected([good, good, Message(topic="T", queue_id=0, body=b"b", born_host=host)])


@pytest.mark.parametrize("host", BAD_HOSTS)
def test_bad_store_host(host):
    with pytest.raises(MessageRejected) as info:
        encode(Message(topic="T", queue_id=0, body=b""), store_host=host)
    assert info.value.status is ILLEGAL
    with pytest.raises(MessageRejected):
        encode(Message(topic="T", queue_id=0, body=b"", store_host=host))


def test_unhashable_host_and_topic_rejected():
    # Hosts often arrive as JSON lists; a list must get the same clear rejection as any bad host.
    rejected(born_host=["10.0.0.1", 80])
    rejected(topic=["FooBar"])


def test_not_a_message():
    with pytest.raises(MessageRejected) as info:
        codec.encode_message("FooBar", default_store_host=STORE_HOST, max_message_size=MAX_SIZE, now_ms=0)
    assert info.value.status is ILLEGAL


def batch_rejected(batch, **kwargs):
    with pytest.raises(MessageRejected) as info:
        encode_batch(batch, **kwargs)
    assert info.value.status is ILLEGAL


@pytest.mark.parametrize("other", ["FooBar", None, b"body", object()])
def test_a_batch_holding_something_else_than_a_message_is_refused(other):
    batch_rejected([Message(topic="T", queue_id=0, body=b"a"), other])


def test_a_batch_is_refused_for_its_first_bad_message_whatever_comes_after():
    """The per-batch path declines before it raises: the first message's refusal is the answer."""
    bad_body = Message(topic="T", queue_id=0, body="text")  # type: ignore[arg-type]
    unencodable = Message(topic="T", queue_id=0, body=b"b", properties={"a": "\ud800"})
    with pytest.raises(MessageRejected) as info:
        encode_batch([bad_body, unencodable])
    assert info.value.status is ILLEGAL and "body must be bytes" in info.value.reason


def test_batch_rejects_delayed_messages():
    plain = Message(topic="T", queue_id=0, body=b"a")
    delayed = Message(topic="T", queue_id=0, body=b"b", properties={"DELAY": "3"})
    batch_rejected([plain, delayed])
    assert encode_batch([plain, Message(topic="T", queue_id=0, body=b"c", properties={"DELAY": "0"})]).count == 2


@pytest.mark.parametrize("tx", [TRANSACTION_PREPARED_TYPE, TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE])
def test_batch_rejects_transaction_messages(tx):
    batch_rejected([Message(topic="T", queue_id=0, body=b"a"), Message(topic="T", queue_id=0, body=b"b", sys_flag=tx)])


@pytest.mark.parametrize("other", [{"topic": "U"}, {"queue_id": 1}, {"store_host": ("10.0.0.9", 1)}])
def test_batch_rejects_mixed_destinations(other):
    batch_rejected(
        [Message(topic="T", queue_id=0, body=b"a"), Message(**{"topic": "T", "queue_id": 0, "body": b"b", **other})]
    )


def test_batch_rejects_empty():
    batch_rejected([])


def test_batch_size_limit_covers_whole_batch():
    one = Message(topic="T", queue_id=0, body=b"x" * 100)
    size = encode(one).size
    assert encode_batch([one] * 3, max_size=3 * size).size == 3 * size
    batch_rejected([one] * 3, max_size=3 * size - 1)


def test_batch_validates_each_message():
    batch_rejected([Message(topic="T", queue_id=0, body=b"a"), Message(topic="T", queue_id=0, body="text")])


# ---------------------------------------------------------------------------------------------
# check_record on damaged bytes


def one_message(physical_offset: int = 0) -> bytearray:
    return stamped(Message(topic="T", queue_id=1, body=b"hello body"), physical_offset=physical_offset)


def corrupt_reason(buf, pos=0, limit=None, physical_offset=0) -> str:
    with pytest.raises(CorruptMessage) as info:
        codec.check_record(buf, pos, len(buf) if limit is None else limit, physical_offset)
    assert info.value.offset == physical_offset
    return info.value.reason


def test_flipped_body_byte_fails_crc():
    buf = one_message()
    body_at = buf.index(b"hello body")
    buf[body_at] ^= 0x01

    assert "CRC" in corrupt_reason(buf)
    # Recovery may skip CRC checks for old data; the structure is still sound.
    assert codec.check_record(buf, 0, len(buf), 0, verify_crc=False).kind == RecordKind.MESSAGE
    with pytest.raises(CorruptMessage):
        codec.decode_message(buf, 0)


def test_a_damaged_body_names_where_its_message_belongs():
    buf = stamped(Message(topic="Orders", queue_id=3, body=b"hello body"), physical_offset=4096, queue_offset=17)
    buf[buf.index(b"hello body") + 4] ^= 0x40

    with pytest.raises(DamagedMessage) as info:
        codec.decode_message(buf, 0, 4096)
    damaged = info.value
    assert (damaged.offset, damaged.topic, damaged.queue_id, damaged.queue_offset) == (4096, "Orders", 3, 17)
    assert damaged.reason == "body CRC mismatch"


def test_broken_structure_is_not_reported_as_a_damaged_body():
    # A record cut short (zeros at its end) whose body also changed: not a whole message at all.
    buf = stamped(Message(topic="T", queue_id=0, body=b"hello body", properties={"k": "v"}))
    buf[buf.index(b"hello body")] ^= 0x01
    buf[-1] = 0

    with pytest.raises(CorruptMessage) as info:
        codec.check_record(buf, 0, len(buf), 0)
    assert not isinstance(info.value, DamagedMessage)
    assert "separator" in info.value.reason


@given(msg=messages().filter(lambda m: m.body), data=st.data())
def test_any_change_to_a_body_is_a_damaged_message(msg, data):
    buf = stamped(msg, physical_offset=64, queue_offset=9)
    body_at = len(buf) - len(msg.body) - 1 - len(msg.topic.encode()) - 2 - len(codec.encode_properties(msg.properties))
    assert bytes(buf[body_at : body_at + len(msg.body)]) == msg.body
    position = body_at + data.draw(st.integers(0, len(msg.body) - 1))
    buf[position] ^= data.draw(st.integers(1, 255))

    # CRC-32 catches every change within 32 consecutive bits, so no flipped byte gets through.
    with pytest.raises(DamagedMessage) as info:
        codec.check_record(buf, 0, len(buf), 64)
    assert (info.value.offset, info.value.topic, info.value.queue_offset) == (64, msg.topic, 9)


def test_wrong_physical_offset():
    buf = one_message(physical_offset=4096)

    assert "physical offset" in corrupt_reason(buf, physical_offset=0)
    assert codec.check_record(buf, 0, len(buf), 4096).kind == RecordKind.MESSAGE


def test_bad_magic():
    buf = one_message()
    struct.pack_into(">i", buf, 4, 0x12345678)

    assert "magic" in corrupt_reason(buf)


@pytest.mark.parametrize("cut", [1, 8, 50])
def test_truncated_record(cut):
    buf = one_message()

    corrupt_reason(buf, limit=len(buf) - cut)
    corrupt_reason(buf[:-cut])


@pytest.mark.parametrize("size", [-5, 10, 91, 10_000])
def test_total_size_out_of_range(size):
    buf = one_message() + bytearray(64)
    struct.pack_into(">i", buf, 0, size)

    corrupt_reason(buf)


def test_inner_lengths_must_add_up():
    buf = one_message() + bytearray(16)
    size = struct.unpack_from(">i", buf, 0)[0]
    struct.pack_into(">i", buf, 0, size + 4)  # TOTALSIZE no longer matches body + topic + properties

    corrupt_reason(buf)


def test_ipv6_flags_on_short_record_are_corruption():
    # Setting the IPv6 bits moves every later field 24 bytes on, past the end of this buffer.
    buf = stamped(Message(topic="T", queue_id=0, body=b""))
    buf[codec.SYS_FLAG_POS + 3] |= 0x30

    corrupt_reason(buf)


@pytest.mark.parametrize(
    "born, store",
    [
        (("10.0.0.1", 9), ("127.0.0.1", 10911)),
        (("::1", 9), ("127.0.0.1", 10911)),
        (("10.0.0.1", 9), ("fe80::2", 10911)),
        (("::1", 9), ("fe80::2", 10911)),
    ],
)
def test_check_record_reads_the_fields_after_each_host_layout(born, store):
    # The check reads the fixed fields as IPv4 first and again for IPv6 hosts: each layout's
    # later fields (queue, offsets, timestamp, body, topic, properties) come out right.
    msg = Message(
        topic="Hosts", queue_id=3, body=b"payload", properties={"TAGS": "t"}, born_host=born, store_host=store
    )
    buf = bytearray(8) + stamped(msg, physical_offset=8, queue_offset=42, store_ts=1_700_000_000_999)

    check = codec.check_record(buf, 8, len(buf), 8)
    assert (check.kind, check.size, check.queue_id, check.queue_offset, check.topic) == (
        RecordKind.MESSAGE,
        len(buf) - 8,
        3,
        42,
        "Hosts",
    )
    assert check.store_timestamp_ms == 1_700_000_000_999
    assert codec.decode_properties(buf[check.properties_pos : check.properties_pos + check.properties_len]) == {
        "TAGS": "t"
    }
    assert codec.decode_checked(buf, 8, check).body == b"payload"


def test_blank_record_fills_rest_of_segment():
    segment = bytearray(80)
    segment[24:32] = codec.encode_blank(56)

    check = codec.check_record(segment, 24, 80, 24)
    assert (check.kind, check.size) == (RecordKind.BLANK, 56)
    assert "blank" in corrupt_reason(segment, pos=24, limit=72, physical_offset=24)
    segment[24:32] = codec.encode_blank(40)
    assert "blank" in corrupt_reason(segment, pos=24, limit=80, physical_offset=24)


def test_decode_message_refuses_blank():
    segment = bytearray(codec.encode_blank(64)) + bytearray(56)

    with pytest.raises(CorruptMessage):
        codec.decode_message(segment, 0, 0)


def test_zeros_mean_end_of_data():
    segment = bytearray(4096)

    assert codec.check_record(segment, 0, 4096, 0).kind == RecordKind.END
    assert codec.check_record(segment, 4093, 4096, 4093).kind == RecordKind.END
    assert codec.check_record(segment, 4096, 4096, 4096).kind == RecordKind.END
    segment[4095] = 1
    corrupt_reason(segment, pos=4093, physical_offset=4093)


def test_segment_walk():
    # A segment as the CommitLog writes it: messages back to back, then a blank to the end.
    first = one_message(physical_offset=0)
    second = one_message(physical_offset=len(first))
    used = len(first) + len(second)
    segment = first + second + codec.encode_blank(256 - used)
    segment += bytearray(256 - len(segment))

    kinds = []
    pos = 0
    while pos < 256:
        check = codec.check_record(segment, pos, 256, pos)
        kinds.append(check.kind)
        pos += check.size
    assert kinds == [RecordKind.MESSAGE, RecordKind.MESSAGE, RecordKind.BLANK]
    assert pos == 256


@given(msg=messages(), data=st.data())
def test_damaged_bytes_raise_only_corrupt_message(msg, data):
    buf = stamped(msg, physical_offset=64) + bytearray(32)
    size = len(buf) - 32
    position = data.draw(st.integers(0, size - 1))
    buf[position] ^= data.draw(st.integers(1, 255))

    # Anything the damage leaves must be reported as corruption, never as another exception.
    try:
        check = codec.check_record(buf, 0, len(buf), 64)
    except CorruptMessage:
        return
    assert check.kind in (RecordKind.MESSAGE, RecordKind.BLANK, RecordKind.END)
    if check.kind == RecordKind.MESSAGE:
        try:
            codec.decode_message(buf, 0, 64)
        except CorruptMessage:
            pass


@given(messages(), st.booleans())
def test_record_size_is_the_encoded_size(msg, ipv6):
    from store.log.codec import encode_message, encode_properties, record_size

    host = ("::1", 10911) if ipv6 else ("127.0.0.1", 10911)
    msg = dataclasses.replace(msg, born_host=host, store_host=host)
    encoded = encode_message(msg, default_store_host=host, max_message_size=1 << 30, now_ms=1)
    properties_len = len(encode_properties(msg.properties)) if msg.properties else 0
    assert record_size(msg.topic, len(msg.body), properties_len, ipv6_hosts=ipv6) == len(encoded.buf)
