"""The web console's security without a browser or a socket: accounts with hashed passwords (or the
admin secret), log-in and its throttle, sessions that expire, CSRF on every change, the admin role
for changes, the audit log, security headers, and no secret in any page or log line; and a broker
group that does not answer leaves the pages of the others served. The console runs on Flask's test
client over a fleet that answers from memory."""

from __future__ import annotations

import logging
import os
import re
import stat

import pytest

from console.accounts import Accounts, AccountsError, Role, set_account
from console.config import ConsoleConfig
from console.fleet import BrokerState, Snapshot
from console.guard import LoginThrottle, csrf_ok, session_fresh
from console.history import History
from console.sampler import Sampler
from console.web import create_app, safe_next
from support import ManualClock

SECRET = b"an-admin-secret-of-32-bytes-here"
PASSWORD = "correct horse battery"
T0 = 1_800_000_000_000


class FakeAdmin:
    """The admin client calls the pages make, recorded; answers from memory."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple, dict]] = []

    def __getattr__(self, name: str):
        def call(*args, **kwargs):
            self.calls.append((name, args, kwargs))
            if name == "list_topics":
                return [{"name": "Orders", "read_queue_nums": 4, "write_queue_nums": 4, "perm": 6, "order": False}]
            if name == "create_topic":
                return {"name": args[0]}
            raise AssertionError(f"unexpected admin call {name}")

        return call


class FakeFleet:
    """broker-a's master answers; broker-b's only broker stopped answering."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.admin_client = FakeAdmin()

    def poll(self) -> Snapshot:
        status = {"role": "SYNC_MASTER", "broker_name": "broker-a", "broker_id": 0, "epoch": 1, "slaves": []}
        master = BrokerState("127.0.0.1:10911", "broker-a", 0, status, "", status, self.clock())
        gone = {**status, "broker_name": "broker-b"}
        down = BrokerState("127.0.0.1:10921", "broker-b", 0, None, "refused", gone, self.clock() - 60_000)
        return Snapshot(self.clock(), (master, down))

    def admin(self, endpoint: str) -> FakeAdmin:
        return self.admin_client


@pytest.fixture
def accounts_file(tmp_path):
    path = tmp_path / "accounts"
    assert set_account(path, "alice", Role.ADMIN, PASSWORD) is True
    assert set_account(path, "bob", Role.READ_ONLY, PASSWORD + "!") is True
    return path


def _console(accounts: Accounts, clock: ManualClock, throttle: LoginThrottle | None = None):
    config = ConsoleConfig(endpoints=("127.0.0.1:10911",), admin_secret=SECRET, session_idle_ms=60_000)
    fleet = FakeFleet(clock)
    sampler = Sampler(fleet, History(config.history_ms), config.sample_interval_ms)  # never started
    app = create_app(config, sampler, accounts, clock_ms=clock, throttle=throttle)
    return app.test_client(), fleet


def _csrf(page_text: str) -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', page_text).group(1)


def _log_in(client, account: str, password: str):
    token = _csrf(client.get("/login").text)
    return client.post("/login", data={"account": account, "password": password, "csrf_token": token})


# -- accounts ----------------------------------------------------------------------------------


def test_the_accounts_file_keeps_salted_hashes_private_to_its_owner(accounts_file):
    text = accounts_file.read_text()
    assert PASSWORD not in text and "scrypt:" in text
    assert stat.S_IMODE(os.stat(accounts_file).st_mode) == 0o600
    accounts = Accounts.from_file(accounts_file)
    assert accounts.verify("alice", PASSWORD).role is Role.ADMIN
    assert accounts.verify("bob", PASSWORD + "!").role is Role.READ_ONLY
    assert accounts.verify("alice", PASSWORD + "!") is None
    assert accounts.verify("nobody", PASSWORD) is None
    assert accounts.role_of("bob") is Role.READ_ONLY and accounts.role_of("nobody") is None
    # Changing an account keeps the others and gives a new salt.
    before = {line.split()[0]: line for line in text.splitlines() if not line.startswith("#")}
    assert set_account(accounts_file, "alice", Role.READ_ONLY, PASSWORD) is False
    after = {line.split()[0]: line for line in accounts_file.read_text().splitlines() if not line.startswith("#")}
    assert after["bob"] == before["bob"] and after["alice"] != before["alice"]
    assert Accounts.from_file(accounts_file).verify("alice", PASSWORD).role is Role.READ_ONLY


