"""The broker commands' arguments and pure helpers (rocketstore/commands/): usage errors exit 2
before any connection is made (every endpoint here is unroutable or closed, and nothing may be
contacted), produce's bodies, tallies and summaries. No sockets."""

from __future__ import annotations

import argparse

import pytest

from client.convert import SendResult, SendStatus
from client.errors import BrokerError, NotMasterError, PartialBatchError, TransportError
from rocketstore.cli import EXIT_PROBLEMS, EXIT_USAGE, build_parser, main
from rocketstore.commands import produce as cli
from rocketstore.commands.connection import SECRET_ENV


@pytest.fixture(autouse=True)
def _no_secret_in_env(monkeypatch):
    monkeypatch.delenv(SECRET_ENV, raising=False)


def parse(*argv: str) -> argparse.Namespace:
    return build_parser(argv).parse_args(list(argv))


def usage_error(capsys, *argv: str) -> str:
    assert main(list(argv)) == EXIT_USAGE
    return capsys.readouterr().err


def test_defaults():
    args = parse("produce", "--topic", "T")
    assert args.count is None and cli._given_bodies(args) is None  # generated bodies: 1000 of them
    assert args.endpoint.target == "127.0.0.1:10911" and not args.json
    assert (args.count, args.size, args.batch, args.concurrency, args.queue, args.api, args.timeout_s) == (
        1000,
        1024,
        1,
        1,
        None,
        "asyncio",
        300.0,
    )
    args = parse("consume", "--topic", "T", "--endpoint", "[::1]:9876", "--json")
    assert args.endpoint.target == "[::1]:9876" and args.json and args.group is None and args.wait_ms == 0
    args = parse("topic", "create", "--topic", "T")
    assert (args.topic_action, args.queues, args.perm) == ("create", 4, 6)
    assert parse("topic", "list").topic_action == "list"


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["produce", "--topic", "T", "--endpoint", "nonsense"], "--endpoint"),
        (["produce", "--topic", "T", "--endpoint", "::1:10911"], "brackets"),
        (["produce", "--topic", "T", "--endpoint", "h:70000"], "outside"),
        (["produce"], "--topic"),
        (["produce", "--topic", ""], "--topic"),
        (["produce", "--topic", "T", "--count", "0"], "--count"),
        (["produce", "--topic", "T", "--count", "ten"], "--count"),
        (["produce", "--topic", "T", "--size", "-1"], "--size"),
        (["produce", "--topic", "T", "--batch", "1025"], "--batch"),
        (["produce", "--topic", "T", "--concurrency", "0"], "--concurrency"),
        (["produce", "--topic", "T", "--queue", "-1"], "--queue"),
        (["produce", "--topic", "T", "--tag", "a|b"], "--tag"),
        (["produce", "--topic", "T", "--api", "fork"], "--api"),
        (["produce", "--topic", "T", "--timeout-s", "0"], "--timeout-s"),
        (["produce", "--topic", "T", "--timeout-s", "inf"], "--timeout-s"),
        (["produce", "--topic", "T", "--request-timeout-s", "-3"], "--request-timeout-s"),
        (["consume", "--topic", "T", "--from-offset", "3", "--group", "G"], "not allowed with"),
        (["consume", "--topic", "T", "--from-offset", "-3"], "--from-offset"),
        (["consume", "--topic", "T", "--wait-ms", "-1"], "--wait-ms"),
        (["consume", "--topic", "T", "--batch", "0"], "--batch"),
        (["consume", "--topic", "T", "--count", "0"], "--count"),
        (["topic"], "ACTION"),
        (["topic", "drop"], "invalid choice"),
        (["topic", "delete"], "--topic"),
        (["produce", "--topic", "T", "--body", "x", "--stdin"], "not allowed with"),
        (["produce", "--topic", "T", "--property", "novalue"], "KEY=VALUE"),
        (["consumer", "reset", "--group", "G", "--topic", "T", "--to-offset", "-1"], "--to-offset"),
        (["message", "query", "--key", "k", "--id", "7F000001" * 4], "not allowed with"),
        (["topic", "create"], "--topic"),
        (["topic", "create", "--topic", "T", "--queues", "0"], "--queues"),
        (["topic", "create", "--topic", "T", "--perm", "16"], "--perm"),
    ],
)
def test_usage_errors(capsys, argv, needle):
    assert needle in usage_error(capsys, *argv)


def test_admin_commands_need_a_secret(capsys, tmp_path):
    assert "ROCKETSTORE_ADMIN_SECRET" in usage_error(capsys, "status", "--endpoint", "127.0.0.1:1")
    assert "no such file" in usage_error(capsys, "topic", "list", "--secret-file", str(tmp_path / "missing"))
    empty = tmp_path / "empty"
    empty.write_text("\n")
    empty.chmod(0o600)
    assert "is empty" in usage_error(capsys, "topic", "list", "--secret-file", str(empty))


