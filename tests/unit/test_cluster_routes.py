"""The cluster registry's records and view (`coordination.cluster_routes`), the registrar's rounds
against an in-memory etcd (`coordination.cluster_registrar`), and the other groups' part of a
route (`broker.cluster_route`)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketstore.broker.cluster_route import other_groups_assignments, other_groups_queues
from rocketstore.coordination.cluster_registrar import ClusterRegistrar
from rocketstore.coordination.cluster_routes import (
    MASTER,
    SLAVE,
    BrokerRegistration,
    ClusterView,
    RegistrationError,
    RouteKeys,
    TopicRoute,
)
from rocketstore.coordination.etcd import EtcdUnavailable, KeyValue, Lease, LeaseNotFound, RangeResult
from wire.rpc import messaging_pb2 as pb

names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-_0123456789", min_size=1, max_size=12)
routes = st.builds(
    TopicRoute,
    st.integers(1, 1024),
    st.integers(1, 1024),
    st.sampled_from([2, 4, 6]),
    st.booleans(),
)
registrations = st.builds(
    BrokerRegistration,
    cluster=names,
    broker_name=names,
    broker_id=st.integers(0, 100),
    role=st.sampled_from([MASTER, SLAVE]),
    client_endpoint=st.just("127.0.0.1:10911"),
    epoch=st.integers(0, 2**40),
    remoting_endpoint=st.sampled_from(["", "127.0.0.1:10913"]),
    acting=st.booleans(),
    broker_permission=st.sampled_from([2, 4, 6]),
    auto_create=st.booleans(),
    default_queues=st.integers(1, 64),
    topics=st.dictionaries(names, routes, max_size=5),
)


@given(registrations)
def test_a_registration_survives_its_json(registration):
    assert BrokerRegistration.from_json(registration.to_json()) == registration


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"[]",
        b"{",
        b'{"cluster": "c"}',
        b'{"cluster":"c","brokerName":"a","brokerId":0,"role":"BOSS","client":"x"}',
    ],
)
def test_a_garbled_record_raises(data):
    with pytest.raises(RegistrationError):
        BrokerRegistration.from_json(data)


def record(name, broker_id=0, role=MASTER, epoch=0, topics=None, **extra) -> BrokerRegistration:
    return BrokerRegistration(
        "C", name, broker_id, role, f"{name}-{broker_id}:1", epoch=epoch, topics=topics or {}, **extra
    )


T4 = {"T": TopicRoute(4, 4)}


def test_the_master_is_the_highest_epoch_and_a_deposed_one_is_superseded():
    old = record("c", 0, epoch=3, topics=T4)
    new = record("c", 1, epoch=4, topics=T4)
    slave = record("c", 2, role=SLAVE)
    view = ClusterView.from_registrations("C", [old, new, slave], 1)
    group = view.groups["c"]
    assert group.master == new and group.slaves == (slave,)
    assert view.superseded(old) and not view.superseded(new) and not view.superseded(slave)


def test_records_of_another_cluster_are_ignored():
    other = BrokerRegistration("D", "a", 0, MASTER, "a:1", topics=T4)
    view = ClusterView.from_registrations("C", [other, record("b", topics=T4)], 1)
    assert list(view.groups) == ["b"]


def test_a_topic_is_served_where_it_exists_else_where_it_would_be_created():
    view = ClusterView.from_registrations(
        "C",
        [
            record("a", topics=T4, auto_create=True),
            record("b", auto_create=True, default_queues=8),
            record("c", auto_create=False),
        ],
        1,
    )
    assert [(s.group.broker_name, s.exists) for s in view.serving("T")] == [("a", True)]
    fresh = view.serving("New")
    assert [(s.group.broker_name, s.route.write_queues, s.exists) for s in fresh] == [("a", 4, False), ("b", 8, False)]


def test_a_drained_group_creates_nothing_and_is_routed_read_only():
    view = ClusterView.from_registrations("C", [record("a", topics=T4, broker_permission=4, auto_create=True)], 1)
    assert view.serving("New") == []
    queues, exists = other_groups_queues(pb.Resource(name="T"), view)
    assert exists and {q.permission for q in queues} == {pb.READ}


def test_freshness_is_the_read_time_against_the_allowed_age():
    view = ClusterView.from_registrations("C", [], 1000)
    assert view.fresh(1500, 500) and not view.fresh(1501, 500)
    assert not ClusterView("C").fresh(0, 10**9)


def test_other_groups_route_names_masters_as_id_0_and_slaves_by_id_read_only():
    view = ClusterView.from_registrations(
        "C", [record("b", topics=T4), record("b", 1, role=SLAVE), record("c", 1, role=SLAVE, acting=True, topics=T4)], 1
    )
    queues, exists = other_groups_queues(pb.Resource(name="T"), view)
    got = sorted((q.broker.name, q.broker.id, q.broker.endpoints.addresses[0].host, q.permission) for q in queues)
    assert exists
    assert got == sorted(
        [("b", 0, "b-0", pb.READ_WRITE)] * 4 + [("b", 1, "b-1", pb.READ)] * 4 + [("c", 0, "c-1", pb.READ)] * 4
    )
    assignments = other_groups_assignments(pb.Resource(name="T"), view)
    assert [(a.message_queue.broker.name, a.message_queue.id) for a in assignments] == [("b", -1), ("c", -1)]


def test_a_slave_configured_as_id_0_never_shares_id_0_with_its_master():
    # Controller mode elected broker 2; broker 0 follows it as a slave, beside broker 1.
    view = ClusterView.from_registrations(
        "C", [record("b", 2, topics=T4), record("b", 0, role=SLAVE), record("b", 1, role=SLAVE)], 1
    )
    queues, _ = other_groups_queues(pb.Resource(name="T"), view)
    got = {(q.broker.id, q.broker.endpoints.addresses[0].host, q.permission) for q in queues}
    assert got == {(0, "b-2", pb.READ_WRITE), (2, "b-0", pb.READ), (1, "b-1", pb.READ)}


def test_route_keys_refuse_names_that_cannot_be_keys():
    keys = RouteKeys.of("/p", "C")
    assert keys.broker("a", 3) == "/p/_routes/C/a/3"
    with pytest.raises(ValueError):
        keys.broker("a/b", 0)
    with pytest.raises(ValueError):
        RouteKeys.of("/p", "")


class MemoryEtcd:
    """The slice of `EtcdClient` the registrar uses, in memory; `down` makes every call fail."""

    def __init__(self) -> None:
        self.kv: dict[str, tuple[bytes, int]] = {}
        self.leases: set[int] = set()
        self.next_lease = 1
        self.revision = 0
        self.down = False
        self.puts = 0

    def _check(self) -> None:
        if self.down:
            raise EtcdUnavailable("etcd is down")

    def lease_grant(self, ttl_s: int) -> Lease:
        self._check()
        lease, self.next_lease = self.next_lease, self.next_lease + 1
        self.leases.add(lease)
        return Lease(lease, ttl_s)

    def lease_keepalive(self, lease_id: int) -> int:
        self._check()
        if lease_id not in self.leases:
            raise LeaseNotFound("gone")
        return 2

    def lease_revoke(self, lease_id: int) -> None:
        self._check()
        self.expire(lease_id)

    def expire(self, lease_id: int) -> None:
        self.leases.discard(lease_id)
        self.kv = {k: v for k, v in self.kv.items() if v[1] != lease_id}

    def put(self, key: str, value: bytes, *, lease: int = 0) -> int:
        self._check()
        self.puts += 1
        self.revision += 1
        self.kv[key] = (value, lease)
        return self.revision

    def get_prefix(self, prefix: str) -> RangeResult:
        self._check()
        kvs = tuple(
            KeyValue(k, v, 1, self.revision, 1, lease)
            for k, (v, lease) in sorted(self.kv.items())
            if k.startswith(prefix)
        )
        return RangeResult(kvs, self.revision)


def registrar(etcd: MemoryEtcd, current: list[BrokerRegistration], now: list[int]) -> ClusterRegistrar:
    return ClusterRegistrar(
        etcd,  # type: ignore[arg-type]
        RouteKeys.of("/p", "C"),
        "C",
        lambda: current[0],
        lease_ttl_s=2,
        interval_ms=100,
        clock=lambda: now[0],
    )


def test_the_registrar_writes_on_change_reads_everyone_and_keeps_the_last_view_while_etcd_is_down():
    etcd = MemoryEtcd()
    etcd.put("/p/_routes/C/b/0", record("b", topics=T4).to_json())
    etcd.put("/p/_routes/C/junk/0", b"not json")
    mine, now = [record("a", topics=T4)], [1000]
    reg = registrar(etcd, mine, now)
    reg.tick()
    assert set(reg.view.groups) == {"a", "b"} and reg.view.read_at_ms == 1000
    puts = etcd.puts
    reg.tick()
    assert etcd.puts == puts  # unchanged record: a keepalive only
    mine[0] = record("a", topics={**T4, "U": TopicRoute(2, 2)})
    reg.tick()
    assert etcd.puts == puts + 1 and "U" in reg.view.groups["a"].master.topics

    etcd.down, now[0] = True, 9000
    reg.tick()  # never raises
    assert reg.view.read_at_ms == 1000 and not reg.view.fresh(now[0], reg.max_age_ms)

    # etcd lost the lease meanwhile: the record is written again under a new one.
    etcd.down = False
    for lease in list(etcd.leases):
        etcd.expire(lease)
    reg.tick()
    assert "a" in reg.view.groups and reg.view.read_at_ms == 9000
    reg.stop()
    assert "/p/_routes/C/a/0" not in etcd.kv
