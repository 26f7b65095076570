"""`rocketstore config`: a running broker's effective config (secrets hidden), and changing the keys
that change live, until it restarts, over the admin API.

    rocketstore config get [--key K ...]                          (also: rocketstore broker config ...)
    rocketstore config set KEY=VALUE ... [--scope broker|group|cluster]

`get` shows brokerRole as the broker serves now, and the configured role beside it when an
election or a switchover changed it. `set` changes the broker at `--endpoint`, or with `--scope
group` every broker of its group (so a change made on a master is already on the slave that takes
over), or with `--scope cluster` every broker the cluster's registry names (mqadmin
updateBrokerConfig -c); it says which brokers took the change and exits 1 when one did not. An
unknown key is refused with the nearest known one. Runs on the command's main thread.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from client import AdminClient, RocketStoreError
from client.report import format_table

from .args import key_value
from .cluster import describe, each_group, errors_json, exit_status
from .common import EXIT_OK, CommandError, print_json
from .connection import admin_action, admin_secret, with_admin

SCOPES = ("broker", "group", "cluster")


def config_arguments(p: argparse.ArgumentParser) -> None:
    actions = p.add_subparsers(dest="config_action", metavar="ACTION", required=True)
    get = admin_action(actions, "get", "the broker's effective config (secrets hidden)")
    get.add_argument("--key", action="append", metavar="KEY", help="only this key (repeatable)")
    put = admin_action(actions, "set", "change keys on running brokers until they restart")
    put.add_argument("assignments", nargs="+", type=key_value, metavar="KEY=VALUE", help="a key and its new value")
    put.add_argument(
        "--scope",
        choices=SCOPES,
        default="broker",
        help="the broker at --endpoint (default), every broker of its group, or every broker of the cluster",
    )


def group_brokers(admin: AdminClient, connect: Callable[[str], AdminClient]) -> dict[str, str]:
    """Every broker of the asked broker's group, as "group/id" -> client endpoint: its master and
    the slaves the master has, and any other the cluster's registry names (a slave that is
    reconnecting, when there is a registry)."""
    status = admin.status()
    if status["role"] == "SLAVE":
        master = status.get("master_client_endpoint") or ""
        if not master:
            raise CommandError(f"{admin.endpoint} is a slave that knows no master now: ask the master")
        with connect(master) as master_admin:
            status = master_admin.status()
    name = status["broker_name"]
    brokers = {f"{name}/{status['broker_id']}": status["client_endpoint"]}
    for slave in status.get("slaves") or ():
        if slave["client_endpoint"]:
            brokers[f"{name}/{slave['broker_id']}"] = slave["client_endpoint"]
    described = describe(admin)
    for b in described["brokers"] if described["registry"] else ():
        if b["broker_name"] == name:
            brokers.setdefault(f"{name}/{b['broker_id']}", b["client_endpoint"])
    return dict(sorted(brokers.items()))


def cluster_brokers(admin: AdminClient) -> dict[str, str]:
    described = describe(admin)
    if not described["registry"]:
        raise CommandError(
            f"broker {described['broker_name']} has no cluster registry (no etcdEndpoints): "
            "use --scope group (or broker)"
        )
    return {f"{b['broker_name']}/{b['broker_id']}": b["client_endpoint"] for b in described["brokers"]}


def _print_entries(entries: list[dict[str, Any]]) -> None:
    rows = [
        (
            e["key"],
            e["value"] + (f" (configured {e['configured_value']})" if e.get("configured_value") else ""),
            "yes" if e["changeable"] else "",
        )
        for e in entries
    ]
    print(format_table(("key", "value", "changeable live"), rows))


def set_on_brokers(args: argparse.Namespace, admin: AdminClient) -> int:
    values = dict(args.assignments)

    def connect(endpoint: str) -> AdminClient:
        return AdminClient(endpoint, admin_secret(args), timeout_s=args.request_timeout_s, tls_ca_file=args.tls_ca_file)

    brokers = cluster_brokers(admin) if args.scope == "cluster" else group_brokers(admin, connect)
    results = each_group(args, brokers, lambda a: a.set_broker_config(values))
    if args.json:
        print_json(errors_json(results))
        return exit_status(results)
    rows = [
        (name, brokers[name], f"failed: {result}" if isinstance(result, RocketStoreError) else "changed")
        for name, result in results.items()
    ]
    print(f"{', '.join(f'{k}={v}' for k, v in values.items())} on {len(brokers)} broker(s) ({args.scope}):")
    print(format_table(("broker", "endpoint", "result"), rows))
    print("changed until each broker restarts: put the same values in their broker.conf to keep them")
    return exit_status(results)


def run_config(args: argparse.Namespace) -> int:
    def work(admin: AdminClient) -> int:
        if args.config_action == "set":
            if args.scope != "broker":
                return set_on_brokers(args, admin)
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
            _print_entries(entries)
            if args.config_action == "set":
                print(
                    f"changed on {admin.endpoint} until it restarts: put the same values in broker.conf to keep them "
                    "(--scope group changes every broker of its group)"
                )
        return EXIT_OK

    return with_admin(args, work)
