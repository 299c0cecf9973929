"""Ports across files: the package modules that hold planned stages of the classes a
ported file builds are ported with it, written beside it, and imported by the port.

A model file often builds its layers from classes of other files of its package (a
diffusers transformer: ``Attention`` and its processors, ``FeedForward``, the adaLN
norms).  ``kb port FILE`` follows the names FILE's classes use (``__init__``,
``forward``, ``__call__`` and the methods they call) through the package's imports,
ports each package file that holds a planned stage of a class so reached (only those
classes and functions are rewritten), and every file on the import path to it, and
rewrites the ported files' imports of those modules into
``_kb_port_module(MODULE, FILE)``: the ported copy written beside the port, loaded as a
sibling of its original (``<module>__kb_port``) so its own imports resolve in the
package, while the original keeps importing the originals in the same process.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import libcst as cst

from kb.port.rewrite import Porter
from kb.port.spans import Stage

#: the methods whose names count as what a class builds and calls
_ENTRY = ("__init__", "forward", "__call__")
LOADER = "_kb_port_module"
_LOADER_CODE = '''

def _kb_port_module(name, filename):
    """The ported copy (``filename``, written beside this file) of the package module
    ``name`` (as this file imports it), loaded as a sibling of its original."""
    import importlib.util
    import os
    import sys

    target = importlib.util.resolve_name(name, __package__) + "__kb_port"
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), filename)
    mod = sys.modules.get(target)
    if mod is None or os.path.abspath(getattr(mod, "__file__", "")) != path:
        spec = importlib.util.spec_from_file_location(target, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[target] = mod
        spec.loader.exec_module(mod)
    globals().setdefault("KB_PORT_MODULES", []).append(mod)
    return mod
'''


def package_root(file: Path) -> Path:
    """The outermost package folder of ``file`` (its own folder outside packages): the
    files a port may take along lie in it, never in another installed package."""
    d = file.resolve().parent
    while (d / "__init__.py").exists() and (d.parent / "__init__.py").exists():
        d = d.parent
    return d


@dataclass
class _File:
    path: Path
    tree: ast.Module
    defs: dict[str, ast.AST] = field(default_factory=dict)
    #: local name -> (file, name) it is imported from (package files only)
    imports: dict[str, tuple[Path, str]] = field(default_factory=dict)


def _module_file(base: Path, root: Path, module: str, level: int) -> Path | None:
    """The file ``from <level dots><module> import`` names, written in ``base``, when it
    lies in the package ``root`` (the outermost package folder of the ported file)."""
    if level:
        pkg = base.parent
        for _ in range(level - 1):
            pkg = pkg.parent
    else:
        pkg = root.parent if (root / "__init__.py").exists() else root
    target = pkg.joinpath(*module.split(".")) if module else pkg
    for cand in (target.with_suffix(".py"), target / "__init__.py"):
        if cand.is_file() and cand.resolve().is_relative_to(root):
            return cand.resolve()
    return None


class Graph:
    """What a file's classes build, through the package's imports (by name)."""

    def __init__(self, main: Path) -> None:
        self.root = package_root(main)
        self.main = main.resolve()
        self.files: dict[Path, _File | None] = {}

    def file(self, path: Path) -> _File | None:
        if path not in self.files:
            self.files[path] = None
            try:
                tree = ast.parse(path.read_text(encoding="utf-8"))
            except (OSError, SyntaxError, ValueError):
                return None
            f = _File(path, tree)
            for st in tree.body:
                if isinstance(st, (ast.ClassDef, ast.FunctionDef)):
                    f.defs[st.name] = st
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom):
                    src = _module_file(path, self.root, node.module or "", node.level)
                    for a in node.names:
                        if src is not None:
                            f.imports[a.asname or a.name] = (src, a.name)
            self.files[path] = f
        return self.files[path]

    def uses(self, path: Path, name: str) -> list[tuple[Path, str]]:
        """The package definitions the definition ``name`` of ``path`` refers to."""
        f = self.file(path)
        node = f.defs.get(name) if f else None
        if f is None or node is None:
            return []
        if isinstance(node, ast.ClassDef):
            methods = {m.name: m for m in node.body if isinstance(m, ast.FunctionDef)}
            todo = [m for m in _ENTRY if m in methods]
            bodies: list[ast.AST] = []
            while todo:
                method = methods[todo.pop()]
                bodies.append(method)
                for n in ast.walk(method):
                    called = n.func if isinstance(n, ast.Call) else None
                    if (
                        isinstance(called, ast.Attribute)
                        and getattr(called.value, "id", "") == "self"
                        and called.attr in methods
                        and methods[called.attr] not in bodies
                        and called.attr not in todo
                    ):
                        todo.append(called.attr)
        else:
            bodies = [node]
        names = {n.id for b in bodies for n in ast.walk(b) if isinstance(n, ast.Name)}
        out: list[tuple[Path, str]] = []
        for used in sorted(names):
            if used in f.defs:
                out.append((path, used))
            elif used in f.imports:
                out.append(f.imports[used])
        return out

    def reached(self) -> set[tuple[Path, str]]:
        """Every package definition the main file's classes reach."""
        f = self.file(self.main)
        todo = [
            (self.main, n) for n, d in (f.defs.items() if f else []) if isinstance(d, ast.ClassDef)
        ]
        seen = set(todo)
        while todo:
            for use in self.uses(*todo.pop()):
                if use not in seen:
                    seen.add(use)
                    todo.append(use)
        return seen


