"""Tensors across the torch/numpy line, bit for bit, and torch_npu's dtype constants.

A reference receives exactly the numpy array a direct :func:`kb.reference.run` caller
would build: bfloat16 and the FP8 formats through ml_dtypes views of the same bytes,
integers and IEEE floats as they are.  ``float4_e2m1fn_x2`` (two FP4 values per byte)
becomes an ml_dtypes ``float4_e2m1fn`` array with twice the last dimension, low nibble
first, and packs back the same way.  Nothing is rounded on the way in or out: the
reference alone decides the precision (compute dtype, accumulation, output rounding).
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import torch

from kb.vocab import DTYPES, normalize

#: torch dtypes numpy lacks → (torch carrier of the same width, numpy/ml_dtypes type)
_VIEWED: dict[torch.dtype, tuple[torch.dtype, Any]] = {
    torch.bfloat16: (torch.int16, ml_dtypes.bfloat16),
    torch.float8_e4m3fn: (torch.uint8, ml_dtypes.float8_e4m3fn),
    torch.float8_e5m2: (torch.uint8, ml_dtypes.float8_e5m2),
    torch.float8_e8m0fnu: (torch.uint8, ml_dtypes.float8_e8m0fnu),
}
_BY_NUMPY: dict[Any, tuple[torch.dtype, torch.dtype]] = {
    np.dtype(numpy_type): (carrier, dtype) for dtype, (carrier, numpy_type) in _VIEWED.items()
}
_FP4 = np.dtype(ml_dtypes.float4_e2m1fn)
_CARRIER_NUMPY = {torch.int16: np.int16, torch.uint8: np.uint8}


def dtype_name(dtype: torch.dtype) -> str | None:
    """The canonical (kb.vocab) name of a torch dtype: ``torch.bfloat16`` → ``bfloat16``."""
    return normalize("dtype", str(dtype))


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """A fresh numpy array holding ``t``'s values in the matching numpy type."""
    t = t.detach().resolve_conj().resolve_neg().contiguous()
    if t.dtype in _VIEWED:
        carrier, numpy_type = _VIEWED[t.dtype]
        return t.view(carrier).numpy().view(numpy_type).copy()
    if t.dtype == torch.float4_e2m1fn_x2:
        packed = t.view(torch.uint8).numpy()
        pairs = np.stack([packed & 0x0F, packed >> 4], axis=-1)
        shape = (*packed.shape[:-1], packed.shape[-1] * 2) if packed.ndim else (2,)
        return pairs.reshape(shape).view(ml_dtypes.float4_e2m1fn).copy()
    return t.numpy().copy()


def from_numpy(a: Any) -> torch.Tensor:
    """A torch tensor holding the same bits as numpy array ``a`` (a fresh copy)."""
    a = np.asarray(a)
    if not a.flags.c_contiguous:
        a = a.copy(order="C")  # np.ascontiguousarray would make a 0-d result 1-d
    if a.dtype in _BY_NUMPY:
        carrier, dtype = _BY_NUMPY[a.dtype]
        return torch.from_numpy(a.view(_CARRIER_NUMPY[carrier]).copy()).view(dtype)
    if a.dtype == _FP4:
        if a.ndim == 0 or a.shape[-1] % 2:
            raise TypeError(f"an FP4 result of shape {a.shape} cannot pack two values per byte")
        nibbles = a.view(np.uint8) & 0x0F
        packed = nibbles[..., 0::2] | (nibbles[..., 1::2] << 4)
        return torch.from_numpy(packed.copy()).view(torch.float4_e2m1fn_x2)
    if a.dtype.kind in "OUSV" or a.dtype not in _TORCH_NATIVE:
        raise TypeError(f"a result of numpy dtype {a.dtype} has no torch dtype to carry it")
    return torch.from_numpy(a.copy())


_TORCH_NATIVE = {
    np.dtype(t)
    for t in (
        np.bool_,
        np.uint8,
        np.int8,
        np.int16,
        np.int32,
        np.int64,
        np.uint16,
        np.uint32,
        np.uint64,
        np.float16,
        np.float32,
        np.float64,
        np.complex64,
        np.complex128,
    )
}


def npu_constants() -> dict[str, Any]:
    """``torch_npu.<dtype>`` constants: torch_npu's own integer code (aclDataType + 256,
    kb.vocab) where it has one, else the torch dtype of that name."""
    out: dict[str, Any] = {}
    for d in DTYPES:
        if not d.in_torch_npu:
            continue
        own = [c for c in d.codes if c >= 256]
        if own:
            out[d.name] = own[0]
        elif d.in_torch and isinstance(getattr(torch, d.name, None), torch.dtype):
            out[d.name] = getattr(torch, d.name)
    return out
