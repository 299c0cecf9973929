"""The module inventory of one modelling file.

Classes come from the file itself and from the files its relative imports name (read
once per process, classes and helper functions only, never executed), so a diffusers
block built from an imported ``FeedForward`` or rotating with an imported
``apply_rotary_emb`` is read through.  Config defaults (``hidden_act: str = "silu"``)
come from a sibling ``configuration_*.py`` the file imports.
"""

from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from kb.scan.model.facts import ClassFacts, read_module
from kb.scan.model.kinds import Context, Module, decide

#: Largest imported file read for its classes.
MAX_IMPORT_BYTES = 2 * 1024 * 1024


def _relative_imports(tree: ast.Module) -> list[tuple[int, str, list[str]]]:
    out = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level and node.module:
            out.append((node.level, node.module, [a.name for a in node.names]))
    return out


def _resolve(path: Path, level: int, module: str) -> Path | None:
    base = path.parent
    for _ in range(level - 1):
        base = base.parent
    target = base.joinpath(*module.split("."))
    for candidate in (target.with_suffix(".py"), target / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@lru_cache(maxsize=64)
def _imported(path: str) -> tuple[dict[str, ClassFacts], dict[str, ast.FunctionDef], dict[str, Any]]:
    """Classes, helpers and class-level defaults of an imported file; empty when unreadable."""
    try:
        if Path(path).stat().st_size > MAX_IMPORT_BYTES:
            return {}, {}, {}
        tree = ast.parse(Path(path).read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return {}, {}, {}
    classes, helpers = read_module(tree)
    return {c.name: c for c in classes}, helpers, _defaults(tree)


def _defaults(tree: ast.Module) -> dict[str, Any]:
    """``hidden_act: str = "silu"`` at class level and ``hidden_act="silu"`` in ``__init__``."""
    out: dict[str, Any] = {}
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        for stmt in cls.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
                if isinstance(stmt.value, ast.Constant):
                    out.setdefault(stmt.target.id, stmt.value.value)
            elif isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__":
                args = stmt.args
                pairs = list(zip(args.args[len(args.args) - len(args.defaults):], args.defaults, strict=False))
                pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=False) if d is not None]
                for arg, default in pairs:
                    if isinstance(default, ast.Constant):
                        out.setdefault(arg.arg, default.value)
    return out


def _rope_helpers(helpers: dict[str, ast.FunctionDef]) -> dict[str, str]:
    """Top-level functions that rotate: ``half`` (rotate_half), ``interleave`` (pairs of
    neighbours: ``unflatten(-1, (-1, 2))``/``unbind(-1)``, ``view_as_complex``, ``::2``)
    or ``unknown`` when one function does both behind an argument not settled here."""
    from kb.scan.model.facts import ClassFacts, _Reader

    styles: dict[str, str] = {}
    for name, fn in helpers.items():
        probe = ClassFacts(name, fn.lineno, fn.end_lineno or fn.lineno, [])
        _Reader(probe, {}, helpers).function(fn, 2)
        found = set()
        if probe.called("rotate_half") or name == "rotate_half":
            found.add("half")
        elif re.search(r"rot|rope", name) and probe.called("chunk", "split") and probe.called("cat"):
            found.add("half")  # x1, x2 = chunk(2); cat(x1*cos - x2*sin, x2*cos + x1*sin)
        if probe.called("view_as_complex") or ("pairs_last" in probe.shapes and probe.called("unbind", "stack")) \
                or "stride_two" in probe.shapes:
            found.add("interleave")
        if not found:
            continue
        if len(found) > 1:  # diffusers: use_real_unbind_dim picks; read the default
            unbind = next((d for a, d in zip(fn.args.args[::-1], fn.args.defaults[::-1], strict=False)
                           if a.arg == "use_real_unbind_dim" and isinstance(d, ast.UnaryOp)), None)  # fmt: skip
            styles[name] = "interleave" if unbind is not None and ast.unparse(unbind) == "-1" else "unknown"
        else:
            styles[name] = found.pop()
    return styles


def inventory(tree: ast.Module, path: str, *, follow_imports: bool = True) -> list[Module]:
    """Every module of ``tree`` we plan, in source order."""
    classes, helpers = read_module(tree)
    local = {c.name: c for c in classes}
    everything: dict[str, ClassFacts] = {}
    all_helpers = dict(helpers)
    defaults: dict[str, Any] = {}
    origin: dict[str, str] = {}
    if follow_imports:
        here = Path(path)
        for level, module, names in _relative_imports(tree) if here.is_file() else []:
            found = _resolve(here, level, module)
            if found is None:
                continue
            got, funcs, defs = _imported(str(found))
            if module.rsplit(".", 1)[-1].startswith("configuration"):
                defaults.update(defs)
            for n in names:
                if n in got:
                    everything[n] = got[n]
                    origin[n] = str(found)
                    everything.update({k: v for k, v in got.items() if k not in everything})
                if n in funcs:
                    all_helpers[n] = funcs[n]
    everything.update(local)
    ctx = Context(everything, _rope_helpers(all_helpers), defaults)
    out: list[Module] = []
    used_imports: set[str] = set()
    for cf in classes:
        entry = decide(cf, ctx)
        if entry is None:
            continue
        entry.file = path
        out.append(entry)
        used_imports |= {c for c in cf.attrs.values() if c in origin}
    for name in sorted(used_imports):
        kind = ctx.kind_of(name)
        if kind and not kind.startswith(("linear", "act.")):
            imported = decide(everything[name], ctx)
            if imported is not None:
                imported.file = origin[name]
                imported.facts["imported"] = True
                out.append(imported)
    return out
