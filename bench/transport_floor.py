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

from bench.common import environment, progress

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
        switches = 0
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                status = (task / "status").read_text()
            except OSError:  # the thread ended between the listing and the read
                continue
            switches += sum(int(line.split()[1]) for line in status.splitlines() if "ctxt_switches:" in line)
        return cls(cpu_s, switches)

    def __sub__(self, other: Usage) -> Usage:
        return Usage(self.cpu_s - other.cpu_s, self.switches - other.switches)


@dataclass
class Case:
    name: str
    latencies_s: list[float]
    client: Usage
    server: Usage | None

    def row(self) -> str:
        n = len(self.latencies_s)
        ordered = sorted(self.latencies_s)
        p50 = ordered[n // 2] * 1e6 if n else 0.0
        p99 = ordered[min(n - 1, int(n * 0.99))] * 1e6 if n else 0.0
        side = f"caller {self.client.cpu_s / max(n, 1) * 1e6:5.0f} us {self.client.switches / max(n, 1):5.1f} sw"
        if self.server is not None:
            side += (
                f"   server {self.server.cpu_s / max(n, 1) * 1e6:5.0f} us {self.server.switches / max(n, 1):5.1f} sw"
            )
        return f"  {self.name:<16} {n:>8,} round trips  p50 {p50:6.0f} us  p99 {p99:6.0f} us   per round trip: {side}"


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


def _echo_sync(request_iterator: Iterator[bytes], context) -> Iterator[bytes]:
    # As the master's replication server: a reader thread takes the requests, the response
    # generator (on gRPC's pool thread) sends.
    cond = threading.Condition()
    pending: list[bytes | None] = []

    def read() -> None:
        try:
            for request in request_iterator:
                with cond:
                    pending.append(request)
                    cond.notify()
        except grpc.RpcError:
            pass
        with cond:
            pending.append(None)
            cond.notify()

    threading.Thread(target=read, name="reader", daemon=True).start()
    while True:
        with cond:
            while not pending:
                cond.wait()
            item = pending.pop(0)
        if item is None:
            return
        yield item


async def _echo_aio(request_iterator, context):
    async for request in request_iterator:
        yield request


def _handlers(behaviour) -> grpc.GenericRpcHandler:
    return grpc.method_handlers_generic_handler(_SERVICE, {"Echo": grpc.stream_stream_rpc_method_handler(behaviour)})


def serve(kind: str) -> None:
    """The child's side: print the port, serve until stdin closes."""
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

    _new_loop().run_until_complete(main())


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class Child:
    def __init__(self, kind: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.transport_floor", "--serve", kind],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
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
    cond = threading.Condition()
    outgoing: list[bytes | None] = []

    def requests() -> Iterator[bytes]:
        while True:
            with cond:
                while not outgoing:
                    cond.wait()
                item = outgoing.pop(0)
            if item is None:
                return
            yield item

    with grpc.insecure_channel(f"127.0.0.1:{child.port}") as channel:
        replies = channel.stream_stream(_METHOD)(requests())

        def step() -> None:
            with cond:
                outgoing.append(payload)
                cond.notify()
            next(replies)

        before, server_before = Usage.own(), Usage.of(child.process.pid)
        latencies = _timed(step, seconds, limit)
        used, server_used = Usage.own() - before, Usage.of(child.process.pid) - server_before
        with cond:
            outgoing.append(None)
            cond.notify()
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

    loop = _new_loop()
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
    p.add_argument("--serve", choices=("grpc-sync", "grpc-aio", "tcp"), help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.serve:
        serve(args.serve)
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
            if run is None:
                cases.append(tcp_case(child, payload, args.seconds, args.max_round_trips))
            else:
                cases.append(run(name, child, payload, args.seconds, args.max_round_trips))
        finally:
            child.stop()
    print("\nOne caller, one message in flight (caller/server for gRPC):")
    for case in cases:
        print(case.row())
    print(f"  load after   {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
