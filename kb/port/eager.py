"""Written-out attention, read back from its last product: ``p @ v`` where ``p`` is a
softmax of ``q @ kᵀ`` scaled (and masked), whatever the names and however many
statements it takes.

The trace follows a function's assignments backwards (the latest assignment before the
point that reads a name), through dtype casts and dropout, so the port can call the
fused kernel with the very ``q``, ``k``, ``v``, scale and mask the code computed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from kb.port.spans import code, dotted

#: name, before -> (value assigned, its position) or None
Resolve = Callable[[str, int], "tuple[cst.BaseExpression, int] | None"]
#: modules whose ``softmax`` is a function of its first argument
_FUNCTIONAL = ("F", "torch", "nn.functional", "torch.nn.functional", "functional")
_PASS_METHODS = ("to", "type", "float", "half", "contiguous", "type_as")


@dataclass
class Eager:
    query: str
    key: str
    value: str
    scale: str
    mask: str | None
    at: int = 0  # where q @ kᵀ reads q and k (names reassigned after it are stale)
    #: a learned per-head sink logit joined to the scores (its [N] tensor), or None
    sink: str | None = None


def _args(node: cst.Call) -> list[cst.BaseExpression]:
    return [a.value for a in node.args if a.keyword is None and not a.star]


def _product(node: cst.BaseExpression) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    """The operands of ``a @ b`` / ``torch.matmul(a, b)`` / ``torch.bmm(a, b)``."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.MatrixMultiply):
        return node.left, node.right
    if isinstance(node, cst.Call) and dotted(node.func).rsplit(".", 1)[-1] in ("matmul", "bmm"):
        args = _args(node)
        if len(args) == 2:
            return args[0], args[1]
    return None


def _follow(node: cst.BaseExpression, at: int, resolve: Resolve) -> tuple[cst.BaseExpression, int]:
    """Through names, casts and dropout to the expression that computes a value."""
    for _ in range(8):
        if isinstance(node, cst.Name):
            found = resolve(node.value, at)
            if found is None:
                return node, at
            node, at = found
            continue
        if isinstance(node, cst.Call):
            func = node.func
            last = func.attr.value if isinstance(func, cst.Attribute) else dotted(func)
            if last.endswith(("dropout", "drop")) and _args(node):  # F.dropout, self.drop
                node = _args(node)[0]
                continue
            if isinstance(node.func, cst.Attribute) and last in _PASS_METHODS:
                node = node.func.value
                continue
        return node, at
    return node, at


def _untransposed(node: cst.BaseExpression, at: int, resolve: Resolve) -> cst.BaseExpression | None:
    node, at = _follow(node, at, resolve)
    if isinstance(node, cst.Attribute) and node.attr.value == "mT":
        return node.value
    if (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value == "transpose"
    ):
        dims = sorted(code(a) for a in _args(node))
        if dims in (["-1", "-2"], ["2", "3"]):
            return node.func.value
    return None


def read(call: cst.BaseExpression, at: int, resolve: Resolve) -> Eager | None:
    """The attention a final product computes, or None when it is not ``softmax(...) @ v``."""
    pv = _product(call)
    if pv is None:
        return None
    probs, value = pv
    node, pos = _follow(probs, at, resolve)
    dropped = _last_column_dropped(node)
    if dropped is not None:  # p[..., :-1]: a sink column's probability left out
        node, pos = _follow(dropped, pos, resolve)
    if not (isinstance(node, cst.Call) and dotted(node.func).endswith("softmax")):
        return None
    func = node.func
    if isinstance(func, cst.Attribute) and dotted(func.value) not in _FUNCTIONAL:
        scores, pos = _follow(func.value, pos, resolve)  # s.softmax(dim=-1)
    elif _args(node):  # F.softmax(s, dim) or torch.softmax(s, dim)
        scores, pos = _follow(_args(node)[0], pos, resolve)
    else:
        return None
    sink = None
    if dropped is not None:
        joined = _sink_joined(scores, pos, resolve)
        if joined is None:
            return None
        scores, sink, pos = joined
    mask: str | None = None
    scale = "None"
    for _ in range(4):
        fill = _masked_fill(scores)
        if fill is not None:  # scores.masked_fill(cond, -inf): True in cond is masked out
            mask = f"~({code(fill[1])})"
            scores, pos = _follow(fill[0], pos, resolve)
            continue
        if isinstance(scores, cst.BinaryOperation) and isinstance(scores.operator, cst.Add):
            left, lpos = _follow(scores.left, pos, resolve)
            if _product(left) is None and not isinstance(left, cst.BinaryOperation):
                return None
            mask, scores, pos = code(scores.right), left, lpos
            continue
        if isinstance(scores, cst.BinaryOperation) and isinstance(
            scores.operator, (cst.Multiply, cst.Divide)
        ):
            left, lpos = _follow(scores.left, pos, resolve)
            if _product(left) is None:
                return None
            other = code(scores.right)
            scale = other if isinstance(scores.operator, cst.Multiply) else f"1.0 / ({other})"
            scores, pos = left, lpos
            continue
        break
    qk = _product(scores)
    if qk is None:
        return None
    key = _untransposed(qk[1], pos, resolve)
    if key is None:
        return None
    return Eager(code(qk[0]), code(key), code(value), scale, mask, pos, sink)


