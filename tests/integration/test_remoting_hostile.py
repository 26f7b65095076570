"""Hostile input on a broker's remoting port (issue 30): the 39-byte frame that wedged the loop,
heartbeat and slow-sender floods with the broker's memory bounded, a poisoned send beside good
ones, offsets of topics that do not exist, bad names, and the client's transaction bits.

Floods are bounded in count and time and run against small limits set in broker.conf; memory is
the broker's own account (/proc/<pid>/status: VmRSS before, VmHWM, its peak, after)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable, Coroutine
from typing import Any

from bench.edge.remoting_inputs import WEDGE_FRAME
from client import Producer, SendStatus
from client.remoting import AsyncRemotingProducer, RemotingConnection
from harness.local_cluster import LocalBroker, poll_until
from remoting_support import pull_all
from store.message import COMPRESSED_FLAG, TRANSACTION_TYPE_MASK
from support import proc_status
from wire.remoting import (
    ONEWAY_FLAG,
    SEND_V1_FIELDS,
    FrameDecoder,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    decode_stored_records,
    encode,
    properties_to_string,
)

MiB = 1024 * 1024


def start(make_cluster, **settings: str):
    """A lone ASYNC master serving remoting, with `settings` on top."""
    return make_cluster(
        master_role="ASYNC_MASTER",
        flush_disk_type="ASYNC_FLUSH",
        slaves=0,
        settings={"remotingListenPort": "0", **settings},
    ).master


def peak_growth_mib(broker: LocalBroker, scenario: Callable[[], Coroutine[Any, Any, None]]) -> float:
    """How far above its resident memory before `scenario` the broker's peak (VmHWM) is after it."""
    assert broker.process is not None
    before = proc_status(broker.process.pid, "VmRSS")
    asyncio.run(scenario())
    return (proc_status(broker.process.pid, "VmHWM") - before) / MiB


def host_port(endpoint: str) -> tuple[str, int]:
    host, port = endpoint.rsplit(":", 1)
    return host, int(port)


