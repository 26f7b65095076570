"""The slave's side of replication on an event loop (haStreamOnEventLoop, the default):
`LoopSlaveReplicator` streams `rocketstore.ha.v1.Replication/Replicate` as a `grpc.aio` call on the
broker's serving loop, `broker-loop` (the `ha-slave` thread waits while it runs there), where `SlaveReplicator`
iterates a sync stream on `ha-slave` while gRPC's request thread drains its reports. Same wire
protocol, decisions and guarantees; `bench.put_switches` measured the loop's shape at fewer thread
wake-ups per chunk (docs/benchmarks.md, "tenth round").

A subclass of `SlaveReplicator` with its constructor (plus `loop`) and public interface: `state`,
`contact`, `confirmed_offset`, `metadata`, the reconnect policy, controller-mode reconciliation
(GetEpochs, truncation), the Hello login and the handshake's durable end are that class's code, run
once per connection on `ha-slave` before the stream starts. Per stream, on the loop:

- the reader (the stream's task) awaits `call.read()`, checks and appends each chunk (MAC,
  `SlaveSession.receive`, epochs, `append_replicated`) and, under SYNC_FLUSH, flushes it on the
  loop (`store.request_flush(end, flush_here=True)`; the `fdatasync` releases the GIL) while the
  disk's flushes take at most `LOOP_FLUSH_WITHIN_MS`, and otherwise (a slow disk, or a flush
  already under way) hands it to the store's flush thread, whose future's done callback brings
  the durable end back with one `call_soon_threadsafe` per batch of released waiters
  (coalesced: a callback already scheduled carries the newest end); a chunk it flushed itself
  it reports itself at once, unless the writer is writing (the writer's wake-up is a loop turn
  on the ack's path), and reads the next chunk once that report is written;
- the writer task sends the handshake, then a report whenever the durable offset moved
  (coalesced) and the reader did not report it, and at every haSendHeartbeatInterval, each
  sealed as `SlaveReplicator` seals it; one write at a time (`writing`: the writer looks again
  in 1 ms while the reader writes). After each report, whoever wrote it runs the dispatch round
  (`store.dispatch_here`) on the loop, off the acknowledgement's path. The writer gives up a
  silent stream (haHousekeepingInterval).

Blocking on the loop: a chunk's `fdatasync` while the disk is quick (the loop's other work, the
client API, waits that long; a chunk that arrives meanwhile waits in the stream and the next
flush covers it), a new segment's creation in `append_replicated` and, in controller mode, the
epoch file's fsync before a newer epoch's first bytes, both rare.

Thread-safety: `start`, `stop` and `state` from any thread; `stop` cancels the stream's task with
`call_soon_threadsafe` and waits for `ha-slave` to end. The stream's state is the loop's, but for
the flush completions (under the stream's own lock).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import threading

import grpc

from ha.slave_session import SlaveSession
from slave.replication_client import SlaveReplicator, _Stream, _StreamFailed
from slave.rpc_failure import describe
from store import CommitLogClosed, PutMessageStatus
from store.log.status_future import StatusFuture
from wire.rpc import ha_pb2, ha_pb2_grpc

log = logging.getLogger(__name__)

# The longest flush, in ms, after which the slave's loop stops flushing chunks itself and hands
# them to the flush thread (until that thread's flushes are quick again): a solid-state disk's
# fdatasync of a chunk takes 0.1-0.5 ms here, a spinning disk's several ms, which the client API
# sharing the loop would wait for at every chunk.
LOOP_FLUSH_WITHIN_MS = 2


class _AioStream(_Stream):
    """One stream's state, shared by the loop and (for the flush callbacks) the flush thread; its
    `call` stays None (the aio call is `aio_call`)."""

    __slots__ = ("aio_call", "task", "wake", "writing", "report_here", "lock", "flushed_end", "scheduled")

    def __init__(self, session: SlaveSession) -> None:
        super().__init__(session)
        self.aio_call: grpc.aio.StreamStreamCall | None = None
        self.task: asyncio.Task | None = None
        self.wake: asyncio.Future | None = None  # the writer's wait (loop only)
        self.writing = True  # a report is being written (the handshake first); loop only
        self.report_here = False  # the reader moved the durable offset: it reports (loop only)
        # Flush completions handed from the flush thread to the loop (under `lock`).
        self.lock = threading.Lock()
        self.flushed_end = 0
        self.scheduled = False


class LoopSlaveReplicator(SlaveReplicator):
    def __init__(self, *args, loop: asyncio.AbstractEventLoop, **kwargs) -> None:
        """`SlaveReplicator`'s arguments, and `loop`: a loop running on another thread (the
        broker's serving loop) to run the stream on; `ha-slave` waits while it runs there."""
        super().__init__(*args, **kwargs)
        self._host_loop = loop
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"LoopSlaveReplicator(master={self._address!r}, broker={self._broker_name}/{self._broker_id})"

    # -- lifecycle -----------------------------------------------------------------------------

    def _cancel(self, stream: _Stream) -> None:
        """From `stop`, any thread: cancel the stream's task on its loop."""
        task = stream.task if isinstance(stream, _AioStream) else None
        loop = self._loop
        if task is not None and loop is not None:
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:
                pass  # the loop is closed: the thread is ending anyway

    def _run(self) -> None:
        with self._cond:
            self._loop = self._host_loop
        try:
            super()._run()
        finally:
            with self._cond:
                self._loop = None

    # -- one stream ----------------------------------------------------------------------------

    def _aio_channel(self) -> grpc.aio.Channel:
        if self._credentials is not None:
            return grpc.aio.secure_channel(self._address, self._credentials, options=self._options)
        return grpc.aio.insecure_channel(self._address, options=self._options)

    def _stream(self) -> _StreamFailed:
        """The sync prelude (reconcile, handshake's durable end, Hello), then the stream on the loop."""
        try:
            session, durable = self._new_session()
        except _StreamFailed as exc:
            return exc
        stream = _AioStream(session)
        metadata = None
        if self._auth is not None:
            try:
                with self._channel() as channel:
                    stream.auth, metadata = self._login(channel, "Replicate")
            except _StreamFailed as exc:
                return exc
        loop = self._loop
        assert loop is not None
        try:
            with self._cond:
                if self._stop.is_set():
                    return _StreamFailed("stopped", stopped=True)
                self._current = stream
            return asyncio.run_coroutine_threadsafe(self._hosted(stream, durable, metadata), loop).result()
        except (asyncio.CancelledError, concurrent.futures.CancelledError):
            return _StreamFailed("stopped", stopped=True)
        finally:
            self._stream_ended(stream)

    async def _hosted(self, stream: _AioStream, durable: int, metadata) -> _StreamFailed:
        with self._cond:
            stream.task = asyncio.current_task()
            if self._stop.is_set():
                return _StreamFailed("stopped", stopped=True)
        return await self._astream(stream, durable, metadata)

    async def _astream(self, stream: _AioStream, durable: int, metadata) -> _StreamFailed:
        channel = self._aio_channel()
        writer: asyncio.Task | None = None
        try:
            call = ha_pb2_grpc.ReplicationStub(channel).Replicate(metadata=metadata)
            stream.aio_call = call
            writer = asyncio.get_running_loop().create_task(self._awrite_reports(stream, call, durable))
            try:
                while True:
                    chunk = await call.read()
                    if chunk is grpc.aio.EOF:
                        break
                    self._atake(stream, chunk)
                    if stream.report_here:
                        await self._areport(stream, call)
            except asyncio.CancelledError:
                return self._ended(stream, "the stream was cancelled")
            except grpc.RpcError as exc:
                return self._rpc_failure(stream, exc)
            except _StreamFailed as exc:
                return exc
            return self._ended(stream, "the master ended the stream")
        finally:
            stream.ended = True
            if stream.aio_call is not None:
                stream.aio_call.cancel()
            if writer is not None:
                writer.cancel()
                await asyncio.gather(writer, return_exceptions=True)
            try:
                await channel.close()
            except Exception:  # noqa: BLE001 - the stream is over: closing is best effort
                log.debug("closing the replication channel failed", exc_info=True)

    def _fail_soon(self, stream: _AioStream, message: str) -> None:
        """On the loop: end the stream with `message` (the reader's task is cancelled)."""
        if stream.failure is None:
            stream.failure = message
        if stream.task is not None:
            stream.task.cancel()

    # -- chunks (the loop) ---------------------------------------------------------------------

    def _atake(self, stream: _AioStream, chunk: ha_pb2.Chunk) -> None:
        end = self._append(stream, chunk)
        if end is None:
            return
        if not self._sync_flush:
            self._adurable(stream, end, here=True)
            return
        # Flushed here while the disk is quick: the flush thread's wake-up and the way back to
        # the loop cost more than a quick fdatasync (docs/benchmarks.md, "eleventh round"). A
        # slow disk's flushes go to the flush thread, so the loop never waits long on it.
        future = self._store.request_flush(end, flush_here=True, here_within_ms=LOOP_FLUSH_WITHIN_MS)
        if future is None:
            self._adurable(stream, end, here=True)
        elif future.done():  # flushed already: no hop through the loop's wake-up
            if future.result() is PutMessageStatus.PUT_OK:
                self._adurable(stream, end, here=True)
            else:
                self._flush_done(stream, end, future)  # logs it
        else:
            future.add_done_callback(functools.partial(self._flush_done, stream, end))

    def _flush_done(self, stream: _AioStream, end: int, future: StatusFuture) -> None:
        """A flush future completed (on the flush thread, or on the loop when already done)."""
        status = future.result()
        if status is not PutMessageStatus.PUT_OK:
            log.warning("flushing replicated bytes to %d: %s; a later flush acknowledges them", end, status.name)
            return
        with stream.lock:
            if end > stream.flushed_end:
                stream.flushed_end = end
            if stream.scheduled or stream.ended:
                return
            stream.scheduled = True
        loop = self._loop
        if loop is None:
            return
        try:
            loop.call_soon_threadsafe(self._flushed_on_loop, stream)
        except RuntimeError:
            pass  # the loop is closed: the thread ended

    def _flushed_on_loop(self, stream: _AioStream) -> None:
        with stream.lock:
            stream.scheduled = False
            end = stream.flushed_end
        if not stream.ended:
            self._adurable(stream, end)

    def _adurable(self, stream: _AioStream, durable: int, *, here: bool = False) -> None:
        """On the loop: the durable offset may have moved. When it did, the report goes from the
        reader (`here`: it flushed the chunk itself, and the writer is not writing), or the writer
        is woken for it (a writer that is writing reports it next anyway)."""
        with self._cond:
            moved = stream.session.durable(durable)
        if not moved:
            return
        if here and not stream.writing:
            stream.report_here = True
            return
        wake = stream.wake
        if wake is not None and not wake.done():
            wake.set_result(None)

    async def _areport(self, stream: _AioStream, call) -> None:
        """The reader, once a chunk it took made the durable offset move: report it now, without
        the writer's wake-up (a loop turn). The next chunk is read once the report is written,
        which costs a SYNC_MASTER's stream nothing: its next chunk waits for this ack."""
        stream.report_here = False
        with self._cond:
            offset = stream.session.report_due(self._monotonic())
        if offset is None:
            return
        try:
            await self._send_report(stream, call, offset)
        except asyncio.InvalidStateError:
            pass  # the call ended: the next read says how

    async def _send_report(self, stream: _AioStream, call, offset: int) -> None:
        """Write the report of `offset` (one write at a time: `writing`), then, as the sync code
        after each report, dispatch the acknowledged chunks on this loop, off the ack's path
        (unless the dispatcher's thread is at it)."""
        stream.writing = True
        try:
            await call.write(self._ack_report(stream, offset))
        finally:
            stream.writing = False
        self._store.dispatch_here()

    # -- reports (the loop) --------------------------------------------------------------------

    async def _awrite_reports(self, stream: _AioStream, call, durable: int) -> None:
        session = stream.session
        loop = asyncio.get_running_loop()
        try:
            await call.write(self._handshake_report(stream, durable))
            stream.writing = False
            while True:
                if stream.ended or stream.failure is not None or self._stop.is_set():
                    return
                now = self._monotonic()
                with self._cond:
                    silent = session.silent(now)
                    # While the reader writes a report, one write at a time: look again in 1 ms.
                    offset = None if silent or stream.writing else session.report_due(now)
                    wait_s = 0.001 if stream.writing else session.wait_ms(now) / 1000
                if silent:
                    self._fail_soon(
                        stream,
                        f"no chunk from the master within {session.housekeeping_ms} ms (haHousekeepingInterval)",
                    )
                    return
                if offset is None:
                    wake = stream.wake = loop.create_future()
                    timer = loop.call_later(wait_s, _wake, wake)
                    try:
                        await wake
                    finally:
                        timer.cancel()
                        stream.wake = None
                    continue
                await self._send_report(stream, call, offset)
        except asyncio.CancelledError:
            raise
        except grpc.RpcError as exc:
            # The reader sees the call's end as well; nothing more to do here.
            log.debug("writing a report failed: %s", describe(exc, tls=self._credentials is not None)[1])
        except asyncio.InvalidStateError:
            pass  # the call ended while a write was due (grpc.aio raises this for a done call)
        except CommitLogClosed:
            self._fail_soon(stream, "the store is shutting down")
        except Exception as exc:  # noqa: BLE001 - end the stream, the reader reports it
            log.exception("the report writer failed")
            self._fail_soon(stream, f"unexpected error in the report writer: {type(exc).__name__}: {exc}")


def _wake(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(None)
