"""`rocketstore connections`: the producers and consumers a broker heard from lately, by protocol
(gRPC, gRPC pop, gRPC pull, remoting 4.x), over the admin API; mqadmin's producerConnection and
consumerConnection in one.

    rocketstore connections [--kind producer|consumer] [--group G]

Runs on the command's main thread.
"""

from __future__ import annotations

import argparse
from collections import Counter

from client import AdminClient
from client.report import format_table, utc_text

from .args import non_empty
from .common import EXIT_OK, print_json
from .connection import add_connection_arguments, with_admin


def connections_arguments(p: argparse.ArgumentParser) -> None:
    add_connection_arguments(p, admin=True)
    p.add_argument("--kind", choices=("producer", "consumer"), help="only producers or only consumers")
    p.add_argument("--group", type=non_empty, help="only the members of this consumer group")


def run_connections(args: argparse.Namespace) -> int:
    def work(admin: AdminClient) -> int:
        clients = admin.list_clients(args.group or "", args.kind.upper() if args.kind else None)
        if args.json:
            print_json(clients)
            return EXIT_OK
        clients.sort(key=lambda c: (c["kind"], c["protocol"], c["group"], c["client_id"]))
        rows = [
            (
                c["kind"],
                c["protocol"],
                c["client_id"],
                c["group"] or "-",
                c["address"],
                ",".join(c["topics"]) or "-",
                f"{c['language']} {c['version']}".strip() or "-",
                utc_text(c["last_seen_ms"]),
            )
            for c in clients
        ]
        print(
            format_table(("kind", "protocol", "client id", "group", "address", "topics", "client", "last seen"), rows)
        )
        counts = Counter((c["kind"].lower(), c["protocol"]) for c in clients)
        summary = ", ".join(f"{n} {kind} {protocol}" for (kind, protocol), n in sorted(counts.items()))
        print(f"{len(clients)} client(s) heard from in the last two minutes" + (f": {summary}" if summary else ""))
        return EXIT_OK

    return with_admin(args, work)
