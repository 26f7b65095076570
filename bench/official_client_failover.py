"""Failover as the official RocketMQ 5 Python client sees it (`python -m bench.official_client_failover`):
kill -9 the master of a controller-mode group while the official Producer sends and the official
SimpleConsumer receives and acks, and time when each works again.

Setup: `bench.failover_bench.controller_group` (an etcd and three brokers on 127.0.0.1, SYNC_MASTER
+ SYNC_FLUSH). The official client (5.1.2, in `.venv-rocketmq`: its generated stubs cannot share a
process with ours) runs as two child processes given every broker's address: a Producer sending one
message at a time (every `--send-interval-ms`) and a SimpleConsumer receiving (`receive(32, 15 s)`)
and acking each message; each prints one JSON line per outcome with its `time.monotonic()`, the
system-wide clock this process reads too. Beside them one thread of our failover-following
producer (`bench.failover_bench.produce`) times the brokers' own failover.

Each round: wait until the group has a master with three in-sync replicas and `--per-round` new
official SEND_OKs (and, before the first kill, until the official producer has run
`--warmup-seconds`, past its start-up route refresh at 10 s), kill -9 the master, wait (each with
a deadline) for the official producer's first SEND_OK, the official consumer's first received
message and our producer's first PUT_OK after the kill, and restart the killed broker (it rejoins
as a slave). At the end the producers stop and the consumer drains: it runs until it has received
every message the official producer was told SEND_OK for, or `--drain-seconds` pass.

Figures per kill and p50 / max: kill to the official producer's first SEND_OK, kill to the official
consumer's first receive, kill to our client's first PUT_OK at the new master (the brokers' own
failover time). Then acked messages lost (SEND_OK but never received; the goal is 0), acked
messages redelivered (received again after their ack succeeded), and the outcome counts with a
sample of the official client's error texts.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from bench.common import percentile, progress
from bench.failover_bench import (
    Recorder,
    add_run_options,
    controller_group,
    poll,
    produce,
    run_in_temp_dir,
    stopping,
    wait_for,
)
from bench.official_client_bench import OFFICIAL_PYTHON
from client import Producer

TOPIC = "OfficialFailover"
GROUP = "official-failover"
# A SEND_OK or a batch received this soon after the kill may be the dead master's last answer
# still in flight.
IN_FLIGHT_S = 0.1

OFFICIAL = r"""
import json, os, sys, time
from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

role, endpoints, topic, group, stop_file = sys.argv[1:6]
seconds, interval_s = float(sys.argv[6]), float(sys.argv[7])
deadline = time.monotonic() + seconds
config = ClientConfiguration(endpoints, Credentials())


def emit(**fields):
    print(json.dumps({"t": time.monotonic(), **fields}), flush=True)


def error(exc):
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:300]


def running():
    return not os.path.exists(stop_file) and time.monotonic() < deadline


if role == "produce":
    client = Producer(config, (topic,))
    client.startup()
    emit(event="ready")
    seq = 0
    try:
        while running():
            message = Message()
            message.topic, message.body = topic, f"ocfail-{seq}".encode()
            start = time.monotonic()
            try:
                emit(event="send", ok=True, start=start, id=client.send(message).message_id, seq=seq)
            except Exception as exc:
                emit(event="send", ok=False, start=start, error=error(exc), seq=seq)
            seq += 1
            time.sleep(interval_s)
    finally:
        client.shutdown()
else:
    client = SimpleConsumer(config, group, {topic: FilterExpression("*")}, await_duration=5)
    client.startup()
    emit(event="ready")
    try:
        while running():
            start = time.monotonic()
            try:
                messages = client.receive(32, 15)
            except Exception as exc:
                emit(event="receive", ok=False, start=start, error=error(exc))
                time.sleep(0.1)  # a failing receive can return at once: do not spin
                continue
            # Every message of a batch arrived when receive returned, not when the acks before it ended.
            received = time.monotonic()
            for message in messages:
                emit(event="receive", ok=True, t=received, start=start, id=message.message_id)
            for message in messages:
                try:
                    client.ack(message)
                    emit(event="ack", ok=True, id=message.message_id)
                except Exception as exc:
                    emit(event="ack", ok=False, id=message.message_id, error=error(exc))
    finally:
        client.shutdown()
