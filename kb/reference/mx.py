"""Block quantization: MX (one power-of-two E8M0 scale per block_size values along an axis,
FP8 or FP4 elements) and plain block quant (one float32 scale per row x column block).

FP4 results come back as the device returns them: uint8, two values per byte, the even
element in the low nibble; E8M0 scales as uint8 (the biased exponent).
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from kb.reference.errors import NotModelled, ReferenceInputError
from kb.reference.lowp import axis_index, cast, dtype_named, f32

Args = dict[str, Any]
FP4 = np.dtype(ml_dtypes.float4_e2m1fn)
#: element type -> (exponent of its largest normal, mantissa bits, smallest normal exponent,
#: largest value), read from the format itself
ELEMENTS: dict[np.dtype, tuple[int, int, int, float]] = {
    t: (
        int(np.log2(float(ml_dtypes.finfo(t).max))),
        int(ml_dtypes.finfo(t).nmant),
        int(ml_dtypes.finfo(t).minexp),
        float(ml_dtypes.finfo(t).max),
    )
    for t in (FP4, np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2))
}
E8M0_BIAS = 127


def _element(dst: Any) -> np.dtype:
    name = np.dtype(dtype_named(dst, "dst_type"))
    if name not in ELEMENTS:
        raise NotModelled(
            f"dst_type={dst!r}: the reference models float8_e4m3fn, float8_e5m2 and "
            "float4_e2m1fn_x2 (ml_dtypes has no float4_e1m2)"
        )
    return name


def round_to_element(v: np.ndarray, name: np.dtype, mode: str) -> np.ndarray:
    """v (float32, already divided by its block scale) on the element grid: the value's own
    exponent (at least the smallest normal's) fixes the step 2^(e - mantissa bits); rint rounds
    half to even, round half away from zero, floor down; the result saturates at the largest value."""
    _emax, mbits, emin, top = ELEMENTS[name]
    mag = np.abs(v).astype(np.float64)
    with np.errstate(divide="ignore"):
        exp = np.floor(np.log2(np.where(mag > 0, mag, 1.0)))
    step = np.exp2(np.maximum(exp, emin) - mbits)
    units = v.astype(np.float64) / step
    if mode == "rint":
        units = np.rint(units)
    elif mode == "round":
        units = np.sign(units) * np.floor(np.abs(units) + 0.5)
    elif mode == "floor":
        units = np.floor(units)
    else:
        raise NotModelled(f"round_mode={mode!r} is not modelled (rint, round, floor)")
    return np.clip(units * step, -top, top).astype(np.float32)


def _blocks(x: np.ndarray, axis: int, size: int) -> tuple[np.ndarray, int]:
    """x with ``axis`` moved last and cut into [..., groups, size] (zero padded); the group count."""
    moved = np.moveaxis(f32(x), axis, -1)
    n = moved.shape[-1]
    groups = -(-n // size)
    padded = np.zeros((*moved.shape[:-1], groups * size), np.float32)
    padded[..., :n] = moved
    return padded.reshape(*moved.shape[:-1], groups, size), groups


def _scale_ocp(amax: np.ndarray, name: np.dtype) -> np.ndarray:
    """scale_alg 0: biased exponent floor(log2 amax) - emax + 127, in [0, 254]."""
    with np.errstate(divide="ignore"):
        exp = np.floor(np.log2(np.where(amax > 0, amax, 1.0))) - ELEMENTS[name][0]
    return np.where(amax > 0, np.clip(exp + E8M0_BIAS, 0, 254), 0).astype(np.int64)


def _scale_ceil(amax: np.ndarray, top: float) -> np.ndarray:
    """scale_alg 1: the exponent of amax / top, raised by one when its mantissa is not zero
    (a subnormal ratio: when the mantissa is above one half), in [0, 254]."""
    ratio = (amax / np.float32(top)).astype(np.float32)
    bits = ratio.view(np.uint32).astype(np.int64)
    exp, mant = (bits >> 23) & 0xFF, bits & 0x7FFFFF
    up = np.where(exp > 0, (exp < 254) & (mant > 0), mant > (1 << 22))
    return np.clip(exp + up, 0, 254).astype(np.int64)


#: scale_alg 2 with dst_type_max 0.0 / 6.0 / 7.0: the exponent of max|block| goes up by one when
#: its float32 mantissa field exceeds this (a fraction above 0.5 or above 0.75)
ALG2_MANTISSA_ABOVE = {0.0: 1 << 22, 6.0: 1 << 22, 7.0: 3 << 21}


def _scale_fp4_range(amax: np.ndarray, type_max: float) -> np.ndarray:
    """scale_alg 2 (FP4 E2M1): with dst_type_max 0, 6 or 7, floor(log2 amax) - emax, one
    higher when the mantissa of amax passes the mode's threshold; with another dst_type_max,
    the exponent of amax * (1 / dst_type_max) raised by one when its mantissa is not zero
    (normal ratios only); in [0, 254]."""
    if type_max in ALG2_MANTISSA_ABOVE:
        bits = f32(amax).view(np.uint32).astype(np.int64)
        exp, mant = (bits >> 23) & 0xFF, bits & 0x7FFFFF
        raw = exp - ELEMENTS[FP4][0] + (mant > ALG2_MANTISSA_ABOVE[type_max])
        return np.clip(np.where(exp < ELEMENTS[FP4][0], 0, raw), 0, 254).astype(np.int64)
    ratio = (f32(amax) * np.float32(1.0 / type_max)).astype(np.float32)
    bits = ratio.view(np.uint32).astype(np.int64)
    exp, mant = (bits >> 23) & 0xFF, bits & 0x7FFFFF
    up = (exp > 0) & (exp < 254) & (mant > 0)
    return np.clip(exp + up, 0, 254).astype(np.int64)


def _pack_fp4(values: np.ndarray) -> np.ndarray:
    codes = values.astype(ml_dtypes.float4_e2m1fn).view(np.uint8) & 0x0F
    if codes.shape[-1] % 2:
        raise ReferenceInputError("FP4 output needs an even last dim (two values per byte)")
    return (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)


def _scale_layout(exps: np.ndarray, axis: int) -> np.ndarray:
    """[..., groups] (axis moved last) -> the device's [..., ceil(groups / 2), ..., 2] with the
    pair of neighbouring groups last (groups padded to even with exponent 0)."""
    if exps.shape[-1] % 2:
        exps = np.concatenate([exps, np.zeros((*exps.shape[:-1], 1), exps.dtype)], -1)
    pairs = exps.reshape(*exps.shape[:-1], -1, 2)  # [..., G/2, 2]
    return np.moveaxis(pairs, -2, axis).astype(np.uint8)


def dynamic_mx_quant(a: Args) -> tuple[np.ndarray, np.ndarray]:
    x = a["input"]
    if not 1 <= x.ndim <= 7:
        raise ReferenceInputError("npu_dynamic_mx_quant: input is 1-7 D")
    axis = axis_index(x, a["axis"], "npu_dynamic_mx_quant: axis")
    size, alg, name = int(a["block_size"]), int(a["scale_alg"]), _element(a["dst_type"])
    if size % 32:
        raise ReferenceInputError("npu_dynamic_mx_quant: block_size is a multiple of 32")
    type_max = float(a["dst_type_max"])
    if alg == 2 and (name != FP4 or size != 32):
        raise ReferenceInputError(
            "npu_dynamic_mx_quant: scale_alg 2 is for float4_e2m1fn_x2 with block_size 32"
        )
    if type_max != 0.0 and not 6.0 <= type_max <= 12.0:
        raise ReferenceInputError("npu_dynamic_mx_quant: dst_type_max is 0.0 or in [6.0, 12.0]")
    if alg == 1 and name == FP4:
        raise ReferenceInputError("npu_dynamic_mx_quant: scale_alg 1 is for FP8 outputs only")
    if name != FP4 and a["round_mode"] != "rint":
        raise ReferenceInputError("npu_dynamic_mx_quant: FP8 outputs round with 'rint' only")
    blocks, _groups = _blocks(x, axis, size)
    amax = np.abs(blocks).max(axis=-1)
    if alg == 1:
        amax = np.maximum(amax, np.float32(a["max_low_bound"]))
        exps = _scale_ceil(amax, ELEMENTS[name][3])
    elif alg == 2:  # dst_type_max only counts here
        exps = _scale_fp4_range(amax, type_max)
    else:
        exps = _scale_ocp(amax, name)
    scaled = blocks / np.exp2(exps - E8M0_BIAS).astype(np.float32)[..., None]
    q = round_to_element(scaled, name, a["round_mode"])
    n = np.moveaxis(x, axis, -1).shape[-1]
    y = np.moveaxis(q.reshape(*q.shape[:-2], -1)[..., :n], -1, axis)
    out = _pack_fp4(y) if name == FP4 else y.astype(name)
    return out, _scale_layout(exps, axis)


#: the largest magnitude per block-quant target (the page's table: FP8 448, INT8 127)
BLOCK_MAX = {
    np.dtype(np.int8): 127.0,
    np.dtype(ml_dtypes.float8_e4m3fn): 448.0,
    np.dtype(ml_dtypes.float8_e5m2): 448.0,
}


def dynamic_block_quant(a: Args) -> tuple[np.ndarray, np.ndarray]:
    """Per block of row_block_size x col_block_size: m = min(MAX / amax, 1 / min_scale),
    y = cast(x * m) saturated at +-MAX, scale = 1 / m (a zero block: y 0, scale 0)."""
    x = a["x"]
    if x.ndim not in (2, 3):
        raise ReferenceInputError("npu_dynamic_block_quant: x is 2-D or 3-D")
    name = np.dtype(np.int8 if a["dst_type"] is None else dtype_named(a["dst_type"], "dst_type"))
    if name not in BLOCK_MAX:
        raise NotModelled(
            f"npu_dynamic_block_quant: dst_type {name} is not modelled (int8, float8)"
        )
    if a["round_mode"] != "rint":
        raise NotModelled("npu_dynamic_block_quant: round_mode 'round' (HiFloat8) is not modelled")
    top = float(a["dst_type_max"]) or BLOCK_MAX[name]
    rb, cb = int(a["row_block_size"]), int(a["col_block_size"])
    lead = x.shape[:-2]
    m, n = x.shape[-2:]
    gr, gc = -(-m // rb), -(-n // cb)
    padded = np.zeros((*lead, gr * rb, gc * cb), np.float32)
    padded[..., :m, :n] = f32(x)
    tiles = padded.reshape(*lead, gr, rb, gc, cb)
    amax = np.abs(tiles).max(axis=(-3, -1))  # [..., gr, gc]
    cap = np.inf if float(a["min_scale"]) == 0 else 1.0 / float(a["min_scale"])
    with np.errstate(divide="ignore"):
        mult = np.minimum(np.float32(top) / amax, np.float32(cap)).astype(np.float32)
    mult = np.where(amax > 0, mult, np.float32(0))
    y = np.clip(tiles * mult[..., :, None, :, None], -top, top).reshape(padded.shape)[..., :m, :n]
    with np.errstate(divide="ignore"):
        scale = np.where(mult > 0, np.float32(1) / mult, np.float32(0)).astype(np.float32)
    return cast(y, name), scale
