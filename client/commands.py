"""The client's `rocketstore` subcommands: produce, consume, status, topic create|list.

Each `*_arguments(parser)` declares a subcommand's arguments and each `run_*(args)` runs it; the
table in `rocketstore/cli.py` names them. Every command takes `--endpoint HOST:PORT` (default
127.0.0.1:10911; produce also takes several of one broker group, `h1:p1;h2:p2`, and follows its
master), `--json`, `--tls-ca-file` and `--request-timeout-s`; admin commands (status, topic)
take `--secret-file FILE` or the ROCKETSTORE_ADMIN_SECRET environment variable (the secret never
appears on a command line or in output).

Conventions (wire/cli_args.py, as the `rocketstore` command's): results on stdout, notes on
stderr, exit 0 when all is well, 1 when something failed or looks wrong, 2 for usage errors;
client errors become one-line `CommandError`s.

- produce: N messages of SIZE bytes (reproducible bodies: the message number, then filler from
  a seeded generator) from C concurrent senders (asyncio tasks on one AsyncProducer, or threads
  on one Producer with `--api threads`), B messages per request; a summary of statuses, errors,
  throughput (MB = 10^6 bytes) and per-request latency. Transport, authentication, not-master and
  protocol errors stop the run (every later request would fail the same way); other refusals
  are counted and the run goes on. Bounded by `--timeout-s`; a progress line on stderr every
  5 s.
- consume: pulls every queue of a topic (or one) concurrently, prints one line (or JSON line)
  per message and a summary; starts at `--from-offset`, at a `--group`'s committed offset
  (BEGINNING when it has none; its progress is committed at the end), or at BEGINNING. A queue
  is done when it has had no new message for `--wait-ms` (long polls on the broker).
- status: the asked broker and, for a master, each of its slaves (each asked in turn at its
  client endpoint); exit 1 when a slave is unreachable or unfit, or a slave is cut off.
- topic create|list: the admin API's topic calls.

Thread-safety: none needed; each run owns its objects (produce's tally takes a lock for threads).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import math
import os
import random
import string
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wire.cli_args import EXIT_OK, EXIT_PROBLEMS, CommandError

from .convert import MAX_BATCH, PartialBatchError, ReceivedMessage, SendResult, SendStatus
from .endpoint import DEFAULT_ENDPOINT, Endpoint, parse_endpoint
from .errors import (
    AuthenticationError,
    BrokerError,
    EndpointError,
    NotMasterError,
    ProtocolError,
    RocketStoreError,
    TransportError,
)

SECRET_ENV = "ROCKETSTORE_ADMIN_SECRET"
CLI_GROUP = "rocketstore-cli"
_FILLER_PERIOD = 251  # bodies rotate through a filler block of size + this many characters
_PREVIEW_CHARS = 40
# A produce run prints a progress line on stderr this often (runs shorter than this print none).
PROGRESS_EVERY_S = 5.0
# A run whose first answers are all this many of the same refusal stops: the rest would be too.
SAME_REFUSAL_LIMIT = 10


# -- argument types ----------------------------------------------------------------------------


def _endpoint(text: str) -> Endpoint:
    try:
        return parse_endpoint(text)
    except EndpointError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


class EndpointGroup(tuple):
    """produce's `--endpoint`: one endpoint, or several of one broker group in the order given
    (the producer follows the group's master among them)."""

    __slots__ = ()

    @property
    def target(self) -> str:
        return ";".join(e.target for e in self)


def _endpoints(text: str) -> EndpointGroup:
    parts = [part for part in text.replace(",", ";").split(";") if part.strip()]
    if not parts:
        raise argparse.ArgumentTypeError(f"no endpoint in {text!r} (expected HOST:PORT[;HOST:PORT...])")
    group: list[Endpoint] = []
    for part in parts:
        endpoint = _endpoint(part)
        if endpoint not in group:
            group.append(endpoint)
    return EndpointGroup(group)


def _int(text: str, low: int, high: int | None = None) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
    if high is not None and value > high:
        raise argparse.ArgumentTypeError(f"must be at most {high}, got {value}")
    return value


def _natural(text: str) -> int:
    return _int(text, 0)


def _positive(text: str) -> int:
    return _int(text, 1)


def _batch(text: str) -> int:
    return _int(text, 1, MAX_BATCH)


def _perm(text: str) -> int:
    return _int(text, 0, 15)


def _non_negative_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} must be 0 or more seconds")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


