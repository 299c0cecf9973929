"""Run the equivalence proof of a mapping: ``verify(id)`` -> the checks that failed."""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from kb.reference import proofs_dense as dense
from kb.reference import proofs_mla as mla
from kb.reference import proofs_more as more
from kb.reference import proofs_sparse as sparse
from kb.reference.errors import ReferenceInputError
from kb.reference.mappings import BY_ID
from kb.reference.proving import Check, failures

Proof = Callable[[np.random.Generator], list[Check]]

PROOFS: dict[str, Proof] = {
    "rms_norm": dense.rms_norm,
    "rms_norm_one_plus_w": dense.rms_norm_one_plus_w,
    "add_rms_norm": dense.add_rms_norm,
    "layer_norm": dense.layer_norm,
    "rope_half": dense.rope_half,
    "rope_interleave": dense.rope_interleave,
    "rope_deinterleave": dense.rope_deinterleave,
    "swiglu": dense.swiglu,
    "swiglu_dynamic_quant": dense.swiglu_dynamic_quant,
    "geglu": dense.geglu,
    "gelu_tanh": dense.gelu_tanh,
    "router_softmax_topk": sparse.router_softmax_topk,
    "router_softmax_bias_topk": sparse.router_softmax_bias_topk,
    "router_sigmoid_bias_group_topk": sparse.router_sigmoid_bias_group_topk,
    "router_topk_then_sigmoid": sparse.router_topk_then_sigmoid,
    "moe_experts_loop": sparse.moe_experts_loop,
    "moe_experts_loop_permute": sparse.moe_experts_loop_permute,
    **{
        f"attention_gqa_{lay.lower()}": functools.partial(sparse.attention, lay)
        for lay in ("BSH", "BSND", "BNSD", "TND")
    },
    "attention_sliding_window": sparse.attention_sliding_window,
    "attention_paged": sparse.attention_paged,
    "cache_write_paged": sparse.cache_write_paged,
    "cache_write_contiguous": sparse.cache_write_contiguous,
    "dynamic_quant_int8_matmul": dense.dynamic_quant_int8_matmul,
    "weight_only_int8_matmul": dense.weight_only_int8_matmul,
    "gelu": more.gelu,
    "router_sigmoid_topk": more.router_sigmoid_topk,
    "router_topk_then_softmax": more.router_topk_then_softmax,
    "moe_experts_bmm": more.moe_experts_bmm,
    **{
        f"attention_noncausal_{lay.lower()}": functools.partial(more.attention_noncausal, lay)
        for lay in ("BSH", "BSND", "BNSD", "TND")
    },
    "mla_kv_norm_rope_cache": more.mla_kv_norm_rope_cache,
    "dequant_swiglu_quant": more.dequant_swiglu_quant,
    "add_rms_norm_quant": more.add_rms_norm_quant,
    **{
        f"attention_mla_{lay.lower()}": functools.partial(mla.attention_mla, lay)
        for lay in ("BSH", "BSND", "TND", "TND_NTD", "NTD_TND")
    },
    "mla_absorb_bmm": mla.mla_absorb_bmm,
    "lightning_indexer": mla.lightning_indexer,
    "gated_delta_rule": mla.gated_delta_rule,
    "sparse_attention_mla": mla.sparse_attention_mla,
    **{
        f"attention_{family}_{lay.lower()}": functools.partial(
            more.attention_split_layout, family == "gqa", lay
        )
        for family in ("gqa", "noncausal")
        for lay in ("TND_NTD", "NTD_TND")
    },
}


def verify(mapping_id: str, seed: int = 0) -> list[str]:
    """What differs between the unfused computation and the mapped call (empty: proven)."""
    if mapping_id not in BY_ID:
        raise KeyError(f"no mapping {mapping_id!r}")
    proof = PROOFS.get(mapping_id)
    if proof is None:
        return [f"{mapping_id}: no proof"]
    try:
        return failures(proof(np.random.default_rng(seed)))
    except ReferenceInputError as exc:  # the mapped call is refused: not proven
        return [f"{mapping_id}: the mapped call is refused: {exc}"]
