"""`rocketstore demo`: the README's main job, a SYNC_MASTER and a slave on 127.0.0.1.

In a temporary directory (or `--dir`), it:

1. starts a SYNC_MASTER with SYNC_FLUSH and one SYNC_FLUSH slave as broker processes (ports
   chosen by the OS, a generated replication/admin secret);
2. produces `--messages` messages of `--size` bytes from `--concurrency` concurrent producers over
   the client API; every PUT_OK means the message is fsynced on the master and the slave;
3. waits until the slave has acknowledged everything, then consumes every queue from the master
   and from the slave and checks each message's body, CRC and position (same queue offset, same
   CommitLog offset, same msgId on both);
4. prints throughput, latency, the count per send status, the replication lag, and `lost 0` when
   every acknowledged message was read back from both brokers;
5. stops both brokers with SIGTERM (clean shutdown).

Exit status 0 when nothing acknowledged is missing on either broker, 1 otherwise.
Single-threaded apart from the brokers (child processes) and the asyncio tasks of the producers.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from client import AsyncProducer, PullConsumer, SendStatus

from .local_brokers import LocalCluster, poll_until
from .store_demo import body_for, seq_of

TOPIC = "DemoTopic"
GROUP = "DemoConsumerGroup"
MAX_BODY = 4 * 1024 * 1024 - 1024


@dataclass
class DemoSummary:
    messages: int
    size: int
    concurrency: int
    statuses: dict[str, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    elapsed_s: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)
    acknowledged: int = 0
    consumed_master: int = 0
    consumed_slave: int = 0
    mismatches: list[str] = field(default_factory=list)
    lost: int = 0
    master_max_offset: int = 0
    slave_ack_offset: int = 0
    catch_up_s: float = 0.0
    directory: str = ""

    @property
    def ok(self) -> bool:
        return self.lost == 0 and not self.mismatches and not self.errors

    def percentile(self, p: float) -> float:
        if not self.latencies_ms:
            return 0.0
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]

    def to_dict(self) -> dict:
        return {
            "messages": self.messages,
            "size": self.size,
            "concurrency": self.concurrency,
            "statuses": self.statuses,
            "errors": self.errors,
            "elapsed_s": round(self.elapsed_s, 3),
            "msgs_per_s": round(self.messages / self.elapsed_s, 1) if self.elapsed_s else 0.0,
            "latency_ms": {"p50": round(self.percentile(50), 3), "p99": round(self.percentile(99), 3)},
            "acknowledged": self.acknowledged,
            "consumed": {"master": self.consumed_master, "slave": self.consumed_slave},
            "replication": {
                "master_max_offset": self.master_max_offset,
                "slave_ack_offset": self.slave_ack_offset,
                "lag_bytes": self.master_max_offset - self.slave_ack_offset,
                "catch_up_s": round(self.catch_up_s, 3),
            },
            "mismatches": self.mismatches[:20],
            "lost": self.lost,
            "ok": self.ok,
        }


async def _produce(endpoint: str, summary: DemoSummary) -> dict[int, tuple]:
    """Send every message; returns seq -> (queue_id, queue_offset, commit_log_offset, msg_id) of
    the ones answered SEND_OK."""
    acked: dict[int, tuple] = {}
    next_seq = iter(range(summary.messages))

    async with AsyncProducer(endpoint) as producer:

        async def worker() -> None:
            for seq in next_seq:
                started = time.perf_counter()
                try:
                    result = await producer.send(TOPIC, body_for(seq, summary.size), keys=(f"seq-{seq}",))
                except Exception as exc:  # every failure is counted and reported, none hidden
                    name = type(exc).__name__
                    summary.errors[name] = summary.errors.get(name, 0) + 1
                    continue
                summary.latencies_ms.append((time.perf_counter() - started) * 1000)
                summary.statuses[result.status.name] = summary.statuses.get(result.status.name, 0) + 1
                if result.status is SendStatus.SEND_OK:
                    acked[seq] = (result.queue_id, result.queue_offset, result.commit_log_offset, result.msg_id)

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(summary.concurrency)))
        summary.elapsed_s = time.perf_counter() - started
    return acked


def _consume(endpoint: str, queues: list[int]) -> dict[int, tuple]:
    """Every message of the demo topic on one broker: seq -> (queue_id, queue_offset,
    commit_log_offset, msg_id, body ok)."""
    found: dict[int, tuple] = {}
    with PullConsumer(endpoint, group=GROUP) as consumer:
        for queue_id in queues:
            offset = 0
            for _ in range(1_000_000):  # bounded: one pull per batch of the queue
                page = consumer.pull(TOPIC, queue_id, offset, max_messages=32)
                for m in page.messages:
                    seq = seq_of(m.body)
                    found[seq if seq is not None else -1 - len(found)] = (
                        m.queue_id,
                        m.queue_offset,
                        m.commit_log_offset,
                        m.msg_id,
                        m.body_crc_ok,
                    )
                if not page.messages or page.next_offset <= offset:
                    break
                offset = page.next_offset
    return found


def run_demo(directory: str | None, messages: int, size: int, concurrency: int) -> DemoSummary:
    base = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="rocketstore-demo-"))
    summary = DemoSummary(messages, size, concurrency, directory=str(base))
    cluster = LocalCluster(base, master_role="SYNC_MASTER", flush_disk_type="SYNC_FLUSH", slaves=1)
    try:
        cluster.start()
        master, slave = cluster.master, cluster.slave_brokers[0]
        acked = asyncio.run(_produce(master.client_endpoint, summary))
        summary.acknowledged = len(acked)
        started = time.monotonic()
        poll_until(cluster.caught_up, 60, max_delay_s=0.1)
        summary.catch_up_s = time.monotonic() - started
        summary.master_max_offset, acks = cluster.replication_progress()
        summary.slave_ack_offset = min(acks, default=0)
        with PullConsumer(master.client_endpoint, group=GROUP) as consumer:
            queues = consumer.queues(TOPIC)
        on_master = _consume(master.client_endpoint, queues)
        on_slave = _consume(slave.client_endpoint, queues)
        summary.consumed_master, summary.consumed_slave = len(on_master), len(on_slave)
        for seq, (queue_id, queue_offset, commit_log_offset, _msg_id) in acked.items():
            for where, found in (("master", on_master), ("slave", on_slave)):
                got = found.get(seq)
                if got is None:
                    summary.lost += 1
                    summary.mismatches.append(f"seq {seq} missing on the {where}")
                elif got[:3] != (queue_id, queue_offset, commit_log_offset) or not got[4]:
                    summary.mismatches.append(
                        f"seq {seq} on the {where}: {got} != acknowledged {(queue_id, queue_offset, commit_log_offset)}"
                    )
        for seq, got in on_master.items():
            if on_slave.get(seq) is not None and on_slave[seq][:4] != got[:4]:
                summary.mismatches.append(f"seq {seq}: master {got[:4]} != slave {on_slave[seq][:4]}")
    finally:
        cluster.stop()
        if directory is None and summary.ok:
            shutil.rmtree(base, ignore_errors=True)
    return summary


def format_summary(s: DemoSummary) -> str:
    d = s.to_dict()
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(s.statuses.items())) or "none"
    errors = ", ".join(f"{k} {v}" for k, v in sorted(s.errors.items()))
    lines = [
        "RocketStore demo: SYNC_MASTER + SYNC_FLUSH master and one SYNC_FLUSH slave on 127.0.0.1",
        f"  produced     {s.messages} messages of {s.size} B from {s.concurrency} producers in {d['elapsed_s']} s "
        f"({d['msgs_per_s']} msgs/s, {d['msgs_per_s'] * s.size / 1e6:.1f} MB/s)",
        f"  latency      p50 {d['latency_ms']['p50']} ms, p99 {d['latency_ms']['p99']} ms (send to PUT_OK: fsynced on "
        "both)",
        f"  statuses     {statuses}" + (f"; errors: {errors}" if errors else ""),
        f"  replication  master max offset {s.master_max_offset}, slave acked {s.slave_ack_offset} "
        f"(lag {s.master_max_offset - s.slave_ack_offset} B, caught up {d['replication']['catch_up_s']} s after the "
        "last send)",
        f"  consumed     {s.consumed_master} from the master, {s.consumed_slave} from the slave; "
        f"{s.acknowledged} acknowledged",
    ]
    for line in s.mismatches[:10]:
        lines.append(f"  MISMATCH     {line}")
    lines.append(f"  lost {s.lost}" + ("" if s.ok else f"   (files kept in {s.directory})"))
    return "\n".join(lines)
