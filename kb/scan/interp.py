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

This module is the statement walker; the layers under it are
:mod:`~kb.scan.expressions` (values of expressions), :mod:`~kb.scan.kwargs` (dict
mutations), :mod:`~kb.scan.callsites` (recording calls and mounts),
:mod:`~kb.scan.branches` (conditions) and :mod:`~kb.scan.names` (module attributes).
Statements dispatch on their type through :data:`_HANDLERS`, one handler per kind.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any, NamedTuple

from kb.scan.branches import atom_of, join, join_branches
from kb.scan.callsites import CallRecorder, extension_names
from kb.scan.names import MOUNT_NAMESPACES, PATH_NAMESPACES, attribute
from kb.scan.scopes import Env, dedupe
from kb.scan.sites import CallSite, FileScan
from kb.scan.syntax import (
    annotated,
    binds_self,
    child_exprs,
    const_str,
    expr_calls,
    segment,
    target_names,
)
from kb.scan.values import TRUE, UNKNOWN, Alt, Cond, DictV, Lit, Module

__all__ = ["CallSite", "FileScan", "Interpreter", "segment"]

#: A function body waiting to be walked: (node, qualified name, enclosing scope, class).
Pending = tuple[ast.AST, str, Env, str | None]
#: What a statement leaves: the scope, the path condition, and whether the path ended.
Flow = tuple[Env, Cond, bool]


class Frame(NamedTuple):
    """Where a statement is: the enclosing function or class and the bodies still to walk."""

    qual: str  # qualified name of the enclosing function or class ("" at module level)
    cls: str | None  # the class whose methods are being walked (for self.x)
    queue: list[Pending]


