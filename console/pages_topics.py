"""The Topics pages: the list (system, retry and dead-letter topics hidden unless asked for), create
on chosen broker groups, describe (per group, per queue: min and max offsets, last store time),
and delete behind a confirmation page that shows what goes: the messages of every queue and the
consumer groups whose offsets are removed.
"""

from __future__ import annotations

from operator import methodcaller
from typing import Any

from flask import Blueprint, abort, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from client import AdminClient
from store.metadata.topic_config import DLQ_TOPIC_PREFIX, RETRY_TOPIC_PREFIX, SYSTEM_TOPICS

from .web import ask, ask_every_group, audit, broker_groups, change, say

pages = Blueprint("topics", __name__)

KINDS = ("normal", "retry", "dlq", "system")


def topic_kind(spec: dict[str, Any]) -> str:
    name = spec["name"]
    if spec.get("system") or name in SYSTEM_TOPICS:
        return "system"
    if name.startswith(RETRY_TOPIC_PREFIX):
        return "retry"
    if name.startswith(DLQ_TOPIC_PREFIX):
        return "dlq"
    return "normal"


def all_topics() -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Topics by name over every group ({spec..., groups: {group: spec}, kind}), and errors."""
    topics: dict[str, dict[str, Any]] = {}
    errors = []
    for group, listed, error in ask_every_group(methodcaller("list_topics")):
        if error:
            errors.append(f"{group}: {error}")
        for spec in listed or ():
            entry = topics.setdefault(spec["name"], {**spec, "groups": {}, "kind": topic_kind(spec)})
            entry["groups"][group] = spec
    return dict(sorted(topics.items())), errors


def _required_topic(source: dict[str, str]) -> str:
    name = (source.get("topic") or "").strip()
    if not name:
        abort(400, "say which topic")
    return name


def _whole(text: str | None, label: str, low: int, high: int) -> int:
    try:
        value = int(text or "")
    except ValueError:
        abort(400, f"{label} is a whole number, not {text!r}")
    if not low <= value <= high:
        abort(400, f"{label} must be in {low}..{high}, got {value}")
    return value


@pages.get("/topics")
def topics() -> str:
    shown = set(request.args.getlist("show")) & set(KINDS) | {"normal"}
    listed, errors = all_topics()
    rows = [t for t in listed.values() if t["kind"] in shown]
    hidden = sum(1 for t in listed.values() if t["kind"] not in shown)
    return render_template("topics.html", rows=rows, hidden=hidden, shown=shown, errors=errors, groups=broker_groups())


@pages.post("/topics")
@change("topic.create")
def create() -> Response:
    form = request.form
    name = _required_topic(form)
    read = _whole(form.get("read_queues"), "read queues", 1, 1024)
    write = _whole(form.get("write_queues"), "write queues", 1, 1024)
    perm = _whole(form.get("perm"), "perm", 0, 15)
    order = form.get("order") == "on"
    groups = form.getlist("groups")
    if not groups:
        abort(400, "choose at least one broker group to place the topic on")
    create = methodcaller("create_topic", name, read_queues=read, write_queues=write, perm=perm, order=order)
    for group in groups:
        _, error = ask(group, create, write=True)
        details = {"topic": name, "group": group, "read": read, "write": write, "perm": perm, "order": order}
        audit("topic.create", "failed" if error else "ok", **details)
        if error:
            say(f"{group}: {error}", "error")
        else:
            say(f"Topic {name} created on {group} ({read} read / {write} write queues, perm {perm}).")
    return redirect(url_for("topics.describe", topic=name))


@pages.get("/topics/view")
def describe() -> str:
    name = _required_topic(request.args)
    described = [
        {"group": group, "answer": answer, "error": error}
        for group, answer, error in ask_every_group(methodcaller("describe_topic", name))
        if answer is not None or "does not exist" not in error
    ]
    return render_template("topic.html", topic=name, described=described)


def _loss(name: str) -> list[dict[str, Any]]:
    """Per group holding the topic: its queues' messages and the consumer groups with offsets."""
    out = []
    for group, answer, error in ask_every_group(methodcaller("describe_topic", name)):
        if answer is None:
            if "does not exist" not in error:
                out.append({"group": group, "error": error, "queues": [], "messages": 0, "consumers": []})
            continue
        consumers, error = ask(group, AdminClient.list_consumer_groups)
        queues = answer["queues"]
        out.append(
            {
                "group": group,
                "error": error,
                "queues": queues,
                "messages": sum(q["max_offset"] - q["min_offset"] for q in queues),
                "consumers": [c["group"] for c in consumers or () if name in c["topics"]],
            }
        )
    return out


@pages.get("/topics/delete")
def delete_page() -> str:
    name = _required_topic(request.args)
    return render_template("topic_delete.html", topic=name, loss=_loss(name))


@pages.post("/topics/delete")
@change("topic.delete")
def delete() -> Response:
    name = _required_topic(request.form)
    if request.form.get("confirm", "") != name:
        say(f"Type the topic's name ({name}) to delete it.", "error")
        return redirect(url_for("topics.delete_page", topic=name))
    for group in request.form.getlist("groups"):
        removed, error = ask(group, methodcaller("delete_topic", name), write=True)
        audit("topic.delete", "failed" if error else "ok", topic=name, group=group, offsets_removed=removed)
        if error:
            say(f"{group}: {error}", "error")
        else:
            say(f"Topic {name} deleted on {group}; offsets removed for: {', '.join(removed or []) or 'no group'}.")
    return redirect(url_for("topics.topics"))
