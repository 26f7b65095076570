"""One cluster of three broker groups on 127.0.0.1, tied together by the route records in one etcd:
`broker-a` and `broker-b` in static mode (a SYNC_MASTER and a slave each), `broker-c` in controller
mode (three brokers, elections on the same etcd).

A topic created on all three through one broker is routed the same by every broker; producers
spread over the groups and keep sending, at once, when one group's master is killed (and return to
a controller-mode group once it elects another), the group they were given included, for as long
as it has no master; nothing acknowledged is lost; consumers of one
consumer group share the queues of every group while instances come and go, each message taken
once; a group added under load starts taking sends; a drained group stops taking them, is read to
the end and leaves; with etcd away, a broker's route names its own group only.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from client import Producer, PullConsumer, RocketStoreError, SendResult, SendStatus, SimpleConsumer
from client.remoting import AsyncRemotingProducer
from harness.local_cluster import ControllerCluster, LocalCluster, write_secret
from harness.local_etcd import EtcdServer
from support import BROKER_TEST_SETTINGS, run_cli, wait_until

TOPIC = "Spread"
CLUSTER = "TestCluster"
# Quick registry rounds so that routes follow the cluster within a second.
FAST = dict(clusterRouteRefreshInterval="200")


class Groups:
    """The cluster's groups by name, all on one etcd, one secret and one etcd prefix."""

    def __init__(self, base: Path, etcd: EtcdServer) -> None:
        self.base = base
        self.etcd = etcd
        self.secret_file = write_secret(base / "secret")
        self.settings = dict(BROKER_TEST_SETTINGS)
        self.settings.update(
            FAST,
            brokerClusterName=CLUSTER,
            etcdEndpoints=etcd.endpoint,
            etcdPrefix="/cluster-test",
            haSecretFile=str(self.secret_file),
        )
        self.groups: dict[str, LocalCluster | ControllerCluster] = {}

    def static(self, name: str) -> LocalCluster:
        group = LocalCluster(self.base / name, slaves=1, settings=dict(self.settings), broker_name=name)
        group.secret_file = self.secret_file
        self.groups[name] = group
        return group.start()

    def controller(self, name: str) -> ControllerCluster:
        group = ControllerCluster(self.base / name, self.etcd.endpoint, size=3, settings=dict(self.settings))
        group.broker_name = name
        group.secret_file = self.secret_file
        self.groups[name] = group
        group.start()
        group.wait_master(60)
        return group

    def master(self, name: str) -> str:
        group = self.groups[name]
        if isinstance(group, ControllerCluster):
            return group.wait_master(60).client_endpoint
        return group.master.client_endpoint

    def running(self):
        return [b for g in self.groups.values() for b in g.brokers if b.running()]

    def stop(self) -> None:
        for group in self.groups.values():
            group.stop()

    def tails(self) -> str:
        return "\n".join(g.tails() for g in self.groups.values())


@pytest.fixture
def cluster(tmp_path, etcd, request, monkeypatch):
    groups = Groups(tmp_path, etcd)
    monkeypatch.setenv("ROCKETSTORE_ADMIN_SECRET", groups.secret_file.read_text().strip())
    yield groups
    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    if failed:
        print(groups.tails())
        print(etcd.log_tail(40))
    groups.stop()


def masters_in_route(endpoint: str, topic: str = TOPIC) -> set[tuple[str, int, str, str]]:
    with PullConsumer(endpoint) as consumer:
        return {
            (q.broker_name, q.queue_id, q.endpoint, q.permission) for q in consumer.route(topic) if q.broker_id == 0
        }


def brokers_in_route(endpoint: str, topic: str = TOPIC) -> set[tuple[str, int, str]]:
    with PullConsumer(endpoint) as consumer:
        return {(q.broker_name, q.broker_id, q.endpoint) for q in consumer.route(topic)}


def expected_route(cluster: Groups, names, queues: int = 4, drained=()) -> set[tuple[str, int, str, str]]:
    return {
        (name, q, cluster.master(name), "READ" if name in drained else "READ_WRITE")
        for name in names
        for q in range(queues)
    }


