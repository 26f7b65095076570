"""RocketMQ's remoting protocol on a broker group (remotingListenPort): sends with sync replication
and flush, gathered concurrent sends, pulls of the stored records with long polling, consumer
offsets, routes, refusals on a slave, and a connection that sends garbage."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys

import pytest

from client import PullStatus, SendStatus
from client.remoting import AsyncRemotingProducer, AsyncRemotingPullConsumer, RemotingConnection
from harness.local_cluster import poll_until
from remoting_support import pull, pull_all
from store.log.codec import decode_message
from wire.remoting import RemotingCommand, RequestCode, ResponseCode, decode_stored_records

REMOTING = {"remotingListenPort": "0"}


@pytest.fixture
def group(make_cluster):
    return make_cluster(master_role="SYNC_MASTER", flush_disk_type="SYNC_FLUSH", settings=REMOTING)


def records(body: bytes) -> list:
    out, pos = [], 0
    while pos < len(body):
        msg = decode_message(body, pos)
        out.append(msg)
        pos += msg.store_size
    return out


def test_sends_are_acknowledged_after_flush_and_slave_and_read_back_from_both(group):
    async def scenario():
        async with AsyncRemotingProducer(group.master.remoting_endpoint) as producer:
            one = await producer.send("Orders", b"first", tag="created", keys=["o-1"], queue_id=0)
            batch = await producer.send_batch("Orders", [b"b1", b"b2", b"b3"], queue_id=0)
            together = await asyncio.gather(*(producer.send("Orders", b"c%d" % i, queue_id=0) for i in range(20)))
        sent = [one, *batch, *together]
        assert {r.status for r in sent} == {SendStatus.SEND_OK}
        assert [r.queue_offset for r in sent] == list(range(24))
        assert len({r.commit_log_offset for r in sent}) == 24
        # Dispatch trails the put (RocketMQ's reput does too): poll until the queue has them all.
        master = await RemotingConnection.open(group.master.remoting_endpoint)
        answer = await pull_all(master, "Orders", 0, 24)
        master.close()
        assert answer.ext_fields["nextBeginOffset"] == "24"
        stored = records(answer.body)
        assert [m.body for m in stored[:4]] == [b"first", b"b1", b"b2", b"b3"]
        assert sorted(m.body for m in stored[4:]) == sorted(b"c%d" % i for i in range(20))
        assert stored[0].tags == "created" and stored[0].keys == "o-1"
        assert stored[0].properties["UNIQ_KEY"] == one.msg_id
        # Acknowledged means the slave holds it too: its own remoting API serves the same records.
        slave = await RemotingConnection.open(group.slave_brokers[0].remoting_endpoint)
        replica = await pull_all(slave, "Orders", 0, 24)
        slave.close()
        assert replica.body == answer.body

    asyncio.run(scenario())


def test_a_waiting_pull_is_answered_when_a_message_arrives_and_offsets_are_kept(group):
    async def scenario():
        conn = await RemotingConnection.open(group.master.remoting_endpoint)
        # Reads never create topics: a pull of one that does not exist is refused at once.
        unknown = await pull(conn, "Late", 0, 0, sysFlag="2", suspendTimeoutMillis="20000")
        assert unknown.code == ResponseCode.TOPIC_NOT_EXIST
        async with AsyncRemotingProducer(group.master.remoting_endpoint) as producer:
            await producer.send("Late", b"first", queue_id=0)
            waiting = asyncio.create_task(pull(conn, "Late", 0, 1, sysFlag="2", suspendTimeoutMillis="20000"))
            done, _ = await asyncio.wait({waiting}, timeout=0.3)
            assert not done, "a pull at the end of a queue with the suspend flag must wait"
            await producer.send("Late", b"arrived", queue_id=0)
        answer = await asyncio.wait_for(waiting, 20)
        assert answer.code == ResponseCode.SUCCESS and [m.body for m in records(answer.body)] == [b"arrived"]
        empty = await pull(conn, "Late", 0, 2)
        assert empty.code == ResponseCode.PULL_NOT_FOUND

        fields = {"consumerGroup": "g", "topic": "Late", "queueId": "0"}
        # No offset committed yet, and the queue still starts at 0: RocketMQ answers 0.
        fresh = await conn.request(RequestCode.QUERY_CONSUMER_OFFSET, fields)
        assert (fresh.code, fresh.ext_fields["offset"]) == (ResponseCode.SUCCESS, "0")
        updated = await conn.request(RequestCode.UPDATE_CONSUMER_OFFSET, {**fields, "commitOffset": "1"})
        assert updated.code == ResponseCode.SUCCESS
        found = await conn.request(RequestCode.QUERY_CONSUMER_OFFSET, fields)
        assert (found.code, found.ext_fields["offset"]) == (ResponseCode.SUCCESS, "1")
        top = await conn.request(RequestCode.GET_MAX_OFFSET, {"topic": "Late", "queueId": "0"})
        assert top.ext_fields["offset"] == "2"
        conn.close()

    asyncio.run(scenario())


def test_a_new_group_consuming_from_the_last_offset_reads_what_was_sent_before_it_came(group):
    """Issue 32 item 7: a 4.x consumer with CONSUME_FROM_LAST_OFFSET asks for the group's offset
    and starts from the end of the queue only when told QUERY_NOT_FOUND."""

    async def scenario():
        async with AsyncRemotingProducer(group.master.remoting_endpoint) as producer:
            for i in range(5):
                await producer.send("Earlier", b"e%d" % i, queue_id=i % 2)
        conn = await RemotingConnection.open(group.master.remoting_endpoint)
        got = []
        for queue_id in (0, 1):
            fields = {"consumerGroup": "newcomers", "topic": "Earlier", "queueId": str(queue_id)}
            answer = await conn.request(RequestCode.QUERY_CONSUMER_OFFSET, fields)
            assert (answer.code, answer.ext_fields["offset"]) == (ResponseCode.SUCCESS, "0")
            want = 3 if queue_id == 0 else 2
            pulled = await pull_all(conn, "Earlier", queue_id, want)
            got += [m.body for m in records(pulled.body)]
        conn.close()
        assert sorted(got) == [b"e%d" % i for i in range(5)]

    asyncio.run(scenario())


def test_routes_heartbeats_and_unknown_codes(group):
    async def scenario():
        async with AsyncRemotingProducer(group.master.remoting_endpoint) as producer:
            await producer.send("Routed", b"x")
            route = await producer.route("Routed")
        assert route["brokerDatas"][0]["brokerAddrs"] == {"0": group.master.remoting_endpoint}
        assert route["queueDatas"][0]["writeQueueNums"] >= 1
        conn = await RemotingConnection.open(group.master.remoting_endpoint)
        beat = {"clientID": "c-1", "consumerDataSet": [{"groupName": "billing"}], "producerDataSet": []}
        assert (await conn.request(RequestCode.HEART_BEAT, body=json.dumps(beat).encode())).code == 0
        listed = await conn.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "billing"})
        assert json.loads(listed.body) == {"consumerIdList": ["c-1"]}
        unknown = await conn.request(9999)
        assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and "9999" in (unknown.remark or "")
        conn.close()

    asyncio.run(scenario())


def test_a_slave_refuses_sends_and_garbage_closes_only_its_connection(group):
    async def scenario():
        async with AsyncRemotingProducer(group.slave_brokers[0].remoting_endpoint) as producer:
            with pytest.raises(Exception, match="SERVICE_NOT_AVAILABLE.*SLAVE"):
                await producer.send("Orders", b"x", queue_id=0)
        reader, writer = await asyncio.open_connection(*group.master.remoting_endpoint.rsplit(":", 1))
        writer.write(b"\xff\xff\xff\xffnot a frame")
        assert await asyncio.wait_for(reader.read(), 10) == b""  # closed by the broker
        writer.close()
        async with AsyncRemotingProducer(group.master.remoting_endpoint) as producer:
            assert (await producer.send("Orders", b"still served", queue_id=0)).status is SendStatus.SEND_OK

    asyncio.run(scenario())
    assert poll_until(lambda: "closing" in group.master.tail(200), 10)


def test_the_python_client_consumes_over_remoting_with_tag_filters_and_long_polling(group):
    async def scenario():
        endpoint = group.master.remoting_endpoint
        async with AsyncRemotingProducer(endpoint) as producer, AsyncRemotingPullConsumer(endpoint) as consumer:
            sent = [
                await producer.send("Tagged", b"a%d" % i, tag="red" if i % 2 else "blue", keys=[f"k{i}"], queue_id=0)
                for i in range(10)
            ]
            await producer.send("Tagged", b"props", properties={"region": "eu"}, queue_id=1)
            # Dispatch trails the put (as RocketMQ's reput does): a long poll waits for the last
            # message sent, and the dispatcher, which runs in log order, has then queued the rest.
            (with_props,) = (await consumer.pull("Tagged", 1, 0, long_polling_ms=20_000)).messages
            assert dict(with_props.properties) == {"region": "eu"}
            everything = await consumer.pull("Tagged", 0, 0, max_messages=32)
            assert everything.status is PullStatus.FOUND and everything.next_offset == 10
            assert [m.body for m in everything.messages] == [b"a%d" % i for i in range(10)]
            assert [m.msg_id for m in everything.messages] == [r.msg_id for r in sent]
            assert [m.commit_log_offset for m in everything.messages] == [r.commit_log_offset for r in sent]
            assert everything.messages[3].tag == "red" and everything.messages[3].keys == ("k3",)
            assert all(m.body_crc_ok for m in everything.messages)
            red = await consumer.pull("Tagged", 0, 0, max_messages=32, tag_filter="red")
            assert [m.body for m in red.messages] == [b"a%d" % i for i in range(1, 10, 2)]
            empty = await consumer.pull("Tagged", 0, 10)
            assert empty.status is PullStatus.NO_NEW_MSG and empty.next_offset == 10
            waiting = asyncio.create_task(consumer.pull("Tagged", 0, 10, long_polling_ms=20_000))
            done, _ = await asyncio.wait({waiting}, timeout=0.3)
            assert not done, "a long poll of an empty queue must wait"
            await producer.send("Tagged", b"late", queue_id=0)
            late = await asyncio.wait_for(waiting, 20)
            assert [m.body for m in late.messages] == [b"late"]

    asyncio.run(scenario())


def test_a_pull_right_after_an_acknowledged_send_never_answers_offset_moved(group):
    """Issue 30: a pull at the acknowledged queue offset + 1, right after the answer, came back
    PULL_OFFSET_MOVED (ILLEGAL_OFFSET to the client) in about 2 of 300 tries while the
    dispatcher had not yet queued the message. It must wait at the end; and a pull at the
    acknowledged offset sees the message (read your writes), with no long poll either."""

    async def scenario():
        endpoint = group.master.remoting_endpoint
        answers: dict[tuple[int, str], int] = {}
        async with AsyncRemotingProducer(endpoint) as producer:
            conn = await RemotingConnection.open(endpoint)
            for i in range(300):
                topic = f"Race{i % 3}"  # a new queue now and then: one with no ConsumeQueue yet
                sent = await producer.send(topic, b"x", queue_id=0)
                for offset in (sent.queue_offset, sent.queue_offset + 1):
                    got = await pull(conn, topic, 0, offset)
                    key = (offset - sent.queue_offset, ResponseCode(got.code).name)
                    answers[key] = answers.get(key, 0) + 1
            conn.close()
        assert answers == {(0, "SUCCESS"): 300, (1, "PULL_NOT_FOUND"): 300}, answers

    asyncio.run(scenario())


# A 4.x consumer of group "takers" in a process of its own: it heartbeats, says so, and waits.
MEMBER = """
import asyncio, json, sys
from client.remoting import RemotingConnection
from wire.remoting import RequestCode

