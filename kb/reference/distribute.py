"""MC2 MoE dispatch and combine (v2) as one rank computes them when it is the whole expert-
parallel group: every expert is local, the all-to-all delivers a rank's own tokens back to
itself, so dispatch is a sort of (token, expert) pairs by expert and combine the weighted
sum back per token.

A group of more ranks needs the other ranks' tokens and expert outputs, which one process
does not have: ``ep_world_size`` other than 1 is not modelled.  The device's tiling refuses a
group of one (at least 2 ranks), so this is the emulator's group, not a device call.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kb.reference.errors import NotModelled, ReferenceInputError
from kb.reference.lowp import cast, f32

Args = dict[str, Any]
#: assist_info_for_combine holds (rank, token, top-k slot) per expanded row, 128 ints per row reserved
ASSIST_FIELDS, ASSIST_STRIDE = 3, 128


def _one_rank(a: Args, op: str) -> None:
    if int(a["ep_world_size"]) != 1 or int(a["ep_rank_id"]) != 0:
        raise NotModelled(
            f"{op}: the reference computes a one-rank expert-parallel group "
            "(ep_world_size=1, ep_rank_id=0); more ranks need their tokens"
        )
    if int(a["shared_expert_rank_num"]) != 0 or int(a["tp_world_size"]) > 1:
        raise NotModelled(f"{op}: shared-expert ranks and a TP group are not modelled")
    if any(int(a[n]) for n in ("zero_expert_num", "copy_expert_num", "const_expert_num")):
        raise NotModelled(f"{op}: zero, copy and constant experts are not modelled")
    if a.get("elastic_info") is not None:
        raise NotModelled(f"{op}: elastic_info is not modelled")


def _pairs(expert_ids: np.ndarray, mask: Any, experts: int, op: str) -> list[tuple[int, int, int]]:
    """The active (expert, token, slot) pairs in the order dispatch lays them out: by expert,
    then token, as the kernel walks expert_ids row by row."""
    if expert_ids.ndim != 2:
        raise ReferenceInputError(f"{op}: expert_ids is [BS, K]")
    bs, k = expert_ids.shape
    active = np.ones((bs, k), bool)
    if mask is not None:
        m = np.asarray(mask).astype(bool)
        if m.shape not in ((bs,), (bs, k)):
            raise ReferenceInputError(f"{op}: x_active_mask is (BS,) or (BS, K)")
        active = np.broadcast_to(m[:, None], (bs, k)) if m.ndim == 1 else m
    if expert_ids.size and (expert_ids.min() < 0 or expert_ids.max() >= experts):
        raise ReferenceInputError(f"{op}: expert ids lie in [0, moe_expert_num={experts})")
    for row in expert_ids:
        if len(set(row.tolist())) != k:
            raise ReferenceInputError(f"{op}: the K experts of a token are distinct")
    pairs = [(int(expert_ids[t, s]), t, s) for t in range(bs) for s in range(k) if active[t, s]]
    return sorted(pairs)


def dispatch_v2(a: Args) -> tuple[np.ndarray, ...]:
    op = "npu_moe_distribute_dispatch_v2"
    _one_rank(a, op)
    x, ids = a["x"], np.asarray(a["expert_ids"])
    if x.dtype == np.int32 or a["y_dtype"] is not None or a["x_dtype"] is not None:
        raise NotModelled(f"{op}: packed int4, FP8 and FP4 tokens are not modelled")
    quant = int(a["quant_mode"])
    if quant not in (0, 2):
        raise NotModelled(f"{op}: quant_mode 0 (none) and 2 (dynamic int8) are modelled")
    if x.ndim != 2 or ids.shape[:1] != x.shape[:1]:
        raise ReferenceInputError(f"{op}: x is [BS, H] and expert_ids [BS, K]")
    (bs, h), k, experts = x.shape, ids.shape[1], int(a["moe_expert_num"])
    global_bs = int(a["global_bs"]) or bs
    rows = global_bs * min(experts, k)
    pairs = _pairs(ids, a["x_active_mask"], experts, op)
    expand_x = np.zeros((rows, h), np.int8 if quant == 2 else x.dtype)
    dynamic_scales = np.zeros(rows, np.float32)
    assist = np.zeros(max(bs * k, rows * ASSIST_STRIDE), np.int32)
    expand_scales = np.zeros(rows, np.float32)
    smooth = None if a["scales"] is None else f32(a["scales"]).reshape(experts, h)
    for i, (e, t, s) in enumerate(pairs):
        token = f32(x[t])
        if quant == 2:
            if smooth is not None:
                token = token * smooth[e]
            top = np.abs(token).max()
            mult = np.float32(127) / top if top > 0 else np.float32(0)
            expand_x[i] = cast(token * mult, np.int8)
            dynamic_scales[i] = np.float32(1) / mult if top > 0 else np.float32(0)
        else:
            expand_x[i] = x[t]
        assist[i * ASSIST_FIELDS : (i + 1) * ASSIST_FIELDS] = (0, t, s)
        if a["expert_scales"] is not None:
            expand_scales[i] = f32(a["expert_scales"])[t, s]
    counts = np.bincount([e for e, _, _ in pairs], minlength=experts).astype(np.int64)
    tokens = counts if int(a["expert_token_nums_type"]) == 1 else np.cumsum(counts)
    recv = np.cumsum(counts).astype(np.int32)
    tp_recv = np.zeros(int(a["tp_world_size"]), np.int32)
    return expand_x, dynamic_scales, assist, tokens.astype(np.int64), recv, tp_recv, expand_scales


def combine_v2(a: Args) -> np.ndarray:
    """out[t] = sum over the rows dispatch made from token t of expert_scales[t, slot] *
    expand_x[row] (+ shared_expert_x[t]); rows are read through assist_info_for_combine and
    ep_send_counts (the row count is its last prefix sum); float32, rounded once."""
    op = "npu_moe_distribute_combine_v2"
    _one_rank(a, op)
    quant, alg = int(a["comm_quant_mode"]), str(a["comm_alg"] or "")
    if quant not in (0, 2):
        raise NotModelled(f"{op}: comm_quant_mode 0 (none) and 2 (int8) are modelled")
    if quant == 2 and alg == "fullmesh":
        raise ReferenceInputError(
            f"{op}: comm_quant_mode=2 needs comm_alg 'hierarchy' (or '' on A3), not 'fullmesh'"
        )
    expand_x, ids = a["expand_x"], np.asarray(a["expert_ids"])
    scales = f32(a["expert_scales"])
    if ids.ndim != 2 or scales.shape != ids.shape or expand_x.ndim != 2:
        raise ReferenceInputError(
            f"{op}: expert_ids and expert_scales are [BS, K], expand_x [A, H]"
        )
    bs = ids.shape[0]
    counts = np.asarray(a["ep_send_counts"]).reshape(-1)
    used = int(counts[-1]) if counts.size else 0
    assist = np.asarray(a["assist_info_for_combine"]).reshape(-1)
    if not 0 <= used <= expand_x.shape[0] or assist.size < used * ASSIST_FIELDS:
        raise ReferenceInputError(
            f"{op}: ep_send_counts and assist_info_for_combine come from the paired dispatch"
        )
    out = np.zeros((bs, expand_x.shape[1]), np.float32)
    hierarchy = quant == 2 and alg == "hierarchy"
    if hierarchy and a["shared_expert_x"] is not None:
        raise NotModelled(f"{op}: shared_expert_x with int8 hierarchy combine is not modelled")
    # int8 communication without hierarchy: each row crosses the wire quantized (per 8 values)
    rows = f32(int8_rows(expand_x) if quant == 2 and not hierarchy else expand_x)
    for i in range(used):
        _rank, t, s = (int(v) for v in assist[i * ASSIST_FIELDS : (i + 1) * ASSIST_FIELDS])
        if not (0 <= t < bs and 0 <= s < ids.shape[1]):
            raise ReferenceInputError(
                f"{op}: assist_info_for_combine names token {t}, slot {s} outside expert_ids"
            )
        out[t] += scales[t, s] * rows[i]
    if hierarchy:  # the per-token sum crosses the wire quantized
        return int8_sums(out, expand_x.dtype)
    if a["shared_expert_x"] is not None:
        out += f32(a["shared_expert_x"]).reshape(bs, -1)
    return cast(out, expand_x.dtype)


#: int8 communication: values per scale, and the scale's factor 1 / 127 as each kernel holds it
ROW_GROUP, INV_127 = 8, np.float32(1.0 / 127)


def _groups(x: np.ndarray, size: int) -> np.ndarray:
    if x.shape[-1] % size:
        raise ReferenceInputError(
            f"npu_moe_distribute_combine_v2: int8 communication scales every {size} values, "
            f"so H ({x.shape[-1]}) must be a multiple of {size}"
        )
    return x.reshape(*x.shape[:-1], -1, size)


def _safe_div(x: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """x / scale per group, a group whose scale is 0 (all zeros) giving 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(scale[..., None] > 0, x / scale[..., None], 0).astype(x.dtype)


