"""The import layers of docs/architecture.md, checked on the source: each package imports only the
packages below it (statically, anywhere in its modules, deferred imports included), and so do the
"module:function" targets of the `rocketstore` command table, which are imported by name."""

from __future__ import annotations

import importlib
from pathlib import Path

from source_imports import ROOT, import_statements, module_imports

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
    "demos": {"wire", "store", "client", "ops"},
    "console": {"wire", "store", "client"},
    # Of the application, only the etcd client (the local etcd waits with it): see the test below.
    "harness": {"wire", "store", "client", "demos", "rocketstore"},
    "rocketstore": {"wire", "store", "ha", "master", "slave", "client", "pipeline", "ops", "demos", "console"},
    "bench": {
        "wire",
        "store",
        "ha",
        "master",
        "slave",
        "client",
        "pipeline",
        "ops",
        "demos",
        "console",
        "rocketstore",
        "harness",
    },
}


def test_the_broker_itself_imports_no_client_tool_or_harness():
    """Only the command line of the application uses the libraries built on the broker."""
    above_the_broker = {"client", "ops", "demos", "pipeline", "console", "harness"}
    core = {
        m: ours
        for m, ours in imports_of("rocketstore").items()
        if not m.startswith(("rocketstore/commands/", "rocketstore/cli.py"))
    }
    wrong = [
        f"{module} imports {sorted(ours & above_the_broker)}"
        for module, ours in core.items()
        if ours & above_the_broker
    ]
    assert not wrong, wrong


def imports_of(package: str) -> dict[str, set[str]]:
    """Our top-level packages each module of `package` imports, by module path."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        if path.name.endswith(("_pb2.py", "_pb2_grpc.py")):
            continue
        ours = {n.split(".")[0] for n in module_imports(path)} & (set(ALLOWED) | {"tests"})
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


def test_the_command_tables_targets_live_in_the_commands_package_and_resolve():
    from rocketstore.cli import COMMANDS

    targets = [target for command in COMMANDS for target in (command.configure, command.run)]
    outside = [t for t in targets if not t.startswith("rocketstore.commands.")]
    assert not outside, f"command code outside rocketstore/commands/: {outside}"
    for target in targets:
        module, _, name = target.partition(":")
        path = (ROOT / module.replace(".", "/")).with_suffix(".py")
        wrong = {n.split(".")[0] for n in module_imports(path)} & set(ALLOWED) - ALLOWED["rocketstore"] - {
            "rocketstore"
        }
        assert not wrong, f"{target} imports {sorted(wrong)}, which the application may not"
        assert callable(getattr(importlib.import_module(module), name)), target


def test_only_the_command_line_imports_the_commands():
    wrong = [
        f"{path.relative_to(ROOT)} imports {name}"
        for package in ALLOWED
        for path in sorted((ROOT / package).rglob("*.py"))
        if not str(path.relative_to(ROOT)).startswith(("rocketstore/commands/", "rocketstore/cli.py"))
        for name in module_imports(path)
        if name.startswith(("rocketstore.commands", "rocketstore.cli"))
    ]
    assert not wrong, wrong


def test_the_client_is_a_library_without_a_command_line():
    wrong = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "client").rglob("*.py"))
        if any(name.split(".")[0] == "argparse" for name in module_imports(path))
    ]
    assert not wrong, f"argparse in the client library: {wrong}"


def test_the_rigs_use_of_the_application_is_the_etcd_client():
    wrong = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sorted((ROOT / "harness").rglob("*.py"))
        for name in module_imports(path)
        if name.split(".")[0] == "rocketstore" and name != "rocketstore.coordination.etcd"
    ]
    assert not wrong, wrong


# What only the front ends may import: the protocols and the modules that speak them.
PROTOCOL_MODULES = ("grpc", "google.protobuf", "wire.rpc", "wire.remoting")
FRONT_END_MODULES = tuple(
    f"rocketstore.broker.{name}"
    for name in (
        "messaging",
        "remoting_server",
        "v2_messages",
        "codes",
        "remoting_codes",
        "cluster_route",
        "pop_api",
        "transaction_api",
        "telemetry",
        "guard",
        "acl",
        "admin",
        "process",
    )
)


def _application_module(name: str) -> Path | None:
    """The file of a module of the application (a package's __init__), or None."""
    if not name.startswith("rocketstore."):
        return None
    path = ROOT / name.replace(".", "/")
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imported_modules(path: Path) -> list[str]:
    """As `module_imports`, plus the submodules a `from package import name` names."""
    statements = import_statements(path)
    modules = [module for statement in statements for module in statement.modules]
    return modules + [name for s in statements for name in s.names if name not in s.modules]


def test_the_broker_core_speaks_no_protocol():
    """rocketstore/broker/core/ decides and the front ends decode and encode: no module of the
    core, nor one of the application it reaches, imports a protocol (gRPC, protobuf, the
    generated stubs, remoting frames) or a front end."""
    start = sorted((ROOT / "rocketstore/broker/core").rglob("*.py"))
    seen: set[Path] = set()
    wrong: list[str] = []
    while start:
        path = start.pop()
        if path in seen:
            continue
        seen.add(path)
        for name in _imported_modules(path):
            if name.startswith(PROTOCOL_MODULES + FRONT_END_MODULES):
                wrong.append(f"{path.relative_to(ROOT)} imports {name}")
            found = _application_module(name)
            if found is not None:
                start.append(found)
    assert not wrong, "\n".join(sorted(set(wrong)))
    assert ROOT / "rocketstore/broker/core/send.py" in seen
