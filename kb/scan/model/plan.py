"""A plan per module and phase, read from the records.

Each inventory module states what it computes as primitive steps (the records' ``fuses``
vocabulary) and a few words for its variant ("sigmoid", "bias", "interleaved"): its
need (:mod:`kb.scan.model.needs`).  The chains are then chosen from the chain records -
their module, phases, products and quantization schemes, the steps their operators
fuse, and the words in their names and titles - never from a table of operator names
here.  Within a chain, only the stages whose operators compute something this module
computes are kept, each with the arguments the chain fixes and those the mapping implies
when the operator takes them.  Without a fitting chain the operators whose ``fuses``
cover the steps are ranked (:func:`kb.scan.offers.fused_for`); without one, the plan
says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kb.catalog.kernelfacts import kernel_products
from kb.lint.context import Context
from kb.reference.mappings import BY_ID as PROVEN  # every id there has a passing proof (tests)
from kb.scan.model.entry import Module
from kb.scan.model.needs import Need, mapping_id, need
from kb.scan.model.visibility import sees_every_key
from kb.vocab import PHASE_ROWS, SCHEMES, product_support
from kb.vocab.parallel import (
    DEFAULT_PARALLEL,
    PARALLEL_BY_NAME,
    PARALLEL_DISTANCE,
    PARALLEL_OF_PREREQUISITE,
)

_TORCH = "plain-torch"


# -- reading the records ---------------------------------------------------------------------


def _chains(ctx: Context) -> list[dict[str, Any]]:
    key = ("plan_chains",)
    if key not in ctx.memo:
        ctx.memo[key] = list(ctx.catalog.records("chain"))
    return ctx.memo[key]  # type: ignore[no-any-return]


def _fuses(ctx: Context, op: str) -> frozenset[str]:
    key = ("plan_fuses", op)
    if key not in ctx.memo:
        rec = ctx.operator(op) if op != _TORCH else None
        ctx.memo[key] = frozenset(rec.get("fuses") or ()) if rec is not None else frozenset()
    return ctx.memo[key]  # type: ignore[no-any-return]


def _params(ctx: Context, op: str) -> set[str]:
    rec = ctx.operator(op)
    return {p.get("name") for p in (rec.get("parameters") or [])} if rec is not None else set()  # type: ignore[misc]


def _param_type(ctx: Context, op: str, name: str) -> str:
    return str(_param(ctx, op, name).get("type") or "")


def _spells(ctx: Context, op: str, implied: dict[str, Any]) -> bool:
    """Whether ``op`` accepts every implied value it takes as written (a closed list of
    strings that lacks one is another spelling or another mode; a numeric code is noted
    by :func:`_stage`, not refused here)."""
    return all(
        v in (_param(ctx, op, k).get("allowed") or [v])
        for k, v in implied.items()
        if _param_type(ctx, op, k).startswith("str")
    )


def _param(ctx: Context, op: str, name: str) -> dict[str, Any]:
    rec = ctx.operator(op)
    for p in (rec.get("parameters") or []) if rec is not None else []:
        if p.get("name") == name:
            return p  # type: ignore[no-any-return]
    return {}


#: Support levels a plan may build on (kernel-only support is reported, not refused).
_USABLE = ("yes", "partial", "kernel")


def _support(ctx: Context, op: str, product: str | None) -> str:
    rec = ctx.operator(op)
    if rec is None or not product:
        return "yes"
    products = list(rec.get("products") or ())
    page = (
        product_support(product, products, list(rec.get("unsupported_products") or ()))
        if products
        else "undocumented"
    )
    if page == "undocumented" and product_support(product, kernel_products(rec)) != "undocumented":
        return "kernel"  # built for it, not documented on it (KB209): a usable, weaker fit
    return page


def _in_release(ctx: Context, op: str, release: str | None) -> bool:
    rec = ctx.operator(op)
    if rec is None or not release:
        return True
    known, _exact = ctx.release(release)
    return known is None or ctx.record_has(rec, known) is not False


def _words(chain: dict[str, Any]) -> str:
    title = chain.get("title") or {}
    kw = chain.get("keywords") or {}
    return " ".join(
        [
            chain["name"],
            str(title.get("en", "")),
            " ".join(kw.get("en", []) if isinstance(kw, dict) else []),
        ]
    ).lower()


@dataclass
class Target:
    product: str | None
    torch_npu: str | None
    quantization: str | None
    parallel: str = DEFAULT_PARALLEL  # kb.vocab.parallel: how the model is deployed


def deployment(chain: dict[str, Any]) -> list[str]:
    """The parallel modes whose communication domain the chain's prerequisites set up."""
    ids = [p.get("id") for p in chain.get("prerequisites") or []]
    return sorted({PARALLEL_OF_PREREQUISITE[i] for i in ids if i in PARALLEL_OF_PREREQUISITE})