def _name(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("cannot be empty")
    return text


def _tag(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("cannot be empty")
    if "|" in text:
        raise argparse.ArgumentTypeError(f"a tag cannot contain '|': {text!r}")
    return text


def _common(p: argparse.ArgumentParser, *, admin: bool = False, several: bool = False) -> None:
    if several:
        p.add_argument(
            "--endpoint",
            type=_endpoints,
            default=DEFAULT_ENDPOINT,
            metavar="HOST:PORT[;HOST:PORT...]",
            help=f"the broker's client endpoint, or several of one broker group separated by ';' or ',' "
            f"to follow its master across failovers (default {DEFAULT_ENDPOINT}; IPv6 as [::1]:10911)",
        )
    else:
        p.add_argument(
            "--endpoint",
            type=_endpoint,
            default=DEFAULT_ENDPOINT,
            metavar="HOST:PORT",
            help=f"the broker's client endpoint (default {DEFAULT_ENDPOINT}; IPv6 as [::1]:10911)",
        )
    p.add_argument("--json", action="store_true", help="print results as JSON")
    p.add_argument("--tls-ca-file", metavar="FILE", help="use TLS, trusting this CA certificate")
    p.add_argument(
        "--request-timeout-s", type=_seconds, default=10.0, metavar="S", help="deadline of each call (default 10)"
    )
    if admin:
        p.add_argument(
            "--secret-file",
            metavar="FILE",
            help=f"file holding the broker's admin secret (default: the {SECRET_ENV} variable)",
        )


def _check_tls_file(args: argparse.Namespace) -> None:
    if args.tls_ca_file is not None and not Path(args.tls_ca_file).is_file():
        args.parser.error(f"argument --tls-ca-file: {args.tls_ca_file}: no such file")


def admin_secret(args: argparse.Namespace, environ: dict[str, str] | None = None) -> bytes:
    """The admin secret from --secret-file or the environment; a usage error when neither."""
    from wire.auth import load_secret

    env = os.environ if environ is None else environ
    try:
        if args.secret_file is not None:
            if not Path(args.secret_file).is_file():
                args.parser.error(f"argument --secret-file: {args.secret_file}: no such file")
            secret = load_secret(secret_file=args.secret_file)
        else:
            secret = load_secret(secret=env.get(SECRET_ENV, ""))
    except ValueError as exc:
        raise CommandError(f"admin secret: {exc}") from None
    if not secret:
        source = f"{args.secret_file} is empty" if args.secret_file else f"no --secret-file and {SECRET_ENV} is not set"
        args.parser.error(f"the admin API needs the broker's shared secret: {source}")
    return secret


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=False))


def _fail(exc: RocketStoreError) -> CommandError:
    return CommandError(str(exc))


# -- produce -----------------------------------------------------------------------------------


def produce_arguments(p: argparse.ArgumentParser) -> None:
    _common(p, several=True)
    p.add_argument("--topic", required=True, type=_name, help="the topic to send to")
    p.add_argument(
        "--count",
        type=_positive,
        metavar="N",
        help="messages to send (default 1000 generated ones; 1 with --body; every line with --stdin)",
    )
    p.add_argument("--size", type=_positive, default=1024, metavar="BYTES", help="generated body size (default 1024)")
    bodies = p.add_mutually_exclusive_group()
    bodies.add_argument("--body", metavar="TEXT", help="send TEXT (UTF-8) as the body instead of generated bytes")
    bodies.add_argument(
        "--stdin",
        action="store_true",
        help="send one message per line read from standard input (line end dropped, blank lines skipped)",
    )
    p.add_argument("--keys", metavar="K1,K2", help="the messages' keys (RocketMQ KEYS; comma-separated)")
    p.add_argument(
        "--property",
        dest="properties",
        action="append",
        type=_key_value,
        default=[],
        metavar="K=V",
        help="a user property on every message (repeatable)",
    )
    p.add_argument(
        "--batch", type=_batch, default=1, metavar="B", help=f"messages per request, 1-{MAX_BATCH} (default 1)"
    )
    p.add_argument("--concurrency", type=_batch, default=1, metavar="C", help="requests in flight at once (default 1)")
    p.add_argument("--queue", type=_natural, metavar="Q", help="send to this queue (default: the broker chooses)")
    p.add_argument("--tag", type=_tag, metavar="TAG", help="tag every message")
    p.add_argument(
        "--api",
        choices=("asyncio", "threads"),
        default="asyncio",
        help="C asyncio tasks on one AsyncProducer (default), or C threads on one Producer",
    )
    p.add_argument("--seed", type=_natural, default=0, help="seed of the body filler (default 0)")
    p.add_argument(
        "--retry-timeout-s",
        type=_non_negative_seconds,
        default=10.0,
        metavar="S",
        help="how long one send may follow a moving master or retry a broker that cannot take it now "
        "(default 10; 0: fail at once)",
    )
    p.add_argument("--timeout-s", type=_seconds, default=300.0, metavar="S", help="stop after this long (default 300)")


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def make_body(index: int, size: int, filler: str) -> bytes:
    """Message `index`'s body: its number, then `filler` from a rotating start; `size` bytes."""
    start = index % _FILLER_PERIOD
    head = f"{index:012d} "
    return (head + filler[start : start + size]).encode("ascii")[:size]


