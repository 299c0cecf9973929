"""The module inventory of one modelling file.

Classes come from the file itself and from the files its relative imports name (read
once per process, classes and helper functions only, never executed), so a diffusers
block built from an imported ``FeedForward`` or rotating with an imported
``apply_rotary_emb`` is read through.  Config defaults (``hidden_act: str = "silu"``)
come from a sibling ``configuration_*.py`` the file imports.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path
from typing import Any

from kb.scan.model import mapping_ids as ids
from kb.scan.model.entries import modules
from kb.scan.model.entry import Module
from kb.scan.model.facts import ClassFacts, LazyClasses, read_module, statements
from kb.scan.model.files import Refusal
from kb.scan.model.kinds import Context, decide, split_block
from kb.scan.model.reader import Reader
from kb.scan.model.resolve import Def, Parsed, Reach


def _from_imports(tree: ast.Module) -> list[ast.ImportFrom]:
    """``from X import Y`` statements, relative or absolute, anywhere in the file (an
    import inside a method counts too)."""
    return [node for node in statements(tree.body) if isinstance(node, ast.ImportFrom)]


def _file_parts(
    parsed: Parsed,
) -> tuple[LazyClasses, dict[str, ast.FunctionDef], dict[str, Any]]:
    """Classes (read on first use), helpers and class-level defaults of a file the
    imports reach, kept with its parsed tree."""
    found = parsed.memo.get("inventory")
    if found is None:
        body = parsed.tree.body
        helpers = {n.name: n for n in body if isinstance(n, ast.FunctionDef)}
        nodes = {n.name: n for n in body if isinstance(n, ast.ClassDef)}
        found = (LazyClasses(nodes, helpers), helpers, _defaults(parsed.tree))
        parsed.memo["inventory"] = found
    return found  # type: ignore[return-value]


def _defaults(tree: ast.Module) -> dict[str, Any]:
    """``hidden_act: str = "silu"`` at class level and ``hidden_act="silu"`` in ``__init__``,
    per config class (``{"LlamaConfig": {...}}``) and, under ``""``, the values every
    class that sets a key agrees on."""
    out: dict[str, Any] = {}
    seen: dict[str, set[Any]] = {}
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        mine = out.setdefault(cls.name, {})
        for stmt in cls.body:
            if (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and stmt.value is not None
            ):
                if isinstance(stmt.value, ast.Constant):
                    mine.setdefault(stmt.target.id, stmt.value.value)
            elif isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__":
                args = stmt.args
                pairs = list(
                    zip(
                        args.args[len(args.args) - len(args.defaults) :],
                        args.defaults,
                        strict=False,
                    )
                )
                pairs += [
                    (a, d)
                    for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=False)
                    if d is not None
                ]
                for arg, default in pairs:
                    if isinstance(default, ast.Constant):
                        mine.setdefault(arg.arg, default.value)
        for key, value in mine.items():
            seen.setdefault(key, set()).add(
                value if isinstance(value, (str, int, float, bool)) else repr(value)
            )
    out[""] = {k: next(iter(v)) for k, v in seen.items() if len(v) == 1}
    return out


def _dependencies(got: LazyClasses, name: str, depth: int = 3) -> list[str]:
    """Classes of the same imported file that ``name`` builds or defaults to."""
    out: list[str] = []
    todo = [name]
    for _ in range(depth):
        nxt = []
        for n in todo:
            cf = got.get(n)
            if cf is None:
                continue
            for dep in [*cf.attrs.values(), cf.class_strings.get("_default_processor_cls", "")]:
                if dep in got and dep not in out and dep != name:
                    out.append(dep)
                    nxt.append(dep)
        todo = nxt
    return out


def _own_rope_style(probe: ClassFacts) -> set[str]:
    """How one function rotates, read from its own body (never from its name: GLM
    writes an interleaving ``rotate_half``)."""
    found = set()
    if (
        "stride_two" in probe.shapes
        or probe.called("view_as_complex")
        or ("pairs_last" in probe.shapes and probe.called("unbind"))
        or (probe.called("stack") and probe.called("flatten"))
    ):
        found.add("interleave")
    if (
        probe.called("cat")
        and (probe.called("chunk", "split") or "half_slice" in probe.shapes)
        and ({"negate", "mult_sub"} & probe.shapes)
        and "stride_two" not in probe.shapes
    ):
        found.add("half")
    return found


class RopeStyles:
    """How each top-level function rotates, worked out on first question: ``half`` (the
    two halves of the head: chunk and cat), ``interleave`` (neighbouring pairs:
    ``unflatten(-1, (-1, 2))``/``unbind(-1)``, ``view_as_complex``, ``::2``) or
    ``unknown`` when one function does both behind an argument not settled here; a
    function calling a rotating helper rotates like it."""

    def __init__(self, helpers: dict[str, ast.FunctionDef]) -> None:
        self.helpers = helpers
        self.own: dict[str, tuple[set[str], set[str]]] = {}
        self.styles: dict[str, str | None] = {}

    def _own(self, name: str) -> tuple[set[str], set[str]]:
        if name not in self.own:
            from kb.scan.model.facts import _Reader

            fn = self.helpers[name]
            probe = ClassFacts(name, fn.lineno, fn.end_lineno or fn.lineno, [])
            _Reader(probe, {}, {}).function(fn, 0)
            found = _own_rope_style(probe)
            if len(found) > 1:  # diffusers: use_real_unbind_dim picks; read the default
                unbind = next(
                    (
                        d
                        for a, d in zip(fn.args.args[::-1], fn.args.defaults[::-1], strict=False)
                        if a.arg == "use_real_unbind_dim"
                    ),
                    None,
                )
                if unbind is not None:
                    found = {"interleave" if ast.unparse(unbind) == "-1" else "half"}
            self.own[name] = (found, {n for _, n in probe.calls if n in self.helpers and n != name})
        return self.own[name]

    def get(self, name: str) -> str | None:
        if name not in self.helpers:
            return None
        if name not in self.styles:
            found, calls = self._own(name)
            found = set(found)
            if not found:
                for callee in calls:
                    found |= self._own(callee)[0]
            self.styles[name] = (found.pop() if len(found) == 1 else "unknown") if found else None
        return self.styles[name]


#: kinds only the class-facts reader tells apart yet (latent attention, indexers, linear
#: attention, rotation tables): kept from it until the dataflow matchers read them
LEGACY_KINDS = ("attention.mla", "attention.indexer", "attention.linear", "rope.table")


def inventory(
    tree: ast.Module,
    path: str,
    *,
    follow_imports: bool = True,
    unread: list[Refusal] | None = None,
    config: dict[str, Any] | None = None,
) -> list[Module]:
    """Every module of ``tree`` we plan, in source order; ``unread`` receives the files
    the imports lead to that were not read, with the reason.  The dataflow reader decides
    what each class computes; the class-facts reader adds the kinds it does not read yet."""
    follow = follow_imports and Path(path).is_file()
    reach = Reach(path, tree, follow=follow)
    found = modules(Reader(tree, path, config, reach).read(), path)
    legacy = _legacy(tree, path, reach if follow else None)
    if unread is not None:
        unread += reach.refusals.values()
    kept = [m for m in legacy if m.kind in LEGACY_KINDS]
    replaced = {m.name for m in kept if m.kind.startswith("attention.")}
    out = [m for m in found if not (m.name in replaced and m.kind.startswith("attention."))] + kept
    return sorted(out, key=lambda m: (m.file != path, m.file, m.line))


def _legacy(tree: ast.Module, path: str, reach: Reach | None) -> list[Module]:
    """The class-facts reader's inventory (names and conventions)."""
    classes, helpers = read_module(tree)
    local = {c.name: c for c in classes}
    everything: dict[str, ClassFacts] = {}
    all_helpers = dict(helpers)
    defaults: dict[str, Any] = {}
    origin: dict[str, str] = {}
    if reach is not None:
        called = _called_in_classes(tree)
        for node in _from_imports(tree):
            configuration = (node.module or "").rsplit(".", 1)[-1].startswith("configuration")
            for alias in node.names:
                if not configuration and (alias.asname or alias.name) not in called:
                    continue  # a decorator, a base of the library's plumbing, a type
                found = reach.imported(reach.entry, node.module or "", alias.name, node.level, 0)
                if not isinstance(found, Def):
                    continue
                parsed = reach.parsed(found.file)
                if parsed is None:
                    continue
                got, funcs, defs = _file_parts(parsed)
                if os.path.basename(found.file).startswith("configuration"):
                    for cls, values in defs.items():
                        mine = defaults.setdefault(cls, {})
                        for key, value in values.items():
                            mine.setdefault(key, value)
                n, shown = found.name, alias.asname or alias.name
                if isinstance(found.node, ast.ClassDef) and n in got:
                    everything[shown] = got[n]
                    origin[shown] = found.file
                    for dep in _dependencies(got, n):
                        everything.setdefault(dep, got[dep])
                        origin.setdefault(dep, found.file)
                elif n in funcs:
                    all_helpers[shown] = funcs[n]
    everything.update(local)
    for _ in range(3):  # a part built with the owner's config reads the owner's config class
        for cf in classes:
            for ctor in [*cf.attrs.values(), *cf.elements.values()]:
                part = local.get(ctor)
                if cf.config_class and part is not None and not part.config_class:
                    part.config_class = cf.config_class
    ctx = Context(everything, RopeStyles(all_helpers), defaults)
    merged = {c.class_strings.get("_default_processor_cls") for c in everything.values()}
    out: list[Module] = []
    used_imports: set[str] = set()
    for cf in classes:
        if cf.name in merged:
            continue  # read as part of the attention module that defaults to it
        entry = decide(cf, ctx)
        if entry is not None and not entry.kind.startswith("act."):  # activations: parts of an MLP
            entry.file = path
            out.append(entry)
            if entry.kind == "moe.block":
                out += split_block(entry)
        used_imports |= {c for c in cf.attrs.values() if c in origin}
        used_imports |= {c for c in cf.processors.values() if c in origin}
        used_imports -= {cf.attrs[a] for a in cf.processors}  # the processor carries the compute
        out += _configured_ffn(cf, ctx, path)
    for name in sorted(used_imports):
        kind = ctx.kind_of(name)
        if kind and not kind.startswith(("linear", "act.")) and name not in merged:
            imported = decide(everything[name], ctx)
            if imported is not None and not (imported.kind.startswith("mlp.") and imported.unknown):
                imported.file = origin[name]
                imported.facts["imported"] = True
                out.append(imported)
    return out


