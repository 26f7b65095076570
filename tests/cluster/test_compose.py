"""The shipped docker-compose.yml itself: brought up under a project name of the test's own, a
master elected, a topic created, messages produced with sync replication through the published
client port and consumed back from a slave's, the brokers' published metrics scraped, then
everything removed (volumes included)."""

from __future__ import annotations

import os
import secrets
import subprocess
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from client import AdminClient, Producer, PullConsumer
from harness.compose_status import PUBLISHED, ask, master_of
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


GROUP_B = ("127.0.0.1:10941", "127.0.0.1:10951")


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
