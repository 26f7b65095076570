"""A remoting server that keeps nothing: the floor under any put path written in Python here.

`python -m bench.vs_redis --floor` runs it beside Redis and the brokers, driven by the same
producers, to answer one question with a measurement instead of an estimate: how fast can a
single Python process on this machine answer RocketMQ's SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE
at all? Whatever a broker adds (the CommitLog, the ConsumeQueue, replication to a slave) comes on
top of this, so where the floor is below Redis primary + replica, no put path in Python with
this front end reaches Redis in that cell.

It does what any front end must and nothing else, with the project's own codec
(`wire.remoting`) on the event loop a broker uses (`rocketstore.broker.event_loop`):

- decode each frame and its JSON header, and a send's properties (a batch: its body's messages);
- answer GET_ROUTEINFO_BY_TOPIC with one broker and four queues, so that the producers run
  unchanged;
- answer each send SUCCESS with a message id per message and a queue offset.

Modes:

- `answer`: the answer goes out at once; nothing is written.
- `fdatasync`: the sends' bodies are written to one file and `fdatasync`ed once per turn of the
  loop, for every send that arrived in that turn, before their answers go out: a single thread's
  group commit, as Redis does before it goes back to waiting for sockets. No replication.
- `replicated`: each turn's bytes go to a `slave`-mode process over one gRPC bidirectional
  stream (`grpc.aio` on the same loop; raw bytes, no protobuf; one message per turn, or
  everything queued while the last write was in flight) and to the file here. On both sides one
  `fdatasync` at a time runs on a worker thread and covers everything written before it began;
  the slave answers the end offset it has flushed (8 bytes, big-endian). A send is answered once
  its bytes are flushed here and the slave's answer covers them: SYNC_MASTER + SYNC_FLUSH's wait.
- `replicated-tcp`: the same over one plain TCP connection (asyncio on both sides; the bytes as
  they are, the slave's answers 8 bytes each), as RocketMQ's own HA service replicates, with
  both sides flushing on their loop's thread. RocketStore replicates over gRPC; this mode
  measures what that choice costs.
- `grpc-api`: `replicated` behind RocketMQ 5's gRPC client API instead of remoting: a `grpc.aio`
  `apache.rocketmq.v2.MessagingService` on the loop answers QueryRoute (one broker, this
  process), Heartbeat, Telemetry's settings and NotifyClientTermination as a broker does, and
  SendMessage after decoding each message with the broker's own conversion
  (`v2_messages.send_item`: properties, keys, digests); the bodies are kept, flushed and
  replicated as in `replicated`, and each send answered once both cover it. The bar of the
  gRPC API: our `client.Producer` and the official RocketMQ 5 clients drive it unchanged.
- `replicated-work` and `grpc-api-work`: `replicated` and `grpc-api` doing the per-message work a
  broker's guarantees ask, with the broker's own functions (`bench.work_floor`: CommitLog records,
  producer ids, dispatch, each chunk's CRC-32C and MAC, the slave's checks); the file holds
  CommitLog records. The bar under any broker that keeps those guarantees on this stack.

Where each side flushes (on the loop's thread, or on a worker thread beside it) is the faster
of the two for that transport, as measured in runs of `bench.vs_redis --floor` with each in
turn.

Run as a child process (`python -m bench.front_end_floor --mode M --dir D --port-file F`, and
`--slave HOST:PORT` for the replicated modes, `grpc-api` among them): it listens on 127.0.0.1, port 0, and writes the
port to F when it listens. One thread runs the loop (gRPC adds its own); not a broker, and nothing in the
product uses it.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import struct
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc

from bench.work_floor import WorkMaster, WorkSlave
from client.endpoint import parse_endpoint
from rocketstore.broker.core.routes import RouteBroker
from rocketstore.broker.event_loop import new_event_loop
from rocketstore.broker.v2_messages import OK, peer_host, route_message_queues, send_item, settings_reply
from store.message import with_queue_id
from store.metadata.topic_config import TopicConfig
from wire.generic_handlers import generic_only
from wire.remoting import (
    SEND_V2_FIELDS,
    FrameDecoder,
    RemotingCommand,
    RemotingProtocolError,
    RequestCode,
    ResponseCode,
    decode_batch_body,
    encode,
    string_to_properties,
)
from wire.rpc import messaging_pb2 as pb
from wire.rpc import messaging_pb2_grpc

MODES = ("answer", "fdatasync", "replicated", "replicated-tcp", "grpc-api", "replicated-work", "grpc-api-work")
# A replicated mode's master, and the mode of the slave it replicates to.
SLAVE_MODES = {
    "replicated": "slave",
    "replicated-tcp": "slave-tcp",
    "grpc-api": "slave",
    "replicated-work": "slave-work",
    "grpc-api-work": "slave-work",
}
# The modes that do a broker's per-message work (bench/work_floor.py).
WORK_MODES = ("replicated-work", "grpc-api-work")
# The modes whose producers speak RocketMQ 5's gRPC client API (the others: remoting).
GRPC_API_MODES = ("grpc-api", "grpc-api-work")
REPLICA_METHOD = "/floor.Replica/Stream"
_OFFSET = struct.Struct(">q")
QUEUES = 4
_ROUTE = json.dumps(
    {
        "queueDatas": [
            {"brokerName": "floor", "readQueueNums": QUEUES, "writeQueueNums": QUEUES, "perm": 6, "topicSysFlag": 0}
        ],
        "brokerDatas": [{"cluster": "floor", "brokerName": "floor", "brokerAddrs": {"0": "127.0.0.1:0"}}],
    }
).encode()
_SENDS = (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE)


class _LoopFlusher:
    """Group commit beside one loop: the loop writes and counts the bytes (`wrote`); one
    `fdatasync` at a time runs on a worker thread, covering everything written before it began,
    and `on_flushed(offset)` runs on the loop after each."""

    def __init__(self, fd: int, on_flushed) -> None:
        self.fd = fd
        self.written = 0
        self.flushed = 0
        self._on_flushed = on_flushed
        self._running = False
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="floor-flush")

    def wrote(self, count: int) -> None:
        self.written += count
        if not self._running:
            self._start()

    def _start(self) -> None:
        self._running = True
        target = self.written
        done = asyncio.get_running_loop().run_in_executor(self._executor, os.fdatasync, self.fd)
        done.add_done_callback(lambda future: self._done(target, future))

    def _done(self, target: int, future: asyncio.Future) -> None:
        future.result()
        self._running = False
        self.flushed = target
        self._on_flushed(target)
        if self.written > self.flushed:
            self._start()


class _GrpcStream:
    """`replicated`: the master's end of the gRPC stream. One write at a time (grpc.aio's rule),
    of everything queued while the last one was in flight."""

    def __init__(self, call: grpc.aio.StreamStreamCall, wrap: Callable[[bytes], bytes] | None = None) -> None:
        self.call = call
        self._wrap = wrap
        self._outgoing: list[bytes] = []
        self._ready = asyncio.Event()

    def send(self, data: bytes) -> None:
        self._outgoing.append(data)
        self._ready.set()

    async def run(self) -> None:
        while True:
            await self._ready.wait()
            self._ready.clear()
            data, self._outgoing = b"".join(self._outgoing), []
            await self.call.write(data if self._wrap is None else self._wrap(data))


Answer = Callable[[], None]


class FloorServer:
    """The state of one floor process: the next offsets, the turn's pending bodies and answers,
    and with a slave the answers waiting for the flush and the slave's acknowledgement. A front
    end hands each send's bodies over with `take`, and the call that answers it."""

    def __init__(
        self,
        mode: str,
        fd: int | None,
        send_to_slave: Callable[[bytes], None] | None = None,
        work: WorkMaster | None = None,
    ) -> None:
        self.mode = mode
        self.work = work
        self.fd = fd
        self.next_offset = 0
        self.queue_offsets = [0] * QUEUES
        self._bodies: list[bytes] = []
        self._answers: list[Answer] = []
        self._turn_scheduled = False
        # With a slave, answers wait here in offset order until flushed and acknowledged.
        self._send_to_slave = send_to_slave
        self._waiting: list[tuple[int, Answer]] = []
        self._flushed = 0
        self._acked = 0
        self._flusher = _LoopFlusher(fd, self.flushed) if fd is not None and mode in _FLUSH_BESIDE else None

    def place(self, bodies: list[bytes], queue_id: int) -> tuple[list[int], int]:
        """Where a send's bodies go: each one's offset, and the queue offset of the first."""
        offset, queue_offset = self.place_records(sum(map(len, bodies)), len(bodies), queue_id)
        offsets = []
        for body in bodies:
            offsets.append(offset)
            offset += len(body)
        return offsets, queue_offset

    def place_records(self, size: int, count: int, queue_id: int) -> tuple[int, int]:
        """Where `count` messages of `size` bytes in all go (the first's offset), and the first's
        queue offset."""
        offset = self.next_offset
        self.next_offset += size
        queue_offset = self.queue_offsets[queue_id]
        self.queue_offsets[queue_id] += count
        return offset, queue_offset

    def take(self, bodies: list[bytes], answer: Answer) -> None:
        """A send's bodies: `answer()` runs once the mode's durability covers them."""
        if self.mode == "answer":
            answer()
            return
        self._bodies.extend(bodies)
        self._answers.append(answer)
        if not self._turn_scheduled:
            self._turn_scheduled = True
            asyncio.get_running_loop().call_soon(self._end_of_turn)

    def handle(self, transport: asyncio.Transport, request: RemotingCommand) -> None:
        if request.code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
            transport.write(encode(request.answer(ResponseCode.SUCCESS, body=_ROUTE)))
            return
        if request.code not in _SENDS:
            transport.write(encode(request.answer(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, "the floor only sends")))
            return
        fields = request.ext_fields
        if request.code != RequestCode.SEND_MESSAGE:
            fields = {SEND_V2_FIELDS.get(k, k): v for k, v in fields.items()}
        queue_id = int(fields.get("queueId", "0")) % QUEUES
        if self.work is not None:
            records, answer_fields = self.work.records(request, fields, queue_id, self.place_records)
            frame = encode(request.answer(ResponseCode.SUCCESS, None, answer_fields))
            self.take([records], functools.partial(_write, transport, frame))
            return
        if request.code == RequestCode.SEND_BATCH_MESSAGE:
            bodies = [item.body for item in decode_batch_body(request.body)]
        else:
            string_to_properties(fields.get("properties", ""))
            bodies = [request.body]
        offsets, queue_offset = self.place(bodies, queue_id)
        answer = request.answer(
            ResponseCode.SUCCESS,
            None,
            {
                "msgId": ",".join(f"7F00000100000000{offset:016X}" for offset in offsets),
                "queueId": str(queue_id),
                "queueOffset": str(queue_offset),
            },
        )
        self.take(bodies, functools.partial(_write, transport, encode(answer)))

    def _end_of_turn(self) -> None:
        """Runs after the turn's reads: one write and one `fdatasync` for all of them, on this
        thread as Redis does before it waits for sockets again. With a slave the bytes go to
        replication first. Over TCP they are in the socket before the flush starts, so both disks
        work at once. grpc.aio sends only when the loop runs again, so over gRPC the flush runs
        on a worker thread instead, and the message goes out while it does."""
        self._turn_scheduled = False
        bodies, answers = self._bodies, self._answers
        self._bodies, self._answers = [], []
        assert self.fd is not None
        data = b"".join(bodies)
        if self._send_to_slave is not None:
            self._send_to_slave(data)
        os.write(self.fd, data)
        if self._send_to_slave is None:
            os.fdatasync(self.fd)
            _answer_all(answers)
            return
        self._waiting.extend((self.next_offset, answer) for answer in answers)
        if self._flusher is not None:
            self._flusher.wrote(len(data))
            return
        os.fdatasync(self.fd)
        self.flushed(self.next_offset)

    def flushed(self, offset: int) -> None:
        self._flushed = offset
        self._release()

    def acknowledged(self, offset: int) -> None:
        self._acked = max(self._acked, offset)
        self._release()

    def _release(self) -> None:
        durable = min(self._flushed, self._acked)
        waiting = self._waiting
        done = 0
        while done < len(waiting) and waiting[done][0] <= durable:
            done += 1
        if done:
            _answer_all([answer for _, answer in waiting[:done]])
            del waiting[:done]


