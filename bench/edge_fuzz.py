"""A fuzzer of both client protocols against real brokers (`python -m bench.edge_fuzz`, issue 30).

    python -m bench.edge_fuzz --seconds 300 --protocol both --seed 1 [--json]

Brokers (`bench.edge.brokers`): an *open* SYNC_MASTER + SYNC_FLUSH group with one slave serving
remoting and an unsigned client API, and (for gRPC) an *acl* group of the same shape whose client
API checks every call against an ACL file; both authenticate the admin API and replication. All on
127.0.0.1, ports chosen by the OS, files in a temporary directory (never tmpfs), removed at the end
unless `--keep-dir`.

Setup stores a few messages, transactions and pop deliveries so that valid requests name real
things. Then one worker per broker and protocol sends, until `--seconds` or `--max-requests` per
worker: every method of MessagingService, Admin and (on masters) Replication, and every remoting
request code the broker serves plus some it does not, each as a valid, a structure-mutated, a
byte-mutated or a random request (`bench.edge.fuzz_workers`), with every kind of credentials
(signed, none, wrong secret, stale, replayed, another method's, another broker's, another body's,
malformed). Deterministic given `--seed`: each worker draws its requests from its own seeded
generator, never from an answer.

A monitor probes every broker every 2 s (gRPC QueryRoute; remoting GET_MAX_OFFSET on a new
connection); a broker that dies or misses two probes in a row is a finding, with the frames its
remoting worker sent since its last answer, and is restarted (at most three times).

At the end it prints: requests per method and code, answers by status, transport errors, examples
of unexpected answers, findings, per broker RSS and threads at start/peak/end (/proc), store disk
usage at start and end, topics at start and end, tracebacks in the broker logs (count and distinct
first lines), whether every broker still serves a good send and pull (gRPC, and remoting on the open
group), and the machine's load before and after. `--json` prints the same as one JSON object.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import shutil
import tempfile
import time
import uuid
from pathlib import Path

from bench.common import default_parent_dir, environment, progress
from bench.edge.brokers import (
    APP,
    GROUP,
    HEALTH_TOPIC,
    LONG_POLLING_MAX_MS,
    QUEUES,
    TOPIC,
    grpc_health,
    remoting_health,
    start_group,
    stop_quietly,
)
from bench.edge.fuzz_workers import (
    MESSAGING,
    Finding,
    GrpcWorker,
    Monitor,
    RemotingWorker,
    Stats,
    Target,
    Worker,
)
from bench.edge.grpc_calls import RawChannel, acl_metadata
from bench.edge.grpc_inputs import FuzzContext
from bench.edge.observe import (
    Sampler,
    disk_usage,
    machine_load,
    mib,
    scan_broker_stderr,
    tracebacks_text,
)
from client import AdminClient
from harness.local_cluster import LocalCluster
from wire.rpc import messaging_pb2 as pb


def _offset_msg_id(host: str, port: int, offset: int) -> str:
    ip = "".join(f"{int(part):02X}" for part in host.split("."))
    return f"{ip}{port:08X}{offset:016X}"


def prepare(cluster: LocalCluster, acl: bool) -> FuzzContext:
    """Topics, messages, transactions and pop deliveries for valid requests to name."""
    master = cluster.master
    with AdminClient(master.client_endpoint, cluster.admin_secret()) as admin:
        for topic in (TOPIC, HEALTH_TOPIC):
            admin.create_topic(topic, QUEUES)
    host, port = master.client_endpoint.rsplit(":", 1)
    ctx = FuzzContext(host=host, port=int(port), broker_name=cluster.broker_name)
    channel = RawChannel(master.client_endpoint)

    def metadata() -> tuple[tuple[str, str], ...]:
        return tuple(acl_metadata("app", random.Random(0), APP, APP, APP)) if acl else ()

    send = next(m for m in MESSAGING if m.name == "SendMessage")
    receive = next(m for m in MESSAGING if m.name == "ReceiveMessage")

    def message(kind: "pb.MessageType", i: int) -> pb.Message:
        sp = pb.SystemProperties(message_id=uuid.uuid4().hex.upper(), message_type=kind, keys=[f"k{i}"])
        return pb.Message(topic=pb.Resource(name=TOPIC), body=f"setup {i}".encode(), system_properties=sp)

    try:
        for i in range(16):
            request = pb.SendMessageRequest(messages=[message(pb.NORMAL, i)])
            outcome = channel.call(send, [request.SerializeToString()], metadata(), 10)
            for raw in outcome.responses:
                for entry in pb.SendMessageResponse.FromString(raw).entries:
                    ctx.msg_ids.append(entry.message_id)
                    ctx.commit_log_offsets.append(entry.commit_log_offset)
                    ctx.offset_msg_ids.append(_offset_msg_id(host, int(port), entry.commit_log_offset))
                    ctx.max_queue_offset = max(ctx.max_queue_offset, entry.offset)
        for i in range(4):
            request = pb.SendMessageRequest(messages=[message(pb.TRANSACTION, 100 + i)])
            outcome = channel.call(send, [request.SerializeToString()], metadata(), 10)
            for raw in outcome.responses:
                for entry in pb.SendMessageResponse.FromString(raw).entries:
                    ctx.transactions.append((TOPIC, entry.message_id, entry.transaction_id))
        invisible = pb.ReceiveMessageRequest(
            group=pb.Resource(name=GROUP),
            message_queue=pb.MessageQueue(topic=pb.Resource(name=TOPIC), id=-1),
            batch_size=8,
        )
        invisible.invisible_duration.FromSeconds(600)
        invisible.long_polling_timeout.FromSeconds(1)
        outcome = channel.call(receive, [invisible.SerializeToString()], metadata(), 10)
        for raw in outcome.responses:
            response = pb.ReceiveMessageResponse.FromString(raw)
            if response.HasField("message"):
                sp = response.message.system_properties
                ctx.receipts.append((GROUP, TOPIC, sp.message_id, sp.receipt_handle))
    finally:
        channel.close()
    return ctx


def _topic_count(cluster: LocalCluster) -> int | None:
    try:
        with AdminClient(cluster.master.client_endpoint, cluster.admin_secret(), timeout_s=10) as admin:
            return len(admin.list_topics())
    except Exception:  # noqa: BLE001 - a broker that no longer answers shows as "?"
        return None


def _roles(groups: dict[str, LocalCluster]) -> dict[str, str]:
    """Each broker's role as its admin API says (an authenticated call that changed roles would
    make the rest of a run measure another setup)."""
    roles = {}
    for name, cluster in groups.items():
        for broker in cluster.brokers:
            try:
                with AdminClient(broker.client_endpoint, cluster.admin_secret(), timeout_s=10) as admin:
                    roles[f"{name} {broker.name}"] = admin.status()["role"]
            except Exception as exc:  # noqa: BLE001 - a broker that does not answer says so
                roles[f"{name} {broker.name}"] = f"? ({type(exc).__name__})"
    return roles


def _suspects(workers: list[Worker]):
    def suspects(target: Target) -> list[str]:
        lines = []
        for worker in workers:
            if isinstance(worker, RemotingWorker) and worker.target is target:
                for _sent_at, mode, frame_hex in worker.unanswered[-4:]:
                    lines.append(f"remoting frame sent since its last answer ({mode}): {frame_hex[:240]}")
        return lines

    return suspects


def _answers_text(stats: Stats, method: str) -> str:
    answers = " ".join(f"{k}:{v}" for k, v in stats.answers[method].most_common())
    transport = " ".join(f"{k}:{v}" for k, v in stats.transport[method].most_common())
    return answers + (f" | no answer: {transport}" if transport else "")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.edge_fuzz", description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=60, help="how long the workers send (default 60)")
    p.add_argument("--protocol", choices=("grpc", "remoting", "both"), default="both")
    p.add_argument("--seed", type=int, default=1, help="the run's seed (default 1)")
    p.add_argument("--max-requests", type=int, default=10**9, help="at most this many requests per worker")
    p.add_argument("--max-restarts", type=int, default=3, help="restarts of a stuck or dead broker (default 3)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the report")
    p.add_argument("--keep-dir", action="store_true", help="keep the brokers' directory (logs, stores)")
    args = p.parse_args(argv)
    if args.seconds <= 0 or args.max_requests <= 0:
        p.error("--seconds and --max-requests must be positive")
    grpc_on = args.protocol in ("grpc", "both")
    remoting_on = args.protocol in ("remoting", "both")
    run_dir = Path(tempfile.mkdtemp(prefix="rocketstore-edge-fuzz-", dir=default_parent_dir()))
    env = environment(run_dir)
    load_before = machine_load()
    progress(f"edge fuzz: starting brokers in {run_dir}")
    groups: dict[str, LocalCluster] = {}
    targets: list[Target] = []
    errors: list[str] = []
    try:
        groups["open"] = start_group(run_dir / "open", remoting=True)
        if grpc_on:
            groups["acl"] = start_group(run_dir / "acl", acl=True)
        for name, cluster in groups.items():
            ctx = prepare(cluster, acl=name == "acl")
            for broker in cluster.brokers:
                host, port = broker.client_endpoint.rsplit(":", 1)
                targets.append(
                    Target(
                        f"{name} {broker.name}",
                        broker,
                        dataclasses.replace(ctx, host=host, port=int(port)),
                        cluster.admin_secret(),
                        acl=name == "acl",
                        remoting=name == "open",
                        master=broker is cluster.master,
                    )
                )
        brokers = {t.label: t.broker for t in targets}
        sampler = Sampler(
            lambda: {label: b.process.pid if b.running() and b.process else None for label, b in brokers.items()}
        )
        sampler.start()
        disk_start = {label: disk_usage(b.store_dir) for label, b in brokers.items()}
        topics_start = {name: _topic_count(c) for name, c in groups.items()}
        roles_start = _roles(groups)
        started = time.monotonic()
        deadline = started + args.seconds
        workers: list[Worker] = []
        for target in targets:
            short = target.label.replace(" ", "-")
            if grpc_on:
                workers.append(GrpcWorker(f"grpc-{short}", target, args.seed, deadline, args.max_requests))
            if remoting_on and target.remoting:
                workers.append(RemotingWorker(f"remoting-{short}", target, args.seed, deadline, args.max_requests))
        monitor = Monitor(targets, _suspects(workers), started, max_restarts=args.max_restarts)
        progress(f"edge fuzz: {len(workers)} workers for {args.seconds:g} s (seed {args.seed})")
        for worker in workers:
            worker.start()
        monitor.start()
        for worker in workers:
            worker.join(timeout=max(1.0, deadline - time.monotonic()) + 120)
        monitor.stop()
        elapsed = time.monotonic() - started
        sampler.stop()
        stats = Stats()
        for worker in workers:
            stats.merge(worker.stats)
            if worker.error is not None:
                errors.append(f"{worker.name}: {type(worker.error).__name__}: {worker.error}")
            if worker.is_alive():
                errors.append(f"{worker.name} did not finish within 120 s of the deadline")
        progress("edge fuzz: checking that every broker still serves")
        health = []
        for name, cluster in groups.items():
            health += grpc_health(cluster, name, APP if name == "acl" else None)
            if name == "open":
                health += remoting_health(cluster, name)
        topics_end = {name: _topic_count(c) for name, c in groups.items()}
        roles_end = _roles(groups)
        disk_end = {label: disk_usage(b.store_dir) for label, b in brokers.items()}
    except BaseException:
        for cluster in groups.values():
            progress(cluster.tails())
        raise
    finally:
        for target in targets:
            target.close()
        for cluster in groups.values():
            errors += stop_quietly(cluster)
    logs = {f"{name} {b.name}": scan_broker_stderr(b.directory) for name, c in groups.items() for b in c.brokers}
    report = {
        "config": {
            "seconds": args.seconds,
            "protocol": args.protocol,
            "seed": args.seed,
            "max_requests_per_worker": args.max_requests,
            "workers": [w.name for w in workers],
            "groups": {
                name: "SYNC_MASTER+SYNC_FLUSH, 1 slave, "
                + ("remoting on, unsigned client API" if name == "open" else "client API under ACL")
                + f", admin and replication authenticated, longPollingMax={LONG_POLLING_MAX_MS}"
                for name in groups
            },
        },
        "environment": env,
        "load_before": load_before,
        "elapsed_s": round(elapsed, 1),
        "requests": sum(stats.sent.values()),
        "requests_per_worker": {w.name: w.sent for w in workers},
        "modes": dict(stats.modes),
        "per_method": {
            m: {
                "sent": stats.sent[m],
                "answers": dict(stats.answers[m]),
                "no_answer": dict(stats.transport[m]),
            }
            for m in sorted(stats.sent)
        },
        "transport_errors": sum(sum(c.values()) for c in stats.transport.values()),
        "unexpected_answers": {f"{m} {a}": d for (m, a), d in sorted(stats.examples.items())},
        "findings": [dataclasses.asdict(f) for f in monitor.findings],
        "probes": {"sent": monitor.probes, "failed": monitor.failed_probes, "restarts": dict(monitor.restarts)},
        "brokers": {
            label: {
                "rss_bytes": sampler.rss[label].as_dict() if label in sampler.rss else None,
                "threads": sampler.threads[label].as_dict() if label in sampler.threads else None,
                "disk_bytes": {"start": disk_start[label], "end": disk_end[label]},
                "log": {
                    "bytes": logs[label].bytes,
                    "warnings": logs[label].warnings,
                    "errors": logs[label].errors,
                    "tracebacks": logs[label].tracebacks,
                },
            }
            for label in brokers
        },
        "topics": {name: {"start": topics_start[name], "end": topics_end[name]} for name in groups},
        "roles": {label: {"start": roles_start.get(label), "end": roles_end.get(label)} for label in brokers},
        "tracebacks": {label: tracebacks_text(scan) for label, scan in logs.items() if scan.tracebacks},
        "health": [dataclasses.asdict(c) for c in health],
        "errors": errors,
        "load_after": machine_load(),
    }
    if args.keep_dir:
        report["dir"] = str(run_dir)
    else:
        shutil.rmtree(run_dir, ignore_errors=True)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_report(report, stats, monitor.findings, health)
    return 1 if errors else 0


def print_report(report: dict, stats: Stats, findings: list[Finding], health) -> None:
    config = report["config"]
    print(f"edge fuzz: {config['seconds']:g} s, protocol {config['protocol']}, seed {config['seed']}")
    print(f"environment: {json.dumps(report['environment'])}")
    for name, text in config["groups"].items():
        print(f"group {name}: {text}")
    print(f"workers: {', '.join(config['workers'])}")
    print(f"load before: {report['load_before']}")
    print()
    print(f"requests: {report['requests']} in {report['elapsed_s']} s; modes: {json.dumps(report['modes'])}")
    print(f"per worker: {json.dumps(report['requests_per_worker'])}")
    print(f"transport errors (no answer): {report['transport_errors']}")
    width = max((len(m) for m in stats.sent), default=10)
    for method in sorted(stats.sent):
        print(f"  {method:<{width}} {stats.sent[method]:>7}  {_answers_text(stats, method)}")
    print()
    unexpected = report["unexpected_answers"]
    print(f"unexpected answers (an example of each): {len(unexpected)}")
    for key, detail in unexpected.items():
        print(f"  {key}: {detail}")
    print()
    probes = report["probes"]
    print(
        f"liveness probes: {probes['sent']} sent, {probes['failed']} failed; restarts: {probes['restarts'] or 'none'}"
    )
    print(f"findings: {len(findings)}")
    for f in findings:
        print(f"  at {f.at_s:.1f} s, {f.broker}: {f.what}")
        for line in f.detail:
            print(f"      {line}")
    print()
    print("brokers:      RSS start/peak/end                threads start/peak/end   disk start -> end        log")
    for label, b in report["brokers"].items():
        rss = b["rss_bytes"] or {}
        threads = b["threads"] or {}
        disk = b["disk_bytes"]
        log = b["log"]
        print(
            f"  {label:<12} {mib(rss.get('start'))} / {mib(rss.get('peak'))} / {mib(rss.get('end'))}   "
            f"{threads.get('start')}/{threads.get('peak')}/{threads.get('end')}   "
            f"{mib(disk['start'])} -> {mib(disk['end'])}   "
            f"{log['bytes']} bytes, {log['warnings']} warnings, {log['errors']} errors, {log['tracebacks']} tracebacks"
        )
    topics = ", ".join(f"{name} {v['start']} -> {v['end']}" for name, v in report["topics"].items())
    print(f"topics (start -> end): {topics}")
    roles = ", ".join(f"{label} {v['start']} -> {v['end']}" for label, v in report["roles"].items())
    print(f"roles (start -> end): {roles}")
    print()
    total = sum(b["log"]["tracebacks"] for b in report["brokers"].values())
    print(f"tracebacks in the broker logs: {total}")
    for label, lines in report["tracebacks"].items():
        print(f"  {label}:")
        for line in lines:
            print(f"    {line}")
    print()
    print("after the run, a good send and pull:")
    for check in health:
        print(f"  {check.line()}")
    for error in report["errors"]:
        print(f"tool error: {error}")
    print(f"load after: {report['load_after']}")


if __name__ == "__main__":
    raise SystemExit(main())
