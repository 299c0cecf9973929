"""Rotary embedding read from a cos/sin cache by position (vLLM style): the ATB in-place
rotary embedding and multimodal RoPE (MRoPE), whose cos/sin sections come from the
temporal, height and width position rows."""

from __future__ import annotations

from typing import Any

import numpy as np

from kb.reference.errors import NotModelled, ReferenceInputError
from kb.reference.lowp import cast, f32

Args = dict[str, Any]


def _rotate_heads(
    x: np.ndarray, cos: np.ndarray, sin: np.ndarray, head_size: int, neox: bool, what: str
) -> np.ndarray:
    """x [T, heads * head_size]; cos/sin [T, rot / 2]; the first rot values of each head
    rotate (NeoX: the two halves pair up; GPT-J: adjacent values pair up); float32 result."""
    if x.ndim != 2 or head_size <= 0 or x.shape[1] % head_size:
        raise ReferenceInputError(f"{what}: query/key are [tokens, heads * {head_size}]")
    half = cos.shape[-1]
    rot = 2 * half
    if rot > head_size or x.shape[0] != cos.shape[0]:
        raise ReferenceInputError(
            f"{what}: rotary dim {rot} must fit head_size {head_size}, one cos row per token"
        )
    heads = f32(x).reshape(x.shape[0], -1, head_size)
    part = heads[..., :rot]
    c, s = cos[:, None, :], sin[:, None, :]
    if neox:
        x1, x2 = part[..., :half], part[..., half:]
        rotated = np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)
    else:
        x1, x2 = part[..., 0::2], part[..., 1::2]
        rotated = np.stack([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1).reshape(part.shape)
    return np.concatenate([rotated, heads[..., rot:]], axis=-1).reshape(x.shape)


def _cos_sin(cache: np.ndarray, positions: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray]:
    if cache.ndim != 2 or cache.shape[1] % 2:
        raise ReferenceInputError(
            f"{what}: cos_sin_cache is [max_position, rotary_dim] with an even rotary_dim"
        )
    pos = positions.astype(np.int64)
    if pos.size and (pos.min() < 0 or pos.max() >= cache.shape[0]):
        raise ReferenceInputError(f"{what}: positions lie in [0, {cache.shape[0]})")
    rows = f32(cache)[pos]
    half = cache.shape[1] // 2
    return rows[..., :half], rows[..., half:]


def rotary_embedding(a: Args) -> None:
    """cos, sin = cache[positions] halves; query and key rotate in place."""
    q, k, head_size = a["query"], a["key"], int(a["head_size"])
    cos, sin = _cos_sin(
        a["cos_sin_cache"], np.asarray(a["positions"]).reshape(-1), "_npu_rotary_embedding"
    )
    for t in (q, k):
        flat = t.reshape(t.shape[0], -1) if t.ndim > 2 else t
        out = _rotate_heads(
            flat, cos, sin, head_size, bool(a["is_neox_style"]), "_npu_rotary_embedding"
        )
        t[...] = cast(out, t.dtype).reshape(t.shape)


def _sections(cos: np.ndarray, sections: list[int], mode: str) -> np.ndarray:
    """[m, T, rot / 2] -> [T, rot / 2]: section j of the columns from position row j
    ('default'), or every third column from rows 1 and 2 over 3 * sections[1] columns
    with the rest from row 0 ('interleave')."""
    if mode == "interleave":
        if len(sections) != 3:
            raise ReferenceInputError("npu_mrope: cache_mode='interleave' takes three sections")
        out = cos[0].copy()
        span = sections[1] * 3
        out[..., 1:span:3] = cos[1][..., 1:span:3]
        out[..., 2:span:3] = cos[2][..., 2:span:3]
        return out
    bounds = np.cumsum([0, *sections])
    return np.concatenate(
        [cos[j][..., bounds[j] : bounds[j + 1]] for j in range(len(sections))], axis=-1
    )


def mrope(a: Args) -> tuple[np.ndarray, np.ndarray]:
    q, k, head_size = a["query"], a["key"], int(a["head_size"])
    positions = np.asarray(a["positions"])
    sections = [int(s) for s in (a["mrope_section"] or [])]
    rope_mode = not any(sections)
    mode, cache_mode = a["rotary_mode"] or "half", a["cache_mode"] or "default"
    if mode not in ("half", "interleave", "interleaved"):
        raise NotModelled(f"npu_mrope: rotary_mode={mode!r} is not modelled")
    cos, sin = _cos_sin(a["cos_sin_cache"], positions, "npu_mrope")
    if rope_mode:
        if positions.ndim != 1 or cache_mode != "default":
            raise ReferenceInputError(
                "npu_mrope: RoPE mode takes 1-D positions and cache_mode='default'"
            )
    else:
        if (
            positions.ndim != 2
            or positions.shape[0] != len(sections)
            or len(sections) not in (3, 4)
        ):
            raise ReferenceInputError(
                "npu_mrope: MRoPE takes positions [len(mrope_section) = 3 or 4, tokens]"
            )
        if sum(sections) != cos.shape[-1]:
            raise ReferenceInputError(
                f"npu_mrope: mrope_section sums to rotary_dim / 2 = {cos.shape[-1]}"
            )
        cos, sin = _sections(cos, sections, cache_mode), _sections(sin, sections, cache_mode)
    neox = mode == "half"
    return (
        cast(_rotate_heads(q, cos, sin, head_size, neox, "npu_mrope"), q.dtype),
        cast(_rotate_heads(k, cos, sin, head_size, neox, "npu_mrope"), k.dtype),
    )
