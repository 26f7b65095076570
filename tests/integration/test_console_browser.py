"""The web console in a real browser (Debian's headless Chromium through selenium) against real
brokers on 127.0.0.1: log in, see both brokers of a group with their roles and the slave's lag,
create a topic and find it on the broker, produce with the client and find the message by key and
by time range, watch a consumer group's lag fall as it consumes, preview and apply an offset
reset, resend a dead letter to its topic, see the clients by protocol and the charts, and, on a
controller-mode group on etcd, see a killed master's failover on the cluster page. A read-only
account sees no form. Every page is saved as a screenshot (the directory is printed)."""

from __future__ import annotations

import json
import time

import pytest

from client import AdminClient, Producer, PullConsumer
from console.accounts import Role, set_account
from console_support import Browser, ConsoleProcess, chromium, listening_addresses, screenshot_dir
from harness.local_cluster import ControllerCluster
from pop_support import Pop, heartbeat
from support import BROKER_TEST_SETTINGS, wait_until

pytestmark = pytest.mark.timeout(600)

ADMIN_PASSWORD = "a long admin password"
VIEWER_PASSWORD = "a long viewer password"
TOPIC = "ConsoleOrders"
GROUP = "billing"


@pytest.fixture
def accounts(tmp_path):
    path = tmp_path / "accounts"
    set_account(path, "alice", Role.ADMIN, ADMIN_PASSWORD)
    set_account(path, "viewer", Role.READ_ONLY, VIEWER_PASSWORD)
    return path


@pytest.fixture
def console_on(tmp_path, accounts, request):
    """`console_on(endpoints, secret_file, prefix)` -> a Browser logged in as the admin on a
    console process; both stopped at the end, the console's log printed when the test failed."""
    started: list[tuple[ConsoleProcess, object]] = []
    shots = screenshot_dir()
    print(f"console screenshots: {shots}")

    def start(endpoints: str, secret_file, prefix: str) -> Browser:
        console = ConsoleProcess(
            ["--endpoint", endpoints, "--secret-file", str(secret_file), "--accounts", str(accounts)]
            + ["--sample-interval-s", "0.5", "--history-minutes", "5", "--audit-log", str(tmp_path / "audit.log")],
            tmp_path / f"console{len(started)}.log",
        )
        driver = chromium(tmp_path / f"chromium{len(started)}")
        started.append((console, driver))
        browser = Browser(driver, console.url, shots, prefix)
        browser.log_in("alice", ADMIN_PASSWORD)
        return browser

    yield start
    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    for console, driver in started:
        driver.quit()
        code = console.stop()
        if failed:
            print(console.log())
        assert code == 0, f"the console exited {code}:\n{console.log()}"


def _rows(browser: Browser, group: str) -> dict[str, str]:
    return {r: browser.text(f'tr[data-broker="{group}/{r}"] td.role') for r in ("0", "1")}


