"""The `rocketstore` command: one argparse parser with a subcommand per job.

Subcommands are listed in `COMMANDS`; each names a function that declares its arguments and a
"module:function" that runs it. Only the chosen subcommand's arguments are declared and only its
module is imported, so `rocketstore --help` stays fast and a later subcommand (broker, produce,
pipeline ...) is one more `Command` entry pointing at its own module.

Conventions for every subcommand: results on stdout, logs and progress on stderr (`-v` for debug
logs), exit status 0 when all is well, 1 when problems were found or the job failed, 2 for usage
errors (argparse's own). Expected failures (a locked, corrupt or malformed store, a bad config)
print one clear line, never a traceback. Runs on the main thread of its own process.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from wire import cli_args
from wire.cli_args import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, CommandError

log = logging.getLogger("rocketstore")

# Progress lines for stores at least this big, or whenever stderr is a terminal.
LARGE_STORE_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    configure: str  # "module:function" declaring the arguments on the subcommand's parser
    run: str  # "module:function" taking the parsed arguments (`args.parser` is the subparser), returning an exit status
    # Arguments the parser does not know go to the command as `args.extra` (broker.conf
    # `--key=value` overrides, a benchmark's own options) instead of being a usage error.
    passthrough: bool = False


# -- progress ----------------------------------------------------------------------------------


def _progress_printer(label: str) -> Callable[[int, int], None]:
    tty = sys.stderr.isatty()

    def progress(done: int, total: int) -> None:
        if tty or total >= LARGE_STORE_BYTES:
            print(f"{label}: scanned {done >> 20} of {total >> 20} MiB", file=sys.stderr, flush=True)

    return progress


# -- inspect -----------------------------------------------------------------------------------


def _inspect_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--store-dir", required=True, type=cli_args.store_dir, metavar="DIR", help="the store's root directory"
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument(
        "--show-messages", type=cli_args.count, default=0, metavar="N", help="also list the first N messages"
    )
    p.add_argument(
        "--segment-size", type=cli_args.positive, metavar="BYTES", help="segment size (default: the files' size)"
    )


def run_inspect(args: argparse.Namespace) -> int:
    from ops.inspect import InspectError, format_report, inspect_store

    try:
        report = inspect_store(
            args.store_dir,
            segment_size=args.segment_size,
            show_messages=args.show_messages,
            on_progress=_progress_printer("inspect"),
        )
    except InspectError as exc:
        raise CommandError(str(exc)) from None
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, sort_keys=False))
    else:
        print(format_report(report))
    return EXIT_PROBLEMS if report.problems_found else EXIT_OK


# -- repair ------------------------------------------------------------------------------------


def _repair_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--store-dir", required=True, type=cli_args.store_dir, metavar="DIR", help="the store's root directory"
    )
    p.add_argument(
        "--truncate-at", type=cli_args.offset, metavar="OFFSET", help="cut the CommitLog at this record boundary"
    )
    p.add_argument(
        "--extend-short-segment",
        action="store_true",
        help="zero-fill a last segment file shorter than the segment size back to size",
    )
    p.add_argument("--yes", action="store_true", help="really do it (with --truncate-at or --extend-short-segment)")


def _extend_short_segment(args: argparse.Namespace) -> int:
    from ops.inspect import InspectError, inspect_store
    from ops.repair import RepairError, extend_short_segment

    store_dir = args.store_dir
    if args.truncate_at is not None:
        args.parser.error("--extend-short-segment and --truncate-at are separate repairs: one at a time")
    try:
        if not args.yes:
            report = inspect_store(store_dir)
            if not report.short_segment:
                print(f"No short segment in {store_dir}: nothing to extend.")
                return EXIT_OK
            print(f"Dry run; nothing changed. Would zero-fill {report.short_segment} to {report.segment_size} bytes.")
            print(f"To do it: rocketstore repair --store-dir {store_dir} --extend-short-segment --yes")
            return EXIT_PROBLEMS
        result = extend_short_segment(store_dir)
    except (InspectError, RepairError) as exc:
        raise CommandError(str(exc)) from None
    after = result.report_after
    print(f"Extended {result.segment} from {result.size_before} to {result.size_after} bytes (zero-filled, fsynced).")
    print(f"The CommitLog of {store_dir} now ends at {after.end_offset} ({after.messages} messages).")
    if after.problems_found:
        print("But an inspection still finds problems; run `rocketstore inspect`.")
        return EXIT_PROBLEMS
    return EXIT_OK


def run_repair(args: argparse.Namespace) -> int:
    from ops.inspect import InspectError, inspect_store
    from ops.repair import RepairError, format_plan, plan_repair, repair

    store_dir = args.store_dir
    if args.extend_short_segment:
        return _extend_short_segment(args)
    if args.yes and args.truncate_at is None:
        args.parser.error("--yes needs --truncate-at OFFSET (repair never cuts at an offset it chose itself)")
    try:
        if args.yes:
            result = repair(store_dir, args.truncate_at, on_progress=_progress_printer("repair"))
            plan, after = result.plan, result.report_after
            print(format_plan(plan))
            print(
                f"Done: the CommitLog of {store_dir} now ends at {after.end_offset} "
                f"({after.messages} messages); the store starts again."
            )
            if after.problems_found:
                print("But an inspection still finds problems; run `rocketstore inspect`.")
                return EXIT_PROBLEMS
            return EXIT_OK
        report = inspect_store(store_dir, on_progress=_progress_printer("repair"))
        planned = plan_repair(report, args.truncate_at)
    except (InspectError, RepairError) as exc:
        raise CommandError(str(exc)) from None
    if report.short_segment:
        print(
            f"The last segment {report.short_segment} is shorter than the segment size: the store does not load it. "
            f"To zero-fill it back to size: rocketstore repair --store-dir {store_dir} --extend-short-segment --yes"
        )
        if planned is not None:
            # The file was cut inside its data: extending it leaves a record in part, cut next.
            print("Dry run; nothing changed. " + format_plan(planned).replace("Zero-fill", "Would zero-fill", 1))
            print(f"Then: rocketstore repair --store-dir {store_dir} --truncate-at {planned.offset} --yes")
        return EXIT_PROBLEMS
    if planned is None:
        print(
            f"Nothing to repair: the CommitLog of {store_dir} is valid from {report.min_offset} to {report.end_offset}."
        )
        return EXIT_OK
    first = report.bad_offsets[0] if report.bad_offsets else None
    if first is not None:
        print(f"First bad offset: {first.offset} in segment {first.segment}: {first.kind}, {first.reason}")
    if args.truncate_at is None and not report.problems_found:
        if first is not None and first.kind == "in-flight":
            print(f"pid {report.lock_holder_pid} holds the store and is writing there; nothing to repair.")
        else:
            print(
                f"This is a torn tail above the flushed offset: the store cuts it by itself when it starts; "
                f"no repair needed. To cut it now anyway: rocketstore repair --store-dir {store_dir} "
                f"--truncate-at {planned.offset} --yes"
            )
        return EXIT_OK
    print("Dry run; nothing changed. " + format_plan(planned).replace("Cut the", "Would cut the", 1))
    print(f"To do it: rocketstore repair --store-dir {store_dir} --truncate-at {planned.offset} --yes")
    # A dry run over real damage is a finding (1); one for a chosen offset over a sound store is not.
    return EXIT_PROBLEMS if report.problems_found else EXIT_OK


# -- demo --------------------------------------------------------------------------------------


def run_demo(args: argparse.Namespace) -> int:
    from demos.store_demo import MAX_BODY, format_summary, run_demo as demo

    if args.size > MAX_BODY:
        args.parser.error(f"argument --size: {args.size} is above the demo's limit of {MAX_BODY} bytes")
    if args.dir is not None and Path(args.dir).exists() and not Path(args.dir).is_dir():
        args.parser.error(f"argument --dir: {args.dir} exists and is not a directory")
    try:
        summary = demo(args.dir, messages=args.messages, size=args.size, threads=args.threads, seed=args.seed)
    except RuntimeError as exc:
        raise CommandError(f"demo failed: {exc}") from None
    print(format_summary(summary))
    return EXIT_OK if summary.ok else EXIT_PROBLEMS


# -- the table ---------------------------------------------------------------------------------

COMMANDS: tuple[Command, ...] = (
    Command(
        "inspect",
        "offline check of a store: totals per topic/queue, offsets, bad offsets",
        "rocketstore.cli:_inspect_arguments",
        "rocketstore.cli:run_inspect",
    ),
    Command(
        "repair",
        "say where a damaged CommitLog would be cut; cut it with --truncate-at OFFSET --yes",
        "rocketstore.cli:_repair_arguments",
        "rocketstore.cli:run_repair",
    ),
    Command(
        "demo",
        "start a SYNC_MASTER and a slave on 127.0.0.1, produce with sync replication, consume from both",
        "demos.broker_demo:add_arguments",
        "demos.broker_demo:run",
    ),
    Command(
        "crash-demo",
        "crash a SYNC_FLUSH writer with SIGKILL, recover, show nothing acknowledged is lost",
        "demos.store_demo:add_arguments",
        "rocketstore.cli:run_demo",
    ),
    Command(
        "broker",
        "run a broker (master or slave by brokerRole): -c broker.conf [--key=value ...]",
        "rocketstore.broker.command:add_arguments",
        "rocketstore.broker.command:run",
        passthrough=True,
    ),
    Command(
        "pipeline",
        "Spark jobs over CommitLogs: scan, audit replicas, rebuild queues/indexes, export Parquet",
        "pipeline.commands:add_arguments",
        "pipeline.commands:run",
    ),
    Command(
        "bench",
        "end-to-end benchmark over gRPC on 127.0.0.1 (rocketstore bench --help)",
        "bench.broker_bench:add_cli_arguments",
        "bench.broker_bench:run",
    ),
    Command(
        "produce",
        "send N messages to a broker from C concurrent senders; summary of statuses and latency",
        "client.commands:produce_arguments",
        "client.commands:run_produce",
    ),
    Command(
        "consume",
        "pull a topic's messages from a broker and print them (commit offsets with --group)",
        "client.commands:consume_arguments",
        "client.commands:run_consume",
    ),
    Command(
        "status",
        "the cluster as a broker sees it: roles, offsets, each slave's ack, lag and fitness",
        "client.commands:status_arguments",
        "client.commands:run_status",
    ),
    Command(
        "health",
        "exit 0 when the broker answers its admin status call (for container health checks)",
        "client.commands:status_arguments",
        "client.commands:run_health",
    ),
    Command(
        "admin",
        "operator actions: `admin elect --broker ID` makes a slave the master (planned switchover)",
        "client.admin_commands:admin_arguments",
        "client.admin_commands:run_admin",
    ),
    Command(
        "topic",
        "create, list, describe, delete topics on a broker or across a cluster's groups; status per group",
        "client.ops_commands:topic_arguments",
        "client.ops_commands:run_topic",
    ),
    Command(
        "consumer",
        "a consumer group's progress and lag per queue; reset its offsets (admin API)",
        "client.ops_commands:consumer_arguments",
        "client.ops_commands:run_consumer",
    ),
    Command(
        "message",
        "look messages up by key, message id or CommitLog offset (admin API)",
        "client.ops_commands:message_arguments",
        "client.ops_commands:run_message",
    ),
    Command(
        "config",
        "a running broker's config: get it, set the keys that change live (also `broker config`)",
        "client.ops_commands:config_arguments",
        "client.ops_commands:run_config",
    ),
    Command(
        "cluster",
        "a cluster of broker groups: list what the registry in etcd shows; drain a group (admin API)",
        "client.cluster_commands:cluster_arguments",
        "client.cluster_commands:run_cluster",
    ),
)


def _chosen(argv: Sequence[str]) -> str | None:
    # The top level takes only flags without values, so the first non-flag word names the command.
    return next((a for a in argv if not a.startswith("-")), None)


def _version() -> str:
    try:
        return importlib.metadata.version("rocketstore")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout that was not installed
        return "unknown (not installed)"


class _Parser(argparse.ArgumentParser):
    """No prefix matching of long options (`--top` is not `--topic`), here and in every
    subcommand's parser (argparse makes subparsers of the parent's class)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)


