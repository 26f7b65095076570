"""What the console learns and keeps from the brokers' answers, without sockets: the fleet finds a
group's brokers from one endpoint and keeps a broker that stops answering; the history turns
cumulative counters into rates and latency percentiles (leaving out a restart), keeps each slave's
lag, and reads a failover, a switchover and a broker's return from successive snapshots."""

from __future__ import annotations

import pytest

from client import RocketStoreError
from console.fleet import BrokerState, Fleet, Snapshot
from console.history import History, percentile_ms
from store.stats import LATENCY_LABELS

T0 = 1_800_000_000_000


def status(group: str, broker_id: int, role: str, *, epoch: int = 1, puts: int = 0, gets: int = 0, **extra):
    buckets = {label: 0 for label in LATENCY_LABELS}
    buckets.update(extra.pop("latency", {}))
    answer = {
        "broker_name": group,
        "broker_id": broker_id,
        "role": role,
        "epoch": epoch,
        "client_endpoint": f"{group}-{broker_id}:10911",
        "master_client_endpoint": "",
        "slaves": [],
        "stats": {"put_messages": puts, "get_messages": gets, "put_latency": {"buckets": buckets}},
    }
    answer.update(extra)
    return answer


def broker(group: str, broker_id: int, answer: dict | None, *, last: dict | None = None) -> BrokerState:
    return BrokerState(
        f"{group}-{broker_id}:10911", group, broker_id, answer, "" if answer else "refused", answer or last, 0
    )


def test_percentiles_are_bucket_upper_edges():
    counts = [0] * len(LATENCY_LABELS)
    assert percentile_ms(counts, 0.5) is None
    counts[0], counts[3] = 98, 2  # 98 under 0.1 ms, 2 in 1-5 ms
    assert percentile_ms(counts, 0.5) == 0.1 and percentile_ms(counts, 0.99) == 5.0
    counts[-1] = 1000  # the open-ended last bucket answers the edge below it
    assert percentile_ms(counts, 0.99) == 10_000.0


def test_rates_and_latency_come_from_counter_differences_and_a_restart_is_left_out():
    history = History(window_ms=60_000)
    key = ("g", 0)
    for at, puts, gets, fast in ((0, 100, 50, 100), (2000, 300, 150, 300), (4000, 10, 0, 10), (6000, 110, 20, 110)):
        history.record(
            Snapshot(
                T0 + at,
                (broker("g", 0, status("g", 0, "SYNC_MASTER", puts=puts, gets=gets, latency={"100-500us": fast})),),
            )
        )
    points = history.points(key)
    assert [(p.at_ms - T0, p.messages_in_per_s, p.messages_out_per_s) for p in points] == [
        (2000, 100.0, 50.0),
        (6000, 50.0, 10.0),  # 2000 -> 4000 went backwards: restarted, no point
    ]
    assert points[0].put_p50_ms == 0.5 and points[0].put_p99_ms == 0.5
    # Samples older than the window are dropped.
    history.record(Snapshot(T0 + 70_000, (broker("g", 0, status("g", 0, "SYNC_MASTER", puts=200)),)))
    assert history.points(key) == []
    history.record(Snapshot(T0 + 72_000, (broker("g", 0, status("g", 0, "SYNC_MASTER", puts=400)),)))
    assert [(p.at_ms - T0, p.messages_in_per_s) for p in history.points(key)] == [(72_000, 100.0)]