class Interpreter(CallRecorder):
    """Walks one parsed file (see the module docstring)."""

    def __init__(self, scan: FileScan, tree: ast.Module) -> None:
        super().__init__(scan)
        self.tree = tree
        self.module = Env()

    # -- driving ---------------------------------------------------------------------
    def run(self) -> None:
        """Two passes: the first learns ``self.x`` bindings, the second records calls."""
        self.scan.extension_names = extension_names("\n".join(self.scan.lines))
        for collect in (False, True):
            self.collect = collect
            self.module = Env()
            self.scan.functions = []
            queue: list[Pending] = []
            self.block(self.tree.body, self.module, TRUE, Frame("", None, queue))
            while queue:
                node, qual, env, cls = queue.pop(0)
                self.function(node, qual, env, cls, queue)

    def function(
        self, node: ast.AST, qual: str, outer: Env, cls: str | None, queue: list[Pending]
    ) -> None:
        assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        if not self.collect and (cls is None or not binds_self(node)):
            return  # the first pass only learns self.x bindings
        env = Env(outer)
        for arg in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]:
            env.vars[arg.arg] = [Alt(TRUE, annotated(arg.annotation, self.scan.lines))]
        for star in (node.args.vararg, node.args.kwarg):
            if star is not None:
                env.vars[star.arg] = [Alt(TRUE, UNKNOWN)]
        if self.collect:
            self.scan.functions.append((qual, node))
        self.cls = cls
        try:
            self.block(node.body, env, TRUE, Frame(qual, cls, queue))
        finally:
            self.cls = None

    # -- statements ------------------------------------------------------------------
    def block(self, body: list[ast.stmt], env: Env, cond: Cond, frame: Frame) -> Flow:
        """Interpret statements in order; returns (env, path condition, terminated)."""
        for stmt in body:
            env, cond, done = self.statement(stmt, env, cond, frame)
            if done:
                return env, cond, True
        return env, cond, False

    def statement(self, stmt: ast.stmt, env: Env, cond: Cond, frame: Frame) -> Flow:
        handler = _HANDLERS.get(type(stmt), Interpreter.visit_other)
        return handler(self, stmt, env, cond, frame)

    def visit_other(self, stmt: ast.stmt, env: Env, cond: Cond, frame: Frame) -> Flow:
        """A statement the walker does not model: only the calls in it count."""
        for expr in child_exprs(stmt):
            self.calls_in(expr, env, cond, frame.qual)
        return env, cond, False

    def visit_function(
        self, stmt: ast.FunctionDef | ast.AsyncFunctionDef, env: Env, cond: Cond, frame: Frame
    ) -> Flow:
        """Queued to walk after the enclosing body, when every name it may use is bound."""
        name = f"{frame.qual}.{stmt.name}" if frame.qual else stmt.name
        frame.queue.append((stmt, name, env, frame.cls))
        env.vars[stmt.name] = [Alt(TRUE, UNKNOWN)]
        for deco in stmt.decorator_list:
            self.calls_in(deco, env, cond, frame.qual)
            self.decorated(deco, stmt, env, cond)
        return env, cond, False

    def visit_class(self, stmt: ast.ClassDef, env: Env, cond: Cond, frame: Frame) -> Flow:
        name = f"{frame.qual}.{stmt.name}" if frame.qual else stmt.name
        if name not in self.class_attrs:
            self.add_class(
                name,
                [
                    b.attr if isinstance(b, ast.Attribute) else b.id
                    for b in stmt.bases
                    if isinstance(b, (ast.Name, ast.Attribute))
                ],
            )
        self.block(stmt.body, Env(env), TRUE, Frame(name, name, frame.queue))
        env.vars[stmt.name] = [Alt(TRUE, UNKNOWN)]
        return env, cond, False

    def visit_import(self, stmt: ast.Import, env: Env, cond: Cond, frame: Frame) -> Flow:
        for alias in stmt.names:
            if self.collect:
                self.scan.imports.append((alias.name, alias.asname or alias.name, stmt.lineno))
            if alias.asname:
                env.vars[alias.asname] = [Alt(TRUE, Module(alias.name))]
            else:
                top = alias.name.split(".")[0]
                env.vars[top] = [Alt(TRUE, Module(top))]
        return env, cond, False

    def visit_import_from(self, stmt: ast.ImportFrom, env: Env, cond: Cond, frame: Frame) -> Flow:
        base = stmt.module or ""
        for alias in stmt.names:
            if self.collect and base and not stmt.level:
                self.scan.imports.append(
                    (f"{base}.{alias.name}", alias.asname or alias.name, stmt.lineno)
                )
            if alias.name == "*":
                continue
            value = attribute(Module(base), alias.name) if base else UNKNOWN
            env.vars[alias.asname or alias.name] = [Alt(TRUE, value)]
        return env, cond, False

    def visit_exit(self, stmt: ast.Return | ast.Raise, env: Env, cond: Cond, frame: Frame) -> Flow:
        self.calls_in(stmt, env, cond, frame.qual)
        return env, cond, True

    def visit_jump(
        self, stmt: ast.Break | ast.Continue, env: Env, cond: Cond, frame: Frame
    ) -> Flow:
        return env, cond, True

    def visit_if(self, stmt: ast.If, env: Env, cond: Cond, frame: Frame) -> Flow:
        self.calls_in(stmt.test, env, cond, frame.qual)
        atom, truth = atom_of(stmt.test, self.scan.lines)
        known = dict(cond).get(atom)
        if known is not None:  # decided by an enclosing branch on the same test
            return self.block(stmt.body if known == truth else stmt.orelse, env, cond, frame)
        c_true = cond | {(atom, truth)}
        c_false = cond | {(atom, not truth)}
        t_env, f_env = env.copy(), env.copy()
        _narrow(stmt.test, t_env, f_env)
        t_env, _t, t_done = self.block(stmt.body, t_env, c_true, frame)
        f_env, _f, f_done = self.block(stmt.orelse, f_env, c_false, frame)
        if t_done and f_done:
            return env, cond, True
        if t_done:  # ``if c: return`` -- what follows runs only when c is false
            return f_env, c_false, False
        if f_done:
            return t_env, c_true, False
        return join_branches(env, t_env, f_env, atom, truth), cond, False

    def visit_loop(
        self, stmt: ast.For | ast.AsyncFor | ast.While, env: Env, cond: Cond, frame: Frame
    ) -> Flow:
        """The body may run or not; a ``break`` ends only the loop."""
        head = stmt.test if isinstance(stmt, ast.While) else stmt.iter
        self.calls_in(head, env, cond, frame.qual)
        if isinstance(stmt, (ast.For, ast.AsyncFor)):
            for name in target_names(stmt.target):
                env.vars[name] = [Alt(TRUE, UNKNOWN)]
        inner, _c, _d = self.block(stmt.body, env.copy(), cond, frame)
        env = join(env, inner, f"<loop@{stmt.lineno}>")
        for name, keys in _dropped_each(stmt):  # a loop over literal keys runs for each
            self.drop_each(name, keys, env)
        if stmt.orelse:
            env, cond, _ = self.block(stmt.orelse, env, cond, frame)
        return env, cond, False

    def visit_with(
        self, stmt: ast.With | ast.AsyncWith, env: Env, cond: Cond, frame: Frame
    ) -> Flow:
        for item in stmt.items:
            self.calls_in(item.context_expr, env, cond, frame.qual)
            if item.optional_vars is not None:
                for name in target_names(item.optional_vars):
                    env.vars[name] = [Alt(TRUE, UNKNOWN)]
        return self.block(stmt.body, env, cond, frame)

    def visit_try(self, stmt: Any, env: Env, cond: Cond, frame: Frame) -> Flow:
        """``try`` / ``try*``: the body may stop anywhere, so each handler may or may not run."""
        body_env, _c, _d = self.block(stmt.body, env.copy(), cond, frame)
        merged = join(env, body_env, f"<try@{stmt.lineno}>")
        for handler in stmt.handlers:
            h_env = merged.copy()
            if handler.name:
                h_env.vars[handler.name] = [Alt(TRUE, UNKNOWN)]
            h_env, _c, _d = self.block(handler.body, h_env, cond, frame)
            merged = join(merged, h_env, _handler_atom(stmt, handler))
        merged, _c, _d = self.block(stmt.orelse, merged, cond, frame)
        merged, _c, done = self.block(stmt.finalbody, merged, cond, frame)
        return merged, cond, done

    def visit_match(self, stmt: Any, env: Env, cond: Cond, frame: Frame) -> Flow:
        self.calls_in(stmt.subject, env, cond, frame.qual)
        merged = env
        for i, case in enumerate(stmt.cases):
            c_env, _c, _d = self.block(case.body, env.copy(), cond, frame)
            merged = join(merged, c_env, f"<case@{stmt.lineno}:{i}>")
        return merged, cond, False

    # -- assignment ------------------------------------------------------------------
    def visit_assign(self, stmt: ast.Assign, env: Env, cond: Cond, frame: Frame) -> Flow:
        self.calls_in(stmt.value, env, cond, frame.qual)
        alts = self.ev(stmt.value, env, cond)
        self.mutations_in(stmt.value, env, cond)
        for target in stmt.targets:
            self.assign(target, stmt.value, alts, env, cond, frame.cls)
        return env, cond, False

    def visit_ann_assign(self, stmt: ast.AnnAssign, env: Env, cond: Cond, frame: Frame) -> Flow:
        if stmt.value is not None:
            self.calls_in(stmt.value, env, cond, frame.qual)
            alts = self.ev(stmt.value, env, cond)
            self.mutations_in(stmt.value, env, cond)
            self.assign(stmt.target, stmt.value, alts, env, cond, frame.cls)
        return env, cond, False

    def mutations_in(self, value: ast.expr, env: Env, cond: Cond) -> None:
        """``x = kw.pop("k", None)`` takes ``k`` out of ``kw`` as a bare ``kw.pop("k")``
        does: a dict changed inside an assigned value changes what later calls receive."""
        first, last = getattr(value, "lineno", 0), getattr(value, "end_lineno", 0) or 0
        text = self.scan.lines[first - 1 : last] if first else []
        if any(".pop(" in line or ".setdefault(" in line or ".update(" in line for line in text):
            for call in expr_calls(value):
                self.mutation(call, env, cond)

    def visit_aug_assign(self, stmt: ast.AugAssign, env: Env, cond: Cond, frame: Frame) -> Flow:
        """``kw |= {...}`` updates a tracked dict; any other ``x op= y`` makes x UNKNOWN."""
        self.calls_in(stmt.value, env, cond, frame.qual)
        if isinstance(stmt.target, ast.Name):
            if isinstance(stmt.op, ast.BitOr):
                self.update_dict(stmt.target.id, [stmt.value], [], env, cond)
            else:
                env.vars[stmt.target.id] = [Alt(TRUE, UNKNOWN)]
        return env, cond, False

    def visit_expr(self, stmt: ast.Expr, env: Env, cond: Cond, frame: Frame) -> Flow:
        self.calls_in(stmt.value, env, cond, frame.qual)
        self.mutation(stmt.value, env, cond)
        return env, cond, False

    def visit_delete(self, stmt: ast.Delete, env: Env, cond: Cond, frame: Frame) -> Flow:
        for target in stmt.targets:
            if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
                self.drop_key(target.value.id, target.slice, env, cond)
            elif isinstance(target, ast.Subscript):
                self.drop_self_key(target.value, target.slice)
        return env, cond, False

    def assign(
        self,
        target: ast.expr,
        value: ast.expr,
        alts: list[Alt],
        env: Env,
        cond: Cond,
        cls: str | None,
    ) -> None:
        if isinstance(target, ast.Name):
            env.vars[target.id] = dedupe(Alt(c, v) for c, v in alts)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for name in target_names(target):
                env.vars[name] = [Alt(TRUE, UNKNOWN)]
        elif isinstance(target, ast.Attribute):
            self._assign_attribute(target, alts, env, cond, cls)
        elif isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
            key = const_str(target.slice)
            if key is None:
                self.map_dict(target.value.id, env, lambda d: DictV(d.entries, True))
                return
            # entries only for a dict still tracked: past the key budget a store costs nothing
            tracked = any(isinstance(v, DictV) for _c, v in env.lookup(target.value.id) or ())
            entries = [self.entry(value, v, target.slice) for _c, v in alts] if tracked else []
            self.map_dict_alts(target.value.id, env, key, entries, alts)

    def _assign_attribute(
        self, target: ast.Attribute, alts: list[Alt], env: Env, cond: Cond, cls: str | None
    ) -> None:
        """``self.x = ...`` is learnt in the first pass; ``torch_npu.x = ...`` mounts an operator."""
        base = target.value
        if isinstance(base, ast.Name) and base.id == "self" and cls is not None:
            table = self.class_attrs.setdefault(cls, {})
            if not self.collect:
                table[target.attr] = dedupe(
                    [*table.get(target.attr, []), *(Alt(TRUE, v) for _c, v in alts)]
                )
        for b_alt in self.ev(base, env, cond):
            if isinstance(b_alt.value, Module):  # a custom operator mounted on torch_npu ...
                ns = PATH_NAMESPACES.get(b_alt.value.path)
                if ns in MOUNT_NAMESPACES:
                    self.scan.mounts.add((ns, target.attr))


