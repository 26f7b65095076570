"""The operator's commands over a cluster of broker groups, through any one broker's admin API.

    rocketstore cluster list                                   the groups and brokers the registry shows
    rocketstore cluster drain --group G [--undo]               write permission off (on) for a group
    rocketstore topic create --topic T ... --groups all|G1,G2  create on several groups' masters
    rocketstore topic status --topic T                         per group: queues, offsets, last store
    rocketstore topic list                                     (with a registry: every group's topics)
    rocketstore topic delete --topic T --groups ... --yes      delete on several groups

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

from .admin import AdminClient
from .commands import CommandError, _name, _print_json, admin_secret, format_table, perm_text
from .errors import BrokerError, RocketStoreError
from .ops_commands import _action, _run, _utc, create_topic

EXIT_OK = 0
EXIT_PARTLY = 1


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


def _exit(results: dict[str, Any]) -> int:
    return EXIT_PARTLY if any(isinstance(r, RocketStoreError) for r in results.values()) else EXIT_OK


def _errors_json(results: dict[str, Any]) -> dict[str, Any]:
    return {name: ({"error": str(r)} if isinstance(r, RocketStoreError) else r) for name, r in results.items()}


# -- topic ---------------------------------------------------------------------------------------


def create_on_groups(args: argparse.Namespace, admin: AdminClient) -> int:
    masters = chosen_groups(args.groups, registry(admin))
    results = each_group(args, masters, lambda a: create_topic(a, args))
    if args.json:
        _print_json(_errors_json(results))
        return _exit(results)
    rows = []
    for name, result in results.items():
        if isinstance(result, RocketStoreError):
            rows.append((name, masters[name], "-", "-", f"failed: {result}"))
        else:
            rows.append(
                (
                    name,
                    masters[name],
                    f"{result['read_queue_nums']}/{result['write_queue_nums']}",
                    f"{result['perm']} ({perm_text(result['perm'])})",
                    "created",
                )
            )
    print(f"topic {args.topic} on {len(masters)} group(s):")
    print(format_table(("group", "master", "queues r/w", "perm", "result"), rows))
    return _exit(results)


def delete_on_groups(args: argparse.Namespace, admin: AdminClient) -> int:
    masters = chosen_groups(args.groups, registry(admin))
    if not args.yes:
        print(f"Dry run: would delete topic {args.topic} on {', '.join(masters)}. To do it: add --yes")
        return EXIT_OK
    results = each_group(args, masters, lambda a: a.delete_topic(args.topic))
    if args.json:
        _print_json(_errors_json(results))
        return _exit(results)
    for name, result in results.items():
        print(f"{name}: " + (f"failed: {result}" if isinstance(result, RocketStoreError) else "deleted"))
    return _exit(results)


def _group_row(name: str, endpoint: str, result: Any) -> tuple:
    if isinstance(result, RocketStoreError):
        if getattr(result, "code_name", "") == "NOT_FOUND":
            return (name, endpoint, "-", "-", "-", "-", "-", "not served")
        return (name, endpoint, "-", "-", "-", "-", "-", f"failed: {result}")
    spec, queues = result["topic"], result["queues"]
    last = max((q["last_store_timestamp_ms"] for q in queues), default=0)
    return (
        name,
        endpoint,
        f"{spec['read_queue_nums']}/{spec['write_queue_nums']}",
        perm_text(spec["perm"]),
        sum(q["min_offset"] for q in queues),
        sum(q["max_offset"] for q in queues),
        _utc(last),
        "",
    )


def topic_status(args: argparse.Namespace, admin: AdminClient) -> int:
    described = describe(admin)
    if described["registry"]:
        masters = group_masters(described)
    else:
        masters = {described["broker_name"]: admin.endpoint}
    results = each_group(args, masters, lambda a: a.describe_topic(args.topic))
    if args.json:
        _print_json(_errors_json(results))
    else:
        rows = [_group_row(name, masters[name], result) for name, result in results.items()]
        print(f"topic {args.topic} across {len(masters)} group(s):")
        header = ("group", "master", "queues r/w", "perm", "min offsets", "max offsets", "last stored (UTC)", "")
        print(format_table(header, rows))
    found = [r for r in results.values() if not isinstance(r, RocketStoreError)]
    if not found:
        raise CommandError(f"no group serves topic {args.topic}")
    failed = [
        r for r in results.values() if isinstance(r, RocketStoreError) and getattr(r, "code_name", "") != "NOT_FOUND"
    ]
    return EXIT_PARTLY if failed else EXIT_OK


def cluster_topics(args: argparse.Namespace, admin: AdminClient) -> list[dict[str, Any]] | None:
    """Every group's topics, each with the groups serving it; None without a registry."""
    described = describe(admin)
    if not described["registry"]:
        return None
    results = each_group(args, group_masters(described), lambda a: a.list_topics())
    merged: dict[str, dict[str, Any]] = {}
    for name, topics in results.items():
        if isinstance(topics, RocketStoreError):
            raise CommandError(f"group {name} did not answer: {topics}")
        for topic in topics:
            entry = merged.setdefault(topic["name"], dict(topic, groups=[]))
            entry["groups"].append(name)
    return [merged[name] for name in sorted(merged)]


# -- cluster -------------------------------------------------------------------------------------


def cluster_arguments(p: argparse.ArgumentParser) -> None:
    actions = p.add_subparsers(dest="cluster_action", metavar="ACTION", required=True)
    _action(actions, "list", "the cluster's groups and brokers as the registry in etcd shows them")
    drain = _action(
        actions, "drain", "turn a group's write permission off (brokerPermission=4): producers move to the others"
    )
    drain.add_argument("--group", required=True, type=_name, help="the broker group (brokerName)")
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
                _print_json(described)
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
            _print_json(_errors_json(results))
            return _exit(results)
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
        return _exit(results)

    return _run(args, work)
