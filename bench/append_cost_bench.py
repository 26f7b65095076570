"""What an append plus its fdatasync costs through a segment's mapping and through pwrite.

What it measures
    A CommitLog segment made as the store makes one (`MappedFile.create`: blocks reserved, appends'
    range advised MADV_RANDOM) in a temporary directory on the repository's filesystem. For each
    append size (--sizes; 1.2 KB is one 1 KiB message, 37 KB a 32-message batch or a slave's
    chunk of it) --appends appends of that many bytes, each followed by an fdatasync and a read of
    every record's first word through the mapping (what dispatch and the replication stream
    read), written two ways in turn on new segments:

    - `mapping`: the bytes stored through the mapping (the store's way for every append before
      the sixth round of issue 33, and still below `PWRITE_MIN_BYTES`);
    - `pwrite`: `os.pwrite` into the file (`MappedFile.append` from `PWRITE_MIN_BYTES` on).

    Per append: the thread's CPU (`time.thread_time`) split into the write, the fdatasync and the
    reads, the wall time, and the bytes the disk was sent (/proc/self/io `write_bytes`). Each
    variant runs --trials times, alternating; the median is printed with the range. The load
    average is printed before and after: compare ratios measured in one run.

How to run (from the repository root)
    .venv/bin/python -m bench.append_cost_bench
    .venv/bin/python -m bench.append_cost_bench --sizes 1200,4200,37000,130000 --appends 2000
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import struct
import tempfile
import time
from pathlib import Path

from bench.common import default_parent_dir, load_average, progress
from store.log.mapped_file import PWRITE_MIN_BYTES, MappedFile

_WORD = struct.Struct(">i")
SEGMENT_BYTES = 1 << 30
RECORD_BYTES = 1100  # how far apart the reads after each append look (a 1 KiB message's record)


def written_bytes() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("write_bytes:"):
            return int(line.split()[1])
    return 0


def one_run(directory: Path, way: str, size: int, appends: int) -> dict[str, float]:
    segment = MappedFile.create(directory, 0, SEGMENT_BYTES)
    data = memoryview(os.urandom(size))
    buf, fd = segment.buf, segment.fd
    write_s = sync_s = read_s = 0.0
    disk_before = written_bytes()
    wall = time.perf_counter()
    try:
        pos = 0
        for _ in range(min(appends, SEGMENT_BYTES // size)):
            t0 = time.thread_time()
            if way == "mapping":
                buf[pos + 4 : pos + size] = data[4:]
                buf[pos : pos + 4] = data[:4]
            else:
                os.pwrite(fd, data[4:], pos + 4)
                os.pwrite(fd, data[:4], pos)
            t1 = time.thread_time()
            os.fdatasync(fd)
            t2 = time.thread_time()
            for at in range(pos, pos + size, RECORD_BYTES):
                _WORD.unpack_from(buf, at)
            t3 = time.thread_time()
            write_s, sync_s, read_s = write_s + t1 - t0, sync_s + t2 - t1, read_s + t3 - t2
            pos += size
        done = pos // size
    finally:
        wall = time.perf_counter() - wall
        segment.destroy()
    per = 1e6 / done
    return {
        "cpu": (write_s + sync_s + read_s) * per,
        "write": write_s * per,
        "fdatasync": sync_s * per,
        "read": read_s * per,
        "wall": wall * per,
        "disk_kib": (written_bytes() - disk_before) / done / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1200,4200,16000,37000,130000", help="append sizes in bytes")
    parser.add_argument("--appends", type=int, default=1500, help="appends per run (bounded by the segment)")
    parser.add_argument("--trials", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(
        f"append_cost_bench: appends of {args.sizes} bytes, {args.appends} per run, {args.trials} trials, "
        f"each append + fdatasync + reads through the mapping; PWRITE_MIN_BYTES {PWRITE_MIN_BYTES}; "
        f"load {load_average()}"
    )
    root = Path(tempfile.mkdtemp(prefix="append-cost-", dir=default_parent_dir()))
    try:
        for size in sizes:
            runs: dict[str, list[dict[str, float]]] = {"mapping": [], "pwrite": []}
            for trial in range(args.trials):
                for way in runs:
                    progress(f"  {size} B {way} trial {trial + 1}")
                    runs[way].append(one_run(root, way, size, args.appends))
            for way, results in runs.items():
                cols = []
                for key in ("cpu", "write", "fdatasync", "read", "wall"):
                    values = [r[key] for r in results]
                    cols.append(f"{key} {statistics.median(values):6.1f} ({min(values):.0f}-{max(values):.0f})")
                disk = statistics.median(r["disk_kib"] for r in results)
                print(f"{size:7d} B  {way:8s} us/append: " + "  ".join(cols) + f"  disk KiB/append {disk:.1f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"load {load_average()}")


if __name__ == "__main__":
    main()
