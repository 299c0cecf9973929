"""Equivalence proofs of the planner's further mappings: the erf GELU, the sigmoid and
top-k-first softmax routers, the batched expert form, attention without a mask, and the
MLA latent-cache write in the contiguous and paged modes.

Each unfused side is written the way modelling code writes it (Hugging Face style,
numpy in float32 from the same low-precision inputs), independent of the reference
operator's own code.
"""

from __future__ import annotations

import math

import numpy as np

from kb.reference import run
from kb.reference.proofs_sparse import _moe_case, _softmax, _topk, batched, varlen
from kb.reference.proving import FLOATS, HALVES, LOW, Check, rounded

_ERF = np.frompyfunc(math.erf, 1, 1)


def gelu(rng: np.random.Generator) -> list[Check]:
    """nn.GELU() / F.gelu(x): 0.5 x (1 + erf(x / sqrt 2)) -> npu_gelu(x, approximate='none')."""
    out = []
    for dt in FLOATS:
        x = rounded(rng, (7, 30), dt, 2.0)
        h = x.astype(np.float64)
        erf = np.asarray(_ERF(h / math.sqrt(2.0)), dtype=np.float64)
        want = (0.5 * h * (1.0 + erf)).astype(np.float32)
        out.append(
            Check(f"gelu erf {dt}", run("npu_gelu", x, approximate="none"), want.astype(LOW[dt]))
        )
        out.append(Check(f"gelu erf default {dt}", run("npu_gelu", x), want.astype(LOW[dt])))
    return out


def router_sigmoid_topk(rng: np.random.Generator) -> list[Check]:
    """s = sigmoid(logits); w, ids = topk(s, k); w /= w.sum() when norm_topk_prob."""
    logits = rounded(rng, (8, 16), "float32", 2.0)
    s = 1.0 / (1.0 + np.exp(-logits))
    ids = _topk(s, 3)
    w = np.take_along_axis(s, ids, -1)
    y, got, norm_out = run("npu_moe_gating_top_k", logits, 3, norm_type=1, out_flag=True)
    return [
        Check("ids", got, ids.astype(np.int32)),
        Check("renormalised weights (output 0)", y, w / w.sum(-1, keepdims=True)),
        Check(
            "raw weights (output 2 at ids)",
            np.take_along_axis(norm_out, got.astype(np.int64), -1),
            w,
        ),
    ]


def router_topk_then_softmax(rng: np.random.Generator) -> list[Check]:
    """vals, ids = topk(logits, k); w = softmax(vals): the softmax over all experts taken at
    ids and renormalised over the k chosen (exp(v_i) / sum_k exp(v_j) either way)."""
    logits = rounded(rng, (9, 16), "float32", 2.0)
    ids = _topk(logits, 4)
    w = _softmax(np.take_along_axis(logits, ids, -1))
    y, got, _ = run("npu_moe_gating_top_k_softmax", logits, k=4)
    y2, got2, _ = run("npu_moe_gating_top_k", logits, 4, norm_type=0)
    return [
        Check("ids", got, ids.astype(np.int32)),
        Check("weights", y / y.sum(-1, keepdims=True), w),
        Check("gating_top_k ids", got2, ids.astype(np.int32)),
        Check("gating_top_k weights", y2 / y2.sum(-1, keepdims=True), w),
    ]


def moe_experts_bmm(rng: np.random.Generator) -> list[Check]:
    """Stacked expert weights applied to every token by bmm, weighted by a dense [T, E]
    routing matrix (zero for experts not chosen) -> init_routing / grouped matmul / finalize."""
    out = []
    for dt in FLOATS[::2]:  # float32 and bfloat16
        x, ids, w, w1, w2 = _moe_case(rng, dt)
        e = w1.shape[0]
        dense = np.zeros((x.shape[0], e), np.float32)
        np.put_along_axis(dense, ids.astype(np.int64), w.astype(np.float32), -1)
        xs = np.broadcast_to(x.astype(np.float32), (e, *x.shape))  # hidden.repeat(E, 1, 1)
        h = (xs @ w1.astype(np.float32)).astype(x.dtype).astype(np.float32)
        y = (np.maximum(h, 0).astype(x.dtype).astype(np.float32) @ w2.astype(np.float32)).astype(
            x.dtype
        )
        want = (y.astype(np.float32) * dense.T[..., None]).sum(0).astype(x.dtype)
        ex, row_idx, counts, _ = run(
            "npu_moe_init_routing_v2",
            x,
            ids,
            expert_num=e,
            active_expert_range=[0, e],
            expert_tokens_num_flag=True,
            expert_tokens_num_type=1,
        )
        hh = run(
            "npu_grouped_matmul",
            [ex],
            [w1],
            group_list=counts,
            group_list_type=1,
            group_type=0,
            split_item=3,
        )[0]
        hh = np.maximum(hh.astype(np.float32), 0).astype(hh.dtype)
        yy = run(
            "npu_grouped_matmul",
            [hh],
            [w2],
            group_list=counts,
            group_list_type=1,
            group_type=0,
            split_item=3,
        )[0]
        got = run(
            "npu_moe_finalize_routing",
            yy,
            None,
            None,
            None,
            w,
            row_idx,
            ids,
            drop_pad_mode=2,
            k=ids.shape[1],
        )
        out.append(Check(f"bmm experts via init_routing/gmm/finalize {dt}", got, want))
    return out


