"""MoE routing beyond the v2 init routing: the first init routing (sort by expert with a
row-index companion), the per-expert row ends, the re-ordering of tokens an all-to-all
delivered by rank into expert order, and the quantized grouped matmul fused with the
weighted combine."""

from __future__ import annotations

from typing import Any

import numpy as np

from kb.reference.errors import NotModelled, ReferenceInputError
from kb.reference.lowp import cast, f32

Args = dict[str, Any]


def init_routing(a: Args) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sort the flattened (token-major) expert ids, ties in flattened order, carrying
    row_idx along; expanded_row_idx inverts that order; expanded_x gathers token
    sorted_row % N for the first min(N, active_num) * K positions."""
    x, row_idx, expert_idx = a["x"], np.asarray(a["row_idx"]), np.asarray(a["expert_idx"])
    if (
        x.ndim != 2
        or expert_idx.ndim != 2
        or expert_idx.shape[0] != x.shape[0]
        or row_idx.shape != expert_idx.shape
    ):
        raise ReferenceInputError(
            "npu_moe_init_routing: x is [N, H]; row_idx and expert_idx are [N, K]"
        )
    n, k = expert_idx.shape
    flat = expert_idx.reshape(-1).astype(np.int64)
    order = np.lexsort((np.arange(flat.size), flat))  # by expert, then by flattened position
    sorted_rows = row_idx.reshape(-1)[order].astype(np.int64)
    if sorted_rows.size and (sorted_rows.min() < 0 or sorted_rows.max() >= n * k):
        raise ReferenceInputError(f"npu_moe_init_routing: row_idx values lie in [0, {n * k})")
    expanded_row_idx = np.zeros(n * k, np.int32)
    expanded_row_idx[sorted_rows] = np.arange(n * k, dtype=np.int32)
    active = min(int(a["active_num"]), n) * k
    return x[sorted_rows[:active] % max(n, 1)], expanded_row_idx, flat[order].astype(np.int32)


def compute_expert_tokens(a: Args) -> np.ndarray:
    """For each expert i < num_expert, how many sorted rows hold an expert id <= i (the end
    of expert i's rows)."""
    rows = np.asarray(a["sorted_expert_for_source_row"]).reshape(-1)
    num = int(a["num_expert"])
    if not 0 < num <= 2048:
        raise ReferenceInputError("npu_moe_compute_expert_tokens: num_expert lies in (0, 2048]")
    if rows.size and (np.any(np.diff(rows) < 0) or rows.min() < 0 or rows.max() >= num):
        raise ReferenceInputError(
            "npu_moe_compute_expert_tokens: the expert ids are sorted and in [0, num_expert)"
        )
    return np.searchsorted(rows, np.arange(num), side="right").astype(rows.dtype)


def re_routing(a: Args) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """tokens arrive as blocks (rank r, expert e) in rank-major order, block sizes
    expert_token_num_per_rank[r, e]; the output holds the blocks in expert-major order.
    permute_token_idx[p] is the arrival position of output row p (a gather index)."""
    tokens, counts = a["tokens"], np.asarray(a["expert_token_num_per_rank"])
    if a["expert_token_num_type"] != 1 or a["idx_type"] != 0:
        raise NotModelled(
            "npu_moe_re_routing: expert_token_num_type=1 and idx_type=0 are modelled (the only ones supported)"
        )
    if tokens.ndim != 2 or counts.ndim != 2 or (counts < 0).any():
        raise ReferenceInputError(
            "npu_moe_re_routing: tokens is [A, H], expert_token_num_per_rank [N, E] of counts"
        )
    if int(counts.sum()) != tokens.shape[0]:
        raise ReferenceInputError(
            f"npu_moe_re_routing: the counts sum to {int(counts.sum())}, tokens has {tokens.shape[0]} rows"
        )
    flat = counts.reshape(-1)
    starts = (np.cumsum(flat) - flat).reshape(counts.shape)  # where each block arrived
    gather = [
        np.arange(starts[r, e], starts[r, e] + counts[r, e])
        for e in range(counts.shape[1])
        for r in range(counts.shape[0])
    ]
    idx = np.concatenate(gather).astype(np.int32) if gather else np.zeros(0, np.int32)
    scales = a["per_token_scales"]
    out_scales = (
        np.zeros(tokens.shape[0], np.float32) if scales is None else np.asarray(scales)[idx]
    )
    return tokens[idx], out_scales, idx, counts.sum(axis=0).astype(counts.dtype)


def _group_rows(group_list: Any, kind: int, experts: int) -> list[int]:
    gl = np.asarray(group_list).reshape(-1).astype(np.int64)
    if gl.size != experts or (gl < 0).any():
        raise ReferenceInputError(f"group_list holds {experts} non-negative values, one per expert")
    if kind == 0:
        if (np.diff(gl) < 0).any():
            raise ReferenceInputError("group_list_type=0 is a non-decreasing cumulative sum")
        gl = np.diff(np.concatenate([[0], gl]))
    return [int(v) for v in gl]


def grouped_matmul_finalize_routing(a: Args) -> np.ndarray:
    """Per expert g: its rows of x (int8) @ w[g] (int8) in int32, times scale[g] and the
    rows' pertoken_scale (and logit); then row i is added into output row row_index[i];
    shared_input * shared_input_weight is added to rows [shared_input_offset, ...).  float32."""
    x, w = a["x"], a["w"]
    if x.dtype != np.int8 or w.dtype != np.int8:
        raise NotModelled(
            "npu_grouped_matmul_finalize_routing: the A8W8 path (int8 x and w) is modelled"
        )
    if a["bias"] is not None or a["offset"] is not None:
        raise NotModelled(
            "npu_grouped_matmul_finalize_routing: bias and offset (A8W4) are not modelled"
        )
    if x.ndim != 2 or w.ndim != 3 or w.shape[1] != x.shape[1]:
        raise ReferenceInputError(
            "npu_grouped_matmul_finalize_routing: x is [m, k] and w [e, k, n]"
        )
    if a["row_index"] is None or a["scale"] is None:
        raise NotModelled(
            "npu_grouped_matmul_finalize_routing: the reference needs scale and row_index"
        )
    m, (e, _, n) = x.shape[0], w.shape
    sizes = _group_rows(a["group_list"], int(a["group_list_type"]), e)
    if sum(sizes) > m:
        raise ReferenceInputError(
            "npu_grouped_matmul_finalize_routing: group_list covers more rows than x has"
        )
    scale = f32(a["scale"]).reshape(e, n)
    per_row = np.ones(m, np.float32)
    for name in ("pertoken_scale", "logit"):
        if a[name] is not None:
            per_row = per_row * f32(a[name]).reshape(-1)[:m]
    rows = np.zeros((m, n), np.float32)
    start = 0
    for g, count in enumerate(sizes):
        part = slice(start, start + count)
        acc = x[part].astype(np.int64) @ w[g].astype(np.int64)
        rows[part] = acc.astype(np.float32) * scale[g] * per_row[part, None]
        start += count
    out_bs = int(a["output_bs"] or 0) or m
    index = np.asarray(a["row_index"]).reshape(-1).astype(np.int64)[:start]
    if index.size and (index.min() < 0 or index.max() >= out_bs):
        raise ReferenceInputError(
            f"npu_grouped_matmul_finalize_routing: row_index values lie in [0, {out_bs})"
        )
    out = np.zeros((out_bs, n), np.float32)
    np.add.at(out, index, rows[:start])
    shared = a["shared_input"]
    if shared is not None:
        first = int(a["shared_input_offset"] or 0)
        if (
            shared.ndim != 2
            or shared.shape[1] != n
            or first < 0
            or first + shared.shape[0] > out_bs
        ):
            raise ReferenceInputError(
                "npu_grouped_matmul_finalize_routing: shared_input is [rows, n] inside the output"
            )
        out[first : first + shared.shape[0]] += np.float32(a["shared_input_weight"]) * f32(shared)
    return cast(out, np.float32)
