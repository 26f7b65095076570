"""`replicated-work` and `grpc-api-work`: the `replicated` and `grpc-api` floors doing the
per-message work a broker's guarantees ask.

`bench.front_end_floor`'s `replicated` mode keeps bodies and nothing else: it answers how fast a
Python process with this front end and gRPC replication can answer at all. A broker must also
write RocketMQ's CommitLog format, remember producer ids for retries, dispatch to ConsumeQueues,
and carry a checksum and a MAC on every replication message. These modes do exactly that work,
with the broker's own functions, in the floor's shape (one loop, a turn's sends in one chunk, one
`fdatasync` at a time on a worker thread on each side), and nothing else. What it reaches is what a
put path that keeps those guarantees gets on this stack in the floor's shape: the gap from
`replicated` to it is the price of the work, and the gap from it to the broker the broker's own
shape (not a strict bound: where the broker's shape does a step better, it can pass it).

The master, per send (remoting's, or the gRPC API's after `send_item`, the broker's own
conversion, which `grpc-api` does too): the properties and the `Message`, a lookup of its producer
id (not for a batch's, as the broker), the record encoded (`store.log.codec.encode_message` /
`encode_batch`: the body's CRC and every header field), its offsets and store time stamped, its
producer id remembered (`RecentIds`), the message ids of the answer. Per turn: the records written
and flushed as in `replicated`, handed to the stream and dispatched while they are in flight, as
the broker's dispatcher does (each record's header checked, its properties read, its 20-byte
ConsumeQueue unit built). Per write to the stream (what queued while the last write was in
flight): the records as one `rocketstore.ha.v1.Chunk` (CRC-32C, HMAC-SHA256 under a session key,
serialized). Per report: the `SlaveReport` parsed and its MAC checked. The slave, per chunk:
parsed, its MAC checked, its offset, CRC-32C and whole records checked
(`ha.chunks.SlaveStreamCheck`), written and flushed as in `replicated`, dispatched (ConsumeQueue
units and producer ids, as a slave remembers them); per flush a `SlaveReport` sealed and sent.

Left out, as the broker does them off the put's path or once per stream: the index file, the
statistics, the handshake that makes the session key (both sides start from a fixed one here),
mapped segments (an append-only file instead, as in `replicated`).

Not a broker, and nothing in the product uses it. One loop thread per process (gRPC and the
flush worker add theirs).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from ha.chunks import ChunkVerdict, SlaveStreamCheck, crc32c
from ha.peer_auth import CHUNK, REPORT, Identity, PeerSession, chunk_parts, report_parts
from store.log.codec import RecordKind, check_record, encode_batch, encode_message
from store.log.recent_ids import Landed, RecentIds
from store.message import PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, Message, batch_messages
from store.queue.consume_queue import encode_unit
from store.queue.dispatch import build_dispatch_request
from wire.remoting import RemotingCommand, RequestCode, decode_batch_body, string_to_properties
from wire.rpc import ha_pb2

SEGMENT_SIZE = 1 << 30
MAX_MESSAGE_SIZE = 4 << 20
RECENT_IDS = 100_000
# Both ends' session key: the handshake that derives it runs once per stream, not per message.
_KEY = bytes(range(32))
_STORE_HOST = ("127.0.0.1", 10911)
_MASTER = Identity("floor", 0)
_SLAVE = Identity("floor", 1)


def _dispatch(data: bytes, start_offset: int, recent: RecentIds | None, units: bytearray) -> None:
    """The dispatcher's work for records `data` at `start_offset`: each header checked, its
    properties read, its ConsumeQueue unit built; on a slave its producer id remembered too."""
    pos = 0
    requests = []
    while pos < len(data):
        record = check_record(data, pos, len(data), start_offset + pos, verify_crc=False)
        if record.kind != RecordKind.MESSAGE:
            break
        requests.append(build_dispatch_request(record, data, start_offset + pos, None))
        pos += record.size
    for request in requests:
        units += encode_unit(request.commit_log_offset, request.msg_size, request.tags_code)
    if recent is not None:
        recent.add_many(
            (r.topic, r.uniq_key, Landed(r.commit_log_offset, r.msg_size, r.queue_offset, r.store_timestamp_ms))
            for r in requests
            if r.uniq_key
        )
    if len(units) > 1 << 20:
        del units[:]


def _unconnected(data: bytes) -> None:
    raise RuntimeError("the work floor's master has no stream yet")


class WorkMaster:
    """The master's work around a `FloorServer` (`front_end_floor`): `records` turns a send into
    records and its answer's fields; `queue` hands a turn's records to the stream and dispatches
    them, `wrap` makes a stream write's chunk; `report` reads a slave's report."""

    def __init__(self) -> None:
        self._send: Callable[[bytes], None] = _unconnected
        self._session = PeerSession(_KEY, _SLAVE)
        self.recent = RecentIds(RECENT_IDS)
        self._units = bytearray()
        self._chunk_offset = 0
        self._queued_offset = 0

    def records(
        self,
        request: RemotingCommand,
        fields: Mapping[str, str],
        queue_id: int,
        place: Callable[[int, int, int], tuple[int, int]],
    ) -> tuple[bytes, dict[str, str]]:
        """A remoting send's records, placed (`place(size, count, queue_id)` -> their CommitLog
        offset and the first's queue offset), and the answer's fields. `fields`: the request's
        header fields under their long names (a SEND_MESSAGE_V2's short ones mapped)."""
        now_ms = int(time.time() * 1000)
        topic = fields.get("topic", "")
        sys_flag = int(fields.get("sysFlag", "0"))
        born_ms = int(fields.get("bornTimestamp", now_ms))
        if request.code == RequestCode.SEND_BATCH_MESSAGE:
            items = decode_batch_body(request.body)
            messages = batch_messages(
                topic,
                queue_id,
                ((item.body, item.flag, item.properties) for item in items),
                sys_flag,
                ("127.0.0.1", 0),
                born_ms,
                0,
            )
        else:
            properties = string_to_properties(fields.get("properties", ""))
            messages = [
                Message(
                    topic,
                    queue_id,
                    request.body,
                    properties,
                    int(fields.get("flag", "0")),
                    sys_flag,
                    ("127.0.0.1", 0),
                    None,
                    born_ms,
                )
            ]
        records, _, queue_offset, msg_ids = self.encode(messages, queue_id, place, now_ms)
        return records, {"msgId": ",".join(msg_ids), "queueId": str(queue_id), "queueOffset": str(queue_offset)}

    def encode(
        self,
        messages: list[Message],
        queue_id: int,
        place: Callable[[int, int, int], tuple[int, int]],
        now_ms: int,
    ) -> tuple[bytes, list[int], int, list[str]]:
        """One send's messages (of one topic, made for `queue_id`) as records, placed and stamped,
        their producer ids looked up (a lone message's) and remembered: the records, each one's
        CommitLog offset, the first's queue offset and the message ids."""
        topic = messages[0].topic
        if len(messages) == 1:
            self.recent.get(topic, messages[0].properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, ""))
            encoded = encode_message(
                messages[0], default_store_host=_STORE_HOST, max_message_size=MAX_MESSAGE_SIZE, now_ms=now_ms
            )
        else:
            encoded = encode_batch(
                messages, default_store_host=_STORE_HOST, max_message_size=MAX_MESSAGE_SIZE, now_ms=now_ms
            )
        physical_offset, queue_offset = place(encoded.size, encoded.count, queue_id)
        encoded.stamp(physical_offset, queue_offset, now_ms)
        ends = [*encoded.starts[1:], encoded.size]
        landings = [
            Landed(physical_offset + start, end - start, queue_offset + i, now_ms)
            for i, (start, end) in enumerate(zip(encoded.starts, ends))
        ]
        keys = [m.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) for m in messages]
        if len(messages) == 1:
            if keys[0]:
                self.recent.add(topic, keys[0], landings[0])
        else:
            present = [key for key in keys if key]
            if len(present) == len(keys):
                self.recent.add_run(topic, present, landings)
        offsets = [physical_offset + start for start in encoded.starts]
        return bytes(encoded.buf), offsets, queue_offset, encoded.msg_ids(physical_offset)

    def stream_to(self, send: Callable[[bytes], None]) -> None:
        self._send = send

    def queue(self, data: bytes) -> None:
        """A turn's records: to the stream (which wraps what it takes at once with `wrap`), then
        dispatched here while they are in flight."""
        start = self._queued_offset
        self._queued_offset += len(data)
        self._send(data)
        _dispatch(data, start, None, self._units)

    def wrap(self, data: bytes) -> bytes:
        """The records the stream takes in one write, as one sealed `Chunk`."""
        start = self._chunk_offset
        self._chunk_offset += len(data)
        chunk = ha_pb2.Chunk(
            start_offset=start,
            data=data,
            master_max_offset=self._chunk_offset,
            epoch=1,
            checksum=crc32c(data),
            confirmed_offset=start,
            segment_size=SEGMENT_SIZE,
            master_client_endpoint="127.0.0.1:0",
            epoch_start_offset=0,
        )
        chunk.mac = self._session.seal(CHUNK, *chunk_parts(chunk))
        return chunk.SerializeToString()

    def report(self, raw: bytes) -> int:
        """A slave's report, its MAC checked: the offset it has flushed."""
        report = ha_pb2.SlaveReport.FromString(raw)
        self._session.open(REPORT, report.mac, *report_parts(report))
        return report.durable_offset


