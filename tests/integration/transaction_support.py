"""Transactional sends, EndTransaction and a producer's Telemetry stream straight on the wire,
for the tests (no client-side retry or checker)."""

from __future__ import annotations

import queue
import threading
import uuid
from collections.abc import Iterator

import grpc

from client.signing import Credentials, SigningInterceptor
from wire.rpc import messaging_pb2 as pb
from wire.rpc import messaging_pb2_grpc


def _channel(endpoint: str, credentials: Credentials | None) -> grpc.Channel:
    """A channel to `endpoint`, signing every call for a broker with aclEnable when given credentials."""
    channel = grpc.insecure_channel(endpoint)
    return channel if credentials is None else grpc.intercept_channel(channel, SigningInterceptor(credentials))


class Transactions:
    def __init__(self, endpoint: str, credentials: Credentials | None = None) -> None:
        self._channel = _channel(endpoint, credentials)
        self._stub = messaging_pb2_grpc.MessagingServiceStub(self._channel)

    def close(self) -> None:
        self._channel.close()

    def send_half(self, topic: str, body: bytes) -> pb.SendResultEntry:
        message = pb.Message(
            topic=pb.Resource(name=topic),
            body=body,
            system_properties=pb.SystemProperties(message_id=uuid.uuid4().hex.upper(), message_type=pb.TRANSACTION),
        )
        response = self._stub.SendMessage(pb.SendMessageRequest(messages=[message]), timeout=10)
        [entry] = response.entries
        return entry

    def end(self, topic: str, entry: pb.SendResultEntry, commit: bool, transaction_id: str = "") -> pb.Status:
        request = pb.EndTransactionRequest(
            topic=pb.Resource(name=topic),
            message_id=entry.message_id,
            transaction_id=transaction_id or entry.transaction_id,
            resolution=pb.COMMIT if commit else pb.ROLLBACK,
            source=pb.SOURCE_CLIENT,
        )
        return self._stub.EndTransaction(request, timeout=10).status


class ProducerStream:
    """A producer's Telemetry stream announcing `topic`: the check-backs it receives are in
    `checks` (a queue of RecoverOrphanedTransactionCommand); it never answers them itself. The
    status of the broker's answer to its settings is in `answer` once `settled` is set."""

    def __init__(self, endpoint: str, topic: str, credentials: Credentials | None = None) -> None:
        self._channel = _channel(endpoint, credentials)
        stub = messaging_pb2_grpc.MessagingServiceStub(self._channel)
        self._done = threading.Event()
        self.checks: queue.Queue[pb.RecoverOrphanedTransactionCommand] = queue.Queue()
        self.settled = threading.Event()
        self.answer: pb.Status | None = None
        settings = pb.Settings(client_type=pb.PRODUCER, publishing=pb.Publishing(topics=[pb.Resource(name=topic)]))
        self._calls = stub.Telemetry(self._commands(pb.TelemetryCommand(settings=settings)))
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _commands(self, first: pb.TelemetryCommand) -> Iterator[pb.TelemetryCommand]:
        yield first
        self._done.wait()

    def _read(self) -> None:
        try:
            for command in self._calls:
                if command.HasField("recover_orphaned_transaction_command"):
                    self.checks.put(command.recover_orphaned_transaction_command)
                elif not self.settled.is_set():
                    self.answer = command.status
                    self.settled.set()
        except grpc.RpcError:
            pass

    def close(self) -> None:
        self._done.set()
        self._calls.cancel()
        self._reader.join(timeout=5)
        self._channel.close()
