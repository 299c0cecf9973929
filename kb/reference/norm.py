"""Normalisations: RMSNorm (plain, Gemma ``1 + gamma``, residual-add) and LayerNorm.

All reduce in float32 over the trailing axes gamma covers and cast the output once to
the input dtype, as op-plugin's golden functions do.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kb.reference.errors import ReferenceInputError
from kb.reference.lowp import cast, f32

Args = dict[str, Any]


def _trailing(x: np.ndarray, gamma: np.ndarray, what: str) -> tuple[int, ...]:
    n = gamma.ndim
    if n == 0 or n > x.ndim or tuple(x.shape[x.ndim - n :]) != tuple(gamma.shape):
        raise ReferenceInputError(f"{what}: gamma shape {tuple(gamma.shape)} must equal the "
                                  f"trailing dims of the input {tuple(x.shape)}")  # fmt: skip
    return tuple(range(x.ndim - n, x.ndim))


def _rms(x: np.ndarray, gamma: np.ndarray, eps: float, axes: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
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
        raise ReferenceInputError(f"npu_add_rms_norm: x1 {x1.shape} and x2 {x2.shape} must have one shape")
    summed = cast(f32(x1) + f32(x2), x1.dtype)  # the residual sum, as returned, in x1's dtype
    y, rstd = _rms(summed, a["gamma"], a["epsilon"], _trailing(x1, a["gamma"], "npu_add_rms_norm"))
    return cast(y, x1.dtype), rstd, summed


def layer_norm_eval(a: Args) -> np.ndarray:
    x = a["input"]
    shape = tuple(int(d) for d in a["normalized_shape"])
    if not shape or tuple(x.shape[x.ndim - len(shape) :]) != shape:
        raise ReferenceInputError(f"npu_layer_norm_eval: normalized_shape {list(shape)} must be "
                                  f"the trailing dims of input {tuple(x.shape)}")  # fmt: skip
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
