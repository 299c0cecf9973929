"""Shared helpers of the reference tests (imported after each test module has skipped
itself when numpy or ml_dtypes is missing)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np

BF16 = ml_dtypes.bfloat16


def close(a: Any, b: Any, tol: float) -> bool:
    """Equal within an absolute and relative tolerance, compared in float64."""
    return bool(
        np.allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), atol=tol, rtol=tol)
    )


def sampler(seed: int, default: Any = np.float32) -> Callable[..., np.ndarray]:
    """randn(*shape, scale=, dtype=): normal values drawn in float32, then cast."""
    rng = np.random.default_rng(seed)

    def randn(*shape: int, scale: float = 1.0, dtype: Any = default) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32).astype(dtype)

    return randn


def softmax_rows(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)
