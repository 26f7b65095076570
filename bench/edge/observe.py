"""What the edge tools watch on the broker processes they start: memory and threads (from /proc),
the store's disk usage, the machine's load, and what the brokers wrote to their logs (tracebacks,
their distinct first lines, warnings, bytes).

A traceback entry is a `Traceback (most recent call last):` block in a broker's stderr (every log
record reaches stderr, and so does what Python prints for an uncaught exception in a thread);
chained blocks ("During handling of the above exception ...") belong to the same entry. Its first
line is the log line in front of it (timestamp and thread dropped, digits folded to `#` so that
entries differing only by a port or an offset count as one), or `<uncaught>`; its last line is the
final exception.

`Sampler` reads /proc on a thread of its own; everything else is plain functions. Linux only.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

MiB = 1 << 20


def proc_status(pid: int) -> dict[str, str]:
    """The fields of /proc/PID/status ({} once the process is gone)."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return {}
    return dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)


def rss_bytes(pid: int) -> int | None:
    value = proc_status(pid).get("VmRSS")
    return int(value.split()[0]) * 1024 if value else None


def thread_count(pid: int) -> int | None:
    value = proc_status(pid).get("Threads")
    return int(value) if value else None


def cpu_seconds(pid: int) -> float | None:
    """User and system CPU time of every thread of `pid` so far."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def disk_usage(path: Path) -> int:
    """Bytes the files under `path` occupy on disk (allocated blocks: sparse segments count what
    was written)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                continue
    return total


def machine_load() -> str:
    """`uptime`'s line (the load averages), or the load averages alone when it is missing."""
    try:
        line = subprocess.run(["uptime"], capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        line = ""
    return line or "load average: " + ", ".join(f"{v:.2f}" for v in os.getloadavg())


def mib(n: int | None) -> str:
    return "?" if n is None else f"{n / MiB:.1f} MiB"


@dataclass
class Trend:
    """A figure at the start, its peak and its last value."""

    start: int | None = None
    peak: int | None = None
    end: int | None = None

    def add(self, value: int | None) -> None:
        if value is None:
            return
        if self.start is None:
            self.start = value
        self.peak = value if self.peak is None else max(self.peak, value)
        self.end = value

    def as_dict(self) -> dict[str, int | None]:
        return {"start": self.start, "peak": self.peak, "end": self.end}


class Sampler:
    """RSS and thread counts of named processes every `interval_s`, on a daemon thread.
    `pids()` is called at each sample, so a restarted broker is followed under its new pid."""

    def __init__(self, pids: Callable[[], dict[str, int | None]], interval_s: float = 0.5) -> None:
        self._pids = pids
        self._interval_s = interval_s
        self.rss: dict[str, Trend] = {}
        self.threads: dict[str, Trend] = {}
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="edge-sampler", daemon=True)

    def sample(self) -> None:
        for name, pid in self._pids().items():
            if pid is None:
                continue
            rss, threads = rss_bytes(pid), thread_count(pid)
            with self._lock:
                self.rss.setdefault(name, Trend()).add(rss)
                self.threads.setdefault(name, Trend()).add(threads)

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            self.sample()

    def start(self) -> Sampler:
        self.sample()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.sample()


# -- logs -------------------------------------------------------------------------------------

_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\dT[\d:.]+[+-]\d\d:\d\d (\w+) (\S+) (.*)$")
_TRACEBACK = "Traceback (most recent call last):"
_CHAINED = ("During handling of the above exception", "The above exception was the direct cause")
_DIGITS = re.compile(r"\d+")


@dataclass
class LogScan:
    bytes: int = 0
    lines: int = 0
    warnings: int = 0
    errors: int = 0
    tracebacks: int = 0
    # (first line, last line) -> entries
    distinct: Counter = field(default_factory=Counter)

    def merge(self, other: LogScan) -> None:
        self.bytes += other.bytes
        self.lines += other.lines
        self.warnings += other.warnings
        self.errors += other.errors
        self.tracebacks += other.tracebacks
        self.distinct.update(other.distinct)


def _first_line(log_line: str | None) -> str:
    if log_line is None:
        return "<uncaught>"
    found = _LOG_LINE.match(log_line)
    text = f"{found.group(1)} {found.group(3)}" if found else log_line
    return _DIGITS.sub("#", text)[:200]


def scan_lines(lines: Iterable[str]) -> LogScan:
    scan = LogScan()
    previous_log: str | None = None
    in_block = False
    last = ""
    first = ""

    def close() -> None:
        if in_block:
            scan.distinct[(first, _DIGITS.sub("#", last)[:200])] += 1

    for raw in lines:
        line = raw.rstrip("\n")
        scan.lines += 1
        scan.bytes += len(raw.encode("utf-8", "replace"))
        if line.startswith("Exception in thread"):
            close()
            in_block = False
            previous_log = line
            continue
        if line.startswith(_TRACEBACK):
            if not in_block:
                scan.tracebacks += 1
                first = _first_line(previous_log)
                in_block = True
            continue
        if in_block and (not line or line.startswith((" ", "\t")) or line.startswith(_CHAINED)):
            continue
        found = _LOG_LINE.match(line)
        if found is not None:
            close()
            in_block = False
            previous_log = line
            level = found.group(1)
            scan.warnings += level == "WARNING"
            scan.errors += level in ("ERROR", "CRITICAL")
        elif in_block:
            last = line
    close()
    return scan


def scan_broker_stderr(directory: Path) -> LogScan:
    """Every run's stderr of one broker (`harness.local_cluster.LocalBroker` names them
    stderr.<run>.log)."""
    scan = LogScan()
    for path in sorted(directory.glob("stderr.*.log")):
        with open(path, encoding="utf-8", errors="replace") as lines:
            scan.merge(scan_lines(lines))
    return scan


def log_file_bytes(directory: Path) -> int:
    """Bytes of a broker's log files (broker.log and its rotated copies) under `directory`/logs."""
    return sum(p.stat().st_size for p in (directory / "logs").glob("broker.log*") if p.is_file())


def tracebacks_text(scan: LogScan, limit: int = 20) -> list[str]:
    """The distinct tracebacks, most frequent first, one line each."""
    out = []
    for (first, last), count in scan.distinct.most_common(limit):
        out.append(f"{count:>6} x {first}  ->  {last}")
    if len(scan.distinct) > limit:
        out.append(f"       ... and {len(scan.distinct) - limit} more distinct")
    return out
