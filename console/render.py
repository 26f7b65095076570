"""How the console shows values: a message body as text, pretty-printed JSON or a hex dump; byte
sizes; times in UTC and ages; RocketMQ's permission bits. Pure functions (also the templates'
filters); thread-safe.
"""

from __future__ import annotations

import json
from typing import Any

from client.report import perm_text, utc_text

# What a page shows of one body at most; a longer one says how much was left out.
MAX_SHOWN_BYTES = 64 * 1024
BODY_FORMS = ("text", "json", "hex")


def body_text(body: bytes) -> str | None:
    """The body as text when it is UTF-8 (None otherwise)."""
    try:
        return body[:MAX_SHOWN_BYTES].decode("utf-8")
    except UnicodeDecodeError:
        return None


def body_json(body: bytes) -> str | None:
    """The body as indented JSON when it is JSON (None otherwise)."""
    text = body_text(body)
    if text is None or len(body) > MAX_SHOWN_BYTES:
        return None
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False, sort_keys=False)
    except ValueError:
        return None


def hex_dump(body: bytes, width: int = 16) -> str:
    """Offset, hex bytes and printable ASCII, `width` bytes a line."""
    lines = []
    shown = body[:MAX_SHOWN_BYTES]
    for at in range(0, len(shown), width):
        chunk = shown[at : at + width]
        hexes = " ".join(f"{b:02x}" for b in chunk)
        ascii_ = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{at:08x}  {hexes.ljust(width * 3 - 1)}  |{ascii_}|")
    return "\n".join(lines)


def default_form(body: bytes) -> str:
    if body_json(body) is not None:
        return "json"
    return "text" if body_text(body) is not None else "hex"


def body_as(body: bytes, form: str) -> str:
    """The body in `form` (text, json or hex); one that does not apply falls back to hex."""
    if form == "json":
        shown = body_json(body)
    elif form == "text":
        shown = body_text(body)
    else:
        shown = None
    return shown if shown is not None else hex_dump(body)


def size_text(n: int | float | None) -> str:
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def time_text(ms: int | None) -> str:
    return utc_text(ms or 0)


def age_text(ms: int | None, now_ms: int) -> str:
    if not ms:
        return "-"
    seconds = max(0, (now_ms - ms) // 1000)
    if seconds < 120:
        return f"{seconds} s ago"
    if seconds < 7200:
        return f"{seconds // 60} min ago"
    return f"{seconds // 3600} h ago"


def rate_text(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def filters() -> dict[str, Any]:
    return {
        "size": size_text,
        "utc": time_text,
        "perm": perm_text,
        "rate": rate_text,
    }
