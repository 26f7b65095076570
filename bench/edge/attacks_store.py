"""The issue's attacks on the metrics server, the replication port and the store's files (items 9,
10 and parts of 11), reproduced from the outside against brokers started for each scenario. Each
returns a `Result` with the figure the issue quotes, PASS when the broker now does what the issue
expects.

Plain functions of an `AttackEnv`; the replication flood runs on two threads.
"""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from google.protobuf.message import Message

from client import Producer, PullConsumer, PullStatus, RocketStoreError
from client.endpoint import parse_endpoint
from harness.local_cluster import LocalBroker, LocalCluster, poll_until
from wire.rpc import ha_pb2

from .attack_kit import AttackEnv, Result, closed_by_peer
from .grpc_calls import METHODS, RawChannel
from .observe import log_file_bytes, thread_count

SEGMENT_BYTES = 256 * 1024


def metrics_idle(env: AttackEnv) -> Result:
    result = Result(
        "metrics-idle",
        "9",
        "idle connections to the metrics server do not add a thread each (at most +50 threads: bounded, timed out)",
    )
    count, budget_s, hold_s = env.count(1000), env.seconds(20), env.seconds(5)
    with env.group(result, slaves=0, master_role="ASYNC_MASTER", settings={"metricsPort": "0"}) as cluster:
        master = cluster.master
        pid = master.process.pid if master.process else 0
        before = thread_count(pid) or 0
        endpoint = parse_endpoint(master.ready["metrics"])
        socks: list[socket.socket] = []
        failures = [0]
        lock = threading.Lock()
        deadline = time.monotonic() + budget_s

        def opener() -> None:
            while time.monotonic() < deadline:
                with lock:
                    if len(socks) >= count:
                        return
                try:
                    sock = socket.create_connection((endpoint.host, endpoint.port), timeout=3)
                except OSError:
                    failures[0] += 1
                    continue
                with lock:
                    if len(socks) < count:
                        socks.append(sock)
                        continue
                sock.close()
                return

        started = time.monotonic()
        openers = [threading.Thread(target=opener) for _ in range(50)]
        for thread in openers:
            thread.start()
        for thread in openers:
            thread.join(budget_s + 10)
        opening_s = time.monotonic() - started
        with_idle = thread_count(pid) or 0
        scrape = _scrape_seconds(f"http://{master.ready['metrics']}/metrics")
        closed = closed_by_peer(socks, hold_s)
        after_hold = thread_count(pid) or 0
        for sock in socks:
            sock.close()
    result.figure(
        "idle connections the client opened (the server accepts what its threads show)",
        f"{len(socks)} of {count} in {opening_s:.1f} s ({failures[0]} connects timed out)",
    )
    result.figure("broker threads before / with them open / after holding", f"{before} / {with_idle} / {after_hold}")
    result.figure("a GET /metrics meanwhile", scrape)
    result.figure(f"connections the server closed within {hold_s:g} s", closed)
    result.passed = max(with_idle, after_hold) - before <= 50
    return result


def _scrape_seconds(url: str) -> str:
    started = time.monotonic()
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            answer.read()
    except OSError as exc:
        return f"failed after {time.monotonic() - started:.1f} s: {exc}"
    return f"answered in {time.monotonic() - started:.2f} s"


def _segments(broker: LocalBroker) -> list[Path]:
    return sorted((broker.store_dir / "commitlog").iterdir())


def damaged_segment(env: AttackEnv) -> Result:
    result = Result(
        "damaged-segment",
        "10",
        "a flipped body byte in an old segment is not served as FOUND and not copied to a fresh slave",
    )
    messages = env.count(1600)
    original = b"damaged-record-" + b"x" * 1000
    settings = {"mappedFileSizeCommitLog": str(SEGMENT_BYTES)}
    with env.group(result, slaves=0, settings=settings, master_role="ASYNC_MASTER") as cluster:
        master = cluster.master
        with Producer(master.client_endpoint) as producer:
            first = producer.send("CrcTopic", original, queue_id=0)
            for i in range(0, messages - 1, 32):
                producer.send_batch("CrcTopic", [b"filler %d " % (i + j) + b"y" * 1000 for j in range(32)], queue_id=0)
        master.stop()
        segments = _segments(master)
        data = bytearray(segments[0].read_bytes())
        at = data.find(original)
        data[at + 500] ^= 0xFF
        segments[0].write_bytes(data)
        master.restart()
        master_pull = _pull_first(master, first.queue_offset, original)
        slave = cluster.add_slave(1, wait_connected=False)
        caught_up = bool(poll_until(lambda: _caught_up(cluster), 60, max_delay_s=0.2))
        slave_pull = _pull_first(slave, first.queue_offset, original)
        slave_copy = _segments(slave)[0].read_bytes() if _segments(slave) else b""
    damaged = bytes(data[at : at + len(original)])
    result.figure(
        "segments written", f"{len(segments)} of {SEGMENT_BYTES // 1024} KiB; flipped byte {at + 500} of the first"
    )
    result.figure("the master starts", "yes")
    result.figure("pull of the damaged record from the master", master_pull)
    result.figure("a fresh slave caught up", "yes" if caught_up else "no (within 60 s)")
    result.figure("the fresh slave holds the damaged bytes", "yes" if damaged in slave_copy else "no")
    result.figure("pull of the damaged record from the slave", slave_pull)
    served_damaged = "damaged body" in master_pull or "damaged body" in slave_pull
    result.passed = not served_damaged and damaged not in slave_copy
    return result