def _narrow(test: ast.expr, t_env: Env, f_env: Env) -> None:
    """A branch on ``x is not None`` / ``x is None`` / ``if x:`` tells what ``x`` is inside:
    the arm where ``x`` is not None drops its None alternatives, so ``layout = "TND"``
    under ``if seqlens is not None:`` never meets ``seqlens = None`` at a later call."""
    name, not_none_arm = None, None
    if isinstance(test, ast.Name):
        name, not_none_arm = test.id, t_env
    elif (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.left, ast.Name)
        and isinstance(test.ops[0], (ast.Is, ast.IsNot))
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
    ):
        name = test.left.id
        not_none_arm = t_env if isinstance(test.ops[0], ast.IsNot) else f_env
    if name is None or not_none_arm is None:
        return
    alts = not_none_arm.lookup(name)
    if alts:
        kept = [a for a in alts if not (isinstance(a.value, Lit) and a.value.value is None)]
        if kept and len(kept) < len(alts):
            not_none_arm.vars[name] = kept


_IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError"})
#: Handlers that catch an ImportError among everything else: one after a ``try`` that
#: only imports and binds names (no call that could raise otherwise) is its fallback.
_ANY_ERRORS = frozenset({"Exception", "BaseException"})


def _handler_atom(stmt: Any, handler: ast.ExceptHandler) -> str:
    """The atom of an ``except`` arm; an ``ImportError`` arm names what the ``try`` imported
    (``<except ImportError of torch_npu@12>``), the fallback when that package is missing."""
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    names = {k.id for k in kinds if isinstance(k, ast.Name)}
    if handler.type is None or names & _ANY_ERRORS:  # a bare except of imports and names only
        names |= _IMPORT_ERRORS if _imports_only(stmt.body) else set()
    if names & _IMPORT_ERRORS:
        modules = [a.name for s in stmt.body if isinstance(s, ast.Import) for a in s.names]
        modules += [s.module for s in stmt.body if isinstance(s, ast.ImportFrom) and s.module]
        if modules:
            return f"<except ImportError of {' '.join(modules)}@{handler.lineno}>"
    return f"<except@{handler.lineno}>"


