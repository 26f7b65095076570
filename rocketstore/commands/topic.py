"""`rocketstore topic`: a broker's topics over the admin API, or a cluster's across its groups.

    rocketstore topic create --topic T [--queues N | --read-queues R --write-queues W] [--perm P] [--order]
    rocketstore topic list [--system] | describe --topic T | delete --topic T [--yes]
    rocketstore topic create --topic T ... --groups all|G1,G2  create on several groups' masters
    rocketstore topic status --topic T                         per group: queues, offsets, last store
    rocketstore topic list                                     (with a registry: every group's topics)
    rocketstore topic delete --topic T --groups ... --yes      delete on several groups

`topic list` leaves out the topics the broker keeps for itself (schedules, transactions, pop
state) unless `--system`; `--json` marks each topic's `system`. `topic delete` only says what it
would delete without `--yes`. Across groups, the broker at
`--endpoint` names the groups from the cluster's registry (`cluster.py`) and each group's master
does its part; a group that fails is reported in its row and the command exits 1 after the others
are done. Runs on the command's main thread.
"""

from __future__ import annotations

import argparse
from typing import Any

from client import AdminClient, RocketStoreError
from client.report import format_table, perm_text, utc_text

from .args import at_least_one, non_empty, perm_bits
from .cluster import EXIT_PARTLY, chosen_groups, describe, each_group, errors_json, exit_status, group_masters, registry
from .common import EXIT_OK, CommandError, print_json
from .connection import admin_action, with_admin


def topic_arguments(p: argparse.ArgumentParser) -> None:
    actions = p.add_subparsers(dest="topic_action", metavar="ACTION", required=True)
    create = admin_action(actions, "create", "create or update a topic")
    create.add_argument("--topic", required=True, type=non_empty, help="the topic's name")
    create.add_argument("--queues", type=at_least_one, default=4, metavar="N", help="read and write queues (default 4)")
    create.add_argument("--read-queues", type=at_least_one, metavar="N", help="read queues (default: --queues)")
    create.add_argument("--write-queues", type=at_least_one, metavar="N", help="write queues (default: --queues)")
    create.add_argument(
        "--perm", type=perm_bits, default=6, help="RocketMQ permission bits: 4 read, 2 write, 1 inherit (default 6)"
    )
    create.add_argument("--order", action="store_true", help="mark the topic as ordered (consumed in queue order)")
    create.add_argument(
        "--groups",
        metavar="all|G1,G2",
        help="create it on these broker groups of the cluster (their masters), or all of them; "
        "default: the broker at --endpoint only",
    )
    listing = admin_action(actions, "list", "list the topics (of every group, when the broker is in a cluster)")
    listing.add_argument(
        "--system", action="store_true", help="also the broker's own topics (schedules, transactions, pop state)"
    )
    status = admin_action(actions, "status", "a topic across the cluster: per group its queues, offsets and last store")
    status.add_argument("--topic", required=True, type=non_empty, help="the topic's name")
    describe = admin_action(actions, "describe", "a topic's route and, per queue, min/max offsets and last store time")
    describe.add_argument("--topic", required=True, type=non_empty, help="the topic's name")
    delete = admin_action(actions, "delete", "delete a topic and the consumer offsets kept for it (needs --yes)")
    delete.add_argument("--topic", required=True, type=non_empty, help="the topic's name")
    delete.add_argument("--yes", action="store_true", help="really delete it (without: say what would go)")
    delete.add_argument(
        "--groups", metavar="all|G1,G2", help="delete it on these broker groups, or all (default: --endpoint's only)"
    )


def print_spec(spec: dict[str, Any]) -> None:
    order = ", ordered" if spec.get("order") else ""
    print(
        f"topic {spec['name']}: {spec['read_queue_nums']} read / {spec['write_queue_nums']} write "
        f"queues, perm {spec['perm']} ({perm_text(spec['perm'])}){order}"
    )