async def main():
    conn = await RemotingConnection.open(sys.argv[1])
    beat = {"clientID": sys.argv[2], "consumerDataSet": [{"groupName": "takers"}], "producerDataSet": []}
    answer = await conn.request(RequestCode.HEART_BEAT, body=json.dumps(beat).encode())
    print(answer.code, flush=True)
    await asyncio.sleep(600)

asyncio.run(main())
"""


def heartbeat_body(client_id: str, group: str) -> bytes:
    return json.dumps(
        {"clientID": client_id, "consumerDataSet": [{"groupName": group}], "producerDataSet": []}
    ).encode()


def test_a_consumer_killed_with_sigkill_leaves_its_group_at_once_and_the_other_member_is_told(group):
    """Issue 32 item 8: a closed connection removes its client from the group at once (not after
    the heartbeat expiry, 120 s) and the group's other members get NOTIFY_CONSUMER_IDS_CHANGED,
    on which a 4.x consumer rebalances: with the killed member gone, it takes every queue."""
    endpoint = group.master.remoting_endpoint

    async def scenario():
        survivor = await RemotingConnection.open(endpoint)
        joined = await survivor.request(RequestCode.HEART_BEAT, body=heartbeat_body("survivor", "takers"))
        assert joined.code == ResponseCode.SUCCESS
        member = subprocess.Popen([sys.executable, "-c", MEMBER, endpoint, "victim"], stdout=subprocess.PIPE, text=True)
        try:
            assert member.stdout is not None
            line = await asyncio.wait_for(asyncio.to_thread(member.stdout.readline), 60)
            assert line.strip() == "0", line
            fields = {"consumerGroup": "takers"}
            listed = await survivor.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, fields)
            assert json.loads(listed.body)["consumerIdList"] == ["survivor", "victim"]
            # Each join was told to the members (the survivor's own too), before this answer on
            # the same connection.
            joins = [survivor.notices.get_nowait() for _ in range(survivor.notices.qsize())]
            assert [(n.code, n.ext_fields["consumerGroup"], n.is_response) for n in joins] == [
                (RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, "takers", False)
            ] * 2
        finally:
            member.send_signal(signal.SIGKILL)
            member.wait(30)
            if member.stdout is not None:
                member.stdout.close()
        notice = await asyncio.wait_for(survivor.notices.get(), 30)
        assert (notice.code, notice.ext_fields["consumerGroup"]) == (RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, "takers")
        listed = await survivor.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, fields)
        assert json.loads(listed.body)["consumerIdList"] == ["survivor"]
        survivor.close()

    asyncio.run(scenario())


def test_a_consumed_message_sent_back_is_redelivered_through_the_retry_topic_then_dead_lettered(group):
    """Issue 32 item 6: CONSUMER_SEND_MSG_BACK as a 4.x consumer sends it after a failed
    consumption: the message comes back on %RETRY%<group> after its delay level, each time one
    attempt more, and past maxReconsumeTimes lands in %DLQ%<group>."""

    async def scenario():
        async with AsyncRemotingProducer(group.master.remoting_endpoint) as producer:
            sent = await producer.send("Backs", b"fails", keys=["k-1"], queue_id=0)
        conn = await RemotingConnection.open(group.master.remoting_endpoint)

        async def send_back(record) -> RemotingCommand:
            fields = {
                "offset": str(record.physical_offset),
                "group": "backers",
                "delayLevel": "1",  # 1 s
                "originMsgId": sent.msg_id,
                "originTopic": "Backs",
                "unitMode": "false",
                "maxReconsumeTimes": "2",
            }
            return await conn.request(RequestCode.CONSUMER_SEND_MSG_BACK, fields)

        (consumed,) = decode_stored_records((await pull_all(conn, "Backs", 0, 1)).body)
        for attempt in (1, 2):
            assert (await send_back(consumed)).code == ResponseCode.SUCCESS
            # Redelivered on the group's retry topic once its delay is over (the pull waits for it).
            retried = decode_stored_records((await pull_all(conn, "%RETRY%backers", 0, attempt)).body)
            consumed = retried[-1]
            assert (consumed.body, consumed.reconsume_times) == (b"fails", attempt)
            assert consumed.properties["RETRY_TOPIC"] == "Backs" and consumed.properties["KEYS"] == "k-1"
            assert consumed.properties["ORIGIN_MESSAGE_ID"] == sent.msg_id
        # Its second attempt failed too: past maxReconsumeTimes it goes to the dead-letter topic.
        assert (await send_back(consumed)).code == ResponseCode.SUCCESS
        (dead,) = decode_stored_records((await pull_all(conn, "%DLQ%backers", 0, 1)).body)
        assert (dead.body, dead.reconsume_times, dead.properties["RETRY_TOPIC"]) == (b"fails", 3, "Backs")
        missing = await conn.request(
            RequestCode.CONSUMER_SEND_MSG_BACK, {"offset": str(10**12), "group": "backers", "delayLevel": "1"}
        )
        assert missing.code == ResponseCode.SYSTEM_ERROR and "no message" in (missing.remark or "")
        conn.close()

    asyncio.run(scenario())
