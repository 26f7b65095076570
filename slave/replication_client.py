"""The slave's side of replication: `SlaveReplicator`, a thread streaming CommitLog chunks from
the master (`rocketstore.ha.v1.Replication/Replicate` on haMasterAddress) into the slave's store.

One stream at a time. Its first report is the handshake: broker name and id, client endpoint,
and `durable_offset` = where the slave wants the log from. That is the slave's durable end: its
flushed offset under SYNC_FLUSH (the replicator flushes everything it holds before the
handshake), its max offset under ASYNC_FLUSH, whose durability promise is "written", the same
promise its own puts would make. Every later report acknowledges that every byte below its
`durable_offset` is durable in that sense.

The decisions are the sans-IO `ha.slave_session.SlaveSession` (per stream) and
`ReconnectPolicy` (across streams); this module is their thread and gRPC adapter. Each chunk is
checked (offset, checksum, segment size, whole records) and appended with
`MessageStore.append_replicated`. Under SYNC_FLUSH the chunk's end is acknowledged once
`store.request_flush(end, flush_here=True)` completes with PUT_OK: the replicator's own thread
runs the fdatasync (no hand-off to the flush thread and back), chunks that arrive meanwhile wait
in the stream and the next flush covers them; a flush already under way on the flush thread
acknowledges them when it completes. Under ASYNC_FLUSH at once. Acks are coalesced (one report
carries the newest durable offset) and go out at least every haSendHeartbeatInterval. A stream
with no chunk (heartbeats count) for haHousekeepingInterval is given up. That silence and the
heartbeats are timed on a monotonic clock, so a change to the system time neither hides a silent
master nor gives up on a live one; `state` and `contact` report the last chunk in Unix ms.

Shared-secret mode (a secret is given): every call to the master starts with a Hello
(`slave.peer_login`): the master must prove it holds the secret before the slave sends its
handshake or takes anything, and every chunk and epochs answer must carry a valid MAC under that
call's session key (every report carries one too). A master that fails is refused like any
refusal; nothing it sent is appended. With mutual TLS instead, the TLS layer does this.

A protocol error, a refused append or a transport error closes the stream and logs why; the
replicator reconnects after a backoff doubling from haReconnectBackoffMin to
haReconnectBackoffMax (back to the minimum once a stream was accepted). A master's refusal
(FAILED_PRECONDITION, UNAUTHENTICATED, PERMISSION_DENIED: e.g. the slave's log is longer than the
master's, or a wrong secret) is logged at ERROR once per distinct message and retried at the
maximum backoff. A restarted slave resumes from what its store recovered.

Controller mode (an `EpochKeeper` is given, and the master's address by the controller): before
each stream the replicator asks the master for its epoch history (`GetEpochs`), computes the
consistent point with its own (`ha.epochs.consistent_point`) and, when its log goes past it,
truncates the divergent tail (`MessageStore.truncate_to`, crash-safe, then the epoch file). Its
handshake names the epoch of its last byte and where that epoch starts, which the master checks.
Before appending the first bytes of a newer epoch it records the epoch (fsync); a chunk of an
older epoch, or of a known epoch starting elsewhere, is a protocol error. `confirmed_offset` is
the master's confirmed offset as the last chunk said (the slave's dispatch limit).

The replicator also owns the slave's `MetadataSync` (topics, consumer offsets, delay cursors
from the same master; `slave.metadata_client`), started and stopped with it.

Thread-safety: `start`, `stop` and `state` from any thread. The replicator's thread receives,
appends and (mostly) flushes; gRPC's request thread sends reports and, once each is sent,
dispatches what was appended (`MessageStore.dispatch_here`, unless the dispatcher's own thread is
at it); flush callbacks run on the thread that flushed.
Shared state is behind one condition.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import grpc

from ha.chunks import ChunkVerdict
from ha.config import HaConfig
from ha.epoch_keeper import EpochKeeper
from ha.epochs import EpochEntry, EpochHistory, consistent_point
from ha.peer_auth import (
    CHUNK,
    EPOCHS,
    REPORT,
    AuthenticationError,
    Identity,
    PeerSession,
    SlaveAuth,
    chunk_parts,
    epochs_parts,
    report_parts,
)
from ha.slave_session import ReconnectPolicy, SlaveSession
from slave.metadata_client import MetadataSync
from slave.peer_login import REFUSALS, LoginFailed, login
from slave.rpc_failure import describe
from store import CommitLogClosed, FlushDiskType, MessageStore, PutMessageStatus, ReplicatedAppendError
from store.clock import monotonic_ms, wall_clock_ms
from store.log.status_future import StatusFuture
from store.pop.pop_journal import PopJournal
from wire.rpc import ha_pb2, ha_pb2_grpc

log = logging.getLogger(__name__)

METHOD = "/rocketstore.ha.v1.Replication/Replicate"
_REFUSALS = REFUSALS
_MAX_GRPC_MESSAGE = 2**31 - 1
_MIN_RECEIVE_LIMIT = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ReplicationState:
    master_address: str
    connected: bool
    master_max_offset: int
    durable_offset: int
    last_chunk_ms: int
    last_error: str
    # What the master's chunks said: its client API endpoint and its confirmed offset.
    master_client_endpoint: str = ""
    confirmed_offset: int = 0
    # Streams the master accepted so far.
    sessions: int = 0
    # The metadata copy (`MetadataSync`): when it last succeeded (Unix ms, 0: never), its last error.
    metadata_synced_ms: int = 0
    metadata_error: str = ""


class _StreamFailed(Exception):
    """This stream must close; `refusal` when the master refused it."""

    def __init__(self, message: str, *, refusal: bool = False, stopped: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.refusal = refusal
        self.stopped = stopped


class _Stream:
    """The adapter's side of one stream: the sans-IO session plus its call and end flags."""

    __slots__ = ("session", "call", "ended", "failure", "auth")

    def __init__(self, session: SlaveSession) -> None:
        self.session = session
        self.auth: PeerSession | None = None
        self.call: grpc.Future | None = None
        self.ended = False
        self.failure: str | None = None


