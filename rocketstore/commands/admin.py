"""`rocketstore admin elect --broker ID [--endpoint HOST:PORT]`: a planned switchover, in
controller mode (the master key moves in etcd) and in static mode (role overrides in the two
brokers' store directories, see `rocketstore.failover.switchover`).

The endpoint may be any broker of the group: when it is not the master, the command asks the
master it names. The master stops taking writes, waits until broker ID holds its
whole log and hands over; producers that follow not-master answers (our client does) see no
error. Prints the new master, its epoch and the offset it took over at; exit status 1 when the
switchover was refused or timed out (nothing changed then). Asked to elect the broker that is
master already, it says so at once. Runs on the command's main thread.
"""

from __future__ import annotations

import argparse
from typing import Any

from client import AdminClient, RocketStoreError, TransportError

from .args import seconds
from .common import EXIT_OK, CommandError, print_json
from .connection import add_connection_arguments, admin_secret, check_tls_file, failure


def admin_arguments(p: argparse.ArgumentParser) -> None:
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    text = (
        "planned switchover: make broker ID (a slave of the group) its master. The master stops taking "
        "writes, waits until ID holds its whole log and hands over; producers that follow the master see "
        "no error. --endpoint may be any broker of the group. Controller mode moves the master key in "
        "etcd; static mode swaps the two brokers' roles."
    )
    elect = actions.add_parser("elect", help="planned switchover: make a slave the master", description=text)
    add_connection_arguments(elect, admin=True)
    elect.add_argument("--broker", type=int, required=True, metavar="ID", help="brokerId of the slave to make master")
    elect.add_argument(
        "--timeout-s",
        type=seconds,
        default=30.0,
        metavar="S",
        help="how long the slave may take to catch up (default 30)",
    )
    elect.set_defaults(parser=elect)


def run_admin(args: argparse.Namespace) -> int:
    secret = admin_secret(args)
    check_tls_file(args)
    endpoint = args.endpoint
    try:
        with AdminClient(endpoint, secret, timeout_s=args.request_timeout_s, tls_ca_file=args.tls_ca_file) as admin:
            asked = admin.status()
        master = asked.get("master_client_endpoint") or ""
        if asked["role"] == "SLAVE":
            if not master:
                raise CommandError(f"{endpoint} knows no master now: retry once one is elected")
            endpoint = master
        with AdminClient(endpoint, secret, timeout_s=args.request_timeout_s, tls_ca_file=args.tls_ca_file) as admin:
            answer: dict[str, Any] = admin.elect_master(args.broker, args.timeout_s)
    except TransportError as exc:
        if exc.code == "DEADLINE_EXCEEDED" and exc.details:
            # The master's own answer: the slave did not catch up in time (nothing changed).
            raise CommandError(f"no switchover: {exc.details}") from None
        raise failure(exc) from None
    except RocketStoreError as exc:
        raise failure(exc) from None
    if args.json:
        print_json(answer)
    else:
        print(answer.get("message") or answer)
    return EXIT_OK
