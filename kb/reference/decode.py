"""Decode attention: incremental flash attention (one query row per batch, contiguous or
paged keys), ATB paged attention over a block table, and the merge of partial attention
results by their log-sum-exp (sequence-parallel decode)."""

from __future__ import annotations

from typing import Any

import numpy as np

from kb.reference.attention import INT_MAX, attend, run_attention, unmodelled
from kb.reference.errors import NotModelled, ReferenceInputError
from kb.reference.kv_antiquant import dequantize_kv
from kb.reference.lowp import cast, f32

Args = dict[str, Any]


def incre_flash_attention(a: Args) -> np.ndarray:
    """softmax(scale_value * q kᵀ + mask) v with one query row per batch; actual_seq_lengths
    are the key/value lengths; a (B, KV_S) mask applies each batch's own row; an int8 cache
    is read through antiquant_scale/antiquant_offset (kb.reference.kv_antiquant)."""
    unmodelled(
        a,
        [
            "padding_mask",
            "pse_shift",
            "dequant_scale1",
            "quant_scale1",
            "dequant_scale2",
            "quant_scale2",
            "quant_offset2",
            "kv_padding_size",
        ],
        "npu_incre_flash_attention",
    )
    n = int(a["num_heads"])
    nkv = int(a["num_key_value_heads"]) or n
    a = dequantize_kv(
        a, layout=a["input_layout"], nkv=nkv, op="npu_incre_flash_attention", split=False
    )
    table = a["block_table"]
    if table is not None:
        bs = int(a["block_size"])
        if bs <= 0 or bs % 16:
            raise ReferenceInputError(
                "npu_incre_flash_attention: page attention needs block_size a multiple of 16"
            )
    args = {**a, "sparse_mode": 0, "pre_tokens": INT_MAX, "next_tokens": INT_MAX}
    out, _, _ = run_attention(
        args,
        n=n,
        nkv=nkv,
        scale=a["scale_value"],
        layout=a["input_layout"],
        q_lens=None,
        kv_lens=a["actual_seq_lengths"],
        decode_ignores_sparse=True,
    )
    return out


def paged_attention(a: Args) -> None:
    """ATB paged attention: query [T, N, D], caches [blocks, block_size, Nkv, D(v)]; token t
    attends to the first context_lens[t] cached rows its block_table row names; the result
    is written into ``out`` [T, N, Dv] (the call returns nothing)."""
    q, kc, vc, out = a["query"], a["key_cache"], a["value_cache"], a["out"]
    n, nkv = int(a["num_heads"]), int(a["num_kv_heads"])
    if q.ndim != 3 or kc.ndim != 4 or vc.ndim != 4:
        raise NotModelled(
            "_npu_paged_attention: query [T, N, D] and ND caches [blocks, block_size, Nkv, D] are modelled"
        )
    if q.shape[1] != n or kc.shape[2] != nkv or vc.shape[2] != nkv or nkv <= 0 or n % nkv:
        raise ReferenceInputError(
            "_npu_paged_attention: num_heads/num_kv_heads must match query and caches"
        )
    table, lens = np.asarray(a["block_table"]), np.asarray(a["context_lens"]).reshape(-1)
    if table.ndim != 2 or table.shape[0] < q.shape[0] or lens.size < q.shape[0]:
        raise ReferenceInputError(
            "_npu_paged_attention: block_table and context_lens have one row per query token"
        )
    if out.shape != (q.shape[0], n, vc.shape[-1]):
        raise ReferenceInputError(
            f"_npu_paged_attention: out is [T, N, Dv] = {(q.shape[0], n, vc.shape[-1])}"
        )
    bs = kc.shape[1]
    result = np.zeros(out.shape, np.float32)
    for t in range(q.shape[0]):
        length = int(lens[t])
        need = -(-length // bs)
        if length < 0 or need > table.shape[1]:
            raise ReferenceInputError(
                f"_npu_paged_attention: context length {length} needs {need} blocks per row"
            )
        blocks = table[t, :need].astype(np.int64)
        keys = kc[blocks].reshape(-1, nkv, kc.shape[-1])[:length].transpose(1, 0, 2)
        vals = vc[blocks].reshape(-1, nkv, vc.shape[-1])[:length].transpose(1, 0, 2)
        o, _, _ = attend(
            q[t][:, None, :], keys, vals, float(a["scale_value"]), np.ones((1, length), bool)
        )
        result[t] = o[:, 0]
    out[...] = cast(result, out.dtype)


def attention_update(a: Args) -> tuple[np.ndarray, np.ndarray | None]:
    """lse_m = max_i lse_i + log(sum_i exp(lse_i - max)); out = sum_i O_i exp(lse_i - lse_m);
    lse_out only for update_type 1 (None otherwise, as the wrapper leaves it undefined)."""
    lses, outs = list(a["lse"]), list(a["local_out"])
    if not lses or len(lses) != len(outs):
        raise ReferenceInputError(
            "npu_attention_update: lse and local_out are lists of one non-zero length"
        )
    rows = lses[0].shape[0] if lses[0].ndim == 1 else -1
    for lse, o in zip(lses, outs, strict=True):
        if (
            lse.ndim != 1
            or o.ndim != 2
            or lse.shape[0] != rows
            or o.shape != outs[0].shape
            or o.shape[0] != rows
        ):
            raise ReferenceInputError(
                "npu_attention_update: each lse is (N,) and each local_out (N, head_dim)"
            )
    stack = np.stack([f32(x) for x in lses])
    top = stack.max(axis=0)
    safe = np.where(np.isfinite(top), top, np.float32(0))
    merged = safe + np.log(np.exp(stack - safe).sum(axis=0))
    weights = np.exp(stack - merged)
    out = (np.stack([f32(o) for o in outs]) * weights[..., None]).sum(axis=0)
    return cast(out, outs[0].dtype), (
        merged.astype(np.float32) if int(a["update_type"]) == 1 else None
    )
