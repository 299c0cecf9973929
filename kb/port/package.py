"""The package around a ported file: which of its files a port takes along, where they
go, and (for kb verify) the ported copies a port loaded.

``kb port FILE`` follows the names FILE's classes use (``__init__``, ``forward``,
``__call__`` and the methods they call) through the package's imports; a package file
holding a planned stage of a class so reached is ported with FILE, and so is every file
on the import path to it (:mod:`kb.port.across` rewrites them).  Nothing here needs
libcst or torch.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kb.port.spans import Stage
from kb.scan.model.resolve import module_at

#: the methods whose names count as what a class builds and calls
_ENTRY = ("__init__", "forward", "__call__")


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


def module_file(base: Path, root: Path, module: str, level: int) -> Path | None:
    """The file ``from <level dots><module> import`` names, written in ``base``, when it
    lies in the package ``root`` (the outermost package folder of the ported file)."""
    if level:
        pkg = base.parent
        for _ in range(level - 1):
            pkg = pkg.parent
    else:
        pkg = root.parent if (root / "__init__.py").exists() else root
    found = module_at(str(pkg), [p for p in module.split(".") if p])
    if found is None or not Path(found).resolve().is_relative_to(root):
        return None
    return Path(found).resolve()


class Graph:
    """What a file's classes build, through the package's imports (by name)."""

    def __init__(self, main: Path, within: str | None = None) -> None:
        self.root = package_root(main)
        self.main = main.resolve()
        self.files: dict[Path, _File | None] = {}
        #: the folder the reader may read in (the MCP server's root): nothing outside it
        self.within = Path(within).resolve() if within else None

    def file(self, path: Path) -> _File | None:
        if path not in self.files:
            self.files[path] = None
            if self.within is not None and not path.is_relative_to(self.within):
                return None
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
                    src = module_file(path, self.root, node.module or "", node.level)
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


def helpers(
    main: Path, planned: dict[str, list[Stage]], within: str | None = None
) -> tuple[Graph, dict[Path, set[str]]]:
    """The package files to port beside ``main`` (file -> the definitions of it reached):
    those holding a planned stage of a reached class, and those importing one of them."""
    graph = Graph(main, within)
    reached = graph.reached()
    by_file: dict[Path, set[str]] = {}
    for path, name in reached:
        if path != graph.main and graph.file(path) is not None:  # read, inside the root
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


def reaches(main: str) -> dict[str, set[str]]:
    """Per class of ``main``: the names of the package definitions it reaches (its own
    file's and the package files' it imports), for kb verify's choice of classes."""
    graph = Graph(Path(main))
    f = graph.file(graph.main)
    out: dict[str, set[str]] = {}
    for name, node in f.defs.items() if f else []:
        if not isinstance(node, ast.ClassDef):
            continue
        seen: set[tuple[Path, str]] = set()
        todo = [(graph.main, name)]
        while todo:
            for use in graph.uses(*todo.pop()):
                if use not in seen:
                    seen.add(use)
                    todo.append(use)
        out[name] = {n for _, n in seen}
    return out


def forget_copies(port: Any) -> None:
    """The ported copies ``port`` loaded, out of ``sys.modules`` (a later load reads them
    again, with the switch as the environment says then)."""
    import sys

    for mod in port_modules(port)[1:]:
        name = str(getattr(mod, "__name__", ""))
        if sys.modules.get(name) is mod:
            del sys.modules[name]
