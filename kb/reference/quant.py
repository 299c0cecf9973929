"""Quantization: dynamic per-token quant, static quantize, int8 and weight-only matmuls,
and the dequant + SwiGLU + quant chain."""

from __future__ import annotations

from typing import Any

import numpy as np

from kb.catalog.binding import dtype_value
from kb.reference.activation import sigmoid
from kb.reference.errors import NotModelled, ReferenceInputError
from kb.reference.lowp import (
    NUMPY,
    axis_index,
    cast,
    dtype_named,
    f32,
    max_of,
    pack_int4,
    unpack_int4,
)
from kb.reference.quant_dyn import unpack_scale

Args = dict[str, Any]


def _scaled_int(x: np.ndarray, target: Any) -> tuple[np.ndarray, np.ndarray]:
    """Per-row symmetric quantization: scale = rowmax|x| / DTYPE_MAX, y = round(x / scale)."""
    top = max_of(target)
    scale = np.max(np.abs(x), axis=-1) / np.float32(top)
    safe = np.where(scale == 0, np.float32(1), scale)
    return cast(x / safe[..., None], target), scale.astype(np.float32)


def dynamic_quant(a: Args) -> tuple[np.ndarray, np.ndarray]:
    x = f32(a["input"])
    if a["quant_mode"] != "pertoken":
        raise NotModelled("npu_dynamic_quant: only quant_mode='pertoken' is modelled")
    target = np.int8 if a["dst_type"] is None else dtype_named(a["dst_type"], "dst_type")
    if target not in (np.int8, NUMPY["float8_e4m3fn"], NUMPY["float8_e5m2"]):
        raise NotModelled(
            "npu_dynamic_quant: dst_type int8, float8_e4m3fn or float8_e5m2 "
            "is modelled (quint4x2 packs eight values per int32)"
        )
    smooth, groups = a["smooth_scales"], a["group_index"]
    if smooth is not None:
        if groups is None:
            x = x * f32(smooth).reshape(-1)
        else:
            rows = x.reshape(-1, x.shape[-1])
            ends = [int(e) for e in np.asarray(groups).reshape(-1)]
            if ends != sorted(ends) or ends[-1] != rows.shape[0]:
                raise ReferenceInputError(
                    "npu_dynamic_quant: group_index must be non-decreasing "
                    "cumulative row ends whose last value is the row count"
                )
            start, out = 0, rows.copy()
            for g, end in enumerate(ends):
                out[start:end] = rows[start:end] * f32(smooth)[g]
                start = end
            x = out.reshape(x.shape)
    return _scaled_int(x, target)


def quantize(a: Args) -> np.ndarray:
    x, scales, zp = f32(a["self"]), f32(a["scales"]), a["zero_points"]
    canon = dtype_value({"takes": "dtype"}, a["dtype"])
    packed = canon == "quint4x2"
    if packed and a["div_mode"]:
        raise ReferenceInputError(
            "npu_quantize: dtype=torch.quint4x2 needs div_mode=False (the divide path takes "
            "int8, uint8, int32 and the fp8 types)"
        )
    # torch's quantized qint8/quint8 store int8/uint8; quint4x2 stores int4, eight per int32
    stored = (
        "int4"
        if packed
        else canon[1:]
        if (isinstance(canon, str) and canon.startswith("qu")) or canon == "qint8"
        else canon
    )
    target = dtype_named(stored, "dtype")
    axis = a["axis"]
    if not a["div_mode"]:  # the multiply path: -2, or the last axis for anything above -2
        axis = axis if axis < -1 else -1
    axis = axis_index(x, axis, "npu_quantize: axis")
    if scales.ndim == 1:
        shape = [1] * x.ndim
        shape[axis] = scales.shape[0]
        scales = scales.reshape(shape)
        zp_arr = None if zp is None else f32(zp).reshape(shape)
    else:
        zp_arr = None if zp is None else f32(zp)
    y = x / scales if a["div_mode"] else x * scales
    if zp_arr is not None:
        y = y + zp_arr
    if packed:
        if x.ndim == 0 or x.shape[-1] % 8:
            raise ReferenceInputError(
                f"npu_quantize: quint4x2 packs eight per int32, so the last dim of self "
                f"({x.shape[-1] if x.ndim else 0}) must be a multiple of 8"
            )
        return pack_int4(cast(y, target))
    return cast(y, target)


def _matmul(x1: np.ndarray, x2: np.ndarray) -> np.ndarray:
    if x1.shape[-1] != x2.shape[-2]:
        raise ReferenceInputError(f"K of x1 {x1.shape} and x2 {x2.shape} must agree")
    return np.matmul(x1.astype(np.int64), x2.astype(np.int64))


def quant_matmul(a: Args) -> np.ndarray:
    x1, x2, scale = a["x1"], a["x2"], a["scale"]
    if x1.dtype != np.int8 or x2.dtype != np.int8:
        raise NotModelled(
            "npu_quant_matmul: the reference models int8 x1 and x2 "
            "(int32-packed int4, FP8 and MX inputs are not modelled)"
        )
    offset = a["offset"]
    if scale.dtype in (
        np.int64,
        np.uint64,
    ):  # npu_trans_quant_param's packing: FP19 scale, 9-bit offset
        scale, packed_offset = unpack_scale(scale)
        offset = packed_offset if offset is None else offset
    acc = _matmul(x1, x2)
    bias = a["bias"]
    if bias is not None and bias.dtype == np.int32:
        acc = acc + bias.astype(np.int64)
    out = acc.astype(np.float32) * f32(scale).reshape(-1)
    if a["pertoken_scale"] is not None:
        out = out * f32(a["pertoken_scale"]).reshape(-1, 1)
    if bias is not None and bias.dtype != np.int32:
        out = out + f32(bias)
    if offset is not None:
        out = out + f32(offset).reshape(-1)
    target = (
        np.int8 if a["output_dtype"] is None else dtype_named(a["output_dtype"], "output_dtype")
    )
    return cast(out, target)