async def closed_by_broker(reader: asyncio.StreamReader, timeout_s: float) -> bool:
    """Whether the broker closes the connection (EOF or reset) before the deadline; whatever it
    sends first is read and dropped."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    try:
        while loop.time() < deadline:
            chunk = await asyncio.wait_for(reader.read(65536), deadline - loop.time())
            if not chunk:
                return True
    except (asyncio.TimeoutError, TimeoutError):
        return False
    except ConnectionError:
        return True
    return False


def send_command(topic: str, body: bytes, opaque: int, properties: dict[str, str], **header: str) -> RemotingCommand:
    """A SEND_MESSAGE_V2 request as a 4.x producer makes it; `header` overrides its fields."""
    fields = {
        "producerGroup": "P",
        "topic": topic,
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": "4",
        "queueId": "0",
        "sysFlag": "0",
        "bornTimestamp": "1",
        "flag": "0",
        "properties": properties_to_string(properties),
        "reconsumeTimes": "0",
        "unitMode": "false",
        "batch": "false",
    }
    fields.update(header)
    return RemotingCommand(
        RequestCode.SEND_MESSAGE_V2, opaque, 0, {SEND_V1_FIELDS[k]: v for k, v in fields.items()}, body
    )


async def exchange(endpoint: str, commands: list[RemotingCommand], timeout_s: float = 30) -> dict[int, RemotingCommand]:
    """Write the commands in one write (so the broker parses them in one turn of its loop) and
    read one answer per command, by opaque."""
    reader, writer = await asyncio.open_connection(*host_port(endpoint))
    try:
        writer.write(b"".join(encode(c) for c in commands))
        await writer.drain()
        decoder, answers = FrameDecoder(), {}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while len(answers) < len(commands):
            assert loop.time() < deadline, f"{len(answers)} of {len(commands)} answered within {timeout_s} s"
            chunk = await asyncio.wait_for(reader.read(65536), deadline - loop.time())
            assert chunk, f"the broker closed the connection after {len(answers)} of {len(commands)} answers"
            answers.update((a.opaque, a) for a in decoder.feed(chunk))
        return answers
    finally:
        writer.close()


async def pull_records(endpoint: str, topic: str, count: int) -> list:
    """The `count` records of queue 0, once the dispatcher has them all."""
    conn = await RemotingConnection.open(endpoint)
    try:
        return decode_stored_records((await pull_all(conn, topic, 0, count)).body)
    finally:
        conn.close()


# -- item 1: the wedge frame ---------------------------------------------------------------------


def test_the_39_byte_wedge_frame_closes_only_its_connection_and_both_apis_still_serve(make_cluster):
    master = start(make_cluster)

    async def scenario():
        reader, writer = await asyncio.open_connection(*host_port(master.remoting_endpoint))
        writer.write(WEDGE_FRAME)
        assert await closed_by_broker(reader, 10), "the broker kept the connection of a bad frame"
        writer.close()
        async with AsyncRemotingProducer(master.remoting_endpoint) as producer:
            sent = await asyncio.wait_for(producer.send("Wedge", b"still served", queue_id=0), 20)
        assert sent.status is SendStatus.SEND_OK

    asyncio.run(scenario())
    with Producer(master.client_endpoint) as producer:
        assert producer.send("Wedge", b"and over gRPC").status is SendStatus.SEND_OK
    assert poll_until(lambda: "an extFields key claims -10 bytes" in master.tail(200), 10)


# -- item 2: memory without bound ----------------------------------------------------------------

HEARTBEAT_LIMITS = {
    "remotingMaxClientsPerGroup": "50",
    "remotingMaxConsumerGroups": "20",
    "remotingMaxClients": "300",
    "channelExpiredTimeout": "1500",
}


def heartbeat(client_id: str, groups: list[str], opaque: int, flag: int = ONEWAY_FLAG) -> RemotingCommand:
    body = {"clientID": client_id, "producerDataSet": [], "consumerDataSet": [{"groupName": g} for g in groups]}
    return RemotingCommand(RequestCode.HEART_BEAT, opaque, flag, {}, json.dumps(body).encode())


def flood_beat(i: int, groups: int) -> RemotingCommand:
    """A one-way heartbeat of a new client in new groups (each a new table entry, unbounded)."""
    return heartbeat(f"flood-client-{i}", [f"flood-{i}-{g}" for g in range(groups)], i)


def test_a_heartbeat_flood_of_new_client_ids_keeps_memory_bounded_and_clients_expire_unasked(make_cluster):
    master = start(make_cluster, **HEARTBEAT_LIMITS)
    beats, per_beat = 20_000, 16

    async def scenario() -> None:
        reader, writer = await asyncio.open_connection(*host_port(master.remoting_endpoint))
        try:
            for first in range(0, beats, 500):
                writer.write(b"".join(encode(flood_beat(i, per_beat)) for i in range(first, first + 500)))
                await writer.drain()
            # One answered heartbeat after the flood, on its connection: served right after it.
            writer.write(encode(heartbeat("late", ["late-group"], beats, flag=0)))
            decoder, late = FrameDecoder(), None
            while late is None:
                chunk = await asyncio.wait_for(reader.read(65536), 60)
                assert chunk, "the broker closed the flood's connection"
                late = next((a for a in decoder.feed(chunk) if a.opaque == beats), None)
        finally:
            writer.close()
        assert late.code == ResponseCode.SYSTEM_ERROR and "remotingMax" in (late.remark or ""), late

    grown_mib = peak_growth_mib(master, scenario)
    # Before issue 30 this flood took the broker's peak up by about 100 MiB on a 2-core machine;
    # within the limits the table holds 300 entries (the peak grew about 13 MiB).
    assert grown_mib < 48, f"the broker's peak memory grew {grown_mib:.0f} MiB during the flood"

    async def expired() -> None:
        # Nobody asks for the flood's groups: the broker's own housekeeping frees their room.
        conn = await RemotingConnection.open(master.remoting_endpoint)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while True:
            answer = await conn.request(RequestCode.HEART_BEAT, body=heartbeat("late", ["late-group"], 0, 0).body)
            if answer.code == ResponseCode.SUCCESS or loop.time() > deadline:
                break
            await asyncio.sleep(0.1)
        conn.close()
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        async with AsyncRemotingProducer(master.remoting_endpoint) as producer:
            assert (await producer.send("AfterFlood", b"ok", queue_id=0)).status is SendStatus.SEND_OK

    asyncio.run(expired())


SLOW_LIMITS = {
    "maxMessageSize": str(64 * 1024),  # the largest frame: 2 x 64 KiB + 1 MiB
    "remotingMaxBufferedBytes": str(4 * MiB),
    "remotingFrameTimeout": "2000",
    "remotingMaxConnections": "400",
}


def test_slow_senders_holding_nearly_complete_frames_stay_within_the_buffer_cap_and_time_out(make_cluster):
    master = start(make_cluster, **SLOW_LIMITS)
    frame_bytes = 2 * 64 * 1024 + MiB - 256
    senders = 150  # before issue 30, 150 nearly complete frames held about 170 MiB (bounded: about 5)

    async def slow_sender() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.open_connection(*host_port(master.remoting_endpoint))
        frame = encode(RemotingCommand(RequestCode.SEND_MESSAGE_V2, 1, 0, {}, b"\0" * (frame_bytes - 64)))
        try:
            writer.write(frame[:-10])  # everything but the last bytes
            await writer.drain()
        except ConnectionError:
            pass  # closed by the broker already: the cap at work
        return reader, writer

    async def scenario() -> None:
        opened = await asyncio.gather(*(slow_sender() for _ in range(senders)))
        # Every one is closed: at once past the cap, the rest when their frame times out.
        closed = await asyncio.gather(*(closed_by_broker(reader, 30) for reader, _ in opened))
        for _, writer in opened:
            writer.close()
        assert all(closed), f"{closed.count(False)} of {senders} slow senders still connected"
        async with AsyncRemotingProducer(master.remoting_endpoint) as producer:
            assert (await producer.send("AfterSlow", b"ok", queue_id=0)).status is SendStatus.SEND_OK

    grown_mib = peak_growth_mib(master, scenario)
    assert grown_mib < 60, f"the broker's peak memory grew {grown_mib:.0f} MiB during the flood"
    tail = master.tail(400)
    assert "remotingMaxBufferedBytes" in tail and "remotingFrameTimeout" in tail


def test_past_the_buffer_cap_the_slowest_sender_goes_not_the_one_that_crossed_it(make_cluster):
    master = start(make_cluster, **{**SLOW_LIMITS, "remotingMaxBufferedBytes": str(2 * MiB)})
    big_body = b"\0" * (1040 * 1024)  # two such frames pass the 2 MiB cap (one is within it)

    async def scenario() -> None:
        async with AsyncRemotingProducer(master.remoting_endpoint) as producer:
            await producer.send("Crossing", b"x", queue_id=0)  # offsets are served for topics that exist
        slow_reader, slow_writer = await asyncio.open_connection(*host_port(master.remoting_endpoint))
        slow_writer.write(encode(RemotingCommand(RequestCode.GET_MAX_OFFSET, 1, 0, {}, big_body))[:-10])
        await slow_writer.drain()
        await asyncio.sleep(0.5)  # the slow frame is the older one
        fields = {"topic": "Crossing", "queueId": "0"}
        frame = encode(RemotingCommand(RequestCode.GET_MAX_OFFSET, 7, 0, fields, big_body))
        reader, writer = await asyncio.open_connection(*host_port(master.remoting_endpoint))
        try:
            writer.write(frame[: len(frame) // 2])  # arriving in parts: held while incomplete
            await writer.drain()
            await asyncio.sleep(0.2)
            writer.write(frame[len(frame) // 2 :])
            await writer.drain()
            decoder, answers = FrameDecoder(), []
            while not answers:
                chunk = await asyncio.wait_for(reader.read(65536), 30)
                assert chunk, "the broker closed the connection whose frame crossed the cap"
                answers = decoder.feed(chunk)
        finally:
            writer.close()
        assert answers[0].opaque == 7 and answers[0].code == ResponseCode.SUCCESS
        assert await closed_by_broker(slow_reader, 10), "the slow sender was not closed to make room"
        slow_writer.close()

    asyncio.run(scenario())


def test_connections_past_the_limit_are_refused_and_idle_ones_are_closed(make_cluster):
    master = start(make_cluster, remotingMaxConnections="5", serverChannelMaxIdleTimeSeconds="1")

    async def scenario() -> None:
        opened = [await asyncio.open_connection(*host_port(master.remoting_endpoint)) for _ in range(8)]
        closed = await asyncio.gather(*(closed_by_broker(reader, 30) for reader, _ in opened))
        for _, writer in opened:
            writer.close()
        # Three were refused at once, the five admitted ones closed once idle for a second.
        assert all(closed)
        async with AsyncRemotingProducer(master.remoting_endpoint) as producer:
            assert (await producer.send("AfterIdle", b"ok", queue_id=0)).status is SendStatus.SEND_OK

    asyncio.run(scenario())
    tail = master.tail(200)
    assert "remotingMaxConnections" in tail and "serverChannelMaxIdleTimeSeconds" in tail


def test_pipelined_long_polls_past_the_in_flight_limit_are_answered_busy_at_once(make_cluster):
    master = start(make_cluster, remotingMaxInFlightRequests="50")

    async def scenario() -> None:
        async with AsyncRemotingProducer(master.remoting_endpoint) as producer:
            await producer.send("Polled", b"x", queue_id=0)
        fields = {"consumerGroup": "g", "topic": "Polled", "queueId": "0", "queueOffset": "1", "maxMsgNums": "1"}
        polls = [
            RemotingCommand(RequestCode.PULL_MESSAGE, i, 0, {**fields, "sysFlag": "2", "suspendTimeoutMillis": "2000"})
            for i in range(1, 201)
        ]
        answers = await exchange(master.remoting_endpoint, polls)
        codes = [answers[i].code for i in range(1, 201)]
        # Each task of a waiting poll costs memory: 50 wait their 2 s, the rest are refused unparked.
        assert (codes.count(ResponseCode.SYSTEM_BUSY), codes.count(ResponseCode.PULL_NOT_FOUND)) == (150, 50)
        assert "remotingMaxInFlightRequests" in (answers[200].remark or "")
        async with AsyncRemotingProducer(master.remoting_endpoint) as producer:
            assert (await producer.send("Polled", b"after", queue_id=0)).status is SendStatus.SEND_OK

    asyncio.run(scenario())


# -- item 5: a poisoned send ---------------------------------------------------------------------


def test_a_poisoned_send_gets_its_own_error_and_every_good_send_of_its_turn_is_stored(make_cluster):
    master = start(make_cluster)
    poisons = {
        "separator": ({"region": "eu\x01evil"}, {}),  # refused as it is parsed
        "huge properties": ({"big": "p" * 40_000}, {}),  # refused by the shared append: retried alone
        "flag out of range": ({}, {"flag": str(2**40)}),
    }

    async def scenario() -> None:
        async with AsyncRemotingProducer(master.remoting_endpoint) as producer:
            await producer.send("Poison", b"first", queue_id=0)  # the topic exists before the turn
        per_conn: list[list[RemotingCommand]] = []
        opaque = 0
        for conn_no in range(4):
            batch = []
            for i in range(6):
                opaque += 1
                batch.append(send_command("Poison", b"good-%d-%d" % (conn_no, i), opaque, {"UNIQ_KEY": f"u{opaque}"}))
            props, header = list(poisons.values())[conn_no % len(poisons)]
            opaque += 1
            batch.insert(3, send_command("Poison", b"poison", opaque, props, **header))
            per_conn.append(batch)
        answers = await asyncio.gather(*(exchange(master.remoting_endpoint, batch) for batch in per_conn))
        for batch, got in zip(per_conn, answers):
            for command in batch:
                code = got[command.opaque].code
                if command.body == b"poison":
                    assert code == ResponseCode.MESSAGE_ILLEGAL, got[command.opaque]
                else:
                    assert code == ResponseCode.SUCCESS, got[command.opaque]
        stored = await pull_records(master.remoting_endpoint, "Poison", 25)
        bodies = sorted(r.body for r in stored)
        assert bodies == sorted([b"first"] + [b"good-%d-%d" % (c, i) for c in range(4) for i in range(6)])

    asyncio.run(scenario())


def test_a_property_with_an_empty_key_is_dropped_as_rocketmq_drops_it_and_the_message_stored(make_cluster):
    """Issue 32 item 6: a 4.x consumer's own fallback re-send carried a property with an empty key;
    RocketMQ's MessageDecoder skips such a pair and stores the message."""
    master = start(make_cluster)

    async def scenario() -> None:
        text = "\x01orphan\x02KEYS\x01k-1\x02"
        command = send_command("Lenient", b"kept", 7, {})
        command = dataclasses.replace(command, ext_fields={**command.ext_fields, SEND_V1_FIELDS["properties"]: text})
        answers = await exchange(master.remoting_endpoint, [command])
        assert answers[7].code == ResponseCode.SUCCESS, answers[7]
        (stored,) = await pull_records(master.remoting_endpoint, "Lenient", 1)
        assert stored.body == b"kept" and stored.properties["KEYS"] == "k-1"
        assert "" not in stored.properties

    asyncio.run(scenario())


