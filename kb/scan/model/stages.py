"""One plan stage: the operator a chain (or the ranking) offers for a module, with every
argument derived from the module's facts by its pattern row, checked against the
operator's own limits, and re-proved with the module's facts.

A stage is held back (``held``) when its operator cannot compute the module - a row of
another pattern lists it, no proof runs it (a row reached only through a shared step), a
fact maps to no value it takes, its record fixes a size the module does not have, or the
row's proof fails with the plan's arguments - and carries
``questions`` when a fact it needs is not decided by the code or the configuration.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Any

from kb.lint.context import Context
from kb.reference.patterns import Mapping
from kb.scan.model import mapping_ids as ids
from kb.scan.model import records as rec
from kb.scan.model.entry import Module
from kb.scan.model.needs import Need
from kb.scan.model.reproofs import reproved
from kb.scan.model.rows import KNOWN_OPERATORS, derive, limits, row_for

#: set by the tests to run without numpy; re-proofs need the [reference] extra
REPROVE = True


def rope_operator(ctx: Context, style: str, t: rec.Target) -> str | None:
    """The operator the rope chains apply for one layout: the stage whose name says it."""
    word = "interleav" if style == "interleave" else "standard"
    for chain in rec.chains(ctx):
        if chain.get("module") != "rope":
            continue
        for st in chain.get("stages") or []:
            op = st.get("operator", rec.TORCH)
            if (
                word in str(st.get("stage", ""))
                and op != rec.TORCH
                and rec.support(ctx, op, t.product) != "no"
            ):
                return str(op)
    return None


def _numeric(ctx: Context) -> Any:
    return lambda op, name: rec.param_type(ctx, op, name).startswith(
        ("int", "float", "bool", "SymInt")
    )


def _expresses(ctx: Context, m: Module, n: Need, op: str, chain: dict[str, Any] | None) -> str:
    """Why ``op`` cannot compute the module as the chain offers it ("" when it can)."""
    row = _row(ctx, n, op, chain)
    if op in KNOWN_OPERATORS and (row is None or op not in row.operators):
        return f"{op} computes another pattern than this module's"
    if row is None:
        return ""
    derived = derive(row, op, m.facts, _numeric(ctx))
    if derived.held:
        return derived.held
    for key, value in derived.args.items():
        allowed = rec.param(ctx, op, key).get("allowed") or []
        if allowed and value not in allowed:  # another spelling, or a mode it lacks
            return f"{key}: this module needs {value!r}, which {op} does not spell ({', '.join(map(str, allowed))})"
    held, _questions = limits(ctx.operator(op), m.facts)
    return held


def _row(
    ctx: Context, n: Need, op: str, chain: dict[str, Any] | None, layout: str = ""
) -> Mapping | None:
    prereqs = {p.get("id") for p in (chain or {}).get("prerequisites") or [] if p.get("id")}
    return row_for(n.rows, op, rec.fuses(ctx, op), prereqs, layout)  # type: ignore[arg-type]


def rope_choice(
    ctx: Context, m: Module, n: Need, op: str, chain: dict[str, Any] | None, t: rec.Target
) -> str:
    """The rotation operator for this module's pairing: the offered one when it computes
    it with no size left to confirm, else the first of the module's rotary rows' operators
    that does (then the rope chains'); a fixed size left unconfirmed ranks last."""
    candidates = [op] + [
        o for r in n.rows if "rope" in (r.pattern.steps if r.pattern else ()) for o in r.operators
    ]
    candidates.append(rope_operator(ctx, str(m.facts.get("rope")), t) or "")
    usable = [
        o
        for o in dict.fromkeys(c for c in candidates if c)
        if rec.support(ctx, o, t.product) != "no" and not _expresses(ctx, m, n, o, chain)
    ]
    usable.sort(key=lambda o: bool(limits(ctx.operator(o), m.facts)[1]))
    return usable[0] if usable else op


def stage(
    ctx: Context,
    m: Module,
    n: Need,
    st: dict[str, Any],
    chain: dict[str, Any] | None,
    t: rec.Target,
    phase: str = "",
) -> dict[str, Any]:
    op = str(st.get("operator"))
    out: dict[str, Any] = {"stage": st.get("stage", "fused"), "operator": op}
    notes: list[str] = []
    done = rec.fuses(ctx, op)
    if (
        "rope" in done
        and not ({"q_projection", "kv_cache_write"} & done)
        and m.kind != "attention.mla"
    ):
        if m.facts.get("rope") in ("half", "interleave"):
            chosen = rope_choice(ctx, m, n, op, chain, t)
            if chosen != op:
                notes.append(
                    f"the chain applies {op}; this module rotates {m.facts['rope']} pairs, so {chosen}"
                )
            op = out["operator"] = chosen
        else:
            notes.append(
                "rotary layout undecided (half or interleaved): confirm before choosing rotary_mode"
            )
    names = rec.params(ctx, op)
    args = {**_layer_choice(st.get("passed")), **dict(st.get("args") or {})}
    layout = str(args.get("input_layout") or args.get("layout") or ids.DEFAULT_LAYOUT)
    row = _row(ctx, n, op, chain, layout)
    passed = set(st.get("passed") or ())
    questions: list[str] = []
    why = _expresses(ctx, m, n, op, chain)
    if why:
        out["held"] = why
    if row is not None and not why:
        # a fact planned for an assumed value (Module.options) decides no argument
        facts = {**m.facts, **{k: "unknown" for k in m.options}}
        derived = derive(row, op, facts, _numeric(ctx))
        unset = list(derived.unset)
        if row.pattern and set(m.options) & {f for o in row.pattern.on for f, _ in o.facts}:
            # the row itself was chosen for an assumed value: what it fixes is assumed too
            unset += [a.name for a in row.pattern.args if not a.fact]
        for key in unset:
            args.pop(key, None)  # nor does the chain's fixed value for another module
        for key, value in derived.args.items():
            if key not in names or key in unset:
                continue
            allowed = rec.param(ctx, op, key).get("allowed") or []
            if allowed and value not in allowed:  # another spelling, or a mode it lacks
                out["held"] = (
                    f"{key}: this module needs {value!r}, which {op} does not spell ({', '.join(map(str, allowed))})"
                )
                continue
            args[key] = value
        passed |= set(derived.tensors)
        questions += derived.questions
        questions += limits(ctx.operator(op), m.facts)[1]
    args = {k: v for k, v in args.items() if k in names or not names}
    if args:
        out["args"] = args
    if passed:
        out["passed"] = sorted(passed)
    if questions:
        out["questions"] = sorted(set(questions))
    level = rec.support(ctx, op, t.product)
    if t.product and level not in rec.USABLE:
        notes.append(
            f"{op} is {'not supported' if level == 'no' else 'not documented'} on {t.product}"
        )
    elif level == "kernel":
        notes.append(
            f"{op} is built for {t.product} (kernel registration) but not documented there"
        )
    if not rec.in_release(ctx, op, t.torch_npu):
        notes.append(f"{op} is not in torch_npu {t.torch_npu}")
    out["mapping"] = row.id if row is not None else ids.UNKNOWN
    if row is not None and "held" not in out and questions:
        notes.append("re-proved once the unknown facts are given")
    elif row is not None and "held" not in out and op not in row.operators:
        # the row was reached through a shared step: its proof runs other operators, so
        # nothing shows that this one (its defaults, its layout) computes the module
        out["held"] = f"no proof runs {op} (the proof of {row.id} runs {', '.join(row.operators)})"
    elif row is not None and "held" not in out:
        failed = _reproved(ctx, row, m, op, args, phase)
        if failed:
            out["held"] = (
                "with these arguments the fused call computes something else: "
                + "; ".join(failed[:2])
            )
        elif failed is None:
            notes.append(
                "not re-proved with this module's facts: the [reference] extra (numpy) is not installed"
            )
    if notes:
        out["notes"] = notes
    return out


def _layer_choice(passed: Any) -> dict[str, int]:
    """Integer arguments a chain passes as ``A if window else B`` (a per-layer choice such
    as ``sparse_mode: "4 if sliding_window else 3"``): B, the layers without the window;
    the window's own value is the port's per layer (the plan notes the window)."""
    out: dict[str, int] = {}
    for key, value in passed.items() if isinstance(passed, dict) else ():
        found = re.fullmatch(r"\s*-?\d+ if \w*window\w* else (-?\d+)\s*", str(value))
        if found:
            out[key] = int(found.group(1))
    return out


def _reproved(
    ctx: Context, row: Mapping, m: Module, op: str, args: dict[str, Any], phase: str
) -> list[str] | None:
    """The row's proof re-run with the module's facts and the plan's arguments (None: the
    reference extra is not installed)."""
    if not REPROVE or os.environ.get("KB_SCAN_NO_REPROOF"):
        return []
    proves = row.pattern.proves if row.pattern else ()
    facts = {k: m.facts[k] for k in proves if k in m.facts}
    if "causal" in proves:
        facts.update(phase=phase or "prefill", cache=bool(m.facts.get("cache")))
    scalar = {k: v for k, v in args.items() if isinstance(v, (bool, int, float, str))}
    records = json.dumps(
        [(ctx.operator(o) or {}).get("parameters") for o in row.operators],
        sort_keys=True,
        default=repr,
    )
    digest = hashlib.blake2b(records.encode(), digest_size=8).hexdigest()
    try:
        return reproved(row.id, facts, scalar, op if op in row.operators else "", digest)
    except ImportError:
        return None
