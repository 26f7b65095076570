"""`rocketstore console-account` and what `rocketstore console` refuses before it serves anything:
accounts written hashed from stdin, a short or mistyped password, an accounts file others may read,
no admin secret, a port out of range; and the console's config (whether its bind address leaves
this machine, values it refuses). In-process, no socket."""

from __future__ import annotations

import io
import os

import pytest

from console.accounts import Accounts, Role
from console.config import ConsoleConfig
from rocketstore.cli import main

PASSWORD = "a password long enough"


def _account(monkeypatch, capsys, accounts, *argv: str, stdin: str = PASSWORD + "\n"):
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    code = main(["console-account", "--accounts", str(accounts), "--password-stdin", *argv])
    return code, capsys.readouterr()


def test_an_account_is_added_then_changed_with_its_password_hashed(tmp_path, monkeypatch, capsys):
    accounts = tmp_path / "console.accounts"
    code, out = _account(monkeypatch, capsys, accounts, "--name", "alice", "--role", "admin")
    assert code == 0 and out.out == f"added account alice (admin) in {accounts}\n"
    code, out = _account(monkeypatch, capsys, accounts, "--name", "alice", stdin="another long password\n")
    assert code == 0 and out.out.startswith("changed account alice (read-only)")
    assert PASSWORD not in accounts.read_text() and oct(os.stat(accounts).st_mode & 0o777) == "0o600"
    assert Accounts.from_file(accounts).verify("alice", "another long password").role is Role.READ_ONLY
    code, out = _account(monkeypatch, capsys, accounts, "--name", "bob", stdin="short\n")
    assert code == 1 and "at least 12 characters" in out.err
    assert Accounts.from_file(accounts).role_of("bob") is None


def test_two_different_passwords_on_the_terminal_change_nothing(tmp_path, monkeypatch, capsys):
    answers = iter([PASSWORD, PASSWORD + "x"])
    monkeypatch.setattr("getpass.getpass", lambda prompt: next(answers))
    code = main(["console-account", "--accounts", str(tmp_path / "a"), "--name", "carol"])
    assert code == 1 and "the two passwords differ" in capsys.readouterr().err
    assert not (tmp_path / "a").exists()


def test_the_console_refuses_what_it_cannot_serve_safely(tmp_path, monkeypatch, capsys):
    secret = tmp_path / "secret"
    secret.write_text("s" * 32)
    os.chmod(secret, 0o600)
    accounts = tmp_path / "accounts"
    _account(monkeypatch, capsys, accounts, "--name", "alice")
    os.chmod(accounts, 0o640)
    code = main(["console", "--secret-file", str(secret), "--accounts", str(accounts), "--port", "0"])
    assert code == 1 and "is accessible by group or others" in capsys.readouterr().err

    monkeypatch.delenv("ROCKETSTORE_ADMIN_SECRET", raising=False)
    assert main(["console", "--port", "0"]) == 2
    assert "needs the broker's shared secret" in capsys.readouterr().err
    assert main(["console", "--secret-file", str(secret), "--port", "70000"]) == 2
    assert "at most 65535" in capsys.readouterr().err


def test_the_config_knows_when_it_leaves_this_machine_and_refuses_nonsense():
    def config(**kw):
        return ConsoleConfig(endpoints=("127.0.0.1:10911",), admin_secret=b"s" * 32, **kw)

    assert all(config(bind_address=a).loopback_only for a in ("127.0.0.1", "127.0.0.2", "::1", "localhost"))
    assert not any(config(bind_address=a).loopback_only for a in ("0.0.0.0", "::", "10.1.2.3", "console.example"))
    assert "s" * 32 not in repr(config())
    for bad, words in (
        ({"port": 70000}, "port"),
        ({"sample_interval_ms": 10}, "sample_interval_ms"),
        ({"history_ms": 1000}, "two samples"),
        ({"bind_address": ""}, "bind_address"),
    ):
        with pytest.raises(ValueError, match=words):
            config(**bad)
    with pytest.raises(ValueError, match="at least one broker endpoint"):
        ConsoleConfig(endpoints=(), admin_secret=b"s" * 32)
