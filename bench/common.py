"""Helpers the benchmarks share: size parsing and labels, where a run's files go (never tmpfs),
the environment header every benchmark prints, the load average, percentiles of latencies, and
progress lines on stderr.

Moved here unchanged from `bench/store_put_bench.py`, which imports them from this module.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent

MB = 1_000_000
KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30


def parse_size(text: str) -> int:
    """'1GiB', '256MiB', '64KiB' or a plain byte count."""
    units = {"gib": GiB, "g": GiB, "mib": MiB, "m": MiB, "kib": KiB, "k": KiB, "b": 1, "": 1}
    stripped = text.strip().lower()
    number = stripped.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = stripped[len(number) :]
    if not number or unit not in units:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 1GiB, 256MiB, 4096)")
    return int(float(number) * units[unit])


def size_label(n: int) -> str:
    for unit, name in ((GiB, "GiB"), (MiB, "MiB"), (KiB, "KiB")):
        if n >= unit and n % unit == 0:
            return f"{n // unit}{name}"
    return f"{n}B"


def filesystem_of(path: Path) -> tuple[str, str, str]:
    """(device, type, mount point) of the filesystem holding `path`, from `df -T -P`."""
    try:
        out = subprocess.run(
            ["df", "-T", "-P", str(path)], capture_output=True, text=True, timeout=10, check=True
        ).stdout
        fields = out.splitlines()[-1].split()
        return fields[0], fields[1], fields[-1]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "?", "unknown", "?"


def default_parent_dir() -> Path:
    """The system temp dir when it shares the repository's filesystem and is not in memory;
    otherwise the repository itself (a hidden run directory there, removed at the end)."""
    tmp = Path(tempfile.gettempdir())
    same_device = tmp.stat().st_dev == REPO_ROOT.stat().st_dev
    in_memory = filesystem_of(tmp)[1] in ("tmpfs", "ramfs")
    return tmp if same_device and not in_memory else REPO_ROOT


def git_revision() -> str:
    def git(*cmd: str) -> str:
        return subprocess.run(
            ["git", "-C", str(REPO_ROOT), *cmd], capture_output=True, text=True, timeout=10
        ).stdout.strip()

    try:
        rev = git("rev-parse", "--short", "HEAD") or "unknown"
        return rev + (" (uncommitted changes)" if git("status", "--porcelain", "--untracked-files=no") else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def environment(run_dir: Path) -> dict[str, str]:
    device, fstype, mount = filesystem_of(run_dir)
    return {
        "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "git": git_revision(),
        "python": f"{platform.python_implementation()} {platform.python_version()},"
        f" GIL switch interval {sys.getswitchinterval() * 1000:g} ms",
        "machine": f"{platform.system()} {platform.release()} {platform.machine()}, {os.cpu_count()} CPUs",
        "dir": str(run_dir),
        "filesystem": f"{fstype} on {device}, mounted on {mount}",
        "fstype": fstype,
    }


def print_environment(title: str, env: dict[str, str], keys: tuple[str, ...], width: int) -> None:
    """A benchmark's first lines: its title, then `keys` of `environment()` in a column `width` wide."""
    print(title)
    for key in keys:
        print(f"  {key:<{width}} {env[key]}")


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, for printing beside figures."""
    return ", ".join(f"{v:.2f}" for v in os.getloadavg())


def percentile(ordered: Sequence[float], p: float) -> float:
    """The value at percentile ``p`` (0-100) of ascending values: the one at index floor(p/100 * n),
    the last for p = 100, and 0.0 when there are none (a phase that measured nothing prints zeros)."""
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def context_switches(pid: int, *, voluntary_only: bool = False) -> int:
    """Voluntary and involuntary context switches of every thread of `pid` so far (from
    /proc/PID/task/*/status): a thread hand-off costs two, and waiting for the GIL adds more.
    `voluntary_only`: the waits alone (hand-offs, GIL waits, I/O), which other processes on a
    shared machine change far less than the preemptions they cause."""
    kinds = ("voluntary_ctxt_switches:",) + (() if voluntary_only else ("nonvoluntary_ctxt_switches:",))
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            status = (task / "status").read_text()
        except OSError:  # the thread ended between the listing and the read
            continue
        total += sum(int(line.split()[1]) for line in status.splitlines() if line.startswith(kinds))
    return total
