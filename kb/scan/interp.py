"""Reading one Python file into torch_npu call sites, without importing or running it.

A small abstract interpreter walks every module, class and function body in order,
keeping what each name is bound to (a module, an operator, a literal, a dict being
built up for ``**kwargs``) as alternatives guarded by branch conditions.  At every call
whose callee resolves to a torch_npu operator it records one :class:`CallSite` per
combination of argument alternatives that can run together.  Whatever it cannot
resolve is UNKNOWN: unknown values are never judged.

Spellings it follows: ``torch_npu.X``, ``import torch_npu as A``, ``from torch_npu import
X``, ``torch.ops.npu.X[.default|.out]``, ``torch.ops.atb.X``, namespace and function
aliases (``self.ops = tng.ops if graph else torch.ops.npu``, ``f = torch_npu.X``,
``functools.partial``), ``getattr(torch_npu, "X")``, and ``**kwargs`` dicts built from
literals, ``dict(...)``, ``kw[k] = v``, ``kw.update(...)`` in the function or as
``self.x`` in the class.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kb.scan.values import (
    TRUE,
    UNKNOWN,
    Alt,
    Cond,
    DictV,
    DtypeConst,
    Entry,
    Lit,
    Module,
    Op,
    Typed,
    Where,
    consistent,
)
from kb.vocab import normalize

MAX_ALTS = 12  # alternatives kept per name before it becomes UNKNOWN
MAX_VARIANTS = 64  # argument combinations checked per call site

#: torch_npu attributes that are sub-modules, not operators.
SUBMODULES = frozenset({
    "npu", "profiler", "_C", "multiprocessing", "_inductor", "testing", "op_plugin", "contrib",
    "utils", "dynamo", "distributed", "optim", "onnx", "asd", "jit", "fx", "npu_fusion",
    "_afd", "dtypes", "version", "meta", "erase_stream", "_logging", "compiler", "graph",
})  # fmt: skip
#: torch_npu attributes that are dtype constants (torch_npu/csrc/custom_dtype/Init.cpp).
TORCH_NPU_DTYPES = frozenset({
    "float32", "float16", "int8", "int32", "uint8", "int16", "uint16", "uint32", "int64",
    "uint64", "float64", "bool", "complex64", "complex128", "bfloat16", "int4", "uint1",
    "complex32", "hifloat8", "float8_e5m2", "float8_e4m3fn", "float8_e8m0fnu", "float6_e3m2",
    "float6_e2m3", "float4_e2m1fn_x2", "float4_e1m2fn_x2",
})  # fmt: skip
#: torch attributes that name dtypes (plus the aliases torch.float, torch.half ...).
TORCH_DTYPES = frozenset({
    "float32", "float", "float16", "half", "bfloat16", "float64", "double", "int8", "uint8",
    "int16", "short", "int32", "int", "int64", "long", "bool", "complex64", "cfloat",
    "complex128", "cdouble", "complex32", "chalf", "qint8", "quint8", "qint32", "quint4x2",
    "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu", "float4_e2m1fn_x2", "uint16", "uint32",
    "uint64",
})  # fmt: skip
_NAMESPACES = {"npu": "npu", "atb": "atb"}


@dataclass
class CallSite:
    """One torch_npu call, in one combination of argument alternatives."""

    file: str
    op: Op
    where: Where  # the call expression
    func_where: Where  # the callee expression
    end_line: int
    positional: list[Entry]
    keywords: dict[str, Entry]
    star_args: bool
    open_kwargs: bool
    cond: Cond
    scope: str  # qualified name of the enclosing function or class
    node_id: int  # the call node; variants of one call share it
    variant: int = 0
    path_cond: Cond = frozenset()  # the branch conditions enclosing the call itself

    @property
    def joint(self) -> bool:
        """True when this variant combines arms of two or more separate conditions.

        Each arm alone may run, but whether they run together the code does not say;
        a finding seen only in joint variants is reported as a warning.
        """
        return len({atom for atom, _t in self.cond - self.path_cond}) >= 2


@dataclass
class FileScan:
    """What one file yields: call sites, custom operator mounts, function bodies."""

    path: str
    calls: list[CallSite] = field(default_factory=list)
    mounts: set[tuple[str, str]] = field(default_factory=set)  # (namespace, name)
    #: names a file that loads a compiled extension mentions (possible custom operators)
    extension_names: set[str] = field(default_factory=set)
    functions: list[tuple[str, ast.AST]] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)


_FLIP = {ast.IsNot: " is ", ast.NotEq: " == ", ast.NotIn: " in "}


def segment(lines: list[str], node: ast.AST) -> str:
    """Source text of ``node`` from the file's lines, whitespace folded to single spaces."""
    try:
        first, last = node.lineno - 1, node.end_lineno - 1  # type: ignore[attr-defined,operator]
        start, end = node.col_offset, node.end_col_offset  # type: ignore[attr-defined]
    except AttributeError:
        return "?"
    if first < 0 or last >= len(lines) or last < first:
        return "?"
    if first == last:
        raw = lines[first].encode("utf-8")[start:end]
    else:
        parts = [lines[first].encode("utf-8")[start:]]
        parts += [lines[i].encode("utf-8") for i in range(first + 1, last)]
        parts.append(lines[last].encode("utf-8")[:end])
        raw = b" ".join(parts)
    return " ".join(raw.decode("utf-8", "replace").split())


