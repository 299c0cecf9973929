"""The attention rows of the fusion-pattern table (:mod:`kb.reference.mappings`): softmax
attention causal and bidirectional in each layout, cache writes, latent attention (MLA),
the lightning indexer, sparse attention and the gated delta rule."""

from __future__ import annotations

from kb.reference.patterns import ABSENT, PRESENT, Mapping, Pattern, arg, on

_CAUSAL = (
    on("attention.gqa", causal=(True,)),
    on("attention.mha", causal=(True,)),
    on("attention.gqa", causal=("caller",), cache=(PRESENT,)),
    on("attention.mha", causal=("caller",), cache=(PRESENT,)),
)
_BIDIRECTIONAL = (
    on("attention", causal=(False,)),
    on("attention", causal=("caller",), cache=(ABSENT,)),
    on("attention.dit"),
    on("attention.vision"),
)
_SINKS = arg("learnable_sink", "sinks", tensor=True)


ATTENTION_ROWS: tuple[Mapping, ...] = (
    *(
        Mapping(
            f"attention_gqa_{layout.lower()}",
            "repeat_kv(k, v, Nq / Nkv); softmax(q kᵀ * scale "
            "+ causal mask) v, the mask aligned to the bottom-right (queries are the last Sq "
            "positions)",
            "npu_fused_infer_attention_score",
            f"query, key, value in {layout} (no repeat_kv), num_heads=Nq, num_key_value_heads=Nkv, "
            "scale=1/sqrt(D), input_layout='" + layout + "', sparse_mode=3, atten_mask=the "
            "compressed 2048x2048 upper-triangular mask"
            + (", actual_seq_lengths(_kv) = cumulative lengths" if layout == "TND" else ""),
            also=(
                "npu_fused_infer_attention_score_v2",
                "npu_fusion_attention",
                *(() if layout == "TND" else ("npu_prompt_flash_attention",)),
            ),
            notes="sparse_mode=2 aligns causality to the top-left: equal only when Sq == Skv; "
            "npu_fusion_attention takes head_num and actual_seq_qlen/kvlen, "
            "npu_prompt_flash_attention scale_value",
            pattern=Pattern(
                _CAUSAL,
                ("attention",),
                (_SINKS,),
                proof=f"planned.attention:{layout}",
                proves=("causal",),
            ),
        )
        for layout in ("BSH", "BSND", "BNSD", "TND")
    ),
    Mapping(
        "attention_sliding_window",
        "causal attention over the last W keys (each query sees "
        "itself and the W - 1 keys before it)",
        "npu_fused_infer_attention_score",
        "sparse_mode=4, pre_tokens=W - 1, next_tokens=0, compressed atten_mask",
        notes="the band formula -pre_tokens <= j - i <= next_tokens follows the "
        "npu_fusion_attention page's mask code; vllm-ascend passes pre_tokens=W "
        "(attention_v1.py:702): the sources do not settle the off-by-one",
        pattern=Pattern((), ("attention",), proof="sparse.attention_sliding_window"),
    ),
    Mapping(
        "attention_paged",
        "attention over keys gathered from a block cache by block_table",
        "npu_fused_infer_attention_score_v2",
        "key/value = the caches (blocks, block_size, H), block_table, block_size, actual_seq_kvlen",
        pattern=Pattern((), ("attention",), proof="sparse.attention_paged"),
    ),
    Mapping(
        "cache_write_paged",
        "key_cache.view(-1, N, D)[slot] = k (likewise v) for slot >= 0",
        "_npu_reshape_and_cache",
        "key, value, key_cache, value_cache, slot_indices=slots",
        also=("npu_scatter_pa_kv_cache",),
        notes="npu_scatter_pa_kv_cache: cache_mode='Norm' for these ND caches, 'PA_NZ' (the "
        "default) for [blocks, N*D/c0, block_size, c0]",
        pattern=Pattern(
            (on("attention", cache=(PRESENT,)),),
            ("kv_cache_write",),
            proof="sparse.cache_write_paged",
            chain_prerequisite="paged-kv-cache",
        ),
    ),
    Mapping(
        "cache_write_scatter",
        "cache.view(-1, N, D)[slot] = k per token, one call per cache tensor, in place",
        "npu_scatter_nd_update_",
        "self=the cache viewed as [slots, N, D], indices=slots as [T, 1], updates=k [T, N, D]",
        notes="no slot is skipped: padding tokens need a slot of their own (the scatter "
        "does not check its indices)",
        pattern=Pattern(
            (on("attention", cache=(PRESENT,)),),
            ("kv_cache_write",),
            proof="sparse.cache_write_scatter",
        ),
    ),
    Mapping(
        "cache_write_contiguous",
        "MLA: c = rms_norm(kv[..., :512]) * gamma; k_pe = "
        "deinterleaved rope(kv[..., 512:]); ckv_cache[b, 0, pos] = c; k_cache[b, 0, pos] = "
        "k_pe",
        "npu_kv_rmsnorm_rope_cache",
        "kv, gamma, cos, sin, index=pos [B, S], k_cache, ckv_cache, cache_mode='Norm'",
        pattern=Pattern(
            (on("attention", cache=(PRESENT,)), on("attention.mla")),
            ("kv_cache_write",),
            proof="sparse.cache_write_contiguous",
        ),
    ),
    *(
        Mapping(
            f"attention_noncausal_{layout.lower()}",
            "softmax(q kᵀ * scale) v with no mask (SDPA is_causal=False: DiT and vision encoders)",
            "npu_fused_infer_attention_score",
            f"query, key, value in {layout}, num_heads=N, scale=1/sqrt(D), input_layout='{layout}', "
            "sparse_mode=0, no atten_mask"
            + (
                ", actual_seq_lengths(_kv) = cumulative lengths "
                "(each sequence sees only its own keys)"
                if layout == "TND"
                else ""
            ),
            also=(
                "npu_fused_infer_attention_score_v2",
                "npu_fusion_attention",
                *(() if layout == "TND" else ("npu_prompt_flash_attention",)),
            ),
            pattern=Pattern(
                _BIDIRECTIONAL,
                ("flash_attention", "softmax"),
                (_SINKS,),
                proof=f"planned.attention_noncausal:{layout}",
                proves=("causal",),
            ),
        )
        for layout in ("BSH", "BSND", "BNSD", "TND")
    ),
    Mapping(
        "mla_kv_norm_rope_cache",
        "MLA latent path: c = kv_a_layernorm(kv[..., :512]); k_pe = "
        "rope(de-interleaved kv[..., 512:]); both written to the caches",
        "npu_kv_rmsnorm_rope_cache",
        "kv, gamma, cos, sin (half layout), index, k_cache, ckv_cache; contiguous caches: "
        "cache_mode='Norm', index = positions [B, S]; paged [blocks, block_size, 1, D]: "
        "cache_mode='PA', index = slot per token; NZ caches: cache_mode='PA_NZ'",
        also=("npu_kv_rmsnorm_rope_cache_v2",),
        notes="v2 writes the caches in place and returns (k_pe, latent) with is_output_kv=True",
        pattern=Pattern(
            (on("attention.mla"),),
            ("kv_cache_write", "rms_norm", "rope"),
            proof="more.mla_kv_norm_rope_cache",
        ),
    ),
    *(
        Mapping(
            f"attention_mla_{layout.lower()}",
            "DeepSeek MLA: per head k_nope = c W_uk[h], v = c "
            "W_uv[h] from the latent c; softmax(([q_nope, q_pe] · [k_nope, k_pe]ᵀ) / sqrt(192) + causal "
            "mask) v",
            "npu_fused_infer_attention_score",
            f"query = q_nope W_uk[h]ᵀ (absorbed, D 512), key = value = c (one KV head), query_rope = "
            f"q_pe, key_rope = k_pe, num_key_value_heads=1, scale=1/sqrt(qk_nope + qk_rope) (not "
            f"1/sqrt(512)), input_layout='{layout}', sparse_mode=3 with the compressed mask; output "
            "(the latent) times W_uv[h]"
            + (", actual_seq_lengths(_kv) cumulative" if "TND" in layout else ""),
            also=("npu_fused_infer_attention_score_v2",),
            notes=(
                "TND_NTD writes the output (N, T, D); NTD_TND reads (N, T, D) inputs"
                if "_" in layout
                else ""
            ),
            pattern=Pattern(
                (on("attention.mla"),), ("attention",), proof=f"mla.attention_mla:{layout}"
            ),
        )
        for layout in ("BSH", "BSND", "TND", "TND_NTD", "NTD_TND")
    ),
    Mapping(
        "mla_absorb_bmm",
        "MLA weight absorption per head: q_abs = einsum('tnd,ndc->tnc', q_nope, "
        "w_uk); out = einsum('tnc,ncd->tnd', latent, w_uv)",
        "npu_transpose_batchmatmul",
        "q: input=q_nope [T, N, 128], weight=w_uk [N, 128, 512], perm_x1=[1, 0, 2], perm_x2=[0, 1, 2], "
        "perm_y=[1, 0, 2] -> [T, N, 512]; v: input=the (N, T, 512) attention output (TND_NTD), "
        "weight=w_uv [N, 512, 128], perm_x1=[0, 1, 2] -> [T, N, 128]",
        notes="a [T, N, 512] latent output (TND) takes perm_x1=[1, 0, 2] instead",
        pattern=Pattern((on("attention.mla"),), ("batch_matmul",), proof="mla.mla_absorb_bmm"),
    ),
    Mapping(
        "lightning_indexer",
        "DeepSeek-V3.2 Indexer: score = sum_h w[h] * relu(q_h · k) with w = "
        "weights_proj(x) * n_heads^-0.5 * softmax_scale; causal mask; topk(score, index_topk)",
        "npu_lightning_indexer",
        "query=q [B, S, H, 128], key=k [B, S2, 1, 128], weights=w with the "
        "scales folded in, sparse_count=index_topk, sparse_mode=3; output 0 holds the chosen "
        "positions (order not stated by the page)",
        pattern=Pattern(
            (on("attention.mla", indexer=(PRESENT,)), on("attention.indexer")),
            ("lightning_indexer",),
            proof="mla.lightning_indexer",
        ),
    ),
    Mapping(
        "gated_delta_rule",
        "Qwen3-Next GatedDeltaNet core: l2norm(q), l2norm(k), repeat_interleave to "
        "the value heads, per token S = S * exp(g); S += k (beta (v - S k)); o = S q / sqrt(Dk), the "
        "state [B, H, Dk, Dv]",
        "npu_chunk_gated_delta_rule",
        "prefill: query, key (key heads, not repeated), value, beta, g, initial_state = state.transpose(-1, "
        "-2) ([B, Nv, Dv, Dk]), actual_seq_lengths, scale=Dk^-0.5 (the default is 1.0); decode: "
        "npu_recurrent_gated_delta_rule(query, key, value, state slots [blocks, Nv, Dv, Dk], beta, "
        "scale, actual_seq_lengths, ssm_state_indices, g), the slots updated in place",
        also=("npu_recurrent_gated_delta_rule",),
        pattern=Pattern(
            (on("attention.linear", variant=("gated-delta-rule",)),),
            ("linear_attention",),
            proof="mla.gated_delta_rule",
        ),
    ),
    Mapping(
        "sparse_attention_mla",
        "DeepSeek-V3.2 absorbed MLA: scores = (q_abs · c + q_pe · k_pe) * "
        "softmax_scale + index mask (-inf but at the indexer's top-k) + causal mask; softmax; times c",
        "npu_sparse_flash_attention",
        "query=q_abs, key=value=c [B, S2, 1, 512], sparse_indices=the "
        "top-k [B, S, 1, k], scale_value=softmax_scale, query_rope=q_pe, key_rope=k_pe, "
        "sparse_block_size=1, layout_query='BSND', layout_kv='BSND' (PA_BSND with block_table for "
        "a paged cache), sparse_mode=3, attention_mode=2",
        pattern=Pattern(
            (on("attention.mla", indexer=(PRESENT,)),),
            ("sparse_attention",),
            proof="mla.sparse_attention_mla",
        ),
    ),
    *(
        Mapping(
            f"attention_{family}_{layout.lower()}",
            (
                "repeat_kv; softmax(q kᵀ * scale + bottom-right causal mask) v"
                if family == "gqa"
                else "softmax(q kᵀ * scale) v with no mask"
            )
            + ", sequences packed "
            "(varlen)",
            "npu_fused_infer_attention_score",
            f"query, key, value in {layout.split('_')[0]}, input_layout='{layout}', num_heads=Nq, "
            "num_key_value_heads=Nkv, scale=1/sqrt(D), actual_seq_lengths(_kv) cumulative, "
            + (
                "sparse_mode=3 with the compressed mask"
                if family == "gqa"
                else "sparse_mode=0, no mask"
            )
            + "; the output is in "
            + layout.split("_")[1],
            also=("npu_fused_infer_attention_score_v2",),
            pattern=Pattern(
                _CAUSAL if family == "gqa" else _BIDIRECTIONAL,
                ("attention",) if family == "gqa" else ("flash_attention", "softmax"),
                (_SINKS,),
                proof=f"more.attention_split_layout:{family == 'gqa'}:{layout}",
                proves=("causal",),
            ),
        )
        for family in ("gqa", "noncausal")
        for layout in ("TND_NTD", "NTD_TND")
    ),
)
