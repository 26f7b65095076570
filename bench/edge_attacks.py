"""The attacks of issue 30 reproduced from the outside (`python -m bench.edge_attacks`), each
against brokers started for it on 127.0.0.1 (ports chosen by the OS, files in a temporary
directory), so that a run before and after a fix can be compared.

    python -m bench.edge_attacks                        # every scenario, about five minutes
    python -m bench.edge_attacks --only wedge-frame,admin-replay
    python -m bench.edge_attacks --scale 3 --rss-limit-mib 128 --json

Each scenario prints the issue's expectation, PASS or FAIL against it, and the figures the issue
quotes (memory, topics, answers, log bytes ...). Sizes and durations are small but telling (each
scenario takes well under 30 s apart from broker start-up, and the wedge scenario's SIGTERM on
today's main); `--scale` multiplies them. A flood passes when the broker's RSS grows by at most
`--rss-limit-mib`. The exit status is 0 when every scenario ran (PASS or FAIL), 1 when one could
not run (its error is printed).
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from bench.common import default_parent_dir, environment, progress
from bench.edge import attacks_grpc, attacks_remoting, attacks_store
from bench.edge.attack_kit import AttackEnv, Result
from bench.edge.observe import machine_load

SCENARIOS: dict[str, Callable[[AttackEnv], Result]] = {
    "wedge-frame": attacks_remoting.wedge_frame,
    "heartbeat-flood": attacks_remoting.heartbeat_flood,
    "slow-senders": attacks_remoting.slow_senders,
    "pop-topics": attacks_grpc.pop_topics,
    "telemetry-acl": attacks_grpc.telemetry_acl,
    "poisoned-send": attacks_remoting.poisoned_send,
    "unknown-offsets": attacks_remoting.unknown_offsets,
    "admin-replay": attacks_grpc.admin_replay,
    "telemetry-nonreading": attacks_grpc.telemetry_nonreading,
    "metrics-idle": attacks_store.metrics_idle,
    "damaged-segment": attacks_store.damaged_segment,
    "replication-refusal-logs": attacks_store.replication_refusal_logs,
    "remoting-bad-names": attacks_remoting.remoting_bad_names,
    "telemetry-malformed": attacks_grpc.telemetry_malformed,
    "receipt-non-ascii": attacks_grpc.receipt_non_ascii,
    "repair-cut-segment": attacks_store.repair_cut_segment,
    "sysflag-visibility": attacks_remoting.sysflag_visibility,
    "pull-after-send": attacks_grpc.pull_after_send,
}


def _names(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown scenario {', '.join(unknown) or text!r}; known: {', '.join(SCENARIOS)}"
        )
    return names


def run_one(name: str, env: AttackEnv) -> tuple[Result, float]:
    started = time.monotonic()
    try:
        result = SCENARIOS[name](env)
    except Exception as exc:  # noqa: BLE001 - one scenario failing to run must not hide the others
        result = Result(name, "?", "(the scenario could not run)")
        result.notes.append(f"{type(exc).__name__}: {exc}")
        result.notes += traceback.format_exc().strip().splitlines()[-6:]
    return result, time.monotonic() - started


def print_result(result: Result, seconds: float) -> None:
    print(f"[{result.verdict}] {result.name} (item {result.item}, {seconds:.1f} s): expected: {result.expectation}")
    width = max((len(label) for label, _ in result.figures), default=0)
    for label, value in result.figures:
        print(f"    {label:<{width}}  {value}")
    for note in result.notes:
        print(f"    note: {note}")
    print(flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.edge_attacks", description=__doc__.splitlines()[0])
    p.add_argument("--only", type=_names, default=list(SCENARIOS), metavar="NAME[,NAME]", help="scenarios to run")
    p.add_argument("--list", action="store_true", help="list the scenarios and exit")
    p.add_argument("--scale", type=float, default=1.0, help="multiply sizes and durations (default 1)")
    p.add_argument("--rss-limit-mib", type=float, default=64.0, help="RSS growth a flood may cause (default 64)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the report")
    args = p.parse_args(argv)
    if args.list:
        print("\n".join(SCENARIOS))
        return 0
    if args.scale <= 0 or args.rss_limit_mib <= 0:
        p.error("--scale and --rss-limit-mib must be positive")
    run_dir = Path(tempfile.mkdtemp(prefix="rocketstore-edge-attacks-", dir=default_parent_dir()))
    env = AttackEnv(run_dir, scale=args.scale, rss_limit_mib=args.rss_limit_mib)
    header = {
        "environment": environment(run_dir),
        "scenarios": args.only,
        "scale": args.scale,
        "rss_limit_mib": args.rss_limit_mib,
        "load_before": machine_load(),
    }
    if not args.json:
        print(f"edge attacks: {len(args.only)} scenarios, scale {args.scale:g}, RSS limit +{args.rss_limit_mib:g} MiB")
        print(f"environment: {json.dumps(header['environment'])}")
        print(f"load before: {header['load_before']}")
        print(flush=True)
    rows = []
    try:
        for name in args.only:
            progress(f"edge attacks: {name}")
            result, seconds = run_one(name, env)
            rows.append((result, seconds))
            if not args.json:
                print_result(result, seconds)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    verdicts = [r.verdict for r, _ in rows]
    summary = {v: verdicts.count(v) for v in ("PASS", "FAIL", "ERROR")}
    load_after = machine_load()
    if args.json:
        report = dict(header)
        report["results"] = [
            {
                "name": r.name,
                "item": r.item,
                "expectation": r.expectation,
                "verdict": r.verdict,
                "seconds": round(s, 1),
                "figures": dict(r.figures),
                "notes": r.notes,
            }
            for r, s in rows
        ]
        report["summary"] = summary
        report["load_after"] = load_after
        print(json.dumps(report, indent=2))
    else:
        print(f"summary: {summary['PASS']} PASS, {summary['FAIL']} FAIL, {summary['ERROR']} ERROR")
        for result, _ in rows:
            print(f"  {result.verdict:<5} {result.name}")
        print(f"load after: {load_after}")
    return 1 if summary["ERROR"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
