"""Fuzz of wire.remoting's decoders (issue 30, item 1): whatever bytes arrive, cut wherever, a
FrameDecoder returns whole commands, refuses the stream with RemotingProtocolError, or keeps a
strict prefix of one frame waiting for the rest, and does a bounded amount of work per byte.

Work is counted, not timed: a tracer counts the Python lines run in wire/remoting.py and stops
the decoder (by raising) once it passes the budget, so a parse loop that stops consuming input
fails the test at once instead of hanging it. The batch-body and stored-record decoders get the
same treatment: ValueError or items, within the budget."""

from __future__ import annotations

import json
import struct
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

import wire.remoting as remoting
from wire.remoting import (
    JSON,
    ROCKETMQ,
    FrameDecoder,
    RemotingCommand,
    RemotingProtocolError,
    decode_batch_body,
    decode_stored_records,
    encode,
)

# Lines of wire/remoting.py a decoder may run: a fixed allowance, then this many per input byte
# (a frame is at least 8 bytes and costs a few dozen lines; an extFields entry at least 6).
FIXED_STEPS = 400
STEPS_PER_BYTE = 12


class OverBudget(BaseException):
    """Raised inside the decoder by the tracer; BaseException so no `except Exception` eats it."""


def run_counted(budget: int, fn, *args):
    """fn(*args) under a tracer counting the lines run in wire/remoting.py; OverBudget past
    `budget`. Returns (result or the exception fn raised, steps)."""
    steps = 0
    source = remoting.__file__

    def local(frame, event, arg):
        nonlocal steps
        if event == "line":
            steps += 1
            if steps > budget:
                raise OverBudget(f"{steps} steps, over the budget of {budget}")
        return local

    def calls(frame, event, arg):
        return local if frame.f_code.co_filename == source else None

    previous = sys.gettrace()
    sys.settrace(calls)
    try:
        outcome = fn(*args)
    except (RemotingProtocolError, ValueError) as exc:
        outcome = exc
    finally:
        sys.settrace(previous)
    return outcome, steps


def budget_for(data: bytes) -> int:
    return FIXED_STEPS + STEPS_PER_BYTE * len(data)


def feed_in_pieces(stream: bytes, cuts: list[int]) -> tuple[list[RemotingCommand], FrameDecoder, Exception | None]:
    decoder = FrameDecoder(max_frame_bytes=1 << 16)
    out: list[RemotingCommand] = []
    last = 0
    for cut in [*sorted(cuts), len(stream)]:
        piece = stream[last:cut]
        last = cut
        result, _ = run_counted(budget_for(piece), decoder.feed, piece)
        if isinstance(result, Exception):
            return out, decoder, result
        out += result
    return out, decoder, None


def assert_waits_for_one_frame(decoder: FrameDecoder, stream: bytes) -> None:
    """What a decoder keeps is the start of one frame: too short for a length, or shorter than
    the length it announces."""
    left = decoder.buffered
    assert left <= len(stream)
    if left >= 4:
        (length,) = struct.unpack_from(">i", stream, len(stream) - left)
        assert 4 <= length and left - 4 < length


# -- what the fuzz is made of ------------------------------------------------------------------

int16s = st.integers(-(2**15), 2**15 - 1)
int32s = st.integers(-(2**31), 2**31 - 1)
# Lengths that lie: negative, zero, small, around the data, huge.
lengths = st.one_of(st.integers(-(2**31), -1), st.integers(0, 64), st.integers(2**15, 2**31 - 1))


@st.composite
def binary_headers(draw) -> bytes:
    """A ROCKETMQ header whose remark, extFields and entry lengths may each lie."""
    head = struct.pack(">hbhii", draw(int16s), draw(st.integers(-128, 127)), draw(int16s), draw(int32s), draw(int32s))
    remark = draw(st.binary(max_size=20))
    head += struct.pack(">i", draw(st.one_of(st.just(len(remark)), lengths))) + remark
    entries = b""
    for _ in range(draw(st.integers(0, 6))):
        key, value = draw(st.binary(max_size=12)), draw(st.binary(max_size=12))
        key_len = draw(st.one_of(st.just(len(key)), st.integers(-(2**15), 2**15 - 1)))
        value_len = draw(st.one_of(st.just(len(value)), lengths))
        entries += struct.pack(">h", key_len) + key + struct.pack(">i", value_len) + value
    head += struct.pack(">i", draw(st.one_of(st.just(len(entries)), lengths))) + entries
    return head + draw(st.binary(max_size=8))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


