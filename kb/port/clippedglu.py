"""A clamped GLU method read as exactly what ``npu_clipped_swiglu`` computes, or not at all.

The operator's record (kb/records/operators/activation/npu_clipped_swiglu.yaml, its
reference kb/reference/glu.py) computes, from x split into A (gate) and B (linear) -- even
and odd columns when ``interleaved``, else the two halves --
``min(A, limit) * sigmoid(alpha * min(A, limit)) * (clip(B, -limit, limit) + bias)``.
A method of the experts' class is read the same way: one parameter, straight-line code,
its return value inlined through its assignments, and every part matched: the split, a
clamp from above only on the gate, a clamp to ``[-limit, limit]`` of the same limit on the
other half, ``g * sigmoid(g * alpha)`` on the clamped gate, and the shift added to the
clamped other half.  Anything else (another clamp, an extra scale, a bias on the gate)
returns None, and the method stays in torch.
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from kb.port.expertmods import _Inline
from kb.port.spans import code, dotted


def _inline(fn: cst.FunctionDef) -> Any:
    """The returned value of a straight-line function, each name replaced by the value
    assigned to it before (tuple targets element by element); None for other code."""
    env: dict[str, cst.BaseExpression] = {}
    body = fn.body.body if isinstance(fn.body, cst.IndentedBlock) else []
    for st in body:
        if not isinstance(st, cst.SimpleStatementLine) or len(st.body) != 1:
            return None
        small = st.body[0]
        if isinstance(small, cst.Return):
            return None if small.value is None else small.value.visit(_Inline(env))
        if not (isinstance(small, cst.Assign) and len(small.targets) == 1):
            return None
        target, value = small.targets[0].target, small.value
        pairs = (
            [(t.value, v.value) for t, v in zip(target.elements, value.elements, strict=False)]
            if isinstance(target, cst.Tuple) and isinstance(value, cst.Tuple)
            else [(target, value)]
        )
        new = {}
        for t_, v_ in pairs:
            if not isinstance(t_, cst.Name):
                return None
            inlined = v_.visit(_Inline(env))
            if not isinstance(inlined, cst.BaseExpression):
                return None
            new[t_.value] = inlined
        env.update(new)
    return None


def _clamp(node: Any) -> tuple[Any, str, str] | None:
    """(x, min, max) of ``x.clamp(min=..., max=...)`` / ``torch.clamp(x, lo, hi)``; a bound
    not given is ''."""
    if not isinstance(node, cst.Call):
        return None
    name = dotted(node.func) if not isinstance(node.func, cst.Attribute) else node.func.attr.value
    if name not in ("clamp", "clip", "torch.clamp", "torch.clip"):
        return None
    pos = [a.value for a in node.args if a.keyword is None]
    kw = {a.keyword.value: code(a.value) for a in node.args if a.keyword is not None}
    if name.startswith("torch."):
        if not pos:
            return None
        x, pos = pos[0], pos[1:]
    elif isinstance(node.func, cst.Attribute):
        x = node.func.value
    else:
        return None
    lo = kw.get("min", code(pos[0]) if len(pos) > 0 else "")
    hi = kw.get("max", code(pos[1]) if len(pos) > 1 else "")
    return x, "" if lo == "None" else lo, "" if hi == "None" else hi


def _half(node: Any, h: str) -> tuple[str, int] | None:
    """('interleaved' | 'halves', which) of ``h[..., ::2]`` / ``h[..., 1::2]``."""
    if isinstance(node, cst.Subscript) and code(node.value) == h and len(node.slice) == 2:
        last = node.slice[1].slice
        if isinstance(last, cst.Slice) and last.upper is None and last.step is not None:
            start = code(last.lower) if last.lower is not None else "0"
            if code(last.step) == "2" and start in ("0", "1"):
                return "interleaved", int(start)
    return None


def fused(method: cst.FunctionDef) -> tuple[str, dict[str, Any]] | None:
    """(a callable's code computing the method through npu_clipped_swiglu, its arguments),
    or None when the method is not exactly that formula."""
    params = [p.name.value for p in method.params.params]
    if len(params) != 2:
        return None
    h = params[1]
    out = _inline(method)
    if not (isinstance(out, cst.BinaryOperation) and isinstance(out.operator, cst.Multiply)):
        return None
    for shifted, glu in ((out.left, out.right), (out.right, out.left)):
        found = _match(shifted, glu, h)
        if found is not None:
            args = found
            text = (
                f"lambda _kb_h: torch_npu.npu_clipped_swiglu(_kb_h, alpha={args['alpha']}, "
                f"limit={args['limit']}, bias={args['bias']}, interleaved=True)"
            )
            return text, args
    return None


def _match(shifted: Any, glu: Any, h: str) -> dict[str, Any] | None:
    if not (isinstance(shifted, cst.BinaryOperation) and isinstance(shifted.operator, cst.Add)):
        return None
    lin = _clamp(shifted.left)
    bias = shifted.right
    if lin is None:
        return None
    if not (isinstance(glu, cst.BinaryOperation) and isinstance(glu.operator, cst.Multiply)):
        return None
    for g, sig in ((glu.left, glu.right), (glu.right, glu.left)):
        gate = _clamp(g)
        sig = sig
        if gate is None or not (
            isinstance(sig, cst.Call)
            and dotted(sig.func)
            in (
                "torch.sigmoid",
                "F.sigmoid",
                "torch.nn.functional.sigmoid",
            )
        ):
            continue
        inner = sig.args[0].value if len(sig.args) == 1 else None
        if not (
            isinstance(inner, cst.BinaryOperation) and isinstance(inner.operator, cst.Multiply)
        ):
            continue
        sides = [inner.left, inner.right]
        g_code = code(g)
        alpha = [code(s) for s in sides if code(s) != g_code]
        if len(alpha) != 1 or len([s for s in sides if code(s) == g_code]) != 1:
            continue
        x_gate, lo_g, hi_g = gate
        x_lin, lo_l, hi_l = lin
        halves = _half(x_gate, h), _half(x_lin, h)
        if halves != (("interleaved", 0), ("interleaved", 1)):
            continue
        if lo_g or not hi_g or hi_l != hi_g or lo_l != f"-{hi_g}":
            continue
        return {"alpha": alpha[0], "limit": hi_g, "bias": code(bias)}
    return None
