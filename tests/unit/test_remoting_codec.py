"""wire.remoting: frames of RocketMQ's remoting protocol, both header serializations, streams cut
anywhere, bad frames refused, and the SEND_BATCH_MESSAGE body."""

from __future__ import annotations

import json
import struct
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.edge.remoting_inputs import WEDGE_FRAME
from wire.remoting import (
    JSON,
    ROCKETMQ,
    BatchItem,
    FrameDecoder,
    RemotingCommand,
    RemotingProtocolError,
    ResponseCode,
    decode_batch_body,
    decode_stored_records,
    encode,
    encode_batch_body,
    properties_to_string,
    string_to_properties,
)


def binary_frame(remark_len: int = 0, ext_len: int | None = None, ext: bytes = b"", body: bytes = b"") -> bytes:
    """A ROCKETMQ-serialized frame whose remark and extFields lengths may lie."""
    header = struct.pack(">hbhii", 10, 0, 399, 1, 0) + struct.pack(">i", remark_len)
    header += struct.pack(">i", len(ext) if ext_len is None else ext_len) + ext
    return struct.pack(">ii", 4 + len(header) + len(body), (ROCKETMQ << 24) | len(header)) + header + body


def json_frame(header: bytes, body: bytes = b"") -> bytes:
    return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body


text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30)
prop_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x01\x02"), min_size=1, max_size=20
)
commands = st.builds(
    RemotingCommand,
    code=st.integers(-(2**15), 2**15 - 1),
    opaque=st.integers(-(2**31), 2**31 - 1),
    flag=st.integers(0, 3),
    ext_fields=st.dictionaries(text.filter(bool), text, max_size=5),
    body=st.binary(max_size=300),
    remark=st.none() | text,
    language=st.sampled_from(["JAVA", "PYTHON", "GO"]),
    version=st.integers(0, 2**15 - 1),
    serialize_type=st.sampled_from([JSON, ROCKETMQ]),
)


def comparable(cmd: RemotingCommand) -> tuple:
    # The binary form cannot tell an empty remark from none.
    remark = cmd.remark or None if cmd.serialize_type == ROCKETMQ else cmd.remark
    return (cmd.code, cmd.opaque, cmd.flag, dict(cmd.ext_fields), cmd.body, remark, cmd.language, cmd.version)


@settings(max_examples=200, deadline=None)
@given(st.lists(commands, min_size=1, max_size=5), st.data())
def test_any_commands_cut_anywhere_decode_to_themselves(cmds, data):
    stream = b"".join(encode(c) for c in cmds)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=6)))
    decoder = FrameDecoder()
    decoded: list[RemotingCommand] = []
    last = 0
    for cut in [*cuts, len(stream)]:
        decoded += decoder.feed(stream[last:cut])
        last = cut
    assert [comparable(c) for c in decoded] == [comparable(c) for c in cmds]
    assert decoder.buffered == 0


@settings(max_examples=200, deadline=None)
@given(commands, st.sampled_from([None, 1.5, True, {"n": 5}]))
def test_the_json_header_written_directly_is_the_encoders_byte_for_byte(cmd, odd):
    """Plain ints and strs are written directly, anything else by the JSON encoder: the same
    bytes either way."""
    from wire.remoting import _encoded_header, _json_header

    assert _json_header(cmd) == _encoded_header(cmd)
    if odd is not None:  # a value only the encoder writes (a test's or another client's)
        odd_cmd = replace(cmd, ext_fields={**cmd.ext_fields, "odd": odd})
        assert _json_header(odd_cmd) == _encoded_header(odd_cmd)
        assert json.loads(_json_header(odd_cmd))["extFields"]["odd"] == odd


def test_the_json_header_carries_rocketmqs_field_names():
    frame = encode(RemotingCommand(310, opaque=7, ext_fields={"b": "T"}, body=b"xyz"))
    length, mark = struct.unpack(">ii", frame[:8])
    assert length == len(frame) - 4 and mark >> 24 == JSON
    header = json.loads(frame[8 : 8 + (mark & 0xFFFFFF)])
    assert header["code"] == 310 and header["opaque"] == 7 and header["extFields"] == {"b": "T"}
    assert frame.endswith(b"xyz")


def test_an_answer_keeps_the_requests_opaque_and_serialization_and_is_a_response():
    request = RemotingCommand(11, opaque=42, serialize_type=ROCKETMQ)
    answer = request.answer(ResponseCode.PULL_NOT_FOUND, "nothing", {"nextBeginOffset": "3"})
    assert answer.is_response and not request.is_response
    assert (answer.opaque, answer.serialize_type, answer.code) == (42, ROCKETMQ, 19)


