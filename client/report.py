"""Plain-text forms of what brokers answer, for programs that print them (the `rocketstore`
commands, the compose cluster's status check): a column table, RocketMQ's permission bits and
times as text, the start of a message body as one printable line, and the status of a broker group
as rows (from a broker's admin status and each of its slaves' own) and as a table.

Pure functions of their arguments; thread-safe.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Sequence
from typing import Any

_PREVIEW_CHARS = 40


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """`rows` under `headers`, columns of numbers right-aligned; None shows as '-', booleans as
    yes/NO, floats with one decimal."""
    cells = [[_cell(v) for v in row] for row in rows]
    numeric = [
        all(isinstance(r[i], (int, float)) and not isinstance(r[i], bool) or r[i] is None for r in rows)
        for i in range(len(headers))
    ]
    widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)).rstrip()

    return "\n".join([line(headers)] + [line(c) for c in cells])


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, float):
        return f"{value:.1f}"
    return str(value)


def perm_text(perm: int) -> str:
    """RocketMQ's perm string: R, W, X (inherit) or '-' in each place."""
    return ("R" if perm & 4 else "-") + ("W" if perm & 2 else "-") + ("X" if perm & 1 else "-")


def utc_text(ms: int) -> str:
    """A time in Unix ms as ISO 8601 in UTC to the millisecond; '-' for none (0 or less); the
    number itself (`<n> ms`) for one that is no date (past the year 9999)."""
    if ms <= 0:
        return "-"
    try:
        moment = datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc)
    except (OverflowError, OSError, ValueError):
        return f"{ms} ms"
    return moment.isoformat(timespec="milliseconds")


def parse_moment_ms(text: str) -> int:
    """A time as Unix milliseconds: digits are ms; otherwise ISO 8601 (no zone: UTC). ValueError
    saying what is expected."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"expected Unix milliseconds or an ISO 8601 time such as 2026-11-24T10:00:00+01:00, got {text!r}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return int(moment.timestamp() * 1000)


def body_preview(body: bytes, limit: int = _PREVIEW_CHARS) -> str:
    """The start of a body as one printable line (undecodable bytes and controls escaped)."""
    text = body[: limit * 4].decode("utf-8", errors="backslashreplace")
    shown = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text[:limit])
    return shown + ("..." if len(text) > limit or len(body) > limit * 4 else "")


# -- a broker group's status ---------------------------------------------------------------------


STATUS_COLUMNS = (
    "broker",
    "id",
    "role",
    "endpoint",
    "max offset",
    "flushed",
    "confirmed",
    "ack/lag bytes",
    "lag s",
    "silent s",
    "fit",
)


def status_rows(asked: dict[str, Any], slaves: dict[str, dict[str, Any] | str]) -> list[dict[str, Any]]:
    """Rows of the cluster table: the asked broker, then (for a master) each slave it lists.
    `slaves` maps a slave's client endpoint to its own status, or to why it could not be asked."""
    rows = [
        {
            "broker": asked["broker_name"],
            "id": asked["broker_id"],
            "role": asked["role"],
            "endpoint": asked["client_endpoint"],
            "max_offset": asked["max_offset"],
            "flushed_offset": asked["flushed_offset"],
            "confirmed_offset": asked["confirmed_offset"],
            "ack_offset": None,
            "lag_bytes": None,
            "lag_seconds": None,
            "silent_seconds": None,
            "fit": None,
            "reachable": True,
            "error": None,
            "replication_error": asked.get("replication_error", ""),
        }
    ]
    for snap in asked.get("slaves") or ():
        endpoint = snap["client_endpoint"]
        answer = slaves.get(endpoint, "no client endpoint known") if endpoint else "no client endpoint known"
        own: dict[str, Any] = answer if isinstance(answer, dict) else {}
        reachable = bool(own)
        rows.append(
            {
                "broker": own["broker_name"] if reachable else asked["broker_name"],
                "id": snap["broker_id"],
                "role": own["role"] if reachable else "unreachable",
                "endpoint": endpoint or snap["ha_peer"],
                "max_offset": own["max_offset"] if reachable else None,
                "flushed_offset": own["flushed_offset"] if reachable else None,
                "confirmed_offset": own["confirmed_offset"] if reachable else None,
                "ack_offset": snap["ack_offset"],
                "lag_bytes": snap["lag_bytes"],
                "lag_seconds": snap["lag_seconds"],
                # Since the slave's last report: a stopped slave shows here before it falls behind.
                "silent_seconds": snap.get("silent_ms", 0) / 1000,
                "fit": snap["fit"],
                "reachable": reachable,
                "error": None if reachable else answer,
                "replication_error": own.get("replication_error", "") if reachable else "",
            }
        )
    return rows


