"""Failover benchmark (`python -m bench.failover_bench`): kill -9 the master of a controller-mode
group under SYNC_MASTER load, over and over, and time each failover.

Setup: an etcd and three broker processes on 127.0.0.1 (controller mode, SYNC_MASTER +
SYNC_FLUSH, default lease TTL), `--producers` threads sending `--size`-byte messages through the
failover-following client. Each round: wait until the group has a master with two in-sync
replicas and `--per-round` new acknowledgements, kill -9 the master, measure the time from the
kill to the first PUT_OK any producer receives afterwards (the old master is dead by then, so
that answer came from the new master), restart the killed broker (it rejoins as a slave).

Figures: failover time p50 / p99 / max over the kills; throughput (acknowledged msgs/s) in the
5 s before each kill, from the kill to the first PUT_OK plus 1 s, and in the 5 s after; and the
final check after stopping everything: acknowledged messages missing from the last master's log
at their acknowledged offsets (the goal is zero), and whether the replicas are byte-identical up
to the confirmed offset. `--kills 100` is the soak run (outside CI).
"""

from __future__ import annotations

import argparse
import bisect
import json
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from bench.common import default_parent_dir, environment, percentile, progress
from client import Producer, RocketStoreError, SendStatus
from harness import verify
from harness.local_cluster import LOCAL_DEFAULTS, ControllerCluster
from harness.local_etcd import EtcdServer

TOPIC = "FailoverBench"
WINDOW_S = 5.0
SETTINGS = {"mappedFileSizeCommitLog": str(16 * 1024 * 1024), "slaveTimeout": "3000"}


@dataclass
class Recorder:
    """Every acknowledgement's time and offset, from all producer threads."""

    ack_times: list[float] = field(default_factory=list)
    ack_endpoints: list[str] = field(default_factory=list)
    acked: dict[str, int] = field(default_factory=dict)
    outcomes: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def ok(self, msg_id: str, offset: int, endpoint: str) -> None:
        now = time.monotonic()
        with self.lock:
            self.acked[msg_id] = offset
            self.ack_times.append(now)
            self.ack_endpoints.append(endpoint)
            self.outcomes["SEND_OK"] = self.outcomes.get("SEND_OK", 0) + 1

    def other(self, kind: str) -> None:
        with self.lock:
            self.outcomes[kind] = self.outcomes.get(kind, 0) + 1

    def count(self) -> int:
        with self.lock:
            return len(self.ack_times)

    def first_after(self, t: float, not_from: str) -> float | None:
        """The first acknowledgement after `t` that a broker other than `not_from` gave (an
        answer the killed master sent just before dying may still be read after the kill)."""
        with self.lock:
            for i in range(bisect.bisect_right(self.ack_times, t), len(self.ack_times)):
                if self.ack_endpoints[i] != not_from:
                    return self.ack_times[i]
        return None

    def rate(self, start: float, end: float) -> float:
        with self.lock:
            n = bisect.bisect_left(self.ack_times, end) - bisect.bisect_left(self.ack_times, start)
        return n / (end - start) if end > start else 0.0


def produce(endpoints: str, recorder: Recorder, stop: threading.Event, size: int, index: int, deadline: float) -> None:
    body = bytes([97 + index % 26]) * size
    with Producer(endpoints, timeout_s=3.0, retry_timeout_s=30.0) as producer:
        while not stop.is_set() and time.monotonic() < deadline:
            try:
                result = producer.send(TOPIC, body)
            except RocketStoreError as exc:
                recorder.other(type(exc).__name__)
                continue
            if result.status is SendStatus.SEND_OK:
                recorder.ok(result.msg_id, result.commit_log_offset, producer.endpoint)
            else:
                recorder.other(result.status.name)


