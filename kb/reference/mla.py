"""MLA prolog (DeepSeek's attention pre-processing) in one call: the query path
x -> W_DQ -> RMSNorm -> W_UQ|W_QR -> (nope part) W_UK and (rope part) RoPE, and the key path
x -> W_DKV|W_KR -> RMSNorm of the latent / RoPE of the rope part, both written to the caches.

RoPE here is the interleave-half form: even elements first, odd second, then rotate halves.
Matmuls accumulate in float32 (int8 ones exactly in integers, then dequantize); every
tensor the kernel hands from one matmul to the next is rounded to bfloat16 on the way.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kb.reference.errors import NotModelled, ReferenceInputError
from kb.reference.lowp import NUMPY, cast, f32

Args = dict[str, Any]
BF16 = NUMPY["bfloat16"]
CACHE_MODES = ("PA_BSND", "PA_NZ", "BSND", "TND")


def _bf16(x: np.ndarray) -> np.ndarray:
    return f32(cast(x, BF16))


def _rms(x: np.ndarray, gamma: np.ndarray, eps: float) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + np.float32(eps)) * f32(gamma)


def _rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """[even, odd] reorder, then x * cos + [-second half, first half] * sin (cos/sin [T, 1, Dr])."""
    even, odd = x[..., 0::2], x[..., 1::2]
    return np.concatenate([even, odd], -1) * cos + np.concatenate([-odd, even], -1) * sin


def _dyn_int8(x: np.ndarray, axis: int = -1) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric dynamic int8 along axis: scale = max|x| / 127, q = round(x / scale)."""
    scale = (np.abs(x).max(axis=axis, keepdims=True) / np.float32(127)).astype(np.float32)
    safe = np.where(scale > 0, scale, np.float32(1))
    return np.clip(np.rint(x / safe), -128, 127), scale


def _matmul(x: np.ndarray, w: np.ndarray, x_scale: Any, w_scale: Any, what: str) -> np.ndarray:
    """x @ w: float32 for bfloat16 operands, exact int for int8 ones dequantized by the
    per-token x_scale [T, 1] and the per-channel w_scale [1, N]."""
    if x.shape[-1] != w.shape[0]:
        raise ReferenceInputError(
            f"npu_mla_prolog: {what} needs [.., {x.shape[-1]}] @ [{x.shape[-1]}, ..], not {w.shape}"
        )
    if w.dtype != np.int8:
        return f32(x) @ f32(w)
    if x_scale is None or w_scale is None:
        raise ReferenceInputError(
            f"npu_mla_prolog: the int8 {what} matmul needs its dequant scales"
        )
    acc = (np.asarray(x).astype(np.int64) @ w.astype(np.int64)).astype(np.float32)
    return acc * f32(x_scale).reshape(-1, 1) * f32(w_scale).reshape(1, -1)