def unasked(ctx: Context, chain: dict[str, Any], t: Target) -> tuple[list[str], list[str]]:
    """The modes the chain needs and the target does not ask for: those a fused stage
    takes a group of (it cannot run without one), and those whose collectives, written in
    plain torch, leave the single-device computation on one rank."""
    other = [m for m in deployment(chain) if m != t.parallel]
    ops = {s.get("operator", _TORCH) for s in chain.get("stages") or []} - {_TORCH}
    grouped = {
        m for m in other if any(set(PARALLEL_BY_NAME[m].group_args) & _params(ctx, o) for o in ops)
    }
    return [m for m in other if m in grouped], [m for m in other if m not in grouped]


def _fits(
    ctx: Context, chain: dict[str, Any], n: Need, phase: str, t: Target
) -> tuple[Any, ...] | None:
    """Rank key of a chain for one need and phase; None when it does not fit.  The
    deployment comes first: a chain built for a mode the target does not ask for never
    outranks one that runs as deployed, whatever the products say."""
    if chain.get("module") != n.category or phase not in (chain.get("phases") or []):
        return None
    if (
        t.product
        and chain.get("products")
        and product_support(t.product, chain["products"]) == "no"
    ):
        return None
    quant = t.quantization or "bf16"
    if (
        chain.get("quantization")
        and quant not in chain["quantization"]
        and not (quant == "bf16" and "fp16" in chain["quantization"])
    ):
        return None
    ops = [s.get("operator", _TORCH) for s in kept_stages(ctx, chain, n, phase, quant)]
    if any(o != _TORCH and not n.requires <= _params(ctx, o) for o in ops):
        return None  # a stage operator cannot express the mapping (GELU without approximate)
    covered = frozenset().union(*(_fuses(ctx, o) for o in ops))
    words = _words(chain)
    if not n.steps <= covered or any(w in words for w in n.refuse_words):
        return None
    if (
        n.category == "attention"
        and phase == "prefill"
        and n.bidirectional != sees_every_key(ctx, chain)
    ):
        return (
            None  # a causal or full mask where the module has the other (one decode row sees all)
        )
    product_ok = not t.product or (
        chain.get("products") and product_support(t.product, chain["products"]) == "yes"
    )
    unsupported = sum(
        1
        for o in set(ops)
        if o != _TORCH
        and (_support(ctx, o, t.product) not in _USABLE or not _in_release(ctx, o, t.torch_npu))
    )
    hits = sum(1 for w in n.terms if w in words)
    prereq = len(chain.get("prerequisites") or [])
    hard, soft = unasked(ctx, chain, t)
    distance = sum(PARALLEL_DISTANCE[m] for m in soft)
    return (
        len(hard),
        not product_ok,
        unsupported,
        distance,
        -hits,
        prereq,
        len(covered - n.steps),
        chain["name"],
    )


def best_chain(
    ctx: Context, n: Need, phase: str, t: Target
) -> tuple[dict[str, Any] | None, list[str], list[dict[str, str]]]:
    """The chain to plan (the deployment decides first: a chain whose operators need a
    group the target lacks is never planned; then the products; then the chain nearest
    the deployment asked for), the next ones built for that deployment, and the other
    fitting chains, named with the deployment they need."""
    ranked = sorted(
        (key, c) for c in _chains(ctx) if (key := _fits(ctx, c, n, phase, t)) is not None
    )
    best = next((c for key, c in ranked if not key[0]), None)
    rest = [c for _key, c in ranked if c is not best]
    needs = {
        c["name"]: max(
            (m for part in unasked(ctx, c, t) for m in part),
            key=PARALLEL_DISTANCE.__getitem__,
            default="",
        )
        for c in rest
    }
    held = [
        {
            "chain": c["name"],
            "parallel": needs[c["name"]],
            "reason": f"needs "
            f"{PARALLEL_BY_NAME[needs[c['name']]].label} (--parallel {needs[c['name']]})",
        }
        for c in rest
        if needs[c["name"]]
    ]
    return best, [c["name"] for c in rest if not needs[c["name"]]][:3], held