def weight_quant_batchmatmul(a: Args) -> np.ndarray:
    x, w = a["x"], a["weight"]
    # an int32 weight: eight int4 along the packed dim (npu_convert_weight_to_int4pack's order)
    if w.dtype == np.int32:
        if w.ndim >= 2 and w.shape[-2] * 8 == x.shape[-1] and w.shape[-2] != x.shape[-1]:
            # a transposed (n, k / 8) weight
            w = np.swapaxes(unpack_int4(np.swapaxes(w, -1, -2)), -1, -2)
        else:
            w = unpack_int4(w)
    elif w.dtype != np.int8:
        raise NotModelled(
            "npu_weight_quant_batchmatmul: int8 or int4-in-int32 weights are modelled"
        )
    scale = a["antiquant_scale"]
    if scale.dtype == np.int64:
        raise NotModelled("npu_weight_quant_batchmatmul: an int64 antiquant_scale is not modelled")
    k, n = w.shape[-2], w.shape[-1]
    group = int(a["antiquant_group_size"])
    wf = f32(w)
    offset = a["antiquant_offset"]
    if group > 0:
        rows = np.arange(k) // group
        sc = f32(scale).reshape(-1, n)[rows]
        off = None if offset is None else f32(offset).reshape(-1, n)[rows]
    else:
        sc = f32(scale).reshape(-1)
        off = None if offset is None else f32(offset).reshape(-1)
    if off is not None:
        wf = wf + off
    deq = wf * sc
    y = f32(x) @ deq
    if a["bias"] is not None:
        y = y + f32(a["bias"]).reshape(-1)
    if a["quant_scale"] is not None:
        y = y * f32(a["quant_scale"]).reshape(-1)
        if a["quant_offset"] is not None:
            y = y + f32(a["quant_offset"]).reshape(-1)
        return cast(y, np.int8)
    return cast(y, x.dtype)


def _swiglu_part(res: np.ndarray, a: Args) -> np.ndarray:
    mode = a["swiglu_mode"]
    if mode == 1:
        gate, lin = res[:, 0::2], res[:, 1::2]
    else:
        left, right = np.split(res, 2, axis=-1)
        gate, lin = (left, right) if a["activate_left"] else (right, left)
    if mode == 0:
        return gate * sigmoid(gate) * lin
    limit = np.float32(a["clamp_limit"])
    gate = np.minimum(gate, limit)
    lin = np.clip(lin, -limit, limit)
    return gate * sigmoid(np.float32(a["glu_alpha"]) * gate) * (lin + np.float32(a["glu_bias"]))


def _per_group(t: np.ndarray, groups: int, h: int) -> np.ndarray:
    """A static scale/offset as [groups, h] rows: one value per group or one per column."""
    flat = f32(t).reshape(-1)
    return (
        flat.reshape(-1, 1)
        if flat.size == groups and flat.size != groups * h
        else flat.reshape(-1, h)
    )


def dequant_swiglu_quant(a: Args) -> tuple[np.ndarray, np.ndarray]:
    x = a["x"]
    if x.ndim != 2 or x.shape[-1] % 2:
        raise ReferenceInputError("npu_dequant_swiglu_quant: x must be 2-D [TokensNum, 2H]")
    if a["dst_type"] not in (None, 1, "int8", "torch.int8"):
        raise NotModelled("npu_dequant_swiglu_quant: only an int8 output is modelled")
    counts = (
        [x.shape[0]] if a["group_index"] is None else [int(c) for c in np.asarray(a["group_index"])]
    )
    if sum(counts) > x.shape[0] or min(counts) < 0:
        raise ReferenceInputError(
            "npu_dequant_swiglu_quant: group_index counts must be "
            "non-negative and sum to at most TokensNum"
        )
    h = x.shape[-1] // 2
    y = np.zeros((x.shape[0], h), np.float32)
    scale_out = np.zeros((x.shape[0],), np.float32)
    start = 0
    for g, count in enumerate(counts):
        rows = slice(start, start + count)
        res = f32(x[rows])
        if x.dtype == np.int32:
            if a["bias"] is not None:
                per_group = a["bias"].reshape(-1, x.shape[-1])
                res = f32(x[rows].astype(np.int64) + per_group[min(g, len(per_group) - 1)])
            if a["weight_scale"] is not None:
                res = res * f32(a["weight_scale"]).reshape(-1, x.shape[-1])[g]
            if a["activation_scale"] is not None:
                res = res * f32(a["activation_scale"]).reshape(-1, 1)[rows]
        out = _swiglu_part(res, a)
        qs = a["quant_scale"]
        if a["quant_mode"] == 1:
            if qs is not None:
                out = out * f32(qs).reshape(-1, h)[g]
            top = np.max(np.abs(out), axis=-1)
            scale_out[rows] = top / np.float32(127)
            out = out * (np.float32(127) / np.where(top == 0, np.float32(1), top))[:, None]
        else:
            if qs is not None:
                out = out / _per_group(qs, len(counts), h)[g]
            if a["quant_offset"] is not None:
                out = out + _per_group(a["quant_offset"], len(counts), h)[g]
        y[rows] = out
        start += count
    return cast(y, np.int8), scale_out
