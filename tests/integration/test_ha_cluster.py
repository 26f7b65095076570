"""Master and slave broker processes on 127.0.0.1: RocketMQ's HATest cases and more.

Every broker is a real `rocketstore broker` process (port 0, tmp dirs); conditions are awaited with
deadlines; brokers' stderr is printed when a test fails (see conftest.py).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from client import AdminClient, BrokerError, NotMasterError, Producer, PullConsumer, SendStatus
from harness.ports import port_for_later
from support import wait_until

TOPIC = "HaTopic"


def body(i: int, size: int = 600) -> bytes:
    head = f"message-{i:08d}|".encode()
    return head + bytes((i + k) % 251 for k in range(size - len(head)))


def admin_of(cluster, broker=None) -> AdminClient:
    return AdminClient((broker or cluster.master).client_endpoint, cluster.admin_secret())


def consume_all(endpoint: str, queues=range(4)) -> dict[tuple[int, int], tuple]:
    """(queue, queue offset) -> (commit log offset, msg id, body) of every HaTopic message."""
    out = {}
    with PullConsumer(endpoint, group="HaCheckGroup") as consumer:
        for queue_id in queues:
            offset = 0
            for _ in range(10_000):
                page = consumer.pull(TOPIC, queue_id, offset, max_messages=64)
                for m in page.messages:
                    assert m.body_crc_ok
                    out[(m.queue_id, m.queue_offset)] = (m.commit_log_offset, m.msg_id, m.body)
                if not page.messages or page.next_offset <= offset:
                    break
                offset = page.next_offset
    return out


def commit_log_bytes(store_dir: Path, end: int) -> bytes:
    """The CommitLog's first `end` bytes, read from its segment files."""
    files = sorted((store_dir / "commitlog").iterdir())
    data = b"".join(f.read_bytes() for f in files if not f.name.startswith("."))
    assert int(files[0].name) == 0
    return data[:end]


def send_all(endpoint: str, start: int, count: int, **kwargs) -> list:
    with Producer(endpoint) as producer:
        return [producer.send(TOPIC, body(i), keys=(f"k{i}",), **kwargs) for i in range(start, start + count)]


# -- sync replication ----------------------------------------------------------------------------


def test_sync_replication_leaves_master_and_slave_byte_identical(make_cluster):
    cluster = make_cluster(master_role="SYNC_MASTER", flush_disk_type="SYNC_FLUSH", slaves=1)
    results = send_all(cluster.master.client_endpoint, 0, 600)  # ~400 KB: crosses segment ends
    assert {r.status for r in results} == {SendStatus.SEND_OK}
    # PUT_OK under SYNC_MASTER: the slave acknowledged every one of them already.
    with admin_of(cluster) as admin:
        status = admin.status()
    assert [int(s["ack_offset"]) >= max(r.commit_log_offset for r in results) for s in status["slaves"]] == [True]

    on_master = consume_all(cluster.master.client_endpoint)
    on_slave = consume_all(cluster.slave_brokers[0].client_endpoint)
    assert len(on_master) == 600
    assert on_slave == on_master
    for r in results:
        assert on_master[(r.queue_id, r.queue_offset)][0] == r.commit_log_offset

    end = int(status["max_offset"])
    cluster.stop()
    master_bytes = commit_log_bytes(cluster.master.store_dir, end)
    slave_bytes = commit_log_bytes(cluster.slave_brokers[0].store_dir, end)
    assert len(master_bytes) == end
    assert slave_bytes == master_bytes