# The modes that flush on a worker thread beside the loop (the gRPC-replicated ones).
_FLUSH_BESIDE = ("replicated", "grpc-api", *WORK_MODES)


def _write(transport: asyncio.Transport, frame: bytes) -> None:
    if not transport.is_closing():
        transport.write(frame)


def _answer_all(answers: list[Answer]) -> None:
    for answer in answers:
        answer()


class FloorMessaging(messaging_pb2_grpc.MessagingServiceServicer):
    """`grpc-api`: the calls a producer makes, answered as a broker answers them, with nothing
    kept but the bodies (`FloorServer`)."""

    def __init__(self, server: FloorServer) -> None:
        self._server = server
        self.endpoint = ""  # this process's HOST:PORT, named in its routes; set once it listens
        self._topic = TopicConfig("floor", read_queue_nums=QUEUES, write_queue_nums=QUEUES)
        self._next_queue = 0

    async def QueryRoute(self, request: pb.QueryRouteRequest, context) -> pb.QueryRouteResponse:
        broker = RouteBroker("floor", 0, self.endpoint, self._topic, read_only=False)
        return pb.QueryRouteResponse(status=OK, message_queues=route_message_queues(request.topic, [broker]))

    async def Heartbeat(self, request: pb.HeartbeatRequest, context) -> pb.HeartbeatResponse:
        return pb.HeartbeatResponse(status=OK)

    async def NotifyClientTermination(self, request, context) -> pb.NotifyClientTerminationResponse:
        return pb.NotifyClientTerminationResponse(status=OK)

    async def Telemetry(self, request_iterator, context):
        async for command in request_iterator:
            if command.WhichOneof("command") == "settings":
                settings = settings_reply(
                    command.settings,
                    max_body_size=4 << 20,
                    long_polling_ms=20_000,
                    max_attempts=17,
                    retry_delays_ms=(),
                )
                yield pb.TelemetryCommand(status=OK, settings=settings)

    async def SendMessage(self, request: pb.SendMessageRequest, context) -> pb.SendMessageResponse:
        born_host = peer_host(context.peer()) or ("127.0.0.1", 0)
        now = int(time.time() * 1000)
        items = [send_item(message, born_host, now) for message in request.messages]
        queue_id = self._next_queue
        self._next_queue = (queue_id + 1) % QUEUES
        work = self._server.work
        if work is not None:
            messages = [with_queue_id(item.message, queue_id) for item in items]
            records, offsets, queue_offset, _ = work.encode(messages, queue_id, self._server.place_records, now)
            kept = [records]
        else:
            kept = [item.message.body for item in items]
            offsets, queue_offset = self._server.place(kept, queue_id)
        entries = [
            pb.SendResultEntry(
                status=OK,
                message_id=item.client_id,
                offset=queue_offset + i,
                queue_id=queue_id,
                commit_log_offset=offsets[i],
            )
            for i, item in enumerate(items)
        ]
        durable: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._server.take(kept, functools.partial(_settle, durable))
        await durable
        return pb.SendMessageResponse(status=OK, entries=entries)


