"""The issue's attacks on the remoting port (items 1, 2, 5, 6 and the remoting parts of 11),
reproduced from the outside against brokers started for each scenario. Each returns a `Result`
with the figure the issue quotes, PASS when the broker now does what the issue expects.

Plain functions of an `AttackEnv`; threads only where an attack needs several connections at once.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import time
import uuid

from client import AdminClient, BrokerError, PullConsumer, TransportError
from client.endpoint import parse_endpoint
from client.remoting import RemotingConnection
from wire.remoting import (
    RemotingCommand,
    RequestCode,
    ResponseCode,
    decode_stored_records,
    encode,
    properties_to_string,
)

from .attack_kit import AttackEnv, Result, closed_by_peer, cpu_share, put_latencies_ms, rss_mib
from .brokers import stop_timed
from .observe import Sampler, scan_broker_stderr
from .remoting_inputs import WEDGE_FRAME, send_header, v2_fields
from .remoting_io import RemotingSocket, one_request


def _probe(endpoint: str, timeout_s: float = 5.0) -> str | None:
    """GET_MAX_OFFSET on a new connection: the answer's code name, None without one."""
    command = RemotingCommand(RequestCode.GET_MAX_OFFSET, 1, 0, {"topic": "ProbeTopic", "queueId": "0"})
    return one_request(endpoint, command, timeout_s).answer


def _peer(endpoint: str) -> tuple[str, int]:
    parsed = parse_endpoint(endpoint)
    return parsed.host, parsed.port


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def wedge_frame(env: AttackEnv) -> Result:
    result = Result(
        "wedge-frame",
        "1",
        "the 39-byte frame is refused, remoting still answers within 5 s, gRPC put latency unchanged",
    )
    with env.group(result, remoting=True) as cluster:
        master = cluster.master
        count = env.count(200)
        before, failed_before = put_latencies_ms(cluster, "WedgeTopic", count)
        conn = RemotingSocket(master.remoting_endpoint)
        conn.send(WEDGE_FRAME)
        closed = conn.closed_within(2.0)
        answer = _probe(master.remoting_endpoint)
        cpu = cpu_share(master, 2.0)
        after, failed_after = put_latencies_ms(cluster, "WedgeTopic", count)
        conn.close()
        stop = stop_timed(master)
    result.figure("connection that sent the frame closed by the broker", _yes(closed))
    result.figure("remoting answers a new connection within 5 s", answer or "no answer")
    result.figure("broker CPU over 2 s after the frame", f"{cpu * 100:.0f}% of a core")
    p50 = "none" if before is None else f"{before:.1f}"
    p50_after = "none" if after is None else f"{after:.1f}"
    result.figure(f"gRPC SYNC_MASTER put p50 before -> after ({count} puts each)", f"{p50} -> {p50_after} ms")
    result.figure("failed puts before / after", f"{failed_before} / {failed_after}")
    result.figure("the broker", stop)
    result.passed = answer is not None
    return result


def _heartbeat_frame(client: int, groups: int) -> bytes:
    header = b'{"code":34,"language":"JAVA","version":399,"opaque":0,"flag":2}'
    body = b'{"clientID":"flood-%d","consumerDataSet":[{"groupName":"FloodGroup%d"}]}' % (client, client % groups)
    return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body


def heartbeat_flood(env: AttackEnv) -> Result:
    result = Result(
        "heartbeat-flood",
        "2",
        f"one-way HEART_BEATs with new client ids leave the broker's RSS within +{env.rss_limit_mib:g} MiB",
    )
    seconds = env.seconds(10)
    with env.group(result, remoting=True, slaves=0, master_role="ASYNC_MASTER") as cluster:
        master = cluster.master
        before = rss_mib(master)
        sampler = Sampler(lambda: {"master": master.process.pid if master.process else None}).start()
        sock = socket.create_connection(_peer(master.remoting_endpoint))
        sent = 0
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline:
                sock.sendall(b"".join(_heartbeat_frame(sent + i, 10) for i in range(500)))
                sent += 500
        except OSError as exc:
            result.notes.append(f"the flood's connection failed after {sent} frames: {exc}")
        finally:
            sock.close()
        answer = _probe(master.remoting_endpoint)
        sampler.stop()
        after = rss_mib(master)
    peak = (sampler.rss["master"].peak or 0) / (1 << 20)
    result.figure("heartbeats sent", f"{sent} in {seconds:g} s (10 groups)")
    result.figure("broker RSS before / peak / after", f"{before:.0f} / {peak:.0f} / {after:.0f} MiB")
    result.figure("RSS growth", f"{after - before:+.0f} MiB")
    result.figure("remoting answers afterwards", answer or "no answer")
    result.passed = after - before <= env.rss_limit_mib
    return result


