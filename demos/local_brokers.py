"""Broker processes on 127.0.0.1: what `rocketstore demo` starts its master and slave with, and
what the test rigs (`harness/`) and benchmarks build their groups on.

`LocalBroker` runs `python -m rocketstore.cli broker --key=value ...` as a child process, waits for
its ready line (with a deadline; plain, or a JSON record under logFormat=json) to learn the ports
it bound (port 0), and stops it with SIGTERM (clean), SIGKILL (crash), SIGSTOP/SIGCONT (pause)
(`child_process.ChildProcess`).
Its stdout and stderr go to files under its directory so a failure can show them. `LocalCluster`
builds a master and its slaves of one broker group sharing a generated secret (kept in a 0600
file, passed by path, never on a command line), and asks the master through the client how far its
slaves have acknowledged. A cluster's start that fails half way (either kind, `BrokerSet`) stops the
brokers it had started.

Thread-safety: none; drive each object from one thread.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .child_process import ChildProcess

READY_PREFIX = "rocketstore broker ready: "
# Small segments keep the files of a local run small; everything else is RocketMQ's default.
LOCAL_DEFAULTS = {
    "mappedFileSizeCommitLog": str(64 * 1024 * 1024),
    "mappedFileSizeConsumeQueue": str(300_000 * 20),
    "maxHashSlotNum": "50000",
    "maxIndexNum": "200000",
}


class BrokerStartError(RuntimeError):
    pass


def poll_until(condition, timeout_s: float, *, max_delay_s: float = 0.05):
    """Call `condition()` (backing off from 5 ms to `max_delay_s`) until it returns something
    truthy or `timeout_s` passed; returns its last value. For conditions only another process
    can make true (a broker's ready line, a slave's acknowledgement), where nothing can be
    blocked on."""
    deadline = time.monotonic() + timeout_s
    delay = 0.005
    while True:
        value = condition()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(delay)
        delay = min(delay * 2, max_delay_s)


def write_secret(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(24) + "\n")
    return path


@dataclass
class LocalBroker(ChildProcess):
    name: str
    directory: Path
    settings: dict[str, str]
    process: subprocess.Popen | None = None
    ready: dict[str, str] = field(default_factory=dict)
    runs: int = 0

    @property
    def store_dir(self) -> Path:
        return self.directory / "store"

    @property
    def stdout_path(self) -> Path:
        return self.directory / f"stdout.{self.runs}.log"

    @property
    def stderr_path(self) -> Path:
        return self.directory / f"stderr.{self.runs}.log"

    @property
    def client_endpoint(self) -> str:
        return self.ready["client"]

    @property
    def ha_endpoint(self) -> str:
        return self.ready["ha"]

    @property
    def remoting_endpoint(self) -> str:
        """The remoting API's endpoint (the broker runs with remotingListenPort set)."""
        return self.ready["remoting"]

    @property
    def role(self) -> str:
        return self.ready.get("role", self.settings.get("brokerRole", "ASYNC_MASTER"))

    def command(self) -> list[str]:
        settings = {"storePathRootDir": str(self.store_dir), "brokerLogDir": str(self.directory / "logs")}
        settings.update(self.settings)
        return [sys.executable, "-m", "rocketstore.cli", "broker", *(f"--{k}={v}" for k, v in settings.items())]

    def start(self, timeout_s: float = 60.0, env: Mapping[str, str] | None = None) -> "LocalBroker":
        """Start the process and wait for its ready line; BrokerStartError with its stderr if it
        exits or stays silent past the deadline."""
        if self.process is not None and self.process.poll() is None:
            raise RuntimeError(f"{self.name} is already running")
        self.directory.mkdir(parents=True, exist_ok=True)
        self.runs += 1
        self.ready = {}
        child_env = dict(os.environ if env is None else env)
        child_env.setdefault("PYTHONUNBUFFERED", "1")
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            self.process = subprocess.Popen(self.command(), stdout=out, stderr=err, env=child_env)
        process = self.process

        def ready_or_exited() -> str | None:
            # The ready line goes to a file the child appends to: it has no other channel to us.
            line = self._ready_line()
            if line is None and process.poll() is not None:
                raise BrokerStartError(f"{self.name} exited with {process.returncode}:\n{self.tail()}")
            return line

        line = poll_until(ready_or_exited, timeout_s)
        if line is None:
            self.kill()
            raise BrokerStartError(f"{self.name} did not become ready within {timeout_s} s:\n{self.tail()}")
        self.ready = dict(part.split("=", 1) for part in line[len(READY_PREFIX) :].split())
        return self

    def restart(self, timeout_s: float = 60.0, env: Mapping[str, str] | None = None) -> "LocalBroker":
        """Start a stopped or killed broker again on the ports it had (clients and slaves keep
        its addresses)."""
        if self.ready:
            self.settings.update(listenPort=self.client_endpoint.rsplit(":", 1)[1])
            if "ha" in self.ready:
                self.settings.update(haListenPort=self.ha_endpoint.rsplit(":", 1)[1])
        return self.start(timeout_s, env=env)

    def _ready_line(self) -> str | None:
        try:
            text = self.stdout_path.read_text(errors="replace")
        except FileNotFoundError:
            return None
        for line in text.splitlines():
            if line.startswith("{"):  # logFormat=json: the line is the record's message
                try:
                    line = str(json.loads(line).get("message", ""))
                except ValueError:
                    continue  # cut short: the rest of it comes with the next read
            if line.startswith(READY_PREFIX):
                return line
        return None

    def stop(self, timeout_s: float = 30.0) -> int:
        """SIGTERM and wait: a clean shutdown. Returns the exit status."""
        if self.process is None:
            return 0
        status = self.terminate(timeout_s)
        if status is None:
            self.kill()
            raise RuntimeError(f"{self.name} did not stop within {timeout_s} s after SIGTERM:\n{self.tail()}")
        return status

    def tail(self, lines: int = 60) -> str:
        """The end of this broker's stderr over every run, for failure reports."""
        out = []
        for run in range(1, self.runs + 1):
            path = self.directory / f"stderr.{run}.log"
            if path.exists():
                text = path.read_text(errors="replace").splitlines()[-lines:]
                out.append(f"--- {self.name} run {run} stderr ---")
                out.extend(text)
        return "\n".join(out)


