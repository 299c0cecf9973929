"""Cross-field checks of operator records that keep corrected facts corrected.

pydantic checks each field; :mod:`kb.catalog.store` checks that names resolve.  This module
checks what one record says against itself and against what the importer recorded of
upstream, so a fact fixed once cannot quietly come back:

* ``status``/``superseded_by`` agree with ``upstream.deprecation`` (deprecated.yaml and
  the page, written by the importer); a successor upstream does not name needs
  ``evidence`` (KB-C1, KB-C2);
* facts no page states — ``unsupported_products``, ``phase_limit``, legacy spellings
  (``also_accepted``), binding names (``python_name``) and every dtype, format, value,
  shape, product and rule of an undocumented operator — cite a file in ``evidence``;
* a limit (a parameter's dtypes, formats, allowed values or range, a rule) is backed by
  a page, a source file (a wrapper check, a kernel registration), a config or the
  wheel's docstring — never only by what a test or a caller happens to pass;
* evidence points at fields that exist; defaults, rules, quantization modes and
  examples stay inside the values the parameters allow.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from typing import Any

from kb.catalog.discrepancies import check_binding
from kb.catalog.models import Evidence, Operator, Parameter
from kb.vocab import normalize

Report = Callable[[tuple[Any, ...], str], None]

#: ``torch_npu.npu_x`` or ``npu_x`` as deprecated.yaml and the pages name a replacement.
_OPERATOR_REF = re.compile(r"^(?:torch_npu\.)?(_?npu_[A-Za-z0-9_]+)$")


def replacement_operator(replace: str | None) -> str | None:
    """The torch_npu operator an upstream replacement text names, if it names exactly one."""
    m = _OPERATOR_REF.match((replace or "").strip())
    return m.group(1) if m else None


def _covers(ev: Evidence, field: str) -> bool:
    """Does ``ev`` back ``field`` (``parameters.x.dtypes`` is backed by ``parameters.x``)?"""
    return any(field == a or field.startswith(a + ".") for a in ev.about)


def backed(rec: Operator, field: str, value: object = None) -> bool:
    """Is ``field`` (and, when given, that one ``value`` of it) backed by evidence?"""
    for ev in rec.evidence:
        if _covers(ev, field) and (value is None or not ev.values or value in ev.values):
            return True
    return False


def evidenced_values(evidence: list[dict[str, Any]] | None, field: str) -> list[Any]:
    """Values of ``field`` that evidence entries name explicitly (raw record data).

    The importer keeps such values when a page lists fewer (a product a newer kernel
    reference adds, say) and the drift report does not call them removed.
    """
    out: list[Any] = []
    for ev in evidence or []:
        if isinstance(ev, dict) and field in (ev.get("about") or []):
            out += [v for v in ev.get("values") or [] if v not in out]
    return out


def _params(rec: Operator) -> dict[str, tuple[int, Parameter]]:
    return {p.name: (i, p) for i, p in enumerate(rec.parameters)}


def _deprecation(rec: Operator, report: Report) -> None:
    dep = rec.upstream.deprecation
    if rec.status == "deprecated" and dep is None:
        report(
            ("status",),
            "deprecated, but upstream.deprecation is empty: upstream does not "
            "deprecate it (run scripts/import_upstream.py import to record what it says)",
        )
    elif dep is not None and rec.status != "deprecated":
        where = " and ".join(dep.listed_in)
        report(("status",), f"{where} deprecate(s) this operator; status must be deprecated")
    named = replacement_operator(dep.replace) if dep else None
    succ = rec.superseded_by
    if named and succ != named and dep is not None:  # a named replacement comes from dep
        report(
            ("superseded_by",) if succ else ("upstream", "deprecation", "replace"),
            f"upstream names {named} as the replacement ({dep.replace!r} in "
            f"{dep.listed_in[0]}); superseded_by must be {named}, not {succ!r}",
        )
    elif succ and succ != named and not backed(rec, "superseded_by", succ):
        report(
            ("superseded_by",),
            f"no upstream statement names {succ} as the successor: cite "
            "one in evidence (about: [superseded_by]) or drop superseded_by",
        )


def _needs_evidence(rec: Operator, report: Report) -> None:
    page_marked = set(rec.upstream.unsupported_products)
    for i, product in enumerate(rec.unsupported_products):
        if product not in page_marked and not backed(rec, "unsupported_products", product):
            report(
                ("unsupported_products", i),
                f"{product} is not marked unsupported on the page; "
                "cite the statement or source check in evidence (about: [unsupported_products])",
            )
    for i, phase in enumerate(rec.phase_limit):
        if not backed(rec, "phase_limit", phase):
            report(
                ("phase_limit", i),
                f"phase_limit {phase}: cite where upstream restricts the "
                "operator to it in evidence (about: [phase_limit]); 'phases' only documents",
            )
    for name, (i, p) in _params(rec).items():
        for attr in ("also_accepted", "python_name"):
            if getattr(p, attr) and not backed(rec, f"parameters.{name}.{attr}"):
                report(
                    ("parameters", i, attr),
                    f"{attr} of {name} needs evidence: cite the "
                    f"source that maps it (about: [parameters.{name}.{attr}])",
                )
    if rec.status == "undocumented":
        _undocumented(rec, report)


#: Facts of a parameter an undocumented record may only state with a citation.
_PARAM_FACTS = ("dtypes", "formats", "shapes", "allowed", "range")


def _undocumented(rec: Operator, report: Report) -> None:
    """Without a page, every fact beyond the schema comes from somewhere: cite it."""
    for name, (i, p) in _params(rec).items():
        for attr in _PARAM_FACTS:
            if getattr(p, attr) and not backed(rec, f"parameters.{name}.{attr}"):
                report(
                    ("parameters", i, attr),
                    f"{name}.{attr}: {rec.name} has no page; cite the "
                    f"source, test or docstring in evidence (about: [parameters.{name}])",
                )
    for i, ret in enumerate(rec.returns):
        if (ret.dtypes or ret.formats or ret.shapes) and not backed(rec, f"returns.{ret.name}"):
            report(
                ("returns", i),
                f"return {ret.name}: {rec.name} has no page; cite where its "
                "dtypes/shapes come from in evidence (about: [returns])",
            )
    _listed_values(rec, report)
    for field in ("products", "quantization"):
        if getattr(rec, field) and not backed(rec, field):
            report(
                (field,),
                f"{rec.name} has no page; cite where its {field} come from in "
                f"evidence (about: [{field}])",
            )
    for i, rule in enumerate(rec.rules):
        if not backed(rec, f"rules.{rule.id}"):
            report(
                ("rules", i),
                f"rule {rule.id}: {rec.name} has no page; cite its upstream "
                f"basis in evidence (about: [rules.{rule.id}]) or drop it",
            )


def _listed_values(rec: Operator, report: Report) -> None:
    """Where every citation of a list names the values it backs, the list stays inside them
    (an allowed value or product nobody cited cannot slip into an undocumented record)."""

    def check(field: str, values: list[Any], where: tuple[Any, ...]) -> None:
        # vendor code cited for values outside the list (KB121) backs use, not the list
        cites = [ev for ev in rec.evidence if _covers(ev, field) and not _vendor_only(ev, values)]
        if not cites or any(not ev.values for ev in cites):
            return
        named = [v for ev in cites for v in ev.values]
        extra = [v for v in values if v not in named and _loose(v) not in map(_loose, named)]
        if extra:
            report(
                where,
                f"{field} lists {extra}, which no evidence names (it names {named}); "
                "cite them or drop them",
            )

    check("products", list(rec.products or []), ("products",))
    for name, (i, p) in _params(rec).items():
        for attr in ("allowed", "dtypes"):
            vals = [v for v in getattr(p, attr) or [] if v is not None]
            if vals:
                check(f"parameters.{name}.{attr}", vals, ("parameters", i, attr))


#: Evidence kinds that may restrict: what upstream states or enforces.  A test's inputs
#: and a caller's arguments show one working use, not the only one.
LIMIT_KINDS = frozenset({"page", "source", "config", "docstring"})
#: Parameter facts that reject a call when it falls outside them.
_LIMITS = ("dtypes", "formats", "allowed", "range")


def _limits_need_a_source(rec: Operator, report: Report) -> None:
    """A limit no page states is backed by a statement or a check upstream, not a test."""

    def only_usage(field: str, exact: bool, values: list[Any] | None = None) -> bool:
        # code evidence for values outside an allowed list is no support of the list
        # (KB121 reports those values), so it neither backs nor condemns it
        kinds = {
            ev.kind
            for ev in rec.evidence
            if (field in ev.about if exact else _covers(ev, field))
            and not (values is not None and _vendor_only(ev, values))
        }
        return bool(kinds) and not kinds & LIMIT_KINDS

    exact = rec.status != "undocumented"  # a page backs what no evidence names exactly
    for name, (i, p) in _params(rec).items():
        for attr in _LIMITS:
            listed = getattr(p, attr)
            values = list(listed) if attr == "allowed" and listed else None
            if listed and only_usage(f"parameters.{name}.{attr}", exact, values):
                report(
                    ("parameters", i, attr),
                    f"{name}.{attr} rests only on a test or a caller's "
                    "inputs, which show one use, not a limit: cite a page, a wrapper check or a "
                    "kernel registration (kind: page/source), or drop it",
                )
    if any(mode.tensors for mode in rec.quantization) and only_usage("quantization", exact):
        report(
            ("quantization",),
            "the quantization schemes' tensor dtypes rest only on a test "
            "or a caller's inputs: cite a page, a wrapper check or a kernel registration",
        )
    for i, rule in enumerate(rec.rules):
        if only_usage(f"rules.{rule.id}", exact):
            report(
                ("rules", i),
                f"rule {rule.id} rests only on a test or a caller's inputs: cite "
                "a page, a wrapper check or a kernel registration, or drop the rule",
            )


def _vendor_only(ev: Any, values: list[Any]) -> bool:
    """Code evidence naming only values outside ``values``: the vendor passes them undocumented."""
    return (
        ev.kind in ("shipping-code", "source")
        and bool(ev.values)
        and not any(v in values or _loose(v) in map(_loose, values) for v in ev.values)
    )


def _evidence_targets(rec: Operator, report: Report) -> None:
    params = _params(rec)
    rules = {r.id for r in rec.rules}
    returns = {r.name for r in rec.returns}
    for i, ev in enumerate(rec.evidence):
        for j, about in enumerate(ev.about):
            head, _, rest = about.partition(".")
            name = rest.split(".")[0]
            if head == "parameters" and name not in params:
                report(("evidence", i, "about", j), f"{rec.name} has no parameter {name!r}")
            elif head == "rules" and name not in rules:
                report(("evidence", i, "about", j), f"{rec.name} has no rule {name!r}")
            elif head == "returns" and name and name not in returns:
                report(("evidence", i, "about", j), f"{rec.name} has no return {name!r}")


def _canon(p: Parameter, value: object) -> object:
    if p.takes == "dtype" and value is not None and not isinstance(value, (list, bool)):
        return normalize("dtype", value) or value
    return value


def _admits(p: Parameter, value: object) -> bool:
    """Is ``value`` one of the parameter's allowed values (or a legacy spelling)?"""
    if p.allowed is None or (value is None and p.type.endswith("?")):
        return True
    options = [_canon(p, v) for v in [*p.allowed, *p.also_accepted]]
    want = _canon(p, value)
    if isinstance(want, list) and not any(isinstance(o, list) for o in options):
        return all(_canon(p, w) in options for w in want)
    return want in options or _loose(want) in [_loose(o) for o in options]


