"""Producers: `Producer` (blocking) and `AsyncProducer` (asyncio, grpc.aio), thin adapters over
`client.convert`.

Each `send` or `send_batch` is one SendMessage call to the endpoint given; a batch is one
request holding every message (the broker stores a batch for one queue as one append with one
durability wait). Results: `SendResult` per message; a stored message whose disk or slave
guarantee ran out is a result with that `SendStatus`, not an exception. Refusals raise
`BrokerError` (`NotMasterError` from a slave), transport failures `TransportError`.

Thread-safety: a `Producer` may be shared by threads (gRPC channels are). An `AsyncProducer`
belongs to one event loop; its channel opens on the first call, inside that loop.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

import grpc

from rocketstore.rpc import messaging_pb2_grpc

from .convert import ProducerMessage, SendResult, build_send_request, send_results
from .endpoint import Endpoint, open_channel, parse_endpoint
from .errors import RocketStoreError, from_rpc_error


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def check_timeout(timeout_s: Any) -> float:
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not timeout_s > 0:
        raise ValueError(f"timeout_s must be a positive number of seconds, got {timeout_s!r}")
    return float(timeout_s)


class _ProducerBase:
    def __init__(self, endpoint: str | Endpoint, *, timeout_s: float = 10.0, tls_ca_file: str | None = None) -> None:
        self._endpoint = parse_endpoint(endpoint)
        self._timeout_s = check_timeout(timeout_s)
        self._tls_ca_file = tls_ca_file
        self._closed = False

    @property
    def endpoint(self) -> str:
        return self._endpoint.target

    def _request(self, topic: str, messages: Iterable[Any], queue_id: int | None):
        if self._closed:
            raise RocketStoreError(f"the producer for {self._endpoint} is closed")
        return build_send_request(topic, messages, queue_id=queue_id, born_ms=_now_ms())

    @staticmethod
    def _one(
        body: Any,
        tag: str | None,
        keys: Iterable[str] | str,
        properties: Mapping[str, str] | None,
        message_group: str | None,
        message_id: str | None,
    ) -> ProducerMessage:
        return ProducerMessage(body, tag, keys, properties, message_group, message_id)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._endpoint.target!r})"


class Producer(_ProducerBase):
    """Blocking producer. Use as a context manager, or call `close()`."""

    def __init__(self, endpoint: str | Endpoint, *, timeout_s: float = 10.0, tls_ca_file: str | None = None) -> None:
        super().__init__(endpoint, timeout_s=timeout_s, tls_ca_file=tls_ca_file)
        self._channel = open_channel(self._endpoint, tls_ca_file=tls_ca_file)
        self._stub = messaging_pb2_grpc.MessagingServiceStub(self._channel)

    def send(
        self,
        topic: str,
        body: bytes | str,
        *,
        tag: str | None = None,
        keys: Iterable[str] | str = (),
        properties: Mapping[str, str] | None = None,
        queue_id: int | None = None,
        message_group: str | None = None,
        message_id: str | None = None,
    ) -> SendResult:
        message = self._one(body, tag, keys, properties, message_group, message_id)
        return self._send(topic, [message], queue_id)[0]

    def send_batch(
        self, topic: str, bodies_or_messages: Iterable[bytes | str | ProducerMessage], *, queue_id: int | None = None
    ) -> list[SendResult]:
        return self._send(topic, bodies_or_messages, queue_id)

    def _send(self, topic: str, messages: Iterable[Any], queue_id: int | None) -> list[SendResult]:
        request, ids = self._request(topic, messages, queue_id)
        try:
            response = self._stub.SendMessage(request, timeout=self._timeout_s)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc, self.endpoint) from exc
        return send_results(topic, response, ids)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._channel.close()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncProducer(_ProducerBase):
    """asyncio producer. Use as an async context manager, or await `close()`."""

    def __init__(self, endpoint: str | Endpoint, *, timeout_s: float = 10.0, tls_ca_file: str | None = None) -> None:
        super().__init__(endpoint, timeout_s=timeout_s, tls_ca_file=tls_ca_file)
        self._channel: grpc.aio.Channel | None = None
        self._stub: messaging_pb2_grpc.MessagingServiceStub | None = None

    def _get_stub(self) -> messaging_pb2_grpc.MessagingServiceStub:
        if self._stub is None:
            self._channel = open_channel(self._endpoint, tls_ca_file=self._tls_ca_file, aio=True)
            self._stub = messaging_pb2_grpc.MessagingServiceStub(self._channel)
        return self._stub

    async def send(
        self,
        topic: str,
        body: bytes | str,
        *,
        tag: str | None = None,
        keys: Iterable[str] | str = (),
        properties: Mapping[str, str] | None = None,
        queue_id: int | None = None,
        message_group: str | None = None,
        message_id: str | None = None,
    ) -> SendResult:
        message = self._one(body, tag, keys, properties, message_group, message_id)
        return (await self._send(topic, [message], queue_id))[0]

    async def send_batch(
        self, topic: str, bodies_or_messages: Iterable[bytes | str | ProducerMessage], *, queue_id: int | None = None
    ) -> list[SendResult]:
        return await self._send(topic, bodies_or_messages, queue_id)

    async def _send(self, topic: str, messages: Iterable[Any], queue_id: int | None) -> list[SendResult]:
        request, ids = self._request(topic, messages, queue_id)
        try:
            response = await self._get_stub().SendMessage(request, timeout=self._timeout_s)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc, self.endpoint) from exc
        return send_results(topic, response, ids)

    async def close(self) -> None:
        self._closed = True
        channel, self._channel, self._stub = self._channel, None, None
        if channel is not None:
            await channel.close()

    async def __aenter__(self) -> AsyncProducer:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
