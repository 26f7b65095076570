"""Pull consumers: `PullConsumer` (blocking) and `AsyncPullConsumer` (asyncio, grpc.aio), thin
adapters over `client.convert`.

The caller owns the offsets: `pull` reads from the offset given and says where to go next
(`PullResult.next_offset`: after the messages returned, or the corrected offset after
OFFSET_ILLEGAL). `get_offset` / `update_offset` read and commit the group's offset on the broker;
`query_offset` turns BEGINNING, END or a time into a queue offset; `queues` lists the readable
queue ids of a topic and `route` its whole route (QueryRoute). A long poll
(`long_polling_ms`) waits on the broker for a message to arrive; the call's deadline is the
client timeout plus that wait. Works against masters and slaves alike (reads are served by both).
`close()` tells a broker it reached that the consumer left its group (NotifyClientTermination,
at most `GOODBYE_TIMEOUT_S`), so the group shows no member that is gone and an offset reset is not
refused for it.

Thread-safety: a `PullConsumer` may be shared by threads. An `AsyncPullConsumer` belongs to one
event loop; its channel opens on the first call, inside that loop.
"""

from __future__ import annotations

from typing import Any

import grpc

from wire.rpc import messaging_pb2 as pb
from wire.rpc import messaging_pb2_grpc

from .convert import (
    DEFAULT_GROUP,
    PullAssembler,
    PullResult,
    QueueInfo,
    build_pull_request,
    build_query_offset,
    check_name,
    check_ok,
    committed_offset,
    message_queue,
    queues_from_route,
    readable_queue_ids,
)
from .endpoint import Endpoint, open_channel, parse_endpoint, route_request
from .errors import RocketStoreError, from_rpc_error
from .producer import check_timeout
from .signing import Credentials

# How long close() waits for the broker to take the consumer's goodbye.
GOODBYE_TIMEOUT_S = 1.0


class _ConsumerBase:
    def __init__(
        self,
        endpoint: str | Endpoint,
        group: str = DEFAULT_GROUP,
        *,
        timeout_s: float = 10.0,
        tls_ca_file: str | None = None,
        credentials: Credentials | None = None,
    ) -> None:
        self._endpoint = parse_endpoint(endpoint)
        self._group = check_name("group", group)
        self._timeout_s = check_timeout(timeout_s)
        self._tls_ca_file = tls_ca_file
        self._credentials = credentials
        self._closed = False
        self._reached = False  # a call was answered: the broker knows this consumer

    @property
    def endpoint(self) -> str:
        return self._endpoint.target

    @property
    def group(self) -> str:
        return self._group

    def _check_open(self) -> None:
        if self._closed:
            raise RocketStoreError(f"the consumer for {self._endpoint} is closed")

    def _route_request(self, topic: str) -> pb.QueryRouteRequest:
        check_name("topic", topic)
        return route_request(topic, self._endpoint)

    def _get_offset_request(self, topic: str, queue_id: int) -> pb.GetOffsetRequest:
        return pb.GetOffsetRequest(group=pb.Resource(name=self._group), message_queue=message_queue(topic, queue_id))

    def _update_offset_request(self, topic: str, queue_id: int, offset: int) -> pb.UpdateOffsetRequest:
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise ValueError(f"an offset is an int >= 0, got {offset!r}")
        return pb.UpdateOffsetRequest(
            group=pb.Resource(name=self._group), message_queue=message_queue(topic, queue_id), offset=offset
        )

    def _goodbye(self) -> pb.NotifyClientTerminationRequest:
        return pb.NotifyClientTerminationRequest(group=pb.Resource(name=self._group))

    def _pull_request(self, topic, queue_id, offset, max_messages, tag_filter, long_polling_ms):
        self._check_open()
        request = build_pull_request(
            self._group,
            topic,
            queue_id,
            offset,
            max_messages=max_messages,
            tag_filter=tag_filter,
            long_polling_ms=long_polling_ms,
        )
        return request, self._timeout_s + long_polling_ms / 1000

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._endpoint.target!r}, group={self._group!r})"


