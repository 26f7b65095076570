"""Producers: `Producer` (blocking) and `AsyncProducer` (asyncio, grpc.aio), thin adapters over
`client.convert` and `client.failover`.

Each `send` or `send_batch` is one SendMessage request (the broker stores a batch for one queue
as one append with one durability wait). Results: `SendResult` per message; a stored message
whose disk or slave guarantee ran out is a result with that `SendStatus`, not an exception, and
is never retried. Refusals raise `BrokerError` (`NotMasterError` from a slave), transport
failures `TransportError`.

A producer takes one endpoint or several of one broker group (`"h1:p1;h2:p2"`, a list, or an
`Endpoint`) and follows the group's master across failovers as `client.failover` decides: a
not-master answer sends it to the master named; a transport error, a not-master answer without
an endpoint, or a master that cannot acknowledge now makes it ask the group (QueryRoute on each
known endpoint) for its master after a short pause. The request is built once, so every retry
re-sends the same message ids (at least once: a broker may have stored a message whose answer
was lost). Retries stop `retry_timeout_s` after the send began (0: the first failure is
raised); the last error is raised with `.attempts` set and a note saying how many were made.
Until a broker of the group has answered once, endpoints that refuse the connection are not
waited for: the send fails as soon as each was tried, unless `wait_for_broker=True`.
`timeout_s` bounds each attempt. The master that answered becomes `endpoint` for later sends
(logged at INFO as "master of GROUP moved from A to B"). Channels to endpoints other than the
first are opened when first needed and kept; `close()` closes them all.

Each producer asks for a topic's route on its first send to it and every `route_refresh_s`.
Whether a send without a `queue_id` follows the group's master as above or chooses a group and
queue of a cluster's route is `client.cluster_sends`' decision (`TopicRoutes.spread_route`);
this module only carries it out. `SendResult.broker_name` names the group that stored the
message either way (in a group standing alone, the route's group; "" when no route answered).

Thread-safety: a `Producer` may be shared by threads (gRPC channels are; the known endpoints
take a lock). An `AsyncProducer` belongs to one event loop; its channels open on first use,
inside that loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import grpc

from wire.rpc import messaging_pb2 as pb

from .cluster_sends import ClusterRoute, FaultRecord, QueueChooser, SpreadAction, SpreadSend, SpreadStep, TopicRoutes
from .convert import ProducerMessage, SendResult, build_send_request, queues_from_route, send_results
from .endpoint import Endpoint, MessagingStubs, parse_endpoint, route_request
from .errors import RocketStoreError, from_rpc_error
from .failover import Action, KnownEndpoints, RetryPolicy, SendAttempts, Step, is_retryable
from .signing import Credentials

log = logging.getLogger(__name__)

T = TypeVar("T")

# A route question during rediscovery waits at most this long per broker.
ROUTE_TIMEOUT_S = 2.0
# How often a topic's route is asked for again (new groups, drained ones, moved masters).
ROUTE_REFRESH_S = 10.0


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def check_timeout(timeout_s: Any) -> float:
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not timeout_s > 0:
        raise ValueError(f"timeout_s must be a positive number of seconds, got {timeout_s!r}")
    return float(timeout_s)


def parse_endpoints(endpoints: str | Endpoint | Sequence[str | Endpoint]) -> list[Endpoint]:
    """One endpoint, `"a:1;b:2"`, or a list of either: the group's endpoints, in order."""
    if isinstance(endpoints, (str, Endpoint)):
        items: list[Any] = (
            [endpoints] if isinstance(endpoints, Endpoint) else [e for e in endpoints.split(";") if e.strip()]
        )
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


def master_of(topic: str, response: pb.QueryRouteResponse, group: str = "") -> tuple[str, str] | None:
    """(endpoint, broker name) of the route's writable broker id 0, of `group` when given (a
    cluster's route names every group's); None when the answer names none (a slave standing in
    for its master that is down names itself id 0, read-only)."""
    try:
        queues = queues_from_route(topic, response)
    except RocketStoreError:
        return None
    return next(
        (
            (q.endpoint, q.broker_name)
            for q in queues
            if q.broker_id == 0 and q.endpoint and q.writable and q.broker_name == (group or q.broker_name)
        ),
        None,
    )