def _applies(stage: dict[str, Any], phase: str | None, scheme: str | None) -> bool:
    """Whether a stage written for one phase or for some schemes only (a chain's variants of
    one call) is the one this phase and scheme run; None: any."""
    if phase and stage.get("phase", "both") not in ("both", phase):
        return False
    only = stage.get("quantization") or []
    return not scheme or not only or scheme in only or (scheme == "bf16" and "fp16" in only)


def kept_stages(
    ctx: Context,
    chain: dict[str, Any],
    n: Need,
    phase: str | None = None,
    scheme: str | None = None,
) -> list[dict[str, Any]]:
    """The chain's stages this module does in ``phase`` under ``scheme``: a fused operator
    touching a kept step and fusing no refused one, each operator once."""
    out, seen = [], set()
    for stage in chain.get("stages") or []:
        op = stage.get("operator", _TORCH)
        fuses = _fuses(ctx, op)
        if op == _TORCH or op in seen or not (fuses & (n.keep or n.steps)) or (fuses & n.refuse):
            continue
        if not _applies(stage, phase, scheme):
            continue
        seen.add(op)
        out.append(stage)
    return out


def _rope_operator(ctx: Context, style: str, t: Target) -> str | None:
    """The operator the rope chains apply for one layout: the stage whose name says it."""
    word = "interleav" if style == "interleave" else "standard"
    for chain in _chains(ctx):
        if chain.get("module") != "rope":
            continue
        for stage in chain.get("stages") or []:
            op = stage.get("operator", _TORCH)
            if (
                word in str(stage.get("stage", ""))
                and op != _TORCH
                and _support(ctx, op, t.product) != "no"
            ):
                return str(op)
    return None


def _stage(
    ctx: Context, m: Module, n: Need, stage: dict[str, Any], chain: dict[str, Any] | None, t: Target
) -> dict[str, Any]:
    op = str(stage.get("operator"))
    fuses = _fuses(ctx, op)
    out: dict[str, Any] = {"stage": stage.get("stage", "fused"), "operator": op}
    notes: list[str] = []
    if (
        "rope" in fuses
        and not ({"q_projection", "kv_cache_write"} & fuses)
        and m.kind != "attention.mla"
    ):
        style = m.facts.get("rope")
        if style in ("half", "interleave"):
            better = _rope_operator(ctx, style, t)
            if better and better != op:
                notes.append(
                    f"the chain applies {op}; this module rotates {style} pairs, so {better}"
                )
                op = out["operator"] = better
                fuses = _fuses(ctx, op)
        else:
            notes.append(
                "rotary layout undecided (half or interleaved): confirm before choosing rotary_mode"
            )
    params = _params(ctx, op)
    args = dict(stage.get("args") or {})
    for key, value in n.implied.items():
        if key not in params:
            continue
        if isinstance(value, str) and not _param_type(ctx, op, key).startswith("str"):
            notes.append(
                f"{key}: this module needs the {value!r} mode; {op} takes it as a "
                f"{_param_type(ctx, op, key)} code"
            )
            continue
        allowed = _param(ctx, op, key).get("allowed") or []
        if allowed and value not in allowed:  # another spelling, or a mode it lacks: not guessed
            out["held"] = (
                f"{key}: this module needs {value!r}, which {op} does not spell "
                f"({', '.join(map(str, allowed))})"
            )
            continue
        args[key] = value
    args = {k: v for k, v in args.items() if k in params or not params}
    if args:
        out["args"] = args
    if stage.get("passed"):
        out["passed"] = sorted(stage["passed"])
    support = _support(ctx, op, t.product)
    if t.product and support not in _USABLE:
        notes.append(
            f"{op} is {'not supported' if support == 'no' else 'not documented'} on {t.product}"
        )
    elif support == "kernel":
        notes.append(
            f"{op} is built for {t.product} (kernel registration) but not documented there"
        )
    if not _in_release(ctx, op, t.torch_npu):
        notes.append(f"{op} is not in torch_npu {t.torch_npu}")
    out["mapping"] = mapping_id(m, fuses, chain, args, str(out["stage"]))
    if notes:
        out["notes"] = notes
    return out


