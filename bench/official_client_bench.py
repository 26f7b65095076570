"""The official RocketMQ 5 Python client against RocketStore, beside the project's own client, in one
run (`python -m bench.official_client_bench`).

A master and one slave (`harness.local_cluster`, SYNC_MASTER + SYNC_FLUSH by default) on 127.0.0.1.
Phases, each bounded by `--messages` and `--seconds`:

- produce, official: one `rocketmq.Producer`, `send` one message at a time (what its API offers);
- produce, ours: one `client.Producer`, `send` one at a time (the same shape of load);
- consume, official SimpleConsumer: `receive(32, 30 s)` then `ack` per message, until all are in;
- consume, official PushConsumer: a listener that returns SUCCESS, until all are in;
- consume, ours: `client.PullConsumer.pull` (32 per call) over the topic's queues.

`--via` says which broker the official client talks to: `master` (proxyModeEnable=false, so routes
name the master's one address, as before proxy mode) or `slave` (proxy mode on and the slave's
port chosen to sort first: the route names both, the client's channel takes the slave, and every
official call goes one hop further, relayed to the master). Our own client talks to the master.

`--floor` runs the produce phases only, against the master and against the gRPC API's floor
(`bench/front_end_floor.py`'s `grpc-api`: RocketMQ 5's gRPC API in front of a server that keeps
nothing and replicates to a slave process over gRPC) and against `grpc-api-work` (the same doing a
broker's per-message work, `bench/work_floor.py`) in turn, with `--clients` producers at once (a
thread and a Producer each, in one process per phase, for both clients alike) for `--rounds`
rounds, and prints each round's rate over the floor's and the median with the range: issue 33's
bar for the official Producer (`--floor --clients 1,8 --rounds 3 --seconds 5 --messages 1000000`).

The official client runs in its own virtualenv (`.venv-rocketmq`, made by `make test`) in a child
process that prints its figures as JSON. Latency of a send is send-to-acknowledgement; a consume
phase reports its throughput (msgs/s, MB/s) over the time to take in every message, and, for the
SimpleConsumer, the p50/p99 of a receive call and of an ack. The machine is shared: compare the
ratios within one run; the machine's load average is printed beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from statistics import median

from bench.common import REPO_ROOT, default_parent_dir, environment, percentile, progress, size_label
from client import Producer, PullConsumer
from harness.local_cluster import LocalCluster, start_slave_first

OFFICIAL_PYTHON = REPO_ROOT / ".venv-rocketmq" / "bin" / "python"

OFFICIAL = r"""
import json, sys, threading, time
from rocketmq import (ClientConfiguration, ConsumeResult, Credentials, FilterExpression, Message,
                      MessageListener, Producer, PushConsumer, SimpleConsumer)

endpoint, phase, topic, count, size, seconds, clients = sys.argv[1], sys.argv[2], sys.argv[3], *map(int, sys.argv[4:8])
config = ClientConfiguration(endpoint, Credentials(), request_timeout=10)
out = {"phase": phase, "messages": 0, "seconds": 0.0, "latencies_ms": {}}
if phase == "produce":
    # `clients` producers, a thread each, one message per send; each sends a few untimed messages
    # first (its route and first calls), then all start together.
    producers = [Producer(config, (topic,)) for _ in range(clients)]
    body = b"x" * size
    lats = [[] for _ in producers]
    start_line = threading.Barrier(clients + 1)

    def send_all(producer, lat, quota):
        def one():
            m = Message()
            m.topic, m.body = topic, body
            producer.send(m)
        for _ in range(20):
            one()
        start_line.wait()
        while len(lat) < quota and time.monotonic() < deadline:
            t = time.monotonic()
            one()
            lat.append((time.monotonic() - t) * 1000)

    try:
        for producer in producers:
            producer.startup()
        deadline = time.monotonic() + seconds + 60
        quota = count // clients
        threads = [threading.Thread(target=send_all, args=(p, lat, quota)) for p, lat in zip(producers, lats)]
        for thread in threads:
            thread.start()
        start_line.wait()
        start, cpu = time.monotonic(), time.process_time()
        deadline = start + seconds
        for thread in threads:
            thread.join()
        out["seconds"] = time.monotonic() - start
        out["client_cpu_s"] = time.process_time() - cpu
    finally:
        for producer in producers:
            producer.shutdown()
    out["messages"] = sum(map(len, lats))
    out["latencies_ms"]["send"] = [x for lat in lats for x in lat]
    print(json.dumps(out))
    sys.exit(0)
