"""Mixture-of-experts routing: gating top-k, token dispatch (init routing, permute),
grouped matmul over the experts, and the weighted combine (finalize, unpermute).

Top-k ties go to the lower expert index (a stable sort on the negated score), as in
the equivalent code on the official pages; the device's tie order is not stated.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kb.reference.errors import NotModelled, ReferenceInputError
from kb.reference.lowp import cast, dtype_named, f32, name_of, unpack_int4
from kb.reference.quant_dyn import unpack_scale

Args = dict[str, Any]
INT32_MAX = np.iinfo(np.int32).max
#: the page's bound on expert_num (torch_npu-npu_moe_init_routing_v2.md, line 621)
MAX_EXPERTS = 10240


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def topk_desc(score: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest scores per row, largest first, ties to the lower index."""
    return np.argsort(-score, axis=-1, kind="stable")[..., :k]


def gating_top_k_softmax(a: Args) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x, k = a["x"], int(a["k"])
    rows = f32(x).reshape(-1, x.shape[-1])
    if not 1 <= k <= rows.shape[-1]:
        raise ReferenceInputError(
            f"npu_moe_gating_top_k_softmax: k={k} must be in [1, {rows.shape[-1]}]"
        )
    prob = softmax(rows)
    idx = topk_desc(prob, k)
    y = np.take_along_axis(prob, idx, axis=-1)
    if a["finished"] is not None:
        done = np.asarray(a["finished"]).reshape(-1, 1).astype(bool)
        idx = np.where(done, rows.shape[-1], idx)
    n = rows.shape[0]
    row_idx = np.arange(n * k, dtype=np.int32).reshape(k, n).T
    lead = x.shape[:-1]
    return (
        cast(y, x.dtype).reshape(*lead, k),
        idx.astype(np.int32).reshape(*lead, k),
        row_idx.reshape(*lead, k),
    )


def _group_limits(e: int, a: Args, k: int) -> tuple[int, int]:
    groups, k_group = int(a["group_count"]), int(a["k_group"])
    if groups <= 0 or e % groups or e // groups <= 2:
        raise ReferenceInputError(
            "npu_moe_gating_top_k: group_count must divide the expert "
            "count into groups of more than 2 experts"
        )
    if not 1 <= k_group <= groups or k_group * e // groups < k:
        raise ReferenceInputError(
            "npu_moe_gating_top_k: needs 1 <= k_group <= group_count and "
            "k_group * experts / group_count >= k"
        )
    return groups, k_group


def gating_top_k(a: Args) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    x, k = a["x"], int(a["k"])
    if x.ndim != 2:
        raise ReferenceInputError("npu_moe_gating_top_k: x must be 2-D [tokens, experts]")
    if a["renorm"] != 0:
        raise ReferenceInputError(
            "npu_moe_gating_top_k: renorm supports only 0 (norm before top-k)"
        )
    if a["input_ids"] is not None or a["tid2eid"] is not None:
        raise NotModelled("npu_moe_gating_top_k: input_ids/tid2eid routing is not modelled")
    e = x.shape[-1]
    groups, k_group = _group_limits(e, a, k)
    xf = f32(x)
    norm = softmax(xf) if a["norm_type"] == 0 else 1.0 / (1.0 + np.exp(-xf))
    score = norm + f32(a["bias"]) if a["bias"] is not None else norm
    if groups > 1:
        grouped = score.reshape(x.shape[0], groups, -1)
        if a["group_select_mode"] == 0:
            group_score = grouped.max(axis=-1)
        else:
            group_score = np.sort(grouped, axis=-1)[..., -2:].sum(axis=-1)
        keep = topk_desc(group_score, k_group)
        dropped = np.ones((x.shape[0], groups), dtype=bool)
        np.put_along_axis(dropped, keep, False, axis=-1)
        score = np.where(dropped[..., None], -np.inf, grouped).reshape(x.shape[0], e)
    idx = topk_desc(score, k)
    y = np.take_along_axis(norm, idx, axis=-1)
    if a["norm_type"] == 1:
        y = y / (y.sum(axis=-1, keepdims=True) + np.float32(a["eps"]))
    y = y * np.float32(a["routed_scaling_factor"])
    norm_out = norm.astype(np.float32) if a["out_flag"] else None
    return cast(y, x.dtype), idx.astype(np.int32), norm_out


