"""The master's side of replication: the gRPC adapter of `rocketstore.ha.v1.Replication`. The
decisions (where a slave's stream starts, what to send next, acks, when to give a stream up) are
the sans-IO `ha.master_session`; this module owns the threads, the gRPC calls and the tracker.

One bidirectional `Replicate` stream per slave, served by a sync `grpc.server` (one pool thread
runs the response generator of each stream, and a helper thread reads the stream's reports):

1. Handshake: the slave's first `SlaveReport` names it and asks for the log from
   `durable_offset`. Refused with FAILED_PRECONDITION and the reason when the broker name is not
   this master's, when the slave's log is longer than the master's, when the master no longer
   holds the bytes after the slave's end, or when that end is not a record boundary of the
   master's log. An empty slave (0) starts where the master's log starts.
2. Streaming: `ha.chunks.next_chunk` cuts whole records from `store.max_offset`'s side of the
   log, at most `haTransferBatchSize` bytes each (a quarter more rather than leave a runt chunk
   behind), pipelined: chunks go out without waiting for
   acks, but never more than `WINDOW_BYTES` (or four batches, when larger) past the slave's last
   ack. A put's bytes go out at once (the `ReplicaTracker` signals new data on every put); puts
   that do not wait are noticed within `IDLE_POLL_S`. An idle stream carries a heartbeat (an
   empty chunk at the slave's expected end) every haSendHeartbeatInterval.
   A record damaged at rest is never shipped (`ha.chunks.intact_prefix`, over the records below
   `store.crc_checked_from_offset`): the stream carries the records before it, then closes with
   DATA_LOSS and the record's description; a slave's handshake at a damaged record is refused
   with FAILED_PRECONDITION. The store's `DamageLog` counts the refusal and holds the slave
   there (`held_replication` in the status and metrics) until a stream to it goes past.
3. Acks: every later report is fed to `ReplicaTracker.ack`; an ack beyond what was sent is a
   protocol error. A stream with no report for haHousekeepingInterval is closed (a watchdog
   thread closes it even when the stream is stuck sending to a slave that stopped reading).

Controller mode (an epoch history is given): every chunk carries the epoch of its bytes and where
that epoch starts, and never spans two epochs, so a slave records each epoch before appending its
first byte. The handshake also checks the slave's last epoch: the master must hold the same epoch
starting at the same offset, and the slave's log must not reach past that epoch's end in the
master's log (else the slave holds a divergent tail: FAILED_PRECONDITION, truncate first).
`GetEpochs` gives a joining slave the history to compute that point from. A slave whose last
epoch is 0 holds data from before controller mode and is checked by record boundary only.

Shared-secret mode (an `ha.peer_auth.MasterAuth` is given): `Hello` answers a slave's nonce
with this master's nonce and proof; `Replicate`, `GetEpochs` and `GetMetadata` are refused
(UNAUTHENTICATED) unless their header names a nonce issued here and not used yet, with the tag of
the session key; every chunk and answer then carries a MAC under that key, and every report must
carry one (a report failing it ends the stream), and the handshake must name the slave the Hello
named. Without it (mutual TLS), the TLS layer authenticates both ends and none of this applies.

`GetMetadata` hands a slave the master's topic table, consumer offsets and delay cursors
(`ha.metadata_sync`); a broker that is not master answers `is_master=false` and nothing else.
`HandBackPopEvents` takes back the pop journal of a slave that served reads while this master was
down (`take_pop_events` appends it to the log); a broker that is not master refuses it.

Requests whose bytes do not decode never reach these methods: the server the broker builds
(`rocketstore.broker.replication_role`) carries `wire.request_guard.ThreadedMalformedRequestGuard`,
which answers them INVALID_ARGUMENT and logs at most a line per peer host per 10 s; a report of a
`Replicate` stream that does not decode (read on the stream's helper thread) closes the stream
INVALID_ARGUMENT.

Every exit path removes the session from the tracker at once, so waiting puts learn that the
slave is gone. Sessions are logged when they open (peer, slave, start offset) and close (reason).

Time: silence, heartbeats, the handshake deadline and nonce lifetimes are measured on a
monotonic clock, so a wall clock stepped back cannot hide a stopped slave (nor one stepped forward
close live streams); the tracker is given the wall clock that its put-path waiters' deadlines
come from.

Thread-safety: `Replicate` runs concurrently for any number of streams; `stop` from any thread.
"""

