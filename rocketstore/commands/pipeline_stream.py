"""`rocketstore pipeline stream`: topics of a running broker into Parquet, through Spark
Structured Streaming and the `rocketstore` source (`pipeline.stream_source`).

    rocketstore pipeline [--master SPARK_MASTER] stream --endpoint HOST:PORT --topics A,B \\
        --out-dir DIR --checkpoint-dir DIR [--trigger available-now|processing-time:N] \\
        [--max-messages-per-trigger N] [--starting-offsets earliest|latest] [--group G] \\
        [--allow-data-loss] [--partition-by topic|none] [--run-seconds S] [--json]

`available-now` (the default) reads what the broker holds when the run starts, in batches of at
most `--max-messages-per-trigger`, then stops; `processing-time:N` starts a batch every N seconds
(`5`, `1.5s`, `250ms`) until `--run-seconds` pass, or SIGINT/SIGTERM. Rerunning with the same
checkpoint directory goes on where the last run stopped; every message lands in the output once.
Progress (one line per batch: messages, lag) goes to stderr; the summary (messages, batches, end
offsets, the lag left per queue measured against the broker at the end) to stdout, `--json` for
JSON. Exit 0 when the query ran to its end, 1 when it failed (a lost range, an unreachable broker:
one line saying why), 2 for usage errors.

`add_stream_arguments(parser)` declares the arguments on the `stream` subparser (the parent
`pipeline` parser holds `--master`, read here as `args.spark_master`); `run_stream(args)` runs it
on the main thread.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .args import names, parsed, positive
from .args import seconds as seconds_arg
from .common import CommandError, print_progress

AVAILABLE_NOW = "available-now"
PROCESSING_TIME = "processing-time"
PROGRESS_POLL_S = 1.0
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s)?")
_PARTITION_COLUMNS = ("topic", "queue_id")


def parse_trigger(text: str) -> tuple[str, float | None]:
    """`available-now` -> (AVAILABLE_NOW, None); `processing-time:N[s|ms]` -> (PROCESSING_TIME, seconds)."""
    raw = text.strip().lower()
    if raw == AVAILABLE_NOW:
        return AVAILABLE_NOW, None
    kind, colon, interval = raw.partition(":")
    match = _DURATION.fullmatch(interval.strip()) if kind == PROCESSING_TIME and colon else None
    if match is None:
        raise ValueError(f"trigger {text!r}: expected {AVAILABLE_NOW} or {PROCESSING_TIME}:SECONDS (5, 1.5s, 250ms)")
    seconds = float(match.group(1)) / (1000 if match.group(2) == "ms" else 1)
    if seconds <= 0:
        raise ValueError(f"trigger {text!r}: the interval must be positive")
    return PROCESSING_TIME, seconds


def _trigger(text: str) -> tuple[str, float | None]:
    return parsed(text, parse_trigger)


def _endpoint(text: str) -> str:
    from .connection import endpoint_arg

    return endpoint_arg(text).target


def _topics(text: str) -> list[str]:
    topics = names(text)
    if not topics:
        raise argparse.ArgumentTypeError("name at least one topic")
    return topics


def _partition_by(text: str) -> list[str]:
    if text.strip().lower() == "none":
        return []
    columns = [c.strip() for c in text.split(",") if c.strip()]
    for column in columns:
        if column not in _PARTITION_COLUMNS:
            choices = ", ".join(_PARTITION_COLUMNS)
            raise argparse.ArgumentTypeError(f"cannot partition by {column!r}; choose from {choices} or none")
    return columns


def add_stream_arguments(parser: argparse.ArgumentParser) -> None:
    from client import DEFAULT_ENDPOINT

    from .connection import ENDPOINT_ENV, default_endpoint

    parser.add_argument(
        "--endpoint",
        type=_endpoint,
        default=default_endpoint(),
        metavar="HOST:PORT",
        help=f"the broker's client endpoint, master or slave (default ${ENDPOINT_ENV}, else {DEFAULT_ENDPOINT})",
    )
    parser.add_argument("--topics", required=True, type=_topics, metavar="A,B", help="the topics to read")
    parser.add_argument("--out-dir", required=True, metavar="DIR", help="where the Parquet files go")
    parser.add_argument(
        "--checkpoint-dir",
        required=True,
        metavar="DIR",
        help="Spark's checkpoint (offsets and commits); reuse it to go on where a run stopped",
    )
    parser.add_argument(
        "--trigger",
        type=_trigger,
        default=(AVAILABLE_NOW, None),
        metavar="TRIGGER",
        help=f"{AVAILABLE_NOW} (default: what the broker holds now, then stop) or "
        f"{PROCESSING_TIME}:N (a batch every N seconds)",
    )
    parser.add_argument("--max-messages-per-trigger", type=positive, metavar="N", help="cap on messages per batch")
    parser.add_argument(
        "--starting-offsets",
        choices=("earliest", "latest"),
        default="earliest",
        help="where a new checkpoint starts (default earliest)",
    )
    parser.add_argument("--group", metavar="G", help="commit each finished batch's offsets to the broker under G")
    parser.add_argument(
        "--allow-data-loss",
        action="store_true",
        help="skip ranges the broker no longer holds instead of failing (failOnDataLoss=false)",
    )
    parser.add_argument(
        "--partition-by",
        type=_partition_by,
        default=["topic"],
        metavar="COLS",
        help="Parquet partition columns: topic (default), queue_id, or none",
    )
    parser.add_argument(
        "--pull-batch-size", type=positive, metavar="N", help="messages per pull (default 256, max 1024)"
    )
    parser.add_argument(
        "--run-seconds", type=seconds_arg, metavar="S", help=f"with {PROCESSING_TIME}: stop after S seconds"
    )
    parser.add_argument("--tls-ca-file", metavar="FILE", help="use TLS, trusting this CA certificate")
    parser.add_argument(
        "--request-timeout-s",
        type=seconds_arg,
        default=10.0,
        metavar="S",
        help="deadline of each broker call (default 10)",
    )
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


def source_options(args: argparse.Namespace) -> dict[str, str]:
    """The `rocketstore` source's options for these arguments."""
    options = {
        "endpoint": args.endpoint,
        "topics": ",".join(args.topics),
        "startingOffsets": args.starting_offsets,
        "failOnDataLoss": "false" if args.allow_data_loss else "true",
        "requestTimeoutS": str(args.request_timeout_s),
    }
    for name, value in (
        ("maxMessagesPerTrigger", args.max_messages_per_trigger),
        ("group", args.group),
        ("pullBatchSize", args.pull_batch_size),
        ("tlsCaFile", args.tls_ca_file),
    ):
        if value is not None:
            options[name] = str(value)
    return options


