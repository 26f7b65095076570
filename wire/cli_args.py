"""What every command line of the project shares, below the application: exit codes, the
expected-failure exception, and argparse argument types. The `rocketstore` command
(rocketstore/cli.py) and the library CLIs (client/commands.py, pipeline/commands.py) import it from here,
so no library depends on the application.

Exit codes: 0 when all is well, 1 when problems were found or the job failed (`CommandError`: one
clear line, no traceback), 2 for usage errors (argparse's own). Stateless; thread-safe.
"""

from __future__ import annotations

import argparse
from pathlib import Path

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_USAGE = 2


class CommandError(Exception):
    """An expected failure of a subcommand: printed as one line, exit status 1."""


def store_dir(text: str) -> Path:
    path = Path(text)
    if not path.exists():
        raise argparse.ArgumentTypeError(f"{text}: no such directory")
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: not a directory")
    return path


def offset(text: str) -> int:
    """A CommitLog or queue offset: decimal or 0x hex, not negative."""
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an offset: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"an offset cannot be negative: {value}")
    return value


def count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"cannot be negative: {value}")
    return value


def positive(text: str) -> int:
    value = count(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value
