"""CommitLog retention: RocketMQ 4.x's CleanCommitLogService, and the trigger of its
CleanConsumeQueueService.

What this module owns:

- The decisions, pure and free of I/O and clocks (time is an argument):
  `is_time_to_delete` (deleteWhen hours), `assess_disk` (what the used ratio of the CommitLog's
  filesystem asks for), `clean_reasons` (whether a round deletes at all, and whether it may delete
  unexpired segments), `select_expired` (which segments go: always a prefix, never the last), and
  the frozen `CleanPolicy` built from `StoreConfig`.
- `CleanService`, a thin ServiceThread around them: every cleanResourceInterval it runs
  `run_round(now_ms)`, which deletes CommitLog segments, reports the disk-full state through
  `on_disk_full`, and reports a new CommitLog min offset through `on_commit_log_deleted`.

What it does not own: deleting ConsumeQueue and IndexFile files below the new min offset and
correcting their min offsets (the store does it in `on_commit_log_deleted`, as RocketMQ's
CleanConsumeQueueService does after each CommitLog clean), and refusing puts while the disk is
full (the store does it in `on_disk_full`).

RocketMQ's rules, as followed here: a round deletes when it is a deleteWhen hour, or the disk is
used above diskMaxUsedSpaceRatio, or a manual request (`request_delete_now`) has rounds left. It
deletes expired segments (last modified + fileReservedTime <= now), oldest first, at most
deleteFileBatchMax, stopping at the first one that is not expired, so the CommitLog stays
contiguous. Above diskSpaceCleanForciblyRatio, with cleanFileForciblyEnable, it deletes segments
whether expired or not ("clean immediately"). Above diskSpaceWarningLevelRatio the disk is full:
the store refuses writes until usage falls to the forcible-clean ratio or below.

Beyond RocketMQ, forced deletion (of segments not expired yet) is bounded, because a client that
can fill the disk could otherwise make the broker throw away messages seconds after acknowledging
them: a segment goes early only when it was last written at least cleanForciblyMinAge ago and
every message in it has been consumed (`first_unconsumed`: below the lowest CommitLog offset some
consumer group, or the delay service, still has to read) unless cleanForciblyUnconsumedEnable says
otherwise. When nothing may go, the disk fills up to the warning level and the store refuses
writes (one status, SERVICE_NOT_AVAILABLE) instead of losing data. Each forced deletion is logged
with its range, size and age; a forced clean-up that is held back is logged once per reason. Never the last
(active) segment; and, beyond RocketMQ, never a segment holding bytes not yet flushed (see
`deletable_below`), because the flusher would lose its place.

Thread-safety: one cleaning thread runs rounds (`run_round` is also serialised by a lock, so a
direct call from another thread is safe). `request_delete_now`, `wakeup` and `stop` may be called
from any thread. Segments leave the log in two steps: first the queue's tuple of segments is
replaced by a shorter copy (copy-on-write), under `files_lock`, the lock that appends hold when
they add a segment, so neither update can undo the other and readers never see a half-deleted
list; then, outside that lock (puts are not held up by unlinks and munmaps), each detached segment
is closed and unlinked, oldest first. A reader that already holds a view of a deleted segment
keeps its mapping until it lets go (Linux keeps the pages of an unlinked, mapped file); a read
that looks a deleted offset up afterwards finds no segment.
"""

from __future__ import annotations

import enum
import functools
import logging
import os
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime, tzinfo
from itertools import takewhile
from pathlib import Path
from typing import TypeVar

from .config import StoreConfig
from .log.flush import wall_clock_ms
from .log.mapped_file import MappedFile, fsync_dir
from .log.mapped_file_queue import MappedFileQueue
from .properties import ConfigError
from .service_thread import ServiceThread

log = logging.getLogger(__name__)

HOUR_MS = 3_600_000
# RocketMQ's MAX_MANUAL_DELETE_FILE_TIMES: a manual request lasts this many rounds.
MANUAL_DELETE_ROUNDS = 20
# RocketMQ clamps diskMaxUsedSpaceRatio (a percentage) to this range.
_MIN_USED_PERCENT = 10
_MAX_USED_PERCENT = 95


# -- pure decisions -------------------------------------------------------------------------------


