"""Transactional sends, EndTransaction and a producer's Telemetry stream straight on the wire,
for the tests (no client-side retry or checker)."""

from __future__ import annotations

import queue
import threading
import uuid
from collections.abc import Iterator

import grpc

from wire.rpc import messaging_pb2 as pb
from wire.rpc import messaging_pb2_grpc


class Transactions:
    def __init__(self, endpoint: str) -> None:
        self._channel = grpc.insecure_channel(endpoint)
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
    `checks` (a queue of RecoverOrphanedTransactionCommand); it never answers them itself."""

    def __init__(self, endpoint: str, topic: str) -> None:
        self._channel = grpc.insecure_channel(endpoint)
        stub = messaging_pb2_grpc.MessagingServiceStub(self._channel)
        self._done = threading.Event()
        self.checks: queue.Queue[pb.RecoverOrphanedTransactionCommand] = queue.Queue()
        self.settled = threading.Event()
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
                if command.HasField("settings"):
                    self.settled.set()
                elif command.HasField("recover_orphaned_transaction_command"):
                    self.checks.put(command.recover_orphaned_transaction_command)
        except grpc.RpcError:
            pass

    def close(self) -> None:
        self._done.set()
        self._calls.cancel()
        self._reader.join(timeout=5)
        self._channel.close()
