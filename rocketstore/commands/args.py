"""Argument types of the `rocketstore` subcommands: each turns one command-line word into a value
or raises `argparse.ArgumentTypeError`, which argparse prints as a usage error (exit status 2)
naming the option.

Two families with their own wording, kept as the commands had them: the store and demo commands'
decimal numbers (`count`, `positive`; `offset` also takes 0x hex) and the broker commands' whole
numbers (`natural`, `at_least_one`, `perm_bits`: decimal, 0x hex or 0o octal, with the bound in the
message). `parsed` turns a parser's ValueError into the usage error, so that each type states
only its complaint and its bounds. Endpoints are parsed where the client is imported
(`connection.py`), so that commands that never reach a broker do not load gRPC. Stateless;
thread-safe.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def parsed(
    text: str,
    parse: Callable[[str], T],
    complaint: str | None = None,
    errors: tuple[type[Exception], ...] = (ValueError,),
) -> T:
    """`parse(text)`; when it raises one of `errors`, a usage error: `complaint` with the text's
    repr in its `{}`, else the error's own message."""
    try:
        return parse(text)
    except errors as exc:
        message = str(exc) if complaint is None else complaint.format(repr(text))
        raise argparse.ArgumentTypeError(message) from None


def _any_base(text: str) -> int:
    return int(text, 0)


# -- store and demo commands -------------------------------------------------------------------


def existing_dir(text: str) -> Path:
    path = Path(text)
    if not path.exists():
        raise argparse.ArgumentTypeError(f"{text}: no such directory")
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: not a directory")
    return path


def existing_dir_text(text: str) -> str:
    """As `existing_dir`, the directory as typed (the Spark jobs hand it on as text)."""
    existing_dir(text)
    return text


def offset(text: str) -> int:
    """A CommitLog or queue offset: decimal or 0x hex, not negative."""
    value = parsed(text, _any_base, "not an offset: {}")
    if value < 0:
        raise argparse.ArgumentTypeError(f"an offset cannot be negative: {value}")
    return value


def count(text: str) -> int:
    value = parsed(text, int, "not a number: {}")
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
    value = parsed(text, _any_base, "not a whole number: {}")
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
    value = parsed(text, float, "{} is not a number of seconds")
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} must be 0 or more seconds")
    return value


def seconds(text: str) -> float:
    value = parsed(text, float, "not a number of seconds: {}")
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


def non_empty(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("cannot be empty")
    return text


def single_tag(text: str) -> str:
    non_empty(text)
    if "|" in text:
        raise argparse.ArgumentTypeError(f"a tag cannot contain '|': {text!r}")
    return text


def names(text: str) -> list[str]:
    """A comma-separated list (`A,B`): each name stripped, empty ones and repeats dropped."""
    return list(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))


def key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def moment_ms(text: str) -> int:
    """A time as Unix milliseconds: digits are ms; otherwise ISO 8601 (no zone: UTC)."""
    from client.report import parse_moment_ms  # here: the commands that take no time load no gRPC

    return parsed(text, parse_moment_ms)