@functools.lru_cache(maxsize=32)
def parse_delete_when(delete_when: str) -> frozenset[int]:
    """The hours of day named by deleteWhen ("04", "04;16"). ValueError for anything else; Java
    RocketMQ would fail the same way (Integer.parseInt), just later, in the cleaning thread."""
    hours = set()
    for piece in delete_when.split(";"):
        piece = piece.strip()
        if not piece:
            continue  # "04;" is tolerated, as Java's split drops trailing empties
        if not piece.isdigit() or not 0 <= int(piece) <= 23:
            raise ValueError(f"deleteWhen={delete_when!r}: {piece!r} is not an hour of day (0-23)")
        hours.add(int(piece))
    if not hours:
        raise ValueError(f"deleteWhen={delete_when!r} names no hour of day")
    return frozenset(hours)


def is_time_to_delete(now_ms: int, delete_when: str, tz: tzinfo | None = None) -> bool:
    """True during the deleteWhen hours at `now_ms`, in `tz` (None: the machine's local time, as
    RocketMQ's Calendar.getInstance())."""
    hour = datetime.fromtimestamp(now_ms / 1000, tz).hour
    return hour in parse_delete_when(delete_when)


@dataclass(frozen=True, slots=True)
class DiskDecision:
    """What the CommitLog filesystem's usage asks for. `ratio` None: it could not be measured."""

    ratio: float | None
    full: bool
    clean_immediately: bool
    space_to_delete: bool


def assess_disk(ratio: float | None, policy: "CleanPolicy", *, was_full: bool) -> DiskDecision:
    """RocketMQ's isSpaceToDelete for one filesystem.

    Above the warning level the disk is full; it stays full until usage is at or below the
    forcible-clean ratio (the hysteresis keeps the store from flapping between refusing and
    accepting writes around one threshold). Above the forcible-clean ratio segments go whether
    expired or not. Above diskMaxUsedSpaceRatio expired segments go outside deleteWhen hours.
    An unknown ratio (RocketMQ's -1) reclaims expired segments but leaves the full state as it was:
    no measurement is no reason to accept writes again."""
    if ratio is None or ratio < 0:
        return DiskDecision(None, was_full, False, True)
    if ratio > policy.disk_space_warning_level_ratio:
        full, clean_immediately = True, True
    elif ratio > policy.disk_space_clean_forcibly_ratio:
        full, clean_immediately = was_full, True
    else:
        full, clean_immediately = False, False
    return DiskDecision(ratio, full, clean_immediately, ratio > policy.disk_max_used_ratio)


class CleanReason(enum.Enum):
    TIME = "time"  # a deleteWhen hour
    SPACE = "space"  # usage above diskMaxUsedSpaceRatio
    MANUAL = "manual"  # request_delete_now has rounds left
    FORCED = "forced"  # usage above diskSpaceCleanForciblyRatio: unexpired segments go too


def clean_reasons(
    *, time_up: bool, disk: DiskDecision, manual: bool, clean_forcibly_enable: bool
) -> frozenset[CleanReason]:
    """Why a round deletes; empty: it does not. FORCED only ever joins another reason: as in
    RocketMQ, a nearly full disk makes a triggered round delete unexpired segments, but triggers
    nothing itself (it is above diskMaxUsedSpaceRatio in any sane configuration anyway)."""
    reasons = set()
    if time_up:
        reasons.add(CleanReason.TIME)
    if disk.space_to_delete:
        reasons.add(CleanReason.SPACE)
    if manual:
        reasons.add(CleanReason.MANUAL)
    if reasons and clean_forcibly_enable and disk.clean_immediately:
        reasons.add(CleanReason.FORCED)
    return frozenset(reasons)


S = TypeVar("S")


def select_expired(
    files: Sequence[S],
    now_ms: int,
    reserved_ms: int,
    mtime_of: Callable[[S], int],
    *,
    force: bool,
    max_count: int,
    may_force: Callable[[S], bool] | None = None,
) -> list[S]:
    """The segments to delete, oldest first: a prefix of `files` without its last (active)
    segment, at most `max_count` long, ending before the first segment that is not expired
    (unless `force` and `may_force` allows that segment). A segment whose modification time cannot
    be read counts as not expired."""
    chosen: list[S] = []
    for segment in files[:-1]:
        if len(chosen) >= max_count:
            break
        try:
            expired = mtime_of(segment) + reserved_ms <= now_ms
        except OSError as exc:
            log.warning(
                "cannot read the modification time of %s, keeping it: %s", getattr(segment, "path", segment), exc
            )
            expired = False
        if not expired and not (force and (may_force is None or may_force(segment))):
            # Deleting past a kept segment would leave a hole in the CommitLog.
            break
        chosen.append(segment)
    return chosen


