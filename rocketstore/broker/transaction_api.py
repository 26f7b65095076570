"""The client API's transactions (RocketMQ 5's transactional Producer): EndTransaction, and the
check-back of open transactions through the producers' Telemetry streams, as `TransactionApi`,
which the `MessagingServicer` delegates to.

Wire facts owned here:
- A SendMessage of a TRANSACTION message answers a transaction id (the half message's offset
  message id); EndTransaction names it with the topic and message id, and COMMIT or ROLLBACK. A
  transaction id that is not this broker's, or names another message, answers
  INVALID_TRANSACTION_ID; ending a transaction the other way than it ended answers the same, with
  the outcome; ending it the same way again answers OK.
- Check-back: a RecoverOrphanedTransactionCommand (the half as sent, and its transaction id) goes
  down the Telemetry stream of a producer that announced the topic in its settings
  (publishing.topics; with access control, only an account that may publish to the topic can
  announce it: `telemetry.py`); the producer answers with EndTransaction, source
  SOURCE_SERVER_CHECK. Producers of a topic are asked in turn; a stream whose outbox refuses the
  command (it does not read) is forgotten and the next one is asked.
- On a slave, EndTransaction answers FORBIDDEN naming the master; only a master checks back.

Thread-safety: one event loop.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Protocol

from wire.rpc import messaging_pb2 as pb

from . import codes
from .repeating import Repeating
from .transaction_service import EndStatus, TransactionService
from .v2_messages import OK, status, to_pb_message


class Outbox(Protocol):
    """Where commands go down one Telemetry stream (`telemetry.Outbox`)."""

    def offer(self, command: pb.TelemetryCommand) -> bool:
        """False when the stream takes nothing more (it is dropped or ended)."""
        ...


class TransactionApi:
    def __init__(
        self,
        service: TransactionService,
        refusal: Callable[[], pb.Status | None],
        check_period_s: float,
    ) -> None:
        self._service = service
        self._refusal = refusal
        self._producers: dict[str, list[Outbox]] = {}
        self._turn = itertools.count()
        self._checker = Repeating(self.check_once, lambda: check_period_s, "transaction check-back")

    # -- producers' streams ----------------------------------------------------------------------

    def register(self, topics: list[str], outbox: Outbox) -> None:
        for topic in topics:
            streams = self._producers.setdefault(topic, [])
            if outbox not in streams:
                streams.append(outbox)

    def unregister(self, outbox: Outbox) -> None:
        for topic in list(self._producers):
            streams = [s for s in self._producers[topic] if s is not outbox]
            if streams:
                self._producers[topic] = streams
            else:
                del self._producers[topic]

    def _can_ask(self, topic: str) -> bool:
        return bool(self._producers.get(topic))

    # -- EndTransaction --------------------------------------------------------------------------

    async def end(self, request: pb.EndTransactionRequest) -> pb.EndTransactionResponse:
        refused = self._refusal()
        if refused is not None:
            return pb.EndTransactionResponse(status=refused)
        if request.resolution not in (pb.COMMIT, pb.ROLLBACK):
            return pb.EndTransactionResponse(status=status(pb.BAD_REQUEST, "resolution must be COMMIT or ROLLBACK"))
        if not request.transaction_id or not request.message_id or not request.topic.name:
            return pb.EndTransactionResponse(
                status=status(pb.BAD_REQUEST, "EndTransaction needs a topic, a message id and a transaction id")
            )
        source = "check" if request.source == pb.SOURCE_SERVER_CHECK else "client"
        answer = await self._service.end(
            request.transaction_id, request.topic.name, request.message_id, request.resolution == pb.COMMIT, source
        )
        if answer.status is EndStatus.OK:
            return pb.EndTransactionResponse(status=OK)
        if answer.status is EndStatus.INVALID_TRANSACTION_ID:
            return pb.EndTransactionResponse(status=status(pb.INVALID_TRANSACTION_ID, answer.reason))
        if answer.put is not None:
            return pb.EndTransactionResponse(status=codes.put_status(answer.put))
        return pb.EndTransactionResponse(status=status(pb.INTERNAL_ERROR, answer.reason))

    # -- check-back ------------------------------------------------------------------------------

    def start(self) -> None:
        self._checker.start()

    async def stop(self) -> None:
        await self._checker.stop()

    async def check_once(self) -> int:
        """One round of check-backs (a master's, not fenced); how many were sent."""
        if self._refusal() is not None:
            return 0
        sent = 0
        for check in await self._service.due_checks(self._can_ask):
            command = pb.RecoverOrphanedTransactionCommand(
                message=to_pb_message(check.message), transaction_id=check.transaction_id
            )
            telemetry = pb.TelemetryCommand(status=OK, recover_orphaned_transaction_command=command)
            while streams := self._producers.get(check.topic):
                outbox = streams[next(self._turn) % len(streams)]
                if outbox.offer(telemetry):
                    sent += 1
                    break
                self.unregister(outbox)
        return sent
