"""The fuzzer's moving parts: a `Target` (one broker and what may be said to it), the workers that
send it requests (one gRPC and, with remoting, one remoting worker per broker), their `Stats`, and
the `Monitor` that probes every broker and restarts one that stops answering or dies.

Each worker draws every choice from its own `random.Random`, seeded from the run's seed and the
worker's name, and never from an answer: a seed replays the same requests in the same order on
every worker (how many get sent depends on the time they take). Modes, per request: `valid` (as a
client would send it), `mutated` (structure-aware: fields of the request changed), `raw` (the
encoded request's bytes changed) and `random` (random bytes).

Threads: a worker per target, the monitor, and the caller's. A worker owns its RNG, connection and
`Stats`; the caller merges the stats after joining the workers. A target's `ready` event is cleared
by the monitor while it restarts the broker, and its workers wait on it.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from harness.local_cluster import LocalBroker
from wire.remoting import RemotingCommand, RequestCode
from wire.rpc import messaging_pb2 as pb

from .brokers import ADMIN as ADMIN_CREDENTIALS
from .brokers import APP, OUTSIDER, TOPIC, stop_timed
from .grpc_calls import (
    ACL_AUTH,
    ADMIN,
    ADMIN_AUTH,
    MESSAGING,
    REPLICATION,
    AdminAuth,
    Headers,
    Method,
    RawChannel,
    acl_metadata,
)
from .grpc_inputs import FuzzContext, defang, defang_bytes, valid_request
from .mutation import mutate_bytes, mutate_message, random_bytes
from .remoting_inputs import SERVED, UNSERVED, encodable, mutate_command, raw_frame, valid_command
from .remoting_io import RemotingSocket, one_request, request_label

MODES = ("valid", "mutated", "raw", "random")
MODE_WEIGHTS = (2, 4, 3, 1)
GRPC_TIMEOUT_S = 5.0
REMOTING_TIMEOUT_S = 3.0
RAW_TIMEOUT_S = 0.5
# Answers that mean the broker failed at something rather than refused it: each gets an example.
UNEXPECTED = frozenset(
    {
        "UNKNOWN",
        "INTERNAL",
        "DATA_LOSS",
        "OK/INTERNAL_ERROR",
        "OK/INTERNAL_SERVER_ERROR",
        "OK/UNDECODABLE",
        "OK/NO_STATUS",
        "SYSTEM_ERROR/internal",
        "bad-answer",
    }
)


@dataclass
class Target:
    label: str  # "open master", "acl slave1"
    broker: LocalBroker
    ctx: FuzzContext
    secret: bytes
    acl: bool = False
    remoting: bool = False
    master: bool = False
    ready: threading.Event = field(default_factory=threading.Event)
    retired: bool = False
    channel: RawChannel | None = None

    def __post_init__(self) -> None:
        self.ready.set()
        self.channel = RawChannel(self.broker.client_endpoint)

    def close(self) -> None:
        if self.channel is not None:
            self.channel.close()


@dataclass
class Stats:
    sent: Counter = field(default_factory=Counter)  # method -> requests
    answers: defaultdict = field(default_factory=lambda: defaultdict(Counter))  # method -> answer -> n
    transport: defaultdict = field(default_factory=lambda: defaultdict(Counter))  # method -> error -> n
    modes: Counter = field(default_factory=Counter)
    examples: dict = field(default_factory=dict)  # (method, answer) -> detail

    def record(self, method: str, mode: str, answer: str | None, transport: str | None, detail: str = "") -> None:
        self.sent[method] += 1
        self.modes[mode] += 1
        if answer is not None:
            self.answers[method][answer] += 1
            if answer in UNEXPECTED and (method, answer) not in self.examples:
                self.examples[method, answer] = f"[{mode}] {detail}"[:300]
        else:
            self.transport[method][transport or "?"] += 1

    def merge(self, other: Stats) -> None:
        self.sent.update(other.sent)
        self.modes.update(other.modes)
        for method, counts in other.answers.items():
            self.answers[method].update(counts)
        for method, counts in other.transport.items():
            self.transport[method].update(counts)
        for key, detail in other.examples.items():
            self.examples.setdefault(key, detail)


class Worker(threading.Thread):
    def __init__(self, name: str, target: Target, seed: int, deadline: float, max_requests: int) -> None:
        super().__init__(name=name, daemon=True)
        self.target = target
        self.rng = random.Random(f"{seed}/{name}")
        self.deadline = deadline
        self.max_requests = max_requests
        self.stats = Stats()
        self.sent = 0
        self.error: BaseException | None = None

    def step(self) -> None:
        raise NotImplementedError

    def run(self) -> None:
        try:
            while time.monotonic() < self.deadline and self.sent < self.max_requests and not self.target.retired:
                if not self.target.ready.wait(min(60.0, max(0.0, self.deadline - time.monotonic()))):
                    continue
                self.step()
                self.sent += 1
        except BaseException as exc:  # noqa: BLE001 - reported by the caller, not lost in a thread
            self.error = exc

    def mode(self) -> str:
        return self.rng.choices(MODES, MODE_WEIGHTS)[0]


class GrpcWorker(Worker):
    """MessagingService, Admin and (on a master) Replication calls to one broker's gRPC ports."""

    def __init__(self, name: str, target: Target, seed: int, deadline: float, max_requests: int) -> None:
        super().__init__(name, target, seed, deadline, max_requests)
        assert target.channel is not None
        self.admin_auth = AdminAuth(target.secret, target.channel.identify(), self.rng)
        self.ha_channel = RawChannel(target.broker.ha_endpoint) if target.master else None

    def _metadata(self, method: Method) -> tuple[str, Headers]:
        """How the call is authenticated, and its metadata (an admin call's is made by `_sign`,
        once its bytes are known)."""
        rng = self.rng
        if method.service == "Admin":
            return rng.choice(ADMIN_AUTH), ()
        if method.service == "Replication":
            how = rng.choice(("none", "none", "garbage"))
            header = f"v2 {rng.randbytes(32).hex()} {rng.randbytes(32).hex()}"
            return how, (("x-rs-auth", header),) if how == "garbage" else ()
        if self.target.acl:
            how = rng.choice(ACL_AUTH)
            return how, tuple(acl_metadata(how, rng, APP, ADMIN_CREDENTIALS, OUTSIDER))
        return "none", ()

    def step(self) -> None:
        rng, ctx = self.rng, self.target.ctx
        services = [MESSAGING, MESSAGING, MESSAGING, ADMIN, ADMIN]
        if self.ha_channel is not None:
            services.append(REPLICATION)
        method = rng.choice(rng.choice(services))
        mode = self.mode()
        how, metadata = self._metadata(method)
        authenticated = method.service == "Admin" and how in ("signed", "replayed")
        requests = valid_request(method.service, method.name, rng, ctx)
        if mode == "mutated":
            at = rng.randrange(len(requests))
            requests[at] = mutate_message(requests[at], rng, ctx.known())
        if authenticated and mode in ("valid", "mutated"):
            requests = [defang(method.name, r) for r in requests]
        payloads = [r.SerializeToString() for r in requests]
        if mode == "raw":
            payloads = [mutate_bytes(p, rng) for p in payloads]
        elif mode == "random":
            payloads = [random_bytes(rng) for _ in payloads]
        if authenticated and mode in ("raw", "random"):
            payloads = [defang_bytes(method.request, method.name, p) for p in payloads]
        if method.service == "Admin":  # unary: one payload, and the signature covers its bytes
            metadata, payloads[0] = self.admin_auth.sign(how, method.path, payloads[0])
        channel = self.ha_channel if method.service == "Replication" else self.target.channel
        assert channel is not None
        outcome = channel.call(method, payloads, metadata, GRPC_TIMEOUT_S)
        self.stats.record(
            f"grpc {method.service}/{method.name}", mode, outcome.answer, outcome.transport, outcome.detail
        )

    def run(self) -> None:
        try:
            super().run()
        finally:
            if self.ha_channel is not None:
                self.ha_channel.close()