def atom_of(test: ast.expr, lines: list[str]) -> tuple[str, bool]:
    """A branch test as (text, truth): ``not x`` is (x, False), ``a is not None`` is
    (``a is None``, False), so a test and its negation share one atom."""
    truth = True
    while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test, truth = test.operand, not truth
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _FLIP:
        joined = _FLIP[type(test.ops[0])]
        return segment(lines, test.left) + joined + segment(lines, test.comparators[0]), not truth
    return segment(lines, test), truth


class Env:
    """A scope: names bound to alternatives, falling back to the enclosing scope."""

    __slots__ = ("parent", "vars")

    def __init__(self, parent: Env | None = None) -> None:
        self.vars: dict[str, list[Alt]] = {}
        self.parent = parent

    def lookup(self, name: str) -> list[Alt] | None:
        env: Env | None = self
        while env is not None:
            if name in env.vars:
                return env.vars[name]
            env = env.parent
        return None

    def copy(self) -> Env:
        out = Env(self.parent)
        out.vars = dict(self.vars)
        return out


def _dedupe(alts: Iterable[Alt]) -> list[Alt]:
    seen: list[Alt] = []
    for alt in alts:
        if alt not in seen:
            seen.append(alt)
    if len(seen) > MAX_ALTS:
        return [Alt(TRUE, UNKNOWN)]
    return seen


class _Terminated(Exception):
    """Raised internally never; termination is tracked by return values."""


