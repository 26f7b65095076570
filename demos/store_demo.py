"""`rocketstore crash-demo`: crash a SYNC_FLUSH writer with SIGKILL and show that nothing it
acknowledged is lost. Also the writer itself (`python -m demos.store_demo --writer DIR ...`, its
only command line), which the crash tests drive too.

The demo, in a temporary directory (or `--dir`):

1. starts a writer subprocess that puts messages from several threads with SYNC_FLUSH and prints
   one line per acknowledged put (`ACK seq topic queue queueOffset offset size msgId`);
2. SIGKILLs it after a random number of acknowledgements (bounded in count and in time);
3. inspects the directory read-only (is there a torn tail?), reopens the store (abnormal recovery)
   and checks every acknowledged message at its offset with its body, and that the recovered log
   is whole (every record decodes with a valid CRC, offsets tile the log);
4. puts more messages, shuts down cleanly, reopens (normal recovery) and checks everything again;
5. prints a summary; exit status 1 when anything acknowledged was lost or a check failed.

Bodies, topics, queues and properties are functions of a sequence number (`body_for`,
`route_for`, `properties_for`), so any message read back can be verified on its own.

Writer output lines are written with one os.write each: whole lines below PIPE_BUF, so lines from
several threads never interleave. The parent's functions are single-threaded apart from the one
reader thread per writer they start and join.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import queue
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ops.inspect import human_bytes, inspect_store, list_segments
from store.config import StoreConfig
from store.log.codec import BLANK_MAGIC_CODE, CorruptMessage
from store.message import Message
from store.message_store import MessageStore
from store.status import FlushDiskType, PutMessageStatus

log = logging.getLogger(__name__)

DEFAULT_SEGMENT_SIZE = 1024 * 1024
# Bodies up to a quarter of the demo's segment size still leave several messages per segment.
MAX_BODY = DEFAULT_SEGMENT_SIZE // 4
_HEAD = b"seq=%012d;"
_HEAD_LEN = 17
READY_TIMEOUT_S = 10.0
ACK_TIMEOUT_S = 8.0


# ---------------------------------------------------------------------------------------------
# messages as functions of a sequence number


def body_for(seq: int, size: int) -> bytes:
    """The body of message `seq`: its number, then a ramp starting at seq % 256. Lengths vary
    between 3/4 of `size` and `size` so that segment ends fall at many different places."""
    length = max(_HEAD_LEN, size - (seq * 37) % (size // 4 + 1))
    n = length - _HEAD_LEN
    start = seq % 256
    ramp = bytes(range(256)) * ((start + n) // 256 + 1)
    return _HEAD % seq + ramp[start : start + n]


def seq_of(body: bytes) -> int | None:
    """The sequence number a demo body carries, None for a body that is not one."""
    if len(body) < _HEAD_LEN or not body.startswith(b"seq=") or body[16:17] != b";":
        return None
    try:
        return int(body[4:16])
    except ValueError:
        return None


def route_for(seq: int, topics: int, queues: int) -> tuple[str, int]:
    return f"DemoTopic{seq % topics}", (seq // topics) % queues


def properties_for(seq: int) -> dict[str, str]:
    return {"KEYS": f"k{seq}", "TAGS": f"t{seq % 3}"}


def message_for(seq: int, size: int, topics: int, queues: int) -> Message:
    topic, queue_id = route_for(seq, topics, queues)
    return Message(topic, queue_id, body_for(seq, size), properties=properties_for(seq))


@dataclass(frozen=True, slots=True)
class Ack:
    seq: int
    topic: str
    queue_id: int
    queue_offset: int
    offset: int
    size: int
    msg_id: str


def parse_ack(line: str) -> Ack | None:
    parts = line.split()
    if len(parts) != 8 or parts[0] != "ACK":
        return None
    try:
        return Ack(int(parts[1]), parts[2], int(parts[3]), int(parts[4]), int(parts[5]), int(parts[6]), parts[7])
    except ValueError:
        return None


def writer_config(
    directory: str | os.PathLike, flush: str, segment_size: int, transient_pool: bool = False
) -> StoreConfig:
    return StoreConfig(
        store_path_root_dir=str(directory),
        flush_disk_type=FlushDiskType(flush),
        mapped_file_size_commit_log=segment_size,
        transient_store_pool_enable=transient_pool,
        # Short thorough intervals make ASYNC_FLUSH runs flush (and commit) within a test's time.
        flush_interval_commit_log_ms=50,
        commit_interval_commit_log_ms=20,
        # A demo store is small: ConsumeQueue and IndexFile geometry to match its 1 MiB segments.
        mapped_file_size_consume_queue=16_384 * 20,
        max_hash_slot_num=16_384,
        max_index_num=65_536,
    )


# ---------------------------------------------------------------------------------------------
# the writer subprocess


def _emit(line: str) -> None:
    # One write(2) per line: atomic on a pipe below PIPE_BUF, so threads never interleave.
    data = line.encode()
    while data:
        data = data[os.write(1, data) :]


def run_writer(args: argparse.Namespace) -> int:
    config = writer_config(args.writer, args.flush_disk_type, args.segment_size, args.transient_pool)
    store = MessageStore(config)
    try:
        recovery = store.load()
    except Exception as exc:  # reported to the parent through stderr and the exit status
        print(f"writer: cannot open the store: {exc}", file=sys.stderr)
        return 1
    store.start()
    _emit(
        "READY "
        + json.dumps(
            {
                "pid": os.getpid(),
                "abnormal": recovery.abnormal,
                "end_offset": recovery.end_offset,
                "truncated_from": recovery.truncated_from,
                "seconds": recovery.seconds,
            }
        )
        + "\n"
    )
    # itertools.count is a C iterator: next() on it is atomic under the GIL, so the threads share it.
    counter = itertools.count(args.first_seq)
    stop = args.first_seq + args.messages

    def work() -> None:
        while True:
            seq = next(counter)
            if seq >= stop:
                return
            msg = message_for(seq, args.size, args.topics, args.queues)
            result = store.put_message(msg)
            if result.status is PutMessageStatus.PUT_OK:
                _emit(
                    f"ACK {seq} {msg.topic} {msg.queue_id} {result.queue_offset} {result.wrote_offset} "
                    f"{result.wrote_bytes} {result.msg_id}\n"
                )
            else:
                _emit(f"NOK {seq} {result.status.value} {result.wrote_offset}\n")

    threads = [threading.Thread(target=work, name=f"writer-{i}") for i in range(args.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    store.shutdown()
    _emit(f"DONE {args.messages}\n")
    return 0


# ---------------------------------------------------------------------------------------------
# driving a writer from the parent


class WriterProcess:
    """A writer subprocess and the lines it printed. Lines are read by one thread into a queue, so
    that the parent waits on them with deadlines."""

    def __init__(
        self,
        directory: Path,
        *,
        messages: int,
        size: int,
        threads: int,
        segment_size: int,
        flush: str = "SYNC_FLUSH",
        first_seq: int = 0,
        topics: int = 1,
        queues: int = 4,
        transient_pool: bool = False,
        stderr_path: Path,
    ) -> None:
        self.stderr_path = stderr_path
        command = [
            sys.executable,
            "-m",
            "demos.store_demo",
            "--writer",
            str(directory),
            "--messages",
            str(messages),
            "--size",
            str(size),
            "--threads",
            str(threads),
            "--segment-size",
            str(segment_size),
            "--flush-disk-type",
            flush,
            "--first-seq",
            str(first_seq),
            "--topics",
            str(topics),
            "--queues",
            str(queues),
        ] + (["--transient-pool"] if transient_pool else [])
        self._stderr = open(stderr_path, "wb")
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=self._stderr, bufsize=0)
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, name="writer-stdout", daemon=True)
        self._reader.start()
        self.acks: list[Ack] = []
        self.nok = 0
        self.ready: dict | None = None
        self.done = False
        self.eof = False

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            if raw.endswith(b"\n"):  # a line cut by the kill was never acknowledged
                self._lines.put(raw.decode("utf-8", "replace"))
        self._lines.put(None)

    def _take(self, line: str | None) -> None:
        if line is None:
            self.eof = True
        elif line.startswith("ACK "):
            ack = parse_ack(line)
            if ack is not None:
                self.acks.append(ack)
        elif line.startswith("NOK "):
            self.nok += 1
        elif line.startswith("READY "):
            self.ready = json.loads(line[6:])
        elif line.startswith("DONE"):
            self.done = True

    def wait_for(self, condition: Callable[[], bool], timeout_s: float) -> bool:
        """Consume lines until `condition()` holds, the output ends, or the time runs out."""
        deadline = time.monotonic() + timeout_s
        while not condition():
            if self.eof:
                return False
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            try:
                self._take(self._lines.get(timeout=remaining))
            except queue.Empty:
                return condition()
        return True

    def kill(self) -> None:
        """SIGKILL (if still running), reap, and collect every complete line printed before death."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self._reader.join(10)
        while not self.eof:
            try:
                self._take(self._lines.get(timeout=10))
            except queue.Empty:
                break
        self.close()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._stderr.close()

    def stderr_text(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""


# ---------------------------------------------------------------------------------------------
# checks on a loaded store


def check_acked(store: MessageStore, acks: Iterable[Ack], size: int) -> dict[int, str]:
    """Every acknowledged message at its offset with its body, queue and msgId. Returns what is
    wrong, by sequence number: the acknowledged messages lost."""
    lost: dict[int, str] = {}
    for ack in acks:
        try:
            msg = store.read_message(ack.offset)
        except CorruptMessage as exc:
            lost[ack.seq] = f"seq {ack.seq} at offset {ack.offset}: {exc.reason}"
            continue
        expected = body_for(ack.seq, size)
        if (msg.body, msg.topic, msg.queue_id, msg.queue_offset, msg.msg_id, msg.store_size) != (
            expected,
            ack.topic,
            ack.queue_id,
            ack.queue_offset,
            ack.msg_id,
            ack.size,
        ):
            lost[ack.seq] = (
                f"seq {ack.seq} at offset {ack.offset}: found {msg.topic}-{msg.queue_id}@{msg.queue_offset} "
                f"seq {seq_of(msg.body)}, expected {ack.topic}-{ack.queue_id}@{ack.queue_offset}"
            )
    return lost


@dataclass(frozen=True, slots=True)
class LogCheck:
    messages: int
    seqs: frozenset[int]
    queue_counts: dict[str, int]
    problems: tuple[str, ...]


def consume_all(store: MessageStore, group: str = "DemoConsumerGroup") -> int:
    """Read every queue the log has from offset 0 through the ConsumeQueues, as a consumer
    does; return how many messages came back."""
    if not store.wait_dispatched(30):
        raise RuntimeError("dispatch did not catch up within 30 s")
    consumed = 0
    for key in sorted(store.commit_log.topic_queue_table):
        topic, _, queue_id = key.rpartition("-")
        offset = 0
        while True:
            page = store.get_message(group, topic, int(queue_id), offset, 32)
            if not page.found:
                break
            consumed += len(page.messages)
            offset = page.next_begin_offset
        store.consumer_offsets.commit_offset(group, topic, int(queue_id), offset)
    return consumed


def check_log(store: MessageStore, size: int, from_offset: int = 0) -> LogCheck:
    """Iterate the whole log: each record decodes with its CRC, records tile the log (a gap only
    as a blank end of segment), demo bodies match their sequence numbers, queue offsets are dense."""
    segment_size = store.config.mapped_file_size_commit_log
    problems: list[str] = []
    expected = store.min_offset
    seqs: set[int] = set()
    next_qoff: dict[str, int] = {}
    count = 0

    def blank_until(offset: int, target: int) -> bool:
        head = store.commit_log_data(offset, 8)
        return (
            len(head) == 8
            and int.from_bytes(head[4:8], "big", signed=True) == BLANK_MAGIC_CODE
            and offset + int.from_bytes(head[:4], "big", signed=True) == target
            and target % segment_size == 0
        )

    try:
        for msg in store.iter_messages():
            if msg.physical_offset != expected and not blank_until(expected, msg.physical_offset):
                problems.append(f"record at {msg.physical_offset} does not follow the one ending at {expected}")
            expected = msg.physical_offset + msg.store_size
            count += 1
            key = f"{msg.topic}-{msg.queue_id}"
            if msg.queue_offset != next_qoff.get(key, 0):
                problems.append(
                    f"{key}: queue offset {msg.queue_offset} at {msg.physical_offset}, expected {next_qoff.get(key, 0)}"
                )
            next_qoff[key] = msg.queue_offset + 1
            if msg.physical_offset >= from_offset:
                seq = seq_of(msg.body)
                if seq is None or msg.body != body_for(seq, size):
                    problems.append(f"message at {msg.physical_offset} has a body no writer wrote")
                elif seq in seqs:
                    problems.append(f"seq {seq} appears twice (again at {msg.physical_offset})")
                else:
                    seqs.add(seq)
    except CorruptMessage as exc:
        problems.append(f"iteration stopped: {exc}")
    if expected != store.max_offset and not blank_until(expected, store.max_offset):
        problems.append(f"the last record ends at {expected}, the log at {store.max_offset}")
    return LogCheck(count, frozenset(seqs), next_qoff, tuple(problems))


# ---------------------------------------------------------------------------------------------
# the demo


@dataclass(frozen=True, slots=True)
class DemoSummary:
    store_dir: str
    kept: bool
    segment_size: int
    seed: int
    threads: int
    messages_asked: int
    size: int
    kill_after: int
    killed: bool  # False when the writer finished before the kill
    acknowledged: int
    not_acknowledged: int  # puts answered with another status
    writer_seconds: float
    torn_tail_offset: int | None
    torn_tail_bytes: int
    recovery_seconds: float
    recovery_scanned: int
    recovery_end: int
    recovered: int
    lost: int
    kept_unacked: int
    extra_put: int
    normal_recovery_seconds: float
    normal_recovery_abnormal: bool
    final_min_offset: int
    final_end_offset: int
    final_messages: int
    consumed: int
    final_queues: dict[str, int]
    problems: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return self.lost == 0 and not self.problems

    @property
    def throughput(self) -> float:
        return self.acknowledged / self.writer_seconds if self.writer_seconds > 0 else 0.0


def _existing_segment_size(directory: Path) -> int | None:
    files, size, _, _ = list_segments(directory / "commitlog", None)
    return size if files else None


def run_demo(  # noqa: PLR0915 - the crash demo's steps, in the order it prints them
    directory: str | os.PathLike | None = None,
    *,
    messages: int = 2000,
    size: int = 1024,
    threads: int = 4,
    seed: int | None = None,
    say: Callable[[str], None] = lambda text: print(text, file=sys.stderr, flush=True),
) -> DemoSummary:
    """Run the demo; `say` gets progress lines. Raises RuntimeError when the writer cannot run."""
    seed = random.randrange(1 << 30) if seed is None else seed
    rng = random.Random(seed)
    temporary = directory is None
    work = Path(tempfile.mkdtemp(prefix="rocketstore-demo-")) if directory is None else Path(directory)
    store_dir = work / "store" if temporary else work
    store_dir.mkdir(parents=True, exist_ok=True)
    segment_size = _existing_segment_size(store_dir) or DEFAULT_SEGMENT_SIZE
    problems: list[str] = []
    succeeded = False
    try:
        # Messages already in a kept directory are not this run's: check bodies only past them.
        start_offset = inspect_store(store_dir).end_offset if (store_dir / "commitlog").is_dir() else 0
        kill_after = rng.randint(max(1, messages * 3 // 10), max(1, messages * 7 // 10))
        say(
            f"demo: writer with {threads} threads puts up to {messages} messages (SYNC_FLUSH) into {store_dir}; "
            f"SIGKILL after {kill_after} acknowledgements"
        )
        stderr_path = (work if temporary else Path(tempfile.gettempdir())) / f"demo-writer-{os.getpid()}.stderr"
        writer = WriterProcess(
            store_dir,
            messages=messages,
            size=size,
            threads=threads,
            segment_size=segment_size,
            stderr_path=stderr_path,
        )
        try:
            if not writer.wait_for(lambda: writer.ready is not None, READY_TIMEOUT_S):
                writer.kill()
                raise RuntimeError(f"the writer did not start:\n{writer.stderr_text()}")
            began = time.monotonic()
            writer.wait_for(lambda: len(writer.acks) >= kill_after or writer.done, ACK_TIMEOUT_S)
            killed = not writer.done and writer.proc.poll() is None
            writer.kill()
            writer_seconds = time.monotonic() - began
            if not writer.acks:
                raise RuntimeError(f"the writer acknowledged nothing:\n{writer.stderr_text()}")
        finally:
            writer.close()
            stderr_path.unlink(missing_ok=True)
        acks = writer.acks
        say(f"demo: writer killed after {len(acks)} acknowledgements; reopening the store")

        before = inspect_store(store_dir)
        torn = before.torn_tail
        problems += [f"before recovery: {b.kind} at {b.offset}: {b.reason}" for b in before.corruption]
        config = writer_config(store_dir, "SYNC_FLUSH", segment_size)

        store = MessageStore(config)
        recovery = store.load()
        try:
            if not recovery.abnormal:
                problems.append("the store did not notice the crash (no abort file)")
            missing = check_acked(store, acks, size)
            problems += missing.values()
            lost = len(missing)
            checked = check_log(store, size, start_offset)
            problems += [f"after abnormal recovery: {p}" for p in checked.problems]
            kept_unacked = len(checked.seqs - {a.seq for a in acks})
            after = inspect_store(store_dir)
            if after.bad_offsets or after.end_offset != store.max_offset:
                problems.append(f"inspection after recovery: {[(b.offset, b.reason) for b in after.bad_offsets]}")
            store.start()
            extra = max(10, messages // 10)
            extra_acks = []
            for seq in range(messages, messages + extra):
                msg = message_for(seq, size, 1, 4)
                result = store.put_message(msg)
                if result.status is not PutMessageStatus.PUT_OK:
                    problems.append(f"put after recovery answered {result.status.value}")
                    continue
                extra_acks.append(
                    Ack(
                        seq,
                        msg.topic,
                        msg.queue_id,
                        result.queue_offset,
                        result.wrote_offset,
                        result.wrote_bytes,
                        result.msg_id,
                    )
                )
        finally:
            store.shutdown()

        store = MessageStore(config)
        normal = store.load()
        try:
            store.start()
            if normal.abnormal:
                problems.append("the store saw a crash after a clean shutdown")
            missing_later = check_acked(store, list(acks) + extra_acks, size)
            problems += [f"after restart: {p}" for p in missing_later.values()]
            lost = max(lost, len(missing_later))
            final = check_log(store, size, start_offset)
            problems += [f"after restart: {p}" for p in final.problems]
            final_min, final_end = store.min_offset, store.max_offset
            consumed = consume_all(store)
            if consumed != final.messages:
                problems.append(f"consumed {consumed} messages through the queues; the log holds {final.messages}")
        finally:
            store.shutdown()
        succeeded = not problems
        return DemoSummary(
            store_dir=str(store_dir),
            kept=not temporary or not succeeded,
            segment_size=segment_size,
            seed=seed,
            threads=threads,
            messages_asked=messages,
            size=size,
            kill_after=kill_after,
            killed=killed,
            acknowledged=len(acks),
            not_acknowledged=writer.nok,
            writer_seconds=writer_seconds,
            torn_tail_offset=torn.offset if torn else None,
            torn_tail_bytes=(before.data_end - torn.offset) if torn else 0,
            recovery_seconds=recovery.seconds,
            recovery_scanned=recovery.messages_scanned,
            recovery_end=recovery.end_offset,
            recovered=len(acks) - lost,
            lost=lost,
            kept_unacked=kept_unacked,
            extra_put=len(extra_acks),
            normal_recovery_seconds=normal.seconds,
            normal_recovery_abnormal=normal.abnormal,
            final_min_offset=final_min,
            final_end_offset=final_end,
            final_messages=final.messages,
            consumed=consumed,
            final_queues=dict(sorted(final.queue_counts.items())),
            problems=tuple(problems),
        )
    finally:
        # A failed run keeps its temporary store: it is the evidence.
        if temporary and succeeded:
            shutil.rmtree(work, ignore_errors=True)
        elif temporary:
            say(f"demo: keeping the store for inspection: {store_dir}")


def format_summary(s: DemoSummary) -> str:
    where = s.store_dir + (" (kept)" if s.kept else " (temporary, removed)")
    if s.torn_tail_offset is not None:
        torn = f"{s.torn_tail_bytes} bytes at offset {s.torn_tail_offset} (a record cut mid-write), cut by recovery"
    else:
        torn = "none (the kill fell between two appends)"
    queues = ", ".join(f"{k}: {v}" for k, v in s.final_queues.items())
    lines = [
        "RocketStore demo: SIGKILL a SYNC_FLUSH writer mid-stream, recover, verify",
        f"  store               {where}; segments of {human_bytes(s.segment_size)}",
        f"  writer              {s.threads} threads, up to {s.messages_asked} messages of ~{s.size} bytes, "
        f"seed {s.seed}; " + (f"SIGKILL after {s.kill_after} acks" if s.killed else "finished before the kill"),
        f"  writer throughput   {s.acknowledged} acknowledged in {s.writer_seconds:.2f} s: {s.throughput:.0f} msg/s "
        f"(each fsynced before its ack; group commit)",
        f"  torn tail           {torn}",
        f"  abnormal recovery   {s.recovery_seconds * 1000:.1f} ms, {s.recovery_scanned} messages checked, "
        f"log ends at {s.recovery_end}, {s.torn_tail_bytes} torn bytes cut",
        f"  acknowledged        {s.acknowledged}"
        + (f" (+{s.not_acknowledged} answered otherwise)" if s.not_acknowledged else ""),
        f"  recovered           {s.recovered} at their offsets with the right bodies",
        f"  kept, unacked       {s.kept_unacked} (written, not yet acknowledged when killed)",
        f"  lost                {s.lost}",
        f"  after restart       +{s.extra_put} messages PUT_OK, clean shutdown, normal recovery in "
        f"{s.normal_recovery_seconds * 1000:.1f} ms",
        f"  final offsets       CommitLog [{s.final_min_offset}, {s.final_end_offset}), {s.final_messages} messages; "
        f"next queue offsets {queues}",
        f"  consumed            {s.consumed} messages through the ConsumeQueues, every queue from offset 0",
    ]
    for problem in s.problems[:20]:
        lines.append(f"  PROBLEM: {problem}")
    if len(s.problems) > 20:
        lines.append(f"  ... and {len(s.problems) - 20} more problems")
    lines.append(
        "RESULT: OK, 0 acknowledged messages lost"
        if s.ok
        else f"RESULT: FAILED, {s.lost} acknowledged message(s) lost, {len(s.problems)} problem(s)"
    )
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# python -m demos.store_demo --writer DIR: the writer subprocess


def positive_int(text: str) -> int:
    """The demo's whole numbers above 0 (its writer's options, and `rocketstore crash-demo`'s)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {value}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m demos.store_demo", description="the writer subprocess of `rocketstore crash-demo`"
    )
    parser.add_argument("--writer", required=True, metavar="DIR", help="the store directory to write")
    parser.add_argument("--messages", type=positive_int, default=2000, metavar="N", help="messages to put")
    parser.add_argument("--size", type=positive_int, default=1024, metavar="BYTES", help="body size in bytes")
    parser.add_argument("--threads", type=positive_int, default=4, metavar="N", help="writer threads")
    parser.add_argument("--flush-disk-type", choices=[t.value for t in FlushDiskType], default="SYNC_FLUSH")
    parser.add_argument("--segment-size", type=positive_int, default=DEFAULT_SEGMENT_SIZE)
    parser.add_argument("--first-seq", type=int, default=0)
    parser.add_argument("--topics", type=positive_int, default=1)
    parser.add_argument("--queues", type=positive_int, default=4)
    parser.add_argument("--transient-pool", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    return run_writer(args)


if __name__ == "__main__":
    sys.exit(main())
