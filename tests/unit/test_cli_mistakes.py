"""How the `rocketstore` command answers mistakes: no prefix matching of options, an unknown
argument answered with the subcommand's own usage, help text on every option and a description on
every subcommand of every command, "did you mean" for unknown broker.conf keys and --key=value
flags (the flag named as such), a pipeline job without the Spark extra, and a path of a broker's
config it cannot use (named with its key and the fix)."""

from __future__ import annotations

import argparse
import errno
import os
import sys

import pytest

from rocketstore.broker.config import load_broker_config, path_problem
from rocketstore.cli import COMMANDS, EXIT_USAGE, build_parser, main
from store import ConfigError
from store.properties import did_you_mean


def _parsers(parser: argparse.ArgumentParser, path: str):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{path} {name}")


@pytest.mark.parametrize("command", [c.name for c in COMMANDS])
def test_every_option_of_every_command_has_help(command):
    parser = build_parser([command])
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    missing = [
        f"{path}: {'/'.join(action.option_strings) or action.dest}"
        for path, p in _parsers(sub, command)
        for action in p._actions
        if not isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)) and not action.help
    ]
    assert not missing


@pytest.mark.parametrize("command", [c.name for c in COMMANDS])
def test_every_subcommand_describes_itself_in_its_help(command):
    parser = build_parser([command])
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    assert not [path for path, p in _parsers(sub, command) if not p.description]


def test_admin_elect_and_pipeline_scan_help_say_what_they_do(capsys):
    for argv, words in (
        (["admin", "elect", "--help"], "planned switchover"),
        (["pipeline", "scan", "--help"], "read CommitLogs"),
    ):
        assert main(argv) == 0
        usage, _, rest = capsys.readouterr().out.partition("\n\n")
        assert words in rest.split("\n\n")[0]


def test_pipeline_commands_say_to_install_the_spark_extra(tmp_path, capsys, monkeypatch):
    """`pip install rocketstore` has no PySpark: the job says which extra brings it."""
    monkeypatch.setitem(sys.modules, "pyspark", None)  # as if it were not installed
    assert main(["pipeline", "scan", "--store-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "needs pyspark, which are not installed" in err and "pip install 'rocketstore[spark]'" in err
    assert "ModuleNotFoundError" not in err


def test_a_path_the_broker_cannot_use_is_named_with_its_key_and_fix(tmp_path):
    configs = load_broker_config(
        None,
        {"storePathRootDir": str(tmp_path / "store"), "brokerLogDir": str(tmp_path / "logs"), "haSecret": "s" * 20},
    )
    denied = PermissionError(errno.EACCES, "Permission denied", str(tmp_path / "logs"))
    assert path_problem(denied, configs) == (
        f"brokerLogDir={tmp_path / 'logs'}: cannot use {tmp_path / 'logs'}: Permission denied; give the broker's user "
        f"(uid {os.getuid()}) that directory (chown or chmod), or point brokerLogDir elsewhere"
    )
    deep = NotADirectoryError(errno.ENOTDIR, "Not a directory", str(tmp_path / "store" / "commitlog" / "0"))
    assert path_problem(deep, configs).startswith(f"storePathRootDir={tmp_path / 'store'}: cannot use ")
    assert "point storePathRootDir at a directory" in path_problem(deep, configs)
    assert path_problem(OSError(errno.EACCES, "Permission denied", "/elsewhere"), configs) is None
    assert path_problem(OSError("no file named"), configs) is None


def test_options_are_never_matched_by_prefix(capsys):
    assert main(["consumer", "progress", "--gro", "g", "--secret-file", "/nonexistent"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "usage: rocketstore consumer progress" in err and "required: --group" in err


def test_an_unknown_argument_shows_the_subcommands_usage(capsys):
    assert main(["topic", "list", "--bogus"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("usage: rocketstore topic list") and "rocketstore topic list: error" in err


def test_bench_is_no_command_the_benchmarks_run_from_a_checkout(capsys):
    assert main(["bench", "--quick"]) == EXIT_USAGE
    assert "invalid choice: 'bench'" in capsys.readouterr().err
    from bench import broker_bench

    with pytest.raises(SystemExit):
        broker_bench.parse_args(["--help"])
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m bench.broker_bench")
    assert "--quick" in out and "--modes" in out and "--seconds" in out


def test_did_you_mean():
    assert did_you_mean("listenPrt", ["listenPort", "haListenPort"]) == " (did you mean listenPort?)"
    assert did_you_mean("brokerrole", ["brokerRole"], "--") == " (did you mean --brokerRole?)"
    assert did_you_mean("zzz", ["listenPort"]) == ""


def test_an_unknown_key_in_the_file_names_the_file_and_the_nearest_key(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("flushDiskTyp=SYNC_FLUSH\n")
    with pytest.raises(ConfigError) as raised:
        load_broker_config(conf)
    assert str(raised.value) == f"{conf}: unknown key: flushDiskTyp (did you mean flushDiskType?)"


def test_an_unknown_override_is_named_as_a_flag_not_blamed_on_the_file(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=b\n")
    with pytest.raises(ConfigError) as raised:
        load_broker_config(conf, {"listenPrt": "0"})
    assert str(raised.value) == "command line: unknown option: --listenPrt (did you mean --listenPort?)"
    assert str(conf) not in str(raised.value)


def test_the_java_version_spark_would_use():
    from pipeline.java_check import java_major

    assert java_major('openjdk version "17.0.9" 2023-10-17') == 17
    assert java_major('java version "1.8.0_392"') == 8
    assert java_major('openjdk version "21" 2023-09-19') == 21
    assert java_major("no version here") is None


def test_pipeline_commands_say_how_to_get_java_when_there_is_none(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    assert main(["pipeline", "scan", "--store-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "Spark needs Java 17 or later and no java is on PATH" in err and "openjdk-17-jre-headless" in err


def test_pipeline_commands_refuse_an_old_java(tmp_path, capsys, monkeypatch):
    java = tmp_path / "bin" / "java"
    java.parent.mkdir()
    java.write_text("#!/bin/sh\necho 'java version \"1.8.0_392\"' >&2\n")
    java.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    assert main(["pipeline", "scan", "--store-dir", str(tmp_path)]) == 1
    assert "is Java 8; Spark needs 17 or later" in capsys.readouterr().err