def create_topic(endpoint: str, groups: str = "all", topic: str = TOPIC) -> str:
    code, out = run_cli(
        "topic", "create", "--topic", topic, "--queues", "4", "--groups", groups, "--endpoint", endpoint
    )
    assert code == 0, out
    return out


class Sender:
    """A producer thread, bounded in count and time, recording what each group acknowledged. A
    send that raises stops it, unless `keep_going`: then a client error is kept in `failures`
    with when it was raised, and the next send follows."""

    def __init__(
        self, endpoint: str, *, limit: int = 3000, max_s: float = 120.0, pace_s: float = 0.0, keep_going: bool = False
    ) -> None:
        self.producer = Producer(endpoint, route_refresh_s=0.3, retry_timeout_s=20)
        self.acked: list[tuple[str, str]] = []  # (message id, broker group), in order
        self.errors: list[BaseException] = []
        self.failures: list[tuple[float, RocketStoreError]] = []  # (time.monotonic(), error)
        self._limit, self._max_s, self._pace_s, self._keep_going = limit, max_s, pace_s, keep_going
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        deadline = time.monotonic() + self._max_s
        try:
            for i in range(self._limit):
                if self._stop.is_set() or time.monotonic() > deadline:
                    return
                try:
                    result = self.producer.send(TOPIC, f"m-{i}".encode())
                except RocketStoreError as exc:
                    if not self._keep_going:
                        raise
                    self.failures.append((time.monotonic(), exc))
                    continue
                assert result.ok, result
                self.acked.append((result.msg_id, result.broker_name))
                if self._pace_s:
                    self._stop.wait(self._pace_s)
        except BaseException as exc:  # the test asserts on it
            self.errors.append(exc)

    def start(self) -> "Sender":
        self._thread.start()
        return self

    def count(self) -> int:
        return len(self.acked)

    def wait_for(self, more: int, what: str, timeout_s: float = 60.0) -> int:
        target = self.count() + more
        wait_until(lambda: self.count() >= target or self.errors, timeout_s, what)
        assert not self.errors, self.errors
        return self.count()

    def since(self, index: int) -> collections.Counter:
        return collections.Counter(group for _, group in self.acked[index:])

    def stop(self) -> list[tuple[str, str]]:
        self._stop.set()
        self._thread.join(timeout=60)
        self.producer.close()
        assert not self.errors, self.errors
        return list(self.acked)


def consume_all(endpoint: str, expected: set[str], group: str = "readers", timeout_s: float = 60.0) -> list[str]:
    """Every message of `expected` through one consumer group, taken and acked once each."""
    seen: list[str] = []
    with SimpleConsumer(endpoint, group, TOPIC, route_refresh_s=0.5) as consumer:
        deadline = time.monotonic() + timeout_s
        while not expected <= set(seen) and time.monotonic() < deadline:
            for popped in consumer.receive(32, wait_s=0.5):
                seen.append(popped.message.msg_id)
                consumer.ack(popped)
    return seen


