"""Where a name in a model file comes from, found without importing anything.

Research code imports its own package absolutely (``from opensora.models.layers import
Attention``), transformers' remote code relatively, and both re-export names through
``__init__.py`` files; the computation of a UNet block may be three imports away.  A
:class:`Reach` answers "what does this name denote" for one scanned file: it follows
relative and absolute imports that land inside the scanned file's package roots (the
directory above the topmost ``__init__.py`` package, the file's own directory, and a few
directories above them where the import's first component exists), through re-exports
and star imports, several hops deep.  The work is bounded (hops per name, files and bytes
per scanned file); a file not read is kept as a :class:`~kb.scan.model.files.Refusal`
for the plan to name.  Every read goes through :func:`kb.scan.model.files.read_source`.
"""

from __future__ import annotations

import ast
import os
import warnings
from collections import OrderedDict
from dataclasses import dataclass, field

from kb.scan.model.files import Refusal, read_source

#: Directories above the package root where an absolute import may still land.
ROOT_ANCESTORS = 3


@dataclass(frozen=True)
class Limits:
    """How far the reader follows: import hops from a use to a definition, and the files
    and source bytes read for one scanned file."""

    hops: int = 6
    files: int = 64
    bytes: int = 16 * 1024 * 1024
    #: one followed file at most
    file_bytes: int = 2 * 1024 * 1024


@dataclass
class Parsed:
    """One file read: its tree and its top-level bindings (the last one of a name wins,
    as at import time; a binding inside ``if``/``try`` counts too)."""

    path: str
    tree: ast.Module
    names: dict[str, ast.AST] = field(default_factory=dict)
    stars: list[ast.ImportFrom] = field(default_factory=list)
    size: int = 0
    fallbacks: dict[str, ast.AST] = field(default_factory=dict)  # see _bindings
    memo: dict[str, object] = field(
        default_factory=dict
    )  # what readers derive from the tree, kept with it


@dataclass(frozen=True)
class Def:
    """A definition found: a class, a function or a top-level value of a file."""

    node: ast.AST  # ClassDef, FunctionDef, AsyncFunctionDef, or the expression assigned
    file: str
    name: str


@dataclass(frozen=True)
class External:
    """A name from outside the reach (``torch.nn.functional.softmax``): its dotted path."""

    dotted: str


@dataclass(frozen=True)
class ModuleRef:
    """A module bound to a name (``import torch.nn.functional as F``; ``from . import layers``)."""

    dotted: str
    file: str | None  # the module's file when it is inside the reach


Found = Def | External | ModuleRef


def _top_bindings(tree: ast.Module) -> tuple[dict[str, ast.AST], list[ast.ImportFrom]]:
    names, stars, _ = _bindings(tree)
    return names, stars


def _bindings(
    tree: ast.Module,
) -> tuple[dict[str, ast.AST], list[ast.ImportFrom], dict[str, ast.AST]]:
    """(top-level bindings, star imports, the fallbacks of optional imports: what an
    ``except ImportError`` binds to a name its ``try`` binds too)."""
    names: dict[str, ast.AST] = {}
    stars: list[ast.ImportFrom] = []
    fallbacks: dict[str, ast.AST] = {}

    def walk(body: list[ast.stmt]) -> None:
        for stmt in body:
            if isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                names[stmt.name] = stmt
            elif isinstance(stmt, ast.ImportFrom):
                for alias in stmt.names:
                    if alias.name == "*":
                        stars.append(stmt)
                    else:
                        names[alias.asname or alias.name] = stmt
            elif isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    names[alias.asname or alias.name.split(".")[0]] = stmt
            elif isinstance(stmt, ast.Assign):
                for target in stmt.targets:
                    if isinstance(target, ast.Name):
                        names[target.id] = stmt.value
            elif (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and stmt.value is not None
            ):
                names[stmt.target.id] = stmt.value
            elif isinstance(stmt, ast.Try):
                # ``try: from flash_attn import f`` / ``except ImportError: f = None``: the
                # code as it runs with its dependencies installed; a fallback binds only
                # what the guarded block does not
                walk(stmt.body)
                walk(stmt.orelse)
                tried = dict(names)
                for handler in stmt.handlers:
                    walk(handler.body)
                fallbacks.update(
                    {k: names[k] for k, v in tried.items() if k in names and names[k] is not v}
                )
                names.update({k: v for k, v in tried.items() if k in names})
            elif isinstance(stmt, ast.If):
                walk(stmt.body)
                walk(stmt.orelse)

    walk(tree.body)
    return names, stars, fallbacks


#: Files parsed during one scan, by path: (mtime, size) -> Parsed.  Shared by the
#: scanned files of a scan (a package's layers module is imported by all its models),
#: least recently used first.  A tree costs some 30 times its source in memory, so the
#: cache is bounded by the source it holds as well as by files, and emptied when the
#: scan ends (:func:`forget_parsed`): a long scan, or a server process, never keeps
#: every tree it met.
_PARSED: OrderedDict[str, tuple[tuple[int, int], Parsed]] = OrderedDict()
_PARSED_MAX = 96
#: Source bytes of the trees kept at once (about 100 MB of trees).
PARSED_BYTES = 4 * 1024 * 1024
_held = [0]  # source bytes in _PARSED