def _ranked(ctx: Context, steps: frozenset[str], n: Need, t: Target) -> list[str]:
    from kb.scan.offers import fused_for

    ops = [
        o
        for o in fused_for(ctx, tuple(sorted(steps)), t.product)
        if not (_fuses(ctx, o) & n.refuse)
        and _in_release(ctx, o, t.torch_npu)
        and n.requires <= _params(ctx, o)
        and _spells(ctx, o, n.implied)
    ]
    ops.sort(key=lambda o: _support(ctx, o, t.product) not in _USABLE)
    return ops


def _by_operators(ctx: Context, m: Module, n: Need, t: Target) -> list[dict[str, Any]]:
    """No chain fits: the operators whose ``fuses`` cover the steps, closest first; when
    no one operator covers them all, one stage per step (attention core, rotation,
    q/k norm), each only when the records have an operator for it."""
    groups = [n.steps]
    if not _ranked(ctx, n.steps, n, t):
        apart = {"rope", "kv_cache_write", "rms_norm"}
        groups = (
            [n.steps - apart]
            + [frozenset({s}) for s in sorted(n.steps & apart)]
            + (
                [frozenset({"rms_norm"})]
                if "rms_norm" in n.keep and "rms_norm" not in n.steps
                else []
            )
        )
    out = []
    for steps in groups:
        if steps == {"rope"} and m.facts.get("rope") in ("half", "interleave"):
            op = _rope_operator(ctx, m.facts["rope"], t)
            ops = [op] if op else []
        else:
            ops = _ranked(ctx, steps, n, t)
        if not ops:
            continue
        stage = _stage(ctx, m, n, {"stage": "+".join(sorted(steps)), "operator": ops[0]}, None, t)
        if len(ops) > 1:
            stage["alternatives"] = ops[1:4]
        out.append(stage)
    return out


