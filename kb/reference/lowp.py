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
from kb.reference.errors import NotModelled, ReferenceInputError
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


def canonical(value: object) -> str:
    """The vocabulary name a dtype argument names (``torch.quint4x2`` -> ``quint4x2``), even
    one numpy has no type for; NotModelled when it names no dtype at all."""
    canon = dtype_value({"takes": "dtype"}, value)
    if isinstance(canon, str):
        return canon
    raise NotModelled(f"{value!r} names no dtype")


def pack_int4(values: np.ndarray) -> np.ndarray:
    """Integers in [-8, 7] packed eight per int32 along the last axis, the first value in
    the lowest four bits (the order torch_npu's quint4x2 outputs use)."""
    v = np.asarray(values).astype(np.int64)
    if v.shape[-1] % 8:
        raise ReferenceInputError("int4 packing needs the last dim divisible by 8")
    nibbles = (v & 0xF).reshape(*v.shape[:-1], -1, 8)
    shifts = np.arange(8, dtype=np.int64) * 4
    return (nibbles << shifts).sum(axis=-1).astype(np.uint32).view(np.int32)


def unpack_int4(packed: np.ndarray) -> np.ndarray:
    """int32 holding eight signed 4-bit values each (lowest bits first) -> int8 [..., 8 n]."""
    raw = np.asarray(packed).astype(np.int32).view(np.uint32).astype(np.int64)
    nibbles = (raw[..., None] >> (np.arange(8, dtype=np.int64) * 4)) & 0xF
    signed = np.where(nibbles >= 8, nibbles - 16, nibbles)
    return signed.reshape(*raw.shape[:-1], -1).astype(np.int8)


def axis_index(x: np.ndarray, value: Any, what: str) -> int:
    """``value`` as a non-negative axis of x; ReferenceInputError outside [-ndim, ndim)."""
    axis = int(value)
    if not -x.ndim <= axis < x.ndim:
        raise ReferenceInputError(f"{what}={axis} is outside [-{x.ndim}, {x.ndim - 1}]")
    return axis % x.ndim


def int_bits(value: object, what: str) -> int:
    """The width of a quantized integer output a dtype argument names: 8 for int8 (and for
    None), 4 for the packed 4-bit types (the vocabulary's half-byte dtypes: int4, quint4x2)."""
    if value is None:
        return 8
    name = canonical(value)
    found = next((d for d in DTYPES if d.name == name), None)
    if name == "int8":
        return 8
    if found is not None and found.size == 0.5:
        return 4
    raise NotModelled(f"{what}={value!r}: the reference models int8 and packed int4 outputs")
