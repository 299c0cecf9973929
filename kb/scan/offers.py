"""What the records offer for the unfused patterns the KB6xx detectors find.

:mod:`kb.scan.patterns` recognises a written-out computation and names the steps it
computes; here each match becomes an :class:`Opportunity` with the operators whose
``fuses`` cover those steps (ranked by :func:`fused_for`) and the reference chains
that use the best of them (:func:`chains_for`), read from the records, never from a
table in this code.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from kb.lint.context import Context
from kb.lint.findings import Finding
from kb.scan.fnindex import FnIndex
from kb.scan.interp import FileScan
from kb.scan.patterns import RULES
from kb.scan.values import Where
from kb.vocab import STATUS_RANK


@dataclass
class Opportunity:
    """One unfused pattern: where, what it computes, and what the records offer for it."""

    code: str
    file: str
    scope: str
    line: int
    column: int
    end_line: int
    steps: tuple[str, ...]
    what: str
    operators: list[str] = field(default_factory=list)
    chains: list[str] = field(default_factory=list)
    phase: str | None = None
    finding: Finding = field(default=None)  # type: ignore[assignment]


class _Fusing(NamedTuple):
    """What :func:`fused_for` ranks an operator on (read from the catalog once per scan)."""

    name: str
    fuses: frozenset[str]
    status: str
    products: tuple[str, ...]
    unsupported: tuple[str, ...]
    superseded: bool
    practice: int
    chain_uses: int


def _fusing_operators(ctx: Context) -> list[_Fusing]:
    """Current inference operators that fuse something, with their ranking facts.

    Decoding every record body once per scan instead of once per opportunity kind keeps
    a 200-file scan from spending most of its time in JSON.
    """
    key = ("fusing_operators",)
    if key in ctx.memo:
        return ctx.memo[key]  # type: ignore[no-any-return]
    uses: dict[str, int] = {}
    for chain in _chains(ctx):
        for stage in chain.get("stages") or []:
            uses[stage.get("operator", "")] = uses.get(stage.get("operator", ""), 0) + 1
    out = []
    for rec in ctx.catalog.records("operator"):
        if not rec.get("fuses") or rec.get("status") == "deprecated":
            continue
        if rec.get("category") == "training" or rec.get("phases") == ["training"]:
            continue
        successor = rec.get("superseded_by")
        out.append(
            _Fusing(
                rec["name"],
                frozenset(rec["fuses"]),
                str(rec.get("status")),
                tuple(rec.get("products") or ()),
                tuple(rec.get("unsupported_products") or ()),
                bool(successor and ctx.operator(successor) is not None),
                sum(len(r.get("sites") or []) for r in rec.get("seen_in") or []),
                uses.get(rec["name"], 0),
            )
        )
    ctx.memo[key] = out
    return out


def _chains(ctx: Context) -> list[dict[str, Any]]:
    key = ("chain_records",)
    if key not in ctx.memo:
        ctx.memo[key] = list(ctx.catalog.records("chain"))
    return ctx.memo[key]  # type: ignore[no-any-return]


def fused_for(ctx: Context, steps: tuple[str, ...], product: str | None) -> list[str]:
    """Operators whose ``fuses`` cover ``steps``, best first: close matches (at most two
    extra steps) before wide ones, current before superseded; then the ones shipping code
    calls most (``seen_in``), the closest (a plain RMSNorm gets the plain norm, not
    add+norm), documented for the product before not (refused ones are left out), the
    better documented, and those proven in chains."""
    key = ("fused_for", steps, product)
    if key in ctx.memo:
        return ctx.memo[key]  # type: ignore[no-any-return]
    from kb.vocab import product_support

    scored = []
    for op in _fusing_operators(ctx):
        if not set(steps) <= op.fuses:
            continue
        support = "yes"
        if product and op.products:
            support = product_support(product, list(op.products), list(op.unsupported))
        if support == "no":
            continue
        extra = len(op.fuses - set(steps))
        scored.append(
            (
                extra > 2,
                op.superseded,
                -min(op.practice, 20),
                extra,
                support == "undocumented",
                -STATUS_RANK.get(op.status, 0),
                -min(op.chain_uses, 5),
                op.name,
            )
        )
    ctx.memo[key] = [name for *_rest, name in sorted(scored)]
    return ctx.memo[key]  # type: ignore[no-any-return]


def chains_for(ctx: Context, operators: list[str], steps: tuple[str, ...]) -> list[str]:
    """Chains using the best operator; for a whole module (several steps and no single
    operator), attention chains whose stages cover RoPE and the cache write."""
    out = []
    for chain in _chains(ctx):
        stages = chain.get("stages") or []
        if operators:
            if operators[0] in {s.get("operator") for s in stages}:
                out.append(chain["name"])
            continue
        names = " ".join(str(s.get("stage", "")) for s in stages).lower()
        if chain.get("module") == "attention" and "rope" in names and "cache" in names:
            out.append(chain["name"])
    return sorted(out, key=lambda n: (0 if "gqa" in n or "mha" in n else 1, n))[:3]


def opportunities(
    scan: FileScan, tree: ast.Module, ctx: Context, settings: Any
) -> list[Opportunity]:
    """Every KB6xx match in a parsed file, with what the records offer for it."""
    from kb.scan import hints

    found: list[Opportunity] = []
    seen: set[tuple[str, int]] = set()
    functions = scan.functions or [("", tree)]
    for qual, fn in functions:
        if "loss" in qual.lower():  # auxiliary losses run in training only
            continue
        index = FnIndex(fn)
        for rule in RULES:
            for first, last, steps, what in rule.detect(index, scan.lines):
                line = getattr(first, "lineno", 1)
                if (rule.code, line) in seen:
                    continue
                seen.add((rule.code, line))
                ops = [] if rule.code == "KB609" else fused_for(ctx, steps, settings.product)
                chains = chains_for(ctx, ops, steps) if not ops else []
                col = Where(line, getattr(first, "col_offset", 0) + 1)
                end = getattr(last, "end_lineno", line) or line
                offer = (
                    f"use {ops[0]}" + (f" (or {', '.join(ops[1:3])})" if len(ops) > 1 else "")
                    if ops
                    else ""
                )
                if chains:
                    offer += ("; " if offer else "") + f"reference chain {', '.join(chains)}"
                if not offer:
                    offer = f"no operator in the records fuses {' + '.join(steps)}"
                message = (
                    f"{what} ({f'line {line}' if line == end else f'lines {line}-{end}'}): {offer}"
                )
                phase = hints.phase(frozenset(), qual.split("."))
                finding = Finding(scan.path, col.line, col.column, rule.code, "info", message)
                found.append(
                    Opportunity(
                        rule.code,
                        scan.path,
                        qual,
                        line,
                        col.column,
                        end,
                        steps,
                        what,
                        ops,
                        chains,
                        phase,
                        finding,
                    )
                )
    return found
