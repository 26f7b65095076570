"""The import layers of docs/architecture.md, checked on the source: each package imports only the
packages below it (statically, anywhere in its modules, deferred imports included)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Each package and what it may import of ours: docs/architecture.md draws the same picture.
ALLOWED = {
    "wire": set(),
    "store": set(),
    "ha": {"store"},
    "master": {"wire", "store", "ha"},
    "slave": {"wire", "store", "ha"},
    "client": {"wire"},
    "pipeline": {"wire", "store", "client"},
    "ops": {"store"},
    "harness": {"wire", "store", "client"},
    "demos": {"wire", "store", "client", "ops", "harness"},
    "rocketstore": {"wire", "store", "ha", "master", "slave", "client", "pipeline", "ops", "demos"},
    "bench": {"wire", "store", "ha", "master", "slave", "client", "pipeline", "ops", "harness", "demos", "rocketstore"},
}


def test_the_broker_itself_imports_no_client_tool_or_harness():
    broker = {m: ours for m, ours in imports_of("rocketstore").items() if m.startswith("rocketstore/broker/")}
    wrong = [
        f"{module} imports {sorted(ours & {'client', 'ops', 'demos', 'harness'})}"
        for module, ours in broker.items()
        if ours & {"client", "ops", "demos", "harness"}
    ]
    assert not wrong, wrong


def imports_of(package: str) -> dict[str, set[str]]:
    """Our top-level packages each module of `package` imports, by module path."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        if path.name.endswith(("_pb2.py", "_pb2_grpc.py")):
            continue
        names: list[str] = []
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.append(node.module)
            elif isinstance(node, ast.Import):
                names.extend(alias.name for alias in node.names)
        ours = {n.split(".")[0] for n in names} & (set(ALLOWED) | {"tests"})
        ours.discard(package)
        if ours:
            found[str(path.relative_to(ROOT))] = ours
    return found


def test_every_package_imports_only_the_layers_below_it():
    wrong = [
        f"{module} imports {sorted(ours - ALLOWED[package])}"
        for package in ALLOWED
        for module, ours in imports_of(package).items()
        if ours - ALLOWED[package]
    ]
    assert not wrong, "imports against the layers:\n" + "\n".join(wrong)


def test_the_layer_table_knows_every_package():
    packages = {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()}
    assert packages == set(ALLOWED)
