"""`rocketstore consume`: pulls every queue of a topic (or one) concurrently, prints one line (or
JSON line) per message and a summary; starts at `--from-offset`, at a `--group`'s committed offset
(BEGINNING when it has none; its progress is committed at the end), or at BEGINNING. A queue is
done when it has had no new message for `--wait-ms` (long polls on the broker). Exit 1 when a
message fails its body digest check or a queue's offset is illegal with nowhere else to go.
Ctrl-C (SIGINT) stops the pulls, commits the group's offsets just past what was printed, prints
the summary and exits 130; a second one stops at once, committing nothing.

Runs on the command's main thread (one asyncio loop, a task per queue).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from client import ReceivedMessage, RocketStoreError
from client.report import body_preview

from .args import at_least_one, natural, non_empty
from .common import EXIT_INTERRUPTED, EXIT_OK, EXIT_PROBLEMS, INTERRUPTED, CommandError
from .connection import add_connection_arguments, batch_size, check_tls_file, failure

CLI_GROUP = "rocketstore-cli"


def consume_arguments(p: argparse.ArgumentParser) -> None:
    add_connection_arguments(p)
    p.add_argument("--topic", required=True, type=non_empty, help="the topic to read")
    p.add_argument("--queue", type=natural, metavar="Q", help="read this queue only (default: every queue)")
    start = p.add_mutually_exclusive_group()
    start.add_argument("--from-offset", type=natural, metavar="N", help="start at this offset in each queue")
    start.add_argument(
        "--group",
        type=non_empty,
        metavar="G",
        help="start at G's committed offsets (BEGINNING when none) and commit progress at the end",
    )
    p.add_argument("--count", type=at_least_one, metavar="N", help="stop after N messages (default: when caught up)")
    p.add_argument(
        "--wait-ms",
        type=natural,
        default=0,
        metavar="MS",
        help="a queue is done after this long without a new message (long polls; default 0)",
    )
    p.add_argument("--tag", metavar="EXPR", help="tag filter, e.g. 'TagA||TagB'")
    p.add_argument("--batch", type=batch_size, default=32, metavar="B", help="messages per pull (default 32)")


def message_line(m: ReceivedMessage) -> str:
    flag = "" if m.body_crc_ok else " CORRUPT(body digest mismatch)"
    return (
        f"queue={m.queue_id} offset={m.queue_offset} msgId={m.msg_id} size={m.size} tag={m.tag or '-'}"
        f"{flag} body={body_preview(m.body)}"
    )


def message_json(m: ReceivedMessage) -> dict[str, Any]:
    try:
        body, encoding = m.body.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        body, encoding = base64.b64encode(m.body).decode("ascii"), "base64"
    return {
        "topic": m.topic,
        "queue_id": m.queue_id,
        "queue_offset": m.queue_offset,
        "commit_log_offset": m.commit_log_offset,
        "msg_id": m.msg_id,
        "size": m.size,
        "tag": m.tag,
        "keys": list(m.keys),
        "properties": dict(m.properties),
        "born_timestamp_ms": m.born_timestamp_ms,
        "store_timestamp_ms": m.store_timestamp_ms,
        "born_host": m.born_host,
        "store_host": m.store_host,
        "reconsume_times": m.reconsume_times,
        "body_crc_ok": m.body_crc_ok,
        "body": body,
        "body_encoding": encoding,
    }


@dataclass
class _QueueProgress:
    start: int
    next_offset: int
    messages: int = 0
    problem: str | None = None


_MAX_ILLEGAL_IN_A_ROW = 3


@dataclass
class _Run:
    queue_ids: list[int]
    progress: dict[int, _QueueProgress]
    committed: bool = False
    interrupted: bool = False


async def _consume(args: argparse.Namespace, emit: Callable[[ReceivedMessage], None]) -> _Run:
    from client.consumer import AsyncPullConsumer

    consumer = AsyncPullConsumer(
        args.endpoint, args.group or CLI_GROUP, timeout_s=args.request_timeout_s, tls_ca_file=args.tls_ca_file
    )
    try:
        if args.queue is not None:
            queue_ids = [args.queue]
        else:
            queue_ids = await consumer.queues(args.topic)
            if not queue_ids:
                raise CommandError(f"topic {args.topic} has no readable queue on {args.endpoint}")
        run = _Run(queue_ids, await _start_offsets(consumer, args, queue_ids))
        budget = {"left": args.count}
        await _until_interrupted(
            asyncio.gather(*(_drain(consumer, args, run.progress[qid], qid, budget, emit) for qid in queue_ids)), run
        )
        if args.group:
            for qid, state in run.progress.items():
                if state.next_offset != state.start:
                    await consumer.update_offset(args.topic, qid, state.next_offset)
            run.committed = True
        return run
    finally:
        await consumer.close()


async def _start_offsets(consumer, args: argparse.Namespace, queue_ids: list[int]) -> dict[int, _QueueProgress]:
    """Each queue's first offset: --from-offset, else the group's committed one, else BEGINNING."""
    progress: dict[int, _QueueProgress] = {}
    for qid in queue_ids:
        if args.from_offset is not None:
            start = args.from_offset
        else:
            committed = await consumer.get_offset(args.topic, qid) if args.group else None
            start = committed if committed is not None else await consumer.query_offset(args.topic, qid, "BEGINNING")
        progress[qid] = _QueueProgress(start, start)
    return progress


async def _until_interrupted(drains: asyncio.Future, run: _Run) -> None:
    """Await the queues' pulls until they are done or Ctrl-C stops them (`run.interrupted`)."""
    loop = asyncio.get_running_loop()

    def on_interrupt() -> None:
        # Every message printed so far advanced its queue's next offset: stopping the pulls
        # here loses nothing that was shown. The default handler is back for a second Ctrl-C.
        run.interrupted = True
        loop.remove_signal_handler(signal.SIGINT)
        drains.cancel()

    loop.add_signal_handler(signal.SIGINT, on_interrupt)
    try:
        await drains
    except asyncio.CancelledError:
        if not run.interrupted:
            raise
    finally:
        loop.remove_signal_handler(signal.SIGINT)