def _settle(future: asyncio.Future) -> None:
    if not future.done():  # the caller may have gone (a cancelled call)
        future.set_result(None)


class _Connection(asyncio.Protocol):
    def __init__(self, server: FloorServer) -> None:
        self._server = server
        self._decoder = FrameDecoder()
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        assert self._transport is not None
        try:
            commands = self._decoder.feed(data)
        except RemotingProtocolError:
            self._transport.close()
            return
        for command in commands:
            self._server.handle(self._transport, command)


def _announce(port_file: Path, port: int) -> None:
    partial = port_file.with_suffix(".partial")
    partial.write_text(str(port))
    partial.replace(port_file)


async def _serve(mode: str, fd: int | None, port_file: Path, slave: str | None) -> None:
    loop = asyncio.get_running_loop()
    if mode not in SLAVE_MODES:
        server = FloorServer(mode, fd)
        listener = await loop.create_server(lambda: _Connection(server), "127.0.0.1", 0)
        _announce(port_file, listener.sockets[0].getsockname()[1])
        await listener.serve_forever()
        return
    assert slave is not None
    if mode in _FLUSH_BESIDE:
        call = grpc.aio.insecure_channel(slave).stream_stream(REPLICA_METHOD)()
        if mode in WORK_MODES:
            work = WorkMaster()
            stream = _GrpcStream(call, work.wrap)
            work.stream_to(stream.send)
            server = FloorServer(mode, fd, work.queue, work)
            acks = (work.report(report) async for report in stream.call)
        else:
            stream = _GrpcStream(call)
            server = FloorServer(mode, fd, stream.send)
            acks = (_OFFSET.unpack(ack)[0] async for ack in stream.call)
        sender = loop.create_task(stream.run())
        sender.add_done_callback(lambda task: task.cancelled() or task.result())
    else:
        target = parse_endpoint(slave)
        reader, writer = await asyncio.open_connection(target.host, target.port)
        writer.transport.set_write_buffer_limits(high=64 << 20)
        server = FloorServer(mode, fd, writer.transport.write)
        acks = _tcp_acks(reader)
    api = None  # held: the gRPC API server lives as long as this call
    if mode in GRPC_API_MODES:
        api, port = await _serve_grpc_api(server)
        _announce(port_file, port)
    else:
        listener = await loop.create_server(lambda: _Connection(server), "127.0.0.1", 0)
        _announce(port_file, listener.sockets[0].getsockname()[1])
    async for offset in acks:
        server.acknowledged(offset)
    if api is not None:
        await api.stop(None)