def slow_senders(env: AttackEnv) -> Result:
    result = Result(
        "slow-senders",
        "2",
        f"connections holding nearly complete large frames leave the broker's RSS within +{env.rss_limit_mib:g} MiB "
        "(buffers capped, slow senders timed out)",
    )
    connections, frame_bytes, hold_s = env.count(50), 4 << 20, env.seconds(10)
    header = b'{"code":11,"language":"JAVA","version":399,"opaque":1,"flag":0}'
    body_len = frame_bytes - len(header) - 8
    prefix = struct.pack(">ii", 4 + len(header) + body_len, len(header)) + header
    partial = prefix + b"\0" * (body_len - 1)
    with env.group(result, remoting=True, slaves=0, master_role="ASYNC_MASTER") as cluster:
        master = cluster.master
        before = rss_mib(master)
        sampler = Sampler(lambda: {"master": master.process.pid if master.process else None}).start()
        socks: list[socket.socket] = []
        refused = 0
        for _ in range(connections):
            sock = socket.create_connection(_peer(master.remoting_endpoint))
            sock.settimeout(10)
            try:
                sock.sendall(partial)
            except OSError:
                refused += 1
            socks.append(sock)
        loaded = rss_mib(master)
        closed = closed_by_peer(socks, hold_s)
        after_hold = rss_mib(master)
        for sock in socks:
            sock.close()
        sampler.stop()
    peak = (sampler.rss["master"].peak or 0) / (1 << 20)
    result.figure("connections x bytes sent", f"{connections} x {frame_bytes - 1} of a {frame_bytes}-byte frame")
    result.figure(
        "broker RSS before / all sent / after holding / peak",
        f"{before:.0f} / {loaded:.0f} / {after_hold:.0f} / {peak:.0f} MiB",
    )
    result.figure("RSS growth at peak", f"{peak - before:+.0f} MiB")
    result.figure(f"connections the broker closed within {hold_s:g} s", f"{closed} (sends refused: {refused})")
    result.passed = peak - before <= env.rss_limit_mib
    return result


async def _send_load(endpoint: str, topic: str, seconds: float, poison_per_s: float) -> dict[str, int]:
    counts = {"good_answered": 0, "good_unanswered": 0, "good_refused": 0, "poison_sent": 0, "poison_answered": 0}
    deadline = time.monotonic() + seconds
    queue = 0

    async def sender(conn: RemotingConnection) -> None:
        nonlocal queue
        while time.monotonic() < deadline:
            queue = (queue + 1) % 4
            props = properties_to_string({"UNIQ_KEY": uuid.uuid4().hex.upper(), "WAIT": "true"})
            fields = v2_fields(send_header(topic, queue, props))
            try:
                answer = await conn.request(RequestCode.SEND_MESSAGE_V2, fields, b"good", timeout_s=3)
            except TransportError:
                counts["good_unanswered"] += 1
                continue
            counts["good_answered" if answer.code == ResponseCode.SUCCESS else "good_refused"] += 1

    async def poisoner(conn: RemotingConnection) -> None:
        pending: set[asyncio.Task] = set()

        async def one() -> None:
            # A property value holding the name/value separator.
            props = properties_to_string({"UNIQ_KEY": uuid.uuid4().hex.upper()}) + "a\x01b\x01c\x02"
            fields = v2_fields(send_header(topic, 0, props))
            try:
                await conn.request(RequestCode.SEND_MESSAGE_V2, fields, b"poison", timeout_s=3)
                counts["poison_answered"] += 1
            except TransportError:
                pass

        while time.monotonic() < deadline:
            counts["poison_sent"] += 1
            task = asyncio.ensure_future(one())
            pending.add(task)
            task.add_done_callback(pending.discard)
            await asyncio.sleep(1 / poison_per_s)  # the attack's pace
        if pending:
            await asyncio.gather(*pending)

    conns = [await RemotingConnection.open(endpoint) for _ in range(5)]
    try:
        tasks = [sender(conns[i % 4]) for i in range(32)]
        if poison_per_s > 0:
            tasks.append(poisoner(conns[4]))
        await asyncio.gather(*tasks)
    finally:
        for conn in conns:
            conn.close()
    return counts


def poisoned_send(env: AttackEnv) -> Result:
    result = Result(
        "poisoned-send",
        "5",
        "a malformed send gets its own error answer; every good send beside it is answered",
    )
    seconds = env.seconds(5)
    with env.group(result, remoting=True, slaves=0, master_role="ASYNC_MASTER") as cluster:
        endpoint = cluster.master.remoting_endpoint
        clean = asyncio.run(_send_load(endpoint, "PoisonTopic", seconds, 0))
        poisoned = asyncio.run(_send_load(endpoint, "PoisonTopic", seconds, 50))
    result.figure("good answers/s without poison", f"{clean['good_answered'] / seconds:.0f}")
    result.figure("good answers/s with 50 poisoned sends/s", f"{poisoned['good_answered'] / seconds:.0f}")
    result.figure(
        "good sends without an answer (3 s) without / with poison",
        f"{clean['good_unanswered']} / {poisoned['good_unanswered']}",
    )
    result.figure("poisoned sends answered", f"{poisoned['poison_answered']} of {poisoned['poison_sent']}")
    result.passed = poisoned["good_unanswered"] == 0 and poisoned["poison_answered"] == poisoned["poison_sent"]
    return result