def _aliased(argv: list[str]) -> list[str]:
    """`broker config ...` is the `config` command: a broker to run takes no bare word."""
    chosen = _chosen(argv)
    if chosen == "broker":
        at = argv.index("broker")
        if argv[at + 1 : at + 2] == ["config"]:
            return argv[:at] + argv[at + 1 :]
    return argv


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    parser = _Parser(
        prog="rocketstore",
        description="RocketStore: Apache RocketMQ's broker store and replication, in Python.",
        epilog="exit status: 0 ok, 1 problems found or failure, 2 usage error",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="debug logs on stderr")
    parser.add_argument("--version", action="version", version=f"rocketstore {_version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    chosen = _chosen(argv)
    for command in COMMANDS:
        sub = subparsers.add_parser(command.name, help=command.help, description=command.help)
        sub.add_argument("-v", "--verbose", dest="sub_verbose", action="count", default=0, help="debug logs on stderr")
        if command.name == chosen:
            _resolve(command.configure)(sub)
            sub.set_defaults(_run=command.run, parser=sub)
    return parser


def _resolve(target: str) -> Callable:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def _expected_errors() -> tuple[type[BaseException], ...]:
    # Imported only on the error path, so that commands without a store do not pay for it.
    from store import ConfigError, SegmentLayoutError, StoreCorruptedError, StoreLockedError

    # OSError: a file the job needs cannot be read or written (permissions, a full disk); its
    # message names the file, which is what the operator needs.
    return (CommandError, StoreLockedError, StoreCorruptedError, SegmentLayoutError, ConfigError, OSError)


def main(argv: Sequence[str] | None = None) -> int:
    argv = _aliased(list(sys.argv[1:] if argv is None else argv))
    parser = build_parser(argv)
    try:
        command = next((c for c in COMMANDS if c.name == _chosen(argv)), None)
        if command is not None and command.passthrough:
            args, extra = parser.parse_known_args(argv)
            args.extra = extra
        else:
            args, extra = parser.parse_known_args(argv)
            if extra:
                # The chosen command's parser says it, with its own usage line, not the top level's.
                getattr(args, "parser", parser).error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as exc:  # argparse: 0 for --help, 2 for usage errors
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
    verbose = args.verbose + args.sub_verbose
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    run = _resolve(args._run)
    try:
        return run(args)
    except SystemExit as exc:  # args.parser.error() for a usage error found after parsing
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
    except KeyboardInterrupt:
        print("rocketstore: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # stdout closed early (`| head`): not an error of ours; keep Python from complaining at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except Exception as exc:
        if isinstance(exc, _expected_errors()):
            log.debug("%s failed", args.command, exc_info=True)
            print(f"rocketstore {args.command}: error: {exc}", file=sys.stderr)
            return EXIT_PROBLEMS
        raise


if __name__ == "__main__":
    # Run through the package module, so that exception classes the subcommands raise
    # (CommandError) are the ones main() catches, not copies defined in __main__.
    from rocketstore.cli import main as _main

    sys.exit(_main())
