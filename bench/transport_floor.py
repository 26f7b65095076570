"""What one hand-off costs on this machine (`python -m bench.transport_floor`): the floor under
the put path's latency and CPU, measured without the broker.

A SYNC_MASTER put crosses threads and processes: the remoting loop, the replication sender, gRPC's
own threads, the slave's replicator, the report back. This prints the price of each kind of
crossing, one echo at a time (one caller, the put path's worst case for batching):

- `threads`: two Python threads passing a token back and forth with `threading.Event`.
- `grpc sync/sync`, `grpc sync/aio`, `grpc aio/aio`: a bidirectional gRPC stream echoing
  `--size`-byte messages between this process (the client: sync stub with a request thread, or
  `grpc.aio`) and a child process (the server: a sync `grpc.server` whose response generator is fed
  by a reader thread, as the master's replication server is, or a `grpc.aio` server).
- `tcp asyncio`: the same echo over a plain TCP connection, asyncio on both ends (uvloop when
  installed), length-prefixed frames: what the transport itself costs without gRPC.
- `master threads`, `master one loop` (and `... /aio slave`): the master's shape. This process is
  the gRPC server and a child connects to it as a slave does and answers each message with a
  report. A "put" on this process's event loop (uvloop) hands a message to the stream and waits
  for the report. `master threads` is today's master: the put wakes the response generator on
  gRPC's pool thread, a reader thread takes the report and hands it back to the loop with
  `call_soon_threadsafe`. `master one loop` serves the stream with `grpc.aio` on the put's own
  loop, so neither hand-off crosses a thread. The slave is a sync stub fed by a request thread
  (today's slave) or `grpc.aio`.

Per case: round trips, p50/p99 latency, and per round trip the CPU time and context switches of
each side (`getrusage` for this process, `/proc/PID` for the child). Each case runs for
`--seconds` after a short warm-up, at most `--max-round-trips`. Servers listen on 127.0.0.1 only.
Nothing here is asserted: compare the figures with a put's (`bench.vs_redis` prints CPU time and
context switches per message too).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path

import grpc

from bench.common import context_switches, environment, progress
from rocketstore.broker.event_loop import new_event_loop

_SERVICE = "rocketstore.bench.Echo"
_METHOD = f"/{_SERVICE}/Echo"
_FRAME = struct.Struct(">i")
_WARM_UP_S = 0.5


# -- readings ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Usage:
    cpu_s: float
    switches: int

    @classmethod
    def own(cls) -> Usage:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return cls(r.ru_utime + r.ru_stime, r.ru_nvcsw + r.ru_nivcsw)

    @classmethod
    def of(cls, pid: int) -> Usage:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        cpu_s = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return cls(cpu_s, context_switches(pid))

    def __sub__(self, other: Usage) -> Usage:
        return Usage(self.cpu_s - other.cpu_s, self.switches - other.switches)


@dataclass
class Case:
    name: str
    latencies_s: list[float]
    client: Usage
    server: Usage | None
    sides: tuple[str, str] = ("caller", "server")

    def row(self) -> str:
        n = len(self.latencies_s)
        ordered = sorted(self.latencies_s)
        p50 = ordered[n // 2] * 1e6 if n else 0.0
        p99 = ordered[min(n - 1, int(n * 0.99))] * 1e6 if n else 0.0
        here, there = self.sides
        side = f"{here} {self.client.cpu_s / max(n, 1) * 1e6:5.0f} us {self.client.switches / max(n, 1):5.1f} sw"
        if self.server is not None:
            side += (
                f"   {there} {self.server.cpu_s / max(n, 1) * 1e6:5.0f} us {self.server.switches / max(n, 1):5.1f} sw"
            )
        return f"  {self.name:<24} {n:>8,} round trips  p50 {p50:6.0f} us  p99 {p99:6.0f} us   per round trip: {side}"


def _timed(step: Callable[[], None], seconds: float, limit: int) -> list[float]:
    """`step` repeated for a warm-up, then measured for `seconds` (at most `limit` times)."""
    warm_until = time.monotonic() + _WARM_UP_S
    while time.monotonic() < warm_until:
        step()
    latencies: list[float] = []
    stop_at = time.monotonic() + seconds
    while time.monotonic() < stop_at and len(latencies) < limit:
        began = time.perf_counter()
        step()
        latencies.append(time.perf_counter() - began)
    return latencies


async def _timed_async(step, seconds: float, limit: int) -> list[float]:
    warm_until = time.monotonic() + _WARM_UP_S
    while time.monotonic() < warm_until:
        await step()
    latencies: list[float] = []
    stop_at = time.monotonic() + seconds
    while time.monotonic() < stop_at and len(latencies) < limit:
        began = time.perf_counter()
        await step()
        latencies.append(time.perf_counter() - began)
    return latencies


# -- threads ----------------------------------------------------------------------------------------


def thread_case(seconds: float, limit: int) -> Case:
    ping, pong = threading.Event(), threading.Event()
    done = False

    def other() -> None:
        while True:
            ping.wait()
            ping.clear()
            if done:
                return
            pong.set()

    helper = threading.Thread(target=other, name="pong", daemon=True)
    helper.start()

    def step() -> None:
        ping.set()
        pong.wait()
        pong.clear()

    before = Usage.own()
    latencies = _timed(step, seconds, limit)
    used = Usage.own() - before
    done = True
    ping.set()
    helper.join(5)
    return Case("threads", latencies, used, None)


# -- the servers (child processes) ------------------------------------------------------------------


class _Feed:
    """Messages handed from one thread to the generator another thread drains (a sync gRPC
    stream's request or response iterator), as the brokers hand chunks and reports over."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._items: list[bytes | None] = []

    def put(self, item: bytes | None) -> None:
        """`None` ends the generator."""
        with self._cond:
            self._items.append(item)
            self._cond.notify()

    def drain(self) -> Iterator[bytes]:
        while True:
            with self._cond:
                while not self._items:
                    self._cond.wait()
                item = self._items.pop(0)
            if item is None:
                return
            yield item


def _echo_sync(request_iterator: Iterator[bytes], context) -> Iterator[bytes]:
    # As the master's replication server: a reader thread takes the requests, the response
    # generator (on gRPC's pool thread) sends.
    feed = _Feed()

    def read() -> None:
        try:
            for request in request_iterator:
                feed.put(request)
        except grpc.RpcError:
            pass
        feed.put(None)

    threading.Thread(target=read, name="reader", daemon=True).start()
    yield from feed.drain()


async def _echo_aio(request_iterator, context):
    async for request in request_iterator:
        yield request


def _handlers(behaviour) -> grpc.GenericRpcHandler:
    return grpc.method_handlers_generic_handler(_SERVICE, {"Echo": grpc.stream_stream_rpc_method_handler(behaviour)})


def _slave_sync(port: int) -> None:
    """A slave as today's: the stream's messages read on this thread, each answered through the
    request iterator that gRPC's own thread drains."""
    feed = _Feed()
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        try:
            for chunk in channel.stream_stream(_METHOD)(feed.drain()):
                feed.put(chunk)
        except grpc.RpcError:
            pass
        feed.put(None)


async def _slave_aio(port: int) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.stream_stream(_METHOD)()
        try:
            while True:
                chunk = await call.read()
                if chunk is grpc.aio.EOF:
                    return
                await call.write(chunk)
        except grpc.RpcError:
            pass


def serve(kind: str, port: int = 0) -> None:
    """The child's side: print the port, serve until stdin closes; or, as a slave, answer the
    stream of the master at `port` until it ends."""
    if kind == "slave-sync":
        _slave_sync(port)
        return
    if kind == "slave-aio":
        new_event_loop().run_until_complete(_slave_aio(port))
        return
    if kind == "grpc-sync":
        server = grpc.server(futures.ThreadPoolExecutor(4))
        server.add_generic_rpc_handlers((_handlers(_echo_sync),))
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        print(port, flush=True)
        sys.stdin.read()
        server.stop(0)
        return

    async def main() -> None:
        if kind == "grpc-aio":
            aio_server = grpc.aio.server()
            aio_server.add_generic_rpc_handlers((_handlers(_echo_aio),))
            port = aio_server.add_insecure_port("127.0.0.1:0")
            await aio_server.start()
        else:

            async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
                try:
                    while True:
                        (size,) = _FRAME.unpack(await reader.readexactly(4))
                        writer.write(_FRAME.pack(size) + await reader.readexactly(size))
                except (asyncio.IncompleteReadError, ConnectionError):
                    writer.close()

            tcp_server = await asyncio.start_server(echo, "127.0.0.1", 0)
            port = tcp_server.sockets[0].getsockname()[1]
        print(port, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)

    new_event_loop().run_until_complete(main())


class Child:
    def __init__(self, kind: str, master_port: int = 0) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.transport_floor", "--serve", kind, "--port", str(master_port)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        if master_port:
            self.port = master_port
            return
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        if not line.isdigit():
            self.stop()
            raise RuntimeError(f"the {kind} echo server did not start (it printed {line!r})")
        self.port = int(line)

    def stop(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


# -- the callers ------------------------------------------------------------------------------------


def grpc_sync_case(name: str, child: Child, payload: bytes, seconds: float, limit: int) -> Case:
    feed = _Feed()
    with grpc.insecure_channel(f"127.0.0.1:{child.port}") as channel:
        replies = channel.stream_stream(_METHOD)(feed.drain())

        def step() -> None:
            feed.put(payload)
            next(replies)

        before, server_before = Usage.own(), Usage.of(child.process.pid)
        latencies = _timed(step, seconds, limit)
        used, server_used = Usage.own() - before, Usage.of(child.process.pid) - server_before
        feed.put(None)
        replies.cancel()
    return Case(name, latencies, used, server_used)


def grpc_aio_case(name: str, child: Child, payload: bytes, seconds: float, limit: int) -> Case:
    async def main() -> Case:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{child.port}") as channel:
            call = channel.stream_stream(_METHOD)()

            async def step() -> None:
                await call.write(payload)
                await call.read()

            before, server_before = Usage.own(), Usage.of(child.process.pid)
            latencies = await _timed_async(step, seconds, limit)
            used, server_used = Usage.own() - before, Usage.of(child.process.pid) - server_before
            call.cancel()
            return Case(name, latencies, used, server_used)

    return asyncio.run(main())


def tcp_case(child: Child, payload: bytes, seconds: float, limit: int) -> Case:
    async def main() -> Case:
        reader, writer = await asyncio.open_connection("127.0.0.1", child.port)
        frame = _FRAME.pack(len(payload)) + payload

        async def step() -> None:
            writer.write(frame)
            (size,) = _FRAME.unpack(await reader.readexactly(4))
            await reader.readexactly(size)

        before, server_before = Usage.own(), Usage.of(child.process.pid)
        latencies = await _timed_async(step, seconds, limit)
        used, server_used = Usage.own() - before, Usage.of(child.process.pid) - server_before
        writer.close()
        return Case("tcp asyncio", latencies, used, server_used)

    loop = new_event_loop()
    try:
        return loop.run_until_complete(main())
    finally:
        loop.close()


# -- the master's shape ----------------------------------------------------------------------------

_SLAVE_CONNECT_S = 10.0


class _ThreadedMaster:
    """Today's master: a put on the loop wakes the stream's response generator (on gRPC's pool
    thread); a reader thread takes each report and hands it back to the loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.feed = _Feed()
        self.waiter: asyncio.Future | None = None
        self.opened = threading.Event()

    def _answered(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def handle(self, request_iterator: Iterator[bytes], context) -> Iterator[bytes]:
        def read() -> None:
            try:
                for _ in request_iterator:
                    self.loop.call_soon_threadsafe(self._answered)
            except grpc.RpcError:
                pass

        threading.Thread(target=read, name="reports", daemon=True).start()
        self.opened.set()
        yield from self.feed.drain()

    async def put(self, payload: bytes) -> None:
        self.waiter = self.loop.create_future()
        self.feed.put(payload)
        await self.waiter

    def end(self) -> None:
        self.feed.put(None)


class _LoopMaster:
    """The stream served by `grpc.aio` on the put's own loop: no thread between the put, the
    stream and the report."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.outgoing: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.waiter: asyncio.Future | None = None
        self.opened = asyncio.Event()

    async def handle(self, request_iterator, context) -> None:
        async def read() -> None:
            async for _ in request_iterator:
                waiter = self.waiter
                if waiter is not None and not waiter.done():
                    waiter.set_result(None)

        reader = asyncio.ensure_future(read())
        self.opened.set()
        try:
            while (item := await self.outgoing.get()) is not None:
                await context.write(item)
        finally:
            reader.cancel()

    async def put(self, payload: bytes) -> None:
        self.waiter = self.loop.create_future()
        self.outgoing.put_nowait(payload)
        await self.waiter

    def end(self) -> None:
        self.outgoing.put_nowait(None)


def master_case(name: str, one_loop: bool, slave: str, payload: bytes, seconds: float, limit: int) -> Case:
    """Puts on this process's loop, each waiting for a child slave's report of its message."""
    loop = new_event_loop()

    async def main() -> Case:
        master: _ThreadedMaster | _LoopMaster
        if one_loop:
            master = _LoopMaster(loop)
            server = grpc.aio.server()
            server.add_generic_rpc_handlers((_handlers(master.handle),))
            port = server.add_insecure_port("127.0.0.1:0")
            await server.start()
        else:
            master = _ThreadedMaster(loop)
            sync_server = grpc.server(futures.ThreadPoolExecutor(4))
            sync_server.add_generic_rpc_handlers((_handlers(master.handle),))
            port = sync_server.add_insecure_port("127.0.0.1:0")
            sync_server.start()
        child = Child(slave, port)
        try:
            if isinstance(master, _LoopMaster):
                await asyncio.wait_for(master.opened.wait(), _SLAVE_CONNECT_S)
            elif not await loop.run_in_executor(None, master.opened.wait, _SLAVE_CONNECT_S):
                raise RuntimeError(f"the {slave} child did not connect within {_SLAVE_CONNECT_S:g} s")

            async def step() -> None:
                await master.put(payload)

            before, slave_before = Usage.own(), Usage.of(child.process.pid)
            latencies = await _timed_async(step, seconds, limit)
            used, slave_used = Usage.own() - before, Usage.of(child.process.pid) - slave_before
            master.end()
        finally:
            child.stop()
            if one_loop:
                await server.stop(0)
            else:
                sync_server.stop(0)
        return Case(name, latencies, used, slave_used, ("master", "slave"))

    try:
        return loop.run_until_complete(main())
    finally:
        loop.close()


# -- the run ----------------------------------------------------------------------------------------


def parse_args(argv) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.transport_floor", description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=3.0, help="measured time per case (default 3)")
    p.add_argument("--max-round-trips", type=int, default=200_000, help="round-trip bound per case")
    p.add_argument("--size", type=int, default=1100, help="bytes per message (default 1100: a 1 KiB record)")
    p.add_argument(
        "--serve", choices=("grpc-sync", "grpc-aio", "tcp", "slave-sync", "slave-aio"), help=argparse.SUPPRESS
    )
    p.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.serve:
        serve(args.serve, args.port)
        return 0
    print("Hand-off costs on this machine (bench/transport_floor.py)")
    for key, value in environment(Path.cwd()).items():
        if key in ("started", "git", "python", "machine"):
            print(f"  {key:<12} {value}")
    bounds = f"{args.seconds:g} s per case, at most {args.max_round_trips:,} round trips"
    print(f"  config       {bounds}, {args.size} B messages")
    print(f"  load         {os.getloadavg()[0]:.2f} (1-minute load average before the run)")
    print("  sw           context switches (voluntary and involuntary, every thread of the process)")
    payload = os.urandom(args.size)
    cases = [thread_case(args.seconds, args.max_round_trips)]
    runs = (
        ("grpc-sync", "grpc sync/sync", grpc_sync_case),
        ("grpc-sync", "grpc aio/sync", grpc_aio_case),
        ("grpc-aio", "grpc aio/aio", grpc_aio_case),
        ("tcp", None, None),
    )
    for kind, name, run in runs:
        progress(f"  running {name or 'tcp asyncio'}")
        child = Child(kind)
        try:
            if run is None or name is None:
                cases.append(tcp_case(child, payload, args.seconds, args.max_round_trips))
            else:
                cases.append(run(name, child, payload, args.seconds, args.max_round_trips))
        finally:
            child.stop()
    masters = (
        ("master threads", False, "slave-sync"),
        ("master one loop", True, "slave-sync"),
        ("master threads/aio slave", False, "slave-aio"),
        ("master one loop/aio slave", True, "slave-aio"),
    )
    for name, one_loop, slave in masters:
        progress(f"  running {name}")
        cases.append(master_case(name, one_loop, slave, payload, args.seconds, args.max_round_trips))
    print("\nOne caller, one message in flight (caller/server for gRPC; master/slave for the master's shape):")
    for case in cases:
        print(case.row())
    print(f"  load after   {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
