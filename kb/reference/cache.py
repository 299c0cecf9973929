"""KV-cache writes: a token's key/value lands in slot ``s`` = block ``s // block_size``,
row ``s % block_size``; a negative slot is skipped.  Caches are numpy arrays updated in
place (the operators mutate their cache arguments)."""

from __future__ import annotations

from typing import Any

import numpy as np

from kb.reference.errors import NotModelled, ReferenceInputError
from kb.reference.lowp import cast, f32
from kb.reference.norm import _rms
from kb.reference.rope import rotate

Args = dict[str, Any]


def _write_nd(cache: np.ndarray, tokens: np.ndarray, slots: np.ndarray, what: str) -> None:
    """cache [blocks, block_size, …]: row ``slot`` takes one token."""
    bs = cache.shape[1]
    if tokens.shape[1:] != cache.shape[2:]:
        raise ReferenceInputError(
            f"{what}: a token {tokens.shape[1:]} must match a cache row {cache.shape[2:]}"
        )
    for t, slot in enumerate(np.asarray(slots).reshape(-1).tolist()):
        if slot >= 0:
            cache[slot // bs, slot % bs] = tokens[t]


def _write_nz(cache: np.ndarray, tokens: np.ndarray, slots: np.ndarray, what: str) -> None:
    """cache [blocks, H / c0, block_size, c0]: the flattened token in c0-wide pieces."""
    bs, c0 = cache.shape[2], cache.shape[3]
    flat = tokens.reshape(tokens.shape[0], -1)
    if flat.shape[1] != cache.shape[1] * c0:
        raise ReferenceInputError(
            f"{what}: NZ cache {cache.shape} holds {cache.shape[1] * c0} "
            f"values per token, the input has {flat.shape[1]}"
        )
    for t, slot in enumerate(np.asarray(slots).reshape(-1).tolist()):
        if slot >= 0:
            cache[slot // bs, :, slot % bs, :] = flat[t].reshape(-1, c0)


def scatter_pa_kv_cache(a: Args) -> None:
    key, value = a["key"], a["value"]
    if (
        any(a[n] is not None for n in ("compress_lens", "compress_seq_offsets", "seq_lens"))
        or key.ndim != 3
    ):
        raise NotModelled(
            "npu_scatter_pa_kv_cache: the compressed scenario (4-D key, "
            "compress_lens, seq_lens) is not modelled; key is [T, N, D]"
        )
    if key.dtype != a["key_cache"].dtype or value.dtype != a["value_cache"].dtype:
        raise ReferenceInputError("npu_scatter_pa_kv_cache: caches keep the dtype of key/value")
    write = _write_nz if a["cache_mode"] == "PA_NZ" else _write_nd
    write(a["key_cache"], key, a["slot_mapping"], "npu_scatter_pa_kv_cache key")
    write(a["value_cache"], value, a["slot_mapping"], "npu_scatter_pa_kv_cache value")


def reshape_and_cache(a: Args) -> None:
    """The ND caches [blocks, block_size, N, D]; the NZ variant is chosen by tensor format,
    which numpy arrays do not carry, so it is not modelled."""
    _write_nd(a["key_cache"], a["key"], a["slot_indices"], "_npu_reshape_and_cache key")
    _write_nd(a["value_cache"], a["value"], a["slot_indices"], "_npu_reshape_and_cache value")


def _to_cache(x: np.ndarray, cache: np.ndarray, scale: Any) -> np.ndarray:
    if scale is not None:
        return cast(x * f32(scale), np.int8)
    return cast(x, cache.dtype)


def kv_rmsnorm_rope_cache(
    a: Args,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    kv, k_cache, ckv_cache, mode = a["kv"], a["k_cache"], a["ckv_cache"], a["cache_mode"]
    if a["v"] is not None or a["k_rope_offset"] is not None or a["c_kv_offset"] is not None:
        raise NotModelled("npu_kv_rmsnorm_rope_cache: v and the quant offsets are not modelled")
    rope = a["cos"].shape[-1]
    if kv.ndim != 4 or kv.shape[1] != 1 or kv.shape[-1] <= rope:
        raise ReferenceInputError("npu_kv_rmsnorm_rope_cache: kv is [B, 1, S, rms + rope]")
    b, _, s, width = kv.shape
    gamma = a["gamma"]
    rms_size = width - rope
    y, _ = _rms(kv[..., :rms_size], gamma, a["epsilon"], (3,))
    k = f32(kv[..., rms_size:])
    k = k.reshape(b, 1, s, rope // 2, 2).swapaxes(-1, -2).reshape(b, 1, s, rope)
    k_embed = k * f32(a["cos"]) + rotate(k, "half") * f32(a["sin"])
    k_store = _to_cache(k_embed, k_cache, a["k_rope_scale"])
    y_store = _to_cache(y, ckv_cache, a["c_kv_scale"])
    index = np.asarray(a["index"]).astype(np.int64)
    if mode == "Norm":
        for bi in range(b):
            for si in range(s):
                pos = int(index.reshape(b, s)[bi, si])
                if pos >= 0:
                    k_cache[bi, 0, pos] = k_store[bi, 0, si]
                    ckv_cache[bi, 0, pos] = y_store[bi, 0, si]
    elif mode in ("PA", "PA_BNSD", "PA_NZ"):
        slots = index.reshape(-1)
        if mode == "PA_NZ":
            _write_nz(_nz_view(k_cache), k_store.reshape(b * s, -1), slots, "k_cache")
            _write_nz(_nz_view(ckv_cache), y_store.reshape(b * s, -1), slots, "ckv_cache")
        else:
            _write_nd(k_cache, k_store.reshape(b * s, 1, -1), slots, "k_cache")
            _write_nd(ckv_cache, y_store.reshape(b * s, 1, -1), slots, "ckv_cache")
    else:
        _write_blocks(a, k_store, y_store, index, mode)
    out_k = cast(k_embed, kv.dtype) if a["is_output_kv"] else None
    out_y = cast(y, kv.dtype) if a["is_output_kv"] else None
    return k_cache, ckv_cache, out_k, out_y


def _nz_view(cache: np.ndarray) -> np.ndarray:
    """[blocks, block_size, 1, D] seen as the NZ [blocks, D / c0, block_size, c0] it holds
    (c0 = 32 bytes: 16 half-precision or 32 int8 values)."""
    c0 = 32 // cache.dtype.itemsize
    blocks, bs = cache.shape[0], cache.shape[1]
    view = cache.reshape(blocks, -1, bs, c0)
    if not np.shares_memory(view, cache):
        raise ReferenceInputError("the NZ cache must be a contiguous array")
    return view


def _write_blocks(
    a: Args, k_store: np.ndarray, y_store: np.ndarray, index: np.ndarray, mode: str
) -> None:
    """PA_BLK_*: index holds one cache position per block of each batch's tokens."""
    k_cache, ckv_cache = a["k_cache"], a["ckv_cache"]
    b, _, s, _ = k_store.shape
    bs = k_cache.shape[1]
    pages = index.reshape(b, -1)
    nz = mode == "PA_BLK_NZ"
    kv_views = (_nz_view(k_cache), _nz_view(ckv_cache)) if nz else (k_cache, ckv_cache)
    for bi in range(b):
        for si in range(s):
            start = int(pages[bi, si // bs])
            if start < 0:
                continue
            block, row = start // bs, si % bs
            for view, data in zip(kv_views, (k_store, y_store), strict=True):
                if nz:
                    view[block, :, row, :] = data[bi, 0, si].reshape(-1, view.shape[-1])
                else:
                    view[block, row, 0] = data[bi, 0, si]


def kv_rmsnorm_rope_cache_v2(a: Args) -> tuple[np.ndarray, np.ndarray]:
    """Without v the wrapper runs v1's kernel on the caches in place and returns only
    (k_embed_out, y_out); those two hold the results only with is_output_kv (zeros here
    otherwise, where the device leaves them unset)."""
    if a["k_cache_dtype"] is not None or a["ckv_cache_dtype"] is not None:
        raise NotModelled(
            "npu_kv_rmsnorm_rope_cache_v2: k_cache_dtype/ckv_cache_dtype (HiFloat8) are not modelled"
        )
    _, _, k_out, y_out = kv_rmsnorm_rope_cache(a)
    kv = a["kv"]
    lead = kv.shape[:-1]
    k_ret = k_out if k_out is not None else np.zeros((*lead, a["cos"].shape[-1]), kv.dtype)
    y_ret = y_out if y_out is not None else np.zeros((*lead, a["gamma"].shape[-1]), kv.dtype)
    return k_ret, y_ret