def test_routes_are_the_same_from_every_broker_and_sends_and_consumers_spread_over_all_groups(cluster):
    cluster.static("broker-a")
    cluster.static("broker-b")
    cluster.controller("broker-c")
    seed = cluster.master("broker-a")
    out = create_topic(seed)
    assert out.count("created") == 3, out

    # Every broker of the cluster, master or slave, names the same masters for the topic.
    expected = expected_route(cluster, ("broker-a", "broker-b", "broker-c"))
    for broker in cluster.running():
        wait_until(lambda: masters_in_route(broker.client_endpoint) == expected, 15, f"{broker.name}'s route")
    # Every master names every broker, its own slaves as the other groups' masters name them, and
    # each group's brokers by distinct ids (7: 3 masters, 4 slaves).
    everyone = {(b.settings["brokerName"], b.client_endpoint) for b in cluster.running()}

    def masters_agree() -> bool:
        seen = [brokers_in_route(cluster.master(name)) for name in ("broker-a", "broker-b", "broker-c")]
        named = seen[0]
        return (
            all(route == named for route in seen)
            and {(name, endpoint) for name, _, endpoint in named} == everyone
            and len({(name, broker_id) for name, broker_id, _ in named}) == len(everyone) == 7
        )

    wait_until(masters_agree, 15, "every master's route naming every broker alike")

    code, listed = run_cli("cluster", "list", "--endpoint", seed, "--json")
    assert code == 0
    described = json.loads(listed)
    assert described["fresh"] and {b["broker_name"] for b in described["brokers"]} == {
        "broker-a",
        "broker-b",
        "broker-c",
    }
    assert [b["role"] for b in described["brokers"]].count("MASTER") == 3 and len(described["brokers"]) == 7

    with Producer(seed) as producer:
        results = [producer.send(TOPIC, f"even-{i}".encode()) for i in range(300)]
    assert all(r.ok for r in results)
    per_group = collections.Counter(r.broker_name for r in results)
    print("sends per group:", dict(per_group))
    assert set(per_group) == {"broker-a", "broker-b", "broker-c"}
    assert min(per_group.values()) >= 50, per_group

    code, status = run_cli("topic", "status", "--topic", TOPIC, "--endpoint", seed, "--json")
    assert code == 0
    stored = {name: sum(q["max_offset"] for q in d["queues"]) for name, d in json.loads(status).items()}
    assert stored == dict(per_group)
    code, topics = run_cli("topic", "list", "--endpoint", seed, "--json")
    assert next(t for t in json.loads(topics) if t["name"] == TOPIC)["groups"] == ["broker-a", "broker-b", "broker-c"]

    # Two members of one consumer group share every group's messages; one leaves half-way.
    sent = {r.msg_id for r in results}
    taken: list[str] = []
    lock = threading.Lock()
    first = SimpleConsumer(cluster.master("broker-b"), "sharers", TOPIC)
    second = SimpleConsumer(seed, "sharers", TOPIC)

    def take(consumer: SimpleConsumer, budget: int) -> None:
        deadline = time.monotonic() + 60
        while budget > 0 and time.monotonic() < deadline:
            for popped in consumer.receive(8, wait_s=0.2):
                consumer.ack(popped)
                with lock:
                    taken.append(popped.message.msg_id)
                budget -= 1
            with lock:
                if sent <= set(taken):
                    return

    leaver = threading.Thread(target=take, args=(first, 100))
    stayer = threading.Thread(target=take, args=(second, 1000))
    leaver.start()
    stayer.start()
    leaver.join(70)
    first.close()
    stayer.join(70)
    second.close()
    assert sorted(taken) == sorted(sent), f"{len(taken)} taken, {len(set(taken))} distinct, {len(sent)} sent"


def test_sends_go_to_the_other_groups_when_a_master_dies_and_nothing_acknowledged_is_lost(cluster):
    cluster.static("broker-a")
    cluster.static("broker-b")
    controlled = cluster.controller("broker-c")
    seed = cluster.master("broker-b")
    create_topic(seed)
    expected = expected_route(cluster, ("broker-a", "broker-b", "broker-c"))
    wait_until(lambda: masters_in_route(seed) == expected, 15, "the full route")

    sender = Sender(seed, pace_s=0.002).start()
    sender.wait_for(60, "sends before the kill")
    cluster.groups["broker-a"].master.kill()
    killed_at = sender.count()
    sender.wait_for(150, "sends after broker-a's master died")
    after = sender.since(killed_at + 2)  # a send in flight at the kill may still have landed there
    assert after["broker-a"] == 0 and after["broker-b"] > 0 and after["broker-c"] > 0, after

    # A controller-mode group elects another master and takes sends again.
    old = controlled.wait_master(30)
    old.kill()
    controlled.wait_master(60, not_=old)
    elected_at = sender.count()
    wait_until(lambda: sender.since(elected_at)["broker-c"] > 0 or sender.errors, 60, "broker-c taking sends again")
    acked = sender.stop()

    # Everything acknowledged is there, broker-a's part once its master is back.
    group_a = cluster.groups["broker-a"]
    assert isinstance(group_a, LocalCluster)
    group_a.master.restart()
    # Acks are pop events, written SYNC_MASTER: they need the slave back on the stream.
    group_a.wait_connected(1)
    ids = {message_id for message_id, _ in acked}
    seen = consume_all(seed, ids)
    assert ids <= set(seen), f"{len(ids - set(seen))} acknowledged messages missing"


