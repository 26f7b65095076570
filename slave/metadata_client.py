"""The slave's metadata copy: `MetadataSync`, a thread asking its master for the topic table,
consumer offsets and delay cursors (`rocketstore.ha.v1.Replication/GetMetadata`, authenticated
like the replication stream: in shared-secret mode each round starts with a Hello, and an answer
whose MAC fails is not applied) once at start and then every haMetadataSyncInterval, and applying
them with `ha.metadata_sync.apply_snapshot` (which holds the decisions).

After a round that applied the master's tables, and while the replication stream is up, the slave
hands back its pop journal (`store.pop_journal`: what it decided while it served reads for its
master that was down) with `HandBackPopEvents`, in calls of at most `HAND_BACK_BYTES`, and drops
each part the master accepted (it is in the master's log then). A stream that opens starts a
round at once (`round_soon`), so the journal goes back without waiting for the interval.

A failed round (the master unreachable, not master, or sending something that does not parse)
changes nothing it had not applied whole, is logged at WARNING once per distinct reason (INFO
when the master is merely not master yet), and is retried at the next interval.

Thread-safety: `start`, `stop`, `sync_once` and `state` from any thread; rounds are serialised by
a lock, so `sync_once` may run beside the thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc

from ha.metadata_sync import MetadataSnapshot, SyncResult, apply_snapshot
from ha.peer_auth import (
    METADATA,
    POP_EVENTS,
    POP_EVENTS_ANSWER,
    AuthenticationError,
    SlaveAuth,
    metadata_parts,
    pop_answer_parts,
    pop_events_parts,
)
from slave.peer_login import LoginFailed, login
from slave.rpc_failure import describe
from store import MessageStore
from store.clock import wall_clock_ms
from store.pop.pop_journal import PopJournal
from wire.rpc import ha_pb2, ha_pb2_grpc

log = logging.getLogger(__name__)

METHOD = "/rocketstore.ha.v1.Replication/GetMetadata"
# What a message's MAC covers (`ha.peer_auth`'s *_parts functions), and a request's MAC kind with it.
Parts = Callable[[Any], tuple[tuple[int, ...], tuple[bytes, ...]]]
Seal = tuple[bytes, Parts]
# Below the slave channel's send limit (1 MiB), with room for the call's other fields.
HAND_BACK_BYTES = 512 * 1024


class MetadataSyncFailed(Exception):
    """One round failed; nothing was applied past the part that failed. `passing`: the master is
    not master (yet), a state that ends by itself."""

    def __init__(self, message: str, *, passing: bool = False) -> None:
        super().__init__(message)
        self.passing = passing


@dataclass(frozen=True, slots=True)
class MetadataSyncState:
    # Wall-clock ms of the last round that applied the master's tables (0: none yet).
    last_sync_ms: int
    syncs: int
    last_error: str


class MetadataSync:
    def __init__(
        self,
        store: MessageStore,
        *,
        address: str,
        broker_name: str,
        broker_id: int = 0,
        auth: SlaveAuth | None,
        channel: Callable[[], grpc.Channel],
        interval_ms: int,
        timeout_ms: int,
        clock_ms: Callable[[], int] = wall_clock_ms,
        pop_journal: PopJournal | None = None,
        streaming: Callable[[], bool] = lambda: False,
    ) -> None:
        self._store = store
        self._address = address
        self._broker_name = broker_name
        self._broker_id = broker_id
        self._journal = pop_journal
        self._streaming = streaming
        self._auth = auth
        self._new_channel = channel
        self._interval_s = interval_ms / 1000
        self._timeout_s = timeout_ms / 1000
        self._clock = clock_ms
        self._stop = threading.Event()
        self._soon = threading.Event()  # a round before the interval is over (`round_soon`)
        self._round_lock = threading.Lock()
        self._channel: grpc.Channel | None = None
        self._thread: threading.Thread | None = None
        self._last_sync_ms = 0
        self._syncs = 0
        self._last_error = ""

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("the metadata sync was started already")
        self._channel = self._new_channel()
        self._thread = threading.Thread(target=self._run, name="ha-metadata", daemon=True)
        self._thread.start()

    def round_soon(self) -> None:
        """Start the next round now: the replication stream is (back) up, so a pop journal can
        be handed back at once instead of at the next interval. Any thread."""
        self._soon.set()

    def stop(self, timeout_s: float = 5) -> None:
        """End the thread (a call in flight is cancelled); idempotent."""
        self._stop.set()
        self._soon.set()
        channel = self._channel
        if channel is not None:
            channel.close()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)
            if thread.is_alive():
                log.warning("the metadata sync thread did not end within %.1f s", timeout_s)

    def state(self) -> MetadataSyncState:
        with self._round_lock:
            return MetadataSyncState(self._last_sync_ms, self._syncs, self._last_error)

    def sync_once(self) -> SyncResult:
        """One round: ask, apply. MetadataSyncFailed says why a round failed."""
        with self._round_lock:
            if self._stop.is_set():
                raise MetadataSyncFailed("stopped")
            try:
                result = self._round()
            except MetadataSyncFailed as exc:
                self._last_error = str(exc)
                raise
            self._last_sync_ms = self._clock()
            self._syncs += 1
            self._last_error = ""
            try:
                self._hand_back()
            except MetadataSyncFailed as exc:
                self._last_error = str(exc)
                raise
            return result

    def _round(self) -> SyncResult:
        if self._channel is None:
            self._channel = self._new_channel()  # sync_once without start()
        store = self._store
        request = ha_pb2.MetadataRequest(broker_name=self._broker_name, durable_offset=store.flushed_offset)
        answer = self._call("GetMetadata", request, METADATA, metadata_parts)
        if not answer.is_master:
            raise MetadataSyncFailed(f"{self._address} is not master (yet)", passing=True)
        try:
            snapshot = MetadataSnapshot.from_documents(
                answer.topics_json, answer.consumer_offsets_json, answer.delay_offsets_json
            )
            return apply_snapshot(store, snapshot)
        except ValueError as exc:
            raise MetadataSyncFailed(f"the master's metadata cannot be applied: {exc}") from None
        except RuntimeError as exc:  # this broker delivers delayed messages itself: a master now
            raise MetadataSyncFailed(str(exc), passing=True) from None

    def _hand_back(self) -> None:
        """Give the master the pop journal, part by part; MetadataSyncFailed when it took not all."""
        journal = self._journal
        if journal is None or not self._streaming():
            return  # while the stream is down this slave may still be deciding on its own
        batches = journal.batches()
        handed = 0
        while handed < len(batches):
            part: list[bytes] = []
            size = 0
            for batch in batches[handed:]:
                if part and size + len(batch) > HAND_BACK_BYTES:
                    break
                part.append(batch)
                size += len(batch)
            self._hand_back_part(part)
            journal.drop(len(part))
            handed += len(part)
        if handed:
            log.info("handed the pop journal (%d batches) back to the master at %s", handed, self._address)

    def _hand_back_part(self, batches: list[bytes]) -> None:
        request = ha_pb2.PopEventsRequest(broker_name=self._broker_name, broker_id=self._broker_id, batches=batches)
        answer = self._call(
            "HandBackPopEvents", request, POP_EVENTS_ANSWER, pop_answer_parts, seal=(POP_EVENTS, pop_events_parts)
        )
        if not answer.accepted:
            raise MetadataSyncFailed(f"the master did not take the pop journal back: {answer.reason}", passing=True)

    def _call(
        self, method: str, request: Any, answer_kind: bytes, answer_parts: Parts, seal: Seal | None = None
    ) -> Any:
        """One call to the master, authenticated in shared-secret mode: a Hello first, the request
        sealed when `seal` names its MAC kind and fields, the answer's MAC checked before it is
        used. MetadataSyncFailed says what failed."""
        assert self._channel is not None
        metadata = session = None
        if self._auth is not None:
            try:
                session, metadata = login(self._channel, self._auth, method, self._address, self._timeout_s)
            except LoginFailed as exc:
                raise MetadataSyncFailed(exc.message) from None
            if seal is not None:
                kind, parts = seal
                request.mac = session.seal(kind, *parts(request))
        try:
            answer = getattr(ha_pb2_grpc.ReplicationStub(self._channel), method)(
                request, metadata=metadata, timeout=self._timeout_s
            )
        except grpc.RpcError as exc:
            raise MetadataSyncFailed(f"{method}: {describe(exc)[1]}") from None
        if session is not None:
            try:
                session.open(answer_kind, answer.mac, *answer_parts(answer))
            except AuthenticationError as exc:
                raise MetadataSyncFailed(f"the answer from {self._address} is not authentic: {exc}") from None
        return answer

    def _run(self) -> None:
        reported = ""
        while not self._stop.is_set():
            try:
                result = self.sync_once()
            except MetadataSyncFailed as exc:
                message = str(exc)
                if message != reported and not self._stop.is_set():
                    log.log(
                        logging.INFO if exc.passing else logging.WARNING,
                        "copying metadata from %s failed: %s",
                        self._address,
                        message,
                    )
                reported = message
            except Exception:  # noqa: BLE001 - the thread must outlive any one round
                if self._stop.is_set():
                    break  # stop() closed the channel under the call
                log.exception("copying metadata from %s failed unexpectedly", self._address)
            else:
                if reported:
                    log.info("copying metadata from %s works again", self._address)
                    reported = ""
                if result.changed:
                    log.info(
                        "metadata from %s: topics %s, %d consumer offset entries changed, delay cursors %s",
                        self._address,
                        "replaced" if result.topics_replaced else "unchanged",
                        result.offsets_changed,
                        result.delay_cursors.value,
                    )
            self._soon.wait(self._interval_s)
            self._soon.clear()
