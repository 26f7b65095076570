"""`rocketstore config`: a running broker's effective config (secrets hidden), and changing the keys
that change live, until it restarts, over the admin API.

    rocketstore config get [--key K ...] | set KEY=VALUE ...     (also: rocketstore broker config ...)

Runs on the command's main thread.
"""

from __future__ import annotations

import argparse

from client import AdminClient
from client.report import format_table

from .args import key_value
from .common import EXIT_OK, CommandError, print_json
from .connection import admin_action, with_admin


def config_arguments(p: argparse.ArgumentParser) -> None:
    actions = p.add_subparsers(dest="config_action", metavar="ACTION", required=True)
    get = admin_action(actions, "get", "the broker's effective config (secrets hidden)")
    get.add_argument("--key", action="append", metavar="KEY", help="only this key (repeatable)")
    put = admin_action(actions, "set", "change keys on the running broker until it restarts")
    put.add_argument("assignments", nargs="+", type=key_value, metavar="KEY=VALUE", help="a key and its new value")


def run_config(args: argparse.Namespace) -> int:
    def work(admin: AdminClient) -> int:
        if args.config_action == "set":
            entries = admin.set_broker_config(dict(args.assignments))
        else:
            entries = admin.broker_config()
            if args.key:
                known = {e["key"] for e in entries}
                unknown = [k for k in args.key if k not in known]
                if unknown:
                    from store.properties import unknown_keys_text

                    raise CommandError(unknown_keys_text(unknown, known))
                entries = [e for e in entries if e["key"] in args.key]
        if args.json:
            print_json(entries)
        else:
            rows = [(e["key"], e["value"], "yes" if e["changeable"] else "") for e in entries]
            print(format_table(("key", "value", "changeable live"), rows))
            if args.config_action == "set":
                print("changed until the broker restarts: put the same values in broker.conf to keep them")
        return EXIT_OK

    return with_admin(args, work)
