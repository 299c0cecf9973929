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

from dataclasses import replace
from typing import Any

from kb.lint.context import Context
from kb.reference.mappings import BY_ID as PROVEN  # every id there has a passing proof (tests)
from kb.scan.model.entry import Module
from kb.scan.model.needs import Need, has_cache, need
from kb.scan.model.records import (
    TORCH,
    USABLE,
    Target,
    chains,
    fuses,
    in_release,
    params,
    support,
)
from kb.scan.model.rows import KNOWN_OPERATORS
from kb.scan.model.stages import rope_operator, stage
from kb.scan.model.visibility import sees_every_key
from kb.vocab import PHASE_ROWS, SCHEMES, product_support
from kb.vocab.parallel import (
    PARALLEL_BY_NAME,
    PARALLEL_DISTANCE,
    PARALLEL_OF_PREREQUISITE,
)

#: how a stage planned beside the module's chain (not one of its stages) says so
BESIDE = "beside the chain: its stages"
_CAUSALITY = "sparse_mode follows its causality, so that "
#: which keys a query sees, by (bidirectional, the module masks keys)
_SEES = {
    (False, False): _CAUSALITY + "each query sees only the keys before it (atten_mask: the "
    "compressed [2048, 2048] upper-triangular mask)",
    (True, False): _CAUSALITY + "every query sees every key",
    (True, True): _CAUSALITY + "every query sees every key the module keeps: it masks keys "
    "(a padding mask): pass it as atten_mask, in the operator's convention for which value "
    "hides a key, or give the actual sequence lengths",
}


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


def deployment(chain: dict[str, Any]) -> list[str]:
    """The parallel modes whose communication domain the chain's prerequisites set up."""
    ids = [p.get("id") for p in chain.get("prerequisites") or []]
    return sorted({PARALLEL_OF_PREREQUISITE[i] for i in ids if i in PARALLEL_OF_PREREQUISITE})


def unasked(ctx: Context, chain: dict[str, Any], t: Target) -> tuple[list[str], list[str]]:
    """The modes the chain needs and the target does not ask for: those a fused stage
    takes a group of (it cannot run without one), and those whose collectives, written in
    plain torch, leave the single-device computation on one rank."""
    other = [m for m in deployment(chain) if m != t.parallel]
    ops = {s.get("operator", TORCH) for s in chain.get("stages") or []} - {TORCH}
    grouped = {
        m for m in other if any(set(PARALLEL_BY_NAME[m].group_args) & params(ctx, o) for o in ops)
    }
    return [m for m in other if m in grouped], [m for m in other if m not in grouped]


def unfit(
    ctx: Context, chain: dict[str, Any], n: Need, phase: str, t: Target, decided: bool = False
) -> str:
    """Why the chain's kept stages do not compute this module in ``phase`` ("" when they
    do).  ``decided``: the selector fitted the chain on a question path the module's facts
    answer whole, so the words of its name and title are not read for a variant."""
    if chain.get("module") != n.category or phase not in (chain.get("phases") or []):
        return f"not a {n.category} chain for {phase}"
    if (
        t.product
        and chain.get("products")
        and product_support(t.product, chain["products"]) == "no"
    ):
        return f"not for {t.product}"
    quant = t.quantization or "bf16"
    if (
        chain.get("quantization")
        and quant not in chain["quantization"]
        and not (quant == "bf16" and "fp16" in chain["quantization"])
    ):
        return f"written for {', '.join(chain['quantization'])}"
    ops = [s.get("operator", TORCH) for s in kept_stages(ctx, chain, n, phase, quant)]
    cannot = [o for o in ops if o != TORCH and not expresses(ctx, n, o)]
    if cannot:  # a stage operator cannot express the module (sinks on FA v1, another GELU)
        return f"{', '.join(cannot)} cannot express this module"
    covered = frozenset().union(*(fuses(ctx, o) for o in ops))
    if "dispatch" in covered:  # a dispatch routes each token to its experts' rank
        covered |= {"expert_routing"}
    if not n.steps <= covered:
        return f"its operators do not compute {', '.join(sorted(n.steps - covered))}"
    words = _words(chain)
    said = [w for w in n.refuse_words if w in words]
    if not decided and said:
        return f"its name or title says {', '.join(said)}"
    if (
        n.category == "attention"
        and phase == "prefill"
        and n.bidirectional != sees_every_key(ctx, chain)
    ):  # a causal or full mask where the module has the other (one decode row sees all)
        return "its mask is " + ("causal" if n.bidirectional else "full")
    return ""