def _called_in_classes(tree: ast.Module) -> set[str]:
    """The names the file's classes call (the parts they build, the helpers they run)."""
    out: set[str] = set()
    for cls in tree.body:
        if isinstance(cls, ast.ClassDef):
            for stmt in cls.body:
                for node in ast.walk(stmt):
                    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                        out.add(node.func.id)
    return out


def _configured_ffn(cf: ClassFacts, ctx: Context, path: str) -> list[Module]:
    """A feed-forward module whose activation is chosen by a constructor argument
    (``FeedForward(dim, activation_fn="gelu-approximate")``): one entry per attribute,
    with the activation the caller passes (or the constructor's default)."""
    from kb.scan.model.kinds import _activation

    out = []
    for attr, ctor in cf.attrs.items():
        kind = ctx.kind_of(ctor)
        if not kind.startswith("mlp.") or ctx.facts.get(ctor, {}).get("activation") not in (
            "unknown",
            None,
        ):
            continue
        callee = ctx.classes.get(ctor)
        words = [
            w for w in cf.attr_strings.get(attr, []) if _activation(w) or w in ("geglu", "swiglu")
        ]
        source = f"{attr} = {ctor}(..., {words[0]!r})" if words else ""
        if not words and callee is not None:
            words = [
                str(v)
                for k, v in callee.init_defaults.items()
                if "activation" in k and isinstance(v, str)
            ]
            source = f"{ctor} default {words[0]!r}" if words else ""
        if not words:
            continue
        word = words[0].lower().replace("-", "_")
        gated = word in ("geglu", "swiglu", "geglu_approximate")
        act = (
            _activation(
                "silu"
                if word == "swiglu"
                else "gelu_tanh"
                if "approx" in word or "tanh" in word
                else "gelu"
                if "gelu" in word or word == "geglu"
                else word
            )
            or "unknown"
        )
        m = Module(
            f"{cf.name}.{attr}",
            "mlp.glu" if gated else "mlp.plain",
            path,
            cf.line,
            cf.end_line,
            {"activation": act, "activation_from": source, "module": ctor},
        )
        if gated:
            m.mappings.append(ids.SWIGLU if act == "silu" else ids.GEGLU)
        elif act in (ids.GELU, ids.GELU_TANH):
            m.mappings.append(act)
        out.append(m)
    return out
