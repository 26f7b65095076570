"""Java-properties configuration files and their binding to frozen, typed config dataclasses.

A broker.conf holds RocketMQ's camelCase keys. Each component's config dataclass declares, per
field, the RocketMQ key it reads (`field(metadata={"key": ...})`) or takes the camelCase form of
its own name. `bind` turns a {key: text} mapping into the dataclass and returns the keys it did not
use, so that the caller reports unknown keys instead of ignoring them, naming the nearest known key
(`unknown_keys_text`, `did_you_mean`). Pure functions, thread-safe.
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import re
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


class ConfigError(ValueError):
    """A configuration file or value that cannot be used; the message says which key and why."""


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_WHITESPACE = " \t\f"


def _unescape(text: str, where: str) -> str:
    out = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u":
                digits = text[i + 2 : i + 6]
                if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
                    raise ConfigError(f"{where}: malformed \\uxxxx escape")
                out.append(chr(int(digits, 16)))
                i += 6
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _ends_in_continuation(line: str) -> bool:
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _logical_lines(text: str) -> Iterable[tuple[int, str]]:
    """Java's logical lines: comments dropped, a line ending in an odd number of backslashes
    continues on the next, whose leading whitespace is dropped."""
    pending = None
    start = 0
    for number, raw in enumerate(_LINE_BREAK.split(text), 1):
        line = raw.lstrip(_WHITESPACE)
        if pending is None:
            start = number
            if not line or line[0] in "#!":
                continue
            pending = ""
        if _ends_in_continuation(line):
            pending += line[:-1]
            continue
        yield start, pending + line
        pending = None
    if pending:
        yield start, pending


def _split_key_value(line: str) -> tuple[str, str]:
    """Key and raw value: the key ends at the first unescaped `=`, `:` or whitespace; whitespace
    around the separator and one `=` or `:` after whitespace are not part of the value."""
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=:" or ch in _WHITESPACE:
            break
        i += 1
    key, rest = line[:i], line[i:]
    rest = rest.lstrip(_WHITESPACE)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_WHITESPACE)
    return key, rest


def parse_properties(text: str, source: str = "<text>") -> dict[str, str]:
    """Parse Java-properties text (comments, `=`/`:`/space separators, continuations, escapes)."""
    result: dict[str, str] = {}
    for number, line in _logical_lines(text):
        where = f"{source}:{number}"
        raw_key, raw_value = _split_key_value(line)
        key = _unescape(raw_key, where)
        if not key:
            raise ConfigError(f"{where}: a line with no key")
        result[key] = _unescape(raw_value, f"{where}: {key}")
    return result


def load_properties(path: str | Path) -> dict[str, str]:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    return parse_properties(text, str(path))


def parse_overrides(args: Iterable[str]) -> dict[str, str]:
    """`--key=value` command-line overrides, RocketMQ keys."""
    result = {}
    for arg in args:
        if not arg.startswith("--") or "=" not in arg:
            raise ConfigError(f"override {arg!r} is not of the form --key=value")
        key, _, value = arg[2:].partition("=")
        if not key:
            raise ConfigError(f"override {arg!r} has an empty key")
        result[key] = value
    return result


def snake_to_camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def key_of(f: dataclasses.Field) -> str:
    return f.metadata.get("key") or snake_to_camel(f.name)


def _convert(key: str, text: str, kind: Any) -> Any:
    text = text.strip()
    try:
        if kind is bool:
            lowered = text.lower()
            if lowered not in ("true", "false"):
                raise ValueError("expected true or false")
            return lowered == "true"
        if kind is int:
            return int(text)
        if kind is float:
            return float(text)
        if isinstance(kind, type) and issubclass(kind, enum.Enum):
            return kind[text.upper()]
        if kind is str:
            return text
    except (ValueError, KeyError) as exc:
        choices = (
            f" (one of {', '.join(m.name for m in kind)})"
            if isinstance(kind, type) and issubclass(kind, enum.Enum)
            else ""
        )
        raise ConfigError(f"{key}={text!r}: not a valid {getattr(kind, '__name__', kind)}{choices}: {exc}") from None
    raise TypeError(f"no converter for {key} of type {kind!r}")


def bind(cls: type[T], props: Mapping[str, str], **fixed: Any) -> tuple[T, dict[str, str]]:
    """Build `cls` from RocketMQ keys in `props`; return it and the entries it did not use."""
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = dict(fixed)
    used = set()
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]  # T is a dataclass by contract
        if not f.init or f.name in fixed:
            continue
        key = key_of(f)
        if key in props:
            values[f.name] = _convert(key, props[key], hints[f.name])
            used.add(key)
    unused = {k: v for k, v in props.items() if k not in used}
    try:
        return cls(**values), unused
    except ConfigError:
        raise
    except (TypeError, ValueError) as exc:
        raise ConfigError(str(exc)) from None


def replace_from_properties(config: T, changes: Mapping[str, str]) -> T:
    """`config` with the RocketMQ keys in `changes` set (ConfigError for an unknown key or a bad
    value, naming it)."""
    hints = typing.get_type_hints(type(config))
    by_key = {key_of(f): f.name for f in dataclasses.fields(config) if f.init}  # type: ignore[arg-type]
    values = {}
    for key, text in changes.items():
        if key not in by_key:
            raise ConfigError(f"unknown key: {key}")
        values[by_key[key]] = _convert(key, text, hints[by_key[key]])
    try:
        return dataclasses.replace(config, **values)  # type: ignore[type-var]
    except ConfigError:
        raise
    except (TypeError, ValueError) as exc:
        raise ConfigError(str(exc)) from None


def to_properties(config: Any) -> dict[str, str]:
    """The RocketMQ keys and values of a config dataclass, as a broker.conf would hold them."""
    out = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if isinstance(value, enum.Enum):
            value = value.name
        elif isinstance(value, bool):
            value = str(value).lower()
        out[key_of(f)] = str(value)
    return out


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
