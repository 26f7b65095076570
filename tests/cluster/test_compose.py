"""The shipped docker-compose.yml itself: brought up under a project name of the test's own, a
master elected, a topic created, messages produced with sync replication through the published
client port and consumed back from a slave's, the brokers' published metrics scraped, then
everything removed (volumes included). `make cluster PROFILE=two-groups`: both groups elected and
every broker healthy, a second `make cluster` that restarts nothing, broker.log kept on its volume
across a recreated container. Compose run from another directory takes the project name from the
checkout's .env, not from the directory's name."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from client import AdminClient, Producer, PullConsumer
from harness.compose_status import GROUP_B, PUBLISHED, ask, master_of
from harness.local_cluster import poll_until

ROOT = Path(__file__).resolve().parents[2]
PROJECT_PREFIX = "rstest"


def compose(project: str, *args: str, timeout_s: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, RS_COMPOSE_PROJECT=project)
    return subprocess.run(
        [str(ROOT / "deploy" / "compose.sh"), *args], env=env, capture_output=True, text=True, timeout=timeout_s
    )


def metrics_of(client_endpoint: str) -> dict[tuple[str, tuple], float]:
    """The broker's /metrics (the compose file publishes it 3 ports above the client port)."""
    host, port = client_endpoint.rsplit(":", 1)
    with urllib.request.urlopen(f"http://{host}:{int(port) + 3}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_the_shipped_compose_file_runs_a_replicated_group():
    project = f"{PROJECT_PREFIX}{secrets.token_hex(4)}"
    secret = (ROOT / ".cluster" / "replication_secret").read_text().strip().encode()
    try:
        up = compose(project, "up", "-d")
        assert up.returncode == 0, up.stderr
        answers = poll_until(lambda: (a := ask(PUBLISHED, secret)) and master_of(a, 3) and a, 120)
        assert answers, f"no master with two slaves:\n{compose(project, 'logs', '--tail=40').stdout}"
        master = master_of(answers, 3)
        master_port = next(e for e, a in answers.items() if a is master)
        slave_port = next(e for e in PUBLISHED if e != master_port)
        with AdminClient(master_port, secret) as admin:
            admin.create_topic("ComposeSmoke", 2)
        with Producer(master_port, timeout_s=10) as producer:
            sent = [producer.send("ComposeSmoke", f"m{i}".encode(), queue_id=i % 2) for i in range(100)]
        assert all(r.ok for r in sent), {r.status.name for r in sent}

        def on_slave() -> list[bytes]:
            with PullConsumer(slave_port) as consumer:
                return [m.body for q in (0, 1) for m in consumer.pull("ComposeSmoke", q, 0, max_messages=100).messages]

        assert poll_until(lambda: len(on_slave()) == 100, 60)
        assert sorted(on_slave()) == sorted(f"m{i}".encode() for i in range(100))
        on_master = metrics_of(master_port)
        assert on_master[("rocketmq_messages_in_total", (("topic", "ComposeSmoke"),))] == 100
        assert on_master[("rocketstore_broker_is_master", ())] == 1
        assert poll_until(lambda: metrics_of(master_port)[("rocketstore_in_sync_replicas", ())] == 3, 30)
        assert metrics_of(slave_port)[("rocketmq_messages_in_total", (("topic", "ComposeSmoke"),))] == 100
    finally:
        down = compose(project, "down", "--volumes", "--remove-orphans")
        assert down.returncode == 0, down.stderr


def test_the_two_groups_profile_runs_one_cluster_of_two_groups():
    project = f"{PROJECT_PREFIX}{secrets.token_hex(4)}"
    secret = (ROOT / ".cluster" / "replication_secret").read_text().strip().encode()
    try:
        up = compose(project, "--profile", "two-groups", "up", "-d")
        assert up.returncode == 0, up.stderr
        masters = {}
        for name, endpoints, size in (("broker-a", PUBLISHED, 3), ("broker-b", GROUP_B, 2)):
            answers = poll_until(lambda: (a := ask(endpoints, secret)) and master_of(a, size) and a, 120)
            assert answers, f"no master in {name}:\n{compose(project, 'logs', '--tail=40').stdout}"
            master = master_of(answers, size)
            masters[name] = next(e for e, a in answers.items() if a is master)
        for endpoint in masters.values():
            with AdminClient(endpoint, secret) as admin:
                admin.create_topic("TwoGroups", 4)

        def route_groups() -> set[str]:
            with PullConsumer(masters["broker-a"]) as consumer:
                return {q.broker_name for q in consumer.route("TwoGroups") if q.broker_id == 0 and q.writable}

        assert poll_until(lambda: route_groups() == {"broker-a", "broker-b"}, 60), route_groups()
        with Producer(masters["broker-a"], timeout_s=10) as producer:
            sent = [producer.send("TwoGroups", f"m{i}".encode()) for i in range(40)]
        assert all(r.ok for r in sent)
        assert {r.broker_name for r in sent} == {"broker-a", "broker-b"}
    finally:
        down = compose(project, "--profile", "two-groups", "down", "--volumes", "--remove-orphans")
        assert down.returncode == 0, down.stderr


def make(project: str, *targets: str, timeout_s: float = 900) -> subprocess.CompletedProcess:
    env = dict(os.environ, RS_COMPOSE_PROJECT=project)
    return subprocess.run(
        ["make", "-C", str(ROOT), *targets], env=env, capture_output=True, text=True, timeout=timeout_s
    )


def containers(project: str) -> dict[str, dict]:
    """The project's containers by service: id, start time, health."""
    ids = subprocess.run(
        ["docker", "ps", "-q", "--filter", f"label=com.docker.compose.project={project}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    if not ids:
        return {}
    inspected = json.loads(
        subprocess.run(["docker", "inspect", *ids], capture_output=True, text=True, check=True).stdout
    )
    return {
        c["Config"]["Labels"]["com.docker.compose.service"]: {
            "id": c["Id"],
            "started": c["State"]["StartedAt"],
            "health": (c["State"].get("Health") or {}).get("Status", "none"),
        }
        for c in inspected
    }


def broker_log(project: str, service: str) -> str:
    done = subprocess.run(
        ["docker", "exec", containers(project)[service]["id"], "cat", "/var/lib/rocketstore/logs/broker.log"],
        capture_output=True,
        text=True,
    )
    return done.stdout if done.returncode == 0 else ""


def test_make_cluster_runs_both_groups_healthy_and_again_restarts_nothing():
    project = f"{PROJECT_PREFIX}{secrets.token_hex(4)}"
    try:
        first = make(project, "cluster", "PROFILE=two-groups")
        assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
        # compose_status printed a table for each group once it had a master and every slave.
        assert first.stdout.count("controller mode: master broker") == 2, first.stdout[-3000:]
        brokers = {"broker0", "broker1", "broker2", "broker-b0", "broker-b1"}
        healthy = poll_until(
            lambda: (c := containers(project)) and all(c.get(b, {}).get("health") == "healthy" for b in brokers) and c,
            180,
        )
        assert healthy, {name: c["health"] for name, c in containers(project).items()}
        assert poll_until(lambda: "rocketstore broker ready" in broker_log(project, "broker-b1"), 60)

        again = make(project, "cluster", "PROFILE=two-groups")
        assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
        after = containers(project)
        assert {s: (c["id"], c["started"]) for s, c in after.items()} == {
            s: (c["id"], c["started"]) for s, c in healthy.items()
        }

        # A recreated broker container finds its log where it left it.
        before = broker_log(project, "broker0")
        assert "rocketstore broker ready" in before
        recreated = compose(project, "--profile", "two-groups", "up", "-d", "--force-recreate", "--no-deps", "broker0")
        assert recreated.returncode == 0, recreated.stderr
        assert containers(project)["broker0"]["id"] != healthy["broker0"]["id"]
        assert poll_until(lambda: broker_log(project, "broker0").count("rocketstore broker ready") >= 2, 120)
        assert broker_log(project, "broker0").startswith(before)
    finally:
        down = make(project, "cluster-down")
        assert down.returncode == 0, down.stderr
    assert containers(project) == {}


def compose_command() -> list[str]:
    """Compose as a user types it: v2 when installed, else Debian's v1."""
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    return ["docker-compose"]


def test_compose_from_any_directory_takes_the_project_name_from_dot_env(tmp_path):
    """`docker-compose up -d` from the checkout takes the project name from .env (Compose v1 and v2
    read it; v1 refuses a top-level `name:`), not from the folder's name, so it finds the cluster
    `make cluster` started. Here in a copy, with the name in .env changed to the test's own."""
    shipped = (ROOT / ".env").read_text()
    assert "COMPOSE_PROJECT_NAME=rocketstore\n" in shipped
    assert "project=${RS_COMPOSE_PROJECT:-rocketstore}" in (ROOT / "deploy" / "compose.sh").read_text()
    project = f"{PROJECT_PREFIX}{secrets.token_hex(4)}"
    copy = tmp_path / "some-other-folder"
    copy.mkdir()
    shutil.copy(ROOT / "docker-compose.yml", copy)
    shutil.copytree(ROOT / "deploy", copy / "deploy")
    (copy / ".cluster").symlink_to(ROOT / ".cluster")
    (copy / ".env").write_text(shipped.replace("COMPOSE_PROJECT_NAME=rocketstore", f"COMPOSE_PROJECT_NAME={project}"))
    env = {k: v for k, v in os.environ.items() if k != "COMPOSE_PROJECT_NAME"}
    try:
        up = subprocess.run(
            [*compose_command(), "up", "-d", "--no-build", "etcd"],
            cwd=copy,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert up.returncode == 0, up.stderr
        assert set(containers(project)) == {"etcd"}
    finally:
        down = subprocess.run(
            [*compose_command(), "down", "--volumes"], cwd=copy, env=env, capture_output=True, text=True, timeout=300
        )
        assert down.returncode == 0, down.stderr
    assert containers(project) == {}