# -- item 6 and 11: offsets, names, transaction bits ---------------------------------------------


def test_offsets_of_unknown_topics_bad_queues_and_bad_names_are_refused_and_nothing_is_written(make_cluster):
    master = start(make_cluster)

    async def scenario() -> None:
        async with AsyncRemotingProducer(master.remoting_endpoint) as producer:
            await producer.send("Known", b"x", queue_id=0)
        conn = await RemotingConnection.open(master.remoting_endpoint)
        update = RequestCode.UPDATE_CONSUMER_OFFSET

        async def code_of(request_code: int, **fields: str) -> tuple[int, str]:
            answer = await conn.request(request_code, fields)
            return answer.code, answer.remark or ""

        fields = {"consumerGroup": "g", "queueId": "0", "commitOffset": "5"}
        code, remark = await code_of(update, topic="Nope", **fields)
        assert code == ResponseCode.TOPIC_NOT_EXIST and "Nope does not exist" in remark
        code, remark = await code_of(RequestCode.QUERY_CONSUMER_OFFSET, topic="Nope", consumerGroup="g", queueId="0")
        assert code == ResponseCode.TOPIC_NOT_EXIST
        code, remark = await code_of(update, topic="Known", **{**fields, "queueId": "4096"})
        assert code == ResponseCode.INVALID_PARAMETER and "out of range" in remark
        code, remark = await code_of(update, topic="Known", **{**fields, "commitOffset": "-1"})
        assert code == ResponseCode.INVALID_PARAMETER
        for _ in range(50):  # bad names: a clear answer each, a few log lines in all
            code, remark = await code_of(update, topic="bad topic!", **fields)
            assert code == ResponseCode.INVALID_PARAMETER and "topic" in remark
        code, remark = await code_of(RequestCode.GET_MAX_OFFSET, topic="bad topic!", queueId="0")
        assert code == ResponseCode.INVALID_PARAMETER
        code, remark = await code_of(RequestCode.GET_CONSUMER_LIST_BY_GROUP, consumerGroup="bad@group")
        assert code == ResponseCode.INVALID_PARAMETER
        # A pull of an unknown topic is refused (reads never create topics), its commit with it;
        # a pull's refused commit is dropped and the pull itself answered.
        pull = {"consumerGroup": "g", "topic": "Nope2", "queueId": "0", "queueOffset": "0", "maxMsgNums": "1"}
        answer = await conn.request(RequestCode.PULL_MESSAGE, {**pull, "sysFlag": "1", "commitOffset": "7"})
        assert answer.code == ResponseCode.TOPIC_NOT_EXIST
        code, remark = await code_of(RequestCode.GET_MAX_OFFSET, topic="Nope", queueId="0")
        assert code == ResponseCode.TOPIC_NOT_EXIST
        answer = await conn.request(
            RequestCode.PULL_MESSAGE, {**pull, "topic": "Known", "sysFlag": "1", "commitOffset": str(2**63)}
        )
        assert answer.code == ResponseCode.SUCCESS
        assert (await code_of(update, topic="Known", **fields))[0] == ResponseCode.SUCCESS
        conn.close()

    asyncio.run(scenario())
    log = master.tail(2000)
    assert "Traceback" not in log
    refused_lines = [line for line in log.splitlines() if "remoting: refused request" in line]
    assert 1 <= len(refused_lines) <= 5, refused_lines
    assert master.stop() == 0  # a clean stop writes the offsets
    table = json.loads((master.store_dir / "config" / "consumerOffset.json").read_text())["offsetTable"]
    assert table == {"Known@g": {"0": 5}}


