"""Residual add + RMSNorm spans, whatever the statements look like.

A block statement ``a = x + y`` whose sum reaches a planned RMSNorm module ``self.N(a)``
in the statement that follows (after any plain copies ``r = a``) is one
``npu_add_rms_norm`` call: the statement becomes ``normed, a = stage(...)`` (``a`` still
holds the sum, taken from the kernel's third output), and the norm call in the later
statement reads ``normed``.  This covers HF's ``h = r + h; r = h; h = self.norm(h)`` and
the one-statement form ``h = x + attn(...); out = h + ffn(self.norm(h))`` alike.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from kb.port.spans import _single_assign, code, dotted, one_arg

#: the name the normalised sum is bound to until the statement that reads it
NORMED = "_kb_normed"


@dataclass
class Found:
    """A residual sum at ``first`` whose norm ``norm`` (``self.N``) is read at ``reader``."""

    first: int
    reader: int
    total: str  # the name the sum is bound to
    x: str
    y: str
    norm: str
    eps: str


def find(body: list[cst.BaseStatement], i: int, eps_of: Callable[[str], str]) -> Found | None:
    """The residual + norm span starting at statement ``i`` (see the module doc);
    ``eps_of(attr)`` is the epsilon attribute of a planned RMSNorm ``self.<attr>``, ''
    when the attribute is no such norm."""
    first = _single_assign(body[i])
    if first is None:
        return None
    total, value = first
    if not (isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add)):
        return None
    j = i + 1
    while j < len(body):  # plain copies of the sum (the residual kept for later)
        copy = _single_assign(body[j])
        if copy and isinstance(copy[1], cst.Name) and copy[1].value == total and copy[0] != total:
            j += 1
            continue
        break
    if j >= len(body) or not isinstance(body[j], cst.SimpleStatementLine):
        return None
    calls = _norm_calls(body[j], total)
    if len(calls) != 1:
        return None
    eps = eps_of(calls[0][5:])
    if not eps:
        return None
    return Found(i, j, total, code(value.left), code(value.right), calls[0], eps)


def _norm_calls(stmt: cst.CSTNode, total: str) -> list[str]:
    """Every ``self.N(total)`` call in ``stmt`` (N's dotted name per call)."""
    found: list[str] = []

    class _V(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            arg = one_arg(node)
            callee = dotted(node.func)
            if isinstance(arg, cst.Name) and arg.value == total and callee.startswith("self."):
                found.append(callee)

    stmt.visit(_V())
    return found


def read_normed(stmt: cst.BaseStatement, norm: str, total: str) -> cst.BaseStatement:
    """``stmt`` with its call ``norm(total)`` replaced by the normalised sum's name."""

    class _T(cst.CSTTransformer):
        def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
            arg = one_arg(updated)
            if dotted(updated.func) == norm and isinstance(arg, cst.Name) and arg.value == total:
                return cst.Name(NORMED)
            return updated

    new = stmt.visit(_T())
    assert isinstance(new, cst.BaseStatement)
    return new