class _ProducerBase:
    _AIO = False  # grpc.aio channels

    def __init__(
        self,
        endpoints: str | Endpoint | Sequence[str | Endpoint],
        *,
        timeout_s: float = 10.0,
        tls_ca_file: str | None = None,
        retry_timeout_s: float = 10.0,
        retry_policy: RetryPolicy | None = None,
        credentials: Credentials | None = None,
        route_refresh_s: float = ROUTE_REFRESH_S,
        wait_for_broker: bool = False,
    ) -> None:
        self._group = KnownEndpoints(parse_endpoints(endpoints))
        # The topics' routes, the groups' fault record and the round robin over their queues
        # (`client.cluster_sends`): they decide whether and how sends spread over groups.
        self._faults = FaultRecord()
        self._routes = TopicRoutes(check_timeout(route_refresh_s), self._faults)
        self._chooser = QueueChooser()
        self._given = self._group.all
        self._timeout_s = check_timeout(timeout_s)
        self._policy = (
            retry_policy
            if retry_policy is not None
            else RetryPolicy(retry_timeout_s=retry_timeout_s, wait_for_broker=wait_for_broker)
        )
        self._stubs = MessagingStubs(
            self._closed_error, tls_ca_file=tls_ca_file, credentials=credentials, aio=self._AIO
        )
        self._group_name = ""  # the broker name a route gave, for the log

    @property
    def endpoint(self) -> str:
        """The endpoint new sends go to (the master, once one answered)."""
        return self._group.current.target

    @property
    def endpoints(self) -> list[str]:
        """Every endpoint of the group known so far: those given, then those learnt."""
        return [e.target for e in self._group.all]

    @property
    def retry_policy(self) -> RetryPolicy:
        return self._policy

    @property
    def _closed(self) -> bool:
        return self._stubs.closed

    def _request(self, topic: str, messages: Iterable[Any], queue_id: int | None):
        if self._closed:
            raise RocketStoreError(f"the producer for {self.endpoint} is closed")
        return build_send_request(topic, messages, queue_id=queue_id, born_ms=_now_ms())

    def _closed_error(self) -> RocketStoreError:
        return RocketStoreError(f"the producer for {';'.join(e.target for e in self._given)} was closed")

    def _route_timeout(self) -> float:
        return min(ROUTE_TIMEOUT_S, self._timeout_s)

    def _found(self, topic: str, response: pb.QueryRouteResponse) -> str | None:
        # The master of the group the producer was given, as the last route named its endpoints.
        route = self._routes.get(topic)
        group = next((name for name in map(route.group_of, self.endpoints) if name), "")
        found = master_of(topic, response, group)
        if found is None:
            return None
        master, name = found
        if name:
            self._group_name = name
        return master

    def _route_askees(self, topic: str) -> list[Endpoint]:
        """Whom to ask for a route, as `TopicRoutes.askees` orders them."""
        given = [self._group.current.target, *(e.target for e in self._given)]
        asked = (self._group_endpoint(target) for target in self._routes.askees(topic, given, time.monotonic()))
        return list(dict.fromkeys(endpoint for endpoint in asked if endpoint is not None))

    @staticmethod
    def _group_endpoint(target: str) -> Endpoint | None:
        try:
            return parse_endpoint(target)
        except RocketStoreError:
            return None

    @staticmethod
    def _route_of(topic: str, response: pb.QueryRouteResponse) -> ClusterRoute | None:
        try:
            return ClusterRoute.of(queues_from_route(topic, response))
        except RocketStoreError:
            return None

    @staticmethod
    def _aim(request: pb.SendMessageRequest, queue_id: int) -> None:
        for message in request.messages:
            message.system_properties.send_queue_id = queue_id

    @staticmethod
    def _message_group(request: pb.SendMessageRequest) -> str:
        first = request.messages[0].system_properties
        return first.message_group if first.HasField("message_group") else ""

    def _spread_finish(self, topic: str, step: SpreadStep, results) -> list[SendResult]:
        if step.action is SpreadAction.RETURN:
            assert results is not None and step.target is not None
            name = step.target.broker_name
            return [dataclasses.replace(result, broker_name=name) for result in results]
        error = step.error
        assert error is not None
        error.attempts = step.attempts
        if self._policy.retry_timeout_s > 0:
            held = ", ".join(self._faults.held_out(time.monotonic())) or "none"
            error.add_note(
                f"gave up after {step.attempts} attempt(s) over the groups of {topic} in "
                f"retry_timeout_s={self._policy.retry_timeout_s:g}; groups held out: {held}"
            )
        raise error

    def _finish(self, topic: str, step: Step, results: list[SendResult] | None) -> list[SendResult]:
        """The end of a send: its results, or its last error raised."""
        if step.action is Action.RETURN:
            assert results is not None and step.endpoint is not None
            name = self._routes.get(topic).group_of(step.endpoint.target) or self._group_name
            if step.moved_from is not None:
                group = name or ";".join(e.target for e in self._given)
                log.info("master of %s moved from %s to %s", group, step.moved_from.target, step.endpoint.target)
            return [dataclasses.replace(result, broker_name=name) for result in results]
        error = step.error
        assert error is not None
        error.attempts = step.attempts
        if not self._group.reached and not self._policy.wait_for_broker and is_retryable(error):
            error.add_note(
                f"no broker answered at {';'.join(self.endpoints)}: not waiting for one (wait_for_broker=False)"
            )
        elif self._policy.retry_timeout_s > 0 and is_retryable(error):
            error.add_note(
                f"gave up after {step.attempts} attempt(s) in retry_timeout_s={self._policy.retry_timeout_s:g}; "
                f"endpoints known: {';'.join(self.endpoints)}"
            )
        raise error

    @staticmethod
    def _one(
        body: Any,
        tag: str | None,
        keys: Iterable[str] | str,
        properties: Mapping[str, str] | None,
        message_group: str | None,
        message_id: str | None,
    ) -> ProducerMessage:
        # ProducerMessage's __post_init__ checks and normalises each field (a str key, no properties).
        return ProducerMessage(body, tag, keys, properties, message_group, message_id)  # type: ignore[arg-type]

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
        retry_policy: RetryPolicy | None = None,
        credentials: Credentials | None = None,
        route_refresh_s: float = ROUTE_REFRESH_S,
        wait_for_broker: bool = False,
    ) -> None:
        super().__init__(
            endpoints,
            timeout_s=timeout_s,
            tls_ca_file=tls_ca_file,
            retry_timeout_s=retry_timeout_s,
            retry_policy=retry_policy,
            credentials=credentials,
            route_refresh_s=route_refresh_s,
            wait_for_broker=wait_for_broker,
        )
        self._stubs.get(self._group.current)

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
        stub = self._stubs.get(endpoint)
        try:
            response = stub.SendMessage(request, timeout=self._timeout_s)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc, endpoint.target) from exc
        return send_results(topic, response, ids)

    def _send(self, topic: str, messages: Iterable[Any], queue_id: int | None) -> list[SendResult]:
        request, ids = self._request(topic, messages, queue_id)
        route = self._spread_route(topic)
        if route is not None and queue_id is None:
            return self._send_spread(topic, request, ids, route)
        attempts = SendAttempts(self._policy, self._group, time.monotonic())
        step = attempts.first()
        results = None
        while step.action is Action.RETRY or step.action is Action.REDISCOVER:
            if step.delay_s > 0:
                time.sleep(step.delay_s)
            if self._closed:
                raise self._closed_error()
            if step.action is Action.REDISCOVER:
                step = attempts.found_master(self._rediscover(topic, step.ask), time.monotonic())
                continue
            assert step.endpoint is not None
            try:
                results = self._attempt(step.endpoint, topic, request, ids)
            except RocketStoreError as exc:
                step = attempts.failed(exc, time.monotonic())
            else:
                step = attempts.succeeded(time.monotonic())
        return self._finish(topic, step, results)

    def _spread_route(self, topic: str) -> ClusterRoute | None:
        now = time.monotonic()
        if self._routes.due(topic, now):
            self._routes.answered(topic, self._ask_route(topic), now)
        return self._routes.spread_route(topic)

    def _ask_route(self, topic: str) -> ClusterRoute | None:
        return self._first_route(topic, self._route_askees(topic), self._route_of)

    def _first_route(self, topic: str, ask: Sequence[Endpoint], read: Callable[[str, Any], T | None]) -> T | None:
        """QueryRoute on each of `ask` in turn: the first answer `read` makes something of."""
        for endpoint in ask:
            try:
                response = self._stubs.get(endpoint).QueryRoute(
                    route_request(topic, endpoint), timeout=self._route_timeout()
                )
            except grpc.RpcError:
                continue
            found = read(topic, response)
            if found:
                return found
        return None

    def _send_spread(self, topic: str, request, ids, route: ClusterRoute) -> list[SendResult]:
        spread = SpreadSend(
            self._routes, topic, route, self._chooser, self._policy, time.monotonic(), self._message_group(request)
        )
        step = spread.first()
        results = None
        while step.action is SpreadAction.SEND or step.action is SpreadAction.REFRESH:
            if step.delay_s > 0:
                time.sleep(step.delay_s)
            if self._closed:
                raise self._closed_error()
            if step.action is SpreadAction.REFRESH:
                step = spread.refreshed(self._ask_route(topic), time.monotonic())
                continue
            assert step.target is not None
            self._aim(request, step.target.queue_id)
            try:
                endpoint = parse_endpoint(step.target.endpoint)
                results = self._attempt(endpoint, topic, request, ids)
            except RocketStoreError as exc:
                step = spread.failed(exc, time.monotonic())
            else:
                step = spread.succeeded(time.monotonic())
        return self._spread_finish(topic, step, results)

    def _rediscover(self, topic: str, ask: Sequence[Endpoint]) -> str | None:
        return self._first_route(topic, ask, self._found)

    def close(self) -> None:
        """Closes every channel this producer opened; sends under way fail, later ones raise."""
        for channel in self._stubs.close_all():
            channel.close()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncProducer(_ProducerBase):
    """asyncio producer. Use as an async context manager, or await `close()`."""

    _AIO = True

    def __init__(
        self,
        endpoints: str | Endpoint | Sequence[str | Endpoint],
        *,
        timeout_s: float = 10.0,
        tls_ca_file: str | None = None,
        retry_timeout_s: float = 10.0,
        retry_policy: RetryPolicy | None = None,
        credentials: Credentials | None = None,
        route_refresh_s: float = ROUTE_REFRESH_S,
        wait_for_broker: bool = False,
    ) -> None:
        super().__init__(
            endpoints,
            timeout_s=timeout_s,
            tls_ca_file=tls_ca_file,
            retry_timeout_s=retry_timeout_s,
            retry_policy=retry_policy,
            credentials=credentials,
            route_refresh_s=route_refresh_s,
            wait_for_broker=wait_for_broker,
        )

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
        stub = self._stubs.get(endpoint)
        try:
            response = await stub.SendMessage(request, timeout=self._timeout_s)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc, endpoint.target) from exc
        return send_results(topic, response, ids)

    async def _send(self, topic: str, messages: Iterable[Any], queue_id: int | None) -> list[SendResult]:
        request, ids = self._request(topic, messages, queue_id)
        route = await self._spread_route(topic)
        if route is not None and queue_id is None:
            return await self._send_spread(topic, request, ids, route)
        attempts = SendAttempts(self._policy, self._group, time.monotonic())
        step = attempts.first()
        results = None
        while step.action is Action.RETRY or step.action is Action.REDISCOVER:
            if step.delay_s > 0:
                await asyncio.sleep(step.delay_s)
            if self._closed:
                raise self._closed_error()
            if step.action is Action.REDISCOVER:
                step = attempts.found_master(await self._rediscover(topic, step.ask), time.monotonic())
                continue
            assert step.endpoint is not None
            try:
                results = await self._attempt(step.endpoint, topic, request, ids)
            except RocketStoreError as exc:
                step = attempts.failed(exc, time.monotonic())
            else:
                step = attempts.succeeded(time.monotonic())
        return self._finish(topic, step, results)

    async def _spread_route(self, topic: str) -> ClusterRoute | None:
        now = time.monotonic()
        if self._routes.due(topic, now):
            self._routes.answered(topic, await self._ask_route(topic), now)
        return self._routes.spread_route(topic)

    async def _ask_route(self, topic: str) -> ClusterRoute | None:
        return await self._first_route(topic, self._route_askees(topic), self._route_of)

    async def _first_route(self, topic: str, ask: Sequence[Endpoint], read: Callable[[str, Any], T | None]) -> T | None:
        """QueryRoute on each of `ask` in turn: the first answer `read` makes something of."""
        for endpoint in ask:
            try:
                response = await self._stubs.get(endpoint).QueryRoute(
                    route_request(topic, endpoint), timeout=self._route_timeout()
                )
            except grpc.RpcError:
                continue
            found = read(topic, response)
            if found:
                return found
        return None

    async def _send_spread(self, topic: str, request, ids, route: ClusterRoute) -> list[SendResult]:
        spread = SpreadSend(
            self._routes, topic, route, self._chooser, self._policy, time.monotonic(), self._message_group(request)
        )
        step = spread.first()
        results = None
        while step.action is SpreadAction.SEND or step.action is SpreadAction.REFRESH:
            if step.delay_s > 0:
                await asyncio.sleep(step.delay_s)
            if self._closed:
                raise self._closed_error()
            if step.action is SpreadAction.REFRESH:
                step = spread.refreshed(await self._ask_route(topic), time.monotonic())
                continue
            assert step.target is not None
            self._aim(request, step.target.queue_id)
            try:
                endpoint = parse_endpoint(step.target.endpoint)
                results = await self._attempt(endpoint, topic, request, ids)
            except RocketStoreError as exc:
                step = spread.failed(exc, time.monotonic())
            else:
                step = spread.succeeded(time.monotonic())
        return self._spread_finish(topic, step, results)

    async def _rediscover(self, topic: str, ask: Sequence[Endpoint]) -> str | None:
        return await self._first_route(topic, ask, self._found)

    async def close(self) -> None:
        """Closes every channel this producer opened; later sends raise."""
        for channel in self._stubs.close_all():
            await channel.close()

    async def __aenter__(self) -> AsyncProducer:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