def test_a_4x_clients_transaction_bits_never_hide_a_message(make_cluster):
    master = start(make_cluster)
    rollback, commit, prepared = 3 << 2, 2 << 2, 1 << 2

    async def scenario() -> None:
        async with AsyncRemotingProducer(master.remoting_endpoint) as producer:
            await producer.send("TxBits", b"plain", queue_id=0)
        sends = [
            send_command("TxBits", b"rollback-bit", 1, {}, sysFlag=str(rollback)),
            send_command("TxBits", b"commit-bit", 2, {}, sysFlag=str(commit | COMPRESSED_FLAG)),
            send_command("TxBits", b"prepared-bit", 3, {}, sysFlag=str(prepared)),
            send_command("TxBits", b"tran-msg", 4, {"TRAN_MSG": "true"}),
        ]
        answers = await exchange(master.remoting_endpoint, sends)
        assert [answers[i].code for i in (1, 2)] == [ResponseCode.SUCCESS] * 2
        for i in (3, 4):  # this API cannot end a transaction: refused, nothing stored
            assert answers[i].code == ResponseCode.MESSAGE_ILLEGAL and "gRPC" in (answers[i].remark or "")
        stored = {r.body: r for r in await pull_records(master.remoting_endpoint, "TxBits", 3)}
        assert set(stored) == {b"plain", b"rollback-bit", b"commit-bit"}
        assert all(r.sys_flag & TRANSACTION_TYPE_MASK == 0 for r in stored.values())
        assert stored[b"commit-bit"].sys_flag & COMPRESSED_FLAG  # the one bit that is the client's

    asyncio.run(scenario())
