"""The model reader's interpreter: Python statements and expressions into a dataflow graph.

A module's ``__init__`` is run abstractly to learn what it holds (child modules,
parameters, constructor values as the caller passed them), its ``forward`` to learn what
it computes: every tensor operation becomes a :class:`~kb.scan.model.graph.Node`, and
calls of child modules, bound methods, helpers and functions of imported files are
followed into their bodies (:mod:`kb.scan.model.calls`).  Branches the reader cannot
decide are both taken and their values merged; loops run once; code that only runs in
training (``self.training``) does not run.  The work is bounded (steps and call depth):
past the bound a value is UNKNOWN, never an error.  Nothing is imported or executed.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from kb.scan.model.calls import training_only
from kb.scan.model.exprs import Expressions
from kb.scan.model.frames import Frame
from kb.scan.model.graph import (
    UNKNOWN,
    Alt,
    ClassRef,
    Const,
    DictVal,
    Ext,
    Func,
    Inst,
    ModuleVal,
    Node,
    Returned,
    Seq,
    Sym,
    decider,
    merge,
    truth,
)
from kb.scan.model.resolve import Def, External, ModuleRef, Reach


class Interp(Expressions):
    """Runs modelling code abstractly (see the module doc)."""

    def __init__(
        self,
        reach: Reach,
        config: dict[str, Any] | None = None,
        *,
        max_steps: int = 60_000,
        max_depth: int = 24,
    ) -> None:
        super().__init__()
        self.reach = reach
        self.model_config = config or {}
        self.nodes: list[Node] = []
        self.instances: list[Inst] = []
        self.ran: set[int] = set()  # the classes (their nodes) whose forward was called
        self.steps = 0
        self.max_steps = max_steps
        self.max_depth = max_depth
        self.depth = 0
        self.exhausted = False
        self.globals: dict[tuple[str, str], Any] = {}
        #: per undecided branch being run: instance attributes it set (old and new values)
        self.attr_log: list[dict[tuple[int, str], tuple[Inst, Any, Any]]] = []

    # -- nodes -------------------------------------------------------------------------------
    def node(
        self,
        op: str,
        args: tuple[Any, ...],
        kw: dict[str, Any] | None,
        frame: Frame,
        at: ast.AST | int,
    ) -> Node:
        line = at if isinstance(at, int) else getattr(at, "lineno", 0)
        made = Node(op, args, kw, frame.file, line, frame.owner, frame.loop)
        self.nodes.append(made)
        return made

    def tick(self) -> None:
        self.steps += 1
        if self.steps > self.max_steps:
            self.exhausted = True
            raise Returned("budget")

    # -- globals ------------------------------------------------------------------------------
    def global_value(self, file: str, name: str) -> Any:
        key = (file, name)
        if key in self.globals:
            return self.globals[key]
        self.globals[key] = UNKNOWN  # a value defined through itself
        if training_only(name):  # loss tables and functions: never run at inference
            return UNKNOWN
        found = self.reach.lookup(file, name)
        value = self.found_value(found) if found is not None else self.builtin(name)
        fallback = self.reach.fallback(file, name) if found is not None else None
        if fallback is not None:  # an optional import: the code runs with either binding
            value = merge([value, self.found_value(fallback)], f"whether {name} imports")
        self.globals[key] = value
        return value

    def found_value(self, found: Any) -> Any:
        if isinstance(found, Def):
            if isinstance(found.node, ast.ClassDef):
                return ClassRef(found.node, found.file)
            if isinstance(found.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return Func(found.node, found.file)
            frame = Frame({}, found.file, None, 0)
            try:
                return self.ev(found.node, frame)  # type: ignore[arg-type]
            except Returned:
                return UNKNOWN
        if isinstance(found, External):
            return Ext(found.dotted)
        if isinstance(found, ModuleRef):
            return ModuleVal(found.dotted, found.file)
        return UNKNOWN

    def builtin(self, name: str) -> Any:
        return Ext(name) if name in _BUILTINS else UNKNOWN

    # -- statements ----------------------------------------------------------------------------
    def run_body(self, body: list[ast.stmt], frame: Frame) -> None:
        """Run statements in order; :class:`Returned` leaves at ``return``/``break``."""
        for stmt in body:
            self.tick()
            handler = _STATEMENTS.get(type(stmt))
            if handler is not None:
                handler(self, stmt, frame)

    def st_expr(self, stmt: ast.Expr, frame: Frame) -> None:
        self.ev(stmt.value, frame)

    def st_assign(self, stmt: ast.Assign, frame: Frame) -> None:
        value = self.ev(stmt.value, frame)
        for target in stmt.targets:
            self.assign(target, value, frame, stmt)

    def st_annassign(self, stmt: ast.AnnAssign, frame: Frame) -> None:
        if stmt.value is not None:
            self.assign(stmt.target, self.ev(stmt.value, frame), frame, stmt)

    def st_augassign(self, stmt: ast.AugAssign, frame: Frame) -> None:
        current = (
            self.ev(stmt.target, frame) if not isinstance(stmt.target, ast.Subscript) else None
        )
        value = self.ev(stmt.value, frame)
        if isinstance(stmt.target, ast.Subscript):  # out[idx] += y: accumulate into a slot
            base = self.ev(stmt.target.value, frame)
            index = self.index(stmt.target.slice, frame)
            if isinstance(base, Node):
                old = self.node("getitem", (base,), {"index": index}, frame, stmt)
                new = self.binop(type(stmt.op), old, value, frame, stmt)
                made = self.node(
                    "setitem", (base, new), {"index": index, "accumulate": Const(True)}, frame, stmt
                )
                self.assign(stmt.target.value, made, frame, stmt)
            return
        self.assign(
            stmt.target, self.binop(type(stmt.op), current, value, frame, stmt), frame, stmt
        )

    def st_return(self, stmt: ast.Return, frame: Frame) -> None:
        frame.returns.append(self.ev(stmt.value, frame) if stmt.value is not None else Const(None))
        raise Returned("return")

    def st_jump(self, stmt: ast.stmt, frame: Frame) -> None:
        raise Returned("jump")

    def st_if(self, stmt: ast.If, frame: Frame) -> None:
        decided = truth(self.ev(stmt.test, frame))
        if decided is not None:
            self.run_body(stmt.body if decided else stmt.orelse, frame)
            return
        self.branches([stmt.body, stmt.orelse], frame, decider(stmt.test))

    def branches(self, bodies: list[list[ast.stmt]], frame: Frame, why: str = "") -> None:
        """Run each body on a copy of the names; merge what the ones that go on bound, and
        the instance attributes any of them set (``if fused: self.qkv = ... else: ...``)."""
        start = frame.env
        ends: list[dict[str, Any]] = []
        logs: list[dict[tuple[int, str], tuple[Inst, Any, Any]]] = []
        for body in bodies:
            frame.env = dict(start)
            self.attr_log.append({})
            went_on = False
            try:
                self.run_body(body, frame)
                went_on = True
            except Returned as stop:
                if str(stop) == "budget":
                    self._undo(self.attr_log.pop())
                    frame.env = start
                    raise
            log = self.attr_log.pop()
            self._undo(log)  # the next branch starts from the same instances
            if went_on:
                ends.append(frame.env)
                logs.append(log)
        if not ends:
            frame.env = start
            raise Returned("return")
        names = set().union(*ends)
        merged = dict(start)
        for name in names:
            values = [end.get(name, start.get(name, UNKNOWN)) for end in ends]
            merged[name] = values[0] if all(v is values[0] for v in values) else merge(values, why)
        frame.env = merged
        for key in {k for log in logs for k in log}:
            inst, old, _ = next(log[key] for log in logs if key in log)
            values = [log[key][2] if key in log else old for log in logs]
            same = all(v is values[0] for v in values)
            if old is UNKNOWN and key[1] not in inst.attrs and not same:
                values = [v for v in values if v is not UNKNOWN]
            self.set_attr(
                inst, key[1], values[0] if same or len(values) == 1 else merge(values, why)
            )

    def _undo(self, log: dict[tuple[int, str], tuple[Inst, Any, Any]]) -> None:
        for (_, attr), (inst, old, _) in log.items():
            if old is UNKNOWN:
                inst.attrs.pop(attr, None)
            else:
                inst.attrs[attr] = old

    def st_for(self, stmt: ast.For | ast.AsyncFor, frame: Frame) -> None:
        items = self.iterate(self.ev(stmt.iter, frame))
        frame.loop += 1
        try:
            for item in items:
                self.assign(stmt.target, item, frame, stmt)
                self.loop_body(stmt.body, frame)
        finally:
            frame.loop -= 1

    def st_while(self, stmt: ast.While, frame: Frame) -> None:
        if truth(self.ev(stmt.test, frame)) is False:
            return
        frame.loop += 1
        try:
            self.loop_body(stmt.body, frame)
        finally:
            frame.loop -= 1

    def loop_body(self, body: list[ast.stmt], frame: Frame) -> None:
        before = len(frame.returns)
        try:
            self.run_body(body, frame)
        except Returned as stop:
            if str(stop) == "budget" or len(frame.returns) > before:
                raise

    def st_with(self, stmt: ast.With | ast.AsyncWith, frame: Frame) -> None:
        for item in stmt.items:
            value = self.ev(item.context_expr, frame)
            if item.optional_vars is not None:
                self.assign(item.optional_vars, value, frame, stmt)
        self.run_body(stmt.body, frame)

    def st_try(self, stmt: ast.Try, frame: Frame) -> None:
        self.run_body(stmt.body, frame)
        self.run_body(stmt.orelse, frame)
        self.run_body(stmt.finalbody, frame)

    def st_function(self, stmt: ast.FunctionDef | ast.AsyncFunctionDef, frame: Frame) -> None:
        frame.env[stmt.name] = Func(stmt, frame.file, closure=frame.env)

    def st_import(self, stmt: ast.Import | ast.ImportFrom, frame: Frame) -> None:
        """An import inside a function binds like one at the top of its file."""
        for alias in stmt.names:
            if isinstance(stmt, ast.ImportFrom):
                if alias.name == "*":
                    continue
                found = self.reach.imported(
                    frame.file, stmt.module or "", alias.name, stmt.level, 0
                )
                frame.env[alias.asname or alias.name] = (
                    self.found_value(found) if found else UNKNOWN
                )
            else:
                dotted = alias.name if alias.asname else alias.name.split(".")[0]
                frame.env[alias.asname or dotted] = ModuleVal(
                    dotted, self.reach.module_file(dotted, frame.file)
                )

    # -- assignment ----------------------------------------------------------------------------
    def assign(self, target: ast.expr, value: Any, frame: Frame, at: ast.AST) -> None:
        if isinstance(target, ast.Name):
            frame.env[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            self.unpack(target.elts, value, frame, at)
        elif isinstance(target, ast.Attribute):
            owner = self.ev(target.value, frame)
            if isinstance(owner, Inst):
                self.set_attr(owner, target.attr, value)
        elif isinstance(target, ast.Subscript):
            base = self.ev(target.value, frame)
            if isinstance(base, Node):
                index = self.index(target.slice, frame)
                made = self.node("setitem", (base, value), {"index": index}, frame, at)
                self.assign(target.value, made, frame, at)
            elif isinstance(base, DictVal):
                key = self.ev(target.slice, frame)
                if isinstance(key, Const) and isinstance(key.value, (str, int, float, bool, tuple)):
                    base.items[key.value] = value
        elif isinstance(target, ast.Starred):
            self.assign(target.value, UNKNOWN, frame, at)

    def set_attr(self, owner: Inst, attr: str, value: Any) -> None:
        if self.attr_log:  # inside an undecided branch: remember what it replaced
            key = (id(owner), attr)
            log = self.attr_log[-1]
            old = log[key][1] if key in log else owner.attrs.get(attr, UNKNOWN)
            log[key] = (owner, old, value)
        owner.attrs[attr] = value
        for held in value.options if isinstance(value, Alt) else (value,):
            items = (
                held.items
                if isinstance(held, Seq)
                else held.items.values()
                if isinstance(held, DictVal)
                else (held,)
            )
            for i, item in enumerate(items):
                if isinstance(item, Inst) and item.parent is None and item is not owner:
                    item.parent = owner
                    item.attr = attr if isinstance(held, Inst) else f"{attr}[{i}]"

    def unpack(self, targets: list[ast.expr], value: Any, frame: Frame, at: ast.AST) -> None:
        star = next((i for i, t in enumerate(targets) if isinstance(t, ast.Starred)), None)
        for i, target in enumerate(targets):
            if star is not None and i >= star:
                item = UNKNOWN if i == star else self.item(value, i - len(targets), frame, at)
            else:
                item = self.item(value, i, frame, at)
            self.assign(target, item, frame, at)

    def item(self, value: Any, i: int, frame: Frame, at: ast.AST) -> Any:
        """Element ``i`` of a value being unpacked or indexed by a literal."""
        if isinstance(value, Seq):
            if value.repeated and value.items:
                return value.items[0]
            return value.items[i] if -len(value.items) <= i < len(value.items) else UNKNOWN
        if isinstance(value, Node):
            return self.node("part", (value,), {"index": Const(i)}, frame, at)
        if isinstance(value, Alt):
            return merge([self.item(o, i, frame, at) for o in value.options])
        if isinstance(value, Const) and isinstance(value.value, (tuple, list)):
            items = value.value
            return Const(items[i]) if -len(items) <= i < len(items) else UNKNOWN
        if isinstance(value, Sym):
            return Sym(f"{value.name}[{i}]", value.loop)
        return UNKNOWN

    def iterate(self, value: Any) -> list[Any]:
        """The items a ``for`` loop binds, a few at most (a loop body runs once per item)."""
        if isinstance(value, Seq):
            if value.repeated or not value.items:
                return list(value.items[:1]) or [UNKNOWN]
            distinct: list[Any] = []
            for item in value.items:
                if not any(_same_kind(item, d) for d in distinct):
                    distinct.append(item)
            return distinct[:4]
        if isinstance(value, DictVal):
            return [Const(k) for k in list(value.items)[:4]] or [UNKNOWN]
        if isinstance(value, Node):
            return [
                self.node(
                    "part",
                    (value,),
                    {"index": Sym("i", True)},
                    Frame({}, value.file, None, 0),
                    value.line,
                )
            ]
        if isinstance(value, Const) and isinstance(value.value, (tuple, list)) and value.value:
            return [Const(v) for v in value.value[:4]]
        return [Sym("loop", True)]

    # -- expressions ---------------------------------------------------------------------------


def _same_kind(a: Any, b: Any) -> bool:
    if isinstance(a, Inst) and isinstance(b, Inst):
        return a.name == b.name and a.cls is b.cls and a.leaf == b.leaf
    return a is b


_BUILTINS = frozenset(
    {
        "super",
        "range",
        "len",
        "isinstance",
        "getattr",
        "hasattr",
        "setattr",
        "int",
        "float",
        "bool",
        "str",
        "min",
        "max",
        "abs",
        "enumerate",
        "zip",
        "list",
        "tuple",
        "dict",
        "set",
        "sum",
        "print",
        "type",
        "round",
        "sorted",
        "reversed",
        "any",
        "all",
        "map",
        "iter",
        "next",
        "id",
        "divmod",
        "pow",
        "callable",
        "NotImplementedError",
        "ValueError",
        "object",
        "property",
        "staticmethod",
        "classmethod",
        "vars",
    }
)

_STATEMENTS: dict[type, Callable[[Interp, Any, Frame], None]] = {
    ast.Expr: Interp.st_expr,
    ast.Assign: Interp.st_assign,
    ast.AnnAssign: Interp.st_annassign,
    ast.AugAssign: Interp.st_augassign,
    ast.Return: Interp.st_return,
    ast.Break: Interp.st_jump,
    ast.Continue: Interp.st_jump,
    ast.If: Interp.st_if,
    ast.For: Interp.st_for,
    ast.AsyncFor: Interp.st_for,
    ast.While: Interp.st_while,
    ast.With: Interp.st_with,
    ast.AsyncWith: Interp.st_with,
    ast.Try: Interp.st_try,
    ast.FunctionDef: Interp.st_function,
    ast.AsyncFunctionDef: Interp.st_function,
    ast.Import: Interp.st_import,
    ast.ImportFrom: Interp.st_import,
}
if hasattr(ast, "TryStar"):
    _STATEMENTS[ast.TryStar] = Interp.st_try
