"""Sparse flash attention (DeepSeek-V3.2): each query token attends only to the key blocks
its sparse_indices name (blocks of sparse_block_size tokens), in the MLA-absorb mode with
the rope parts joined to query and key along D and value = the latent key."""

from __future__ import annotations

from typing import Any

import numpy as np

from kb.reference.errors import NotModelled, ReferenceInputError
from kb.reference.indexer import kv_rows, query_spans
from kb.reference.lowp import cast, f32

Args = dict[str, Any]


def sparse_flash_attention(a: Args) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    q, idx = a["query"], np.asarray(a["sparse_indices"])
    if a["sinks"] is not None or a["return_softmax_lse"]:
        raise NotModelled(
            "npu_sparse_flash_attention: sinks and the softmax max/sum outputs are not modelled"
        )
    if a["attention_mode"] != 2:
        raise ReferenceInputError(
            "npu_sparse_flash_attention: attention_mode supports only 2 (MLA-absorb)"
        )
    if (a["query_rope"] is None) != (a["key_rope"] is None):
        raise ReferenceInputError("npu_sparse_flash_attention: query_rope and key_rope go together")
    block = int(a["sparse_block_size"])
    spans, q_rows = query_spans(q, a["layout_query"], a["actual_seq_lengths_query"])
    qr_rows = None
    if a["query_rope"] is not None:
        qr_rows = query_spans(a["query_rope"], a["layout_query"], a["actual_seq_lengths_query"])[1]
    idx_rows = idx.reshape(-1, *idx.shape[-2:])  # [T, KV_N, sparse_size]
    out = np.zeros((q_rows.shape[0], q_rows.shape[1], a["value"].shape[-1]), np.float32)
    for b, (start, end) in enumerate(spans):

        def rows(t: np.ndarray, what: str, b: int = b) -> np.ndarray:
            return f32(
                kv_rows(t, a["layout_kv"], b, a["actual_seq_lengths_kv"], a["block_table"], what)[
                    :, 0
                ]
            )

        k, v = rows(a["key"], "key"), rows(a["value"], "value")
        if a["key_rope"] is not None:
            k = np.concatenate([k, rows(a["key_rope"], "key_rope")], -1)
        s2, s1 = k.shape[0], end - start
        for i in range(s1):
            qi = f32(q_rows[start + i])  # [N1, D]
            if qr_rows is not None:
                qi = np.concatenate([qi, f32(qr_rows[start + i])], -1)
            chosen = [int(x) for x in idx_rows[start + i, 0] if x >= 0]
            pos = np.unique(
                np.concatenate([np.arange(c * block, (c + 1) * block) for c in chosen])
                if chosen
                else np.zeros(0, np.int64)
            )
            limit = i + s2 - s1 if a["sparse_mode"] == 3 else s2 - 1
            pos = pos[(pos <= limit) & (pos < s2)]
            if pos.size == 0:
                continue
            score = qi @ k[pos].T * np.float32(a["scale_value"])  # [N1, P]
            p = np.exp(score - score.max(-1, keepdims=True))
            out[start + i] = (p / p.sum(-1, keepdims=True)) @ v[pos]
    shape = (*q.shape[:-1], a["value"].shape[-1])
    empty = np.zeros((0,), np.float32)
    return cast(out.reshape(shape), q.dtype), empty, empty