def _keep(path: str, stamp: tuple[int, int], parsed: Parsed) -> None:
    old = _PARSED.pop(path, None)
    if old is not None:
        _held[0] -= old[1].size
    _PARSED[path] = (stamp, parsed)
    _held[0] += parsed.size
    while _PARSED and (len(_PARSED) > _PARSED_MAX or _held[0] > PARSED_BYTES):
        _, (_, gone) = _PARSED.popitem(last=False)
        _held[0] -= gone.size


def forget_parsed() -> None:
    """Let go of every tree the reader kept (the end of a scan)."""
    _PARSED.clear()
    _held[0] = 0


def parse_text(path: str, text: str) -> Parsed | Refusal:
    """A file's text as a :class:`Parsed`, or why it is not Python the reader can use."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text, filename=path)
    except SyntaxError as exc:
        return Refusal(path, f"Python syntax error at line {exc.lineno or 1}: {exc.msg}")
    except (ValueError, RecursionError, MemoryError) as exc:
        return Refusal(path, f"cannot parse: {str(exc) or type(exc).__name__}")
    names, stars, fallbacks = _bindings(tree)
    return Parsed(path, tree, names, stars, len(text), fallbacks=fallbacks)


def _stamp(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return (st.st_mtime_ns, st.st_size)


def package_root(path: str) -> str:
    """The directory above the topmost package holding ``path`` (its own directory when
    it is not in a package)."""
    here = os.path.dirname(os.path.abspath(path))
    while os.path.isfile(os.path.join(here, "__init__.py")):
        parent = os.path.dirname(here)
        if parent == here:
            break
        here = parent
    return here


class Reach:
    """The code one scanned file can reach through its imports (see the module doc)."""

    def __init__(
        self,
        entry: str,
        tree: ast.Module | None = None,
        limits: Limits | None = None,
        *,
        follow: bool = True,
    ) -> None:
        """``follow=False`` reads the entry alone (source given as text: no file system)."""
        self.limits = limits or Limits()
        self.entry = os.path.abspath(entry) if entry else ""
        self.follow = follow
        self.files_read = 0
        self.bytes_read = 0
        self.refusals: dict[str, Refusal] = {}
        self.files: dict[str, Parsed | None] = {}
        self.roots: list[str] = []
        if follow and self.entry:
            root = package_root(self.entry)
            roots = [root, os.path.dirname(self.entry)]
            up = root
            for _ in range(ROOT_ANCESTORS):
                parent = os.path.dirname(up)
                if not parent or parent == up:
                    break
                roots.append(parent)
                up = parent
            self.roots = list(dict.fromkeys(r for r in roots if r))
        if tree is not None and self.entry:
            names, stars, fallbacks = _bindings(tree)
            self.files[self.entry] = Parsed(self.entry, tree, names, stars, fallbacks=fallbacks)

    # -- reading files ---------------------------------------------------------------------
    def parsed(self, path: str) -> Parsed | None:
        """The parsed file, read once per scanned file within the limits (None: not read,
        with the reason kept in :attr:`refusals` when there is one to say)."""
        if path in self.files:
            return self.files[path]
        self.files[path] = None
        if not self.follow:
            return None
        if self.files_read >= self.limits.files:
            self.refusals[path] = Refusal(
                path,
                f"not followed: the reader reads at most {self.limits.files} "
                "files per scanned file",
            )
            return None
        stamp = _stamp(path)
        cached = _PARSED.get(path)
        if cached is not None and stamp is not None and cached[0] == stamp:
            _PARSED.move_to_end(path)
            parsed: Parsed | Refusal = cached[1]
        else:
            if stamp is not None and self.bytes_read + stamp[1] > self.limits.bytes:
                self.refusals[path] = Refusal(
                    path,
                    f"not followed: the reader reads at most {self.limits.bytes} "
                    "bytes per scanned file",
                )
                return None
            text = read_source(path, self.limits.file_bytes)
            parsed = text if isinstance(text, Refusal) else parse_text(path, text)
            if isinstance(parsed, Parsed) and stamp is not None:
                _keep(path, stamp, parsed)
        if isinstance(parsed, Refusal):
            self.refusals[path] = parsed
            return None
        self.files_read += 1
        self.bytes_read += parsed.size
        self.files[path] = parsed
        return parsed

    # -- modules ---------------------------------------------------------------------------
    def module_file(self, dotted: str, importer: str, level: int = 0) -> str | None:
        """The file of module ``dotted`` imported from ``importer`` (``level`` dots), when
        it lies inside the reach."""
        if not self.follow:
            return None
        parts = [p for p in dotted.split(".") if p] if dotted else []
        if level:
            base = os.path.dirname(importer)
            for _ in range(level - 1):
                base = os.path.dirname(base)
            return module_at(base, parts)
        from kb.scan.model.sitepackages import never_read

        if parts and never_read(parts[0]):  # torch beside the scanned package (a venv)
            return None
        for root in self.roots:
            if not parts or (
                not os.path.exists(os.path.join(root, parts[0]))
                and not os.path.isfile(os.path.join(root, parts[0] + ".py"))
            ):
                continue
            found = module_at(root, parts)
            if found is not None:
                return found
        return None

    def installed_module(self, dotted: str) -> str | None:
        """The file of module ``dotted`` in an installed package (kb.scan.model.sitepackages)."""
        from kb.scan.model.sitepackages import package_parent

        parts = [p for p in dotted.split(".") if p]
        base = package_parent(parts[0]) if parts and self.follow else None
        return module_at(base, parts) if base is not None else None

    def installed_class(self, dotted: str) -> tuple[ast.ClassDef, str] | None:
        """(the class, its file) for ``package.module.Class`` in an installed package."""
        module, _, name = dotted.rpartition(".")
        file = self.installed_module(module) if module else None
        found = self.lookup(file, name) if file is not None else None
        if isinstance(found, Def) and isinstance(found.node, ast.ClassDef):
            return found.node, found.file
        return None

    # -- names -----------------------------------------------------------------------------
    def lookup(self, file: str, name: str, hops: int = 0, *, stars: bool = True) -> Found | None:
        """What the top-level name ``name`` of ``file`` denotes (None: not bound there);
        ``stars=False`` leaves out what only a star import could bind."""
        parsed = self.parsed(file)
        if parsed is None or hops > self.limits.hops:
            return None
        node = parsed.names.get(name)
        if node is None:
            for star in _by_affinity(parsed.stars, name) if stars else ():
                target = self.module_file(star.module or "", file, star.level)
                if target is not None and target != file:
                    found = self.lookup(target, name, hops + 1)
                    if found is not None:
                        return found
            return None
        return self._bound(file, name, node, hops)

    def fallback(self, file: str, name: str) -> Found | None:
        """What an optional import's ``except`` branch binds ``name`` to (None: no such
        branch): the code runs with either."""
        parsed = self.parsed(file)
        node = parsed.fallbacks.get(name) if parsed is not None else None
        return self._bound(file, name, node, 0) if node is not None else None

    def _bound(self, file: str, name: str, node: ast.AST, hops: int) -> Found | None:
        if isinstance(node, ast.ImportFrom):
            alias = next(a for a in node.names if (a.asname or a.name) == name)
            return self.imported(file, node.module or "", alias.name, node.level, hops)
        if isinstance(node, ast.Import):
            alias = next(a for a in node.names if (a.asname or a.name.split(".")[0]) == name)
            dotted = alias.name if alias.asname else alias.name.split(".")[0]
            return ModuleRef(dotted, self.module_file(dotted, file))
        return Def(node, file, name)

    def imported(self, file: str, module: str, name: str, level: int, hops: int) -> Found | None:
        """``from module import name`` in ``file``: the definition inside the reach, a
        submodule, or the external dotted name."""
        target = self.module_file(module, file, level)
        if target is not None:
            found = self.lookup(target, name, hops + 1, stars=False)
            if found is not None:
                return found
            sub = self.module_file(f"{module}.{name}" if module else name, file, level)
            if sub is not None:  # a submodule, before what a star import of the package may bind
                return ModuleRef(f"{module}.{name}" if module else name, sub)
            return self.lookup(target, name, hops + 1)
        if level:
            return None  # a relative import the tree does not hold
        return External(f"{module}.{name}" if module else name)

    def member(self, ref: ModuleRef, name: str, hops: int = 0) -> Found | None:
        """``module.name`` for a module bound to a name."""
        if ref.file is None:
            return External(f"{ref.dotted}.{name}")
        found = self.lookup(ref.file, name, hops + 1)
        if found is not None:
            return found
        sub = (
            self.module_file(f"{ref.dotted}.{name}", ref.file)
            if not ref.file.endswith("__init__.py")
            else module_at(os.path.dirname(ref.file), [name])
        )
        return ModuleRef(f"{ref.dotted}.{name}", sub) if sub is not None else None


def _by_affinity(stars: list[ast.ImportFrom], name: str) -> list[ast.ImportFrom]:
    """Star imports, those whose module names a part of ``name`` first (``Phi3Model``:
    ``from .phi3 import *`` before the other few hundred of a lazy package's index), the
    longest such part first; the others in source order."""
    low = name.lower()

    def score(star: ast.ImportFrom) -> int:
        last = (star.module or "").rsplit(".", 1)[-1].lower()
        return -max((len(t) for t in last.split("_") if len(t) > 1 and t in low), default=0)

    return sorted(stars, key=score)


def module_at(base: str, parts: list[str]) -> str | None:
    """The file of module ``parts`` below ``base`` (``.py`` or a package's
    ``__init__.py``), None when there is none."""
    if not parts:
        init = os.path.join(base, "__init__.py")
        return init if os.path.exists(init) else None
    target = os.path.join(base, *parts)
    for candidate in (target + ".py", os.path.join(target, "__init__.py")):
        if os.path.exists(candidate) and not os.path.isdir(
            candidate
        ):  # not a regular file: refused when read
            return candidate
    return None