def test_paused_slave_gives_flush_slave_timeout_and_a_dead_one_slave_not_available(make_cluster):
    cluster = make_cluster(master_role="SYNC_MASTER", flush_disk_type="SYNC_FLUSH", slaves=1)
    endpoint = cluster.master.client_endpoint
    assert send_all(endpoint, 0, 5)[-1].status is SendStatus.SEND_OK
    slave = cluster.slave_brokers[0]
    slave.pause()  # connected, but acknowledging nothing
    started = time.monotonic()
    [timed_out] = send_all(endpoint, 5, 1)
    elapsed = time.monotonic() - started
    assert timed_out.status is SendStatus.FLUSH_SLAVE_TIMEOUT
    # The wait ends at slaveTimeout (1 s here), with a margin for a loaded machine.
    assert elapsed < 1.0 + 4.0
    slave.kill()
    late = wait_until(
        lambda: [r for r in send_all(endpoint, 6, 1) if r.status is SendStatus.SLAVE_NOT_AVAILABLE],
        what="SLAVE_NOT_AVAILABLE once the slave is gone",
    )
    # Every message is stored on the master, whatever its status said.
    stored = consume_all(endpoint)
    assert stored[(timed_out.queue_id, timed_out.queue_offset)][1] == timed_out.msg_id
    assert stored[(late[0].queue_id, late[0].queue_offset)][1] == late[0].msg_id


def test_restarted_slave_resumes_from_its_own_offset(make_cluster):
    cluster = make_cluster(master_role="SYNC_MASTER", flush_disk_type="SYNC_FLUSH", slaves=1)
    endpoint = cluster.master.client_endpoint
    assert {r.status for r in send_all(endpoint, 0, 50)} == {SendStatus.SEND_OK}
    slave = cluster.slave_brokers[0]
    assert slave.stop() == 0
    missed = send_all(endpoint, 50, 30)
    assert {r.status for r in missed} == {SendStatus.SLAVE_NOT_AVAILABLE}
    slave.start()
    wait_until(lambda: cluster.caught_up(), what="the restarted slave to catch up")
    assert {r.status for r in send_all(endpoint, 80, 20)} == {SendStatus.SEND_OK}
    assert consume_all(slave.client_endpoint) == consume_all(endpoint)


