"""The kind of each module, decided from what it builds and computes.

Every decision reads :class:`~kb.scan.model.facts.ClassFacts`: a router is a class that
scores experts and takes a top-k, not a class named ``*Router``; an RMSNorm is a squared
mean and an rsqrt, a LayerNorm also subtracts the mean.  When the code leaves a fact
open (an activation read from a config whose default is not in reach), the fact is
``unknown`` and the plan proposes nothing that depends on it.
"""

from __future__ import annotations

import re
from typing import Any

from kb.scan.model import mapping_ids as ids
from kb.scan.model.attention import read_attention, read_processor
from kb.scan.model.entry import Module, linears, module_entry
from kb.scan.model.facts import ClassFacts

_LINEAR = re.compile(r"(Linear|Conv1D|LinearBase|ParallelLinear)$")
_NORM_CTOR = {
    "RMSNorm": "rms",
    "LayerNorm": "layer",
    "GroupNorm": "group",
    "FP32LayerNorm": "layer",
    "LlamaRMSNorm": "rms",
}
_GATE = re.compile(r"^(gate_proj|w1|wi_0|gate|fc_gate|linear_gate|ffn_gate)$")
_UP = re.compile(r"^(up_proj|w3|wi_1|up|fc_up|linear_up|ffn_up)$")
_DOWN = re.compile(r"^(down_proj|w2|wo|down|fc2|linear_fc2|linear_down|ffn_down|proj_out)$")
_FC1 = re.compile(
    r"^(fc1|linear_fc1|c_fc|gate_up_proj|up_gate_proj|w12|wi|fc_in|linear1|proj_in|mlp_in)$"
)
_SILU = {"silu", "swish", "silu_and_mul", "swiglu"}
_GELU = {
    "gelu",
    "gelu_new",
    "gelu_pytorch_tanh",
    "gelu_fast",
    "gelu-approximate",
    "gelu_tanh",
    "geglu",
    "gelu_accurate",
    "quick_gelu",
}


class Context:
    """What deciding one class may look at: the other classes by name (this file's and
    its local imports'), their kinds once known, rope helpers and config defaults."""

    def __init__(
        self, classes: dict[str, ClassFacts], rope_helpers: Any, config_defaults: dict[str, Any]
    ) -> None:
        self.classes = classes
        self.rope_helpers = rope_helpers
        self.all_defaults = config_defaults
        self.defaults: dict[str, Any] = config_defaults.get("", {})
        self.kinds: dict[str, str] = {}
        self.facts: dict[str, dict[str, Any]] = {}

    def defaults_for(self, cf: ClassFacts) -> dict[str, Any]:
        """Config defaults of the config class this module is built with (its
        ``config: XConfig`` annotation), else those all config classes agree on."""
        return self.all_defaults.get(cf.config_class) or self.defaults

    def kind_of(self, ctor: str) -> str:
        if ctor in _NORM_CTOR:
            return f"norm.{_NORM_CTOR[ctor]}"
        if _LINEAR.search(ctor):
            return "linear"
        if ctor in self.kinds:
            return self.kinds[ctor]
        cf = self.classes.get(ctor)
        if cf is not None and ctor not in self.kinds:
            self.kinds[ctor] = ""  # guards a cycle
            found = decide(cf, self)
            self.kinds[ctor] = found.kind if found else ""
            self.facts[ctor] = found.facts if found else {}
        return self.kinds.get(ctor, "")


def _norm_kind(cf: ClassFacts) -> str | None:
    if cf.called("layer_norm", "LayerNorm") or "mean_subtract" in cf.shapes:
        return "layer"
    if cf.called("rms_norm") or (
        cf.called("rsqrt") and ("square" in cf.shapes or cf.called("pow", "square"))
    ):
        return "rms"
    if cf.called("rsqrt") and cf.called("mean"):
        return "rms"
    if cf.called("group_norm"):
        return "group"
    return None


def _activation(name: str) -> str | None:
    low = name.lower().replace("-", "_")
    if low in _SILU or low.startswith("silu"):
        return "silu"
    if low in {g.replace("-", "_") for g in _GELU} or low.startswith("gelu"):
        return (
            "gelu_tanh"
            if ("tanh" in low or "approximate" in low or low in ("gelu_new", "gelu_fast"))
            else "gelu"
        )
    if low in ("relu", "relu2", "sigmoid", "tanh", "quick_gelu"):
        return low
    return None


