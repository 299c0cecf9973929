"""Sampling filters: top-k then top-p on logits, the rest set to -inf."""

from __future__ import annotations

from typing import Any

import numpy as np

from kb.reference.errors import ReferenceInputError
from kb.reference.lowp import f32

Args = dict[str, Any]


def top_k_top_p(a: Args) -> np.ndarray:
    """Per row, ascending stable sort; values below the k-th largest become -inf (ties with
    it stay); of the rest, the smallest whose cumulative softmax probability is <= 1 - p
    become -inf, the largest always kept; values return to their places."""
    logits = a["logits"]
    if logits.ndim != 2:
        raise ReferenceInputError("npu_top_k_top_p: logits is 2-D [batch, vocab]")
    b, v = logits.shape
    order = np.argsort(f32(logits), axis=-1, kind="stable")
    vals = np.take_along_axis(logits, order, axis=-1).copy()
    work = f32(vals)
    if a["k"] is not None:
        k = np.asarray(a["k"]).reshape(-1).astype(np.int64)
        if k.size != b or (k < 1).any() or (k > min(v, 1024)).any():
            raise ReferenceInputError(
                f"npu_top_k_top_p: k has one value per row in [1, min(1024, {v})]"
            )
        kth = work[np.arange(b), v - k][:, None]
        work = np.where(work < kth, -np.inf, work)
    if a["p"] is not None:
        p = f32(a["p"]).reshape(-1)
        if p.size != b:
            raise ReferenceInputError("npu_top_k_top_p: p has one value per row")
        top = work.max(axis=-1, keepdims=True)
        e = np.exp(work - top)
        cum = np.cumsum(e / e.sum(axis=-1, keepdims=True), axis=-1)
        drop = cum <= (np.float32(1) - p)[:, None]
        drop[:, -1] = False
        work = np.where(drop, -np.inf, work)
    vals[~np.isfinite(work) & (work < 0)] = -np.inf
    out = np.empty_like(vals)
    np.put_along_axis(out, order, vals, axis=-1)
    return out
