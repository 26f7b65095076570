"""RocketMQ's remoting protocol over the broker core (the TCP API of RocketMQ 4.x clients).

Beside the gRPC client API, opt-in with `remotingListenPort` (bound like the other servers, on
`bindAddress` or `brokerIP1`). Frames and codes are `wire.remoting`'s. Served:

| code | answer |
|---|---|
| SEND_MESSAGE(_V2), SEND_BATCH_MESSAGE | the put's status as a response code; `msgId`, `queueId`, `queueOffset` |
| PULL_MESSAGE | stored records as the body, next/min/max offsets; long polling (suspend flag); offset commit |
| QUERY_CONSUMER_OFFSET, UPDATE_CONSUMER_OFFSET | the group's committed offset (none: 0 from a queue starting at 0) |
| GET_MAX_OFFSET, GET_MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP | queue offsets |
| CONSUMER_SEND_MSG_BACK | a consumed message to `%RETRY%<group>` by delay level, or `%DLQ%<group>` (`core.send_back`) |
| HEART_BEAT, UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP | each group's consumers, in the broker's ClientRegistry |
| NOTIFY_CONSUMER_IDS_CHANGED (sent) | one-way, to a group's members when one joins, leaves or its connection closes |
| GET_ROUTEINFO_BY_TOPIC | the NameServer's route lookup: every group, its brokers by id (`remoting_routes`) |

A protocol adapter: each request is decoded, handed to a service of the broker core (`core/`:
sends, pulls, offsets, routes, clients) and its result or refusal encoded as a response code
(`remoting_codes.py`); the rules are the core's, shared with the gRPC API. What this module owns:
the connections and their limits, frame decoding, the request fields, the transaction refusal
(this API has no END_TRANSACTION and no check-backs, so a transactional send is MESSAGE_ILLEGAL,
nothing stored; only the compression bit of a client's sysFlag is taken), a pull's best-effort
offset commit (skipped on a slave, as 4.x clients commit to the master), and the stored records
a pull answers as they are in the CommitLog.

Anything else is answered REQUEST_CODE_NOT_SUPPORTED with the code in the remark. A request that
is malformed gets its own error answer and a rate-limited one-line log; nothing else is affected.
A put waits on the same flush and replicas as a gRPC put (the core's put path, `core.sender`)
and gets the same statuses: PUT_OK -> SUCCESS, FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT,
SLAVE_NOT_AVAILABLE (stored, the guarantee missing), IN_SYNC_REPLICAS_NOT_ENOUGH -> SYSTEM_ERROR
(as RocketMQ 5 answers it), bad input -> MESSAGE_ILLEGAL, a slave or a fenced master ->
SERVICE_NOT_AVAILABLE (nothing stored).

Limits (`remoting_limits.py`, `client_registry.py`, keys in docs/brokers.md): connections, bytes
of incomplete frames across connections, idle connections and frames that do not complete in time
are closed; heartbeats register clients within per-group, group and total counts, and clients
expire on the registry's own schedule (this server's sweep runs it). A connection whose answers
the peer does not read stops being read until they drain (asyncio's write flow control).

Threads: the server runs on an event loop (uvloop when installed) of a thread of its own (a
`LoopThread`: its own, or the one the broker gives it to share with the master's replication
stream), so neither the gRPC API's loop nor its per-call cost is on this path. Store calls that
may block (reads, topic creation) run in worker threads; puts await the store's futures on the
loop. `stop` closes the listener and the connections, and stops the loop and its thread when they
are its own.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import threading
import time
import traceback
from collections.abc import Callable, Sequence

from store import Message
from store.log.codec import CorruptMessage
from store.message import (
    COMPRESSED_FLAG,
    PROPERTY_TRANSACTION_PREPARED,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_TYPE_MASK,
    batch_messages,
    producer_sys_flag,
)
from wire.log_limit import LogLimiter
from wire.remoting import (
    ONEWAY_FLAG,
    SEND_V2_FIELDS,
    FrameDecoder,
    RemotingCommand,
    RemotingProtocolError,
    RequestCode,
    ResponseCode,
    batch_entries,
    encode,
    string_to_properties,
)

from .client_registry import Heartbeat
from .config import remoting_max_frame_bytes
from .core.long_polling import ArrivalWatch
from .core.pull import PullAction, PullRequest
from .core.queues import group_problem
from .core.refusals import Reason, Refusal
from .core.send import PutOutcomes, SendBatch, SendItem, SendOutcome
from .core.send_back import MAX_RECONSUME_TIMES, SendBack, sent_back
from .core.sender import Sender
from .core.services import BrokerCore
from .event_loop import LoopThread
from .remoting_codes import PULL_RESPONSE, PUT_RESPONSE, REASON_CODES, SEND_REASON_CODES
from .remoting_limits import ConnectionBudget, ConnectionClock
from .remoting_members import ConsumerConnections
from .remoting_routes import topic_route_data

log = logging.getLogger("rocketstore.broker.remoting")

R = ResponseCode
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
# A 4.x consumer subscribes to its group's retry topic by itself: not a topic it chose.
RETRY_PREFIX = "%RETRY%"


class BadRequest(Exception):
    """A request field that is missing or malformed: answered with `code` and the text."""

    def __init__(self, code: ResponseCode, text: str) -> None:
        super().__init__(text)
        self.code = code


# SEND_MESSAGE_V2's letters of the fields a send reads (`SEND_V2_FIELDS`), by their long names.
_SEND_V2_KEYS = tuple(
    (name, key)
    for key, name in SEND_V2_FIELDS.items()
    if name in ("topic", "queueId", "bornTimestamp", "sysFlag", "reconsumeTimes", "flag", "batch", "properties")
)


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


def _refuse(refused: Refusal | None) -> None:
    if refused is not None:
        raise BadRequest(REASON_CODES[refused.reason], refused.text)


def _value(found: int | Refusal) -> int:
    if isinstance(found, Refusal):
        raise BadRequest(REASON_CODES[found.reason], found.text)
    return found


def heartbeat_of(doc: object, address: str) -> Heartbeat:
    """A 4.x HEART_BEAT body (`clientID`, `language`, `version`, `producerDataSet`,
    `consumerDataSet` with each group's `subscriptionDataSet`) as the core's `Heartbeat`; the
    names in it are the core's to check. BadRequest when its shape is wrong."""
    if not isinstance(doc, dict):
        raise BadRequest(R.INVALID_PARAMETER, "the heartbeat body is not a JSON object")
    client_id = doc.get("clientID", "")
    consumers = doc.get("consumerDataSet") or []
    if not isinstance(client_id, str) or not isinstance(consumers, list):
        raise BadRequest(R.INVALID_PARAMETER, "the heartbeat's clientID or consumerDataSet has the wrong type")
    groups: dict[str, frozenset[str]] = {}
    for consumer in consumers:
        group = consumer.get("groupName") if isinstance(consumer, dict) else None
        if not isinstance(group, str):
            raise BadRequest(R.INVALID_PARAMETER, "a consumerDataSet entry lacks a groupName string")
        subscriptions = consumer.get("subscriptionDataSet")
        groups[group] = frozenset(
            s["topic"]
            for s in (subscriptions if isinstance(subscriptions, list) else ())
            if isinstance(s, dict) and isinstance(s.get("topic"), str) and not s["topic"].startswith(RETRY_PREFIX)
        )
    producers = doc.get("producerDataSet")
    producer_groups = tuple(
        p["groupName"]
        for p in (producers if isinstance(producers, list) else ())
        if isinstance(p, dict) and isinstance(p.get("groupName"), str) and p["groupName"]
    )
    language, version = str(doc.get("language", "")), str(doc.get("version", ""))
    return Heartbeat(client_id, address, groups, producer_groups, language, version)


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
        self._server.connection_closed(self)
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
        core: BrokerCore,
        *,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
        max_frame_bytes: int | None = None,
        loop_thread: LoopThread | None = None,
    ) -> None:
        """`loop_thread`: a running loop to serve on (the master's replication server shares it)
        instead of a loop of its own; its owner stops it after `stop`."""
        self._loop_thread = loop_thread
        self._own_loop: LoopThread | None = None  # the loop `start` made, when none was given
        self._core = core
        self._store = core.store
        self._clock = clock_ms
        self.max_frame_bytes = max_frame_bytes or remoting_max_frame_bytes(core.store.config)
        self.limits = core.configs.broker.remoting_limits
        self.budget = ConnectionBudget(self.limits)
        self.connections: set[_Connection] = set()
        self._members: ConsumerConnections[_Connection] = ConsumerConnections()
        self._notices = itertools.count(1)
        self.endpoint = ""
        # Lines a peer can provoke at will: refused requests and closed connections, and failures
        # (a bug a request runs into, with its traceback), one per kind and peer host per 10 s.
        self._refusals = LogLimiter(log, logging.WARNING)
        self._failures = LogLimiter(log, logging.ERROR)
        self._arrivals = ArrivalWatch()
        self._sender = Sender(core.sends)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._thread: threading.Thread | None = None
        self._sweeper: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task] = set()

    def now_ms(self) -> int:
        """The loop's monotonic clock in ms (connection timeouts)."""
        loop = self._loop
        return int((loop.time() if loop is not None else time.monotonic()) * 1000)

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self, host: str, port: int, advertised_host: str) -> str:
        """Listen on host:port (0: the OS chooses) on the given loop, or on a loop of its own;
        returns the advertised endpoint. OSError when the port cannot be bound (nothing is left
        running then)."""
        own = self._loop_thread is None
        loop_thread = self._loop_thread or LoopThread("remoting-server")
        loop = loop_thread.loop

        async def setup() -> int:
            self._arrivals.bind_loop(loop)
            server = self._server = await loop.create_server(lambda: _Connection(self), host, port, reuse_address=True)
            self._sweeper = loop.call_later(self.limits.sweep_interval_ms / 1000, self._sweep)
            return server.sockets[0].getsockname()[1]

        try:
            bound_port = asyncio.run_coroutine_threadsafe(setup(), loop).result()
        except BaseException:
            if own:
                loop_thread.stop()
            raise
        self._own_loop = loop_thread if own else None
        self._loop, self._thread = loop, loop_thread.thread
        self.endpoint = f"{advertised_host}:{bound_port}"
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
            self._sender.close()
            for task in list(self._tasks):
                task.cancel()
            if self._server is not None:
                await self._server.wait_closed()

        try:
            asyncio.run_coroutine_threadsafe(close(), loop).result(10)
        except Exception:
            log.exception("remoting: closing the server failed")
        if self._own_loop is not None:  # a given loop is its owner's to stop
            self._own_loop.stop()
            self._own_loop = None
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
            self._core.clients.housekeep(self._clock())
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

    def _queue_send(self, conn: _Connection, request: RemotingCommand) -> None:
        items, batch = self._send_items(conn, request)

        def done(outcomes: Sequence[SendOutcome]) -> None:
            conn.finish(request, _send_answer(request, outcomes))

        if isinstance(items, SendBatch):
            self._sender.submit_batch(items, done)
        else:
            self._sender.submit(items, done, unit=batch)

    def _send_items(self, conn: _Connection, request: RemotingCommand) -> tuple[list[SendItem] | SendBatch, bool]:
        """The request's messages for the core, and whether it is a batch: a batch the core takes
        as one value (`SendBatch`), or items. A message this API cannot take carries its refusal
        (the core answers it after the role and topic checks)."""
        ext = request.ext_fields
        if request.code == RequestCode.SEND_MESSAGE:
            fields = dict(ext)
        else:  # V2 names its fields with letters (a long name is taken too): those read here
            fields = {
                name: ext[key] if key in ext else ext[name] for name, key in _SEND_V2_KEYS if key in ext or name in ext
            }
        topic, queue_id = _text(fields, "topic"), _int(fields, "queueId")
        born_ms = _int(fields, "bornTimestamp", 0)
        sent_flag = _int(fields, "sysFlag", 0)
        reconsume_times = _int(fields, "reconsumeTimes", 0)
        flag = _int(fields, "flag", 0)
        batch = request.code == RequestCode.SEND_BATCH_MESSAGE or fields.get("batch") == "true"
        # Of the client's sysFlag only the compression bit is taken, as over gRPC: a transaction
        # type it sets would hide the message from every consumer for good.
        sys_flag = producer_sys_flag(bool(sent_flag & COMPRESSED_FLAG))

        born_host, born_at = conn.peer, born_ms if born_ms > 0 else None

        def item(body: bytes, properties: dict[str, str], flag: int, refused: Refusal | None = None) -> SendItem:
            # Positional, in Message's field order: a batch makes one per message.
            message = Message(
                topic, queue_id, body, properties, flag, sys_flag, born_host, None, born_at, reconsume_times
            )
            return SendItem(message, queue_id, "", None, None, refused)

        try:
            properties = string_to_properties(fields.get("properties", ""))
            parts = batch_entries(request.body) if batch else None
        except (ValueError, UnicodeDecodeError) as exc:
            return [item(request.body, {}, flag, _illegal(f"the request does not decode: {exc}"))], batch
        if sent_flag & TRANSACTION_TYPE_MASK == TRANSACTION_PREPARED_TYPE or _transactional(properties):
            return [item(request.body, properties, flag, _illegal(_NO_TRANSACTIONS))], batch
        if parts is None:
            return [item(request.body, properties, flag)], False
        if not parts:
            return [item(request.body, properties, flag, _illegal("a batch without messages"))], True
        if any(_transactional(p[2]) for p in parts):
            return [item(request.body, properties, flag, _illegal("a batch cannot carry transactional messages"))], True
        if properties:  # clients send each message's own properties only
            parts = [(body, flag, properties | own) for body, flag, own in parts]
        return SendBatch(
            batch_messages(topic, queue_id, parts, sys_flag, born_host, born_at, reconsume_times), queue_id
        ), True

    async def _send_back(self, request: RemotingCommand, conn: _Connection) -> RemotingCommand:
        """CONSUMER_SEND_MSG_BACK: the message at `offset` to the group's retry topic, delayed, or
        to its dead-letter topic (`core.send_back`), through the core's put path."""
        f = dict(request.ext_fields)
        group = _text(f, "group")
        _refuse(group_problem(group))
        back = SendBack(
            group,
            _int(f, "offset"),
            _int(f, "delayLevel", 0),
            _int(f, "maxReconsumeTimes", MAX_RECONSUME_TIMES),
            f.get("originMsgId") or "",
        )
        try:
            original = await asyncio.to_thread(self._store.read_message, back.commit_log_offset)
        except CorruptMessage as exc:
            offset = back.commit_log_offset
            raise BadRequest(R.SYSTEM_ERROR, f"no message to send back at offset {offset}: {exc}") from None
        outcomes = await self._sender.send([SendItem(sent_back(original, back), queue_id=0)])
        return _send_answer(request, outcomes)

    # -- pulls ----------------------------------------------------------------------------------

    async def _pull(self, request: RemotingCommand, conn: _Connection) -> RemotingCommand:
        fields = dict(request.ext_fields)
        sys_flag = _int(fields, "sysFlag", 0)
        pull = PullRequest(
            group=_text(fields, "consumerGroup"),
            topic=_text(fields, "topic"),
            queue_id=_int(fields, "queueId"),
            offset=_int(fields, "queueOffset"),
            max_messages=_int(fields, "maxMsgNums", 32),
            wait_ms=_int(fields, "suspendTimeoutMillis", 0) if sys_flag & FLAG_SUSPEND else 0,
            filter_type=fields.get("expressionType") or "TAG",
            filter_expression=fields.get("subscription") or "*",
        )
        pulls = self._core.pulls
        _refuse(pulls.check(pull))
        if sys_flag & FLAG_COMMIT_OFFSET:
            self._commit_of_pull(conn, pull, _int(fields, "commitOffset", -1))
        # A peer that does not read its answers gets no more reads.
        result = await pulls.read(pull, self._arrivals, conn.writable.wait)
        header = {
            "nextBeginOffset": str(result.next_offset),
            "minOffset": str(result.min_offset),
            "maxOffset": str(result.max_offset),
            "suggestWhichBrokerId": "0",
        }
        code = PULL_RESPONSE[result.action]
        if result.action is PullAction.DELIVER:
            body = b"".join(self._store.commit_log_data(m.physical_offset, m.store_size) for m in result.messages)
            return request.answer(code, None, header, body)
        # RocketMQ's remarks name the store's status; a damaged message's says which and how to go on.
        status = result.status
        remark = status.name if status is not None and result.action is not PullAction.REFUSE else result.text
        return request.answer(code, remark, header)

    def _commit_of_pull(self, conn: _Connection, pull: PullRequest, offset: int) -> None:
        """Best effort, as in RocketMQ: a refused commit does not refuse the pull; a slave takes
        none (4.x clients commit to the master only)."""
        if offset < 0 or self._core.roles.is_slave:
            return
        refused = self._core.offsets.commit(pull.group, pull.topic, pull.queue_id, offset)
        if refused is not None:
            message = "remoting: a pull's offset commit from %s:%d refused: %s"
            self.refused("pull commit", conn, message, *conn.peer, refused.text)

    # -- offsets, clients, routes ---------------------------------------------------------------

    def _query_consumer_offset(self, request: RemotingCommand, conn: _Connection) -> RemotingCommand:
        f = dict(request.ext_fields)
        group, topic, queue_id = _text(f, "consumerGroup"), _text(f, "topic"), _int(f, "queueId")
        offset = _value(self._core.offsets.start_offset(group, topic, queue_id))
        return request.answer(R.SUCCESS, None, {"offset": str(offset)})

    def _update_consumer_offset(self, request: RemotingCommand, conn: _Connection) -> RemotingCommand:
        f = dict(request.ext_fields)
        group, topic, queue_id = _text(f, "consumerGroup"), _text(f, "topic"), _int(f, "queueId")
        _refuse(self._core.offsets.commit(group, topic, queue_id, _int(f, "commitOffset")))
        return request.answer(R.SUCCESS)

    @staticmethod
    def _queue_fields(request: RemotingCommand) -> tuple[str, int]:
        f = dict(request.ext_fields)
        return _text(f, "topic"), _int(f, "queueId")

    def _max_offset(self, request: RemotingCommand, conn: _Connection) -> RemotingCommand:
        offset = _value(self._core.offsets.max_offset(*self._queue_fields(request)))
        return request.answer(R.SUCCESS, None, {"offset": str(offset)})

    def _min_offset(self, request: RemotingCommand, conn: _Connection) -> RemotingCommand:
        offset = _value(self._core.offsets.min_offset(*self._queue_fields(request)))
        return request.answer(R.SUCCESS, None, {"offset": str(offset)})

    async def _offset_by_time(self, request: RemotingCommand, conn: _Connection) -> RemotingCommand:
        topic, queue_id = self._queue_fields(request)
        when = _int(dict(request.ext_fields), "timestamp")
        offset = _value(await asyncio.to_thread(self._core.offsets.offset_by_time, topic, queue_id, when))
        return request.answer(R.SUCCESS, None, {"offset": str(offset)})

    def _heartbeat(self, request: RemotingCommand, conn: _Connection) -> RemotingCommand:
        if len(request.body) > MAX_HEARTBEAT_BYTES:
            raise BadRequest(R.INVALID_PARAMETER, f"a heartbeat of {len(request.body)} bytes (the limit is 1 MiB)")
        try:
            doc = json.loads(request.body or b"{}")
        except (ValueError, RecursionError) as exc:
            raise BadRequest(R.INVALID_PARAMETER, f"the heartbeat body is not JSON: {str(exc)[:200]}") from None
        heartbeat = heartbeat_of(doc, f"{conn.peer[0]}:{conn.peer[1]}")
        clients, now = self._core.clients, self._clock()
        joined = [g for g in heartbeat.consumer_groups if heartbeat.client_id not in clients.members(g, now)]
        _refuse(clients.heartbeat(heartbeat, now))
        if heartbeat.consumer_groups:
            self._members.heard(conn, heartbeat.client_id, heartbeat.consumer_groups)
        for group in joined:
            self._notify_members(group, now)
        return request.answer(R.SUCCESS)

    def _unregister(self, request: RemotingCommand, conn: _Connection) -> RemotingCommand:
        f = dict(request.ext_fields)
        # A consumer's goodbye names its group, a producer's its producer group; neither: all.
        group = f.get("consumerGroup") or f.get("producerGroup") or None
        client_id = f.get("clientID", "")
        left = [group] if group is not None else sorted(self._members.groups_of(client_id))
        self._core.clients.gone(client_id, group)
        if group is None:
            self._members.forget(client_id)
        now = self._clock()
        for name in left:
            self._notify_members(name, now)
        return request.answer(R.SUCCESS)

    def connection_closed(self, conn: _Connection) -> None:
        """The clients that heartbeated on `conn` leave their groups now, and the groups' other
        members here are told (RocketMQ does so when a client's channel closes)."""
        now = self._clock()
        for client_id, groups in self._members.lost(conn).items():
            for group in sorted(groups):
                self._core.clients.gone(client_id, group)
                log.debug("remoting: consumer %s left group %s: its connection closed", client_id, group)
                self._notify_members(group, now)

    def _notify_members(self, group: str, now_ms: int) -> None:
        """NOTIFY_CONSUMER_IDS_CHANGED (one-way) to each member of `group` connected here."""
        notice = RemotingCommand(
            RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, next(self._notices), ONEWAY_FLAG, {"consumerGroup": group}
        )
        frame = encode(notice)
        for client_id in self._core.clients.members(group, now_ms):
            conn = self._members.connection_of(client_id)
            if conn is not None and conn.transport is not None and not conn.transport.is_closing():
                conn.transport.write(frame)

    def _consumer_list(self, request: RemotingCommand, conn: _Connection) -> RemotingCommand:
        group = _text(dict(request.ext_fields), "consumerGroup")
        clients = self._core.clients.consumers(group, self._clock())
        if isinstance(clients, Refusal):
            raise BadRequest(REASON_CODES[clients.reason], clients.text)
        return request.answer(R.SUCCESS, None, None, json.dumps({"consumerIdList": clients}).encode())

    def _route(self, request: RemotingCommand, conn: _Connection) -> RemotingCommand:
        route = self._core.routes.route(_text(dict(request.ext_fields), "topic"))
        if isinstance(route, Refusal):
            raise BadRequest(REASON_CODES[route.reason], route.text)
        cluster = self._core.configs.broker.broker_cluster_name
        body = topic_route_data(route, cluster, self._core.view.client_endpoint(), self.endpoint)
        return request.answer(R.SUCCESS, None, None, json.dumps(body).encode())

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
        RequestCode.CONSUMER_SEND_MSG_BACK: _send_back,
    }


