"""Remoting calls straight on the wire, for the tests: a pull, and a pull repeated until the
dispatcher (which trails acknowledged puts) has queued what a test expects."""

from __future__ import annotations

import asyncio

from client.remoting import RemotingConnection
from wire.remoting import RemotingCommand, RequestCode, ResponseCode, decode_stored_records


async def pull(conn: RemotingConnection, topic: str, queue_id: int, offset: int, **extra: str) -> RemotingCommand:
    fields = {"consumerGroup": "g", "topic": topic, "queueId": str(queue_id), "queueOffset": str(offset)}
    fields.update({"maxMsgNums": "32", "sysFlag": "0", "subscription": "*"})
    fields.update(extra)
    return await conn.request(RequestCode.PULL_MESSAGE, fields)


async def pull_all(
    conn: RemotingConnection, topic: str, queue_id: int, count: int, timeout_s: float = 30
) -> RemotingCommand:
    """The first pull from offset 0 that returns `count` records; AssertionError at the deadline."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        got = await pull(conn, topic, queue_id, 0, maxMsgNums=str(max(32, count)))
        if got.code == ResponseCode.SUCCESS and len(decode_stored_records(got.body)) == count:
            return got
        assert loop.time() < deadline, f"{count} records not pulled within {timeout_s} s: {got}"
        await asyncio.sleep(0.05)