class SlaveReplicator:
    def __init__(
        self,
        store: MessageStore,
        ha: HaConfig,
        *,
        broker_name: str,
        broker_id: int,
        client_endpoint: str,
        secret: bytes = b"",
        channel_credentials: grpc.ChannelCredentials | None = None,
        clock_ms: Callable[[], int] = wall_clock_ms,
        monotonic_clock_ms: Callable[[], int] = monotonic_ms,
        master_address: str = "",
        epochs: EpochKeeper | None = None,
        pop_journal: PopJournal | None = None,
    ) -> None:
        address = master_address or ha.ha_master_address
        if not address:
            raise ValueError("a slave needs haMasterAddress")
        self._store = store
        self._ha = ha
        self._address = address
        self._epochs = epochs
        # The master's confirmed offset, from its last chunk (read without a lock: an int).
        self.confirmed_offset = 0
        self._broker_name = broker_name
        self._broker_id = broker_id
        self._client_endpoint = client_endpoint
        self._auth = SlaveAuth(secret, Identity(broker_name, broker_id)) if secret else None
        self._credentials = channel_credentials
        self._wall = clock_ms  # what `state` and `contact` report in
        self._monotonic = monotonic_clock_ms  # the stream's timing: silence, heartbeats
        self._sync_flush = store.config.flush_disk_type is FlushDiskType.SYNC_FLUSH
        self._segment_size = store.config.mapped_file_size_commit_log
        self._flush_timeout_s = store.config.sync_flush_timeout_ms / 1000
        # A chunk is one batch, or one record or blank segment end larger than a batch: bounded
        # by the master's maxMessageSize, which may exceed this slave's, hence the generous floor.
        largest = max(_MIN_RECEIVE_LIMIT, 2 * store.config.max_message_size + ha.ha_transfer_batch_size + 1024 * 1024)
        # gRPC keeps its own reconnect backoff per subchannel, and subchannels are shared process-wide
        # by default: a fresh channel to a master that was down inherited a backoff grown past ours
        # (7.8 s to rejoin with haReconnectBackoffMax at 5 s). A channel-local pool, and gRPC's own
        # backoff held at our minimum, leave the waiting to ReconnectPolicy alone.
        self._options = [
            ("grpc.max_receive_message_length", min(largest, _MAX_GRPC_MESSAGE)),
            ("grpc.max_send_message_length", 1024 * 1024),
            ("grpc.use_local_subchannel_pool", 1),
            ("grpc.initial_reconnect_backoff_ms", ha.ha_reconnect_backoff_min_ms),
            ("grpc.min_reconnect_backoff_ms", ha.ha_reconnect_backoff_min_ms),
            ("grpc.max_reconnect_backoff_ms", ha.ha_reconnect_backoff_max_ms),
        ]
        self._policy = ReconnectPolicy(ha.ha_reconnect_backoff_min_ms, ha.ha_reconnect_backoff_max_ms)
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._current: _Stream | None = None
        # The last stream's view, for state() between streams (under _cond).
        self._last: SlaveSession | None = None
        self._last_error = ""
        self._sessions = 0
        # Topics, consumer offsets and delay cursors come from the same master, on their own thread.
        self.metadata = MetadataSync(
            store,
            address=address,
            broker_name=broker_name,
            broker_id=broker_id,
            auth=self._auth,
            channel=self._channel,
            interval_ms=ha.ha_metadata_sync_interval_ms,
            timeout_ms=ha.ha_housekeeping_interval_ms,
            clock_ms=clock_ms,
            pop_journal=pop_journal,
            streaming=self._streaming,
        )

    def __repr__(self) -> str:
        return f"SlaveReplicator(master={self._address!r}, broker={self._broker_name}/{self._broker_id})"

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("the replicator was started already")
        self._thread = threading.Thread(target=self._run, name="ha-slave", daemon=True)
        self._thread.start()
        self.metadata.start()

    def stop(self, timeout_s: float = 5) -> None:
        """End the stream and the threads (an append in progress finishes first). Idempotent."""
        self._stop.set()
        self.metadata.stop(timeout_s)
        with self._cond:
            current = self._current
            self._cond.notify_all()
        if current is not None:
            self._cancel(current)
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)
            if thread.is_alive():
                log.warning("the replication thread did not end within %.1f s", timeout_s)

    def _cancel(self, stream: _Stream) -> None:
        """From `stop`, any thread: end the stream's call."""
        if stream.call is not None:
            stream.call.cancel()

    def state(self) -> ReplicationState:
        metadata = self.metadata.state()
        with self._cond:
            session, connected = self._session_locked()
            return ReplicationState(
                master_address=self._address,
                connected=connected,
                master_max_offset=session.master_max_offset if session else 0,
                durable_offset=session.durable_offset if session and connected else self._store_durable(),
                last_chunk_ms=self._last_chunk_wall_ms(session),
                last_error=self._last_error,
                master_client_endpoint=session.master_client_endpoint if session else "",
                confirmed_offset=session.confirmed_offset if session else 0,
                sessions=self._sessions,
                metadata_synced_ms=metadata.last_sync_ms,
                metadata_error=metadata.last_error,
            )

    def contact(self) -> tuple[bool, int | None]:
        """(a stream is up, milliseconds since the master's last chunk, or None when none came):
        what `state` says about the master, without waiting for a metadata round in flight
        (cheap enough for every call). An age, not a time, so that callers need not share this
        replicator's clock."""
        with self._cond:
            session, connected = self._session_locked()
            return connected, self._last_chunk_age_ms(session)

    def _last_chunk_age_ms(self, session: SlaveSession | None) -> int | None:
        """Milliseconds since the session's last chunk (kept on the monotonic clock), or None."""
        if session is None or not session.accepted:
            return None
        return max(0, self._monotonic() - session.last_chunk_ms)

    def _last_chunk_wall_ms(self, session: SlaveSession | None) -> int:
        """The session's last chunk in Unix ms, or 0."""
        age_ms = self._last_chunk_age_ms(session)
        return 0 if age_ms is None else self._wall() - age_ms

    def _session_locked(self) -> tuple[SlaveSession | None, bool]:
        """The current stream's session once the master accepted it, else the last accepted one's
        (what the master said last, and when, outlives the attempts to reach it again), and
        whether a stream is up."""
        current = self._current
        if current is not None and current.session.accepted:
            return current.session, True
        return self._last, False

    def _streaming(self) -> bool:
        return self.contact()[0]

    def _store_durable(self) -> int:
        store = self._store
        return store.flushed_offset if self._sync_flush else store.max_offset

    # -- the loop ------------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                failure = self._stream()
            except CommitLogClosed:
                log.info("the store is shutting down: replication from %s ends", self._address)
                break
            except Exception as exc:  # noqa: BLE001 - the replication thread must outlive any one stream
                log.exception("replication stream from %s failed unexpectedly", self._address)
                failure = _StreamFailed(f"unexpected error: {type(exc).__name__}: {exc}")
            if failure.stopped or self._stop.is_set():
                break
            with self._cond:
                self._last_error = failure.message
            level = self._policy.log_level(failure.message, refused=failure.refusal)
            if failure.refusal:
                log.log(level, "the master at %s refused replication: %s", self._address, failure.message)
            else:
                log.log(level, "replication stream from %s closed: %s", self._address, failure.message)
            self._stop.wait(self._policy.delay_ms(refused=failure.refusal) / 1000)
        log.info("replication from %s stopped", self._address)

    def _durable_end(self) -> int:
        """The handshake's offset: everything the store holds, made durable first under SYNC_FLUSH."""
        store = self._store
        end = store.max_offset
        if not self._sync_flush:
            return end
        future = store.request_flush(end)
        if future is not None:
            try:
                status = future.result(self._flush_timeout_s)
            except TimeoutError:
                status = PutMessageStatus.FLUSH_DISK_TIMEOUT
            if status is not PutMessageStatus.PUT_OK or store.flushed_offset < end:
                raise _StreamFailed(
                    f"the slave's own log could not be flushed to {end} before the handshake ({status.name})"
                )
        return end

    def _channel(self) -> grpc.Channel:
        if self._credentials is not None:
            return grpc.secure_channel(self._address, self._credentials, options=self._options)
        return grpc.insecure_channel(self._address, options=self._options)

    def _reconcile(self, channel: grpc.Channel) -> None:
        """Controller mode: cut this slave's log back to the consistent point with the master."""
        store = self._store
        keeper = self._epochs
        assert keeper is not None  # controller mode only
        session, metadata = self._login(channel, "GetEpochs")
        try:
            answer = ha_pb2_grpc.ReplicationStub(channel).GetEpochs(
                ha_pb2.EpochsRequest(broker_name=self._broker_name),
                metadata=metadata,
                timeout=self._ha.ha_housekeeping_interval_ms / 1000,
            )
        except grpc.RpcError as exc:
            code, text = describe(exc, tls=self._credentials is not None)
            raise _StreamFailed(f"GetEpochs: {text}", refusal=code in _REFUSALS) from None
        if session is not None:
            try:
                session.open(EPOCHS, answer.mac, *epochs_parts(answer))
            except AuthenticationError as exc:
                raise _StreamFailed(f"GetEpochs: {exc}", refusal=True) from None
        if not answer.is_master:
            raise _StreamFailed(f"{self._address} is not master (yet)")
        local_max = store.max_offset
        local = keeper.open(local_max)
        if local_max <= store.min_offset or not len(local):
            return  # empty, or data from before controller mode: the handshake checks boundaries
        remote = EpochHistory(EpochEntry(e.epoch, e.start_offset) for e in answer.epochs)
        point = consistent_point(local, local_max, remote, answer.max_offset)
        if point is None:
            raise _StreamFailed(
                f"this slave's epochs {list(local)} share none with the master's {list(remote)}: "
                "its log cannot be reconciled automatically",
                refusal=True,
            )
        if point < local_max:
            log.warning(
                "truncating this slave's log from %d to %d: the tail diverges from the master's (epochs %s vs %s)",
                local_max,
                point,
                list(local),
                list(remote),
            )
            store.truncate_to(point)
            keeper.truncate(point)

    def _login(
        self, channel: grpc.Channel, method: str
    ) -> tuple[PeerSession | None, tuple[tuple[str, str], ...] | None]:
        """Shared-secret mode: the master proves itself before `method` is called (`_StreamFailed`
        when it does not); the call's session and metadata. (None, None) without a secret."""
        if self._auth is None:
            return None, None
        try:
            return login(
                channel,
                self._auth,
                method,
                self._address,
                self._ha.ha_housekeeping_interval_ms / 1000,
                tls=self._credentials is not None,
            )
        except LoginFailed as exc:
            raise _StreamFailed(exc.message, refusal=exc.refusal) from None

    def _last_epoch(self, durable: int) -> tuple[int, int]:
        """The epoch of the byte before `durable` and where it starts (0, 0 without epochs)."""
        if self._epochs is None or durable <= 0:
            return 0, 0
        history = self._epochs.history
        epoch = history.epoch_at(durable - 1)
        entry = history.entry(epoch) if epoch is not None else None
        return (entry.epoch, entry.start_offset) if entry is not None else (0, 0)

    def _check_epoch(self, chunk: ha_pb2.Chunk) -> None:
        """Record a newer epoch before its first byte is appended; refuse an inconsistent one."""
        keeper = self._epochs
        assert keeper is not None  # controller mode only
        history = keeper.history
        last = history.last()
        if last is None or chunk.epoch > last.epoch:
            keeper.begin(chunk.epoch, chunk.epoch_start_offset)
            log.info("epoch %d begins at offset %d", chunk.epoch, chunk.epoch_start_offset)
            return
        known = history.entry(chunk.epoch)
        if chunk.epoch < last.epoch or known is None or known.start_offset != chunk.epoch_start_offset:
            raise _StreamFailed(
                f"protocol error: a chunk at {chunk.start_offset} of epoch {chunk.epoch} (from "
                f"{chunk.epoch_start_offset}) "
                f"does not continue this slave's epochs {list(history)}"
            )

    def _new_session(self) -> tuple[SlaveSession, int]:
        """Before a stream: reconcile the epochs (controller mode), take the handshake's durable
        end, and the stream's session from there (raises _StreamFailed)."""
        if self._epochs is not None:
            with self._channel() as channel:
                self._reconcile(channel)
        durable = self._durable_end()
        end = self._store.max_offset
        session = SlaveSession(
            segment_size=self._segment_size,
            log_end=end,
            log_empty=end == 0,
            durable_offset=durable,
            now_ms=self._monotonic(),
            heartbeat_ms=self._ha.ha_send_heartbeat_interval_ms,
            housekeeping_ms=self._ha.ha_housekeeping_interval_ms,
        )
        return session, durable

    def _stream_ended(self, stream: _Stream) -> None:
        with self._cond:
            stream.ended = True
            self._current = None
            if stream.session.accepted:
                self._last = stream.session
            self._cond.notify_all()

    def _stream(self) -> _StreamFailed:
        """One stream, from the handshake to its end; returns why it ended."""
        try:
            session, durable = self._new_session()
        except _StreamFailed as exc:
            return exc
        stream = _Stream(session)
        channel = self._channel()
        try:
            with channel:
                try:
                    stream.auth, metadata = self._login(channel, "Replicate")
                except _StreamFailed as exc:
                    return exc
                with self._cond:
                    if self._stop.is_set():
                        return _StreamFailed("stopped", stopped=True)
                    self._current = stream
                    stream.call = ha_pb2_grpc.ReplicationStub(channel).Replicate(
                        self._reports(stream, durable), metadata=metadata
                    )
                try:
                    for chunk in stream.call:
                        self._take(stream, chunk)
                except grpc.RpcError as exc:
                    return self._rpc_failure(stream, exc)
                except _StreamFailed as exc:
                    return exc
                return self._ended(stream, "the master ended the stream")
        finally:
            self._stream_ended(stream)
            if stream.call is not None:
                stream.call.cancel()

    def _ended(self, stream: _Stream, otherwise: str, *, refusal: bool = False) -> _StreamFailed:
        """Why a stream ended: stopped, else the failure it closed itself with, else `otherwise`."""
        if self._stop.is_set():
            return _StreamFailed("stopped", stopped=True)
        if stream.failure is not None:
            return _StreamFailed(stream.failure)
        return _StreamFailed(otherwise, refusal=refusal)

    def _rpc_failure(self, stream: _Stream, exc: grpc.RpcError) -> _StreamFailed:
        code, text = describe(exc, tls=self._credentials is not None)
        return self._ended(stream, text, refusal=code in _REFUSALS)

    def _take(self, stream: _Stream, chunk: ha_pb2.Chunk) -> None:
        end = self._append(stream, chunk)
        if end is None:
            return
        if not self._sync_flush:
            self._advance(stream.session, end)
            return
        # Flushed on this thread: the fdatasync releases the GIL, chunks that arrive meanwhile
        # wait in the stream, and the next flush covers all of them.
        future = self._store.request_flush(end, flush_here=True)
        if future is None:
            self._advance(stream.session, end)
        else:
            future.add_done_callback(functools.partial(self._flushed, stream.session, end))

    def _append(self, stream: _Stream, chunk: ha_pb2.Chunk) -> int | None:
        """Check a chunk (its MAC, the session's checks, its epoch) and append its records: the
        log's new end, or None for a heartbeat. Raises _StreamFailed when the stream must close."""
        session = stream.session
        if stream.auth is not None:
            try:
                stream.auth.open(CHUNK, chunk.mac, *chunk_parts(chunk))
            except AuthenticationError as exc:
                raise _StreamFailed(str(exc), refusal=True) from None
        now = self._monotonic()
        with self._cond:
            first = not session.accepted
            check = session.receive(chunk, now)
            if first and session.accepted:
                self._sessions += 1
                self._last_error = ""
        if not check.ok:
            raise _StreamFailed(f"protocol error ({check.verdict.name}): {check.reason}")
        if first:
            self._policy.accepted()
            self.metadata.round_soon()  # a pop journal goes back to the master without waiting
            log.info(
                "replicating from %s from offset %d (master max %d)",
                self._address,
                chunk.start_offset,
                chunk.master_max_offset,
            )
        self.confirmed_offset = chunk.confirmed_offset
        if check.verdict is ChunkVerdict.HEARTBEAT:
            return None
        if self._epochs is not None and chunk.epoch > 0:
            self._check_epoch(chunk)
        try:
            # Dispatched once the ack is on its way (`_reports`), not here: the dispatch would
            # take the GIL from this chunk's flush and ack.
            end = self._store.append_replicated(chunk.start_offset, chunk.data, wake_dispatcher=False)
        except ReplicatedAppendError as exc:
            raise _StreamFailed(f"the chunk at {chunk.start_offset} cannot be appended: {exc}") from None
        except OSError as exc:  # a new segment cannot be created (disk full, permissions)
            raise _StreamFailed(f"the chunk at {chunk.start_offset} cannot be stored: {exc}") from None
        with self._cond:
            session.appended(check)
        return end

    def _flushed(self, session: SlaveSession, end: int, future: StatusFuture) -> None:
        status = future.result()
        if status is PutMessageStatus.PUT_OK:
            self._advance(session, end)
        else:
            log.warning("flushing replicated bytes to %d: %s; a later flush acknowledges them", end, status.name)

    def _advance(self, session: SlaveSession, durable: int) -> None:
        with self._cond:
            if session.durable(durable):
                self._cond.notify_all()

    def _fail(self, stream: _Stream, message: str) -> None:
        """Close the stream from inside: the receive loop ends with `message`."""
        with self._cond:
            if stream.failure is None:
                stream.failure = message
            self._cond.notify_all()
        if stream.call is not None:
            stream.call.cancel()

    def _reports(self, stream: _Stream, durable: int) -> Iterator[ha_pb2.SlaveReport]:
        """The stream's reports (run by gRPC's sending thread): the handshake, then acks as the
        session says; gives up a stream whose master went silent."""
        store = self._store
        session = stream.session
        yield self._handshake_report(stream, durable)
        while True:
            offset = None
            with self._cond:
                while True:
                    if stream.ended or stream.failure is not None or self._stop.is_set():
                        return
                    now = self._monotonic()
                    if session.silent(now):
                        break
                    offset = session.report_due(now)
                    if offset is not None:
                        break
                    self._cond.wait(session.wait_ms(now) / 1000)
            if offset is None:
                self._fail(
                    stream, f"no chunk from the master within {session.housekeeping_ms} ms (haHousekeepingInterval)"
                )
                return
            yield self._ack_report(stream, offset)
            # gRPC asks for the next report once this one is sent: the appended chunks are
            # dispatched now, after their ack, not before it, on this thread (idle until the next
            # report is due) rather than by waking the dispatcher's.
            store.dispatch_here()

    def _handshake_report(self, stream: _Stream, durable: int) -> ha_pb2.SlaveReport:
        """The stream's first report: who this slave is and where it wants the log from."""
        epoch, epoch_start = self._last_epoch(durable)
        report = ha_pb2.SlaveReport(
            durable_offset=durable,
            broker_name=self._broker_name,
            broker_id=self._broker_id,
            client_endpoint=self._client_endpoint,
            max_offset=self._store.max_offset,
            epoch=epoch,
            epoch_start_offset=epoch_start,
        )
        return self._sealed(stream, report)

    def _ack_report(self, stream: _Stream, durable: int) -> ha_pb2.SlaveReport:
        return self._sealed(stream, ha_pb2.SlaveReport(durable_offset=durable, max_offset=self._store.max_offset))

    @staticmethod
    def _sealed(stream: _Stream, report: ha_pb2.SlaveReport) -> ha_pb2.SlaveReport:
        if stream.auth is not None:
            report.mac = stream.auth.seal(REPORT, *report_parts(report))
        return report