def unknown_offsets(env: AttackEnv) -> Result:
    result = Result(
        "unknown-offsets",
        "6",
        "UPDATE_CONSUMER_OFFSET for topics that do not exist is refused over remoting, as over gRPC",
    )
    total, seconds = env.count(50_000), env.seconds(10)
    with env.group(result, remoting=True) as cluster:
        master, slave = cluster.master, cluster.slave_brokers[0]
        idle = cpu_share(master, 2.0)
        conn = RemotingSocket(master.remoting_endpoint)
        accepted = sent = 0
        answers: dict[str, int] = {}
        started = time.monotonic()
        while sent < total and time.monotonic() - started < seconds:
            batch = []
            for _ in range(min(500, total - sent)):
                sent += 1
                fields = {"consumerGroup": "g", "topic": f"NoSuchTopic{sent}", "queueId": "0", "commitOffset": "1"}
                batch.append(RemotingCommand(RequestCode.UPDATE_CONSUMER_OFFSET, sent, 0, fields))
            conn.send(b"".join(encode(c) for c in batch))
            for command in batch:
                answer = conn.wait(command.opaque, 10).answer or "no answer"
                answers[answer] = answers.get(answer, 0) + 1
                accepted += answer == "SUCCESS"
        elapsed = time.monotonic() - started
        conn.close()
        with PullConsumer(master.client_endpoint, group="g") as consumer:
            try:
                consumer.update_offset("NoSuchTopicOverGrpc", 0, 1)
                grpc = "OK (accepted)"
            except BrokerError as exc:
                grpc = str(exc).split(":")[0]
        master_file = master.store_dir / "config" / "consumerOffset.json"
        slave_file = slave.store_dir / "config" / "consumerOffset.json"
        master_size = _settled_size(master_file, 15)
        slave_size = _settled_size(slave_file, 15, at_least=master_size)
        busy = cpu_share(master, 2.0)
    result.figure("requests sent / accepted (SUCCESS)", f"{sent} / {accepted} in {elapsed:.1f} s")
    result.figure("answers", json.dumps(answers))
    result.figure("gRPC UpdateOffset for an unknown topic", grpc)
    result.figure("consumerOffset.json on master / slave", f"{master_size / 1e6:.2f} / {slave_size / 1e6:.2f} MB")
    result.figure("master CPU idle before / after", f"{idle * 100:.0f}% / {busy * 100:.0f}% of a core")
    result.passed = accepted == 0
    return result


def _settled_size(path, timeout_s: float, at_least: int = 0) -> int:
    """The file's size once it reached `at_least` and stopped growing for a second (the broker
    persists offsets every 5 s, a slave copies them every 3 s), or when `timeout_s` passed."""
    deadline = time.monotonic() + timeout_s
    last, stable_since = -1, time.monotonic()
    while time.monotonic() < deadline:
        size = path.stat().st_size if path.exists() else 0
        if size != last:
            last, stable_since = size, time.monotonic()
        elif size >= at_least and size > 0 and time.monotonic() - stable_since >= 1.0:
            return size
        time.sleep(0.2)  # polling a file another process writes
    return max(last, 0)


BAD_NAMES = ("a/b", "\t", "A" * 300, "..", "%", "é", "a b")
BAD_NAME_CODES = (
    RequestCode.GET_MAX_OFFSET,
    RequestCode.GET_MIN_OFFSET,
    RequestCode.QUERY_CONSUMER_OFFSET,
    RequestCode.UPDATE_CONSUMER_OFFSET,
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
    RequestCode.PULL_MESSAGE,
    RequestCode.GET_ROUTEINFO_BY_TOPIC,
)