def poll(condition, timeout_s: float):
    """The first truthy value of `condition()` within `timeout_s`, else None."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    return None


def wait_for(condition, timeout_s: float, what: str):
    value = poll(condition, timeout_s)
    if value is None:
        raise RuntimeError(f"timed out after {timeout_s} s waiting for {what}")
    return value


@contextmanager
def stopping(stop: threading.Event) -> Iterator[threading.Event]:
    """Set `stop` on the way out, so load threads end however the block ends."""
    try:
        yield stop
    finally:
        stop.set()


@contextmanager
def controller_group(run_dir: Path, extra: dict[str, str] | None = None) -> Iterator[ControllerCluster]:
    """An etcd and three started brokers of one group in controller mode (SYNC_MASTER +
    SYNC_FLUSH, `SETTINGS` and `extra`), all stopped on exit; the brokers' files stay under
    `run_dir`."""
    etcd = EtcdServer(run_dir / "etcd")
    etcd.start()
    cluster = ControllerCluster(run_dir / "group", etcd.endpoint, size=3, settings={**SETTINGS, **(extra or {})})
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        etcd.stop()


def run_bench(args: argparse.Namespace, run_dir: Path) -> dict:
    recorder = Recorder()
    stop = threading.Event()
    rounds: list[dict] = []
    with controller_group(run_dir, dict(kv.split("=", 1) for kv in args.set)) as cluster, stopping(stop):
        master = cluster.wait_master(60, in_sync=3)
        deadline = time.monotonic() + args.max_seconds
        threads = [
            threading.Thread(
                target=produce, args=(cluster.client_endpoints(), recorder, stop, args.size, i, deadline), daemon=True
            )
            for i in range(args.producers)
        ]
        for thread in threads:
            thread.start()
        for round_ in range(args.kills):
            if time.monotonic() > deadline:
                progress(f"stopping after {round_} kills: --max-seconds reached")
                break
            floor = recorder.count() + args.per_round
            wait_for(lambda: recorder.count() >= floor, 60, f"{args.per_round} acknowledgements")
            master = cluster.wait_master(60, in_sync=2)
            killed_at = time.monotonic()
            master.kill()
            first = wait_for(
                lambda: recorder.first_after(killed_at, master.client_endpoint), 60, "the first PUT_OK after the kill"
            )
            new = cluster.wait_master(60, not_=master, in_sync=2)
            failover_s = first - killed_at
            rounds.append(
                {
                    "round": round_ + 1,
                    "failover_s": failover_s,
                    "before_msgs_s": recorder.rate(killed_at - WINDOW_S, killed_at),
                    "during_msgs_s": recorder.rate(killed_at, first + 1.0),
                    "new_master": cluster.brokers.index(new),
                }
            )
            progress(
                f"kill {round_ + 1}/{args.kills}: broker {cluster.brokers.index(master)} -> "
                f"{cluster.brokers.index(new)} in {failover_s * 1000:.0f} ms"
            )
            cluster.restart(master)
            time.sleep(WINDOW_S)  # the after-window is measured, not waited on for a condition
            rounds[-1]["after_msgs_s"] = recorder.rate(first + 1.0, first + 1.0 + WINDOW_S)
        stop.set()
        for thread in threads:
            thread.join(60)
        master = cluster.wait_master(60, in_sync=2)
        status = cluster.status(master)
        if status is None:
            raise RuntimeError(f"the master {master.name} did not answer its status")
        confirmed = int(status["confirmed_offset"])
        master_index = cluster.brokers.index(master)
    stores = [verify.open_store(b.store_dir, {**LOCAL_DEFAULTS, **SETTINGS}) for b in cluster.brokers]
    try:
        missing = verify.missing_acknowledged(recorder.acked, verify.messages_by_offset(stores[master_index]))
        in_sync = [s for s in stores if s.max_offset >= confirmed]
        difference = verify.first_difference(in_sync, confirmed)
    finally:
        for store in stores:
            store.shutdown()
    times = sorted(r["failover_s"] for r in rounds)
    return {
        "kills": len(rounds),
        "failover_p50_ms": percentile(times, 50) * 1000,
        "failover_p99_ms": percentile(times, 99) * 1000,
        "failover_max_ms": (times[-1] if times else 0) * 1000,
        "before_msgs_s": sum(r["before_msgs_s"] for r in rounds) / max(1, len(rounds)),
        "during_msgs_s": sum(r["during_msgs_s"] for r in rounds) / max(1, len(rounds)),
        "after_msgs_s": sum(r.get("after_msgs_s", 0) for r in rounds) / max(1, len(rounds)),
        "acknowledged": len(recorder.acked),
        "acknowledged_missing": len(missing),
        "missing_sample": missing[:10],
        "replicas_identical_to_confirmed": difference is None,
        "replicas_compared": len(in_sync),
        "outcomes": recorder.outcomes,
        "rounds": rounds,
    }


def parse_args(argv) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.failover_bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--kills", type=int, default=20, help="failovers to time (default 20; 100 for the soak run)")
    p.add_argument("--producers", type=int, default=4, help="producer threads (default 4)")
    p.add_argument("--per-round", type=int, default=200, help="acknowledgements between kills (default 200)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker.conf setting for every broker (e.g. haStreamOnEventLoop=true); repeatable",
    )
    add_run_options(p, max_seconds=3600)
    return p.parse_args(argv)


def add_run_options(p: argparse.ArgumentParser, max_seconds: float) -> None:
    """The options every failover benchmark takes: our producers' body size, the bound on the
    killing, where the run's files go, and JSON output."""
    p.add_argument("--size", type=int, default=1024, help="body bytes of our producers' messages (default 1024)")
    p.add_argument(
        "--max-seconds", type=float, default=max_seconds, help=f"stop killing after this long (default {max_seconds:g})"
    )
    p.add_argument("--dir", type=Path, default=None, help="where the run's files go (default: a temp dir)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON too")


