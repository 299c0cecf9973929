"""The hyper-parameters a model's configuration names, and every spelling of each.

One row per hyper-parameter: ``config.json`` of transformers writes
``num_attention_heads``, llama's ``params.json`` ``n_heads``, a research repo's dataclass
``num_heads``; the model reader (:mod:`kb.scan.model.modelconfig`) treats them as one
fact.  The first spelling is the canonical name the plan reports.
"""

from __future__ import annotations

from typing import NamedTuple


class ModelKeyDef(NamedTuple):
    name: str  # canonical
    spellings: tuple[str, ...]  # every key meaning it (the canonical name first)
    about: str


MODEL_KEYS: tuple[ModelKeyDef, ...] = (
    ModelKeyDef(
        "hidden_size",
        (
            "hidden_size",
            "dim",
            "d_model",
            "n_embd",
            "model_dim",
            "embed_dim",
            "hidden_dim_model",
            "emb_dim",
        ),
        "width of the residual stream",
    ),
    ModelKeyDef(
        "num_attention_heads",
        (
            "num_attention_heads",
            "n_heads",
            "num_heads",
            "n_head",
            "heads",
            "attention_heads",
            "num_attention_head",
            "n_attn_heads",
            "num_q_heads",
        ),
        "query heads",
    ),
    ModelKeyDef(
        "num_key_value_heads",
        (
            "num_key_value_heads",
            "n_kv_heads",
            "num_kv_heads",
            "n_kv_head",
            "multi_query_group_num",
            "kv_heads",
            "num_kv_groups",
            "n_kv_groups",
        ),
        "key/value heads (GQA)",
    ),
    ModelKeyDef(
        "head_dim",
        (
            "head_dim",
            "attention_head_dim",
            "kv_channels",
            "d_head",
            "head_size",
            "dim_head",
            "attn_head_dim",
        ),
        "width of one attention head",
    ),
    ModelKeyDef(
        "intermediate_size",
        (
            "intermediate_size",
            "ffn_hidden_size",
            "ffn_dim",
            "n_inner",
            "inner_dim",
            "mlp_dim",
            "ff_dim",
        ),
        "width of the feed-forward",
    ),
    ModelKeyDef(
        "hidden_act",
        (
            "hidden_act",
            "activation_function",
            "act_fn",
            "activation_fn",
            "hidden_activation",
            "activation",
            "ffn_act_fn",
            "mlp_act",
            "act_layer",
        ),
        "the feed-forward activation",
    ),
    ModelKeyDef(
        "num_experts",
        (
            "num_experts",
            "n_routed_experts",
            "num_local_experts",
            "moe_num_experts",
            "n_experts",
            "num_routed_experts",
            "moe_experts",
        ),
        "routed experts",
    ),
    ModelKeyDef(
        "num_experts_per_tok",
        (
            "num_experts_per_tok",
            "top_k",
            "moe_k",
            "n_activated_experts",
            "num_selected_experts",
            "moe_topk",
            "router_topk",
            "moe_top_k",
            "num_experts_per_token",
        ),
        "experts per token",
    ),
    ModelKeyDef(
        "n_group",
        (
            "n_group",
            "num_expert_group",
            "n_expert_groups",
            "moe_n_group",
            "n_expert_group",
            "num_expert_groups",
        ),
        "expert groups of the router",
    ),
    ModelKeyDef(
        "topk_group",
        ("topk_group", "n_limited_groups", "topk_groups", "moe_topk_group", "num_limited_groups"),
        "groups kept per token",
    ),
    ModelKeyDef(
        "routed_scaling_factor",
        ("routed_scaling_factor", "route_scale", "routed_scaling", "moe_routed_scaling_factor"),
        "scale of the routing weights",
    ),
    ModelKeyDef(
        "scoring_func",
        (
            "scoring_func",
            "score_func",
            "router_score_function",
            "moe_router_score_function",
            "gate_score_func",
            "router_scoring_func",
        ),
        "softmax or sigmoid router scores",
    ),
    ModelKeyDef(
        "norm_topk_prob",
        ("norm_topk_prob", "moe_renormalize", "renormalize", "norm_topk", "route_norm"),
        "routing weights renormalised",
    ),
    ModelKeyDef(
        "sliding_window",
        (
            "sliding_window",
            "window_size",
            "attention_window_size",
            "local_window_size",
            "sliding_window_size",
        ),
        "attention window",
    ),
    ModelKeyDef(
        "rope_theta",
        ("rope_theta", "theta", "rotary_emb_base", "rope_base", "rotary_base"),
        "RoPE base frequency",
    ),
    ModelKeyDef(
        "rotary_dim",
        ("rotary_dim", "rope_dim", "qk_rope_head_dim", "rotary_emb_dim", "rotary_ndims"),
        "rotated width of a head",
    ),
    ModelKeyDef(
        "partial_rotary_factor",
        ("partial_rotary_factor", "rotary_pct", "rope_pct"),
        "fraction of a head rotated",
    ),
    ModelKeyDef(
        "rms_norm_eps",
        (
            "rms_norm_eps",
            "norm_eps",
            "layer_norm_eps",
            "layer_norm_epsilon",
            "norm_epsilon",
            "epsilon",
        ),
        "norm epsilon",
    ),
    ModelKeyDef(
        "num_hidden_layers",
        ("num_hidden_layers", "n_layers", "num_layers", "n_layer", "depth"),
        "decoder layers",
    ),
    ModelKeyDef("q_lora_rank", ("q_lora_rank",), "MLA query compression"),
    ModelKeyDef("kv_lora_rank", ("kv_lora_rank",), "MLA key/value compression"),
    ModelKeyDef(
        "use_qk_norm",
        ("use_qk_norm", "qk_norm", "qk_layernorm", "use_qk_layernorm"),
        "query/key norms",
    ),
    ModelKeyDef(
        "rope_interleave",
        ("rope_interleave", "rotary_interleaved", "interleaved_rope"),
        "RoPE over adjacent pairs",
    ),
    ModelKeyDef("is_causal", ("is_causal", "causal"), "causal self-attention"),
)

#: spelling -> canonical name
MODEL_KEY_OF: dict[str, str] = {s: row.name for row in MODEL_KEYS for s in row.spellings}
#: canonical name -> its row
MODEL_KEY_BY_NAME: dict[str, ModelKeyDef] = {row.name: row for row in MODEL_KEYS}
#: the sub-configurations a multimodal checkpoint nests the language model's keys under
NESTED_CONFIGS: tuple[str, ...] = (
    "text_config",
    "llm_config",
    "language_config",
    "text_model",
    "language_model_config",
    "decoder_config",
)