class RemotingWorker(Worker):
    """Requests of every code (and some the broker does not serve) to one broker's remoting port."""

    def __init__(self, name: str, target: Target, seed: int, deadline: float, max_requests: int) -> None:
        super().__init__(name, target, seed, deadline, max_requests)
        self.conn: RemotingSocket | None = None
        self.opaque = 0
        # Frames sent since the last answer, for the monitor's report of a stuck broker.
        self.unanswered: list[tuple[float, str, str]] = []

    def _connection(self) -> RemotingSocket | None:
        if self.conn is None or self.conn.closed:
            try:
                self.conn = RemotingSocket(self.target.broker.remoting_endpoint)
            except (OSError, KeyError):
                self.conn = None
        return self.conn

    def _drop(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def step(self) -> None:
        rng, ctx = self.rng, self.target.ctx
        self.opaque += 1
        code = rng.choice(SERVED) if rng.random() < 0.9 else rng.choice(UNSERVED)
        mode = self.mode()
        command = valid_command(code, self.opaque, rng, ctx)
        if mode == "mutated":
            command = mutate_command(command, rng, ctx.known())
        frame = encodable(command)
        label = f"remoting {request_label(command.code)}"
        if frame is None:
            self.stats.record(label, mode, None, "unencodable")
            return
        if mode == "raw":
            frame = raw_frame(frame, rng)
        elif mode == "random":
            frame, label = random_bytes(rng, 256), "remoting RANDOM_BYTES"
        conn = self._connection()
        if conn is None:
            self.stats.record(label, mode, None, "connect-failed")
            self.target.ready.wait(1.0)
            return
        self.unanswered.append((time.monotonic(), mode, frame[:256].hex()))
        del self.unanswered[:-16]
        if mode in ("raw", "random") or (command.is_response and not command.is_oneway):
            # No answer is due (a response is dropped, a damaged frame may never complete): a
            # probe behind it says what became of it without waiting out a deadline.
            result = conn.exchange_raw(frame, RAW_TIMEOUT_S)
            self._drop()
        else:
            result = conn.exchange(command, REMOTING_TIMEOUT_S)
            if result.transport is not None:
                self._drop()
        if result.answer is not None or result.transport in ("swallowed", "refused"):
            self.unanswered.clear()
        answer = result.answer
        if answer == "SYSTEM_ERROR" and result.remark.startswith("internal error"):
            answer = "SYSTEM_ERROR/internal"  # an exception in the broker, not a designed refusal
        self.stats.record(label, mode, answer, result.transport, result.remark)

    def run(self) -> None:
        try:
            super().run()
        finally:
            self._drop()


# -- liveness ---------------------------------------------------------------------------------------


@dataclass
class Finding:
    at_s: float
    broker: str
    what: str
    detail: list[str]


def _grpc_alive(target: Target) -> bool:
    method = next(m for m in MESSAGING if m.name == "QueryRoute")
    request = pb.QueryRouteRequest(topic=pb.Resource(name=TOPIC)).SerializeToString()
    metadata = tuple(acl_metadata("app", random.Random(0), APP, ADMIN_CREDENTIALS, OUTSIDER)) if target.acl else ()
    assert target.channel is not None
    return target.channel.call(method, [request], metadata, 5.0).answer is not None


def _remoting_alive(target: Target) -> bool:
    try:
        endpoint = target.broker.remoting_endpoint
    except KeyError:
        return False
    probe = RemotingCommand(RequestCode.GET_MAX_OFFSET, 1, 0, {"topic": TOPIC, "queueId": "0"})
    return one_request(endpoint, probe, 5.0).answer is not None


class Monitor(threading.Thread):
    """Probes every target's gRPC (and remoting) port every `interval_s`; a broker that died, or
    failed two probes in a row, is recorded as a finding and restarted (at most `max_restarts`
    times, then its targets retire)."""

    def __init__(
        self,
        targets: list[Target],
        suspects: Callable[[Target], list[str]],
        started: float,
        interval_s: float = 2.0,
        max_restarts: int = 3,
    ) -> None:
        super().__init__(name="edge-monitor", daemon=True)
        self.targets = targets
        self.suspects = suspects
        self.started = started
        self.interval_s = interval_s
        self.max_restarts = max_restarts
        self.findings: list[Finding] = []
        self.probes = 0
        self.failed_probes = 0
        self.restarts: Counter = Counter()
        self._failures: Counter = Counter()
        self._stopping = threading.Event()

    def stop(self) -> None:
        self._stopping.set()
        self.join(timeout=120)

    def run(self) -> None:
        while not self._stopping.wait(self.interval_s):
            for target in self.targets:
                if target.retired or self._stopping.is_set():
                    continue
                self.check(target)

    def check(self, target: Target) -> None:
        broker = target.broker
        if not broker.running():
            code = broker.process.returncode if broker.process is not None else None
            self._restart(target, f"the process exited (status {code})", broker.tail(8).splitlines())
            return
        self.probes += 1
        failed = []
        if not _grpc_alive(target):
            failed.append("gRPC")
        if target.remoting and not _remoting_alive(target):
            failed.append("remoting")
        if not failed:
            self._failures[target.label] = 0
            return
        self.failed_probes += 1
        self._failures[target.label] += 1
        if self._failures[target.label] >= 2:
            what = f"{' and '.join(failed)} did not answer two probes in a row (5 s each)"
            self._restart(target, what, self.suspects(target))

    def _restart(self, target: Target, what: str, detail: list[str]) -> None:
        broker = target.broker
        at = time.monotonic() - self.started
        target.ready.clear()
        stopped = stop_timed(broker)
        self.restarts[target.label] += 1
        self._failures[target.label] = 0
        if self.restarts[target.label] > self.max_restarts:
            target.retired = True
            target.ready.set()
            self.findings.append(Finding(at, target.label, what, [*detail, stopped, "retired: no more restarts"]))
            return
        try:
            broker.restart(timeout_s=60)
            restarted = "restarted"
        except Exception as exc:  # noqa: BLE001 - the finding says what happened
            restarted = f"restart failed: {exc}"
            target.retired = True
        target.ready.set()
        self.findings.append(Finding(at, target.label, what, [*detail, stopped, restarted]))
