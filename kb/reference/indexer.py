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
        raise ReferenceInputError(f"TND and PA_BSND need {what}")
    return [int(v) for v in np.asarray(values).reshape(-1)]


def kv_rows(t: np.ndarray, layout: str, b: int, lengths: Any, table: Any, what: str) -> np.ndarray:
    """Batch b's key/value rows [S2, N, D] from BSND, TND (cumulative lengths) or PA_BSND
    (blocks [count, block_size, N, D] through block_table, per-batch lengths)."""
    if layout == "TND":
        ends = _ends(lengths, f"{what} lengths")
        return t[(ends[b - 1] if b else 0) : ends[b]]
    lens = None if lengths is None else _ends(lengths, f"{what} lengths")
    if layout == "PA_BSND":
        if table is None or lens is None:
            raise ReferenceInputError(f"PA_BSND needs block_table and the {what} lengths")
        bs = t.shape[1]
        blocks = np.asarray(table)[b, : (lens[b] + bs - 1) // bs]
        return t[blocks].reshape(-1, *t.shape[2:])[: lens[b]]
    return t[b] if lens is None else t[b, : lens[b]]


def query_spans(
    q: np.ndarray, layout: str, lengths: Any
) -> tuple[list[tuple[int, int]], np.ndarray]:
    """Per batch (start, end) rows of the query flattened to [T, N, D]."""
    if layout == "TND":
        ends = _ends(lengths, "query lengths")
        return [((ends[i - 1] if i else 0), e) for i, e in enumerate(ends)], q
    s1 = q.shape[1]
    lens = (
        [s1] * q.shape[0] if lengths is None else [int(x) for x in np.asarray(lengths).reshape(-1)]
    )
    return [(i * s1, i * s1 + lens[i]) for i in range(q.shape[0])], q.reshape(-1, *q.shape[2:])


def lightning_indexer(a: Args) -> tuple[np.ndarray, np.ndarray]:
    q, w, k_count = a["query"], a["weights"], int(a["sparse_count"])
    tnd = a["layout_query"] == "TND"
    if a["key"].shape[-2] != 1:
        raise ReferenceInputError("npu_lightning_indexer: key N must be 1")
    spans, q_rows = query_spans(q, a["layout_query"], a["actual_seq_lengths_query"])
    w_rows = w if tnd else w.reshape(-1, w.shape[-1])
    idx = np.full((q_rows.shape[0], 1, k_count), -1, np.int32)
    val = np.zeros((q_rows.shape[0], 1, k_count), np.float32)
    for b, (start, end) in enumerate(spans):
        keys = f32(
            kv_rows(
                a["key"], a["layout_key"], b, a["actual_seq_lengths_key"], a["block_table"], "key"
            )[:, 0]
        )
        qb, wb = f32(q_rows[start:end]), f32(w_rows[start:end])  # [S1, N1, D], [S1, N1]
        # [S1, S2]
        score = (np.maximum(np.einsum("snd,kd->snk", qb, keys), 0) * wb[..., None]).sum(1)
        s1, s2 = score.shape
        if a["sparse_mode"] == 3:  # bottom-right causal: row i sees keys j <= i + S2 - S1
            score = np.where(
                np.arange(s2)[None] <= np.arange(s1)[:, None] + (s2 - s1), score, -np.inf
            )
        order = np.argsort(-score, axis=1, kind="stable")[:, :k_count]
        picked = np.take_along_axis(score, order, 1)
        keep = np.isfinite(picked)
        idx[start:end, 0, : order.shape[1]] = np.where(keep, order, -1)
        val[start:end, 0, : order.shape[1]] = np.where(keep, picked, 0)
    shape = (q_rows.shape[0], 1, k_count) if tnd else (q.shape[0], q.shape[1], 1, k_count)
    values = cast(val.reshape(shape), q.dtype) if a["return_value"] else np.zeros((0,), q.dtype)
    return idx.reshape(shape), values