def test_a_producer_keeps_sending_while_the_group_it_was_given_has_no_master_and_returns_to_it(cluster):
    """Issue 32 item 11: the producer is given broker-a's master alone; broker-a loses it and
    elects no other for as long as its slaves are paused (its records leave the registry, so
    routes name broker-b alone), then elects one when they resume."""
    given = cluster.controller("broker-a")
    cluster.static("broker-b")
    old = given.wait_master(60)
    create_topic(old.client_endpoint)
    other = cluster.master("broker-b")
    wait_until(lambda: masters_in_route(other) == expected_route(cluster, ("broker-a", "broker-b")), 15, "the route")
    sender = Sender(old.client_endpoint, pace_s=0.005, max_s=240, keep_going=True).start()
    sender.wait_for(60, "sends before the kill")
    assert set(sender.since(0)) == {"broker-a", "broker-b"}, sender.since(0)

    killed_at = time.monotonic()
    old.kill()
    slaves = [b for b in given.brokers if b is not old]
    for slave in slaves:  # no election while they are paused
        slave.pause()
    try:
        wait_until(lambda: {name for name, *_ in masters_in_route(other)} == {"broker-b"}, 30, "a route of broker-b")
        down_at = sender.count()
        # Many route refreshes (0.3 s each) with one writable group, not the one it was given.
        sender.wait_for(150, "sends while broker-a has no master")
        assert set(sender.since(down_at)) == {"broker-b"}, sender.since(down_at)
    finally:
        for slave in slaves:
            slave.resume()
    given.wait_master(60, not_=old)
    back_at = sender.count()
    wait_until(lambda: sender.since(back_at)["broker-a"] > 0 or sender.errors, 60, "sends returning to broker-a")
    sender.wait_for(50, "sends to both groups again")
    sender.stop()
    # A send under way at the kill may spend its whole retry window; none may fail after it.
    window_s = sender.producer.retry_policy.retry_timeout_s
    late = [(round(at - killed_at, 1), repr(error)) for at, error in sender.failures if at - killed_at > window_s]
    assert not late, late
    print(f"{len(sender.failures)} send(s) failed within {window_s:g} s of the kill; sends per group:", sender.since(0))


def test_a_group_added_under_load_takes_sends_and_a_drained_group_leaves_with_nothing_lost(cluster):
    cluster.static("broker-a")
    cluster.controller("broker-c")
    seed = cluster.master("broker-c")
    create_topic(seed)
    sender = Sender(seed, pace_s=0.002).start()
    sender.wait_for(50, "sends to two groups")

    cluster.static("broker-b")
    create_topic(seed, groups="broker-b")
    added_at = sender.count()
    wait_until(lambda: sender.since(added_at)["broker-b"] > 0 or sender.errors, 30, "sends reaching broker-b")

    code, out = run_cli("cluster", "drain", "--group", "broker-a", "--endpoint", seed)
    assert code == 0 and "takes no more sends" in out, out
    drained = expected_route(cluster, ("broker-a", "broker-b", "broker-c"), drained=("broker-a",))
    wait_until(lambda: masters_in_route(seed) == drained, 15, "broker-a routed read-only")
    drained_at = sender.count()
    sender.wait_for(100, "sends after the drain")
    after = sender.since(drained_at + 2)
    assert after["broker-a"] == 0 and after["broker-b"] > 0 and after["broker-c"] > 0, after
    acked = sender.stop()

    # Consumers read broker-a to its end; then it leaves, and routes no longer name it.
    ids = {message_id for message_id, _ in acked}
    seen = consume_all(seed, ids)
    assert sorted(seen) == sorted(ids)
    cluster.groups["broker-a"].stop()
    remaining = expected_route(cluster, ("broker-b", "broker-c"))
    wait_until(lambda: masters_in_route(seed) == remaining, 15, "broker-a gone from routes")
    with Producer(seed) as producer:
        assert {producer.send(TOPIC, b"after").broker_name for _ in range(8)} == {"broker-b", "broker-c"}


