"""Rotary position embedding: ``x * cos + rotate(x) * sin`` in its two rotation forms.

``half`` rotates the two halves of the last axis (``[-x2, x1]``); ``interleave``
rotates each adjacent pair (``[-x1, x0, -x3, x2, …]``); npu_rotary_mul's ``rotate``
matrix replaces both with ``x @ rotate``.  cos and sin broadcast against x.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kb.reference.errors import NotModelled, ReferenceInputError
from kb.reference.lowp import cast, f32

Args = dict[str, Any]


def rotate(x: np.ndarray, mode: str) -> np.ndarray:
    """The rotated partner of x along its last axis for ``half`` or ``interleave``."""
    if x.shape[-1] % 2:
        raise ReferenceInputError(f"the last axis ({x.shape[-1]}) must be even to rotate")
    if mode == "half":
        first, second = np.split(x, 2, axis=-1)
        return np.concatenate([-second, first], axis=-1)
    if mode in ("interleave", "interleaved"):
        even, odd = x[..., 0::2], x[..., 1::2]
        return np.stack([-odd, even], axis=-1).reshape(x.shape)
    raise NotModelled(f"rotary_mode {mode!r} is not modelled (half, interleave)")


def by_matrix(x: np.ndarray, matrix: np.ndarray, what: str) -> np.ndarray:
    """``x @ matrix`` over the last axis in float32: the partner a ``[D, D]`` rotate gives."""
    d = x.shape[-1]
    if matrix.shape != (d, d):
        raise ReferenceInputError(f"{what}: rotate must be [D, D] = [{d}, {d}], not {matrix.shape}")
    return np.matmul(f32(x), f32(matrix))


def _apply(
    x: np.ndarray,
    cos: np.ndarray,
    sin: np.ndarray,
    mode: str,
    what: str,
    matrix: np.ndarray | None = None,
) -> np.ndarray:
    partner = rotate(f32(x), mode) if matrix is None else by_matrix(x, matrix, what)
    try:
        out = f32(x) * f32(cos) + partner * f32(sin)
    except ValueError as exc:  # numpy's broadcast complaint
        raise ReferenceInputError(
            f"{what}: cos/sin {cos.shape} do not broadcast to {x.shape}"
        ) from exc
    if out.shape != x.shape:
        raise ReferenceInputError(
            f"{what}: cos/sin {cos.shape} must broadcast to x {x.shape}, not widen it"
        )
    return cast(out, x.dtype)


def rotary_mul(a: Args) -> np.ndarray:
    # a rotate matrix replaces the built-in pairing; rotary_mode still picks the
    # cos/sin layouts the kernel accepts, so it is kept and checked as given
    return _apply(a["self"], a["r1"], a["r2"], a["rotary_mode"], "npu_rotary_mul", a["rotate"])


def apply_rotary_pos_emb(a: Args) -> tuple[np.ndarray, np.ndarray]:
    mode = a["rotary_mode"]
    q = _apply(a["query"], a["cos"], a["sin"], mode, "npu_apply_rotary_pos_emb")
    k = _apply(a["key"], a["cos"], a["sin"], mode, "npu_apply_rotary_pos_emb")
    return q, k


def interleave_rope(a: Args) -> np.ndarray:
    x = a["x"]
    if x.ndim != 4:
        raise ReferenceInputError(f"npu_interleave_rope: x must be 4-D [B, N, S, D], not {x.shape}")
    d = x.shape[-1]
    # de-interleave: [x0, x1, x2, x3, …] -> [x0, x2, …, x1, x3, …], then rotate halves
    q = f32(x).reshape(*x.shape[:-1], d // 2, 2).swapaxes(-1, -2).reshape(x.shape)
    return _apply(cast(q, x.dtype), a["cos"], a["sin"], "half", "npu_interleave_rope")
