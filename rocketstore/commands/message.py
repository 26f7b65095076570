"""`rocketstore message query`: look messages up by key, message id or CommitLog offset, over the
admin API; exit 1 when none is found.

    rocketstore message query (--key K --topic T | --id MSGID [--topic T] | --offset COMMITLOG_OFFSET)

Runs on the command's main thread.
"""

from __future__ import annotations

import argparse
import base64

from client import AdminClient
from client.report import body_preview, utc_text

from .args import at_least_one, natural, non_empty
from .common import EXIT_OK, CommandError, print_json
from .connection import admin_action, with_admin


def message_arguments(p: argparse.ArgumentParser) -> None:
    actions = p.add_subparsers(dest="message_action", metavar="ACTION", required=True)
    query = admin_action(actions, "query", "look messages up by key, message id or CommitLog offset")
    by = query.add_mutually_exclusive_group(required=True)
    by.add_argument("--key", metavar="KEY", help="a KEYS entry (needs --topic)")
    by.add_argument(
        "--id",
        type=message_id,
        metavar="MSGID",
        help="either message id: the broker's (offset; 32 hex digits) or the producer's (32 or 34)",
    )
    by.add_argument("--offset", type=natural, metavar="OFFSET", help="the message at this CommitLog offset")
    query.add_argument("--topic", type=non_empty, help="the topic (required with --key)")
    query.add_argument("--max", type=at_least_one, default=32, metavar="N", help="at most N messages (default 32)")


def message_id(text: str) -> str:
    from client.convert import check_message_id

    try:
        return check_message_id(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def run_message(args: argparse.Namespace) -> int:
    if args.key is not None and not args.topic:
        args.parser.error("--key needs --topic (keys are indexed per topic)")

    def work(admin: AdminClient) -> int:
        found = admin.query_message(
            key=args.key, msg_id=args.id, commit_log_offset=args.offset, topic=args.topic or "", max_messages=args.max
        )
        if args.json:
            for m in found:
                m["body_base64"] = base64.b64encode(m.pop("body")).decode()
            print_json(found)
        else:
            for m in found:
                print(
                    f"{m['topic']} queue {m['queue_id']} offset {m['queue_offset']} "
                    f"(CommitLog {m['commit_log_offset']})\n"
                    f"  offset msgId {m['offset_msg_id']}  client msgId {m['client_msg_id'] or '-'}\n"
                    f"  tags {m['tags'] or '-'}  keys {m['keys'] or '-'}  stored {utc_text(m['store_timestamp_ms'])} "
                    f"by {m['store_host']}  born {utc_text(m['born_timestamp_ms'])} at {m['born_host']}\n"
                    f"  body {body_preview(m['body'])}"
                )
        if not found:
            raise CommandError("no message found")
        return EXIT_OK

    return with_admin(args, work)
