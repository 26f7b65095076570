"""Remoting requests for the fuzzer: a valid command for every request code the broker serves
(`wire.remoting.RequestCode`), structure-aware mutations of one (header fields dropped or set to
edge values, unknown fields, another code, response or one-way flags, a mutated body or property
string) and raw mutations of its encoded frame (length prefix, serialization mark, header and
body bytes).

Plain functions; every choice is drawn from the `random.Random` passed in.
"""

from __future__ import annotations

import dataclasses
import json
import random
import struct
import time
import uuid

from wire.remoting import (
    JSON,
    ONEWAY_FLAG,
    RESPONSE_FLAG,
    ROCKETMQ,
    SEND_V1_FIELDS,
    BatchItem,
    RemotingCommand,
    RequestCode,
    encode,
    encode_batch_body,
    properties_to_string,
)

from .brokers import QUEUES
from .grpc_inputs import FuzzContext
from .mutation import EDGE_TEXTS, edge_int, edge_text, mutate_bytes, random_bytes

# Issue 30 item 1: a binary header whose extFields carry a negative key length (39 bytes; it once
# wedged the broker's remoting loop). The attack and tests/integration/test_remoting_hostile.py send
# it; tests/unit/test_remoting_codec.py decodes it.
WEDGE_FRAME = bytes.fromhex("000000230100001f002200018f000000010000000000000008414141410000000400000002fff6")

SERVED = tuple(RequestCode)
# Codes RocketMQ defines that this broker does not serve, and a few that mean nothing.
UNSERVED = (0, 1, 12, 13, 36, 37, 41, 101, 200, 321, 340, 350, 1000, -1, 32767, -32768)


def send_header(
    topic: str, queue_id: int, properties: str, *, batch: bool = False, sys_flag: int = 0, born_ms: int | None = None
) -> dict[str, str]:
    """SEND_MESSAGE's header fields (long names; `SEND_V1_FIELDS` maps them to SEND_MESSAGE_V2's)
    as a RocketMQ 4.x producer fills them; `properties` already joined (`properties_to_string`)."""
    return {
        "producerGroup": "FuzzProducer",
        "topic": topic,
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": "4",
        "queueId": str(queue_id),
        "sysFlag": str(sys_flag),
        "bornTimestamp": str(int(time.time() * 1000) if born_ms is None else born_ms),
        "flag": "0",
        "properties": properties,
        "reconsumeTimes": "0",
        "unitMode": "false",
        "batch": "true" if batch else "false",
    }


def v2_fields(header: dict[str, str]) -> dict[str, str]:
    """SEND_MESSAGE_V2's one-letter names for `send_header`'s fields."""
    return {SEND_V1_FIELDS[k]: v for k, v in header.items()}


def _send_header(rng: random.Random, ctx: FuzzContext, batch: bool) -> dict[str, str]:
    props = {"UNIQ_KEY": uuid.UUID(int=rng.getrandbits(128)).hex.upper(), "WAIT": "true"}
    if rng.random() < 0.5:
        props["TAGS"] = rng.choice(("a", "b"))
    if rng.random() < 0.2:
        props["KEYS"] = "k" + str(rng.randrange(100))
    properties = "" if batch else properties_to_string(props)
    return send_header(rng.choice(ctx.topics), rng.randrange(QUEUES), properties, batch=batch, born_ms=ctx.now_ms)


