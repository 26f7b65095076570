"""ha/replica_tracker.py: the master's replica gate, with a fake clock and a fake max offset."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from ha.replica_tracker import ReplicaTracker, SlaveSnapshot
from store.log.status_future import StatusFuture
from store.status import BrokerRole
from store.status import PutMessageStatus as S

TIMEOUT = 1000
FALLBEHIND = 10_000


class Master:
    def __init__(self, max_offset: int = 0) -> None:
        self.max_offset = max_offset


def tracker(
    in_sync: int = 2, role: BrokerRole = BrokerRole.SYNC_MASTER, master: Master | None = None
) -> tuple[ReplicaTracker, Master]:
    master = master or Master()
    return ReplicaTracker(role, in_sync, TIMEOUT, FALLBEHIND, lambda: master.max_offset), master


def register(t: ReplicaTracker, sid, broker_id: int, start: int = 0, now: int = 0):
    return t.register(
        sid,
        ha_peer=f"ipv4:127.0.0.1:{5000 + broker_id}",
        broker_id=broker_id,
        client_endpoint=f"127.0.0.1:{6000 + broker_id}",
        start_offset=start,
        now_ms=now,
    )


def test_async_master_never_waits():
    t, master = tracker(in_sync=2, role=BrokerRole.ASYNC_MASTER)
    master.max_offset = 500
    assert t.request(100, 0) is S.PUT_OK
    assert t.confirmed_offset == 500


def test_a_sync_master_with_in_sync_replicas_1_still_needs_one_slave():
    # RocketMQ's default inSyncReplicas is 1; a SYNC_MASTER's put still waits for a slave.
    t, master = tracker(in_sync=1)
    master.max_offset = 500
    assert t.needed == 1
    assert t.request(100, 0) is S.SLAVE_NOT_AVAILABLE
    register(t, "s1", 1)
    pending = t.request(100, 0)
    assert isinstance(pending, StatusFuture)
    t.ack("s1", 100, 1)
    assert pending.result(0) is S.PUT_OK


def test_no_slave_is_not_available():
    t, master = tracker()
    master.max_offset = 100
    assert t.request(100, 0) is S.SLAVE_NOT_AVAILABLE


def test_ack_completes_waiting_puts_in_offset_order():
    t, master = tracker()
    register(t, "s1", 1)
    master.max_offset = 300
    f100, f200, f300 = (t.request(n, 10) for n in (100, 200, 300))
    assert all(isinstance(f, StatusFuture) for f in (f100, f200, f300))
    assert t.waiting == 3
    assert t.ack("s1", 200, 20)
    assert f100.result(0) is S.PUT_OK and f200.result(0) is S.PUT_OK
    assert not f300.done()
    assert t.confirmed_offset == 200
    t.ack("s1", 300, 30)
    assert f300.result(0) is S.PUT_OK
    assert t.waiting == 0


def test_already_acked_offset_is_ok_at_once():
    t, master = tracker()
    register(t, "s1", 1, start=0)
    master.max_offset = 400
    t.ack("s1", 400, 5)
    assert t.request(250, 6) is S.PUT_OK


def test_acks_never_go_back():
    t, master = tracker()
    register(t, "s1", 1)
    master.max_offset = 400
    t.ack("s1", 400, 5)
    t.ack("s1", 100, 6)
    assert t.snapshots(7)[0].ack_offset == 400
    assert t.request(400, 8) is S.PUT_OK


def test_two_slaves_needed_waits_for_the_second_highest_ack():
    t, master = tracker(in_sync=3)
    register(t, "a", 1)
    master.max_offset = 100
    assert t.request(100, 0) is S.SLAVE_NOT_AVAILABLE  # one fit slave, two needed
    register(t, "b", 2)
    future = t.request(100, 0)
    t.ack("a", 100, 1)
    assert not future.done()
    assert t.confirmed_offset == 0
    t.ack("b", 60, 2)
    assert not future.done()
    assert t.confirmed_offset == 60
    t.ack("b", 100, 3)
    assert future.result(0) is S.PUT_OK
    assert t.confirmed_offset == 100


def test_in_sync_two_with_two_slaves_needs_either():
    t, master = tracker(in_sync=2)
    register(t, "a", 1)
    register(t, "b", 2)
    master.max_offset = 100
    future = t.request(100, 0)
    t.ack("b", 100, 1)
    assert future.result(0) is S.PUT_OK


def test_a_slave_too_far_behind_is_not_fit():
    t, master = tracker()
    register(t, "s1", 1, start=0)
    master.max_offset = FALLBEHIND
    assert isinstance(t.request(FALLBEHIND, 0), StatusFuture)
    master.max_offset = FALLBEHIND + 1
    assert t.request(FALLBEHIND + 1, 0) is S.SLAVE_NOT_AVAILABLE
    assert t.snapshots(0)[0].fit is False
    t.ack("s1", 5000, 1)
    assert t.snapshots(1)[0].fit is True
    assert isinstance(t.request(FALLBEHIND + 1, 1), StatusFuture)


def test_removal_completes_waiters_not_available_when_too_few_fit_remain():
    t, master = tracker(in_sync=2)
    register(t, "a", 1)
    register(t, "b", 2)
    master.max_offset = 100
    future = t.request(100, 0)
    assert t.remove("a", 1)
    assert not future.done()  # b is still there
    assert t.remove("b", 2)
    assert future.result(0) is S.SLAVE_NOT_AVAILABLE
    assert not t.remove("b", 3)
    assert not t.ack("b", 100, 3)


def test_expiry_times_out_waiters_at_their_deadline():
    t, master = tracker()
    register(t, "s1", 1)
    master.max_offset = 200
    early = t.request(100, 0)
    late = t.request(200, 500)
    assert t.expire(TIMEOUT - 1) == 0
    assert t.expire(TIMEOUT) == 1
    assert early.result(0) is S.FLUSH_SLAVE_TIMEOUT
    assert not late.done()
    t.ack("s1", 10, 500 + TIMEOUT)  # acks expire too
    assert late.result(0) is S.FLUSH_SLAVE_TIMEOUT
    assert t.waiting == 0


def test_reconnecting_slave_replaces_its_old_session():
    t, master = tracker(in_sync=3)
    register(t, "a1", 1)
    register(t, "b", 2)
    assert register(t, "a2", 1, start=50) == ["a1"]
    assert t.session_count == 2
    master.max_offset = 100
    future = t.request(100, 0)
    assert not t.ack("a1", 100, 1)  # the old stream no longer counts
    t.ack("b", 100, 1)
    assert not future.done()
    t.ack("a2", 100, 2)
    assert future.result(0) is S.PUT_OK
    with pytest.raises(ValueError):
        register(t, "a2", 1)


def test_register_counts_the_start_offset_as_held():
    t, master = tracker()
    master.max_offset = 1000
    register(t, "s1", 1, start=1000, now=5)
    assert t.request(1000, 6) is S.PUT_OK
    assert t.confirmed_offset == 1000


def test_confirmed_offset_never_goes_back():
    t, master = tracker()
    register(t, "s1", 1)
    master.max_offset = 100
    t.ack("s1", 100, 1)
    t.remove("s1", 2)
    assert t.confirmed_offset == 100


def test_request_signals_new_data():
    t, master = tracker(role=BrokerRole.ASYNC_MASTER)
    calls = []
    listener = lambda: calls.append(1)  # noqa: E731
    t.add_new_data_listener(listener)
    t.request(10, 0)
    t2, _ = tracker()
    t2.add_new_data_listener(listener)
    t2.request(10, 0)  # SLAVE_NOT_AVAILABLE, still a signal: the bytes are stored
    assert len(calls) == 2
    t.remove_new_data_listener(listener)
    t.request(20, 0)
    assert len(calls) == 2


def test_a_bound_method_listener_is_removed_by_the_same_method():
    class Servicer:
        def __init__(self) -> None:
            self.wakes = 0

        def wake(self) -> None:
            self.wakes += 1

    t, _ = tracker(role=BrokerRole.ASYNC_MASTER)
    servicer = Servicer()
    t.add_new_data_listener(servicer.wake)
    t.request(10, 0)
    t.remove_new_data_listener(servicer.wake)
    t.request(20, 0)
    assert servicer.wakes == 1


def test_close_releases_everything():
    t, master = tracker()
    register(t, "s1", 1)
    master.max_offset = 100
    future = t.request(100, 0)
    t.close()
    assert future.result(0) is S.SLAVE_NOT_AVAILABLE
    assert t.session_count == 0


def test_snapshots_describe_each_slave():
    t, master = tracker()
    master.max_offset = 1000
    register(t, "b", 2, start=1000, now=100)
    register(t, "a", 1, start=400, now=200)
    snaps = t.snapshots(1200)
    assert snaps == [
        SlaveSnapshot(
            ha_peer="ipv4:127.0.0.1:5001",
            broker_id=1,
            client_endpoint="127.0.0.1:6001",
            ack_offset=400,
            lag_bytes=600,
            lag_seconds=1.0,
            fit=True,
            connected_at_ms=200,
            silent_ms=1000,
        ),
        SlaveSnapshot(
            ha_peer="ipv4:127.0.0.1:5002",
            broker_id=2,
            client_endpoint="127.0.0.1:6002",
            ack_offset=1000,
            lag_bytes=0,
            lag_seconds=0.0,
            fit=True,
            connected_at_ms=100,
            silent_ms=1100,
        ),
    ]


def test_silent_ms_counts_from_the_last_report_even_when_the_slave_holds_everything():
    t, master = tracker()
    master.max_offset = 500
    register(t, "s1", 1, start=500, now=1_000)
    [snap] = t.snapshots(4_000)
    assert (snap.lag_bytes, snap.lag_seconds, snap.silent_ms) == (0, 0.0, 3_000)
    assert t.ack("s1", 500, 3_500)  # a heartbeat report: nothing new, but the slave is alive
    [snap] = t.snapshots(4_000)
    assert snap.silent_ms == 500
    assert t.ack("s1", 500, 3_000)  # a report stamped earlier (a clock stepped back) never rewinds it
    assert t.snapshots(4_000)[0].silent_ms == 500
    assert t.snapshots(3_000)[0].silent_ms == 0


def test_lag_seconds_counts_from_when_the_slave_last_held_everything():
    t, master = tracker()
    master.max_offset = 100
    register(t, "s1", 1, start=100, now=1000)
    assert t.snapshots(1500)[0].lag_seconds == 0.0
    master.max_offset = 200
    t.request(200, 2000)  # the master had 200 bytes at 2000 ms
    master.max_offset = 300
    t.request(300, 3000)
    assert t.snapshots(3500)[0].lag_seconds == 2.5  # last held everything at 1000 ms
    t.ack("s1", 200, 4000)  # holds what the master had at 2000 ms
    snap = t.snapshots(4000)[0]
    assert snap.lag_bytes == 100 and snap.lag_seconds == 2.0
    t.ack("s1", 300, 4500)
    assert t.snapshots(5000)[0].lag_seconds == 0.0


# -- a model check: PUT_OK only with enough replicas, and never a waiter left behind --------------


class TrackerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.master = Master()
        self.in_sync = 3
        self.t = ReplicaTracker(
            BrokerRole.SYNC_MASTER, self.in_sync, TIMEOUT, FALLBEHIND, lambda: self.master.max_offset
        )
        self.now = 0
        self.acks: dict[int, int] = {}  # broker id -> ack, the model of connected slaves
        self.sessions: dict[int, int] = {}  # broker id -> its live session number
        self.ids = itertools.count()
        self.pending: list[tuple[int, StatusFuture]] = []
        self.held = 0  # the highest offset the model ever saw on enough replicas

    def _watermark(self) -> int:
        acks = sorted(self.acks.values(), reverse=True)
        return acks[self.in_sync - 2] if len(acks) >= self.in_sync - 1 else 0

    def _check_completed(self) -> None:
        """Called after every operation: a put released PUT_OK had enough replicas then."""
        self.held = max(self.held, self._watermark())
        for next_offset, future in self.pending:
            if future.done() and future.result() is S.PUT_OK:
                assert next_offset <= self.held
        self.pending = [(n, f) for n, f in self.pending if not f.done()]

    def _fit(self) -> int:
        return sum(1 for ack in self.acks.values() if self.master.max_offset - ack <= FALLBEHIND)

    @rule(broker=st.integers(1, 3), start_back=st.integers(0, 500))
    def connect(self, broker, start_back):
        start = max(0, self.master.max_offset - start_back)
        session = next(self.ids)
        register(self.t, session, broker, start=start, now=self.now)
        self.sessions[broker] = session
        self.acks[broker] = start
        self._check_completed()

    @precondition(lambda self: self.sessions)
    @rule(data=st.data())
    def disconnect(self, data):
        broker = data.draw(st.sampled_from(sorted(self.sessions)))
        self.t.remove(self.sessions.pop(broker), self.now)
        del self.acks[broker]
        self._check_completed()

    @precondition(lambda self: self.sessions)
    @rule(data=st.data())
    def ack(self, data):
        broker = data.draw(st.sampled_from(sorted(self.sessions)))
        offset = data.draw(st.integers(0, self.master.max_offset))
        self.t.ack(self.sessions[broker], offset, self.now)
        self.acks[broker] = max(self.acks[broker], offset)
        self._check_completed()

    @rule(size=st.integers(1, 300))
    def put(self, size):
        self.master.max_offset += size
        outcome = self.t.request(self.master.max_offset, self.now)
        if outcome is S.PUT_OK:
            assert self._watermark() >= self.master.max_offset
        elif isinstance(outcome, StatusFuture):
            assert self._fit() >= self.in_sync - 1
            self.pending.append((self.master.max_offset, outcome))
        else:
            assert outcome is S.SLAVE_NOT_AVAILABLE
            assert self._fit() < self.in_sync - 1

    @rule(ms=st.integers(1, 600))
    def tick(self, ms):
        self.now += ms
        self.t.expire(self.now)
        self._check_completed()

    @invariant()
    def no_waiter_is_left_behind(self):
        watermark = self._watermark()
        for next_offset, future in self.pending:
            assert not (next_offset <= watermark and not future.done()), "a satisfied put still waits"

    @invariant()
    def confirmed_is_what_enough_replicas_hold(self):
        assert self.t.confirmed_offset == min(self.held, self.master.max_offset)


TrackerMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=40)
test_tracker_model = TrackerMachine.TestCase
