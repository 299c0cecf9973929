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
    #: the pattern rows the module matches (kb.reference.mappings), and per step the
    #: parameters an operator fusing it must take (a learnable sink, an approximation)
    rows: tuple[Any, ...] = ()
    step_requires: dict[frozenset[str], frozenset[str]] = field(default_factory=dict)

    @property
    def operators(self) -> frozenset[str]:
        return frozenset(op for r in self.rows for op in r.operators)


#: an attention whose callers decide causality, planned with full visibility (no cache
#: shows it decodes): the instances given a causal mask or flag need the causal rows
_FULL_PER_INSTANCE = [
    "causal: the caller decides (a mask or flag it passes); this plan is the full-visibility "
    "one, instances given a causal mask need the causal rows instead (sparse_mode=3 with the "
    "compressed mask, mapping attention_gqa)"
]


def has_cache(m: Module) -> bool:
    """The module keeps keys across calls (a cache of any write shape)."""
    cache = m.facts.get("cache")
    return bool(cache) and cache not in ("none", "unknown")


def router_facts(f: dict[str, Any]) -> dict[str, Any]:
    """A router's facts in one vocabulary: score, bias, groups (bool), order, renormalize."""
    if "score" in f:
        return f
    groups = f.get("groups", 1)
    order = f.get("order", "score_then_topk")
    score = f.get("scoring", "softmax")
    return {
        "score": score,
        "bias": bool(f.get("bias")),
        "groups": groups not in (1, "1", None),
        "order": f"topk-then-{score}" if order == "topk_then_score" else f"{score}-then-topk",
        "renormalize": bool(f.get("renormalize")),
    }


def need(m: Module) -> Need | None:
    """The steps and words of one module (:func:`_need`), with the pattern rows it matches
    and what their arguments ask of an operator; None when it is planned through its parts."""
    from dataclasses import replace

    from kb.scan.model.rows import requirements, rows_for

    rows = rows_for(m)
    n = _need(m) or _from_rows(m, rows)
    if n is None:
        return None
    return replace(
        n, rows=rows, step_requires=requirements(rows, m.facts), implied={}, requires=frozenset()
    )


#: the chain ``module`` of each inventory family
_CATEGORY = {"attention": "attention", "mlp": "ffn", "moe": "moe", "norm": "norm", "layer": "norm"}
#: steps a stage planned from a row alone must not fuse (the module's projections stay)
_PROJECTION_STEPS = frozenset(
    {"matmul", "grouped_matmul", "quantize", "dequantize", "residual_add", "mul"}
)


def _from_rows(m: Module, rows: tuple[Any, ...]) -> Need | None:
    """A module no hand-written need covers, planned from the first pattern row it matches
    (a new row in the table is all a new pattern needs): that row's steps, kept and
    covered, nothing else fused."""
    row = next(
        (
            r
            for r in rows
            if r.pattern is not None
            and r.pattern.steps
            # a row naming the facts it matches (a row for every module of a family, such
            # as a quantized matmul, is the quantized chains' to plan)
            and any(o.facts for o in r.pattern.on)
        ),
        None,
    )
    category = _CATEGORY.get(m.kind.split(".", 1)[0])
    if row is None or category is None:
        return None
    steps = frozenset(row.pattern.steps)
    return Need(category, steps, (), _PROJECTION_STEPS - steps, steps)


def _need(m: Module) -> Need | None:
    """The steps and words of one module; None when it is planned through its parts."""
    f = m.facts
    if m.kind in (
        "attention.gqa",
        "attention.mha",
        "attention.dit",
        "attention.vision",
        "attention.bidirectional",
    ):
        cached = has_cache(m)
        bidirectional = (
            m.kind in ("attention.dit", "attention.vision", "attention.bidirectional")
            or f.get("causal") is False
            or (f.get("causal") == "caller" and not cached)
        )
        steps = {"flash_attention", "softmax"} if bidirectional else {"attention"}
        keep = {"attention", "flash_attention"}
        if f.get("rope") in ("half", "interleave"):
            steps.add("rope")
            keep.add("rope")
        if cached:
            steps.add("kv_cache_write")
            keep.add("kv_cache_write")
        qk = f.get("qk_norm")
        for kind, step in (("rms", "rms_norm"), ("layer", "layer_norm")):
            if qk == kind or (
                isinstance(qk, dict) and qk and all(v == f"norm.{kind}" for v in qk.values())
            ):
                keep.add(step)  # the q/k norm is a stage of the attention's own plan
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
        if not (f.get("sliding_window") or f.get("window")):
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
            notes=(per_instance if not bidirectional else _FULL_PER_INSTANCE)
            if f.get("causal") == "caller"
            else [],
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
        r = router_facts(f)
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
        identity = [
            "some experts are identities (zero-compute experts): the grouped matmul covers the "
            "computing experts only; tokens routed to an identity expert skip it and are added "
            "back, weighted, at finalize (keep those ids out of the routing's expert count)"
        ]
        return Need(
            "moe",
            moe_steps,
            ("routing", "tp"),
            frozenset(),
            moe_steps | {"finalize_routing", "token_permute"},
            notes=identity if f.get("identity_experts") else [],
        )
    if m.kind == "mlp.glu":
        act = f.get("activation")
        if act not in ("silu", "gelu", "gelu_tanh"):
            return None
        ffn_steps = frozenset({"swiglu"} if act == "silu" else {"gelu", "mul"})
        prereq = () if f.get("merged_gate_up") or f.get("merged") else ("merged-gate-up",)
        # the half the activation reaches; separate gate and up projections merge as [gate | up]
        left = f.get("glu", "first") != "second"
        glu_args: dict[str, Any] = {"activate_left": left}
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
            requires=frozenset({"approximate"} if act != "silu" else set())
            | frozenset(set() if left else {"activate_left"}),
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
        prereq = (
            ("one-plus-weight-folded",) if f.get("weight") not in (None, "weight", "none") else ()
        )
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
    if m.kind == "norm.adaln" and f.get("norm") == "layer":
        # the per-sample scale and shift become the norm's weight and bias
        return Need(
            "norm",
            frozenset({"layer_norm"}),
            (),
            frozenset({"residual_add"}),
            frozenset({"layer_norm"}),
            ("adaln-modulation-as-norm-weight",),
        )
    if m.kind == "layer.decoder" and (ids.ADD_RMS_NORM in m.mappings or f.get("norm") == "rms"):
        return Need(
            "norm",
            frozenset({"residual_add", "rms_norm"}),
            ("residual",),
            frozenset({"quantize"}),
            frozenset({"residual_add"}),
        )
    return None  # rope tables are a prerequisite of the attention that rotates
