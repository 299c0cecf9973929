"""DeepSeek sparse attention's lightning indexer: per query token, the sparse_count key
positions with the highest sum over heads of weight * ReLU(q · k)."""

from __future__ import annotations

from typing import Any

import numpy as np

from kb.reference.errors import ReferenceInputError
from kb.reference.lowp import cast, f32

Args = dict[str, Any]


def _ends(values: Any, what: str) -> list[int]:
    if values is None:
        raise ReferenceInputError(f"npu_lightning_indexer: TND and PA_BSND need {what}")
    return [int(v) for v in np.asarray(values).reshape(-1)]


def _keys(a: Args, b: int) -> np.ndarray:
    """One batch's keys [S2, D] (key N is 1)."""
    key, layout = a["key"], a["layout_key"]
    if key.shape[-2] != 1:
        raise ReferenceInputError("npu_lightning_indexer: key N must be 1")
    lens = None if a["actual_seq_lengths_key"] is None else _ends(a["actual_seq_lengths_key"], "")
    if layout == "TND":
        ends = _ends(a["actual_seq_lengths_key"], "actual_seq_lengths_key")
        return f32(key[(ends[b - 1] if b else 0):ends[b], 0])
    if layout == "PA_BSND":
        if a["block_table"] is None or lens is None:
            raise ReferenceInputError("npu_lightning_indexer: PA_BSND needs block_table and actual_seq_lengths_key")
        bs = key.shape[1]
        blocks = np.asarray(a["block_table"])[b, : (lens[b] + bs - 1) // bs]
        return f32(key[blocks].reshape(-1, key.shape[-1])[: lens[b]])
    rows = f32(key[b, :, 0])
    return rows if lens is None else rows[: lens[b]]


def lightning_indexer(a: Args) -> tuple[np.ndarray, np.ndarray]:
    q, w, k_count = a["query"], a["weights"], int(a["sparse_count"])
    tnd = a["layout_query"] == "TND"
    if tnd:
        ends = _ends(a["actual_seq_lengths_query"], "actual_seq_lengths_query")
        spans = [((ends[i - 1] if i else 0), e) for i, e in enumerate(ends)]
        q_rows, w_rows = q, w
    else:
        s1 = q.shape[1]
        lens = [s1] * q.shape[0] if a["actual_seq_lengths_query"] is None else \
            [int(x) for x in np.asarray(a["actual_seq_lengths_query"]).reshape(-1)]  # fmt: skip
        spans = [(i * s1, i * s1 + lens[i]) for i in range(q.shape[0])]
        q_rows, w_rows = q.reshape(-1, *q.shape[2:]), w.reshape(-1, w.shape[-1])
    idx = np.full((q_rows.shape[0], 1, k_count), -1, np.int32)
    val = np.zeros((q_rows.shape[0], 1, k_count), np.float32)
    for b, (start, end) in enumerate(spans):
        keys = _keys(a, b)
        qb, wb = f32(q_rows[start:end]), f32(w_rows[start:end])  # [S1, N1, D], [S1, N1]
        score = (np.maximum(np.einsum("snd,kd->snk", qb, keys), 0) * wb[..., None]).sum(1)  # [S1, S2]
        s1, s2 = score.shape
        if a["sparse_mode"] == 3:  # bottom-right causal: row i sees keys j <= i + S2 - S1
            score = np.where(np.arange(s2)[None] <= np.arange(s1)[:, None] + (s2 - s1), score, -np.inf)
        order = np.argsort(-score, axis=1, kind="stable")[:, :k_count]
        picked = np.take_along_axis(score, order, 1)
        keep = np.isfinite(picked)
        idx[start:end, 0, : order.shape[1]] = np.where(keep, order, -1)
        val[start:end, 0, : order.shape[1]] = np.where(keep, picked, 0)
    shape = (q_rows.shape[0], 1, k_count) if tnd else (q.shape[0], q.shape[1], 1, k_count)
    values = cast(val.reshape(shape), q.dtype) if a["return_value"] else np.zeros((0,), q.dtype)
    return idx.reshape(shape), values
