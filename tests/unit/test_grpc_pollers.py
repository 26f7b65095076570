"""`wire.grpc_pollers`: a broker's process runs gRPC without its EventEngine unless told otherwise."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from bench.vs_redis import NO_EVENT_ENGINE as BENCH_NO_EVENT_ENGINE


@pytest.fixture
def pollers(monkeypatch: pytest.MonkeyPatch):
    # Importing the module sets the variable in this process: keep a value of our own there, so
    # that the test process's gRPC is left as it was.
    monkeypatch.setenv("GRPC_EXPERIMENTS", "kept")
    return importlib.import_module("wire.grpc_pollers")


def test_an_unset_variable_becomes_the_pollers(pollers) -> None:
    environ: dict[str, str] = {}
    assert pollers.prefer_pollers(environ) == pollers.NO_EVENT_ENGINE
    assert environ == {"GRPC_EXPERIMENTS": pollers.NO_EVENT_ENGINE}


def test_a_value_the_environment_sets_is_kept(pollers) -> None:
    environ = {"GRPC_EXPERIMENTS": ""}
    assert pollers.prefer_pollers(environ) == ""
    assert environ == {"GRPC_EXPERIMENTS": ""}


def test_the_benchmark_turns_off_the_same_experiments(pollers) -> None:
    assert BENCH_NO_EVENT_ENGINE == {"GRPC_EXPERIMENTS": pollers.NO_EVENT_ENGINE}


def test_the_broker_command_sets_it_before_grpc_is_imported() -> None:
    probe = (
        "import os, sys\n"
        "os.environ.pop('GRPC_EXPERIMENTS', None)\n"
        "import rocketstore.cli\n"
        "assert 'grpc' not in sys.modules, 'the CLI imported gRPC before its command'\n"
        "import rocketstore.commands.broker\n"
        "from wire.grpc_pollers import NO_EVENT_ENGINE\n"
        "assert 'grpc' in sys.modules\n"
        "print(os.environ['GRPC_EXPERIMENTS'] == NO_EVENT_ENGINE)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"
