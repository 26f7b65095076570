"""Pop consumption and heartbeat calls straight on the wire, for the tests (no client-side retry)."""

from __future__ import annotations

from collections.abc import Iterable

import grpc
from google.protobuf import duration_pb2

from wire.rpc import messaging_pb2 as pb
from wire.rpc import messaging_pb2_grpc


def _duration(seconds: float) -> duration_pb2.Duration:
    d = duration_pb2.Duration()
    d.FromMilliseconds(int(seconds * 1000))
    return d


def received(answers: Iterable[pb.ReceiveMessageResponse]) -> tuple[int, list[pb.Message]]:
    """A ReceiveMessage stream's status code and messages."""
    code, messages = None, []
    for answer in answers:
        if answer.HasField("status"):
            code = answer.status.code
        elif answer.HasField("message"):
            messages.append(answer.message)
    assert code is not None
    return code, messages


class Pop:
    """ReceiveMessage / AckMessage / ChangeInvisibleDuration straight on the wire."""

    def __init__(self, endpoint: str, topic: str, group: str) -> None:
        self._channel = grpc.insecure_channel(endpoint)
        self._stub = messaging_pb2_grpc.MessagingServiceStub(self._channel)
        self.topic = pb.Resource(name=topic)
        self.group = pb.Resource(name=group)

    def close(self) -> None:
        self._channel.close()

    def receive(self, batch: int = 32, invisible_s: float = 30, wait_s: float = 1) -> tuple[int, list[pb.Message]]:
        request = pb.ReceiveMessageRequest(
            group=self.group,
            message_queue=pb.MessageQueue(topic=self.topic, id=-1),
            batch_size=batch,
            invisible_duration=_duration(invisible_s),
            long_polling_timeout=_duration(wait_s),
        )
        return received(self._stub.ReceiveMessage(request, timeout=wait_s + 10))

    def ack(self, *handles: str) -> pb.AckMessageResponse:
        entries = [pb.AckMessageEntry(message_id="m", receipt_handle=h) for h in handles]
        return self._stub.AckMessage(
            pb.AckMessageRequest(group=self.group, topic=self.topic, entries=entries), timeout=10
        )

    def change(self, handle: str, invisible_s: float) -> pb.ChangeInvisibleDurationResponse:
        request = pb.ChangeInvisibleDurationRequest(
            group=self.group, topic=self.topic, receipt_handle=handle, invisible_duration=_duration(invisible_s)
        )
        return self._stub.ChangeInvisibleDuration(request, timeout=10)

    def forward_to_dead_letter(self, handle: str) -> pb.ForwardMessageToDeadLetterQueueResponse:
        request = pb.ForwardMessageToDeadLetterQueueRequest(
            group=self.group, topic=self.topic, receipt_handle=handle, message_id="m", delivery_attempt=1
        )
        return self._stub.ForwardMessageToDeadLetterQueue(request, timeout=10)


def heartbeat(endpoint: str, client_id: str, client_type: int = pb.PRODUCER, group: str = "") -> int:
    """One Heartbeat as an official RocketMQ 5 client sends it (its id in x-mq-client-id); the
    answer's status code."""
    with grpc.insecure_channel(endpoint) as channel:
        request = pb.HeartbeatRequest(client_type=client_type)
        if group:
            request.group.name = group
        stub = messaging_pb2_grpc.MessagingServiceStub(channel)
        answer = stub.Heartbeat(request, timeout=10, metadata=(("x-mq-client-id", client_id),))
    return answer.status.code
