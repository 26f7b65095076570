"""CommitLog retention (store/retention.py): the pure decisions, then `CleanService.run_round` on real
segment files with an injected clock, disk ratio and modification times, then the thread adapter
and a real MessageStore. No sleeps: rounds are called directly, the thread is synchronised on
events.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from store import CorruptMessage, Message, MessageStore, StoreConfig
from store.log.mapped_file import MappedFile
from store.log.mapped_file_queue import MappedFileQueue
from store.properties import ConfigError
from store.retention import (
    HOUR_MS,
    MANUAL_DELETE_ROUNDS,
    CleanPolicy,
    CleanReason,
    CleanService,
    DiskDecision,
    assess_disk,
    clean_reasons,
    disk_used_ratio,
    file_mtime_ms,
    is_time_to_delete,
    parse_delete_when,
    select_expired,
)

SEG = 4096
UTC = timezone.utc
RESERVED_MS = 72 * HOUR_MS


def at(hour: int, minute: int = 0, day: int = 10) -> int:
    """Milliseconds of 2024-06-<day> hour:minute UTC."""
    return int(datetime(2024, 6, day, hour, minute, tzinfo=UTC).timestamp() * 1000)


NOW_IN_HOURS = at(4, 30)  # inside deleteWhen "04"
NOW_OUTSIDE = at(12, 0)
OLD = at(0, 0, day=1)  # far older than 72 h before day 10
FRESH = at(0, 0, day=10)


def policy(**kw) -> CleanPolicy:
    kw.setdefault("tz", UTC)
    kw.setdefault("delete_interval_ms", 0)
    return CleanPolicy(**kw)


# -- deleteWhen -------------------------------------------------------------------------------------


def test_parse_delete_when_accepts_hours_separated_by_semicolons():
    assert parse_delete_when("04") == {4}
    assert parse_delete_when("04;16") == {4, 16}
    assert parse_delete_when(" 4 ; 16 ;") == {4, 16}
    assert parse_delete_when("0;23") == {0, 23}


@pytest.mark.parametrize("bad", ["", ";", "24", "-1", "4am", "04,16", "1.5"])
def test_parse_delete_when_rejects_what_is_not_an_hour(bad):
    with pytest.raises(ValueError, match="deleteWhen"):
        parse_delete_when(bad)
    with pytest.raises(ConfigError, match="deleteWhen"):
        CleanPolicy(delete_when=bad)


def test_is_time_to_delete_only_during_the_named_hours():
    assert is_time_to_delete(at(4, 0), "04", UTC)
    assert is_time_to_delete(at(4, 59), "04", UTC)
    assert not is_time_to_delete(at(3, 59), "04", UTC)
    assert not is_time_to_delete(at(5, 0), "04", UTC)
    assert is_time_to_delete(at(16, 30), "04;16", UTC)
    assert is_time_to_delete(at(4, 30), "04;16", UTC)
    assert not is_time_to_delete(at(10, 0), "04;16", UTC)


def test_is_time_to_delete_reads_the_hour_in_the_given_timezone():
    shanghai = timezone(timedelta(hours=8))
    instant = at(20, 15)  # 04:15 the next day in UTC+8
    assert is_time_to_delete(instant, "04", shanghai)
    assert not is_time_to_delete(instant, "04", UTC)
    local_hour = datetime.fromtimestamp(instant / 1000).hour
    assert is_time_to_delete(instant, f"{local_hour:02d}", None)


# -- selection ----------------------------------------------------------------------------------------


def _select(mtimes: list[int], now=NOW_OUTSIDE, **kw):
    kw.setdefault("force", False)
    kw.setdefault("max_count", 10)
    files = list(range(len(mtimes)))
    return select_expired(files, now, RESERVED_MS, lambda i: mtimes[i], **kw)


def test_select_expired_takes_the_expired_prefix_and_never_the_last():
    assert _select([OLD] * 5) == [0, 1, 2, 3]
    assert _select([OLD, OLD, FRESH, OLD, OLD]) == [0, 1]  # stops at the first kept one
    assert _select([FRESH, OLD, OLD]) == []
    assert _select([OLD]) == []
    assert _select([]) == []


def test_select_expired_boundary_is_mtime_plus_reserve_inclusive():
    now = OLD + RESERVED_MS
    assert _select([OLD, OLD], now=now) == [0]
    assert _select([OLD, OLD], now=now - 1) == []


def test_select_expired_respects_max_count_and_force():
    assert _select([OLD] * 5, max_count=2) == [0, 1]
    assert _select([OLD] * 5, max_count=0) == []
    assert _select([FRESH] * 5, force=True) == [0, 1, 2, 3]
    assert _select([FRESH] * 5, force=True, max_count=3) == [0, 1, 2]


def test_select_expired_keeps_a_segment_whose_mtime_cannot_be_read():
    def mtime(i: int) -> int:
        if i == 1:
            raise FileNotFoundError(errno.ENOENT, "gone")
        return OLD

    assert select_expired([0, 1, 2, 3], NOW_OUTSIDE, RESERVED_MS, mtime, force=False, max_count=10) == [0]


# -- disk usage ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ratio", "was_full", "full", "immediately", "space"),
    [
        (0.50, False, False, False, False),
        (0.75, False, False, False, False),  # "above" 75 %, not at
        (0.76, False, False, False, True),
        (0.86, False, False, True, True),
        (0.91, False, True, True, True),
        (0.88, True, True, True, True),  # full stays until usage is at or below 85 %
        (0.85, True, False, False, True),
        (0.70, True, False, False, False),
        (None, True, True, False, True),  # unknown: reclaim expired, keep the full state
        (None, False, False, False, True),
    ],
)
def test_assess_disk_follows_rocketmq_thresholds(ratio, was_full, full, immediately, space):
    decision = assess_disk(ratio, CleanPolicy(), was_full=was_full)
    assert decision == DiskDecision(ratio, full, immediately, space)


def test_clean_reasons_forced_only_joins_a_trigger():
    forced_disk = DiskDecision(0.87, False, True, False)  # e.g. diskMaxUsedSpaceRatio clamped to 95
    assert clean_reasons(time_up=False, disk=forced_disk, manual=False, clean_forcibly_enable=True) == frozenset()
    assert clean_reasons(time_up=True, disk=forced_disk, manual=False, clean_forcibly_enable=True) == {
        CleanReason.TIME,
        CleanReason.FORCED,
    }
    assert clean_reasons(time_up=True, disk=forced_disk, manual=False, clean_forcibly_enable=False) == {
        CleanReason.TIME
    }
    calm = DiskDecision(0.5, False, False, False)
    assert clean_reasons(time_up=False, disk=calm, manual=True, clean_forcibly_enable=True) == {CleanReason.MANUAL}


def test_policy_from_config_uses_rocketmq_defaults_and_clamps_the_used_ratio(tmp_path):
    p = CleanPolicy.from_config(StoreConfig(store_path_root_dir=str(tmp_path)), tz=UTC)
    assert p == CleanPolicy(tz=UTC)
    assert (p.file_reserved_ms, p.delete_when, p.interval_ms, p.delete_file_batch_max) == (
        RESERVED_MS,
        "04",
        10_000,
        10,
    )
    assert (p.disk_max_used_ratio, p.disk_space_clean_forcibly_ratio, p.disk_space_warning_level_ratio) == (
        0.75,
        0.85,
        0.90,
    )
    high = CleanPolicy.from_config(StoreConfig(store_path_root_dir=str(tmp_path), disk_max_used_space_ratio=99))
    low = CleanPolicy.from_config(StoreConfig(store_path_root_dir=str(tmp_path), disk_max_used_space_ratio=3))
    assert (high.disk_max_used_ratio, low.disk_max_used_ratio) == (0.95, 0.10)
    custom = CleanPolicy.from_config(
        StoreConfig(
            store_path_root_dir=str(tmp_path), file_reserved_time_h=1, delete_when="01;13", delete_file_batch_max=3
        )
    )
    assert (custom.file_reserved_ms, custom.delete_when, custom.delete_file_batch_max) == (HOUR_MS, "01;13", 3)


@pytest.mark.parametrize(
    "kw",
    [{"delete_file_batch_max": 0}, {"interval_ms": 0}, {"file_reserved_ms": -1}, {"disk_max_used_ratio": 1.5}],
)
def test_policy_rejects_unusable_values(kw):
    with pytest.raises(ConfigError):
        CleanPolicy(**kw)


def test_disk_used_ratio_reads_the_filesystem(tmp_path):
    st = os.statvfs(tmp_path)
    ratio = disk_used_ratio(tmp_path)
    assert 0.0 <= ratio <= 1.0
    assert ratio == pytest.approx((st.f_blocks - st.f_bfree) / st.f_blocks, abs=0.01)


# -- the service on real segment files ---------------------------------------------------------------


class Harness:
    """A queue of `n` full segments, a service over it, and everything it reported."""

    def __init__(self, directory: Path, n: int, *, start: int = 0, mtimes=None, **service_kw) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.queue = MappedFileQueue(directory, SEG)
        segments = []
        for i in range(n):
            segment = MappedFile.create(directory, start + i * SEG, SEG)
            segment.set_positions(SEG)
            segments.append(segment)
        self.queue.files = tuple(segments)
        self.queue.flushed_where = self.queue.committed_where = segments[-1].end_offset if segments else start
        self.mtimes: dict[int, int] = {s.file_from_offset: OLD for s in segments}
        self.mtimes.update(mtimes or {})
        self.ratio: float = 0.50
        self.min_offsets: list[int] = []
        self.disk_full: list[bool] = []
        service_kw.setdefault("policy", policy())
        service_kw.setdefault("mtime_of", lambda s: self.mtimes[s.file_from_offset])
        service_kw.setdefault("on_commit_log_deleted", self.min_offsets.append)
        service_kw.setdefault("on_disk_full", self.disk_full.append)
        service_kw.setdefault("disk_usage_ratio", lambda: self.ratio)
        service_kw.setdefault("first_unconsumed", lambda: 1 << 62)  # everything consumed unless a test says
        self.service = CleanService(self.queue, service_kw.pop("policy"), **service_kw)

    def offset(self, index: int, start: int = 0) -> int:
        return start + index * SEG

    def on_disk(self) -> list[str]:
        return sorted(p.name for p in self.directory.iterdir())

    def in_queue(self) -> list[str]:
        return [s.path.name for s in self.queue.files]

    def close(self) -> None:
        self.queue.close()


def name(offset: int) -> str:
    return f"{offset:020d}"


@pytest.fixture
def harness(tmp_path):
    made: list[Harness] = []

    def make(n: int, **kw) -> Harness:
        h = Harness(tmp_path / f"commitlog{len(made)}", n, **kw)
        made.append(h)
        return h

    yield make
    for h in made:
        h.close()


def test_nothing_is_deleted_outside_delete_when_with_room_on_disk(harness):
    h = harness(4)
    r = h.service.run_round(NOW_OUTSIDE)
    assert not r.triggered and r.deleted == () and r.deleted_bytes == 0
    assert h.on_disk() == h.in_queue() == [name(i * SEG) for i in range(4)]
    assert h.min_offsets == [] and h.disk_full == []
    assert r.min_offset == 0 and not r.disk.full


def test_expired_segments_go_at_delete_when_but_never_the_last(harness, caplog):
    h = harness(4)
    with caplog.at_level(logging.INFO, logger="store.retention"):
        r = h.service.run_round(NOW_IN_HOURS)
    assert r.reasons == {CleanReason.TIME}
    assert r.deleted == (name(0), name(SEG), name(2 * SEG))
    assert r.deleted_bytes == 3 * SEG
    assert h.on_disk() == h.in_queue() == [name(3 * SEG)]
    assert r.min_offset == h.queue.min_offset == 3 * SEG
    assert h.min_offsets == [3 * SEG]
    assert f"deleting CommitLog segment {name(0)}" in caplog.text
    # The active segment stays however old it is.
    assert h.service.run_round(NOW_IN_HOURS + 60_000).deleted == ()
    assert h.in_queue() == [name(3 * SEG)]


def test_unexpired_segments_are_kept_and_deletion_is_a_prefix(harness):
    h = harness(5, mtimes={2 * SEG: FRESH})
    r = h.service.run_round(NOW_IN_HOURS)
    assert r.deleted == (name(0), name(SEG))
    # Segment 3 is expired too but lies beyond a kept one: the CommitLog stays contiguous.
    assert h.on_disk() == h.in_queue() == [name(2 * SEG), name(3 * SEG), name(4 * SEG)]


def test_all_fresh_segments_are_kept_at_delete_when(harness):
    h = harness(3, mtimes={0: FRESH, SEG: FRESH, 2 * SEG: FRESH})
    assert h.service.run_round(NOW_IN_HOURS).deleted == ()
    assert len(h.on_disk()) == 3


def test_at_most_delete_file_batch_max_per_round(harness):
    h = harness(6, policy=policy(delete_file_batch_max=2))
    assert [len(h.service.run_round(NOW_IN_HOURS + i).deleted) for i in range(4)] == [2, 2, 1, 0]
    assert h.min_offsets == [2 * SEG, 4 * SEG, 5 * SEG]
    assert h.on_disk() == [name(5 * SEG)]


def test_above_max_used_ratio_expired_segments_go_outside_delete_when(harness):
    h = harness(4, mtimes={2 * SEG: FRESH})
    h.ratio = 0.74
    assert h.service.run_round(NOW_OUTSIDE).deleted == ()
    h.ratio = 0.80
    r = h.service.run_round(NOW_OUTSIDE)
    assert r.reasons == {CleanReason.SPACE}
    assert r.deleted == (name(0), name(SEG))
    assert h.in_queue() == [name(2 * SEG), name(3 * SEG)]
    assert not r.disk.full and h.disk_full == []


def test_above_clean_forcibly_ratio_consumed_unexpired_segments_go_oldest_first(harness):
    fresh = {i * SEG: FRESH for i in range(5)}
    h = harness(5, mtimes=fresh, policy=policy(delete_file_batch_max=3), first_unconsumed=lambda: 5 * SEG)
    h.ratio = 0.87
    r = h.service.run_round(NOW_OUTSIDE)
    assert r.reasons == {CleanReason.SPACE, CleanReason.FORCED}
    assert r.deleted == (name(0), name(SEG), name(2 * SEG))
    r = h.service.run_round(NOW_OUTSIDE + 1)
    assert r.deleted == (name(3 * SEG),)
    assert h.on_disk() == [name(4 * SEG)]  # never the last
    assert not r.disk.full


def test_forced_clean_up_never_deletes_unconsumed_messages_by_default(harness, caplog):
    fresh = {i * SEG: FRESH for i in range(5)}
    unconsumed = 2 * SEG + 100  # a group still has to read from inside segment 2
    h = harness(5, mtimes=fresh, policy=policy(delete_file_batch_max=10), first_unconsumed=lambda: unconsumed)
    h.ratio = 0.87
    assert h.service.run_round(NOW_OUTSIDE).deleted == (name(0), name(SEG))
    assert h.service.run_round(NOW_OUTSIDE + 1).deleted == ()
    assert h.in_queue() == [name(2 * SEG), name(3 * SEG), name(4 * SEG)]
    held = [r for r in caplog.records if "forced clean-up keeps data" in r.getMessage()]
    assert len(held) == 1 and "not consumed yet (from offset 8292" in held[0].getMessage()
    forced = [r for r in caplog.records if r.getMessage().startswith("deleting CommitLog segment")]
    assert [r.levelname for r in forced] == ["WARNING", "WARNING"]
    assert "offsets [0, 4096)" in forced[0].getMessage() and "because of forced/space" in forced[0].getMessage()
    # The disk keeps filling: writes are refused (disk full) instead of deleting what is unread.
    h.ratio = 0.95
    r = h.service.run_round(NOW_OUTSIDE + 2)
    assert r.deleted == () and r.disk.full and h.disk_full == [True]


def test_forced_clean_up_keeps_segments_younger_than_the_minimum_age(harness):
    young = NOW_OUTSIDE - 30 * 60_000  # half an hour ago; the minimum age is an hour
    h = harness(3, mtimes={0: FRESH, SEG: young, 2 * SEG: young}, first_unconsumed=lambda: 3 * SEG)
    h.ratio = 0.87
    assert h.service.run_round(NOW_OUTSIDE).deleted == (name(0),)
    assert h.service.run_round(NOW_OUTSIDE + 1).deleted == ()
    assert h.service.run_round(NOW_OUTSIDE + 31 * 60_000).deleted == (name(SEG),)


def test_forced_clean_up_of_unconsumed_messages_when_the_operator_allows_it(harness):
    h = harness(
        3,
        mtimes={i * SEG: FRESH for i in range(3)},
        policy=policy(forced_unconsumed_allowed=True),
        first_unconsumed=lambda: 0,
    )
    h.ratio = 0.87
    assert h.service.run_round(NOW_OUTSIDE).deleted == (name(0), name(SEG))


def test_without_a_consumption_view_every_message_counts_as_unconsumed(harness):
    h = harness(3, mtimes={i * SEG: FRESH for i in range(3)}, first_unconsumed=None)
    h.ratio = 0.87
    assert h.service.run_round(NOW_OUTSIDE).deleted == ()


def test_forcible_clean_can_be_disabled(harness):
    h = harness(3, mtimes={0: FRESH, SEG: FRESH}, policy=policy(clean_file_forcibly_enable=False))
    h.ratio = 0.87
    r = h.service.run_round(NOW_OUTSIDE)
    assert r.reasons == {CleanReason.SPACE}
    assert r.deleted == ()
    assert len(h.on_disk()) == 3


def test_above_warning_level_disk_full_is_reported_and_cleared_when_usage_falls(harness):
    h = harness(2, mtimes={0: FRESH})
    h.ratio = 0.95
    r = h.service.run_round(NOW_OUTSIDE)
    assert r.disk.full and h.service.disk_full
    assert h.disk_full == [True]
    assert r.deleted == (name(0),)  # forced: the fresh segment went too
    h.ratio = 0.93
    h.service.run_round(NOW_OUTSIDE + 1)
    h.ratio = 0.87  # fell, but not to the forcible-clean ratio yet
    assert h.service.run_round(NOW_OUTSIDE + 2).disk.full
    assert h.disk_full == [True]  # told once per change
    h.ratio = 0.80
    r = h.service.run_round(NOW_OUTSIDE + 3)
    assert not r.disk.full and not h.service.disk_full
    assert h.disk_full == [True, False]
    h.ratio = 0.86  # from OK, above the forcible ratio is not full
    assert not h.service.run_round(NOW_OUTSIDE + 4).disk.full
    assert h.disk_full == [True, False]


def test_a_failing_disk_full_callback_is_retried(harness):
    calls: list[bool] = []

    def on_disk_full(full: bool) -> None:
        calls.append(full)
        if len(calls) == 1:
            raise RuntimeError("store busy")

    h = harness(2, on_disk_full=on_disk_full)
    h.ratio = 0.95
    assert h.service.run_round(NOW_OUTSIDE).disk.full
    assert not h.service.disk_full  # the store did not take it: told again next round
    h.service.run_round(NOW_OUTSIDE + 1)
    assert calls == [True, True] and h.service.disk_full
    h.service.run_round(NOW_OUTSIDE + 2)
    assert calls == [True, True]


def test_unknown_disk_usage_reclaims_expired_segments(harness):
    def broken() -> float:
        raise OSError(errno.EIO, "statvfs failed")

    h = harness(3, mtimes={SEG: FRESH}, disk_usage_ratio=broken)
    r = h.service.run_round(NOW_OUTSIDE)
    assert r.disk.ratio is None and not r.disk.full
    assert r.reasons == {CleanReason.SPACE}
    assert r.deleted == (name(0),)


def test_manual_request_deletes_expired_segments_for_twenty_rounds(harness):
    h = harness(MANUAL_DELETE_ROUNDS + 5, policy=policy(delete_file_batch_max=1))
    assert h.service.run_round(NOW_OUTSIDE).deleted == ()
    h.service.request_delete_now()
    rounds = [h.service.run_round(NOW_OUTSIDE + i) for i in range(MANUAL_DELETE_ROUNDS + 2)]
    assert all(r.reasons == {CleanReason.MANUAL} for r in rounds[:MANUAL_DELETE_ROUNDS])
    assert [len(r.deleted) for r in rounds] == [1] * MANUAL_DELETE_ROUNDS + [0, 0]
    assert not rounds[-1].triggered
    assert h.queue.min_offset == MANUAL_DELETE_ROUNDS * SEG


def test_manual_request_keeps_unexpired_segments(harness):
    h = harness(3, mtimes={0: FRESH})
    h.service.request_delete_now()
    assert h.service.run_round(NOW_OUTSIDE).deleted == ()
    assert len(h.on_disk()) == 3


def test_min_offset_is_reported_once_per_change(harness):
    h = harness(5, mtimes={2 * SEG: FRESH})
    h.service.run_round(NOW_OUTSIDE)
    assert h.min_offsets == []
    h.service.run_round(NOW_IN_HOURS)
    h.service.run_round(NOW_IN_HOURS + 1)
    assert h.min_offsets == [2 * SEG]
    h.mtimes[2 * SEG] = OLD
    h.service.run_round(NOW_IN_HOURS + 2)
    assert h.min_offsets == [2 * SEG, 4 * SEG]


def test_a_log_that_already_starts_late_is_reported_on_the_first_round(harness):
    # ConsumeQueues left behind by a crash between CommitLog and ConsumeQueue cleaning get cleaned.
    h = harness(2, start=8 * SEG, mtimes={8 * SEG: FRESH})
    r = h.service.run_round(NOW_OUTSIDE)
    assert r.deleted == () and h.min_offsets == [8 * SEG]
    h.service.run_round(NOW_OUTSIDE + 1)
    assert h.min_offsets == [8 * SEG]


def test_a_failing_min_offset_callback_is_retried(harness):
    seen: list[int] = []

    def on_deleted(offset: int) -> None:
        seen.append(offset)
        if len(seen) == 1:
            raise RuntimeError("consume queue busy")

    h = harness(3, on_commit_log_deleted=on_deleted)
    h.service.run_round(NOW_IN_HOURS)
    h.service.run_round(NOW_OUTSIDE)
    h.service.run_round(NOW_OUTSIDE + 1)
    assert seen == [2 * SEG, 2 * SEG]


def test_segments_with_unflushed_bytes_are_never_deleted(harness):
    h = harness(5, mtimes={i * SEG: FRESH for i in range(5)})
    h.queue.flushed_where = 2 * SEG + 100  # segment 2 is not durable yet
    h.ratio = 0.95
    assert h.service.run_round(NOW_OUTSIDE).deleted == (name(0), name(SEG))
    assert h.in_queue()[0] == name(2 * SEG)


def test_deletable_below_can_hold_segments_back(harness):
    h = harness(4, deletable_below=lambda: SEG)
    assert h.service.run_round(NOW_IN_HOURS).deleted == (name(0),)


def test_unlinks_are_spaced_by_the_delete_interval(harness):
    pauses: list[float] = []
    h = harness(4, policy=policy(delete_interval_ms=100), pause=pauses.append)
    assert len(h.service.run_round(NOW_IN_HOURS).deleted) == 3
    assert pauses == [0.1, 0.1]


def test_an_append_during_the_round_is_not_lost(harness):
    class AppendingLock:
        """Stands for the CommitLog lock; an append got in just before the cleaner did."""

        def __init__(self) -> None:
            self.lock = threading.Lock()
            self.appended: MappedFile | None = None

        def __enter__(self):
            self.lock.acquire()
            if self.appended is None:
                last = h.queue.files[-1]
                self.appended = MappedFile.create(h.directory, last.end_offset, SEG)
                h.queue.files = h.queue.files + (self.appended,)
            return self

        def __exit__(self, *exc_info):
            self.lock.release()

    lock = AppendingLock()
    h = harness(3, files_lock=lock)
    r = h.service.run_round(NOW_IN_HOURS)
    assert r.deleted == (name(0), name(SEG))
    assert h.in_queue() == [name(2 * SEG), name(3 * SEG)]
    assert h.queue.files[-1] is lock.appended


def test_a_queue_changed_during_the_round_is_left_alone(harness):
    class TruncatingLock:
        def __enter__(self):
            h.queue.files = h.queue.files[1:]  # e.g. a reload or truncation replaced the list
            return self

        def __exit__(self, *exc_info):
            return None

    h = harness(4)
    h.service._files_lock = TruncatingLock()
    assert h.service.run_round(NOW_IN_HOURS).deleted == ()
    assert len(h.on_disk()) == 4


def test_an_unlink_failure_keeps_the_files_on_disk_contiguous_and_is_retried(harness, monkeypatch):
    real_destroy = MappedFile.destroy
    failures = {"left": 1}

    def flaky_destroy(self: MappedFile) -> None:
        if failures["left"]:
            failures["left"] -= 1
            raise PermissionError(errno.EACCES, "denied", str(self.path))
        real_destroy(self)

    monkeypatch.setattr(MappedFile, "destroy", flaky_destroy)
    h = harness(4, mtimes={2 * SEG: FRESH})
    r = h.service.run_round(NOW_IN_HOURS)
    assert r.deleted == (name(0), name(SEG))  # out of the log at once
    assert r.unlink_pending == (name(0), name(SEG))  # but unlinked in order, so nothing yet
    assert h.in_queue() == [name(2 * SEG), name(3 * SEG)]
    assert h.on_disk() == [name(i * SEG) for i in range(4)]
    r = h.service.run_round(NOW_IN_HOURS + 1)
    assert r.unlink_pending == () and r.deleted == ()
    assert h.on_disk() == [name(2 * SEG), name(3 * SEG)]
    h.mtimes[2 * SEG] = OLD
    assert h.service.run_round(NOW_IN_HOURS + 2).deleted == (name(2 * SEG),)


def test_default_mtime_is_the_file_modification_time(harness):
    h = harness(4, mtime_of=file_mtime_ms)
    for segment in h.queue.files:
        stamp = FRESH if segment.file_from_offset == 2 * SEG else OLD
        os.utime(segment.path, ns=(stamp * 1_000_000, stamp * 1_000_000))
    assert file_mtime_ms(h.queue.files[0]) == OLD
    assert h.service.run_round(NOW_IN_HOURS).deleted == (name(0), name(SEG))


# -- the thread -----------------------------------------------------------------------------------------


def test_the_thread_runs_a_round_when_asked_to_delete_now(harness):
    done = threading.Event()
    offsets: list[int] = []

    def on_deleted(offset: int) -> None:
        offsets.append(offset)
        done.set()

    h = harness(3, policy=policy(interval_ms=3_600_000), clock_ms=lambda: NOW_OUTSIDE, on_commit_log_deleted=on_deleted)
    h.service.start()
    try:
        h.service.request_delete_now()
        assert done.wait(30)
    finally:
        h.service.stop()
    assert offsets == [2 * SEG]
    assert h.on_disk() == [name(2 * SEG)]


# -- a real store -----------------------------------------------------------------------------------------


def test_store_min_offset_moves_and_reads_below_it_fail_cleanly(tmp_path):
    cfg = StoreConfig(
        store_path_root_dir=str(tmp_path / "store"), mapped_file_size_commit_log=SEG, flush_disk_type="SYNC_FLUSH"
    )
    now = NOW_IN_HOURS
    reported: list[int] = []
    with MessageStore(cfg, clock_ms=lambda: now) as store:
        offsets = []
        for i in range(20):
            result = store.put_message(Message("CleanTopic", 0, bytes([i]) * 900))
            assert result.status.name == "PUT_OK"
            offsets.append(result.wrote_offset)
        segments_before = len(store.queue.files)
        assert segments_before >= 5
        service = CleanService(
            store.queue,
            CleanPolicy.from_config(cfg, tz=UTC),
            clock_ms=lambda: now,
            disk_usage_ratio=lambda: 0.5,
            mtime_of=lambda s: OLD,
            on_commit_log_deleted=reported.append,
            files_lock=store.commit_log.lock,
        )
        r = service.run_round(now)
        assert len(r.deleted) == segments_before - 1
        first = store.queue.files[0].file_from_offset
        assert store.min_offset == first == r.min_offset == (segments_before - 1) * SEG
        assert reported == [first]
        for offset in offsets:
            if offset < first:
                with pytest.raises(CorruptMessage):
                    store.read_message(offset)
            else:
                assert store.read_message(offset).body[:1] == bytes([offsets.index(offset)])
        assert [m.physical_offset for m in store.iter_messages()] == [o for o in offsets if o >= first]
        assert store.put_message(Message("CleanTopic", 0, b"after")).status.name == "PUT_OK"
    with MessageStore(cfg, clock_ms=lambda: now) as reopened:
        assert reopened.min_offset == first
        survivors = list(reopened.iter_messages())
        assert survivors[0].physical_offset == first
        assert survivors[-1].body == b"after"