async def _serve_grpc_api(server: FloorServer) -> tuple[grpc.aio.Server, int]:
    """The client API of `grpc-api` on this loop, and its port."""
    messaging = FloorMessaging(server)
    api = grpc.aio.server()
    messaging_pb2_grpc.add_MessagingServiceServicer_to_server(messaging, generic_only(api))
    port = api.add_insecure_port("127.0.0.1:0")
    messaging.endpoint = f"127.0.0.1:{port}"
    await api.start()
    return api, port


async def _tcp_acks(reader: asyncio.StreamReader):
    while True:
        data = await reader.read(65536)
        if not data:
            return
        while len(data) % _OFFSET.size:
            data += await reader.readexactly(_OFFSET.size - len(data) % _OFFSET.size)
        yield _OFFSET.unpack_from(data, len(data) - _OFFSET.size)[0]


async def _serve_slave(fd: int, port_file: Path, work: WorkSlave | None = None) -> None:
    """The slave's side of `replicated`: write each message as it comes, flush on a worker thread
    (group commit), answer the flushed end. grpc.aio hands over one message at a time, so a flush
    on the loop's thread would cost one `fdatasync` per message; here the messages that arrive
    during a flush share the next one. With `work` (`replicated-work`), each message is a chunk
    checked before it is written and dispatched after, and each answer a sealed report."""

    async def stream(chunks, context):
        acks: asyncio.Queue[int] = asyncio.Queue()
        flusher = _LoopFlusher(fd, acks.put_nowait)

        async def take() -> None:
            async for chunk in chunks:
                if work is None:
                    os.write(fd, chunk)
                    flusher.wrote(len(chunk))
                    continue
                data, start_offset = work.take(chunk)
                os.write(fd, data)
                flusher.wrote(len(data))
                work.dispatch(data, start_offset)

        taker = asyncio.get_running_loop().create_task(take())
        try:
            while True:
                end = await acks.get()
                while not acks.empty():
                    end = acks.get_nowait()
                yield _OFFSET.pack(end) if work is None else work.report(end)
        finally:
            taker.cancel()

    server = grpc.aio.server()
    handler = grpc.stream_stream_rpc_method_handler(stream)
    service, method = REPLICA_METHOD.strip("/").split("/")
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, {method: handler}),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    _announce(port_file, port)
    await server.wait_for_termination()