class WorkSlave:
    """The slave's work on each chunk (`take`, before the bytes are written) and each report."""

    def __init__(self) -> None:
        self._session = PeerSession(_KEY, _MASTER)
        self._check = SlaveStreamCheck(SEGMENT_SIZE, 0, True)
        self.recent = RecentIds(RECENT_IDS)
        self._units = bytearray()

    def take(self, raw: bytes) -> tuple[bytes, int]:
        """A chunk checked: its records and where they start. Raises on any failed check."""
        chunk = ha_pb2.Chunk.FromString(raw)
        self._session.open(CHUNK, chunk.mac, *chunk_parts(chunk))
        check = self._check.check(
            chunk.start_offset, chunk.data, chunk.checksum, chunk.segment_size, chunk.master_max_offset
        )
        if check.verdict is not ChunkVerdict.OK:
            raise ValueError(f"the work floor's slave refused a chunk: {check.verdict.name} {check.reason}")
        self._check.accepted(check)
        return chunk.data, chunk.start_offset

    def dispatch(self, data: bytes, start_offset: int) -> None:
        _dispatch(data, start_offset, self.recent, self._units)

    def report(self, durable_offset: int) -> bytes:
        report = ha_pb2.SlaveReport(
            durable_offset=durable_offset,
            broker_name="floor",
            broker_id=1,
            client_endpoint="127.0.0.1:0",
            max_offset=durable_offset,
            epoch=1,
            epoch_start_offset=0,
        )
        report.mac = self._session.seal(REPORT, *report_parts(report))
        return report.SerializeToString()
