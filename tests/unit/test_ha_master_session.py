"""The master's half of replication (ha/master_session.py), alone and driven against the slave's
half (ha/slave_session.py) without sockets: chunks cut from a master log in a bytearray travel
through a list, acknowledgements travel back, and the slave's log must end equal to the master's."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from ha.chunks import crc32c, next_chunk
from ha.epochs import EpochEntry, EpochHistory
from ha.master_session import CloseKind, MasterSession, SlaveHandshake, Step, decide_start
from ha.slave_session import ChunkFields, SlaveSession
from store.log.codec import BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE

SEGMENT = 512


def build_log(sizes: list[int]) -> tuple[bytearray, list[int]]:
    """Records of the given sizes laid into SEGMENT-byte segments (a record that does not fit ends
    its segment with a blank record), and every record boundary."""
    log = bytearray()
    boundaries = [0]
    for size in sizes:
        room = SEGMENT - len(log) % SEGMENT
        if size + 8 > room:
            log += struct.pack(">ii", room, BLANK_MAGIC_CODE) + bytes(room - 8)
            boundaries.append(len(log))
        log += struct.pack(">ii", size, MESSAGE_MAGIC_CODE) + bytes((len(log) + i) % 251 for i in range(size - 8))
        boundaries.append(len(log))
    return log, boundaries


def reader(log: bytearray):
    def read(offset: int, size: int) -> bytes:
        segment_end = (offset // SEGMENT + 1) * SEGMENT
        return bytes(log[offset : min(offset + size, segment_end, len(log))])

    return read


def starts_at(log: bytearray, boundaries: list[int]):
    known = set(boundaries)
    return lambda offset: offset in known if offset + 8 <= len(log) else None


def start(durable: int, log: bytearray, boundaries: list[int], **kw):
    defaults = dict(
        broker_name="broker-a",
        serving=True,
        log_min_offset=0,
        log_max_offset=len(log),
        record_starts_at=starts_at(log, boundaries),
    )
    defaults.update(kw)
    return decide_start(SlaveHandshake("broker-a", durable), **defaults)


# -- the handshake -----------------------------------------------------------------------------


@given(sizes=st.lists(st.integers(8, 200), min_size=1, max_size=30), data=st.data())
def test_a_stream_starts_exactly_at_a_record_boundary_the_master_holds(sizes, data):
    log, boundaries = build_log(sizes)
    durable = data.draw(st.integers(0, len(log) + 50))
    decision = start(durable, log, boundaries)
    if durable == 0:
        assert decision.accepted and decision.start_offset == 0
    elif durable > len(log):
        assert "longer than the master's" in decision.refusal
    elif durable in boundaries:
        assert decision.accepted and decision.start_offset == durable
    else:
        assert "not a record boundary" in decision.refusal


def test_handshake_refusals_name_their_reason():
    log, boundaries = build_log([100, 100, 100])
    assert "is a slave" in start(0, log, boundaries, serving=False).refusal
    assert (
        "belongs to broker"
        in decide_start(
            SlaveHandshake("broker-b", 0),
            broker_name="broker-a",
            serving=True,
            log_min_offset=0,
            log_max_offset=len(log),
            record_starts_at=starts_at(log, boundaries),
        ).refusal
    )
    assert "negative" in start(-1, log, boundaries).refusal
    gone = start(100, log, boundaries, log_min_offset=SEGMENT)
    assert "no longer has the bytes" in gone.refusal
    assert start(0, log, boundaries, log_min_offset=SEGMENT).start_offset == SEGMENT  # an empty slave


def test_epochs_refuse_a_divergent_tail():
    log, boundaries = build_log([100] * 8)
    history = EpochHistory([EpochEntry(1, 0), EpochEntry(2, 300)])
    same = decide_start(
        SlaveHandshake("broker-a", 200, epoch=1, epoch_start_offset=0),
        broker_name="broker-a",
        serving=True,
        log_min_offset=0,
        log_max_offset=len(log),
        record_starts_at=lambda o: True,
        epochs=history,
    )
    assert same.accepted
    past = decide_start(
        SlaveHandshake("broker-a", 400, epoch=1, epoch_start_offset=0),
        broker_name="broker-a",
        serving=True,
        log_min_offset=0,
        log_max_offset=len(log),
        record_starts_at=lambda o: True,
        epochs=history,
    )
    assert "past the end of epoch 1 at 300" in past.refusal
    unknown = decide_start(
        SlaveHandshake("broker-a", 100, epoch=2, epoch_start_offset=100),
        broker_name="broker-a",
        serving=True,
        log_min_offset=0,
        log_max_offset=len(log),
        record_starts_at=lambda o: True,
        epochs=history,
    )
    assert "the logs diverge" in unknown.refusal


# -- one session ---------------------------------------------------------------------------------


def session(start_offset: int = 0, **kw) -> MasterSession:
    settings_ = dict(window_bytes=1000, heartbeat_ms=100, housekeeping_ms=1000)
    settings_.update(kw)
    return MasterSession(start_offset, 0, **settings_)


def test_steps_send_within_the_window_then_heartbeat_then_give_up():
    s = session(window_bytes=300)
    assert s.next_step(1, 1000, 0).step is Step.SEND
    s.sent_chunk(300, 1)
    step = s.next_step(2, 1000, 0)
    assert step.step is Step.WAIT and step.wait_ms == 99  # the window is full until an ack
    assert s.acknowledged(200, 50) is None
    assert s.next_step(51, 1000, 0).step is Step.SEND
    assert s.next_step(101, 300, 0).step is Step.HEARTBEAT  # nothing new for a heartbeat interval
    closing = s.next_step(1051, 300, 0)
    assert closing.step is Step.CLOSE and closing.close is CloseKind.SILENT


def test_an_ack_wakes_the_sender_only_when_it_may_have_waited_on_the_window():
    s = session(window_bytes=300)
    s.sent_chunk(100, 1)
    before = s.acked
    assert s.acknowledged(100, 2) is None
    assert not s.window_was_full(before)  # the sender never waited on the window: puts wake it
    s.sent_chunk(300, 3)
    assert s.next_step(4, 1000, 0).step is Step.WAIT  # 300 unacknowledged: the window is full
    before = s.acked
    assert s.acknowledged(250, 5) is None
    assert s.window_was_full(before)
    assert s.next_step(6, 1000, 0).step is Step.SEND
    before = s.acked
    assert s.acknowledged(250, 7) is None  # a repeated ack frees nothing
    assert not s.window_was_full(before)


@given(
    window=st.integers(1, 500),
    sends=st.lists(st.integers(1, 200), min_size=1, max_size=8),
    acks=st.lists(st.integers(0, 1000), min_size=1, max_size=4),
    sent_after=st.integers(0, 200),
)
def test_a_sender_waiting_on_the_window_is_always_woken_by_the_ack_that_frees_it(window, sends, acks, sent_after):
    """The sender decides with the ack it sees; the report reader applies a later ack and then
    asks `window_was_full` (the sender may have sent more in between): every decision to wait on
    the window that the new ack would have turned into a send gets its wake-up."""
    s = session(window_bytes=window)
    readable = 10_000
    for size in sends:
        if s.next_step(1, readable, 0).step is Step.SEND:
            s.sent_chunk(size, 1)
    for ack in acks:
        decided = s.next_step(1, readable, 0).step
        if decided is Step.SEND:
            s.sent_chunk(sent_after, 1)  # the sender goes on while the ack is on its way
            continue
        before = s.acked
        assert s.acknowledged(min(ack, s.sent), 2) is None
        woken = s.window_was_full(before)
        if s.next_step(2, readable, 0).step is Step.SEND:
            assert woken, f"a sender waiting at sent={s.sent} acked={before} was not woken by the ack to {s.acked}"


def test_an_ack_beyond_what_was_sent_is_a_protocol_error_and_gone_bytes_close_the_stream():
    s = session()
    s.sent_chunk(100, 1)
    assert "beyond the 100 sent" in s.acknowledged(101, 2)
    assert s.acked == 0
    gone = session(100).next_step(1, 500, 200)
    assert gone.step is Step.CLOSE and gone.close is CloseKind.GONE


# -- both halves together ------------------------------------------------------------------------


@settings(max_examples=120, deadline=None)
@given(
    sizes=st.lists(st.integers(8, 300), min_size=1, max_size=40),
    batch=st.integers(64, 700),
    window=st.integers(64, 2000),
    start_index=st.integers(0, 100),
    moves=st.lists(st.sampled_from(["master", "deliver", "report", "tick"]), min_size=1, max_size=400),
)
def test_a_master_and_a_slave_session_bring_the_slave_to_the_masters_log(sizes, batch, window, start_index, moves):
    log, boundaries = build_log(sizes)
    slave_log = bytearray(log[: boundaries[start_index % len(boundaries)]])
    durable = len(slave_log)
    decision = start(durable, log, boundaries)
    assert decision.accepted
    now = 0
    master = MasterSession(decision.start_offset, now, window_bytes=window, heartbeat_ms=50, housekeeping_ms=10_000)
    slave = SlaveSession(
        segment_size=SEGMENT,
        log_end=durable,
        log_empty=durable == 0,
        durable_offset=durable,
        now_ms=now,
        heartbeat_ms=50,
        housekeeping_ms=10_000,
    )
    wire: list[ChunkFields] = []
    read = reader(log)

    def chunk(offset: int, data: bytes) -> ChunkFields:
        return ChunkFields(offset, data, crc32c(data), SEGMENT, len(log))

    def master_move() -> None:
        step = master.next_step(now, len(log), 0)
        assert step.step is not Step.CLOSE, step.reason
        if step.step is Step.SEND:
            data = next_chunk(read, master.sent, step.until, batch)
            assert data, "a readable whole record was not cut"
            wire.append(chunk(master.sent, data))
            master.sent_chunk(len(data), now)
        elif step.step is Step.HEARTBEAT:
            wire.append(chunk(master.sent, b""))
            master.sent_chunk(0, now)

    def deliver() -> None:
        if wire:
            received = wire.pop(0)
            check = slave.receive(received, now)
            assert check.ok, check.reason
            if received.data:
                assert received.start_offset == len(slave_log)
                slave_log.extend(received.data)
                slave.appended(check)
                slave.durable(len(slave_log))

    def report() -> None:
        offset = slave.report_due(now)
        if offset is not None:
            assert master.acknowledged(offset, now) is None

    for move in moves:
        if move == "tick":
            now += 17
        else:
            {"master": master_move, "deliver": deliver, "report": report}[move]()
        assert master.acked <= len(slave_log) <= master.sent <= len(log)
        assert slave_log == log[: len(slave_log)]
    # Drain: the stream always finishes, whatever happened before.
    for _ in range(10 * len(log) + 100):
        if len(slave_log) == len(log) and master.acked == len(log):
            break
        now += 60
        master_move()
        while wire:
            deliver()
        report()
    assert slave_log == log
    assert master.acked == master.sent == len(log)
