"""The binding is the fact: hold a record to its wrapper's checks and its noted discrepancies.

When the page and the code that runs disagree, the record states what runs and keeps the
page's claim in ``discrepancies``.  Two kinds of problems follow (``kb validate``):

* **a limit the binding contradicts** — a value in ``allowed`` (or a ``range`` bound, a
  default, a shape's rank or a dtype) that an unconditional ``TORCH_CHECK`` of the wrapper
  refuses (``wrapper_checks``, harvested by ``scripts/audit_wrappers.py``); and a page claim
  the wrapper refuses that no discrepancy records, so the page's value cannot come back
  on the next import without a trace;
* **a discrepancy the record does not follow** — an entry whose ``binding`` is not what the
  field says now, or whose ``page`` equals it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from kb.catalog.models import Discrepancy, Operator, Parameter, WrapperCheck

Report = Callable[[tuple[Any, ...], str], None]


def _values(value: object) -> list[object]:
    return list(value) if isinstance(value, list) else [value]


def _same_set(a: object, b: object) -> bool:
    def key(v: object) -> str:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return repr(v)
        return repr(float(v))

    return sorted(map(key, _values(a))) == sorted(map(key, _values(b)))


def shape_rank(dims: str) -> int | None:
    """The number of dimensions of ``[B, S, H]`` (None for prose, ``...`` or alternatives)."""
    m = re.fullmatch(r"\s*\[([^\[\]]*)\]\s*", dims)
    if m is None or "..." in dims or "…" in dims:
        return None
    inner = m.group(1).strip()
    return len(inner.split(",")) if inner else 0


def schema_literal(text: str | None) -> object:
    """A schema default literal as a value (``'half'`` → half, ``False`` → False)."""
    if text is None or text == "None":
        return None
    raw = text.strip().strip("'\"")
    if raw in ("True", "False"):
        return raw == "True"
    for cast in (int, float):
        try:
            return cast(raw)
        except ValueError:
            continue
    return raw


def _where(check: WrapperCheck) -> str:
    return f"{check.repo}@{check.commit[:7]} {check.path}:{check.lines}"


def _field_of(check: WrapperCheck) -> str:
    return {"value": "allowed", "rank": "shapes", "size": "shapes", "dtype": "dtypes"}[check.kind]


def _noted(rec: Operator, about: str, page: Sequence[object] | None = None) -> bool:
    return any(
        d.about == about and (page is None or _same_set(d.page, page)) for d in rec.discrepancies
    )


def _against_check(
    rec: Operator, i: int, check: WrapperCheck, p: Parameter, report: Report
) -> None:
    field = _field_of(check)
    about = f"parameters.{p.name}.{field}"
    fix = (
        f"the binding is the fact: drop it, and keep the page's claim under discrepancies "
        f"(about: {about}, page: …, binding: …, source: the wrapper)"
    )
    where = f"the wrapper refuses it ({_where(check)}: {check.condition})"
    if check.kind == "value":
        for value in [*(p.allowed or []), *p.also_accepted]:
            if value is not None and check.admits(value) is False:
                report(
                    ("parameters", _index(rec, p), "allowed"),
                    f"{p.name}.allowed lists {value!r}, but {where}; {fix}",
                )
        if p.range is not None:
            rng = p.range
            closed = [
                b for b, open_ in ((rng.min, rng.min_open), (rng.max, rng.max_open)) if not open_
            ]
            for bound in closed:
                if bound is not None and check.admits(bound) is False:
                    report(
                        ("parameters", _index(rec, p), "range"),
                        f"{p.name}.range reaches {bound}, but {where}; narrow the range",
                    )
        default = schema_literal(p.default)
        listed = p.allowed is None or default in p.allowed  # else the allowed-values check says it
        cited = any(f"parameters.{p.name}.default" in e.about for e in rec.evidence)
        if default is not None and listed and not cited and check.admits(default) is False:
            report(
                ("parameters", _index(rec, p), "default"),
                f"the schema default of {p.name} ({p.default}) fails: {where}; say so in a rule "
                f"and cite the check in evidence (about: [parameters.{p.name}.default])",
            )
    elif check.kind == "rank":
        for s_i, shape in enumerate(p.shapes):
            r = shape_rank(shape.dims)
            if r is not None and check.admits(r) is False:
                report(
                    ("parameters", _index(rec, p), "shapes", s_i),
                    f"{p.name} shape {shape.dims} has {r} dims, but {where}; {fix}",
                )
    elif check.kind == "dtype":
        for dtype in p.dtypes:
            if check.admits(dtype) is False:
                report(
                    ("parameters", _index(rec, p), "dtypes"),
                    f"{p.name}.dtypes lists {dtype}, but {where}; {fix}",
                )
    page = [v for v in check.page or [] if check.admits(v) is False]
    if page and not _noted(rec, about, check.page):
        report(
            ("wrapper_checks", i),
            f"the page states {p.name} {check.page}, and the wrapper "
            f"refuses {page} ({_where(check)}): record the page's claim in discrepancies "
            f"(about: {about}, page: {check.page}, binding: what the wrapper accepts)",
        )


def _index(rec: Operator, p: Parameter) -> int:
    return next(i for i, q in enumerate(rec.parameters) if q.name == p.name)


def _follows(rec: Operator, d: Discrepancy) -> str | None:
    """Why the record does not hold the discrepancy's binding value (None: it does)."""
    if _same_set(d.page, d.binding):
        return "page and binding are the same value: this is no discrepancy"
    head, _, rest = d.about.partition(".")
    name, _, attr = rest.partition(".")
    params = {p.name: p for p in rec.parameters}
    if head == "parameters":
        p = params.get(name)
        if p is None:
            return f"{rec.name} has no parameter {name!r}"
        if attr == "allowed" and not _same_set(p.allowed or [], d.binding):
            return f"{name}.allowed is {p.allowed}, not the binding's {d.binding}"
        if attr == "shapes":
            dims = [s.dims for s in p.shapes]
            missing = [b for b in _values(d.binding) if b not in dims]
            if missing:
                return f"{name}.shapes has no {missing} (the binding's shape)"
            if any(v in dims for v in _values(d.page) if v not in _values(d.binding)):
                return f"{name}.shapes still lists the page's {d.page}"
        if attr == "dtypes":
            extra = [v for v in _values(d.page) if v in p.dtypes and v not in _values(d.binding)]
            if extra:
                return f"{name}.dtypes still lists the page's {extra}"
    elif head == "rules" and name not in {r.id for r in rec.rules}:
        return f"{rec.name} has no rule {name!r}"
    elif head in ("products", "phases", "unsupported_products"):
        have = getattr(rec, head)
        missing = [v for v in _values(d.binding) if v not in have]
        if missing:
            return f"{head} lacks {missing}, which the binding runs on"
    elif head == "returns" and name and name not in {r.name for r in rec.returns}:
        return f"{rec.name} has no return {name!r}"
    return None


def check_binding(rec: Operator, report: Report) -> None:
    """The record agrees with its wrapper's checks and follows its own discrepancies."""
    params = {p.name: p for p in rec.parameters}
    for i, check in enumerate(rec.wrapper_checks):
        p = params.get(check.param)
        if p is None:
            report(("wrapper_checks", i, "param"), f"{rec.name} has no parameter {check.param!r}")
            continue
        _against_check(rec, i, check, p, report)
    for i, d in enumerate(rec.discrepancies):
        why = _follows(rec, d)
        if why:
            report(
                ("discrepancies", i),
                f"discrepancy about {d.about}: {why}; the field holds "
                "what runs, the entry keeps what the page says",
            )