from __future__ import annotations

import enum
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import NoReturn

import grpc

from ha.chunks import MalformedRecords, crc32c, intact_prefix, next_chunk
from ha.config import HaConfig
from ha.epochs import EpochHistory
from ha.master_session import CloseKind, MasterSession, SlaveHandshake, Step, decide_start
from ha.metadata_sync import take_snapshot
from ha.peer_auth import (
    CHUNK,
    EPOCHS,
    HEADER,
    METADATA,
    POP_EVENTS,
    POP_EVENTS_ANSWER,
    REPORT,
    AuthenticationError,
    Identity,
    MasterAuth,
    PeerSession,
    chunk_parts,
    epochs_parts,
    metadata_parts,
    pop_answer_parts,
    pop_events_parts,
    report_parts,
)
from ha.replica_tracker import ReplicaTracker
from store import BrokerRole, MessageStore
from store.clock import monotonic_ms, wall_clock_ms
from store.log.codec import CorruptMessage
from store.log.damage import Reader, describe
from store.pop.pop_state import Event as PopEvent
from store.pop.pop_state import decode_events
from store.service_thread import ServiceThread
from wire.log_limit import LogLimiter, peer_host
from wire.request_guard import MalformedRequest
from wire.rpc import ha_pb2, ha_pb2_grpc

log = logging.getLogger(__name__)

# How far (bytes) the master streams past a slave's last ack.
WINDOW_BYTES = 4 * 1024 * 1024
# Fallback wake-up of an idle stream, for puts that do not wait (and so send no new-data signal).
IDLE_POLL_S = 0.01
# A stream that does not end within this after being closed is cancelled (it is stuck sending).
CANCEL_GRACE_MS = 1000
_CLOSE_CODES = {
    CloseKind.SILENT: grpc.StatusCode.DEADLINE_EXCEEDED,
    CloseKind.GONE: grpc.StatusCode.FAILED_PRECONDITION,
    CloseKind.PROTOCOL: grpc.StatusCode.INVALID_ARGUMENT,
}


def _abort(context: grpc.ServicerContext, code: grpc.StatusCode, details: str) -> NoReturn:
    """`context.abort`, which raises (its stub does not say so)."""
    context.abort(code, details)
    raise AssertionError("grpc's abort returned")


def _progress(session: MasterSession | None) -> tuple[int, int, int]:
    """(sent, acked, started at) for the closing log line."""
    return (session.sent, session.acked, session.start_offset) if session is not None else (0, 0, 0)


_SERVICE = "/rocketstore.ha.v1.Replication/"


class Do(enum.Enum):
    """A stream's next step (`ReplicationServicer._steps`), for the adapter that performs it."""

    SEND = "send"  # a chunk of records; the master's own flush may start beside it
    HEARTBEAT = "heartbeat"  # an empty chunk
    IDLE = "idle"  # nothing to send: wait, at most so many seconds


class _Stream:
    """One slave's stream. `close` is first-reason-wins and wakes both of its threads."""

    def __init__(self, session_id: int, peer: str, context: grpc.ServicerContext, now_ms: int) -> None:
        self.session_id = session_id
        self.peer = peer
        self.context = context
        self.wake = threading.Event()
        self.acks_open = threading.Event()  # the reader may read acks (or must stop: closing)
        self.handshake: ha_pb2.SlaveReport | None = None
        self.slave = ""
        self.slave_id = -1
        self.registered = False
        self.last_report_ms = now_ms
        self.session: MasterSession | None = None  # set once the handshake is accepted
        self.closing: tuple[grpc.StatusCode | None, str] | None = None
        self.closing_since_ms = 0
        self.auth: PeerSession | None = None
        self._lock = threading.Lock()

    def close(self, code: grpc.StatusCode | None, reason: str, now_ms: int) -> bool:
        with self._lock:
            if self.closing is not None:
                return False
            self.closing = (code, reason)
            self.closing_since_ms = now_ms
        self.wake.set()
        self.acks_open.set()
        return True


