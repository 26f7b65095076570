"""`EtcdServer`: a single-member etcd process on 127.0.0.1, for tests and benchmarks.

It runs Debian's `etcd` (package `etcd-server`) with its data directory under a given path and
client and peer ports chosen free at start below the ephemeral range (`harness.ports`: kept
across `restart`, so clients keep working, and no outgoing connection takes one meanwhile), logs
to `<dir>/etcd.log`, and waits for `/v3/maintenance/status` to answer. `stop` (SIGTERM), `kill`
(SIGKILL), `pause`/`resume` (SIGSTOP/SIGCONT) and `restart` simulate an etcd outage. A missing
etcd binary is an error saying what to install: tests that need etcd fail without it.

Thread-safety: none; drive it from one thread.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

from demos.child_process import ChildProcess
from harness.ports import port_for_later
from rocketstore.coordination.etcd import EtcdClient, EtcdError

START_TIMEOUT_S = 30.0


def etcd_binary() -> str:
    path = shutil.which("etcd") or ("/usr/bin/etcd" if Path("/usr/bin/etcd").exists() else None)
    if path is None:
        raise RuntimeError("etcd is not installed: apt-get install etcd-server (the failover tests need it)")
    return path


class EtcdServer(ChildProcess):
    wait_s = 15.0

    def __init__(self, directory: Path, *, tls: tuple[str, str, str] | None = None) -> None:
        """`tls`: (server certificate, its key, the CA clients' certificates must chain to):
        https with client-certificate authentication."""
        self.directory = Path(directory)
        self.tls = tls
        self.client_options: dict = {}
        self.client_port = 0
        self.peer_port = 0
        self.process: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://127.0.0.1:{self.client_port}"

    @property
    def log_path(self) -> Path:
        return self.directory / "etcd.log"

    def _command(self) -> list[str]:
        client = self.endpoint
        peer = f"http://127.0.0.1:{self.peer_port}"
        tls = []
        if self.tls:
            cert, key, ca = self.tls
            tls = ["--cert-file", cert, "--key-file", key, "--trusted-ca-file", ca, "--client-cert-auth"]
        return [
            etcd_binary(),
            *tls,
            "--name",
            "test",
            "--data-dir",
            str(self.directory / "data"),
            "--listen-client-urls",
            client,
            "--advertise-client-urls",
            client,
            "--listen-peer-urls",
            peer,
            "--initial-advertise-peer-urls",
            peer,
            "--initial-cluster",
            f"test={peer}",
            "--listen-metrics-urls",
            "",
        ]

    def start(self) -> "EtcdServer":
        """Start etcd (on new free ports the first time) and wait until it answers."""
        self.directory.mkdir(parents=True, exist_ok=True)
        for _ in range(5):
            self.client_port = port_for_later()
            self.peer_port = port_for_later(avoid=(self.client_port,))
            if self._launch():
                return self
        raise RuntimeError(f"etcd did not start:\n{self.log_tail(30)}")

    def restart(self) -> "EtcdServer":
        """Start again after `stop` or `kill`, on the same ports and data."""
        if not self._launch():
            raise RuntimeError(f"etcd did not restart:\n{self.log_tail(30)}")
        return self

    def _launch(self) -> bool:
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(self._command(), stdout=log, stderr=subprocess.STDOUT)
        client = EtcdClient(self.endpoint, timeout_s=0.5, **self.client_options)
        deadline = time.monotonic() + START_TIMEOUT_S
        delay = 0.02
        try:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    return False  # a port clash, most likely: the caller picks new ports
                try:
                    client.status()
                    return True
                except EtcdError:
                    time.sleep(delay)
                    delay = min(delay * 2, 0.2)
        finally:
            client.close()
        self.kill()
        return False

    def enable_auth(self, password: str, user: str = "root") -> None:
        """Turn on etcd's authentication with `user` (granted the root role) and `password`;
        later starts check health with those credentials."""
        with EtcdClient(self.endpoint, timeout_s=2, **self.client_options) as client:
            client.call("/v3/auth/role/add", {"name": "root"})
            client.call("/v3/auth/user/add", {"name": user, "password": password})
            client.call("/v3/auth/user/grant", {"user": user, "role": "root"})
            client.call("/v3/auth/enable", {})
        self.client_options = dict(self.client_options, user=user, password=password)

    def stop(self) -> None:
        if self.running() and self.terminate() is None:
            self.kill()

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return "(no etcd log)"
        return "\n".join(["--- etcd log ---", *text[-lines:]])

    def __enter__(self) -> "EtcdServer":
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()
