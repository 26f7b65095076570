"""Offline inspection of a store directory: what `rocketstore inspect` reports.

`inspect_store(root)` reads a store without taking its lock and without changing a byte: segment
files are mapped with ACCESS_READ, the checkpoint is read, the abort file and the lock are looked
at (the lock's holder through /proc/locks, never by trying to take it). A running broker may hold
the store meanwhile; its tail may then be in motion and the report says so.

The walk checks every record of every segment with `codec.check_record` (magic, sizes, physical
offset field, body CRC). After a bad record it does not stop: it resumes at the next valid record
of the same segment (found by its MAGICCODE and a PHYSICALOFFSET field naming its own position,
which damage does not fake), or else at the next segment start (every segment starts at a record
boundary: a message never spans segments). So it finds further damage and counts the valid
messages beyond the first bad offset, which a cut there would drop. What it gathers:

- totals per topic and queue (messages, bytes, min/max queue offset, dense or not) over the valid
  prefix of the log: what the store serves after recovery;
- the CommitLog offset range: the first segment's start, the end of the valid prefix (where
  recovery stops) and the high-water mark of written bytes (torn or damaged ones included);
- every bad offset with its reason and its kind:
    `corrupt`   below the checkpoint's flushed offset: fsynced data is damaged, the store refuses
                to start over it;
    `torn-tail` the last damage, with no valid message after it: a write cut short by a crash,
                which recovery cuts by itself;
    `damage`    above the flushed offset but followed by valid messages: recovery would cut it
                and silently drop what follows;
    `in-flight` above the flushed offset while a process holds the store lock: most likely a
                write in progress seen half-way (the walk races the writer), not a problem;
- the checkpoint's contents, the abort file, the lock holder.

The report is a frozen dataclass (`InspectReport`, `to_dict()` for JSON); `format_report` renders
it as text. Pure reads; functions are thread-safe, reports immutable.
"""

from __future__ import annotations

import collections
import datetime
import mmap
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from store.log.codec import CorruptMessage, RecordKind, check_record, decode_checked
from store.log.commitlog import NO_QUEUE_OFFSET_TYPES
from store.log.commitlog_scan import QueueOffsets, find_valid_record, first_nonzero, last_nonzero_end
from store.message import BORNHOST_V6_FLAG, STOREHOST_V6_FLAG, transaction_type
from store.recovery.checkpoint import decode_checkpoint

PROGRESS_EVERY_BYTES = 64 * 1024 * 1024
# How far past a zero TOTALSIZE the walk looks for non-zero bytes (a record written partly). The
# largest record RocketMQ writes is maxMessageSize (4 MiB) plus its header; recovery probes as far.
PROBE_BYTES = 4 * 1024 * 1024 + 8

OnProgress = Callable[[int, int], None]

TORN_TAIL = "torn-tail"
CORRUPT = "corrupt"
DAMAGE = "damage"
IN_FLIGHT = "in-flight"


class InspectError(Exception):
    """The directory cannot be inspected (missing, not a store)."""


@dataclass(frozen=True, slots=True)
class QueueStats:
    topic: str
    queue_id: int
    messages: int
    bytes: int
    body_bytes: int
    min_queue_offset: int | None  # None when every message is a prepared/rolled-back transaction
    max_queue_offset: int | None
    dense: bool  # queue offsets increase by one from min to max, in log order


@dataclass(frozen=True, slots=True)
class TopicStats:
    topic: str
    queues: int
    messages: int
    bytes: int


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    name: str
    start: int
    size: int
    messages: int  # valid messages found in this segment (inside or beyond the valid prefix)
    data_end: int  # CommitLog offset one past the last written byte found (== start when empty)
    state: str  # full | open | empty | damaged | skipped


@dataclass(frozen=True, slots=True)
class BadOffset:
    offset: int
    segment: str
    reason: str
    kind: str  # corrupt | torn-tail | damage | in-flight
    below_flushed: bool | None  # None when the checkpoint gives no flushed offset


@dataclass(frozen=True, slots=True)
class CheckpointInfo:
    present: bool
    trusted: bool
    physic_msg_timestamp: int
    logics_msg_timestamp: int
    index_msg_timestamp: int
    physic_flushed_offset: int
    confirm_offset: int
    other_fields: dict[str, int]  # whatever else `decode_checkpoint` returns (fields added later)


