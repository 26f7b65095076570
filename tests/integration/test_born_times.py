"""Issue 30, found by the fuzzer: a born time that fits int64 ms but lies past the year 9999 (what
protobuf's Timestamp holds) was stored, and every PullMessage and ReceiveMessage reaching it then
answered INTERNAL (`Timestamp is not valid`): the queue was wedged for gRPC consumers. The store
refuses such a send now, whichever front end it came through, and a record stored before that is
served with its time clamped."""

from __future__ import annotations

import asyncio

import grpc
from google.protobuf import timestamp_pb2

from client import Producer, PullConsumer, PullStatus
from client.remoting import RemotingConnection
from harness.local_cluster import poll_until
from pop_support import Pop
from store.message import MAX_BORN_TIMESTAMP_MS
from support import set_born_timestamp
from wire.remoting import RequestCode, ResponseCode
from wire.rpc import messaging_pb2 as pb
from wire.rpc import messaging_pb2_grpc

TOPIC = "BornTopic"
SEGMENT = 256 * 1024  # BROKER_TEST_SETTINGS' mappedFileSizeCommitLog
REFUSAL = "years 1 to 9999"


def _grpc_send(endpoint: str, born: timestamp_pb2.Timestamp, body: bytes = b"from the future") -> pb.Status:
    message = pb.Message(
        topic=pb.Resource(name=TOPIC),
        body=body,
        system_properties=pb.SystemProperties(born_timestamp=born, send_queue_id=0),
    )
    with grpc.insecure_channel(endpoint) as channel:
        stub = messaging_pb2_grpc.MessagingServiceStub(channel)
        response = stub.SendMessage(pb.SendMessageRequest(messages=[message]), timeout=30)
    (entry,) = response.entries
    return entry.status


def _queue_bodies(endpoint: str, count: int) -> list[bytes]:
    """The bodies in queue 0, once it holds `count` messages (dispatch follows the put)."""
    with PullConsumer(endpoint, group="born-readers") as consumer:

        def pulled():
            page = consumer.pull(TOPIC, 0, 0, max_messages=32)
            return page if page.status is PullStatus.FOUND and len(page.messages) >= count else None

        page = poll_until(pulled, 30, max_delay_s=0.1)
    assert page is not None, f"queue 0 never held {count} messages"
    return [m.body for m in page.messages]


async def _remoting_send(endpoint: str, born_ms: int) -> tuple[int, str]:
    fields = {
        "producerGroup": "born-producers",
        "topic": TOPIC,
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": "4",
        "queueId": "0",
        "sysFlag": "0",
        "bornTimestamp": str(born_ms),
        "flag": "0",
        "properties": "",
        "reconsumeTimes": "0",
        "unitMode": "false",
    }
    conn = await RemotingConnection.open(endpoint)
    try:
        answer = await conn.request(RequestCode.SEND_MESSAGE, fields, b"from the future")
    finally:
        conn.close()
    return answer.code, answer.remark or ""


def test_a_born_time_past_the_year_9999_is_refused_over_grpc_and_remoting(make_cluster):
    cluster = make_cluster(
        master_role="ASYNC_MASTER", flush_disk_type="ASYNC_FLUSH", slaves=0, settings={"remotingListenPort": "0"}
    )
    master = cluster.master
    with Producer(master.client_endpoint) as producer:
        assert producer.send(TOPIC, b"before", queue_id=0).ok

    status = _grpc_send(master.client_endpoint, timestamp_pb2.Timestamp(seconds=10**13))
    assert status.code == pb.BAD_REQUEST and REFUSAL in status.message, status
    code, remark = asyncio.run(_remoting_send(master.remoting_endpoint, 2**63 - 1))
    assert code == ResponseCode.MESSAGE_ILLEGAL and REFUSAL in remark, (code, remark)
    # The last millisecond of the year 9999 is a time like any other.
    edge = timestamp_pb2.Timestamp()
    edge.FromMilliseconds(MAX_BORN_TIMESTAMP_MS)
    assert _grpc_send(master.client_endpoint, edge, b"edge").code == pb.OK
    # Nothing of the refused sends was stored, and the queue serves what was.
    assert _queue_bodies(master.client_endpoint, 2) == [b"before", b"edge"]


def test_a_record_stored_with_such_a_time_is_still_served(make_cluster):
    cluster = make_cluster(master_role="ASYNC_MASTER", flush_disk_type="ASYNC_FLUSH", slaves=0)
    master = cluster.master
    with Producer(master.client_endpoint) as producer:
        sent = [producer.send(TOPIC, b"m%d" % i, queue_id=0) for i in range(3)]
    assert all(s.ok for s in sent)
    # The middle one as a broker that did not check stored it (the fuzzer's bornTimestamp).
    set_born_timestamp(master.store_dir / "commitlog", SEGMENT, sent[1].commit_log_offset, 2**63 - 1)

    assert _queue_bodies(master.client_endpoint, 3) == [b"m0", b"m1", b"m2"]
    with PullConsumer(master.client_endpoint, group="born-readers") as consumer:
        page = consumer.pull(TOPIC, 0, 0, max_messages=32)
    assert page.status is PullStatus.FOUND
    assert page.messages[1].born_timestamp_ms == MAX_BORN_TIMESTAMP_MS
    assert page.messages[0].born_timestamp_ms < MAX_BORN_TIMESTAMP_MS

    pop = Pop(master.client_endpoint, TOPIC, "born-poppers")
    try:
        code, messages = pop.receive(batch=32)
    finally:
        pop.close()
    assert code == pb.OK
    assert sorted(m.body for m in messages) == [b"m0", b"m1", b"m2"]
    born = {m.body: m.system_properties.born_timestamp.ToMilliseconds() for m in messages}
    assert born[b"m1"] == MAX_BORN_TIMESTAMP_MS
