"""The value of an expression: its alternatives, each guarded by the branches it needs.

:class:`Evaluator` dispatches on the node's type through :data:`_HANDLERS` (one small
handler per node kind, pylint's ``visit_<node>`` habit); a kind without a handler is
UNKNOWN.  Calls produce a value only where the scanner understands them:
``functools.partial`` of an operator, ``dict(...)``, ``getattr(module, "X")`` and
``torch.library.Library("ns", ...)``.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from kb.scan.branches import atom_of, guarded
from kb.scan.names import attribute
from kb.scan.scopes import MAX_KEYS, Env, capped, dedupe
from kb.scan.sites import FileScan
from kb.scan.syntax import const_str, segment
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
    Where,
    consistent,
)


class Evaluator:
    """Evaluates expressions of one file against a scope (see the module docstring)."""

    def __init__(self, scan: FileScan) -> None:
        self.scan = scan
        #: class qualified name -> ``self.<attr>`` -> what its methods assign to it
        self.class_attrs: dict[str, dict[str, list[Alt]]] = {}
        #: class qualified name -> ``self.<attr>`` -> keys its methods pop or delete from it
        self.attr_drops: dict[str, dict[str, set[str]]] = {}
        #: class qualified name -> the simple names of its bases
        self.class_bases: dict[str, list[str]] = {}
        #: the class whose method is being walked (``self`` is one of its instances)
        self.cls: str | None = None
        self._related: dict[str, tuple[str, ...]] = {}
        self._by_simple: dict[str, list[str]] = {}
        self._children: dict[str, list[str]] = {}

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

    # -- dispatch --------------------------------------------------------------------
    def ev(self, node: ast.expr, env: Env, cond: Cond) -> list[Alt]:
        """Alternatives of an expression's value (conditions relative to ``cond``)."""
        handler = _HANDLERS.get(type(node))
        if handler is None:
            return [Alt(TRUE, UNKNOWN)]
        return handler(self, node, env, cond)

    def ev_constant(self, node: ast.Constant, env: Env, cond: Cond) -> list[Alt]:
        return [Alt(TRUE, Lit(node.value))]

    def ev_unary(self, node: ast.UnaryOp, env: Env, cond: Cond) -> list[Alt]:
        """``-3`` and ``+1.5`` stay literals; any other unary operation is UNKNOWN."""
        if not isinstance(node.op, (ast.USub, ast.UAdd)):
            return [Alt(TRUE, UNKNOWN)]
        out = []
        for c, v in self.ev(node.operand, env, cond):
            if (
                isinstance(v, Lit)
                and isinstance(v.value, (int, float))
                and not isinstance(v.value, bool)
            ):
                out.append(Alt(c, Lit(-v.value if isinstance(node.op, ast.USub) else v.value)))
            else:
                out.append(Alt(c, UNKNOWN))
        return out

    def ev_sequence(self, node: ast.Tuple | ast.List, env: Env, cond: Cond) -> list[Alt]:
        """A list of literals (or dtype constants) with one value each, else UNKNOWN."""
        values = []
        for elt in node.elts:
            alts = self.ev(elt, env, cond)
            if len(alts) != 1 or not isinstance(alts[0].value, (Lit, DtypeConst)):
                return [Alt(TRUE, UNKNOWN)]
            v = alts[0].value
            values.append(v.value if isinstance(v, Lit) else v.spelled)
        return [Alt(TRUE, Lit(values))]

    def ev_name(self, node: ast.Name, env: Env, cond: Cond) -> list[Alt]:
        found = env.lookup(node.id)
        if found is not None:
            return [alt for alt in found if consistent(alt.cond, cond) is not None] or found
        return [Alt(TRUE, UNKNOWN)]

    def ev_attribute(self, node: ast.Attribute, env: Env, cond: Cond) -> list[Alt]:
        if isinstance(node.value, ast.Name) and node.value.id == "self" and self.cls is not None:
            attrs = self.self_attr(node.attr)
            if attrs is not None:
                return attrs
        return dedupe(Alt(c, attribute(v, node.attr)) for c, v in self.ev(node.value, env, cond))

    def ev_ifexp(self, node: ast.IfExp, env: Env, cond: Cond) -> list[Alt]:
        atom, truth = atom_of(node.test, self.scan.lines)
        known = dict(cond).get(atom)
        if known is not None:  # decided by an enclosing branch on the same test
            return self.ev(node.body if known == truth else node.orelse, env, cond)
        return dedupe(
            guarded(self.ev(node.body, env, cond), atom, truth)
            + guarded(self.ev(node.orelse, env, cond), atom, not truth)
        )

    def ev_namedexpr(self, node: ast.NamedExpr, env: Env, cond: Cond) -> list[Alt]:
        alts = self.ev(node.value, env, cond)
        env.vars[node.target.id] = alts
        return alts

    def self_attr(self, attr: str) -> list[Alt] | None:
        """``self.attr`` from its assignments in the class's methods.

        Only namespaces, operators and dicts are trusted (what a call or ``**`` needs);
        a literal only when it is the attribute's single binding and not None, since a
        placeholder (``self.scale = None`` in ``__init__``) says nothing about later calls.
        """
        cls_alts: list[Alt] = []
        for name in self.related(self.cls or ""):
            table = self.class_attrs.get(name, {})
            if attr in table:
                cls_alts.extend(table[attr])
        if not cls_alts:
            return None
        alts = dedupe(cls_alts)
        dropped = {
            k
            for n in self.related(self.cls or "")
            for k in self.attr_drops.get(n, {}).get(attr, ())
        }
        if dropped:  # a key popped in any method: read flow-free, it is gone everywhere
            alts = [
                Alt(c, DictV(tuple((k, e) for k, e in v.entries if k not in dropped), v.open))
                if isinstance(v, DictV)
                else Alt(c, v)
                for c, v in alts
            ]
        if all(isinstance(a.value, (Module, Op, DictV)) for a in alts):
            return alts
        if (
            len(alts) == 1
            and isinstance(alts[0].value, (Lit, DtypeConst))
            and not (isinstance(alts[0].value, Lit) and alts[0].value.value is None)
        ):
            return alts
        return [Alt(TRUE, UNKNOWN)]

    def add_class(self, name: str, bases: list[str]) -> None:
        """Learn one class of the file (qualified ``name``) and the simple names of its bases."""
        self.class_attrs.setdefault(name, {})
        self.class_bases[name] = bases
        simple = name.rsplit(".", 1)[-1]
        self._by_simple.setdefault(simple, []).append(name)
        for base in bases:
            self._children.setdefault(base, []).append(name)
        self._related.clear()

    def related(self, cls: str) -> tuple[str, ...]:
        """The classes whose ``self.x`` a method of ``cls`` may read: ``cls``, the file's
        classes it derives from and those deriving from it (by simple name).  Never every
        class of the file: two classes sharing an attribute name are separate scopes."""
        found = self._related.get(cls)
        if found is not None:
            return found
        out = [cls]
        seen = {cls}
        for step in (self._ancestors, self._descendants):
            todo = [cls]
            while todo:
                for q in step(todo.pop()):
                    if q not in seen:
                        seen.add(q)
                        out.append(q)
                        todo.append(q)
        self._related[cls] = tuple(out)
        return self._related[cls]

    def _ancestors(self, cls: str) -> list[str]:
        return [q for base in self.class_bases.get(cls, []) for q in self._by_simple.get(base, [])]

    def _descendants(self, cls: str) -> list[str]:
        return self._children.get(cls.rsplit(".", 1)[-1], [])

    # -- dicts being built for **kwargs ----------------------------------------------
    def ev_dict(self, node: ast.Dict, env: Env, cond: Cond) -> list[Alt]:
        if len(node.keys) > MAX_KEYS:
            return [Alt(TRUE, UNKNOWN)]  # too many keys to track: open, never judged
        states: list[Alt] = [Alt(TRUE, DictV())]
        for key, value in zip(node.keys, node.values, strict=True):
            if key is None:  # {**other}
                adds = self.ev(value, env, cond)
            else:
                k = const_str(key)
                if k is None:
                    states = [Alt(c, _opened(d)) for c, d in states]
                    continue
                adds = [
                    Alt(vc, DictV(((k, self.entry(value, v, key)),)))
                    for vc, v in self.ev(value, env, cond)
                ]
            states = self.combine(states, adds)
        return dedupe(states)

    def combine(self, states: list[Alt], adds: list[Alt]) -> list[Alt]:
        """Every dict state merged with every addition that can hold together with it.

        A state past the key budget (UNKNOWN) stays so: merging into it costs nothing.
        """
        out = []
        for c, d in states:
            for ac, add in adds:
                merged = consistent(c, ac)
                if merged is None:
                    continue
                if not isinstance(d, DictV):
                    out.append(Alt(merged, d))
                elif isinstance(add, DictV):
                    out.append(Alt(merged, capped(d.merged(add))))
                else:
                    out.append(Alt(merged, DictV(d.entries, True)))
        return dedupe(out)

    def dict_call(
        self, args: list[ast.expr], keywords: list[ast.keyword], env: Env, cond: Cond
    ) -> list[Alt]:
        """``dict(other, k=v, **more)`` (also the arguments of ``kw.update(...)``)."""
        if len(args) + len(keywords) > MAX_KEYS:
            return [Alt(TRUE, UNKNOWN)]  # too many keys to track: open, never judged
        states: list[Alt] = [Alt(TRUE, DictV())]
        for arg in args:
            states = self.combine(states, self.ev(arg, env, cond))
        for kw in keywords:
            if kw.arg is None:
                states = self.combine(states, self.ev(kw.value, env, cond))
            else:
                adds = [
                    Alt(vc, DictV(((kw.arg, self.entry(kw.value, v, kw)),)))
                    for vc, v in self.ev(kw.value, env, cond)
                ]
                states = self.combine(states, adds)
        return states

    # -- calls -------------------------------------------------------------------------
    def ev_call(self, node: ast.Call, env: Env, cond: Cond) -> list[Alt]:
        """The value a call produces, for the calls the scanner understands."""
        out: list[Alt] = []
        for c, fn in self.ev(node.func, env, cond):
            if isinstance(fn, Module) and fn.path == "functools.partial" and node.args:
                out += self._partial(node, c, env, cond)
            elif (isinstance(fn, Module) and fn.path == "builtins.dict") or _builtin(
                node, env, "dict"
            ):
                out.extend(
                    Alt(consistent(c, dc) or c, d)
                    for dc, d in self.dict_call(list(node.args), list(node.keywords), env, cond)
                )
            elif _builtin(node, env, "getattr") and len(node.args) >= 2:
                out += self._getattr(node, env, cond)
            elif isinstance(fn, Module) and fn.path == "torch.library.Library" and node.args:
                ns = const_str(node.args[0])
                out.append(Alt(c, Module(f"<library>.{ns}") if ns else UNKNOWN))
            else:
                out.append(Alt(c, UNKNOWN))
        return dedupe(out) or [Alt(TRUE, UNKNOWN)]

    def _partial(self, node: ast.Call, c: Cond, env: Env, cond: Cond) -> list[Alt]:
        """``functools.partial(op, *args, **kw)``: the operator with those arguments bound."""
        out: list[Alt] = []
        for tc, target in self.ev(node.args[0], env, cond):
            merged = consistent(c, tc)
            if merged is None or not isinstance(target, Op):
                out.append(Alt(c, UNKNOWN))
                continue
            bound_args = target.bound_args + tuple(
                self.entry(a, self.single(a, env, cond)) for a in node.args[1:]
            )
            bound_kw = target.bound_kwargs + tuple(
                (kw.arg, self.entry(kw.value, self.single(kw.value, env, cond), kw))
                for kw in node.keywords
                if kw.arg is not None
            )
            out.append(
                Alt(
                    merged, Op(target.namespace, target.name, target.overload, bound_args, bound_kw)
                )
            )
        return out

    def _getattr(self, node: ast.Call, env: Env, cond: Cond) -> list[Alt]:
        """``getattr(torch_npu, "X")``; a computed name on ``torch.ops.ns`` is any op of ns."""
        out: list[Alt] = []
        name = const_str(node.args[1])
        for oc, obj in self.ev(node.args[0], env, cond):
            if name:
                out.append(Alt(oc, attribute(obj, name)))
            elif isinstance(obj, Module) and obj.path.startswith("torch.ops."):
                out.append(Alt(oc, attribute(obj, "*")))  # any op of the namespace
            else:
                out.append(Alt(oc, UNKNOWN))
        return out

    def single(self, node: ast.expr, env: Env, cond: Cond) -> Any:
        """The value of an expression when it has exactly one alternative, else UNKNOWN."""
        alts = self.ev(node, env, cond)
        return alts[0].value if len(alts) == 1 else UNKNOWN


def _opened(d: Any) -> Any:
    """A dict state that may now hold keys the scan cannot read (UNKNOWN stays UNKNOWN)."""
    return DictV(d.entries, True) if isinstance(d, DictV) else d


def _builtin(node: ast.Call, env: Env, name: str) -> bool:
    """Is the call to the builtin ``name`` (spelled bare and not rebound in scope)?"""
    return isinstance(node.func, ast.Name) and node.func.id == name and env.lookup(name) is None


_Handler = Callable[[Evaluator, Any, Env, Cond], list[Alt]]
#: Expression kind -> its handler, built once.
_HANDLERS: dict[type[ast.AST], _Handler] = {
    ast.Constant: Evaluator.ev_constant,
    ast.UnaryOp: Evaluator.ev_unary,
    ast.Tuple: Evaluator.ev_sequence,
    ast.List: Evaluator.ev_sequence,
    ast.Name: Evaluator.ev_name,
    ast.Attribute: Evaluator.ev_attribute,
    ast.IfExp: Evaluator.ev_ifexp,
    ast.Dict: Evaluator.ev_dict,
    ast.Call: Evaluator.ev_call,
    ast.NamedExpr: Evaluator.ev_namedexpr,
}