@dataclass(frozen=True, slots=True)
class MessageSummary:
    offset: int
    size: int
    topic: str
    queue_id: int
    queue_offset: int
    msg_id: str
    store_timestamp_ms: int
    sys_flag: int
    properties: dict[str, str]
    body_length: int
    body_preview: str


@dataclass(frozen=True, slots=True)
class InspectReport:
    store_dir: str
    segment_size: int
    segments: tuple[SegmentInfo, ...]
    min_offset: int
    end_offset: int  # end of the valid prefix: where recovery stops
    data_end: int  # high-water mark of written bytes, damaged ones included
    messages: int  # in the valid prefix
    message_bytes: int
    messages_beyond_end: int  # valid messages found after the first bad offset
    queues: tuple[QueueStats, ...]
    bad_offsets: tuple[BadOffset, ...]
    checkpoint: CheckpointInfo
    flushed_offset: int | None  # the checkpoint's, when trusted and set
    abort_present: bool
    lock_holder_pid: int | None
    layout_problems: tuple[str, ...]
    notes: tuple[str, ...]
    first_messages: tuple[MessageSummary, ...]
    scan_seconds: float = field(compare=False)
    # The last segment file when it is shorter than the segment size (cut by a copy or a
    # filesystem): its bytes were inspected as far as they go; the store will not load it until
    # `rocketstore repair --extend-short-segment` zero-fills it back to size.
    short_segment: str | None = None

    @property
    def topics(self) -> tuple[TopicStats, ...]:
        totals: dict[str, list[int]] = {}
        for q in self.queues:
            t = totals.setdefault(q.topic, [0, 0, 0])
            t[0] += 1
            t[1] += q.messages
            t[2] += q.bytes
        return tuple(TopicStats(name, *values) for name, values in sorted(totals.items()))

    @property
    def corruption(self) -> tuple[BadOffset, ...]:
        """Bad offsets that are neither a torn tail nor a write in flight: the operator has to act."""
        return tuple(b for b in self.bad_offsets if b.kind in (CORRUPT, DAMAGE))

    @property
    def torn_tail(self) -> BadOffset | None:
        return next((b for b in self.bad_offsets if b.kind == TORN_TAIL), None)

    @property
    def problems_found(self) -> bool:
        return bool(self.corruption or self.layout_problems or self.short_segment)

    def to_dict(self) -> dict:
        data = asdict(self)
        data["topics"] = [asdict(t) for t in self.topics]
        data["problems_found"] = self.problems_found
        data["first_bad_offset"] = self.bad_offsets[0].offset if self.bad_offsets else None
        return data


# ---------------------------------------------------------------------------------------------
# helpers


