"""numpy dtypes for the NPU's number formats, through ml_dtypes, and the casts between them.

Every reference computes in float32 (as op-plugin's golden functions do) and casts the
result once to the output dtype; a cast to a float format rounds to nearest even
(ml_dtypes), a cast to an integer format rounds half to even and saturates.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from kb.catalog.binding import dtype_value
from kb.reference.errors import ReferenceInputError
from kb.vocab import normalize

#: canonical dtype name (kb/vocab) -> numpy dtype
NUMPY: dict[str, Any] = {
    "float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16,
    "float8_e4m3fn": ml_dtypes.float8_e4m3fn, "float8_e5m2": ml_dtypes.float8_e5m2,
    "float8_e8m0fnu": ml_dtypes.float8_e8m0fnu, "float4_e2m1fn_x2": ml_dtypes.float4_e2m1fn,
    "int4": ml_dtypes.int4, "int8": np.int8, "uint8": np.uint8, "int16": np.int16,
    "int32": np.int32, "int64": np.int64, "bool": np.bool_, "float64": np.float64,
}  # fmt: skip


def name_of(array: np.ndarray) -> str:
    """The canonical dtype name of an array (``bfloat16``, ``int8``, …)."""
    raw = array.dtype.name
    if raw == "float4_e2m1fn":
        return "float4_e2m1fn_x2"
    return normalize("dtype", raw) or raw


def dtype_named(value: object, what: str) -> Any:
    """The numpy dtype a dtype argument names (``torch.int8``, ``"bfloat16"``, 1, …)."""
    canon = dtype_value({"takes": "dtype"}, value)
    if isinstance(canon, str) and canon in NUMPY:
        return NUMPY[canon]
    raise ReferenceInputError(f"{what}={value!r} names no dtype the reference models "
                              f"({', '.join(sorted(NUMPY))})")  # fmt: skip


def f32(x: Any) -> np.ndarray:
    return np.asarray(x).astype(np.float32)


def cast(x: np.ndarray, dtype: Any) -> np.ndarray:
    """``x`` in ``dtype``: round-to-nearest-even for floats, rint and saturate for ints."""
    target = np.dtype(dtype)
    if target.kind in "iu" or target == np.dtype(ml_dtypes.int4):
        info = ml_dtypes.iinfo(target) if target == np.dtype(ml_dtypes.int4) else np.iinfo(target)
        return np.clip(np.rint(x), info.min, info.max).astype(target)
    return np.asarray(x).astype(np.float32).astype(target)


def max_of(dtype: Any) -> float:
    """The largest finite value of a quantized dtype (127 for int8, 448 for e4m3fn, …)."""
    target = np.dtype(dtype)
    if target.kind in "iu" or target == np.dtype(ml_dtypes.int4):
        info = ml_dtypes.iinfo(target) if target == np.dtype(ml_dtypes.int4) else np.iinfo(target)
        return float(info.max)
    return float(ml_dtypes.finfo(target).max)
