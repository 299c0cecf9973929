"""Asymmetric dynamic quantization, dequantization (anti-quant) and the packed int64 scale
that quantized matmuls read (npu_trans_quant_param)."""

from __future__ import annotations

from typing import Any

import numpy as np

from kb.reference.errors import NotModelled, ReferenceInputError
from kb.reference.lowp import cast, dtype_named, f32, int_bits, pack_int4, unpack_int4

Args = dict[str, Any]
#: bits of a float32 kept by the FP19 the packed scale holds (sign, exponent, 10 mantissa bits)
FP19_MASK = 0xFFFFE000
#: bit 46 of a packed scale is set; bits 37-45 hold a 9-bit signed offset
PACKED_FLAG = 1 << 46


def _smoothed(x: np.ndarray, smooth: Any, groups: Any, what: str) -> np.ndarray:
    """x times smooth_scales: one row vector, or with group_index one row per group of
    rows, group g covering rows [group_index[g-1], group_index[g])."""
    if smooth is None:
        return x
    if groups is None:
        return x * f32(smooth).reshape(-1)
    rows = x.reshape(-1, x.shape[-1]).copy()
    ends = [int(e) for e in np.asarray(groups).reshape(-1)]
    table = f32(smooth).reshape(len(ends), -1)
    if ends != sorted(ends) or (ends and ends[-1] != rows.shape[0]):
        raise ReferenceInputError(
            f"{what}: group_index holds non-decreasing row ends, the last one the row count"
        )
    start = 0
    for g, end in enumerate(ends):
        rows[start:end] *= table[g]
        start = max(start, end)
    return rows.reshape(x.shape)