def make_filler(size: int, seed: int) -> str:
    rng = random.Random(seed)
    return "".join(rng.choices(string.ascii_letters + string.digits, k=size + _FILLER_PERIOD))


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of ascending values (0.0 for none)."""
    if not sorted_values:
        return 0.0
    rank = max(1, math.ceil(q / 100 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def error_kind(exc: BaseException) -> str:
    if isinstance(exc, NotMasterError):
        return "NOT_MASTER"
    if isinstance(exc, BrokerError):
        return exc.code_name
    if isinstance(exc, TransportError):
        return f"TRANSPORT_{exc.code}"
    if isinstance(exc, AuthenticationError):
        return "UNAUTHENTICATED"
    if isinstance(exc, ProtocolError):
        return "PROTOCOL"
    return type(exc).__name__


def _stops_the_run(exc: BaseException) -> bool:
    return isinstance(exc, (TransportError, AuthenticationError, NotMasterError, ProtocolError)) or not isinstance(
        exc, BrokerError
    )


@dataclass
class ProduceTally:
    """What a produce run saw; `record_*` may be called from several threads."""

    statuses: Counter = field(default_factory=Counter)
    errors: Counter = field(default_factory=Counter)
    # The broker's own text of the first error of each kind.
    error_texts: dict[str, str] = field(default_factory=dict)
    # The same refusal, over and over, with nothing stored yet: (kind, how many in a row).
    _refusals: tuple[str, int] = ("", 0)
    latencies_s: list[float] = field(default_factory=list)
    bytes_stored: int = 0
    stopped_by: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _started: float = field(default_factory=time.perf_counter, repr=False)

    @property
    def stopped(self) -> bool:
        return self.stopped_by is not None

    def record_results(self, results: Sequence[SendResult], sizes: Sequence[int], latency_s: float) -> None:
        with self._lock:
            for result, size in zip(results, sizes):
                self.statuses[result.status.name] += 1
                self.bytes_stored += size
            self.latencies_s.append(latency_s)

    def report_progress(self, total: int) -> None:
        with self._lock:
            done = sum(self.statuses.values()) + sum(self.errors.values())
            started = self._started
        rate = done / (time.perf_counter() - started)
        print(f"produce: {done} of {total} messages answered, {rate:.0f} msgs/s", file=sys.stderr, flush=True)

    def record_error(self, exc: BaseException, sizes: Sequence[int], latency_s: float) -> None:
        with self._lock:
            if isinstance(exc, PartialBatchError):
                for outcome, size in zip(exc.outcomes, sizes):
                    if isinstance(outcome, SendResult):
                        self.statuses[outcome.status.name] += 1
                        self.bytes_stored += size
                    else:
                        self._count_error(outcome, 1)
            else:
                self._count_error(exc, len(sizes))
            self.latencies_s.append(latency_s)
            if _stops_the_run(exc) and self.stopped_by is None:
                self.stopped_by = str(exc)

    def _count_error(self, exc: BaseException, messages: int) -> None:
        kind = error_kind(exc)
        self.errors[kind] += messages
        self.error_texts.setdefault(kind, str(exc))
        if self.statuses:
            return
        last, streak = self._refusals
        streak = streak + messages if kind == last else messages
        self._refusals = (kind, streak)
        if streak >= SAME_REFUSAL_LIMIT and self.stopped_by is None:
            self.stopped_by = f"the first {streak} answers were all {kind}, so the rest would be too: {exc}"


def produce_summary(args: argparse.Namespace, tally: ProduceTally, elapsed_s: float, timed_out: bool) -> dict[str, Any]:
    stored = sum(tally.statuses.values())
    latencies = sorted(tally.latencies_s)
    rate = stored / elapsed_s if elapsed_s > 0 else 0.0
    all_ok = tally.statuses.get(SendStatus.SEND_OK.name, 0) == args.count and not tally.errors and not timed_out
    return {
        "endpoint": args.endpoint.target,
        "topic": args.topic,
        "count": args.count,
        "size": args.size,
        "batch": args.batch,
        "concurrency": args.concurrency,
        "api": args.api,
        "queue": args.queue,
        "statuses": dict(sorted(tally.statuses.items())),
        "errors": dict(sorted(tally.errors.items())),
        "error_texts": dict(sorted(tally.error_texts.items())),
        "stored": stored,
        "requests": len(latencies),
        "elapsed_s": round(elapsed_s, 6),
        "msgs_per_s": round(rate, 1),
        "mb_per_s": round(tally.bytes_stored / elapsed_s / 1e6 if elapsed_s > 0 else 0.0, 3),
        "latency_ms": {
            "p50": round(percentile(latencies, 50) * 1000, 3),
            "p99": round(percentile(latencies, 99) * 1000, 3),
            "max": round((latencies[-1] if latencies else 0.0) * 1000, 3),
        },
        "timed_out": timed_out,
        "stopped_by": tally.stopped_by,
        "ok": all_ok,
    }


def format_produce_summary(s: dict[str, Any]) -> str:
    queue = f", queue {s['queue']}" if s["queue"] is not None else ""
    lines = [
        f"produce {s['topic']} -> {s['endpoint']}: {s['count']} messages x {s['size']} B, batch {s['batch']}, "
        f"concurrency {s['concurrency']} ({s['api']}){queue}",
    ]
    counts = [
        (name, s["statuses"].get(name, 0))
        for name in SendStatus.__members__
        if name in s["statuses"] or name == SendStatus.SEND_OK.name
    ]
    counts += [(f"error {kind}", n) for kind, n in s["errors"].items()]
    texts = s.get("error_texts", {})
    unsent = s["count"] - s["stored"] - sum(s["errors"].values())
    if unsent > 0:
        counts.append(("not sent", unsent))
    width = max(len(label) for label, _ in counts)
    lines += [f"  {label:<{width}}  {n:>10}" for label, n in counts]
    lines += [f"  {kind}: {text}" for kind, text in texts.items() if text != s.get("stopped_by")]
    lat = s["latency_ms"]
    lines.append(f"  elapsed {s['elapsed_s']:.3f} s: {s['msgs_per_s']:.1f} msgs/s, {s['mb_per_s']:.3f} MB/s")
    lines.append(
        f"  latency per request: p50 {lat['p50']:.3f} ms, p99 {lat['p99']:.3f} ms, max {lat['max']:.3f} ms "
        f"({s['requests']} requests)"
    )
    if s["timed_out"]:
        lines.append("  stopped: --timeout-s ran out")
    if s["stopped_by"]:
        lines.append(f"  stopped by: {s['stopped_by']}")
    return "\n".join(lines)


class _Plan:
    """The batches of a run, handed out in order to whichever sender asks next."""

    def __init__(self, args: argparse.Namespace, given: list[bytes] | None = None) -> None:
        """`given`: the bodies to send (--body, --stdin), cycled up to --count; else generated."""
        self.args = args
        self._given = given
        self.filler = "" if given is not None else make_filler(args.size, args.seed)
        self._starts = iter(range(0, args.count, args.batch))
        self._lock = threading.Lock()
        self._keys = [k for k in (args.keys or "").replace(" ", ",").split(",") if k]
        self._properties = dict(args.properties)

    def next_batch(self) -> list[bytes] | None:
        with self._lock:
            start = next(self._starts, None)
        if start is None:
            return None
        end = min(start + self.args.batch, self.args.count)
        if self._given is not None:
            return [self._given[i % len(self._given)] for i in range(start, end)]
        return [make_body(i, self.args.size, self.filler) for i in range(start, end)]

    def messages(self, bodies: list[bytes]) -> list[Any]:
        if self.args.tag is None and not self._keys and not self._properties:
            return bodies
        from .convert import ProducerMessage

        return [
            ProducerMessage(b, tag=self.args.tag, keys=tuple(self._keys), properties=self._properties) for b in bodies
        ]


async def _produce_asyncio(args: argparse.Namespace, plan: _Plan, tally: ProduceTally, deadline: float) -> bool:
    from .producer import AsyncProducer

    producer = AsyncProducer(
        args.endpoint,
        timeout_s=args.request_timeout_s,
        tls_ca_file=args.tls_ca_file,
        retry_timeout_s=args.retry_timeout_s,
    )

    async def sender() -> None:
        while not tally.stopped and time.monotonic() < deadline:
            bodies = plan.next_batch()
            if bodies is None:
                return
            sizes = [len(b) for b in bodies]
            started = time.perf_counter()
            try:
                results = await producer.send_batch(args.topic, plan.messages(bodies), queue_id=args.queue)
            except RocketStoreError as exc:
                tally.record_error(exc, sizes, time.perf_counter() - started)
            else:
                tally.record_results(results, sizes, time.perf_counter() - started)

    async def reporter() -> None:
        while True:
            await asyncio.sleep(PROGRESS_EVERY_S)
            tally.report_progress(args.count)

    progress = asyncio.create_task(reporter())
    try:
        await asyncio.wait_for(
            asyncio.gather(*(sender() for _ in range(args.concurrency))),
            timeout=max(deadline - time.monotonic(), 0.001),
        )
        return False
    except asyncio.TimeoutError:
        return True
    finally:
        progress.cancel()
        await producer.close()


def _produce_threads(args: argparse.Namespace, plan: _Plan, tally: ProduceTally, deadline: float) -> bool:
    from .producer import Producer

    timed_out = threading.Event()
    with Producer(
        args.endpoint,
        timeout_s=args.request_timeout_s,
        tls_ca_file=args.tls_ca_file,
        retry_timeout_s=args.retry_timeout_s,
    ) as producer:

        def sender() -> None:
            while not tally.stopped:
                if time.monotonic() >= deadline:
                    timed_out.set()
                    return
                bodies = plan.next_batch()
                if bodies is None:
                    return
                sizes = [len(b) for b in bodies]
                started = time.perf_counter()
                try:
                    results = producer.send_batch(args.topic, plan.messages(bodies), queue_id=args.queue)
                except RocketStoreError as exc:
                    tally.record_error(exc, sizes, time.perf_counter() - started)
                else:
                    tally.record_results(results, sizes, time.perf_counter() - started)

        threads = [threading.Thread(target=sender, name=f"produce-{i}", daemon=True) for i in range(args.concurrency)]
        for t in threads:
            t.start()
        # Each request ends by its own deadline, so a sender outlives the run by at most one.
        join_by = deadline + args.request_timeout_s + 5
        next_report = time.monotonic() + PROGRESS_EVERY_S
        for t in threads:
            while t.is_alive() and time.monotonic() < join_by:
                t.join(max(min(join_by, next_report) - time.monotonic(), 0))
                if time.monotonic() >= next_report:
                    tally.report_progress(args.count)
                    next_report += PROGRESS_EVERY_S
        if any(t.is_alive() for t in threads):
            timed_out.set()
    return timed_out.is_set()


def _given_bodies(args: argparse.Namespace) -> list[bytes] | None:
    """The bodies --body or --stdin gives (and --count and --size set to match), else None."""
    if args.body is not None:
        given = [args.body.encode("utf-8")]
    elif args.stdin:
        # RocketMQ refuses an empty body: blank lines are skipped.
        given = [text.encode("utf-8") for line in sys.stdin if (text := line.rstrip("\r\n"))]
        if not given:
            raise CommandError("--stdin: standard input held no line to send")
    else:
        if args.count is None:
            args.count = 1000
        return None
    if args.count is None:
        args.count = len(given)
    args.size = max(len(b) for b in given)
    return given


def run_produce(args: argparse.Namespace) -> int:
    _check_tls_file(args)
    plan = _Plan(args, _given_bodies(args))
    tally = ProduceTally()
    started = time.perf_counter()
    deadline = time.monotonic() + args.timeout_s
    if args.api == "asyncio":
        timed_out = asyncio.run(_produce_asyncio(args, plan, tally, deadline))
    else:
        timed_out = _produce_threads(args, plan, tally, deadline)
    summary = produce_summary(args, tally, time.perf_counter() - started, timed_out)
    if args.json:
        _print_json(summary)
    else:
        print(format_produce_summary(summary))
    return EXIT_OK if summary["ok"] else EXIT_PROBLEMS


# -- consume -----------------------------------------------------------------------------------


def consume_arguments(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument("--topic", required=True, type=_name, help="the topic to read")
    p.add_argument("--queue", type=_natural, metavar="Q", help="read this queue only (default: every queue)")
    start = p.add_mutually_exclusive_group()
    start.add_argument("--from-offset", type=_natural, metavar="N", help="start at this offset in each queue")
    start.add_argument(
        "--group",
        type=_name,
        metavar="G",
        help="start at G's committed offsets (BEGINNING when none) and commit progress at the end",
    )
    p.add_argument("--count", type=_positive, metavar="N", help="stop after N messages (default: when caught up)")
    p.add_argument(
        "--wait-ms",
        type=_natural,
        default=0,
        metavar="MS",
        help="a queue is done after this long without a new message (long polls; default 0)",
    )
    p.add_argument("--tag", metavar="EXPR", help="tag filter, e.g. 'TagA||TagB'")
    p.add_argument("--batch", type=_batch, default=32, metavar="B", help="messages per pull (default 32)")


def body_preview(body: bytes, limit: int = _PREVIEW_CHARS) -> str:
    """The start of a body as one printable line (undecodable bytes and controls escaped)."""
    text = body[: limit * 4].decode("utf-8", errors="backslashreplace")
    shown = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text[:limit])
    return shown + ("..." if len(text) > limit or len(body) > limit * 4 else "")


def message_line(m: ReceivedMessage) -> str:
    flag = "" if m.body_crc_ok else " CORRUPT(body digest mismatch)"
    return (
        f"queue={m.queue_id} offset={m.queue_offset} msgId={m.msg_id} size={m.size} tag={m.tag or '-'}"
        f"{flag} body={body_preview(m.body)}"
    )


def message_json(m: ReceivedMessage) -> dict[str, Any]:
    try:
        body, encoding = m.body.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        body, encoding = base64.b64encode(m.body).decode("ascii"), "base64"
    return {
        "topic": m.topic,
        "queue_id": m.queue_id,
        "queue_offset": m.queue_offset,
        "commit_log_offset": m.commit_log_offset,
        "msg_id": m.msg_id,
        "size": m.size,
        "tag": m.tag,
        "keys": list(m.keys),
        "properties": dict(m.properties),
        "born_timestamp_ms": m.born_timestamp_ms,
        "store_timestamp_ms": m.store_timestamp_ms,
        "born_host": m.born_host,
        "store_host": m.store_host,
        "reconsume_times": m.reconsume_times,
        "body_crc_ok": m.body_crc_ok,
        "body": body,
        "body_encoding": encoding,
    }


@dataclass
class _QueueProgress:
    start: int
    next_offset: int
    messages: int = 0
    problem: str | None = None


_MAX_ILLEGAL_IN_A_ROW = 3


async def _consume(
    args: argparse.Namespace, emit: Callable[[ReceivedMessage], None]
) -> tuple[list[int], dict[int, _QueueProgress], bool]:
    from .consumer import AsyncPullConsumer

    consumer = AsyncPullConsumer(
        args.endpoint, args.group or CLI_GROUP, timeout_s=args.request_timeout_s, tls_ca_file=args.tls_ca_file
    )
    try:
        if args.queue is not None:
            queue_ids = [args.queue]
        else:
            queue_ids = await consumer.queues(args.topic)
            if not queue_ids:
                raise CommandError(f"topic {args.topic} has no readable queue on {args.endpoint}")
        progress: dict[int, _QueueProgress] = {}
        for qid in queue_ids:
            if args.from_offset is not None:
                start = args.from_offset
            else:
                committed = await consumer.get_offset(args.topic, qid) if args.group else None
                start = (
                    committed if committed is not None else await consumer.query_offset(args.topic, qid, "BEGINNING")
                )
            progress[qid] = _QueueProgress(start, start)
        budget = {"left": args.count}

        async def drain(qid: int) -> None:
            state = progress[qid]
            last_news = time.monotonic()
            illegal_in_a_row = 0
            while budget["left"] is None or budget["left"] > 0:
                wait_ms = max(int(args.wait_ms - (time.monotonic() - last_news) * 1000), 0)
                asked = time.monotonic()
                result = await consumer.pull(
                    args.topic,
                    qid,
                    state.next_offset,
                    max_messages=args.batch,
                    tag_filter=args.tag,
                    long_polling_ms=wait_ms,
                )
                name = result.status.name
                if name == "OFFSET_ILLEGAL":
                    illegal_in_a_row += 1
                    if result.next_offset == state.next_offset or illegal_in_a_row >= _MAX_ILLEGAL_IN_A_ROW:
                        state.problem = f"offset {state.next_offset} is illegal and the broker offers no other"
                        return
                    print(
                        f"consume: queue {qid}: offset {state.next_offset} is illegal; continuing at "
                        f"{result.next_offset}",
                        file=sys.stderr,
                    )
                    state.next_offset = result.next_offset
                    continue
                illegal_in_a_row = 0
                if name == "NO_NEW_MSG":
                    if wait_ms <= 0:
                        return
                    # A broker that answers long before the wait asked for is not long polling:
                    # pace the retries instead of spinning.
                    if time.monotonic() - asked < wait_ms / 2000:
                        await asyncio.sleep(min(0.05, wait_ms / 1000))
                    continue
                for m in result.messages:
                    if budget["left"] is not None:
                        if budget["left"] <= 0:
                            return
                        budget["left"] -= 1
                    emit(m)
                    state.messages += 1
                    state.next_offset = m.queue_offset + 1
                state.next_offset = max(state.next_offset, result.next_offset)
                if result.messages:
                    last_news = time.monotonic()

        await asyncio.gather(*(drain(qid) for qid in queue_ids))
        committed = False
        if args.group:
            for qid, state in progress.items():
                if state.next_offset != state.start:
                    await consumer.update_offset(args.topic, qid, state.next_offset)
            committed = True
        return queue_ids, progress, committed
    finally:
        await consumer.close()


def run_consume(args: argparse.Namespace) -> int:
    _check_tls_file(args)
    corrupt = 0

    def emit(m: ReceivedMessage) -> None:
        nonlocal corrupt
        corrupt += not m.body_crc_ok
        print(json.dumps(message_json(m)) if args.json else message_line(m))

    try:
        queue_ids, progress, committed = asyncio.run(_consume(args, emit))
    except RocketStoreError as exc:
        raise _fail(exc) from None
    total = sum(p.messages for p in progress.values())
    problems = {qid: p.problem for qid, p in progress.items() if p.problem}
    summary = {
        "topic": args.topic,
        "queues": queue_ids,
        "messages": total,
        "corrupt": corrupt,
        "next_offsets": {str(qid): p.next_offset for qid, p in progress.items()},
        "group": args.group,
        "committed": committed,
        "problems": {str(k): v for k, v in problems.items()},
    }
    if args.json:
        print(json.dumps({"summary": summary}))
    else:
        offsets = " ".join(f"{qid}:{p.next_offset}" for qid, p in progress.items())
        print(
            f"consumed {total} messages from {args.topic} (queues {', '.join(map(str, queue_ids))}); "
            f"next offsets {offsets}"
        )
        if committed:
            print(f"committed these offsets for group {args.group}")
        if corrupt:
            print(f"{corrupt} messages failed their body digest check")
        for qid, problem in problems.items():
            print(f"queue {qid}: {problem}")
    return EXIT_PROBLEMS if corrupt or problems else EXIT_OK


# -- status ------------------------------------------------------------------------------------


def status_arguments(p: argparse.ArgumentParser) -> None:
    _common(p, admin=True)


STATUS_COLUMNS = (
    "broker",
    "id",
    "role",
    "endpoint",
    "max offset",
    "flushed",
    "confirmed",
    "ack/lag bytes",
    "lag s",
    "silent s",
    "fit",
)


def status_rows(asked: dict[str, Any], slaves: dict[str, dict[str, Any] | str]) -> list[dict[str, Any]]:
    """Rows of the cluster table: the asked broker, then (for a master) each slave it lists.
    `slaves` maps a slave's client endpoint to its own status, or to why it could not be asked."""
    rows = [
        {
            "broker": asked["broker_name"],
            "id": asked["broker_id"],
            "role": asked["role"],
            "endpoint": asked["client_endpoint"],
            "max_offset": asked["max_offset"],
            "flushed_offset": asked["flushed_offset"],
            "confirmed_offset": asked["confirmed_offset"],
            "ack_offset": None,
            "lag_bytes": None,
            "lag_seconds": None,
            "silent_seconds": None,
            "fit": None,
            "reachable": True,
            "error": None,
            "replication_error": asked.get("replication_error", ""),
        }
    ]
    for snap in asked.get("slaves") or ():
        endpoint = snap["client_endpoint"]
        answer = slaves.get(endpoint, "no client endpoint known") if endpoint else "no client endpoint known"
        own: dict[str, Any] = answer if isinstance(answer, dict) else {}
        reachable = bool(own)
        rows.append(
            {
                "broker": own["broker_name"] if reachable else asked["broker_name"],
                "id": snap["broker_id"],
                "role": own["role"] if reachable else "unreachable",
                "endpoint": endpoint or snap["ha_peer"],
                "max_offset": own["max_offset"] if reachable else None,
                "flushed_offset": own["flushed_offset"] if reachable else None,
                "confirmed_offset": own["confirmed_offset"] if reachable else None,
                "ack_offset": snap["ack_offset"],
                "lag_bytes": snap["lag_bytes"],
                "lag_seconds": snap["lag_seconds"],
                # Since the slave's last report: a stopped slave shows here before it falls behind.
                "silent_seconds": snap.get("silent_ms", 0) / 1000,
                "fit": snap["fit"],
                "reachable": reachable,
                "error": None if reachable else answer,
                "replication_error": own.get("replication_error", "") if reachable else "",
            }
        )
    return rows


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, float):
        return f"{value:.1f}"
    return str(value)


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[_cell(v) for v in row] for row in rows]
    numeric = [
        all(isinstance(r[i], (int, float)) and not isinstance(r[i], bool) or r[i] is None for r in rows)
        for i in range(len(headers))
    ]
    widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)).rstrip()

    return "\n".join([line(headers)] + [line(c) for c in cells])