class PullConsumer(_ConsumerBase):
    """Blocking pull consumer. Use as a context manager, or call `close()`."""

    def __init__(
        self,
        endpoint: str | Endpoint,
        group: str = DEFAULT_GROUP,
        *,
        timeout_s: float = 10.0,
        tls_ca_file: str | None = None,
        credentials: Credentials | None = None,
    ) -> None:
        super().__init__(endpoint, group, timeout_s=timeout_s, tls_ca_file=tls_ca_file, credentials=credentials)
        self._channel = open_channel(self._endpoint, tls_ca_file=tls_ca_file, credentials=credentials)
        self._stub = messaging_pb2_grpc.MessagingServiceStub(self._channel)

    def _unary(self, method: str, request: Any) -> Any:
        self._check_open()
        try:
            answer = getattr(self._stub, method)(request, timeout=self._timeout_s)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc, self.endpoint) from exc
        self._reached = True
        return answer

    def pull(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        *,
        max_messages: int = 32,
        tag_filter: str | None = None,
        long_polling_ms: int = 0,
    ) -> PullResult:
        request, timeout = self._pull_request(topic, queue_id, offset, max_messages, tag_filter, long_polling_ms)
        assembler = PullAssembler(offset)
        call = self._stub.PullMessage(request, timeout=timeout)
        try:
            for response in call:
                assembler.feed(response)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc, self.endpoint) from exc
        finally:
            call.cancel()  # a no-op after a complete stream; stops it after a protocol error
        self._reached = True
        return assembler.result()

    def route(self, topic: str) -> list[QueueInfo]:
        """Every queue of `topic` the broker names, with its permission and broker."""
        return queues_from_route(topic, self._unary("QueryRoute", self._route_request(topic)))

    def queues(self, topic: str) -> list[int]:
        """The ids of `topic`'s readable queues, ascending."""
        return readable_queue_ids(self.route(topic))

    def get_offset(self, topic: str, queue_id: int) -> int | None:
        return committed_offset(self._unary("GetOffset", self._get_offset_request(topic, queue_id)))

    def update_offset(self, topic: str, queue_id: int, offset: int) -> None:
        check_ok(self._unary("UpdateOffset", self._update_offset_request(topic, queue_id, offset)).status)

    def query_offset(self, topic: str, queue_id: int, policy: Any = "BEGINNING") -> int:
        response = self._unary("QueryOffset", build_query_offset(topic, queue_id, policy))
        check_ok(response.status)
        return response.offset

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if self._reached:
                try:
                    self._stub.NotifyClientTermination(self._goodbye(), timeout=GOODBYE_TIMEOUT_S)
                except grpc.RpcError:
                    pass  # the broker forgets a silent client after its expiry anyway
            self._channel.close()

    def __enter__(self) -> PullConsumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncPullConsumer(_ConsumerBase):
    """asyncio pull consumer. Use as an async context manager, or await `close()`."""

    def __init__(
        self,
        endpoint: str | Endpoint,
        group: str = DEFAULT_GROUP,
        *,
        timeout_s: float = 10.0,
        tls_ca_file: str | None = None,
        credentials: Credentials | None = None,
    ) -> None:
        super().__init__(endpoint, group, timeout_s=timeout_s, tls_ca_file=tls_ca_file, credentials=credentials)
        self._channel: grpc.aio.Channel | None = None
        self._stub: messaging_pb2_grpc.MessagingServiceStub | None = None

    def _get_stub(self) -> messaging_pb2_grpc.MessagingServiceStub:
        self._check_open()
        if self._stub is None:
            self._channel = open_channel(
                self._endpoint, tls_ca_file=self._tls_ca_file, aio=True, credentials=self._credentials
            )
            self._stub = messaging_pb2_grpc.MessagingServiceStub(self._channel)
        return self._stub

    async def _unary(self, method: str, request: Any) -> Any:
        try:
            answer = await getattr(self._get_stub(), method)(request, timeout=self._timeout_s)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc, self.endpoint) from exc
        self._reached = True
        return answer

    async def pull(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        *,
        max_messages: int = 32,
        tag_filter: str | None = None,
        long_polling_ms: int = 0,
    ) -> PullResult:
        request, timeout = self._pull_request(topic, queue_id, offset, max_messages, tag_filter, long_polling_ms)
        assembler = PullAssembler(offset)
        call = self._get_stub().PullMessage(request, timeout=timeout)
        try:
            async for response in call:
                assembler.feed(response)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc, self.endpoint) from exc
        finally:
            call.cancel()
        self._reached = True
        return assembler.result()

    async def route(self, topic: str) -> list[QueueInfo]:
        """Every queue of `topic` the broker names, with its permission and broker."""
        return queues_from_route(topic, await self._unary("QueryRoute", self._route_request(topic)))

    async def queues(self, topic: str) -> list[int]:
        """The ids of `topic`'s readable queues, ascending."""
        return readable_queue_ids(await self.route(topic))

    async def get_offset(self, topic: str, queue_id: int) -> int | None:
        return committed_offset(await self._unary("GetOffset", self._get_offset_request(topic, queue_id)))

    async def update_offset(self, topic: str, queue_id: int, offset: int) -> None:
        check_ok((await self._unary("UpdateOffset", self._update_offset_request(topic, queue_id, offset))).status)

    async def query_offset(self, topic: str, queue_id: int, policy: Any = "BEGINNING") -> int:
        response = await self._unary("QueryOffset", build_query_offset(topic, queue_id, policy))
        check_ok(response.status)
        return response.offset

    async def close(self) -> None:
        self._closed = True
        channel, stub, self._channel, self._stub = self._channel, self._stub, None, None
        if stub is not None and self._reached:
            try:
                await stub.NotifyClientTermination(self._goodbye(), timeout=GOODBYE_TIMEOUT_S)
            except grpc.RpcError:
                pass  # the broker forgets a silent client after its expiry anyway
        if channel is not None:
            await channel.close()

    async def __aenter__(self) -> AsyncPullConsumer:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
