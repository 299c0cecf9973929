"""Evaluating an operator record's declarative ``rules`` against one candidate.

Three-valued on purpose: a clause about something the candidate does not state is
*unknown* (None), and a rule fires only when every clause is known to hold.  Records
are plain dicts here (the catalog's JSON), so this module needs no pydantic.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from kb.catalog.wording import MESSAGE, when_words
from kb.lint.model import Candidate, Path, Target
from kb.vocab import product_support, scheme_members, sub_series_in

Tri = bool | None
NUMERIC_TEXT = re.compile(r"^[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$")


def as_number(value: object) -> float | None:
    """A number from an int, float or numeric text (YAML reads ``1e-6`` as text)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and NUMERIC_TEXT.match(value.strip()):
        number = float(value)
        return number if math.isfinite(number) else None  # "1.0e400": out of range, not inf
    return None


def same(a: object, b: object) -> bool:
    """Value equality as a user means it: 2 == 2.0 == "2.0", but True is not 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, str) and isinstance(b, (int, float)):
        return as_number(a) == b
    return a == b


def one_of(value: object, choices: Iterable[object]) -> bool:
    return any(same(value, c) for c in choices)


def _and(values: Iterable[Tri]) -> Tri:
    result: Tri = True
    for v in values:
        if v is False:
            return False
        if v is None:
            result = None
    return result


def stated(cand: Candidate, name: str, *, maybe: Tri = None) -> Tri:
    """Is argument ``name`` passed?  True/False when the candidate says, else None.

    An argument under ``passed`` has a value the candidate does not state, which may be
    None: it satisfies a rule that requires it (``maybe=True``), but it is *unknown* to
    a rule that forbids it or tests its presence (the default), since unknown is never
    an error.
    """
    if name in cand.passed:
        return maybe
    if name in cand.args:
        return cand.args[name] is not None
    if name in cand.tensors:
        return cand.tensors[name] is not None
    return None


def scheme_of(cand: Candidate, target: Target) -> str | None:
    return cand.quantization or target.quantization


def holds(cond: dict[str, Any], cand: Candidate, target: Target) -> Tri:
    """Truth of one ``when`` clause for this candidate (None = unknown)."""
    if cond.get("arg") is not None:
        value = cand.args.get(cond["arg"])
        if value is None or isinstance(value, list):
            return None
        tests: list[Tri] = []
        if cond.get("equals") is not None:
            tests.append(same(value, cond["equals"]))
        if cond.get("in") is not None:
            tests.append(one_of(value, cond["in"]))
        if cond.get("not_in"):
            tests.append(not one_of(value, cond["not_in"]))
        return _and(tests)
    if cond.get("tensor") is not None:
        name = cond["tensor"]
        if name not in cand.tensors:
            return None
        spec = cand.tensors[name]
        if spec is None:
            return False  # not passed: it has no dtype or format
        tests = []
        if cond.get("dtype_in"):
            tests.append(None if spec.dtype is None else spec.dtype in cond["dtype_in"])
        if cond.get("format_in"):
            tests.append(None if spec.format is None else spec.format in cond["format_in"])
        return _and(tests)
    if cond.get("present") is not None:
        return stated(cand, cond["present"])
    if cond.get("absent") is not None:
        given = stated(cand, cond["absent"])
        return None if given is None else not given
    if cond.get("product") is not None:
        if target.product is None:
            return None
        support = product_support(target.product, cond["product"])
        return True if support == "yes" else None if support == "partial" else False
    if cond.get("quantization") is not None:
        scheme = scheme_of(cand, target)
        if scheme is None:
            return None
        # a family (``w8a8``) holds when every member does, fails when none does
        told = {
            m in cond["quantization"] or m.split("+")[0] in cond["quantization"]
            for m in scheme_members(scheme)
        }
        return told.pop() if len(told) == 1 else None
    return None


def fires(rule: dict[str, Any], cand: Candidate, target: Target) -> bool:
    """Every ``when`` clause known to hold (the first unknown or false one decides)."""
    args = cand.args
    for c in rule.get("when") or ():
        arg = c.get("arg")
        if arg is not None and args.get(arg) is None:
            return False  # the usual case: an argument the candidate does not state
        if holds(c, cand, target) is not True:
            return False
    return True


def _origin(rule: dict[str, Any]) -> str:
    """`` (record rule ID, when …)``: which rule a message comes from, written only for
    the rules a candidate breaks (most fire without a contradiction)."""
    when = when_words(rule, MESSAGE)
    return f" (record rule {rule.get('id', '?')}" + (f", when {when})" if when else ")")


@dataclass(frozen=True)
class Violation:
    """One effect of a fired record rule that the candidate contradicts.

    ``kind`` is ``dtype``, ``format``, ``value``, ``product``, ``product-sub-series`` (a
    family target, the rule's products name only some of its sub-series: KB109 reports
    it as a warning), ``forbid``,
    ``require-null`` (required but stated as null) or ``require-unstated``.
    """

    kind: str
    rule_id: str
    path: Path  # relative to the candidate
    detail: str
    message: str
    key: bool = False
    subject: str = ""  # tensor or argument name
    severity: str = "error"  # the record rule's: warning when the setting is only ignored


def in_range(value: float, rng: dict[str, Any]) -> bool:
    """Is ``value`` inside a record range (open bounds and the single ``also`` values included)?"""
    if any(value == float(v) for v in rng.get("also") or []):
        return True
    low, high = rng.get("min"), rng.get("max")
    if low is not None and (value < low or (rng.get("min_open") and value == low)):
        return False
    return not (high is not None and (value > high or (rng.get("max_open") and value == high)))


def range_text(rng: dict[str, Any]) -> str:
    """``[6, 12] or 0`` / ``(0, 1]``: a range as a message writes it."""
    low, high = rng.get("min"), rng.get("max")
    text = f"{'(' if rng.get('min_open') else '['}{'-inf' if low is None else f'{low:g}'}, "
    text += f"{'inf' if high is None else f'{high:g}'}{')' if rng.get('max_open') else ']'}"
    return text + "".join(f" or {float(v):g}" for v in rng.get("also") or [])


def violations(record: dict[str, Any], cand: Candidate, target: Target) -> Iterator[Violation]:
    """Every contradiction between the record's fired rules and what the candidate states."""
    for rule in record.get("rules") or []:
        if not fires(rule, cand, target):
            continue
        rid, msg = rule.get("id", "?"), rule.get("message", "")
        sev = str(rule.get("severity") or "error")
        for name, allowed in (rule.get("dtypes") or {}).items():
            spec = cand.tensors.get(name)
            if spec is not None and spec.dtype is not None and spec.dtype not in allowed:
                yield Violation(
                    "dtype",
                    rid,
                    ("tensors", name, "dtype"),
                    f"{name} is {spec.dtype}, expected {'/'.join(allowed)}{_origin(rule)}",
                    msg,
                    subject=name,
                    severity=sev,
                )
        for name, allowed in (rule.get("formats") or {}).items():
            spec = cand.tensors.get(name)
            if spec is not None and spec.format is not None and spec.format not in allowed:
                yield Violation(
                    "format",
                    rid,
                    ("tensors", name, "format"),
                    f"{name} is {spec.format}, expected {'/'.join(allowed)}{_origin(rule)}",
                    msg,
                    subject=name,
                    severity=sev,
                )
        for name, allowed in (rule.get("values") or {}).items():
            value = cand.args.get(name)
            if value is not None and not isinstance(value, list) and not one_of(value, allowed):
                shown = ", ".join(map(str, allowed))
                yield Violation(
                    "value",
                    rid,
                    ("args", name),
                    f"{name}={value} is not allowed here, use {shown}{_origin(rule)}",
                    msg,
                    subject=name,
                    severity=sev,
                )
        for name, rng in (rule.get("ranges") or {}).items():
            value = cand.args.get(name)
            if (
                isinstance(value, (int, float))
                and not isinstance(value, bool)
                and not in_range(value, rng)
            ):
                yield Violation(
                    "value",
                    rid,
                    ("args", name),
                    f"{name}={value} is outside {range_text(rng)}{_origin(rule)}",
                    msg,
                    subject=name,
                    severity=sev,
                )
        products = rule.get("products") or []
        fit = product_support(target.product, products) if products and target.product else "yes"
        if fit == "partial":  # a family target, the rule names some of its sub-series
            subs = ", ".join(sub_series_in(str(target.product), products))
            yield Violation(
                "product-sub-series",
                rid,
                ("operator",),
                f"only on {subs} of {target.product}{_origin(rule)}",
                msg,
            )
        elif fit != "yes":
            yield Violation(
                "product",
                rid,
                ("operator",),
                f"not on {target.product}, only {', '.join(products)}{_origin(rule)}",
                msg,
                severity=sev,
            )
        for name in rule.get("forbid") or []:
            if stated(cand, name):
                where = ("args", name) if name in cand.args else ("tensors", name)
                yield Violation(
                    "forbid",
                    rid,
                    where,
                    f"{name} must not be passed{_origin(rule)}",
                    msg,
                    key=True,
                    subject=name,
                    severity=sev,
                )
        missing = []
        for name in rule.get("require") or []:
            given = stated(cand, name, maybe=True)
            if given is False:
                where = ("args", name) if name in cand.args else ("tensors", name)
                yield Violation(
                    "require-null",
                    rid,
                    where,
                    f"{name} is required{_origin(rule)}",
                    msg,
                    subject=name,
                    severity=sev,
                )
            elif given is None:
                missing.append(name)
        if missing and rule.get("when"):
            yield Violation(
                "require-unstated",
                rid,
                _trigger(rule),
                f"also pass {', '.join(missing)}{_origin(rule)}",
                msg,
            )


def _trigger(rule: dict[str, Any]) -> Path:
    """Where the clause that made a rule fire is written (its first arg or tensor)."""
    for c in rule.get("when") or []:
        if c.get("arg") is not None:
            return ("args", c["arg"])
        if c.get("tensor") is not None:
            return ("tensors", c["tensor"])
    return ("operator",)


def vendor_cited(rec: dict[str, Any], name: str, value: object) -> str:
    """``repo path`` of vendor code the record cites for passing ``value`` to ``name``.

    The evidence is data in the record: an entry of kind ``shipping-code`` or ``source``
    about ``parameters.<name>`` or ``parameters.<name>.allowed`` whose ``values`` name it.
    """
    fields = {f"parameters.{name}", f"parameters.{name}.allowed"}
    for ev in rec.get("evidence") or []:
        if ev.get("kind") not in ("shipping-code", "source") or not fields & set(
            ev.get("about") or []
        ):
            continue
        if any(same(value, v) for v in ev.get("values") or []):
            return f"{ev.get('repo')} {ev.get('path')}"
    return ""