def int8_rows(expand_x: np.ndarray) -> np.ndarray:
    """comm_quant_mode=2 without hierarchy, per expanded row and group of 8 (float32): scale =
    max|x| * (1 / 127), q = int8(rint(float16(rint(x / scale)))); the receiver reads
    q * scale, the scale rounded to x's dtype, and rounds the product to x's dtype."""
    g = _groups(f32(expand_x), ROW_GROUP)
    scale = (np.abs(g).max(-1) * INV_127).astype(np.float32)
    q = np.rint(_safe_div(g, scale).astype(np.float16)).astype(np.int8)
    sent = cast(scale, expand_x.dtype).astype(np.float32)
    deq = q.astype(np.float32) * sent[..., None]
    return cast(deq.reshape(expand_x.shape), expand_x.dtype)


def int8_sums(total: np.ndarray, dtype: Any) -> np.ndarray:
    """comm_quant_mode=2 with comm_alg="hierarchy", on the per-token float32 sum: bfloat16
    quantizes groups of 8 in float32 (scale max|s| * (1 / 127), q = int8(rint(bfloat16(s /
    scale)))) and reads back bfloat16(q * bfloat16(scale)); float16 first rounds s to float16
    and works in float16 on groups of 16."""
    if np.dtype(dtype) == np.float16:
        s16 = _groups(total.astype(np.float16), 16)
        scale = np.abs(s16).max(-1) * np.float16(1.0 / 127)
        q = np.rint(_safe_div(s16, scale)).astype(np.int8)
        return (q.astype(np.float16) * scale[..., None]).reshape(total.shape)
    g = _groups(total, ROW_GROUP)
    scale = (np.abs(g).max(-1) * INV_127).astype(np.float32)
    q = np.rint(cast(_safe_div(g, scale), dtype).astype(np.float32)).astype(np.int8)
    sent = cast(scale, dtype).astype(np.float32)
    return cast((q.astype(np.float32) * sent[..., None]).reshape(total.shape), dtype)
