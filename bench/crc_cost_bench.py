"""What checking records' body CRCs costs where the broker checks them: reads and replication.

What it measures
    For each body size (--body-sizes, default 128 B, 1 KiB, 16 KiB) a store is written with
    --messages messages (one topic, four queues, a TAGS and a KEYS property each) in a temporary
    directory on the repository's filesystem, and then, over its whole CommitLog, with a warm page
    cache:

    1. The record check, per record: `store.codec.check_record` without and with the body CRC
       (`verify_crc`), and `MessageStore.read_message` (the decode every read of one message does,
       body CRC included): the CRC's share of a read.
    2. The master's replication cut, per byte: chunks of --batch bytes (haTransferBatchSize) cut
       with `ha.chunks.next_chunk` from `MessageStore.commit_log_data`, as the master does, with
       what the master adds per chunk: its CRC-32C (`ha.chunks.crc32c`, google-crc32c), then its MAC
       (HMAC-SHA256, as in shared-secret mode), then the records' checks
       (`ha.chunks.intact_prefix`): of every record (what a slave catching up over segments older
       than the start-up scan costs) and of those below `crc_checked_from_offset` (what the live
       tail costs: this store was written in this run, so none). gRPC and the socket are left
       out: the figures are the master's own per-byte work, the denominator of the checks' cost.
    3. The CRC functions over the bodies: zlib's crc32 (the body CRC), crcmod's CRC-32 (the same
       polynomial; its C extension) and crcmod's CRC-32C (the replication chunk's checksum until
       google-crc32c replaced it).

    Every figure is the best of --trials runs of a loop over the whole log (the variants take
    turns within each trial), each loop bounded by the log's records and by --seconds. MB = 10^6
    bytes. The load average is printed before and after: other work on the machine skews every
    figure; compare ratios measured in one run.

How to run (from the repository root)
    .venv/bin/python -m bench.crc_cost_bench                     # a minute or two
    .venv/bin/python -m bench.crc_cost_bench --quick             # 1 KiB bodies only, a few seconds
    .venv/bin/python -m bench.crc_cost_bench --body-sizes 1KiB,64KiB --messages 5000
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import os
import shutil
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import crcmod.predefined

from bench.common import (
    MB,
    KiB,
    MiB,
    default_parent_dir,
    environment,
    load_average,
    parse_size,
    print_environment,
    progress,
    size_label,
)
from ha.chunks import crc32c, crcmod_crc32c, intact_prefix, next_chunk
from store import Message, MessageStore, PutMessageStatus, StoreConfig
from store.log.codec import RecordKind, check_record

TITLE = "RocketStore body CRC cost benchmark (bench/crc_cost_bench.py)"
SEGMENT = 64 * MiB
DEFAULT_BATCH = 32 * KiB  # HaConfig.ha_transfer_batch_size's default
EVERYTHING = 1 << 62  # a check_below no record reaches
MAC_KEY = os.urandom(32)


@dataclass(frozen=True)
class Timing:
    seconds: float
    records: int
    bytes: int

    @property
    def us_per_record(self) -> float:
        return self.seconds / self.records * 1e6 if self.records else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.bytes / self.seconds / MB if self.seconds else 0.0


def best_of(trials: int, runs: dict[str, Callable[[], Timing]]) -> dict[str, Timing]:
    """Each variant's fastest run; the variants take turns within every trial, so that a burst
    of other work on the machine falls on all of them alike."""
    kept: dict[str, Timing] = {}
    for _ in range(trials):
        for name, run in runs.items():
            timing = run()
            held = kept.get(name)
            if held is None or timing.seconds / max(timing.records, 1) < held.seconds / max(held.records, 1):
                kept[name] = timing
    return kept


def build(root: Path, body_size: int, messages: int, seconds: float) -> MessageStore:
    config = StoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=SEGMENT, message_index_enable=False)
    store = MessageStore(config)
    store.load()
    store.start()
    body = os.urandom(body_size)
    deadline = time.monotonic() + seconds
    for i in range(messages):
        result = store.put_message(Message("CrcTopic", i % 4, body, properties={"TAGS": "TagA", "KEYS": f"k{i}"}))
        if result.status is not PutMessageStatus.PUT_OK:
            raise RuntimeError(f"put {i}: {result.status.name} {result.reason}")
        if time.monotonic() > deadline:
            progress(f"  {size_label(body_size)}: the build hit its {seconds:g} s bound at {i + 1} messages")
            break
    return store


def record_offsets(store: MessageStore) -> list[int]:
    return [m.physical_offset for m in store.iter_messages()]


def check_loop(store: MessageStore, offsets: list[int], verify_crc: bool, seconds: float) -> Timing:
    """check_record over every record, segment by segment (a view of the mapping, as reads use)."""
    deadline = time.perf_counter() + seconds
    start = time.perf_counter()
    done = size = 0
    for offset in offsets:
        segment = store.queue.find(offset)
        assert segment is not None
        view = memoryview(segment.buf)
        try:
            pos = offset - segment.file_from_offset
            record = check_record(view, pos, segment.read_position, offset, verify_crc=verify_crc)
        finally:
            view.release()
        assert record.kind == RecordKind.MESSAGE
        done += 1
        size += record.size
        if done % 256 == 0 and time.perf_counter() > deadline:
            break
    return Timing(time.perf_counter() - start, done, size)


def read_loop(store: MessageStore, offsets: list[int], seconds: float) -> Timing:
    deadline = time.perf_counter() + seconds
    start = time.perf_counter()
    done = size = 0
    for offset in offsets:
        size += store.read_message(offset).store_size
        done += 1
        if done % 256 == 0 and time.perf_counter() > deadline:
            break
    return Timing(time.perf_counter() - start, done, size)


def cut_loop(
    store: MessageStore, batch: int, seconds: float, *, checksum: bool, mac: bool, check_below: int | None
) -> Timing:
    """Chunks from the log's start to its end, as the master cuts them for a slave."""
    read = store.commit_log_data
    end = store.max_offset
    offset = store.min_offset
    deadline = time.perf_counter() + seconds
    start = time.perf_counter()
    chunks = 0
    while offset < end:
        data = next_chunk(read, offset, end, batch)
        if not data:
            raise RuntimeError(f"no chunk at {offset} before the end {end}")
        if check_below is not None:
            intact, damage = intact_prefix(data, offset, check_below)
            if damage is not None:
                raise RuntimeError(f"the benchmark's own log is damaged at {damage.offset}: {damage.reason}")
        if checksum:
            crc32c(data)
        if mac:
            hmac.new(MAC_KEY, data, hashlib.sha256).digest()
        offset += len(data)
        chunks += 1
        if chunks % 64 == 0 and time.perf_counter() > deadline:
            break
    return Timing(time.perf_counter() - start, chunks, offset - store.min_offset)


