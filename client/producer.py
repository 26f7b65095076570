"""Producers: `Producer` (blocking) and `AsyncProducer` (asyncio, grpc.aio), thin adapters over
`client.convert`.

Each `send` or `send_batch` is one SendMessage request (the broker stores a batch for one queue
as one append with one durability wait). Results: `SendResult` per message; a stored message
whose disk or slave guarantee ran out is a result with that `SendStatus`, not an exception.
Refusals raise `BrokerError` (`NotMasterError` from a slave), transport failures `TransportError`.

A producer may know several endpoints of one broker group (`"h1:p1;h2:p2"` or a list): then it
follows the master across failovers (`client.failover`): a not-master answer sends it to the
master named, a transport error or a master that cannot acknowledge now makes it ask the group
(QueryRoute) for the master, and the same request, with the same message ids, goes again within
`retry_timeout_s` (at least once). The master found is kept for later sends (`endpoint`). With
`retry_timeout_s=0` every failure is raised at once.

Thread-safety: a `Producer` may be shared by threads (gRPC channels are). An `AsyncProducer`
belongs to one event loop; its channels open on first use, inside that loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import grpc

from rocketstore.rpc import messaging_pb2 as pb
from rocketstore.rpc import messaging_pb2_grpc

from .convert import ProducerMessage, SendResult, build_send_request, queues_from_route, send_results
from .endpoint import Endpoint, open_channel, parse_endpoint
from .errors import RocketStoreError, from_rpc_error
from .failover import Action, RetryPolicy, SendAttempts

log = logging.getLogger(__name__)

# A route question during rediscovery waits at most this long per broker.
ROUTE_TIMEOUT_S = 2.0


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def check_timeout(timeout_s: Any) -> float:
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not timeout_s > 0:
        raise ValueError(f"timeout_s must be a positive number of seconds, got {timeout_s!r}")
    return float(timeout_s)


def parse_endpoints(endpoints: str | Endpoint | Sequence[str | Endpoint]) -> list[Endpoint]:
    """One endpoint, `"a:1;b:2"`, or a list of either: the group's endpoints, in order."""
    if isinstance(endpoints, (str, Endpoint)):
        items: list[Any] = [endpoints] if isinstance(endpoints, Endpoint) else [e for e in endpoints.split(";") if e.strip()]
    else:
        items = list(endpoints)
    parsed: list[Endpoint] = []
    for item in items:
        endpoint = parse_endpoint(item)
        if endpoint not in parsed:
            parsed.append(endpoint)
    if not parsed:
        raise ValueError("a producer needs at least one endpoint")
    return parsed


def _route_request(topic: str, endpoint: Endpoint) -> pb.QueryRouteRequest:
    return pb.QueryRouteRequest(
        topic=pb.Resource(name=topic),
        endpoints=pb.Endpoints(
            scheme=pb.IPv6 if endpoint.is_ipv6 else pb.IPv4 if endpoint.is_ipv4 else pb.DOMAIN_NAME,
            addresses=[pb.Address(host=endpoint.host, port=endpoint.port)],
        ),
    )


def _master_of(topic: str, response: pb.QueryRouteResponse) -> str | None:
    try:
        queues = queues_from_route(topic, response)
    except RocketStoreError:
        return None
    return next((q.endpoint for q in queues if q.broker_id == 0 and q.endpoint), None)


class _ProducerBase:
    def __init__(
        self,
        endpoints: str | Endpoint | Sequence[str | Endpoint],
        *,
        timeout_s: float = 10.0,
        tls_ca_file: str | None = None,
        retry_timeout_s: float = 10.0,
    ) -> None:
        self._known = parse_endpoints(endpoints)
        self._endpoint = self._known[0]
        self._timeout_s = check_timeout(timeout_s)
        self._policy = RetryPolicy(retry_timeout_s=retry_timeout_s)
        self._tls_ca_file = tls_ca_file
        self._closed = False
        self._lock = threading.Lock()

    @property
    def endpoint(self) -> str:
        """The endpoint sends go to now (the master, once found)."""
        return self._endpoint.target

    @property
    def endpoints(self) -> list[str]:
        return [e.target for e in self._known]

    def _request(self, topic: str, messages: Iterable[Any], queue_id: int | None):
        if self._closed:
            raise RocketStoreError(f"the producer for {self._endpoint} is closed")
        return build_send_request(topic, messages, queue_id=queue_id, born_ms=_now_ms())

    def _learn(self, target: str) -> Endpoint:
        endpoint = parse_endpoint(target)
        with self._lock:
            if endpoint not in self._known:
                self._known.append(endpoint)
        return endpoint

    def _switch(self, endpoint: Endpoint) -> None:
        if endpoint != self._endpoint:
            log.info("sending to %s instead of %s (the group's master moved)", endpoint.target, self._endpoint.target)
            self._endpoint = endpoint

    def _route_order(self, failed: Endpoint) -> list[Endpoint]:
        with self._lock:
            known = list(self._known)
        return [e for e in known if e != failed] + ([failed] if failed in known else [])

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
        return f"{type(self).__name__}({';'.join(self.endpoints)!r})"


