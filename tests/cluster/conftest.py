"""The container suite: needs a Docker engine and the project's images, which `deploy/prepare.sh`
makes ready (engine started, images built). When that fails the suite fails: it never skips.

Every container and network a run creates carries the `containers.LABEL` label; they are swept
before the first test and after the last, also after a failed or interrupted run. Ryuk (the
testcontainers reaper) needs an image pull and is off."""

from __future__ import annotations

import os
import secrets
import subprocess
from pathlib import Path

os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")
os.environ.setdefault("TC_POOLING_INTERVAL", "0.1")

import pytest  # noqa: E402
from test_compose import PROJECT_PREFIX  # noqa: E402

from harness.containers import ContainerGroup, remove_labelled  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def sweep() -> None:
    remove_labelled(compose_prefix=PROJECT_PREFIX)


@pytest.fixture(scope="session", autouse=True)
def docker_ready():
    done = subprocess.run([str(ROOT / "deploy" / "prepare.sh")], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"deploy/prepare.sh failed ({done.returncode}):\n{done.stderr[-4000:]}"
    sweep()
    yield
    sweep()


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


@pytest.fixture
def group(tmp_path, request):
    """A started `ContainerGroup` of three brokers and etcd; its logs are printed when the test
    failed, and everything it made is removed afterwards."""
    made = ContainerGroup(tmp_path / "group", run=secrets.token_hex(4))
    try:
        made.start()
        yield made
    finally:
        failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
        if failed:
            print(made.tails())
        made.stop()