def test_a_bad_accounts_file_says_what_is_wrong_and_where(tmp_path, accounts_file):
    os.chmod(accounts_file, 0o644)
    with pytest.raises(AccountsError, match="chmod 600"):
        Accounts.from_file(accounts_file)
    bad = tmp_path / "bad"
    for text, expected in (
        ("alice admin\n", "line 1: expected NAME ROLE HASH"),
        ("# c\nalice root scrypt:1:2:3$a$b\n", "line 2: a role is read-only or admin"),
        ("alice admin plain-password\n", "line 1: the password hash is not one"),
        ("a admin scrypt:1$a$b\na admin scrypt:1$a$b\n", "line 2: account a appears twice"),
        ("# nobody\n", "has no account"),
    ):
        bad.write_text(text)
        os.chmod(bad, 0o600)
        with pytest.raises(AccountsError, match=expected):
            Accounts.from_file(bad)
    with pytest.raises(ValueError, match="at least 12"):
        set_account(tmp_path / "new", "carol", Role.ADMIN, "short")
    with pytest.raises(ValueError, match="account name"):
        set_account(tmp_path / "new", "carol smith", Role.ADMIN, PASSWORD)
    assert not (tmp_path / "new").exists()


def test_without_a_file_the_admin_secret_logs_in_as_admin():
    accounts = Accounts.from_secret(SECRET)
    assert accounts.verify("admin", SECRET.decode()).role is Role.ADMIN
    assert accounts.verify("alice", SECRET.decode()) is None
    assert accounts.verify("admin", SECRET.decode()[:-1]) is None
    assert SECRET.decode() not in repr(accounts)


# -- the guard's decisions ---------------------------------------------------------------------


def test_csrf_tokens_and_session_age():
    assert csrf_ok("abc", "abc") and not csrf_ok("abc", "abd") and not csrf_ok("abc", None)
    assert not csrf_ok(None, None) and not csrf_ok("", "")
    assert session_fresh(1000, 1500, 1000) and not session_fresh(1000, 2000, 1000) and not session_fresh(None, 1, 9)


def test_the_throttle_refuses_a_source_until_its_failures_age_out():
    throttle = LoginThrottle(max_failures=3, window_ms=10_000)
    for at in (0, 1000, 2000):
        assert throttle.retry_after_ms("a", at) == 0
        throttle.failed("a", at)
    assert throttle.retry_after_ms("a", 2500) == 7500
    assert throttle.retry_after_ms("b", 2500) == 0  # another address is not held up
    assert throttle.retry_after_ms("a", 10_000) == 0  # the first failure left the window
    throttle.failed("b", 0)
    throttle.succeeded("b")
    assert throttle.retry_after_ms("b", 1) == 0


# -- the application -------------------------------------------------------------------------------


def test_every_page_needs_a_session(accounts_file):
    client, _ = _console(Accounts.from_file(accounts_file), ManualClock(T0))
    answer = client.get("/topics?show=dlq")
    assert answer.status_code == 302 and answer.headers["Location"].startswith("/login?next=/topics")
    assert client.get("/api/series").status_code == 401
    with client.get("/static/console.js") as script:
        assert script.status_code == 200  # static files need none


def test_a_request_without_a_session_keeps_the_log_in_forms_token(accounts_file):
    client, _ = _console(Accounts.from_file(accounts_file), ManualClock(T0))
    token = _csrf(client.get("/login").text)
    assert client.get("/favicon.ico").status_code == 302  # a browser asks for it on its own
    answer = client.post("/login", data={"account": "alice", "password": PASSWORD, "csrf_token": token})
    assert answer.status_code == 302 and answer.headers["Location"] == "/cluster"


def test_log_in_refuses_a_wrong_password_and_throttles_the_address(accounts_file, caplog):
    caplog.set_level(logging.INFO, logger="rocketstore.console")
    throttle = LoginThrottle(max_failures=2, window_ms=60_000)
    client, _ = _console(Accounts.from_file(accounts_file), ManualClock(T0), throttle)
    assert _log_in(client, "alice", "wrong password!").status_code == 401
    assert _log_in(client, "alice", "wrong again!!").status_code == 401
    held = _log_in(client, "alice", PASSWORD)  # right, but the address is held up
    assert held.status_code == 429 and "Too many failed log-ins" in held.text
    audit = [r.getMessage() for r in caplog.records if r.name == "rocketstore.console.audit"]
    assert sum("action=login result=refused name='alice'" in line for line in audit) == 2
    assert any("action=login result=throttled" in line for line in audit)
    assert not any("wrong" in line or PASSWORD in line for line in audit)


