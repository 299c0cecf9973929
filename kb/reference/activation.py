"""Activations and gated linear units: SwiGLU, GeGLU, fast GELU, SiLU, GELU."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from kb.reference.errors import ReferenceInputError
from kb.reference.lowp import cast, f32

Args = dict[str, Any]


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def gelu_erf(x: np.ndarray) -> np.ndarray:
    from math import erf

    return x * 0.5 * (1.0 + np.vectorize(erf, otypes=[np.float64])(x / math.sqrt(2.0)))


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def halves(x: np.ndarray, dim: int, what: str) -> tuple[np.ndarray, np.ndarray]:
    """The first and second half of x along dim (the record's range for dim holds)."""
    if not -x.ndim <= dim < max(x.ndim, 1):
        raise ReferenceInputError(f"{what}: dim={dim} is outside [-{x.ndim}, {x.ndim - 1}]")
    if x.shape[dim] % 2:
        raise ReferenceInputError(f"{what}: size {x.shape[dim]} along dim {dim} must be even")
    first, second = np.split(f32(x), 2, axis=dim)
    return first, second


def swiglu(a: Args) -> np.ndarray:
    x = a["self"]
    first, second = halves(x, a["dim"], "npu_swiglu")
    return cast(first * sigmoid(first) * second, x.dtype)


def geglu(a: Args) -> tuple[np.ndarray, np.ndarray]:
    x = a["self"]
    left, right = halves(x, a["dim"], "npu_geglu")
    gate, other = (left, right) if a["activate_left"] else (right, left)
    act = gelu_tanh(gate) if a["approximate"] == 1 else gelu_erf(gate)
    return cast(act * other, x.dtype), cast(act, x.dtype)


def fast_gelu(a: Args) -> np.ndarray:
    """The Atlas A2/A3 form ``x / (1 + exp(-1.702 x))``."""
    x = a["self"]
    xf = f32(x)
    return cast(xf / (1.0 + np.exp(-1.702 * xf)), x.dtype)


def silu(a: Args) -> np.ndarray:
    x = a["self"]
    xf = f32(x)
    return cast(xf * sigmoid(xf), x.dtype)


def gelu(a: Args) -> np.ndarray:
    x = a["self"]
    xf = f32(x)
    return cast(gelu_tanh(xf) if a["approximate"] == "tanh" else gelu_erf(xf), x.dtype)