def test_an_operator_works_a_group_through_the_console(make_cluster, console_on, tmp_path):
    cluster = make_cluster()
    master, slave = cluster.master, cluster.slave_brokers[0]
    secret = cluster.admin_secret()
    browser = console_on(master.client_endpoint, cluster.secret_file, "group-")
    # Served on the bind address (127.0.0.1 by default) and nowhere else.
    assert listening_addresses(int(browser.url.rsplit(":", 1)[1])) == {"127.0.0.1"}

    # Cluster: both brokers of the group, their roles, and the slave's lag in bytes and seconds.
    browser.shows(
        "/cluster",
        lambda b: (
            _rows(b, "broker-a") == {"0": "SYNC_MASTER", "1": "SLAVE"}
            and b.text('tr[data-broker="broker-a/1"] td.lag-bytes') == "0"
        ),
        what="both brokers with roles and lag",
    )
    assert browser.text('tr[data-broker="broker-a/1"] td.lag-seconds') == "0.0"
    assert slave.client_endpoint in browser.text("#group-broker-a")
    browser.screenshot("cluster")

    # Topics: create one from the form; the broker has it.
    browser.open("/topics")
    browser.fill("#new-topic", TOPIC)
    browser.follow("#create-topic-submit")
    assert f"Topic {TOPIC} created on broker-a" in browser.text()
    with AdminClient(master.client_endpoint, secret) as admin:
        described = admin.describe_topic(TOPIC)
    assert (described["topic"]["read_queue_nums"], described["topic"]["write_queue_nums"]) == (4, 4)
    assert len(browser.texts("table.queues tbody tr")) == 4
    browser.screenshot("topic")

    # Messages: produced with the client, found by key and by time range; one shown in full.
    since = int(time.time() * 1000) - 1
    with Producer(master.client_endpoint) as producer:
        sent = [
            producer.send(TOPIC, json.dumps({"order": i, "total": 10 * i}).encode(), keys=[f"order-{i}"], tag="created")
            for i in range(12)
        ]
    assert all(r.ok for r in sent)
    until = int(time.time() * 1000) + 1
    browser.shows(
        f"/messages?mode=key&topic={TOPIC}&key=order-7",
        lambda b: b.texts("tr.message td:nth-child(8)") == [sent[7].msg_id],
        what="the message by key",
    )
    assert browser.texts("tr.message td.keys") == ["order-7"]
    browser.screenshot("messages-by-key")
    found = browser.shows(
        f"/messages?mode=time&topic={TOPIC}&since={since}&until={until}&size=50",
        lambda b: len(ids := b.texts("tr.message td:nth-child(8)")) == 12 and ids,
        what="the messages by time range",
    )
    assert sorted(found) == sorted(r.msg_id for r in sent)
    browser.screenshot("messages-by-time")
    browser.open(f"/messages?mode=time&topic={TOPIC}&since={since}&until={until}&size=10")
    assert len(browser.texts("tr.message")) == 10
    browser.follow("#next-page")
    assert len(browser.texts("tr.message")) == 2
    browser.open(f"/messages?mode=key&topic={TOPIC}&key=order-3")
    browser.follow(sent[3].msg_id, by="link text")
    assert '"total": 30' in browser.text("#body") and browser.text("#client-msg-id") == sent[3].msg_id
    browser.screenshot("message")

    # A consumer group: its lag, then lower after it consumed; an offset reset previewed and applied.
    with PullConsumer(master.client_endpoint, group=GROUP) as consumer:
        for queue_id in range(4):
            consumer.update_offset(TOPIC, queue_id, 0)
        browser.shows(f"/groups/view?group={GROUP}", lambda b: b.text("#total-lag") == "12", what="the lag of 12")
        members = browser.texts("#members tbody tr")
        assert len(members) == 1 and "GRPC_PULL" in members[0] and "broker-a/0" in members[0]
        browser.screenshot("group")
        for queue_id in range(4):
            page = consumer.pull(TOPIC, queue_id, 0, max_messages=32)
            consumer.update_offset(TOPIC, queue_id, page.next_offset)
    browser.shows(f"/groups/view?group={GROUP}", lambda b: b.text("#total-lag") == "0", what="the lag fall to 0")
    browser.screenshot("group-consumed")
    listed = browser.shows("/groups", lambda b: b.text(f'#groups tr[data-group="{GROUP}"]'), what="the group listed")
    assert listed.split() == [GROUP, "broker-a", TOPIC, "0", "-", "0", "-"]  # no member online, not a pop group
    browser.screenshot("groups")
    browser.open(f"/groups/view?group={GROUP}")
    browser.click("input[name=force]")
    browser.follow("#reset-preview")
    assert browser.texts("#reset-plan td.new-offset") == ["0", "0", "0", "0"], browser.text()
    with AdminClient(master.client_endpoint, secret) as admin:
        assert sum(q["lag"] for q in admin.consumer_progress(GROUP, TOPIC)) == 0  # a preview changes nothing
    browser.screenshot("group-reset-preview")
    browser.follow("#reset-apply")
    assert "reset: queue 0 -> 0" in browser.text()
    assert browser.text("#total-lag") == "12"

    # A dead letter: listed, opened, resent to its topic once.
    pop = Pop(master.client_endpoint, TOPIC, "pop-group")
    try:
        _, popped = pop.receive(batch=1)
        pop.forward_to_dead_letter(popped[0].system_properties.receipt_handle)
    finally:
        pop.close()
    browser.shows("/dlq", lambda b: b.texts('tr[data-topic="%DLQ%pop-group"] td.num') == ["1"], what="the DLQ")
    browser.screenshot("dead-letters")
    browser.follow('tr[data-topic="%DLQ%pop-group"] a.browse')
    browser.follow("tr.message td:nth-child(8) a")
    assert f"It came from {TOPIC}" in browser.text("section.dlq")
    browser.screenshot("dead-letter")
    browser.follow("#resend")
    assert f"Resent to {TOPIC}" in browser.text()
    (copy_id,) = browser.texts("tr.message td:nth-child(8)")
    with AdminClient(master.client_endpoint, secret) as admin:
        copies = wait_until(lambda: admin.query_message(msg_id=copy_id, topic=TOPIC), what="the copy on the broker")
        assert copies[0]["properties"]["ORIGIN_MESSAGE_ID"] == popped[0].system_properties.message_id
        assert sum(q["max_offset"] for q in admin.describe_topic(TOPIC)["queues"]) == 13

    # Connections by protocol: a producer as the official clients announce one, a pull consumer
    # (one that closed said goodbye), the pop consumer above; then the charts drawn from the
    # brokers' counters.
    assert heartbeat(master.client_endpoint, "producer-client-1") == 20000
    with PullConsumer(master.client_endpoint, group=GROUP) as consumer:
        consumer.pull(TOPIC, 0, 0, max_messages=1)
        connections = browser.shows(
            "/connections",
            lambda b: (rows := b.texts('section[data-broker="broker-a/0"] tr.client')) and len(rows) >= 3 and rows,
            what="producers and consumers by protocol",
        )
    assert any(r.startswith("PRODUCER GRPC producer-client-1") for r in connections)
    assert any(r.startswith("CONSUMER GRPC_PULL") and GROUP in r for r in connections)
    assert any(r.startswith("CONSUMER GRPC_POP") and "pop-group" in r for r in connections)
    browser.screenshot("connections")
    browser.open("/charts")
    wait_until(
        lambda: browser.driver.find_element("css selector", ".charts").get_attribute("data-drawn"), what="charts"
    )
    browser.screenshot("charts")

    # Deleting a topic: the confirmation says what goes, and asks for the name.
    with AdminClient(master.client_endpoint, secret) as admin:
        admin.create_topic("ConsoleScratch", 2)
    with Producer(master.client_endpoint) as producer, PullConsumer(master.client_endpoint, group="scratcher") as c:
        for queue_id in (0, 1, 1):
            assert producer.send("ConsoleScratch", b"s", queue_id=queue_id).ok
        c.update_offset("ConsoleScratch", 1, 1)
    browser.open("/topics/view?topic=ConsoleScratch")
    browser.follow("#delete-topic")
    loss = browser.text("p.loss")
    assert "3 message(s) in 2 queue(s) become unreadable" in loss and "offsets go: scratcher" in loss
    browser.screenshot("topic-delete")
    browser.fill("input[name=confirm]", "ConsoleScratch")
    browser.follow("#delete-form button[type=submit]")
    assert "Topic ConsoleScratch deleted on broker-a; offsets removed for: scratcher." in browser.text()
    with AdminClient(master.client_endpoint, secret) as admin:
        assert "ConsoleScratch" not in {t["name"] for t in admin.list_topics()}

    # A read-only account sees the pages and none of the forms.
    browser.follow("header form.who button")
    browser.log_in("viewer", VIEWER_PASSWORD)
    browser.open("/topics")
    assert TOPIC in browser.text("#topics") and not browser.driver.find_elements("css selector", "#create-topic")
    browser.open(f"/groups/view?group={GROUP}")
    assert not browser.driver.find_elements("css selector", "#reset-form")
    audit = (tmp_path / "audit.log").read_text()
    for action in ("topic.create", "offset.reset.preview", "offset.reset", "dlq.resend", "topic.delete"):
        assert f"account=alice from=127.0.0.1 action={action} result=ok" in audit, action
    assert ADMIN_PASSWORD not in audit and secret.decode() not in audit


