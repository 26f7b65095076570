"""The Connections page: the producers and consumers each broker heard from lately, by protocol
(gRPC, gRPC pop, gRPC pull, remoting 4.x), with their client ids, addresses, groups, topics and
when they were last seen.
"""

from __future__ import annotations

from collections import Counter

from flask import Blueprint, render_template

from client import AdminClient

from .web import ask_broker, snapshot

pages = Blueprint("connections", __name__)


@pages.get("/connections")
def connections() -> str:
    brokers = []
    for group, members in snapshot().groups().items():
        for broker in members:
            if not group or not broker.reachable:
                continue
            clients, error = ask_broker(broker, AdminClient.list_clients)
            clients = sorted(clients or [], key=lambda c: (c["kind"], c["protocol"], c["group"], c["client_id"]))
            brokers.append(
                {
                    "broker": broker,
                    "clients": clients,
                    "error": error,
                    "by_protocol": sorted(Counter((c["kind"], c["protocol"]) for c in clients).items()),
                }
            )
    return render_template("connections.html", brokers=brokers)