def create_topic(admin: AdminClient, args: argparse.Namespace) -> dict[str, Any]:
    """`topic create`'s options applied on one broker; the spec as stored."""
    return admin.create_topic(
        args.topic,
        queues=args.queues,
        perm=args.perm,
        read_queues=args.read_queues,
        write_queues=args.write_queues,
        order=args.order,
    )


def run_topic(args: argparse.Namespace) -> int:
    def work(admin: AdminClient) -> int:
        action = args.topic_action
        if action in ("create", "delete") and args.groups:
            spread = create_on_groups if action == "create" else delete_on_groups
            return spread(args, admin)
        if action == "status":
            return topic_status(args, admin)
        if action == "create":
            spec = create_topic(admin, args)
            print_json(spec) if args.json else print_spec(spec)
        elif action == "describe":
            described = admin.describe_topic(args.topic)
            if args.json:
                print_json(described)
                return EXIT_OK
            print_spec(described["topic"])
            print(
                f"served by {described['broker_name']} ({described['role']}) at {described['client_endpoint']}; "
                f"master at {described['master_client_endpoint'] or 'unknown'}"
            )
            rows = [
                (q["queue_id"], q["min_offset"], q["max_offset"], utc_text(q["last_store_timestamp_ms"]))
                for q in described["queues"]
            ]
            print(format_table(("queue", "min offset", "max offset", "last stored (UTC)"), rows))
        elif action == "delete":
            if not args.yes:
                described = admin.describe_topic(args.topic)
                stored = sum(q["max_offset"] - q["min_offset"] for q in described["queues"])
                print(
                    f"Dry run: would delete topic {args.topic} ({stored} messages in its queues; they stay in the "
                    f"CommitLog until retention). To do it: add --yes"
                )
                return EXIT_OK
            groups = admin.delete_topic(args.topic)
            if args.json:
                print_json({"deleted": args.topic, "groups": groups})
            else:
                print(f"deleted topic {args.topic}" + (f"; offsets of {', '.join(groups)} removed" if groups else ""))
        else:
            across = cluster_topics(args, admin)
            topics = across if across is not None else sorted(admin.list_topics(), key=lambda t: t["name"])
            if not args.system:
                topics = [t for t in topics if not t.get("system")]
            if args.json:
                print_json(topics)
                return EXIT_OK
            header: tuple[str, ...] = ("topic", "read queues", "write queues", "perm", "order")
            listed: list[tuple[Any, ...]] = [
                (
                    t["name"],
                    t["read_queue_nums"],
                    t["write_queue_nums"],
                    f"{t['perm']} ({perm_text(t['perm'])})",
                    "yes" if t.get("order") else "",
                )
                + (("yes" if t.get("system") else "",) if args.system else ())
                + ((",".join(t["groups"]),) if across is not None else ())
                for t in topics
            ]
            header += ("system",) if args.system else ()
            print(format_table(header + (("groups",) if across is not None else ()), listed))
        return EXIT_OK

    return with_admin(args, work)


# -- across the groups of a cluster ---------------------------------------------------------------


def create_on_groups(args: argparse.Namespace, admin: AdminClient) -> int:
    masters = chosen_groups(args.groups, registry(admin))
    results = each_group(args, masters, lambda a: create_topic(a, args))
    if args.json:
        print_json(errors_json(results))
        return exit_status(results)
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
    return exit_status(results)


def delete_on_groups(args: argparse.Namespace, admin: AdminClient) -> int:
    masters = chosen_groups(args.groups, registry(admin))
    if not args.yes:
        print(f"Dry run: would delete topic {args.topic} on {', '.join(masters)}. To do it: add --yes")
        return EXIT_OK
    results = each_group(args, masters, lambda a: a.delete_topic(args.topic))
    if args.json:
        print_json(errors_json(results))
        return exit_status(results)
    for name, result in results.items():
        print(f"{name}: " + (f"failed: {result}" if isinstance(result, RocketStoreError) else "deleted"))
    return exit_status(results)


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
        utc_text(last),
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
        print_json(errors_json(results))
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
