"""Helpers of the failover tests: a bounded producer load that records every acknowledgement, and
the final checks (`harness.verify`) on the stores once the brokers are stopped."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from client import Producer, RocketStoreError, SendStatus
from harness import verify
from store import MessageStore
from support import BROKER_TEST_SETTINGS

TOPIC = "FailoverTopic"


@dataclass
class Load:
    """`threads` producers sending `body_size`-byte messages to the group until `stop()`, at
    most `max_messages` in all and for at most `max_seconds`. Every PUT_OK is recorded with the
    offset the broker gave; anything else is counted by kind."""

    endpoints: str
    threads: int = 2
    body_size: int = 256
    max_messages: int = 100_000
    max_seconds: float = 240.0
    retry_timeout_s: float = 20.0
    acked: dict[str, int] = field(default_factory=dict)  # message id -> CommitLog offset
    outcomes: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _workers: list[threading.Thread] = field(default_factory=list)
    _sent: int = 0

    def start(self) -> "Load":
        for i in range(self.threads):
            worker = threading.Thread(target=self._run, args=(i,), name=f"load-{i}", daemon=True)
            worker.start()
            self._workers.append(worker)
        return self

    def _next(self) -> int | None:
        with self._lock:
            if self._sent >= self.max_messages:
                return None
            self._sent += 1
            return self._sent

    def _run(self, index: int) -> None:
        deadline = time.monotonic() + self.max_seconds
        body = bytes([65 + index]) * self.body_size
        with Producer(self.endpoints, timeout_s=3.0, retry_timeout_s=self.retry_timeout_s) as producer:
            while not self._stop.is_set() and time.monotonic() < deadline:
                if self._next() is None:
                    return
                try:
                    result = producer.send(TOPIC, body, queue_id=index % 4)
                except RocketStoreError as exc:
                    self._count(type(exc).__name__, str(exc))
                    continue
                if result.status is SendStatus.SEND_OK:
                    with self._lock:
                        self.acked[result.msg_id] = result.commit_log_offset
                self._count(result.status.name)

    def _count(self, kind: str, error: str = "") -> None:
        with self._lock:
            self.outcomes[kind] = self.outcomes.get(kind, 0) + 1
            if error and len(self.errors) < 20:
                self.errors.append(error)

    def acked_count(self) -> int:
        with self._lock:
            return len(self.acked)

    def wait_acked(self, count: int, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.acked_count() >= count:
                return True
            if not any(w.is_alive() for w in self._workers):
                return self.acked_count() >= count
            self._stop.wait(0.02)
        return False

    def stop(self) -> dict[str, int]:
        self._stop.set()
        for worker in self._workers:
            worker.join(60)
        return dict(self.acked)


def open_store(store_dir: Path) -> MessageStore:
    """A stopped test broker's store (the test geometry), loaded for reading."""
    return verify.open_store(store_dir, BROKER_TEST_SETTINGS)


messages_by_offset = verify.messages_by_offset
missing_acknowledged = verify.missing_acknowledged
first_difference = verify.first_difference
