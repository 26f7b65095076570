"""RocketMQ's remoting protocol served over the store (the TCP API of RocketMQ 4.x clients).

Beside the gRPC client API, opt-in with `remotingListenPort` (bound like the other servers, on
`bindAddress` or `brokerIP1`). Frames and codes are `wire.remoting`'s. Served:

| code | answer |
|---|---|
| SEND_MESSAGE(_V2), SEND_BATCH_MESSAGE | the put's status as a response code; `msgId`, `queueId`, `queueOffset` |
| PULL_MESSAGE | stored records as the body, next/min/max offsets; long polling (suspend flag); offset commit |
| QUERY_CONSUMER_OFFSET, UPDATE_CONSUMER_OFFSET | the group's committed offset (QUERY_NOT_FOUND when none) |
| GET_MAX_OFFSET, GET_MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP | queue offsets |
| HEART_BEAT, UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP | each group's consumers, in the broker's ClientRegistry |
| GET_ROUTEINFO_BY_TOPIC | the NameServer's route lookup for this broker group: its queues and its address |

Anything else is answered REQUEST_CODE_NOT_SUPPORTED with the code in the remark. A request that
is malformed (bad names, queue ids, properties, a transactional send, which this API cannot end)
gets its own error answer and a rate-limited one-line log; nothing else is affected. A put waits on
the same flush and replicas as a gRPC put and gets the same statuses: PUT_OK -> SUCCESS,
FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE (stored, the guarantee missing),
IN_SYNC_REPLICAS_NOT_ENOUGH -> SYSTEM_ERROR (as RocketMQ 5 answers it), bad input ->
MESSAGE_ILLEGAL, a slave or a fenced master -> SERVICE_NOT_AVAILABLE (nothing stored).

Puts that arrive together are stored together: sends for one topic and queue, from any
connection, that are parsed in the same turn of the loop go to the store as one batch (one
encode pass, one append under the CommitLog lock, one flush request, one replication wait) and
each gets its own answer. Sends that carry a producer's retry id, delays or transactions are put
one by one (the store deduplicates and schedules those per message).

Offsets follow the gRPC API's rules (`queue_access.py`): the topic must exist, the queue id be in
range, and the consumer offset table below consumerOffsetMaxEntries for a new entry. A message is
stored with the sysFlag the broker derives (`store.message.producer_sys_flag`), never the
client's transaction bits.

Limits (`remoting_limits.py`, `client_registry.py`, keys in docs/brokers.md): connections, bytes
of incomplete frames across connections, idle connections and frames that do not complete in time
are closed; heartbeats register clients within per-group, group and total counts, and clients
expire on the registry's own schedule (this server's sweep runs it). A connection whose answers
the peer does not read stops being read until they drain (asyncio's write flow control).

Threads: the server runs its own event loop (uvloop when installed) on a thread of its own, so
neither the gRPC loop nor its per-call cost is on this path. Store calls that may block (reads,
topic creation) run in worker threads; puts await the store's futures on the loop. `stop` closes
the listener and the connections and joins the thread.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass

from store import BrokerRole, GetMessageStatus, Message, MessageStore, PutMessageResult, PutMessageStatus, TagFilter
from store.auto_create import AutoCreateRefusal
from store.message import (
    COMPRESSED_FLAG,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_TYPE_MASK,
    producer_sys_flag,
)
from store.topic_config import SYSTEM_TOPICS, TopicConfig
from wire.log_limit import LogLimiter
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

from . import codes
from .client_registry import ClientRegistry
from .arrivals import ArrivalWatch
from .batching import append_chunks
from .client_table import MAX_CLIENT_ID_LENGTH
from .event_loop import new_event_loop
from .config import BrokerConfigs, remoting_max_frame_bytes
from .queue_access import (
    QueueRefusal,
    Refused,
    commit_consumer_offset,
    group_problem,
    name_and_queue_problem,
    offset_problem,
    queue_id_problem,
)
from .remoting_limits import ConnectionBudget, ConnectionClock
from .v2_messages import name_problem
from .view import BrokerView

log = logging.getLogger("rocketstore.broker.remoting")

R = ResponseCode
P = PutMessageStatus

PUT_RESPONSE: dict[PutMessageStatus, ResponseCode] = {
    P.PUT_OK: R.SUCCESS,
    P.FLUSH_DISK_TIMEOUT: R.FLUSH_DISK_TIMEOUT,
    P.FLUSH_SLAVE_TIMEOUT: R.FLUSH_SLAVE_TIMEOUT,
    P.SLAVE_NOT_AVAILABLE: R.SLAVE_NOT_AVAILABLE,
    P.IN_SYNC_REPLICAS_NOT_ENOUGH: R.SYSTEM_ERROR,
    P.MESSAGE_ILLEGAL: R.MESSAGE_ILLEGAL,
    P.PROPERTIES_SIZE_EXCEEDED: R.MESSAGE_ILLEGAL,
    P.SERVICE_NOT_AVAILABLE: R.SERVICE_NOT_AVAILABLE,
    P.OS_PAGE_CACHE_BUSY: R.SYSTEM_BUSY,
    P.CREATE_MAPPED_FILE_FAILED: R.SYSTEM_ERROR,
    P.UNKNOWN_ERROR: R.SYSTEM_ERROR,
}
# PullMessageRequestHeader.sysFlag bits.
FLAG_COMMIT_OFFSET = 1
FLAG_SUSPEND = 2
MAX_PULL_MESSAGES = 1024
# Requests of one connection in progress at most before the server stops reading it (it reads on
# when half of them are answered): a pipelining peer waits in its socket, not in the broker's memory.
MAX_REQUESTS_PER_CONNECTION = 1024
# A heartbeat body is a small JSON document (a client's groups and subscriptions); parsing one runs
# on the loop's thread, so a larger one is refused unparsed.
MAX_HEARTBEAT_BYTES = 1024 * 1024

_REFUSAL_CODES = {
    QueueRefusal.ILLEGAL_TOPIC: R.INVALID_PARAMETER,
    QueueRefusal.ILLEGAL_GROUP: R.INVALID_PARAMETER,
    QueueRefusal.ILLEGAL_QUEUE_ID: R.INVALID_PARAMETER,
    QueueRefusal.TOPIC_NOT_FOUND: R.TOPIC_NOT_EXIST,
    QueueRefusal.ILLEGAL_OFFSET: R.INVALID_PARAMETER,
    QueueRefusal.TABLE_FULL: R.SYSTEM_ERROR,
}


class BadRequest(Exception):
    """A request field that is missing or malformed: answered with `code` and the text."""

    def __init__(self, code: ResponseCode, text: str) -> None:
        super().__init__(text)
        self.code = code


def _int(fields: dict[str, str], name: str, default: int | None = None) -> int:
    raw = fields.get(name)
    if raw is None or raw == "":
        if default is None:
            raise BadRequest(R.INVALID_PARAMETER, f"the request lacks {name}")
        return default
    try:
        return int(raw)
    except ValueError:
        raise BadRequest(R.INVALID_PARAMETER, f"{name}={raw[:40]!r} is not an integer") from None


def _text(fields: dict[str, str], name: str) -> str:
    value = fields.get(name)
    if not value:
        raise BadRequest(R.INVALID_PARAMETER, f"the request lacks {name}")
    return value


def _refuse(refused: Refused | None) -> None:
    if refused is not None:
        raise BadRequest(_REFUSAL_CODES[refused.kind], refused.text)


@dataclass(slots=True)
class _Send:
    """One stored-or-refused answer in the making: the request and its message(s)."""

    request: RemotingCommand
    connection: _Connection
    messages: list[Message]
    batch: bool


class _Connection(asyncio.Protocol):
    def __init__(self, server: RemotingServer) -> None:
        self._server = server
        self._decoder = FrameDecoder(server.max_frame_bytes)
        self.transport: asyncio.Transport | None = None
        self.peer: tuple[str, int] = ("127.0.0.1", 0)
        self.clock = ConnectionClock(server.limits, server.now_ms())
        # Requests of this connection not answered yet (a long poll among them): it is not idle.
        self.in_flight = 0
        # Set while the peer reads its answers; a pull reads the store only then.
        self.writable = asyncio.Event()
        self.writable.set()
        self._charged = 0  # bytes of its incomplete frame, as the server's budget counts them
        self._admitted = False
        self._too_busy = False  # reading paused: MAX_REQUESTS_PER_CONNECTION in progress

    @property
    def charged(self) -> int:
        return self._charged

    @property
    def reading_paused(self) -> bool:
        """Whether this server stopped reading it (the peer cannot finish a frame meanwhile)."""
        return self._too_busy or not self.writable.is_set()

    def connection_made(self, transport) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self.peer = (str(peer[0]), int(peer[1]))
        refused = self._server.budget.admit()
        if refused is not None:
            self.close("connections", refused)
            return
        self._admitted = True
        self._server.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._leave()
        self.transport = None
        self.writable.set()  # waiting pulls go on, and find no one to answer

    def _leave(self) -> None:
        """Give back what the server's budget counts for this connection (once)."""
        if self._admitted:
            self._admitted = False
            self._server.budget.release(self._charged)
            self._charged = 0
            self._server.connections.discard(self)

    def data_received(self, data: bytes) -> None:
        if not self._admitted:
            return
        server = self._server
        try:
            commands = self._decoder.feed(data)
        except RemotingProtocolError as exc:
            self._recharge()
            self.close("protocol", str(exc))
            return
        over = self._recharge()
        now = server.now_ms()
        self.clock.received(now, len(commands), self._charged)
        if over is not None:
            server.evict(over, now)
            if not self._admitted:
                return  # its own frame was the oldest
        for command in commands:
            server.handle(self, command)
        if self.in_flight >= MAX_REQUESTS_PER_CONNECTION and not self._too_busy:
            self._too_busy = True
            self._follow_flow()

    def _recharge(self) -> str | None:
        """Tell the server's budget what the decoder holds now; why the total is too much."""
        now = self._decoder.buffered
        over = self._server.budget.rebuffer(self._charged, now)
        self._charged = now
        return over

    def close(self, kind: str, reason: str) -> None:
        """Drop the connection at once (unsent answers too): it broke a rule or a limit. Logged
        once per `kind` and peer host per interval (each cause shows up in a flood of another)."""
        self._server.refused(f"closing: {kind}", self, "remoting: closing %s:%d: %s", *self.peer, reason)
        self._leave()
        if self.transport is not None:
            self.transport.abort()

    def _follow_flow(self) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        if self.reading_paused:
            transport.pause_reading()
        else:
            transport.resume_reading()

    def pause_writing(self) -> None:
        # The peer does not read its answers: read no more requests until they drain.
        self.writable.clear()
        self._follow_flow()

    def resume_writing(self) -> None:
        self.writable.set()
        self._follow_flow()

    def send(self, response: RemotingCommand) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(encode(response))
            self.clock.sent(self._server.now_ms())

    def reply(self, request: RemotingCommand, response: RemotingCommand) -> None:
        """Answer `request`, unless it is one-way (its sender wants no answer)."""
        if not request.is_oneway:
            self.send(response)

    def finish(self, request: RemotingCommand, response: RemotingCommand) -> None:
        """Done with a request `RemotingServer.handle` admitted: reply to it."""
        self.in_flight -= 1
        self._server.budget.end_request(len(request.body))
        self.reply(request, response)
        if self._too_busy and self.in_flight <= MAX_REQUESTS_PER_CONNECTION // 2:
            self._too_busy = False
            self._follow_flow()


