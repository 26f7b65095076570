"""The client API's Telemetry streams (RocketMQ 5 clients keep one open each): settings are answered,
and a producer's stream is where check-backs of the topics it announced go (`transaction_api`).

What goes down a stream waits in its `Outbox`, bounded to `OUTBOX_COMMANDS` commands and
`OUTBOX_BYTES` bytes (one command of any size always fits an empty outbox). A client that sends
commands but does not read the answers fills it: the stream is then dropped, as RocketMQ's proxy
drops a stream it cannot write to. Its outbox is emptied, it gets no more check-backs, its commands
are no longer read, one line is logged (at most one per peer host per 10 s), and the call ends
RESOURCE_EXHAUSTED as soon as the client reads what grpc already holds for it. (grpc cannot end a
call while one of its messages waits for the client to read it, so a client that never reads keeps
that message, and its connection's flow-control windows, until its deadline or disconnection: a
bounded amount.)

With access control on, a settings command is checked like a call (`telemetry_check`, the ACL's
rule for Telemetry commands): a producer may announce only topics its account may publish to, so
no account receives check-backs, with their message bodies, for a topic it may not publish to. A
refused command is answered with its status (FORBIDDEN naming the topic) and changes nothing.

Thread-safety: one event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping

import grpc

from wire.log_limit import LogLimiter, peer_host
from wire.request_guard import MalformedRequest
from wire.rpc import messaging_pb2 as pb

from .call_metadata import call_headers
from .client_sightings import client_id_of
from .transaction_api import TransactionApi

log = logging.getLogger("rocketstore.broker.telemetry")

OUTBOX_COMMANDS = 64
OUTBOX_BYTES = 4 * 1024 * 1024

# The ACL's check of one command on a stream (metadata of the call, the command): None, or the
# status refusing it.
TelemetryCheck = Callable[[Mapping[str, str], pb.TelemetryCommand], pb.Status | None]


class Outbox:
    """The commands waiting to go down one Telemetry stream, bounded; once it overflows it takes
    nothing more (the stream does not read: it is dropped)."""

    def __init__(self, max_commands: int = OUTBOX_COMMANDS, max_bytes: int = OUTBOX_BYTES) -> None:
        self._max_commands = max_commands
        self._max_bytes = max_bytes
        self._queue: deque[pb.TelemetryCommand] = deque()
        self._bytes = 0
        self._ready = asyncio.Event()
        self._ended = False
        self.overflowed = False

    def offer(self, command: pb.TelemetryCommand) -> bool:
        """Queue `command`; False when the stream is dropped (now or before) or ended."""
        if self._ended or self.overflowed:
            return False
        size = command.ByteSize()
        if self._queue and (len(self._queue) >= self._max_commands or self._bytes + size > self._max_bytes):
            self.overflowed = True
            self._queue.clear()
            self._bytes = 0
            self._ready.set()
            return False
        self._queue.append(command)
        self._bytes += size
        self._ready.set()
        return True

    def end(self) -> None:
        """The client's half ended: what is queued still goes out, then the stream ends."""
        self._ended = True
        self._ready.set()

    async def next(self) -> pb.TelemetryCommand | None:
        """The next command to send; None once the stream is ended or dropped."""
        while True:
            if self.overflowed:
                return None
            if self._queue:
                command = self._queue.popleft()
                self._bytes -= command.ByteSize()
                return command
            if self._ended:
                return None
            self._ready.clear()
            await self._ready.wait()

    def __len__(self) -> int:
        return len(self._queue)


class TelemetryStreams:
    """Serves Telemetry streams; `count` of them are open (metrics)."""

    def __init__(
        self,
        settings_answer: Callable[[pb.TelemetryCommand], pb.TelemetryCommand],
        transactions: TransactionApi,
        telemetry_check: TelemetryCheck | None = None,
        on_end: Callable[[str], None] | None = None,
    ) -> None:
        self._settings_answer = settings_answer
        self._on_end = on_end  # told the client id of a stream that ended (the client went away)
        self._transactions = transactions
        self._check = telemetry_check
        self._dropped = LogLimiter(log)
        self.count = 0

    async def _read(self, requests, outbox: Outbox, metadata: Mapping[str, str], peer: str) -> None:
        """The client's half: settings are answered (or refused), and a producer's announced
        topics are registered for check-backs."""
        try:
            async for command in requests:
                if outbox.overflowed:
                    break  # dropped (a check-back found it full): its commands are not read
                if command.WhichOneof("command") != "settings":
                    continue  # commands this broker does not serve carry nothing to answer
                refused = self._check(metadata, command) if self._check is not None else None
                answer = pb.TelemetryCommand(status=refused) if refused is not None else self._settings_answer(command)
                if not outbox.offer(answer):
                    break  # the stream does not read: dropped, and its commands are not read either
                if refused is None and command.settings.client_type == pb.PRODUCER:
                    self._transactions.register([t.name for t in command.settings.publishing.topics], outbox)
        finally:
            if outbox.overflowed:
                self._transactions.unregister(outbox)
                self._dropped.log(
                    peer_host(peer),
                    "dropped the Telemetry stream of %s: it does not read its commands (more than %d or %d bytes "
                    "waiting)",
                    peer,
                    OUTBOX_COMMANDS,
                    OUTBOX_BYTES,
                )
            outbox.end()

    async def serve(self, requests, context) -> AsyncIterator[pb.TelemetryCommand]:
        outbox = Outbox()
        metadata = call_headers(context)
        reader = asyncio.ensure_future(self._read(requests, outbox, metadata, context.peer()))
        self.count += 1
        try:
            while (command := await outbox.next()) is not None:
                yield command
            if outbox.overflowed:
                reader.cancel()
                await context.abort(
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    f"the stream was dropped: more than {OUTBOX_COMMANDS} commands or {OUTBOX_BYTES} bytes "
                    "waited for the client to read them",
                )
            await reader  # its exception, if the client's half failed
        except (grpc.aio.AbortError, MalformedRequest):
            raise  # MalformedRequestGuard answers a command that does not decode
        except Exception as exc:
            log.exception("Telemetry failed")
            await context.abort(grpc.StatusCode.INTERNAL, f"internal error ({type(exc).__name__}); see the broker log")
        finally:
            self.count -= 1
            self._transactions.unregister(outbox)
            reader.cancel()
            if self._on_end is not None:
                self._on_end(client_id_of(metadata, context.peer()))