def crc_rate(fn: Callable[[bytes], int], data: bytes, seconds: float) -> float:
    rounds = max(1, (64 * MiB) // max(len(data), 1))
    deadline = time.perf_counter() + seconds
    start = time.perf_counter()
    done = 0
    for _ in range(rounds):
        fn(data)
        done += 1
        if done % 64 == 0 and time.perf_counter() > deadline:
            break
    return done * len(data) / (time.perf_counter() - start) / MB


def measure(body_size: int, args: argparse.Namespace, parent: Path) -> dict[str, float]:
    root = Path(tempfile.mkdtemp(prefix="crc-cost-", dir=parent))
    try:
        store = build(root / "store", body_size, args.messages, args.seconds)
        try:
            offsets = record_offsets(store)
            checked_from = store.crc_checked_from_offset
            batch, seconds = args.batch, args.seconds
            t = best_of(
                args.trials,
                {
                    "check": lambda: check_loop(store, offsets, False, seconds),
                    "check_crc": lambda: check_loop(store, offsets, True, seconds),
                    "read": lambda: read_loop(store, offsets, seconds),
                    "cut": lambda: cut_loop(store, batch, seconds, checksum=False, mac=False, check_below=None),
                    "crc32c": lambda: cut_loop(store, batch, seconds, checksum=True, mac=False, check_below=None),
                    "mac": lambda: cut_loop(store, batch, seconds, checksum=True, mac=True, check_below=None),
                    "all": lambda: cut_loop(store, batch, seconds, checksum=True, mac=True, check_below=EVERYTHING),
                    "tail": lambda: cut_loop(store, batch, seconds, checksum=True, mac=True, check_below=checked_from),
                },
            )
            plain, crc, reads = t["check"], t["check_crc"], t["read"]
            cut_only, with_crc32c, with_mac, all_checked, tail = t["cut"], t["crc32c"], t["mac"], t["all"], t["tail"]
        finally:
            store.shutdown()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    body = os.urandom(body_size)
    crc32 = crcmod.predefined.mkCrcFun("crc-32")
    return {
        "records": len(offsets),
        "record_bytes": plain.bytes / plain.records,
        "check_us": plain.us_per_record,
        "check_crc_us": crc.us_per_record,
        "read_us": reads.us_per_record,
        "crc_share_of_read": (crc.us_per_record - plain.us_per_record) / reads.us_per_record,
        "crc_checked_from": checked_from,
        "cut_mb_s": cut_only.mb_per_s,
        "cut_crc32c_mb_s": with_crc32c.mb_per_s,
        "cut_crc32c_mac_mb_s": with_mac.mb_per_s,
        "cut_all_checked_mb_s": all_checked.mb_per_s,
        "cut_tail_mb_s": tail.mb_per_s,
        "checks_cost": with_mac.mb_per_s / all_checked.mb_per_s - 1 if all_checked.mb_per_s else 0.0,
        "tail_cost": with_mac.mb_per_s / tail.mb_per_s - 1 if tail.mb_per_s else 0.0,
        "zlib_crc32_mb_s": crc_rate(zlib.crc32, body, args.seconds),
        "crcmod_crc32_mb_s": crc_rate(crc32, body, args.seconds),
        "crcmod_crc32c_mb_s": crc_rate(crcmod_crc32c, body, args.seconds),
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.crc_cost_bench", description="What body CRC checks cost on reads and replication."
    )
    parser.add_argument("--quick", action="store_true", help="1 KiB bodies, 5,000 messages, 5 trials")
    parser.add_argument("--body-sizes", help="comma-separated body sizes (default 128B,1KiB,16KiB)")
    parser.add_argument("--messages", type=int, help="messages per store (default 20000; 5000 with --quick)")
    parser.add_argument(
        "--batch", type=parse_size, default=DEFAULT_BATCH, help="replication chunk size (default 32KiB)"
    )
    parser.add_argument("--trials", type=int, help="runs of each loop, the best kept (default 7; 5 with --quick)")
    parser.add_argument("--seconds", type=float, default=20.0, help="time bound of every loop (default 20)")
    args = parser.parse_args(argv)
    sizes = args.body_sizes or ("1KiB" if args.quick else "128B,1KiB,16KiB")
    args.sizes = [parse_size(s) for s in sizes.split(",") if s.strip()]
    args.messages = args.messages or (5000 if args.quick else 20000)
    args.trials = args.trials or (5 if args.quick else 7)
    if args.messages <= 0 or args.trials <= 0 or args.seconds <= 0 or args.batch <= 0:
        parser.error("--messages, --trials, --seconds and --batch must be positive")
    if not args.sizes or any(not 1 <= s <= 4 * MiB for s in args.sizes):
        parser.error("--body-sizes: each between 1 B and 4 MiB")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    parent = default_parent_dir()
    env = environment(parent)
    print_environment(TITLE, env, ("started", "git", "python", "machine", "filesystem"), 10)
    print(
        f"  workload   {args.messages:,} messages per body size ({', '.join(size_label(s) for s in args.sizes)}),"
        f" one topic x 4 queues, TAGS + KEYS; chunks of {size_label(args.batch)}; best of {args.trials} trial(s),"
        f" each loop bounded by {args.seconds:g} s"
    )
    print(f"  load avg   {load_average()} (1, 5, 15 min) at start")
    print()
    results = {}
    for size in args.sizes:
        progress(f"body {size_label(size)} ...")
        results[size] = measure(size, args, parent)
    print("1. Record checks (per record) and reads of one message (read_message, body CRC included)")
    print("   body     record B   check us   +CRC us   read us   CRC share of a read")
    for size, r in results.items():
        print(
            f"   {size_label(size):<8} {r['record_bytes']:8,.0f}   {r['check_us']:8.2f}   {r['check_crc_us']:7.2f}"
            f"   {r['read_us']:7.2f}   {r['crc_share_of_read']:6.1%}"
        )
    print()
    print("2. The master's replication cut over the whole log, MB/s (no gRPC, no socket)")
    print("   body     cut    +CRC-32C   +MAC    +checks: every record   below crc_checked_from (live tail)")
    for size, r in results.items():
        print(
            f"   {size_label(size):<8} {r['cut_mb_s']:6,.0f}   {r['cut_crc32c_mb_s']:6,.0f}"
            f"   {r['cut_crc32c_mac_mb_s']:6,.0f}   {r['cut_all_checked_mb_s']:6,.0f} ({r['checks_cost']:+.0%} time)"
            f"          {r['cut_tail_mb_s']:6,.0f} ({r['tail_cost']:+.0%} time; checked from {r['crc_checked_from']:,})"
        )
    print()
    print("3. CRC functions over one body, MB/s")
    print("   body     zlib crc32   crcmod CRC-32   crcmod CRC-32C")
    for size, r in results.items():
        print(
            f"   {size_label(size):<8} {r['zlib_crc32_mb_s']:10,.0f}   {r['crcmod_crc32_mb_s']:13,.0f}"
            f"   {r['crcmod_crc32c_mb_s']:14,.0f}"
        )
    print()
    print(f"load avg {load_average()} (1, 5, 15 min) at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
