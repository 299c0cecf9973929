"""RoPE written on the two halves apart: ``a, b = x.chunk(2, -1)``, then
``cat((a * cos - b * sin, b * cos + a * sin), -1)`` with cos/sin as wide as a half.

That is the rotate-half rotation (``x * cos2 + rotate_half(x) * sin2`` with ``cos2 =
cat((cos, cos), -1)``), so the port calls ``npu_rotary_mul`` in ``'half'`` mode on the whole
``x`` with the tables doubled; a half-wide table cannot be anything else, since it must
multiply a half.  The span is the ``cat`` call; its two operands are followed back through
the function's assignments, and the halves to the ``chunk`` that made them.
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from kb.port.spans import code, dotted, keyword
from kb.port.window import enclosing

ROWS = {"rope_half"}


def _terms(node: cst.BaseExpression, op: type) -> tuple[tuple[str, str], tuple[str, str]] | None:
    """((a, c), (b, s)) of ``a * c OP b * s`` (each product's operands as written)."""
    if not (isinstance(node, cst.BinaryOperation) and isinstance(node.operator, op)):
        return None
    out = []
    for t in (node.left, node.right):
        if not (isinstance(t, cst.BinaryOperation) and isinstance(t.operator, cst.Multiply)):
            return None
        out.append((code(t.left), code(t.right)))
    return out[0], out[1]


def _rotation(first: cst.BaseExpression, second: cst.BaseExpression) -> tuple[str, ...] | None:
    """(a, b, cos, sin) when ``first = a*cos - b*sin`` and ``second = b*cos + a*sin``."""
    sub, add = _terms(first, cst.Subtract), _terms(second, cst.Add)
    if sub is None or add is None:
        return None
    got = {frozenset(add[0]), frozenset(add[1])}
    for a, c in (sub[0], sub[0][::-1]):
        for b, s in (sub[1], sub[1][::-1]):
            if len({a, b, c, s}) == 4 and got == {frozenset((b, c)), frozenset((a, s))}:
                return a, b, c, s
    return None


def _halves(fn: cst.FunctionDef | None, a: str, b: str) -> str | None:
    """``x`` of the statement ``a, b = x.chunk(2, -1)`` (or ``torch.chunk(x, 2, dim=-1)``)."""
    if fn is None or not isinstance(fn.body, cst.IndentedBlock):
        return None
    for st in fn.body.body:
        for small in st.body if isinstance(st, cst.SimpleStatementLine) else []:
            if not (isinstance(small, cst.Assign) and len(small.targets) == 1):
                continue
            target, call = small.targets[0].target, small.value
            if not (isinstance(target, (cst.Tuple, cst.List)) and isinstance(call, cst.Call)):
                continue
            names = [code(e.value) for e in target.elements]
            if names != [a, b] or not dotted(call.func).endswith("chunk"):
                continue
            method = isinstance(call.func, cst.Attribute) and dotted(call.func) != "torch.chunk"
            x = code(call.func.value) if method else keyword(call, "input", 0)  # type: ignore[union-attr]
            pieces = keyword(call, "chunks", 0 if method else 1)
            dim = keyword(call, "dim", 1 if method else 2)
            if x and pieces == "2" and dim in ("-1",):
                return x
    return None


def cat_rope(self: Any, original: cst.Call, updated: cst.Call) -> cst.BaseExpression | None:
    """The ``cat`` that ends a RoPE on halves, as the fused rotation (None: not one)."""
    if not dotted(updated.func).endswith("cat") or not updated.args:
        return None
    rope = self._candidates(ROWS)
    seq = updated.args[0].value
    dim = keyword(updated, "dim", 1)
    if not rope or dim != "-1" or not isinstance(seq, (cst.Tuple, cst.List)):
        return None
    if len(seq.elements) != 2:
        return None
    parts = []
    for el in seq.elements:
        node: cst.BaseExpression = el.value
        if isinstance(node, cst.Name):
            found = self._resolve(node.value, self.counter + 1)
            node = found[0] if found else node
        parts.append(node)
    rot = _rotation(parts[0], parts[1])
    x = _halves(enclosing(self), rot[0], rot[1]) if rot else None
    if rot is None or x is None:
        return None
    _, _, c, s = rot
    self.result.helpers.append("_kb_rotary")
    fused = f"_kb_rotary({x}, torch.cat(({c}, {c}), -1), torch.cat(({s}, {s}), -1), 'half')"
    return self._emit(
        rope[0], original, fused, code(updated), rotary_mode="half", operator="npu_rotary_mul"
    )