def query_error_line(text: str) -> str:
    """The line of a failed query's (long, Java-wrapped) error that says why."""
    from pipeline.stream_source import FORMAT

    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    marker = f"{FORMAT}: "
    for line in lines:
        at = line.find(marker)
        if at >= 0:
            return line[at:]
    for line in lines:
        if "Error:" in line and not line.startswith(("at ", "File ")):
            return line[:500]
    return lines[0][:500] if lines else "the streaming query failed"


def checkpoint_end_offsets(checkpoint_dir: str | Path) -> dict | None:
    """The source's offsets of the newest batch in a checkpoint's offset log (its last line), or
    None when there is none or it does not parse."""
    from pipeline.stream_source import StreamSourceError, decode_offsets

    offsets_dir = Path(checkpoint_dir) / "offsets"
    batches = sorted((int(p.name) for p in offsets_dir.glob("*") if p.name.isdigit()), reverse=True)
    if not batches:
        return None
    lines = (offsets_dir / str(batches[0])).read_text().splitlines()
    try:
        return decode_offsets(json.loads(lines[-1]))
    except (ValueError, IndexError, StreamSourceError):
        return None


@dataclass
class _Run:
    seen: set[tuple[int, str]] = field(default_factory=set)
    batches: set[int] = field(default_factory=set)
    messages: int = 0
    end: dict | None = None

    def absorb(self, progress_list: list[dict[str, Any]]) -> None:
        from pipeline.stream_source import lag_from_progress

        for progress in progress_list:
            batch_id = int(progress.get("batchId", -1))
            # An idle trigger reports the batch id the next batch will take: the time tells them apart.
            key = (batch_id, str(progress.get("timestamp")))
            if key in self.seen:
                continue
            self.seen.add(key)
            report = lag_from_progress(progress)
            lag = f", lag {report.total} messages over {len(report.lag)} queue(s)" if report is not None else ""
            durations = progress.get("durationMs") or {}
            if "addBatch" not in durations:
                print_progress(f"pipeline stream: idle{lag}")
                continue
            if report is not None:
                self.end = report.end
            rows = int(progress.get("numInputRows", 0) or 0)
            self.batches.add(batch_id)
            self.messages += rows
            seconds = durations.get("triggerExecution", 0) / 1000
            print_progress(f"pipeline stream: batch {batch_id}: {rows} messages in {seconds:.1f} s{lag}")


def _stop_on_signals(flag: dict) -> dict:
    def handler(signum, frame):
        flag["stop"] = signal.Signals(signum).name

    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        previous[sig] = signal.signal(sig, handler)
    return previous


