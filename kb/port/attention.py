"""Attention spans: ``scaled_dot_product_attention`` calls and attention written out
(scores, softmax, weighted values) into the fused attention kernel.

Each function is a hook of :mod:`kb.port.hooks`: it takes the running
:class:`kb.port.rewrite.Porter` and a call, and returns the call's replacement, or None
when the call is not its kind.
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from kb.port import eager, guards, window
from kb.port.spans import SDPA, code, dotted, keyword


def sdpa(self: Any, original: cst.Call, updated: cst.Call) -> cst.BaseExpression | None:
    """``scaled_dot_product_attention(q, k, v, ...)`` into the fused kernel."""
    callee = dotted(updated.func)
    if not callee.endswith(SDPA) or callee.startswith("self."):  # the module's own method
        return None
    att = [s for s in self._candidates_kind("attention") if s.mapping.startswith("attention_")]
    if not att:
        return updated
    s = att[0]
    q, k, v = (keyword(updated, n, i) for i, n in enumerate(("query", "key", "value")))
    if not (q and k and v):
        return updated
    mask = keyword(updated, "attn_mask", 3) or "None"
    scale = keyword(updated, "scale", 6) or "None"
    windowed = _windowed(self, s, original, updated, [q, k, v], scale)
    if windowed is not None:
        return windowed
    causal = s.facts.get("causal")
    flag = keyword(updated, "is_causal", 5) or "False"
    if causal in (True, "caller") and flag not in ("True", "False"):
        # decided at run time (``is_causal=mask is None``): the mask given otherwise is used
        sparse: str = f"3 if ({flag}) else 0"
    elif causal is True:
        sparse = "3"
    elif causal == "caller":
        sparse = f"3 if {flag} else 0"
    else:
        sparse = "0"
    self.result.helpers.append("_kb_attention")
    fused = f"_kb_attention({q}, {k}, {v}, {mask}, {scale}, sparse_mode={sparse})"
    return self._emit(
        s,
        original,
        fused,
        code(updated),
        input_layout="BNSD",
        sparse_mode=int(sparse) if sparse.isdigit() else sparse,
        operator="npu_fused_infer_attention_score",
    )


def written_out(self: Any, original: cst.Call, updated: cst.Call) -> cst.BaseExpression | None:
    """A ``matmul``/``bmm`` call that ends written-out attention (see :func:`written`)."""
    if dotted(updated.func).rsplit(".", 1)[-1] not in ("matmul", "bmm"):
        return None
    return written(self, original, updated)


def written(self: Any, original: cst.CSTNode, updated: cst.BaseExpression) -> cst.BaseExpression:
    """Written-out attention (:mod:`kb.port.eager`) into the fused kernel: ``updated`` is
    the product of the probabilities with the values (a call or an ``@``)."""
    att = [s for s in self._candidates_kind("attention") if s.mapping.startswith("attention_")]
    if not att or not self.fn:
        return updated
    found, tests = guards.read_guarded(
        self, window.enclosing(self), lambda r: eager.read(updated, self.counter + 1, r)
    )
    if found is None:
        return updated
    names = [found.query, found.key, found.value]
    if any(self._stale(n, found.at) for n in names[:2]):
        return updated  # reassigned names: the values read then are not the ones now
    s = att[0]
    if found.sink is not None or s.facts.get("sinks"):
        return _sinked(self, s, original, updated, names, found, tests)
    windowed = _windowed(self, s, original, updated, names, found.scale, tests)
    if windowed is not None:
        return windowed
    causal = s.facts.get("causal")
    sparse = 3 if causal is True else 0
    mask = "None" if sparse == 3 or found.mask is None else found.mask
    self.result.helpers.append("_kb_attention")
    fused = (
        f"_kb_attention({found.query}, {found.key}, {found.value}, {mask}, {found.scale}, "
        f"sparse_mode={sparse})"
    )
    op = "npu_fused_infer_attention_score"
    extra = {"input_layout": "BNSD", "sparse_mode": sparse, "operator": op}
    if tests:
        extra["unfused_when"] = tests
    return self._emit(
        s, original, guards.guarded(fused, code(updated), tests), code(updated), **extra
    )


def _windowed(
    self: Any,
    s: Any,
    original: cst.CSTNode,
    updated: cst.BaseExpression,
    qkv: list[str],
    scale: str,
    tests: tuple[str, ...] | list[str] = (),
) -> cst.BaseExpression | None:
    """The fused call of a module that keeps a sliding window (:mod:`kb.port.window`);
    the span unchanged, with a note, when the window cannot be passed; None without one."""
    if s.facts.get("causal") is not True:
        return None
    try:
        q, k, v = qkv
        fused, extra = window.window_call(self, s, q, k, v, scale)
    except window.Unported as exc:
        self.notes.setdefault(s.module, []).append(f"stage {s.mapping} not rewritten: {exc}")
        return updated
    if fused is None:
        return None
    if tests:
        extra["unfused_when"] = list(tests)
    op = "npu_fused_infer_attention_score"
    fused = guards.guarded(fused, code(updated), list(tests))
    return self._emit(s, original, fused, code(updated), input_layout="BNSD", operator=op, **extra)


def _sinked(
    self: Any,
    s: Any,
    original: cst.CSTNode,
    updated: cst.BaseExpression,
    qkv: list[str],
    found: eager.Eager,
    tests: list[str],
) -> cst.BaseExpression:
    """Attention with learned sinks into the v2 kernel's learnable_sink; the span as it
    is, with a note, where the sink was not read (a call without it computes another
    softmax) or the attention is not causal."""
    why = ""
    if found.sink is None:
        why = "the module has learned sinks, and the span's sink column was not read"
    elif s.facts.get("causal") is not True:
        why = "the sink attention is ported for causal attention only"
    if why:
        self.notes.setdefault(s.module, []).append(f"stage {s.mapping} not rewritten: {why}")
        return updated
    assert found.sink is not None
    q, k, v = qkv
    try:
        fused, extra = window.sink_call(self, s, q, k, v, found.scale, found.sink)
    except window.Unported as exc:
        self.notes.setdefault(s.module, []).append(f"stage {s.mapping} not rewritten: {exc}")
        return updated
    if tests:
        extra["unfused_when"] = list(tests)
    op = "npu_fused_infer_attention_score_v2"
    fused = guards.guarded(fused, code(updated), list(tests))
    return self._emit(s, original, fused, code(updated), operator=op, **extra)
