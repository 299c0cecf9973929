"""A module's situation facts: what :func:`kb.advice.select.select` is asked for it.

The planner chooses chains through the same selector as ``kb advise``; this module
says an inventory module and the scan target in the selector's vocabulary (the
decision trees' keys and values, plus product, release and deployment).  A fact the
code does not show (how the port organises the cache, whether a prefill continues
cached tokens) is left out: the selector assumes the trees' common case or keeps the
question open, exactly as ``kb advise --no-input`` does.
"""

from __future__ import annotations

from typing import Any

from kb.lint.context import Context
from kb.scan.model.entry import Module
from kb.scan.model.needs import has_cache, router_facts
from kb.scan.model.records import Target
from kb.vocab import SCHEME_FLAG

#: the dense-FFN activation the trees name for an inventory activation
_GATED = {"silu": "swiglu", "gelu": "geglu", "gelu_tanh": "geglu"}
_PLAIN = {"gelu_tanh": "gelu-tanh", "gelu": "gelu-tanh", "quick_gelu": "fast-gelu"}


def _said(value: Any) -> bool:
    """A fact that holds: set, and not a no (``False``, ``0``, ``"no"``, ``"none"``)."""
    return value not in (None, False, 0, "", "no", "none", "unknown")


def _attention(m: Module, t: Target) -> dict[str, str]:
    f = m.facts
    if m.kind == "attention.mla":
        indexer = "yes" if f.get("indexer") else "no"
        if indexer == "yes" and t.quantization == "w8a8c8":
            indexer = "yes-c8"
        return {"arch": "mla", "indexer": indexer}
    if m.kind == "attention.linear":
        return {"arch": "linear"}
    cached = has_cache(m)
    bidirectional = (
        m.kind in ("attention.dit", "attention.vision", "attention.bidirectional")
        or f.get("causal") is False
        or (f.get("causal") == "caller" and not cached)
    )
    if bidirectional and not cached:
        out = {"arch": "encoder"}
        if m.kind == "attention.dit":
            out["model"] = "dit"
        elif m.kind == "attention.vision":
            out["model"] = "vision"
        return out
    out = {
        "arch": "mha" if m.kind == "attention.mha" else "gqa",
        "sinks": "yes" if _said(f.get("sinks")) else "no",
        "window": "yes" if _said(f.get("sliding_window")) or _said(f.get("window")) else "no",
    }
    if f.get("cache") in ("paged", "contiguous"):
        out["cache"] = f["cache"]
    if t.quantization == "kv-int8":
        out["kv-quant"] = "int8"
    return out


def _tree_answers(ctx: Context) -> dict[str, set[str]]:
    """Every tree key with the values its options take (read once per context)."""
    key = ("situation_answers",)
    if key not in ctx.memo:
        answers: dict[str, set[str]] = {}
        for tree in ctx.catalog.records("tree"):
            for node in tree["nodes"]:
                answers.setdefault(node["key"], set()).update(o["value"] for o in node["options"])
        ctx.memo[key] = answers
    return ctx.memo[key]  # type: ignore[no-any-return]


def facts(m: Module, t: Target, phase: str, ctx: Context | None = None) -> dict[str, str]:
    """The situation of one module in one phase, for the selector.  A module fact named
    and valued as a tree answer (``history: "yes"``, ``prolog: "no"`` - from a reader or
    ``--model-config``) is passed as it is; what the kind says comes first."""
    out: dict[str, str] = {"phase": phase, SCHEME_FLAG: t.quantization or "bf16"}
    if ctx is not None:
        answers = _tree_answers(ctx)
        out.update(
            {
                k: v
                for k, v in m.facts.items()
                if isinstance(v, str) and v in answers.get(k, ()) and k not in out
            }
        )
    if t.product:
        out["product"] = t.product
    if t.torch_npu:
        out["release"] = t.torch_npu
    if t.parallel:
        out["parallel"] = t.parallel
    f: dict[str, Any] = m.facts
    if m.kind.startswith("attention."):
        out.update(_attention(m, t))
    elif m.kind == "moe.router":
        r = router_facts(f)
        gate = "sigmoid" if r["score"] == "sigmoid" else "softmax-bias" if r["bias"] else "softmax"
        out.update({"moe": "yes", "gate": gate})
    elif m.kind == "moe.experts":
        out["moe"] = "yes"
        act, glu = f.get("activation"), f.get("glu")
        if f.get("clamped_glu"):
            # a clamped GLU over halves, or (halves not proven) GPT-OSS's interleaved one,
            # whose chain keeps the activation in torch either way
            halves = glu in ("first", "second")
            out["activation"] = "clamped-halves" if halves else "clamped-interleaved"
        elif glu == "none" and act in ("gelu", "gelu_tanh"):
            out["activation"] = "gelu-no-mul"  # no gate half: the whole width is activated
        elif act in _GATED:
            out["activation"] = "swiglu" if act == "silu" else "geglu"
    elif m.kind == "mlp.glu":
        out["moe"] = "no"
        if f.get("activation") in _GATED:
            out["activation"] = _GATED[f["activation"]]
    elif m.kind == "mlp.plain":
        out["moe"] = "no"
        if f.get("activation") in _PLAIN:
            out["activation"] = _PLAIN[f["activation"]]
    return out