class RemotingServer:
    def __init__(
        self,
        store: MessageStore,
        configs: BrokerConfigs,
        view: BrokerView,
        *,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
        max_frame_bytes: int | None = None,
        clients: ClientRegistry | None = None,
    ) -> None:
        self._store = store
        self._configs = configs
        self._view = view
        self._clock = clock_ms
        self.max_frame_bytes = max_frame_bytes or remoting_max_frame_bytes(store.config)
        self.limits = configs.broker.remoting_limits
        self.budget = ConnectionBudget(self.limits)
        self.connections: set[_Connection] = set()
        self.endpoint = ""
        # Lines a peer can provoke at will: refused requests and closed connections, and failures
        # (a bug a request runs into, with its traceback), one per kind and peer host per 10 s.
        self._refusals = LogLimiter(log, logging.WARNING)
        self._failures = LogLimiter(log, logging.ERROR)
        self._arrivals = ArrivalWatch()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._thread: threading.Thread | None = None
        self._sweeper: asyncio.TimerHandle | None = None
        self._pending_sends: list[_Send] = []
        # The broker's record of its clients: this API's consumer lists, the admin API's too.
        self._clients = clients if clients is not None else ClientRegistry(configs.broker.client_limits)
        self._create_lock: asyncio.Lock | None = None
        self._tasks: set[asyncio.Task] = set()

    def now_ms(self) -> int:
        """The loop's monotonic clock in ms (connection timeouts)."""
        loop = self._loop
        return int((loop.time() if loop is not None else time.monotonic()) * 1000)

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self, host: str, port: int, advertised_host: str) -> str:
        """Listen on host:port (0: the OS chooses); returns the advertised endpoint. OSError when
        the port cannot be bound (nothing is left running then)."""
        bound: dict[str, object] = {}
        ready = threading.Event()

        def run() -> None:
            loop = new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                self._create_lock = asyncio.Lock()
                self._arrivals.bind_loop(loop)
                self._server = loop.run_until_complete(
                    loop.create_server(lambda: _Connection(self), host, port, reuse_address=True)
                )
                bound["port"] = self._server.sockets[0].getsockname()[1]
                self._sweeper = loop.call_later(self.limits.sweep_interval_ms / 1000, self._sweep)
            except BaseException as exc:
                bound["error"] = exc
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.close()

        self._thread = threading.Thread(target=run, name="remoting-server", daemon=True)
        self._thread.start()
        ready.wait()
        if "error" in bound:
            self._thread.join()
            self._thread = None
            raise bound["error"]  # type: ignore[misc]
        self.endpoint = f"{advertised_host}:{bound['port']}"
        self._store.add_arrival_listener(self._arrivals.on_arrival)
        return self.endpoint

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return

        async def close() -> None:
            if self._sweeper is not None:
                self._sweeper.cancel()
            if self._server is not None:
                self._server.close()
            for conn in list(self.connections):
                if conn.transport is not None:
                    conn.transport.close()
            for task in list(self._tasks):
                task.cancel()
            if self._server is not None:
                await self._server.wait_closed()

        try:
            asyncio.run_coroutine_threadsafe(close(), loop).result(10)
        except Exception:
            log.exception("remoting: closing the server failed")
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        self._thread = None

    def _sweep(self) -> None:
        """On the loop, every sweep interval: close connections past their timeouts, expire
        clients whose heartbeats stopped."""
        try:
            now = self.now_ms()
            for conn in list(self.connections):
                reason = conn.clock.overdue(now, conn.in_flight > 0, receiving=not conn.reading_paused)
                if reason is not None:
                    conn.close("timeout", reason)
            self._clients.housekeep(self._clock())
        except Exception:
            self._failures.log("sweep", "remoting: the connection sweep failed: %s", traceback.format_exc())
        loop = self._loop
        if loop is not None and not loop.is_closed():
            self._sweeper = loop.call_later(self.limits.sweep_interval_ms / 1000, self._sweep)

    # -- dispatch -------------------------------------------------------------------------------

    def handle(self, conn: _Connection, request: RemotingCommand) -> None:
        """Serve one request: every request admitted here is finished exactly once (answered
        unless one-way), at once or when its task or put ends."""
        if request.is_response:
            return  # this server sends no requests; a stray answer is dropped
        busy = self.budget.begin_request(len(request.body))
        if busy is not None:
            self.refused("busy", conn, "remoting: busy, request code %d from %s:%d: %s", request.code, *conn.peer, busy)
            conn.reply(request, request.answer(R.SYSTEM_BUSY, busy))
            return
        conn.in_flight += 1
        code = request.code
        try:
            if code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
                self._queue_send(conn, request)
                return
            handler = self._HANDLERS.get(code)
            if handler is not None:
                conn.finish(request, handler(self, request, conn))
                return
            waiting = self._ASYNC_HANDLERS.get(code)
            if waiting is None:
                text = f"request code {code} is not supported"
                conn.finish(request, request.answer(R.REQUEST_CODE_NOT_SUPPORTED, text))
                return
            self._spawn(self._answer(conn, request, waiting))
        except BadRequest as exc:
            self._refused(conn, request, exc)
            conn.finish(request, request.answer(exc.code, str(exc)))
        except Exception as exc:
            conn.finish(request, request.answer(R.SYSTEM_ERROR, self._failed(conn, request, exc)))

    def evict(self, over: str, now_ms: int) -> None:
        """The incomplete frames of all connections passed the cap: close the connections whose
        frames began longest ago (the slowest senders, not the one that happened to cross it)
        until they are within it again."""

        def began(conn: _Connection) -> int:
            started = conn.clock.frame_started_ms
            return now_ms if started is None else started

        holding = sorted((c for c in self.connections if c.charged), key=began)
        for conn in holding:
            if self.budget.buffered <= self.limits.max_buffered_bytes:
                break
            conn.close("buffered", over)

    def refused(self, kind: str, conn: _Connection, message: str, *args: object) -> None:
        """Log one line of a refusal, once per kind and peer host per interval."""
        self._refusals.log(f"{kind} {conn.peer[0]}", message, *args)

    def _refused(self, conn: _Connection, request: RemotingCommand, exc: BadRequest) -> None:
        text = str(exc)[:200]
        message = "remoting: refused request code %d from %s:%d: %s: %s"
        self.refused("refused", conn, message, request.code, *conn.peer, exc.code.name, text)

    def _failed(self, conn: _Connection, request: RemotingCommand, exc: Exception) -> str:
        """Log a failure this server did not expect (a bug) with its traceback, once per request
        code and peer host per interval; the answer's remark. Called in the `except` block."""
        self._failures.log(
            f"failed {request.code} {conn.peer[0]}",
            "remoting: request code %d from %s:%d failed: %s",
            request.code,
            *conn.peer,
            traceback.format_exc(),
        )
        return f"internal error ({type(exc).__name__}); see the broker log"

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer(self, conn: _Connection, request: RemotingCommand, handler) -> None:
        try:
            response = await handler(self, request, conn)
        except BadRequest as exc:
            self._refused(conn, request, exc)
            response = request.answer(exc.code, str(exc))
        except Exception as exc:
            response = request.answer(R.SYSTEM_ERROR, self._failed(conn, request, exc))
        conn.finish(request, response)

    # -- sends ----------------------------------------------------------------------------------

    def _send_fields(self, request: RemotingCommand) -> dict[str, str]:
        fields = dict(request.ext_fields)
        if request.code != RequestCode.SEND_MESSAGE:
            fields = {SEND_V2_FIELDS.get(k, k): v for k, v in fields.items()}
        return fields

    def _refusal(self) -> str | None:
        if self._view.role is BrokerRole.SLAVE:
            master = self._view.master_client_endpoint()
            where = f" (its master's client API: {master})" if master else ""
            return f"{codes.NOT_MASTER}: {self._configs.broker.broker_name} is a SLAVE{where}"
        reason = self._view.write_refusal()
        return f"{codes.NOT_MASTER}: not acknowledged: {reason}; nothing was written" if reason else None

    def _queue_send(self, conn: _Connection, request: RemotingCommand) -> None:
        refused = self._refusal()
        if refused is not None:
            conn.finish(request, request.answer(R.SERVICE_NOT_AVAILABLE, refused))
            return
        fields = self._send_fields(request)
        topic = _text(fields, "topic")
        problem = name_problem("topic", topic)
        if problem is not None:
            raise BadRequest(R.MESSAGE_ILLEGAL, problem)
        if topic in SYSTEM_TOPICS:
            raise BadRequest(R.NO_PERMISSION, f"{topic} is a system topic; producers cannot send to it")
        queue_id = _int(fields, "queueId")
        bad_queue = queue_id_problem(queue_id)
        if bad_queue is not None:
            raise BadRequest(R.MESSAGE_ILLEGAL, bad_queue.text)
        born_ms = _int(fields, "bornTimestamp", 0)
        sent_flag = _int(fields, "sysFlag", 0)
        batch = request.code == RequestCode.SEND_BATCH_MESSAGE or fields.get("batch") == "true"
        try:
            properties = string_to_properties(fields.get("properties", ""))
            if batch:
                items = decode_batch_body(request.body)
            else:
                items = None
        except (ValueError, UnicodeDecodeError) as exc:
            raise BadRequest(R.MESSAGE_ILLEGAL, f"the request does not decode: {exc}") from None
        if sent_flag & TRANSACTION_TYPE_MASK == TRANSACTION_PREPARED_TYPE or _transactional(properties):
            raise BadRequest(
                R.MESSAGE_ILLEGAL,
                "transactional messages are served by the gRPC API only (this API has no END_TRANSACTION "
                "and no check-backs); nothing was stored",
            )
        # Of the client's sysFlag only the compression bit is taken, as over gRPC: a transaction
        # type it sets would hide the message from every consumer for good.
        sys_flag = producer_sys_flag(bool(sent_flag & COMPRESSED_FLAG))
        born = (conn.peer, born_ms if born_ms > 0 else None, _int(fields, "reconsumeTimes", 0))

        def message(body: bytes, props: dict[str, str], flag: int) -> Message:
            return Message(
                topic,
                queue_id,
                body,
                props,
                flag=flag,
                sys_flag=sys_flag,
                born_host=born[0],
                born_timestamp_ms=born[1],
                reconsume_times=born[2],
            )

        if items is None:
            messages = [message(request.body, properties, _int(fields, "flag", 0))]
        else:
            if not items:
                raise BadRequest(R.MESSAGE_ILLEGAL, "a batch without messages")
            if any(_transactional(i.properties) for i in items):
                raise BadRequest(R.MESSAGE_ILLEGAL, "a batch cannot carry transactional messages")
            messages = [message(i.body, properties | i.properties, i.flag) for i in items]
        pending = self._pending_sends
        pending.append(_Send(request, conn, messages, batch))
        if len(pending) == 1:
            # Sends parsed in this turn of the loop are stored together, after it.
            asyncio.get_running_loop().call_soon(self._flush_sends)

    def _flush_sends(self) -> None:
        sends, self._pending_sends = self._pending_sends, []
        try:
            puts = self._gathered(sends)
        except Exception:
            # A bug must not cost the turn's other sends their answers: each goes alone.
            self._failures.log("gather", "remoting: gathering %d sends failed: %s", len(sends), traceback.format_exc())
            puts = [[send] for send in sends]
        for put in puts:
            self._spawn(self._store_sends(put))

    def _gathered(self, sends: list[_Send]) -> list[list[_Send]]:
        """The turn's sends as puts: one append per topic and queue where they may share one."""
        puts: list[list[_Send]] = []
        groups: dict[tuple[str, int], list[_Send]] = {}
        recent = self._store.recent_ids
        keys: set[tuple[str, str]] = set()
        for send in sends:
            msg = send.messages[0]
            key = msg.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            # A producer's retry goes alone: the store answers it with its original's result.
            retry = key is not None and ((msg.topic, key) in keys or recent.get(msg.topic, key) is not None)
            if send.batch or retry or not _batchable(msg):
                puts.append([send])
            else:
                if key is not None:
                    keys.add((msg.topic, key))
                groups.setdefault((msg.topic, msg.queue_id), []).append(send)
        config = self._store.config
        for group in groups.values():
            puts.extend(append_chunks(group, _first_message, config.max_append_size, config.max_message_size))
        return puts

    async def _store_sends(self, sends: list[_Send]) -> None:
        try:
            topic, queue_id = sends[0].messages[0].topic, sends[0].messages[0].queue_id
            config = await self._writable_topic(topic)
            if isinstance(config, tuple):
                for send in sends:
                    send.connection.finish(send.request, send.request.answer(config[0], config[1]))
                return
            if queue_id >= config.write_queue_nums:
                text = f"queueId {queue_id} is out of range: topic {topic} has {config.write_queue_nums} write queues"
                for send in sends:
                    send.connection.finish(send.request, send.request.answer(R.MESSAGE_ILLEGAL, text))
                return
            if len(sends) == 1 and not sends[0].batch:
                result = await self._store.async_put_message(sends[0].messages[0])
                self._answer_put(sends[0], result, 0, 1)
                return
            messages = [m for send in sends for m in send.messages]
            result = await self._store.async_put_messages(messages)
            if len(sends) > 1 and result.status in (P.MESSAGE_ILLEGAL, P.PROPERTIES_SIZE_EXCEEDED):
                # One bad message refused the shared append before anything was written: put
                # each send alone, so only the bad one is refused.
                for send in sends:
                    self._spawn(self._store_sends([send]))
                return
            first = 0
            for send in sends:
                self._answer_put(send, result, first, len(send.messages))
                first += len(send.messages)
        except Exception as exc:
            for send in sends:
                text = self._failed(send.connection, send.request, exc)
                send.connection.finish(send.request, send.request.answer(R.SYSTEM_ERROR, text))

    def _answer_put(self, send: _Send, result: PutMessageResult, first: int, count: int) -> None:
        code = PUT_RESPONSE[result.status]
        stored = result.status in (P.PUT_OK, P.FLUSH_DISK_TIMEOUT, P.FLUSH_SLAVE_TIMEOUT, P.SLAVE_NOT_AVAILABLE)
        if stored:
            late = self._view.write_refusal()
            if late is not None:
                text = f"{codes.NOT_MASTER}: not acknowledged: {late}; the write may or may not be kept: retry it"
                send.connection.finish(send.request, send.request.answer(R.SERVICE_NOT_AVAILABLE, text))
                return
        if not stored and result.status is not P.IN_SYNC_REPLICAS_NOT_ENOUGH:
            send.connection.finish(send.request, send.request.answer(code, result.reason or result.status.name))
            return
        ids = result.msg_ids[first : first + count] if result.msg_ids else (result.msg_id,)
        fields = {
            "msgId": ",".join(ids),
            "queueId": str(send.messages[0].queue_id),
            "queueOffset": str(result.queue_offset + first),
            "MSG_REGION": "DefaultRegion",
            "TRACE_ON": "true",
        }
        remark = None if code is R.SUCCESS else (result.reason or result.status.name)
        send.connection.finish(send.request, send.request.answer(code, remark, fields))

    async def _writable_topic(self, topic: str) -> TopicConfig | tuple[ResponseCode, str]:
        drained = self._store.write_refusal()
        if drained is not None:
            return R.NO_PERMISSION, f"{self._configs.broker.broker_name}: {drained}"
        config = self._store.topics.get(topic)
        if config is None:
            assert self._create_lock is not None
            async with self._create_lock:
                made = await asyncio.to_thread(self._store.auto_create_topic, topic)
            if isinstance(made, AutoCreateRefusal):
                return R.TOPIC_NOT_EXIST, made.reason
            config = made
        if not config.writable:
            return R.NO_PERMISSION, f"topic {topic} is not writable (perm {config.perm})"
        return config

    # -- pulls ----------------------------------------------------------------------------------

    async def _pull(self, request: RemotingCommand, conn: _Connection) -> RemotingCommand:
        fields = dict(request.ext_fields)
        group, topic = _text(fields, "consumerGroup"), _text(fields, "topic")
        queue_id, offset = _int(fields, "queueId"), _int(fields, "queueOffset")
        # Reads of a topic not created yet wait for it (a long poll), so only names and ranges.
        _refuse(group_problem(group) or name_and_queue_problem(topic, queue_id))
        batch = max(1, min(_int(fields, "maxMsgNums", 32), MAX_PULL_MESSAGES))
        sys_flag = _int(fields, "sysFlag", 0)
        expression = fields.get("subscription") or "*"
        try:
            tag_filter = TagFilter.parse(expression) if fields.get("expressionType", "TAG") == "TAG" else None
        except ValueError as exc:
            raise BadRequest(R.SUBSCRIPTION_PARSE_FAILED, str(exc)) from None
        if fields.get("expressionType", "TAG") != "TAG":
            raise BadRequest(R.SUBSCRIPTION_PARSE_FAILED, "only TAG expressions are supported")
        if sys_flag & FLAG_COMMIT_OFFSET and self._view.role is not BrokerRole.SLAVE:
            commit = _int(fields, "commitOffset", -1)
            if commit >= 0:
                # Best effort, as in RocketMQ: a refused commit does not refuse the pull.
                refused = commit_consumer_offset(self._store, group, topic, queue_id, commit)
                if refused is not None:
                    message = "remoting: a pull's offset commit from %s:%d refused: %s"
                    self.refused("pull commit", conn, message, *conn.peer, refused.text)
        wait_ms = _int(fields, "suspendTimeoutMillis", 0) if sys_flag & FLAG_SUSPEND else 0
        wait_ms = min(wait_ms, self._configs.broker.long_polling_max_ms)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_ms / 1000
        key = (topic, queue_id)
        event: asyncio.Event | None = None
        try:
            while True:
                if event is not None:
                    event.clear()
                await conn.writable.wait()  # a peer that does not read its answers gets no more
                result = await asyncio.to_thread(
                    self._store.get_message, group, topic, queue_id, offset, batch, 4 * 1024 * 1024, tag_filter
                )
                header = {
                    "nextBeginOffset": str(result.next_begin_offset),
                    "minOffset": str(result.min_offset),
                    "maxOffset": str(result.max_offset),
                    "suggestWhichBrokerId": "0",
                }
                status = result.status
                if status is GetMessageStatus.FOUND:
                    body = b"".join(
                        self._store.commit_log_data(m.physical_offset, m.store_size) for m in result.messages
                    )
                    return request.answer(R.SUCCESS, None, header, body)
                if status is GetMessageStatus.MESSAGE_CORRUPTED:
                    # RocketMQ has no pull code for it: a client takes SYSTEM_ERROR as a failed
                    # pull and tries the same offset later, never skipping the message.
                    return request.answer(R.SYSTEM_ERROR, codes.corrupted_text(result), header)
                if status in (GetMessageStatus.NO_MATCHED_MESSAGE, GetMessageStatus.MESSAGE_WAS_REMOVING,
                              GetMessageStatus.OFFSET_FOUND_NULL):  # fmt: skip
                    return request.answer(R.PULL_RETRY_IMMEDIATELY, status.name, header)
                waitable = status in (GetMessageStatus.NO_MESSAGE_IN_QUEUE, GetMessageStatus.OFFSET_OVERFLOW_ONE) or (
                    status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE and offset == 0
                )
                if not waitable:
                    return request.answer(R.PULL_OFFSET_MOVED, status.name, header)
                if loop.time() >= deadline:
                    return request.answer(R.PULL_NOT_FOUND, status.name, header)
                if event is None:
                    event = self._arrivals.watch(key)  # watch, then read again: no arrival is missed
                    continue
                try:
                    await asyncio.wait_for(event.wait(), deadline - loop.time())
                except asyncio.TimeoutError:
                    pass
        finally:
            if event is not None:
                self._arrivals.unwatch(key, event)

    # -- offsets, clients, routes ---------------------------------------------------------------

    def _query_consumer_offset(self, request: RemotingCommand, conn: _Connection) -> RemotingCommand:
        f = dict(request.ext_fields)
        group, topic, queue_id = _text(f, "consumerGroup"), _text(f, "topic"), _int(f, "queueId")
        _refuse(offset_problem(self._store, group, topic, queue_id))
        offset = self._store.consumer_offsets.query_offset(group, topic, queue_id)
        if offset < 0:
            return request.answer(R.QUERY_NOT_FOUND, f"group {group} has no offset for {topic}:{queue_id}")
        return request.answer(R.SUCCESS, None, {"offset": str(offset)})

    def _update_consumer_offset(self, request: RemotingCommand, conn: _Connection) -> RemotingCommand:
        f = dict(request.ext_fields)
        group, topic, queue_id = _text(f, "consumerGroup"), _text(f, "topic"), _int(f, "queueId")
        offset = _int(f, "commitOffset")
        if self._view.role is BrokerRole.SLAVE:
            return request.answer(R.SERVICE_NOT_AVAILABLE, "offsets are committed on the master")
        _refuse(commit_consumer_offset(self._store, group, topic, queue_id, offset))
        return request.answer(R.SUCCESS)

    def _queue_fields(self, request: RemotingCommand) -> tuple[str, int]:
        f = dict(request.ext_fields)
        topic, queue_id = _text(f, "topic"), _int(f, "queueId")
        _refuse(name_and_queue_problem(topic, queue_id))
        return topic, queue_id

    def _max_offset(self, request: RemotingCommand, conn: _Connection) -> RemotingCommand:
        offset = self._store.max_queue_offset(*self._queue_fields(request))
        return request.answer(R.SUCCESS, None, {"offset": str(offset)})

    def _min_offset(self, request: RemotingCommand, conn: _Connection) -> RemotingCommand:
        offset = self._store.min_queue_offset(*self._queue_fields(request))
        return request.answer(R.SUCCESS, None, {"offset": str(offset)})

    async def _offset_by_time(self, request: RemotingCommand, conn: _Connection) -> RemotingCommand:
        topic, queue_id = self._queue_fields(request)
        when = _int(dict(request.ext_fields), "timestamp")
        offset = await asyncio.to_thread(self._store.get_offset_in_queue_by_time, topic, queue_id, when)
        return request.answer(R.SUCCESS, None, {"offset": str(offset)})

    def _heartbeat(self, request: RemotingCommand, conn: _Connection) -> RemotingCommand:
        if len(request.body) > MAX_HEARTBEAT_BYTES:
            raise BadRequest(R.INVALID_PARAMETER, f"a heartbeat of {len(request.body)} bytes (the limit is 1 MiB)")
        try:
            doc = json.loads(request.body or b"{}")
        except (ValueError, RecursionError) as exc:
            raise BadRequest(R.INVALID_PARAMETER, f"the heartbeat body is not JSON: {str(exc)[:200]}") from None
        if not isinstance(doc, dict):
            raise BadRequest(R.INVALID_PARAMETER, "the heartbeat body is not a JSON object")
        client_id = doc.get("clientID", "")
        consumers = doc.get("consumerDataSet") or []
        if not isinstance(client_id, str) or not isinstance(consumers, list):
            raise BadRequest(R.INVALID_PARAMETER, "the heartbeat's clientID or consumerDataSet has the wrong type")
        groups: list[str] = []
        for consumer in consumers:
            group = consumer.get("groupName") if isinstance(consumer, dict) else None
            if not isinstance(group, str):
                raise BadRequest(R.INVALID_PARAMETER, "a consumerDataSet entry lacks a groupName string")
            _refuse(group_problem(group))
            groups.append(group)
        if groups and (not client_id or len(client_id) > MAX_CLIENT_ID_LENGTH):
            raise BadRequest(R.INVALID_PARAMETER, f"clientID must be 1 to {MAX_CLIENT_ID_LENGTH} characters")
        # A producer's heartbeat (no consumer group) is recorded for the admin API, never refused.
        refused = self._clients.remoting_heartbeat(doc, f"{conn.peer[0]}:{conn.peer[1]}", self._clock())
        if refused is not None:
            raise BadRequest(R.SYSTEM_ERROR, refused)
        return request.answer(R.SUCCESS)

    def _unregister(self, request: RemotingCommand, conn: _Connection) -> RemotingCommand:
        f = dict(request.ext_fields)
        group, client_id = f.get("consumerGroup"), f.get("clientID", "")
        if client_id:
            # A consumer's goodbye names its group, a producer's its producer group; neither: all.
            self._clients.gone(client_id, group or f.get("producerGroup") or None)
        return request.answer(R.SUCCESS)

    def _consumer_list(self, request: RemotingCommand, conn: _Connection) -> RemotingCommand:
        group = _text(dict(request.ext_fields), "consumerGroup")
        _refuse(group_problem(group))
        clients = self._clients.consumer_ids(group, self._clock())
        if not clients:
            return request.answer(R.SYSTEM_ERROR, f"no consumer of group {group} is online")
        return request.answer(R.SUCCESS, None, None, json.dumps({"consumerIdList": clients}).encode())

    def _route(self, request: RemotingCommand, conn: _Connection) -> RemotingCommand:
        topic = _text(dict(request.ext_fields), "topic")
        problem = name_problem("topic", topic)
        if problem is not None:
            raise BadRequest(R.INVALID_PARAMETER, problem)
        config = self._store.topics.get(topic)
        slave = self._view.role is BrokerRole.SLAVE
        if config is None and not slave and self._store.config.auto_create_topic_enable:
            # A route to write to: the first send creates the topic (reads never do).
            count = self._store.config.default_topic_queue_nums
            config = TopicConfig(topic, count, count)
        if config is None:
            return request.answer(R.TOPIC_NOT_EXIST, f"no topic {topic} on this broker")
        broker = self._configs.broker
        # A slave's route is read-only, and so is a drained broker's.
        perm = config.perm & ~2 if slave or self._store.write_refusal() else config.perm
        route: dict[str, object] = {
            "orderTopicConf": None,
            "queueDatas": [
                {
                    "brokerName": broker.broker_name,
                    "readQueueNums": config.read_queue_nums,
                    "writeQueueNums": config.write_queue_nums,
                    "perm": perm,
                    "topicSysFlag": 0,
                }
            ],
            "brokerDatas": [
                {
                    "cluster": broker.broker_cluster_name,
                    "brokerName": broker.broker_name,
                    "brokerAddrs": {str(broker.broker_id if slave else 0): self.endpoint},
                }
            ],
            "filterServerTable": {},
        }
        return request.answer(R.SUCCESS, None, None, json.dumps(route).encode())

    # Served on the loop as they arrive: they wait on nothing (no task, nothing held per request).
    _HANDLERS: dict[int, Callable] = {
        RequestCode.QUERY_CONSUMER_OFFSET: _query_consumer_offset,
        RequestCode.UPDATE_CONSUMER_OFFSET: _update_consumer_offset,
        RequestCode.GET_MAX_OFFSET: _max_offset,
        RequestCode.GET_MIN_OFFSET: _min_offset,
        RequestCode.HEART_BEAT: _heartbeat,
        RequestCode.UNREGISTER_CLIENT: _unregister,
        RequestCode.GET_CONSUMER_LIST_BY_GROUP: _consumer_list,
        RequestCode.GET_ROUTEINFO_BY_TOPIC: _route,
    }
    # Served by a task each: they wait (a long poll, a read on a worker thread).
    _ASYNC_HANDLERS: dict[int, Callable] = {
        RequestCode.PULL_MESSAGE: _pull,
        RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: _offset_by_time,
    }


def _first_message(send: _Send) -> Message:
    return send.messages[0]


def _transactional(properties: dict[str, str]) -> bool:
    return properties.get(PROPERTY_TRANSACTION_PREPARED, "").lower() == "true"


def _batchable(msg: Message) -> bool:
    """Whether a send may share an append with others: the store schedules delays and tracks
    transactions per message."""
    props = msg.properties
    return not (
        msg.sys_flag & TRANSACTION_TYPE_MASK
        or PROPERTY_DELAY_TIME_LEVEL in props
        or PROPERTY_TRANSACTION_PREPARED in props
    )
