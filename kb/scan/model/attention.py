"""The attention readers of the module inventory: which attention a class computes.

Softmax attention (multi-head, grouped-query, multi-head latent, vision, diffusion
transformer), linear attention (gated delta rule, lightning, state space), a sparse
attention's indexer, and a diffusers processor that holds a module's attention
compute; with what the plan needs of each (projections, q/k norms, cache, RoPE style,
causality).  :func:`kb.scan.model.kinds.decide` asks these before its other readers.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from kb.scan.model.entry import Module, linears, module_entry
from kb.scan.model.facts import ClassFacts

if TYPE_CHECKING:
    from kb.scan.model.kinds import Context

_Q = re.compile(
    r"^(q|q_proj|query|to_q|wq|wq_b|q_b_proj|linear_q|qkv|qkv_proj|to_qkv|c_attn|wqkv|Wqkv|in_proj|"
    r"query_key_value|qkv_linear|linear_qkv)$"
)
_K = re.compile(r"^(k|k_proj|key|to_k|wk|kv_a_proj_with_mqa|kv_b_proj|linear_k|kv_proj|to_kv)$")
_O = re.compile(r"^(o|o_proj|out_proj|to_out|wo|dense|c_proj|proj|linear_o|out|attn_out|o_linear)$")
_ATTN_CORE = (
    "scaled_dot_product_attention",
    "attention_interface",
    "dispatch_attention_fn",
    "softmax",
    "flash_attn_func",
    "flash_attn_varlen_func",
    "get_interface",
    "eager_attention_forward",
    "sdpa_attention_forward",
    "attention",
)


def _rope_style(cf: ClassFacts, ctx: Context) -> str | None:
    """How the module rotates q and k: the style of the rotating helpers it calls (read
    from their bodies), or of its own body when it rotates inline."""
    styles = {style for _, n in cf.calls if (style := ctx.rope_helpers.get(n))}
    if not styles and (
        cf.called("view_as_complex") or ("pairs_last" in cf.shapes and cf.called("unbind"))
    ):
        styles.add("interleave")
    if any(s.endswith("unbind_dim=-2") for s in cf.strings):  # the caller picks the halves layout
        styles = (styles - {"interleave"}) | {"half"}
    if len(styles) > 1:
        defaults = ctx.defaults_for(cf)
        keys = [k for k in cf.config if "interleave" in k and isinstance(defaults.get(k), bool)]
        if keys:  # the branch is a config switch whose default is in reach
            return "interleave" if defaults[keys[0]] else "half"
        return "unknown"
    return next(iter(styles), None)


def with_processor(cf: ClassFacts, ctx: Context) -> ClassFacts:
    """An attention module whose compute lives in its default processor class
    (diffusers): the module's parts with the processor's calls and shapes."""
    name = cf.class_strings.get("_default_processor_cls", "")
    proc = ctx.classes.get(name)
    if proc is None:
        return cf
    from dataclasses import replace

    return replace(
        cf,
        calls=cf.calls + proc.calls,
        shapes=cf.shapes | proc.shapes,
        self_used=cf.self_used | proc.self_used,
        strings=cf.strings | proc.strings,
    )


def read_processor(cf: ClassFacts, ctx: Context) -> Module | None:
    """A diffusers attention processor: ``__call__(attn, ...)`` projecting through
    ``attn.to_q`` and calling an attention function; no weights of its own."""
    if linears(cf, ctx) or not cf.called(*_ATTN_CORE) or not cf.called("to_q", "to_qkv", "to_k"):
        return None
    facts: dict[str, Any] = {"cache": "none", "processor": True}
    rope = _rope_style(cf, ctx)
    if rope:
        facts["rope"] = rope
    norms = sorted({n for _, n in cf.calls if re.match(r"norm_(added_)?[qk]$", n)})
    if norms:
        facts["qk_norm_calls"] = norms
    return module_entry(cf, "attention.dit", **facts)


def read_attention(cf: ClassFacts, ctx: Context) -> Module | None:
    cf = with_processor(cf, ctx)
    lin = linears(cf, ctx)
    names = set(cf.attrs)
    mla = {"q_a_proj", "kv_a_proj_with_mqa", "kv_b_proj", "wkv_a", "wkv_b"} & names
    has_q = any(_Q.match(a) for a in lin) or bool(mla)
    has_k = any(_K.match(a) for a in lin) or any(
        a in ("qkv", "qkv_proj", "to_qkv", "c_attn", "Wqkv", "wqkv", "in_proj", "query_key_value")
        for a in lin
    )
    deltas = [n for _, n in cf.calls if "delta_rule" in n]
    slopes = any("slope" in u for u in cf.self_used | names) and has_q  # per-head decay rates
    other_delta = (
        any("delta" in n and "delta_rule" not in n for _, n in cf.calls) and has_q and has_k
    )
    # a bare gate module has no input proj
    ssm = {"A_log", "dt_bias"} <= set(cf.params) | names and has_k
    linear_attn = bool(deltas) or ssm or slopes or other_delta
    indexer = (
        cf.called("relu")
        and cf.called("topk")
        and not cf.called("softmax")
        and any("weights_proj" in a or a == "weights" for a in names | lin)
        and has_q
    )
    core = [n for n in _ATTN_CORE if cf.called(n)] or (
        ["processor"]
        if "processor" in cf.self_used or cf.class_strings.get("_default_processor_cls")
        else []
    )
    if not (has_q and has_k) and not linear_attn and not mla:
        return None
    if not core and not linear_attn and not mla and not indexer:
        return None
    facts: dict[str, Any] = {
        "projections": sorted(
            a
            for a in lin
            if _Q.match(a) or _K.match(a) or re.match(r"^(v|v_proj|value|to_v|wv)$", a)
        )
    }
    qk_norm = [
        a
        for a, c in cf.attrs.items()
        if ctx.kind_of(c).startswith("norm") and re.search(r"(^|_)(q|k|query|key)(_|$)", a)
    ]
    if qk_norm:
        facts["qk_norm"] = {a: ctx.kind_of(cf.attrs[a]) for a in sorted(qk_norm)}
    if cf.called("cache_update"):
        facts["cache"] = "past_key_values.update"
    rope = _rope_style(cf, ctx)
    if rope:
        facts["rope"] = rope
    if "sliding_window" in cf.config or "sliding_window" in cf.self_used:
        facts["sliding_window"] = "config.sliding_window (per layer type; may be None)"
    if "sinks" in cf.self_used or "sinks" in cf.params:
        facts["sinks"] = True
    if indexer:
        return module_entry(cf, "attention.indexer", **facts, score="relu(q.k) weighted, top-k")
    if linear_attn and not cf.called(
        "scaled_dot_product_attention", "attention_interface", "get_interface"
    ):
        # A_log/dt_bias alone is a selective state-space scan (Mamba) or a gate module, not the
        # delta rule: only a delta-rule update makes the module a gated-delta-rule one
        variant = (
            "gated-delta-rule"
            if deltas
            else "lightning"
            if slopes
            else "state-space"
            if ssm and not other_delta
            else "unknown"
        )
        m = module_entry(
            cf,
            "attention.linear",
            **facts,
            variant=variant,
            forms=sorted(
                {
                    "chunked" if "chunk" in d else "recurrent" if "recurrent" in d else d
                    for d in deltas
                }
            )
            or None,
        )
        if cf.called("repeat_interleave", "repeat_kv"):
            m.not_proposed.append(
                "head expansion here feeds a linear-attention recurrence, not a softmax "
                "attention: no repeat_kv/attention operator"
            )
        return m
    if mla:
        facts["q_lora_rank"] = "q_lora_rank" in cf.config or "q_a_proj" in names
        sub = [a for a, c in cf.attrs.items() if ctx.kind_of(c) == "attention.indexer"]
        if sub:
            facts["indexer"] = sub[0]
            facts["indexer_rope"] = ctx.facts.get(cf.attrs[sub[0]], {}).get("rope")
        return module_entry(cf, "attention.mla", **facts)
    causal = cf.class_strings.get("is_causal")
    diffusion = (
        any("AttentionModuleMixin" in b or b.endswith("Attention") for b in cf.bases)
        or cf.called("dispatch_attention_fn")
        or "processor" in cf.self_used
        or any(a.startswith("to_") for a in lin)
    )
    if diffusion and "cache" not in facts:
        return module_entry(cf, "attention.dit", **facts, cache="none")
    if re.search(r"(Vision|Visual|Vit|ViT|Patch|Siglip|Clip)", cf.name) and "cache" not in facts:
        return module_entry(cf, "attention.vision", **facts, cache="none", causal=False)
    gqa = bool(
        {
            "num_key_value_heads",
            "num_kv_heads",
            "n_kv_heads",
            "num_key_value_groups",
            "multi_query_group_num",
        }
        & (cf.config | cf.self_used)
    )
    if (
        ("cache" not in facts and cf.init_value("is_causal") is False)
        or "CrossAttention" in cf.name
        or cf.init_value("is_cross_attention") is True
    ):
        facts["causal"] = (
            False  # an encoder (one bidirectional pass) or attention over encoder states
        )
    elif str(cf.init_values.get("is_causal", "")).startswith("arg:"):
        facts["causal"] = "per instance (is_causal argument)"
    m = module_entry(cf, "attention.gqa" if gqa else "attention.mha", **facts)
    if causal is None and "cache" not in facts and "causal" not in facts:
        m.unknown.append("cache: no past_key_values.update in forward")
    return m