def _last_column_dropped(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """``p`` of ``p[..., :-1]``."""
    if not (isinstance(node, cst.Subscript) and len(node.slice) == 2):
        return None
    first, last = node.slice[0].slice, node.slice[1].slice
    if not (isinstance(first, cst.Index) and code(first.value) == "..."):
        return None
    if isinstance(last, cst.Slice) and last.lower is None and last.step is None and last.upper:
        return node.value if code(last.upper).replace(" ", "") == "-1" else None
    return None


def _sink_joined(
    scores: cst.BaseExpression, pos: int, resolve: Resolve
) -> tuple[cst.BaseExpression, str, int] | None:
    """(the scores, the sink's [N] tensor, position) of ``cat([scores, sink], -1)``, through
    ``c - c.max(-1, keepdim=True).values`` (a shift softmax does not see); the sink followed
    back through reshape/expand/view to the tensor they broadcast."""
    if (
        isinstance(scores, cst.BinaryOperation)
        and isinstance(scores.operator, cst.Subtract)
        and ".max(" in code(scores.right)
        and code(scores.right).startswith(code(scores.left))
    ):
        scores, pos = _follow(scores.left, pos, resolve)
    if not (isinstance(scores, cst.Call) and dotted(scores.func).endswith("cat")):
        return None
    args = _args(scores)
    dim = next((code(a.value) for a in scores.args if a.keyword and a.keyword.value == "dim"), None)
    dim = dim or (code(args[1]) if len(args) > 1 else None)
    seq = args[0] if args else None
    if dim != "-1" or not isinstance(seq, (cst.List, cst.Tuple)) or len(seq.elements) != 2:
        return None
    inner, inner_pos = _follow(seq.elements[0].value, pos, resolve)
    sink, _ = _follow(seq.elements[1].value, pos, resolve)
    for _ in range(4):
        if not (isinstance(sink, cst.Call) and isinstance(sink.func, cst.Attribute)):
            break
        if sink.func.attr.value not in ("reshape", "view", "expand", "unsqueeze", "to"):
            break
        sink = sink.func.value
    if isinstance(sink, cst.Call):
        return None
    return inner, f"{code(sink)}.reshape(-1)", inner_pos


def _masked_fill(node: cst.BaseExpression) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    """(scores, condition) of ``scores.masked_fill(cond, v)`` with ``v`` minus infinity
    (``float('-inf')``, ``-float('inf')``, ``-torch.inf``, ``torch.finfo(t).min``, a
    large negative number)."""
    if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)):
        return None
    args = _args(node)
    if node.func.attr.value != "masked_fill" or len(args) != 2:
        return None
    fill = code(args[1]).replace(" ", "")
    negative = fill.startswith("-") or "'-inf'" in fill or '"-inf"' in fill
    if fill.startswith("torch.finfo(") and fill.endswith(").min"):
        return node.func.value, args[0]
    if not negative or not ("inf" in fill or fill.lstrip("-").split("e")[0].isdigit()):
        return None
    return node.func.value, args[0]
