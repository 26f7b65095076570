"""The master's side of replication on an event loop (haStreamOnEventLoop, the default):
`LoopReplicationServicer` serves `rocketstore.ha.v1.Replication` on a `grpc.aio` server running on
the broker's serving loop (`broker-loop`), where the puts of both client APIs run, so a put, its
chunk's send and the slave's acknowledgement hand nothing to another thread (`ReplicationServicer`
serves the same calls on a threaded `grpc.server`: a pool thread per stream sends, a second reads
the reports).

It reuses `ReplicationServicer`'s decisions, handshake, chunks, sealing, damage handling and log
lines; only the I/O differs:
- `Replicate` is a coroutine: it reads the handshake with `await context.read()`, then a reader
  task reads the reports and calls `tracker.ack` on the loop (completing the waiting puts there),
  while the handler sends: it waits on a wake flag that the tracker's new-data listener sets
  (directly on the loop's thread, through `call_soon_threadsafe` from any other), lets
  `COALESCE_LOOP_TURNS` loop turns pass so the puts that arrive meanwhile join the chunk, cuts it
  (`ReplicationServicer._steps`, the threaded sender's decisions) and writes it with
  `await context.write(chunk)`. On a SYNC_MASTER, while less than a batch (haTransferBatchSize)
  is left to send, one chunk at a time: the next goes once the slave acknowledged this one, with
  everything appended meanwhile (a backlog streams whole batches, pipelined within the window).
- The master's own flush (SYNC_FLUSH) is handed to the store's group-commit thread as each chunk
  goes out (`MessageStore.hand_flush_after_send`), never run on the loop.
- The unary calls run `ReplicationServicer`'s code (on the loop; `GetMetadata` and
  `HandBackPopEvents`, which read or write tables, on a worker thread) through a context whose
  `abort` becomes the aio call's.
- The housekeeping thread stays: it closes silent streams and ends stuck ones by cancelling their
  handler's task on the loop.

`LoopServer` builds and drives the `grpc.aio.Server` on that loop from other threads (never from
the loop's own: it waits on the loop), with the part of the `grpc.Server` interface
`ReplicationRole` uses (`add_*_port`, `start`, `stop`).

Thread-safety: every stream's state is the loop's; `stop`, `close_all` and the tracker's new-data
listener from any thread.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import grpc

from ha.peer_auth import REPORT, AuthenticationError, report_parts
from store import BrokerRole
from wire.request_guard import Malformed, MalformedRequestGuard, safe_decoder
from wire.rpc import ha_pb2

from .replication_server import IDLE_POLL_S, Do, ReplicationServicer, _Stream

log = logging.getLogger("master.replication_server")

# Loop turns the sender lets pass before it looks for new bytes, so the puts that arrive in them
# join the same chunk; and, with less than a batch to send, it sends one chunk at a time (the next
# once the slave acknowledged the last). Without either, the sender, woken by the first put of a
# turn, cut a chunk per put or two under concurrency, and the slave flushed and acknowledged each:
# through the gRPC API at 64 clients (puts on the main loop, the sender on the remoting loop) 0.72x
# of the threaded shape's rate, 0.95x with both (`bench.put_switches`, docs/benchmarks.md: "tenth
# round"). At one client neither changes anything but a few microseconds.
COALESCE_LOOP_TURNS = 3


class _Aborted(Exception):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details


class _SyncContext:
    """What the threaded servicer's unary methods use of a context, over an aio one: `abort`
    raises `_Aborted`, which the async wrapper turns into the aio call's abort."""

    def __init__(self, context: grpc.aio.ServicerContext) -> None:
        self._context = context

    def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise _Aborted(code, details)

    def invocation_metadata(self):
        return self._context.invocation_metadata()

    def peer(self) -> str:
        return self._context.peer()