def _fields(code: int, rng: random.Random, ctx: FuzzContext) -> tuple[dict[str, str], bytes]:
    topic, group = rng.choice(ctx.topics), rng.choice(ctx.groups)
    queue = str(rng.randrange(QUEUES))
    offset = str(rng.randint(0, ctx.max_queue_offset + 1))
    if code == RequestCode.SEND_MESSAGE:
        return _send_header(rng, ctx, False), rng.randbytes(rng.choice((1, 64, 1024)))
    if code == RequestCode.SEND_MESSAGE_V2:
        return v2_fields(_send_header(rng, ctx, False)), rng.randbytes(rng.choice((1, 256)))
    if code == RequestCode.SEND_BATCH_MESSAGE:
        items = [
            BatchItem(
                rng.randbytes(rng.choice((1, 64))), 0, {"UNIQ_KEY": uuid.UUID(int=rng.getrandbits(128)).hex.upper()}
            )
            for _ in range(rng.choice((1, 2, 8)))
        ]
        return v2_fields(_send_header(rng, ctx, True)), encode_batch_body(items)
    if code == RequestCode.PULL_MESSAGE:
        suspend = rng.random() < 0.2
        return {
            "consumerGroup": group,
            "topic": topic,
            "queueId": queue,
            "queueOffset": offset,
            "maxMsgNums": str(rng.choice((1, 32))),
            "sysFlag": str(2 if suspend else rng.choice((0, 1))),
            "commitOffset": offset,
            "suspendTimeoutMillis": "200" if suspend else "0",
            "subscription": rng.choice(("*", "a", "a || b")),
            "subVersion": "0",
            "expressionType": "TAG",
        }, b""
    if code in (RequestCode.QUERY_CONSUMER_OFFSET, RequestCode.GET_CONSUMER_LIST_BY_GROUP):
        return {"consumerGroup": group, "topic": topic, "queueId": queue}, b""
    if code == RequestCode.UPDATE_CONSUMER_OFFSET:
        return {"consumerGroup": group, "topic": topic, "queueId": queue, "commitOffset": offset}, b""
    if code == RequestCode.SEARCH_OFFSET_BY_TIMESTAMP:
        return {
            "topic": topic,
            "queueId": queue,
            "timestamp": str(ctx.now_ms - rng.randint(0, 60_000)),
        }, b""
    if code in (RequestCode.GET_MAX_OFFSET, RequestCode.GET_MIN_OFFSET):
        return {"topic": topic, "queueId": queue}, b""
    if code == RequestCode.HEART_BEAT:
        doc = {
            "clientID": f"127.0.0.1@fuzz-{rng.randrange(8)}",
            "producerDataSet": [{"groupName": "FuzzProducer"}],
            "consumerDataSet": [{"groupName": group, "consumeType": "CONSUME_PASSIVELY", "subscriptionDataSet": []}],
        }
        return {}, json.dumps(doc).encode()
    if code == RequestCode.UNREGISTER_CLIENT:
        return {
            "clientID": f"127.0.0.1@fuzz-{rng.randrange(8)}",
            "producerGroup": "FuzzProducer",
            "consumerGroup": group,
        }, b""
    if code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
        return {"topic": topic}, b""
    return {}, b""


def valid_command(code: int, opaque: int, rng: random.Random, ctx: FuzzContext) -> RemotingCommand:
    fields, body = _fields(code, rng, ctx)
    oneway = code == RequestCode.HEART_BEAT and rng.random() < 0.3
    return RemotingCommand(
        code,
        opaque,
        ONEWAY_FLAG if oneway else 0,
        fields,
        body,
        language=rng.choice(("JAVA", "PYTHON", "GO")),
        serialize_type=rng.choice((JSON, ROCKETMQ)),
    )


def _mutate_fields(fields: dict[str, str], rng: random.Random, known: tuple[str, ...]) -> dict[str, str]:
    out = dict(fields)
    op = rng.randrange(6)
    if op == 0 and out:
        del out[rng.choice(sorted(out))]
    elif op == 1 and out:
        out[rng.choice(sorted(out))] = str(edge_int(rng))
    elif op == 2 and out:
        out[rng.choice(sorted(out))] = edge_text(rng, known)
    elif op == 3 and ("properties" in out or "i" in out):
        key = "properties" if "properties" in out else "i"
        out[key] = rng.choice(
            (
                "a\x01b\x01c\x02",
                "noseparator",
                "\x01\x02",
                "UNIQ_KEY\x01\x02",
                "DELAY\x01" + str(edge_int(rng)) + "\x02",
                "TRAN_MSG\x01true\x02",
                "k\x01" + "v" * 40_000 + "\x02",
                out[key] + edge_text(rng, known),
            )
        )
    elif op == 4:
        for _ in range(rng.choice((1, 10, 500))):
            out[edge_text(rng, known)] = edge_text(rng, known)
    else:
        for key in ("queueId", "e", "queueOffset", "maxMsgNums", "sysFlag", "f", "commitOffset"):
            if key in out and rng.random() < 0.5:
                out[key] = str(edge_int(rng))
    return out