def _fits(
    ctx: Context, chain: dict[str, Any], n: Need, phase: str, t: Target, decided: bool = False
) -> tuple[Any, ...] | None:
    """Rank key of a chain for one need and phase; None when it does not fit
    (:func:`unfit`).  The deployment comes first: a chain built for a mode the target
    does not ask for never outranks one that runs as deployed, whatever the products say."""
    if unfit(ctx, chain, n, phase, t, decided):
        return None
    quant = t.quantization or "bf16"
    ops = [s.get("operator", TORCH) for s in kept_stages(ctx, chain, n, phase, quant)]
    covered = frozenset().union(*(fuses(ctx, o) for o in ops))
    words = _words(chain)
    product_ok = not t.product or (
        chain.get("products") and product_support(t.product, chain["products"]) == "yes"
    )
    unsupported = sum(
        1
        for o in set(ops)
        if o != TORCH
        and (support(ctx, o, t.product) not in USABLE or not in_release(ctx, o, t.torch_npu))
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


def expresses(ctx: Context, n: Need, op: str) -> bool:
    """Whether ``op`` can compute its part of the module: no row of another pattern lists
    it (a rotation is swapped for the module's pairing later), and it takes the parameters
    the module's rows derive for the steps it fuses (a learnable sink, an approximation)."""
    done = fuses(ctx, op)
    if op in KNOWN_OPERATORS and op not in n.operators and "rope" not in done:
        return False
    needed = frozenset().union(*(p for steps, p in n.step_requires.items() if steps <= done))
    return needed <= params(ctx, op)


def _blocked(ctx: Context, m: Module, n: Need, chain: dict[str, Any], phase: str, t: Target) -> str:
    """Why some kept stage of the chain would not be proposed for the module ("" when
    every one would be): no equivalence proof of its mapping, or a value it cannot take."""
    out = []
    for st in kept_stages(ctx, chain, n, phase, t.quantization or "bf16"):
        made = stage(ctx, m, n, st, chain, t, phase)
        if "held" in made:
            out.append(f"{made['operator']}: {made['held']}")
        elif made["mapping"] not in PROVEN:
            out.append(f"{made['operator']}: no equivalence proof of {made['mapping']} yet")
    return "; ".join(out)


def best_chain(
    ctx: Context,
    n: Need,
    phase: str,
    t: Target,
    facts: dict[str, str] | None = None,
    m: Module | None = None,
) -> tuple[dict[str, Any] | None, list[str], list[dict[str, str]], list[str]]:
    """The chain to plan, the next ones, the chains held for another deployment, and the
    selector's earlier choices passed over because they do not compute the module.

    The chains are chosen by :func:`kb.catalog.select.select` (``kb.advice.select``) - the selector ``kb advise``
    answers with - from the module's situation ``facts``, in its order; of those, the
    ones whose kept stages compute this module (:func:`_fits`) are planned.  A chain
    the selector refuses only for a communication group the target lacks is named with
    the deployment it needs.  With the module ``m``, a chain some of whose kept stages
    would not be proposed (issue 22: no equivalence proof) gives way to the next whose
    stages all would; the passed-over choices are returned with the reason."""
    from kb.catalog.select import select

    chosen = select(ctx.catalog, facts or {"phase": phase}, module=n.category)
    by_name = {c["name"]: c for c in chains(ctx)}
    fitting: list[dict[str, Any]] = []
    reasons: dict[str, str] = {}  # the selector's choices that do not compute this module
    for f in chosen.fitting:
        if f.chain not in by_name:
            continue
        why = unfit(ctx, by_name[f.chain], n, phase, t, f.situation is not None and not f.open)
        if not why:
            fitting.append(by_name[f.chain])
        elif not fitting and kept_stages(ctx, by_name[f.chain], n, phase, t.quantization or "bf16"):
            reasons.setdefault(f.chain, why)  # (a chain none of whose stages this module does
            # is another module's: the router's selection holds the expert chains too)
    best = fitting[0] if fitting else None
    if m is not None:
        for c in fitting:
            why = _blocked(ctx, m, n, c, phase, t)
            if not why:
                best = c
                break
            reasons.setdefault(c["name"], "not every stage would be proposed (" + why + ")")
        else:  # no chain whose every stage is proposed: the first, its stages held as before
            reasons = {k: v for k, v in reasons.items() if best is None or k != best["name"]}
    order = [f.chain for f in chosen.fitting]
    upto = order.index(best["name"]) if best is not None else len(order)
    passed = [
        f"{name} (what kb advise gives for these facts) is not planned: {why}"
        for name, why in reasons.items()
        if order.index(name) < upto
    ]
    rest = [c for c in fitting if c is not best]
    needs = {
        c["name"]: max(
            (m for part in unasked(ctx, c, t) for m in part),
            key=PARALLEL_DISTANCE.__getitem__,
            default="",
        )
        for c in rest
    }
    needs.update(
        {
            m.chain: m.parallel
            for m in chosen.rejected
            if m.parallel
            and not m.conflicts
            and all(r.startswith("needs ") for r in m.reasons)
            and m.chain in by_name
            and _fits(ctx, by_name[m.chain], n, phase, t) is not None
        }
    )
    held = [
        {
            "chain": name,
            "parallel": mode,
            "reason": f"needs {PARALLEL_BY_NAME[mode].label} (--parallel {mode})",
        }
        for name, mode in needs.items()
        if mode
    ]
    return best, [c["name"] for c in rest if not needs[c["name"]]][:3], held, passed


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
    for st in chain.get("stages") or []:
        op = st.get("operator", TORCH)
        done = fuses(ctx, op)
        if op == TORCH or op in seen or not (done & (n.keep or n.steps)) or (done & n.refuse):
            continue
        if not _applies(st, phase, scheme):
            continue
        seen.add(op)
        out.append(st)
    return out


def _ranked(ctx: Context, steps: frozenset[str], n: Need, t: Target) -> list[str]:
    from kb.scan.offers import fused_for

    # the module's own pattern rows name their operators first (a deprecated one too: the
    # offers leave those out), then the operators whose fuses cover the steps
    mine = [o for r in n.rows for o in r.operators if steps <= fuses(ctx, o)]
    ops = [
        o
        for o in dict.fromkeys([*mine, *fused_for(ctx, tuple(sorted(steps)), t.product)])
        if not (fuses(ctx, o) & n.refuse)
        and in_release(ctx, o, t.torch_npu)
        and expresses(ctx, n, o)
        and support(ctx, o, t.product) != "no"
    ]
    ops.sort(key=lambda o: support(ctx, o, t.product) not in USABLE)
    return ops


def _by_operators(
    ctx: Context, m: Module, n: Need, t: Target, phase: str = ""
) -> list[dict[str, Any]]:
    """No chain fits: the operators whose ``fuses`` cover the steps, closest first; when
    no one operator covers them all, one stage per step (attention core, rotation,
    q/k norm), each only when the records have an operator for it."""
    groups = [n.steps]
    if not _ranked(ctx, n.steps, n, t):
        apart = {"rope", "kv_cache_write", "rms_norm"}
        groups = (
            [n.steps - apart]
            + [frozenset({s}) for s in sorted(n.steps & apart)]
            + [
                frozenset({norm})  # the q/k norm of the module, of the kind it computes
                for norm in ("rms_norm", "layer_norm")
                if norm in n.keep and norm not in n.steps
            ]
        )
    out = []
    for steps in groups:
        if steps == {"rope"} and m.facts.get("rope") in ("half", "interleave"):
            op = rope_operator(ctx, m.facts["rope"], t)
            ops = [op] if op else []
        else:
            ops = _ranked(ctx, steps, n, t)
        if not ops:
            continue
        # no chain fixes which keys a query sees: the module's causality does (the
        # compressed triangular mask for a causal one, none for a bidirectional one)
        shown = (
            {"sparse_mode": 0 if n.bidirectional else 3}
            if n.category == "attention" and "attention" in steps
            else {}
        )
        # the closest operator that computes the module (a held one only when none does)
        tried = [
            stage(
                ctx,
                m,
                n,
                {"stage": "+".join(sorted(steps)), "operator": op, "args": dict(shown)},
                None,
                t,
                phase,
            )
            for op in ops[:4]
        ]
        made = next((s for s in tried if "held" not in s), tried[0])
        rest = [op for op in ops if op != made["operator"]]
        if rest and "held" not in made:
            made["alternatives"] = rest[:3]
        out.append(made)
    return out


def _qk_norms(
    ctx: Context, m: Module, n: Need, t: Target, phase: str, stages: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The attention's q/k norm when none of its chain's stages computes it: a stage of
    the closest operator for that norm."""
    done = set().union(*(fuses(ctx, s["operator"]) for s in stages))
    norms = [x for x in ("rms_norm", "layer_norm") if x in n.keep - n.steps - done]
    out = [
        s for x in norms for s in _by_operators(ctx, m, replace(n, steps=frozenset({x})), t, phase)
    ]
    for s in out:  # emitted without the chain's name: the chain does not stage it
        s["notes"] = [*s.get("notes", []), f"{BESIDE} do not compute the q/k norm"]
    return out


def plan_module(ctx: Context, m: Module, t: Target, phases: list[str]) -> list[dict[str, Any]]:
    """One plan entry per phase whose chain differs (one for both when they agree).  A fact
    the code leaves to the configuration (one of a few values, ``Module.options``) is
    planned for the value the code names first, and every stage asks which it is."""
    m, undecided = assume_first_option(m)
    if m.kind.startswith("attention.") and m.facts.get("position_bias"):
        # the chains' attention calls add a mask, not this bias: planning one would drop it
        return [
            {
                "module": m.name,
                "kind": m.kind,
                "phase": "both" if len(phases) > 1 else phases[0],
                "file": m.file,
                "lines": [m.line, m.end_line],
                "none": "the scores get an added position bias (ALiBi slopes times distances, or "
                "a learned relative-position table), which no chain's attention call passes; keep "
                "torch, or pass the bias "
                "yourself as pse_shift (npu_fused_infer_attention_score) or pse "
                "(npu_fusion_attention) and verify",
                "stages": [],
            }
        ]
    n = need(m)
    if n is None:
        return []
    scheme = SCHEMES.get(t.quantization or "")
    if scheme is not None and scheme.weight_scale != "-":  # a quantized target: quant stages belong
        quant = frozenset({"quantize", "dequantize", "dynamic_quantize", "matmul"})
        n = replace(
            n,
            refuse=n.refuse - quant,
            keep=n.keep | (quant if n.category in ("ffn", "moe") else frozenset()),
        )
    from kb.scan.model.situation import facts

    picks = {p: best_chain(ctx, n, p, t, facts(m, t, p, ctx), m) for p in phases}
    entries: list[dict[str, Any]] = []
    scheme_of = t.quantization or "bf16"
    kept = {
        p: kept_stages(ctx, c, n, p, scheme_of) if c else []
        for p, (c, _alt, _held, _passed) in picks.items()
    }
    # phases share an entry when they take the same chain and the same stages of it
    names = {
        p: ((c["name"], [id(s) for s in kept[p]]) if c else None)
        for p, (c, _alt, _held, _passed) in picks.items()
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
        chain, alternatives, held_chains, _passed = picks[members[0]]
        passed_over = list(dict.fromkeys(x for p in members for x in picks[p][3]))
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
            stages = [stage(ctx, m, n, s, chain, t, members[0]) for s in kept[members[0]]]
            stages += _qk_norms(ctx, m, n, t, members[0], stages)
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
            stages = _by_operators(ctx, m, n, t, members[0])
            unspelled = [s for s in stages if "held" in s]
            stages = [s for s in stages if "held" not in s]
            prereq = []
            if not stages:
                entry["none"] = (
                    f"no operator in the records {'computes' if unspelled else 'fuses'} "
                    f"{' + '.join(sorted(n.steps))}{' as this module does' if unspelled else ''}; "
                    "keep torch"
                )
            elif n.category == "attention":
                masked = any(s.get("args", {}).get("sparse_mode") == 3 for s in stages)
                prereq = ["causal-mask-2048"] if masked else []
                sees = _SEES[(n.bidirectional, n.bidirectional and m.facts.get("mask") is True)]
                entry["notes"] = ["no chain fixes the mask arguments for this module: " + sees]
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
        for s in stages:
            s["questions"] = sorted(set(s.get("questions", []) + undecided))
            if not s["questions"]:
                del s["questions"]
        # the facts planned for an assumed value: the port decides them first
        asked = [q.split(":", 1)[0] for q in undecided] if entry["stages"] else []
        entry["prerequisites"] = list(
            dict.fromkeys([*prereq, *n.prerequisites, *(f"config-{f}" for f in asked)])
        )
        if alternatives:
            entry["alternatives"] = alternatives
        if n.notes:
            entry["notes"] = entry.get("notes", []) + n.notes
        if passed_over:
            entry["notes"] = entry.get("notes", []) + passed_over
        entries.append(entry)
    return entries


def assume_first_option(m: Module) -> tuple[Module, list[str]]:
    """The module with each undecided fact set to the first value the code can give it,
    and the questions that say so (the configuration decides: ``--model-config``)."""
    assumed = {k: v[0] for k, v in m.options.items() if v and m.facts.get(k) == "unknown"}
    if not assumed:
        return m, []

    asked = {u.split(":", 1)[0]: u for u in m.unknown}
    questions = [
        f"{asked.get(k, k + ': undecided')}; planned for {v!r} (--model-config decides)"
        for k, v in assumed.items()
    ]
    return replace(m, facts={**m.facts, **assumed}), questions


def plan(ctx: Context, modules: list[Module], t: Target) -> list[dict[str, Any]]:
    """The whole plan, module by module, in inventory order."""
    phases = [row.name for row in PHASE_ROWS if row.inference]
    attentions = [m for m in modules if m.kind.startswith("attention.")]
    if attentions and not any(
        has_cache(m) or m.kind in ("attention.mla", "attention.linear") for m in attentions
    ):
        # no attention keeps keys across calls (a diffusion transformer, an encoder, a model
        # that recomputes every token): every call is one full pass, there is no decode
        phases = phases[:1]
    out: list[dict[str, Any]] = []
    for m in modules:  # an encoder without a cache (vision tower) runs once per request: prefill
        encoder = (
            m.kind.startswith("attention.")
            and not has_cache(m)
            and m.kind not in ("attention.mla", "attention.linear")
            and (
                m.kind in ("attention.vision", "attention.dit", "attention.bidirectional")
                or m.facts.get("causal") in (False, "caller")
            )
        )
        out += plan_module(ctx, m, t, phases[:1] if encoder else phases)
    return out