def test_a_short_secret_is_refused_before_connecting(capsys, monkeypatch):
    monkeypatch.setenv(SECRET_ENV, "short")
    assert main(["status", "--endpoint", "127.0.0.1:1"]) == EXIT_PROBLEMS
    err = capsys.readouterr().err
    assert "at least 16 bytes" in err and "short" not in err.replace("shorter", "")


def test_missing_tls_file_is_a_usage_error(capsys, tmp_path):
    missing = str(tmp_path / "ca.pem")
    assert "--tls-ca-file" in usage_error(capsys, "produce", "--topic", "T", "--tls-ca-file", missing)
    assert "--tls-ca-file" in usage_error(capsys, "consume", "--topic", "T", "--tls-ca-file", missing)


# -- helpers -----------------------------------------------------------------------------------


def test_bodies_are_reproducible_and_sized():
    filler = cli.make_filler(100, seed=7)
    assert filler == cli.make_filler(100, seed=7) != cli.make_filler(100, seed=8)
    bodies = [cli.make_body(i, 100, filler) for i in range(300)]
    assert all(len(b) == 100 for b in bodies) and len(set(bodies)) == 300
    assert bodies[5].startswith(b"000000000005 ") and bodies[5].isascii()
    assert cli.make_body(123456, 4, cli.make_filler(4, 0)) == b"0000"


def test_percentile_nearest_rank():
    values = [float(v) for v in range(1, 101)]
    assert (cli.percentile(values, 50), cli.percentile(values, 99), cli.percentile(values, 100)) == (50.0, 99.0, 100.0)
    assert cli.percentile([3.0], 99) == 3.0 and cli.percentile([], 50) == 0.0


def _args(**overrides) -> argparse.Namespace:
    args = parse("produce", "--topic", "T", "--count", "4")
    for k, v in overrides.items():
        setattr(args, k, v)
    return args


def test_tally_and_summary():
    tally = cli.ProduceTally()
    ok = SendResult(SendStatus.SEND_OK, "A", "T", 0, 0, 0)
    slow = SendResult(SendStatus.FLUSH_SLAVE_TIMEOUT, "B", "T", 0, 1, 10)
    tally.record_results([ok, slow], [10**6, 10**6], 0.002)
    partial = PartialBatchError(
        [ok, BrokerError("MESSAGE_BODY_TOO_LARGE", "big")], BrokerError("MESSAGE_BODY_TOO_LARGE", "big")
    )
    tally.record_error(partial, [10**6, 10**7], 0.004)
    assert not tally.stopped
    summary = cli.produce_summary(_args(), tally, 2.0, timed_out=False)
    assert summary["statuses"] == {"FLUSH_SLAVE_TIMEOUT": 1, "SEND_OK": 2}
    assert summary["errors"] == {"MESSAGE_BODY_TOO_LARGE": 1} and summary["stored"] == 3
    assert summary["msgs_per_s"] == 1.5 and summary["mb_per_s"] == 1.5 and summary["requests"] == 2
    assert summary["latency_ms"] == {"p50": 2.0, "p99": 4.0, "max": 4.0} and not summary["ok"]
    text = cli.format_produce_summary(summary)
    assert "FLUSH_SLAVE_TIMEOUT" in text and "error MESSAGE_BODY_TOO_LARGE" in text and "msgs/s" in text
    tally.record_error(TransportError("h:1", "UNAVAILABLE"), [10], 0.001)
    assert tally.stopped and "h:1" in tally.stopped_by


def test_summary_ok_only_when_every_message_is_send_ok():
    tally = cli.ProduceTally()
    ok = SendResult(SendStatus.SEND_OK, "A", "T", 0, 0, 0)
    tally.record_results([ok] * 4, [1] * 4, 0.001)
    assert cli.produce_summary(_args(), tally, 1.0, timed_out=False)["ok"]
    assert not cli.produce_summary(_args(), tally, 1.0, timed_out=True)["ok"]
    assert not cli.produce_summary(_args(count=5), tally, 1.0, timed_out=False)["ok"]


def test_error_kinds():
    assert cli.error_kind(NotMasterError("h:1")) == "NOT_MASTER"
    assert cli.error_kind(TransportError("h:1", "DEADLINE_EXCEEDED")) == "TRANSPORT_DEADLINE_EXCEEDED"
    assert cli.error_kind(BrokerError("TOPIC_NOT_FOUND")) == "TOPIC_NOT_FOUND"


def test_version_prints_the_installed_package_version(capsys):
    import importlib.metadata

    from rocketstore.cli import build_parser

    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"rocketstore {importlib.metadata.version('rocketstore')}"
