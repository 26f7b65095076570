"""What `pip wheel .` ships: the packages a user runs and imports, never the benchmarks, the test
rigs or the tests. The wheel is built from a clean copy of the checkout (setuptools would pack
whatever an earlier build left in build/), without build isolation, so no index is asked."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

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
        [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation", "-v"]
        + ["-w", str(tmp_path / "wheels")],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert built.returncode == 0, built.stderr
    # The build backend's warnings (a deprecated `license` table printed a banner on every build).
    assert "deprecated" not in (built.stdout + built.stderr).lower(), built.stdout[-3000:] + built.stderr[-3000:]
    (wheel,) = (tmp_path / "wheels").glob("rocketstore-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    metadata = zipfile.ZipFile(wheel).read("rocketstore-0.1.0.dist-info/METADATA").decode()
    assert (
        "License-Expression: Apache-2.0" in metadata
        and "Classifier: Programming Language :: Python :: 3.11" in metadata
    )
    assert "Project-URL: " in metadata and "Provides-Extra: spark" in metadata
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


def _requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    return [Requirement(r) for r in project["dependencies"] + [r for group in extras.values() for r in group]]


def test_the_package_declares_ranges_and_constraints_pin_what_they_allow():
    """A shared environment can satisfy the package's ranges; `make setup` installs exactly the pins."""
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[canonicalize_name(name)] = version.strip()
    for requirement in _requirements():
        if requirement.name == "rocketstore":  # the spark extra is the pipeline extra's alias
            assert requirement.extras == {"pipeline"}
            continue
        assert not any(s.operator == "==" for s in requirement.specifier), f"{requirement} pins one version"
        pinned = pins.get(canonicalize_name(requirement.name))
        assert pinned is not None, f"constraints.txt pins no version of {requirement.name}"
        assert requirement.specifier.contains(pinned), f"{requirement.name}=={pinned} is outside {requirement}"
    makefile = (ROOT / "Makefile").read_text()
    assert "-c constraints.txt" in makefile and "--build-constraint constraints.txt" in makefile
