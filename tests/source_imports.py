"""The import statements of our source files, read with `ast` (nothing is imported), for the tests
that check what may import what (`tests/unit/test_layers.py`, `tests/unit/test_broker_boundary.py`).

Every statement counts, deferred imports inside functions included. Relative imports are resolved
against the file's place under the repository root. Stateless; thread-safe.

Importable as `source_imports` from any test (pytest puts `tests/` on sys.path for its conftest).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class ImportStatement:
    line: int
    # The modules it loads: `import a.b, c` gives a.b and c; `from m import x` gives m.
    modules: tuple[str, ...]
    # The dotted names it binds: `import a.b, c` gives a.b and c; `from m import x, y` gives m.x and m.y.
    names: tuple[str, ...]


def import_statements(path: Path, root: Path = ROOT) -> list[ImportStatement]:
    """Every import statement of the module at `path` (a file under `root`), in `ast.walk` order."""
    package = path.relative_to(root).with_suffix("").parts[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = list(package[: len(package) - node.level + 1]) if node.level else []
            module = ".".join([*base, node.module] if node.module else base)
            found.append(ImportStatement(node.lineno, (module,), tuple(f"{module}.{a.name}" for a in node.names)))
        elif isinstance(node, ast.Import):
            names = tuple(alias.name for alias in node.names)
            found.append(ImportStatement(node.lineno, names, names))
    return found


def module_imports(path: Path, root: Path = ROOT) -> list[str]:
    """The dotted names of the modules a module imports (`from x import y` gives x)."""
    return [module for statement in import_statements(path, root) for module in statement.modules]
