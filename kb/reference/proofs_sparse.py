"""Equivalence proofs of the routing, expert, attention and cache-write mappings."""

from __future__ import annotations

from typing import Any

import numpy as np

from kb.reference import run
from kb.reference.proving import FLOATS, HALVES, LOW, Check, rounded


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _topk(v: np.ndarray, k: int) -> np.ndarray:
    return np.argsort(-v, axis=-1, kind="stable")[:, :k]


def router_softmax_topk(rng: np.random.Generator) -> list[Check]:
    logits = rounded(rng, (9, 16), "float32", 2.0)
    p = _softmax(logits)
    ids = _topk(p, 4)
    w = np.take_along_axis(p, ids, -1)
    y, got_ids, _ = run("npu_moe_gating_top_k_softmax", logits, k=4)
    y2, ids2, _ = run("npu_moe_gating_top_k", logits, 4, norm_type=0)
    # norm_topk_prob=True (Mixtral, Qwen3-MoE): divide after the call
    renorm = w / w.sum(-1, keepdims=True)
    return [
        Check("gating_top_k_softmax ids", got_ids, ids.astype(np.int32)),
        Check("weights", y, w),
        Check("gating_top_k norm_type=0 ids", ids2, ids.astype(np.int32)),
        Check("weights 2", y2, w),
        Check("renormalised weights", y / y.sum(-1, keepdims=True), renorm),
    ]


def router_softmax_bias_topk(rng: np.random.Generator) -> list[Check]:
    logits, bias = rounded(rng, (7, 24), "float32"), rounded(rng, (24,), "float32", 0.5)
    p = _softmax(logits)
    ids = _topk(p + bias, 3)
    y, got, _ = run("npu_moe_gating_top_k", logits, 3, bias=bias, norm_type=0)
    return [
        Check("ids", got, ids.astype(np.int32)),
        Check("weights", y, np.take_along_axis(p, ids, -1)),
    ]