# -- the policy --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CleanPolicy:
    """Retention settings, RocketMQ's defaults. Ratios are fractions of the filesystem (0.75);
    `disk_max_used_ratio` is diskMaxUsedSpaceRatio / 100, already clamped to RocketMQ's 10..95 %."""

    file_reserved_ms: int = 72 * HOUR_MS
    delete_when: str = "04"
    tz: tzinfo | None = None
    disk_max_used_ratio: float = 0.75
    disk_space_warning_level_ratio: float = 0.90
    disk_space_clean_forcibly_ratio: float = 0.85
    clean_file_forcibly_enable: bool = True
    interval_ms: int = 10_000
    delete_interval_ms: int = 100
    delete_file_batch_max: int = 10
    # Forced deletion keeps segments written within this long, and (unless allowed) segments
    # holding messages some consumer has not read.
    forced_min_age_ms: int = HOUR_MS
    forced_unconsumed_allowed: bool = False

    def __post_init__(self) -> None:
        try:
            parse_delete_when(self.delete_when)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        if self.file_reserved_ms < 0:
            raise ConfigError(f"fileReservedTime must not be negative, got {self.file_reserved_ms} ms")
        if self.interval_ms <= 0:
            raise ConfigError(f"cleanResourceInterval must be positive, got {self.interval_ms}")
        if self.delete_interval_ms < 0:
            raise ConfigError(f"deleteCommitLogFilesInterval must not be negative, got {self.delete_interval_ms}")
        if self.forced_min_age_ms < 0:
            raise ConfigError(f"cleanForciblyMinAge must not be negative, got {self.forced_min_age_ms} ms")
        if self.delete_file_batch_max <= 0:
            raise ConfigError(f"deleteFileBatchMax must be positive, got {self.delete_file_batch_max}")
        for name in ("disk_max_used_ratio", "disk_space_warning_level_ratio", "disk_space_clean_forcibly_ratio"):
            value = getattr(self, name)
            if not 0 < value <= 1:
                raise ConfigError(f"{name} must be a fraction in (0, 1], got {value}")

    @classmethod
    def from_config(cls, config: StoreConfig, *, tz: tzinfo | None = None) -> "CleanPolicy":
        percent = min(max(config.disk_max_used_space_ratio, _MIN_USED_PERCENT), _MAX_USED_PERCENT)
        return cls(
            file_reserved_ms=config.file_reserved_time_h * HOUR_MS,
            delete_when=config.delete_when,
            tz=tz,
            disk_max_used_ratio=percent / 100,
            disk_space_warning_level_ratio=config.disk_space_warning_level_ratio,
            disk_space_clean_forcibly_ratio=config.disk_space_clean_forcibly_ratio,
            clean_file_forcibly_enable=config.clean_file_forcibly_enable,
            interval_ms=config.clean_resource_interval_ms,
            delete_interval_ms=config.delete_commit_log_files_interval_ms,
            delete_file_batch_max=config.delete_file_batch_max,
            forced_min_age_ms=config.clean_forcibly_min_age_ms,
            forced_unconsumed_allowed=config.clean_forcibly_unconsumed_enable,
        )


# -- I/O defaults -----------------------------------------------------------------------------------


def disk_used_ratio(path: str | os.PathLike) -> float:
    """Used fraction of the filesystem holding `path`, as Java's (total - free) / total, where free
    counts the blocks reserved for root (File.getFreeSpace). OSError when it cannot be measured."""
    st = os.statvfs(path)
    if st.f_blocks <= 0:
        raise OSError(f"filesystem of {path} reports no blocks")
    return (st.f_blocks - st.f_bfree) / st.f_blocks


