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
from kb.reference.errors import NotModelled
from kb.vocab import DTYPES, normalize

#: vocabulary names whose ml_dtypes type is spelt differently (the x2 is torch's packing)
_SPELLING = {"float4_e2m1fn_x2": "float4_e2m1fn"}
#: numpy kinds the references do not compute in (complex, object)
_SKIP_KINDS = "cO"


def _numpy_types() -> dict[str, Any]:
    """canonical dtype name (kb.vocab) -> the numpy or ml_dtypes type that holds it."""
    out: dict[str, Any] = {}
    for d in DTYPES:
        spelt = _SPELLING.get(d.name, d.name)
        found = getattr(ml_dtypes, spelt, None) or getattr(np, spelt, None)
        if isinstance(found, type) and np.dtype(found).kind not in _SKIP_KINDS:
            out[d.name] = found
    return out


NUMPY: dict[str, Any] = _numpy_types()


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
    raise NotModelled(
        f"{what}={value!r} names no dtype the reference models ({', '.join(sorted(NUMPY))})"
    )


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