def format_status(rows: list[dict[str, Any]], asked: dict[str, Any]) -> str:
    table = format_table(
        STATUS_COLUMNS,
        [
            (
                r["broker"],
                r["id"],
                r["role"],
                r["endpoint"],
                r["max_offset"],
                r["flushed_offset"],
                r["confirmed_offset"],
                None if r["ack_offset"] is None else f"{r['ack_offset']}/{r['lag_bytes']}",
                r["lag_seconds"],
                r["silent_seconds"],
                r["fit"],
            )
            for r in rows
        ],
    )
    lines = [f"cluster {asked['cluster_name']}, epoch {asked['epoch']}", table]
    if asked.get("controller_mode"):
        master_id = asked.get("master_broker_id", -1)
        lines.append(
            f"controller mode: master {'none elected' if master_id < 0 else f'broker {master_id}'}, in-sync "
            f"{sorted(asked.get('in_sync_replica_ids') or [])}, group max offset {asked.get('group_max_offset', 0)}"
            + (f", lease left {asked['lease_valid_ms']} ms" if asked.get("lease_valid_ms") else "")
            + (
                f", LAST ELECTION WAS UNCLEAN: up to {asked['unclean_lost_bytes']} bytes may be lost"
                if asked.get("unclean_lost_bytes")
                else ""
            )
        )
        if asked.get("controller_error"):
            lines.append(f"etcd: {asked['controller_error']}")
    for r in rows:
        if not r["reachable"]:
            lines.append(f"slave {r['id']} at {r['endpoint']}: unreachable: {r['error']}")
        elif r.get("replication_error"):
            lines.append(f"slave {r['id']} at {r['endpoint']}: last replication error: {r['replication_error']}")
    if asked["role"] == "SLAVE":
        state = "connected" if asked.get("master_connected") else "NOT connected"
        behind = max(asked.get("master_max_offset", 0) - asked["max_offset"], 0)
        lines.append(
            f"replicating from {asked.get('master_ha_address') or 'an unknown master'}: {state}, "
            f"master max offset {asked.get('master_max_offset', 0)} ({behind} bytes behind)"
        )
        if asked.get("replication_error"):
            lines.append(f"last replication error: {asked['replication_error']}")
        synced = asked.get("metadata_synced_ms", 0)
        copied = f"last at {_utc(synced)}" if synced else "not yet"
        lines.append(
            f"topics, consumer offsets and delay cursors copied from the master: {copied}"
            + (f" (last attempt failed: {asked['metadata_error']})" if asked.get("metadata_error") else "")
        )
    elif not asked.get("slaves"):
        lines.append("no slave connected")
    lines.extend(damage_lines(asked))
    return "\n".join(lines)