class Producer(_ProducerBase):
    """Blocking producer. Use as a context manager, or call `close()`."""

    def __init__(
        self,
        endpoints: str | Endpoint | Sequence[str | Endpoint],
        *,
        timeout_s: float = 10.0,
        tls_ca_file: str | None = None,
        retry_timeout_s: float = 10.0,
    ) -> None:
        super().__init__(endpoints, timeout_s=timeout_s, tls_ca_file=tls_ca_file, retry_timeout_s=retry_timeout_s)
        self._stubs: dict[Endpoint, tuple[grpc.Channel, messaging_pb2_grpc.MessagingServiceStub]] = {}
        self._stub_for(self._endpoint)

    def _stub_for(self, endpoint: Endpoint) -> messaging_pb2_grpc.MessagingServiceStub:
        with self._lock:
            entry = self._stubs.get(endpoint)
            if entry is None:
                channel = open_channel(endpoint, tls_ca_file=self._tls_ca_file)
                entry = self._stubs[endpoint] = (channel, messaging_pb2_grpc.MessagingServiceStub(channel))
            return entry[1]

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

    def _attempt(self, endpoint: Endpoint, topic: str, request, ids) -> list[SendResult]:
        try:
            response = self._stub_for(endpoint).SendMessage(request, timeout=self._timeout_s)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc, endpoint.target) from exc
        return send_results(topic, response, ids)

    def _send(self, topic: str, messages: Iterable[Any], queue_id: int | None) -> list[SendResult]:
        request, ids = self._request(topic, messages, queue_id)
        attempts = SendAttempts(self._policy, time.monotonic())
        endpoint = self._endpoint
        while True:
            try:
                results = self._attempt(endpoint, topic, request, ids)
            except RocketStoreError as exc:
                step = attempts.failed(exc, endpoint.target, time.monotonic())
                while step.action is Action.REDISCOVER:
                    time.sleep(step.delay_s)
                    step = attempts.found_master(self._rediscover(topic, endpoint), time.monotonic())
                if step.action is Action.GIVE_UP:
                    raise
                endpoint = self._learn(step.endpoint)
                continue
            self._switch(endpoint)
            return results

    def _rediscover(self, topic: str, failed: Endpoint) -> str | None:
        for endpoint in self._route_order(failed):
            try:
                response = self._stub_for(endpoint).QueryRoute(_route_request(topic, endpoint), timeout=ROUTE_TIMEOUT_S)
            except grpc.RpcError:
                continue
            master = _master_of(topic, response)
            if master:
                return master
        return None

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            with self._lock:
                stubs, self._stubs = self._stubs, {}
            for channel, _ in stubs.values():
                channel.close()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncProducer(_ProducerBase):
    """asyncio producer. Use as an async context manager, or await `close()`."""

    def __init__(
        self,
        endpoints: str | Endpoint | Sequence[str | Endpoint],
        *,
        timeout_s: float = 10.0,
        tls_ca_file: str | None = None,
        retry_timeout_s: float = 10.0,
    ) -> None:
        super().__init__(endpoints, timeout_s=timeout_s, tls_ca_file=tls_ca_file, retry_timeout_s=retry_timeout_s)
        self._stubs: dict[Endpoint, tuple[grpc.aio.Channel, messaging_pb2_grpc.MessagingServiceStub]] = {}

    def _stub_for(self, endpoint: Endpoint) -> messaging_pb2_grpc.MessagingServiceStub:
        entry = self._stubs.get(endpoint)
        if entry is None:
            channel = open_channel(endpoint, tls_ca_file=self._tls_ca_file, aio=True)
            entry = self._stubs[endpoint] = (channel, messaging_pb2_grpc.MessagingServiceStub(channel))
        return entry[1]

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

    async def _attempt(self, endpoint: Endpoint, topic: str, request, ids) -> list[SendResult]:
        try:
            response = await self._stub_for(endpoint).SendMessage(request, timeout=self._timeout_s)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc, endpoint.target) from exc
        return send_results(topic, response, ids)

    async def _send(self, topic: str, messages: Iterable[Any], queue_id: int | None) -> list[SendResult]:
        request, ids = self._request(topic, messages, queue_id)
        attempts = SendAttempts(self._policy, time.monotonic())
        endpoint = self._endpoint
        while True:
            try:
                results = await self._attempt(endpoint, topic, request, ids)
            except RocketStoreError as exc:
                step = attempts.failed(exc, endpoint.target, time.monotonic())
                while step.action is Action.REDISCOVER:
                    await asyncio.sleep(step.delay_s)
                    step = attempts.found_master(await self._rediscover(topic, endpoint), time.monotonic())
                if step.action is Action.GIVE_UP:
                    raise
                endpoint = self._learn(step.endpoint)
                continue
            self._switch(endpoint)
            return results

    async def _rediscover(self, topic: str, failed: Endpoint) -> str | None:
        for endpoint in self._route_order(failed):
            try:
                response = await self._stub_for(endpoint).QueryRoute(_route_request(topic, endpoint), timeout=ROUTE_TIMEOUT_S)
            except grpc.RpcError:
                continue
            master = _master_of(topic, response)
            if master:
                return master
        return None

    async def close(self) -> None:
        self._closed = True
        stubs, self._stubs = self._stubs, {}
        for channel, _ in stubs.values():
            await channel.close()

    async def __aenter__(self) -> AsyncProducer:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
