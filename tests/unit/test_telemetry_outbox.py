"""`rocketstore.broker.telemetry.Outbox`: what waits to go down one Telemetry stream is bounded; a
stream that lets it fill is dropped."""

from __future__ import annotations

import asyncio

from rocketstore.broker.telemetry import Outbox
from wire.rpc import messaging_pb2 as pb


def command(size: int) -> pb.TelemetryCommand:
    return pb.TelemetryCommand(status=pb.Status(code=pb.OK, message="x" * size))


def test_the_outbox_holds_a_bounded_count_and_size_then_drops_the_stream():
    async def body():
        outbox = Outbox(max_commands=3, max_bytes=1000)
        assert all(outbox.offer(command(10)) for _ in range(3))
        assert (await outbox.next()).status.message == "x" * 10
        assert outbox.offer(command(10)) and len(outbox) == 3
        assert not outbox.offer(command(10))  # a fourth waiting: the client does not read
        assert outbox.overflowed and len(outbox) == 0  # what waited is let go
        assert await outbox.next() is None
        assert not outbox.offer(command(10))  # dropped for good

    asyncio.run(body())


def test_one_command_of_any_size_fits_an_empty_outbox_and_bytes_count_too():
    async def body():
        outbox = Outbox(max_commands=10, max_bytes=1000)
        assert outbox.offer(command(5000))  # a check-back's message may be large
        assert not outbox.offer(command(10)) and outbox.overflowed
        outbox = Outbox(max_commands=10, max_bytes=1000)
        assert outbox.offer(command(600))
        assert (await outbox.next()) is not None  # sent: its bytes no longer count
        assert outbox.offer(command(600)) and not outbox.offer(command(600))

    asyncio.run(body())


def test_an_ended_stream_sends_what_waits_then_ends():
    async def body():
        empty = Outbox()
        waiter = asyncio.ensure_future(empty.next())  # nothing to send: it waits for the end
        empty.end()
        assert await waiter is None
        outbox = Outbox()
        outbox.offer(command(1))
        outbox.end()
        assert await outbox.next() is not None
        assert await outbox.next() is None
        assert not outbox.offer(command(1))

    asyncio.run(body())
