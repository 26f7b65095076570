"""The `rocketstore` command: one argparse parser with a subcommand per job.

Subcommands are listed in `COMMANDS`; each names a "module:function" that declares its arguments
and one that runs it, both in the commands package (`rocketstore/commands/`, one module per
command family). Only the chosen subcommand's arguments are declared and only its module is
imported, so `rocketstore --help` stays fast; a new subcommand is a module there and one more
`Command` entry here.

Conventions for every subcommand (`rocketstore/commands/common.py`): results on stdout, logs and
progress on stderr (`-v` for debug logs), exit status 0 when all is well, 1 when problems were
found or the job failed, 2 for usage errors (argparse's own). Expected failures (a locked, corrupt
or malformed store, a bad config) print one clear line, never a traceback. Runs on the main thread
of its own process.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import logging
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rocketstore.commands.common import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, CommandError

log = logging.getLogger("rocketstore")


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    configure: str  # "module:function" declaring the arguments on the subcommand's parser
    run: str  # "module:function" taking the parsed arguments (`args.parser` is the subparser), returning an exit status
    # Arguments the parser does not know go to the command as `args.extra` (broker.conf
    # `--key=value` overrides) instead of being a usage error.
    passthrough: bool = False


# -- the table ---------------------------------------------------------------------------------

COMMANDS: tuple[Command, ...] = (
    Command(
        "inspect",
        "offline check of a store: totals per topic/queue, offsets, bad offsets",
        "rocketstore.commands.inspect_repair:inspect_arguments",
        "rocketstore.commands.inspect_repair:run_inspect",
    ),
    Command(
        "repair",
        "say where a damaged CommitLog would be cut; cut it with --truncate-at OFFSET --yes",
        "rocketstore.commands.inspect_repair:repair_arguments",
        "rocketstore.commands.inspect_repair:run_repair",
    ),
    Command(
        "demo",
        "start a SYNC_MASTER and a slave on 127.0.0.1, produce with sync replication, consume from both",
        "rocketstore.commands.demo:demo_arguments",
        "rocketstore.commands.demo:run_demo",
    ),
    Command(
        "crash-demo",
        "crash a SYNC_FLUSH writer with SIGKILL, recover, show nothing acknowledged is lost",
        "rocketstore.commands.demo:crash_demo_arguments",
        "rocketstore.commands.demo:run_crash_demo",
    ),
    Command(
        "broker",
        "run a broker (master or slave by brokerRole): -c broker.conf [--key=value ...]",
        "rocketstore.commands.broker:add_arguments",
        "rocketstore.commands.broker:run",
        passthrough=True,
    ),
    Command(
        "pipeline",
        "Spark jobs over CommitLogs: scan, audit replicas, rebuild queues/indexes, export Parquet",
        "rocketstore.commands.pipeline:add_arguments",
        "rocketstore.commands.pipeline:run",
    ),
    Command(
        "produce",
        "send N messages to a broker from C concurrent senders; summary of statuses and latency",
        "rocketstore.commands.produce:produce_arguments",
        "rocketstore.commands.produce:run_produce",
    ),
    Command(
        "consume",
        "pull a topic's messages from a broker and print them (commit offsets with --group)",
        "rocketstore.commands.consume:consume_arguments",
        "rocketstore.commands.consume:run_consume",
    ),
    Command(
        "status",
        "the cluster as a broker sees it: roles, offsets, each slave's ack, lag and fitness",
        "rocketstore.commands.status:status_arguments",
        "rocketstore.commands.status:run_status",
    ),
    Command(
        "health",
        "exit 0 when the broker answers its admin status call (for container health checks; -c broker.conf)",
        "rocketstore.commands.status:health_arguments",
        "rocketstore.commands.status:run_health",
    ),
    Command(
        "admin",
        "operator actions: `admin elect --broker ID` makes a slave the master (planned switchover)",
        "rocketstore.commands.admin:admin_arguments",
        "rocketstore.commands.admin:run_admin",
    ),
    Command(
        "topic",
        "create, list, describe, delete topics on a broker or across a cluster's groups; status per group",
        "rocketstore.commands.topic:topic_arguments",
        "rocketstore.commands.topic:run_topic",
    ),
    Command(
        "consumer",
        "a consumer group's progress and lag per queue; reset its offsets (admin API)",
        "rocketstore.commands.consumer:consumer_arguments",
        "rocketstore.commands.consumer:run_consumer",
    ),
    Command(
        "message",
        "look messages up (key, id, offset), page through a topic by time, resend dead letters (admin API)",
        "rocketstore.commands.message:message_arguments",
        "rocketstore.commands.message:run_message",
    ),
    Command(
        "config",
        "a running broker's config: get it, set the keys that change live (also `broker config`)",
        "rocketstore.commands.config:config_arguments",
        "rocketstore.commands.config:run_config",
    ),
    Command(
        "connections",
        "the producers and consumers a broker heard from lately, by protocol (admin API)",
        "rocketstore.commands.clients:connections_arguments",
        "rocketstore.commands.clients:run_connections",
    ),
    Command(
        "console",
        "the operators' web console on 127.0.0.1: cluster, topics, groups, messages, connections, charts",
        "rocketstore.commands.console:console_arguments",
        "rocketstore.commands.console:run_console",
    ),
    Command(
        "console-account",
        "add a web console account or change its role and password (hashed, in the accounts file)",
        "rocketstore.commands.console:account_arguments",
        "rocketstore.commands.console:run_account",
    ),
    Command(
        "cluster",
        "a cluster of broker groups: list what the registry in etcd shows; drain a group (admin API)",
        "rocketstore.commands.cluster:cluster_arguments",
        "rocketstore.commands.cluster:run_cluster",
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
    subcommand's parser (argparse makes subparsers of the parent's class); and every subcommand's
    `--help` describes it: a subparser made with a `help` and no `description` takes the help."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def add_subparsers(self, **kwargs):
        action = super().add_subparsers(**kwargs)
        add_parser = action.add_parser

        def described(name: str, **options):
            if options.get("help") and not options.get("description"):
                options["description"] = options["help"]
            return add_parser(name, **options)

        action.add_parser = described
        return action


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
