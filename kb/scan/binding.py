"""Binding a call site to its operator's schema the way Python would.

A torch_npu function and a ``torch.ops`` overload take the same schema with two
differences: the generated torch_npu binding calls a schema ``self`` ``input``, and
keyword-only parameters (after ``*``) cannot be passed by position in either.  Binding
yields the candidate the check rules judge (literal scalar values under ``args``, every
passed tensor under ``tensors``, every non-literal scalar under ``passed``) and the
binding problems the scan rules report (KB501-KB505).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from typing import Any

from kb.catalog.binding import python_name
from kb.lint.findings import Finding
from kb.lint.model import TensorSpec
from kb.lint.unit import RuleUnit
from kb.scan import rules
from kb.scan.interp import CallSite
from kb.scan.values import Entry, Typed, Where, literal_of


@dataclass(frozen=True)
class Problem:
    """A binding problem: the rule unit that names it, where, and what to do.

    ``severity`` is the unit's unless the binding lowers it (a problem only some
    releases' schemas have is a warning).
    """

    rule: RuleUnit
    where: Where
    message: str
    severity: str = ""

    @property
    def code(self) -> str:
        return self.rule.code

    def finding(self, file: str) -> Finding:
        found = self.rule.finding(file, self.where.line, self.where.column, self.message)
        return replace(found, severity=self.severity) if self.severity else found  # type: ignore[arg-type]


@dataclass
class Bound:
    args: dict[str, Any] = field(default_factory=dict)
    tensors: dict[str, TensorSpec | None] = field(default_factory=dict)
    passed: set[str] = field(default_factory=set)
    #: schema name (or the unknown keyword as written) → its entry, for positions
    entries: dict[str, Entry] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


@functools.lru_cache(maxsize=4096)
def _parsed(schema: str) -> Any:
    """A schema string parsed once per process (a :class:`~kb.catalog.signature.Schema`
    is frozen): every call of an operator is bound against the same few schemas."""
    from kb.catalog.signature import parse_schema

    return parse_schema(schema)


def schema_params(record: dict[str, Any], schema: str) -> list[dict[str, Any]] | None:
    """A historical schema's parameters in the record's terms (python_name kept)."""
    from kb.catalog.signature import SchemaError

    try:
        parsed = _parsed(schema)
    except SchemaError:
        return None
    own = {p["name"]: p for p in record.get("parameters") or []}
    return [
        {
            **own.get(a.name, {}),
            "name": a.name,
            "type": a.type,
            "default": a.default,
            "keyword_only": a.keyword_only,
            "required": a.required,
            "mutated": a.mutated,
        }
        for a in parsed.args
    ]


def bind_releases(site: CallSite, record: dict[str, Any], schemas: list[tuple[str, str]]) -> Bound:
    """Bind against the record, then judge positional binding under the schemas a call may
    meet (``(first release, schema)`` pairs: the target release's, or every harvested one).

    A problem every schema has stays an error; one only some releases have becomes a
    warning naming the releases whose schema accepts the call; one none has is dropped.
    """
    out = bind(site, record)
    if not schemas:
        return out
    per: list[tuple[str, set[tuple[str, int, int]]]] = []
    for release, schema in schemas:
        params = schema_params(record, schema)
        if params is not None:
            problems = bind(site, record, params).problems
            per.append((release, {(p.code, p.where.line, p.where.column) for p in problems}))
    if not per:
        return out
    kept = []
    for problem in out.problems:
        if problem.rule not in (
            rules.TOO_MANY_POSITIONAL,
            rules.KEYWORD_ONLY_POSITIONAL,
            rules.MISSING_REQUIRED,
        ):
            kept.append(problem)
            continue
        key = (problem.code, problem.where.line, problem.where.column)
        bad = [rel for rel, found in per if key in found]
        fine = [rel for rel, found in per if key not in found]
        if not bad:
            continue
        if fine:
            kept.append(
                Problem(
                    problem.rule,
                    problem.where,
                    f"{problem.message} (from torch_npu "
                    f"{', '.join(bad)}; the schema of {', '.join(fine)} accepts the "
                    "call)",
                    "warning",
                )
            )
        else:
            kept.append(problem)
    out.problems = kept
    return out


def bind(
    site: CallSite, record: dict[str, Any], parameters: list[dict[str, Any]] | None = None
) -> Bound:
    """The candidate view of a call and its binding problems against ``record`` (or
    against ``parameters`` in place of its own: one release's schema)."""
    out = Bound()
    given_params = record.get("parameters") if parameters is None else parameters
    params: list[dict[str, Any]] = list(given_params or [])
    if not params:
        for name, entry in site.keywords.items():
            _put(out, name, None, entry)
        return out
    by_schema = {p["name"]: p for p in params}
    python = site.op.binding == "python"
    accepted = {(python_name(p) if python else p["name"]): p for p in params}
    other = {(p["name"] if python else python_name(p)): p for p in params}
    out_overload = site.op.overload not in (None, "default")
    positional = [p for p in params if not p.get("keyword_only")]
    given: dict[str, Entry] = {}
    for i, entry in enumerate(site.positional):
        if i < len(positional):
            given[positional[i]["name"]] = entry
        elif out_overload or site.star_args:
            break
        elif i < len(params):
            kw = params[i]
            shown = python_name(kw) if python else kw["name"]
            out.problems.append(
                Problem(
                    rules.KEYWORD_ONLY_POSITIONAL,
                    entry.where,
                    f"the {_ordinal(i + 1)} positional argument of {site.op.spelled} lands on "
                    f"{shown}, which is keyword-only: write {shown}={entry.text}",
                )
            )
            given[kw["name"]] = entry
        else:
            out.problems.append(
                Problem(
                    rules.TOO_MANY_POSITIONAL,
                    entry.where,
                    f"{site.op.spelled} takes at most {len(positional)} positional argument"
                    f"{'s' if len(positional) != 1 else ''} ({len(params)} parameters in all), "
                    f"this call passes {len(site.positional)}",
                )
            )
            break
    for name, entry in site.keywords.items():
        param = accepted.get(name)
        if param is None:
            swapped = other.get(name)
            if swapped is not None and (python or name not in by_schema):
                right = python_name(swapped) if python else swapped["name"]
                how = "the torch_npu binding" if python else "torch.ops calls (the schema)"
                out.problems.append(
                    Problem(
                        rules.BINDING_KEYWORD,
                        entry.key_where or entry.where,
                        f"{how} name{'s' if python else ''} this parameter {right!r}, not "
                        f"{name!r}: write {right}={entry.text}",
                    )
                )
                param = swapped
            elif out_overload:
                continue  # out= / workspace= of the out overload
            else:
                _put(out, name, None, entry)  # KB104 (unknown argument) judges it
                continue
        if param["name"] in given:
            out.problems.append(
                Problem(
                    rules.DUPLICATE_ARGUMENT,
                    entry.key_where or entry.where,
                    f"{name} is given twice, by position and by keyword",
                )
            )
            continue
        given[param["name"]] = entry
    for name, entry in given.items():
        _put(out, name, by_schema.get(name), entry)
    if not (site.star_args or site.open_kwargs or out_overload):
        missing = [
            python_name(p) if python else p["name"]
            for p in params
            if p.get("required", True) and p.get("default") is None and p["name"] not in given
        ]
        if missing:
            out.problems.append(
                Problem(
                    rules.MISSING_REQUIRED,
                    site.func_where,
                    f"{site.op.spelled} is called without {', '.join(missing)} (required)",
                )
            )
    return out


def _put(out: Bound, name: str, param: dict[str, Any] | None, entry: Entry) -> None:
    out.entries[name] = entry
    is_literal, value = literal_of(entry.value)
    kind = str(param.get("type", "")) if param is not None else ""
    if (
        kind.startswith("Tensor[]")
        and isinstance(entry.value, Typed)
        and entry.value.type == "Tensor"
    ):
        out.problems.append(
            Problem(
                rules.TENSOR_LIST_EXPECTED,
                entry.where,
                f"{name} takes {kind} (a list of tensors) but {entry.text} is annotated as one "
                f"tensor: pass [{entry.text}]",
            )
        )
    if kind.startswith("Tensor"):
        # an empty list for an optional Tensor[] is no tensor at all: op-plugin's wrappers
        # read both None and [] as an empty TensorList (value_or(at::TensorList()))
        if is_literal and (value is None or (value == [] and kind.startswith("Tensor[]"))):
            out.tensors[name] = None
        elif kind.endswith("?") and not is_literal:
            out.passed.add(name)  # a variable for an optional tensor may hold None
        else:
            out.tensors[name] = TensorSpec()
        return
    if is_literal:
        out.args[name] = value
    else:
        out.passed.add(name)
