"""What each inventory module asks of the records: the steps a plan must cover.

A module's kind and facts (:mod:`kb.scan.model.kinds`) become a :class:`Need`: the
primitive steps (the records' ``fuses`` vocabulary) its chain's operators must cover,
the words that favour or rule out a chain, the steps a kept stage must touch or must
not fuse, prerequisites, and the arguments the mapping implies.
:mod:`kb.scan.model.plan` chooses chains and operators for it, and tags each planned
stage with the proven mapping it stands for (:func:`mapping_id`, read from what the
stage's operator fuses).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kb.scan.model import mapping_ids as ids
from kb.scan.model.entry import Module


@dataclass
class Need:
    """What one module asks of the records."""

    category: str  # the chain ``module`` it belongs to
    steps: frozenset[str]  # every step the chain's operators must cover
    terms: tuple[str, ...] = ()  # words that favour a chain (name, title, keywords)
    refuse: frozenset[str] = frozenset()  # steps a kept stage's operator must not fuse
    keep: frozenset[str] = frozenset()  # steps a stage operator must touch to be kept
    prerequisites: tuple[str, ...] = ()
    implied: dict[str, Any] = field(default_factory=dict)  # args the mapping implies
    notes: list[str] = field(default_factory=list)
    #: a chain whose name or title says one of these is another module
    refuse_words: tuple[str, ...] = ()
    #: parameters an operator must take to express the mapping
    requires: frozenset[str] = frozenset()
    bidirectional: bool = False  # every query sees every key: no causal or banded stage fits


def need(m: Module) -> Need | None:
    """The steps and words of one module; None when it is planned through its parts."""
    f = m.facts
    if m.kind in ("attention.gqa", "attention.mha", "attention.dit", "attention.vision"):
        bidirectional = m.kind in ("attention.dit", "attention.vision") or f.get("causal") is False
        steps = {"flash_attention", "softmax"} if bidirectional else {"attention"}
        keep = {"attention", "flash_attention"}
        if f.get("rope") in ("half", "interleave"):
            steps.add("rope")
            keep.add("rope")
        if f.get("cache") == "past_key_values.update":
            steps.add("kv_cache_write")
            keep.add("kv_cache_write")
        if f.get("qk_norm") and all(v == "norm.rms" for v in f["qk_norm"].values()):
            keep.add("rms_norm")
        refuse = {
            "q_projection",
            "kv_projection",
            "linear_attention",
            "sparse_attention",
            "lightning_indexer",
            "residual_add",
        }
        if "kv_cache_write" not in steps:
            refuse.add("kv_cache_write")  # no cache in this module: no chain that writes one
        terms: tuple[str, ...] = ("gqa", "paged") if m.kind == "attention.gqa" else ("paged",)
        words = ["mla", "indexer"]
        if f.get("sinks"):
            terms += ("sinks",)
        else:
            words.append("sinks")
        if not f.get("sliding_window"):
            words.append("sliding")  # a window the module does not have is another function
        if "kv_cache_write" not in steps:
            words += ["paged", "contiguous", "cache"]
        implied = {"rotary_mode": f["rope"]} if f.get("rope") in ("half", "interleave") else {}
        per_instance = [
            "causal: the caller decides (is_causal argument); this plan is the causal "
            "self-attention one, the non-causal instances (encoder, cross-attention) need "
            "the full-visibility mask instead (mapping attention_noncausal)"
        ]
        return Need(
            "attention",
            frozenset(steps),
            terms,
            frozenset(refuse),
            frozenset(keep),
            implied=implied,
            refuse_words=tuple(words),
            bidirectional=bidirectional,
            notes=per_instance if isinstance(f.get("causal"), str) else [],
        )
    if m.kind == "attention.mla":
        # the projections are matmuls in every chain; what must be fused is the norm,
        # the rotation, the latent cache write and the attention over the latent cache
        steps = {"attention", "rms_norm", "rope", "kv_cache_write"}
        mla_words = ("gqa", "sinks") + (() if f.get("indexer") else ("indexer",))
        if f.get("indexer"):
            steps = (steps - {"attention"}) | {"lightning_indexer", "sparse_attention"}
        return Need(
            "attention",
            frozenset(steps),
            ("mla", "absorb"),
            frozenset({"residual_add"}),
            frozenset(steps | {"batch_matmul", "q_projection", "flash_attention"}),
            refuse_words=mla_words,
        )
    if m.kind == "attention.linear":
        if f.get("variant") not in ("gated-delta-rule", "lightning"):
            return None  # a state-space scan or an unknown recurrence: no operator computes it
        if f.get("variant") == "lightning":
            return Need(
                "attention",
                frozenset({"linear_attention"}),
                ("lightning",),
                frozenset({"state_update"}),
                frozenset({"linear_attention"}),
            )
        return Need(
            "attention",
            frozenset({"linear_attention"}),
            ("gdn", "gated", "delta"),
            frozenset({"softmax"}),
            frozenset({"linear_attention", "state_update"}),
        )
    if m.kind == "moe.router":
        r = f
        gate_steps = {"gating", "top_k", r["score"]} | ({"bias_add"} if r["bias"] else set())
        gate_terms = (
            (r["score"],) + (("bias",) if r["bias"] else ()) + (("group",) if r["groups"] else ())
        )
        renorm = (
            [
                "norm_topk_prob: the softmax gate operators return the top-k probabilities without "
                "renormalising them; when the config sets it, divide the weights by their sum after the call"
            ]
            if r["score"] == "softmax" and r.get("renormalize")
            else []
        )
        return Need(
            "moe",
            frozenset(gate_steps),
            gate_terms,
            frozenset(),
            frozenset({"gating", "top_k"}),
            ("int32-expert-ids",),
            notes=renorm,
        )
    if m.kind == "moe.experts":
        act = f.get("activation")
        if f.get("clamped_glu"):  # routing and grouped matmuls fit; the activation stays out
            return Need(
                "moe",
                frozenset({"grouped_matmul", "expert_routing"}),
                ("routing", "tp"),
                frozenset({"swiglu"}),
                frozenset(
                    {"grouped_matmul", "expert_routing", "finalize_routing", "token_permute"}
                ),
                notes=[
                    "clamped GLU (alpha, limit, up + 1): npu_swiglu has no clamp or alpha argument, so "
                    "the expert activation is not proposed; keep it in torch"
                ],
            )
        if act not in ("silu", "gelu", "gelu_tanh"):
            return None
        moe_steps = frozenset(
            {"grouped_matmul", "expert_routing", "swiglu" if act == "silu" else "gelu"}
        )
        return Need(
            "moe",
            moe_steps,
            ("routing", "tp"),
            frozenset(),
            moe_steps | {"finalize_routing", "token_permute"},
        )
    if m.kind == "mlp.glu":
        act = f.get("activation")
        if act not in ("silu", "gelu", "gelu_tanh"):
            return None
        ffn_steps = frozenset({"swiglu"} if act == "silu" else {"gelu", "mul"})
        prereq = () if f.get("merged_gate_up") else ("merged-gate-up",)
        # merged [gate | up]: the left half is activated
        glu_args: dict[str, Any] = {"activate_left": True}
        if act != "silu":
            glu_args["approximate"] = "tanh" if act == "gelu_tanh" else "none"
        return Need(
            "ffn",
            ffn_steps,
            ("dense",),
            frozenset({"quantize", "matmul", "grouped_matmul", "dequantize"}),
            ffn_steps,
            prereq,
            implied=glu_args,
            requires=frozenset() if act == "silu" else frozenset({"approximate"}),
        )
    if m.kind == "mlp.plain" and f.get("activation") in ("gelu", "gelu_tanh"):
        # an operator without an approximation switch computes another GELU: not proposed
        return Need(
            "ffn",
            frozenset({"gelu"}),
            (),
            frozenset({"mul", "matmul", "grouped_matmul", "dequantize"}),
            frozenset({"gelu"}),
            implied={"approximate": "tanh" if f["activation"] == "gelu_tanh" else "none"},
            requires=frozenset({"approximate"}),
        )
    if m.kind == "norm.rms" and "gate" not in f:
        prereq = ("one-plus-weight-folded",) if f.get("weight") else ()
        return Need(
            "norm",
            frozenset({"rms_norm"}),
            ("first",),
            frozenset({"residual_add", "quantize"}),
            frozenset({"rms_norm"}),
            prereq,
        )
    if m.kind == "norm.layer":
        return Need(
            "norm",
            frozenset({"layer_norm"}),
            (),
            frozenset({"residual_add"}),
            frozenset({"layer_norm"}),
        )
    if m.kind == "layer.decoder" and ids.ADD_RMS_NORM in m.mappings:
        return Need(
            "norm",
            frozenset({"residual_add", "rms_norm"}),
            ("residual",),
            frozenset({"quantize"}),
            frozenset({"residual_add"}),
        )
    return None  # rope tables are a prerequisite of the attention that rotates


def mapping_id(
    m: Module,
    op_fuses: frozenset[str],
    chain: dict[str, Any] | None,
    args: dict[str, Any],
    stage: str = "",
) -> str:
    """The equivalence-proof id of one stage, read from what its operator fuses."""
    f = m.facts
    if (
        "indexer" in stage
        and "rope" in op_fuses
        and f.get("indexer_rope") in ("half", "interleave")
    ):
        return ids.ROPE_INTERLEAVE if f["indexer_rope"] == "interleave" else ids.ROPE_HALF
    paged = bool(
        chain and any(p.get("id") == "paged-kv-cache" for p in chain.get("prerequisites") or [])
    )
    if "lightning_indexer" in op_fuses:
        return ids.LIGHTNING_INDEXER
    if "sparse_attention" in op_fuses:
        return ids.SPARSE_ATTENTION_MLA
    if "q_projection" in op_fuses and "kv_projection" in op_fuses:
        return ids.MLA_PROLOG
    if "linear_attention" in op_fuses:
        return ids.GATED_DELTA_RULE
    if "gating" in op_fuses:
        return next((x for x in m.mappings if x in ids.ROUTERS), ids.ROUTER_UNKNOWN)
    if (
        "grouped_matmul" in op_fuses
        or "expert_routing" in op_fuses
        or "finalize_routing" in op_fuses
    ):
        return ids.MOE_EXPERTS_LOOP if "loop" in str(f.get("form", "")) else ids.MOE_EXPERTS_BMM
    if "kv_cache_write" in op_fuses and "rms_norm" in op_fuses:
        return ids.MLA_KV_NORM_ROPE_CACHE
    if "kv_cache_write" in op_fuses:
        return ids.CACHE_WRITE_PAGED if paged else ids.CACHE_WRITE_CONTIGUOUS
    if "attention" in op_fuses or "flash_attention" in op_fuses:
        layout = str(args.get("input_layout") or args.get("layout") or ids.DEFAULT_LAYOUT)
        if m.kind in ("attention.dit", "attention.vision") or f.get("causal") is False:
            return ids.attention(ids.ATTENTION_NONCAUSAL, layout)
        if m.kind == "attention.mla":
            return ids.attention(ids.ATTENTION_MLA, layout)
        return ids.attention(ids.ATTENTION_GQA, layout)
    if "rope" in op_fuses:
        return ids.ROPE_INTERLEAVE if f.get("rope") == "interleave" else ids.ROPE_HALF
    quantizes = bool(op_fuses & {"quantize", "dynamic_quantize"})
    if "residual_add" in op_fuses and "rms_norm" in op_fuses:
        return ids.ADD_RMS_NORM_QUANT if quantizes else ids.ADD_RMS_NORM
    if "swiglu" in op_fuses:
        return ids.DEQUANT_SWIGLU_QUANT if quantizes and "dequantize" in op_fuses else ids.SWIGLU
    if "gelu" in op_fuses:
        if "mul" in op_fuses:
            return ids.GEGLU
        return ids.GELU_TANH if f.get("activation") == "gelu_tanh" else ids.GELU
    if "dynamic_quantize" in op_fuses or ("matmul" in op_fuses and "dequantize" in op_fuses):
        return ids.DYNAMIC_QUANT_INT8_MATMUL
    if "rms_norm" in op_fuses:
        return ids.RMS_NORM_ONE_PLUS_W if f.get("weight") else ids.RMS_NORM
    if "batch_matmul" in op_fuses and m.kind == "attention.mla":
        return ids.MLA_ABSORB_BMM
    return next((x for x in m.mappings if x in ids.PLANNED), ids.UNKNOWN)
