"""Normalisations: RMSNorm (plain, Gemma ``1 + gamma``, residual-add) and LayerNorm.

All reduce in float32 over the trailing axes gamma covers and cast the output once to
the input dtype, as op-plugin's golden functions do.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kb.reference.errors import NotModelled, ReferenceInputError
from kb.reference.lowp import cast, f32

Args = dict[str, Any]


def _trailing(x: np.ndarray, gamma: np.ndarray, what: str) -> tuple[int, ...]:
    n = gamma.ndim
    if n == 0 or n > x.ndim or tuple(x.shape[x.ndim - n :]) != tuple(gamma.shape):
        raise ReferenceInputError(
            f"{what}: gamma shape {tuple(gamma.shape)} must equal the "
            f"trailing dims of the input {tuple(x.shape)}"
        )
    return tuple(range(x.ndim - n, x.ndim))


def _rms(
    x: np.ndarray, gamma: np.ndarray, eps: float, axes: tuple[int, ...]
) -> tuple[np.ndarray, np.ndarray]:
    xf = f32(x)
    rstd = 1.0 / np.sqrt(np.mean(xf * xf, axis=axes, keepdims=True) + np.float32(eps))
    return xf * rstd * f32(gamma), rstd.astype(np.float32)


def rms_norm(a: Args) -> tuple[np.ndarray, np.ndarray]:
    x = a["self"]
    y, rstd = _rms(x, a["gamma"], a["epsilon"], _trailing(x, a["gamma"], "npu_rms_norm"))
    return cast(y, x.dtype), rstd


def gemma_rms_norm(a: Args) -> tuple[np.ndarray, np.ndarray]:
    x, gamma = a["self"], a["gamma"]
    axes = _trailing(x, gamma, "npu_gemma_rms_norm")
    y, rstd = _rms(x, (1.0 + f32(gamma)), a["epsilon"], axes)
    return cast(y, x.dtype), rstd


def add_rms_norm(a: Args) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x1, x2 = a["x1"], a["x2"]
    if x1.shape != x2.shape:
        raise ReferenceInputError(
            f"npu_add_rms_norm: x1 {x1.shape} and x2 {x2.shape} must have one shape"
        )
    summed = cast(f32(x1) + f32(x2), x1.dtype)  # the residual sum, as returned, in x1's dtype
    y, rstd = _rms(summed, a["gamma"], a["epsilon"], _trailing(x1, a["gamma"], "npu_add_rms_norm"))
    return cast(y, x1.dtype), rstd, summed


def layer_norm_eval(a: Args) -> np.ndarray:
    x = a["input"]
    shape = tuple(int(d) for d in a["normalized_shape"])
    if not shape or tuple(x.shape[x.ndim - len(shape) :]) != shape:
        raise ReferenceInputError(
            f"npu_layer_norm_eval: normalized_shape {list(shape)} must be "
            f"the trailing dims of input {tuple(x.shape)}"
        )
    axes = tuple(range(x.ndim - len(shape), x.ndim))
    xf = f32(x)
    mean = xf.mean(axis=axes, keepdims=True)
    var = ((xf - mean) ** 2).mean(axis=axes, keepdims=True)
    y = (xf - mean) / np.sqrt(var + np.float32(a["eps"]))
    if a["weight"] is not None:
        y = y * f32(a["weight"])
    if a["bias"] is not None:
        y = y + f32(a["bias"])
    return cast(y, x.dtype)


def _quantize_int8(
    y: np.ndarray, scale: np.ndarray, zero: np.ndarray | None, divide: bool
) -> np.ndarray:
    s = f32(scale)
    q = y / s if divide else y * s
    if zero is not None:
        q = q + f32(zero)
    return np.clip(np.rint(q), -128, 127).astype(np.int8)


def add_rms_norm_quant(a: Args) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """RMSNorm of x1 + x2 (the float32 sum, as the golden function normalises it), times
    gamma plus beta, quantized per element of gamma's shape: round(y / scales + zero_points)
    (``div_mode=False``: y * scales), saturated to int8.  y2 uses scales2/zero_points2; without
    scales2 the golden function quantizes with scale 1 and zero point 0."""
    x1, x2, gamma = a["x1"], a["x2"], a["gamma"]
    if x1.shape != x2.shape:
        raise ReferenceInputError(
            f"npu_add_rms_norm_quant: x1 {x1.shape} and x2 {x2.shape} must have one shape"
        )
    if a["dst_type"] not in (None, 1):
        raise NotModelled(
            "npu_add_rms_norm_quant: only the int8 output (dst_type None or 1) is modelled"
        )
    axes = _trailing(x1, gamma, "npu_add_rms_norm_quant")
    for name in ("scales1", "zero_points1", "beta", "scales2", "zero_points2"):
        t = a[name]
        if t is not None and tuple(np.shape(t)) != tuple(gamma.shape):
            raise ReferenceInputError(
                f"npu_add_rms_norm_quant: {name} shape {tuple(np.shape(t))} must equal "
                f"gamma's {tuple(gamma.shape)}"
            )
    summed = f32(x1) + f32(x2)
    y, _ = _rms(summed, gamma, a["epsilon"], axes)
    if a["beta"] is not None:
        y = y + f32(a["beta"])
    divide = bool(a["div_mode"])
    y1 = _quantize_int8(y, a["scales1"], a["zero_points1"], divide)
    scales2 = a["scales2"] if a["scales2"] is not None else np.ones(gamma.shape, np.float32)
    y2 = _quantize_int8(y, scales2, a["zero_points2"], divide)
    return y1, y2, cast(summed, x1.dtype)
