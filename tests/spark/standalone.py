"""A Spark standalone cluster on 127.0.0.1 for the tests: one master and its workers, each a JVM
started with the PySpark installation's own `bin/spark-class` (no download), SPARK_LOCAL_IP set so
that every port they open (RPC, web UIs on ports the OS picks) is bound to loopback. Logs go to
files under the cluster's directory; `logs()` gives them for a failing test."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

from pyspark.find_spark_home import _find_spark_home

from support import wait_until

MASTER_URL = re.compile(r"Starting Spark master at (spark://\S+)")


class StandaloneCluster:
    def __init__(self, base: Path, *, workers: int = 2, cores: int = 1, memory: str = "1g") -> None:
        self.base = base
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.spark_home = Path(_find_spark_home())
        self.procs: list[tuple[str, subprocess.Popen, Path]] = []
        self.url = ""

    def _start(self, name: str, *argv: str) -> Path:
        log = self.base / f"{name}.log"
        env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", SPARK_HOME=str(self.spark_home))
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [str(self.spark_home / "bin" / "spark-class"), *argv],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self.base,
                start_new_session=True,
            )
        self.procs.append((name, proc, log))
        return log

    def start(self, timeout_s: float = 240) -> str:
        self.base.mkdir(parents=True, exist_ok=True)
        master_log = self._start(
            "master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", "0", "--webui-port", "0"
        )
        found = wait_until(lambda: MASTER_URL.search(master_log.read_text(errors="replace")), timeout_s, "the master")
        self.url = found.group(1)
        for i in range(self.workers):
            work = self.base / f"worker{i}"
            work.mkdir()
            log = self._start(
                f"worker{i}",
                "org.apache.spark.deploy.worker.Worker",
                self.url,
                *("--host", "127.0.0.1", "--port", "0", "--webui-port", "0"),
                *("--cores", str(self.cores), "--memory", self.memory, "--work-dir", str(work)),
            )
            wait_until(
                lambda log=log: "Successfully registered with master" in log.read_text(errors="replace"),
                timeout_s,
                f"worker {i} to register",
            )
        return self.url

    def pids(self) -> list[int]:
        return [proc.pid for _, proc, _ in self.procs]

    def logs(self) -> str:
        return "\n".join(f"--- {name}\n{log.read_text(errors='replace')[-6000:]}" for name, _, log in self.procs)

    def stop(self) -> None:
        for _, proc, _ in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for _, proc, _ in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)


def listening_addresses(pids: list[int]) -> set[str]:
    """The local addresses (hex, as /proc/net/tcp{,6} writes them) of the TCP sockets these
    processes listen on."""
    inodes = set()
    for pid in pids:
        fd_dir = Path(f"/proc/{pid}/fd")
        for fd in fd_dir.iterdir() if fd_dir.is_dir() else ():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
                found.add(fields[1].rsplit(":", 1)[0])
    return found