def helpers(main: Path, planned: dict[str, list[Stage]]) -> tuple[Graph, dict[Path, set[str]]]:
    """The package files to port beside ``main`` (file -> the definitions of it reached):
    those holding a planned stage of a reached class, and those importing one of them."""
    graph = Graph(main)
    reached = graph.reached()
    by_file: dict[Path, set[str]] = {}
    for path, name in reached:
        if path != graph.main:
            by_file.setdefault(path, set()).add(name)
    chosen = {
        p for p, names in by_file.items() if any(s.module in names for s in planned.get(str(p), []))
    }
    grew = True
    while grew:
        grew = False
        for p, names in by_file.items():
            if p in chosen:
                continue
            if any(u[0] in chosen for n in names for u in graph.uses(p, n)):
                chosen.add(p)
                grew = True
    return graph, {p: by_file[p] for p in chosen}


def targets(main_target: Path, files: list[Path]) -> dict[Path, Path]:
    """Where each helper's port goes: beside the port under its own name (with its
    folder's name in front when two would clash)."""
    out: dict[Path, Path] = {}
    taken = {main_target.name}
    for f in sorted(files):
        name = f.name if f.name not in taken else f"{f.parent.name}_{f.name}"
        taken.add(name)
        out[f] = main_target.parent / name
    return out


class _Only(Porter):
    """The rewrite pass over the definitions of a file a port reaches (the rest kept)."""

    def __init__(self, stages: list[Stage], notes: dict[str, list[str]], keep: set[str]) -> None:
        super().__init__(stages, notes)
        self.keep = keep
        self.depth = 0

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:  # type: ignore[override]
        self.depth += 1
        if self.depth == 1 and node.name.value not in self.keep:
            return False
        super().visit_ClassDef(node)
        return True

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> Any:
        self.depth -= 1
        if self.depth == 0 and original.name.value not in self.keep:
            return updated
        return super().leave_ClassDef(original, updated)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:  # type: ignore[override]
        if not self.cls and not self.fn and node.name.value not in self.keep:
            return False
        super().visit_FunctionDef(node)
        return True

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> Any:
        if not self.cls and not self.fn and original.name.value not in self.keep:
            return updated
        return super().leave_FunctionDef(original, updated)


def rewrite_only(
    text: str, stages: list[Stage], notes: dict[str, list[str]], keep: set[str]
) -> tuple[str, Any]:
    """:func:`kb.port.rewrite.rewrite` limited to the definitions ``keep`` names."""
    from libcst.metadata import MetadataWrapper

    porter = _Only(stages, notes, keep)
    tree = MetadataWrapper(cst.parse_module(text)).visit(porter)
    return tree.code, porter.result


def unique_ids(text: str, result: Any, taken: set[str], prefix: str) -> str:
    """Stage ids another ported file already uses get ``prefix:`` in front (in the text
    and in the result); the ids kept are added to ``taken``."""
    renamed: dict[str, str] = {}
    for sid in list(result.stages):
        if sid in taken:
            new = f"{prefix}:{sid}"
            renamed[sid] = new
            result.stages[new] = result.stages.pop(sid)
    for old, new in renamed.items():
        text = re.sub(rf"_kb_stage\(\s*{re.escape(repr(old))}", f"_kb_stage({new!r}", text)
    taken.update(result.stages)
    return text


