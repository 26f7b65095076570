"""`rocketstore demo` (a SYNC_MASTER and a slave on 127.0.0.1, produced with sync replication and
consumed from both: `demos.broker_demo`) and `rocketstore crash-demo` (the store alone: a
SYNC_FLUSH writer killed with SIGKILL and recovered: `demos.store_demo`). Both end with how many
acknowledged messages were lost; exit status 1 when any was, or a check failed.

Runs on the command's main thread (the demos start their own child processes).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .args import positive
from .common import EXIT_OK, EXIT_PROBLEMS, CommandError

# -- demo ----------------------------------------------------------------------------------------


def demo_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dir", help="keep the brokers' files in DIR instead of a temporary directory")
    p.add_argument("--messages", type=positive, default=2000, metavar="N", help="messages to produce (default 2000)")
    p.add_argument("--size", type=positive, default=1024, metavar="BYTES", help="body size (default 1024)")
    p.add_argument("--concurrency", type=positive, default=16, metavar="N", help="concurrent producers (default 16)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")


def run_demo(args: argparse.Namespace) -> int:
    from demos.broker_demo import MAX_BODY, format_summary
    from demos.broker_demo import run_demo as demo

    if args.size > MAX_BODY:
        args.parser.error(f"argument --size: at most {MAX_BODY} bytes")
    summary = demo(args.dir, args.messages, args.size, args.concurrency)
    print(json.dumps(summary.to_dict(), indent=2) if args.json else format_summary(summary))
    return EXIT_OK if summary.ok else EXIT_PROBLEMS


# -- crash-demo ----------------------------------------------------------------------------------


def crash_demo_arguments(parser: argparse.ArgumentParser) -> None:
    from demos.store_demo import MAX_BODY, positive_int

    parser.add_argument("--dir", help="keep the store in DIR (reused if it holds one) instead of a temporary directory")
    parser.add_argument(
        "--messages",
        type=positive_int,
        default=2000,
        metavar="N",
        help="messages the writer is asked to put (default 2000)",
    )
    parser.add_argument(
        "--size",
        type=positive_int,
        default=1024,
        metavar="BYTES",
        help=f"body size in bytes, at most {MAX_BODY} (default 1024)",
    )
    parser.add_argument("--threads", type=positive_int, default=4, metavar="N", help="writer threads (default 4)")
    parser.add_argument("--seed", type=int, help="seed of the kill point (default: random, printed)")


def run_crash_demo(args: argparse.Namespace) -> int:
    from demos.store_demo import MAX_BODY, format_summary
    from demos.store_demo import run_demo as demo

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