def lock_holder_pid(lock_path: Path) -> int | None:
    """The pid holding an flock on `lock_path`, read from /proc/locks (None: free or unknown).
    Looking is all it does: trying the lock could make a broker starting meanwhile fail."""
    try:
        st = os.stat(lock_path)
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    wanted = (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    for line in text.splitlines():
        parts = line.split()
        # "1: FLOCK  ADVISORY  WRITE 1234 fe:00:2146565 0 EOF"; "1: -> FLOCK ..." lines are waiters.
        if len(parts) < 6 or parts[1] != "FLOCK":
            continue
        try:
            major, minor, inode = parts[5].split(":")
            if (int(major, 16), int(minor, 16), int(inode)) == wanted:
                return int(parts[4])
        except ValueError:
            continue
    return None


_CHECKPOINT_MAIN = (
    "physic_msg_timestamp",
    "logics_msg_timestamp",
    "index_msg_timestamp",
    "physic_flushed_offset",
    "confirm_offset",
)


def read_checkpoint(path: Path) -> CheckpointInfo:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return CheckpointInfo(False, False, 0, 0, 0, 0, 0, {})
    state, trusted = decode_checkpoint(raw)
    values = asdict(state) if trusted else {k: 0 for k in asdict(state)}
    main = [values.pop(name, 0) for name in _CHECKPOINT_MAIN]
    return CheckpointInfo(True, trusted, *main, values)  # type: ignore[arg-type, call-arg]  # the five main offsets, in field order


@dataclass(frozen=True, slots=True)
class _SegmentFile:
    path: Path
    start: int
    size: int


def list_segments(commitlog: Path, segment_size: int | None) -> tuple[list[_SegmentFile], int, list[str], list[str]]:
    """Segment files in offset order, the segment size, layout problems and notes."""
    problems: list[str] = []
    notes: list[str] = []
    found: list[_SegmentFile] = []
    try:
        names = sorted(os.listdir(commitlog))
    except FileNotFoundError:
        return [], segment_size or 0, problems, notes
    for name in names:
        path = commitlog / name
        if name.endswith(".tmp"):
            notes.append(f"unfinished segment creation {name} (the store removes it at start)")
            continue
        if len(name) != 20 or not name.isdigit() or not path.is_file():
            problems.append(f"unexpected entry {name} in commitlog/ (the store will not load)")
            continue
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            notes.append(f"segment {name} disappeared during inspection (deleted by retention?)")
            continue
        found.append(_SegmentFile(path, int(name), size))
    if segment_size is None:
        sizes = collections.Counter(s.size for s in found if s.size)
        # Every segment of a store has one size; the commonest is that size when some file is off.
        segment_size = max(sizes.items(), key=lambda kv: (kv[1], kv[0]))[0] if sizes else 0
    return found, segment_size, problems, notes


# ---------------------------------------------------------------------------------------------
# the walk


class _Walk:
    """State of one inspection walk; single-use, single-threaded."""

    def __init__(self, segment_size: int, show: int, on_progress: OnProgress | None, total: int, base: int) -> None:
        self.segment_size = segment_size
        self.show = show
        self.on_progress = on_progress
        self.total = total
        self.base = base
        self.next_progress = base + PROGRESS_EVERY_BYTES
        self.in_prefix = True
        self.end_offset: int | None = None
        self.clean_stop: tuple[int, str] | None = None  # a zero TOTALSIZE that may turn out a hole
        self.messages = 0
        self.message_bytes = 0
        self.beyond = 0
        self.last_message_offset: int | None = None
        self.queues: dict[tuple[str, int], list] = {}
        self.bad: list[tuple[int, str, str]] = []  # offset, segment name, reason
        self.shown: list[MessageSummary] = []
        self.segments: list[SegmentInfo] = []
        # Queue offsets must continue their queue: the body CRC does not cover them.
        self.queue_offsets = QueueOffsets()

    def _progress(self, offset: int) -> None:
        if self.on_progress is not None and offset >= self.next_progress:
            self.on_progress(offset - self.base, self.total)
            self.next_progress = offset + PROGRESS_EVERY_BYTES

    def _stop(self, offset: int) -> None:
        if self.in_prefix:
            self.in_prefix = False
            self.end_offset = offset

    def _data_found_after_stop(self) -> None:
        # Zeros ended an earlier segment, yet a later one holds data: the zeros are a hole.
        if self.clean_stop is not None:
            offset, name = self.clean_stop
            self.bad.append((offset, name, "zeros where the log goes on: a later segment holds data (lost records)"))
            self.clean_stop = None

    def gap(self, start: int, end: int) -> None:
        """No usable segment file covers [start, end): the log cannot go on through it."""
        self._data_found_after_stop()
        self.bad.append((start, "(missing)", f"no usable segment file from {start} to {end}"))
        self._stop(start)

    def _message(self, buf, pos: int, offset: int, record) -> None:
        self.last_message_offset = offset
        if not self.in_prefix:
            self.beyond += 1
            self._data_found_after_stop()
            return
        self.messages += 1
        self.message_bytes += record.size
        key = (record.topic, record.queue_id)
        # [messages, bytes, body bytes, min qoff, max qoff, dense]
        stats = self.queues.get(key)
        if stats is None:
            stats = self.queues[key] = [0, 0, 0, None, None, True]
        stats[0] += 1
        stats[1] += record.size
        if transaction_type(record.sys_flag) not in NO_QUEUE_OFFSET_TYPES:
            qoff = record.queue_offset
            if stats[4] is None:
                stats[3] = stats[4] = qoff
            else:
                if qoff != stats[4] + 1:
                    stats[5] = False
                stats[4] = qoff
        stats[2] += _body_length(buf, pos, record.sys_flag)
        if len(self.shown) < self.show:
            msg = decode_checked(buf, pos, record)
            preview = msg.body[:48].decode("utf-8", "replace")
            self.shown.append(
                MessageSummary(
                    offset,
                    record.size,
                    msg.topic,
                    msg.queue_id,
                    msg.queue_offset,
                    msg.msg_id,
                    msg.store_timestamp_ms,
                    msg.sys_flag,
                    dict(msg.properties),
                    len(msg.body),
                    preview,
                )
            )

    def segment(self, seg: _SegmentFile, buf) -> None:  # noqa: PLR0915 - one pass over a segment's records, each record state reported where it is met
        # A short last segment is read as far as its bytes go: what follows would be zeros.
        size = min(self.segment_size, len(buf))
        name = seg.path.name
        pos = 0
        count = 0
        damaged = False
        state = "full" if size == self.segment_size else "short"
        data_end = seg.start + size
        while pos < size:
            offset = seg.start + pos
            reason = None
            try:
                record = check_record(buf, pos, size, offset)
            except CorruptMessage as exc:
                record, reason = None, exc.reason
            if record is not None and record.kind == RecordKind.END:
                later = first_nonzero(buf, pos, min(size, pos + PROBE_BYTES))
                if later is None:  # zeros: this segment's data ends here
                    state = "empty" if pos == 0 else "open"
                    data_end = offset
                    if self.in_prefix:
                        self.clean_stop = (offset, name)
                    self._stop(offset)
                    break
                reason = (
                    f"TOTALSIZE is zero, yet non-zero bytes follow at {seg.start + later} "
                    "(a record written in part, or records after a hole)"
                )
            if reason is not None:
                self._data_found_after_stop()
                self.bad.append((offset, name, reason))
                self._stop(offset)
                damaged = True
                # Which queue the damaged bytes belonged to is unknown: queue offsets are checked
                # afresh from the next valid record.
                self.queue_offsets = QueueOffsets()
                resume = find_valid_record(buf, pos + 1, size, seg.start)
                if resume is None:
                    data_end = max(offset + 1, last_nonzero_end(buf, pos, size) + seg.start)
                    break
                pos = resume
                continue
            assert record is not None  # a failed check set `reason` and was handled above
            if record.kind == RecordKind.BLANK:
                break
            damage = self.queue_offsets(offset, record)
            if damage is not None:
                # The record is whole but its header lies: recovery stops here, and so does the
                # valid prefix; the walk goes on to report what follows.
                self._data_found_after_stop()
                self.bad.append((offset, name, damage))
                self._stop(offset)
                damaged = True
            self._message(buf, pos, offset, record)
            count += 1
            pos += record.size
            self._progress(seg.start + pos)
        else:
            if size < self.segment_size:  # the short file's bytes ran out: its data ends there
                data_end = seg.start + size
                if self.in_prefix:
                    self.clean_stop = (data_end, name)
                self._stop(data_end)
        if damaged:
            state = "damaged"
        self.segments.append(SegmentInfo(name, seg.start, self.segment_size, count, data_end, state))
        self._progress(seg.start + self.segment_size)


def _body_length(buf, pos: int, sys_flag: int) -> int:
    # BODY's length field follows BORNHOST, STORETIMESTAMP, STOREHOST, RECONSUMETIMES, PREPARED TX.
    born = 20 if sys_flag & BORNHOST_V6_FLAG else 8
    store = 20 if sys_flag & STOREHOST_V6_FLAG else 8
    p = pos + 48 + born + 8 + store + 12
    return int.from_bytes(buf[p : p + 4], "big", signed=True)


def inspect_store(  # noqa: C901, PLR0915 - the report's sections in order, each over the same opened store
    root: str | os.PathLike,
    *,
    segment_size: int | None = None,
    show_messages: int = 0,
    on_progress: OnProgress | None = None,
) -> InspectReport:
    """Inspect the store at `root` read-only. `segment_size` defaults to the size of the segment
    files found. `on_progress(done_bytes, total_bytes)` is called every 64 MiB and at the end."""
    began = time.monotonic()
    root = Path(root)
    if not root.is_dir():
        raise InspectError(f"store directory {root} does not exist")
    commitlog = root / "commitlog"
    if not commitlog.is_dir() and not (root / "checkpoint").exists():
        raise InspectError(f"{root} is not a store directory (no commitlog/ and no checkpoint)")

    checkpoint = read_checkpoint(root / "checkpoint")
    flushed = checkpoint.physic_flushed_offset if checkpoint.trusted and checkpoint.physic_flushed_offset else None
    files, size, problems, notes = list_segments(commitlog, segment_size)
    if not checkpoint.present:
        notes.append("no checkpoint file: recovery will check the whole log")
    elif not checkpoint.trusted:
        notes.append("the checkpoint is torn (bad CRC): recovery will not rely on it")
    elif flushed is None:
        notes.append("the checkpoint holds no flushed offset (written by another RocketMQ store, or empty)")
    holder = lock_holder_pid(root / "lock")
    if holder is not None and holder != os.getpid():
        notes.append(f"pid {holder} holds the store lock: the tail may be in motion while it runs")

    usable: list[_SegmentFile] = []
    short = None
    for seg in files:
        if size and seg.start % size:
            problems.append(f"segment {seg.path.name} does not start at a multiple of the segment size {size}")
        elif seg.size < size and seg is files[-1]:
            short = seg.path.name
            notes.append(
                f"the last segment {short} is {seg.size} bytes, short of the segment size {size}: its bytes are "
                f"inspected as far as they go; `rocketstore repair --store-dir {root} --extend-short-segment --yes` "
                "zero-fills it back to size so the store loads it"
            )
            usable.append(seg)
        elif seg.size != size:
            problems.append(f"segment {seg.path.name} is {seg.size} bytes; the other segments are {size}")
        else:
            usable.append(seg)
    min_offset = usable[0].start if usable else 0
    total = (usable[-1].start + size - min_offset) if usable else 0
    walk = _Walk(size, show_messages, on_progress, total, min_offset)
    expected = min_offset
    for seg in usable:
        if seg.start != expected:
            problems.append(f"no usable segment file from offset {expected} to {seg.start}")
            walk.gap(expected, seg.start)
        expected = seg.start + size
        try:
            fd = os.open(seg.path, os.O_RDONLY)
        except FileNotFoundError:
            notes.append(f"segment {seg.path.name} disappeared during inspection (deleted by retention?)")
            continue
        if not seg.size:  # an empty (short) last segment: nothing to map
            os.close(fd)
            walk.segment(seg, b"")
            continue
        try:
            buf = mmap.mmap(fd, min(size, seg.size), access=mmap.ACCESS_READ)
        finally:
            os.close(fd)
        try:
            walk.segment(seg, buf)
        finally:
            try:
                buf.close()
            except BufferError:
                pass  # a view is still alive; the mapping goes with it
    end_offset = walk.end_offset if walk.end_offset is not None else expected

    raw_bad = sorted(walk.bad)
    if flushed is not None and end_offset < flushed and not any(o == end_offset for o, _, _ in raw_bad):
        segment = next((s.name for s in walk.segments if s.start <= end_offset < s.start + size), "(none)")
        raw_bad.insert(
            0, (end_offset, segment, f"the log ends here, below the flushed offset {flushed}: fsynced data is missing")
        )
        raw_bad.sort()
    bad: list[BadOffset] = []
    for i, (offset, segment, reason) in enumerate(raw_bad):
        below = None if flushed is None else offset < flushed
        last = i == len(raw_bad) - 1
        nothing_after = walk.last_message_offset is None or walk.last_message_offset < offset
        if below:
            kind = CORRUPT
        elif holder is not None and holder != os.getpid():
            kind = IN_FLIGHT
        elif last and nothing_after:
            kind = TORN_TAIL
        else:
            kind = DAMAGE
        bad.append(BadOffset(offset, segment, reason, kind, below))

    data_end = max([s.data_end for s in walk.segments if s.data_end > s.start] + [end_offset])
    queues = tuple(
        QueueStats(topic, qid, s[0], s[1], s[2], s[3], s[4], s[5]) for (topic, qid), s in sorted(walk.queues.items())
    )
    if on_progress is not None:
        on_progress(total, total)
    return InspectReport(
        store_dir=str(root),
        segment_size=size,
        segments=tuple(walk.segments),
        min_offset=min_offset,
        end_offset=end_offset,
        data_end=data_end,
        messages=walk.messages,
        message_bytes=walk.message_bytes,
        messages_beyond_end=walk.beyond,
        queues=queues,
        bad_offsets=tuple(bad),
        checkpoint=checkpoint,
        flushed_offset=flushed,
        abort_present=(root / "abort").exists(),
        lock_holder_pid=holder,
        layout_problems=tuple(problems),
        notes=tuple(notes),
        first_messages=tuple(walk.shown),
        scan_seconds=time.monotonic() - began,
        short_segment=short,
    )


# ---------------------------------------------------------------------------------------------
# text rendering


def _when(ms: int) -> str:
    if ms <= 0:
        return "-"
    try:
        moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
    except (OverflowError, OSError, ValueError):
        return str(ms)
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def human_bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def _table(headers: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        out = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))]
        return "  ".join(out).rstrip()

    return [line(headers)] + [line(r) for r in rows]


