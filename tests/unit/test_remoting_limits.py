"""The remoting port's limits as plain objects (issue 30, item 2): the consumer table's counts and
expiry (rocketstore/broker/client_table.py), and the connection budget and clocks
(rocketstore/broker/remoting_limits.py). Time is an argument throughout."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore.broker.client_table import ClientLimits, ClientTable
from rocketstore.broker.remoting_limits import ConnectionBudget, ConnectionClock, RemotingLimits


def test_heartbeats_add_clients_within_each_limit_and_name_the_key_that_refused():
    table = ClientTable(ClientLimits(expiry_ms=1000, max_clients_per_group=2, max_groups=2, max_clients=4))
    assert table.heartbeat("c1", ["a", "b"], 0) is None
    assert table.heartbeat("c2", ["a"], 0) is None
    refused = table.heartbeat("c3", ["a"], 0)
    assert refused is not None and "remotingMaxClientsPerGroup" in refused
    refused = table.heartbeat("c3", ["new"], 0)
    assert refused is not None and "remotingMaxConsumerGroups" in refused
    assert table.heartbeat("c3", ["b"], 0) is None
    refused = table.heartbeat("c4", ["b"], 0)
    assert refused is not None and "remotingMaxClients" in refused
    # What is registered keeps being refreshed, whatever the limits; the rest of a heartbeat counts.
    assert table.heartbeat("c1", ["a", "b"], 500) is None
    assert table.heartbeat("c2", ["a", "full"], 500) is not None
    assert table.clients("a", 500) == ["c1", "c2"] and table.entries == 4


def test_clients_expire_on_the_tables_own_schedule_and_are_never_listed_once_expired():
    table = ClientTable(ClientLimits(expiry_ms=1000, max_clients=10))
    table.heartbeat("old", ["g"], 0)
    table.heartbeat("fresh", ["g"], 900)
    assert table.housekeep(0) == 0  # the first round
    assert table.clients("g", 1500) == ["fresh"]  # listing never shows the expired one
    assert table.housekeep(400) == 0  # not due yet (every half expiry, at most 10 s)
    assert table.housekeep(1500) == 1 and table.entries == 1
    assert table.housekeep(2500) == 1 and table.entries == 0
    assert table.heartbeat("next", ["g2"], 2500) is None  # expired entries made room


def test_unregister_frees_the_entry_and_an_empty_group():
    table = ClientTable(ClientLimits(max_groups=1))
    table.heartbeat("c", ["g"], 0)
    table.unregister("g", "c")
    table.unregister("g", "c")
    table.unregister("absent", "c")
    assert table.entries == 0 and table.heartbeat("c", ["other"], 0) is None


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 6), st.integers(0, 5000)), max_size=200))
def test_no_heartbeat_sequence_passes_the_limits(beats):
    limits = ClientLimits(expiry_ms=1000, max_clients_per_group=4, max_groups=3, max_clients=7)
    table = ClientTable(limits)
    now = 0
    for client, group, step in beats:
        now += step
        table.heartbeat(f"c{client}", [f"g{group}", f"g{(group + 1) % 7}"], now)
        table.housekeep(now)
        groups = table._groups
        assert len(groups) <= 3 and all(len(c) <= 4 for c in groups.values())
        assert table.entries == sum(len(c) for c in groups.values()) <= 7


LIMITS = RemotingLimits(max_connections=2, max_buffered_bytes=100, idle_timeout_ms=1000, frame_timeout_ms=300)


def test_the_budget_refuses_connections_past_the_limit_and_bytes_past_the_cap():
    budget = ConnectionBudget(LIMITS)
    assert budget.admit() is None and budget.admit() is None
    refused = budget.admit()
    assert refused is not None and "remotingMaxConnections" in refused and budget.connections == 2
    assert budget.rebuffer(0, 60) is None
    over = budget.rebuffer(0, 50)
    assert over is not None and "remotingMaxBufferedBytes" in over
    budget.release(60)  # the server closes the oldest frame's connection: its bytes are freed
    assert budget.buffered == 50 and budget.admit() is None
    # Shrinking never reports, even above the cap (it is draining).
    assert budget.rebuffer(50, 10) is None and budget.buffered == 10


def test_requests_in_progress_are_bounded_in_count_and_in_the_bytes_their_bodies_hold():
    budget = ConnectionBudget(RemotingLimits(max_buffered_bytes=100, max_in_flight_requests=3))
    assert budget.begin_request(0) is None and budget.begin_request(60) is None
    busy = budget.begin_request(50)
    assert busy is not None and "remotingMaxBufferedBytes" in busy and budget.requests == 2
    # Incomplete frames are counted apart: slow senders at the cap cannot make requests busy.
    assert budget.rebuffer(0, 100) is None
    assert budget.begin_request(40) is None
    busy = budget.begin_request(0)
    assert busy is not None and "remotingMaxInFlightRequests" in busy
    for body in (0, 60, 40):
        budget.end_request(body)
    assert (budget.requests, budget.request_bytes) == (0, 0) and budget.begin_request(100) is None


def test_a_frame_that_does_not_complete_in_time_and_an_idle_connection_are_overdue():
    clock = ConnectionClock(LIMITS, 0)
    clock.received(100, frames=0, buffered=10)  # a frame begins
    clock.received(300, frames=0, buffered=20)  # the same frame, still incomplete
    assert clock.overdue(400, busy=False) is None
    reason = clock.overdue(401, busy=True)
    assert reason is not None and "remotingFrameTimeout" in reason
    clock.received(402, frames=1, buffered=5)  # that frame completed; the next one begins now
    assert clock.overdue(702, busy=False) is None
    clock.received(710, frames=1, buffered=0)
    assert clock.overdue(1710, busy=False) is None
    reason = clock.overdue(1711, busy=False)
    assert reason is not None and "serverChannelMaxIdleTimeSeconds" in reason
    assert clock.overdue(5000, busy=True) is None  # a long poll in progress is not idleness
    clock.received(5000, frames=0, buffered=7)
    # While the server does not read the connection, its frame cannot complete: not its fault.
    assert clock.overdue(5400, busy=True, receiving=False) is None
    assert clock.overdue(5400, busy=True) is not None
    clock.received(5400, frames=1, buffered=0)
    clock.sent(5000)  # answers are traffic too
    assert clock.overdue(5500, busy=False) is None


def test_connections_are_swept_often_enough_for_the_shorter_timeout():
    assert LIMITS.sweep_interval_ms == 75
    assert RemotingLimits().sweep_interval_ms == 1000
    assert RemotingLimits(frame_timeout_ms=10).sweep_interval_ms == 50
