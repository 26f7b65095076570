"""Failover of a broker group whose brokers and etcd are real containers with their own addresses:
kill -9, pause past the lease, a network partition, a killed slave, etcd stopped for a while, and
the whole group restarted, each under a producer load and a consumer. After each fault: no message
answered SEND_OK is missing from the final master's log, the replicas are byte-identical up to the
confirmed offset, every message a consumer saw is in that log where it saw it, and the group
serves again (how long it took is printed)."""

from __future__ import annotations

import threading
import time

from client import PullConsumer, RocketStoreError
from failover_support import TOPIC, Load
from harness import verify
from harness.containers import GROUP_SETTINGS, ContainerGroup, Node
from harness.local_cluster import poll_until


class Reader:
    """Pulls the topic's four queues from whichever broker is master, recording every message it
    sees as (message id, CommitLog offset); bounded by `max_seconds`."""

    def __init__(self, group: ContainerGroup, max_seconds: float = 240.0) -> None:
        self.group = group
        self.seen: dict[str, int] = {}
        self._next = [0, 0, 0, 0]
        self._stop = threading.Event()
        self._deadline = time.monotonic() + max_seconds
        self._thread = threading.Thread(target=self._run, name="reader", daemon=True)

    def start(self) -> Reader:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set() and time.monotonic() < self._deadline:
            for node in self.group.brokers:
                try:
                    with PullConsumer(node.client_endpoint, timeout_s=2.0) as consumer:
                        for queue in range(4):
                            pulled = consumer.pull(TOPIC, queue, self._next[queue], max_messages=64)
                            for m in pulled.messages:
                                self.seen[m.msg_id] = m.commit_log_offset
                            self._next[queue] = max(self._next[queue], pulled.next_offset)
                except RocketStoreError:
                    continue  # down, paused or cut off: the next broker
            self._stop.wait(0.05)

    def stop(self) -> dict[str, int]:
        self._stop.set()
        self._thread.join(30)
        return dict(self.seen)


def under_load(group: ContainerGroup, fault) -> tuple[dict[str, int], dict[str, int], Node]:
    """Run `fault(master)` under load; returns what was acknowledged, what a consumer saw, and
    the master after the group served again."""
    group.create_topic(TOPIC)
    master = group.wait_master(90, in_sync=3)
    load = Load(group.client_endpoints(), threads=2, max_messages=20_000, max_seconds=180).start()
    reader = Reader(group).start()
    try:
        assert load.wait_acked(200, 60), f"no load before the fault: {load.outcomes} {load.errors[:3]}"
        started = time.monotonic()
        fault(master)
        before = load.acked_count()
        after = group.wait_master(90, in_sync=2)
        assert load.wait_acked(before + 200, 90), f"the group did not serve again: {load.outcomes} {load.errors[:3]}"
        print(f"served again {time.monotonic() - started:.2f} s after the fault; master now {after.name}")
    finally:
        acked = load.stop()
        seen = reader.stop()
    return acked, seen, after


def final_check(group: ContainerGroup, acked: dict[str, int], seen: dict[str, int]) -> None:
    master = group.wait_master(90, in_sync=2)
    confirmed = int(group.status(master)["confirmed_offset"])
    group.stop_brokers()
    stores = [verify.open_store(node.store_dir, GROUP_SETTINGS) for node in group.brokers]
    try:
        log = verify.messages_by_offset(stores[group.brokers.index(master)])
        missing = verify.missing_acknowledged(acked, log)
        assert not missing, f"{len(missing)} of {len(acked)} acknowledged messages are missing: {missing[:10]}"
        unseen = verify.missing_acknowledged(seen, log)
        assert not unseen, f"consumers saw {len(unseen)} messages the final log does not hold: {unseen[:10]}"
        in_sync = [s for s in stores if s.max_offset >= confirmed]
        assert len(in_sync) >= 2, [s.max_offset for s in stores]
        assert verify.first_difference(in_sync, confirmed) is None
    finally:
        for store in stores:
            store.shutdown()
    assert acked and seen


def rejoins(group: ContainerGroup, node: Node, master: Node) -> None:
    def back() -> bool:
        own, theirs = group.status(node), group.status(master)
        if own is None or theirs is None or own["role"] != "SLAVE":
            return False
        return group.brokers.index(node) in theirs.get("in_sync_replica_ids", [])

    assert poll_until(back, 90), f"{node.name} did not rejoin {master.name}:\n{group.tails()}"


def test_kill_9_of_the_master_container(group):
    killed: list[Node] = []

    def fault(master: Node) -> None:
        group.kill(master)
        killed.append(master)

    acked, seen, after = under_load(group, fault)
    assert after is not killed[0]
    group.start_again(killed[0])
    rejoins(group, killed[0], after)
    final_check(group, acked, seen)


def test_a_master_paused_past_its_lease_is_replaced_and_rejoins_as_a_slave(group):
    paused: list[Node] = []

    def fault(master: Node) -> None:
        group.pause(master)
        paused.append(master)
        # Frozen until the others elected a successor (its lease ran out), then thawed.
        group.wait_master(90, not_=master, in_sync=2)
        group.unpause(master)

    acked, seen, after = under_load(group, fault)
    assert after is not paused[0]
    rejoins(group, paused[0], after)
    final_check(group, acked, seen)


def test_a_partitioned_master_is_replaced_and_rejoins_after_the_partition(group):
    cut: list[Node] = []

    def fault(master: Node) -> None:
        group.disconnect(master)
        cut.append(master)

    acked, seen, after = under_load(group, fault)
    assert after is not cut[0]
    group.connect(cut[0])
    rejoins(group, cut[0], after)
    final_check(group, acked, seen)


def test_a_killed_slave_comes_back_and_catches_up(group):
    killed: list[Node] = []

    def fault(master: Node) -> None:
        slave = next(n for n in group.brokers if n is not master)
        group.kill(slave)
        killed.append(slave)

    acked, seen, after = under_load(group, fault)
    group.start_again(killed[0])
    rejoins(group, killed[0], after)
    final_check(group, acked, seen)


def test_etcd_stopped_for_a_while_then_the_group_serves_again(group):
    def fault(master: Node) -> None:
        assert group.etcd is not None
        group.etcd.wrapped.stop(timeout=5)
        # Down until the master noticed it cannot renew its lease (it stops acknowledging).
        assert poll_until(lambda: int((group.status(master) or {}).get("lease_valid_ms", 0)) == 0, 60)
        group.etcd.wrapped.start()

    acked, seen, _ = under_load(group, fault)
    final_check(group, acked, seen)


def test_the_whole_group_restarted_keeps_everything_acknowledged(group):
    def fault(master: Node) -> None:
        for node in group.brokers:
            node.wrapped.restart(timeout=20)

    acked, seen, _ = under_load(group, fault)
    final_check(group, acked, seen)