def format_report(report: InspectReport) -> str:
    r = report
    cp = r.checkpoint
    out = [f"Store {r.store_dir}"]
    out.append(
        f"  CommitLog     {len(r.segments)} segment(s) of {r.segment_size} bytes; "
        f"offsets [{r.min_offset}, {r.end_offset}) valid"
        + (f", written up to {r.data_end}" if r.data_end != r.end_offset else "")
    )
    if not cp.present:
        out.append("  checkpoint    absent")
    elif not cp.trusted:
        out.append("  checkpoint    torn (CRC mismatch): not trusted")
    else:
        others = "".join(f", {name.replace('_', ' ')} {value}" for name, value in cp.other_fields.items())
        out.append(
            f"  checkpoint    flushed offset {cp.physic_flushed_offset}, confirm offset {cp.confirm_offset}{others}; "
            f"physic {_when(cp.physic_msg_timestamp)}, logics {_when(cp.logics_msg_timestamp)}, "
            f"index {_when(cp.index_msg_timestamp)}"
        )
    out.append(
        "  abort file    present (the last run did not shut down cleanly)"
        if r.abort_present
        else "  abort file    absent (clean shutdown, or never started)"
    )
    out.append(f"  lock          held by pid {r.lock_holder_pid}" if r.lock_holder_pid else "  lock          free")
    out.append(
        f"  messages      {r.messages} ({human_bytes(r.message_bytes)}) in {len(r.queues)} queue(s) of "
        f"{len(r.topics)} topic(s)"
        + (f"; {r.messages_beyond_end} more beyond the first bad offset" if r.messages_beyond_end else "")
    )
    out.append("")
    if r.queues:
        rows = []
        for t in r.topics:
            for q in (q for q in r.queues if q.topic == t.topic):
                rows.append(
                    [
                        q.topic,
                        str(q.queue_id),
                        str(q.messages),
                        str(q.bytes),
                        "-" if q.min_queue_offset is None else str(q.min_queue_offset),
                        "-" if q.max_queue_offset is None else str(q.max_queue_offset),
                        "yes" if q.dense else "NO",
                    ]
                )
            if t.queues > 1:
                rows.append([t.topic, "all", str(t.messages), str(t.bytes), "", "", ""])
        out += _table(["TOPIC", "QUEUE", "MESSAGES", "BYTES", "MIN QOFF", "MAX QOFF", "DENSE"], rows, {1, 2, 3, 4, 5})
        out.append("")
    if r.first_messages:
        rows = [
            [
                str(m.offset),
                str(m.size),
                m.topic,
                str(m.queue_id),
                str(m.queue_offset),
                m.msg_id,
                _when(m.store_timestamp_ms),
                repr(m.body_preview),
            ]
            for m in r.first_messages
        ]
        out.append(f"First {len(rows)} message(s):")
        out += _table(["OFFSET", "SIZE", "TOPIC", "QUEUE", "QOFF", "MSGID", "STORED", "BODY"], rows, {0, 1, 3, 4})
        out.append("")
    for problem in r.layout_problems:
        out.append(f"LAYOUT: {problem}")
    if r.bad_offsets:
        rows = [
            [
                str(b.offset),
                b.segment,
                b.kind,
                "?" if b.below_flushed is None else ("yes" if b.below_flushed else "no"),
                b.reason,
            ]
            for b in r.bad_offsets
        ]
        out.append("Bad offsets:")
        out += _table(["OFFSET", "SEGMENT", "KIND", "BELOW FLUSHED", "REASON"], rows, {0})
        out.append("")
    for note in r.notes:
        out.append(f"note: {note}")
    if r.problems_found:
        first = r.corruption[0] if r.corruption else None
        out.append(
            "RESULT: PROBLEMS FOUND"
            + (
                f": {first.kind} at offset {first.offset} ({first.reason}). "
                f"See `rocketstore repair --store-dir {r.store_dir}`."
                if first
                else f": the last segment {r.short_segment} is short; see the note above."
                if r.short_segment and not r.layout_problems
                else ": the segment layout is broken."
            )
        )
    elif any(b.kind == IN_FLIGHT for b in r.bad_offsets):
        flight = next(b for b in r.bad_offsets if b.kind == IN_FLIGHT)
        out.append(f"RESULT: OK; the tail at offset {flight.offset} is being written by pid {r.lock_holder_pid}.")
    elif r.torn_tail is not None:
        tail = r.torn_tail
        out.append(
            f"RESULT: OK, with a torn tail at offset {tail.offset} ({r.data_end - tail.offset} bytes) that the store "
            "cuts at its next start."
        )
    else:
        out.append("RESULT: OK")
    return "\n".join(out)