def dynamic_quant_asymmetric(a: Args) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row (pertoken, the last axis) or per column (perchannel, axis -2):
    scale = (max - min) / (DST_MAX - DST_MIN), offset = DST_MAX - max / scale,
    y = round(x / scale + offset) in int8 (or int4 packed eight per int32)."""
    x = f32(a["input"])
    if x.ndim < 2:
        raise ReferenceInputError("npu_dynamic_quant_asymmetric: input has more than one dim")
    if float(a["dst_type_max"]) != 0.0:
        raise NotModelled(
            "npu_dynamic_quant_asymmetric: dst_type_max other than 0.0 is not modelled"
        )
    bits = int_bits(a["dst_type"], "npu_dynamic_quant_asymmetric: dst_type")
    lo, hi = (-128, 127) if bits == 8 else (-8, 7)
    mode = a["quant_mode"]
    if mode not in ("pertoken", "perchannel"):
        raise NotModelled(f"npu_dynamic_quant_asymmetric: quant_mode={mode!r} is not modelled")
    x = _smoothed(x, a["smooth_scales"], a["group_index"], "npu_dynamic_quant_asymmetric")
    axis = -1 if mode == "pertoken" else -2
    top, bottom = x.max(axis=axis, keepdims=True), x.min(axis=axis, keepdims=True)
    scale = ((top - bottom) / np.float32(hi - lo)).astype(np.float32)
    scale = np.where(scale > 0, scale, np.float32(1))  # a constant row: scale 1
    offset = (np.float32(hi) - top / scale).astype(np.float32)
    q = np.clip(np.rint(x / scale + offset), lo, hi)
    if bits == 4:
        if x.shape[-1] % 8:
            raise ReferenceInputError(
                "npu_dynamic_quant_asymmetric: quint4x2 needs the last dim divisible by 8"
            )
        y = pack_int4(q)
    else:
        y = q.astype(np.int8)
    return y, np.squeeze(scale, axis), np.squeeze(offset, axis)


def anti_quant(a: Args) -> np.ndarray:
    """out = (x + offset) * scale, x int8 or int4 (eight per int32, low nibble first)."""
    x = a["x"]
    values = unpack_int4(x) if x.dtype == np.int32 else x
    width = values.shape[-1] if values.ndim else 1
    scale = f32(a["scale"]).reshape(-1)
    if scale.size not in (1, width):
        raise ReferenceInputError(
            f"npu_anti_quant: scale is (1,) or ({width},), one value per element of x's last dim"
        )
    out = f32(values)
    if a["offset"] is not None:
        offset = f32(a["offset"]).reshape(-1)
        if offset.size != scale.size:
            raise ReferenceInputError("npu_anti_quant: offset has the shape of scale")
        out = out + offset
    target = np.float16 if a["dst_dtype"] is None else dtype_named(a["dst_dtype"], "dst_dtype")
    return cast(out * scale, target)


def _fp19_bits(scale: np.ndarray, round_mode: int) -> np.ndarray:
    bits = np.ascontiguousarray(scale, dtype=np.float32).view(np.uint32).astype(np.uint64)
    if round_mode == 1:  # round the dropped 13 bits to nearest, ties to even
        bits = bits + np.uint64(0xFFF) + ((bits >> np.uint64(13)) & np.uint64(1))
    return bits & np.uint64(FP19_MASK)


def trans_quant_param(a: Args) -> np.ndarray:
    """The float32 scale cut to FP19 in bits 0-31, bit 46 set, and with an offset its
    value rounded and saturated to [-256, 255] as 9 bits at 37-45; int64."""
    scale = np.asarray(a["scale"], np.float32)
    if scale.ndim not in (1, 2) or scale.size == 0:
        raise ReferenceInputError("npu_trans_quant_param: scale is a non-empty 1-D or 2-D tensor")
    packed = _fp19_bits(scale, int(a["round_mode"] or 0)) | np.uint64(PACKED_FLAG)
    if a["offset"] is not None:
        offset = np.asarray(a["offset"], np.float32)
        if scale.ndim == 1:
            try:
                packed, offset = np.broadcast_arrays(packed, offset.reshape(-1))
            except ValueError as exc:
                raise ReferenceInputError(
                    "npu_trans_quant_param: scale and offset are (1,) or (n,)"
                ) from exc
        elif offset.size not in (1, scale.size):
            raise ReferenceInputError(
                "npu_trans_quant_param: a 2-D scale takes an offset of one or all its values"
            )
        nine = np.clip(np.rint(offset), -256, 255).astype(np.int64) & 0x1FF
        packed = (packed & np.uint64(0x4000FFFFFFFF)) | (
            np.broadcast_to(nine, packed.shape).astype(np.uint64) << np.uint64(37)
        )
    return packed.astype(np.int64)


def unpack_scale(packed: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """The (scale, offset) a packed int64 scale holds; offset None when its bits are zero."""
    raw = np.asarray(packed).astype(np.int64).view(np.uint64)
    scale = (raw & np.uint64(FP19_MASK)).astype(np.uint32).view(np.float32)
    nine = ((raw >> np.uint64(37)) & np.uint64(0x1FF)).astype(np.int64)
    offset = np.where(nine >= 256, nine - 512, nine).astype(np.float32)
    return scale, (offset if offset.any() else None)


def convert_weight_to_int4pack(a: Args) -> np.ndarray:
    """int32 values in [-8, 7] packed eight per int32 along the last dim, the first value in
    the lowest four bits (what npu_weight_quant_batchmatmul unpacks)."""
    w = a["weight"]
    if w.dtype != np.int32:
        raise NotModelled(
            "npu_convert_weight_to_int4pack: the float32 (FP4, Ascend 950) input is not modelled"
        )
    if w.ndim != 2 or w.shape[-1] % 8:
        raise ReferenceInputError(
            "npu_convert_weight_to_int4pack: weight is 2-D with its last dim a multiple of 8"
        )
    if w.size and (w.min() < -8 or w.max() > 7):
        raise ReferenceInputError(
            "npu_convert_weight_to_int4pack: values lie in the int4 range [-8, 7]"
        )
    return pack_int4(w)
