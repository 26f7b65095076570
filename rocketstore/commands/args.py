"""Argument types of the `rocketstore` subcommands: each turns one command-line word into a value
or raises `argparse.ArgumentTypeError`, which argparse prints as a usage error (exit status 2)
naming the option.

Two families with their own wording, kept as the commands had them: the store and demo commands'
decimal numbers (`count`, `positive`; `offset` also takes 0x hex) and the broker commands' whole
numbers (`natural`, `at_least_one`, `perm_bits`: decimal, 0x hex or 0o octal, with the bound in the
message). Endpoints are parsed where the client is imported (`connection.py`), so that commands
that never reach a broker do not load gRPC. Stateless; thread-safe.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

# -- store and demo commands -------------------------------------------------------------------


def existing_dir(text: str) -> Path:
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


# -- broker commands ---------------------------------------------------------------------------


def whole_number(text: str, low: int, high: int | None = None) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
    if high is not None and value > high:
        raise argparse.ArgumentTypeError(f"must be at most {high}, got {value}")
    return value


def natural(text: str) -> int:
    return whole_number(text, 0)


def at_least_one(text: str) -> int:
    return whole_number(text, 1)


def perm_bits(text: str) -> int:
    return whole_number(text, 0, 15)


def non_negative_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} must be 0 or more seconds")
    return value


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


def non_empty(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("cannot be empty")
    return text


def single_tag(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("cannot be empty")
    if "|" in text:
        raise argparse.ArgumentTypeError(f"a tag cannot contain '|': {text!r}")
    return text


def key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def moment_ms(text: str) -> int:
    """A time as Unix milliseconds: digits are ms; otherwise ISO 8601 (no zone: UTC)."""
    from client.report import parse_moment_ms  # here: the commands that take no time load no gRPC

    try:
        return parse_moment_ms(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