def activation_of(cf: ClassFacts, ctx: Context) -> tuple[str, str]:
    """(activation, where it came from); ``unknown`` when the code does not settle it."""
    for attr, strings in cf.attr_strings.items():
        for s in strings:
            if s.startswith("config:"):
                key = s.split(":", 1)[1]
                default = ctx.defaults_for(cf).get(key)
                if isinstance(default, str) and _activation(default):
                    return _activation(default) or "unknown", f"config {key} default {default!r}"
                return "unknown", f"config {key} (no default in reach)"
            act = _activation(s)
            if act and attr not in ("norm",):
                return act, f"{attr} = {s!r}"
    for ctor in cf.attrs.values():
        act = _activation(ctor)
        if act:
            return act, f"nn.{ctor}"
    for _, name in cf.calls:
        act = _activation(name)
        if act:
            return (
                act if act != "gelu" or "tanh" not in cf.strings else "gelu_tanh"
            ), f"calls {name}"
    return "unknown", "no activation found"


_STACK = re.compile(r"(layers|blocks|h|layer)$")


def decide(cf: ClassFacts, ctx: Context) -> Module | None:
    """The inventory entry of one class, or None when it is not a module we plan (a
    whole model - a class holding the stack of layers - is read through its parts)."""
    if not cf.has_forward and not cf.attrs:
        return None
    if any(c == "ModuleList" and _STACK.search(a) for a, c in cf.attrs.items()):
        return None
    for reader in (read_attention, read_processor, _moe, _mlp, _norm, _rope, _layer):
        found = reader(cf, ctx)
        if found is not None:
            return found
    return None


def _router_facts(cf: ClassFacts, ctx: Context) -> dict[str, Any] | None:
    if not cf.called("topk"):
        return None
    score_order = {s: cf.first(s) for s in ("softmax", "sigmoid")}
    scores = {s: i for s, i in score_order.items() if i is not None}
    if not scores:
        return None
    experts = {
        "num_experts",
        "n_routed_experts",
        "num_local_experts",
        "moe_num_experts",
        "n_experts",
    } & (cf.config | cf.self_used)
    if not experts and not any(r == 2 for r in cf.params.values()) and not linears(cf, ctx):
        return None
    if not any(
        "expert" in x.lower() for x in cf.config | cf.self_used | set(cf.params) | set(cf.attrs)
    ) and not re.search(r"Router|Gat(e|ing)|TopK|Topk|MoE|Moe", cf.name):
        return None  # top-k over sigmoid scores with no experts in sight: detection query selection
    score = min(scores, key=lambda s: scores[s])
    topk_at = cf.first("topk") or 0
    bias_param = any("bias" in a for a in cf.added)  # scores + self.e_score_correction_bias
    for attr in cf.self_called:  # bias added by a small module: topk(self.bias_module(p))
        sub = ctx.classes.get(cf.attrs.get(attr, ""))
        if sub is not None and any("bias" in p for p in sub.added) and not linears(sub, ctx):
            bias_param = True
    order = "topk-then-" + score if scores[score] > topk_at else score + "-then-topk"
    groups = bool(
        {"n_group", "topk_group", "num_expert_group", "num_group"} & (cf.config | cf.self_used)
    )
    return {
        "score": score,
        "bias": bias_param,
        "groups": groups,
        "order": order,
        "renormalize": "norm_topk_prob" in (cf.config | cf.self_used),
    }


def router_mapping(facts: dict[str, Any]) -> str:
    if facts["order"].startswith("topk-then-sigmoid"):
        return ids.ROUTER_TOPK_THEN_SIGMOID
    if facts["order"].startswith("topk-then-softmax"):
        return ids.ROUTER_TOPK_THEN_SOFTMAX
    if facts["score"] == "sigmoid":
        return (
            ids.ROUTER_SIGMOID_BIAS_GROUP_TOPK
            if facts["bias"] or facts["groups"]
            else ids.ROUTER_SIGMOID_TOPK
        )
    return ids.ROUTER_SOFTMAX_BIAS_TOPK if facts["bias"] else ids.ROUTER_SOFTMAX_TOPK


