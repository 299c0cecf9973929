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

ROWS = {"rope_half", "rope_deinterleave"}


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


def _lanes(node: cst.BaseExpression) -> tuple[str, str] | None:
    """(x, 'even' | 'odd') of ``x[..., 0::2]`` / ``x[..., 1::2]``."""
    if not (isinstance(node, cst.Subscript) and node.slice):
        return None
    last = node.slice[-1].slice
    if not (isinstance(last, cst.Slice) and last.step and code(last.step) == "2"):
        return None
    if last.upper is not None:
        return None
    start = code(last.lower) if last.lower else "0"
    lane = {"0": "even", "1": "odd"}.get(start)
    return (code(node.value), lane) if lane else None


def _halves(fn: cst.FunctionDef | None, a: str, b: str) -> tuple[str, str] | None:
    """(the input of the rotation, its row) of ``a, b = x.chunk(2, -1)`` (``rope_half``: x)
    or ``a, b = x[..., 0::2], x[..., 1::2]`` (``rope_deinterleave``: the even lanes, then
    the odd ones, ``cat((a, b), -1)``: the order the model's output keeps)."""
    if fn is None or not isinstance(fn.body, cst.IndentedBlock):
        return None
    for st in fn.body.body:
        for small in st.body if isinstance(st, cst.SimpleStatementLine) else []:
            if not (isinstance(small, cst.Assign) and len(small.targets) == 1):
                continue
            target, value = small.targets[0].target, small.value
            if not isinstance(target, (cst.Tuple, cst.List)):
                continue
            if [code(e.value) for e in target.elements] != [a, b]:
                continue
            if isinstance(value, cst.Tuple) and len(value.elements) == 2:
                got = [_lanes(e.value) for e in value.elements]
                first, second = got
                if (
                    first
                    and second
                    and first[0] == second[0]
                    and (first[1], second[1])
                    == (
                        "even",
                        "odd",
                    )
                ):
                    return f"torch.cat(({a}, {b}), -1)", "rope_deinterleave"
                continue
            if not (isinstance(value, cst.Call) and dotted(value.func).endswith("chunk")):
                continue
            func = value.func
            method = isinstance(func, cst.Attribute) and dotted(func) != "torch.chunk"
            x = code(func.value) if isinstance(func, cst.Attribute) and method else None
            x = x or keyword(value, "input", 0)
            pieces = keyword(value, "chunks", 0 if method else 1)
            dim = keyword(value, "dim", 1 if method else 2)
            if x and pieces == "2" and dim == "-1":
                return x, "rope_half"
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
    found = _halves(enclosing(self), rot[0], rot[1]) if rot else None
    stage = next((st for st in rope if found and st.mapping == found[1]), None)
    if rot is None or found is None or stage is None:
        return None
    _, _, c, s = rot
    self.result.helpers.append("_kb_rotary")
    fused = f"_kb_rotary({found[0]}, torch.cat(({c}, {c}), -1), torch.cat(({s}, {s}), -1), 'half')"
    return self._emit(
        stage, original, fused, code(updated), rotary_mode="half", operator="npu_rotary_mul"
    )


def _method(node: cst.BaseExpression, names: tuple[str, ...]) -> cst.Call | None:
    """``node`` when it is a call of one of the methods ``names``."""
    if (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value in names
    ):
        return node
    return None


def _deinterleaved(node: cst.BaseExpression) -> bool:
    """``x.view(..., D // 2, 2).transpose(-1, -2).reshape(..., D)``: the even lanes of the
    last axis first, then the odd ones (DeepSeek's MLA puts its rope lanes in that order
    before a rotate-half rotation)."""
    outer = _method(node, ("reshape", "view"))
    turn = _method(outer.func.value, ("transpose",)) if outer else None  # type: ignore[attr-defined]
    pairs = _method(turn.func.value, ("view", "reshape")) if turn else None  # type: ignore[attr-defined]
    if turn is None or pairs is None or not pairs.args:
        return False
    axes = {code(a.value) for a in turn.args}
    return axes in ({"3", "4"}, {"-1", "-2"}) and code(pairs.args[-1].value) == "2"


def mode_of(porter: Any, s: Any, x: str) -> str | None:
    """The rotary mode of the span ``x * cos + rotate(x) * sin`` for stage ``s``: the one
    its row names; for ``rope_deinterleave`` 'half' when ``x`` is the de-interleaved
    tensor (the model rotates halves after reordering its lanes), else None (not this
    stage's span)."""
    if s.mapping != "rope_deinterleave":
        return str(s.args.get("rotary_mode") or s.mapping.removeprefix("rope_"))
    found = porter._resolve(x, porter.counter + 1) if x.isidentifier() else None
    return "half" if found is not None and _deinterleaved(found[0]) else None
