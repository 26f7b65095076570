"""Crash-safe JSON files for the store's metadata under `config/` (topics, consumer offsets,
delay offsets).

A write goes to `NAME.tmp`, is fsynced, the current file is kept as `NAME.bak`, and the tmp file is
renamed over `NAME`; the directory is fsynced. A crash at any point leaves either the old or the
new content under NAME or NAME.bak, never a half-written file that a reader takes for real. A file
that does not parse falls back to its `.bak` with a warning. Files written by RocketMQ's Java
broker (int map keys unquoted) are read too. Thread-safety: callers serialise
writes to one path (each manager holds its own lock).
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

from ..log.mapped_file import mkdir_durable, replace_durably

log = logging.getLogger(__name__)


_INT_KEY = re.compile(r"([{,]\s*)(-?\d+)(\s*:)")


def _quote_int_keys(text: str) -> str:
    """RocketMQ's Java broker (fastjson) writes maps with int keys unquoted, e.g.
    `{"offsetTable":{"T@G":{0:12}}}`; quote them so the file parses as JSON."""
    return _INT_KEY.sub(r'\1"\2"\3', text)


def write_json_atomically(path: Path, content: Any) -> None:
    mkdir_durable(path.parent)
    data = json.dumps(content, indent=2, sort_keys=True).encode("utf-8")
    # A main file that does not parse is dropped rather than rotated: it must not replace the
    # backup a reader falls back to.
    backup = path.with_name(path.name + ".bak") if _parses(path) else None
    replace_durably(path, data, backup=backup)


def _parse(raw: bytes) -> Any:
    """JSON, or Java's fastjson dialect of it; ValueError when neither."""
    try:
        return json.loads(raw)
    except ValueError:
        return json.loads(_quote_int_keys(raw.decode("utf-8", "replace")))


def _parses(path: Path) -> bool:
    try:
        _parse(path.read_bytes())
    except (FileNotFoundError, ValueError):
        return False
    return True


def read_json(path: Path) -> Any | None:
    """The content of `path`, else of its `.bak`, else None when neither exists. A file that
    exists but does not parse, with no usable backup, raises ValueError naming it."""
    backup = path.with_name(path.name + ".bak")
    for candidate in (path, backup):
        try:
            raw = candidate.read_bytes()
        except FileNotFoundError:
            continue
        try:
            return _parse(raw)
        except ValueError as exc:
            log.warning("%s does not parse (%s); trying its backup", candidate, exc)
    if path.exists() or backup.exists():
        raise ValueError(f"neither {path} nor its backup parse as JSON")
    return None