def format_status(rows: list[dict[str, Any]], asked: dict[str, Any]) -> str:
    """The table of `status_rows` under the cluster's name and epoch, then what needs a word:
    controller mode's election state, unreachable slaves, replication errors, a slave's master."""
    table = format_table(
        STATUS_COLUMNS,
        [
            (
                r["broker"],
                r["id"],
                r["role"],
                r["endpoint"],
                r["max_offset"],
                r["flushed_offset"],
                r["confirmed_offset"],
                None if r["ack_offset"] is None else f"{r['ack_offset']}/{r['lag_bytes']}",
                r["lag_seconds"],
                r["silent_seconds"],
                r["fit"],
            )
            for r in rows
        ],
    )
    lines = [f"cluster {asked['cluster_name']}, epoch {asked['epoch']}", table]
    if asked.get("controller_mode"):
        master_id = asked.get("master_broker_id", -1)
        # The master's log end as etcd recorded it lags the live one by up to a second of writes:
        # shown only when an unclean election makes it matter (it is in --json always).
        lines.append(
            f"controller mode: master {'none elected' if master_id < 0 else f'broker {master_id}'}, in-sync "
            f"{sorted(asked.get('in_sync_replica_ids') or [])}"
            + (f", lease left {asked['lease_valid_ms']} ms" if asked.get("lease_valid_ms") else "")
            + (
                f", LAST ELECTION WAS UNCLEAN: up to {asked['unclean_lost_bytes']} bytes may be lost (the master's "
                f"log end as last recorded in etcd: {asked.get('group_max_offset', 0)})"
                if asked.get("unclean_lost_bytes")
                else ""
            )
        )
        if asked.get("controller_error"):
            lines.append(f"etcd: {asked['controller_error']}")
    # The asked slave's own replication state is said once, below.
    for r in rows[1:] if asked["role"] == "SLAVE" else rows:
        if not r["reachable"]:
            lines.append(f"slave {r['id']} at {r['endpoint']}: unreachable: {r['error']}")
        elif r.get("replication_error"):
            lines.append(f"slave {r['id']} at {r['endpoint']}: last replication error: {r['replication_error']}")
    if asked["role"] == "SLAVE":
        lines.extend(_slave_lines(asked))
    elif not asked.get("slaves"):
        lines.append("no slave connected")
    lines.extend(damage_lines(asked))
    return "\n".join(lines)


def _slave_lines(asked: dict[str, Any]) -> list[str]:
    """A slave's view of its master: connected (and how far behind), or unreachable (since when,
    why, and what the slave still serves), then its copy of the master's metadata."""
    master = asked.get("master_ha_address") or "an unknown master"
    error = asked.get("replication_error") or ""
    if asked.get("master_connected"):
        behind = max(asked.get("master_max_offset", 0) - asked["max_offset"], 0)
        lines = [
            f"replicating from {master}: connected, master max offset {asked.get('master_max_offset', 0)} "
            f"({behind} bytes behind)"
        ]
        if error:
            lines.append(f"last replication error: {error}")
    else:
        contact = asked.get("master_last_contact_ms", 0)
        heard = f"last heard from at {_when(contact)}" if contact else "never heard from"
        lines = [f"master {master} UNREACHABLE ({heard}): {error or 'connecting'}"]
        if asked.get("acting_master"):
            lines.append("this slave serves reads for it (enableSlaveActingMaster); no writes until a master is back")
        else:
            lines.append("this slave serves what it holds; no writes until a master is back")
    synced = asked.get("metadata_synced_ms", 0)
    copied = f"last at {_when(synced)}" if synced else "not yet"
    failed = asked.get("metadata_error") or ""
    if failed and failed.endswith(error) and error:
        failed = "the master is unreachable"  # the same failure as replication's, said above
    lines.append(
        f"topics, consumer offsets and delay cursors copied from the master: {copied}"
        + (f" (last attempt failed: {failed})" if failed else "")
    )
    return lines


def _damage(asked: dict[str, Any]) -> dict[str, Any]:
    return (asked.get("stats") or {}).get("damage") or {}


def damage_lines(asked: dict[str, Any]) -> list[str]:
    """What the broker's store found damaged (from its statistics): records it does not serve or
    replicate, and the slaves whose replication stops at one."""
    damage = _damage(asked)
    lines = []
    count = damage.get("record_count", 0)
    if count:
        lines.append(
            f"DAMAGED RECORDS: {count} (body CRC mismatch: not served, not replicated; docs/store.md, "
            "'Damaged records')"
        )
        for r in damage.get("records") or ():
            where = f"{r['topic']}:{r['queue_id']} queue offset {r['queue_offset']}, " if r.get("topic") else ""
            lines.append(f"  CommitLog offset {r['offset']} ({where}{r['reason']}), refused {r['refusals']} time(s)")
    for slave_id, offset in sorted((damage.get("held_replication") or {}).items()):
        lines.append(f"replication to slave {slave_id} held at offset {offset}: the record there is damaged")
    return lines


def _when(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ms / 1000))


def status_problems(rows: list[dict[str, Any]], asked: dict[str, Any]) -> bool:
    damage = _damage(asked)
    if damage.get("record_count") or damage.get("held_replication"):
        return True
    """A slave asked is cut off from its master, or a master's slave is unreachable or unfit."""
    if asked["role"] == "SLAVE":
        return not asked.get("master_connected")
    return any(not r["reachable"] or r["fit"] is False for r in rows[1:])


# -- paging through a topic by time ------------------------------------------------------------


def cursor_text(cursor: dict[int, int]) -> str:
    """A `list_messages` cursor as one word, QUEUE:OFFSET pairs by queue: "0:12,3:7" ("" for none)."""
    return ",".join(f"{queue_id}:{offset}" for queue_id, offset in sorted(cursor.items()))


def parse_cursor(text: str) -> dict[int, int]:
    """The cursor `cursor_text` wrote; ValueError saying what is wrong."""
    cursor: dict[int, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        queue, sep, offset = part.partition(":")
        if not sep or not queue.isdigit() or not offset.isdigit():
            raise ValueError(f"a cursor is QUEUE:OFFSET pairs separated by commas (0:12,3:7), not {text!r}")
        if int(queue) in cursor:
            raise ValueError(f"queue {queue} appears twice in the cursor {text!r}")
        cursor[int(queue)] = int(offset)
    return cursor


def consumed_text(consumed_by: Sequence[dict[str, Any]]) -> str:
    """Which groups committed past a message: "billing (yes), audit (no)"; "no group" for none."""
    if not consumed_by:
        return "no group has offsets in its queue"
    return ", ".join(f"{c['group']} ({'yes' if c['consumed'] else 'no'})" for c in consumed_by)
