"""The README's shell blocks marked runnable (`<!-- runnable ... -->` on the line before the fence)
run as written, after the README's set-up, against the brokers of `examples/`.

The set-up the README gives: the project installed in a virtualenv whose `bin/` is put on the PATH
(`. .venv/bin/activate`; here the activate script of the virtualenv running the tests), and a
master and a slave started from `examples/master.conf` and `examples/slave.conf` with the secret at
`/etc/rocketstore/replication_secret`. The test starts those two brokers from the same files, with
what a test may not use replaced: ports the OS chooses, stores and the secret in the test's
directory. The blocks then run in bash (`-e`: every command must succeed) from the checkout, with
the documented endpoints and secret path replaced by the live ones (`--endpoint`'s default by
ROCKETSTORE_ENDPOINT, as the README says). Nothing else of a block is changed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.local_cluster import LocalBroker, write_secret
from store.properties import load_properties
from support import BROKER_TEST_SETTINGS, wait_until

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
RUNNABLE = re.compile(r"^<!-- runnable\b[^>]*-->\n```sh\n(.*?)^```$", re.S | re.M)
# What the README's blocks name, and what stands for it here.
DOCUMENTED_SECRET = "/etc/rocketstore/replication_secret"
DOCUMENTED_MASTER = "127.0.0.1:10911"
DOCUMENTED_SLAVE = "127.0.0.1:11911"


def runnable_blocks() -> list[str]:
    return RUNNABLE.findall(README.read_text())


def example_broker(name: str, directory: Path, secret: Path, **extra: str) -> LocalBroker:
    """A broker of examples/NAME.conf, with ports, store and secret the test's own."""
    settings = dict(load_properties(ROOT / "examples" / f"{name}.conf"))
    settings.update(BROKER_TEST_SETTINGS)
    settings.update(listenPort="0", haListenPort="0", haSecretFile=str(secret), **extra)
    settings.pop("storePathRootDir")
    return LocalBroker(name, directory / name, settings)


@pytest.fixture
def example_pair(tmp_path, request):
    secret = write_secret(tmp_path / "replication_secret")
    master = example_broker("master", tmp_path, secret).start()
    slave = example_broker("slave", tmp_path, secret, haMasterAddress=master.ha_endpoint).start()
    yield master, slave, secret
    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    for broker in (slave, master):
        if failed:
            print(broker.tail())
        broker.stop()


def resolved(block: str, master: LocalBroker, slave: LocalBroker, secret: Path) -> str:
    for documented, live in (
        (DOCUMENTED_SECRET, str(secret)),
        (DOCUMENTED_MASTER, master.client_endpoint),
        (DOCUMENTED_SLAVE, slave.client_endpoint),
    ):
        block = block.replace(documented, live)
    return block


def test_the_readme_marks_its_runnable_blocks_and_says_how_rocketstore_gets_on_the_path():
    blocks = runnable_blocks()
    assert blocks, "README.md marks no block runnable"
    assert all("rocketstore " in block for block in blocks)
    # The set-up the blocks are run after: the virtualenv make setup fills, put on the PATH.
    text = README.read_text()
    assert "make setup\n. .venv/bin/activate" in text and "VENV := .venv" in (ROOT / "Makefile").read_text()


def test_the_readme_commands_run_as_written(example_pair, tmp_path):
    master, slave, secret = example_pair
    activate = Path(sys.executable).parent / "activate"
    assert activate.is_file(), f"the tests run outside a virtualenv ({sys.executable}): no {activate} to source"
    # The slave follows the master before anything is produced (SYNC_MASTER answers need it).
    from client import AdminClient

    with AdminClient(master.client_endpoint, secret.read_text().strip().encode()) as admin:
        wait_until(lambda: admin.status()["slaves"], timeout_s=30, what="the slave to connect")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCKETSTORE_")}
    env.update(ROCKETSTORE_ENDPOINT=master.client_endpoint, HOME=str(tmp_path))
    outputs = []
    for block in runnable_blocks():
        script = f". {activate}\ncd {ROOT}\n{resolved(block, master, slave, secret)}"
        done = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", script], env=env, capture_output=True, text=True, timeout=600
        )
        shown = f"--- stdout\n{done.stdout[-6000:]}\n--- stderr\n{done.stderr[-6000:]}"
        assert done.returncode == 0, f"a README block failed ({done.returncode}):\n{block}\n{shown}"
        outputs.append(done.stdout)
    out = "\n".join(outputs)
    # What the block's commands say they did.
    assert re.search(r"^sent msgId=[0-9A-F]{32} topic=Orders ", out, re.M)
    assert "committed these offsets for group billing" in out
    assert "fileReservedTime=48 on 2 broker(s) (group):" in out
    assert f"broker 1 at {slave.client_endpoint} is master" in out
