"""`rocketstore broker -c broker.conf [--key=value ...]`: arguments and the run function, on the
command's main thread (the broker then runs its own event loop and service threads)."""

from __future__ import annotations

import argparse
from pathlib import Path

from store.properties import parse_overrides

from .config import load_broker_config


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-c", "--config", metavar="FILE", help="broker.conf with RocketMQ's keys")
    p.epilog = "Any broker.conf key can follow as --key=value, e.g. --listenPort=0 --brokerRole=SYNC_MASTER."


def run(args: argparse.Namespace) -> int:
    from .process import run as run_broker

    if args.config is not None and not Path(args.config).is_file():
        args.parser.error(f"argument -c/--config: {args.config}: no such file")
    configs = load_broker_config(args.config, parse_overrides(args.extra))
    return run_broker(configs, verbose=args.verbose + args.sub_verbose)