def plan_module(ctx: Context, m: Module, t: Target, phases: list[str]) -> list[dict[str, Any]]:
    """One plan entry per phase whose chain differs (one for both when they agree)."""
    n = need(m)
    if n is None:
        return []
    scheme = SCHEMES.get(t.quantization or "")
    if scheme is not None and scheme.weight_scale != "-":  # a quantized target: quant stages belong
        from dataclasses import replace

        quant = frozenset({"quantize", "dequantize", "dynamic_quantize", "matmul"})
        n = replace(
            n,
            refuse=n.refuse - quant,
            keep=n.keep | (quant if n.category in ("ffn", "moe") else frozenset()),
        )
    picks = {p: best_chain(ctx, n, p, t) for p in phases}
    entries: list[dict[str, Any]] = []
    scheme_of = t.quantization or "bf16"
    kept = {
        p: kept_stages(ctx, c, n, p, scheme_of) if c else []
        for p, (c, _alt, _held) in picks.items()
    }
    # phases share an entry when they take the same chain and the same stages of it
    names = {
        p: ((c["name"], [id(s) for s in kept[p]]) if c else None)
        for p, (c, _alt, _held) in picks.items()
    }
    groups: list[tuple[Any, list[str]]] = []
    for p in phases:
        for chain_name, members in groups:
            if chain_name == names[p]:
                members.append(p)
                break
        else:
            groups.append((names[p] or "", [p]))
    for _name, members in groups:
        chain, alternatives, held_chains = picks[members[0]]
        phase = (
            members[0]
            if len(members) == 1 and len(phases) > 1
            else "both"
            if len(members) > 1
            else members[0]
        )
        entry: dict[str, Any] = {
            "module": m.name,
            "kind": m.kind,
            "phase": phase,
            "file": m.file,
            "lines": [m.line, m.end_line],
        }
        if chain is not None:
            entry["chain"] = chain["name"]
            stages = [_stage(ctx, m, n, s, chain, t) for s in kept[members[0]]]
            unspelled = [s for s in stages if "held" in s]
            stages = [s for s in stages if "held" not in s]
            prereq = [p.get("id") for p in chain.get("prerequisites") or [] if p.get("id")]
            # written for it; on this deployment its collective drops out
            for mode in unasked(ctx, chain, t)[1]:
                dropped = [p for p in prereq if PARALLEL_OF_PREREQUISITE.get(p) == mode]
                prereq = [p for p in prereq if p not in dropped]
                entry["notes"] = entry.get("notes", []) + [
                    f"{chain['name']} is written for {PARALLEL_BY_NAME[mode].label}; on "
                    f"{PARALLEL_BY_NAME[t.parallel].label} it runs without its collectives over that group "
                    f"and without {', '.join(dropped) or 'its group'} (--parallel {mode} keeps them)"
                ]
        else:
            # ranked only among operators that spell the values
            stages = _by_operators(ctx, m, n, t)
            prereq, unspelled = [], []
            if not stages:
                entry["none"] = (
                    f"no operator in the records fuses {' + '.join(sorted(n.steps))}; keep torch"
                )
            elif n.category == "attention":
                entry["notes"] = [
                    "no chain fixes the mask arguments for this module: set sparse_mode, pre/next tokens "
                    "and atten_mask so that "
                    + (
                        "every query sees every key"
                        if n.bidirectional
                        else "each query sees only the keys before it"
                    )
                ]
        entry["stages"] = [s for s in stages if s["mapping"] in PROVEN]
        held = [s for s in stages if s["mapping"] not in PROVEN]
        if held:  # issue 22: a mapping without a passing equivalence proof is not proposed
            entry["not_proposed"] = [
                {
                    "stage": s["stage"],
                    "operator": s["operator"],
                    "mapping": s["mapping"],
                    "reason": "no equivalence proof yet",
                }
                for s in held
            ]
            entry["notes"] = entry.get("notes", []) + [
                f"not proposed: {s['stage']} ({s['operator']}, mapping {s['mapping']}): no "
                "equivalence proof yet"
                for s in held
            ]
        # nor a stage whose operator cannot be given the value the mapping needs, nor a
        # chain for another deployment (named with what it needs)
        for s in unspelled:
            entry["notes"] = entry.get("notes", []) + [
                f"not proposed: {s['stage']} ({s['operator']}, mapping {s['mapping']}): {s['held']}"
            ]
        entry["not_proposed"] = (
            entry.get("not_proposed", [])
            + [
                {
                    "stage": s["stage"],
                    "operator": s["operator"],
                    "mapping": s["mapping"],
                    "reason": s.pop("held"),
                }
                for s in unspelled
            ]
            + held_chains
        )
        if not entry["not_proposed"]:
            del entry["not_proposed"]
        if m.facts.get("sliding_window") and chain is not None and "attention" in m.kind:
            entry["notes"] = entry.get("notes", []) + [
                f"sliding window: {m.facts['sliding_window']}; on layers that use it the "
                "attention stage needs the window (mapping attention_sliding_window)"
            ]
        entry["prerequisites"] = list(dict.fromkeys([*prereq, *n.prerequisites]))
        if alternatives:
            entry["alternatives"] = alternatives
        if n.notes:
            entry["notes"] = entry.get("notes", []) + n.notes
        entries.append(entry)
    return entries


def plan(ctx: Context, modules: list[Module], t: Target) -> list[dict[str, Any]]:
    """The whole plan, module by module, in inventory order."""
    phases = [row.name for row in PHASE_ROWS if row.inference]
    if any(m.kind == "attention.dit" for m in modules) and not any(
        m.facts.get("cache") not in (None, "none") for m in modules
    ):
        # a diffusion transformer: every step is one full pass, there is no decode
        phases = phases[:1]
    out: list[dict[str, Any]] = []
    for m in modules:  # an encoder without a cache (vision tower) runs once per request: prefill
        encoder = m.kind == "attention.vision" or (
            m.facts.get("causal") is False and "cache" not in m.facts
        )
        out += plan_module(ctx, m, t, phases[:1] if encoder else phases)
    return out
