"""`rocketstore consumer`: a consumer group's offsets and lag per queue, and resetting them, over the
admin API.

    rocketstore consumer progress --group G [--topic T]
    rocketstore consumer reset --group G --topic T --to-time WHEN|--to-offset N|--to-earliest|--to-latest
        [--queue Q] [--execute]

`consumer reset` is a dry run without `--execute` (Kafka's reset-offsets convention). Runs on the
command's main thread.
"""

from __future__ import annotations

import argparse

from client import AdminClient
from client.report import format_table, utc_text

from .args import moment_ms, natural, non_empty
from .common import EXIT_OK, print_json
from .connection import admin_action, with_admin


def consumer_arguments(p: argparse.ArgumentParser) -> None:
    actions = p.add_subparsers(dest="consumer_action", metavar="ACTION", required=True)
    progress = admin_action(actions, "progress", "a consumer group's offsets and lag per queue")
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


def run_consumer(args: argparse.Namespace) -> int:
    def work(admin: AdminClient) -> int:
        if args.consumer_action == "progress":
            rows = admin.consumer_progress(args.group, args.topic or "")
            if args.json:
                print_json(rows)
                return EXIT_OK
            table = [
                (
                    r["topic"],
                    r["queue_id"],
                    r["broker_offset"],
                    r["consumer_offset"] if r["consumer_offset"] >= 0 else "-",
                    r["lag"],
                    utc_text(r["last_consume_timestamp_ms"]),
                )
                for r in rows
            ]
            print(
                format_table(
                    ("topic", "queue", "broker offset", "consumer offset", "lag", "last consumed (UTC)"), table
                )
            )
            print(f"total lag: {sum(r['lag'] for r in rows)}")
            return EXIT_OK
        answer = admin.reset_offset(
            args.group,
            args.topic,
            timestamp_ms=args.to_time,
            queue_offset=args.to_offset,
            earliest=args.to_earliest,
            latest=args.to_latest,
            dry_run=not args.execute,
            queue_id=args.queue,
        )
        if args.json:
            print_json(answer)
            return EXIT_OK
        changes = [
            (q["queue_id"], q["old_offset"] if q["old_offset"] >= 0 else "-", q["new_offset"]) for q in answer["queues"]
        ]
        print(format_table(("queue", "offset now", "offset after"), changes))
        if answer["applied"]:
            print(f"reset group {args.group} in {args.topic}")
        else:
            print("Dry run; nothing changed. To do it: add --execute (stop the group's consumers first)")
        return EXIT_OK

    return with_admin(args, work)