def _write(
    cache: np.ndarray, rows: np.ndarray, index: Any, mode: str, lead: tuple[int, ...], what: str
) -> None:
    """rows [T, D] into every kv head of the cache: PA modes through slot index (block
    slot // block_size, row slot % block_size; a negative slot is skipped), BSND / TND by
    position."""
    data = cast(rows, cache.dtype)
    if mode in ("BSND", "TND"):
        want = (*lead, cache.shape[-2], rows.shape[-1])
        if tuple(cache.shape) != want:
            raise ReferenceInputError(f"npu_mla_prolog: {what} in {mode} is {want}")
        cache[...] = data.reshape(*lead, 1, -1)
        return
    if index is None:
        raise ReferenceInputError(f"npu_mla_prolog: cache_mode {mode} writes through cache_index")
    if cache.ndim != 4 or cache.shape[-1] != rows.shape[-1]:
        raise ReferenceInputError(
            f"npu_mla_prolog: {what} is [BlockNum, BlockSize, Nkv, {rows.shape[-1]}]"
        )
    slots = np.asarray(index).reshape(-1).astype(np.int64)
    bs = cache.shape[1]
    for t, slot in enumerate(slots.tolist()):
        if 0 <= slot < cache.shape[0] * bs:
            cache[slot // bs, slot % bs] = data[t]
        elif slot >= 0:
            raise ReferenceInputError(f"npu_mla_prolog: cache_index {slot} lies outside {what}")


def prolog(a: Args, mode: int, kv_quant: int, cache_mode: str) -> tuple[Any, ...]:
    """The shared computation; returns (query, query_rope, dequant_scale_q_nope or None,
    cq before quantization [T, Hcq])."""
    x = a["token_x"]
    if x.ndim not in (2, 3):
        raise ReferenceInputError("npu_mla_prolog: token_x is [T, He] or [B, S, He]")
    if cache_mode not in CACHE_MODES:
        raise NotModelled(
            f"npu_mla_prolog: cache_mode {cache_mode!r} is not modelled ({', '.join(CACHE_MODES)})"
        )
    lead = x.shape[:-1]
    tokens = x.reshape(-1, x.shape[-1])
    t = tokens.shape[0]
    cos, sin = (f32(a[n]).reshape(t, 1, -1) for n in ("rope_cos", "rope_sin"))
    w_uk = a["weight_uk"]
    heads, d_nope, hckv = w_uk.shape
    dr = cos.shape[-1]
    x_scale = a["dequant_scale_x"] if mode == 2 else None
    # query path
    cq = _rms(
        _matmul(tokens, a["weight_dq"], x_scale, a["dequant_scale_w_dq"], "W_DQ"),
        a["rmsnorm_gamma_cq"],
        a["rmsnorm_epsilon_cq"],
    ) * np.float32(a.get("qc_qr_scale", 1.0))
    w_uq = a["weight_uq_qr"]
    if w_uq.dtype == np.int8:
        smooth = a["smooth_scales_cq"]
        q_in, q_scale = _dyn_int8(cq if smooth is None else cq * f32(smooth).reshape(1, -1))
        qcqr = _matmul(q_in.astype(np.int8), w_uq, q_scale, a["dequant_scale_w_uq_qr"], "W_UQ_QR")
    else:
        qcqr = _matmul(_bf16(cq), w_uq, None, None, "W_UQ_QR")
    if qcqr.shape[-1] != heads * (d_nope + dr):
        raise ReferenceInputError(
            f"npu_mla_prolog: weight_uq_qr has N * (D + Dr) = {heads * (d_nope + dr)} columns"
        )
    qcqr = qcqr.reshape(t, heads, d_nope + dr)
    query = _bf16(np.einsum("tnd,ndc->tnc", _bf16(qcqr[..., :d_nope]), f32(w_uk)))
    query_rope = _bf16(_rope(qcqr[..., d_nope:], cos, sin))
    deq_q = None
    if mode == 2 and kv_quant == 1:
        q_int, deq_q = _dyn_int8(query)
        query_rope = query_rope * f32(a["quant_scale_ckv"]).reshape(-1)[0] / deq_q
        query = q_int
    # key path
    kv = _matmul(tokens, a["weight_dkv_kr"], x_scale, a["dequant_scale_w_dkv_kr"], "W_DKV_KR")
    if kv.shape[-1] != hckv + dr:
        raise ReferenceInputError(
            f"npu_mla_prolog: weight_dkv_kr has Hckv + Dr = {hckv + dr} columns"
        )
    ckv = _rms(kv[:, :hckv], a["rmsnorm_gamma_ckv"], a["rmsnorm_epsilon_ckv"]) * np.float32(
        a.get("kc_scale", 1.0)
    )
    if kv_quant == 1:
        ckv = np.clip(np.rint(ckv * f32(a["quant_scale_ckv"]).reshape(-1)[0]), -128, 127)
    k_rope = _rope(kv[:, None, hckv:], cos, sin)[:, 0]
    _write(a["kv_cache"], ckv, a["cache_index"], cache_mode, lead, "kv_cache")
    _write(a["kr_cache"], k_rope, a["cache_index"], cache_mode, lead, "kr_cache")
    q_dtype = np.int8 if deq_q is not None else BF16
    shape = (*lead, heads)
    return (
        cast(query, q_dtype).reshape(*shape, hckv),
        cast(query_rope, BF16).reshape(*shape, dr),
        deq_q,
        cq,
    )


def _mode_of(a: Args) -> int:
    """0: bfloat16 weights; 1: only weight_uq_qr int8 (token_x bfloat16); 2: int8 token_x and weights."""
    ints = [
        a[n].dtype == np.int8 for n in ("token_x", "weight_dq", "weight_uq_qr", "weight_dkv_kr")
    ]
    if not any(ints):
        return 0
    if ints == [False, False, True, False]:
        return 1
    if all(ints):
        return 2
    raise NotModelled(
        "npu_mla_prolog: the dtypes name no modelled quant mode (bf16, int8 W_UQ_QR only, all int8)"
    )


def mla_prolog_v3(a: Args) -> tuple[Any, ...]:
    mode, kv_quant = int(a["weight_quant_mode"]), int(a["kv_cache_quant_mode"])
    if mode not in (0, 1, 2) or kv_quant not in (0, 1) or (kv_quant == 1 and mode != 2):
        raise NotModelled(
            "npu_mla_prolog_v3: weight_quant_mode 0-2 with kv_cache_quant_mode 0, or 2 with 1, is modelled"
        )
    if (
        any(int(a[n]) for n in ("ckvkr_repo_mode", "quant_scale_repo_mode"))
        or a["k_nope_clip_alpha"] is not None
    ):
        raise NotModelled(
            "npu_mla_prolog_v3: merged cache/scale storage and k_nope_clip_alpha are not modelled"
        )
    if _mode_of(a) != mode:
        raise ReferenceInputError(
            f"npu_mla_prolog_v3: weight_quant_mode={mode} does not match the tensor dtypes"
        )
    query, query_rope, deq_q, cq = prolog(a, mode, kv_quant, a["cache_mode"])
    norm = scale_norm = None
    if a["query_norm_flag"]:
        lead = a["token_x"].shape[:-1]
        if mode == 0:
            norm = cast(cq, BF16).reshape(*lead, -1)
        else:
            smooth = a["smooth_scales_cq"]
            q_in, q_scale = _dyn_int8(cq if smooth is None else cq * f32(smooth).reshape(1, -1))
            norm, scale_norm = q_in.astype(np.int8).reshape(*lead, -1), q_scale
    return query, query_rope, deq_q, norm, scale_norm


def mla_prolog_v2(a: Args) -> tuple[Any, ...]:
    mode = _mode_of(a)
    kv_quant = 1 if a["quant_scale_ckv"] is not None and mode == 2 else 0
    if a["quant_scale_ckr"] is not None or (a["quant_scale_ckv"] is not None and mode != 2):
        raise NotModelled(
            "npu_mla_prolog_v2: quant_scale_ckr and a quantized cache without int8 token_x are not modelled"
        )
    query, query_rope, deq_q, _ = prolog(
        {**a, "qc_qr_scale": 1.0, "kc_scale": 1.0}, mode, kv_quant, a["cache_mode"]
    )
    if deq_q is None:
        deq_q = np.zeros(1, np.float32)
    return query, query_rope, a["kv_cache"], a["kr_cache"], deq_q
