"""`bench.front_end_floor`, the ceiling `bench.vs_redis --floor` measures, does the work it
claims: the producers run against it unchanged, and in the replicated modes (over gRPC and over
TCP, the gRPC client API's floor, and the floor with the broker's per-message work) a send is
answered only once its bytes are on the master's file and on the slave's (`replicated-work`: as
CommitLog records, which the broker's own decoder reads back)."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from bench.front_end_floor import GRPC_API_MODES, SLAVE_MODES, WORK_MODES
from bench.vs_redis import FloorProcess
from client import AsyncProducer, ProducerMessage
from client.remoting import AsyncRemotingProducer
from store.log.codec import decode_message


@pytest.fixture
def floors(tmp_path):
    started: list[FloorProcess] = []

    def start(mode: str, slave: FloorProcess | None = None) -> FloorProcess:
        floor = FloorProcess(tmp_path / mode, mode, slave).start()
        started.append(floor)
        return floor

    yield start
    for floor in reversed(started):
        floor.stop()


def _producer(mode: str, endpoint: str, timeout_s: float) -> AsyncProducer | AsyncRemotingProducer:
    """The producer the floor's mode serves: RocketMQ 5's gRPC client API or remoting."""
    if mode in GRPC_API_MODES:
        return AsyncProducer(endpoint, timeout_s=timeout_s)
    return AsyncRemotingProducer(endpoint, timeout_s=timeout_s)


def _held(floor: FloorProcess) -> bytes:
    """The bodies a floor's file holds, back to back: the file itself, or with the broker's work
    the bodies of the CommitLog records in it."""
    data = (floor.base / "floor.log").read_bytes()
    if floor.mode not in (*WORK_MODES, SLAVE_MODES["replicated-work"]):
        return data
    bodies, pos = [], 0
    while pos < len(data):
        message = decode_message(data, pos, pos)
        bodies.append(message.body)
        pos += message.store_size
    return b"".join(bodies)


async def _produce(endpoint: str, bodies: list[bytes]):
    async with AsyncRemotingProducer(endpoint, timeout_s=10) as producer:
        singles = [await producer.send("Floor", body) for body in bodies[:-4]]
        batch = await producer.send_batch("Floor", [ProducerMessage(body) for body in bodies[-4:]])
    return singles + batch


@pytest.mark.parametrize("mode", ["answer", "fdatasync"])
def test_the_floor_answers_each_send_with_its_offset(floors, mode):
    floor = floors(mode)
    bodies = [f"message {i:03d}".encode() for i in range(20)]
    results = asyncio.run(_produce(floor.endpoint, bodies))
    assert [r.status.name for r in results] == ["SEND_OK"] * 20
    starts = [sum(len(b) for b in bodies[:i]) for i in range(20)]
    assert [r.commit_log_offset for r in results] == starts
    if mode == "fdatasync":
        assert (floor.base / "floor.log").read_bytes() == b"".join(bodies)


@pytest.mark.parametrize("mode", sorted(SLAVE_MODES))
def test_a_replicated_send_is_answered_once_master_and_slave_hold_it(floors, mode):
    slave = floors(SLAVE_MODES[mode])
    master = floors(mode, slave)
    bodies = [bytes([65 + i % 26]) * (100 + i) for i in range(30)]

    async def each_answer_finds_its_bytes_on_both_sides() -> list[str]:
        seen = []
        async with _producer(mode, master.endpoint, 10) as producer:
            for i, body in enumerate(bodies):
                result = await producer.send("Floor", body)
                held = b"".join(bodies[: i + 1])
                # Read at the moment of the answer: what was acknowledged is already there.
                assert _held(master) == held
                assert _held(slave) == held
                seen.append(result.status.name)
        return seen

    assert asyncio.run(each_answer_finds_its_bytes_on_both_sides()) == ["SEND_OK"] * 30


@pytest.mark.parametrize("mode", sorted(SLAVE_MODES))
def test_a_replicated_send_waits_for_a_stopped_slave(floors, mode):
    slave = floors(SLAVE_MODES[mode])
    master = floors(mode, slave)
    assert slave.proc is not None

    async def send_while_the_slave_is_stopped() -> str:
        async with _producer(mode, master.endpoint, 30) as producer:
            await producer.send("Floor", b"before")  # the route is known and the stream is up
            os.kill(slave.proc.pid, signal.SIGSTOP)
            try:
                sending = asyncio.ensure_future(producer.send("Floor", b"while stopped"))
                # Its own disk is quick: an answer within a second would be one without the slave.
                done, _ = await asyncio.wait({sending}, timeout=1.0)
                assert not done, "answered while the slave could not have acknowledged"
            finally:
                os.kill(slave.proc.pid, signal.SIGCONT)
            return (await asyncio.wait_for(sending, 10)).status.name

    assert asyncio.run(send_while_the_slave_is_stopped()) == "SEND_OK"
    assert _held(slave) == b"beforewhile stopped"
