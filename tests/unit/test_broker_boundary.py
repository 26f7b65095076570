"""Nothing outside the broker process's own module (`rocketstore/broker/process.py`) touches a
private attribute of a `Broker` (issue 31): failover drives the replication side through
`rocketstore.failover.replication_side.ReplicationSide`, the servicers ask `BrokerView`.

Checked on the source with `ast`, scope by scope. A receiver holds a Broker when it is
- a name annotated `Broker`, or assigned `Broker(...)`, or assigned from another Broker receiver;
- otherwise a name called `broker` or `_broker` (`broker._x`), unless its scope annotated it or
  bound it to something else (`broker = configs.broker`), or `self.broker`/`self._broker`.
An access is `receiver._name` (read, write or delete; dunders aside) or `getattr`/`setattr`/
`delattr`/`hasattr` with a literal private name.
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

from source_imports import ROOT, import_statements

OWN_MODULE = "rocketstore/broker/process.py"
BROKER_NAMES = frozenset({"broker", "_broker"})
_BROKER_ANNOTATION = re.compile(r"\bBroker\b")
_ATTRIBUTE_FUNCTIONS = frozenset({"getattr", "setattr", "delattr", "hasattr"})


@dataclass(frozen=True, order=True)
class Access:
    path: str
    line: int
    attribute: str


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _is_broker_construction(node: ast.expr) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return (isinstance(func, ast.Name) and func.id == "Broker") or (
        isinstance(func, ast.Attribute) and func.attr == "Broker"
    )


class _Scan(ast.NodeVisitor):
    def __init__(self, path: str) -> None:
        self.path = path
        self.found: list[Access] = []
        # Innermost last: name -> whether it holds a Broker, for the names a scope decided.
        self._scopes: list[dict[str, bool]] = [{}]

    # -- what a receiver holds -------------------------------------------------------------------

    def _holds_broker(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Name):
            for scope in reversed(self._scopes):
                if node.id in scope:
                    return scope[node.id]
            return node.id in BROKER_NAMES
        if isinstance(node, ast.Attribute):
            # `self._broker`: an object's own reference to the broker it serves. Elsewhere a
            # `.broker` is anything (`configs.broker` is a BrokerConfig).
            return node.attr in BROKER_NAMES and isinstance(node.value, ast.Name) and node.value.id == "self"
        return _is_broker_construction(node)

    def _bind(self, target: ast.expr, holds_broker: bool) -> None:
        if isinstance(target, ast.Name):
            self._scopes[-1][target.id] = holds_broker

    # -- scopes ----------------------------------------------------------------------------------

    def _visit_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        for default in [*node.args.defaults, *node.args.kw_defaults]:
            if default is not None:
                self.visit(default)
        if not isinstance(node, ast.Lambda):
            for decorator in node.decorator_list:
                self.visit(decorator)
        scope: dict[str, bool] = {}
        args = node.args
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            if arg is not None and arg.annotation is not None:
                scope[arg.arg] = bool(_BROKER_ANNOTATION.search(ast.unparse(arg.annotation)))
        self._scopes.append(scope)
        body = node.body if isinstance(node.body, list) else [node.body]
        for statement in body:
            self.visit(statement)
        self._scopes.pop()

    visit_FunctionDef = _visit_function
    visit_AsyncFunctionDef = _visit_function
    visit_Lambda = _visit_function

    def visit_Assign(self, node: ast.Assign) -> None:
        self.generic_visit(node)
        value = node.value
        for target in node.targets:
            if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
                for one, source in zip(target.elts, value.elts):
                    self._bind(one, self._holds_broker(source))
            else:
                self._bind(target, self._holds_broker(value))

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.generic_visit(node)
        self._bind(node.target, bool(_BROKER_ANNOTATION.search(ast.unparse(node.annotation))))

    def visit_withitem(self, node: ast.withitem) -> None:
        self.generic_visit(node)
        if node.optional_vars is not None:
            self._bind(node.optional_vars, False)

    # -- accesses --------------------------------------------------------------------------------

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if _private(node.attr) and self._holds_broker(node.value):
            self.found.append(Access(self.path, node.lineno, node.attr))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if (
            isinstance(func, ast.Name)
            and func.id in _ATTRIBUTE_FUNCTIONS
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _private(node.args[1].value)
            and self._holds_broker(node.args[0])
        ):
            self.found.append(Access(self.path, node.lineno, node.args[1].value))
        self.generic_visit(node)


def accesses(source: str, path: str = "<snippet>") -> list[Access]:
    """Every access to a private attribute of a Broker in `source`."""
    scan = _Scan(path)
    scan.visit(ast.parse(source))
    return sorted(scan.found)


def python_files(root: Path) -> list[Path]:
    """Our Python sources: everything but virtualenvs, dot-directories, build output (setuptools'
    `build/` holds old copies of the tree) and generated code."""
    return sorted(
        path
        for path in root.rglob("*.py")
        if not any(part.startswith(".") or part in ("node_modules", "build") for part in path.relative_to(root).parts)
        and not path.name.endswith(("_pb2.py", "_pb2_grpc.py"))
    )


def tree_accesses(root: Path) -> list[Access]:
    found: list[Access] = []
    for path in python_files(root):
        relative = path.relative_to(root).as_posix()
        if relative != OWN_MODULE:
            found.extend(accesses(path.read_text(encoding="utf-8"), relative))
    return found


def test_nothing_outside_the_broker_module_touches_a_private_attribute_of_a_broker():
    found = tree_accesses(ROOT)
    assert not found, "private attributes of a Broker used outside its module:\n" + "\n".join(
        f"{a.path}:{a.line}: ._{a.attribute.lstrip('_')}" for a in found
    )


def test_the_scan_reads_our_packages_and_tests():
    scanned = {path.relative_to(ROOT).parts[0] for path in python_files(ROOT)}
    assert {"rocketstore", "tests", "bench", "harness", "ha", "store", "client"} <= scanned
    assert ".venv" not in scanned


def test_the_scan_finds_each_way_the_failover_modules_used_to_reach_in():
    source = textwrap.dedent(
        """
        def hand_over(broker, target_id):
            broker._ha_server = None
            broker._start_master_replication(1)
            with broker._role_lock:
                pass

        class Roles:
            def __init__(self, broker):
                self._broker = broker

            def promote(self):
                self._broker._stop_replicator()
                side = self._broker
                side._ha_servicer.close_all("stepping down")

        def typed(node: "Broker | None"):
            del node._view

        def made(configs):
            running = Broker(configs)
            setattr(running, "_loop", None)
            return lambda: running._store
        """
    )
    assert [(a.line, a.attribute) for a in accesses(source)] == [
        (3, "_ha_server"),
        (4, "_start_master_replication"),
        (5, "_role_lock"),
        (13, "_stop_replicator"),
        (15, "_ha_servicer"),
        (18, "_view"),
        (22, "_loop"),
        (23, "_store"),
    ]


def test_the_scan_leaves_private_attributes_of_other_objects_alone():
    source = textwrap.dedent(
        """
        def harness(broker: "LocalBroker", store):
            broker._process.kill()
            store._lock.acquire()
            return broker.__class__

        def configs_of(configs):
            broker = configs.broker
            broker._check()
            return configs._replace(broker=broker)

        class View:
            def __init__(self, broker):
                self._broker = broker

            def role(self):
                return self._broker.store._role, self._broker.replication.lock

        with open_broker() as broker:
            broker._internal
        """
    )
    assert accesses(source) == []


def _is_config(module: str) -> bool:
    return module == "rocketstore.broker.config" or module.startswith("rocketstore.broker.config.")


def test_failover_imports_of_the_broker_only_its_config():
    """Failover is wired in by the process (`ReplicationSide`): it imports neither the process nor
    its replication side's implementation, so no cycle hides behind an untyped argument."""
    wrong = [
        f"{path.relative_to(ROOT)}:{statement.line}: {list(statement.names)}"
        for path in python_files(ROOT / "rocketstore" / "failover")
        for statement in import_statements(path)
        if any(n.startswith("rocketstore.broker") and not _is_config(n) for n in statement.names)
    ]
    assert not wrong, wrong