deadline = time.monotonic() + seconds
if phase == "simple":
    consumer = SimpleConsumer(config, "bench-simple", {topic: FilterExpression("*")}, await_duration=5)
    consumer.startup()
    receive, ack, got = [], [], 0
    try:
        start = time.monotonic()
        while got < count and time.monotonic() < deadline:
            t = time.monotonic()
            messages = consumer.receive(32, 30)
            receive.append((time.monotonic() - t) * 1000)
            for m in messages:
                t = time.monotonic()
                consumer.ack(m)
                ack.append((time.monotonic() - t) * 1000)
            got += len(messages)
        out["seconds"] = time.monotonic() - start
    finally:
        consumer.shutdown()
    out["messages"] = got
    out["latencies_ms"] = {"receive": receive, "ack": ack}
else:
    done = threading.Event()
    seen = set()
    lock = threading.Lock()

    class Listener(MessageListener):
        def consume(self, message):
            with lock:
                seen.add(message.message_id)
                if len(seen) >= count:
                    done.set()
            return ConsumeResult.SUCCESS

    start = time.monotonic()
    consumer = PushConsumer(config, "bench-push", Listener(), {topic: FilterExpression("*")})
    consumer.startup()
    try:
        done.wait(max(0.0, deadline - time.monotonic()))
        out["seconds"] = time.monotonic() - start
    finally:
        consumer.shutdown()
    out["messages"] = len(seen)
