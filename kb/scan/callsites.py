"""Recording torch_npu calls, and the custom operators a tree mounts, registers or loads.

Every call whose callee resolves to an operator yields one :class:`CallSite` per
combination of argument alternatives that can run together (at most
:data:`MAX_VARIANTS`).  Calls that register operators with the dispatcher (``lib.define``,
``torch.library.define``, a ``custom_op`` decorator) are noted as registrations, with the
schema when the code gives one; assignments onto torch_npu (``torch_npu.x = f``,
``setattr(torch_npu, ...)``) are noted as mounts of this file.  Neither is judged against
an official record of the same name.
"""

from __future__ import annotations

import ast
import itertools
import re
from typing import Any

from kb.scan.kwargs import KwargsTracking
from kb.scan.names import MOUNT_NAMESPACES, PATH_NAMESPACES
from kb.scan.registrations import Registration, function_params, qualified
from kb.scan.scopes import Env
from kb.scan.sites import CallSite, FileScan
from kb.scan.syntax import const_str, expr_calls
from kb.scan.values import Cond, DictV, Entry, Module, Op, consistent

MAX_VARIANTS = 64  # argument combinations checked per call site

#: Calls that load compiled operator extensions at run time; the operators they register
#: are named only by strings in the code that loads them.
LOADERS = (
    "load_library",
    "cpp_extension.load",
    "load_inline",
    "spec_from_file_location",
    "OpBuilder",
    "load_op",
    "build_extension",
    "jit_load",
)
_LOADER_TEXT = re.compile("|".join(LOADERS))
_QUOTED_IDENT = re.compile(r"""["']([A-Za-z_][A-Za-z0-9_]{2,80})["']""")
_LIBRARY_CALLS = (
    "torch.library.define",
    "torch.library.custom_op",
    "torch.library.impl",
    "torch.library.register_fake",
    "torch.library.triton_op",
    "torch._custom_op.impl.custom_op",
    "torch._custom_ops.custom_op",
)
#: Of those, the ones whose decorated function's signature is the operator's schema.
_DEFINING_DECORATORS = (
    "torch.library.custom_op",
    "torch.library.triton_op",
    "torch._custom_op.impl.custom_op",
    "torch._custom_ops.custom_op",
)


def extension_names(text: str) -> set[str]:
    """Identifier-like strings of a file that loads a compiled extension, else nothing."""
    if not _LOADER_TEXT.search(text):
        return set()
    return set(_QUOTED_IDENT.findall(text))