def _mutate_body(command: RemotingCommand, rng: random.Random, known: tuple[str, ...]) -> bytes:
    body = command.body
    if command.code == RequestCode.HEART_BEAT and rng.random() < 0.6:
        try:
            doc = json.loads(body) if body else {}
        except ValueError:
            doc = {}
        if not isinstance(doc, dict):
            doc = {}
        roll = rng.randrange(4)
        if roll == 0:
            doc["clientID"] = rng.choice((edge_text(rng, known), 1, None, [], {}))
        elif roll == 1:
            doc["consumerDataSet"] = rng.choice(
                ([{"groupName": edge_text(rng, known)}] * rng.choice((1, 100)), {}, "x", [1], None)
            )
        elif roll == 2:
            doc = rng.choice(([], "x", 1, None, {"consumerDataSet": [None]}))
        else:
            doc["clientID"] = f"fuzz-{rng.getrandbits(32)}"
        return json.dumps(doc).encode()
    if not body or rng.random() < 0.2:
        return random_bytes(rng, rng.choice((0, 64, 4096)))
    return mutate_bytes(body, rng)


def mutate_command(command: RemotingCommand, rng: random.Random, known: tuple[str, ...]) -> RemotingCommand:
    """`command` with one to three structural changes."""
    for _ in range(rng.choice((1, 1, 2, 3))):
        op = rng.randrange(10)
        if op <= 3:
            command = dataclasses.replace(command, ext_fields=_mutate_fields(dict(command.ext_fields), rng, known))
        elif op <= 5:
            command = dataclasses.replace(command, body=_mutate_body(command, rng, known))
        elif op == 6:
            code = rng.choice(UNSERVED) if rng.random() < 0.5 else rng.choice(SERVED)
            command = dataclasses.replace(command, code=code)
        elif op == 7:
            flag = rng.choice((RESPONSE_FLAG, ONEWAY_FLAG, RESPONSE_FLAG | ONEWAY_FLAG, 0xFF, -1))
            command = dataclasses.replace(command, flag=flag)
        elif op == 8:
            command = dataclasses.replace(command, remark=rng.choice(EDGE_TEXTS), language=edge_text(rng))
        else:
            command = dataclasses.replace(command, version=edge_int(rng, -(1 << 15), (1 << 15) - 1))
    return command


def encodable(command: RemotingCommand) -> bytes | None:
    """The frame of `command`, or None when the encoder refuses it (a value out of its field's
    range in the binary header)."""
    try:
        return encode(command)
    except (struct.error, ValueError, OverflowError):
        return None


def raw_frame(frame: bytes, rng: random.Random) -> bytes:
    """`frame` damaged: its prefix (length, mark) rewritten, or bytes changed anywhere."""
    roll = rng.randrange(5)
    if roll == 0:
        length = rng.choice((0, 1, 3, 4, len(frame) - 5, len(frame) + 1, 1 << 24, (1 << 31) - 1, -1, -(1 << 31)))
        return struct.pack(">i", length) + frame[4:]
    if roll == 1:
        mark = rng.choice((2 << 24, 0xFF << 24, (1 << 24) - 1, (1 << 24) | 0xFFFFFF, -1))
        return frame[:4] + struct.pack(">I", mark & 0xFFFFFFFF) + frame[8:]
    if roll == 2 and len(frame) > 8:
        return frame[: rng.randrange(len(frame))]
    if roll == 3:
        return mutate_bytes(frame, rng, keep_prefix=8)
    return mutate_bytes(frame, rng)