class ReplicationServicer(ha_pb2_grpc.ReplicationServicer):
    def __init__(
        self,
        store: MessageStore,
        ha: HaConfig,
        broker_name: str,
        tracker: ReplicaTracker,
        *,
        client_endpoint: str = "",
        clock_ms: Callable[[], int] = wall_clock_ms,
        monotonic_clock_ms: Callable[[], int] = monotonic_ms,
        epochs: Callable[[], EpochHistory] | None = None,
        auth: MasterAuth | None = None,
        take_pop_events: Callable[[list[PopEvent]], tuple[bool, str]] | None = None,
    ) -> None:
        self._store = store
        self._auth = auth
        self._take_pop_events = take_pop_events
        self._ha = ha
        self._broker_name = broker_name
        self._tracker = tracker
        self.client_endpoint = client_endpoint
        self._wall = clock_ms  # the tracker's time: its waiters' deadlines come from the put path
        self._monotonic = monotonic_clock_ms  # this servicer's own timing: silence, heartbeats, nonces
        self._epochs = epochs
        self._segment_size = store.config.mapped_file_size_commit_log
        self._batch = ha.ha_transfer_batch_size
        self._window = max(WINDOW_BYTES, 4 * ha.ha_transfer_batch_size)
        self._heartbeat_ms = ha.ha_send_heartbeat_interval_ms
        self._housekeeping_ms = ha.ha_housekeeping_interval_ms
        self._ids = itertools.count(1)
        self._lock = threading.Condition()
        self._streams: dict[int, _Stream] = {}
        self._stream_list: tuple[_Stream, ...] = ()  # copy-on-write, for the put path's wake-up
        self._stopping = threading.Event()
        self._watchdog: _Housekeeping | None = None
        # Refusals come before authentication: a peer without the secret may send thousands a
        # second, and each must not cost a log line.
        self._refusals = LogLimiter(log, clock_ms=monotonic_clock_ms)
        tracker.add_new_data_listener(self._wake_all)

    # -- wiring --------------------------------------------------------------------------------

    def add_to_server(self, server: grpc.Server) -> None:
        ha_pb2_grpc.add_ReplicationServicer_to_server(self, server)

    def stop(self, timeout_s: float = 2.0) -> None:
        """End every stream (the slaves see UNAVAILABLE and reconnect later); streams still open
        after half of `timeout_s` (stuck sending) are cancelled. New streams are refused."""
        self._stopping.set()
        self._tracker.remove_new_data_listener(self._wake_all)
        for stream in self._stream_list:
            self._close(stream, grpc.StatusCode.UNAVAILABLE, "the master is shutting down")
        deadline = time.monotonic() + timeout_s
        with self._lock:
            cancelled = False
            while self._streams:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                if not cancelled and left < timeout_s / 2:
                    for stream in self._streams.values():
                        stream.context.cancel()
                    cancelled = True
                self._lock.wait(min(left, 0.05))
        watchdog = self._watchdog
        if watchdog is not None:
            watchdog.stop(timeout_s)

    def close_all(self, reason: str) -> None:
        """End every stream (a master stepping down); new streams are refused by role."""
        for stream in self._stream_list:
            self._close(stream, grpc.StatusCode.UNAVAILABLE, reason)
        self._store.damage.release_replication()

    @property
    def stream_count(self) -> int:
        with self._lock:
            return len(self._streams)

    def _wake_all(self) -> None:
        # Set only when clear: the puts of a loop turn find the sender already woken (it has not
        # run yet), and Event.set takes its lock and notifies on every call. Safe because the
        # sender clears the event before it looks for new bytes (`_wait`).
        for stream in self._stream_list:
            if not stream.wake.is_set():
                stream.wake.set()

    def _track(self, stream: _Stream) -> None:
        with self._lock:
            self._streams[stream.session_id] = stream
            self._stream_list = tuple(self._streams.values())
            if self._watchdog is None:
                self._watchdog = _Housekeeping(self._watch_once, min(1.0, self._housekeeping_ms / 4000))
                self._watchdog.start()

    def _untrack(self, stream: _Stream) -> None:
        with self._lock:
            self._streams.pop(stream.session_id, None)
            self._stream_list = tuple(self._streams.values())
            self._lock.notify_all()

    def _close(self, stream: _Stream, code: grpc.StatusCode | None, reason: str) -> None:
        if stream.close(code, reason, self._monotonic()) and stream.registered:
            self._tracker.remove(stream.session_id, self._wall())

    # -- the stream ----------------------------------------------------------------------------

    def Hello(self, request: ha_pb2.HelloRequest, context: grpc.ServicerContext) -> ha_pb2.HelloResponse:
        auth = self._auth
        if auth is None:
            _abort(
                context,
                grpc.StatusCode.FAILED_PRECONDITION,
                "this master has no shared secret: it authenticates by TLS",
            )
        try:
            answer = auth.hello(
                request.client_nonce, Identity(request.broker_name, request.broker_id), self._monotonic()
            )
        except ValueError as exc:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        return ha_pb2.HelloResponse(
            server_nonce=answer.server_nonce,
            server_proof=answer.server_proof,
            broker_name=answer.master.broker_name,
            broker_id=answer.master.broker_id,
        )

    def _authenticate(self, context: grpc.ServicerContext, method: str) -> PeerSession | None:
        """The call's session in shared-secret mode (None without it); aborts the call with
        UNAUTHENTICATED when its credentials fail."""
        if self._auth is None:
            return None
        header = next((v for k, v in context.invocation_metadata() or () if k == HEADER), None)
        try:
            return self._auth.authenticate(header, _SERVICE + method, self._monotonic())
        except AuthenticationError as exc:
            self._refuse_log(context, method, exc)
            _abort(context, grpc.StatusCode.UNAUTHENTICATED, f"authentication failed: {exc}")

    def _refuse_log(self, context: grpc.ServicerContext, method: str, exc: Exception) -> None:
        peer = context.peer()
        self._refusals.log(peer_host(peer), "refused %s from %s: %s", method, peer, exc)

    def Replicate(self, request_iterator: Iterator[ha_pb2.SlaveReport], context: grpc.ServicerContext):
        auth = self._authenticate(context, "Replicate")
        stream = _Stream(next(self._ids), context.peer(), context, self._monotonic())
        stream.auth = auth
        if self._stopping.is_set():
            context.abort(grpc.StatusCode.UNAVAILABLE, "the master is shutting down")
        if not context.add_callback(stream.wake.set):
            return
        self._track(stream)
        reader = threading.Thread(
            target=self._read_reports,
            args=(stream, request_iterator),
            name=f"ha-reports-{stream.session_id}",
            daemon=True,
        )
        reader.start()
        try:
            yield from self._serve(stream)
        finally:
            self._finish(stream)

    def _finish(self, stream: _Stream) -> None:
        """A stream's handler is ending: close it, let its waiting puts know, and log why."""
        self._close(stream, None, "the stream ended")
        if stream.registered:
            self._tracker.remove(stream.session_id, self._wall())
        self._untrack(stream)
        code, reason = stream.closing or (None, "")
        if stream.registered:
            level = logging.INFO if code in (None, grpc.StatusCode.UNAVAILABLE) else logging.WARNING
            log.log(
                level,
                "replication session %d with %s (%s) closed at offset %d (acked %d, started at %d): %s",
                stream.session_id,
                stream.slave,
                stream.peer,
                *_progress(stream.session),
                reason,
            )
        elif code not in (None, grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.UNAVAILABLE):
            log.warning("replication stream from %s closed before its handshake: %s", stream.peer, reason)

    def _refuse_another_group(self, broker_name: str, context: grpc.ServicerContext) -> None:
        if broker_name != self._broker_name:
            context.abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"the slave belongs to broker {broker_name!r}, this broker is {self._broker_name!r}",
            )

    def GetEpochs(self, request: ha_pb2.EpochsRequest, context: grpc.ServicerContext) -> ha_pb2.EpochsResponse:
        auth = self._authenticate(context, "GetEpochs")
        store = self._store
        self._refuse_another_group(request.broker_name, context)
        history = self._epochs() if self._epochs is not None else EpochHistory()
        answer = ha_pb2.EpochsResponse(
            epochs=[ha_pb2.EpochEntry(epoch=e.epoch, start_offset=e.start_offset) for e in history.entries],
            min_offset=store.min_offset,
            max_offset=store.max_offset,
            confirmed_offset=self._tracker.confirmed_offset,
            is_master=store.broker_role is not BrokerRole.SLAVE,
        )
        if auth is not None:
            answer.mac = auth.seal(EPOCHS, *epochs_parts(answer))
        return answer

    def GetMetadata(self, request: ha_pb2.MetadataRequest, context: grpc.ServicerContext) -> ha_pb2.MetadataResponse:
        auth = self._authenticate(context, "GetMetadata")
        self._refuse_another_group(request.broker_name, context)
        if self._store.broker_role is BrokerRole.SLAVE:
            # A slave's tables are copies: handing them on could move another slave backwards.
            answer = ha_pb2.MetadataResponse(is_master=False)
        else:
            topics, offsets, delay = take_snapshot(self._store, request.durable_offset).documents()
            answer = ha_pb2.MetadataResponse(
                topics_json=topics, consumer_offsets_json=offsets, delay_offsets_json=delay, is_master=True
            )
        if auth is not None:
            answer.mac = auth.seal(METADATA, *metadata_parts(answer))
        return answer

    def HandBackPopEvents(
        self, request: ha_pb2.PopEventsRequest, context: grpc.ServicerContext
    ) -> ha_pb2.PopEventsResponse:
        auth = self._authenticate(context, "HandBackPopEvents")
        if auth is not None:
            try:
                auth.open(POP_EVENTS, request.mac, *pop_events_parts(request))
            except AuthenticationError as exc:
                self._refuse_log(context, "HandBackPopEvents", exc)
                _abort(context, grpc.StatusCode.UNAUTHENTICATED, str(exc))
        self._refuse_another_group(request.broker_name, context)
        try:
            events = [event for batch in request.batches for event in decode_events(batch)]
        except ValueError as exc:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"the pop journal does not parse: {exc}")
        if self._store.broker_role is BrokerRole.SLAVE:
            accepted, reason = False, "this broker is not master"
        elif self._take_pop_events is None:
            accepted, reason = False, "this master does not take pop events"
        else:
            accepted, reason = self._take_pop_events(events)
        answer = ha_pb2.PopEventsResponse(accepted=accepted, reason=reason)
        if auth is not None:
            answer.mac = auth.seal(POP_EVENTS_ANSWER, *pop_answer_parts(answer))
        return answer

    def _read_reports(self, stream: _Stream, request_iterator: Iterator[ha_pb2.SlaveReport]) -> None:
        reason = "the slave closed the stream"
        try:
            for report in request_iterator:
                now = self._monotonic()
                if stream.auth is not None:
                    try:
                        stream.auth.open(REPORT, report.mac, *report_parts(report))
                    except AuthenticationError as exc:
                        log.warning("replication stream from %s: %s", stream.peer, exc)
                        self._close(stream, grpc.StatusCode.UNAUTHENTICATED, str(exc))
                        return
                stream.last_report_ms = now
                if stream.handshake is None:
                    stream.handshake = report
                    stream.wake.set()
                    stream.acks_open.wait()
                    if stream.closing is not None:
                        return
                    continue
                durable = report.durable_offset
                session = stream.session
                if session is None:
                    self._close(stream, grpc.StatusCode.INVALID_ARGUMENT, "an ack before the stream started")
                    return
                acked_before = session.acked
                error = session.acknowledged(durable, now)
                if error is not None:
                    self._close(stream, grpc.StatusCode.INVALID_ARGUMENT, error)
                    return
                self._tracker.ack(stream.session_id, durable, self._wall())
                if session.window_was_full(acked_before):
                    stream.wake.set()  # otherwise the sender has nothing new to do: puts wake it
                if stream.closing is not None:
                    return
        except grpc.RpcError:
            reason = "the stream was cancelled"
        except MalformedRequest as exc:  # a report that does not decode (the server's guard)
            self._close(stream, grpc.StatusCode.INVALID_ARGUMENT, f"malformed request: {exc}")
            return
        except Exception:  # noqa: BLE001 - a reader must end its session, whatever went wrong
            log.exception("replication session %d: reading reports failed", stream.session_id)
            reason = "reading the slave's reports failed"
        self._close(stream, None, reason)

    def _wait(self, stream: _Stream, timeout_s: float) -> None:
        stream.wake.wait(timeout_s)
        stream.wake.clear()

    def _end(self, stream: _Stream) -> None:
        """Leave the response generator as the stream's closing reason says."""
        code, reason = stream.closing or (None, "")
        if code is not None:
            stream.context.abort(code, reason)

    def _serve(self, stream: _Stream) -> Iterator[ha_pb2.Chunk]:
        start = self._handshake(stream)
        if start is None or stream.session is None:
            self._end(stream)
            return
        store = self._store
        for do, what in self._steps(stream, start, stream.context.is_active):
            if isinstance(what, float):
                # Nothing to send: the puts of the chunks out wait for the slave's ack, so the GIL
                # is idle; dispatch their records meanwhile instead of waking the dispatcher after
                # each answer (a no-op when nothing is dispatchable yet).
                store.dispatch_while_waiting()
                self._wait(stream, what)
                continue
            yield what
            if do is Do.SEND:
                # The chunk is on its way: the master's own flush now overlaps the slave's round
                # trip, on this thread (the puts waiting for the slave did not wake the flush
                # thread).
                store.flush_after_send()
        self._end(stream)

    def _steps(  # noqa: PLR0915 - one stream's life after its handshake: catch-up, chunks, heartbeats, its end
        self, stream: _Stream, start: int, active: Callable[[], bool]
    ) -> Iterator[tuple[Do, ha_pb2.Chunk | float]]:
        """What a stream does next, one step per `next()`, each decided when it is asked for (an
        adapter may let time pass between them): a chunk to send (SEND) or a heartbeat (HEARTBEAT,
        an empty chunk), or a wait of at most so many seconds (IDLE); it ends once the stream is
        closing. `active()`: the call is still open."""
        session = stream.session
        assert session is not None
        store = self._store
        tracker = self._tracker
        read = store.commit_log_data
        held = store.damage.held_offset(stream.slave_id)
        # An empty chunk tells the slave the handshake is accepted.
        yield (
            Do.HEARTBEAT,
            self._chunk(stream, start, b"", store.max_offset, self._epochs() if self._epochs is not None else None),
        )
        session.sent_chunk(0, self._monotonic())
        while True:
            if stream.closing is not None:
                return
            if self._stopping.is_set():
                self._close(stream, grpc.StatusCode.UNAVAILABLE, "the master is shutting down")
                continue
            if not active():
                self._close(stream, None, "the stream ended")
                continue
            now = self._monotonic()
            readable = master_max = store.max_offset
            epochs = self._epochs() if self._epochs is not None else None
            if epochs is not None:
                readable = self._epoch_end(epochs, session.sent, readable)
            step = session.next_step(now, readable, store.min_offset)
            if step.step is Step.CLOSE:
                assert step.close is not None
                self._close(stream, _CLOSE_CODES[step.close], step.reason)
                continue
            if step.step is Step.SEND:
                sent = session.sent
                try:
                    data = next_chunk(read, sent, step.until, self._batch)
                except MalformedRecords as exc:
                    log.error("the CommitLog is corrupt at offset %d: %s", sent, exc)
                    self._close(
                        stream, grpc.StatusCode.DATA_LOSS, f"the master's CommitLog is corrupt at offset {sent}"
                    )
                    continue
                intact, damage = intact_prefix(data, sent, store.crc_checked_from_offset)
                if damage is not None:
                    if not intact:
                        self._close(stream, grpc.StatusCode.DATA_LOSS, self._refuse_damaged(stream, damage))
                        continue
                    data = data[:intact]
                if data:
                    session.sent_chunk(len(data), now)
                    if held is not None and session.sent > held:
                        store.damage.release_replication(stream.slave_id)
                        held = None
                    yield Do.SEND, self._chunk(stream, sent, data, master_max, epochs)
                    continue
                # Nothing whole to send yet (a record still being written): idle as below.
                step = session.next_step(now, sent, store.min_offset)
            if step.step is Step.HEARTBEAT:
                session.sent_chunk(0, now)
                tracker.expire(self._wall())
                yield Do.HEARTBEAT, self._chunk(stream, session.sent, b"", master_max, epochs)
                continue
            yield Do.IDLE, min(IDLE_POLL_S, max(step.wait_ms, 1) / 1000)

    def _refuse_damaged(self, stream: _Stream, damage: CorruptMessage) -> str:
        """Count and hold a slave's replication at a damaged record; the reason the slave is
        told (logged at WARNING once per slave and record: the slave retries every backoff)."""
        damage_log = self._store.damage
        damage_log.found(damage, Reader.REPLICATION)
        news = damage_log.hold_replication(stream.slave_id, damage.offset)
        reason = (
            f"{describe(damage)} on the master: it is not replicated, so this slave stays at offset "
            f"{damage.offset} until the master's copy is repaired (docs/store.md, 'Damaged records')"
        )
        log.log(
            logging.WARNING if news else logging.DEBUG,
            "replication to %s (%s) held at offset %d: %s",
            stream.slave,
            stream.peer,
            damage.offset,
            reason,
        )
        return reason

    def _damage_at(self, start: int) -> CorruptMessage | None:
        """The damage of the record a stream would start with, if it has any."""
        store = self._store
        if start >= store.crc_checked_from_offset:
            return None
        try:
            first = next_chunk(store.commit_log_data, start, store.max_offset, 1)
        except MalformedRecords:
            return None  # the stream meets it and says so
        return intact_prefix(first, start, store.crc_checked_from_offset)[1]

    @staticmethod
    def _epoch_end(epochs: EpochHistory, offset: int, readable: int) -> int:
        """Where the epoch holding `offset` ends (a chunk never crosses it), within `readable`."""
        epoch = epochs.epoch_at(offset)
        if epoch is None:
            return readable
        return min(readable, epochs.end_offset(epoch, readable))

    def _chunk(
        self, stream: _Stream, start: int, data: bytes, master_max_offset: int, epochs: EpochHistory | None = None
    ) -> ha_pb2.Chunk:
        epoch = epoch_start = 0
        if epochs is not None:
            held = epochs.epoch_at(start)
            entry = epochs.entry(held) if held is not None else None
            if entry is not None:
                epoch, epoch_start = entry.epoch, entry.start_offset
        chunk = ha_pb2.Chunk(
            start_offset=start,
            data=data,
            master_max_offset=master_max_offset,
            epoch=epoch,
            epoch_start_offset=epoch_start,
            checksum=crc32c(data),
            confirmed_offset=self._tracker.confirmed_offset,
            segment_size=self._segment_size,
            master_client_endpoint=self.client_endpoint,
        )
        if stream.auth is not None:
            chunk.mac = stream.auth.seal(CHUNK, *chunk_parts(chunk))
        return chunk

    # -- the handshake -------------------------------------------------------------------------

    def _handshake(self, stream: _Stream) -> int | None:
        """Wait for the first report, check it, register the slave: its start offset, or None
        (the stream is closing, with the reason)."""
        deadline = self._monotonic() + self._housekeeping_ms
        while stream.handshake is None:
            now = self._monotonic()
            if stream.closing is not None:
                return None
            if self._stopping.is_set():
                self._close(stream, grpc.StatusCode.UNAVAILABLE, "the master is shutting down")
                return None
            if now >= deadline:
                self._close(
                    stream,
                    grpc.StatusCode.DEADLINE_EXCEEDED,
                    f"no handshake within {self._housekeeping_ms} ms (haHousekeepingInterval)",
                )
                return None
            self._wait(stream, min(0.5, (deadline - now) / 1000))
        report = stream.handshake
        stream.slave = f"{report.broker_name}/{report.broker_id}"
        stream.slave_id = report.broker_id
        now = self._monotonic()
        decision = decide_start(
            SlaveHandshake(report.broker_name, report.durable_offset, report.epoch, report.epoch_start_offset),
            broker_name=self._broker_name,
            serving=self._store.broker_role is not BrokerRole.SLAVE,
            log_min_offset=self._store.min_offset,
            log_max_offset=self._store.max_offset,
            record_starts_at=self._store.record_starts_at,
            epochs=self._epochs() if self._epochs is not None else None,
        )
        start, refusal = decision.start_offset, decision.refusal
        if stream.auth is not None and stream.auth.peer != Identity(report.broker_name, report.broker_id):
            refusal = f"the handshake names slave {stream.slave}, the Hello named {stream.auth.peer}"
            self._close(stream, grpc.StatusCode.PERMISSION_DENIED, refusal)
            log.warning("refused replication to %s (%s): %s", stream.slave, stream.peer, refusal)
            return None
        if not refusal:
            damage = self._damage_at(start)
            if damage is not None:
                self._close(stream, grpc.StatusCode.FAILED_PRECONDITION, self._refuse_damaged(stream, damage))
                return None
        if refusal:
            # A broker that is not master (yet: controller mode) is a passing condition.
            code = (
                grpc.StatusCode.UNAVAILABLE
                if self._store.broker_role is BrokerRole.SLAVE
                else grpc.StatusCode.FAILED_PRECONDITION
            )
            log.log(
                logging.INFO if code is grpc.StatusCode.UNAVAILABLE else logging.WARNING,
                "refused replication to %s (%s): %s",
                stream.slave,
                stream.peer,
                refusal,
            )
            self._close(stream, code, refusal)
            return None
        stream.session = MasterSession(
            start,
            now,
            window_bytes=self._window,
            heartbeat_ms=self._heartbeat_ms,
            housekeeping_ms=self._housekeeping_ms,
        )
        replaced = self._tracker.register(
            stream.session_id,
            ha_peer=stream.peer,
            broker_id=report.broker_id,
            client_endpoint=report.client_endpoint,
            start_offset=start,
            now_ms=self._wall(),
        )
        stream.registered = True
        with self._lock:
            older = [self._streams[i] for i in replaced if i in self._streams]
        for old in older:
            self._close(old, grpc.StatusCode.ABORTED, f"replaced by a newer stream from {stream.slave}")
        stream.acks_open.set()
        if stream.closing is not None:
            self._tracker.remove(stream.session_id, self._wall())
            return None
        log.info(
            "replication session %d opened: slave %s at %s (client %s), from offset %d (slave max %d, master max %d)",
            stream.session_id,
            stream.slave,
            stream.peer,
            report.client_endpoint or "-",
            start,
            report.max_offset,
            self._store.max_offset,
        )
        return start

    # -- housekeeping --------------------------------------------------------------------------

    def _watch_once(self) -> None:
        """Closes streams whose slave went silent, and cancels closed streams stuck sending."""
        self._tracker.expire(self._wall())
        now = self._monotonic()
        for stream in self._stream_list:
            if stream.closing is None:
                if now - stream.last_report_ms > self._housekeeping_ms:
                    self._close(
                        stream,
                        grpc.StatusCode.DEADLINE_EXCEEDED,
                        f"no report from the slave within {self._housekeeping_ms} ms (haHousekeepingInterval)",
                    )
            elif now - stream.closing_since_ms > CANCEL_GRACE_MS:
                stream.context.cancel()


class _Housekeeping(ServiceThread):
    """The thread that runs the servicer's housekeeping round every `interval_s`. It outlives a
    failing round (logged as `ServiceThread` logs failures): it is what ends the session of a
    slave that stopped, and so what takes that slave out of the puts' waits and the in-sync set."""

    name = "ha-housekeeping"

    def __init__(self, round_: Callable[[], None], interval_s: float) -> None:
        super().__init__()
        self._round = round_
        self._interval_s = interval_s

    def run_once(self) -> None:
        self.wait_for_running(self._interval_s)
        if not self.stopping:
            self._round()