def _caught_up(cluster: LocalCluster) -> bool:
    try:
        return cluster.caught_up()
    except RocketStoreError:
        return False


def _pull_first(broker: LocalBroker, offset: int, original: bytes) -> str:
    try:
        with PullConsumer(broker.client_endpoint, timeout_s=10) as consumer:
            page = consumer.pull("CrcTopic", 0, offset, max_messages=1)
    except RocketStoreError as exc:
        return f"{type(exc).__name__}: {str(exc)[:120]}"
    if page.status is not PullStatus.FOUND or not page.messages:
        return page.status.name
    body = page.messages[0].body
    if body == original:
        return "FOUND, the original body"
    digest = hashlib.md5(body).hexdigest().upper()
    return f"FOUND with a damaged body (its MD5 {digest[:8]}..., body_crc_ok={page.messages[0].body_crc_ok})"


def repair_cut_segment(env: AttackEnv) -> Result:
    result = Result(
        "repair-cut-segment",
        "11",
        "`rocketstore repair` (dry run) on a last segment cut inside its data reports it, without a traceback",
    )
    settings = {"mappedFileSizeCommitLog": str(SEGMENT_BYTES)}
    with env.group(result, slaves=0, settings=settings, master_role="ASYNC_MASTER") as cluster:
        master = cluster.master
        with Producer(master.client_endpoint) as producer:
            for i in range(0, env.count(400), 32):
                producer.send_batch("RepairTopic", [b"r%d " % (i + j) + b"z" * 1000 for j in range(32)], queue_id=0)
        master.stop()
        last = _segments(master)[-1]
        written = len(last.read_bytes().rstrip(b"\0"))
        cut = max(1, written // 2)
        os.truncate(last, cut)
        command = [sys.executable, "-m", "rocketstore.cli", "repair", "--store-dir", str(master.store_dir)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    traceback = "Traceback (most recent call last)" in done.stderr
    last_line = (done.stderr.strip().splitlines() or done.stdout.strip().splitlines() or [""])[-1]
    result.figure("last segment", f"{last.name}: {written} bytes of data, cut to {cut}")
    result.figure("rocketstore repair --store-dir (dry run) exit status", done.returncode)
    result.figure("traceback", "yes" if traceback else "no")
    result.figure("its last line", last_line[:160])
    result.passed = not traceback
    return result


def replication_refusal_logs(env: AttackEnv) -> Result:
    result = Result(
        "replication-refusal-logs",
        "11",
        "unauthenticated replication calls for 10 s add at most 100 KB to the broker log (rate-limited)",
    )
    seconds = env.seconds(10)
    methods = [METHODS["/rocketstore.ha.v1.Replication/" + name] for name in ("GetEpochs", "GetMetadata")]
    requests: list[Message] = [
        ha_pb2.EpochsRequest(broker_name="broker-a"),
        ha_pb2.MetadataRequest(broker_name="broker-a"),
    ]
    with env.group(result, slaves=0, master_role="ASYNC_MASTER") as cluster:
        master = cluster.master
        before = log_file_bytes(master.directory)
        calls = [0, 0]
        deadline = time.monotonic() + seconds

        def flood(slot: int) -> None:
            channel = RawChannel(master.ha_endpoint)
            try:
                while time.monotonic() < deadline:
                    for method, request in zip(methods, requests):
                        channel.call(method, [request.SerializeToString()], (), 5)
                        calls[slot] += 1
            finally:
                channel.close()

        threads = [threading.Thread(target=flood, args=(slot,)) for slot in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(seconds + 30)
        time.sleep(0.5)  # the last refusals reach the file
        grown = log_file_bytes(master.directory) - before
    result.figure(f"unauthenticated calls in {seconds:g} s", sum(calls))
    result.figure("broker log growth", f"{grown / 1e6:.2f} MB")
    result.passed = grown <= 100_000 * env.scale
    return result