class _Canceller:
    """`stream.context` for the threaded servicer's `stop` and housekeeping: `cancel` cancels the
    stream's handler task on its loop (from any thread)."""

    def __init__(self, stream: _AioStream) -> None:
        self._stream = stream

    def cancel(self) -> None:
        stream = self._stream
        task = stream.task
        if task is None:
            return
        try:
            stream.loop.call_soon_threadsafe(task.cancel)
        except RuntimeError:
            pass  # the loop is closed


class _AioStream(_Stream):
    def __init__(self, session_id: int, peer: str, call: grpc.aio.ServicerContext, now_ms: int) -> None:
        super().__init__(session_id, peer, _Canceller(self), now_ms)
        self.call = call
        self.loop = asyncio.get_running_loop()
        self.loop_thread = threading.get_ident()
        self.task: asyncio.Task | None = asyncio.current_task()
        self.flag = False  # a wake-up is due (set on the loop's thread only)
        self.waiter: asyncio.Future | None = None  # the sender's wait, while it waits
        self.in_flight = False  # a chunk went out and its ack has not come back

    def poke(self) -> None:
        """On the loop's thread: wake the sender."""
        self.flag = True
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def wake_any(self) -> None:
        """From any thread."""
        if threading.get_ident() == self.loop_thread:
            self.poke()
            return
        if self.flag:
            return  # a wake-up is due already: the sender looks for new bytes after clearing it
        try:
            self.loop.call_soon_threadsafe(self.poke)
        except RuntimeError:
            pass  # the loop is closed

    def close(self, code: grpc.StatusCode | None, reason: str, now_ms: int) -> bool:
        closed = super().close(code, reason, now_ms)
        if closed:
            self.wake_any()
        return closed


