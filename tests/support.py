"""Helpers the test suites share: threads run together, child processes whose stdout lines are
read on a thread so that every wait on them has a deadline, the `rocketstore` CLI run in this
process, an HTTP GET of a broker's metrics port, a gRPC error made up for sans-IO tests, and small
stores and records changed at rest in their segment files.

Importable as `support` from any test (pytest puts `tests/` on sys.path for its conftest).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import queue
import signal
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import grpc


def run_threads(targets, timeout_s: float = 120) -> None:
    """Run callables on threads at once; re-raise the first exception any of them raised."""
    errors: list[BaseException] = []

    def guard(target):
        try:
            target()
        except BaseException as exc:  # noqa: BLE001 - re-raised below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=guard, args=(t,)) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout_s)
    assert not any(t.is_alive() for t in threads), "a test thread hangs"
    if errors:
        raise errors[0]


class LineProcess:
    """A child process whose complete stdout lines go to `on_line(fields)`; a line cut short by a
    kill is dropped (whatever it announced never happened). stderr goes to a file for dumps."""

    def __init__(self, command: list[str], stderr_path: Path, **popen) -> None:
        self.stderr_path = stderr_path
        with open(stderr_path, "wb") as stderr:
            self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, bufsize=0, **popen)
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.eof = False

    def on_line(self, line: str) -> None:
        raise NotImplementedError

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self._lines.put(raw)
        self._lines.put(None)

    def _take(self, raw: bytes | None) -> None:
        if raw is None:
            self.eof = True
        elif raw.endswith(b"\n"):
            self.on_line(raw.decode())

    def wait_for(self, condition, timeout_s: float) -> bool:
        """Consume lines until `condition()` holds, the child's stdout ends, or the deadline."""
        deadline = time.monotonic() + timeout_s
        while not condition() and not self.eof:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            with contextlib.suppress(queue.Empty):
                self._take(self._lines.get(timeout=remaining))
        return condition()

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Signal the child (SIGKILL unless told) and take every line it wrote before it ended."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
        self.proc.wait(timeout=30)
        self._reader.join(timeout=30)
        while not self.eof:
            self._take(self._lines.get(timeout=30))
        assert self.proc.stdout is not None
        self.proc.stdout.close()

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")


class ManualClock:
    """A clock in Unix ms that moves only when the test sets `now`."""

    def __init__(self, now_ms: int) -> None:
        self.now = now_ms

    def __call__(self) -> int:
        return self.now


def wait_until(condition, timeout_s: float = 30.0, what: str = "condition"):
    """`poll_until` for tests: the truthy value, or AssertionError naming `what` at the deadline."""
    from harness.local_cluster import poll_until

    value = poll_until(condition, timeout_s)
    if not value:
        raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
    return value


async def wait_for(condition, timeout_s: float = 30.0, what: str = "condition") -> None:
    """`wait_until` on an event loop: yields to it between checks; AssertionError naming `what`
    at the deadline."""
    import asyncio

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not condition():
        if loop.time() >= deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        await asyncio.sleep(0.01)


def proc_status(pid: int, field: str) -> int:
    """A number from /proc/<pid>/status (`VmRSS` in bytes, `Threads` as a count)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name == field:
            number, _, unit = value.strip().partition(" ")
            return int(number) * (1024 if unit == "kB" else 1)
    raise AssertionError(f"/proc/{pid}/status has no {field}")


# Broker settings for tests that run broker processes: small segments and indexes (tests write
# little, and segment ends get crossed), short replication intervals.
BROKER_TEST_SETTINGS = {
    "mappedFileSizeCommitLog": str(256 * 1024),
    "mappedFileSizeConsumeQueue": str(20480),
    "maxHashSlotNum": "512",
    "maxIndexNum": "2048",
    "slaveTimeout": "1000",
    "haSendHeartbeatInterval": "200",
    "haHousekeepingInterval": "2000",
    "haReconnectBackoffMin": "50",
    "haReconnectBackoffMax": "500",
}


def run_cli(*argv: str) -> tuple[int, str]:
    """`rocketstore ARGV...` in this process: its exit code and what it printed on stdout."""
    from rocketstore.cli import main

    out = io.StringIO()
    saved, sys.stdout = sys.stdout, out
    try:
        code = main(list(argv))
    finally:
        sys.stdout = saved
    return code, out.getvalue()


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    """`rocketstore ARGV...` in this process under pytest's capsys: (exit code, stdout, stderr)."""
    from rocketstore.cli import main

    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def cli_json(capsys, *argv: str):
    """`rocketstore ARGV... --json`, which must succeed: its answer."""
    code, out, err = cli(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def http_get(endpoint: str, path: str) -> tuple[int, str]:
    """GET http://ENDPOINT/PATH: (status, body), error statuses included."""
    try:
        with urllib.request.urlopen(f"http://{endpoint}{path}", timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


class FakeRpcError(grpc.RpcError):
    """A failed gRPC call's error with this code and details."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


def small_store_config(root: Path, segment_size: int, **overrides):
    """A StoreConfig at `root` with `segment_size` CommitLog segments and small ConsumeQueue and
    IndexFile geometry, as small segments: tests copy and scan whole stores."""
    from store import StoreConfig

    overrides.setdefault("mapped_file_size_commit_log", segment_size)
    overrides.setdefault("mapped_file_size_consume_queue", 1024 * 20)
    overrides.setdefault("max_hash_slot_num", 512)
    overrides.setdefault("max_index_num", 2048)
    return StoreConfig(store_path_root_dir=str(root), **overrides)


def _segment_of(commit_log_dir: Path, segment_size: int, physical_offset: int) -> tuple[Path, int]:
    """The segment file holding CommitLog offset `physical_offset`, and the offset's position in it."""
    start = physical_offset - physical_offset % segment_size
    return commit_log_dir / f"{start:020d}", physical_offset - start


def flip_body_byte(commit_log_dir: Path, segment_size: int, physical_offset: int) -> int:
    """Damage the message at CommitLog offset `physical_offset` as bytes changed at rest do: one
    byte of its body flipped in its segment file, in place (a running store sees it through its
    shared mapping). Returns the file position changed."""
    from store.log.codec import check_record, decode_checked

    path, pos = _segment_of(commit_log_dir, segment_size, physical_offset)
    fd = os.open(path, os.O_RDWR)
    try:
        segment = os.pread(fd, segment_size, 0)
        check = check_record(segment, pos, len(segment), physical_offset)
        message = decode_checked(segment, pos, check)
        assert message.body, "a message with an empty body has no body byte to damage"
        body_at = check.properties_pos - 2 - 1 - len(check.topic.encode("utf-8")) - len(message.body)
        os.pwrite(fd, bytes([segment[body_at] ^ 0x20]), body_at)
        os.fsync(fd)
    finally:
        os.close(fd)
    return body_at


def set_born_timestamp(commit_log_dir: Path, segment_size: int, physical_offset: int, born_ms: int) -> None:
    """Give the message at CommitLog offset `physical_offset` another born time, in place in its
    segment file, as a broker that did not check the field stored it (the body CRC does not cover
    it; a running store sees it through its shared mapping)."""
    from store.log.codec import BORN_HOST_POS

    path, pos = _segment_of(commit_log_dir, segment_size, physical_offset)
    fd = os.open(path, os.O_RDWR)
    try:
        os.pwrite(fd, struct.pack(">q", born_ms), pos + BORN_HOST_POS - 8)  # BORNTIMESTAMP precedes BORNHOST
        os.fsync(fd)
    finally:
        os.close(fd)
