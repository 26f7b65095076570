"""`rocketstore broker -c broker.conf [--key=value ...]`: arguments and the run function, on the
command's main thread (the broker then runs its own event loop and service threads). A path of
the config the broker cannot use (a store or log directory it may not write, a missing file)
ends it with one line naming the key, the path and the fix."""

from __future__ import annotations

import wire.grpc_pollers  # noqa: F401 - before anything imports gRPC

# isort: split
import argparse
from pathlib import Path

from rocketstore.broker.config import load_broker_config, load_secrets, path_problem
from store.properties import parse_overrides

from .common import CommandError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-c", "--config", metavar="FILE", help="broker.conf with RocketMQ's keys")
    p.epilog = "Any broker.conf key can follow as --key=value, e.g. --listenPort=0 --brokerRole=SYNC_MASTER."


def run(args: argparse.Namespace) -> int:
    from rocketstore.broker.process import run as run_broker

    if args.config is not None and not Path(args.config).is_file():
        args.parser.error(f"argument -c/--config: {args.config}: no such file")
    overrides = parse_overrides(args.extra)
    if args.config is None and "storePathRootDir" not in overrides:
        # The defaults would put a store and its logs under the home directory: say so instead.
        args.parser.error(
            "give a broker.conf with -c (examples/ has samples), or at least --storePathRootDir=DIR; "
            "nothing was created"
        )
    configs = load_broker_config(args.config, overrides)
    # Refuse an unauthenticated config before anything is written (the log directory included).
    load_secrets(configs)
    try:
        return run_broker(configs, verbose=args.verbose + args.sub_verbose)
    except OSError as exc:
        problem = path_problem(exc, configs)
        if problem is None:
            raise
        raise CommandError(problem) from None