def test_a_failover_shows_as_events_and_the_slave_lag_is_kept():
    history = History(window_ms=600_000)
    slave_link = {"broker_id": 1, "lag_bytes": 4096, "lag_seconds": 1.5, "fit": True, "client_endpoint": "g-1:10911"}
    m = status("g", 0, "SYNC_MASTER", epoch=3, slaves=[slave_link], in_sync_replica_ids=[0, 1])
    s = status("g", 1, "SLAVE", epoch=3)
    first = history.record(Snapshot(T0, (broker("g", 0, m), broker("g", 1, s))))
    assert [(e.kind, e.text) for e in first] == [("start", "console started watching g: master broker 0, epoch 3")]
    assert history.slave_lags("g") == {1: [(T0, 4096, 1.5)]}
    now = Snapshot(T0, (broker("g", 0, m), broker("g", 1, s)))
    assert now.slave_link("g", 1) == slave_link and now.master("g").broker_id == 0

    # The master is killed: it stops answering, the group has no master, then broker 1 takes over.
    down = history.record(Snapshot(T0 + 5000, (broker("g", 0, None, last=m), broker("g", 1, s))))
    assert [e.kind for e in down] == ["unreachable", "no-master"]
    assert "broker 0 (SYNC_MASTER) stopped answering: refused" in down[0].text
    promoted = status("g", 1, "SYNC_MASTER", epoch=4)
    over = history.record(Snapshot(T0 + 10_000, (broker("g", 0, None, last=m), broker("g", 1, promoted))))
    assert [(e.kind, e.text) for e in over] == [("failover", "failover: master broker 0 -> broker 1 (epoch 3 -> 4)")]

    # It comes back as a slave; handing the role back while both answer is a switchover.
    back = history.record(
        Snapshot(T0 + 15_000, (broker("g", 0, status("g", 0, "SLAVE", epoch=4)), broker("g", 1, promoted)))
    )
    assert [(e.kind, e.text) for e in back] == [("back", "broker 0 answers again as SLAVE")]
    handed = history.record(
        Snapshot(
            T0 + 20_000,
            (broker("g", 0, status("g", 0, "SYNC_MASTER", epoch=5)), broker("g", 1, status("g", 1, "SLAVE", epoch=5))),
        )
    )
    assert [e.kind for e in handed] == ["switchover"]
    assert [e.kind for e in history.recent_events(T0 + 1, ["g"])] == [
        "unreachable",
        "no-master",
        "failover",
        "back",
        "switchover",
    ]
    assert history.recent_events(0, ["other"]) == []


def test_the_master_is_the_one_of_the_highest_epoch():
    deposed = broker("g", 0, status("g", 0, "SYNC_MASTER", epoch=3))
    current = broker("g", 1, status("g", 1, "SYNC_MASTER", epoch=4))
    snapshot = Snapshot(T0, (deposed, current, broker("g", 2, None)))
    assert snapshot.master("g") is current
    assert [b.broker_id for b in snapshot.groups()["g"]] == [0, 1, 2]
    assert [b.broker_id for b in snapshot.reachable("g")] == [0, 1]


class FakeClient:
    """An admin client answering from `FakeClient.answers` by endpoint (an exception: unreachable)."""

    answers: dict[str, object] = {}
    registry: dict = {"registry": False}

    def __init__(self, endpoint, secret, **kwargs) -> None:
        self.endpoint = endpoint

    def status(self):
        answer = FakeClient.answers[self.endpoint]
        if isinstance(answer, Exception):
            raise answer
        return answer

    def describe_cluster(self):
        return FakeClient.registry

    def close(self) -> None:
        pass


def test_the_fleet_finds_a_group_from_one_endpoint_and_keeps_a_broker_that_stops_answering():
    master = status("g", 0, "SYNC_MASTER", slaves=[{"broker_id": 1, "client_endpoint": "g-1:10911"}])
    slave = status("g", 1, "SLAVE", master_client_endpoint="localhost:10911")
    FakeClient.answers = {"localhost:10911": master, "g-1:10911": slave}
    clock = [T0]
    fleet = Fleet(["localhost:10911"], b"x" * 32, clock_ms=lambda: clock[0], client_factory=FakeClient)
    try:
        first = fleet.poll()
        assert [(b.group, b.broker_id, b.role) for b in first.brokers] == [("g", 0, "SYNC_MASTER")]
        second = fleet.poll()  # the master named its slave
        assert sorted((b.broker_id, b.role) for b in second.brokers) == [(0, "SYNC_MASTER"), (1, "SLAVE")]
        assert fleet.endpoints() == [
            "localhost:10911",
            "g-1:10911",
        ]  # the slave's name for the master is the same broker

        FakeClient.answers["localhost:10911"] = RocketStoreError("cannot reach the broker")
        clock[0] += 5000
        third = fleet.poll()
        down = next(b for b in third.brokers if b.broker_id == 0)
        assert (down.reachable, down.role, down.last_role, down.seen_ms) == (False, "UNREACHABLE", "SYNC_MASTER", T0)
        assert "cannot reach" in down.error and third.master("g") is None
    finally:
        fleet.close()
    with pytest.raises(RocketStoreError, match="shutting down"):
        fleet.admin("g-1:10911")
