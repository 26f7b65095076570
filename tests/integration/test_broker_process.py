"""The `rocketstore broker` process: start-up, ports, clean and unclean stops, configuration
errors, hostile client input, and mutual TLS on the replication stream."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from client import AdminClient, AuthenticationError, Producer, PullConsumer, SendStatus, TransportError
from pki_support import make_ca, make_cert, tls_broker_settings
from support import wait_until

TOPIC = "ProcTopic"


def run_broker(tmp_path: Path, *args: str, timeout_s: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rocketstore.cli", "broker", f"--storePathRootDir={tmp_path / 'store'}", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def test_broker_prints_its_ports_serves_and_shuts_down_cleanly(make_cluster):
    cluster = make_cluster(master_role="ASYNC_MASTER", flush_disk_type="SYNC_FLUSH", slaves=0)
    master = cluster.master
    host, port = master.client_endpoint.rsplit(":", 1)
    assert host == "127.0.0.1" and int(port) > 0
    assert int(master.ha_endpoint.rsplit(":", 1)[1]) > 0
    with Producer(master.client_endpoint) as producer:
        result = producer.send(TOPIC, b"hello", tag="t1")
    assert result.status is SendStatus.SEND_OK
    # The message carries the port the broker really bound (its msgId encodes the store host).
    assert result.msg_id
    assert (master.store_dir / "abort").exists()
    assert master.stop() == 0
    assert not (master.store_dir / "abort").exists()
    log_text = (master.directory / "logs" / "broker.log").read_text()
    assert "shut down cleanly" in log_text
    assert cluster.admin_secret().decode() not in log_text + master.tail(100_000)


def test_a_second_start_after_kill_recovers(make_cluster):
    cluster = make_cluster(master_role="ASYNC_MASTER", flush_disk_type="SYNC_FLUSH", slaves=0)
    master = cluster.master
    with Producer(master.client_endpoint) as producer:
        sent = [producer.send(TOPIC, f"m{i}".encode(), queue_id=0) for i in range(20)]
    master.kill()
    assert (master.store_dir / "abort").exists()
    master.start()
    with PullConsumer(master.client_endpoint, group="g") as consumer:
        page = consumer.pull(TOPIC, 0, 0, max_messages=64)
    assert [m.msg_id for m in page.messages] == [r.msg_id for r in sent]


@pytest.mark.parametrize("on_loop", ["true", "false"])
def test_sync_puts_replicate_with_the_stream_on_event_loops_or_on_threads(make_cluster, on_loop):
    cluster = make_cluster(
        master_role="SYNC_MASTER", flush_disk_type="SYNC_FLUSH", settings={"haStreamOnEventLoop": on_loop}
    )
    with Producer(cluster.master.client_endpoint) as producer:
        sent = [producer.send(TOPIC, f"m{i}".encode(), queue_id=0) for i in range(30)]
    assert {r.status for r in sent} == {SendStatus.SEND_OK}
    with PullConsumer(cluster.slave_brokers[0].client_endpoint, group="g") as consumer:

        def all_served():
            page = consumer.pull(TOPIC, 0, 0, max_messages=64)
            return page if len(page.messages) >= len(sent) else None

        page = wait_until(all_served, what="the slave to serve every acknowledged message")
    assert [m.msg_id for m in page.messages] == [r.msg_id for r in sent]


def test_unknown_key_is_an_error_naming_it(tmp_path):
    done = run_broker(tmp_path, "--haSecret=0123456789abcdef0123", "--listenPort=0", "--haListenPort=0", "--bogusKey=1")
    assert done.returncode == 1
    assert "bogusKey" in done.stderr
    assert "Traceback" not in done.stderr


def test_broker_without_a_secret_refuses_to_start(tmp_path):
    done = run_broker(tmp_path, "--listenPort=0", "--haListenPort=0", "--brokerIP1=127.0.0.1")
    assert done.returncode == 1
    assert "haSecret" in done.stderr
    assert not (tmp_path / "store" / "abort").exists()


def test_slave_without_a_master_address_is_a_config_error(tmp_path):
    done = run_broker(
        tmp_path, "--brokerRole=SLAVE", "--brokerId=1", "--haSecret=0123456789abcdef0123", "--listenPort=0"
    )
    assert done.returncode == 1
    assert "haMasterAddress" in done.stderr


def test_a_group_whose_slave_cannot_start_leaves_no_broker_running(make_cluster):
    from harness.local_cluster import BrokerStartError

    cluster = make_cluster(start=False, slave_settings={"flushDiskType": "NOT_A_FLUSH_TYPE"})
    with pytest.raises(BrokerStartError) as refused:
        cluster.start()
    assert "flushDiskType" in str(refused.value)
    master, slave = cluster.brokers
    assert master.ready  # the master had started: the failure came after it
    assert not master.running() and not slave.running()


def test_port_in_use_is_a_clear_error(make_cluster, tmp_path):
    cluster = make_cluster(master_role="ASYNC_MASTER", flush_disk_type="ASYNC_FLUSH", slaves=0)
    port = cluster.master.client_endpoint.rsplit(":", 1)[1]
    done = run_broker(tmp_path, "--haSecret=0123456789abcdef0123", f"--listenPort={port}", "--haListenPort=0")
    assert done.returncode == 1
    assert "listenPort" in done.stderr


def test_hostile_client_requests_get_errors_and_the_broker_keeps_serving(make_cluster):
    cluster = make_cluster(master_role="SYNC_MASTER", flush_disk_type="SYNC_FLUSH", slaves=1)
    endpoint = cluster.master.client_endpoint
    with grpc.insecure_channel(endpoint) as channel:
        for method in ("SendMessage", "PullMessage", "QueryRoute", "UpdateOffset"):
            path = f"/apache.rocketmq.v2.MessagingService/{method}"
            garbage = bytes(range(256)) * 4
            if method == "PullMessage":
                call = channel.unary_stream(path)
                with pytest.raises(grpc.RpcError) as info:
                    list(call(garbage, timeout=10))
            else:
                call = channel.unary_unary(path)
                with pytest.raises(grpc.RpcError) as info:
                    call(garbage, timeout=10)
            assert info.value.code() in (grpc.StatusCode.INTERNAL, grpc.StatusCode.INVALID_ARGUMENT)
        with pytest.raises(grpc.RpcError) as info:
            channel.unary_unary("/rocketstore.admin.v1.Admin/GetStatus")(b"", timeout=10)
        assert info.value.code() is grpc.StatusCode.UNAUTHENTICATED
    with AdminClient(endpoint, b"not-the-secret-at-all-0123") as admin:
        with pytest.raises(AuthenticationError):
            admin.status()
    with Producer(endpoint) as producer:
        assert producer.send(TOPIC, b"still serving").status is SendStatus.SEND_OK


# -- mutual TLS on the replication stream ---------------------------------------------------------


def tls_settings(directory: Path, ca: str, name: str) -> dict[str, str]:
    return {
        "haTlsCertFile": str(directory / f"{name}.crt"),
        "haTlsKeyFile": str(directory / f"{name}.key"),
        "haTlsCaFile": str(directory / f"{ca}.crt"),
    }


def test_replication_over_mutual_tls_and_a_foreign_certificate_is_refused(make_cluster, tmp_path):
    pki = tmp_path / "pki"
    make_ca(pki, "ca")
    make_ca(pki, "other-ca")
    for name in ("master", "slave1"):
        make_cert(pki, "ca", name)
    make_cert(pki, "other-ca", "intruder")
    cluster = make_cluster(
        start=False,
        master_role="SYNC_MASTER",
        flush_disk_type="SYNC_FLUSH",
        slaves=0,
        settings=tls_settings(pki, "ca", "master"),
    )
    cluster.start()
    cluster.slave_settings = tls_settings(pki, "ca", "slave1")
    cluster.add_slave(1)

    def slave_connected() -> bool:
        with AdminClient(cluster.master.client_endpoint, cluster.admin_secret()) as admin:
            return len(admin.status().get("slaves", [])) == 1

    wait_until(slave_connected, what="the slave to connect over mutual TLS")
    with Producer(cluster.master.client_endpoint) as producer:
        assert producer.send(TOPIC, b"over mTLS").status is SendStatus.SEND_OK
    cluster.slave_settings = tls_settings(pki, "ca", "intruder")
    cluster.slave_settings["haTlsCaFile"] = str(pki / "ca.crt")
    intruder = cluster.add_slave(2, wait_connected=False)

    def intruder_error() -> str:
        with AdminClient(intruder.client_endpoint, cluster.admin_secret()) as admin:
            return admin.status().get("replication_error", "")

    assert "TLS handshake with the master failed" in wait_until(intruder_error, what="the intruder's stream to fail")
    assert "TLS handshake with the master failed" in intruder.tail()
    with AdminClient(cluster.master.client_endpoint, cluster.admin_secret()) as admin:
        status = admin.status()
    assert [int(s["broker_id"]) for s in status["slaves"]] == [1]
    assert intruder.running()


def test_client_api_over_tls(make_cluster, tmp_path):
    pki = tmp_path / "pki"
    cluster = make_cluster(
        master_role="ASYNC_MASTER", flush_disk_type="ASYNC_FLUSH", slaves=0, settings=tls_broker_settings(pki)
    )
    endpoint = cluster.master.client_endpoint
    with Producer(endpoint, tls_ca_file=str(pki / "ca.crt")) as producer:
        assert producer.send(TOPIC, b"over TLS").status is SendStatus.SEND_OK
    with AdminClient(endpoint, cluster.admin_secret(), tls_ca_file=str(pki / "ca.crt")) as admin:
        assert admin.status()["role"] == "ASYNC_MASTER"
    # A plaintext client cannot talk to a TLS port.
    with Producer(endpoint, timeout_s=3) as producer:
        with pytest.raises(TransportError):
            producer.send(TOPIC, b"in the clear")


def test_nothing_a_broker_writes_is_readable_by_other_users(make_cluster):
    import stat

    cluster = make_cluster(master_role="SYNC_MASTER", flush_disk_type="SYNC_FLUSH", slaves=1)
    with Producer(cluster.master.client_endpoint) as producer:
        assert producer.send(TOPIC, b"private").status is SendStatus.SEND_OK
    cluster.stop()
    exposed, logs = [], []
    for broker in cluster.brokers:
        logs += list(broker.directory.rglob("broker.log"))
        for path in [broker.store_dir, *broker.store_dir.rglob("*"), *logs]:
            mode = stat.S_IMODE(path.lstat().st_mode)
            if mode & 0o077:
                exposed.append(f"{path} {mode:o}")
    assert len(logs) == 2
    assert not exposed, exposed


def test_grpc_core_lines_come_out_in_the_brokers_format(tmp_path):
    """gRPC's C core writes to descriptor 2 itself; the broker logs those lines as its own."""
    env = dict(os.environ, GRPC_VERBOSITY="debug")
    broker = subprocess.Popen(
        [
            sys.executable, "-m", "rocketstore.cli", "broker", f"--storePathRootDir={tmp_path / 'store'}",
            "--haSecret=0123456789abcdef0123", "--listenPort=0", "--haListenPort=0",
        ],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        assert "rocketstore broker ready" in broker.stdout.readline()
    finally:
        broker.terminate()
        _, err = broker.communicate(timeout=60)
    assert broker.returncode == 0, err
    lines = [line for line in err.splitlines() if line]
    assert any(" grpc.core: " in line for line in lines), err
    stamp = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d [A-Z]+ ")
    assert [line for line in lines if not stamp.match(line)] == []
    assert " grpc.core: " in (tmp_path / "store" / "logs" / "broker.log").read_text()


def test_a_telemetry_stream_that_never_reads_is_dropped_and_the_broker_stays_small(make_cluster):
    """Issue 30: a client that sends settings but never reads the answers grew the broker without
    bound (58 to 259 MiB in 25 s: the stream's outbox had no limit). The outbox is bounded now:
    the stream is dropped (logged once), the broker stops reading it, and the call ends
    RESOURCE_EXHAUSTED once the client reads what grpc already holds for it."""
    import threading
    import time

    from support import proc_status
    from wire.rpc import messaging_pb2 as pb
    from wire.rpc import messaging_pb2_grpc

    cluster = make_cluster(master_role="ASYNC_MASTER", flush_disk_type="ASYNC_FLUSH", slaves=0)
    master = cluster.master
    assert master.process is not None
    # About 100 KiB of announced topics, which the broker's answer repeats.
    topics = [pb.Resource(name=f"T{i:04d}" + "x" * 115) for i in range(800)]
    settings = pb.Settings(client_type=pb.PRODUCER, publishing=pb.Publishing(topics=topics))
    command = pb.TelemetryCommand(settings=settings)
    sends, sent, stop = 1500, [0], threading.Event()

    def commands():
        for _ in range(sends):
            if stop.is_set():
                return
            sent[0] += 1
            yield command

    with grpc.insecure_channel(master.client_endpoint) as channel:
        stub = messaging_pb2_grpc.MessagingServiceStub(channel)
        # A stream that reads: answered as usual (and every code path warmed before the baseline).
        polite = stub.Telemetry(iter([command]), timeout=30)
        assert next(polite).status.code == pb.OK
        polite.cancel()
        baseline = proc_status(master.process.pid, "VmRSS")
        call = stub.Telemetry(commands(), timeout=120)
        try:
            # Sending stops when the broker no longer reads the stream (flow control), at the latest
            # after all of them; wait until the count has not moved for 3 s.
            deadline, last, since = time.monotonic() + 90, -1, time.monotonic()
            while sent[0] < sends and time.monotonic() < deadline and time.monotonic() - since < 3:
                if sent[0] != last:
                    last, since = sent[0], time.monotonic()
                time.sleep(0.1)
            grown = proc_status(master.process.pid, "VmRSS") - baseline
            assert sent[0] < sends, "the broker read every command of a stream that does not read"
            assert grown < 64 * 1024 * 1024, f"the broker grew by {grown >> 20} MiB ({sent[0]} commands sent)"
            answers = 0
            with pytest.raises(grpc.RpcError) as ended:
                for _ in call:
                    answers += 1
            assert ended.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED, ended.value
            assert "dropped" in ended.value.details() and answers < sent[0]
        finally:
            stop.set()
            call.cancel()
    log = (master.directory / "logs" / "broker.log").read_text()
    assert log.count("dropped the Telemetry stream") == 1
    with Producer(master.client_endpoint) as producer:
        assert producer.send(TOPIC, b"still serving").status is SendStatus.SEND_OK


def test_a_captured_admin_header_is_refused_by_another_broker_and_with_another_body(make_cluster):
    """Issue 30: a SetBrokerConfig header used once on the slave was accepted by the master with
    another body. A signature binds the broker's identity and the request's bytes now."""
    from wire.admin_auth import AdminCaller, Signer
    from wire.rpc import admin_pb2

    cluster = make_cluster(master_role="SYNC_MASTER", flush_disk_type="ASYNC_FLUSH", slaves=1)
    master, slave = cluster.master, cluster.slave_brokers[0]
    method = "/rocketstore.admin.v1.Admin/SetBrokerConfig"
    harmless = admin_pb2.SetBrokerConfigRequest(values={"autoCreateTopicPerMinute": "61"}).SerializeToString()
    hostile = admin_pb2.SetBrokerConfigRequest(values={"autoCreateTopicEnable": "false"}).SerializeToString()

    def set_config(endpoint: str, body: bytes, metadata) -> grpc.StatusCode:
        with grpc.insecure_channel(endpoint) as channel:
            call = channel.unary_unary(method, request_serializer=None, response_deserializer=None)
            try:
                call(body, metadata=metadata, timeout=10)
            except grpc.RpcError as exc:
                return exc.code()
            return grpc.StatusCode.OK

    with grpc.insecure_channel(slave.client_endpoint) as channel:
        slave_identity = AdminCaller(channel, cluster.admin_secret()).identity(10)
    assert (slave_identity.broker_name, slave_identity.broker_id) == ("broker-a", 1)
    captured = Signer(cluster.admin_secret()).metadata(method, slave_identity, harmless)
    assert set_config(slave.client_endpoint, harmless, captured) is grpc.StatusCode.OK
    refusals = [
        set_config(master.client_endpoint, hostile, captured),  # another broker, another body
        set_config(master.client_endpoint, harmless, captured),  # another broker
        set_config(slave.client_endpoint, hostile, captured),  # another body
        set_config(slave.client_endpoint, harmless, captured),  # the same call again
    ]
    assert refusals == [grpc.StatusCode.UNAUTHENTICATED] * 4
    with AdminClient(master.client_endpoint, cluster.admin_secret()) as admin:
        config = {e["key"]: e["value"] for e in admin.broker_config()}
        assert config["autoCreateTopicEnable"] == "true" and config["autoCreateTopicPerMinute"] == "60"
    log = (master.directory / "logs" / "broker.log").read_text()
    assert "refused /rocketstore.admin.v1.Admin/SetBrokerConfig" in log and "signed for another broker" in log


def test_undecodable_replication_requests_are_refused_with_a_line_of_log_not_a_traceback_each(make_cluster):
    """Issue 30, found by the fuzzer: bytes that do not decode sent to the replication port (no
    credentials needed) answered INTERNAL and logged an ERROR with a traceback each (~5,200 in
    300 s). They are answered INVALID_ARGUMENT now, and the log gets a line per peer host and 10 s."""
    import time

    from wire.rpc import ha_pb2

    cluster = make_cluster(master_role="ASYNC_MASTER", flush_disk_type="ASYNC_FLUSH", slaves=0)
    master = cluster.master
    garbage = bytes(range(256)) * 4  # field number 0 first: no message decodes from it
    methods = ("Hello", "GetEpochs", "GetMetadata", "HandBackPopEvents")
    answers: dict[str, set] = {m: set() for m in methods}
    began = time.monotonic()
    with grpc.insecure_channel(master.ha_endpoint) as channel:
        for method in methods:
            call = channel.unary_unary(f"/rocketstore.ha.v1.Replication/{method}")
            for _ in range(25):
                with pytest.raises(grpc.RpcError) as refused:
                    call(garbage, timeout=10)
                answers[method].add((refused.value.code(), "malformed request" in refused.value.details()))
        elapsed_s = time.monotonic() - began
        # A request that decodes is served as before.
        hello = channel.unary_unary(
            "/rocketstore.ha.v1.Replication/Hello",
            request_serializer=ha_pb2.HelloRequest.SerializeToString,
            response_deserializer=ha_pb2.HelloResponse.FromString,
        )
        answer = hello(
            ha_pb2.HelloRequest(client_nonce=os.urandom(32), broker_name="broker-a", broker_id=1), timeout=10
        )
        assert answer.broker_name == "broker-a" and answer.server_proof
    assert answers == {m: {(grpc.StatusCode.INVALID_ARGUMENT, True)} for m in methods}
    log = (master.directory / "logs" / "broker.log").read_text()
    assert "Traceback" not in log and "Exception deserializing" not in log
    lines = [line for line in log.splitlines() if "malformed request to /rocketstore.ha.v1.Replication/" in line]
    # One window of 10 s per peer host: more only on a machine so slow that the calls took longer.
    assert 1 <= len(lines) <= 1 + int(elapsed_s // 10), lines
