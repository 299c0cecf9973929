"""The import graph keeps the layers of docs/contributing.md: imports point down, never up.

Read with ``ast`` (nothing is imported), counting imports inside functions too; only
``if TYPE_CHECKING:`` blocks are exempt, since they never run.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 600

#: Bottom to top.  A package may import its own layer's modules only when it is that
#: package (siblings in one layer are independent), and any lower layer.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("kb.vocab",),
    ("kb.core",),
    ("kb.catalog",),
    ("kb.reference",),
    ("kb.index",),
    ("kb.lint",),
    ("kb.check", "kb.scan"),
    ("kb.rules",),
    ("kb.advice", "kb.audit", "kb.emulate"),
    ("kb.port",),
    ("kb.api",),
    ("kb.text",),
    ("kb.mcp",),
    ("kb.cli",),
    ("kb.__main__",),
    ("site_plugins",),
)
#: ``kb/__init__.py`` holds only the version: anything may read it.
ROOT_PACKAGE = "kb"


def _modules() -> dict[str, Path]:
    out = {}
    for top in ("kb", "site_plugins"):
        for path in sorted((ROOT / top).rglob("*.py")):
            if "records" in path.parts:
                continue
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


MODULES = _modules()


def _component(module: str) -> str:
    if module == ROOT_PACKAGE or module.startswith("site_plugins"):
        return module.split(".")[0]
    return ".".join(module.split(".")[:2])


def _rank(component: str) -> int:
    for i, layer in enumerate(LAYERS):
        if component in layer:
            return i
    raise AssertionError(f"{component} is in no layer: add it to LAYERS and to the docs")


def _resolve(name: str) -> str | None:
    """The project module an import names (its longest known prefix), else None."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in MODULES:
            return candidate
        parts.pop()
    return None


def _imports(module: str, path: Path) -> set[tuple[str, int]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_package = path.name == "__init__.py"
    found: set[tuple[str, int]] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            names: list[str] = []
            if isinstance(child, ast.Import):
                names = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    pkg = module.split(".") if is_package else module.split(".")[:-1]
                    pkg = pkg[: len(pkg) - (child.level - 1)]
                    base = ".".join(pkg + ([base] if base else []))
                names = [base] + [f"{base}.{a.name}" for a in child.names]
            for name in names:
                target = _resolve(name)
                if target and target != module and not module.startswith(target + "."):
                    found.add((target, child.lineno))
            visit(child)

    visit(tree)
    return found


GRAPH = {m: _imports(m, p) for m, p in MODULES.items()}


def test_imports_point_down_the_layers() -> None:
    wrong = []
    for module, targets in GRAPH.items():
        here = _component(module)
        for target, line in sorted(targets):
            there = _component(target)
            if there in (ROOT_PACKAGE, here):
                continue
            if _rank(there) >= _rank(here):
                wrong.append(f"{MODULES[module].relative_to(ROOT)}:{line}: {module} -> {target}")
    assert not wrong, "imports against the layers:\n" + "\n".join(wrong)


def test_no_import_cycle_between_files() -> None:
    edges = {m: {t for t, _ in ts} for m, ts in GRAPH.items()}
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def walk(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                walk(nxt)
        stack.pop()
        state[node] = 2

    for module in sorted(edges):
        if module not in state:
            walk(module)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_every_component_has_a_layer() -> None:
    placed = {c for layer in LAYERS for c in layer}
    missing = sorted({_component(m) for m in MODULES} - placed - {ROOT_PACKAGE})
    assert not missing, f"components in no layer: {missing}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_module_size(module: str) -> None:
    lines = MODULES[module].read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, f"{module} has {lines} lines; split it by concern"


def test_the_importer_is_outside_the_runtime_package() -> None:
    assert not (ROOT / "kb" / "upstream").exists()
    users = [m for m, p in MODULES.items() if "tools.upstream" in p.read_text(encoding="utf-8")]
    assert not users, f"runtime modules naming the maintainer importer: {users}"


def test_the_layer_check_sees_an_upward_import(tmp_path: Path) -> None:
    """The checker itself: a catalog module importing the CLI is caught."""
    path = tmp_path / "x.py"
    path.write_text("def f():\n    from kb.cli import main\n", encoding="utf-8")
    found = _imports("kb.catalog.x", path)
    assert ("kb.cli", 2) in found
    assert _rank(_component("kb.cli")) > _rank(_component("kb.catalog.x"))