def _full_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """softmax(q kᵀ / sqrt(D)) v in BNSD with no mask (SDPA with is_causal=False)."""
    rep = q.shape[1] // k.shape[1]
    kk, vv = np.repeat(k.astype(np.float32), rep, 1), np.repeat(v.astype(np.float32), rep, 1)
    s = q.astype(np.float32) @ kk.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1])
    return _softmax(s) @ vv


def attention_noncausal(layout: str, rng: np.random.Generator) -> list[Check]:
    """Bidirectional attention (DiT, vision towers): no mask, sparse_mode=0; TND packs
    sequences whose query and key lengths differ."""
    out = []
    b, n, sq, skv, d = 2, 4, 5, 9, 16
    for dt in HALVES:
        if layout == "TND":
            ql, kl, vl, want, q_ends, kv_ends = varlen(rng, dt, n, n, d, _full_attention)
            extra = {"actual_seq_lengths": q_ends, "actual_seq_lengths_kv": kv_ends}
            fa = {"actual_seq_qlen": q_ends, "actual_seq_kvlen": kv_ends}
        else:
            ql, kl, vl, want = batched(rng, dt, layout, (b, n, n, sq, skv, d), _full_attention)
            extra, fa = {}, {}
        got = run(
            "npu_fused_infer_attention_score",
            ql,
            kl,
            vl,
            num_heads=n,
            scale=1 / np.sqrt(d),
            input_layout=layout,
            sparse_mode=0,
            **extra,
        )[0]
        out.append(Check(f"FIA no mask {layout} {dt}", got, want))
        got2 = run(
            "npu_fusion_attention", ql, kl, vl, n, layout, scale=1 / np.sqrt(d), sparse_mode=0, **fa
        )[0]
        out.append(Check(f"fusion_attention no mask {layout} {dt}", got2, want))
        if layout != "TND":
            got3 = run(
                "npu_prompt_flash_attention",
                ql,
                kl,
                vl,
                num_heads=n,
                scale_value=1 / np.sqrt(d),
                input_layout=layout,
                sparse_mode=0,
            )
            out.append(Check(f"prompt_flash_attention no mask {layout} {dt}", got3, want))
    return out


def _mla_kv(rng: np.random.Generator, b: int, s: int) -> tuple[np.ndarray, ...]:
    """DeepSeek MLA's compressed kv [B, 1, S, 512 + 64], the norm weight, and half-layout cos/sin."""
    kv = rounded(rng, (b, 1, s, 576), "bfloat16")
    gamma = rounded(rng, (512,), "bfloat16")
    ang = rng.random((b, 1, s, 32)).astype(np.float32)
    cos = np.cos(np.concatenate([ang, ang], -1)).astype(LOW["bfloat16"])
    sin = np.sin(np.concatenate([ang, ang], -1)).astype(LOW["bfloat16"])
    # unfused: kv_a_layernorm(compressed_kv) and apply_rotary_pos_emb on the de-interleaved k_pe
    c = kv[..., :512].astype(np.float32)
    c = c / np.sqrt((c**2).mean(-1, keepdims=True) + 1e-5) * gamma.astype(np.float32)
    pe = (
        kv[..., 512:]
        .astype(np.float32)
        .reshape(b, 1, s, 32, 2)
        .transpose(0, 1, 2, 4, 3)
        .reshape(b, 1, s, 64)
    )
    pe = pe * cos.astype(np.float32) + np.concatenate(
        [-pe[..., 32:], pe[..., :32]], -1
    ) * sin.astype(np.float32)
    return kv, gamma, cos, sin, c.astype(LOW["bfloat16"]), pe.astype(LOW["bfloat16"])


