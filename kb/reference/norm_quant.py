"""Normalisations fused with an activation, a cast or a quantization: GroupNorm + SiLU,
residual-add RMSNorm returning float32 too, RMSNorm + static int8 quant and residual-add
RMSNorm + one or two dynamic per-token int8 quants.

Each reduces in float32 and rounds each output once; a quantized value is
round-half-to-even (the kernels' CAST_RINT) saturated to int8.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kb.reference.activation import sigmoid
from kb.reference.errors import NotModelled, ReferenceInputError
from kb.reference.lowp import cast, f32, int_bits, pack_int4

Args = dict[str, Any]


def _rms_last(
    x: np.ndarray, gamma: np.ndarray, eps: float, what: str
) -> tuple[np.ndarray, np.ndarray]:
    """x / sqrt(mean(x^2 over the last axis) + eps) * gamma, and 1 / that root (both float32)."""
    g = f32(gamma).reshape(-1)
    if g.size != x.shape[-1] or (gamma.ndim == 2 and gamma.shape[0] != 1) or gamma.ndim > 2:
        raise ReferenceInputError(
            f"{what}: gamma {tuple(gamma.shape)} must be [{x.shape[-1]}] or [1, {x.shape[-1]}]"
        )
    rstd = np.float32(1) / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + np.float32(eps))
    return x * rstd * g, rstd.astype(np.float32)


def group_norm_silu(a: Args) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """GroupNorm over (C / group) channels times every trailing element, population
    variance, then x * sigmoid(x); mean and rstd come back as (N, group)."""
    x, group = a["input"], int(a["group"])
    if not 2 <= x.ndim <= 8 or group <= 0 or x.shape[1] % group:
        raise ReferenceInputError("npu_group_norm_silu: input is 2-8 D and group divides its dim 1")
    n, c = x.shape[0], x.shape[1]
    grouped = f32(x).reshape(n, group, -1)
    mean = grouped.mean(axis=-1, keepdims=True)
    var = ((grouped - mean) ** 2).mean(axis=-1, keepdims=True)
    rstd = np.float32(1) / np.sqrt(var + np.float32(a["eps"]))
    y = ((grouped - mean) * rstd).reshape(n, c, -1)
    for name, combine in (("weight", np.multiply), ("bias", np.add)):
        t = a[name]
        if t is not None:
            if t.ndim != 1 or t.shape[0] != c:
                raise ReferenceInputError(f"npu_group_norm_silu: {name} is 1-D with {c} elements")
            y = combine(y, f32(t)[None, :, None])
    out = y * sigmoid(y)
    return (
        cast(out.reshape(x.shape), x.dtype),
        cast(mean[..., 0], x.dtype),
        cast(rstd[..., 0], x.dtype),
    )


def add_rms_norm_cast(a: Args) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(y in float32, y in x1's dtype, rstd, x1 + x2 in x1's dtype), normalising the float32 sum."""
    x1, x2 = a["x1"], a["x2"]
    if x1.shape != x2.shape:
        raise ReferenceInputError(
            f"npu_add_rms_norm_cast: x1 {x1.shape} and x2 {x2.shape} must have one shape"
        )
    summed = f32(x1) + f32(x2)
    y, rstd = _rms_last(summed, a["gamma"], a["epsilon"], "npu_add_rms_norm_cast")
    return y.astype(np.float32), cast(y, x1.dtype), rstd, cast(summed, x1.dtype)


def rms_norm_quant(a: Args) -> np.ndarray:
    """round(x / rms(x) * gamma + beta) / scale + offset), saturated: the kernel multiplies
    by the reciprocal of the scale it reads (the page's formula multiplies; see the record)."""
    x = a["x"]
    quant_in, _ = _rms_last(f32(x), a["gamma"], a["epsilon"], "npu_rms_norm_quant")
    beta = f32(a["beta"]).reshape(-1)
    if beta.size != x.shape[-1]:
        raise ReferenceInputError(f"npu_rms_norm_quant: beta has {x.shape[-1]} elements")
    quant_in = quant_in + beta
    scale, offset = f32(a["scale"]).reshape(-1), f32(a["offset"]).reshape(-1)
    if scale.size not in (1, x.shape[-1]) or offset.size != scale.size:
        raise ReferenceInputError("npu_rms_norm_quant: scale is (1,) and offset has its shape")
    if (scale == 0).any():
        raise ReferenceInputError("npu_rms_norm_quant: scale must not be 0")
    q = quant_in * (np.float32(1) / scale) + offset
    if int_bits(a["dst_dtype"], "dst_dtype") == 4:
        if x.shape[-1] % 8:
            raise ReferenceInputError(
                "npu_rms_norm_quant: quint4x2 needs the last dim divisible by 8"
            )
        return pack_int4(np.clip(np.rint(q), -8, 7))
    return cast(q, np.int8)


def _dynamic_int8(y: np.ndarray, smooth: Any) -> tuple[np.ndarray, np.ndarray]:
    """Per-row symmetric int8 of y (times smooth): scale = rowmax|.| / 127 (1 for an all-zero row)."""
    v = y if smooth is None else y * f32(smooth).reshape(-1)
    scale = np.abs(v).max(axis=-1, keepdims=True) / np.float32(127)
    scale = np.where(scale > 0, scale, np.float32(1)).astype(np.float32)
    return cast(v / scale, np.int8), scale[..., 0]


def add_rms_norm_dynamic_quant(
    a: Args,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """x = x1 + x2 (float32, returned in x1's dtype), y = rmsnorm(x) * gamma (+ beta), then
    up to two per-token int8 quants of y (times smooth_scale1 / 2); a quant not asked for
    returns a 0-dim placeholder, as the wrapper allocates it."""
    x1, x2 = a["x1"], a["x2"]
    if x1.shape != x2.shape or not 2 <= x1.ndim <= 8:
        raise ReferenceInputError(
            "npu_add_rms_norm_dynamic_quant: x1 and x2 are 2-8 D of one shape"
        )
    if int_bits(a["y_dtype"], "y_dtype") != 8:
        raise NotModelled(
            "npu_add_rms_norm_dynamic_quant: the int4 (quint4x2) output is not modelled"
        )
    mask = a["output_mask"]
    if mask is not None:
        first, second = (bool(m) for m in mask)
        if not (first or second):
            raise ReferenceInputError(
                "npu_add_rms_norm_dynamic_quant: output_mask cannot be [False, False]"
            )
    else:
        first, second = True, a["smooth_scale1"] is not None and a["smooth_scale2"] is not None
    summed = f32(x1) + f32(x2)
    y, _ = _rms_last(summed, a["gamma"], a["epsilon"], "npu_add_rms_norm_dynamic_quant")
    if a["beta"] is not None:
        y = y + f32(a["beta"]).reshape(-1)
    unused_q, unused_s = np.zeros((), np.int8), np.zeros((), np.float32)
    y1, s1 = _dynamic_int8(y, a["smooth_scale1"]) if first else (unused_q, unused_s)
    y2, s2 = _dynamic_int8(y, a["smooth_scale2"]) if second else (unused_q, unused_s)
    return y1, y2, cast(summed, x1.dtype), s1, s2
