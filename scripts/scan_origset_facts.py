"""Does a planned stage compute what the module computes?  (issue 29's harness)

A plan entry of ``kb scan --plan --format json`` is held to the facts the manifest
``tests/data/scan-origset.yaml`` records for that module (read from the model's own code and
config): causality, cache, rotary pairing, activation and GLU half, norm kind, router scoring,
groups and bias, sinks, window, linear attention.  Each check is one small function over
(entry, stage, facts) returning the reasons the stage is wrong; a fact that is not recorded
checks nothing.  Operator facts used here (defaults, which half is activated, what a mode
means) are those of the operators' records under ``kb/records/operators``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

Check = Callable[[dict[str, Any], dict[str, Any], dict[str, Any]], list[str]]

ATTENTION = {
    "npu_fused_infer_attention_score",
    "npu_fused_infer_attention_score_v2",
    "npu_prompt_flash_attention",
    "npu_incre_flash_attention",
    "npu_fusion_attention",
    "_npu_flash_attention_unpad",
    "_npu_flash_attention_unpad_v2",
    "_npu_paged_attention",
    "npu_sparse_flash_attention",
}
CACHE_WRITES = {
    "npu_scatter_pa_kv_cache",
    "npu_scatter_nd_update_",
    "scatter_update_",
    "_npu_reshape_and_cache",
    "npu_kv_rmsnorm_rope_cache",
    "npu_kv_rmsnorm_rope_cache_v2",
}
RMS_NORMS = re.compile(r"(^|_)(gemma_)?(add_)?rms_norm")
LAYER_NORMS = {"npu_layer_norm_eval", "layernorm", "adaln", "adaln_v2", "npu_add_layer_norm"}
SWIGLU = {
    "npu_swiglu",
    "npu_dequant_swiglu_quant",
    "npu_grouped_matmul_swiglu_quant",
    "npu_clipped_swiglu",
}
GEGLU = {"npu_geglu", "npu_gelu_mul"}
GELU = {"npu_gelu"}
FAST_GELU = {"npu_fast_gelu", "fast_gelu"}
#: Operators whose rotation pairs elements one way whatever the arguments.
ROPE_FIXED = {
    "npu_interleave_rope": "interleave",
    "npu_kv_rmsnorm_rope_cache": "interleave",
    "npu_kv_rmsnorm_rope_cache_v2": "interleave",
    "npu_mla_prolog_v3": "interleave",
}
#: Operators whose pairing is an argument (the record's default in the second place).
ROPE_MODE = {
    "npu_rotary_mul": ("rotary_mode", "half"),
    "npu_apply_rotary_pos_emb": ("rotary_mode", "half"),
    "npu_mrope": ("rotary_mode", "half"),
}
CAUSAL_NOTE = re.compile(r"keys before|causal mask|\bcausal\b", re.I)
NOT_CAUSAL_NOTE = re.compile(r"non-causal|not causal|no causal|bidirectional", re.I)


def _args(stage: dict[str, Any]) -> dict[str, Any]:
    return stage.get("args") or {}


def _mentions(stage: dict[str, Any], name: str) -> bool:
    """The stage passes ``name`` (as an argument value or among the tensors it wires)."""
    return name in _args(stage) or name in (stage.get("passed") or [])


def _op(stage: dict[str, Any]) -> str:
    return str(stage.get("operator", "")).rsplit(".", 1)[-1]


def phase_and_cache(
    entry: dict[str, Any], stage: dict[str, Any], facts: dict[str, Any]
) -> list[str]:
    out = []
    if facts.get("cache") is False and _op(stage) in CACHE_WRITES:
        out.append(f"{_op(stage)} writes a cache the module does not keep")
    return out


def causality(entry: dict[str, Any], stage: dict[str, Any], facts: dict[str, Any]) -> list[str]:
    if facts.get("causal") is not False or _op(stage) not in ATTENTION:
        return []
    args = _args(stage)
    out = []
    if args.get("sparse_mode") in (2, 3, 4):
        out.append(
            f"{_op(stage)} sparse_mode={args['sparse_mode']} masks a bidirectional module causally"
        )
    if 0 in (args.get("next_tokens"), args.get("next_tockens")) or args.get("is_causal") is True:
        out.append(f"{_op(stage)} hides later keys from a bidirectional module")
    return out


def rope_layout(entry: dict[str, Any], stage: dict[str, Any], facts: dict[str, Any]) -> list[str]:
    op, want = _op(stage), facts.get("rope")
    if want is None:
        return []
    if op in ROPE_FIXED:
        got: str | None = ROPE_FIXED[op]
    elif op in ROPE_MODE:
        name, default = ROPE_MODE[op]
        got = str(_args(stage).get(name, default))
    elif op == "_npu_rotary_embedding" and "is_neox_style" in _args(stage):
        got = "half" if _args(stage)["is_neox_style"] else "interleave"
    else:
        return []
    if want == "none":
        return [f"{op} rotates a module that has no rotary positions"]
    if got != want:
        return [f"{op} pairs elements as '{got}', the module rotates {want} pairs"]
    return []


def activation(entry: dict[str, Any], stage: dict[str, Any], facts: dict[str, Any]) -> list[str]:
    op, act, glu = _op(stage), facts.get("activation"), facts.get("glu")
    args = _args(stage)
    out: list[str] = []
    if act is None:
        return out
    gated = op in SWIGLU | GEGLU
    if gated and glu == "none":
        out.append(f"{op} gates a plain (ungated) {act} MLP")
    if op in SWIGLU and act != "silu":
        out.append(f"{op} applies SiLU to a {act} MLP")
    if op in GEGLU | GELU and act not in ("gelu", "gelu_tanh"):
        out.append(f"{op} applies GELU to a {act} MLP")
    if op in FAST_GELU and act != "quick_gelu":
        out.append(f"{op} is x*sigmoid(1.702x), the module applies {act}")
    if op == "npu_geglu":
        approx = args.get("approximate", 1)
        if act in ("gelu", "gelu_tanh") and approx != (1 if act == "gelu_tanh" else 0):
            out.append(f"npu_geglu approximate={approx} for {act}")
    elif op in GELU | {"npu_gelu_mul"}:
        approx = args.get("approximate", "none")
        if act in ("gelu", "gelu_tanh") and approx != ("tanh" if act == "gelu_tanh" else "none"):
            out.append(f"{op} approximate={approx!r} for {act}")
    if gated and glu in ("first", "second"):
        left = {"npu_geglu": False, "npu_dequant_swiglu_quant": False}.get(op, True)
        left = (
            bool(args.get("activate_left", left))
            if op in ("npu_geglu", "npu_dequant_swiglu_quant")
            else left
        )
        if left != (glu == "first"):
            out.append(
                f"{op} activates the {'first' if left else 'second'} half, the module the {glu}"
            )
    return out


def norm_kind(entry: dict[str, Any], stage: dict[str, Any], facts: dict[str, Any]) -> list[str]:
    op = _op(stage)
    kinds = {str(v) for v in (facts.get("norm"), facts.get("qk_norm")) if v}
    if not kinds:
        return []
    if RMS_NORMS.search(op) and "rms" not in kinds:
        return [f"{op} is an RMSNorm, the module normalises with {'/'.join(sorted(kinds))}"]
    if op in LAYER_NORMS and "layer" not in kinds:
        return [f"{op} subtracts the mean, the module is an RMSNorm"]
    return []


def router(entry: dict[str, Any], stage: dict[str, Any], facts: dict[str, Any]) -> list[str]:
    op, score = _op(stage), facts.get("scoring")
    if score is None or op not in ("npu_moe_gating_top_k", "npu_moe_gating_top_k_softmax"):
        return []
    args, out = _args(stage), []
    if op == "npu_moe_gating_top_k_softmax":
        if score != "softmax":
            out.append(f"{op} scores with a softmax, the router with a {score}")
        if facts.get("bias"):
            out.append(f"{op} has no correction bias, the router adds one")
        if (facts.get("groups") or 1) > 1:
            out.append(
                f"{op} has no expert groups, the router keeps {facts.get('topk_groups')} of {facts['groups']}"
            )
        return out
    norm_type = args.get("norm_type", 0)
    if norm_type != (1 if score == "sigmoid" else 0):
        out.append(f"{op} norm_type={norm_type} for a {score} router")
    if facts.get("bias") and not _mentions(stage, "bias"):
        out.append(f"{op} drops the router's correction bias")
    if facts.get("bias") is False and args.get("bias") not in (None, "None"):
        out.append(f"{op} adds a bias the router does not have")
    groups = facts.get("groups")
    if groups is not None and args.get("group_count", 1) != groups:
        out.append(f"{op} group_count={args.get('group_count', 1)}, the router has {groups} groups")
    if facts.get("topk_groups") is not None and args.get("k_group", 1) != facts["topk_groups"]:
        out.append(
            f"{op} k_group={args.get('k_group', 1)}, the router keeps {facts['topk_groups']} groups"
        )
    if (
        score == "sigmoid"
        and facts.get("renormalize") is False
        and args.get("out_flag") is not True
    ):
        out.append(f"{op} renormalises the chosen sigmoid weights (output 0), the router does not")
    return out


def attention_extras(
    entry: dict[str, Any], stage: dict[str, Any], facts: dict[str, Any]
) -> list[str]:
    op = _op(stage)
    if op not in ATTENTION:
        return []
    out = []
    if facts.get("linear"):
        out.append(f"{op} is softmax attention, the module is linear attention")
    if facts.get("sinks") and not _mentions(stage, "learnable_sink"):
        out.append(f"{op} without learnable_sink: the module's sinks are dropped")
    if (
        facts.get("window")
        and _args(stage).get("sparse_mode") != 4
        and not (_mentions(stage, "pre_tokens") or _mentions(stage, "pre_tockens"))
    ):
        out.append(f"{op} attends to all keys, the module to a window of {facts['window']}")
    return out


STAGE_CHECKS: tuple[Check, ...] = (
    phase_and_cache,
    causality,
    rope_layout,
    activation,
    norm_kind,
    router,
    attention_extras,
)


def entry_checks(entry: dict[str, Any], facts: dict[str, Any]) -> list[str]:
    """What is wrong with the entry as a whole: a decode phase where nothing is cached or the
    module is bidirectional, a note that asks for a causal mask on a bidirectional module."""
    out = []
    where = entry.get("module", "?")
    if entry.get("phase") in ("decode", "both") and (
        facts.get("cache") is False or facts.get("causal") is False
    ):
        out.append(f"{where}: a decode phase for a module that keeps no cache")
    notes = " ".join(str(n) for n in entry.get("notes") or [])
    if (
        facts.get("causal") is False
        and CAUSAL_NOTE.search(notes)
        and not NOT_CAUSAL_NOTE.search(notes)
    ):
        out.append(f"{where}: the plan asks for a causal mask on a bidirectional module")
    return out


def wrong_stages(entry: dict[str, Any], facts: dict[str, Any]) -> list[str]:
    """Every reason the plan entry computes something other than the module."""
    out = entry_checks(entry, facts)
    for stage in entry.get("stages", []):
        out += [
            f"{entry.get('module', '?')}: {reason}"
            for check in STAGE_CHECKS
            for reason in check(entry, stage, facts)
        ]
    return out