def _run_query(args: argparse.Namespace, options: dict[str, str], kind: str, interval_s: float | None):
    """Start the query, follow its progress until it ends or is told to stop; (run, flag, error)."""
    from pyspark.errors import StreamingQueryException

    from pipeline.spark import session
    from pipeline.stream_source import register

    master = getattr(args, "spark_master", None) or "local[*]"
    print_progress(f"pipeline stream: starting Spark ({master})")
    spark = session(master, progress_bar=False, conf=dict(getattr(args, "spark_conf", [])))
    register(spark)
    reader = spark.readStream.format("rocketstore")
    for name, value in options.items():
        reader = reader.option(name, value)
    writer = (
        reader.load()
        .writeStream.format("parquet")
        .option("path", str(args.out_dir))
        .option("checkpointLocation", str(args.checkpoint_dir))
    )
    if args.partition_by:
        writer = writer.partitionBy(*args.partition_by)
    if kind == AVAILABLE_NOW or interval_s is None:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{int(interval_s * 1000)} milliseconds")

    run = _Run()
    flag: dict = {}
    previous = _stop_on_signals(flag)
    try:
        started = time.monotonic()
        query = writer.start()
        every = f" every {interval_s:g} s" if interval_s else ""
        print_progress(f"pipeline stream: query {query.id} started, trigger {kind}{every}")
        while query.isActive:
            if flag.get("stop"):
                break
            if args.run_seconds is not None and time.monotonic() - started >= args.run_seconds:
                flag["stop"] = "run time reached"
                break
            try:
                query.awaitTermination(PROGRESS_POLL_S)
            except StreamingQueryException:
                break  # query.exception() below has it
            run.absorb(query.recentProgress)
        if query.isActive:
            query.stop()
        run.absorb(query.recentProgress)
        return run, flag, query.exception()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_stream(args: argparse.Namespace) -> int:
    from client import RocketStoreError
    from pipeline.stream_source import RocketStoreStreamReader, StreamOptions, StreamSourceError, queue_label, queue_lag

    kind, interval_s = args.trigger
    if args.run_seconds is not None and kind != PROCESSING_TIME:
        raise CommandError(f"--run-seconds goes with --trigger {PROCESSING_TIME}:N")
    if args.tls_ca_file is not None and not Path(args.tls_ca_file).is_file():
        raise CommandError(f"--tls-ca-file {args.tls_ca_file}: no such file")
    options = source_options(args)
    try:
        probe = RocketStoreStreamReader(StreamOptions.parse(options))
    except StreamSourceError as exc:
        raise CommandError(str(exc)) from None
    # Ask the broker before starting Spark: a wrong endpoint fails in a second, not after a JVM start.
    try:
        before = probe.queue_offsets("END")
        print_progress(f"pipeline stream: {args.endpoint} holds {len(before)} queue(s) of {', '.join(args.topics)}")
        run, flag, error = _run_query(args, options, kind, interval_s)
        end = run.end if run.end is not None else checkpoint_end_offsets(args.checkpoint_dir)
        lag: dict | None = None
        try:
            latest = probe.queue_offsets("END")
            if end is not None:
                end = probe.resolve(end)
            lag = queue_lag(end, latest) if end is not None else None
        except (RocketStoreError, StreamSourceError) as exc:
            print_progress(f"pipeline stream: cannot measure the lag at the end: {exc}")
    except RocketStoreError as exc:
        raise CommandError(f"pipeline stream: {exc}") from None
    finally:
        probe.stop()
    stopped = flag.get("stop") or ("caught up with the broker" if kind == AVAILABLE_NOW else "the query ended")
    summary = {
        "endpoint": args.endpoint,
        "topics": list(args.topics),
        "out_dir": str(args.out_dir),
        "checkpoint_dir": str(args.checkpoint_dir),
        "trigger": kind if interval_s is None else f"{kind}:{interval_s:g}",
        "batches": len(run.batches),
        "messages": run.messages,
        "end_offsets": {queue_label(k): v for k, v in sorted(end.items())} if end is not None else None,
        "lag": {queue_label(k): v for k, v in lag.items()} if lag is not None else None,
        "lag_total": sum(lag.values()) if lag is not None else None,
        "stopped": stopped if error is None else "failed",
        "error": query_error_line(str(error)) if error is not None else None,
    }
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(
            f"Streamed {summary['messages']} messages from {', '.join(args.topics)} "
            f"in {summary['batches']} batch(es) to {args.out_dir} ({summary['stopped']})"
        )
        if lag is not None:
            behind = {k: v for k, v in summary["lag"].items() if v}
            detail = ": " + ", ".join(f"{k} {v}" for k, v in behind.items()) if behind else ""
            print(f"  lag: {summary['lag_total']} messages{detail}")
        if summary["error"]:
            print(f"  ERROR: {summary['error']}")
    if error is not None:
        raise CommandError(f"pipeline stream: {summary['error']}")
    return 0
