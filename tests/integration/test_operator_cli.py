"""What a newcomer and an operator trip over (issue 34), from the outside: the `rocketstore` command
against real brokers on 127.0.0.1.

- `config get` reports the role a broker has now (after an election, after a static switchover),
  `config set --scope group` changes every broker of the group, and a mistyped key gets "did you
  mean";
- `admin elect` of the broker that is master already answers at once;
- Ctrl-C (SIGINT) to a running `produce` or `consume`: the summary, exit status 130, and the
  group's offsets committed exactly past what `consume` printed;
- a command pointed at a broker's metrics, remoting or replication port, and a slave pointed at its
  master's client port, say which port it is and which key it should be;
- a store or log directory the broker cannot use is named with its key and the fix;
- `produce` with no broker fails at once unless asked to wait, and then waits for one;
- with its master stopped, a slave's `status` says the master is unreachable (once) and its
  /readyz says it serves reads only;
- the consumer groups a broker knows and their members (gRPC pull, gRPC pop, remoting 4.x), and a
  reset refused while the group runs;
- topic list without the broker's own topics; the ready line as JSON under logFormat=json.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from client import AdminClient, BrokerError, Producer, PullConsumer
from client.remoting import RemotingConnection
from harness.local_cluster import ControllerCluster, LocalBroker, write_secret
from harness.ports import port_for_later
from pop_support import Pop
from support import BROKER_TEST_SETTINGS, cli, cli_json, http_get, wait_until
from wire.remoting import RequestCode

TOPIC = "Operator"


def command(*argv: str) -> list[str]:
    """`rocketstore ARGV` as a child process, as a user runs it."""
    return [sys.executable, "-m", "rocketstore.cli", *argv]


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCKETSTORE_")}
    env.update(PYTHONUNBUFFERED="1", **extra)
    return env


@pytest.fixture
def pair(make_cluster, monkeypatch):
    """A SYNC_MASTER and its slave, with remoting and metrics ports; the admin secret in the
    environment for the in-process commands."""
    started = make_cluster(settings={"remotingListenPort": "0", "metricsPort": "0", "slaveActingMasterDelay": "1000"})
    monkeypatch.setenv("ROCKETSTORE_ADMIN_SECRET", started.admin_secret().decode())
    return started


@pytest.fixture
def controller_group(tmp_path, etcd, request, monkeypatch):
    settings = dict(BROKER_TEST_SETTINGS)
    cluster = ControllerCluster(tmp_path / "group", etcd.endpoint, size=3, settings=settings).start()
    monkeypatch.setenv("ROCKETSTORE_ADMIN_SECRET", cluster.admin_secret().decode())
    yield cluster
    if getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed:
        print(cluster.tails())
        print(etcd.log_tail(40))
    cluster.stop()


def config_of(capsys, endpoint: str) -> dict[str, dict]:
    return {e["key"]: e for e in cli_json(capsys, "config", "get", "--endpoint", endpoint)}


# -- 2, 3, 4: config get / set, admin elect ------------------------------------------------------


def test_config_reports_the_elected_role_and_a_group_change_outlives_a_switchover(controller_group, capsys):
    cluster = controller_group
    master = cluster.wait_master(60, in_sync=3)
    slaves = [b for b in cluster.brokers if b is not master]
    mine = config_of(capsys, master.client_endpoint)["brokerRole"]
    assert (mine["value"], mine["configured_value"]) == ("SYNC_MASTER", "")
    theirs = config_of(capsys, slaves[0].client_endpoint)["brokerRole"]
    assert (theirs["value"], theirs["configured_value"]) == ("SLAVE", "SYNC_MASTER")
    code, out, _ = cli(capsys, "config", "get", "--endpoint", slaves[0].client_endpoint, "--key", "brokerRole")
    assert code == 0 and "SLAVE (configured SYNC_MASTER)" in out

    # One change for the whole group, asked of a slave: every broker takes it and says so.
    code, out, err = cli(
        capsys, "config", "set", "fileReservedTime=48", "--scope", "group", "--endpoint", slaves[0].client_endpoint
    )
    assert code == 0, err
    assert "fileReservedTime=48 on 3 broker(s) (group):" in out and out.count("changed") >= 3
    assert all(config_of(capsys, b.client_endpoint)["fileReservedTime"]["value"] == "48" for b in cluster.brokers)

    # Electing the master itself answers at once that it is (the elect would otherwise wait its
    # whole --timeout-s for the master to "catch up" with itself, and fail).
    master_id = cluster.status(master)["broker_id"]
    code, out, err = cli(
        capsys,
        "admin",
        "elect",
        "--broker",
        str(master_id),
        "--endpoint",
        slaves[0].client_endpoint,
        "--timeout-s",
        "600",
    )
    assert code == 0, err
    assert f"broker {master_id} at {master.client_endpoint} is master already" in out

    successor = slaves[1]
    successor_id = int(successor.settings["brokerId"])
    code, out, err = cli(capsys, "admin", "elect", "--broker", str(successor_id), "--endpoint", master.client_endpoint)
    assert code == 0, err
    cluster.wait_master(60, not_=master, in_sync=1)
    assert config_of(capsys, successor.client_endpoint)["fileReservedTime"]["value"] == "48"
    assert config_of(capsys, successor.client_endpoint)["brokerRole"]["value"] == "SYNC_MASTER"
    demoted = wait_until(
        lambda: (e := config_of(capsys, master.client_endpoint)["brokerRole"])["value"] == "SLAVE" and e,
        timeout_s=30,
        what="the old master to report SLAVE",
    )
    assert demoted["configured_value"] == "SYNC_MASTER"


def test_config_after_a_static_switchover_and_a_mistyped_key(pair, capsys):
    master, slave = pair.master, pair.slave_brokers[0]
    code, _, err = cli(capsys, "config", "set", "fileReservedTim=48", "--endpoint", master.client_endpoint)
    assert code == 1 and "unknown key: fileReservedTim (did you mean fileReservedTime?)" in err
    assert "not changeable" not in err

    code, out, err = cli(capsys, "admin", "elect", "--broker", "1", "--endpoint", master.client_endpoint)
    assert code == 0, err
    assert f"broker 1 at {slave.client_endpoint} is master" in out
    now_slave = wait_until(
        lambda: (e := config_of(capsys, master.client_endpoint)["brokerRole"])["value"] == "SLAVE" and e,
        timeout_s=30,
        what="the old master to report SLAVE",
    )
    assert now_slave["configured_value"] == "SYNC_MASTER"
    now_master = config_of(capsys, slave.client_endpoint)["brokerRole"]
    assert (now_master["value"], now_master["configured_value"]) == ("SYNC_MASTER", "SLAVE")
    # Electing the new master again: at once, nothing to do.
    code, out, _ = cli(capsys, "admin", "elect", "--broker", "1", "--endpoint", master.client_endpoint)
    assert code == 0 and "is master already" in out


# -- 5: Ctrl-C ------------------------------------------------------------------------------------


def interrupt_when(proc: subprocess.Popen, ready, timeout_s: float = 60) -> None:
    wait_until(lambda: proc.poll() is not None or ready(), timeout_s=timeout_s, what="the command to get going")
    assert proc.poll() is None, "the command ended before it could be interrupted"
    proc.send_signal(signal.SIGINT)


def stored(endpoint: str, secret: bytes, topic: str) -> int:
    with AdminClient(endpoint, secret) as admin:
        try:
            return sum(q["max_offset"] for q in admin.describe_topic(topic)["queues"])
        except BrokerError:  # not created yet
            return 0


@pytest.mark.parametrize("api", ["asyncio", "threads"])
def test_ctrl_c_stops_produce_with_its_summary(pair, api, tmp_path):
    master = pair.master
    topic = f"Interrupted{api}"
    proc = subprocess.Popen(
        command("produce", "--endpoint", master.client_endpoint, "--topic", topic, "--count", "100000000")
        + ["--size", "100", "--concurrency", "4", "--api", api],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(),
    )
    try:
        interrupt_when(proc, lambda: stored(master.client_endpoint, pair.admin_secret(), topic) >= 50)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "CancelledError" not in err
    ok = int(re.search(r"^\s+SEND_OK\s+(\d+)$", out, re.M).group(1))
    assert ok >= 50 and "stopped by: interrupted (Ctrl-C)" in out and "not sent" in out
    # The summary counts what the broker stored: nothing more, nothing less.
    assert stored(master.client_endpoint, pair.admin_secret(), topic) == ok


def test_ctrl_c_stops_consume_and_commits_what_it_printed(pair):
    master = pair.master
    with Producer(master.client_endpoint) as producer:
        for i in range(0, 3000, 100):
            producer.send_batch(TOPIC, [f"m{n}".encode() for n in range(i, i + 100)], queue_id=(i // 100) % 2)
    proc = subprocess.Popen(
        command("consume", "--endpoint", master.client_endpoint, "--topic", TOPIC, "--group", "interrupted")
        + ["--batch", "1", "--wait-ms", "600000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(),
    )
    printed: list[str] = []
    try:
        assert proc.stdout is not None
        while len(printed) < 40:
            line = proc.stdout.readline()
            assert line, f"consume ended early: {proc.stderr.read() if proc.stderr else ''}"
            printed.append(line)
        proc.send_signal(signal.SIGINT)
        rest, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    lines = printed + rest.splitlines(keepends=True)
    shown: dict[int, int] = {}
    for line in lines:
        found = re.match(r"queue=(\d+) offset=(\d+) ", line)
        if found:
            queue, offset = int(found.group(1)), int(found.group(2))
            shown[queue] = max(shown.get(queue, -1), offset)
    assert "stopped: interrupted (Ctrl-C)" in rest and "committed these offsets for group interrupted" in rest
    with PullConsumer(master.client_endpoint, group="interrupted") as consumer:
        committed = {q: consumer.get_offset(TOPIC, q) for q in (0, 1)}
    assert shown, "consume printed no message"
    # Each queue's offset committed just past the last message printed from it; nothing for the others.
    assert committed == {q: shown[q] + 1 if q in shown else None for q in (0, 1)}
    assert sum((committed[q] or 0) for q in (0, 1)) < 3000  # it stopped early, not at the end


# -- 6: the wrong port ----------------------------------------------------------------------------


def test_a_port_that_is_not_the_client_api_is_named(pair, capsys):
    master = pair.master
    for endpoint, key in (
        (master.ready["metrics"], "metricsPort"),
        (master.remoting_endpoint, "remotingListenPort"),
        (master.ha_endpoint, "haListenPort"),
    ):
        code, _, err = cli(capsys, "status", "--endpoint", endpoint)
        assert code == 1 and key in err and "listenPort" in err, err
        assert f"{endpoint}" in err
        code, out, _ = cli(capsys, "produce", "--endpoint", endpoint, "--topic", TOPIC, "--count", "1")
        assert code == 1 and key in out, out


def test_a_slave_given_its_masters_client_port_says_so(pair, capsys):
    master = pair.master
    confused = pair.add_slave(2, wait_connected=False, haMasterAddress=master.client_endpoint)
    with AdminClient(confused.client_endpoint, pair.admin_secret()) as admin:
        error = wait_until(
            lambda: admin.status()["replication_error"], timeout_s=30, what="the slave's replication error"
        )
    assert f"haMasterAddress {master.client_endpoint}" in error and "haListenPort" in error, error
    assert "listenPort" in error


# -- the image's health check (issue 32, item 13) --------------------------------------------------


def test_health_asks_the_broker_its_arguments_describe(pair, tmp_path, capsys):
    """What the broker image's health check runs: the broker found from the arguments it was
    started with (a broker.conf, or flags only), on whatever port they give."""
    master = pair.master
    port = master.client_endpoint.rsplit(":", 1)[1]
    conf = tmp_path / "broker.conf"
    conf.write_text(f"listenPort={port}\nbrokerIP1=127.0.0.1\nhaSecretFile={pair.secret_file}\n")
    flags_only = tmp_path / "flags.args"
    flags_only.write_text(f"--listenPort={port}\0--haSecretFile={pair.secret_file}\0--brokerIP1=127.0.0.1\0")
    with_conf = tmp_path / "conf.args"
    with_conf.write_text(f"-c\0{conf}\0")
    for argv in (["-c", str(conf)], ["--broker-args", str(flags_only)], ["--broker-args", str(with_conf)]):
        code, out, err = cli(capsys, "health", *argv)
        assert code == 0, err
        assert out.startswith("SYNC_MASTER max offset "), out
    wrong = tmp_path / "wrong.args"
    wrong.write_text(f"--listenPort={master.ha_endpoint.rsplit(':', 1)[1]}\0--haSecretFile={pair.secret_file}\0")
    code, _, err = cli(capsys, "health", "--broker-args", str(wrong))
    assert code == 1 and "haListenPort" in err


# -- 7: store paths -------------------------------------------------------------------------------


def test_a_store_or_log_directory_the_broker_cannot_use_is_named(tmp_path):
    secret = write_secret(tmp_path / "secret")
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory\n")
    common = ["--listenPort=0", "--haListenPort=0", f"--haSecretFile={secret}"]
    for key, value in (("storePathRootDir", f"{a_file}/store"), ("brokerLogDir", f"{a_file}/logs")):
        settings = {"storePathRootDir": str(tmp_path / "store"), key: value}
        done = subprocess.run(
            command("broker", *common, *(f"--{k}={v}" for k, v in settings.items())),
            capture_output=True,
            text=True,
            timeout=120,
            env=child_env(),
        )
        assert done.returncode == 1, done.stderr
        last = done.stderr.strip().splitlines()[-1]
        assert last.startswith(f"rocketstore broker: error: {key}={value}: cannot use ") and "Not a directory" in last
        assert f"point {key} at a directory" in last and "Errno" not in last and "Traceback" not in done.stderr


# -- 10: no broker, a stopped master --------------------------------------------------------------


def test_produce_with_no_broker_fails_at_once_unless_asked_to_wait(tmp_path):
    port = port_for_later()
    endpoint = f"127.0.0.1:{port}"
    # A retry window far beyond the test's own deadline: only a send that does not wait ends here.
    done = subprocess.run(
        command("produce", "--endpoint", endpoint, "--topic", TOPIC, "--count", "1", "--retry-timeout-s", "3600"),
        capture_output=True,
        text=True,
        timeout=120,
        env=child_env(),
    )
    assert done.returncode == 1 and "Connection refused" in done.stdout, done.stdout + done.stderr

    waiting = subprocess.Popen(
        command("produce", "--endpoint", endpoint, "--topic", TOPIC, "--count", "1", "--wait-for-broker")
        + ["--retry-timeout-s", "300", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(),
    )
    broker = LocalBroker(
        "late",
        tmp_path / "late",
        dict(BROKER_TEST_SETTINGS, brokerRole="ASYNC_MASTER", listenPort=str(port), haListenPort="0")
        | {"haSecretFile": str(write_secret(tmp_path / "secret"))},
    )
    try:
        broker.start()
        out, err = waiting.communicate(timeout=300)
    finally:
        if waiting.poll() is None:
            waiting.kill()
        broker.stop()
    assert waiting.returncode == 0, err
    assert json.loads(out)["statuses"] == {"SEND_OK": 1}


def test_a_slave_whose_master_stopped_says_so(pair, capsys):
    master, slave = pair.master, pair.slave_brokers[0]
    assert http_get(slave.ready["metrics"], "/readyz") == (
        200,
        f"ready: reads; writes go to the master at {master.client_endpoint}\n",
    )
    master.stop()
    # Acting for its master (slaveActingMasterDelay=1000 here), the slave serves reads only.
    status, text = wait_until(
        lambda: (a := http_get(slave.ready["metrics"], "/readyz"))[0] == 200 and "reads only" in a[1] and a,
        timeout_s=60,
        what="/readyz to say the slave serves reads only",
    )
    assert f"the master at {master.ha_endpoint} is unreachable" in text and "no writes" in text
    code, out, _ = cli(capsys, "status", "--endpoint", slave.client_endpoint)
    assert code == 1
    assert f"master {master.ha_endpoint} UNREACHABLE (last heard from at " in out
    assert "master max offset" not in out and "bytes behind" not in out
    assert out.count("Connection refused") <= 1 and out.count("UNAVAILABLE") <= 1
    assert "serves reads for it (enableSlaveActingMaster)" in out


# -- smaller: consumer groups, members, resets, system topics, JSON ready line ---------------------


def test_consumer_groups_their_members_and_a_reset_refused_while_they_run(pair, capsys):
    master = pair.master
    at = ("--endpoint", master.client_endpoint)
    with Producer(master.client_endpoint) as producer:
        for i in range(6):
            assert producer.send(TOPIC, f"m{i}".encode(), queue_id=i % 2).ok
    puller = PullConsumer(master.client_endpoint, group="pullers")
    pop = Pop(master.client_endpoint, TOPIC, "poppers")

    async def remoting_member() -> RemotingConnection:
        conn = await RemotingConnection.open(master.remoting_endpoint)
        beat = {
            "clientID": "127.0.0.1@4x",
            "language": "JAVA",
            "version": 453,
            "consumerDataSet": [{"groupName": "fourx", "subscriptionDataSet": [{"topic": TOPIC, "subString": "*"}]}],
        }
        assert (await conn.request(RequestCode.HEART_BEAT, body=json.dumps(beat).encode())).code == 0
        return conn

    loop = asyncio.new_event_loop()
    conn = loop.run_until_complete(remoting_member())
    try:
        page = puller.pull(TOPIC, 0, 0, max_messages=2)
        puller.update_offset(TOPIC, 0, page.next_offset)
        _, popped = pop.receive(batch=1)
        assert popped
        groups = {g["group"]: g for g in cli_json(capsys, "consumer", "list", *at)}
        assert groups["pullers"]["online_clients"] == 1 and groups["pullers"]["protocols"] == ["GRPC_PULL"]
        assert groups["pullers"]["topics"] == [TOPIC] and groups["pullers"]["lag"] == 4
        assert groups["poppers"]["protocols"] == ["GRPC_POP"] and groups["poppers"]["pop"] is True
        assert groups["fourx"]["protocols"] == ["REMOTING"] and groups["fourx"]["topics"] == [TOPIC]
        code, out, _ = cli(capsys, "consumer", "list", *at)
        assert code == 0 and "gRPC pull" in out and "gRPC pop" in out and "remoting 4.x" in out

        described = cli_json(capsys, "consumer", "progress", *at, "--group", "pullers")
        [member] = described["members"]
        assert member["protocol"] == "GRPC_PULL" and member["address"].startswith("127.0.0.1:")
        assert member["last_seen_ms"] > 0 and member["topics"] == [TOPIC]
        offsets = {q["queue_id"]: q["consumer_offset"] for q in described["queues"]}
        assert (offsets[0], offsets[1]) == (2, -1)
        [fourx] = cli_json(capsys, "consumer", "progress", *at, "--group", "fourx")["members"]
        assert (fourx["client_id"], fourx["language"], fourx["version"]) == ("127.0.0.1@4x", "JAVA", "453")
        code, out, _ = cli(capsys, "consumer", "progress", *at, "--group", "pullers")
        assert code == 0 and "1 member(s) online" in out and "gRPC pull" in out

        reset = ("consumer", "reset", *at, "--group", "pullers", "--topic", TOPIC, "--to-earliest", "--execute")
        code, _, err = cli(capsys, *reset)
        assert code == 1 and "has 1 consumer(s) online" in err and "Stop them first" in err
        assert cli_json(capsys, *reset, "--force")["applied"] is True
    finally:
        puller.close()
        pop.close()
        conn.close()
        loop.run_until_complete(asyncio.sleep(0.1))  # the transport closes on the loop
        loop.close()
    # The pull consumer said goodbye when it closed: the group is idle, the reset goes through.
    assert cli_json(capsys, "consumer", "progress", *at, "--group", "pullers")["members"] == []
    code, out, err = cli(
        capsys, "consumer", "reset", *at, "--group", "pullers", "--topic", TOPIC, "--to-latest", "--execute"
    )
    assert code == 0 and "reset group pullers" in out, err


def test_topic_list_leaves_the_brokers_own_topics_out(pair, capsys):
    at = ("--endpoint", pair.master.client_endpoint)
    cli_json(capsys, "topic", "create", *at, "--topic", TOPIC)
    plain = cli_json(capsys, "topic", "list", *at)
    assert [t["name"] for t in plain] == [TOPIC] and plain[0]["system"] is False
    every = {t["name"]: t for t in cli_json(capsys, "topic", "list", *at, "--system")}
    assert every[TOPIC]["system"] is False
    assert every["SCHEDULE_TOPIC_XXXX"]["system"] is True and len(every) > 1
    code, out, _ = cli(capsys, "topic", "list", *at)
    assert code == 0 and "SCHEDULE_TOPIC_XXXX" not in out


def test_the_ready_line_is_json_when_the_logs_are(tmp_path):
    broker = LocalBroker(
        "json",
        tmp_path / "json",
        dict(BROKER_TEST_SETTINGS, brokerRole="ASYNC_MASTER", listenPort="0", haListenPort="0", logFormat="json")
        | {"haSecretFile": str(write_secret(tmp_path / "secret"))},
    )
    broker.start()
    try:
        lines = [line for line in broker.stdout_path.read_text().splitlines() if line.strip()]
        assert lines and all(line.startswith("{") for line in lines)
        record = json.loads(lines[0])
        assert record["level"] == "INFO" and record["message"].startswith("rocketstore broker ready: ")
        assert record["ready"]["client"] == broker.client_endpoint and record["ready"]["role"] == "ASYNC_MASTER"
    finally:
        broker.stop()
    stderr = broker.stderr_path.read_text().splitlines()
    assert stderr and all(line.startswith("{") for line in stderr if line.strip())


def test_the_python_example_secret_path_is_the_examples_one():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    examples = (Path(__file__).resolve().parents[2] / "examples" / "master.conf").read_text()
    documented = set(re.findall(r"/etc/rocketstore/[\w.]+", readme))
    assert (
        documented == set(re.findall(r"/etc/rocketstore/[\w.]+", examples)) == {"/etc/rocketstore/replication_secret"}
    )