class Interpreter:
    """Walks one parsed file (see the module docstring)."""

    def __init__(self, scan: FileScan, tree: ast.Module) -> None:
        self.scan = scan
        self.tree = tree
        self.module = Env()
        self.class_attrs: dict[str, dict[str, list[Alt]]] = {}
        self.collect = False
        self._node_ids: dict[int, int] = {}

    # -- positions -------------------------------------------------------------------
    def where(self, node: ast.AST) -> Where:
        line = getattr(node, "lineno", 1)
        col = getattr(node, "col_offset", 0)
        text = self.scan.lines[line - 1] if 0 < line <= len(self.scan.lines) else ""
        if text.isascii():
            return Where(line, col + 1)
        return Where(line, len(text.encode("utf-8")[:col].decode("utf-8", "replace")) + 1)

    def source(self, node: ast.AST) -> str:
        """The source text of a node, sliced from the file (cheaper than unparsing)."""
        return segment(self.scan.lines, node)

    def entry(self, node: ast.AST, value: Any, key: ast.AST | None = None) -> Entry:
        text = self.source(node)
        if len(text) > 80:
            text = text[:77] + "..."
        return Entry(value, self.where(node), text, self.where(key) if key is not None else None)

    # -- driving ---------------------------------------------------------------------
    def run(self) -> None:
        """Two passes: the first learns ``self.x`` bindings, the second records calls."""
        self.scan.extension_names = extension_names("\n".join(self.scan.lines))
        for collect in (False, True):
            self.collect = collect
            self.module = Env()
            self.scan.functions = []
            queue: list[tuple[ast.AST, str, Env, str | None]] = []
            self.block(self.tree.body, self.module, TRUE, "", None, queue)
            while queue:
                node, qual, env, cls = queue.pop(0)
                self.function(node, qual, env, cls, queue)

    def function(self, node: ast.AST, qual: str, outer: Env, cls: str | None,
                 queue: list[tuple[ast.AST, str, Env, str | None]]) -> None:  # fmt: skip
        assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        if not self.collect and (cls is None or not _binds_self(node)):
            return  # the first pass only learns self.x bindings
        env = Env(outer)
        for arg in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]:
            env.vars[arg.arg] = [Alt(TRUE, _annotated(arg.annotation, self.scan.lines))]
        for star in (node.args.vararg, node.args.kwarg):
            if star is not None:
                env.vars[star.arg] = [Alt(TRUE, UNKNOWN)]
        if self.collect:
            self.scan.functions.append((qual, node))
        self.block(node.body, env, TRUE, qual, cls, queue)

    # -- statements ------------------------------------------------------------------
    def block(self, body: list[ast.stmt], env: Env, cond: Cond, qual: str, cls: str | None,
              queue: list[tuple[ast.AST, str, Env, str | None]]) -> tuple[Env, Cond, bool]:  # fmt: skip
        """Interpret statements in order; returns (env, path condition, terminated)."""
        for stmt in body:
            env, cond, done = self.statement(stmt, env, cond, qual, cls, queue)
            if done:
                return env, cond, True
        return env, cond, False

    def statement(self, stmt: ast.stmt, env: Env, cond: Cond, qual: str, cls: str | None,
                  queue: list[tuple[ast.AST, str, Env, str | None]]) -> tuple[Env, Cond, bool]:  # fmt: skip
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = f"{qual}.{stmt.name}" if qual else stmt.name
            queue.append((stmt, name, env, cls))
            env.vars[stmt.name] = [Alt(TRUE, UNKNOWN)]
            for deco in stmt.decorator_list:
                self.calls_in(deco, env, cond, qual)
            return env, cond, False
        if isinstance(stmt, ast.ClassDef):
            name = f"{qual}.{stmt.name}" if qual else stmt.name
            self.class_attrs.setdefault(name, {})
            cenv = Env(env)
            self.block(stmt.body, cenv, TRUE, name, name, queue)
            env.vars[stmt.name] = [Alt(TRUE, UNKNOWN)]
            return env, cond, False
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.asname:
                    env.vars[alias.asname] = [Alt(TRUE, Module(alias.name))]
                else:
                    top = alias.name.split(".")[0]
                    env.vars[top] = [Alt(TRUE, Module(top))]
            return env, cond, False
        if isinstance(stmt, ast.ImportFrom):
            base = stmt.module or ""
            for alias in stmt.names:
                bound = alias.asname or alias.name
                if alias.name == "*":
                    continue
                value = self.attribute(Module(base), alias.name) if base else UNKNOWN
                env.vars[bound] = [Alt(TRUE, value)]
            return env, cond, False
        if isinstance(stmt, (ast.Return, ast.Raise)):
            self.calls_in(stmt, env, cond, qual)
            return env, cond, True
        if isinstance(stmt, (ast.Break, ast.Continue)):
            return env, cond, True
        if isinstance(stmt, ast.If):
            return self.branch(stmt, env, cond, qual, cls, queue)
        if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
            head = stmt.test if isinstance(stmt, ast.While) else stmt.iter
            self.calls_in(head, env, cond, qual)
            if isinstance(stmt, (ast.For, ast.AsyncFor)):
                for name in _target_names(stmt.target):
                    env.vars[name] = [Alt(TRUE, UNKNOWN)]
            inner, _c, _d = self.block(stmt.body, env.copy(), cond, qual, cls, queue)
            env = self.join(env, inner, f"<loop@{stmt.lineno}>")
            if stmt.orelse:
                env, cond, _ = self.block(stmt.orelse, env, cond, qual, cls, queue)
            return env, cond, False
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                self.calls_in(item.context_expr, env, cond, qual)
                if item.optional_vars is not None:
                    for name in _target_names(item.optional_vars):
                        env.vars[name] = [Alt(TRUE, UNKNOWN)]
            return self.block(stmt.body, env, cond, qual, cls, queue)
        if isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
            body_env, _c, _d = self.block(stmt.body, env.copy(), cond, qual, cls, queue)  # type: ignore[attr-defined]
            merged = self.join(env, body_env, f"<try@{stmt.lineno}>")
            for handler in stmt.handlers:  # type: ignore[attr-defined]
                h_env = merged.copy()
                if handler.name:
                    h_env.vars[handler.name] = [Alt(TRUE, UNKNOWN)]
                h_env, _c, _d = self.block(handler.body, h_env, cond, qual, cls, queue)
                merged = self.join(merged, h_env, f"<except@{handler.lineno}>")
            merged, _c, _d = self.block(stmt.orelse, merged, cond, qual, cls, queue)  # type: ignore[attr-defined]
            merged, _c, done = self.block(stmt.finalbody, merged, cond, qual, cls, queue)  # type: ignore[attr-defined]
            return merged, cond, done
        if type(stmt).__name__ == "Match":
            self.calls_in(stmt.subject, env, cond, qual)  # type: ignore[attr-defined]
            merged = env
            for i, case in enumerate(stmt.cases):  # type: ignore[attr-defined]
                c_env, _c, _d = self.block(case.body, env.copy(), cond, qual, cls, queue)
                merged = self.join(merged, c_env, f"<case@{stmt.lineno}:{i}>")
            return merged, cond, False
        if isinstance(stmt, ast.Assign):
            self.calls_in(stmt.value, env, cond, qual)
            alts = self.ev(stmt.value, env, cond)
            for target in stmt.targets:
                self.assign(target, stmt.value, alts, env, cond, cls)
            return env, cond, False
        if isinstance(stmt, ast.AnnAssign):
            if stmt.value is not None:
                self.calls_in(stmt.value, env, cond, qual)
                self.assign(stmt.target, stmt.value, self.ev(stmt.value, env, cond), env, cond, cls)
            return env, cond, False
        if isinstance(stmt, ast.AugAssign):
            self.calls_in(stmt.value, env, cond, qual)
            if isinstance(stmt.target, ast.Name):
                if isinstance(stmt.op, ast.BitOr):
                    self.update_dict(stmt.target.id, [stmt.value], [], env, cond)
                else:
                    env.vars[stmt.target.id] = [Alt(TRUE, UNKNOWN)]
            return env, cond, False
        if isinstance(stmt, ast.Expr):
            self.calls_in(stmt.value, env, cond, qual)
            self.mutation(stmt.value, env, cond)
            return env, cond, False
        if isinstance(stmt, ast.Delete):
            for target in stmt.targets:
                if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
                    key = _const_str(target.slice)
                    self.map_dict(target.value.id, env, lambda d, k=key: d.drop(k) if k else
                                  DictV(d.entries, True))  # fmt: skip
            return env, cond, False
        for expr in _child_exprs(stmt):
            self.calls_in(expr, env, cond, qual)
        return env, cond, False

    def branch(self, stmt: ast.If, env: Env, cond: Cond, qual: str, cls: str | None,
               queue: list[tuple[ast.AST, str, Env, str | None]]) -> tuple[Env, Cond, bool]:  # fmt: skip
        self.calls_in(stmt.test, env, cond, qual)
        atom, truth = atom_of(stmt.test, self.scan.lines)
        known = dict(cond).get(atom)
        if known is not None:  # decided by an enclosing branch on the same test
            body = stmt.body if known == truth else stmt.orelse
            return self.block(body, env, cond, qual, cls, queue)
        c_true = cond | {(atom, truth)}
        c_false = cond | {(atom, not truth)}
        t_env, _t, t_done = self.block(stmt.body, env.copy(), c_true, qual, cls, queue)
        f_env, _f, f_done = self.block(stmt.orelse, env.copy(), c_false, qual, cls, queue)
        if t_done and f_done:
            return env, cond, True
        if t_done:  # ``if c: return`` -- what follows runs only when c is false
            return f_env, c_false, False
        if f_done:
            return t_env, c_true, False
        return self.join_branches(env, t_env, f_env, atom, truth), cond, False

    def join_branches(self, before: Env, t_env: Env, f_env: Env, atom: str, truth: bool) -> Env:
        out = before.copy()
        for name in set(t_env.vars) | set(f_env.vars):
            t_alts, f_alts = t_env.vars.get(name), f_env.vars.get(name)
            if t_alts is f_alts and t_alts is not None:
                out.vars[name] = t_alts
                continue
            old = before.lookup(name) or [Alt(TRUE, UNKNOWN)]
            t_alts = t_alts if t_alts is not None else old
            f_alts = f_alts if f_alts is not None else old
            joined = [Alt(c | {(atom, truth)}, v) for c, v in t_alts if (atom, not truth) not in c]
            joined += [Alt(c | {(atom, not truth)}, v) for c, v in f_alts if (atom, truth) not in c]
            out.vars[name] = _dedupe(joined)
        return out

    def join(self, before: Env, after: Env, atom: str) -> Env:
        """Join a path that may or may not have run (a loop body, a try block)."""
        return self.join_branches(before, after, before, atom, True)

    # -- assignment and mutation -------------------------------------------------------
    def assign(self, target: ast.expr, value: ast.expr, alts: list[Alt], env: Env, cond: Cond,
               cls: str | None) -> None:  # fmt: skip
        if isinstance(target, ast.Name):
            env.vars[target.id] = _dedupe(Alt(c, v) for c, v in alts)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for name in _target_names(target):
                env.vars[name] = [Alt(TRUE, UNKNOWN)]
        elif isinstance(target, ast.Attribute):
            base = target.value
            if isinstance(base, ast.Name) and base.id == "self" and cls is not None:
                table = self.class_attrs.setdefault(cls, {})
                if not self.collect:
                    table[target.attr] = _dedupe([*table.get(target.attr, []),
                                                  *(Alt(TRUE, v) for _c, v in alts)])  # fmt: skip
            for b_alt in self.ev(base, env, cond):
                if isinstance(b_alt.value, Module) and b_alt.value.path in (
                    "torch_npu", "torch.ops.npu", "torch.ops.atb"
                ):  # a custom operator mounted on torch_npu / torch.ops.npu
                    ns = "torch_npu" if b_alt.value.path == "torch_npu" else b_alt.value.path[10:]
                    self.scan.mounts.add((ns, target.attr))
        elif isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
            key = _const_str(target.slice)
            entries = [self.entry(value, v, target.slice) for _c, v in alts]
            if key is None:
                self.map_dict(target.value.id, env, lambda d: DictV(d.entries, True))
            else:
                self.map_dict_alts(target.value.id, env, key, entries, alts)

    def map_dict(self, name: str, env: Env, fn: Any) -> None:
        alts = env.lookup(name)
        if not alts:
            return
        env.vars[name] = _dedupe(Alt(c, fn(v) if isinstance(v, DictV) else v) for c, v in alts)

    def map_dict_alts(self, name: str, env: Env, key: str, entries: list[Entry],
                      values: list[Alt]) -> None:  # fmt: skip
        alts = env.lookup(name)
        if not alts:
            return
        out = []
        for c, v in alts:
            if not isinstance(v, DictV):
                out.append(Alt(c, v))
                continue
            for (vc, _v), e in zip(values, entries, strict=True):
                merged = consistent(c, vc)
                if merged is not None:
                    out.append(Alt(merged, v.set(key, e)))
        env.vars[name] = _dedupe(out)

    def mutation(self, expr: ast.expr, env: Env, cond: Cond) -> None:
        """``kw.update(...)``, ``kw.setdefault(k, v)``, ``kw.pop(k)`` on a tracked dict."""
        if not (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute)
                and isinstance(expr.func.value, ast.Name)):  # fmt: skip
            return
        name, method = expr.func.value.id, expr.func.attr
        if method == "update":
            self.update_dict(name, list(expr.args), list(expr.keywords), env, cond)
        elif method == "setdefault" and expr.args:
            key = _const_str(expr.args[0])
            alts = env.lookup(name) or []
            if key is not None and any(isinstance(v, DictV) and not dict(v.entries).get(key)
                                       for _c, v in alts):  # fmt: skip
                value = expr.args[1] if len(expr.args) > 1 else ast.Constant(None)
                vals = self.ev(value, env, cond)
                self.map_dict_alts(name, env, key, [self.entry(value, v, expr.args[0])
                                                    for _c, v in vals], vals)  # fmt: skip
        elif method in ("pop", "__delitem__") and expr.args:
            key = _const_str(expr.args[0])
            self.map_dict(name, env, lambda d, k=key: d.drop(k) if k else DictV(d.entries, True))
        elif method == "clear":
            self.map_dict(name, env, lambda d: DictV())

    def update_dict(self, name: str, args: list[ast.expr], keywords: list[ast.keyword], env: Env,
                    cond: Cond) -> None:  # fmt: skip
        alts = env.lookup(name)
        if not alts:
            return
        adds = self.dict_call(args, keywords, env, cond)
        out = []
        for c, v in alts:
            if not isinstance(v, DictV):
                out.append(Alt(c, v))
                continue
            for ac, add in adds:
                merged = consistent(c, ac)
                if merged is None:
                    continue
                out.append(Alt(merged, v.merged(add) if isinstance(add, DictV)
                               else DictV(v.entries, True)))  # fmt: skip
        env.vars[name] = _dedupe(out)

    # -- expressions -------------------------------------------------------------------
    def ev(self, node: ast.expr, env: Env, cond: Cond) -> list[Alt]:
        """Alternatives of an expression's value (conditions relative to ``cond``)."""
        if isinstance(node, ast.Constant):
            return [Alt(TRUE, Lit(node.value))]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            inner = self.ev(node.operand, env, cond)
            out = []
            for c, v in inner:
                if isinstance(v, Lit) and isinstance(v.value, (int, float)) and not isinstance(v.value, bool):
                    out.append(Alt(c, Lit(-v.value if isinstance(node.op, ast.USub) else v.value)))
                else:
                    out.append(Alt(c, UNKNOWN))
            return out
        if isinstance(node, (ast.Tuple, ast.List)):
            values = []
            for elt in node.elts:
                alts = self.ev(elt, env, cond)
                if len(alts) != 1 or not isinstance(alts[0].value, (Lit, DtypeConst)):
                    return [Alt(TRUE, UNKNOWN)]
                v = alts[0].value
                values.append(v.value if isinstance(v, Lit) else v.spelled)
            return [Alt(TRUE, Lit(values))]
        if isinstance(node, ast.Name):
            found = env.lookup(node.id)
            if found is not None:
                return [alt for alt in found if consistent(alt.cond, cond) is not None] or found
            return [Alt(TRUE, UNKNOWN)]
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id == "self":
                attrs = self._self_attr(node.attr, env)
                if attrs is not None:
                    return attrs
            return _dedupe(Alt(c, self.attribute(v, node.attr)) for c, v in self.ev(node.value, env, cond))
        if isinstance(node, ast.IfExp):
            atom, truth = atom_of(node.test, self.scan.lines)
            known = dict(cond).get(atom)
            if known is not None:
                return self.ev(node.body if known == truth else node.orelse, env, cond)
            out = [Alt(c | {(atom, truth)}, v) for c, v in self.ev(node.body, env, cond)
                   if (atom, not truth) not in c]  # fmt: skip
            out += [Alt(c | {(atom, not truth)}, v) for c, v in self.ev(node.orelse, env, cond)
                    if (atom, truth) not in c]  # fmt: skip
            return _dedupe(out)
        if isinstance(node, ast.Dict):
            return self.dict_literal(node, env, cond)
        if isinstance(node, ast.Call):
            return self.call_value(node, env, cond)
        if isinstance(node, ast.NamedExpr):
            alts = self.ev(node.value, env, cond)
            env.vars[node.target.id] = alts
            return alts
        return [Alt(TRUE, UNKNOWN)]

    def _self_attr(self, attr: str, env: Env) -> list[Alt] | None:
        """``self.attr`` from its assignments in the class's methods.

        Only namespaces, operators and dicts are trusted (what a call or ``**`` needs);
        a literal only when it is the attribute's single binding and not None, since a
        placeholder (``self.scale = None`` in ``__init__``) says nothing about later calls.
        """
        cls_alts: list[Alt] = []
        for table in self.class_attrs.values():
            if attr in table:
                cls_alts.extend(table[attr])
        if not cls_alts:
            return None
        alts = _dedupe(cls_alts)
        if all(isinstance(a.value, (Module, Op, DictV)) for a in alts):
            return alts
        if len(alts) == 1 and isinstance(alts[0].value, (Lit, DtypeConst)) and not (
            isinstance(alts[0].value, Lit) and alts[0].value.value is None
        ):
            return alts
        return [Alt(TRUE, UNKNOWN)]

    def attribute(self, value: Any, attr: str) -> Any:
        if isinstance(value, Module):
            path = value.path
            if path == "torch":
                if attr in ("ops", "npu", "library"):
                    return Module(f"torch.{attr}")
                if attr in TORCH_DTYPES:
                    return DtypeConst(f"torch.{attr}")
                return Module(f"torch.{attr}")
            if path == "torch.ops":
                return Module(f"torch.ops.{attr}")
            if path.startswith("torch.ops."):
                ns = path[len("torch.ops."):]
                if "." in ns:
                    return UNKNOWN
                return Op(_NAMESPACES.get(ns, ns), attr)
            if path == "torch_npu":
                if attr in TORCH_NPU_DTYPES:
                    return DtypeConst(f"torch_npu.{attr}")
                if attr in SUBMODULES or attr.startswith("__"):
                    return Module(f"torch_npu.{attr}")
                return Op("torch_npu", attr)
            if path == "torch.npu":
                return Op("torch.npu", attr)
            if path == "functools" and attr == "partial":
                return Module("functools.partial")
            if path == "torch.library":
                return Module(f"torch.library.{attr}")
            return Module(f"{path}.{attr}")
        if isinstance(value, Op):
            if value.overload is None and not attr.startswith("_"):
                return Op(value.namespace, value.name, attr, value.bound_args, value.bound_kwargs)
            return UNKNOWN
        return UNKNOWN

    def dict_literal(self, node: ast.Dict, env: Env, cond: Cond) -> list[Alt]:
        states: list[Alt] = [Alt(TRUE, DictV())]
        for key, value in zip(node.keys, node.values, strict=True):
            if key is None:  # {**other}
                adds = self.ev(value, env, cond)
            else:
                k = _const_str(key)
                if k is None:
                    states = [Alt(c, DictV(d.entries, True)) for c, d in states]
                    continue
                adds = [Alt(vc, DictV(((k, self.entry(value, v, key)),)))
                        for vc, v in self.ev(value, env, cond)]  # fmt: skip
            states = self._combine(states, adds)
        return _dedupe(states)

    def _combine(self, states: list[Alt], adds: list[Alt]) -> list[Alt]:
        out = []
        for c, d in states:
            for ac, add in adds:
                merged = consistent(c, ac)
                if merged is None:
                    continue
                if isinstance(add, DictV) and isinstance(d, DictV):
                    out.append(Alt(merged, d.merged(add)))
                else:
                    out.append(Alt(merged, DictV(d.entries if isinstance(d, DictV) else (), True)))
        return _dedupe(out)

    def dict_call(self, args: list[ast.expr], keywords: list[ast.keyword], env: Env,
                  cond: Cond) -> list[Alt]:  # fmt: skip
        states: list[Alt] = [Alt(TRUE, DictV())]
        for arg in args:
            states = self._combine(states, self.ev(arg, env, cond))
        for kw in keywords:
            if kw.arg is None:
                states = self._combine(states, self.ev(kw.value, env, cond))
            else:
                adds = [Alt(vc, DictV(((kw.arg, self.entry(kw.value, v, kw)),)))
                        for vc, v in self.ev(kw.value, env, cond)]  # fmt: skip
                states = self._combine(states, adds)
        return states

    def call_value(self, node: ast.Call, env: Env, cond: Cond) -> list[Alt]:
        """The value a call produces, for the calls the scanner understands."""
        out: list[Alt] = []
        for c, fn in self.ev(node.func, env, cond):
            if isinstance(fn, Module) and fn.path == "functools.partial" and node.args:
                for tc, target in self.ev(node.args[0], env, cond):
                    merged = consistent(c, tc)
                    if merged is None or not isinstance(target, Op):
                        out.append(Alt(c, UNKNOWN))
                        continue
                    bound_args = target.bound_args + tuple(
                        self.entry(a, self._single(a, env, cond)) for a in node.args[1:]
                    )
                    bound_kw = target.bound_kwargs + tuple(
                        (kw.arg, self.entry(kw.value, self._single(kw.value, env, cond), kw))
                        for kw in node.keywords if kw.arg is not None
                    )
                    out.append(Alt(merged, Op(target.namespace, target.name, target.overload,
                                              bound_args, bound_kw)))  # fmt: skip
            elif (isinstance(fn, Module) and fn.path == "builtins.dict") or (
                isinstance(node.func, ast.Name) and node.func.id == "dict" and env.lookup("dict") is None
            ):
                out.extend(Alt(consistent(c, dc) or c, d)
                           for dc, d in self.dict_call(list(node.args), list(node.keywords), env, cond))  # fmt: skip
            elif (isinstance(node.func, ast.Name) and node.func.id == "getattr"
                  and env.lookup("getattr") is None and len(node.args) >= 2):  # fmt: skip
                name = _const_str(node.args[1])
                for oc, obj in self.ev(node.args[0], env, cond):
                    if name:
                        out.append(Alt(oc, self.attribute(obj, name)))
                    elif isinstance(obj, Module) and obj.path.startswith("torch.ops."):
                        out.append(Alt(oc, self.attribute(obj, "*")))  # any op of the namespace
                    else:
                        out.append(Alt(oc, UNKNOWN))
            elif isinstance(fn, Module) and fn.path == "torch.library.Library" and node.args:
                ns = _const_str(node.args[0])
                out.append(Alt(c, Module(f"<library>.{ns}") if ns else UNKNOWN))
            else:
                out.append(Alt(c, UNKNOWN))
        return _dedupe(out) or [Alt(TRUE, UNKNOWN)]

    def _single(self, node: ast.expr, env: Env, cond: Cond) -> Any:
        alts = self.ev(node, env, cond)
        return alts[0].value if len(alts) == 1 else UNKNOWN

    # -- call sites --------------------------------------------------------------------
    def calls_in(self, root: ast.AST, env: Env, cond: Cond, qual: str) -> None:
        """Record every torch_npu call inside an expression or simple statement."""
        if not self.collect:
            return
        for node in _walk_expr(root):
            if isinstance(node, ast.Call):
                self.call_site(node, env, cond, qual)

    def call_site(self, node: ast.Call, env: Env, cond: Cond, qual: str) -> None:
        self._library_mount(node, env, cond)
        callees = [alt for alt in self.ev(node.func, env, cond) if isinstance(alt.value, Op)]
        if not callees:
            return
        node_id = self._node_ids.setdefault(id(node), len(self._node_ids))
        pos_choices: list[list[tuple[Cond, Entry | None]]] = []
        star = False
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                star = True
                continue
            pos_choices.append([(c, self.entry(arg, v)) for c, v in self.ev(arg, env, cond)])
        kw_choices: list[list[tuple[Cond, Any]]] = []
        for kw in node.keywords:
            if kw.arg is not None:
                kw_choices.append([(c, {kw.arg: self.entry(kw.value, v, kw)})
                                   for c, v in self.ev(kw.value, env, cond)])  # fmt: skip
            else:
                choices = []
                for c, v in self.ev(kw.value, env, cond):
                    if isinstance(v, DictV):
                        choices.append((c, (dict(v.entries), v.open)))
                    else:
                        choices.append((c, ({}, True)))
                kw_choices.append(choices)
        first = self.where(node)
        func_where = self.where(node.func)
        end = getattr(node, "end_lineno", first.line) or first.line
        variants = 0
        seen: set[tuple[Any, ...]] = set()
        for callee in callees:
            op: Op = callee.value
            for combo in itertools.islice(itertools.product(*pos_choices, *kw_choices), MAX_VARIANTS * 4):
                merged = consistent(cond, callee.cond, *(c for c, _ in combo))
                if merged is None:
                    continue
                positional = list(op.bound_args) + [e for _c, e in combo[: len(pos_choices)] if e]
                keywords: dict[str, Entry] = dict(op.bound_kwargs)
                open_kwargs = False
                for _c, part in combo[len(pos_choices):]:
                    if isinstance(part, tuple):
                        entries, is_open = part
                        keywords.update(entries)
                        open_kwargs = open_kwargs or is_open
                    else:
                        keywords.update(part)
                key = (op, tuple((e.text, repr(e.value)) for e in positional),
                       tuple(sorted((k, e.text, repr(e.value)) for k, e in keywords.items())), open_kwargs)  # fmt: skip
                if key in seen:
                    continue
                seen.add(key)
                self.scan.calls.append(CallSite(self.scan.path, op, first, func_where, end,
                                                positional, keywords, star, open_kwargs, merged,
                                                qual, node_id, variants, cond))  # fmt: skip
                variants += 1
                if variants >= MAX_VARIANTS:
                    return

    def _library_mount(self, node: ast.Call, env: Env, cond: Cond) -> None:
        """``lib.define("npu_x(...)")``, ``torch.library.custom_op("npu::npu_x")``,
        ``setattr(torch_npu, name, getattr(torch.ops.custom, name))`` and kin."""
        func = node.func
        if (isinstance(func, ast.Name) and func.id == "setattr" and len(node.args) == 3
                and env.lookup("setattr") is None):  # fmt: skip
            name = _const_str(node.args[1])
            for _c, owner in self.ev(node.args[0], env, cond):
                if isinstance(owner, Module) and owner.path in ("torch_npu", "torch.ops.npu"):
                    ns = "torch_npu" if owner.path == "torch_npu" else "npu"
                    self.scan.mounts.add((ns, name or "*"))
            return
        first = _const_str(node.args[0]) if node.args else None
        if first is None:
            return
        if isinstance(func, ast.Attribute) and func.attr in ("define", "impl", "_register_fake"):
            for _c, owner in self.ev(func.value, env, cond):
                if isinstance(owner, Module) and owner.path.startswith("<library>."):
                    ns = owner.path.split(".", 1)[1]
                    self.scan.mounts.add((ns, first.split("(")[0].split(".")[0].strip()))
                    return
        for _c, fn in self.ev(func, env, cond):
            if isinstance(fn, Module) and fn.path in (
                "torch.library.define", "torch.library.custom_op", "torch.library.impl",
                "torch.library.register_fake", "torch.library.triton_op",
            ) and "::" in first:  # fmt: skip
                ns, _, rest = first.partition("::")
                self.scan.mounts.add((ns.strip(), rest.split("(")[0].split(".")[0].strip()))
                return


