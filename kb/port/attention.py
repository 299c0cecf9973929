"""Attention spans: ``scaled_dot_product_attention`` calls and attention written out
(scores, softmax, weighted values) into the fused attention kernel.

Each function is a hook of :mod:`kb.port.hooks`: it takes the running
:class:`kb.port.rewrite.Porter` and a call, and returns the call's replacement, or None
when the call is not its kind.
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from kb.port import eager
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
    found = eager.read(updated, self.counter + 1, self._resolve)
    if found is None:
        return updated
    names = [found.query, found.key, found.value]
    if any(self._stale(n, found.at) for n in names[:2]):
        return updated  # reassigned names: the values read then are not the ones now
    s = att[0]
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
    return self._emit(s, original, fused, code(updated), **extra)
