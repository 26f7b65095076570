"""What every command line of the project shares, below the application: exit codes, the
expected-failure exception, and argparse argument types. The `rocketstore` command
(rocketstore/cli.py) and the library CLIs (client/commands.py, pipeline/commands.py) import it from here,
so no library depends on the application.

Exit codes: 0 when all is well, 1 when problems were found or the job failed (`CommandError`: one
clear line, no traceback), 2 for usage errors (argparse's own). Stateless; thread-safe.
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Iterable
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


def did_you_mean(word: str, known: Iterable[str], prefix: str = "") -> str:
    """' (did you mean X?)' for the known word closest to `word` (case aside), else ''."""
    by_lower: dict[str, str] = {k.lower(): k for k in known}
    close = difflib.get_close_matches(word.lower(), by_lower, n=1, cutoff=0.6)
    return f" (did you mean {prefix}{by_lower[close[0]]}?)" if close else ""


def unknown_keys_text(unknown: Iterable[str], known: Iterable[str]) -> str:
    """'unknown key(s): a (did you mean A?), b' for config keys."""
    known = list(known)
    names = sorted(unknown)
    label = "unknown key" if len(names) == 1 else "unknown keys"
    return f"{label}: " + ", ".join(name + did_you_mean(name, known) for name in names)