#: Calls that load compiled operator extensions at run time; the operators they register
#: are named only by strings in the code that loads them.
LOADERS = ("load_library", "cpp_extension.load", "load_inline", "spec_from_file_location",
           "OpBuilder", "load_op", "build_extension", "jit_load")  # fmt: skip
_IDENT = __import__("re").compile(r"^[A-Za-z_][A-Za-z0-9_]{2,80}$")


_LOADER_TEXT = __import__("re").compile("|".join(LOADERS))
_QUOTED_IDENT = __import__("re").compile(r"""["']([A-Za-z_][A-Za-z0-9_]{2,80})["']""")


def extension_names(text: str) -> set[str]:
    """Identifier-like strings of a file that loads a compiled extension, else nothing."""
    if not _LOADER_TEXT.search(text):
        return set()
    return set(_QUOTED_IDENT.findall(text))


def _annotated(annotation: ast.expr | None, lines: list[str]) -> Any:
    """What a parameter annotation says: a plain tensor, a list of tensors, or nothing."""
    if annotation is None:
        return UNKNOWN
    text = segment(lines, annotation).replace(" ", "")
    if text in ("torch.Tensor", "Tensor"):
        return Typed("Tensor")
    if text.lower().startswith(("list[torch.tensor]", "list[tensor]", "typing.list[torch.tensor]")):
        return Typed("TensorList")
    return UNKNOWN


def _binds_self(fn: ast.AST) -> bool:
    """Does a method assign ``self.<attr>`` anywhere (the first pass needs only those)?"""
    for node in ast.walk(fn):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                        and t.value.id == "self"):  # fmt: skip
                    return True
    return False


def _const_str(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _target_names(target: ast.AST) -> Iterator[str]:
    for node in ast.walk(target):
        if isinstance(node, ast.Name):
            yield node.id


_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _walk_expr(root: ast.AST) -> Iterator[ast.AST]:
    """Nodes of an expression or simple statement, not descending into nested bodies."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, _NESTED) and not isinstance(child, ast.stmt):
                stack.append(child)


def _child_exprs(stmt: ast.stmt) -> Iterator[ast.expr]:
    for child in ast.iter_child_nodes(stmt):
        if isinstance(child, ast.expr):
            yield child


def dtype_of(spelled: str) -> str | None:
    """The canonical dtype a ``torch.X`` / ``torch_npu.X`` constant names."""
    return normalize("dtype", spelled)
