"""The operator's commands over the admin API: `topic`, `consumer`, `message` and `config`.

    rocketstore topic create --topic T [--queues N | --read-queues R --write-queues W] [--perm P] [--order]
    rocketstore topic list | describe --topic T | delete --topic T [--yes]
    (across a cluster's groups: `topic create|delete --groups`, `topic status`, `cluster ...`:
    client/cluster_commands.py)
    rocketstore consumer progress --group G [--topic T]
    rocketstore consumer reset --group G --topic T --to-time WHEN|--to-offset N|--to-earliest|--to-latest
        [--queue Q] [--execute]
    rocketstore message query (--key K --topic T | --id MSGID [--topic T] | --offset COMMITLOG_OFFSET)
    rocketstore config get [--key K ...] | set KEY=VALUE ...     (also: rocketstore broker config ...)

Each takes `--endpoint`, `--secret-file` (or the admin secret's variable) and `--json`. Destructive
actions only say what they would do unless told: `topic delete` needs `--yes`, `consumer reset`
is a dry run without `--execute` (Kafka's reset-offsets convention). Runs on the command's main
thread; results on stdout, errors as one line on stderr with exit status 1.
"""

from __future__ import annotations

import argparse
import base64
import datetime
from collections.abc import Callable
from typing import Any

from .admin import AdminClient
from .commands import (
    CommandError,
    _check_tls_file,
    _common,
    _fail,
    _key_value,
    _name,
    _natural,
    _perm,
    _positive,
    _print_json,
    admin_secret,
    body_preview,
    format_table,
    perm_text,
)
from .errors import RocketStoreError
from wire.cli_args import unknown_keys_text

EXIT_OK = 0


def _utc(ms: int) -> str:
    if ms <= 0:
        return "-"
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).isoformat(timespec="milliseconds")


def _when(text: str) -> int:
    """A time as Unix milliseconds: digits are ms; otherwise ISO 8601 (no zone: UTC)."""
    if text.isdigit():
        return int(text)
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected Unix milliseconds or an ISO 8601 time such as 2026-11-24T10:00:00+01:00, got {text!r}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return int(moment.timestamp() * 1000)


def _action(actions, name: str, text: str) -> argparse.ArgumentParser:
    parser = actions.add_parser(name, help=text, description=text)
    _common(parser, admin=True)
    parser.set_defaults(parser=parser)
    return parser


def _run(args: argparse.Namespace, work: Callable[[AdminClient], int]) -> int:
    secret = admin_secret(args)
    _check_tls_file(args)
    try:
        with AdminClient(
            args.endpoint, secret, timeout_s=args.request_timeout_s, tls_ca_file=args.tls_ca_file
        ) as admin:
            return work(admin)
    except RocketStoreError as exc:
        raise _fail(exc) from None
    except ValueError as exc:
        raise CommandError(str(exc)) from None


# -- topic -------------------------------------------------------------------------------------


def topic_arguments(p: argparse.ArgumentParser) -> None:
    actions = p.add_subparsers(dest="topic_action", metavar="ACTION", required=True)
    create = _action(actions, "create", "create or update a topic")
    create.add_argument("--topic", required=True, type=_name, help="the topic's name")
    create.add_argument("--queues", type=_positive, default=4, metavar="N", help="read and write queues (default 4)")
    create.add_argument("--read-queues", type=_positive, metavar="N", help="read queues (default: --queues)")
    create.add_argument("--write-queues", type=_positive, metavar="N", help="write queues (default: --queues)")
    create.add_argument(
        "--perm", type=_perm, default=6, help="RocketMQ permission bits: 4 read, 2 write, 1 inherit (default 6)"
    )
    create.add_argument("--order", action="store_true", help="mark the topic as ordered (consumed in queue order)")
    create.add_argument(
        "--groups",
        metavar="all|G1,G2",
        help="create it on these broker groups of the cluster (their masters), or all of them; "
        "default: the broker at --endpoint only",
    )
    _action(actions, "list", "list the topics (of every group, when the broker is in a cluster)")
    status = _action(actions, "status", "a topic across the cluster: per group its queues, offsets and last store")
    status.add_argument("--topic", required=True, type=_name, help="the topic's name")
    describe = _action(actions, "describe", "a topic's route and, per queue, min/max offsets and last store time")
    describe.add_argument("--topic", required=True, type=_name, help="the topic's name")
    delete = _action(actions, "delete", "delete a topic and the consumer offsets kept for it (needs --yes)")
    delete.add_argument("--topic", required=True, type=_name, help="the topic's name")
    delete.add_argument("--yes", action="store_true", help="really delete it (without: say what would go)")
    delete.add_argument(
        "--groups", metavar="all|G1,G2", help="delete it on these broker groups, or all (default: --endpoint's only)"
    )