def mla_kv_norm_rope_cache(rng: np.random.Generator) -> list[Check]:
    """The MLA latent path (norm of the 512 latent, rope of the 64 k_pe, both written to the
    cache) in one call: contiguous caches (cache_mode='Norm', index = positions [B, S]) and
    paged ones (cache_mode='PA', index = slots [B * S], caches [blocks, block_size, 1, D])."""
    b, s, cache_len, blocks, bs = 2, 3, 6, 3, 4
    kv, gamma, cos, sin, c, pe = _mla_kv(rng, b, s)
    pos = np.array([[0, 1, 2], [4, 5, -1]], np.int64)
    want_k, want_c = (
        np.zeros((b, 1, cache_len, 64), LOW["bfloat16"]),
        np.zeros((b, 1, cache_len, 512), LOW["bfloat16"]),
    )
    slots = np.array([5, 6, 7, 0, 1, -1], np.int64)
    pk, pc = (
        np.zeros((blocks, bs, 1, 64), LOW["bfloat16"]),
        np.zeros((blocks, bs, 1, 512), LOW["bfloat16"]),
    )
    for i in range(b):
        for j in range(s):
            if pos[i, j] >= 0:
                want_k[i, 0, pos[i, j]], want_c[i, 0, pos[i, j]] = pe[i, 0, j], c[i, 0, j]
            slot = int(slots[i * s + j])
            if slot >= 0:  # key_cache.view(-1, 1, D)[slot] = k
                pk.reshape(-1, 1, 64)[slot, 0], pc.reshape(-1, 1, 512)[slot, 0] = (
                    pe[i, 0, j],
                    c[i, 0, j],
                )
    kc, cc = np.zeros_like(want_k), np.zeros_like(want_c)
    run("npu_kv_rmsnorm_rope_cache", kv, gamma, cos, sin, pos, kc, cc, cache_mode="Norm")
    gk, gc = np.zeros_like(pk), np.zeros_like(pc)
    run("npu_kv_rmsnorm_rope_cache", kv, gamma, cos, sin, slots, gk, gc, cache_mode="PA")
    return [
        Check("Norm k_cache", kc, want_k),
        Check("Norm ckv_cache", cc, want_c),
        Check("PA k_cache", gk, pk),
        Check("PA ckv_cache", gc, pc),
        *mla_kv_norm_rope_cache_v2_nz(rng),
    ]