def remoting_bad_names(env: AttackEnv) -> Result:
    result = Result(
        "remoting-bad-names",
        "11",
        "bad topic names and queue ids over remoting get a clear answer and no traceback in the log",
    )
    with env.group(result, remoting=True, slaves=0, master_role="ASYNC_MASTER") as cluster:
        master = cluster.master
        before = scan_broker_stderr(master.directory)
        conn = RemotingSocket(master.remoting_endpoint)
        answers: dict[str, int] = {}
        opaque = 0
        for _ in range(env.count(3)):
            for code in BAD_NAME_CODES:
                for name, queue in [*((n, "0") for n in BAD_NAMES), ("BadNameTopic", "-1"), ("BadNameTopic", "99999")]:
                    opaque += 1
                    fields = {
                        "topic": name,
                        "queueId": queue,
                        "consumerGroup": "g",
                        "commitOffset": "0",
                        "queueOffset": "0",
                        "timestamp": "0",
                        "maxMsgNums": "1",
                        "sysFlag": "0",
                    }
                    if conn.closed:
                        conn = RemotingSocket(master.remoting_endpoint)
                    answer = conn.exchange(RemotingCommand(code, opaque, 0, fields), 5).answer or "no answer"
                    answers[answer] = answers.get(answer, 0) + 1
        conn.close()
        time.sleep(0.5)  # the log lines of the last requests reach the file
        after = scan_broker_stderr(master.directory)
    new_tracebacks = after.tracebacks - before.tracebacks
    result.figure("requests", f"{opaque} ({len(BAD_NAME_CODES)} codes x bad names and queue ids)")
    result.figure("answers", json.dumps(answers))
    result.figure("tracebacks logged", new_tracebacks)
    result.figure("log bytes", after.bytes - before.bytes)
    result.passed = new_tracebacks == 0 and "no answer" not in answers
    return result


def sysflag_visibility(env: AttackEnv) -> Result:
    result = Result(
        "sysflag-visibility",
        "11",
        "a remoting send with a prepared or rollback sysFlag bit is refused or stored visible "
        "(flags derived as gRPC does)",
    )
    verdicts = []
    with env.group(result, remoting=True, slaves=0, master_role="ASYNC_MASTER") as cluster:
        master = cluster.master
        with AdminClient(master.client_endpoint, cluster.admin_secret()) as admin:
            admin.create_topic("FlagTopic", 1)
        conn = RemotingSocket(master.remoting_endpoint)
        for opaque, (flag, name) in enumerate(((4, "prepared"), (12, "rollback")), start=1):
            body = f"flagged {name}".encode()
            props = properties_to_string({"UNIQ_KEY": uuid.uuid4().hex.upper()})
            sent = conn.exchange(
                RemotingCommand(
                    RequestCode.SEND_MESSAGE_V2,
                    opaque * 10,
                    0,
                    v2_fields(send_header("FlagTopic", 0, props, sys_flag=flag)),
                    body,
                )
            )
            marker_props = properties_to_string({"UNIQ_KEY": uuid.uuid4().hex.upper()})
            marker = conn.exchange(
                RemotingCommand(
                    RequestCode.SEND_MESSAGE_V2,
                    opaque * 10 + 1,
                    0,
                    v2_fields(send_header("FlagTopic", 0, marker_props)),
                    b"marker",
                )
            )
            if sent.answer != "SUCCESS":
                verdicts.append(True)
                result.figure(f"sysFlag {flag} ({name})", f"refused: {sent.answer} {sent.remark[:80]}")
                continue
            start = int(sent.response.ext_fields.get("queueOffset", "0")) if sent.response else 0
            bodies = _pull_bodies(master.remoting_endpoint, "FlagTopic", start, until=b"marker")
            visible = body in bodies
            verdicts.append(visible)
            result.figure(
                f"sysFlag {flag} ({name})",
                f"answered SUCCESS at queue offset {start}; {'visible' if visible else 'invisible'} to a pull "
                f"(the marker sent after it: {marker.answer}, read {len(bodies)} message(s))",
            )
        conn.close()
    result.passed = all(verdicts)
    return result


def _pull_bodies(endpoint: str, topic: str, offset: int, until: bytes, timeout_s: float = 5.0) -> list[bytes]:
    """Bodies from `offset` on in queue 0 until one equals `until` (or `timeout_s` passed)."""
    deadline = time.monotonic() + timeout_s
    bodies: list[bytes] = []
    conn = RemotingSocket(endpoint)
    try:
        while until not in bodies and time.monotonic() < deadline:
            fields = {
                "consumerGroup": "flag-check",
                "topic": topic,
                "queueId": "0",
                "queueOffset": str(offset),
                "maxMsgNums": "8",
                "sysFlag": "2",
                "suspendTimeoutMillis": "500",
                "subscription": "*",
                "expressionType": "TAG",
            }
            answer = conn.exchange(
                RemotingCommand(RequestCode.PULL_MESSAGE, int(time.monotonic() * 1000) % (1 << 30), 0, fields), 5
            )
            if answer.response is None:
                break
            if answer.response.body:
                records = decode_stored_records(answer.response.body)
                bodies += [r.body for r in records]
            offset = int(answer.response.ext_fields.get("nextBeginOffset", str(offset)))
    finally:
        conn.close()
    return bodies