def _damage(asked: dict[str, Any]) -> dict[str, Any]:
    return (asked.get("stats") or {}).get("damage") or {}


def damage_lines(asked: dict[str, Any]) -> list[str]:
    """What the broker's store found damaged (from its statistics): records it does not serve or
    replicate, and the slaves whose replication stops at one."""
    damage = _damage(asked)
    lines = []
    count = damage.get("record_count", 0)
    if count:
        lines.append(
            f"DAMAGED RECORDS: {count} (body CRC mismatch: not served, not replicated; docs/store.md, "
            "'Damaged records')"
        )
        for r in damage.get("records") or ():
            where = f"{r['topic']}:{r['queue_id']} queue offset {r['queue_offset']}, " if r.get("topic") else ""
            lines.append(f"  CommitLog offset {r['offset']} ({where}{r['reason']}), refused {r['refusals']} time(s)")
    for slave_id, offset in sorted((damage.get("held_replication") or {}).items()):
        lines.append(f"replication to slave {slave_id} held at offset {offset}: the record there is damaged")
    return lines


def _utc(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ms / 1000))


def status_problems(rows: list[dict[str, Any]], asked: dict[str, Any]) -> bool:
    damage = _damage(asked)
    if damage.get("record_count") or damage.get("held_replication"):
        return True
    if asked["role"] == "SLAVE":
        return not asked.get("master_connected")
    return any(not r["reachable"] or r["fit"] is False for r in rows[1:])