def _settle(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(None)


class LoopReplicationServicer(ReplicationServicer):
    """`ReplicationServicer` served by a `grpc.aio` server; every call runs on that server's loop."""

    # -- wiring --------------------------------------------------------------------------------

    def add_to_server(self, server: grpc.aio.Server) -> None:
        handlers = {
            "Hello": grpc.unary_unary_rpc_method_handler(
                self.Hello,
                request_deserializer=ha_pb2.HelloRequest.FromString,
                response_serializer=ha_pb2.HelloResponse.SerializeToString,
            ),
            # Reports that do not decode reach `Replicate` as stand-ins (it closes the stream).
            "Replicate": grpc.stream_stream_rpc_method_handler(
                self.Replicate,
                request_deserializer=safe_decoder(ha_pb2.SlaveReport.FromString),
                response_serializer=ha_pb2.Chunk.SerializeToString,
            ),
            "GetEpochs": grpc.unary_unary_rpc_method_handler(
                self.GetEpochs,
                request_deserializer=ha_pb2.EpochsRequest.FromString,
                response_serializer=ha_pb2.EpochsResponse.SerializeToString,
            ),
            "GetMetadata": grpc.unary_unary_rpc_method_handler(
                self.GetMetadata,
                request_deserializer=ha_pb2.MetadataRequest.FromString,
                response_serializer=ha_pb2.MetadataResponse.SerializeToString,
            ),
            "HandBackPopEvents": grpc.unary_unary_rpc_method_handler(
                self.HandBackPopEvents,
                request_deserializer=ha_pb2.PopEventsRequest.FromString,
                response_serializer=ha_pb2.PopEventsResponse.SerializeToString,
            ),
        }
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("rocketstore.ha.v1.Replication", handlers),)
        )

    def _wake_all(self) -> None:
        for stream in self._stream_list:
            stream.wake_any()  # type: ignore[attr-defined]

    # -- the unary calls: the threaded code, its aborts made the aio call's ----------------------

    async def _unary(self, method: Callable[[Any, Any], Any], request, context, *, on_thread: bool = False):
        shim = _SyncContext(context)
        try:
            if on_thread:
                return await asyncio.to_thread(method, request, shim)
            return method(request, shim)
        except _Aborted as aborted:
            await context.abort(aborted.code, aborted.details)

    async def Hello(self, request, context):
        return await self._unary(super().Hello, request, context)

    async def GetEpochs(self, request, context):
        return await self._unary(super().GetEpochs, request, context)

    async def GetMetadata(self, request, context):
        return await self._unary(super().GetMetadata, request, context, on_thread=True)

    async def HandBackPopEvents(self, request, context):
        return await self._unary(super().HandBackPopEvents, request, context, on_thread=True)

    # -- the stream ----------------------------------------------------------------------------

    async def Replicate(self, request_iterator, context):  # noqa: ARG002 - read through the context
        try:
            auth = self._authenticate(_SyncContext(context), "Replicate")
        except _Aborted as aborted:
            await context.abort(aborted.code, aborted.details)
            return
        if self._stopping.is_set():
            await context.abort(grpc.StatusCode.UNAVAILABLE, "the master is shutting down")
            return
        stream = _AioStream(next(self._ids), context.peer(), context, self._monotonic())
        stream.auth = auth
        self._track(stream)
        reader: asyncio.Task | None = None
        try:
            start = await self._aio_handshake(stream, context)
            if start is not None and stream.session is not None:
                reader = asyncio.get_running_loop().create_task(self._read_reports_aio(stream, context))
                await self._serve_aio(stream, context, start)
        except asyncio.CancelledError:
            self._close(stream, None, "the stream was cancelled")
            raise
        finally:
            if reader is not None:
                reader.cancel()
            self._finish(stream)
        code, reason = stream.closing or (None, "")
        if code is not None:
            context.set_code(code)
            context.set_details(reason)

    async def _aio_handshake(self, stream: _AioStream, context: grpc.aio.ServicerContext) -> int | None:
        try:
            report = await asyncio.wait_for(context.read(), self._housekeeping_ms / 1000)
        except asyncio.TimeoutError:
            self._close(
                stream,
                grpc.StatusCode.DEADLINE_EXCEEDED,
                f"no handshake within {self._housekeeping_ms} ms (haHousekeepingInterval)",
            )
            return None
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - the call ended under us
            log.debug("replication stream from %s: reading the handshake failed", stream.peer, exc_info=True)
            self._close(stream, None, "the stream was cancelled")
            return None
        if report is grpc.aio.EOF:
            self._close(stream, None, "the slave closed the stream")
            return None
        if isinstance(report, Malformed):
            self._close(stream, grpc.StatusCode.INVALID_ARGUMENT, f"malformed request: {report.error}")
            return None
        if not self._report_authentic(stream, report):
            return None
        stream.last_report_ms = self._monotonic()
        stream.handshake = report
        return self._handshake(stream)  # the threaded code: its wait is over at once

    def _report_authentic(self, stream: _AioStream, report: ha_pb2.SlaveReport) -> bool:
        if stream.auth is None:
            return True
        try:
            stream.auth.open(REPORT, report.mac, *report_parts(report))
        except AuthenticationError as exc:
            log.warning("replication stream from %s: %s", stream.peer, exc)
            self._close(stream, grpc.StatusCode.UNAUTHENTICATED, str(exc))
            return False
        return True

    async def _read_reports_aio(self, stream: _AioStream, context: grpc.aio.ServicerContext) -> None:
        reason = "the slave closed the stream"
        session = stream.session
        assert session is not None
        try:
            while True:
                report = await context.read()
                if report is grpc.aio.EOF:
                    break
                if isinstance(report, Malformed):
                    self._close(stream, grpc.StatusCode.INVALID_ARGUMENT, f"malformed request: {report.error}")
                    return
                if not self._report_authentic(stream, report):
                    return
                now = self._monotonic()
                stream.last_report_ms = now
                acked_before = session.acked
                error = session.acknowledged(report.durable_offset, now)
                if error is not None:
                    self._close(stream, grpc.StatusCode.INVALID_ARGUMENT, error)
                    return
                self._tracker.ack(stream.session_id, report.durable_offset, self._wall())
                if stream.in_flight and report.durable_offset >= session.sent:
                    stream.in_flight = False
                    stream.poke()
                elif session.window_was_full(acked_before):
                    stream.poke()
                if stream.closing is not None:
                    return
        except asyncio.CancelledError:
            return  # the handler ended
        except Exception:  # noqa: BLE001 - a reader must end its session, whatever went wrong
            log.debug("replication session %d: reading reports ended", stream.session_id, exc_info=True)
            reason = "the stream was cancelled"
        self._close(stream, None, reason)

    async def _wait_aio(self, stream: _AioStream, timeout_s: float) -> None:
        if not stream.flag:
            loop = stream.loop
            waiter = stream.waiter = loop.create_future()
            timer = loop.call_later(timeout_s, _settle, waiter)
            try:
                await waiter
            finally:
                timer.cancel()
                stream.waiter = None
        stream.flag = False

    async def _serve_aio(self, stream: _AioStream, context: grpc.aio.ServicerContext, start: int) -> None:
        session = stream.session
        assert session is not None
        store = self._store
        steps = self._steps(stream, start, lambda: not context.done())
        while True:
            for _ in range(COALESCE_LOOP_TURNS):
                await asyncio.sleep(0)
            if stream.in_flight and store.broker_role is BrokerRole.SYNC_MASTER:
                # One chunk at a time while less than a batch waits (live puts, which wait for the
                # ack anyway): what is appended while it travels goes next, as one chunk; a backlog
                # still streams a window of whole batches. An ASYNC_MASTER streams on regardless:
                # nobody waits for its acks, and a slow slave should hold as much as it can. The
                # puts in flight wait for the slave's ack: dispatch their records meanwhile.
                store.dispatch_while_waiting()
                while stream.in_flight and stream.closing is None and store.max_offset - session.sent < self._batch:
                    await self._wait_aio(stream, IDLE_POLL_S)
            step = next(steps, None)
            if step is None:
                return
            do, what = step
            if isinstance(what, float):
                # The puts of the chunks out wait for the slave's ack: dispatch their records
                # meanwhile (on this loop, as `_dispatch_after_answer` would after their answers).
                store.dispatch_while_waiting()
                await self._wait_aio(stream, what)
                continue
            if do is Do.SEND:
                # The flush thread's fdatasync runs beside the send, not after it.
                store.hand_flush_after_send(session.sent)
                stream.in_flight = True
            await context.write(what)


