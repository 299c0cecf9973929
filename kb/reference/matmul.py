"""Batched matmul with fused transposes (npu_transpose_batchmatmul), the MLA weight-absorption
step: y = (input^perm_x1 @ weight^perm_x2)^perm_y, computed in float32, cast once."""

from __future__ import annotations

from typing import Any

import numpy as np

from kb.reference.errors import NotModelled, ReferenceInputError
from kb.reference.lowp import cast, f32

Args = dict[str, Any]


def _perm(value: Any, default: list[int]) -> list[int]:
    return default if value is None else [int(v) for v in value]


def transpose_batchmatmul(a: Args) -> np.ndarray:
    x1, x2 = a["input"], a["weight"]
    if a["scale"] is not None:
        raise NotModelled("npu_transpose_batchmatmul: the quantized output (scale) is not modelled")
    if a["bias"] is not None:
        raise ReferenceInputError("npu_transpose_batchmatmul: bias is not supported (leave None)")
    if x1.ndim != 3 or x2.ndim != 3:
        raise ReferenceInputError("npu_transpose_batchmatmul: input and weight are 3-D")
    p1, p2, py = (
        _perm(a["perm_x1"], [0, 1, 2]),
        _perm(a["perm_x2"], [0, 1, 2]),
        _perm(a["perm_y"], [1, 0, 2]),
    )
    left, right = f32(x1).transpose(p1), f32(x2).transpose(p2)
    if left.shape[0] != right.shape[0] or left.shape[2] != right.shape[1]:
        raise ReferenceInputError(
            f"npu_transpose_batchmatmul: permuted input {left.shape} and weight "
            f"{right.shape} must be (B, M, K) and (B, K, N)"
        )
    y = np.matmul(left, right).transpose(py)  # (M, B, N) for perm_y [1, 0, 2]
    split = int(a["batch_split_factor"] or 1)
    if split > 1:
        m = y.shape[0]
        if (y.shape[1] * y.shape[2]) % split:
            raise ReferenceInputError(
                "npu_transpose_batchmatmul: batch_split_factor must divide B * N"
            )
        y = y.reshape(m, split, -1).transpose(1, 0, 2)
    return cast(np.ascontiguousarray(y), x1.dtype)