class CallRecorder(KwargsTracking):
    """Turns the calls of an expression into call sites (in the recording pass only)."""

    def __init__(self, scan: FileScan) -> None:
        super().__init__(scan)
        self.collect = False  # True in the pass that records calls
        self._node_ids: dict[int, int] = {}
        self._parens: list[int] | None = None  # lines holding "(" among the first n, per n

    def calls_in(self, root: ast.AST, env: Env, cond: Cond, qual: str) -> None:
        """Record every torch_npu call inside an expression or simple statement."""
        if not self.collect or not self._may_call(root):
            return
        for node in expr_calls(root):
            self.call_site(node, env, cond, qual)

    def _may_call(self, root: ast.AST) -> bool:
        """False when no line ``root`` spans holds a ``(``: every call is written with one,
        so the walk of ``root`` would find nothing (a third of the statements of model code)."""
        first, last = getattr(root, "lineno", None), getattr(root, "end_lineno", None)
        lines = self.scan.lines
        if first is None or last is None or not 0 < first <= last <= len(lines):
            return True
        if self._parens is None:
            count, self._parens = 0, [0]
            for line in lines:
                count += "(" in line
                self._parens.append(count)
        return self._parens[last] > self._parens[first - 1]

    def call_site(self, node: ast.Call, env: Env, cond: Cond, qual: str) -> None:
        self.library_mount(node, env, cond)
        callees = [alt for alt in self.ev(node.func, env, cond) if isinstance(alt.value, Op)]
        if not callees:
            return
        node_id = self._node_ids.setdefault(id(node), len(self._node_ids))
        pos_choices, star = self._positional_choices(node, env, cond)
        kw_choices = self._keyword_choices(node, env, cond)
        first = self.where(node)
        func_where = self.where(node.func)
        end = getattr(node, "end_lineno", first.line) or first.line
        variants = 0
        seen: set[tuple[Any, ...]] = set()
        for callee in callees:
            op: Op = callee.value
            for combo in itertools.islice(
                itertools.product(*pos_choices, *kw_choices), MAX_VARIANTS * 4
            ):
                merged = consistent(cond, callee.cond, *(c for c, _ in combo))
                if merged is None:
                    continue
                positional = list(op.bound_args) + [e for _c, e in combo[: len(pos_choices)] if e]
                keywords, open_kwargs = _keywords(op, combo[len(pos_choices) :])
                key = (
                    op,
                    tuple((e.text, repr(e.value)) for e in positional),
                    tuple(sorted((k, e.text, repr(e.value)) for k, e in keywords.items())),
                    open_kwargs,
                )
                if key in seen:
                    continue
                seen.add(key)
                self.scan.calls.append(
                    CallSite(
                        self.scan.path,
                        op,
                        first,
                        func_where,
                        end,
                        positional,
                        keywords,
                        star,
                        open_kwargs,
                        merged,
                        qual,
                        node_id,
                        variants,
                        cond,
                    )
                )
                variants += 1
                if variants >= MAX_VARIANTS:
                    return

    def _positional_choices(
        self, node: ast.Call, env: Env, cond: Cond
    ) -> tuple[list[list[tuple[Cond, Entry | None]]], bool]:
        """Each positional argument's alternatives, and whether a ``*args`` is spread."""
        choices: list[list[tuple[Cond, Entry | None]]] = []
        star = False
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                star = True
                continue
            choices.append([(c, self.entry(arg, v)) for c, v in self.ev(arg, env, cond)])
        return choices, star

    def _keyword_choices(
        self, node: ast.Call, env: Env, cond: Cond
    ) -> list[list[tuple[Cond, Any]]]:
        """Each keyword's alternatives: ``{name: entry}``, or ``(entries, open)`` for ``**kw``."""
        choices: list[list[tuple[Cond, Any]]] = []
        for kw in node.keywords:
            if kw.arg is not None:
                choices.append(
                    [
                        (c, {kw.arg: self.entry(kw.value, v, kw)})
                        for c, v in self.ev(kw.value, env, cond)
                    ]
                )
            else:
                spread = []
                for c, v in self.ev(kw.value, env, cond):
                    if isinstance(v, DictV):
                        spread.append((c, (dict(v.entries), v.open)))
                    else:
                        spread.append((c, ({}, True)))
                choices.append(spread)
        return choices

    def library_mount(self, node: ast.Call, env: Env, cond: Cond) -> None:
        """``lib.define("npu_x(...)")``, ``torch.library.custom_op("npu::npu_x")``,
        ``setattr(torch_npu, name, getattr(torch.ops.custom, name))`` and kin."""
        func = node.func
        if (
            isinstance(func, ast.Name)
            and func.id == "setattr"
            and len(node.args) == 3
            and env.lookup("setattr") is None
        ):
            name = const_str(node.args[1])
            for _c, owner in self.ev(node.args[0], env, cond):
                ns = PATH_NAMESPACES.get(owner.path) if isinstance(owner, Module) else None
                if ns in MOUNT_NAMESPACES and ns != "atb":  # setattr on torch.ops.atb: not followed
                    self.scan.mounts.add((ns, name or "*"))
            return
        first = const_str(node.args[0]) if node.args else None
        if first is None:
            return
        if isinstance(func, ast.Attribute) and func.attr in ("define", "impl", "_register_fake"):
            for _c, owner in self.ev(func.value, env, cond):
                if isinstance(owner, Module) and owner.path.startswith("<library>."):
                    ns = owner.path.split(".", 1)[1]
                    schema = first if func.attr == "define" else None
                    self._register(ns, first, schema, node, func.attr == "define", cond)
                    return
        for _c, fn in self.ev(func, env, cond):
            if isinstance(fn, Module) and fn.path in _LIBRARY_CALLS and "::" in first:
                ns, _, rest = first.partition("::")
                schema = None
                if fn.path == "torch.library.define":
                    second = const_str(node.args[1]) if len(node.args) > 1 else None
                    schema = rest if "(" in rest else (rest.strip() + second if second else None)
                # a custom_op's definition is its decorated function's (see ``decorated``)
                self._register(
                    ns.strip(), rest, schema, node, fn.path == "torch.library.define", cond
                )
                return

    def decorated(
        self, deco: ast.expr, fn: ast.FunctionDef | ast.AsyncFunctionDef, env: Env, cond: Cond
    ) -> None:
        """``@custom_op("ns::name")`` on a function: the operator with that function's parameters."""
        if not (self.collect and isinstance(deco, ast.Call) and deco.args):
            return
        name = qualified(const_str(deco.args[0]))
        if name is None:
            return
        for _c, value in self.ev(deco.func, env, cond):
            if isinstance(value, Module) and value.path in _DEFINING_DECORATORS:
                self.scan.registrations.add(
                    Registration(
                        name[0],
                        name[1],
                        None,
                        self.scan.path,
                        deco.lineno,
                        params=function_params(fn),
                        branch=off_npu_build(cond),
                    )
                )
                return

    def _register(
        self, ns: str, text: str, schema: str | None, node: ast.Call, defines: bool, cond: Cond
    ) -> None:
        """One registration of ``ns``: ``text`` is ``name``, ``name.overload`` or a schema;
        ``defines``: a definition, not a kernel or fake for one defined elsewhere; ``cond``:
        the branch it is made in (one that keeps it off NPU builds makes it another's)."""
        name = text.split("(")[0].split(".")[0].strip()
        if not name.isidentifier():
            return
        full = schema if schema and "(" in schema and "->" in schema else None
        self.scan.registrations.add(
            Registration(
                ns,
                name,
                full and " ".join(full.split()),
                self.scan.path,
                node.lineno,
                defines=defines,
                branch=off_npu_build(cond),
            )
        )


def _keywords(op: Op, parts: tuple[tuple[Cond, Any], ...]) -> tuple[dict[str, Entry], bool]:
    """The keywords one combination passes (``partial``-bound first) and whether ``**`` is open."""
    keywords: dict[str, Entry] = dict(op.bound_kwargs)
    open_kwargs = False
    for _c, part in parts:
        if isinstance(part, tuple):
            entries, is_open = part
            keywords.update(entries)
            open_kwargs = open_kwargs or is_open
        else:
            keywords.update(part)
    return keywords, open_kwargs


def off_npu_build(cond: Cond) -> str | None:
    """The build a registration made under ``cond`` belongs to when a branch test keeps it
    off NPU builds (``if not is_npu():``, ``elif is_hip():``): the backend the test names,
    else "non-NPU"; None on a path NPU builds take."""
    from kb.scan.context import device_words, off_npu

    test = off_npu(cond)
    if test is None:
        return None
    from kb.vocab import OTHER_BACKEND_WORDS

    other = sorted(device_words(test) & OTHER_BACKEND_WORDS)
    return other[0] if other else "non-NPU"