def _experts_facts(cf: ClassFacts, ctx: Context) -> dict[str, Any] | None:
    stacked = any(r == 3 for r in cf.params.values())
    lists = [a for a, c in cf.attrs.items() if c == "ModuleList" and "expert" in a]
    loop = cf.called("one_hot", "index_add_", "where", "nonzero")
    batched = cf.called("bmm", "grouped_mm", "_grouped_mm", "einsum")
    if not ((stacked or lists) and (loop or batched)):
        return None
    act, source = activation_of(cf, ctx)
    for attr in lists:
        elem = cf.elements.get(attr, "")
        if act == "unknown" and ctx.kind_of(elem).startswith("mlp."):
            act = ctx.facts.get(elem, {}).get("activation", "unknown")
            source = f"{attr} holds {elem} ({ctx.facts.get(elem, {}).get('activation_from', '')})"
    clamped = cf.called("clamp") and any("limit" in u or "alpha" in u for u in cf.self_used)
    return {
        "form": "loop over one_hot masks" if loop else "batched matmul",
        "weights": "stacked gate_up_proj" if stacked else "list of expert MLPs",
        "activation": act,
        "activation_from": source,
        "clamped_glu": clamped or None,
        "identity_experts": bool(
            {"zero_expert_num", "zero_expert_type", "num_zero_experts"} & (cf.config | cf.self_used)
        )
        or "Identity" in cf.attrs.values()
        or "Identity" in cf.elements.values()
        or None,
    }


def _moe(cf: ClassFacts, ctx: Context) -> Module | None:
    experts = _experts_facts(cf, ctx)
    router = _router_facts(cf, ctx)
    parts = {a: ctx.kind_of(c) for a, c in cf.attrs.items()}
    has_parts = {k for k in parts.values() if k.startswith("moe.")}
    if router and not experts:
        m = module_entry(cf, "moe.router", **router)
        m.mappings.append(router_mapping(router))
        return m
    if experts and not router:
        m = module_entry(cf, "moe.experts", **experts)
        return m
    composed = ("moe.experts" in has_parts or "experts" in parts) and (
        "moe.router" in has_parts or "linear" in parts.get("gate", "") or "router" in parts
    )
    if router or composed:
        shared = sorted(a for a in parts if "shared" in a)
        facts: dict[str, Any] = {"shared_experts": shared or None}
        if router:
            facts["router"] = router
        if experts:
            facts["experts"] = experts
        m = module_entry(cf, "moe.block", **facts)
        m.parts = {a: k for a, k in parts.items() if k}
        if router:
            m.mappings.append(router_mapping(router))
        return m
    return None


def split_block(m: Module) -> list[Module]:
    """A MoE block that routes and runs its experts in its own methods: one router and
    one experts entry, planned like the classes that hold them elsewhere."""
    out = []
    for key, kind in (("router", "moe.router"), ("experts", "moe.experts")):
        if key in m.facts:
            part = Module(f"{m.name}.{key}", kind, m.file, m.line, m.end_line, dict(m.facts[key]))
            if key == "router":
                part.mappings.append(router_mapping(part.facts))
            elif part.facts.get("activation") == "unknown":
                part.unknown.append(f"activation: {part.facts.get('activation_from')}")
            out.append(part)
    return out


def _mlp(cf: ClassFacts, ctx: Context) -> Module | None:
    lin = linears(cf, ctx)
    gate = [a for a in lin if _GATE.match(a)]
    up = [a for a in lin if _UP.match(a)]
    down = [a for a in lin if _DOWN.match(a)]
    fc1 = [a for a in lin if _FC1.match(a)]
    sub_acts = [a for a, c in cf.attrs.items() if ctx.kind_of(c).startswith("act.")]
    if any(ctx.kind_of(c).startswith(("norm.", "attention.")) for c in cf.attrs.values()):
        return None  # a block, not a feed-forward
    net = "net" in cf.attrs and cf.attrs["net"] == "ModuleList"
    if not (
        (gate and up and (down or fc1))
        or (fc1 and (down or "fc2" in lin))
        or net
        or (sub_acts and down)
    ):
        return None
    if not cf.called("mul") and not cf.calls and not net:
        return None
    act, source = activation_of(cf, ctx)
    for a in sub_acts:
        kind = ctx.kind_of(cf.attrs[a])
        act, source = kind.split(".", 1)[1], f"{a} = {cf.attrs[a]}"
    gated = (
        bool(gate and up)
        or (bool(fc1) and cf.called("chunk", "split"))
        or act in ("geglu", "swiglu")
    )
    if act in ("geglu", "swiglu"):
        act = "gelu" if act == "geglu" else "silu"
    m = module_entry(
        cf,
        "mlp.glu" if gated else "mlp.plain",
        activation=act,
        activation_from=source,
        merged_gate_up=(bool(fc1) and gated) or None,
    )
    if gated:
        m.mappings.append(
            {"silu": ids.SWIGLU, "gelu": ids.GEGLU, "gelu_tanh": ids.GEGLU}.get(act, "")
        )
    elif act in ("gelu", "gelu_tanh"):
        m.mappings.append(ids.GELU_TANH if act == "gelu_tanh" else ids.GELU)
    m.mappings = [x for x in m.mappings if x]
    if act == "unknown":
        m.unknown.append(f"activation: {source}")
    return m