def test_slave_far_behind_catches_up_while_the_master_keeps_writing(make_cluster):
    cluster = make_cluster(master_role="ASYNC_MASTER", flush_disk_type="ASYNC_FLUSH", slaves=0)
    endpoint = cluster.master.client_endpoint
    with Producer(endpoint) as producer:
        for i in range(0, 2000, 50):
            producer.send_batch(TOPIC, [body(j, 1000) for j in range(i, i + 50)], queue_id=i // 50 % 4)
    slave = cluster.add_slave(1)
    with Producer(endpoint) as producer:
        for i in range(2000, 3000, 50):
            producer.send_batch(TOPIC, [body(j, 1000) for j in range(i, i + 50)], queue_id=i // 50 % 4)
    wait_until(lambda: cluster.caught_up(), what="the slave to catch up")
    assert consume_all(slave.client_endpoint) == consume_all(endpoint)


@pytest.mark.parametrize("in_sync_replicas", [2, 3])
def test_two_slaves_with_in_sync_replicas(make_cluster, in_sync_replicas):
    cluster = make_cluster(
        master_role="SYNC_MASTER",
        flush_disk_type="SYNC_FLUSH",
        slaves=2,
        settings={"inSyncReplicas": str(in_sync_replicas)},
    )
    endpoint = cluster.master.client_endpoint
    wait_until(lambda: cluster.caught_up(2), what="both slaves connected")
    assert {r.status for r in send_all(endpoint, 0, 20)} == {SendStatus.SEND_OK}
    cluster.slave_brokers[0].pause()
    # One send: a paused slave's session is closed after haHousekeepingInterval (2 s here), and
    # from then on the answer is SLAVE_NOT_AVAILABLE rather than a timeout.
    statuses = {r.status for r in send_all(endpoint, 20, 1)}
    if in_sync_replicas == 2:
        assert statuses == {SendStatus.SEND_OK}  # the master and the other slave are enough
    else:
        assert statuses == {SendStatus.FLUSH_SLAVE_TIMEOUT}
    cluster.slave_brokers[0].resume()
    wait_until(lambda: cluster.caught_up(2), what="the resumed slave to catch up")
    assert consume_all(cluster.slave_brokers[0].client_endpoint) == consume_all(endpoint)


def test_async_master_does_not_wait_for_slaves(make_cluster):
    cluster = make_cluster(master_role="ASYNC_MASTER", flush_disk_type="SYNC_FLUSH", slaves=1)
    cluster.slave_brokers[0].pause()
    assert {r.status for r in send_all(cluster.master.client_endpoint, 0, 20)} == {SendStatus.SEND_OK}
    cluster.slave_brokers[0].resume()
    wait_until(lambda: cluster.caught_up(), what="the slave to catch up")


def test_slave_refuses_writes_and_names_its_master(make_cluster):
    # Proxy mode off: the slave would relay the send to its master (test_proxy_mode.py).
    settings = {"proxyModeEnable": "false"}
    cluster = make_cluster(master_role="SYNC_MASTER", flush_disk_type="SYNC_FLUSH", slaves=1, settings=settings)
    slave = cluster.slave_brokers[0]
    wait_until(lambda: cluster.caught_up(), what="the slave connected")
    with Producer(slave.client_endpoint, retry_timeout_s=0) as producer:
        with pytest.raises(NotMasterError) as info:
            producer.send(TOPIC, b"to a slave")
    assert info.value.master_endpoint == cluster.master.client_endpoint
    # Nothing was stored anywhere: the topic exists on neither broker (reads never create it).
    for broker in (slave, cluster.master):
        with pytest.raises(BrokerError, match="TOPIC_NOT_FOUND"):
            consume_all(broker.client_endpoint)


def test_slave_with_a_wrong_secret_is_refused_and_the_secret_is_not_logged(make_cluster, tmp_path):
    cluster = make_cluster(master_role="SYNC_MASTER", flush_disk_type="SYNC_FLUSH", slaves=0)
    wrong = tmp_path / "wrong-secret"
    wrong.write_text("a-completely-different-secret-0123456789\n")
    wrong.chmod(0o600)
    slave = cluster.add_slave(1, wait_connected=False, haSecretFile=str(wrong))
    # Each side proves itself to the other first: the master's proof fails under the slave's secret,
    # so the slave stops there and never sends its handshake.
    wait_until(
        lambda: "failed to prove it holds the shared secret" in slave.tail(), what="the slave to report its refusal"
    )
    [result] = send_all(cluster.master.client_endpoint, 0, 1)
    assert result.status is SendStatus.SLAVE_NOT_AVAILABLE
    secrets = [cluster.admin_secret().decode(), "a-completely-different-secret-0123456789"]
    for broker in cluster.brokers:
        logs = broker.tail(100_000) + "".join(
            p.read_text(errors="replace") for p in (broker.directory / "logs").glob("*")
        )
        for secret in secrets:
            assert secret not in logs


def test_a_slave_copies_the_masters_topics_and_consumer_offsets(make_cluster):
    cluster = make_cluster(
        master_role="SYNC_MASTER", flush_disk_type="SYNC_FLUSH", slaves=1, settings={"haMetadataSyncInterval": "200"}
    )
    slave = cluster.slave_brokers[0]
    with admin_of(cluster) as admin:
        admin.create_topic("WideTopic", queues=8)
    with PullConsumer(cluster.master.client_endpoint, group="billing") as consumer:
        consumer.update_offset("WideTopic", 7, 42)

    def slave_offset() -> int | None:
        with PullConsumer(slave.client_endpoint, group="billing") as consumer:
            try:
                return consumer.get_offset("WideTopic", 7)
            except BrokerError as exc:  # the slave does not know the topic before its first copy
                assert "does not exist" in str(exc)
                return None

    wait_until(lambda: slave_offset() == 42, what="the slave to copy the committed offset")
    with admin_of(cluster, slave) as admin:
        wide = [t for t in admin.list_topics() if t["name"] == "WideTopic"]
        status = admin.status()
    assert [(t["read_queue_nums"], t["write_queue_nums"]) for t in wide] == [(8, 8)]
    assert status["metadata_synced_ms"] > 0 and not status.get("metadata_error")
    # The copy is as authenticated as the replication stream: no secret, no offsets.
    import grpc

    from wire.rpc import ha_pb2, ha_pb2_grpc

    with grpc.insecure_channel(cluster.master.ha_endpoint) as channel:
        with pytest.raises(grpc.RpcError) as refused:
            ha_pb2_grpc.ReplicationStub(channel).GetMetadata(ha_pb2.MetadataRequest(broker_name="broker-a"), timeout=5)
    assert refused.value.code() is grpc.StatusCode.UNAUTHENTICATED


def test_master_killed_and_restarted_while_a_slave_is_connected(make_cluster):
    cluster = make_cluster(master_role="SYNC_MASTER", flush_disk_type="SYNC_FLUSH", slaves=1)
    master, slave = cluster.master, cluster.slave_brokers[0]
    acked = send_all(master.client_endpoint, 0, 100)
    assert {r.status for r in acked} == {SendStatus.SEND_OK}
    master.kill()
    master.restart()
    wait_until(lambda: cluster.caught_up(), what="the slave to reconnect to the restarted master")
    more = wait_until(
        lambda: [r for r in send_all(master.client_endpoint, 100, 1) if r.status is SendStatus.SEND_OK],
        what="SEND_OK after the restart",
    )
    on_master = consume_all(master.client_endpoint)
    for r in acked + more:
        assert on_master[(r.queue_id, r.queue_offset)][1] == r.msg_id
    wait_until(lambda: cluster.caught_up(), what="the slave to hold everything")
    assert consume_all(slave.client_endpoint) == on_master


def test_a_planned_switchover_in_static_mode_swaps_roles_for_good_and_producers_see_no_error(make_cluster):
    from failover_support import TOPIC as LOAD_TOPIC
    from failover_support import Load, messages_by_offset, missing_acknowledged, open_store

    cluster = make_cluster(master_role="SYNC_MASTER", flush_disk_type="SYNC_FLUSH", slaves=0)
    ha_port = port_for_later()  # the slave serves replication once it is master: on a port of ours
    # No periodic metadata copy after the first: the take-over's own last copy must bring the offset.
    master, slave = cluster.master, cluster.add_slave(1, haListenPort=str(ha_port), haMetadataSyncInterval="600000")
    load = Load(f"{master.client_endpoint};{slave.client_endpoint}").start()
    try:
        assert load.wait_acked(100, 60), load.outcomes
        with PullConsumer(master.client_endpoint, group="billing") as consumer:
            consumer.update_offset(LOAD_TOPIC, 3, 77)
        with AdminClient(master.client_endpoint, cluster.admin_secret()) as admin:
            answer = admin.elect_master(1, timeout_s=20)
        assert answer["master_client_endpoint"] == slave.client_endpoint
        assert load.wait_acked(load.acked_count() + 100, 60), (load.outcomes, load.errors)
    finally:
        acked = load.stop()
    assert set(load.outcomes) == {"SEND_OK"}, (load.outcomes, load.errors)

    def roles() -> tuple[str, str]:
        statuses = []
        for broker in (master, slave):
            with AdminClient(broker.client_endpoint, cluster.admin_secret()) as admin:
                statuses.append(admin.status()["role"])
        return tuple(statuses)

    assert roles() == ("SLAVE", "SYNC_MASTER")
    with PullConsumer(slave.client_endpoint, group="billing") as consumer:
        assert consumer.get_offset(LOAD_TOPIC, 3) == 77
    # The roles survive restarts (the overrides win over broker.conf), the new master first.
    master.stop()
    slave.stop()
    slave.start()
    master.start()
    assert roles() == ("SLAVE", "SYNC_MASTER")
    with Producer(slave.client_endpoint, retry_timeout_s=10) as producer:
        assert producer.send(TOPIC, b"after the restart").ok
    master.stop()
    slave.stop()
    for broker in (slave, master):
        store = open_store(broker.store_dir)
        try:
            assert not missing_acknowledged(acked, messages_by_offset(store))
        finally:
            store.shutdown()


def test_a_slave_rejoins_a_restarted_master_within_its_configured_backoff(make_cluster):
    import socket
    import threading

    cluster = make_cluster(
        master_role="SYNC_MASTER",
        flush_disk_type="SYNC_FLUSH",
        slaves=1,
        slave_settings={"haReconnectBackoffMin": "50", "haReconnectBackoffMax": "1000"},
    )
    master = cluster.master
    ha_port = int(master.ha_endpoint.rsplit(":", 1)[1])
    master.kill()
    # Something at the master's address that accepts and hangs up, counting the slave's attempts:
    # a dozen failures is long enough for any backoff to grow past the configured maximum.
    attempts = []
    with socket.create_server(("127.0.0.1", ha_port)) as ghost:
        ghost.settimeout(0.2)
        stop = threading.Event()

        def answer() -> None:
            while not stop.is_set():
                try:
                    conn, _ = ghost.accept()
                except OSError:
                    continue
                attempts.append(time.monotonic())
                conn.close()

        thread = threading.Thread(target=answer, daemon=True)
        thread.start()
        try:
            wait_until(lambda: len(attempts) >= 12, 60, "the slave to fail a dozen times")
        finally:
            stop.set()
            thread.join(5)
    master.settings.update(listenPort=master.client_endpoint.rsplit(":", 1)[1], haListenPort=str(ha_port))
    master.start()
    # haReconnectBackoffMax is 1 s: the slave is back within about that (gRPC's own backoff, when
    # it stacked on ours, had grown to several seconds by then).
    wait_until(lambda: cluster.connected_slaves() == {1}, 3.0, "the slave to rejoin within its configured backoff")


def test_a_failed_static_switchover_leaves_one_master_before_and_after_restarts(make_cluster):
    import json

    from harness.local_cluster import BrokerStartError

    cluster = make_cluster(master_role="SYNC_MASTER", flush_disk_type="SYNC_FLUSH", slaves=0)
    master = cluster.master
    master_ha_port = master.ha_endpoint.rsplit(":", 1)[1]
    # The single-machine mistake: the slave's haListenPort is the master's, so it cannot serve
    # replication once master.
    slave = cluster.add_slave(1, haListenPort=master_ha_port)
    assert {r.status for r in send_all(master.client_endpoint, 0, 5)} == {SendStatus.SEND_OK}
    with AdminClient(master.client_endpoint, cluster.admin_secret()) as admin:
        with pytest.raises(BrokerError) as failed:
            admin.elect_master(1, timeout_s=20)
    assert "haListenPort" in str(failed.value)

    def roles() -> tuple[str, str]:
        statuses = []
        for broker in (master, slave):
            with AdminClient(broker.client_endpoint, cluster.admin_secret()) as admin:
                statuses.append(admin.status()["role"])
        return tuple(statuses)

    assert roles() == ("SYNC_MASTER", "SLAVE")
    assert not (slave.store_dir / "role.override").exists() and not (master.store_dir / "role.override").exists()
    wait_until(lambda: cluster.connected_slaves() == {1}, what="the slave to replicate again")
    assert {r.status for r in send_all(master.client_endpoint, 5, 5)} == {SendStatus.SEND_OK}
    # After restarts, still one master.
    master.stop()
    slave.stop()
    master.settings.update(listenPort=master.client_endpoint.rsplit(":", 1)[1], haListenPort=master_ha_port)
    master.start()
    slave.start()
    assert roles() == ("SYNC_MASTER", "SLAVE")
    wait_until(lambda: cluster.connected_slaves() == {1}, what="the slave to replicate after the restarts")
    # What the failed switchover used to leave behind: a slave overridden to master while its
    # group's master lives. It refuses to start as a second master.
    slave.stop()
    (slave.store_dir / "role.override").write_text(json.dumps({"brokerRole": "SYNC_MASTER", "haMasterAddress": ""}))
    with pytest.raises(BrokerStartError) as refused:
        slave.start()
    assert "refusing to start as a second master" in str(refused.value)
    assert not slave.running()
    with AdminClient(master.client_endpoint, cluster.admin_secret()) as admin:
        assert admin.status()["role"] == "SYNC_MASTER"
