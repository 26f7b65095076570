"""Dispatch CPU per message, in process: what the dispatcher (ConsumeQueue, index, recent ids,
listeners) costs the thread that runs it, without a broker, a network or another thread's GIL.

What it measures
    A `MessageStore` (ASYNC_FLUSH, index and recent ids on) whose dispatcher thread is stopped;
    --messages messages of --body bytes, each with a UNIQ_KEY, KEYS and TAGS as a producer sends
    them, put in batches of --batch to --queues queues in turn. Then the main thread dispatches
    the whole log by hand in rounds of --round records (`Dispatcher.dispatch_available`), and the
    round's `time.thread_time` divided by the messages is the figure: CPU microseconds per
    message of the dispatching thread (and wall time beside it). --repeats runs the whole thing
    on new stores; the median and the range are printed.

How to run (from the repository root)
    .venv/bin/python -m bench.dispatch_cpu_bench
    .venv/bin/python -m bench.dispatch_cpu_bench --messages 64000 --round 32 --repeats 3
    .venv/bin/python -m bench.dispatch_cpu_bench --profile     # cProfile of one dispatch, top 25

The store goes under a temporary directory on the repository's filesystem (never tmpfs) and is
deleted at the end.
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import os
import pstats
import shutil
import statistics
import tempfile
import time
import uuid

from bench.common import default_parent_dir, load_average, progress
from store import Message, MessageStore, StoreConfig

TOPIC = "DispatchBench"


def _batches(messages: int, batch: int, queues: int, body: bytes) -> list[list[Message]]:
    puts = []
    for first in range(0, messages, batch):
        queue_id = (first // batch) % queues
        puts.append(
            [
                Message(
                    TOPIC,
                    queue_id,
                    body,
                    properties={
                        "TAGS": f"tag{i % 4}",
                        "KEYS": f"order-{i} customer-{i % 97}",
                        "UNIQ_KEY": uuid.uuid4().hex.upper(),
                    },
                )
                for i in range(first, min(first + batch, messages))
            ]
        )
    return puts


def one_run(args: argparse.Namespace, parent: str) -> tuple[float, float]:
    """CPU and wall microseconds per message of one dispatch of the whole log."""
    root = tempfile.mkdtemp(prefix="dispatch-bench-", dir=parent)
    try:
        config = StoreConfig(
            store_path_root_dir=root,
            mapped_file_size_commit_log=256 * 1024 * 1024,
            message_index_enable=not args.no_index,
        )
        if args.no_recent_ids:
            config = dataclasses.replace(config, recent_message_ids_max=0)
        with MessageStore(config) as store:
            reput = store._reput
            assert reput is not None
            reput.stop()  # dispatch by hand, on this thread
            start = store.dispatcher.reput_from_offset
            for put in _batches(args.messages, args.batch, args.queues, b"x" * args.body):
                result = store.put_messages(put) if len(put) > 1 else store.put_message(put[0])
                if not result.status.is_stored:
                    raise SystemExit(f"put failed: {result.status}")
            assert store.dispatcher.reput_from_offset == start
            profiler = cProfile.Profile() if args.profile else None
            cpu0, wall0 = time.thread_time(), time.perf_counter()
            if profiler is not None:
                profiler.enable()
            dispatched = 0
            while True:
                n = store.dispatcher.dispatch_available(args.round)
                if not n:
                    break
                dispatched += n
            if profiler is not None:
                profiler.disable()
            cpu, wall = time.thread_time() - cpu0, time.perf_counter() - wall0
            if dispatched != args.messages:
                raise SystemExit(f"dispatched {dispatched} of {args.messages} messages")
            if profiler is not None:
                pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
            return cpu * 1e6 / dispatched, wall * 1e6 / dispatched
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=64_000)
    parser.add_argument("--body", type=int, default=1024, help="body bytes (default 1024)")
    parser.add_argument("--batch", type=int, default=32, help="messages per put (default 32)")
    parser.add_argument("--queues", type=int, default=4, help="queues the batches go to in turn (default 4)")
    parser.add_argument("--round", type=int, default=32, help="records per dispatch round (default 32)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-index", action="store_true", help="without the IndexFile (messageIndexEnable=false)")
    parser.add_argument("--no-recent-ids", action="store_true", help="without the recent ids (recentMessageIdsMax=0)")
    parser.add_argument("--profile", action="store_true", help="cProfile one dispatch (slower; figures inflated)")
    args = parser.parse_args()
    if args.profile:
        args.repeats = 1
    parent = str(default_parent_dir())
    print(
        f"dispatch_cpu_bench: {args.messages} messages of {args.body} B (UNIQ_KEY, 2 KEYS, TAGS), "
        f"puts of {args.batch} over {args.queues} queues, rounds of {args.round}, {args.repeats} repeats, "
        f"index {'off' if args.no_index else 'on'}, recent ids {'off' if args.no_recent_ids else 'on'}; "
        f"pid {os.getpid()}; load {load_average()}"
    )
    cpus, walls = [], []
    for i in range(args.repeats):
        cpu, wall = one_run(args, parent)
        cpus.append(cpu)
        walls.append(wall)
        progress(f"run {i + 1}: {cpu:.1f} us CPU/msg, {wall:.1f} us wall/msg")
    print(
        f"dispatch CPU us/msg: median {statistics.median(cpus):.1f} (range {min(cpus):.1f}-{max(cpus):.1f}); "
        f"wall us/msg: median {statistics.median(walls):.1f}; load {load_average()}"
    )


if __name__ == "__main__":
    main()