def init_routing_v2(a: Args) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    x, expert_idx = a["x"], np.asarray(a["expert_idx"])
    if a["drop_pad_mode"] != 0 or a["quant_mode"] not in (-1, 0, 1):
        raise NotModelled(
            "npu_moe_init_routing_v2: the reference models drop_pad_mode=0 (dropless) with "
            "quant_mode -1 (none), 0 (static int8) or 1 (dynamic int8)"
        )
    if a["quant_mode"] != -1 and name_of(np.asarray(x)) == "int8":
        raise NotModelled("npu_moe_init_routing_v2: an int8 x with quant_mode 0/1 is not modelled")
    if x.ndim != 2 or expert_idx.ndim != 2 or expert_idx.shape[0] != x.shape[0]:
        raise ReferenceInputError("npu_moe_init_routing_v2: x is [N, H] and expert_idx [N, K]")
    k = expert_idx.shape[1]
    expert_num = int(a["expert_num"])
    rng = list(a["active_expert_range"] or [])
    start, end = (
        (int(rng[0]), int(rng[1])) if rng else (0, expert_num if expert_num > 0 else INT32_MAX)
    )
    if (end if end != INT32_MAX else 0) - start > MAX_EXPERTS or start < 0:
        raise ReferenceInputError(
            f"npu_moe_init_routing_v2: the expert range must lie in [0, {MAX_EXPERTS}]"
        )
    flat = expert_idx.reshape(-1).astype(np.int64)
    inside = (flat >= start) & (flat < end)
    keys = np.where(inside, flat, INT32_MAX)
    order = np.argsort(keys, kind="stable")
    total = int(inside.sum())
    active = total if a["active_num"] in (0, -1) else min(int(a["active_num"]), total)
    if a["row_idx_type"] == 1:
        expanded_row_idx = order.astype(np.int32)
    else:
        expanded_row_idx = np.full(flat.shape, -1, dtype=np.int32)
        expanded_row_idx[order[:total]] = np.arange(total, dtype=np.int32)
    expanded_x = x[order[:active] // k]
    counts_out = None
    if a["expert_tokens_num_flag"]:
        if end == INT32_MAX:
            raise ReferenceInputError(
                "npu_moe_init_routing_v2: expert_tokens_num_flag needs "
                "expert_num or active_expert_range"
            )
        counts = np.bincount(keys[order[:total]] - start, minlength=end - start).astype(np.int64)
        kind = a["expert_tokens_num_type"]
        if kind == 0:
            counts_out = np.cumsum(counts)
        elif kind == 1:
            counts_out = counts
        else:
            pairs = [(start + i, c) for i, c in enumerate(counts) if c]
            counts_out = np.zeros((max(expert_num, len(pairs)), 2), dtype=np.int64)
            if pairs:
                counts_out[: len(pairs)] = pairs
    scale = a["scale"]
    if a["quant_mode"] == 0:
        return _static_int8(expanded_x, scale, a["offset"]), expanded_row_idx, counts_out, None
    if a["quant_mode"] == 1:
        smooth = None
        if scale is not None:
            smooth = f32(scale)
            if smooth.ndim != 2 or smooth.shape[0] not in (1, end - start):
                raise ReferenceInputError(
                    f"npu_moe_init_routing_v2: a dynamic-quant scale is [1, H] or "
                    f"[expert_end - expert_start, H], not {smooth.shape}"
                )
            if smooth.shape[0] != 1:
                smooth = smooth[keys[order[:active]] - start]
        q, row_scale = _dynamic_int8(expanded_x, smooth)
        return q, expanded_row_idx, counts_out, row_scale
    expanded_scale = None if scale is None else np.asarray(scale)[order[:active] // k]
    return expanded_x, expanded_row_idx, counts_out, expanded_scale


def _static_int8(rows: np.ndarray, scale: Any, offset: Any) -> np.ndarray:
    """quant_mode 0: round(x * scale + offset) to int8, in float16 as the page's code does."""
    if scale is None or offset is None:
        raise ReferenceInputError(
            "npu_moe_init_routing_v2: quant_mode=0 needs scale and offset, each of shape (1,)"
        )
    h = np.float16
    y = rows.astype(np.float32).astype(h) * np.asarray(scale).astype(h).reshape(-1)[0]
    y = y + np.asarray(offset).astype(h).reshape(-1)[0]
    return np.clip(np.rint(y), -128, 127).astype(np.int8)


def _dynamic_int8(rows: np.ndarray, smooth: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """quant_mode 1: per row, scale = max|x * smooth| / 127 and q = round(x * smooth / scale)."""
    y = f32(rows) if smooth is None else f32(rows) * smooth
    scale = (np.max(np.abs(y), axis=-1) / np.float32(127)).astype(np.float32)
    safe = np.where(scale == 0, np.float32(1), scale)  # an all-zero row: q = 0
    q = np.clip(np.rint(y / safe[:, None]), -128, 127).astype(np.int8)
    return q, scale


def group_sizes(group_list: Any, kind: int, groups: int) -> list[int]:
    """Rows per group from group_list: 0 cumsum, 1 counts, 2 [[group, count], …]."""
    gl = np.asarray(group_list).astype(np.int64)
    if kind == 0:
        if gl.ndim != 1 or np.any(np.diff(gl) < 0) or np.any(gl < 0):
            raise ReferenceInputError(
                "npu_grouped_matmul: group_list_type=0 needs a non-negative, non-decreasing cumsum"
            )
        sizes = np.diff(np.concatenate([[0], gl])).tolist()
    elif kind == 1:
        if gl.ndim != 1 or np.any(gl < 0):
            raise ReferenceInputError(
                "npu_grouped_matmul: group_list_type=1 needs non-negative counts"
            )
        sizes = gl.tolist()
    else:
        if gl.ndim != 2 or gl.shape[1] != 2 or np.any(gl[:, 1] < 0):
            raise ReferenceInputError(
                "npu_grouped_matmul: group_list_type=2 needs [E, 2] rows of "
                "[group index, non-negative size]"
            )
        sizes = [0] * groups
        for g, n in gl.tolist():
            sizes[g] += n
    if len(sizes) != groups:
        raise ReferenceInputError(
            f"npu_grouped_matmul: group_list describes {len(sizes)} groups but weight has {groups}"
        )
    return [int(s) for s in sizes]


def _of_group(tensors: Any, g: int, groups: int, what: str) -> np.ndarray | None:
    """Group g's tensor from a list of one per group, one stacked [groups, ...] tensor,
    or one tensor every group shares."""
    items = [] if tensors is None else list(tensors)
    if not items:
        return None
    if len(items) == groups and groups > 1:
        return np.asarray(items[g])
    if len(items) != 1:
        raise ReferenceInputError(
            f"npu_grouped_matmul: {what} holds {len(items)} tensors for {groups} groups "
            "(one per group, or one for all)"
        )
    t = np.asarray(items[0])
    if t.ndim >= 2 and t.shape[0] == groups and groups > 1:
        return t[g]
    if t.ndim >= 2 and t.shape[0] != 1:
        raise ReferenceInputError(
            f"npu_grouped_matmul: {what} {tuple(t.shape)} stacks neither {groups} groups "
            "nor one row for all"
        )
    return t


def _columns(t: np.ndarray | None, n: int, what: str) -> np.ndarray | None:
    """A per-column vector (one value per output column, or one for all)."""
    if t is None:
        return None
    v = f32(t).reshape(-1)
    if v.size not in (1, n):
        raise ReferenceInputError(
            f"npu_grouped_matmul: {what} has {v.size} values for {n} output columns"
        )
    return v


def _one_matmul(
    x: np.ndarray, w: np.ndarray, g: int, groups: int, a: Args, rows: slice | None
) -> np.ndarray:
    """One group.  int8 x (the page's formulas 2 and 3): int32 bias before the scales,
    (x @ w + bias) * scale * per_token_scale + offset, a float bias after them."""
    if x.shape[-1] != w.shape[-2]:
        raise ReferenceInputError(
            f"npu_grouped_matmul: x {tuple(x.shape)} and weight {tuple(w.shape)} differ in K"
        )
    n = w.shape[-1]
    bias_t = _of_group(a["bias"], g, groups, "bias")
    if x.dtype == np.int8:
        whole = np.matmul(x.astype(np.int64), w.astype(np.int64))
        int_bias = bias_t is not None and bias_t.dtype == np.int32
        if int_bias:
            _columns(bias_t, n, "bias")
            whole = whole + np.asarray(bias_t).reshape(-1).astype(np.int64)
        acc = whole.astype(np.float32)
        scale_t = _of_group(a["scale"], g, groups, "scale")
        if scale_t is not None and scale_t.dtype in (np.int64, np.uint64):
            scale_t = unpack_scale(scale_t)[0]  # npu_trans_quant_param's packing
        scale = _columns(scale_t, n, "scale")
        if scale is None:
            raise ReferenceInputError("npu_grouped_matmul: int8 x needs scale")
        acc = acc * scale
        pts_t = _of_group(
            a["per_token_scale"],
            g if rows is None else 0,
            groups if rows is None else 1,
            "per_token_scale",
        )
        if pts_t is not None:
            pts = f32(pts_t).reshape(-1)
            picked = pts[rows] if rows is not None else pts
            if picked.size != acc.shape[0]:
                raise ReferenceInputError(
                    "npu_grouped_matmul: per_token_scale has one value per row of x"
                )
            acc = acc * picked[:, None]
        offset = _columns(_of_group(a["offset"], g, groups, "offset"), n, "offset")
        if offset is not None:
            acc = acc + offset
        if bias_t is not None and not int_bias:
            acc = acc + _columns(bias_t, n, "bias")
        target = (
            np.float16
            if a["output_dtype"] is None
            else dtype_named(a["output_dtype"], "output_dtype")
        )
        return cast(acc, target)
    wf = f32(w)
    if a["antiquant_scale"] is not None:  # the page's formula 4 (weight-only quantization)
        wf = _antiquant(x, w, g, groups, a)
        n = wf.shape[-1]
    out = f32(x) @ wf
    if bias_t is not None:
        out = out + _columns(bias_t, n, "bias")
    return cast(out, x.dtype)


def _antiquant_part(tensors: Any, g: int, groups: int, what: str) -> np.ndarray | None:
    """Group g's antiquant tensor: one per weight tensor, or (a stacked [g, k, n] weight, see
    grouped_matmul) the slice g of one stacked tensor."""
    items = [] if tensors is None else list(tensors)
    if not items:
        return None
    if len(items) != groups:
        raise ReferenceInputError(
            f"npu_grouped_matmul: {what} holds {len(items)} tensors for {groups} weights"
        )
    return np.asarray(items[g])


def _antiquant(x: np.ndarray, w: np.ndarray, g: int, groups: int, a: Args) -> np.ndarray:
    """Group g's weight dequantized in float32: (w + antiquant_offset) * antiquant_scale, the
    scale (and offset) per output column ([n]) or per K group and column ([G, n]); an int32
    weight holds eight int4 along n, the first in the lowest bits."""
    packed = w.dtype == np.int32
    if packed:
        w = unpack_int4(w)
    elif w.dtype != np.int8:
        raise ReferenceInputError(
            f"npu_grouped_matmul: antiquant takes an int8 or int4 (int32-packed) weight, not {w.dtype}"
        )
    k, n = w.shape[-2], w.shape[-1]
    scale = f32(_antiquant_part(a["antiquant_scale"], g, groups, "antiquant_scale"))
    offset_t = _antiquant_part(a["antiquant_offset"], g, groups, "antiquant_offset")
    offset = None if offset_t is None else f32(offset_t)
    if (
        scale.shape[-1] != n
        or scale.ndim > 2
        or (offset is not None and offset.shape != scale.shape)
    ):
        raise ReferenceInputError(
            f"npu_grouped_matmul: antiquant_scale {scale.shape} is [n] or [G, n] with n = {n}, "
            "and antiquant_offset has its shape"
        )
    if scale.ndim == 2:  # per group of K rows
        if k % scale.shape[0]:
            raise ReferenceInputError(
                f"npu_grouped_matmul: {scale.shape[0]} antiquant groups do not divide k = {k}"
            )
        if scale.shape[0] > 1 and not packed:
            raise ReferenceInputError(
                "npu_grouped_matmul: an int8 weight antiquantizes per channel"
            )
        rows = np.arange(k) // (k // scale.shape[0])
        scale = scale[rows]
        offset = None if offset is None else offset[rows]
    wf = f32(w) if offset is None else f32(w) + offset
    return (wf * scale).astype(np.float32)


def grouped_matmul(a: Args) -> list[np.ndarray]:
    xs, ws = list(a["x"]), list(a["weight"])
    if a["act_type"] not in (0, None):
        raise NotModelled("npu_grouped_matmul: activations (act_type) are not modelled")
    if a["antiquant_scale"] is not None and any(np.asarray(x).dtype == np.int8 for x in xs):
        raise ReferenceInputError(
            "npu_grouped_matmul: antiquant (weight-only) takes float16/bfloat16 x, not int8"
        )
    if len(ws) == 1 and ws[0].ndim == 3:
        ws = list(ws[0])
        # one stacked weight: its antiquant tensors stack the groups on their first axis
        for key in ("antiquant_scale", "antiquant_offset"):
            if a[key] is not None and len(a[key]) == 1:
                a = {**a, key: list(np.asarray(a[key][0]))}
    split = a["split_item"] or 0
    if a["group_list"] is None or a["group_type"] in (None, -1):
        if len(xs) != len(ws):
            raise ReferenceInputError(
                "npu_grouped_matmul: without group_list, x and weight are lists of one length"
            )
        outs = [
            _one_matmul(x, w, g, len(ws), a, None)
            for g, (x, w) in enumerate(zip(xs, ws, strict=True))
        ]
        return [np.concatenate(outs, axis=0)] if split in (2, 3) else outs
    if a["group_type"] != 0 or len(xs) != 1:
        raise NotModelled(
            "npu_grouped_matmul: with group_list the reference models "
            "group_type=0 (split M) over one x"
        )
    x = xs[0]
    sizes = group_sizes(a["group_list"], int(a["group_list_type"] or 0), len(ws))
    if sum(sizes) > x.shape[0]:
        raise ReferenceInputError("npu_grouped_matmul: group_list covers more rows than x has")
    outs, start = [], 0
    for g, (w, n) in enumerate(zip(ws, sizes, strict=True)):
        rows = slice(start, start + n)
        outs.append(_one_matmul(x[rows], w, g, len(ws), a, rows))
        start += n
    if split in (2, 3):
        full = np.zeros((x.shape[0], ws[0].shape[-1]), dtype=outs[0].dtype)
        full[:start] = np.concatenate(outs, axis=0)
        return [full]
    return outs


def finalize_routing(a: Args) -> np.ndarray:
    rows = a["expanded_permuted_rows"]
    mode = a["drop_pad_mode"] or 0
    # K comes from scales when they are given; k is for the scales=None case (the record)
    k = a["scales"].shape[-1] if a["scales"] is not None else int(a["k"] or 1)
    if mode not in (0, 2):
        raise NotModelled("npu_moe_finalize_routing: drop_pad_mode 0 or 2 (dropless) is modelled")
    src = np.asarray(a["expanded_src_to_dst_row"]).reshape(-1)
    n = src.size // k
    out = np.zeros((n, rows.shape[-1]), np.float32)
    for name in ("skip1", "skip2"):
        if a[name] is not None:
            out = out + f32(a[name])
    expert = a["export_for_source_row"]
    for j in range(k):
        pos = src[j * n : (j + 1) * n] if mode == 0 else src[j::k]
        part = f32(rows)[pos]
        if a["bias"] is not None:
            if expert is None:
                raise ReferenceInputError(
                    "npu_moe_finalize_routing: bias needs export_for_source_row"
                )
            part = part + f32(a["bias"])[np.asarray(expert)[:, j]]
        weight = f32(a["scales"])[:, j : j + 1] if a["scales"] is not None else np.float32(1)
        out = out + weight * part
    return cast(out, rows.dtype)


def token_permute(a: Args) -> tuple[np.ndarray, np.ndarray]:
    tokens, indices = a["tokens"], np.asarray(a["indices"])
    if a["padded_mode"]:
        raise ReferenceInputError("npu_moe_token_permute: padded_mode supports only False")
    if tokens.ndim != 2 or indices.ndim not in (1, 2):
        raise ReferenceInputError("npu_moe_token_permute: tokens is 2-D and indices 1-D or 2-D")
    topk = indices.shape[1] if indices.ndim == 2 else 1
    order = np.argsort(indices.reshape(-1), kind="stable")
    sorted_indices = np.empty_like(order)
    sorted_indices[order] = np.arange(order.size)
    n_out = a["num_out_tokens"]
    permuted = tokens[order // topk]
    if n_out:
        permuted = permuted[:n_out]
    return permuted, sorted_indices.astype(np.int32)


def token_unpermute(a: Args) -> np.ndarray:
    permuted, sorted_indices, probs = (
        a["permuted_tokens"],
        np.asarray(a["sorted_indices"]),
        a["probs"],
    )
    if a["padded_mode"] or a["restore_shape"] is not None:
        raise ReferenceInputError(
            "npu_moe_token_unpermute: padded_mode=False and restore_shape=None only"
        )
    topk = probs.shape[1] if probs is not None else 1
    n = sorted_indices.size // topk
    out = np.zeros((n, permuted.shape[-1]), np.float32)
    pf = f32(permuted)
    for t in range(n):
        for j in range(topk):
            pos = int(sorted_indices[t * topk + j])
            if pos < pf.shape[0]:  # rows cut by num_out_tokens contribute nothing
                w = f32(probs)[t, j] if probs is not None else np.float32(1)
                out[t] += w * pf[pos]
    return cast(out, permuted.dtype)