def test_non_string_ext_fields_from_other_clients_become_text():
    header = json.dumps({"code": 34, "opaque": 1, "flag": 0, "extFields": {"n": 5}}).encode()
    frame = struct.pack(">ii", 4 + len(header), len(header)) + header
    (cmd,) = FrameDecoder().feed(frame)
    assert cmd.ext_fields == {"n": "5"}


@pytest.mark.parametrize(
    "frame, words",
    [
        (struct.pack(">i", -5), "a frame of -5 bytes"),
        (struct.pack(">i", 1 << 30), "the limit is"),
        (struct.pack(">ii", 8, 100) + b"\0" * 4, "a header of 100 bytes"),
        (struct.pack(">ii", 6, (7 << 24) | 2) + b"{}", "unknown serialization type 7"),
        (struct.pack(">ii", 7, 3) + b"{x}", "does not parse"),
        (struct.pack(">ii", 6, 2) + b"[]", "not an object"),
        (struct.pack(">ii", 6, 2) + b"{}", "lacks an integer code"),
        (struct.pack(">ii", 8, (1 << 24) | 4) + b"\0\0\0\0", "shorter than its fixed fields"),
        # The frame of issue 30: an extFields key of -10 bytes once moved the parse backwards.
        (WEDGE_FRAME, "an extFields key claims -10 bytes"),
        (binary_frame(remark_len=-1), "the remark claims -1 bytes"),
        (binary_frame(remark_len=1 << 20), "the remark claims 1048576 bytes"),
        (binary_frame(ext_len=-4), "extFields claims -4 bytes"),
        (binary_frame(ext=struct.pack(">hi", 0, -1)), "an extFields value claims -1 bytes"),
        (binary_frame(ext=struct.pack(">h", 40) + b"k"), "an extFields key claims 40 bytes"),
        (binary_frame(ext=struct.pack(">h", 1) + b"k" + b"\0"), "ends inside the length of an extFields value"),
        (binary_frame(ext=struct.pack(">h", 1) + b"\xff" + struct.pack(">i", 0)), "key is not UTF-8"),
        (json_frame(b"[" * 100_000), "does not parse"),
        (json_frame(b'{"code": 1e999}'), "code is not an integer"),
        (json_frame(b'{"code": true}'), "code is not an integer"),
        (json_frame(b'{"code": 10, "opaque": 4294967296}'), "opaque 4294967296 is out of range"),
        (json_frame(b'{"code": 10, "extFields": {"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}"), "parse"),
    ],
)
def test_a_bad_frame_raises_a_protocol_error_naming_the_fault(frame, words):
    with pytest.raises(RemotingProtocolError, match=words):
        FrameDecoder().feed(frame)


batch_items = st.tuples(st.binary(max_size=200), st.integers(-5, 5), st.dictionaries(prop_text, prop_text, max_size=4))


@given(st.lists(batch_items, min_size=1, max_size=6))
def test_batch_bodies_decode_to_their_messages(items):
    batch = [BatchItem(body, flag, props) for body, flag, props in items]
    assert decode_batch_body(encode_batch_body(batch)) == batch


@pytest.mark.parametrize("cut", [1, 10, 21, 25])
def test_a_cut_batch_body_is_refused_with_the_entry_named(cut):
    body = encode_batch_body([BatchItem(b"hello", 0, {"TAGS": "a"})])
    with pytest.raises(ValueError, match="at byte 0"):
        decode_batch_body(body[:cut])


def test_properties_use_rocketmqs_separators_and_skip_the_pairs_rocketmq_skips():
    text = properties_to_string({"TAGS": "a", "KEYS": "k1 k2"})
    assert text == "TAGS\x01a\x02KEYS\x01k1 k2\x02"
    assert string_to_properties(text) == {"TAGS": "a", "KEYS": "k1 k2"}
    # As RocketMQ's MessageDecoder: a pair without a separator or with an empty name is skipped
    # (an empty value is kept, as the store holds it); a second separator in a value (the store
    # could not write it back) is refused.
    assert string_to_properties("TAGS\x02\x01orphan\x02K\x01\x02KEYS\x01k\x02") == {"K": "", "KEYS": "k"}
    with pytest.raises(ValueError, match="in its value"):
        string_to_properties("KEYS\x01a\x01b\x02")


hosts = st.sampled_from([("127.0.0.1", 10911), ("10.1.2.3", 1), ("::1", 10911), ("fe80::1", 65535)])


@settings(max_examples=150, deadline=None)
@given(
    topic=st.from_regex(r"[A-Za-z0-9_%|-]{1,40}", fullmatch=True),
    body=st.binary(max_size=300),
    props=st.dictionaries(
        st.from_regex(r"[A-Za-z_]{1,12}", fullmatch=True), st.from_regex(r"[a-z0-9 ]{0,12}", fullmatch=True), max_size=4
    ),
    born=hosts,
    store_host=hosts,
    offsets=st.tuples(st.integers(0, 2**40), st.integers(0, 2**31)),
)
def test_pulled_records_decode_as_the_store_reads_them(topic, body, props, born, store_host, offsets):
    from store import Message
    from store.log.codec import decode_message, encode_message

    msg = Message(topic, 3, body, props, flag=7, born_host=born, store_host=store_host, born_timestamp_ms=1234)
    encoded = encode_message(msg, default_store_host=store_host, max_message_size=1 << 20, now_ms=99)
    encoded.stamp(offsets[0], offsets[1], 5678)
    raw = bytes(encoded.buf)
    expected = decode_message(raw, 0)
    (got,) = decode_stored_records(raw + b"")
    assert (got.topic, got.queue_id, got.queue_offset, got.physical_offset) == (
        expected.topic,
        expected.queue_id,
        expected.queue_offset,
        expected.physical_offset,
    )
    assert (got.body, got.properties, got.flag, got.sys_flag) == (
        expected.body,
        dict(expected.properties),
        expected.flag,
        expected.sys_flag,
    )
    assert (got.born_host, got.store_host, got.born_timestamp_ms, got.store_timestamp_ms) == (
        expected.born_host,
        expected.store_host,
        expected.born_timestamp_ms,
        expected.store_timestamp_ms,
    )
    assert got.offset_msg_id == expected.msg_id and got.body_crc_ok
    with pytest.raises(ValueError, match="at byte 0"):
        decode_stored_records(raw[:-1])


def test_a_send_reads_the_same_messages_from_v1_names_v2_letters_and_a_batch():
    """The server's reading of a send (`RemotingServer._send_items`): SEND_MESSAGE's long names,
    SEND_MESSAGE_V2's letters (or a long name where a V2 client sends one), and a batch whose
    messages carry their own properties beside the request's."""
    from types import SimpleNamespace

    from rocketstore.broker.core.send import SendBatch
    from rocketstore.broker.remoting_server import RemotingServer
    from wire.remoting import SEND_V1_FIELDS, BatchItem, RequestCode, encode_batch_body

    conn = SimpleNamespace(peer=("10.0.0.9", 4242))
    header = {"topic": "T", "queueId": "2", "bornTimestamp": "1700000000000", "flag": "3", "properties": "K\x01v\x02"}
    v1 = RemotingCommand(RequestCode.SEND_MESSAGE, 1, 0, dict(header), b"body")
    v2 = RemotingCommand(RequestCode.SEND_MESSAGE_V2, 2, 0, {SEND_V1_FIELDS[k]: v for k, v in header.items()}, b"body")
    mixed = {SEND_V1_FIELDS[k]: v for k, v in header.items() if k != "topic"} | {"topic": "T"}
    v2_long = RemotingCommand(RequestCode.SEND_MESSAGE_V2, 3, 0, mixed, b"body")
    read = [RemotingServer._send_items(None, conn, cmd) for cmd in (v1, v2, v2_long)]  # type: ignore[arg-type]
    assert read[0] == read[1] == read[2]
    (items, batch) = read[0]
    assert not batch and len(items) == 1
    message = items[0].message
    assert (message.topic, message.queue_id, message.body, message.flag) == ("T", 2, b"body", 3)
    assert message.properties == {"K": "v"} and message.born_host == ("10.0.0.9", 4242)
    assert message.born_timestamp_ms == 1700000000000 and items[0].queue_id == 2 and items[0].refused is None

    body = encode_batch_body([BatchItem(b"a", 5, {"U": "1"}), BatchItem(b"b", 6, {"U": "2", "K": "own"})])
    batch_cmd = RemotingCommand(RequestCode.SEND_BATCH_MESSAGE, 4, 0, {**header, "batch": "true"}, body)
    sent, batch = RemotingServer._send_items(None, conn, batch_cmd)  # type: ignore[arg-type]
    assert batch and isinstance(sent, SendBatch) and sent.queue_id == 2
    assert [(m.body, m.flag) for m in sent.messages] == [(b"a", 5), (b"b", 6)]
    assert [m.properties for m in sent.messages] == [{"K": "v", "U": "1"}, {"K": "own", "U": "2"}]
    # Each as SEND_MESSAGE makes its one message: the batch's are the same values.
    assert sent.messages[0] == replace(message, body=b"a", flag=5, properties={"K": "v", "U": "1"})
    bare = RemotingCommand(RequestCode.SEND_BATCH_MESSAGE, 5, 0, {**header, "properties": ""}, body)
    sent, _ = RemotingServer._send_items(None, conn, bare)  # type: ignore[arg-type]
    assert isinstance(sent, SendBatch)
    assert [m.properties for m in sent.messages] == [{"U": "1"}, {"K": "own", "U": "2"}]