def _loose(value: object) -> object:
    """Numbers compare by value (1 == 1.0); everything else as is."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    return value


def _literal(text: str | None) -> object:
    """A schema default literal as a value (``'5'`` → 5, ``None`` → None)."""
    if text is None:
        return None
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text.strip("'\"")


def _values(rec: Operator, report: Report) -> None:
    params = _params(rec)
    for name, (i, p) in params.items():
        if p.allowed is None or p.default is None:
            continue
        default = _literal(p.default)
        if default is None or (isinstance(default, str) and p.is_tensor):
            continue
        if not _admits(p, default) and not backed(rec, f"parameters.{name}.default"):
            report(
                ("parameters", i, "allowed"),
                f"the schema default of {name} ({p.default}) is "
                "not among its allowed values (cite upstream in evidence, about: "
                f"[parameters.{name}.default], if it really says so)",
            )
    for r_i, rule in enumerate(rec.rules):
        for arg, values in rule.values.items():
            p = params[arg][1]
            bad = [v for v in values if not _admits(p, v)]
            if bad:
                report(
                    ("rules", r_i, "values", arg),
                    f"rule {rule.id} allows {bad} for {arg}, "
                    "which the parameter's allowed values exclude",
                )
        for attr in ("dtypes", "formats"):
            for tensor, listed in getattr(rule, attr).items():
                have = getattr(params[tensor][1], attr)
                extra = [x for x in listed if have and x not in have]
                if extra:
                    report(
                        ("rules", r_i, attr, tensor),
                        f"rule {rule.id} names {attr} {extra} "
                        f"for {tensor}, which its parameter does not list",
                    )
        for cond in rule.when:
            if cond.arg is None:
                continue
            p = params[cond.arg][1]
            named = [cond.equals] if cond.equals is not None else list(cond.in_ or [])
            bad = [v for v in named if not _admits(p, v)]
            if bad:
                report(
                    ("rules", r_i, "when"),
                    f"rule {rule.id} conditions on {cond.arg} = {bad}, "
                    "which is not an allowed value",
                )
    for q_i, mode in enumerate(rec.quantization):
        for arg, value in mode.select.items():
            p = params[arg][1]
            if not p.is_tensor and not _admits(p, value):
                report(
                    ("quantization", q_i, "select", arg),
                    f"mode {mode.scheme} selects {arg}={value!r}, which is not an allowed value",
                )
        for tensor, dtypes in mode.tensors.items():
            have = params[tensor][1].dtypes
            extra = [d for d in dtypes if have and d not in have]
            if extra:
                report(
                    ("quantization", q_i, "tensors", tensor),
                    f"mode {mode.scheme} takes "
                    f"{tensor} as {extra}, which its parameter does not list",
                )


def _example_value(node: ast.expr) -> tuple[bool, object]:
    """(known, value) of an example argument: literals and ``torch.x`` / ``torch_npu.x``."""
    try:
        return True, ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id in ("torch", "torch_npu")
    ):
        return True, f"{node.value.id}.{node.attr}"
    return False, None


def _calls(tree: ast.AST, name: str) -> Iterator[ast.Call]:
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if called == name:
            yield node


def _examples(rec: Operator, report: Report) -> None:
    """Keyword arguments an example passes the operator must exist and be allowed."""
    from kb.catalog.binding import python_name

    params = _params(rec)
    if not params:
        return
    keywords = {python_name(p.model_dump()): n for n, (_, p) in params.items()}
    keywords.update({n: n for n in params})
    for e_i, ex in enumerate(rec.examples):
        try:
            tree = ast.parse(ex.code)
        except SyntaxError as exc:
            report(
                ("examples", e_i, "code"), f"example does not parse: {exc.msg} (line {exc.lineno})"
            )
            continue
        for call in _calls(tree, rec.name):
            for kw in call.keywords:
                if kw.arg is None:
                    continue
                schema = keywords.get(kw.arg)
                if schema is None:
                    report(
                        ("examples", e_i, "code"),
                        f"example line {kw.lineno}: {rec.name} has no keyword {kw.arg!r}",
                    )
                    continue
                p = params[schema][1]
                known, value = _example_value(kw.value)
                if p.is_tensor or not known:
                    continue
                if p.takes == "dtype" and isinstance(value, str):
                    value = normalize("dtype", value) or value
                if not _admits(p, value):
                    report(
                        ("examples", e_i, "code"),
                        f"example line {kw.lineno}: {kw.arg}="
                        f"{value!r} is not an allowed value of {schema}",
                    )


CHECKS: tuple[Callable[[Operator, Report], None], ...] = (
    _deprecation,
    _needs_evidence,
    _limits_need_a_source,
    _evidence_targets,
    _values,
    _examples,
    check_binding,
)


def check_operator(rec: Operator, report: Report) -> None:
    """Run every consistency check of one operator record."""
    for check in CHECKS:
        check(rec, report)


def check_lineage(ops: dict[str, Operator], report_for: Callable[[str], Report]) -> None:
    """A predecessor listed under ``supersedes`` must name this operator as its
    ``superseded_by``, so a successor dropped for lack of evidence cannot linger on the
    other side (the reverse may stay unlisted)."""
    for name, rec in ops.items():
        for i, old in enumerate(rec.supersedes):
            prev = ops.get(old)
            if prev is not None and prev.superseded_by != name:
                report_for(name)(
                    ("supersedes", i),
                    f"{old} names {prev.superseded_by!r} as its "
                    f"successor, not {name}: drop it here or fix {old}",
                )