async def _drain(
    consumer,
    args: argparse.Namespace,
    state: _QueueProgress,
    qid: int,
    budget: dict[str, int | None],
    emit: Callable[[ReceivedMessage], None],
) -> None:
    """Pull queue `qid` until the budget is spent, it has been quiet for --wait-ms, or its offset
    is illegal with nowhere else to go (`state.problem`)."""
    last_news = time.monotonic()
    illegal_in_a_row = 0
    while budget["left"] is None or budget["left"] > 0:
        wait_ms = max(int(args.wait_ms - (time.monotonic() - last_news) * 1000), 0)
        asked = time.monotonic()
        result = await consumer.pull(
            args.topic,
            qid,
            state.next_offset,
            max_messages=args.batch,
            tag_filter=args.tag,
            long_polling_ms=wait_ms,
        )
        name = result.status.name
        if name == "OFFSET_ILLEGAL":
            illegal_in_a_row += 1
            if result.next_offset == state.next_offset or illegal_in_a_row >= _MAX_ILLEGAL_IN_A_ROW:
                state.problem = f"offset {state.next_offset} is illegal and the broker offers no other"
                return
            print(
                f"consume: queue {qid}: offset {state.next_offset} is illegal; continuing at {result.next_offset}",
                file=sys.stderr,
            )
            state.next_offset = result.next_offset
            continue
        illegal_in_a_row = 0
        if name == "NO_NEW_MSG":
            if wait_ms <= 0:
                return
            # A broker that answers long before the wait asked for is not long polling:
            # pace the retries instead of spinning.
            if time.monotonic() - asked < wait_ms / 2000:
                await asyncio.sleep(min(0.05, wait_ms / 1000))
            continue
        if not _take(result.messages, state, budget, emit):
            return
        state.next_offset = max(state.next_offset, result.next_offset)
        if result.messages:
            last_news = time.monotonic()


def _take(
    messages, state: _QueueProgress, budget: dict[str, int | None], emit: Callable[[ReceivedMessage], None]
) -> bool:
    """Emit the pulled messages within the budget; False when it ran out before the last one."""
    for m in messages:
        left = budget["left"]
        if left is not None:
            if left <= 0:
                return False
            budget["left"] = left - 1
        emit(m)
        state.messages += 1
        state.next_offset = m.queue_offset + 1
    return True


def run_consume(args: argparse.Namespace) -> int:
    check_tls_file(args)
    corrupt = 0

    def emit(m: ReceivedMessage) -> None:
        nonlocal corrupt
        corrupt += not m.body_crc_ok
        print(json.dumps(message_json(m)) if args.json else message_line(m))

    try:
        run = asyncio.run(_consume(args, emit))
    except RocketStoreError as exc:
        raise failure(exc) from None
    queue_ids, progress, committed = run.queue_ids, run.progress, run.committed
    total = sum(p.messages for p in progress.values())
    problems = {qid: p.problem for qid, p in progress.items() if p.problem}
    summary = {
        "topic": args.topic,
        "queues": queue_ids,
        "messages": total,
        "corrupt": corrupt,
        "next_offsets": {str(qid): p.next_offset for qid, p in progress.items()},
        "group": args.group,
        "committed": committed,
        "interrupted": run.interrupted,
        "problems": {str(k): v for k, v in problems.items()},
    }
    if args.json:
        print(json.dumps({"summary": summary}))
    else:
        offsets = " ".join(f"{qid}:{p.next_offset}" for qid, p in progress.items())
        print(
            f"consumed {total} messages from {args.topic} (queues {', '.join(map(str, queue_ids))}); "
            f"next offsets {offsets}"
        )
        if run.interrupted:
            print(f"stopped: {INTERRUPTED}")
        if committed:
            print(f"committed these offsets for group {args.group}")
        if corrupt:
            print(f"{corrupt} messages failed their body digest check")
        for qid, problem in problems.items():
            print(f"queue {qid}: {problem}")
    if run.interrupted:
        return EXIT_INTERRUPTED
    return EXIT_PROBLEMS if corrupt or problems else EXIT_OK
