"""KB106: a scalar argument's value: its schema type, its allowed values or lists, its range.

One rule of the operator-call family (:mod:`kb.check.rules.operator`), with the reading
of schema types (``int[2]?``) it needs; KB121 (:mod:`kb.check.rules.known`) extends it
for the values vendor code is cited for.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, ClassVar

from kb.check.conditions import NUMERIC_TEXT, as_number, one_of, same, vendor_cited
from kb.check.rules.operator import _HEAD, _is_tensor
from kb.lint.context import Context
from kb.lint.findings import Finding, Severity
from kb.lint.model import Candidate, Document, Path
from kb.lint.unit import CandidateRule
from kb.vocab import normalize

_TYPE = re.compile(r"^([A-Za-z]+)(\[\d*\])?(\?)?$")


def type_problem(param_type: str, value: object) -> str | None:
    """Why ``value`` cannot be passed as ``param_type`` (schema spelling), or None."""
    m = _TYPE.match(param_type.replace(" ", ""))
    if not m or value is None:
        return None
    base, is_list = m.group(1), m.group(2) is not None
    if isinstance(value, list):
        if not is_list:
            return f"expects one {base}, not a list"
        problems = [type_problem(base, v) for v in value]
        return next((p for p in problems if p), None)
    if base in ("int", "SymInt"):
        num = as_number(value)
        if isinstance(value, float) and value.is_integer():
            return None
        if num is None or isinstance(value, float) or not float(num).is_integer():
            return f"expects an integer, not {value!r}"
    elif base in ("float", "double"):
        if as_number(value) is None:
            if isinstance(value, str) and NUMERIC_TEXT.match(value.strip()):
                return f"expects a number; {value!r} is out of the float range"
            return f"expects a number, not {value!r}"
    elif base == "bool":
        if not isinstance(value, bool):
            return f"expects true or false, not {value!r}"
    elif base == "str" and not isinstance(value, str):
        return f"expects text, not {value!r}"
    return None


def _is_list_param(p: dict[str, Any]) -> bool:
    m = _TYPE.match(str(p.get("type", "")).replace(" ", ""))
    return bool(m and m.group(2) is not None)


class ValueNotAllowed(CandidateRule):
    code = "KB106"
    name = "value-not-allowed"
    summary = "A scalar argument has the wrong type, or a value outside its allowed set or range."
    why = (
        "Out-of-range scalars are rejected by the kernel's parameter check at run time (or, "
        "worse, accepted and computed wrongly). The record lists the allowed values or range. "
        "Dtype arguments (output_dtype, dst_type, y_dtype ...) take a torch.dtype, a torch_npu "
        "dtype constant or its integer code; list arguments (perm_x1) are compared as whole "
        "lists when the record lists whole lists."
    )
    fail = (
        _HEAD + "  - module: model.layers.*.mlp.gate\n    operator: npu_moe_gating_top_k_softmax\n"
        "    args: {k: 0}\n"
    )
    fix = (
        _HEAD + "  - module: model.layers.*.mlp.gate\n    operator: npu_moe_gating_top_k_softmax\n"
        "    args: {k: 8}\n"
    )

    severity: ClassVar[Severity] = "error"
    #: KB121 (kb/check/rules/known.py) reports the values vendor code is cited for.
    vendor: ClassVar[bool] = False

    def check_candidate(self, doc: Document, ctx: Context, cand: Candidate) -> Iterator[Finding]:
        for where, msg, cited in self._problems(ctx, cand):
            if bool(cited) != self.vendor:
                continue
            if cited:
                shown = f"{where[1]}={cand.args[where[1]]!r}"
                msg = (
                    f"{shown} is not a documented value, but vendor code passes it ({cited}); "
                    "it works where the vendor runs it, yet may change without notice"
                )
            yield self.on(doc, cand, where, msg)

    def _problems(self, ctx: Context, cand: Candidate) -> Iterator[tuple[Path, str, str]]:
        """(path, message, vendor code cited for the value or '') per value out of bounds."""
        rec = ctx.operator(cand.operator)
        if rec is None:
            return
        params = ctx.parameters(rec)
        for name, value in cand.args.items():
            p = params.get(name)
            if p is None or _is_tensor(p) or value is None:
                continue
            if p.get("takes") == "dtype":
                msg = self._dtype(name, value, p)
                if msg:
                    yield ("args", name), msg, vendor_cited(rec, name, value)
                continue
            problem = type_problem(str(p.get("type", "")), value)
            if problem:
                yield ("args", name), f"{name} {problem} ({p.get('type')})", ""
                continue
            allowed = p.get("allowed")
            if isinstance(value, list) and allowed and any(isinstance(a, list) for a in allowed):
                if not any(
                    isinstance(a, list) and _same_list(value, a) for a in allowed
                ) and not any(
                    isinstance(a, list) and _same_list(value, a)
                    for a in p.get("also_accepted") or []
                ):
                    shown = " or ".join(str(a) for a in allowed if a is not None)
                    yield (
                        ("args", name),
                        f"{name}={value} is not allowed; use {shown}",
                        vendor_cited(rec, name, value),
                    )
                continue
            items = value if isinstance(value, list) else [value]
            for j, item in enumerate(items):
                where = ("args", name, j) if isinstance(value, list) else ("args", name)
                msg = self._judge(name, item, p)
                if msg:
                    yield where, msg + _page_claim(rec, name, item), vendor_cited(rec, name, item)

    @staticmethod
    def _dtype(name: str, value: object, p: dict[str, Any]) -> str | None:
        if isinstance(value, list):
            return f"{name} takes one dtype, not a list"
        if one_of(value, p.get("also_accepted") or []):
            return None
        canon = normalize("dtype", value)
        if canon is None:
            return (
                f"{name}={value!r} is not a dtype; pass a torch.dtype (torch.bfloat16), "
                "a torch_npu dtype constant (torch_npu.hifloat8) or its integer code"
            )
        allowed = [a for a in p.get("allowed") or [] if a is not None]
        if allowed and canon not in allowed:
            return (
                f"{name}={canon} is not allowed; use one of {', '.join(map(_shown_value, allowed))}"
            )
        return None

    @staticmethod
    def _judge(name: str, value: object, p: dict[str, Any]) -> str | None:
        allowed = p.get("allowed")
        if allowed is not None and not one_of(value, allowed):
            if one_of(value, p.get("also_accepted") or []):
                return None
            shown = ", ".join(map(_shown_value, allowed))
            return f"{name}={value!r} is not allowed; use one of {shown}"
        rng = p.get("range") or {}
        num = as_number(value)
        if num is None or not rng:
            return None
        low, high, note = rng.get("min"), rng.get("max"), rng.get("note")
        if any(num == float(v) for v in rng.get("also") or []):
            return None  # one of the single values the range lists beside its span
        low_open, high_open = bool(rng.get("min_open")), bool(rng.get("max_open"))
        span = f"{_num(low, '-inf')}..{_num(high, 'inf')}"
        if low_open or high_open:  # an open bound reads as an interval: (0, 1]
            span = f"{'(' if low_open else '['}{_num(low, '-inf')}, {_num(high, 'inf')}{')' if high_open else ']'}"
        extra = f"; {note}" if note else ""
        if low is not None and low_open and num <= low:
            return f"{name}={value} must be above {low:g} (range {span}{extra})"
        if low is not None and num < low:
            return f"{name}={value} is below the minimum {low:g} (range {span}{extra})"
        if high is not None and high_open and num >= high:
            return f"{name}={value} must be below {high:g} (range {span}{extra})"
        if high is not None and num > high:
            return f"{name}={value} is above the maximum {high:g} (range {span}{extra})"
        return None


def _page_claim(rec: dict[str, Any], name: str, value: object) -> str:
    """Why a value the page lists is refused: the discrepancy the record notes for it.

    When the page (or docstring) allows ``value`` and the binding does not, the reader of
    the page needs to hear that the page is what is wrong, and where the binding says so.
    """
    for d in rec.get("discrepancies") or []:
        if d.get("about") != f"parameters.{name}.allowed":
            continue
        page, binding = d.get("page"), d.get("binding")
        if not isinstance(page, list) or not one_of(value, page):
            continue
        if isinstance(binding, list) and one_of(value, binding):
            continue
        src = d.get("source") or {}
        who = {"kernel": "the kernel", "docstring": "the docstring"}.get(
            str(src.get("kind")), "op-plugin's wrapper"
        )
        book = "page" if (rec.get("upstream") or {}).get("path") else "docstring"
        where = (
            f"{src.get('repo')}@{str(src.get('commit'))[:7]} {src.get('path')}:{src.get('lines')}"
        )
        return f" (the {book} lists {_shown_value(value)}, but {who} refuses it: {where})"
    return ""


def _same_list(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))


def _num(value: float | None, default: str) -> str:
    return default if value is None else f"{value:g}"


def _shown_value(value: object) -> str:
    """An allowed value as a message lists it: the empty string as '' (not as nothing)."""
    return repr(value) if value == "" else str(value)


#: The family title of this module's codes: KB106 stays with the operator calls.
FAMILY = "Operator calls"

RULES = (ValueNotAllowed(),)