@st.composite
def json_headers(draw) -> bytes:
    doc = draw(st.dictionaries(st.sampled_from(["code", "opaque", "flag", "version", "remark", "language",
                                                 "extFields", "x"]), json_values, max_size=7))  # fmt: skip
    text = json.dumps(doc).encode()
    return draw(st.one_of(st.just(text), st.binary(max_size=40), st.just(b"[" * 5000)))


@st.composite
def frames(draw) -> bytes:
    """One frame: its header (binary, JSON or random) and body, with a length and mark that
    are right, or not."""
    kind = draw(st.sampled_from([JSON, ROCKETMQ, 2, 255]))
    header = draw(binary_headers() if kind == ROCKETMQ else json_headers())
    body = draw(st.binary(max_size=32))
    length = draw(st.one_of(st.just(4 + len(header) + len(body)), lengths))
    header_len = draw(st.one_of(st.just(len(header)), st.integers(0, 0xFFFFFF)))
    return struct.pack(">iI", length, (kind << 24) | header_len) + header + body


commands = st.builds(
    RemotingCommand,
    code=int16s,
    opaque=int32s,
    flag=st.integers(0, 3),
    ext_fields=st.dictionaries(st.text(min_size=1, max_size=8), st.text(max_size=8), max_size=4),
    body=st.binary(max_size=40),
    remark=st.none() | st.text(max_size=8),
    serialize_type=st.sampled_from([JSON, ROCKETMQ]),
)


@st.composite
def mutated(draw) -> bytes:
    """Good frames with some bytes overwritten by random bytes or a lying int16/int32."""
    data = bytearray(b"".join(encode(c) for c in draw(st.lists(commands, min_size=1, max_size=3))))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data) - 1))
        patch = draw(st.one_of(st.binary(min_size=1, max_size=4), int16s.map(lambda v: struct.pack(">h", v)),
                               lengths.map(lambda v: struct.pack(">i", v))))  # fmt: skip
        data[at : at + len(patch)] = patch
    return bytes(data)


streams = st.one_of(st.binary(max_size=300), mutated(), st.lists(frames(), min_size=1, max_size=4).map(b"".join))


@settings(max_examples=600, deadline=None)
@given(streams, st.data())
def test_any_stream_cut_anywhere_is_consumed_refused_or_waited_for_within_bounded_work(stream, data):
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=5))
    decoded, decoder, error = feed_in_pieces(stream, cuts)
    if error is not None:
        assert isinstance(error, RemotingProtocolError), f"{type(error).__name__} escaped the decoder: {error}"
        # The broken stream stays refused, and nothing is kept of it.
        refused_again, _ = run_counted(FIXED_STEPS, decoder.feed, b"\0" * 8)
        assert isinstance(refused_again, RemotingProtocolError) and decoder.buffered == 0
        return
    assert all(isinstance(c, RemotingCommand) for c in decoded)
    assert_waits_for_one_frame(decoder, stream)


def test_the_issue_30_frame_is_refused_within_a_few_steps():
    frame = bytes.fromhex("000000230100001f002200018f000000010000000000000008414141410000000400000002fff6")
    result, steps = run_counted(budget_for(frame), FrameDecoder().feed, frame)
    assert isinstance(result, RemotingProtocolError) and "-10 bytes" in str(result)
    assert steps < budget_for(frame)


def test_the_step_counter_stops_a_loop_that_never_consumes():
    # The tracer itself must catch a wedge, or the fuzz above proves nothing.
    endless = compile("pos = 0\nwhile pos < 1:\n    pos -= 1\n", remoting.__file__, "exec")
    try:
        run_counted(1000, exec, endless)
    except OverBudget:
        return
    raise AssertionError("an endless loop ran past the budget unnoticed")


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=200), mutated()))
def test_batch_bodies_and_stored_records_decode_or_raise_value_error_within_bounded_work(data):
    for decode in (decode_batch_body, decode_stored_records):
        result, _ = run_counted(budget_for(data), decode, data)
        assert isinstance(result, (list, ValueError)), f"{decode.__name__}: {type(result).__name__}"
