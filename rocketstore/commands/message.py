"""`rocketstore message`: look messages up, page through a topic by store time, and resend dead
letters, over the admin API.

    rocketstore message query (--key K --topic T | --id MSGID [--topic T] | --offset COMMITLOG_OFFSET)
    rocketstore message list --topic T --since WHEN [--until WHEN] [--max N] [--after CURSOR]
    rocketstore message resend (--offset COMMITLOG_OFFSET | --id MSGID) [--execute]

`query` exits 1 when no message is found. `list` prints the cursor of the next page when there is
one. `resend` puts a message of a `%DLQ%<group>` topic again into the topic it came from (a dry
run without `--execute`). Runs on the command's main thread.
"""

from __future__ import annotations

import argparse
import base64
from typing import Any

from client import AdminClient
from client.report import body_preview, consumed_text, cursor_text, parse_cursor, utc_text

from .args import at_least_one, moment_ms, natural, non_empty, parsed, whole_number
from .common import EXIT_OK, CommandError, print_json
from .connection import admin_action, with_admin


def cursor_arg(text: str) -> dict[int, int]:
    return parsed(text, parse_cursor)


def page_size(text: str) -> int:
    return whole_number(text, 1, 256)


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

    listing = admin_action(actions, "list", "a topic's messages stored within a time range, oldest first, a page")
    listing.add_argument("--topic", required=True, type=non_empty, help="the topic (a %%DLQ%%<group> one too)")
    listing.add_argument(
        "--since", required=True, type=moment_ms, metavar="WHEN", help="stored at or after WHEN (Unix ms or ISO 8601)"
    )
    listing.add_argument("--until", type=moment_ms, default=0, metavar="WHEN", help="stored at or before WHEN")
    listing.add_argument("--max", type=page_size, default=32, metavar="N", help="page size, 1 to 256 (default 32)")
    listing.add_argument(
        "--after", type=cursor_arg, default={}, metavar="CURSOR", help="the next page: the cursor the last one printed"
    )

    resend = admin_action(
        actions, "resend", "put a dead letter (%%DLQ%%<group>) again into its topic (a dry run without --execute)"
    )
    which = resend.add_mutually_exclusive_group(required=True)
    which.add_argument("--offset", type=natural, metavar="OFFSET", help="the dead letter at this CommitLog offset")
    which.add_argument("--id", metavar="MSGID", help="the dead letter's message id (either form)")
    resend.add_argument("--execute", action="store_true", help="resend it (without: only show what would happen)")


def _json_ready(message: dict[str, Any]) -> dict[str, Any]:
    message = dict(message)
    message["body_base64"] = base64.b64encode(message.pop("body")).decode()
    return message


def _print_message(m: dict[str, Any]) -> None:
    print(
        f"{m['topic']} queue {m['queue_id']} offset {m['queue_offset']} (CommitLog {m['commit_log_offset']})\n"
        f"  offset msgId {m['offset_msg_id']}  client msgId {m['client_msg_id'] or '-'}\n"
        f"  tags {m['tags'] or '-'}  keys {m['keys'] or '-'}  stored {utc_text(m['store_timestamp_ms'])} "
        f"by {m['store_host']}  born {utc_text(m['born_timestamp_ms'])} at {m['born_host']}\n"
        f"  consumed by {consumed_text(m.get('consumed_by') or [])}\n"
        f"  body {body_preview(m['body'])}"
    )


def _query(args: argparse.Namespace, admin: AdminClient) -> int:
    found = admin.query_message(
        key=args.key, msg_id=args.id, commit_log_offset=args.offset, topic=args.topic or "", max_messages=args.max
    )
    if args.json:
        print_json([_json_ready(m) for m in found])
    else:
        for m in found:
            _print_message(m)
    if not found:
        raise CommandError("no message found")
    return EXIT_OK


def _list(args: argparse.Namespace, admin: AdminClient) -> int:
    if args.until and args.until < args.since:
        args.parser.error("--until is before --since")
    page = admin.list_messages(args.topic, args.since, args.until, max_messages=args.max, cursor=args.after)
    if args.json:
        page["messages"] = [_json_ready(m) for m in page["messages"]]
        page["next_cursor"] = cursor_text(page["next_cursor"])
        print_json(page)
        return EXIT_OK
    for m in page["messages"]:
        _print_message(m)
    if page["damaged_offsets"]:
        listed = ", ".join(map(str, page["damaged_offsets"]))
        print(f"skipped damaged messages (body CRC mismatch) at CommitLog offsets {listed}")
    if page["more"]:
        print(f"next page: --after {cursor_text(page['next_cursor'])}")
    else:
        print(f"{len(page['messages'])} message(s); the range ends here")
    return EXIT_OK


def _resend(args: argparse.Namespace, admin: AdminClient) -> int:
    answer = admin.resend_dead_letter(commit_log_offset=args.offset, msg_id=args.id, dry_run=not args.execute)
    if args.json:
        answer["dead_letter"] = _json_ready(answer["dead_letter"])
        print_json(answer)
        return EXIT_OK
    dead = answer["dead_letter"]
    print(
        f"dead letter {dead['topic']} offset {dead['queue_offset']} (CommitLog {dead['commit_log_offset']}, "
        f"client msgId {dead['client_msg_id'] or '-'}), body {body_preview(dead['body'])}"
    )
    if answer["resent"]:
        print(
            f"resent to {answer['origin_topic']} queue {answer['queue_id']} offset {answer['queue_offset']} "
            f"({answer['put_status']}): client msgId {answer['client_msg_id']}, offset msgId {answer['offset_msg_id']}"
        )
    else:
        print(f"Dry run; nothing sent. It would go to {answer['origin_topic']}. To do it: add --execute")
    return EXIT_OK


def message_id(text: str) -> str:
    from client.convert import check_message_id

    return parsed(text, check_message_id)


def run_message(args: argparse.Namespace) -> int:
    if args.message_action == "query" and args.key is not None and not args.topic:
        args.parser.error("--key needs --topic (keys are indexed per topic)")
    action = {"query": _query, "list": _list, "resend": _resend}[args.message_action]
    return with_admin(args, lambda admin: action(args, admin))