def _norm(cf: ClassFacts, ctx: Context) -> Module | None:
    lin = linears(cf, ctx)
    norms = [
        a
        for a, c in cf.attrs.items()
        if ctx.kind_of(c).startswith("norm.") and ctx.kind_of(c) != "norm.adaln"
    ]
    blocks = any(
        ctx.kind_of(c).startswith(("attention.", "mlp.", "moe.")) for c in cf.attrs.values()
    )
    if norms and lin and "times_one_plus" in cf.shapes and not blocks:
        inner = ctx.kind_of(cf.attrs[norms[0]])
        m = module_entry(cf, "norm.adaln", inner=inner, modulation=sorted(lin))
        m.mappings.append(ids.adaln(inner.split(".")[1]))
        return m
    kind = _norm_kind(cf)
    if kind is None or lin:
        if norms or len(lin) != 1:
            return None
        if cf.called("gelu") and not cf.called("mul", "chunk"):
            return module_entry(
                cf,
                "act.gelu_tanh"
                if "tanh" in cf.strings or "approximate" in str(cf.strings)
                else "act.gelu",
            )
        if cf.called("chunk") and cf.called("gelu", "silu"):
            return module_entry(cf, "act.geglu" if cf.called("gelu") else "act.swiglu")
        return None
    facts: dict[str, Any] = {}
    gemma = "one_plus_weight" in cf.shapes
    gated = cf.called("silu", "sigmoid") and kind == "rms"
    if gemma:
        facts["weight"] = "(1 + weight)"
    if gated:
        facts["gate"] = "silu(gate) multiplies the output"
    m = module_entry(cf, f"norm.{kind}", **facts)
    if kind == "rms":
        m.mappings.append(
            ids.RMS_NORM_GATED if gated else ids.RMS_NORM_ONE_PLUS_W if gemma else ids.RMS_NORM
        )
    elif kind == "layer":
        m.mappings.append(ids.LAYER_NORM)
    return m


def _rope(cf: ClassFacts, ctx: Context) -> Module | None:
    if (
        "inv_freq" not in cf.attrs
        and "inv_freq" not in cf.params
        and "inv_freq" not in cf.self_used
    ):
        return None
    rope_type = (
        "rope_parameters.rope_type" in cf.config
        or "rope_scaling" in cf.config
        or "rope_type" in cf.config
    )
    facts = {
        "rope_type": "read from config (rope_parameters / rope_scaling)"
        if rope_type
        else "default",
        "mrope": True if any("mrope" in c for c in cf.config | cf.self_used) else None,
    }
    return module_entry(cf, "rope.table", **facts)


def _layer(cf: ClassFacts, ctx: Context) -> Module | None:
    parts = {
        a: ctx.kind_of(cf.elements.get(a, c) if c == "ModuleList" else c)
        for a, c in cf.attrs.items()
    }
    norms = [a for a, k in parts.items() if k.startswith("norm.") and k != "norm.adaln"]
    blocks = [a for a, k in parts.items() if k.startswith(("attention.", "mlp.", "moe."))]
    if not any(parts[a].startswith("attention.") for a in blocks):
        return None  # a decoder layer wraps an attention
    adaln = [a for a, k in parts.items() if k == "norm.adaln"] or (
        norms if "times_one_plus" in cf.shapes else []
    )
    if adaln:
        m = Module(
            cf.name,
            "layer.dit",
            "",
            cf.line,
            cf.end_line,
            {"adaln": sorted(adaln)},
            parts={a: k for a, k in parts.items() if k},
        )
        m.not_proposed.append(
            "adaLN modulation (norm(x) * (1 + scale) + shift): no fused operator in the "
            "records computes it; the norm inside may still be fused on its own"
        )
        return m
    if not norms:
        return None
    kinds = {parts[a] for a in norms}
    residual = "residual_add" in cf.shapes
    m = Module(
        cf.name,
        "layer.decoder",
        "",
        cf.line,
        cf.end_line,
        {"norms": {a: parts[a] for a in sorted(norms)}, "residual_add_then_norm": residual},
        parts={a: k for a, k in parts.items() if k},
    )
    gated = any(ctx.facts.get(cf.attrs.get(a, ""), {}).get("gate") for a in norms)
    if kinds == {"norm.rms"} and residual and not gated:
        m.mappings.append(ids.ADD_RMS_NORM)
    elif "norm.layer" in kinds:
        m.mappings.append(ids.ADD_LAYER_NORM)
    return m
