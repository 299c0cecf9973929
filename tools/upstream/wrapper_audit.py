"""Hold a record's value facts against what op-plugin's wrapper checks, and write them down.

:func:`audit_record` compares one operator record with the facts
:mod:`tools.upstream.wrapper_checks` read from its wrapper (and with the values the wheel's
docstring lists), and returns each disagreement with its weight:

* ``high`` — the record accepts what an unconditional ``TORCH_CHECK`` refuses (an allowed
  value, a closed range bound, a shape's rank, a dtype), refuses what it is the only
  check on, or lets an optional argument the wrapper requires go missing;
* ``medium`` — the wrapper tests a value in an ``if`` that the record does not allow, it
  closes a value set the record leaves open, it refuses the schema default, or the
  docstring lists other values;
* ``info`` — a value the record allows that a *conditional* check refuses (the record's
  rules may say so), an argument one dispatch drops on some chips.

:func:`check_blocks` turns the unconditional checks that were read exactly into the
record's ``wrapper_checks`` blocks, each with the page's own values for the same fact,
so ``kb validate`` holds the record to the binding without the upstream tree.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from kb.catalog.discrepancies import schema_literal, shape_rank
from kb.catalog.models.binding import same_value
from kb.vocab import normalize
from tools.upstream.cexpr import Accepts, Literal
from tools.upstream.wrapper_checks import Check, WrapperFacts

Record = dict[str, Any]
Add = Callable[..., None]


@dataclass
class Disagreement:
    op: str
    param: str
    kind: str
    severity: str  # high | medium | info
    record: str
    binding: str
    where: str
    text: str = ""
    noted: bool = False  # a discrepancy entry of the record already says so

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        noted = " (noted)" if self.noted else ""
        return (
            f"{self.severity:6} {self.kind:11} {self.op}.{self.param}: record {self.record}; "
            f"binding {self.binding} [{self.where}]{noted} {self.text}".rstrip()
        )


def _show(values: object) -> str:
    if isinstance(values, list):
        return "[" + ", ".join(repr(v) for v in values) + "]"
    return repr(values)


def _listed(p: Record, value: object) -> bool:
    return any(
        same_value(o, value) for o in [*(p.get("allowed") or []), *(p.get("also_accepted") or [])]
    )


def audit_record(
    rec: Record, wf: WrapperFacts, docstring: dict[str, list[Any]] | None = None
) -> list[Disagreement]:
    """Every way ``rec`` disagrees with its wrapper and, for closed value sets, its docstring."""
    params = {p["name"]: p for p in rec.get("parameters") or []}
    noted = {d.get("about") for d in rec.get("discrepancies") or []}
    out: list[Disagreement] = []

    def add(
        kind: str, sev: str, param: str, have: str, binding: str, where: str, **kw: str
    ) -> None:
        about = kw.get("about", f"parameters.{param}.allowed")
        text = kw.get("text", "")
        out.append(
            Disagreement(rec["name"], param, kind, sev, have, binding, where, text, about in noted)
        )

    for c in wf.checks:
        p = params.get(c.accepts.param) if c.accepts else None
        if c.accepts is None or p is None:
            continue
        if c.accepts.kind == "value" and not p["type"].startswith("Tensor"):
            _value(p, c.accepts, c, add)
        elif not c.guard:
            _tensor(rec, p, c.accepts, c, add)
    branched: set[str] = set()
    for b in wf.branches:
        p = params.get(b.accepts.param) if b.accepts else None
        if b.accepts is None or p is None or p.get("allowed") is None:
            continue
        missing = [v for v in _branch_values(b.accepts) if not _listed(p, v)]
        if missing and repr((b.accepts.param, missing)) not in branched:
            branched.add(repr((b.accepts.param, missing)))
            where, text = f"{b.path}:{b.line}", f"if ({b.text})"
            add(
                "branch",
                "medium",
                b.accepts.param,
                _show(p["allowed"]),
                _show(missing),
                where,
                text=text,
            )
    seen: set[tuple[str, str]] = set()
    for ig in wf.ignored:
        if ig.platform and (ig.param, ig.api) not in seen:
            seen.add((ig.param, ig.api))
            where, about = f"{ig.path}:{ig.line}", f"parameters.{ig.param}"
            add(
                "dropped",
                "info",
                ig.param,
                "",
                f"not passed to {ig.api}",
                where,
                about=about,
                text=f"when {ig.guard}",
            )
    for name, values in (docstring or {}).items():
        p = params.get(name)
        if p is None or p.get("allowed") is None or not values:
            continue
        if {repr(v) for v in values} != {repr(v) for v in p["allowed"]}:
            add("docstring", "medium", name, _show(p["allowed"]), _show(values), "docstring")
    return out


def _where(c: Check) -> str:
    return f"{c.path}:{c.line}"


def _value(p: Record, acc: Accepts, c: Check, add: Add) -> None:
    name, where = acc.param, _where(c)
    allowed = p.get("allowed")
    options = [v for v in [*(allowed or []), *(p.get("also_accepted") or [])] if v is not None]
    refused = [v for v in options if acc.admits(v) is False]
    if c.guard:
        if refused:
            text = f"when {c.guard}: {c.text}"
            add("conditional", "info", name, _show(refused), acc.describe(), where, text=text)
        return
    if refused:
        add("refused", "high", name, _show(refused), acc.describe(), where, text=c.text)
    if acc.values and not acc.intervals:
        unlisted = [v for v in acc.values if allowed is not None and not _listed(p, v)]
        shown = _show(acc.values)
        if unlisted:
            add("unlisted", "high", name, _show(allowed), shown, where, text=c.text)
        elif allowed is None and not p["type"].startswith(("int[]", "float[]")):
            add("open", "medium", name, "no allowed list", shown, where, text=c.text)
    rng = p.get("range") or {}
    for bound, open_key in (("min", "min_open"), ("max", "max_open")):
        value = rng.get(bound)
        if value is not None and not rng.get(open_key) and acc.admits(value) is False:
            about = f"parameters.{name}.range"
            add(
                "range",
                "high",
                name,
                f"{bound} {value}",
                acc.describe(),
                where,
                about=about,
                text=c.text,
            )
    default = schema_literal(p.get("default"))
    if default is not None and acc.admits(default) is False:  # type: ignore[arg-type]
        about, text = f"parameters.{name}.default", "a call without the argument fails"
        add(
            "default",
            "medium",
            name,
            f"default {p.get('default')}",
            acc.describe(),
            where,
            about=about,
            text=text,
        )


def _tensor(rec: Record, p: Record, acc: Accepts, c: Check, add: Add) -> None:
    name, where = acc.param, _where(c)
    if acc.kind == "dim":
        about = f"parameters.{name}.shapes"
        for shape in p.get("shapes") or []:
            r = shape_rank(shape["dims"])
            if r is not None and acc.admits(r) is False:
                binding = f"rank {acc.describe()}"
                add("rank", "high", name, shape["dims"], binding, where, about=about, text=c.text)
    elif acc.kind == "dtype":
        extra = [
            d for d in p.get("dtypes") or [] if acc.admits(normalize("dtype", d) or d) is False
        ]
        if extra:
            about = f"parameters.{name}.dtypes"
            add(
                "dtype",
                "high",
                name,
                ", ".join(extra),
                acc.describe(),
                where,
                about=about,
                text=c.text,
            )
    elif acc.kind == "present" and acc.values == [True] and p.get("required") is False:
        rules = rec.get("rules") or []
        if not any(not r.get("when") and name in (r.get("require") or []) for r in rules):
            add(
                "required",
                "high",
                name,
                "optional, no rule requires it",
                "required",
                where,
                about="rules",
                text=c.text,
            )


def _branch_values(acc: Accepts) -> list[Literal]:
    vals: list[Literal] = list(acc.values)
    for lo, lo_in, hi, hi_in in acc.intervals:
        if lo is None or hi is None or hi - lo > 64:
            continue
        start = int(lo) if lo_in else int(lo) + 1
        stop = int(hi) if hi_in else int(hi) - 1
        vals += list(range(start, stop + 1))
    return vals


#: Accepts kinds that become ``wrapper_checks`` blocks, and the block kind each is.
BLOCK_KINDS = {"value": "value", "dim": "rank", "dtype": "dtype", "size": "size"}


def check_blocks(
    rec: Record, wf: WrapperFacts, repo: str, commit: str, page: dict[str, list[Any]] | None = None
) -> list[dict[str, Any]]:
    """The record's ``wrapper_checks``: unconditional checks read exactly, with the page's values."""
    params = {p["name"]: p for p in rec.get("parameters") or []}
    blocks: list[dict[str, Any]] = []
    seen: set[str] = set()
    for c in wf.checks:
        acc = c.accepts
        if acc is None or c.guard or acc.kind not in BLOCK_KINDS or acc.param not in params:
            continue
        if (acc.kind == "value") == params[acc.param]["type"].startswith("Tensor"):
            continue  # a value check of a tensor, or a rank check of a scalar: not this
        block: dict[str, Any] = {"param": acc.param, "kind": BLOCK_KINDS[acc.kind]}
        if acc.kind == "size":
            block["index"] = acc.index
        if acc.values:
            block["values"] = list(acc.values)
        if acc.intervals:
            block["intervals"] = [_interval(iv) for iv in acc.intervals]
        if acc.excluded:
            block["excluded"] = list(acc.excluded)
        if acc.kind == "value" and (page or {}).get(acc.param):
            block["page"] = list((page or {})[acc.param])
        key = repr(sorted((k, repr(v)) for k, v in block.items()))
        if key in seen:
            continue
        seen.add(key)
        block.update(
            {
                "condition": c.text,
                "repo": repo,
                "commit": commit,
                "path": c.path,
                "lines": str(c.line),
            }
        )
        blocks.append(block)
    return blocks


def _interval(iv: tuple[float | None, bool, float | None, bool]) -> dict[str, Any]:
    lo, lo_in, hi, hi_in = iv
    out: dict[str, Any] = {}
    if lo is not None:
        out["min"] = int(lo) if float(lo).is_integer() else lo
        if not lo_in:
            out["min_open"] = True
    if hi is not None:
        out["max"] = int(hi) if float(hi).is_integer() else hi
        if not hi_in:
            out["max_open"] = True
    return out
