"""The operator's commands over a cluster of broker groups, through any one broker's admin API,
and the helpers the `topic` command's cluster-wide actions use (`topic.py`).

    rocketstore cluster list                                   the groups and brokers the registry shows
    rocketstore cluster drain --group G [--undo]               write permission off (on) for a group

The broker named by `--endpoint` answers DescribeCluster from the registry in etcd; each group's
part of the work is then asked of that group's master (the same admin secret serves the whole
cluster). A group that does not answer is reported in its row and the command exits 1 after the
others are done, so that one group that is away does not stop the rest. Runs on the command's
main thread.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from client import AdminClient, BrokerError, RocketStoreError
from client.report import format_table, perm_text

from .args import non_empty
from .common import EXIT_OK, EXIT_PROBLEMS, CommandError, print_json
from .connection import admin_action, admin_secret, with_admin

# One group or more failed; the others did their part.
EXIT_PARTLY = EXIT_PROBLEMS


def describe(admin: AdminClient) -> dict[str, Any]:
    """DescribeCluster's answer; a broker that predates it (UNIMPLEMENTED) stands alone."""
    try:
        return admin.describe_cluster()
    except BrokerError as exc:
        if exc.code_name != "UNIMPLEMENTED":
            raise
        return {"cluster": "", "broker_name": admin.endpoint, "registry": False, "brokers": []}


def registry(admin: AdminClient) -> dict[str, Any]:
    """DescribeCluster's answer; CommandError when the broker has no registry."""
    described = describe(admin)
    if not described["registry"]:
        raise CommandError(
            f"broker {described['broker_name']} has no cluster registry (no etcdEndpoints): it stands alone; "
            f"run the command without --groups"
        )
    return described


def group_masters(described: dict[str, Any]) -> dict[str, str]:
    """Each group's master client endpoint (a slave standing in for it when there is none)."""
    masters: dict[str, str] = {}
    for broker in described["brokers"]:
        if broker["role"] == "MASTER" and not broker["superseded"]:
            masters[broker["broker_name"]] = broker["client_endpoint"]
    for broker in described["brokers"]:
        if broker["acting"]:
            masters.setdefault(broker["broker_name"], broker["client_endpoint"])
    return dict(sorted(masters.items()))


def chosen_groups(text: str, described: dict[str, Any]) -> dict[str, str]:
    """`all` or a comma-separated list of group names: their masters. Unknown names, or a named
    group without a master now, are a CommandError naming what exists."""
    masters = group_masters(described)
    known = sorted({b["broker_name"] for b in described["brokers"]})
    if text.strip() == "all":
        if not masters:
            raise CommandError("no group of the cluster has a master now")
        return masters
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise CommandError("--groups: expected 'all' or group names separated by ','")
    unknown = [n for n in names if n not in known]
    if unknown:
        raise CommandError(f"--groups: no group {', '.join(unknown)} in the cluster (groups: {', '.join(known)})")
    leaderless = [n for n in names if n not in masters]
    if leaderless:
        raise CommandError(f"--groups: {', '.join(leaderless)} has no master now; nothing was changed")
    return {n: masters[n] for n in names}


def each_group(
    args: argparse.Namespace, masters: dict[str, str], work: Callable[[AdminClient], Any]
) -> dict[str, Any | RocketStoreError]:
    """`work` on each group's master: its result, or the error that group answered."""
    secret = admin_secret(args)
    results: dict[str, Any | RocketStoreError] = {}
    for name, endpoint in masters.items():
        try:
            with AdminClient(endpoint, secret, timeout_s=args.request_timeout_s, tls_ca_file=args.tls_ca_file) as admin:
                results[name] = work(admin)
        except RocketStoreError as exc:
            results[name] = exc
    return results


def exit_status(results: dict[str, Any]) -> int:
    return EXIT_PARTLY if any(isinstance(r, RocketStoreError) for r in results.values()) else EXIT_OK


def errors_json(results: dict[str, Any]) -> dict[str, Any]:
    return {name: ({"error": str(r)} if isinstance(r, RocketStoreError) else r) for name, r in results.items()}


# -- cluster -------------------------------------------------------------------------------------


def cluster_arguments(p: argparse.ArgumentParser) -> None:
    actions = p.add_subparsers(dest="cluster_action", metavar="ACTION", required=True)
    admin_action(actions, "list", "the cluster's groups and brokers as the registry in etcd shows them")
    drain = admin_action(
        actions, "drain", "turn a group's write permission off (brokerPermission=4): producers move to the others"
    )
    drain.add_argument("--group", required=True, type=non_empty, help="the broker group (brokerName)")
    drain.add_argument("--undo", action="store_true", help="give the group its write permission back")


def _broker_note(broker: dict[str, Any]) -> str:
    notes = []
    if broker["superseded"]:
        notes.append("superseded (an older epoch's master)")
    if broker["acting"]:
        notes.append("acting for its master")
    if broker["broker_permission"] & 2 == 0:
        notes.append("drained")
    return ", ".join(notes)


def run_cluster(args: argparse.Namespace) -> int:
    def work(admin: AdminClient) -> int:
        described = registry(admin)
        if args.cluster_action == "list":
            if args.json:
                print_json(described)
                return EXIT_OK
            freshness = "fresh" if described["fresh"] else "STALE: routes name the answering group only"
            print(
                f"cluster {described['cluster']} as {described['broker_name']} read it "
                f"{described['read_age_ms']} ms ago ({freshness})"
            )
            rows = [
                (
                    b["broker_name"],
                    b["broker_id"],
                    b["role"],
                    b["epoch"],
                    b["client_endpoint"],
                    f"{b['broker_permission']} ({perm_text(b['broker_permission'])})",
                    b["topics"],
                    _broker_note(b),
                )
                for b in described["brokers"]
            ]
            print(format_table(("group", "id", "role", "epoch", "client", "perm", "topics", ""), rows))
            return EXIT_OK
        brokers = {
            f"{b['broker_name']}/{b['broker_id']}": b["client_endpoint"]
            for b in described["brokers"]
            if b["broker_name"] == args.group
        }
        if not brokers:
            known = sorted({b["broker_name"] for b in described["brokers"]})
            raise CommandError(f"no group {args.group} in the cluster (groups: {', '.join(known)})")
        permission = "6" if args.undo else "4"
        results = each_group(args, brokers, lambda a: a.set_broker_config({"brokerPermission": permission}))
        if args.json:
            print_json(errors_json(results))
            return exit_status(results)
        for name, result in results.items():
            print(f"{name}: " + (f"failed: {result}" if isinstance(result, RocketStoreError) else "done"))
        if args.undo:
            print(f"group {args.group} takes writes again; producers return to it at their next route refresh")
        else:
            print(
                f"group {args.group} takes no more sends; producers move to the other groups at their next route "
                f"refresh. Consumers keep reading it: when `rocketstore consumer progress` on it shows lag 0 for "
                f"every group, its brokers can stop. The setting lasts until they restart."
            )
        return exit_status(results)

    return with_admin(args, work)
