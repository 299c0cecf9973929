"""Key/value antiquant for the decode attention kernels: an int8 (or int32-packed int4) KV
cache is read as ``(kv + offset) * scale`` in float32 before the attention.

Two ways of passing the factors:

* combined (``antiquant_scale`` / ``antiquant_offset``): row 0 is the key's, row 1 the
  value's -- per channel ``(2, N, 1, D)``, ``(2, N, D)`` or ``(2, H)``, per tensor ``(2,)``,
  or (FIA's ``antiquant_mode=1``) per token ``(2, B, S)``;
* split (FIA's ``key_antiquant_scale`` … with ``key_antiquant_mode`` / ``value_antiquant_mode``):
  one leading row each -- per channel ``(1, N, 1, D)``, ``(1, N, D)``, ``(1, H)``, per tensor
  ``(1,)``, per token ``(1, B, S)``.  The split form wins when both are given.

N is the key/value head count; the per-token S may be longer than the cache's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kb.reference.errors import NotModelled, ReferenceInputError
from kb.reference.lowp import f32, unpack_int4

Args = dict[str, Any]
#: antiquant modes the reference computes: 0 per channel (or per tensor), 1 per token
MODES = {0: "per channel", 1: "per token"}


def _values(t: np.ndarray, op: str, what: str) -> np.ndarray:
    """int8 as it is, int32 as eight int4 each along the last axis (first in the lowest bits)."""
    if t.dtype == np.int8:
        return t
    if t.dtype == np.int32:
        return unpack_int4(t)
    raise ReferenceInputError(
        f"{op}: antiquant reads an int8 or int4 (int32) {what}, not {t.dtype}"
    )


def _channel(row: np.ndarray, t: np.ndarray, layout: str, nkv: int, paged: bool) -> np.ndarray:
    """A per-channel (or per-tensor) factor shaped to broadcast against t in its layout."""
    if row.size == 1:
        return row.reshape(())
    per_head = row.reshape(nkv, -1)
    if t.ndim == 3 and (paged or layout == "BSH"):  # [B, S, H] or (blocknum, blocksize, H)
        return per_head.reshape(-1)
    if t.ndim == 4 and (paged or layout == "BNSD"):  # [B, N, S, D] or (blocknum, N, bs, D)
        return per_head[:, None, :]
    return per_head  # BSND [B, S, N, D], TND [T, N, D]


def _token(row: np.ndarray, t: np.ndarray, layout: str, op: str) -> np.ndarray:
    """A per-token factor (B, S) shaped to broadcast against t in its layout."""
    if row.ndim != 2:
        raise ReferenceInputError(f"{op}: a per-token antiquant factor is (B, S) per key/value")
    if layout == "BNSD":
        b, s = t.shape[0], t.shape[2]
        return row[:b, :s][:, None, :, None]
    if layout in ("BSH", "BSND"):
        b, s = t.shape[0], t.shape[1]
        factor = row[:b, :s]
        return factor[:, :, None] if t.ndim == 3 else factor[:, :, None, None]
    raise NotModelled(f"{op}: per-token antiquant is modelled for BSH, BSND and BNSD")


def _dequant(
    t: np.ndarray,
    scale: np.ndarray,
    offset: np.ndarray | None,
    mode: int,
    ctx: tuple[str, int, bool, str, str],
) -> np.ndarray:
    layout, nkv, paged, op, what = ctx
    if mode not in MODES:
        raise NotModelled(
            f"{op}: {what} antiquant mode {mode} is not modelled (0 per channel, 1 per token)"
        )
    if mode == 1 and paged:
        raise NotModelled(f"{op}: per-token antiquant with a block_table is not modelled")
    values = f32(_values(t, op, what))
    try:
        if mode == 0:
            factor = _channel(scale, values, layout, nkv, paged)
            shift = None if offset is None else _channel(offset, values, layout, nkv, paged)
        else:
            factor = _token(scale, values, layout, op)
            shift = None if offset is None else _token(offset, values, layout, op)
        return ((values if shift is None else values + shift) * factor).astype(np.float32)
    except ValueError as exc:  # a reshape or broadcast that does not fit
        raise ReferenceInputError(
            f"{op}: {what} antiquant factor {scale.shape} does not fit {what} {t.shape} "
            f"in {layout} with {nkv} key/value heads"
        ) from exc


def _first(t: np.ndarray) -> np.ndarray:
    return t[0] if t.ndim >= 2 else t


def dequantize_kv(a: Args, *, layout: str, nkv: int, op: str, split: bool) -> Args:
    """``a`` with key and value dequantized when their factors are given (``split``: the FIA
    names with key_/value_ prefixes are read too); unchanged when none are."""
    k, v = np.asarray(a["key"]), np.asarray(a["value"])
    paged = a.get("block_table") is not None
    key_s = a.get("key_antiquant_scale") if split else None
    value_s = a.get("value_antiquant_scale") if split else None
    if (key_s is None) != (value_s is None):
        raise ReferenceInputError(
            f"{op}: key_antiquant_scale and value_antiquant_scale are given together"
        )
    if key_s is not None:
        key_o, value_o = a.get("key_antiquant_offset"), a.get("value_antiquant_offset")
        parts = [
            (f32(key_s), None if key_o is None else f32(key_o), int(a["key_antiquant_mode"])),
            (
                f32(value_s),
                None if value_o is None else f32(value_o),
                int(a["value_antiquant_mode"]),
            ),
        ]
        # one leading row each: (1, N, 1, D), (1, N, D), (1, H), (1, B, S) -> drop it
        rows = [(_first(s), None if o is None else _first(o), m) for s, o, m in parts]
    elif a.get("antiquant_scale") is not None:
        scale = f32(a["antiquant_scale"])
        off = a.get("antiquant_offset")
        offset = None if off is None else f32(off)
        if scale.shape[0] != 2 or (offset is not None and offset.shape != scale.shape):
            raise ReferenceInputError(
                f"{op}: antiquant_scale stacks the key's and the value's factors on a first "
                f"axis of 2 (antiquant_offset alike), not {scale.shape}"
            )
        mode = int(a.get("antiquant_mode") or 0)
        rows = [(scale[i], None if offset is None else offset[i], mode) for i in (0, 1)]
    else:
        if k.dtype in (np.int8, np.int32) and np.asarray(a["query"]).dtype != np.int8:
            raise ReferenceInputError(
                f"{op}: an {k.dtype} key/value needs antiquant_scale (or the key_/value_ "
                "antiquant scales) to be read"
            )
        return a
    if np.asarray(a["query"]).dtype == np.int8:
        raise NotModelled(f"{op}: an int8 query with antiquant is not modelled")
    return {
        **a,
        "key": _dequant(k, rows[0][0], rows[0][1], rows[0][2], (layout, nkv, paged, op, "key")),
        "value": _dequant(v, rows[1][0], rows[1][1], rows[1][2], (layout, nkv, paged, op, "value")),
    }
