"""The Cluster page (every group and broker: role, epoch, in-sync replicas, each slave's lag,
disk use, lease and fence, messages in and out per second; the events of the last minutes on a
timeline) and the Charts page with the JSON series it draws (`/api/series`).
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, jsonify, render_template
from werkzeug.wrappers import Response

from .fleet import BrokerState, Snapshot
from .history import History
from .web import console, snapshot

pages = Blueprint("cluster", __name__)

TIMELINE_WIDTH = 1000
MARGIN = 10  # a mark at either end stays whole


def _disk(status: dict[str, Any]) -> dict[str, Any] | None:
    total = status.get("disk_total_bytes") or 0
    if not total:
        return None
    used = total - (status.get("disk_free_bytes") or 0)
    return {"used": used, "total": total, "percent": 100 * used / total, "commit_log": status["commit_log_file_bytes"]}


def broker_row(now: Snapshot, history: History, broker: BrokerState) -> dict[str, Any]:
    status = broker.status or {}
    link = now.slave_link(broker.group, broker.broker_id) if status.get("role") == "SLAVE" else None
    master = now.master(broker.group)
    in_sync = (master.status or {}).get("in_sync_replica_ids") if master is not None else None
    rates = history.last_rates((broker.group, broker.broker_id)) if broker.reachable else None
    return {
        "broker": broker,
        "role": broker.role if broker.reachable else f"UNREACHABLE (was {broker.last_role})",
        "status": status,
        "lag_bytes": link["lag_bytes"] if link else None,
        "lag_seconds": link["lag_seconds"] if link else None,
        "fit": link["fit"] if link else None,
        "in_sync": (broker.broker_id in in_sync) if in_sync else (link["fit"] if link else None),
        "disk": _disk(status) if status else None,
        "in_per_s": rates.messages_in_per_s if rates else None,
        "out_per_s": rates.messages_out_per_s if rates else None,
        "lease_ms": status.get("lease_valid_ms"),
        # A slave never takes writes: only a master's refusal is a fence worth showing.
        "fence": (status.get("write_refusal") or "") if status.get("role") != "SLAVE" else "",
        "error": broker.error.split("): ", 1)[0] + ")" if "): " in broker.error else broker.error,
    }


def timeline(history: History, group: str, now_ms: int) -> list[dict[str, Any]]:
    """The group's events of the history window, placed along a line TIMELINE_WIDTH wide."""
    start = now_ms - history.window_ms
    return [
        {"event": e, "x": round(MARGIN + (TIMELINE_WIDTH - 2 * MARGIN) * (e.at_ms - start) / history.window_ms, 1)}
        for e in history.recent_events(start, [group])
    ]


@pages.get("/")
@pages.get("/cluster")
def cluster() -> str:
    now = snapshot()

    def view(history: History) -> list[dict[str, Any]]:
        groups = []
        for name, brokers in now.groups().items():
            master = now.master(name)
            status = (master.status or {}) if master else {}
            groups.append(
                {
                    "name": name or "(not answering yet)",
                    "master": master,
                    "epoch": status.get("epoch"),
                    "controller_mode": status.get("controller_mode", False),
                    "in_sync_ids": status.get("in_sync_replica_ids") or [],
                    "controller_error": status.get("controller_error", ""),
                    "rows": [broker_row(now, history, b) for b in brokers],
                    "timeline": timeline(history, name, now.taken_at_ms),
                    "events": list(reversed(history.recent_events(0, [name])))[:50],
                }
            )
        return groups

    groups = console().sampler.read(view)
    window_min = console().config.history_ms // 60_000
    return render_template(
        "cluster.html", groups=groups, snapshot=now, registry=now.registry, width=TIMELINE_WIDTH, window_min=window_min
    )


@pages.get("/charts")
def charts() -> str:
    return render_template("charts.html", window_min=console().config.history_ms // 60_000)


@pages.get("/api/series")
def series() -> Response:
    """Per broker: messages in/out per second and put latency p50/p99 (ms) per interval; per group:
    each slave's replication lag in bytes, as [time ms, value] pairs."""

    def read(history: History) -> dict[str, Any]:
        brokers = []
        for group, broker_id in history.brokers():
            points = history.points((group, broker_id))
            brokers.append(
                {
                    "name": f"{group}/{broker_id}",
                    "in": [[p.at_ms, round(p.messages_in_per_s, 2)] for p in points],
                    "out": [[p.at_ms, round(p.messages_out_per_s, 2)] for p in points],
                    "p50": [[p.at_ms, p.put_p50_ms] for p in points if p.put_p50_ms is not None],
                    "p99": [[p.at_ms, p.put_p99_ms] for p in points if p.put_p99_ms is not None],
                }
            )
        lags = []
        for group in sorted({g for g, _ in history.brokers()}):
            for slave_id, lag in history.slave_lags(group).items():
                lags.append({"name": f"{group}/{slave_id}", "bytes": [[t, b] for t, b, _ in lag]})
        now_ms = history.latest.taken_at_ms if history.latest is not None else 0
        return {"now_ms": now_ms, "window_ms": history.window_ms, "brokers": brokers, "lags": lags}

    return jsonify(console().sampler.read(read))