def file_mtime_ms(segment: MappedFile) -> int:
    """A segment's last modification time in ms (RocketMQ's File.lastModified()). Through the open
    descriptor when there is one: it is the segment's own inode whatever happens to the name."""
    st = os.fstat(segment.fd) if segment.fd >= 0 else os.stat(segment.path)
    return st.st_mtime_ns // 1_000_000


# -- the service ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CleanRound:
    """What one round did. `deleted`: segment names removed from the CommitLog this round, oldest
    first, with `deleted_bytes` their size; `unlink_pending`: removed segments whose file could not
    be unlinked yet (retried every round, oldest first). `min_offset`: the CommitLog's min offset
    after the round."""

    now_ms: int
    reasons: frozenset[CleanReason]
    disk: DiskDecision
    deleted: tuple[str, ...]
    deleted_bytes: int
    min_offset: int
    unlink_pending: tuple[str, ...] = ()

    @property
    def triggered(self) -> bool:
        return bool(self.reasons)


def _no_op(_value: object) -> None:
    return None


class CleanService(ServiceThread):
    """RocketMQ's CleanCommitLogService (see the module docstring).

    `files_lock`: the lock appends hold while they add a segment to the queue (the store's
    CommitLog lock). Without it, only a queue nothing appends to may be cleaned.
    `deletable_below`: segments ending above this CommitLog offset are kept (default: the flushed
    offset; the store may pass a lower one, e.g. the dispatch position).
    `first_unconsumed`: the lowest CommitLog offset of a message some reader still has to read
    (the log's max offset when none); forced deletion never passes it unless allowed. Without it,
    every message counts as unconsumed.
    `pause`: waits `seconds` between two unlinks (deleteCommitLogFilesInterval, which spreads the
    I/O of freeing big files); default: an early-waking wait that `stop` cuts short."""

    name = "clean-commitlog"

    def __init__(
        self,
        queue: MappedFileQueue,
        policy: CleanPolicy,
        *,
        clock_ms: Callable[[], int] = wall_clock_ms,
        disk_usage_ratio: Callable[[], float] | None = None,
        mtime_of: Callable[[MappedFile], int] = file_mtime_ms,
        on_commit_log_deleted: Callable[[int], None] = _no_op,
        on_disk_full: Callable[[bool], None] = _no_op,
        files_lock: AbstractContextManager[object] | None = None,
        deletable_below: Callable[[], int] | None = None,
        pause: Callable[[float], None] | None = None,
        first_unconsumed: Callable[[], int] | None = None,
    ) -> None:
        super().__init__()
        self._queue = queue
        self.policy = policy
        self._clock = clock_ms
        directory = Path(queue.directory)
        self._disk_usage_ratio = disk_usage_ratio or (lambda: disk_used_ratio(directory))
        self._mtime_of = mtime_of
        self._on_commit_log_deleted = on_commit_log_deleted
        self._on_disk_full = on_disk_full
        self._files_lock = files_lock if files_lock is not None else threading.Lock()
        self._deletable_below = deletable_below or (lambda: queue.flushed_where)
        self._pause = pause or self._wait_unless_stopping
        self._first_unconsumed = first_unconsumed or (lambda: queue.min_offset)
        self._held_back = ""  # why forced deletion last kept a segment (logged once per reason)
        self._round_lock = threading.Lock()
        self._manual_lock = threading.Lock()
        self._manual_rounds = 0
        self._disk_full = False
        # As RocketMQ's lastPhysicalMinOffset, it starts at 0: the first round reports a min offset
        # above 0 even if no segment went this run, so ConsumeQueues left behind by a crash between
        # a CommitLog deletion and their own are cleaned too.
        self._reported_min_offset = 0
        self._unlink_pending: list[MappedFile] = []

    # -- any thread -----------------------------------------------------------------------------

    @property
    def disk_full(self) -> bool:
        """The disk-full state last acknowledged by `on_disk_full`."""
        return self._disk_full

    def request_delete_now(self) -> None:
        """Delete expired segments in each of the next MANUAL_DELETE_ROUNDS rounds, whatever the
        hour (RocketMQ's executeDeleteFilesManually); wakes the thread for the first of them."""
        with self._manual_lock:
            self._manual_rounds = MANUAL_DELETE_ROUNDS
        log.info("manual CommitLog deletion requested for the next %d rounds", MANUAL_DELETE_ROUNDS)
        self.wakeup()

    # -- the thread -----------------------------------------------------------------------------

    def _wait_unless_stopping(self, seconds: float) -> None:
        # A stopping service finishes its unlinks without pausing: shutdown should not wait.
        if not self.stopping:
            self.wait_for_running(seconds)

    def run_once(self) -> None:
        # Wait first, like RocketMQ's initial delay: nothing is deleted while the store starts up.
        self.wait_for_running(self.policy.interval_ms / 1000)
        if not self.stopping:
            self.run_round(self._clock())

    def on_stop(self) -> None:
        # A last attempt, so a transient unlink failure does not leave a file behind at shutdown.
        with self._round_lock:
            self._unlink_detached()

    # -- one round ------------------------------------------------------------------------------

    def run_round(self, now_ms: int) -> CleanRound:
        """One clean round at `now_ms`: deterministic given the clock, the disk ratio and mtimes."""
        with self._round_lock:
            policy = self.policy
            self._unlink_detached()
            disk = assess_disk(self._measure_disk(), policy, was_full=self._disk_full)
            self._publish_disk_full(disk)
            reasons = clean_reasons(
                time_up=is_time_to_delete(now_ms, policy.delete_when, policy.tz),
                disk=disk,
                manual=self._take_manual_round(),
                clean_forcibly_enable=policy.clean_file_forcibly_enable,
            )
            deleted: list[MappedFile] = []
            if reasons:
                if self._unlink_pending:
                    # A file left on disk before newer deleted ones would be a hole at the next
                    # load; the CommitLog shrinks again once the oldest is gone.
                    log.warning("not deleting more segments while %d wait to be unlinked", len(self._unlink_pending))
                else:
                    deleted = self._delete_round(now_ms, reasons)
                if not deleted and disk.space_to_delete:
                    log.warning(
                        "disk space will be full soon (%s), but no segment could be deleted", _percent(disk.ratio)
                    )
            return CleanRound(
                now_ms=now_ms,
                reasons=reasons,
                disk=disk,
                deleted=tuple(s.path.name for s in deleted),
                deleted_bytes=sum(s.file_size for s in deleted),
                min_offset=self._report_min_offset(),
                unlink_pending=tuple(s.path.name for s in self._unlink_pending),
            )

    def _measure_disk(self) -> float | None:
        try:
            return float(self._disk_usage_ratio())
        except OSError as exc:
            log.warning("cannot measure disk usage of %s: %s", self._queue.directory, exc)
            return None

    def _publish_disk_full(self, disk: DiskDecision) -> None:
        if disk.full == self._disk_full:
            return
        if disk.full:
            log.error(
                "CommitLog disk %s used, above %s: marking the disk full, writes are refused until it falls",
                _percent(disk.ratio),
                _percent(self.policy.disk_space_warning_level_ratio),
            )
        else:
            log.info("CommitLog disk %s used: disk space OK again, writes accepted", _percent(disk.ratio))
        try:
            self._on_disk_full(disk.full)
        except Exception:
            # Not acknowledged: the state stays as it was, so the next round tells the store again.
            log.exception("on_disk_full(%s) failed; retrying next round", disk.full)
            return
        self._disk_full = disk.full

    def _take_manual_round(self) -> bool:
        with self._manual_lock:
            if self._manual_rounds <= 0:
                return False
            self._manual_rounds -= 1
            return True

    def _delete_round(self, now_ms: int, reasons: frozenset[CleanReason]) -> list[MappedFile]:
        policy = self.policy
        files = self._queue.files
        forced = CleanReason.FORCED in reasons
        held: list[str] = []
        may_force = self._forced_rule(now_ms, held) if forced else None
        batch = select_expired(
            files,
            now_ms,
            policy.file_reserved_ms,
            self._mtime_of,
            force=forced,
            max_count=policy.delete_file_batch_max,
            may_force=may_force,
        )
        self._report_held_back(held[0] if held else "")
        safe = self._deletable_below()
        batch = list(takewhile(lambda s: s.end_offset <= safe, batch))
        if not batch:
            return []
        if not self._detach(batch):
            return []
        why = "/".join(sorted(r.value for r in reasons))
        for segment in batch:
            try:
                age = f"{(now_ms - self._mtime_of(segment)) / 1000:.0f} s"
            except OSError:
                age = "unknown"
            log.log(
                logging.WARNING if forced else logging.INFO,
                "deleting CommitLog segment %s (%d bytes, offsets [%d, %d), last written %s ago) because of %s",
                segment.path.name,
                segment.file_size,
                segment.file_from_offset,
                segment.end_offset,
                age,
                why,
            )
        self._unlink_pending.extend(batch)
        self._unlink_detached()
        log.info("CommitLog now starts at %d after deleting %d segment(s)", self._queue.min_offset, len(batch))
        return batch

    def _forced_rule(self, now_ms: int, held: list[str]) -> Callable[[MappedFile], bool]:
        """Whether a segment that is not expired may go in a forced round; the first reason it
        may not lands in `held`."""
        policy = self.policy
        unconsumed = None if policy.forced_unconsumed_allowed else self._first_unconsumed()

        def may_force(segment: MappedFile) -> bool:
            try:
                young = self._mtime_of(segment) + policy.forced_min_age_ms > now_ms
            except OSError:
                young = True
            if young:
                held.append(
                    f"segment {segment.path.name} was written less than cleanForciblyMinAge "
                    f"({policy.forced_min_age_ms} ms) ago"
                )
                return False
            if unconsumed is not None and segment.end_offset > unconsumed:
                held.append(
                    f"segment {segment.path.name} holds messages not consumed yet (from offset {unconsumed}; "
                    "cleanForciblyUnconsumedEnable is false)"
                )
                return False
            return True

        return may_force

    def _report_held_back(self, reason: str) -> None:
        if reason == self._held_back:
            return
        self._held_back = reason
        if reason:
            log.warning(
                "the disk is nearly full but forced clean-up keeps data: %s; writes are refused above %s "
                "(diskSpaceWarningLevelRatio) rather than losing it",
                reason,
                _percent(self.policy.disk_space_warning_level_ratio),
            )

    def _detach(self, batch: list[MappedFile]) -> bool:
        """Take `batch`, a prefix of the queue, out of it; False if the queue no longer starts
        with it (it was truncated or reloaded meanwhile) or it would leave the queue empty."""
        with self._files_lock:
            files = self._queue.files
            n = len(batch)
            if len(files) <= n or any(a is not b for a, b in zip(files, batch)):
                log.warning("the CommitLog changed during the clean round; deleting nothing this round")
                return False
            # A new, shorter tuple: readers holding the old one keep a consistent list.
            self._queue.files = files[n:]
        return True

    def _unlink_detached(self) -> None:
        """Close and unlink detached segments, oldest first, stopping at the first failure so the
        files left on disk stay a contiguous run."""
        gone = 0
        while self._unlink_pending:
            segment = self._unlink_pending[0]
            if gone and self.policy.delete_interval_ms > 0:
                self._pause(self.policy.delete_interval_ms / 1000)
            try:
                segment.destroy()
            except OSError as exc:
                log.error("cannot delete CommitLog segment %s, retrying next round: %s", segment.path, exc)
                break
            self._unlink_pending.pop(0)
            gone += 1
        if gone:
            try:
                # Make the unlinks durable; after a crash before this, the files reappear as a
                # contiguous prefix and are simply deleted again.
                fsync_dir(Path(self._queue.directory))
            except OSError as exc:
                log.warning("cannot fsync %s after deleting segments: %s", self._queue.directory, exc)

    def _report_min_offset(self) -> int:
        min_offset = self._queue.min_offset
        if min_offset > self._reported_min_offset:
            try:
                self._on_commit_log_deleted(min_offset)
            except Exception:
                log.exception("on_commit_log_deleted(%d) failed; retrying next round", min_offset)
            else:
                self._reported_min_offset = min_offset
        return min_offset


def _percent(ratio: float | None) -> str:
    return "an unknown share" if ratio is None else f"{ratio * 100:.1f} %"


__all__ = [
    "MANUAL_DELETE_ROUNDS",
    "CleanPolicy",
    "CleanReason",
    "CleanRound",
    "CleanService",
    "DiskDecision",
    "assess_disk",
    "clean_reasons",
    "disk_used_ratio",
    "file_mtime_ms",
    "is_time_to_delete",
    "parse_delete_when",
    "select_expired",
]