_NO_TRANSACTIONS = (
    "transactional messages are served by the gRPC API only (this API has no END_TRANSACTION and no check-backs); "
    "nothing was stored"
)


def _illegal(text: str) -> Refusal:
    return Refusal(Reason.ILLEGAL_MESSAGE, text)


def _transactional(properties: dict[str, str]) -> bool:
    return properties.get(PROPERTY_TRANSACTION_PREPARED, "").lower() == "true"


def _send_answer(request: RemotingCommand, outcomes: Sequence[SendOutcome]) -> RemotingCommand:
    """A send's answer: one request's outcomes (a batch's share one put and one answer)."""
    first = outcomes[0]
    if first.refusal is not None:
        return request.answer(SEND_REASON_CODES[first.refusal.reason], first.refusal.text)
    assert first.status is not None
    code = PUT_RESPONSE[first.status]
    remark = None if code is R.SUCCESS else (first.reason or first.status.name)
    if not first.stored:
        return request.answer(code, remark)
    fields = {
        "msgId": outcomes.msg_id_list() if isinstance(outcomes, PutOutcomes) else ",".join(o.msg_id for o in outcomes),
        "queueId": str(first.queue_id),
        "queueOffset": str(first.queue_offset),
        "MSG_REGION": "DefaultRegion",
        "TRACE_ON": "true",
    }
    return request.answer(code, remark, fields)