def _imports_only(body: list[ast.stmt]) -> bool:
    """Whether a ``try`` body only imports and binds names: no call, no nested block."""
    simple = (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign, ast.Pass)
    return all(isinstance(s, simple) and not expr_calls(s) for s in body)


_Handler = Callable[[Interpreter, Any, Env, Cond, Frame], Flow]
#: Statement kind -> its handler, built once; a kind not listed gets ``visit_other``.
_HANDLERS: dict[type[ast.AST], _Handler] = {
    ast.FunctionDef: Interpreter.visit_function,
    ast.AsyncFunctionDef: Interpreter.visit_function,
    ast.ClassDef: Interpreter.visit_class,
    ast.Import: Interpreter.visit_import,
    ast.ImportFrom: Interpreter.visit_import_from,
    ast.Return: Interpreter.visit_exit,
    ast.Raise: Interpreter.visit_exit,
    ast.Break: Interpreter.visit_jump,
    ast.Continue: Interpreter.visit_jump,
    ast.If: Interpreter.visit_if,
    ast.For: Interpreter.visit_loop,
    ast.AsyncFor: Interpreter.visit_loop,
    ast.While: Interpreter.visit_loop,
    ast.With: Interpreter.visit_with,
    ast.AsyncWith: Interpreter.visit_with,
    ast.Try: Interpreter.visit_try,
    ast.Match: Interpreter.visit_match,
    ast.Assign: Interpreter.visit_assign,
    ast.AnnAssign: Interpreter.visit_ann_assign,
    ast.AugAssign: Interpreter.visit_aug_assign,
    ast.Expr: Interpreter.visit_expr,
    ast.Delete: Interpreter.visit_delete,
}
if hasattr(ast, "TryStar"):  # Python 3.11+
    _HANDLERS[ast.TryStar] = Interpreter.visit_try