def test_a_change_needs_the_csrf_token_and_the_admin_role(accounts_file, caplog):
    caplog.set_level(logging.INFO, logger="rocketstore.console")
    clock = ManualClock(T0)
    client, fleet = _console(Accounts.from_file(accounts_file), clock)
    form = {"topic": "Payments", "read_queues": "2", "write_queues": "2", "perm": "6", "groups": "broker-a"}

    # Log-in itself needs the token of the page it was drawn on.
    assert client.post("/login", data={"account": "alice", "password": PASSWORD}).status_code == 400
    assert _log_in(client, "alice", PASSWORD).headers["Location"] == "/cluster"
    page = client.get("/topics")
    assert 'id="create-topic"' in page.text
    token = _csrf(page.text)
    assert client.post("/topics", data=form).status_code == 400
    assert client.post("/topics", data={**form, "csrf_token": token[:-1] + "x"}).status_code == 400
    assert client.post("/topics", headers={"X-CSRF-Token": "nope"}, data=form).status_code == 400
    assert not [c for c in fleet.admin_client.calls if c[0] == "create_topic"]
    done = client.post("/topics", data={**form, "csrf_token": token})
    assert done.status_code == 302 and done.headers["Location"] == "/topics/view?topic=Payments"
    created = [c for c in fleet.admin_client.calls if c[0] == "create_topic"]
    assert created == [
        ("create_topic", ("Payments",), {"read_queues": 2, "write_queues": 2, "perm": 6, "order": False})
    ]

    # A read-only account sees the page without the form, and its change is refused before any call.
    client.post("/logout", data={"csrf_token": token})
    assert _log_in(client, "bob", PASSWORD + "!").status_code == 302
    page = client.get("/topics")
    assert page.status_code == 200 and 'id="create-topic"' not in page.text and "Orders" in page.text
    refused = client.post("/topics", data={**form, "topic": "Other", "csrf_token": _csrf(page.text)})
    assert refused.status_code == 403 and "read-only" in refused.text
    assert [c[1] for c in fleet.admin_client.calls if c[0] == "create_topic"] == [("Payments",)]

    audit = [r.getMessage() for r in caplog.records if r.name == "rocketstore.console.audit"]
    assert any(line.startswith("account=alice ") and "action=topic.create result=ok" in line for line in audit)
    assert any(line.startswith("account=bob ") and "action=topic.create result=forbidden" in line for line in audit)
    assert sum("action=csrf result=refused" in line for line in audit) == 4


def test_a_session_ends_when_unused(accounts_file):
    clock = ManualClock(T0)
    client, _ = _console(Accounts.from_file(accounts_file), clock)
    _log_in(client, "alice", PASSWORD)
    assert client.get("/dlq").status_code == 200
    clock.now += 59_000
    assert client.get("/dlq").status_code == 200  # each use restarts the idle time
    clock.now += 61_000
    gone = client.get("/dlq")
    assert gone.status_code == 302 and gone.headers["Location"].startswith("/login")


def test_pages_carry_security_headers_and_a_strict_cookie_and_no_secret(caplog):
    caplog.set_level(logging.DEBUG)
    client, _ = _console(Accounts.from_secret(SECRET), ManualClock(T0))
    answer = _log_in(client, "admin", SECRET.decode())
    cookie = answer.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    pages = [client.get(path) for path in ("/cluster", "/topics", "/dlq", "/charts", "/api/series", "/login")]
    for page in pages:
        assert page.headers["Content-Security-Policy"].startswith("default-src 'none'; script-src 'self'")
        assert page.headers["X-Frame-Options"] == "DENY" and page.headers["Cache-Control"] == "no-store"
        assert SECRET.decode() not in page.text
    assert "<script>" not in pages[0].text  # no inline script: the policy would block it
    assert not [r for r in caplog.records if SECRET.decode() in r.getMessage()]


def test_after_log_in_it_goes_only_to_a_path_of_its_own(app_context):
    assert safe_next("/topics?show=dlq") == "/topics?show=dlq"
    for target in ("//evil.example/x", "https://evil.example/", "javascript:alert(1)", "", None):
        assert safe_next(target) == "/cluster"


@pytest.fixture
def app_context():
    client, _ = _console(Accounts.from_secret(SECRET), ManualClock(T0))
    with client.application.test_request_context():
        yield


def test_a_group_that_does_not_answer_leaves_the_others_served(accounts_file):
    client, fleet = _console(Accounts.from_file(accounts_file), ManualClock(T0))
    _log_in(client, "alice", PASSWORD)
    page = client.get("/topics")
    assert page.status_code == 200 and "Orders" in page.text and "no broker of broker-b answers" in page.text
    form = {"topic": "Payments", "read_queues": "1", "write_queues": "1", "perm": "6", "csrf_token": _csrf(page.text)}
    done = client.post("/topics", data={**form, "groups": ["broker-a", "broker-b"]}, follow_redirects=True)
    assert "Topic Payments created on broker-a" in done.text and "broker-b: no master of broker-b answers" in done.text
    assert [c[1] for c in fleet.admin_client.calls if c[0] == "create_topic"] == [("Payments",)]
    cluster = client.get("/cluster").text
    assert "UNREACHABLE (was SYNC_MASTER)" in cluster and "no master answering" in cluster