def run_in_temp_dir(args: argparse.Namespace, prefix: str, config: dict, run) -> dict:
    """Print `config` and the environment, then `run(args, run_dir)` in a temporary directory
    (under `--dir`, else `default_parent_dir()`), removed afterwards."""
    with tempfile.TemporaryDirectory(prefix=prefix, dir=args.dir or default_parent_dir()) as tmp:
        run_dir = Path(tmp)
        print("config:", json.dumps(config))
        print("environment:", json.dumps(environment(run_dir)))
        return run(args, run_dir)


def main(argv=None) -> int:
    args = parse_args(argv)
    config = {
        "kills": args.kills,
        "producers": args.producers,
        "size": args.size,
        "per_round": args.per_round,
        "brokers": 3,
        "mode": "controller, SYNC_MASTER + SYNC_FLUSH",
        "lease_ttl_s": 2,
    }
    result = run_in_temp_dir(args, "rocketstore-failover-", config, run_bench)
    print(
        f"failover (kill -9 -> first PUT_OK at the new master) over {result['kills']} kills: "
        f"p50 {result['failover_p50_ms']:.0f} ms, p99 {result['failover_p99_ms']:.0f} ms, max "
        f"{result['failover_max_ms']:.0f} ms"
    )
    print(
        f"throughput (acknowledged msgs/s): before {result['before_msgs_s']:.0f}, during "
        f"{result['during_msgs_s']:.0f}, "
        f"after {result['after_msgs_s']:.0f}"
    )
    print(
        f"acknowledged {result['acknowledged']}, missing from the final master's log: "
        f"{result['acknowledged_missing']}; "
        f"{result['replicas_compared']} replicas byte-identical up to the confirmed offset: "
        f"{result['replicas_identical_to_confirmed']}"
    )
    print("outcomes:", json.dumps(result["outcomes"], sort_keys=True))
    if args.json:
        print(json.dumps(result, indent=2))
    return 0 if result["acknowledged_missing"] == 0 and result["replicas_identical_to_confirmed"] else 1


if __name__ == "__main__":
    sys.exit(main())