class BrokerSet:
    """What both kinds of local cluster do with their `brokers` and `secret_file`."""

    brokers: list[LocalBroker]
    secret_file: Path

    def admin_secret(self) -> bytes:
        return self.secret_file.read_text().strip().encode()

    def stop(self) -> None:
        """Stop every broker still running, the last started first; kill what does not stop."""
        errors = []
        for broker in reversed(self.brokers):
            try:
                broker.stop()
            except RuntimeError as exc:
                errors.append(str(exc))
        if errors:
            raise RuntimeError("\n".join(errors))

    def tails(self) -> str:
        return "\n".join(b.tail() for b in self.brokers)

    @contextlib.contextmanager
    def _stopped_if_failing(self) -> Iterator[None]:
        """For a `start` that starts several brokers: when one fails, stop those already running
        and re-raise. Callers write `Cluster(...).start()` and never see a set that failed half
        way, so its brokers would otherwise outlive the failure (and the caller)."""
        try:
            yield
        except BaseException:
            with contextlib.suppress(RuntimeError):
                self.stop()
            raise


@dataclass
class LocalCluster(BrokerSet):
    """A master and `slaves` slaves of one broker group, in `base_dir`."""

    base_dir: Path
    master_role: str = "SYNC_MASTER"
    flush_disk_type: str = "SYNC_FLUSH"
    slaves: int = 1
    settings: dict[str, str] = field(default_factory=dict)
    slave_settings: dict[str, str] = field(default_factory=dict)
    broker_name: str = "broker-a"
    brokers: list[LocalBroker] = field(default_factory=list)
    # The environment `start` and `add_slave` give the brokers (None: this process's), e.g. a benchmark's
    # GRPC_EXPERIMENTS; a broker restarted by hand (`LocalBroker.restart`) takes the one it is given.
    env: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        self.secret_file = write_secret(self.base_dir / "secret")

    def _common(self) -> dict[str, str]:
        common = dict(LOCAL_DEFAULTS)
        common.update(
            brokerName=self.broker_name,
            brokerIP1="127.0.0.1",
            flushDiskType=self.flush_disk_type,
            listenPort="0",
            haSecretFile=str(self.secret_file),
        )
        common.update(self.settings)
        return common

    @property
    def master(self) -> LocalBroker:
        return self.brokers[0]

    @property
    def slave_brokers(self) -> list[LocalBroker]:
        return self.brokers[1:]

    def start(self, timeout_s: float = 60.0) -> "LocalCluster":
        master_settings = self._common()
        master_settings.update(brokerRole=self.master_role, brokerId="0", haListenPort="0")
        master = LocalBroker("master", self.base_dir / "master", master_settings)
        self.brokers = [master]
        with self._stopped_if_failing():
            master.start(timeout_s, env=self.env)
            for i in range(1, self.slaves + 1):
                self.add_slave(i, timeout_s)
        return self

    def add_slave(
        self, broker_id: int, timeout_s: float = 60.0, *, wait_connected: bool = True, **extra: str
    ) -> LocalBroker:
        """Start a slave; with `wait_connected`, return once the master lists it among its
        replication sessions (a SYNC_MASTER put made earlier would find no slave)."""
        settings = self._common()
        settings.update(brokerRole="SLAVE", brokerId=str(broker_id), haMasterAddress=self.master.ha_endpoint)
        settings.update(self.slave_settings)
        settings.update(extra)
        slave = LocalBroker(f"slave{broker_id}", self.base_dir / f"slave{broker_id}", settings)
        self.brokers.append(slave)
        slave.start(timeout_s, env=self.env)
        if wait_connected:
            self.wait_connected(broker_id, timeout_s)
        return slave

    def _master_status(self) -> dict:
        from client import AdminClient

        with AdminClient(self.master.client_endpoint, self.admin_secret()) as admin:
            return admin.status()

    def connected_slaves(self) -> set[int]:
        return {int(s["broker_id"]) for s in self._master_status().get("slaves", [])}

    def replication_progress(self) -> tuple[int, list[int]]:
        """The master's max offset and each connected slave's acknowledged offset."""
        status = self._master_status()
        return int(status["max_offset"]), [int(s["ack_offset"]) for s in status.get("slaves", [])]

    def caught_up(self, slaves: int = 1) -> bool:
        """At least `slaves` slaves are connected and every one acknowledged the master's log."""
        master_max, acks = self.replication_progress()
        return len(acks) >= slaves and all(ack >= master_max for ack in acks)

    def wait_connected(self, broker_id: int, timeout_s: float = 60.0) -> None:
        if not poll_until(lambda: broker_id in self.connected_slaves(), timeout_s):
            raise BrokerStartError(f"slave {broker_id} did not connect within {timeout_s} s:\n{self.tails()}")

    def __enter__(self) -> "LocalCluster":
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()
