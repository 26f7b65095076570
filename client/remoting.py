"""The client side of RocketMQ's remoting protocol (`wire.remoting`), on asyncio.

    async with AsyncRemotingProducer("127.0.0.1:10909") as producer:
        result = await producer.send("Orders", b"hello", tag="created", keys=["order-1"])

`RemotingConnection` is one TCP connection: requests go out as they are made, answers are
matched to them by opaque, so any number of requests may be in flight on it. `AsyncRemotingProducer`
sends SEND_MESSAGE_V2 (and SEND_BATCH_MESSAGE) to a broker's `remotingListenPort`, choosing the
queue round-robin over the topic's write queues (from GET_ROUTEINFO_BY_TOPIC), and answers with
the same `SendResult` as `AsyncProducer`; refusals raise `BrokerError` with RocketMQ's response
code name and the broker's remark. `AsyncRemotingPullConsumer` pulls (PULL_MESSAGE, long polling
and tag filters included) and answers the same `PullResult` as `AsyncPullConsumer`, decoding the
stored records the broker returns.

Thread-safety: one event loop; a connection and a producer belong to the loop that opened them.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Iterable, Mapping, Sequence

from wire.remoting import (
    SEND_V1_FIELDS,
    BatchItem,
    FrameDecoder,
    RemotingCommand,
    RemotingProtocolError,
    RequestCode,
    ResponseCode,
    StoredRecord,
    decode_stored_records,
    encode,
    encode_batch_body,
    properties_to_string,
)

from .convert import (
    DEFAULT_GROUP,
    ProducerMessage,
    PullResult,
    PullStatus,
    ReceivedMessage,
    SendResult,
    SendStatus,
    new_message_id,
)
from .endpoint import parse_endpoint
from .errors import BrokerError, ProtocolError, TransportError

_STORED = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}


def code_name(code: int) -> str:
    try:
        return ResponseCode(code).name
    except ValueError:
        return f"CODE_{code}"


MAX_NOTICES = 1000


class RemotingConnection(asyncio.Protocol):
    """One connection to a remoting server; `request` returns the answer, `notices` holds the
    requests the broker sent (NOTIFY_CONSUMER_IDS_CHANGED)."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self._decoder = FrameDecoder()
        self._transport: asyncio.Transport | None = None
        self._waiting: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._opaques = itertools.count(1)
        self._lost: BaseException | None = None
        # Requests the broker sends (NOTIFY_CONSUMER_IDS_CHANGED); the newest are dropped when full.
        self.notices: asyncio.Queue[RemotingCommand] = asyncio.Queue(MAX_NOTICES)

    @classmethod
    async def open(cls, endpoint: str, timeout_s: float = 10.0) -> RemotingConnection:
        parsed = parse_endpoint(endpoint)
        loop = asyncio.get_running_loop()
        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(lambda: cls(endpoint), parsed.host, parsed.port), timeout_s
            )
        except (OSError, asyncio.TimeoutError) as exc:
            raise TransportError(endpoint, "UNAVAILABLE", str(exc) or type(exc).__name__) from None
        return conn

    def connection_made(self, transport) -> None:
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        try:
            answers = self._decoder.feed(data)
        except RemotingProtocolError as exc:
            self._fail(ProtocolError(f"the broker at {self.endpoint} sent a bad frame: {exc}"))
            if self._transport is not None:
                self._transport.close()
            return
        for answer in answers:
            if not answer.is_response:
                if not self.notices.full():
                    self.notices.put_nowait(answer)
                continue
            waiter = self._waiting.pop(answer.opaque, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(answer)

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        self._fail(TransportError(self.endpoint, "UNAVAILABLE", f"connection closed ({exc or 'by the broker'})"))

    def _fail(self, error: BaseException) -> None:
        self._lost = error
        waiting, self._waiting = self._waiting, {}
        for waiter in waiting.values():
            if not waiter.done():
                waiter.set_exception(error)

    async def request(
        self,
        code: int,
        ext_fields: Mapping[str, str] | None = None,
        body: bytes = b"",
        timeout_s: float = 30.0,
    ) -> RemotingCommand:
        if self._transport is None or self._transport.is_closing():
            raise self._lost or TransportError(self.endpoint, "UNAVAILABLE", "connection closed")
        opaque = next(self._opaques)
        waiter: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
        self._waiting[opaque] = waiter
        self._transport.write(encode(RemotingCommand(code, opaque, 0, dict(ext_fields or {}), body)))
        try:
            return await asyncio.wait_for(waiter, timeout_s)
        except asyncio.TimeoutError:
            raise TransportError(self.endpoint, "DEADLINE_EXCEEDED", f"no answer within {timeout_s:g} s") from None
        finally:
            self._waiting.pop(opaque, None)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()


class AsyncRemotingProducer:
    def __init__(self, endpoint: str, *, group: str = "DEFAULT_PRODUCER", timeout_s: float = 30.0) -> None:
        self.endpoint = endpoint
        self.group = group
        self.timeout_s = timeout_s
        self._conn: RemotingConnection | None = None
        self._opening: asyncio.Lock | None = None
        self._queues: dict[str, int] = {}
        self._next_queue: dict[str, int] = {}

    async def _connection(self) -> RemotingConnection:
        conn = self._conn
        if conn is not None and conn._transport is not None:
            return conn
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._conn is None or self._conn._transport is None:
                self._conn = await RemotingConnection.open(self.endpoint, self.timeout_s)
            return self._conn

    async def route(self, topic: str) -> dict:
        """GET_ROUTEINFO_BY_TOPIC: the topic's queue and broker data, as RocketMQ's TopicRouteData."""
        conn = await self._connection()
        answer = await conn.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, timeout_s=self.timeout_s)
        if answer.code != ResponseCode.SUCCESS:
            raise BrokerError(code_name(answer.code), answer.remark or "")
        return json.loads(answer.body)

    async def _queue_for(self, topic: str) -> int:
        count = self._queues.get(topic)
        if count is None:
            route = await self.route(topic)
            count = self._queues[topic] = max(1, max(q["writeQueueNums"] for q in route["queueDatas"]))
        queue = self._next_queue.get(topic, -1) + 1
        self._next_queue[topic] = queue % (1 << 30)
        return queue % count

    async def send(
        self,
        topic: str,
        body: bytes | str,
        *,
        tag: str | None = None,
        keys: Iterable[str] = (),
        properties: Mapping[str, str] | None = None,
        queue_id: int | None = None,
    ) -> SendResult:
        msg = ProducerMessage(_as_bytes(body), tag=tag, keys=tuple(keys), properties=dict(properties or {}))
        return (await self._send(topic, [msg], queue_id, batch=False))[0]

    async def send_batch(
        self, topic: str, messages: Sequence[ProducerMessage | bytes | str], *, queue_id: int | None = None
    ) -> list[SendResult]:
        items = [m if isinstance(m, ProducerMessage) else ProducerMessage(_as_bytes(m)) for m in messages]
        if not items:
            raise ValueError("a batch needs at least one message")
        return await self._send(topic, items, queue_id, batch=True)

    @staticmethod
    def _properties(msg: ProducerMessage) -> dict[str, str]:
        props = dict(msg.properties)
        if msg.tag:
            props["TAGS"] = msg.tag
        if msg.keys:
            props["KEYS"] = " ".join(msg.keys)
        props["UNIQ_KEY"] = msg.message_id or new_message_id()
        props["WAIT"] = "true"
        return props

    async def _send(
        self, topic: str, messages: list[ProducerMessage], queue_id: int | None, batch: bool
    ) -> list[SendResult]:
        queue = queue_id if queue_id is not None else await self._queue_for(topic)
        header = {
            "producerGroup": self.group,
            "topic": topic,
            "defaultTopic": "TBW102",
            "defaultTopicQueueNums": "4",
            "queueId": str(queue),
            "sysFlag": "0",
            "bornTimestamp": str(int(time.time() * 1000)),
            "flag": "0",
            "reconsumeTimes": "0",
            "unitMode": "false",
            "batch": "true" if batch else "false",
        }
        if batch:
            ids = [self._properties(m) for m in messages]
            body = encode_batch_body(BatchItem(m.body, 0, p) for m, p in zip(messages, ids))
            header["properties"] = ""
            code = RequestCode.SEND_BATCH_MESSAGE
        else:
            ids = [self._properties(messages[0])]
            body = messages[0].body
            header["properties"] = properties_to_string(ids[0])
            code = RequestCode.SEND_MESSAGE_V2
        fields = {SEND_V1_FIELDS[k]: v for k, v in header.items()}
        conn = await self._connection()
        answer = await conn.request(code, fields, body, timeout_s=self.timeout_s)
        status = _STORED.get(answer.code)  # type: ignore[call-overload]  # IntEnum keys hash as ints
        if status is None:
            raise BrokerError(code_name(answer.code), answer.remark or "")
        ext = answer.ext_fields
        offset_ids = ext.get("msgId", "").split(",")
        if len(offset_ids) != len(messages):
            raise ProtocolError(f"{len(offset_ids)} message ids for {len(messages)} messages")
        first = int(ext.get("queueOffset", "-1"))
        answered_queue = int(ext.get("queueId", str(queue)))
        return [
            SendResult(status, props["UNIQ_KEY"], topic, answered_queue, first + i, _offset_of(offset_ids[i]))
            for i, props in enumerate(ids)
        ]

    async def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    async def __aenter__(self) -> AsyncRemotingProducer:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