emit(event="exit")
"""


@dataclass
class OfficialChild:
    """One official-client child process and the JSON lines it printed, read by a thread."""

    role: str
    proc: subprocess.Popen
    stop_file: Path
    events: list[dict] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    reader: threading.Thread | None = None

    @classmethod
    def start(cls, role: str, endpoints: str, run_dir: Path, seconds: float, interval_s: float) -> OfficialChild:
        stop_file = run_dir / f"stop-{role}"
        args = [role, endpoints, TOPIC, GROUP, str(stop_file), str(seconds), str(interval_s)]
        # The child keeps its own copy of the stderr file; the client writes its log under HOME:
        # both stay in the run's directory.
        with open(run_dir / f"{role}.stderr", "w") as stderr:
            proc = subprocess.Popen(
                [str(OFFICIAL_PYTHON), "-c", OFFICIAL, *args],
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                env=dict(os.environ, HOME=str(run_dir / f"home-{role}")),
            )
        child = cls(role, proc, stop_file)
        child.reader = threading.Thread(target=child._read, daemon=True)
        child.reader.start()
        return child

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                event = json.loads(line)
                with self.lock:
                    self.events.append(event)

    def snapshot(self, kind: str, ok: bool | None = True) -> list[dict]:
        with self.lock:
            return [e for e in self.events if e["event"] == kind and (ok is None or e.get("ok") is ok)]

    def first_after(self, kind: str, t: float) -> float | None:
        return next((e["t"] for e in self.snapshot(kind) if e["t"] > t), None)

    def stop(self, timeout_s: float) -> None:
        """Ask the child to end its loop, wait for it (kill it past `timeout_s`), read the rest of
        its lines and close the pipe."""
        self.stop_file.touch()
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            progress(f"the official {self.role} did not stop within {timeout_s} s: killed")
            self.kill()
        self.close()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)

    def close(self) -> None:
        if self.reader is not None:
            self.reader.join(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def summary(values: list[float | None]) -> str:
    seen = sorted(v for v in values if v is not None)
    missing = len(values) - len(seen)
    text = f"p50 {percentile(seen, 50):.1f} s, max {seen[-1]:.1f} s" if seen else "none"
    return text + (f" ({missing} rounds with none before the deadline)" if missing else "")


def deliveries(consumer: OfficialChild) -> tuple[set[str], int, int]:
    """Message ids received, ids received more than once, and receives of an id whose ack had
    already succeeded (a redelivery after an ack)."""
    with consumer.lock:
        events = sorted(consumer.events, key=lambda e: e["t"])
    received: Counter[str] = Counter()
    acked: set[str] = set()
    after_ack = 0
    for e in events:
        if e["event"] == "receive" and e.get("ok"):
            after_ack += e["id"] in acked
            received[e["id"]] += 1
        elif e["event"] == "ack" and e.get("ok"):
            acked.add(e["id"])
    return set(received), sum(1 for n in received.values() if n > 1), after_ack


def run_bench(args: argparse.Namespace, run_dir: Path) -> dict:
    recorder = Recorder()
    stop = threading.Event()
    rounds: list[dict] = []
    children: list[OfficialChild] = []
    with controller_group(run_dir) as cluster, stopping(stop):
        try:
            cluster.wait_master(60, in_sync=3)
            endpoints = ";".join(b.client_endpoint for b in cluster.brokers)
            with Producer(endpoints) as ours:  # makes the topic, so the consumer's route finds it
                topic_msg_id = ours.send(TOPIC, b"topic").msg_id
            seconds = args.max_seconds + args.drain_seconds
            consumer = OfficialChild.start("consume", endpoints, run_dir, seconds, 0.0)
            children.append(consumer)
            wait_for(lambda: consumer.snapshot("ready", None), 60, "the official consumer to start")
            producer = OfficialChild.start("produce", endpoints, run_dir, seconds, args.send_interval_ms / 1000)
            children.append(producer)
            wait_for(lambda: producer.snapshot("ready", None), 60, "the official producer to start")
            started = producer.snapshot("ready", None)[0]["t"]
            deadline = time.monotonic() + args.max_seconds
            ours_thread = threading.Thread(
                target=produce, args=(endpoints, recorder, stop, args.size, 0, deadline), daemon=True
            )
            ours_thread.start()
            for round_ in range(args.kills):
                if time.monotonic() > deadline:
                    progress(f"stopping after {round_} kills: --max-seconds reached")
                    break
                floor = len(producer.snapshot("send")) + args.per_round
                wait_for(lambda: len(producer.snapshot("send")) >= floor, 120, f"{args.per_round} official SEND_OKs")
                # The client refreshes its routes 10 s after it starts, then every 30 s: kill after
                # that first refresh, so the figures show the steady period, not the start-up one.
                wait_for(
                    lambda: time.monotonic() - started >= args.warmup_seconds, args.warmup_seconds + 1, "the warm-up"
                )
                master = cluster.wait_master(90, in_sync=3)
                killed_at = time.monotonic()
                master.kill()
                ours_first = poll(lambda: recorder.first_after(killed_at, master.client_endpoint), args.wait_seconds)
                send_first = poll(lambda: producer.first_after("send", killed_at + IN_FLIGHT_S), args.wait_seconds)
                receive_first = poll(
                    lambda: consumer.first_after("receive", killed_at + IN_FLIGHT_S), args.wait_seconds
                )
                new = cluster.wait_master(60, not_=master, in_sync=2)
                rounds.append(
                    {
                        "round": round_ + 1,
                        "killed": cluster.brokers.index(master),
                        "new_master": cluster.brokers.index(new),
                        "ours_put_ok_s": None if ours_first is None else ours_first - killed_at,
                        "official_send_ok_s": None if send_first is None else send_first - killed_at,
                        "official_receive_s": None if receive_first is None else receive_first - killed_at,
                        # Against the client's route refreshes (start + 10 s, then every 30 s).
                        "killed_after_start_s": killed_at - started,
                        "official_send_ok_after_start_s": None if send_first is None else send_first - started,
                        "official_send_errors": sum(
                            1
                            for e in producer.snapshot("send", False)
                            if killed_at < e["t"] <= (send_first or killed_at)
                        ),
                    }
                )
                progress(f"kill {round_ + 1}/{args.kills}: {json.dumps(rounds[-1])}")
                cluster.restart(master)
            stop.set()
            ours_thread.join(60)
            producer.stop(60)
            acked_ids = {e["id"] for e in producer.snapshot("send")}
            progress(f"draining: {len(acked_ids)} official SEND_OKs to receive")
            poll(lambda: acked_ids <= deliveries(consumer)[0], args.drain_seconds)
            consumer.stop(60)
        finally:
            for child in children:
                if child.proc.poll() is None:
                    child.kill()
                child.close()
    received, duplicated, after_ack = deliveries(consumer)
    lost = sorted(acked_ids - received)
    errors = Counter(e["error"].split(":")[0] for e in producer.snapshot("send", False))
    samples = list(dict.fromkeys(e["error"] for e in producer.snapshot("send", False)))[:3]
    return {
        "rounds": rounds,
        "official_sent_ok": len(acked_ids),
        "official_send_errors": dict(errors),
        "official_error_samples": samples,
        "official_receive_errors": len(consumer.snapshot("receive", False)),
        "official_ack_errors": len(consumer.snapshot("ack", False)),
        "received": len(received),
        "received_more_than_once": duplicated,
        "received_without_send_ok": len(received - acked_ids - {topic_msg_id}),
        "acked_redelivered": after_ack,
        "acked_lost": len(lost),
        "lost_sample": lost[:10],
        "ours_outcomes": recorder.outcomes,
    }


def parse_args(argv) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.official_client_failover", description=__doc__.split("\n\n")[0])
    p.add_argument("--kills", type=int, default=3, help="master kills (default 3)")
    p.add_argument("--per-round", type=int, default=50, help="official SEND_OKs between kills (default 50)")
    p.add_argument("--send-interval-ms", type=float, default=10, help="official producer pause between sends")
    p.add_argument(
        "--warmup-seconds", type=float, default=15, help="official producer's run time before the first kill (15)"
    )
    p.add_argument("--wait-seconds", type=float, default=90, help="deadline of each wait after a kill (default 90)")
    p.add_argument("--drain-seconds", type=float, default=90, help="deadline of the final drain (default 90)")
    add_run_options(p, max_seconds=900)
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if not OFFICIAL_PYTHON.exists():
        print(f"{OFFICIAL_PYTHON} is missing: `make .venv-rocketmq/.installed` creates it", file=sys.stderr)
        return 2
    config = {
        "kills": args.kills,
        "per_round": args.per_round,
        "send_interval_ms": args.send_interval_ms,
        "warmup_s": args.warmup_seconds,
        "wait_s": args.wait_seconds,
        "drain_s": args.drain_seconds,
        "brokers": 3,
        "mode": "controller, SYNC_MASTER + SYNC_FLUSH",
        "official_client": "rocketmq-python-client 5.1.2, Producer + SimpleConsumer, all 3 addresses",
        "ours": "1 failover-following producer thread",
    }
    result = run_in_temp_dir(args, "rocketstore-ocfail-", config, run_bench)
    for r in result["rounds"]:
        print(
            f"kill {r['round']}: broker {r['killed']} -> {r['new_master']}; our PUT_OK {fmt(r['ours_put_ok_s'])}, "
            f"official SEND_OK {fmt(r['official_send_ok_s'])}, official receive {fmt(r['official_receive_s'])}, "
            f"official send errors until then {r['official_send_errors']}; since the official producer started: kill "
            f"{fmt(r['killed_after_start_s'])}, SEND_OK {fmt(r['official_send_ok_after_start_s'])}"
        )
    rounds = result["rounds"]
    print(f"over {len(rounds)} kills, time from kill -9 of the master to:")
    print(f"  our client's first PUT_OK (brokers' failover)  {summary([r['ours_put_ok_s'] for r in rounds])}")
    print(f"  official Producer's first SEND_OK            {summary([r['official_send_ok_s'] for r in rounds])}")
    print(f"  official SimpleConsumer's first message      {summary([r['official_receive_s'] for r in rounds])}")
    print(
        f"official SEND_OK {result['official_sent_ok']}, received {result['received']}, acked lost "
        f"{result['acked_lost']}, acked redelivered {result['acked_redelivered']}, received more than once "
        f"{result['received_more_than_once']}, received without a SEND_OK {result['received_without_send_ok']}"
    )
    print(
        f"official errors: send {json.dumps(result['official_send_errors'], sort_keys=True)}, receive "
        f"{result['official_receive_errors']}, ack {result['official_ack_errors']}"
    )
    for sample in result["official_error_samples"]:
        print(f"  e.g. {sample}")
    print("our producer's outcomes:", json.dumps(result["ours_outcomes"], sort_keys=True))
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    if args.json:
        print(json.dumps(result, indent=2))
    return 0 if result["acked_lost"] == 0 else 1


def fmt(seconds: float | None) -> str:
    return "none" if seconds is None else f"{seconds:.2f} s"


if __name__ == "__main__":
    sys.exit(main())