@pytest.fixture
def controller_group(tmp_path, etcd, request):
    cluster = ControllerCluster(tmp_path / "group", etcd.endpoint, size=3, settings=dict(BROKER_TEST_SETTINGS))
    yield cluster.start()
    if getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed:
        print(cluster.tails())
    cluster.stop()


def test_a_failover_shows_on_the_cluster_page(controller_group, console_on):
    old = controller_group.wait_master(60, in_sync=2)
    browser = console_on(old.client_endpoint, controller_group.secret_file, "failover-")
    browser.shows(
        "/cluster",
        lambda b: sorted(b.texts("#group-broker-a td.role")).count("SLAVE") == 2 and "master: broker" in b.text("h2"),
        what="the group with one master and two slaves",
    )
    browser.screenshot("cluster-before")
    old_id = next(i for i, b in enumerate(controller_group.brokers) if b is old)
    old.kill()
    new = controller_group.wait_master(60, not_=old, in_sync=1)
    new_id = next(i for i, b in enumerate(controller_group.brokers) if b is new)
    failover = browser.shows(
        "/cluster",
        lambda b: next((t for t in b.texts("li.event-failover")), None),
        what="the failover on the timeline",
    )
    assert f"master broker {old_id} -> broker {new_id}" in failover
    assert browser.driver.find_elements("css selector", "svg.timeline circle.failover")
    assert browser.text(f'tr[data-broker="broker-a/{old_id}"] td.role') == "UNREACHABLE (was SYNC_MASTER)"
    assert browser.text(f'tr[data-broker="broker-a/{new_id}"] td.role') == "SYNC_MASTER"
    browser.screenshot("cluster-after")
