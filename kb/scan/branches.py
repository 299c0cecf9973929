"""Branch conditions: a test as an atom, and joining what two arms of a branch bound.

An ``if`` (or ``x if c else y``) splits the values it binds into alternatives guarded
by its test; a test and its negation share one atom, so ``if not x:`` and ``if x:``
later in the same function agree, and an enclosing branch decides a nested one on the
same test.
"""

from __future__ import annotations

import ast

from kb.scan.scopes import Env, dedupe
from kb.scan.syntax import segment
from kb.scan.values import TRUE, UNKNOWN, Alt

_FLIP = {ast.IsNot: " is ", ast.NotEq: " == ", ast.NotIn: " in "}


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


def guarded(alts: list[Alt], atom: str, truth: bool) -> list[Alt]:
    """The alternatives that can hold when ``atom`` has ``truth``, each guarded by it."""
    return [Alt(c | {(atom, truth)}, v) for c, v in alts if (atom, not truth) not in c]


def join_branches(before: Env, t_env: Env, f_env: Env, atom: str, truth: bool) -> Env:
    """The scope after a two-armed branch: a name either arm rebound gets both arms' values."""
    out = before.copy()
    for name in set(t_env.vars) | set(f_env.vars):
        t_alts, f_alts = t_env.vars.get(name), f_env.vars.get(name)
        if t_alts is f_alts and t_alts is not None:
            out.vars[name] = t_alts
            continue
        old = before.lookup(name) or [Alt(TRUE, UNKNOWN)]
        t_alts = t_alts if t_alts is not None else old
        f_alts = f_alts if f_alts is not None else old
        out.vars[name] = dedupe(guarded(t_alts, atom, truth) + guarded(f_alts, atom, not truth))
    return out


def join(before: Env, after: Env, atom: str) -> Env:
    """Join a path that may or may not have run (a loop body, a try block)."""
    return join_branches(before, after, before, atom, True)
