"""The fusion mappings: unfused PyTorch code -> a fused operator with mapped arguments.

One table, plain data (no numpy), so the planner can read it cheaply.  Every entry names
the proof in :mod:`kb.reference.proofs` that builds the unfused computation in numpy on
random inputs and compares it with the reference operator called as mapped; a mapping
whose proof does not pass must not be proposed (``tests/test_reference_mappings.py``
holds every id to a passing proof).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mapping:
    id: str
    unfused: str  # the code shape it replaces, in words
    target: str  # the record name of the fused operator (the first one called)
    arguments: str  # how the unfused values become the call's arguments
    also: tuple[str, ...] = ()  # further operators the mapped chain calls
    notes: str = ""


MAPPINGS: tuple[Mapping, ...] = (
    Mapping(
        "rms_norm",
        "x * rsqrt(mean(x**2, -1) + eps) * weight, computed in float32",
        "npu_rms_norm",
        "input=x, gamma=weight, epsilon=eps; take output 0",
    ),
    Mapping(
        "rms_norm_one_plus_w",
        "Gemma: x * rsqrt(mean(x**2, -1) + eps) * (1 + weight)",
        "npu_rms_norm",
        "input=x, gamma=1 + weight (precomputed once), epsilon=eps; output 0",
        also=("npu_gemma_rms_norm",),
        notes="npu_gemma_rms_norm(x, weight) takes the raw weight",
    ),
    Mapping(
        "add_rms_norm",
        "h = x + residual; y = rms_norm(h) * weight; both h and y used",
        "npu_add_rms_norm",
        "x1=x, x2=residual, gamma=weight, epsilon=eps; y is output 0, "
        "the new residual h is output 2",
    ),
    Mapping(
        "layer_norm",
        "F.layer_norm(x, (H,), weight, bias, eps) in inference",
        "npu_layer_norm_eval",
        "input=x, normalized_shape=[H], weight, bias, eps",
    ),
    Mapping(
        "rope_half",
        "q * cos + rotate_half(q) * sin with cos = cat(freqs, freqs).cos()",
        "npu_rotary_mul",
        "input=q, r1=cos, r2=sin, rotary_mode='half' (cos/sin broadcast "
        "to q); q and k together: npu_apply_rotary_pos_emb(q, k, cos, sin, layout='BSND')",
        also=("npu_apply_rotary_pos_emb",),
    ),
    Mapping(
        "rope_interleave",
        "view_as_complex(x.float().unflatten(-1, (-1, 2))) * freqs_cis, "
        "view_as_real(...).flatten(-2): rotation of adjacent pairs",
        "npu_rotary_mul",
        "input=x, r1=freqs_cis.real repeated twice per pair "
        "(repeat_interleave(2, -1)), r2=freqs_cis.imag likewise, rotary_mode='interleave'",
    ),
    Mapping(
        "rope_deinterleave",
        "DeepSeek MLA: x.view(..., D/2, 2).transpose(-1, -2).reshape(..., D), "
        "then q * cos + rotate_half(q) * sin",
        "npu_interleave_rope",
        "x=x [B, N, S, D], cos, sin in the half layout ([B, 1, S, D]); the output is in the "
        "de-interleaved order, not the input's",
    ),
    Mapping(
        "swiglu",
        "gate, up = x.chunk(2, -1); silu(gate) * up (gate first)",
        "npu_swiglu",
        "input=x (the merged gate_up projection), dim=-1",
    ),
    Mapping(
        "swiglu_dynamic_quant",
        "silu(gate) * up with gate the left half, then per-token "
        "int8 quant (scale = rowmax|y| / 127)",
        "npu_dequant_swiglu_quant",
        "x=x, activate_left=True, quant_mode=1; the default activate_left=False activates "
        "the right half",
    ),
    Mapping(
        "geglu",
        "gate, up = x.chunk(2, -1); gelu(gate, approximate='tanh') * up",
        "npu_geglu",
        "input=x, dim=-1, approximate=1 (0 for the erf GELU), activate_left=True "
        "(the default False activates the right half); take output 0",
    ),
    Mapping(
        "gelu_tanh",
        "0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x**3)))",
        "npu_gelu",
        "input=x, approximate='tanh'",
        notes="npu_fast_gelu is x * sigmoid(1.702 x), a different curve: not this mapping",
    ),
    Mapping(
        "router_softmax_topk",
        "w, ids = topk(softmax(logits.float(), -1), k); w /= w.sum(-1) when norm_topk_prob",
        "npu_moe_gating_top_k_softmax",
        "x=logits, k=k; outputs (w, ids, "
        "row_idx); the operator does not renormalise: with norm_topk_prob divide w by its sum after",
        also=("npu_moe_gating_top_k",),
        notes="equivalently npu_moe_gating_top_k(logits, k, norm_type=0)",
    ),
    Mapping(
        "router_softmax_bias_topk",
        "s = softmax(logits); ids = topk(s + bias, k); w = s[ids]",
        "npu_moe_gating_top_k",
        "x=logits, k=k, bias=bias, norm_type=0 (no renorm in softmax mode)",
    ),
    Mapping(
        "router_sigmoid_bias_group_topk",
        "DeepSeek-V3: s = sigmoid(logits); group score = sum "
        "of the top-2 of (s + bias) per group; keep topk_group groups; ids = topk(s + bias); "
        "w = s[ids] / (sum + 1e-20) * routed_scaling_factor",
        "npu_moe_gating_top_k",
        "x=logits, k=k, bias=bias, k_group=topk_group, group_count=n_group, "
        "group_select_mode=1, norm_type=1, routed_scaling_factor, eps=1e-20",
        notes="norm_type=1 always renormalises the chosen weights; group_select_mode=0 scores "
        "a group by its max instead",
    ),
    Mapping(
        "router_topk_then_sigmoid",
        "Llama-4: vals, ids = topk(logits, k); w = sigmoid(vals) (no renormalisation)",
        "npu_moe_gating_top_k",
        "x=logits, k=k, norm_type=1, out_flag=True; ids = output 1; w = "
        "take_along_dim(output 2 (the sigmoid of every expert), ids); output 0 is renormalised "
        "and is NOT w",
    ),
    Mapping(
        "moe_experts_loop",
        "for each expert e: rows routed to e -> expert MLP; out[t] += "
        "w[t, j] * mlp_e(x[t]) over the token's top-k",
        "npu_moe_init_routing_v2",
        "expanded_x, expanded_row_idx, counts, _ = npu_moe_init_routing_v2(x, ids, "
        "expert_num=E, active_expert_range=[0, E], expert_tokens_num_flag=True, "
        "expert_tokens_num_type=1); h = npu_grouped_matmul([expanded_x], [w1], "
        "group_list=counts, group_list_type=1, group_type=0, split_item=3); activation; "
        "y = npu_grouped_matmul([h], [w2], ...); out = npu_moe_finalize_routing(y, None, "
        "None, None, w, expanded_row_idx, ids, drop_pad_mode=2, k=K)",
        also=("npu_grouped_matmul", "npu_moe_finalize_routing"),
        notes="expanded_row_idx is indexed token-major (t * K + j): drop_pad_mode=2; "
        "drop_pad_mode=0 reads it expert-slot-major",
    ),
    Mapping(
        "moe_experts_loop_permute",
        "the same expert loop",
        "npu_moe_token_permute",
        "p, order = npu_moe_token_permute(x, ids); counts per expert -> npu_grouped_matmul "
        "(group_list_type=1); out = npu_moe_token_unpermute(y, order, probs=w)",
        also=("npu_grouped_matmul", "npu_moe_token_unpermute"),
    ),
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
    ),
    Mapping(
        "attention_paged",
        "attention over keys gathered from a block cache by block_table",
        "npu_fused_infer_attention_score_v2",
        "key/value = the caches (blocks, block_size, H), block_table, block_size, actual_seq_kvlen",
    ),
    Mapping(
        "cache_write_paged",
        "key_cache.view(-1, N, D)[slot] = k (likewise v) for slot >= 0",
        "_npu_reshape_and_cache",
        "key, value, key_cache, value_cache, slot_indices=slots",
        also=("npu_scatter_pa_kv_cache",),
        notes="npu_scatter_pa_kv_cache: cache_mode='Norm' for these ND caches, 'PA_NZ' (the "
        "default) for [blocks, N*D/c0, block_size, c0]",
    ),
    Mapping(
        "cache_write_contiguous",
        "MLA: c = rms_norm(kv[..., :512]) * gamma; k_pe = "
        "deinterleaved rope(kv[..., 512:]); ckv_cache[b, 0, pos] = c; k_cache[b, 0, pos] = "
        "k_pe",
        "npu_kv_rmsnorm_rope_cache",
        "kv, gamma, cos, sin, index=pos [B, S], k_cache, ckv_cache, cache_mode='Norm'",
    ),
    Mapping(
        "dynamic_quant_int8_matmul",
        "s = absmax(x, -1) / 127; xq = round(x / s); y = (xq @ wq) * s[:, None] * w_scale",
        "npu_dynamic_quant",
        "xq, s = npu_dynamic_quant(x); y = npu_quant_matmul(xq, wq, w_scale, pertoken_scale=s, "
        "output_dtype=bfloat16)",
        also=("npu_quant_matmul",),
    ),
    Mapping(
        "weight_only_int8_matmul",
        "x @ ((wq + offset) * scale) (+ bias)",
        "npu_weight_quant_batchmatmul",
        "x, weight=wq, antiquant_scale=scale, "
        "antiquant_offset=offset (per channel; antiquant_group_size=g per group)",
    ),
    Mapping(
        "gelu",
        "nn.GELU() / F.gelu(x): 0.5 * x * (1 + erf(x / sqrt(2)))",
        "npu_gelu",
        "input=x, approximate='none' (the default)",
        notes="npu_fast_gelu is x * sigmoid(1.702 x), a different curve: not this mapping",
    ),
    Mapping(
        "router_sigmoid_topk",
        "s = sigmoid(logits); w, ids = topk(s, k); w /= w.sum(-1) when "
        "norm_topk_prob (no bias, no groups)",
        "npu_moe_gating_top_k",
        "x=logits, k=k, norm_type=1, out_flag=True; ids = output 1; renormalised: w = output 0; "
        "not renormalised: w = take_along_dim(output 2, ids)",
        notes="norm_type=1 always renormalises output 0; routed_scaling_factor multiplies it",
    ),
    Mapping(
        "router_topk_then_softmax",
        "vals, ids = topk(logits, k); w = softmax(vals, -1)",
        "npu_moe_gating_top_k_softmax",
        "x=logits, k=k; ids = output 1; w = output 0 / "
        "output 0.sum(-1, keepdim=True) (softmax over the k chosen equals the full softmax "
        "at ids renormalised)",
        also=("npu_moe_gating_top_k",),
        notes="equivalently npu_moe_gating_top_k(logits, k, norm_type=0) and the same division",
    ),
    Mapping(
        "moe_experts_bmm",
        "stacked expert weights [E, H, F]: every token through every "
        "expert by bmm, summed with a dense [T, E] routing matrix (zero where not chosen)",
        "npu_moe_init_routing_v2",
        "as moe_experts_loop: the dense matrix's nonzero columns are "
        "ids and w (topk of the router); w1[e], w2[e] are the per-expert weights",
        also=("npu_grouped_matmul", "npu_moe_finalize_routing"),
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
                "npu_fusion_attention",
                *(() if layout == "TND" else ("npu_prompt_flash_attention",)),
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
    ),
    Mapping(
        "dequant_swiglu_quant",
        "W8A8: h = int32 gate_up result * weight_scale[channel] * "
        "activation_scale[token]; silu(gate) * up (gate the left half); per-token int8 quant",
        "npu_dequant_swiglu_quant",
        "x=the int32 result, weight_scale, activation_scale, "
        "activate_left=True, quant_mode=1; grouped expert weights: weight_scale [E, 2H], "
        "group_index = tokens per expert",
    ),
    Mapping(
        "add_rms_norm_quant",
        "W8A8 static: h = x + residual; y = rms_norm(h) * weight; "
        "q = clamp(round(y / scale + offset), -128, 127), per-tensor scale and offset",
        "npu_add_rms_norm_quant",
        "x1=x, x2=residual, gamma=weight, scales1=scale expanded to "
        "weight's shape, zero_points1=offset likewise (int32), epsilon=eps, div_mode=True; q is "
        "output 0, h output 2",
        notes="div_mode=False multiplies: pass 1/scale then",
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
    ),
    Mapping(
        "lightning_indexer",
        "DeepSeek-V3.2 Indexer: score = sum_h w[h] * relu(q_h · k) with w = "
        "weights_proj(x) * n_heads^-0.5 * softmax_scale; causal mask; topk(score, index_topk)",
        "npu_lightning_indexer",
        "query=q [B, S, H, 128], key=k [B, S2, 1, 128], weights=w with the "
        "scales folded in, sparse_count=index_topk, sparse_mode=3; output 0 holds the chosen "
        "positions (order not stated by the page)",
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
        )
        for family in ("gqa", "noncausal")
        for layout in ("TND_NTD", "NTD_TND")
    ),
)

BY_ID: dict[str, Mapping] = {m.id: m for m in MAPPINGS}