def _dynamic_quant_rows(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-token symmetric int8: scale = rowmax|y| / 127, q = round(y / scale)."""
    scale = np.abs(y).max(-1) / 127.0
    return np.clip(np.rint(y / scale[:, None]), -128, 127).astype(np.int8), scale.astype(np.float32)


def dequant_swiglu_quant(rng: np.random.Generator) -> list[Check]:
    """W8A8 FFN/expert middle: the int32 result of the int8 gate_up matmul dequantized
    (x * weight_scale[channel] * activation_scale[token]), silu(gate) * up with gate the
    left half, then per-token dynamic int8 quant -> one npu_dequant_swiglu_quant call
    (activate_left=True, quant_mode=1; group_index = tokens per expert for grouped weights)."""
    t, h, g = 6, 16, 2
    xq = rng.integers(-127, 128, (t, 24)).astype(np.int8)
    wq = rng.integers(-127, 128, (g, 24, 2 * h)).astype(np.int8)
    counts = np.array([4, 2], np.int64)
    expert = np.repeat(np.arange(g), counts)
    acc = np.einsum("tk,tkn->tn", xq.astype(np.int64), wq[expert].astype(np.int64)).astype(np.int32)
    w_scale = (rng.random((g, 2 * h)) * 1e-3 + 1e-4).astype(np.float32)
    a_scale = (rng.random(t) * 0.02 + 0.005).astype(np.float32)
    deq = acc.astype(np.float32) * w_scale[expert] * a_scale[:, None]
    gate, up = deq[:, :h], deq[:, h:]
    want_q, want_s = _dynamic_quant_rows(gate / (1.0 + np.exp(-gate)) * up)
    got_q, got_s = run(
        "npu_dequant_swiglu_quant",
        acc,
        weight_scale=w_scale,
        activation_scale=a_scale,
        group_index=counts,
        activate_left=True,
        quant_mode=1,
    )
    dense_q, dense_s = run(
        "npu_dequant_swiglu_quant",
        acc[:4],
        weight_scale=w_scale[0],
        activation_scale=a_scale[:4],
        activate_left=True,
        quant_mode=1,
    )
    return [
        Check("grouped int8 out", got_q, want_q),
        Check("grouped scale", got_s, want_s),
        Check("dense int8 out", dense_q, want_q[:4]),
        Check("dense scale", dense_s, want_s[:4]),
    ]


def add_rms_norm_quant(rng: np.random.Generator) -> list[Check]:
    """W8A8 static: h = x + residual (in the model dtype); y = rms_norm(h) * weight (in the
    model dtype); q = clamp(round(y / scale + offset), -128, 127) with a per-tensor scale and
    offset -> npu_add_rms_norm_quant(x, residual, weight, scales1=scale expanded to weight's
    shape, zero_points1=offset likewise, div_mode=True); q is output 0, the new residual output 2.
    The fused op rounds neither h nor y: one int8 step, the stated tolerance."""
    out = []
    for dt in HALVES:
        x, res, w = rounded(rng, (6, 64), dt), rounded(rng, (6, 64), dt), rounded(rng, (64,), dt)
        scale, offset = np.float32(0.02), 3
        h = (x.astype(np.float32) + res.astype(np.float32)).astype(LOW[dt])
        hf = h.astype(np.float32)
        y = (hf / np.sqrt((hf**2).mean(-1, keepdims=True) + 1e-6) * w.astype(np.float32)).astype(
            LOW[dt]
        )
        want = np.clip(np.rint(y.astype(np.float32) / scale + offset), -128, 127).astype(np.int8)
        q, _, h_out = run(
            "npu_add_rms_norm_quant",
            x,
            res,
            w,
            np.full(64, scale, np.float32),
            np.full(64, offset, np.int32),
            epsilon=1e-6,
            div_mode=True,
        )
        out += [
            Check(f"add_rms_norm_quant y1 {dt}", q, want),
            Check(f"add_rms_norm_quant residual {dt}", h_out, h),
        ]
    return out


def attention_split_layout(
    causal: bool, layout: str, rng: np.random.Generator, sparse_mode: int = 3
) -> list[Check]:
    """GQA (causal, bottom-right) or bidirectional attention in the FIA layouts whose output
    differs from the input: TND_NTD writes (N, T, D), NTD_TND reads (N, T, D) inputs; the
    packed sequences have query and key lengths that differ."""
    from kb.reference.proofs_sparse import COMPRESSED, causal_attention

    out = []
    nq, nkv, d = 4, 2, 16
    for dt in HALVES:
        ql, kl, vl, want, q_ends, kv_ends = varlen(
            rng, dt, nq, nkv, d, causal_attention if causal else _full_attention
        )
        if layout == "NTD_TND":
            ql, kl, vl = (np.ascontiguousarray(t.swapaxes(0, 1)) for t in (ql, kl, vl))
        else:
            want = np.ascontiguousarray(want.swapaxes(0, 1))
        mask = (
            {"sparse_mode": sparse_mode, "atten_mask": COMPRESSED} if causal else {"sparse_mode": 0}
        )
        got = run(
            "npu_fused_infer_attention_score",
            ql,
            kl,
            vl,
            num_heads=nq,
            num_key_value_heads=nkv,
            scale=1 / np.sqrt(d),
            input_layout=layout,
            actual_seq_lengths=q_ends,
            actual_seq_lengths_kv=kv_ends,
            **mask,
        )[0]
        got2 = run(
            "npu_fused_infer_attention_score_v2",
            ql,
            kl,
            vl,
            num_query_heads=nq,
            num_key_value_heads=nkv,
            softmax_scale=1 / np.sqrt(d),
            input_layout=layout,
            actual_seq_qlen=q_ends,
            actual_seq_kvlen=kv_ends,
            **mask,
        )[0]
        out += [Check(f"FIA {layout} {dt}", got, want), Check(f"FIA v2 {layout} {dt}", got2, want)]
    return out


def mla_kv_norm_rope_cache_v2_nz(rng: np.random.Generator) -> list[Check]:
    """The chain's in-place successor: npu_kv_rmsnorm_rope_cache_v2(..., cache_mode='PA_NZ',
    is_output_kv=True) writes the NZ caches [blocks, D / 16, block_size, 16] by slot and
    returns (rotated k_pe, normalized latent) - the same values as the unfused path."""
    b, s, blocks, bs = 2, 3, 3, 16
    kv, gamma, cos, sin, c, pe = _mla_kv(rng, b, s)
    slots = np.array([5, 6, 7, 16, 17, -1], np.int64)
    k_nz, c_nz = (
        np.zeros((blocks, 64 // 16, bs, 16), LOW["bfloat16"]),
        np.zeros((blocks, 512 // 16, bs, 16), LOW["bfloat16"]),
    )
    k_out, y_out = run(
        "npu_kv_rmsnorm_rope_cache_v2",
        kv,
        gamma,
        cos,
        sin,
        slots,
        k_nz.reshape(blocks, bs, 1, 64),
        c_nz.reshape(blocks, bs, 1, 512),
        cache_mode="PA_NZ",
        is_output_kv=True,
    )
    checks = [Check("v2 k_embed_out", k_out, pe), Check("v2 y_out", y_out, c)]
    for i, slot in enumerate(slots):
        if slot >= 0:
            blk, row = divmod(int(slot), bs)
            checks += [
                Check(f"NZ k slot {slot}", k_nz[blk, :, row, :].reshape(-1), pe.reshape(-1, 64)[i]),
                Check(
                    f"NZ ckv slot {slot}", c_nz[blk, :, row, :].reshape(-1), c.reshape(-1, 512)[i]
                ),
            ]
    return checks
