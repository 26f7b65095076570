"""The broker group in containers (`python -m bench.cluster_bench`): produce through container
networking, then failover time over repeated kills of the master's container.

Set-up: `deploy/prepare.sh` (Docker engine, images), then a group of three brokers in controller
mode (SYNC_MASTER + SYNC_FLUSH) and etcd, each container at its own address on a network of the
run's own (`harness.containers`).

1. Produce: 1 KiB messages from 1, 8 and 64 concurrent producers (asyncio, one connection each) to
   the master, over RocketMQ's remoting protocol and over gRPC, `--seconds` per cell after a
   warm-up: msgs/s, MB/s, p50/p99 latency of a send (to its acknowledgement).
2. Failover: one producer sends without pause (client retries on); `--kills` times the master's
   container gets SIGKILL; the failover time is from the kill to the first acknowledgement after
   it (the new master serving). The killed container is started again and waited for until it is
   back in the in-sync set before the next kill. Printed: p50, p99 and max of the failover times.
3. The check: every acknowledged message is in the final master's log at the offset its
   acknowledgement gave, and the replicas are byte-identical up to the confirmed offset.

Everything the run creates is removed at the end (labelled; swept also when interrupted).
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.common import REPO_ROOT, environment, percentile, progress
from bench.vs_redis import Result, row, run_cell
from client import AsyncProducer, Producer, RocketStoreError, SendStatus
from client.remoting import AsyncRemotingProducer
from harness import verify
from harness.containers import GROUP_SETTINGS, ContainerGroup, Node, remove_labelled
from harness.local_cluster import poll_until

TOPIC = "ClusterBench"


class GroupDriver:
    """`bench.vs_redis`'s driver interface over the container group's master."""

    def __init__(self, master: Node, transport: str) -> None:
        self.master = master
        self.transport = transport
        self.name = f"containers SYNC/SYNC {transport}"
        self.pids: list[int] = []  # the servers' CPU is in containers: not sampled here

    async def connect(self):
        if self.transport == "remoting":
            return AsyncRemotingProducer(f"{self.master.ip}:10913", timeout_s=30)
        return AsyncProducer(self.master.client_endpoint, timeout_s=30)

    async def publish(self, producer, bodies: list[bytes]) -> int:
        result = await producer.send(TOPIC, bodies[0])
        if result.status is not SendStatus.SEND_OK:
            raise RuntimeError(f"not acknowledged: {result.status.name}")
        return 1

    async def close(self, producer) -> None:
        await producer.close()

    async def reset(self) -> None:
        return None


class Sender:
    """One producer sending without pause, recording when each acknowledgement came."""

    def __init__(self, endpoints: str, max_seconds: float, send_timeout_s: float) -> None:
        self.endpoints = endpoints
        self.send_timeout_s = send_timeout_s
        # (sent at, acknowledged at, message id, CommitLog offset) of every acknowledged send
        self.acks: list[tuple[float, float, str, int]] = []
        self.failures = 0
        self._stop = threading.Event()
        self._deadline = time.monotonic() + max_seconds
        self._thread = threading.Thread(target=self._run, name="sender", daemon=True)

    def start(self) -> Sender:
        self._thread.start()
        return self

    def _run(self) -> None:
        body = b"f" * 1024
        with Producer(self.endpoints, timeout_s=self.send_timeout_s, retry_timeout_s=30.0) as producer:
            while not self._stop.is_set() and time.monotonic() < self._deadline:
                sent_at = time.monotonic()
                try:
                    result = producer.send(TOPIC, body)
                except RocketStoreError:
                    self.failures += 1
                    continue
                if result.status is SendStatus.SEND_OK:
                    self.acks.append((sent_at, time.monotonic(), result.msg_id, result.commit_log_offset))

    def first_ack_after(self, moment: float, timeout_s: float) -> float | None:
        """When the first send started after `moment` was acknowledged (an answer to a send made
        before it may arrive after it and says nothing about the group serving again)."""

        def found() -> float | None:
            return next((acked for sent, acked, _, _ in reversed(self.acks) if sent > moment), None)

        if poll_until(found, timeout_s) is None:
            return None
        return min(acked for sent, acked, _, _ in self.acks if sent > moment)

    def stop(self) -> dict[str, int]:
        self._stop.set()
        self._thread.join(60)
        return {mid: offset for _, _, mid, offset in self.acks}


def back_in_sync(group: ContainerGroup, node: Node, timeout_s: float) -> bool:
    def ready() -> bool:
        master = group.acting_master()
        status = group.status(master) if master is not None else None
        return status is not None and group.brokers.index(node) in status.get("in_sync_replica_ids", [])

    return bool(poll_until(ready, timeout_s, max_delay_s=0.1))


def failovers(group: ContainerGroup, kills: int, send_timeout_s: float) -> tuple[list[float], dict[str, int], int]:
    sender = Sender(group.client_endpoints(), max_seconds=kills * 60 + 120, send_timeout_s=send_timeout_s).start()
    times: list[float] = []
    try:
        if sender.first_ack_after(time.monotonic() - 1, 60) is None:
            raise RuntimeError(f"no acknowledgement before the first kill:\n{group.tails()}")
        for n in range(kills):
            master = group.wait_master(90, in_sync=3)
            group.kill(master)
            killed_at = time.monotonic()  # the kill call returns once the signal is delivered
            served = sender.first_ack_after(killed_at, 60)
            if served is None:
                raise RuntimeError(f"kill {n + 1}: no acknowledgement within 60 s:\n{group.tails()}")
            times.append(served - killed_at)
            successor = group.acting_master()
            progress(
                f"kill {n + 1}/{kills}: {master.name} killed, served again after {times[-1]:.2f} s"
                f" by {successor.name if successor else '?'}"
            )
            group.start_again(master)
            if not back_in_sync(group, master, 120):
                raise RuntimeError(f"{master.name} did not rejoin the in-sync set:\n{group.tails()}")
    finally:
        acked = sender.stop()
    return times, acked, sender.failures


def check(group: ContainerGroup, acked: dict[str, int]) -> tuple[int, bool]:
    master = group.wait_master(90, in_sync=2)
    status = group.status(master)
    if status is None:
        raise RuntimeError(f"the master {master.name} did not answer its status")
    confirmed = int(status["confirmed_offset"])
    group.stop_brokers()
    stores = []
    for node in group.brokers:
        if node.store_dir is None:
            raise RuntimeError(f"{node.name} has no store directory")
        stores.append(verify.open_store(node.store_dir, GROUP_SETTINGS))
    try:
        missing = verify.missing_acknowledged(acked, verify.messages_by_offset(stores[group.brokers.index(master)]))
        in_sync = [s for s in stores if s.max_offset >= confirmed]
        identical = len(in_sync) >= 2 and verify.first_difference(in_sync, confirmed) is None
    finally:
        for store in stores:
            store.shutdown()
    return len(missing), identical


def parse_args(argv) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.cluster_bench", description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=5.0, help="measured time per produce cell (default 5)")
    p.add_argument("--producers", default="1,8,64", help="comma list of concurrent producers (default 1,8,64)")
    p.add_argument("--kills", type=int, default=20, help="kills of the master's container (default 20)")
    p.add_argument(
        "--send-timeout-s",
        type=float,
        default=3.0,
        help="the failover producer's deadline per attempt (default 3, RocketMQ's send timeout): a send to the "
        "killed master's vanished address waits this long before the client looks for the new master",
    )
    p.add_argument("--dir", type=Path, help="parent directory of the run's stores (default: the system temp dir)")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    progress("deploy/prepare.sh: engine and images")
    prepared = subprocess.run([str(REPO_ROOT / "deploy" / "prepare.sh")], capture_output=True, text=True)
    if prepared.returncode != 0:
        print(prepared.stderr[-3000:], file=sys.stderr)
        return 1
    remove_labelled()
    run_dir = Path(tempfile.mkdtemp(prefix="cluster-bench-", dir=args.dir))
    group = ContainerGroup(run_dir / "group", run=secrets.token_hex(4))
    try:
        print("RocketStore broker group in containers: produce and failover (bench/cluster_bench.py)")
        for key, value in environment(run_dir).items():
            print(f"  {key:<12} {value}")
        print(
            "  group        3 brokers (controller mode, SYNC_MASTER + SYNC_FLUSH) + etcd, one container each,"
            " own addresses on a bridge network"
        )
        print(
            f"  produce      1 KiB, producers {args.producers}, {args.seconds:g} s per cell;"
            f" failover: {args.kills} kills"
        )
        group.start()
        group.create_topic(TOPIC)
        master = group.wait_master(90, in_sync=3)
        print("\nProduce to the master through container networking:")
        for transport in ("remoting", "grpc"):
            for producers in (int(p) for p in args.producers.split(",")):
                result: Result = asyncio.run(
                    run_cell(GroupDriver(master, transport), 1024, producers, 1, args.seconds, 1_000_000)
                )
                print(row(result, None).split("  CPU server")[0] + f"  ({producers} producers)")
        print(
            f"\nFailover: {args.kills} kills of the master's container (SIGKILL), one producer sending"
            f" (deadline per attempt {args.send_timeout_s:g} s):"
        )
        times, acked, failures = failovers(group, args.kills, args.send_timeout_s)
        ordered = sorted(times)
        print(
            f"  failover (kill to the first acknowledgement after it): p50 {percentile(ordered, 50):.2f} s,"
            f" p99 {percentile(ordered, 99):.2f} s, max {ordered[-1]:.2f} s over {len(ordered)} kills"
        )
        lost, identical = check(group, acked)
        print(
            f"  acknowledged {len(acked)}, lost {lost}; replicas byte-identical up to the confirmed offset:"
            f" {'yes' if identical else 'NO'}; sends given up by the client: {failures}"
        )
        return 0 if lost == 0 and identical else 1
    finally:
        group.stop()
        remove_labelled()
        shutil.rmtree(run_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
