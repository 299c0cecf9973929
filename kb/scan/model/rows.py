"""The planner's side of the pattern table (:mod:`kb.reference.mappings`): which rows a
module matches, which row a chain stage's operator stands for, the arguments the row
derives from the module's facts, the operator's own limits on those facts, and the row's
proof re-run with them.

Nothing here names a pattern: adding a row to the table (with its proof) is all a new
fusion pattern needs on this side.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from kb.reference.mappings import MAPPINGS
from kb.reference.patterns import ABSENT, PRESENT, Arg, Mapping, On
from kb.scan.model.entry import Module

#: every operator some row maps to: a chain stage using one of these for a module no row
#: of which lists it computes another pattern than the module's
KNOWN_OPERATORS: frozenset[str] = frozenset(
    op for m in MAPPINGS if m.pattern is not None and m.pattern.on for op in m.operators
)
#: the module fact a shape letter of an operator's record stands for (``D = 64``)
SHAPE_FACTS: dict[str, tuple[str, ...]] = {"D": ("rotary_dim", "head_dim")}
_WHEN = re.compile(r"^\s*([A-Za-z]\w*)\s*=\s*(\d+)\s*$")


def _holds(on: On, kind: str, facts: dict[str, Any]) -> bool:
    if not (kind == on.kind or kind.startswith(on.kind + ".")):
        return False
    for fact, allowed in on.facts:
        value = facts.get(fact, ABSENT)
        if value in ("unknown", None) and ABSENT not in allowed:
            return False
        if PRESENT in allowed and value not in (ABSENT, "unknown", None, False):
            continue
        if value not in allowed:
            return False
    return True


_ROWS: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[Mapping, ...]] = {}


def rows_for(m: Module) -> tuple[Mapping, ...]:
    """The rows whose pattern matches the module's kind and facts, in table order."""
    key = (m.kind, tuple(sorted((k, repr(v)) for k, v in m.facts.items())))
    if key not in _ROWS:
        _ROWS[key] = tuple(
            r
            for r in MAPPINGS
            if r.pattern is not None and any(_holds(o, m.kind, m.facts) for o in r.pattern.on)
        )
    return _ROWS[key]


def operators(rows: tuple[Mapping, ...]) -> frozenset[str]:
    return frozenset(op for r in rows for op in r.operators)


def row_for(
    rows: tuple[Mapping, ...],
    op: str,
    fuses: frozenset[str],
    chain_prerequisites: set[str],
    layout: str = "",
) -> Mapping | None:
    """The row a stage calling ``op`` stands for: among the module's rows listing the
    operator (else sharing a step with it), the one whose chain prerequisite the chain has,
    then the one whose id names the stage's layout, then the one covering most of what the
    operator fuses, then the first."""
    listed = [r for r in rows if op in r.operators]
    pool = listed or [r for r in rows if r.pattern is not None and set(r.pattern.steps) & fuses]
    if not pool:
        return None
    pool.sort(
        key=lambda r: (
            not (r.pattern and r.pattern.chain_prerequisite in chain_prerequisites),
            bool(
                r.pattern
                and r.pattern.chain_prerequisite
                and r.pattern.chain_prerequisite not in chain_prerequisites
            ),
            not (layout and r.id.endswith("_" + layout.lower())),
            not (set(r.pattern.steps) <= fuses if r.pattern else False),
            # of rows the operator computes wholly, the one that says most of what it fuses
            -len(set(r.pattern.steps) & fuses) if r.pattern else 0,
        )
    )
    return pool[0]


@dataclass
class Derived:
    """What a row makes of one operator for one module."""

    args: dict[str, Any] = field(default_factory=dict)
    tensors: list[str] = field(default_factory=list)  # tensors the port wires (learnable_sink)
    questions: list[str] = field(default_factory=list)  # facts nothing decided
    unset: list[str] = field(default_factory=list)  # arguments those facts would decide
    held: str = ""  # why the operator cannot compute the module


def applies(a: Arg, row: Mapping, op: str) -> bool:
    return op in (a.ops or row.operators)


def derive(row: Mapping, op: str, facts: dict[str, Any], numeric: Any) -> Derived:
    """The arguments of ``op`` the row derives from the module's facts; ``numeric(op,
    name)`` says whether the parameter takes a number (a symbol there is a question)."""
    out = Derived()
    for a in row.pattern.args if row.pattern else ():
        if not applies(a, row, op):
            continue
        if not a.fact:
            out.args[a.name] = a.fixed
            continue
        value = facts.get(a.fact, ABSENT)
        if a.tensor and value is False:
            continue  # the module does not have that tensor (no sinks, no bias)
        if value is ABSENT or value is None:
            if a.absent is not None:
                out.args[a.name] = a.absent
            continue
        if value == "unknown" or (isinstance(value, str) and not a.values and numeric(op, a.name)):
            out.questions.append(
                f"{a.fact}: {value if value != 'unknown' else 'not decided by the code'}"
            )
            out.unset.append(a.name)
            continue
        if a.values:
            table = dict(a.values)
            if value not in table:
                out.held = f"{op} has no {a.name} for this module's {a.fact} = {value!r}"
                continue
            value = table[value]
        if a.tensor:
            out.tensors.append(a.name)
        else:
            out.args[a.name] = value
    return out


def requirements(
    rows: tuple[Mapping, ...], facts: dict[str, Any]
) -> dict[frozenset[str], frozenset[str]]:
    """Per row's steps, the parameters an operator fusing all of them must take to express
    the module: those the row derives from a fact the module states (a learnable sink for
    attention with sinks, a GELU's approximation switch)."""
    out: dict[frozenset[str], set[str]] = {}
    for r in rows:
        if r.pattern is None:
            continue
        for a in r.pattern.args:
            if a.ops or not a.fact or facts.get(a.fact) in (None, False) or a.fact not in facts:
                continue
            out.setdefault(frozenset(r.pattern.steps), set()).add(a.name)
    return {k: frozenset(v) for k, v in out.items()}


def limits(record: dict[str, Any] | None, facts: dict[str, Any]) -> tuple[str, list[str]]:
    """(why the operator cannot take this module, questions) from its record's shapes: a
    tensor whose every shape holds only when a size is fixed (``D = 64``)."""
    if record is None:
        return "", []
    questions: list[str] = []
    for p in record.get("parameters") or []:
        shapes = p.get("shapes") or []
        fixed = [_WHEN.match(str(s.get("when") or "")) for s in shapes]
        if not shapes or not all(fixed):
            continue
        letters = {f.group(1): int(f.group(2)) for f in fixed if f}  # type: ignore[union-attr]
        for letter, size in letters.items():
            names = SHAPE_FACTS.get(letter, ())
            if not names:
                continue  # another argument of the call (quant_mode = 0), not a module size
            value = next((facts[n] for n in names if isinstance(facts.get(n), int)), None)
            if value is None:
                questions.append(f"{names[0]}: {record['name']} takes {letter} = {size} only")
            elif value != size:
                return (
                    f"{record['name']} takes {letter} = {size} only; this module's is {value}",
                    [],
                )
    return "", questions
