"""The Messages pages: look-up by message id (either form), by key, or by topic and time range
(paged, one broker group after the other); one message with its body as text, JSON or hex, its
properties, store and born times and hosts, and the consumer groups that consumed it; the
dead-letter topics, browsable like any topic, and a dead letter's resend to the topic it came
from.

A resend form carries a client message id made when the page was drawn: sending the same form
twice stores one copy (the broker answers a repeated id with the first copy's result).
"""

from __future__ import annotations

from operator import methodcaller
from typing import Any

from flask import Blueprint, abort, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from client.convert import new_message_id
from client.report import body_preview, cursor_text, parse_cursor, parse_moment_ms

from . import render
from .pages_topics import all_topics
from .web import ask, ask_every_group, audit, broker_groups, change, say

pages = Blueprint("messages", __name__)

MODES = ("id", "key", "time")
PAGE_SIZES = (10, 20, 50, 100)


def _row(message: dict[str, Any], group: str) -> dict[str, Any]:
    return {**message, "broker_group": group, "preview": body_preview(message["body"], 60)}


def _by_lookup(mode: str, args: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """Messages by id or key from every broker group that answers."""
    topic = (args.get("topic") or "").strip()
    wanted = (args.get("msg_id") if mode == "id" else args.get("key")) or ""
    if not wanted.strip():
        return [], ["say what to look for"]
    if mode == "key" and not topic:
        return [], ["a look-up by key needs its topic (keys are indexed per topic)"]
    query = {"msg_id": wanted.strip()} if mode == "id" else {"key": wanted.strip()}
    found, errors = [], []
    for group, answer, error in ask_every_group(methodcaller("query_message", topic=topic, **query)):
        if error and "does not exist" not in error:
            errors.append(f"{group}: {error}")
        found += [_row(m, group) for m in answer or ()]
    return found, errors


def _by_time(args: Any) -> dict[str, Any]:
    """One page of a topic by store time: this broker group's page, and where the next one is
    (the same group further on, or the next group from the start)."""
    topic = (args.get("topic") or "").strip()
    out: dict[str, Any] = {"messages": [], "errors": [], "next": None, "damaged": []}
    if not topic:
        out["errors"].append("say which topic")
        return out
    try:
        since = parse_moment_ms(args.get("since") or "0")
        until = parse_moment_ms(args.get("until")) if args.get("until") else 0
        size = int(args.get("size") or 20)
        cursor = parse_cursor(args.get("cursor") or "")
    except ValueError as exc:
        out["errors"].append(str(exc))
        return out
    groups = broker_groups()
    group = args.get("broker_group") or (groups[0] if groups else "")
    if group not in groups:
        out["errors"].append(f"no broker group {group!r} is known")
        return out
    listing = methodcaller("list_messages", topic, since, until, max_messages=max(1, min(size, 256)), cursor=cursor)
    page, error = ask(group, listing)
    if error and "does not exist" not in error:
        out["errors"].append(f"{group}: {error}")
    page = page or {"messages": [], "next_cursor": {}, "more": False, "damaged_offsets": []}
    out["messages"] = [_row(m, group) for m in page["messages"]]
    out["damaged"] = page["damaged_offsets"]
    out["group"] = group
    base = {"mode": "time", "topic": topic, "since": args.get("since") or "0", "until": args.get("until") or ""}
    base["size"] = str(size)
    if page["more"]:
        out["next"] = {**base, "broker_group": group, "cursor": cursor_text(page["next_cursor"])}
    elif groups.index(group) + 1 < len(groups):
        out["next"] = {**base, "broker_group": groups[groups.index(group) + 1]}
    return out


@pages.get("/messages")
def search() -> str:
    mode = request.args.get("mode", "")
    context: dict[str, Any] = {"mode": mode if mode in MODES else "id", "args": request.args, "sizes": PAGE_SIZES}
    if mode in ("id", "key"):
        context["found"], context["errors"] = _by_lookup(mode, request.args)
        context["searched"] = True
    elif mode == "time":
        page = _by_time(request.args)
        context.update(found=page["messages"], errors=page["errors"], next=page["next"], damaged=page["damaged"])
        context.update(searched=True, page_group=page.get("group"))
    return render_template("messages.html", **context)


@pages.get("/messages/view")
def view() -> str:
    group = request.args.get("broker_group", "")
    try:
        offset = int(request.args.get("offset", ""))
    except ValueError:
        abort(400, "say which message: its CommitLog offset")
    found, error = ask(group, methodcaller("query_message", commit_log_offset=offset))
    if not found:
        abort(404, error or f"no message at CommitLog offset {offset} on {group}")
    message = found[0]
    form = request.args.get("form") or render.default_form(message["body"])
    form = form if form in render.BODY_FORMS else "hex"
    dead_letter = message["topic"].startswith("%DLQ%")
    return render_template(
        "message.html",
        m=message,
        broker_group=group,
        form=form,
        forms=render.BODY_FORMS,
        shown=render.body_as(message["body"], form),
        cut=len(message["body"]) > render.MAX_SHOWN_BYTES,
        dead_letter=dead_letter,
        origin=message["properties"].get("RETRY_TOPIC", ""),
        new_id=new_message_id() if dead_letter else "",
    )


@pages.get("/dlq")
def dead_letters() -> str:
    listed, errors = all_topics()
    rows = []
    for name, topic in listed.items():
        if topic["kind"] != "dlq":
            continue
        for group in topic["groups"]:
            described, error = ask(group, methodcaller("describe_topic", name))
            queues = (described or {}).get("queues", [])
            rows.append(
                {
                    "topic": name,
                    "consumer_group": name[len("%DLQ%") :],
                    "broker_group": group,
                    "messages": sum(q["max_offset"] - q["min_offset"] for q in queues),
                    "last_ms": max((q["last_store_timestamp_ms"] for q in queues), default=0),
                    "error": error,
                }
            )
    return render_template("dlq.html", rows=rows, errors=errors)


@pages.post("/messages/resend")
@change("dlq.resend")
def resend() -> Response:
    group = request.form.get("broker_group", "")
    new_id = request.form.get("new_id", "")
    try:
        offset = int(request.form.get("offset", ""))
    except ValueError:
        abort(400, "say which dead letter: its CommitLog offset")
    resend = methodcaller("resend_dead_letter", commit_log_offset=offset, dry_run=False, new_client_msg_id=new_id)
    answer, error = ask(group, resend, write=True)
    audit("dlq.resend", "failed" if error else "ok", broker_group=group, offset=offset, new_id=new_id)
    if answer is None:
        say(f"Resend failed: {error}", "error")
        return redirect(url_for("messages.view", broker_group=group, offset=offset))
    say(
        f"Resent to {answer['origin_topic']} queue {answer['queue_id']} offset {answer['queue_offset']} "
        f"({answer['put_status']}) as client msgId {answer['client_msg_id']}."
    )
    return redirect(url_for("messages.search", mode="id", msg_id=answer["client_msg_id"], topic=answer["origin_topic"]))
