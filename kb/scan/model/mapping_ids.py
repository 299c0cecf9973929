"""The mapping ids the inventory and the planner tag modules and stages with, in one place.

Each id names an entry of the fusion-mapping table (:mod:`kb.reference.mappings`) whose
numpy proof says the fused call computes what the unfused code does.  The planner only
emits ids listed here (attention ids are a family plus the stage's layout), so a test can
hold every one of them to the table (``tests/test_mapping_coverage.py``).
"""

from __future__ import annotations

from kb.reference.mappings import MAPPINGS

RMS_NORM = "rms_norm"
RMS_NORM_ONE_PLUS_W = "rms_norm_one_plus_w"
ADD_RMS_NORM = "add_rms_norm"
ADD_RMS_NORM_QUANT = "add_rms_norm_quant"
LAYER_NORM = "layer_norm"
ROPE_HALF = "rope_half"
ROPE_INTERLEAVE = "rope_interleave"
SWIGLU = "swiglu"
DEQUANT_SWIGLU_QUANT = "dequant_swiglu_quant"
GEGLU = "geglu"
GELU = "gelu"
GELU_TANH = "gelu_tanh"
ROUTER_SOFTMAX_TOPK = "router_softmax_topk"
ROUTER_SOFTMAX_BIAS_TOPK = "router_softmax_bias_topk"
ROUTER_SIGMOID_TOPK = "router_sigmoid_topk"
ROUTER_SIGMOID_BIAS_GROUP_TOPK = "router_sigmoid_bias_group_topk"
ROUTER_TOPK_THEN_SIGMOID = "router_topk_then_sigmoid"
ROUTER_TOPK_THEN_SOFTMAX = "router_topk_then_softmax"
ROUTER_UNKNOWN = "router_unknown"
MOE_EXPERTS_LOOP = "moe_experts_loop"
MOE_EXPERTS_BMM = "moe_experts_bmm"
CACHE_WRITE_PAGED = "cache_write_paged"
CACHE_WRITE_CONTIGUOUS = "cache_write_contiguous"
MLA_PROLOG = "mla_prolog"
MLA_KV_NORM_ROPE_CACHE = "mla_kv_norm_rope_cache"
MLA_ABSORB_BMM = "mla_absorb_bmm"
LIGHTNING_INDEXER = "lightning_indexer"
SPARSE_ATTENTION_MLA = "sparse_attention_mla"
GATED_DELTA_RULE = "gated_delta_rule"
DYNAMIC_QUANT_INT8_MATMUL = "dynamic_quant_int8_matmul"
UNKNOWN = "unknown"

# inventory only: modules of these kinds get no plan (need() is None for them)
RMS_NORM_GATED = "rms_norm_gated"
ADD_LAYER_NORM = "add_layer_norm"
ADALN_PREFIX = "adaln_"  # + the inner norm kind + "_norm"

ROUTERS: tuple[str, ...] = (
    ROUTER_SOFTMAX_TOPK,
    ROUTER_SOFTMAX_BIAS_TOPK,
    ROUTER_SIGMOID_TOPK,
    ROUTER_SIGMOID_BIAS_GROUP_TOPK,
    ROUTER_TOPK_THEN_SIGMOID,
    ROUTER_TOPK_THEN_SOFTMAX,
)

#: attention ids are ``<family>_<layout>``, the layout being the stage's lower-cased
#: ``input_layout`` / ``layout`` argument (DEFAULT_LAYOUT when the stage fixes none)
ATTENTION_GQA = "attention_gqa"
ATTENTION_NONCAUSAL = "attention_noncausal"
ATTENTION_MLA = "attention_mla"
ATTENTION_FAMILIES: tuple[str, ...] = (ATTENTION_GQA, ATTENTION_NONCAUSAL, ATTENTION_MLA)
DEFAULT_LAYOUT = "bsnd"

#: the ids a plan stage can carry: the rows of the pattern table that match modules
#: (kb.reference.mappings); FALLBACKS say the planner could not tell what a stage replaces
PLANNED: tuple[str, ...] = tuple(m.id for m in MAPPINGS if m.pattern is not None and m.pattern.on)
FALLBACKS: tuple[str, ...] = (ROUTER_UNKNOWN, UNKNOWN)


def attention(family: str, layout: str) -> str:
    """The id of an attention stage of one family in one layout."""
    return f"{family}_{layout.lower()}"


def adaln(inner_kind: str) -> str:
    """The id of an adaptive norm around ``norm.<inner_kind>``."""
    return f"{ADALN_PREFIX}{inner_kind}_norm"