print(json.dumps(out))
"""


def official(endpoint: str, phase: str, topic: str, args, home: Path, clients: int = 1) -> dict:
    done = subprocess.run(
        [
            str(OFFICIAL_PYTHON),
            "-c",
            OFFICIAL,
            endpoint,
            phase,
            topic,
            str(args.messages),
            str(args.size),
            str(args.seconds),
            str(clients),
        ],
        capture_output=True,
        text=True,
        timeout=args.seconds + 180,
        env=dict(os.environ, HOME=str(home)),
    )
    if done.returncode != 0:
        raise RuntimeError(f"the official client's {phase} phase failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def ours_produce(endpoint: str, topic: str, args, clients: int = 1) -> dict:
    """`clients` `client.Producer`s, a thread each, as the official phase drives its own."""
    body = b"x" * args.size
    lats: list[list[float]] = [[] for _ in range(clients)]
    failures: list[BaseException] = []
    start_line = threading.Barrier(clients + 1)
    deadline = time.monotonic() + args.seconds + 60

    def send_all(producer: Producer, lat: list[float], quota: int) -> None:
        try:
            try:
                for _ in range(20):
                    producer.send(topic, body)
            finally:
                start_line.wait()
            while len(lat) < quota and time.monotonic() < deadline:
                t = time.monotonic()
                if not producer.send(topic, body).ok:
                    raise RuntimeError("a send was not acknowledged")
                lat.append((time.monotonic() - t) * 1000)
        except BaseException as exc:  # reported by the caller, not lost in the thread
            failures.append(exc)

    producers = [Producer(endpoint) for _ in range(clients)]
    try:
        threads = [
            threading.Thread(target=send_all, args=(p, lat, args.messages // clients))
            for p, lat in zip(producers, lats)
        ]
        for thread in threads:
            thread.start()
        start_line.wait()
        start, cpu = time.monotonic(), time.process_time()
        deadline = start + args.seconds
        for thread in threads:
            thread.join()
        seconds = time.monotonic() - start
        cpu_s = time.process_time() - cpu
    finally:
        for producer in producers:
            producer.close()
    if failures:
        raise failures[0]
    sends = [x for lat in lats for x in lat]
    return {
        "phase": "produce",
        "messages": len(sends),
        "seconds": seconds,
        "client_cpu_s": cpu_s,
        "latencies_ms": {"send": sends},
    }


def ours_pull(endpoint: str, topic: str, args) -> dict:
    got = 0
    lat: list[float] = []
    deadline = time.monotonic() + args.seconds
    with PullConsumer(endpoint, group="bench-pull") as consumer:
        start = time.monotonic()
        offsets = {q: 0 for q in consumer.queues(topic)}
        while got < args.messages and time.monotonic() < deadline:
            for q, offset in offsets.items():
                t = time.monotonic()
                result = consumer.pull(topic, q, offset, max_messages=32)
                lat.append((time.monotonic() - t) * 1000)
                got += len(result.messages)
                offsets[q] = result.next_offset
        seconds = time.monotonic() - start
    return {"phase": "pull", "messages": got, "seconds": seconds, "latencies_ms": {"pull": lat}}


def _rate(r: dict) -> float:
    return r["messages"] / r["seconds"] if r["seconds"] > 0 else 0.0


def row(label: str, r: dict, size: int) -> str:
    rate = _rate(r)
    cells = [f"{label:<34}", f"{r['messages']:>6} msgs", f"{rate:>9.0f} msgs/s", f"{rate * size / 1e6:>7.2f} MB/s"]
    for name, values in r["latencies_ms"].items():
        ordered = sorted(values)
        cells.append(f"{name} p50 {percentile(ordered, 50):.2f} ms p99 {percentile(ordered, 99):.2f} ms")
    return "  ".join(cells)


def parse_args(argv) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=2000, help="messages per phase (default 2000)")
    parser.add_argument("--size", type=int, default=1024, help="body bytes (default 1024)")
    parser.add_argument("--seconds", type=int, default=60, help="bound of each phase (default 60)")
    parser.add_argument("--role", default="SYNC_MASTER", choices=("SYNC_MASTER", "ASYNC_MASTER"))
    parser.add_argument("--flush", default="SYNC_FLUSH", choices=("SYNC_FLUSH", "ASYNC_FLUSH"))
    parser.add_argument(
        "--via",
        default="master",
        choices=("master", "slave"),
        help="the broker the official client talks to: master (no proxy mode) or slave (relayed; default master)",
    )
    parser.add_argument("--dir", type=Path, help="where the brokers' files go")
    parser.add_argument(
        "--floor",
        action="store_true",
        help="produce only, against the master and against the gRPC API's floor (bench/front_end_floor.py"
        " grpc-api) in turn, and print each round's ratio to the floor",
    )
    parser.add_argument("--clients", default="1,8", help="with --floor: comma list of producer counts (default 1,8)")
    parser.add_argument("--rounds", type=int, default=3, help="with --floor: rounds per client count (default 3)")
    return parser.parse_args(argv)


# The floors `--floor` produces to: the gRPC API's, and the same doing a broker's per-message work.
FLOOR_MODES = ("grpc-api", "grpc-api-work")
FLOOR_NAMES = {"grpc-api": "floor", "grpc-api-work": "floor with its work"}


def against_floor(args, run_dir: Path, home: Path) -> None:
    """Produce with the official Producer and with `client.Producer` (`clients` of each, a thread
    apiece) against the master, then against the gRPC API's floor and its work floor, round after
    round; each round's rate over each floor's rate in the same round, the median over the rounds
    with the range."""
    from bench.front_end_floor import SLAVE_MODES
    from bench.vs_redis import FloorProcess

    progress("starting a master + slave, the grpc-api floor and the grpc-api-work floor")
    cluster = LocalCluster(
        run_dir / "group", master_role=args.role, flush_disk_type=args.flush, settings={"proxyModeEnable": "false"}
    ).start()
    floors: list[FloorProcess] = []
    try:
        targets = {"RocketStore": cluster.master.client_endpoint}
        for mode in FLOOR_MODES:
            floors.append(FloorProcess(run_dir / f"{mode}-slave", SLAVE_MODES[mode]).start())
            floors.append(FloorProcess(run_dir / mode, mode, floors[-1]).start())
            targets[f"floor: {mode}"] = floors[-1].endpoint
        producers = {
            "official Producer": lambda endpoint, clients: official(
                endpoint, "produce", "BenchOfficial", args, home, clients
            ),
            "client.Producer": lambda endpoint, clients: ours_produce(endpoint, "BenchOurs", args, clients),
        }
        for clients in (int(c) for c in args.clients.split(",")):
            print(f"\n{clients} client(s), {size_label(args.size)} bodies, one message per send:")
            ratios: dict[tuple[str, str], list[float]] = {}
            for round_ in range(1, args.rounds + 1):
                for name, produce in producers.items():
                    rates = {}
                    for target, endpoint in targets.items():
                        r = produce(endpoint, clients)
                        rates[target] = _rate(r)
                        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
                        client_cpu = 100 * r["client_cpu_s"] / r["seconds"] if r["seconds"] else 0.0
                        label = f"  round {round_} {name} -> {target}"
                        print(
                            f"{row(f'{label:<50}', r, args.size)}  client CPU {client_cpu:.0f}%  load {load}",
                            flush=True,
                        )
                    for mode in FLOOR_MODES:
                        if rates[f"floor: {mode}"]:
                            ratios.setdefault((name, mode), []).append(rates["RocketStore"] / rates[f"floor: {mode}"])
            for (name, mode), values in ratios.items():
                print(
                    f"  {name:<18} of the {FLOOR_NAMES[mode]} over {len(values)} rounds: {median(values):.2f}x"
                    f" ({min(values):.2f}-{max(values):.2f})"
                )
    finally:
        for process in reversed(floors):
            process.stop()
        cluster.stop()


def main(argv=None) -> int:
    args = parse_args(argv)
    if not OFFICIAL_PYTHON.exists():
        print(f"{OFFICIAL_PYTHON} is missing: `make test` (or `make official-client`) creates it", file=sys.stderr)
        return 2
    run_dir = Path(tempfile.mkdtemp(prefix="official-bench-", dir=args.dir or default_parent_dir()))
    cluster = None
    try:
        print("The official RocketMQ 5 Python client beside RocketStore's own, against a master + slave")
        for key, value in environment(run_dir).items():
            print(f"  {key:<12} {value}")
        print(
            f"  config       {args.role} {args.flush}, {size_label(args.size)} bodies, "
            f"{args.messages} messages per phase, at most {args.seconds} s each, official client via the {args.via}"
        )
        if args.floor:
            against_floor(args, run_dir, run_dir / "home")
            return 0
        progress("starting a master + slave")
        if args.via == "slave":
            group = LocalCluster(run_dir / "group", master_role=args.role, flush_disk_type=args.flush, slaves=0)
            cluster = start_slave_first(group)
        else:
            proxy_off = {"proxyModeEnable": "false"}
            cluster = LocalCluster(
                run_dir / "group", master_role=args.role, flush_disk_type=args.flush, settings=proxy_off
            ).start()
        endpoint = cluster.master.client_endpoint
        official_endpoint = cluster.slave_brokers[0].client_endpoint if args.via == "slave" else endpoint
        home = run_dir / "home"
        rows = []
        progress("produce: official")
        rows.append(("produce  official Producer", official(official_endpoint, "produce", "BenchOfficial", args, home)))
        progress("produce: ours")
        rows.append(("produce  client.Producer", ours_produce(endpoint, "BenchOurs", args)))
        progress("consume: official SimpleConsumer")
        rows.append(
            ("consume  official SimpleConsumer", official(official_endpoint, "simple", "BenchOfficial", args, home))
        )
        progress("consume: official PushConsumer")
        rows.append(
            ("consume  official PushConsumer", official(official_endpoint, "push", "BenchOfficial", args, home))
        )
        progress("consume: ours (pull)")
        rows.append(("consume  client.PullConsumer", ours_pull(endpoint, "BenchOurs", args)))
        print(f"  load avg     {' '.join(f'{x:.2f}' for x in os.getloadavg())} (after the run)")
        for label, r in rows:
            print(row(label, r, args.size))
    finally:
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(run_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
