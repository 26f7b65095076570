"""`SimpleConsumer`: a consumer group's member that receives and acks by pop, over every broker
group of a cluster (RocketMQ 5's SimpleConsumer).

Consumers of one group share the queues of all broker groups without a rebalance: each broker
group's master hands a popped message to one consumer and hides it for `invisible_s`; an ack
(sent to the group that handed the message out, which keeps the group's progress) removes it, a
missed ack makes it visible again (at least once). Instances and broker groups come and go freely:
the topic's route (QueryRoute on any broker, refreshed every `route_refresh_s`) names the groups'
masters (broker id 0, readable), and `receive` asks them in turn, starting one further each call,
so that no group waits behind another. It long-polls only when every group came back empty.

Thread-safety: a `SimpleConsumer` may be shared by threads (its channels are; the route is
swapped whole under a lock).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

import grpc
from google.protobuf import duration_pb2

from wire.rpc import messaging_pb2 as pb

from .convert import ReceivedMessage, check_name, check_ok, queues_from_route, received_message
from .endpoint import Endpoint, MessagingStubs, parse_endpoint, route_request
from .errors import RocketStoreError, TransportError, from_rpc_error
from .producer import ROUTE_REFRESH_S, check_timeout, parse_endpoints
from .signing import Credentials

# One non-blocking round over the groups waits this long per group at most.
QUICK_POLL_S = 0.0


@dataclass(frozen=True, slots=True)
class PoppedMessage:
    """A received message and what acking it needs."""

    message: ReceivedMessage
    receipt_handle: str
    broker_name: str
    endpoint: str


def _duration(seconds: float) -> duration_pb2.Duration:
    value = duration_pb2.Duration()
    value.FromMilliseconds(int(seconds * 1000))
    return value


class SimpleConsumer:
    def __init__(
        self,
        endpoints: str | Endpoint | Sequence[str | Endpoint],
        group: str,
        topic: str,
        *,
        invisible_s: float = 30.0,
        timeout_s: float = 10.0,
        route_refresh_s: float = ROUTE_REFRESH_S,
        tls_ca_file: str | None = None,
        credentials: Credentials | None = None,
    ) -> None:
        self._seeds = parse_endpoints(endpoints)
        self._group = pb.Resource(name=check_name("group", group))
        self._topic = pb.Resource(name=check_name("topic", topic))
        self._invisible_s = check_timeout(invisible_s)
        self._timeout_s = check_timeout(timeout_s)
        self._refresh_s = check_timeout(route_refresh_s)
        self._lock = threading.Lock()  # the route and the turn
        self._stubs = MessagingStubs(
            lambda: RocketStoreError("the consumer is closed"), tls_ca_file=tls_ca_file, credentials=credentials
        )
        self._masters: tuple[tuple[str, str], ...] = ()  # (broker name, endpoint), by name
        self._route_at = float("-inf")
        self._turn = 0

    @property
    def groups(self) -> list[str]:
        """The broker groups the last route named."""
        return [name for name, _ in self._masters]

    def _refresh_route(self) -> None:
        now = time.monotonic()
        if now - self._route_at < self._refresh_s and self._masters:
            return
        asked = list(self._seeds) + [parse_endpoint(endpoint) for _, endpoint in self._masters]
        last: RocketStoreError | None = None
        for endpoint in dict.fromkeys(asked):
            try:
                response = self._stubs.get(endpoint).QueryRoute(
                    route_request(self._topic.name, endpoint), timeout=min(2.0, self._timeout_s)
                )
                queues = queues_from_route(self._topic.name, response)
            except grpc.RpcError as exc:
                last = from_rpc_error(exc, endpoint.target)
                continue
            except RocketStoreError as exc:
                last = exc
                continue
            masters = {q.broker_name: q.endpoint for q in queues if q.broker_id == 0 and q.readable and q.endpoint}
            with self._lock:
                self._masters = tuple(sorted(masters.items()))
                self._route_at = now
            return
        if not self._masters:
            raise last or RocketStoreError(f"no broker answered the route of {self._topic.name}")

    def receive(self, max_messages: int = 16, wait_s: float = 1.0) -> list[PoppedMessage]:
        """Up to `max_messages` messages from the first group (in turn) that has some; waits up
        to `wait_s` (a long poll on one group) when none has."""
        if not 1 <= max_messages <= 1024:
            raise ValueError(f"max_messages must be in 1..1024, got {max_messages}")
        self._refresh_route()
        masters = self._masters
        if not masters:
            return []
        with self._lock:
            start = self._turn
            self._turn += 1
        order = [masters[(start + i) % len(masters)] for i in range(len(masters))]
        for name, endpoint in order:
            popped = self._pop(name, endpoint, max_messages, QUICK_POLL_S)
            if popped:
                return popped
        if wait_s <= 0:
            return []
        name, endpoint = order[0]
        return self._pop(name, endpoint, max_messages, wait_s)

    def _pop(self, broker_name: str, endpoint_text: str, max_messages: int, wait_s: float) -> list[PoppedMessage]:
        endpoint = parse_endpoint(endpoint_text)
        request = pb.ReceiveMessageRequest(
            group=self._group,
            message_queue=pb.MessageQueue(topic=self._topic, id=-1, broker=pb.Broker(name=broker_name)),
            batch_size=max_messages,
            invisible_duration=_duration(self._invisible_s),
            long_polling_timeout=_duration(wait_s),
        )
        popped: list[PoppedMessage] = []
        try:
            for response in self._stubs.get(endpoint).ReceiveMessage(request, timeout=wait_s + self._timeout_s):
                if response.HasField("status") and response.status.code not in (pb.OK, pb.MESSAGE_NOT_FOUND):
                    check_ok(response.status)
                elif response.HasField("message"):
                    handle = response.message.system_properties.receipt_handle
                    popped.append(PoppedMessage(received_message(response.message), handle, broker_name, endpoint_text))
        except grpc.RpcError as exc:
            # A group that is away (its master died) is skipped until the route says otherwise;
            # the next route refresh drops or replaces it.
            self._route_at = float("-inf")
            if popped:
                return popped
            error = from_rpc_error(exc, endpoint.target)
            if isinstance(error, TransportError):
                return []
            raise error from exc
        return popped

    def ack(self, popped: PoppedMessage) -> None:
        """Acks at the broker group that handed the message out."""
        request = pb.AckMessageRequest(
            group=self._group,
            topic=self._topic,
            entries=[pb.AckMessageEntry(message_id=popped.message.msg_id, receipt_handle=popped.receipt_handle)],
        )
        endpoint = parse_endpoint(popped.endpoint)
        try:
            response = self._stubs.get(endpoint).AckMessage(request, timeout=self._timeout_s)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc, endpoint.target) from exc
        check_ok(response.status)
        for entry in response.entries:
            check_ok(entry.status)

    def close(self) -> None:
        for channel in self._stubs.close_all():
            channel.close()

    def __enter__(self) -> SimpleConsumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