def _dropped_each(stmt: ast.For | ast.AsyncFor | ast.While) -> list[tuple[str, list[str]]]:
    """``(dict, keys)`` for a loop over a literal tuple or list of string keys whose body
    pops or deletes its loop variable from a dict at its top level: the loop runs once
    per key, so after it every key is gone."""
    if isinstance(stmt, ast.While) or not isinstance(stmt.target, ast.Name):
        return []
    if not isinstance(stmt.iter, (ast.Tuple, ast.List, ast.Set)) or not stmt.iter.elts:
        return []
    keys = [const_str(e) for e in stmt.iter.elts]
    if any(k is None for k in keys):
        return []
    var = stmt.target.id
    out: list[tuple[str, list[str]]] = []
    for body in stmt.body:
        node: ast.AST = body.value if isinstance(body, ast.Expr) else body
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "pop"
            and isinstance(node.func.value, ast.Name)
            and node.args
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id == var
        ):
            out.append((node.func.value.id, [k for k in keys if k]))
        elif isinstance(node, ast.Delete):
            for t in node.targets:
                if (
                    isinstance(t, ast.Subscript)
                    and isinstance(t.value, ast.Name)
                    and isinstance(t.slice, ast.Name)
                    and t.slice.id == var
                ):
                    out.append((t.value.id, [k for k in keys if k]))
    return out
