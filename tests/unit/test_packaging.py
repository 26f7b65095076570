"""What `pip wheel .` ships: the packages a user runs and imports, never the benchmarks, the test
rigs or the tests. The wheel is built from a clean copy of the checkout (setuptools would pack
whatever an earlier build left in build/), without build isolation, so no index is asked."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SHIPPED = {"wire", "store", "ha", "master", "slave", "client", "pipeline", "ops", "demos", "console", "rocketstore"}
# Never copied: environments, caches, build output and the Node.js client's modules.
NOT_SOURCE = (
    ".git",
    ".venv*",
    "build",
    "*.egg-info",
    "__pycache__",
    ".*_cache",
    ".hypothesis",
    "node_modules",
    ".cluster",
)


def test_the_wheel_holds_the_product_and_no_rigs(tmp_path):
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*NOT_SOURCE))
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation", "-q"]
        + ["-w", str(tmp_path / "wheels")],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "wheels").glob("rocketstore-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top == SHIPPED
    # Every shipped package, its sub-packages included, and the command line's whole package.
    packages = {str(p.parent.relative_to(ROOT)) for name in SHIPPED for p in (ROOT / name).rglob("__init__.py")}
    assert packages <= {name.rsplit("/", 1)[0] for name in names}
    assert "rocketstore/commands/status.py" in names and "demos/local_brokers.py" in names
    # The console's pages and static files ship beside its code.
    assert {"console/templates/base.html", "console/static/console.js", "console/static/console.css"} <= set(names)


def test_nothing_shipped_may_import_what_is_not():
    """With the layer test (each package imports only what its row allows), shipped code never
    needs a rig: `rocketstore demo` starts its brokers with demos.local_brokers, not harness."""
    from test_layers import ALLOWED

    assert set(ALLOWED) - SHIPPED == {"bench", "harness"}
    assert {package: ALLOWED[package] - SHIPPED for package in SHIPPED} == {package: set() for package in SHIPPED}