def _asked_status(args: argparse.Namespace) -> tuple[dict[str, Any], bytes]:
    """The admin status of the broker `--endpoint` names, and the admin secret used to ask."""
    from .admin import AdminClient

    secret = admin_secret(args)
    _check_tls_file(args)
    try:
        with AdminClient(
            args.endpoint, secret, timeout_s=args.request_timeout_s, tls_ca_file=args.tls_ca_file
        ) as admin:
            return admin.status(), secret
    except RocketStoreError as exc:
        raise _fail(exc) from None


def run_status(args: argparse.Namespace) -> int:
    from .admin import AdminClient

    asked, secret = _asked_status(args)
    slaves: dict[str, dict[str, Any] | str] = {}
    if asked["role"] != "SLAVE":
        for snap in asked.get("slaves") or ():
            endpoint = snap["client_endpoint"]
            if not endpoint or endpoint in slaves:
                continue
            try:
                with AdminClient(
                    endpoint, secret, timeout_s=min(args.request_timeout_s, 5.0), tls_ca_file=args.tls_ca_file
                ) as slave_admin:
                    slaves[endpoint] = slave_admin.status()
            except RocketStoreError as exc:
                slaves[endpoint] = str(exc)
    rows = status_rows(asked, slaves)
    problems = status_problems(rows, asked)
    if args.json:
        _print_json({"asked": asked, "brokers": rows, "problems": problems})
    else:
        print(format_status(rows, asked))
    return EXIT_PROBLEMS if problems else EXIT_OK


def run_health(args: argparse.Namespace) -> int:
    """The broker answers: one line with its role and offsets, exit 0 (its peers are not asked)."""
    asked, _ = _asked_status(args)
    if args.json:
        _print_json({"role": asked["role"], "max_offset": asked["max_offset"], "epoch": asked.get("epoch", 0)})
    else:
        print(f"{asked['role']} max offset {asked['max_offset']} epoch {asked.get('epoch', 0)}")
    return EXIT_OK


# -- topic -------------------------------------------------------------------------------------


def perm_text(perm: int) -> str:
    """RocketMQ's perm string: R, W, X (inherit) or '-' in each place."""
    return ("R" if perm & 4 else "-") + ("W" if perm & 2 else "-") + ("X" if perm & 1 else "-")