def _print_spec(spec: dict[str, Any]) -> None:
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
    from . import cluster_commands

    def work(admin: AdminClient) -> int:
        action = args.topic_action
        if action in ("create", "delete") and args.groups:
            spread = cluster_commands.create_on_groups if action == "create" else cluster_commands.delete_on_groups
            return spread(args, admin)
        if action == "status":
            return cluster_commands.topic_status(args, admin)
        if action == "create":
            spec = create_topic(admin, args)
            _print_json(spec) if args.json else _print_spec(spec)
        elif action == "describe":
            described = admin.describe_topic(args.topic)
            if args.json:
                _print_json(described)
                return EXIT_OK
            _print_spec(described["topic"])
            print(
                f"served by {described['broker_name']} ({described['role']}) at {described['client_endpoint']}; "
                f"master at {described['master_client_endpoint'] or 'unknown'}"
            )
            rows = [
                (q["queue_id"], q["min_offset"], q["max_offset"], _utc(q["last_store_timestamp_ms"]))
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
                _print_json({"deleted": args.topic, "groups": groups})
            else:
                print(f"deleted topic {args.topic}" + (f"; offsets of {', '.join(groups)} removed" if groups else ""))
        else:
            across = cluster_commands.cluster_topics(args, admin)
            topics = across if across is not None else sorted(admin.list_topics(), key=lambda t: t["name"])
            if args.json:
                _print_json(topics)
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
                + ((",".join(t["groups"]),) if across is not None else ())
                for t in topics
            ]
            print(format_table(header + (("groups",) if across is not None else ()), listed))
        return EXIT_OK

    return _run(args, work)


# -- consumer ----------------------------------------------------------------------------------


def consumer_arguments(p: argparse.ArgumentParser) -> None:
    actions = p.add_subparsers(dest="consumer_action", metavar="ACTION", required=True)
    progress = _action(actions, "progress", "a consumer group's offsets and lag per queue")
    progress.add_argument("--group", required=True, type=_name, help="the consumer group")
    progress.add_argument("--topic", type=_name, help="only this topic (default: every topic the group consumed)")
    reset = _action(actions, "reset", "move a consumer group's offsets in a topic (a dry run without --execute)")
    reset.add_argument("--group", required=True, type=_name, help="the consumer group")
    reset.add_argument("--topic", required=True, type=_name, help="the topic")
    to = reset.add_mutually_exclusive_group(required=True)
    to.add_argument(
        "--to-time",
        type=_when,
        metavar="WHEN",
        help="the first message stored at or after WHEN (Unix ms, or ISO 8601; no zone means UTC)",
    )
    to.add_argument("--to-offset", type=_natural, metavar="N", help="queue offset N in every queue (clamped)")
    reset.add_argument("--queue", type=_natural, metavar="Q", help="only queue Q (default: every queue of the topic)")
    to.add_argument("--to-earliest", action="store_true", help="each queue's first message still stored")
    to.add_argument("--to-latest", action="store_true", help="each queue's end: skip everything stored")
    reset.add_argument("--execute", action="store_true", help="apply the reset (without: only show it)")


def run_consumer(args: argparse.Namespace) -> int:
    def work(admin: AdminClient) -> int:
        if args.consumer_action == "progress":
            rows = admin.consumer_progress(args.group, args.topic or "")
            if args.json:
                _print_json(rows)
                return EXIT_OK
            table = [
                (
                    r["topic"],
                    r["queue_id"],
                    r["broker_offset"],
                    r["consumer_offset"] if r["consumer_offset"] >= 0 else "-",
                    r["lag"],
                    _utc(r["last_consume_timestamp_ms"]),
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
            _print_json(answer)
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

    return _run(args, work)


# -- message -----------------------------------------------------------------------------------


def message_arguments(p: argparse.ArgumentParser) -> None:
    actions = p.add_subparsers(dest="message_action", metavar="ACTION", required=True)
    query = _action(actions, "query", "look messages up by key, message id or CommitLog offset")
    by = query.add_mutually_exclusive_group(required=True)
    by.add_argument("--key", metavar="KEY", help="a KEYS entry (needs --topic)")
    by.add_argument("--id", metavar="MSGID", help="either message id: the broker's (offset) or the producer's")
    by.add_argument("--offset", type=_natural, metavar="OFFSET", help="the message at this CommitLog offset")
    query.add_argument("--topic", type=_name, help="the topic (required with --key)")
    query.add_argument("--max", type=_positive, default=32, metavar="N", help="at most N messages (default 32)")


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
            _print_json(found)
        else:
            for m in found:
                print(
                    f"{m['topic']} queue {m['queue_id']} offset {m['queue_offset']} "
                    f"(CommitLog {m['commit_log_offset']})\n"
                    f"  offset msgId {m['offset_msg_id']}  client msgId {m['client_msg_id'] or '-'}\n"
                    f"  tags {m['tags'] or '-'}  keys {m['keys'] or '-'}  stored {_utc(m['store_timestamp_ms'])} "
                    f"by {m['store_host']}  born {_utc(m['born_timestamp_ms'])} at {m['born_host']}\n"
                    f"  body {body_preview(m['body'])}"
                )
        if not found:
            raise CommandError("no message found")
        return EXIT_OK

    return _run(args, work)


# -- config ------------------------------------------------------------------------------------


def config_arguments(p: argparse.ArgumentParser) -> None:
    actions = p.add_subparsers(dest="config_action", metavar="ACTION", required=True)
    get = _action(actions, "get", "the broker's effective config (secrets hidden)")
    get.add_argument("--key", action="append", metavar="KEY", help="only this key (repeatable)")
    put = _action(actions, "set", "change keys on the running broker until it restarts")
    put.add_argument("assignments", nargs="+", type=_key_value, metavar="KEY=VALUE", help="a key and its new value")


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
                    raise CommandError(unknown_keys_text(unknown, known))
                entries = [e for e in entries if e["key"] in args.key]
        if args.json:
            _print_json(entries)
        else:
            rows = [(e["key"], e["value"], "yes" if e["changeable"] else "") for e in entries]
            print(format_table(("key", "value", "changeable live"), rows))
            if args.config_action == "set":
                print("changed until the broker restarts: put the same values in broker.conf to keep them")
        return EXIT_OK

    return _run(args, work)
