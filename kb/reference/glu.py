"""Gated units beyond the plain SwiGLU: GPT-OSS's clipped SwiGLU and GELU times the other half.

Both compute in float32 from the input and round once to the input dtype.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kb.reference.activation import gelu_erf, gelu_tanh, sigmoid
from kb.reference.errors import ReferenceInputError
from kb.reference.lowp import axis_index, cast, f32

Args = dict[str, Any]


def clipped_swiglu(a: Args) -> np.ndarray:
    """x folded to [rows, cut * after] at ``dim`` (rows: the dims before it); the first
    sum(group_index) rows are split (even/odd columns when interleaved, else halves) into
    A and B; y = min(A, limit) * sigmoid(alpha * min(A, limit)) * (clip(B, +-limit) + bias);
    rows past the groups stay zero."""
    x = a["x"]
    if x.ndim < 2:
        raise ReferenceInputError("npu_clipped_swiglu: x has more than one dim")
    dim = axis_index(x, a["dim"], "npu_clipped_swiglu: dim")
    if x.shape[dim] % 2:
        raise ReferenceInputError(
            f"npu_clipped_swiglu: size {x.shape[dim]} along dim {dim} must be even"
        )
    rows = int(np.prod(x.shape[:dim], dtype=np.int64))
    folded = f32(x).reshape(rows, -1)
    used = rows
    if a["group_index"] is not None:
        counts = np.asarray(a["group_index"]).reshape(-1).astype(np.int64)
        if (counts < 0).any():
            raise ReferenceInputError(
                "npu_clipped_swiglu: group_index holds token counts (non-negative)"
            )
        used = min(int(counts.sum()), rows)
    part = folded[:used]
    if a["interleaved"]:
        gate, lin = part[:, 0::2], part[:, 1::2]
    else:
        gate, lin = np.split(part, 2, axis=1)
    limit = np.float32(a["limit"])
    gate = np.minimum(gate, limit)
    lin = np.clip(lin, -limit, limit)
    out = np.zeros((rows, folded.shape[1] // 2), np.float32)
    out[:used] = gate * sigmoid(np.float32(a["alpha"]) * gate) * (lin + np.float32(a["bias"]))
    shape = list(x.shape)
    shape[dim] //= 2
    return cast(out.reshape(shape), x.dtype)


def gelu_mul(a: Args) -> np.ndarray:
    """GELU of the first half of the last axis times the second half."""
    x = a["input"]
    if x.ndim == 0 or x.shape[-1] % 2:
        raise ReferenceInputError("npu_gelu_mul: the last axis of input must have an even size")
    first, second = np.split(f32(x), 2, axis=-1)
    act = gelu_tanh(first) if a["approximate"] == "tanh" else gelu_erf(first)
    return cast(act * second, x.dtype)
