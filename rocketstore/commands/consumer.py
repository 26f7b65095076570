"""`rocketstore consumer`: the consumer groups a broker knows, a group's members and its offsets and
lag per queue, and resetting them, over the admin API.

    rocketstore consumer list
    rocketstore consumer progress --group G [--topic T]
    rocketstore consumer reset --group G --topic T --to-time WHEN|--to-offset N|--to-earliest|--to-latest
        [--queue Q] [--execute] [--force]

`consumer reset` is a dry run without `--execute` (Kafka's reset-offsets convention). Runs on the
command's main thread.
"""

from __future__ import annotations

import argparse
from typing import Any

from client import AdminClient, BrokerError
from client.report import format_table, utc_text

from .args import moment_ms, natural, non_empty
from .common import EXIT_OK, print_json
from .connection import admin_action, with_admin

# How each client protocol reads in a table.
PROTOCOL_TEXT = {"GRPC": "gRPC", "GRPC_POP": "gRPC pop", "GRPC_PULL": "gRPC pull", "REMOTING": "remoting 4.x"}


def consumer_arguments(p: argparse.ArgumentParser) -> None:
    actions = p.add_subparsers(dest="consumer_action", metavar="ACTION", required=True)
    admin_action(actions, "list", "the consumer groups the broker knows: offsets there or members online")
    progress = admin_action(actions, "progress", "a consumer group's members, and its offsets and lag per queue")
    progress.add_argument("--group", required=True, type=non_empty, help="the consumer group")
    progress.add_argument("--topic", type=non_empty, help="only this topic (default: every topic the group consumed)")
    reset = admin_action(actions, "reset", "move a consumer group's offsets in a topic (a dry run without --execute)")
    reset.add_argument("--group", required=True, type=non_empty, help="the consumer group")
    reset.add_argument("--topic", required=True, type=non_empty, help="the topic")
    to = reset.add_mutually_exclusive_group(required=True)
    to.add_argument(
        "--to-time",
        type=moment_ms,
        metavar="WHEN",
        help="the first message stored at or after WHEN (Unix ms, or ISO 8601; no zone means UTC)",
    )
    to.add_argument("--to-offset", type=natural, metavar="N", help="queue offset N in every queue (clamped)")
    reset.add_argument("--queue", type=natural, metavar="Q", help="only queue Q (default: every queue of the topic)")
    to.add_argument("--to-earliest", action="store_true", help="each queue's first message still stored")
    to.add_argument("--to-latest", action="store_true", help="each queue's end: skip everything stored")
    reset.add_argument("--execute", action="store_true", help="apply the reset (without: only show it)")
    reset.add_argument(
        "--force",
        action="store_true",
        help="apply it even while consumers of the group are online (they may write their offsets over it)",
    )


def _protocols(names: list[str]) -> str:
    return ", ".join(PROTOCOL_TEXT.get(n, n) for n in names) or "-"


def list_groups(admin: AdminClient, as_json: bool) -> int:
    groups = admin.list_consumer_groups()
    if as_json:
        print_json(groups)
        return EXIT_OK
    rows = [
        (
            g["group"],
            g["online_clients"],
            _protocols(g["protocols"]),
            ", ".join(g["topics"]) or "-",
            g["lag"],
            "pop" if g["pop"] else "offsets",
            utc_text(g["last_seen_ms"]),
        )
        for g in groups
    ]
    print(format_table(("group", "online", "protocols", "topics", "lag", "progress by", "last seen (UTC)"), rows))
    if not groups:
        print("no consumer group has offsets on this broker or a member online")
    return EXIT_OK


def member_rows(clients: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [
        (
            c["client_id"],
            PROTOCOL_TEXT.get(c["protocol"], c["protocol"]),
            c["address"],
            " ".join(filter(None, (c["language"], c["version"]))) or "-",
            ", ".join(c["topics"]) or "-",
            utc_text(c["last_seen_ms"]),
        )
        for c in clients
    ]


MEMBER_COLUMNS = ("client", "protocol", "address", "client software", "topics", "last seen (UTC)")


def group_progress(admin: AdminClient, args: argparse.Namespace) -> int:
    members = admin.list_clients(args.group, "CONSUMER")
    try:
        rows = admin.consumer_progress(args.group, args.topic or "")
    except BrokerError as exc:
        if exc.code_name != "NOT_FOUND" or not members:
            raise
        rows = []  # online, but nothing committed yet
    if args.json:
        print_json({"group": args.group, "members": members, "queues": rows})
        return EXIT_OK
    print(f"group {args.group}: {len(members)} member(s) online")
    if members:
        print(format_table(MEMBER_COLUMNS, member_rows(members)))
    table = [
        (
            r["topic"],
            r["queue_id"],
            r["broker_offset"],
            r["consumer_offset"] if r["consumer_offset"] >= 0 else None,  # "-", right-aligned with the numbers
            r["lag"],
            utc_text(r["last_consume_timestamp_ms"]),
        )
        for r in rows
    ]
    if table:
        print(format_table(("topic", "queue", "broker offset", "consumer offset", "lag", "last consumed (UTC)"), table))
    else:
        print("no offsets committed yet")
    print(f"total lag: {sum(r['lag'] for r in rows)}")
    return EXIT_OK


def run_consumer(args: argparse.Namespace) -> int:
    def work(admin: AdminClient) -> int:
        if args.consumer_action == "list":
            return list_groups(admin, args.json)
        if args.consumer_action == "progress":
            return group_progress(admin, args)
        answer = admin.reset_offset(
            args.group,
            args.topic,
            timestamp_ms=args.to_time,
            queue_offset=args.to_offset,
            earliest=args.to_earliest,
            latest=args.to_latest,
            dry_run=not args.execute,
            queue_id=args.queue,
            force=args.force,
        )
        if args.json:
            print_json(answer)
            return EXIT_OK
        changes = [
            (q["queue_id"], q["old_offset"] if q["old_offset"] >= 0 else None, q["new_offset"])
            for q in answer["queues"]
        ]
        print(format_table(("queue", "offset now", "offset after"), changes))
        if answer["applied"]:
            print(f"reset group {args.group} in {args.topic}")
        else:
            print(
                "Dry run; nothing changed. To do it: add --execute (refused while consumers of the group are online; "
                "stop them first)"
            )
        return EXIT_OK

    return with_admin(args, work)
