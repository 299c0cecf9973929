"""Which operators have a numpy reference, and where it lives.

Plain data, no numpy: ``kb.reference.available()`` and the readers that only list or
describe the references import this, never the numpy modules.
"""

from __future__ import annotations

#: record name -> ``module:function`` under :mod:`kb.reference`.
IMPLEMENTATIONS: dict[str, str] = {
    "npu_rms_norm": "norm:rms_norm",
    "npu_gemma_rms_norm": "norm:gemma_rms_norm",
    "npu_add_rms_norm": "norm:add_rms_norm",
    "npu_add_rms_norm_quant": "norm:add_rms_norm_quant",
    "npu_layer_norm_eval": "norm:layer_norm_eval",
    "npu_rotary_mul": "rope:rotary_mul",
    "npu_apply_rotary_pos_emb": "rope:apply_rotary_pos_emb",
    "npu_interleave_rope": "rope:interleave_rope",
    "npu_swiglu": "activation:swiglu",
    "npu_geglu": "activation:geglu",
    "npu_fast_gelu": "activation:fast_gelu",
    "fast_gelu": "activation:fast_gelu",
    "npu_silu": "activation:silu",
    "npu_gelu": "activation:gelu",
    "npu_dynamic_quant": "quant:dynamic_quant",
    "npu_quantize": "quant:quantize",
    "npu_quant_matmul": "quant:quant_matmul",
    "npu_weight_quant_batchmatmul": "quant:weight_quant_batchmatmul",
    "npu_dequant_swiglu_quant": "quant:dequant_swiglu_quant",
    "npu_moe_gating_top_k_softmax": "moe:gating_top_k_softmax",
    "npu_moe_gating_top_k": "moe:gating_top_k",
    "npu_moe_init_routing_v2": "moe:init_routing_v2",
    "npu_grouped_matmul": "moe:grouped_matmul",
    "npu_moe_finalize_routing": "moe:finalize_routing",
    "npu_moe_token_permute": "moe:token_permute",
    "npu_moe_token_unpermute": "moe:token_unpermute",
    "npu_fused_infer_attention_score": "attention:fused_infer_attention_score",
    "npu_fused_infer_attention_score_v2": "attention:fused_infer_attention_score_v2",
    "npu_prompt_flash_attention": "attention:prompt_flash_attention",
    "npu_fusion_attention": "attention:fusion_attention",
    "npu_scatter_pa_kv_cache": "cache:scatter_pa_kv_cache",
    "_npu_reshape_and_cache": "cache:reshape_and_cache",
    "npu_kv_rmsnorm_rope_cache": "cache:kv_rmsnorm_rope_cache",
    "npu_kv_rmsnorm_rope_cache_v2": "cache:kv_rmsnorm_rope_cache_v2",
    "npu_transpose_batchmatmul": "matmul:transpose_batchmatmul",
    "npu_lightning_indexer": "indexer:lightning_indexer",
    "npu_sparse_flash_attention": "sparse:sparse_flash_attention",
    "npu_recurrent_gated_delta_rule": "linear:recurrent_gated_delta_rule",
    "npu_chunk_gated_delta_rule": "linear:chunk_gated_delta_rule",
    "npu_clipped_swiglu": "glu:clipped_swiglu",
    "npu_gelu_mul": "glu:gelu_mul",
    "npu_group_norm_silu": "norm_quant:group_norm_silu",
    "npu_add_rms_norm_cast": "norm_quant:add_rms_norm_cast",
    "npu_rms_norm_quant": "norm_quant:rms_norm_quant",
    "npu_add_rms_norm_dynamic_quant": "norm_quant:add_rms_norm_dynamic_quant",
    "npu_dynamic_quant_asymmetric": "quant_dyn:dynamic_quant_asymmetric",
    "npu_anti_quant": "quant_dyn:anti_quant",
    "npu_trans_quant_param": "quant_dyn:trans_quant_param",
    "npu_convert_weight_to_int4pack": "quant_dyn:convert_weight_to_int4pack",
    "npu_dynamic_mx_quant": "mx:dynamic_mx_quant",
    "npu_dynamic_block_quant": "mx:dynamic_block_quant",
    "npu_moe_init_routing": "routing:init_routing",
    "npu_moe_compute_expert_tokens": "routing:compute_expert_tokens",
    "npu_moe_re_routing": "routing:re_routing",
    "npu_grouped_matmul_finalize_routing": "routing:grouped_matmul_finalize_routing",
    "npu_moe_distribute_dispatch_v2": "distribute:dispatch_v2",
    "npu_moe_distribute_combine_v2": "distribute:combine_v2",
    "npu_incre_flash_attention": "decode:incre_flash_attention",
    "_npu_paged_attention": "decode:paged_attention",
    "npu_attention_update": "decode:attention_update",
    "npu_mrope": "rope_cache:mrope",
    "_npu_rotary_embedding": "rope_cache:rotary_embedding",
    "npu_top_k_top_p": "sampling:top_k_top_p",
    "npu_scatter_nd_update_": "scatter:scatter_nd_update",
    "scatter_update_": "scatter:scatter_update",
    "npu_gather_pa_kv_cache": "scatter:gather_pa_kv_cache",
    "npu_mla_prolog_v3": "mla:mla_prolog_v3",
    "npu_mla_prolog_v2": "mla:mla_prolog_v2",
}

#: record ranges a reference accepts one more value of, because it models a situation the
#: device has no counterpart for: operator -> parameter -> the extra values.  The MC2
#: dispatch/combine pair computes an expert-parallel group of one rank (the emulator's
#: single process); the kernels' tiling requires at least two ranks.
WIDENED: dict[str, dict[str, tuple[int, ...]]] = {
    "npu_moe_distribute_dispatch_v2": {"ep_world_size": (1,)},
    "npu_moe_distribute_combine_v2": {"ep_world_size": (1,)},
}