class LoopServer:
    """A `grpc.aio.Server` made, bound, started and stopped on `loop` (running on another
    thread) from the calling thread; the part of `grpc.Server`'s interface the role uses."""

    def __init__(self, loop: asyncio.AbstractEventLoop, *, options: list, maximum_concurrent_rpcs: int | None = None):
        self.loop = loop

        self.server: grpc.aio.Server = self._call(
            lambda: grpc.aio.server(
                interceptors=[MalformedRequestGuard()], options=options, maximum_concurrent_rpcs=maximum_concurrent_rpcs
            )
        )

    def _run(self, coro, timeout_s: float = 10.0):
        if not self.loop.is_running():
            coro.close()
            raise RuntimeError("the replication server's event loop is not running")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    def _call(self, fn, *args):
        async def call():
            return fn(*args)

        return self._run(call())

    def add_to(self, servicer: LoopReplicationServicer) -> None:
        self._call(servicer.add_to_server, self.server)

    def add_insecure_port(self, address: str) -> int:
        return self._call(self.server.add_insecure_port, address)

    def add_secure_port(self, address: str, credentials: grpc.ServerCredentials) -> int:
        return self._call(self.server.add_secure_port, address, credentials)

    def start(self) -> None:
        self._run(self.server.start())

    def stop(self, grace: float | None = None) -> threading.Event:
        done = threading.Event()
        if not self.loop.is_running():
            done.set()
            return done
        future: Future = asyncio.run_coroutine_threadsafe(self.server.stop(grace), self.loop)
        future.add_done_callback(lambda _: done.set())
        try:
            future.result(10)
        except Exception:  # noqa: BLE001 - shutting down
            log.exception("stopping the replication server failed")
        return done
