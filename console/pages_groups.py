"""The Consumer groups pages: the list (per broker group: topics, members online and how they
connect, lag), one group's lag per queue with its members and their clients (pop and 4.x
consumers alike), and an offset reset: a preview first (the broker's dry run), then the same
reset applied from the preview's form.
"""

from __future__ import annotations

from operator import methodcaller
from typing import Any

from flask import Blueprint, abort, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from client import AdminClient
from client.report import parse_moment_ms

from .web import ask, ask_broker, ask_every_group, audit, broker_groups, change, say, snapshot

pages = Blueprint("groups", __name__)

TARGETS = ("time", "earliest", "latest", "offset")


@pages.get("/groups")
def groups() -> str:
    rows, errors = [], []
    for group, listed, error in ask_every_group(AdminClient.list_consumer_groups):
        if error:
            errors.append(f"{group}: {error}")
        rows += [{**entry, "broker_group": group} for entry in listed or ()]
    rows.sort(key=lambda r: (r["group"], r["broker_group"]))
    return render_template("groups.html", rows=rows, errors=errors)


def _members(group: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The group's clients as every reachable broker heard them (a pull consumer may read from a
    slave), one row per client and broker."""
    members, errors = [], []

    def consumers(admin: AdminClient) -> list[dict[str, Any]]:
        return admin.list_clients(group, "CONSUMER")

    for broker in (b for brokers in snapshot().groups().values() for b in brokers if b.reachable and b.group):
        seen, error = ask_broker(broker, consumers)
        if error:
            errors.append(f"{broker.group}/{broker.broker_id}: {error}")
        members += [{**client, "broker": f"{broker.group}/{broker.broker_id}"} for client in seen or ()]
    return members, errors


@pages.get("/groups/view")
def describe() -> str:
    name = (request.args.get("group") or "").strip()
    if not name:
        abort(400, "say which consumer group")
    progress, errors = [], []
    for group, rows, error in ask_every_group(methodcaller("consumer_progress", name)):
        if error and "has no offsets" not in error:
            errors.append(f"{group}: {error}")
        if rows:
            progress.append({"group": group, "rows": rows, "lag": sum(r["lag"] for r in rows)})
    members, member_errors = _members(name)
    topics = sorted({r["topic"] for p in progress for r in p["rows"]})
    return render_template(
        "group.html",
        group=name,
        progress=progress,
        total_lag=sum(p["lag"] for p in progress),
        members=members,
        errors=errors + member_errors,
        topics=topics,
        broker_groups=broker_groups(),
    )


def _reset_request(form: Any) -> dict[str, Any]:
    """What the reset form asks: group, topic, broker group, target and its value, queue, force."""
    asked = {
        "group": (form.get("group") or "").strip(),
        "topic": (form.get("topic") or "").strip(),
        "broker_group": form.get("broker_group") or "",
        "target": form.get("target") or "",
        "when": (form.get("when") or "").strip(),
        "offset": (form.get("offset") or "").strip(),
        "queue": (form.get("queue") or "").strip(),
        "force": form.get("force") == "on",
    }
    if not asked["group"] or not asked["topic"]:
        abort(400, "say which group and topic")
    if asked["target"] not in TARGETS:
        abort(400, f"reset to one of {', '.join(TARGETS)}")
    return asked


def _reset(asked: dict[str, Any], *, dry_run: bool) -> tuple[dict[str, Any] | None, str]:
    where: dict[str, Any] = {}
    try:
        if asked["target"] == "time":
            where["timestamp_ms"] = parse_moment_ms(asked["when"])
        elif asked["target"] == "offset":
            where["queue_offset"] = int(asked["offset"])
        else:
            where[asked["target"]] = True
        queue_id = int(asked["queue"]) if asked["queue"] else None
    except ValueError as exc:
        return None, str(exc)
    reset = methodcaller(
        "reset_offset",
        asked["group"],
        asked["topic"],
        dry_run=dry_run,
        queue_id=queue_id,
        force=asked["force"],
        **where,
    )
    return ask(asked["broker_group"], reset, write=not dry_run)


@pages.post("/groups/reset/preview")
@change("offset.reset.preview")
def reset_preview() -> str | Response:
    asked = _reset_request(request.form)
    answer, error = _reset(asked, dry_run=True)
    audit("offset.reset.preview", "failed" if error else "ok", **asked)
    if error:
        say(f"Preview failed: {error}", "error")
        return redirect(url_for("groups.describe", group=asked["group"]))
    return render_template("group_reset.html", asked=asked, answer=answer)


@pages.post("/groups/reset")
@change("offset.reset")
def reset() -> Response:
    asked = _reset_request(request.form)
    answer, error = _reset(asked, dry_run=False)
    audit("offset.reset", "failed" if error else "ok", **asked)
    if error:
        say(f"Reset failed: {error}", "error")
    else:
        moved = ", ".join(f"queue {q['queue_id']} -> {q['new_offset']}" for q in (answer or {}).get("queues", []))
        say(f"Offsets of {asked['group']} in {asked['topic']} on {asked['broker_group']} reset: {moved}.")
    return redirect(url_for("groups.describe", group=asked["group"]))