class _Redirect(cst.CSTTransformer):
    """``from M import a, b as c`` of a ported module M -> names read off its port."""

    def __init__(self, graph: Graph, path: Path, files: dict[Path, str]) -> None:
        super().__init__()
        self.graph, self.path, self.files = graph, path, files
        self.count = 0

    def leave_SimpleStatementLine(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> Any:
        if len(updated.body) != 1 or not isinstance(updated.body[0], cst.ImportFrom):
            return updated
        imp = updated.body[0]
        if isinstance(imp.names, cst.ImportStar):
            return updated
        module = cst.Module([]).code_for_node(imp.module) if imp.module else ""
        level = len(imp.relative)
        src = _module_file(self.path, self.graph.root, module, level)
        if src is None or src not in self.files:
            return updated
        spelled = "." * level + module
        lines = []
        for a in imp.names:
            local = cst.Module([]).code_for_node(a.asname.name if a.asname else a.name)
            name = cst.Module([]).code_for_node(a.name)
            lines.append(
                cst.parse_statement(
                    f"{local} = {LOADER}({spelled!r}, {self.files[src]!r}).{name}"
                    "  # kb port: the ported copy\n"
                )
            )
        self.count += 1
        lines[0] = lines[0].with_changes(leading_lines=updated.leading_lines)
        return cst.FlattenSentinel(lines)


def redirect(text: str, graph: Graph, path: Path, files: dict[Path, str]) -> str:
    """``text`` (the port of ``path``) importing the ported copies of ``files`` (original
    file -> the port's file name beside it), with the loader after its leading block."""
    module = cst.parse_module(text)
    change = _Redirect(graph, path, files)
    module = module.visit(change)
    if not change.count:
        return text
    body = list(module.body)
    at = 0
    for i, st in enumerate(body):
        small = st.body if isinstance(st, cst.SimpleStatementLine) else []
        doc = i == 0 and len(small) == 1 and isinstance(small[0], cst.Expr)
        future = any(
            isinstance(s, cst.ImportFrom)
            and isinstance(s.module, cst.Name)
            and s.module.value == "__future__"
            for s in small
        )
        if not (doc or future):
            break
        at = i + 1
    body[at:at] = list(cst.parse_module(_LOADER_CODE).body)
    return module.with_changes(body=body).code


def port_modules(port: Any) -> list[Any]:
    """The ported module and the ported copies it loaded (through each other's loads)."""
    out: list[Any] = []
    todo = [port]
    while todo:
        mod = todo.pop()
        if any(mod is m for m in out):
            continue
        out.append(mod)
        todo.extend(getattr(mod, "KB_PORT_MODULES", []) or [])
    return out


def stages_of(port: Any) -> dict[str, dict[str, Any]]:
    """Stage id -> its record, over the port and its ported copies (the file that holds
    each stage of a copy named as ``file``)."""
    out: dict[str, dict[str, Any]] = {}
    for i, mod in enumerate(port_modules(port)):
        for sid, info in (getattr(mod, "KB_PORT_STAGES", {}) or {}).items():
            out[sid] = {**info, "file": str(getattr(mod, "__file__", ""))} if i else info
    return out


def set_probe(port: Any, probe: Any) -> None:
    """``KB_PORT_PROBE`` in the port and in each ported copy it loaded."""
    for mod in port_modules(port):
        if hasattr(mod, "_kb_stage"):
            mod.KB_PORT_PROBE = probe


def drop_stale(text: str, result: Any, notes: dict[str, list[str]]) -> str:
    """Notes that a class's stage was not rewritten, when a span of a later class (the
    processor an attention module calls) computed it after all: dropped, text and notes."""
    for name, lines in notes.items():
        for line in list(lines):
            for module, mapping in result.done:
                if (
                    module == name
                    and line.startswith(f"stage {mapping} (")
                    and ("not rewritten:" in line)
                ):
                    lines.remove(line)
                    text = text.replace(f"# kb port: {line}\n", "")
                    break
    return text