_PULL_STATUS = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}
# Properties the broker and clients interpret; the rest are the user's.
_SYSTEM_PROPERTIES = frozenset(
    {"TAGS", "KEYS", "UNIQ_KEY", "WAIT", "DELAY", "REAL_TOPIC", "REAL_QID", "TRAN_MSG", "__SHARDINGKEY"}
)
PULL_FLAG_SUSPEND = 2


def received(record: StoredRecord) -> ReceivedMessage:
    props = record.properties
    return ReceivedMessage(
        topic=record.topic,
        queue_id=record.queue_id,
        queue_offset=record.queue_offset,
        commit_log_offset=record.physical_offset,
        msg_id=props.get("UNIQ_KEY") or record.offset_msg_id,
        body=record.body,
        tag=props.get("TAGS"),
        keys=tuple(props.get("KEYS", "").split()),
        properties={k: v for k, v in props.items() if k not in _SYSTEM_PROPERTIES},
        born_timestamp_ms=record.born_timestamp_ms,
        store_timestamp_ms=record.store_timestamp_ms,
        born_host=f"{record.born_host[0]}:{record.born_host[1]}",
        store_host=f"{record.store_host[0]}:{record.store_host[1]}",
        reconsume_times=record.reconsume_times,
        body_crc_ok=record.body_crc_ok,
    )