def test_with_etcd_away_a_broker_routes_its_own_group_only_and_the_whole_cluster_when_it_returns(cluster, etcd):
    cluster.static("broker-a")
    cluster.static("broker-b")
    seed = cluster.master("broker-a")
    create_topic(seed)
    both = expected_route(cluster, ("broker-a", "broker-b"))
    wait_until(lambda: masters_in_route(seed) == both, 15, "the full route")

    etcd.stop()
    # Within a lease and two rounds, routes stop naming the group this broker cannot vouch for.
    wait_until(lambda: masters_in_route(seed) == expected_route(cluster, ("broker-a",)), 15, "a's own route")
    with Producer(seed) as producer:
        assert producer.send(TOPIC, b"while etcd is away").ok
    code, out = run_cli("cluster", "list", "--endpoint", seed)
    assert code == 0 and "STALE" in out, out

    etcd.restart()
    wait_until(lambda: masters_in_route(seed) == both, 30, "the full route again")


def test_a_4x_client_given_any_broker_as_its_name_server_sees_every_group(cluster):
    """Issue 32 item 9: GET_ROUTEINFO_BY_TOPIC from a slave names every group, its master and its
    slaves by id (remoting endpoints), as the gRPC route does; a send to the master it names
    lands there."""
    cluster.settings["remotingListenPort"] = "0"
    groups = {name: cluster.static(name) for name in ("broker-a", "broker-b")}
    create_topic(cluster.master("broker-a"))
    expected = {
        name: {"0": group.master.remoting_endpoint, "1": group.slave_brokers[0].remoting_endpoint}
        for name, group in groups.items()
    }

    async def route_from(endpoint: str) -> dict:
        async with AsyncRemotingProducer(endpoint) as producer:
            return await producer.route(TOPIC)

    def addresses(endpoint: str) -> dict[str, dict[str, str]]:
        route = asyncio.run(route_from(endpoint))
        return {d["brokerName"]: d["brokerAddrs"] for d in route["brokerDatas"]}

    asked = [groups["broker-a"].slave_brokers[0], groups["broker-b"].master]
    for broker in asked:
        wait_until(lambda b=broker: addresses(b.remoting_endpoint) == expected, 30, f"the route from {broker.name}")
    route = asyncio.run(route_from(asked[0].remoting_endpoint))
    assert {(q["brokerName"], q["perm"], q["writeQueueNums"]) for q in route["queueDatas"]} == {
        ("broker-a", 6, 4),
        ("broker-b", 6, 4),
    }

    async def send_to_b() -> SendResult:
        async with AsyncRemotingProducer(expected["broker-b"]["0"]) as producer:
            return await producer.send(TOPIC, b"through a slave's route")

    assert asyncio.run(send_to_b()).status is SendStatus.SEND_OK


def test_the_official_client_through_one_broker_sends_to_every_group(cluster, tmp_path):
    from test_official_client import OFFICIAL_PYTHON, PRODUCER

    assert OFFICIAL_PYTHON.exists(), f"{OFFICIAL_PYTHON} is missing: `make test` creates it"
    cluster.static("broker-a")
    cluster.static("broker-b")
    seed = cluster.master("broker-a")
    create_topic(seed)
    wait_until(lambda: masters_in_route(seed) == expected_route(cluster, ("broker-a", "broker-b")), 15, "the route")
    env = dict(os.environ, HOME=str(tmp_path))
    done = subprocess.run(
        [str(OFFICIAL_PYTHON), "-c", PRODUCER, seed, TOPIC, "40"], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stderr
    ids = set(json.loads(done.stdout.strip().splitlines()[-1]))
    groups_of: dict[str, set[str]] = collections.defaultdict(set)
    with SimpleConsumer(seed, "official-readers", TOPIC) as consumer:
        deadline = time.monotonic() + 60
        while set(groups_of) != ids and time.monotonic() < deadline:
            for popped in consumer.receive(32, wait_s=0.5):
                consumer.ack(popped)
                groups_of[popped.message.msg_id].add(popped.broker_name)
    # The official producer may resend a message whose answer it lost: at least once, none lost.
    assert set(groups_of) == ids
    assert set().union(*groups_of.values()) == {"broker-a", "broker-b"}, dict(groups_of)
