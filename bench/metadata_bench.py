"""Metadata copy benchmark (`python -m bench.metadata_bench`): what one slave round of
`Replication/GetMetadata` costs, without the network.

Setup: a master store and a slave store in a temporary directory (never tmpfs), the master with
`--topics` topics and `--groups` consumer groups each holding an offset for every queue of
`--topics-per-group` topics (4 queues each). Each round does what the master and the slave do:
the master's snapshot and its JSON documents, then the slave's decoding and applying. The first
round (everything changes, files written) is reported apart from the steady rounds (one offset
changed between rounds: the usual case).

Figures: document bytes; rounds/s, p50 and p99 latency of the master's side, the slave's side
and the whole round.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import default_parent_dir, environment, percentile
from ha.metadata_sync import MetadataSnapshot, apply_snapshot, take_snapshot
from store import BrokerRole, MessageStore, StoreConfig
from store.metadata.topic_config import TopicConfig


def open_store(root: Path, role: str) -> MessageStore:
    store = MessageStore(
        StoreConfig(store_path_root_dir=str(root), broker_role=BrokerRole[role], mapped_file_size_commit_log=1 << 20)
    )
    store.load()
    store.start()
    return store


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=200)
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--topics-per-group", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    run_dir = Path(tempfile.mkdtemp(prefix="rocketstore-metadata-", dir=default_parent_dir()))
    env = environment(run_dir)
    master = open_store(run_dir / "master", "SYNC_MASTER")
    slave = open_store(run_dir / "slave", "SLAVE")
    try:
        for t in range(args.topics):
            master.topics.create_or_update(TopicConfig(f"Topic{t:05d}", 4, 4))
        for g in range(args.groups):
            for k in range(args.topics_per_group):
                for q in range(4):
                    master.consumer_offsets.commit_offset(
                        f"group{g:04d}", f"Topic{(g + k) % args.topics:05d}", q, g * 1000 + k
                    )
        sides: dict[str, list[float]] = {"master": [], "slave": [], "round": []}
        sizes: tuple[int, ...] = (0, 0, 0)
        first_ms = 0.0
        for i in range(args.rounds + 1):
            master.consumer_offsets.commit_offset("group0000", "Topic00000", 0, 10_000_000 + i)
            t0 = time.perf_counter()
            documents = take_snapshot(master, slave.flushed_offset).documents()
            t1 = time.perf_counter()
            result = apply_snapshot(slave, MetadataSnapshot.from_documents(*documents))
            t2 = time.perf_counter()
            if i == 0:
                sizes = tuple(len(d) for d in documents)
                first_ms = (t2 - t0) * 1000
                assert result.topics_replaced and result.offsets_changed == args.groups * args.topics_per_group
                continue
            assert result.offsets_changed == 1
            sides["master"].append((t1 - t0) * 1000)
            sides["slave"].append((t2 - t1) * 1000)
            sides["round"].append((t2 - t0) * 1000)
    finally:
        master.shutdown()
        slave.shutdown()
        shutil.rmtree(run_dir, ignore_errors=True)
    figures: dict[str, Any] = {
        "config": {
            "topics": args.topics,
            "groups": args.groups,
            "topics_per_group": args.topics_per_group,
            "offset_entries": args.groups * args.topics_per_group,
            "rounds": args.rounds,
        },
        "environment": env,
        "document_bytes": {"topics": sizes[0], "consumer_offsets": sizes[1], "delay_offsets": sizes[2]},
        "first_round_ms": round(first_ms, 2),
    }
    for name, values in sides.items():
        ordered = sorted(values)
        figures[name] = {"p50_ms": round(percentile(ordered, 50), 3), "p99_ms": round(percentile(ordered, 99), 3)}
    figures["rounds_per_s"] = round(len(sides["round"]) / (sum(sides["round"]) / 1000), 1)
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    print(f"environment: {json.dumps(env)}")
    print(f"config: {json.dumps(figures['config'])}")
    print(f"documents: {json.dumps(figures['document_bytes'])} bytes")
    print(f"first round (everything copied, files written): {figures['first_round_ms']} ms")
    for name in ("master", "slave", "round"):
        print(f"{name:>6}: p50 {figures[name]['p50_ms']} ms, p99 {figures[name]['p99_ms']} ms")
    print(f"steady rounds/s: {figures['rounds_per_s']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