class AsyncRemotingPullConsumer:
    """Pulls one queue at a time over the remoting protocol (a RocketMQ 4.x pull consumer)."""

    def __init__(self, endpoint: str, *, group: str = DEFAULT_GROUP, timeout_s: float = 30.0) -> None:
        self.endpoint = endpoint
        self.group = group
        self.timeout_s = timeout_s
        self._conn: RemotingConnection | None = None

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
        if self._conn is None or self._conn._transport is None:
            self._conn = await RemotingConnection.open(self.endpoint, self.timeout_s)
        fields = {
            "consumerGroup": self.group,
            "topic": topic,
            "queueId": str(queue_id),
            "queueOffset": str(offset),
            "maxMsgNums": str(max_messages),
            "sysFlag": str(PULL_FLAG_SUSPEND if long_polling_ms > 0 else 0),
            "commitOffset": "0",
            "suspendTimeoutMillis": str(long_polling_ms),
            "subscription": tag_filter or "*",
            "subVersion": "0",
            "expressionType": "TAG",
        }
        answer = await self._conn.request(
            RequestCode.PULL_MESSAGE, fields, timeout_s=self.timeout_s + long_polling_ms / 1000
        )
        status = _PULL_STATUS.get(answer.code)  # type: ignore[call-overload]  # IntEnum keys hash as ints
        if status is None:
            raise BrokerError(code_name(answer.code), answer.remark or "")
        try:
            messages = [received(r) for r in decode_stored_records(answer.body)] if answer.body else []
        except ValueError as exc:
            raise ProtocolError(f"the broker at {self.endpoint} sent records that do not decode: {exc}") from None
        next_offset = int(answer.ext_fields.get("nextBeginOffset", str(offset)))
        return PullResult(status, messages, next_offset)

    async def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    async def __aenter__(self) -> AsyncRemotingPullConsumer:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


def _as_bytes(body: bytes | str) -> bytes:
    return body.encode("utf-8") if isinstance(body, str) else body


def _offset_of(offset_msg_id: str) -> int:
    """The CommitLog offset in an offset message id (its last 16 hex digits)."""
    try:
        return int(offset_msg_id[-16:], 16)
    except ValueError:
        return -1
