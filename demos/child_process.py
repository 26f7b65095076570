"""`ChildProcess`: the signals a rig sends a server it started as a child process (a broker in
`local_brokers`, etcd in `harness.local_etcd`): SIGTERM and a bounded wait (a clean stop), SIGKILL
(a crash), SIGSTOP/SIGCONT (a pause, as a stalled machine looks from outside).

A subclass starts the process and keeps its `subprocess.Popen` in `process` (None before the first
start); what a stop that times out means (an error, or a kill) is the subclass's to say.

Thread-safety: none; drive each object from one thread.
"""

from __future__ import annotations

import signal
import subprocess


class ChildProcess:
    process: subprocess.Popen | None
    # How long a wait for the process to go may take after SIGKILL (and, by default, SIGTERM).
    wait_s: float = 30.0

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def terminate(self, timeout_s: float | None = None) -> int | None:
        """SIGTERM, and wait up to `timeout_s` (default `wait_s`) for the process to exit; its exit
        status, or None when it is still running (or was never started)."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            # A paused process would hold SIGTERM until resumed: resume it so it can act on it.
            self.process.send_signal(signal.SIGCONT)
            self.process.terminate()
        try:
            return self.process.wait(timeout=self.wait_s if timeout_s is None else timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        """SIGKILL, when it runs: a crash."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=self.wait_s)

    def pause(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)