class _TcpSlave(asyncio.Protocol):
    """The slave's side of `replicated-tcp`: whatever the socket holds is written and flushed on
    the loop's thread, then its end is answered. A read takes everything that arrived meanwhile,
    so one `fdatasync` covers it all (a flush thread measured slower here)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.transport: asyncio.Transport | None = None
        self.flushed = 0

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        os.write(self.fd, data)
        os.fdatasync(self.fd)
        self.flushed += len(data)
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(_OFFSET.pack(self.flushed))


async def _serve_tcp_slave(fd: int, port_file: Path) -> None:
    listener = await asyncio.get_running_loop().create_server(lambda: _TcpSlave(fd), "127.0.0.1", 0)
    _announce(port_file, listener.sockets[0].getsockname()[1])
    await listener.serve_forever()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.front_end_floor", description=__doc__.splitlines()[0])
    p.add_argument("--mode", choices=MODES + tuple(SLAVE_MODES.values()), required=True)
    p.add_argument("--dir", type=Path, required=True, help="where the modes that write keep their file")
    p.add_argument("--port-file", type=Path, required=True, help="written with the port once listening")
    p.add_argument("--slave", help="the replicated modes: the slave process's HOST:PORT")
    args = p.parse_args(argv)
    if args.mode in SLAVE_MODES and not args.slave:
        p.error(f"--mode {args.mode} needs --slave HOST:PORT")
    fd = None
    if args.mode != "answer":
        args.dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(args.dir / "floor.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    loop = new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        if args.mode in ("slave", "slave-work"):
            assert fd is not None
            work = WorkSlave() if args.mode == "slave-work" else None
            loop.run_until_complete(_serve_slave(fd, args.port_file, work))
        elif args.mode == "slave-tcp":
            assert fd is not None
            loop.run_until_complete(_serve_tcp_slave(fd, args.port_file))
        else:
            loop.run_until_complete(_serve(args.mode, fd, args.port_file, args.slave))
    except KeyboardInterrupt:
        pass
    finally:
        loop.close()
        if fd is not None:
            os.close(fd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