def _deepseek_router(
    logits: np.ndarray, bias: np.ndarray, k: int, groups: int, keep: int, factor: float
) -> tuple[np.ndarray, np.ndarray]:
    s = _sigmoid(logits)
    biased = s + bias
    t, e = logits.shape
    grouped = biased.reshape(t, groups, e // groups)
    group_score = np.sort(grouped, -1)[..., -2:].sum(-1)
    chosen = _topk(group_score, keep)
    gmask = np.zeros((t, groups), bool)
    np.put_along_axis(gmask, chosen, True, -1)
    masked = np.where(np.repeat(gmask, e // groups, -1), biased, -np.inf)
    ids = _topk(masked, k)
    w = np.take_along_axis(s, ids, -1)
    return ids, w / (w.sum(-1, keepdims=True) + 1e-20) * factor


def router_sigmoid_bias_group_topk(rng: np.random.Generator) -> list[Check]:
    logits, bias = rounded(rng, (8, 32), "float32"), rounded(rng, (32,), "float32", 0.3)
    ids, w = _deepseek_router(logits, bias, 4, 4, 2, 2.5)
    y, got, _ = run(
        "npu_moe_gating_top_k",
        logits,
        4,
        bias=bias,
        k_group=2,
        group_count=4,
        group_select_mode=1,
        norm_type=1,
        routed_scaling_factor=2.5,
        eps=1e-20,
    )
    return [Check("ids", got, ids.astype(np.int32)), Check("weights", y, w.astype(np.float32))]


def router_topk_then_sigmoid(rng: np.random.Generator) -> list[Check]:
    logits = rounded(rng, (6, 16), "float32")
    ids = _topk(logits, 1)
    w = _sigmoid(np.take_along_axis(logits, ids, -1))
    _, got, norm_out = run("npu_moe_gating_top_k", logits, 1, norm_type=1, out_flag=True)
    return [
        Check("ids", got, ids.astype(np.int32)),
        Check("weights", np.take_along_axis(norm_out, got.astype(np.int64), -1), w),
    ]


def _experts_unfused(
    x: np.ndarray,
    ids: np.ndarray,
    w: np.ndarray,
    w1: np.ndarray,
    w2: np.ndarray,
    b1: np.ndarray | None = None,
    b2: np.ndarray | None = None,
) -> np.ndarray:
    """Each expert's MLP (with its own biases when given) on its tokens, weighted."""
    out = np.zeros((x.shape[0], w2.shape[-1]), np.float32)
    for e in range(w1.shape[0]):
        tok, slot = np.nonzero(ids == e)
        if tok.size:
            h = x[tok].astype(np.float32) @ w1[e].astype(np.float32)
            if b1 is not None:
                h = h + b1[e].astype(np.float32)
            h = h.astype(x.dtype).astype(np.float32)
            y = np.maximum(h, 0).astype(x.dtype).astype(np.float32) @ w2[e].astype(np.float32)
            if b2 is not None:
                y = y + b2[e].astype(np.float32)
            out[tok] += w[tok, slot][:, None] * y.astype(x.dtype).astype(np.float32)
    return out.astype(x.dtype)


def _moe_case(rng: np.random.Generator, dt: str) -> tuple[np.ndarray, ...]:
    t, h, f, e, k = 7, 16, 8, 4, 2
    x = rounded(rng, (t, h), dt)
    ids = np.stack([rng.permutation(e)[:k] for _ in range(t)]).astype(np.int32)
    w = rounded(rng, (t, k), dt, 0.5)
    return x, ids, w, rounded(rng, (e, h, f), dt, 0.3), rounded(rng, (e, f, h), dt, 0.3)


def moe_experts_loop(rng: np.random.Generator, facts: Any = None, args: Any = None) -> list[Check]:
    """The expert loop as routing, two grouped matmuls and a finalize; experts whose
    projections add a bias (``expert_bias``) give each grouped matmul the stacked biases."""
    biased = bool((facts or {}).get("expert_bias"))
    out = []
    for dt in FLOATS[::2]:  # float32 and bfloat16
        x, ids, w, w1, w2 = _moe_case(rng, dt)
        b1 = rounded(rng, (4, w1.shape[-1]), "float32", 0.3) if biased else None
        b2 = rounded(rng, (4, w2.shape[-1]), "float32", 0.3) if biased else None
        ex, row_idx, counts, _ = run(
            "npu_moe_init_routing_v2",
            x,
            ids,
            expert_num=4,
            active_expert_range=[0, 4],
            expert_tokens_num_flag=True,
            expert_tokens_num_type=1,
        )
        h = run(
            "npu_grouped_matmul",
            [ex],
            [w1],
            bias=None if b1 is None else [b1],
            group_list=counts,
            group_list_type=1,
            group_type=0,
            split_item=3,
        )[0]
        h = np.maximum(h.astype(np.float32), 0).astype(h.dtype)
        y = run(
            "npu_grouped_matmul",
            [h],
            [w2],
            bias=None if b2 is None else [b2],
            group_list=counts,
            group_list_type=1,
            group_type=0,
            split_item=3,
        )[0]
        got = run(
            "npu_moe_finalize_routing", y, None, None, None, w, row_idx, ids, drop_pad_mode=2, k=2
        )
        want = _experts_unfused(x, ids, w, w1, w2, b1, b2)
        out.append(
            Check(
                f"experts via init_routing/gmm/finalize {dt}{' biased' if biased else ''}",
                got,
                want,
            )
        )
    return out


def moe_experts_loop_permute(rng: np.random.Generator) -> list[Check]:
    out = []
    for dt in FLOATS[::2]:  # float32 and bfloat16
        x, ids, w, w1, w2 = _moe_case(rng, dt)
        p, order = run("npu_moe_token_permute", x, ids)
        counts = np.bincount(ids.reshape(-1), minlength=4).astype(np.int64)
        h = run(
            "npu_grouped_matmul",
            [p],
            [w1],
            group_list=counts,
            group_list_type=1,
            group_type=0,
            split_item=3,
        )[0]
        h = np.maximum(h.astype(np.float32), 0).astype(h.dtype)
        y = run(
            "npu_grouped_matmul",
            [h],
            [w2],
            group_list=counts,
            group_list_type=1,
            group_type=0,
            split_item=3,
        )[0]
        got = run("npu_moe_token_unpermute", y, order, probs=w)
        out.append(
            Check(
                f"experts via permute/gmm/unpermute {dt}", got, _experts_unfused(x, ids, w, w1, w2)
            )
        )
    return out


def causal_attention(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, window: int | None = None
) -> np.ndarray:
    """Unfused reference in BNSD: repeat_kv, scaled scores, bottom-right causal mask."""
    rep = q.shape[1] // k.shape[1]
    kk, vv = np.repeat(k.astype(np.float32), rep, 1), np.repeat(v.astype(np.float32), rep, 1)
    sq, skv = q.shape[2], k.shape[2]
    s = q.astype(np.float32) @ kk.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1])
    pos = np.arange(sq)[:, None] + (skv - sq)
    keys = np.arange(skv)[None, :]
    allowed = keys <= pos
    if window is not None:
        allowed &= keys > pos - window
    s = np.where(allowed, s, -np.inf)
    return _softmax(s) @ vv


COMPRESSED = np.triu(np.ones((2048, 2048), dtype=bool), k=1)


def _layout(t: np.ndarray, layout: str) -> np.ndarray:
    """BNSD -> the layout (TND flattens a batch whose rows share one length)."""
    if layout == "BNSD":
        return t
    bsnd = t.transpose(0, 2, 1, 3)
    if layout == "BSND":
        return bsnd
    if layout == "BSH":
        return bsnd.reshape(t.shape[0], t.shape[2], -1)
    return bsnd.reshape(-1, t.shape[1], t.shape[3])


#: varlen (TND) proofs: per-sequence query and key lengths that differ, so a causal mask
#: aligned top-left (the chunked-prefill mistake) differs from the bottom-right one
VARLEN_Q, VARLEN_KV = (3, 2), (7, 5)


def varlen(
    rng: np.random.Generator, dt: str, nq: int, nkv: int, d: int, reference: Any
) -> tuple[Any, ...]:
    """Sequences of VARLEN_Q queries over VARLEN_KV keys, packed TND: (q, k, v, the
    reference output, cumulative query ends, cumulative key ends)."""
    qs = [rounded(rng, (1, nq, s, d), dt) for s in VARLEN_Q]
    ks = [rounded(rng, (1, nkv, s, d), dt) for s in VARLEN_KV]
    vs = [rounded(rng, (1, nkv, s, d), dt) for s in VARLEN_KV]
    want = np.concatenate(
        [
            _layout(reference(q, k, v).astype(LOW[dt]), "TND")
            for q, k, v in zip(qs, ks, vs, strict=True)
        ]
    )
    packed = [np.concatenate([_layout(t, "TND") for t in ts]) for ts in (qs, ks, vs)]
    return (*packed, want, list(np.cumsum(VARLEN_Q)), list(np.cumsum(VARLEN_KV)))


def batched(
    rng: np.random.Generator, dt: str, layout: str, dims: tuple[int, ...], reference: Any
) -> tuple[Any, ...]:
    """A batch of B sequences (Sq queries, Skv keys; dims = (B, Nq, Nkv, Sq, Skv, D)) in the
    layout: (q, k, v, the reference output)."""
    b, nq, nkv, sq, skv, d = dims
    q = rounded(rng, (b, nq, sq, d), dt)
    k, v = rounded(rng, (b, nkv, skv, d), dt), rounded(rng, (b, nkv, skv, d), dt)
    want = _layout(reference(q, k, v).astype(LOW[dt]), layout)
    return _layout(q, layout), _layout(k, layout), _layout(v, layout), want


def attention(
    layout: str, rng: np.random.Generator, sparse_mode: int = 3, pass_kv_heads: bool = True
) -> list[Check]:
    """GQA causal attention (bottom-right aligned) in each layout.  ``sparse_mode`` and
    ``pass_kv_heads`` exist to show the proof failing on the classic mistakes."""
    out = []
    b, nq, nkv, sq, skv, d = 2, 4, 2, 3, 7, 16
    heads = {"num_key_value_heads": nkv} if pass_kv_heads else {}
    for dt in HALVES:
        if layout == "TND":
            ql, kl, vl, want, q_ends, kv_ends = varlen(rng, dt, nq, nkv, d, causal_attention)
            fia = {"actual_seq_lengths": q_ends, "actual_seq_lengths_kv": kv_ends}
            v2 = fa = {"actual_seq_qlen": q_ends, "actual_seq_kvlen": kv_ends}
        else:
            ql, kl, vl, want = batched(rng, dt, layout, (b, nq, nkv, sq, skv, d), causal_attention)
            fia, v2, fa = {}, {}, {}
        mask = {"sparse_mode": sparse_mode, "atten_mask": COMPRESSED}
        got = run(
            "npu_fused_infer_attention_score",
            ql,
            kl,
            vl,
            num_heads=nq,
            scale=1 / np.sqrt(d),
            input_layout=layout,
            **heads,
            **mask,
            **fia,
        )[0]
        out.append(Check(f"FIA {layout} {dt}", got, want))
        got2 = run(
            "npu_fused_infer_attention_score_v2",
            ql,
            kl,
            vl,
            num_query_heads=nq,
            softmax_scale=1 / np.sqrt(d),
            input_layout=layout,
            **heads,
            **mask,
            **v2,
        )[0]
        out.append(Check(f"FIA v2 {layout} {dt}", got2, want))
        got3 = run(
            "npu_fusion_attention", ql, kl, vl, nq, layout, scale=1 / np.sqrt(d), **mask, **fa
        )[0]
        out.append(Check(f"fusion_attention {layout} {dt}", got3, want))
        if layout != "TND":
            got4 = run(
                "npu_prompt_flash_attention",
                ql,
                kl,
                vl,
                num_heads=nq,
                scale_value=1 / np.sqrt(d),
                input_layout=layout,
                **heads,
                **mask,
            )
            out.append(Check(f"prompt_flash_attention {layout} {dt}", got4, want))
    return out


def attention_sliding_window(rng: np.random.Generator) -> list[Check]:
    q, k, v = (rounded(rng, (1, 2, s, 8), "float16") for s in (5, 9, 9))
    want = causal_attention(q, k, v, window=3).astype(np.float16)
    got = run(
        "npu_fused_infer_attention_score",
        q,
        k,
        v,
        num_heads=2,
        scale=1 / np.sqrt(8),
        input_layout="BNSD",
        sparse_mode=4,
        pre_tokens=3 - 1,
        next_tokens=0,
        atten_mask=COMPRESSED,
    )[0]
    return [Check("sliding window band", got, want)]


def attention_paged(rng: np.random.Generator) -> list[Check]:
    b, n, d, bs, lens = 2, 2, 8, 128, [130, 40]
    q = rounded(rng, (b, 1, n * d), "float16")
    cache_k, cache_v = (
        rounded(rng, (5, bs, n * d), "float16"),
        rounded(rng, (5, bs, n * d), "float16"),
    )
    table = np.array([[3, 0], [4, 1]], np.int32)
    outs = []
    for i, length in enumerate(lens):
        rows_k = cache_k[table[i]].reshape(-1, n, d)[:length].transpose(1, 0, 2)[None]
        rows_v = cache_v[table[i]].reshape(-1, n, d)[:length].transpose(1, 0, 2)[None]
        qi = q[i].reshape(1, n, d).transpose(1, 0, 2)[None]
        outs.append(causal_attention(qi, rows_k, rows_v)[0].transpose(1, 0, 2).reshape(1, n * d))
    want = np.stack(outs).astype(np.float16)
    got = run(
        "npu_fused_infer_attention_score_v2",
        q,
        cache_k,
        cache_v,
        num_query_heads=n,
        softmax_scale=1 / np.sqrt(d),
        input_layout="BSH",
        block_table=table,
        block_size=bs,
        actual_seq_kvlen=lens,
    )[0]
    return [Check("paged read", got, want)]


def cache_write_paged(rng: np.random.Generator) -> list[Check]:
    t, n, d, blocks, bs = 5, 2, 16, 4, 8
    key, value = rounded(rng, (t, n, d), "float16"), rounded(rng, (t, n, d), "float16")
    slots = np.array([3, 17, -1, 30, 8], np.int32)
    want_k, want_v = (
        np.zeros((blocks, bs, n, d), np.float16),
        np.zeros((blocks, bs, n, d), np.float16),
    )
    flat_k, flat_v = want_k.reshape(-1, n, d), want_v.reshape(-1, n, d)
    for i, s in enumerate(slots):
        if s >= 0:
            flat_k[s], flat_v[s] = key[i], value[i]
    kc, vc = np.zeros_like(want_k), np.zeros_like(want_v)
    run("_npu_reshape_and_cache", key, value, kc, vc, slots)
    kc2, vc2 = np.zeros_like(want_k), np.zeros_like(want_v)
    run("npu_scatter_pa_kv_cache", key, value, kc2, vc2, slots, cache_mode="Norm")
    nz_k = np.zeros((blocks, n * d // 16, bs, 16), np.float16)
    run("npu_scatter_pa_kv_cache", key, value, nz_k, np.zeros_like(nz_k), slots)
    nd_from_nz = nz_k.transpose(0, 2, 1, 3).reshape(blocks, bs, n, d)
    return [
        Check("reshape_and_cache k", kc, want_k),
        Check("reshape_and_cache v", vc, want_v),
        Check("scatter_pa_kv_cache Norm k", kc2, want_k),
        Check("scatter_pa_kv_cache Norm v", vc2, want_v),
        Check("scatter_pa_kv_cache PA_NZ k", nd_from_nz, want_k),
    ]


def cache_write_scatter(rng: np.random.Generator) -> list[Check]:
    """Token i's key goes to row slot[i] of the cache seen as [slots, N, D]: a coordinate
    per token ([T, 1] indices), every slot a real one (the scatter checks no padding)."""
    t, n, d, blocks, bs = 5, 2, 16, 4, 8
    key = rounded(rng, (t, n, d), "bfloat16")
    slots = np.array([3, 17, 9, 30, 8], np.int64)
    want = np.zeros((blocks, bs, n, d), LOW["bfloat16"])
    want.reshape(-1, n, d)[slots] = key
    cache = np.zeros_like(want)
    run("npu_scatter_nd_update_", cache.reshape(-1, n, d), slots[:, None], key)
    return [Check("scatter_nd_update_ k", cache, want)]


def cache_write_contiguous(rng: np.random.Generator) -> list[Check]:
    b, s, cache_len = 2, 3, 6
    kv = rounded(rng, (b, 1, s, 576), "bfloat16")
    gamma = rounded(rng, (512,), "bfloat16")
    ang = rng.random((b, 1, s, 32)).astype(np.float32)
    cos = np.cos(np.concatenate([ang, ang], -1)).astype(LOW["bfloat16"])
    sin = np.sin(np.concatenate([ang, ang], -1)).astype(LOW["bfloat16"])
    pos = np.array([[0, 1, 2], [4, 5, -1]], np.int64)
    c = kv[..., :512].astype(np.float32)
    c = c / np.sqrt((c**2).mean(-1, keepdims=True) + 1e-5) * gamma.astype(np.float32)
    pe = (
        kv[..., 512:]
        .astype(np.float32)
        .reshape(b, 1, s, 32, 2)
        .transpose(0, 1, 2, 4, 3)
        .reshape(b, 1, s, 64)
    )
    half = np.concatenate([-pe[..., 32:], pe[..., :32]], -1)
    pe = pe * cos.astype(np.float32) + half * sin.astype(np.float32)
    want_k = np.zeros((b, 1, cache_len, 64), LOW["bfloat16"])
    want_c = np.zeros((b, 1, cache_len, 512), LOW["bfloat16"])
    for i in range(b):
        for j in range(s):
            if pos[i, j] >= 0:
                want_k[i, 0, pos[i, j]] = pe[i, 0, j].astype(LOW["bfloat16"])
                want_c[i, 0, pos[i, j]] = c[i, 0, j].astype(LOW["bfloat16"])
    kc, cc = np.zeros_like(want_k), np.zeros_like(want_c)
    run("npu_kv_rmsnorm_rope_cache", kv, gamma, cos, sin, pos, kc, cc, cache_mode="Norm")
    return [Check("k_cache", kc, want_k), Check("ckv_cache", cc, want_c)]
