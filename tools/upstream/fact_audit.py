"""A fact audit of operator records: every fact, held against every source that states it.

For a seeded sample of records each fact is listed - the signature, each parameter's
schema fields, each dtype, format, shape, allowed value and range bound, each product,
phase, PyTorch line, quantization dtype and rule - and held against what upstream says:
the schema (``op_plugin_functions.yaml`` or the wheel's codegen), the page's and the
docstring's text, the wrapper's checks (:mod:`tools.upstream.wrapper_checks`), the kernel
registration (the record's ``kernels``) and the record's own citations.  Each fact comes
out as

* ``confirmed`` - a source states it (which one is named);
* ``contradicted`` - a source that speaks to it says otherwise: a candidate defect;
* ``cited`` - only the record's ``evidence`` or ``discrepancies`` back it: read the file;
* ``open`` - nothing machine-readable speaks to it: read the page.

A person reads every contradicted, cited and open fact and decides what is a defect;
this module decides nothing on its own.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from kb.catalog.discrepancies import shape_rank
from kb.catalog.signature import SchemaError, parse_schema
from kb.vocab import normalize
from tools.upstream.facts import OperatorFacts
from tools.upstream.pages import ParamFacts
from tools.upstream.refresh import SCHEMA_FIELDS
from tools.upstream.wrapper_checks import WrapperFacts

Record = dict[str, Any]
VERDICTS = ("confirmed", "contradicted", "cited", "open")
#: GE dtype names of kernel registrations, as the records name them
_GE = {
    "FLOAT16": "float16",
    "FLOAT": "float32",
    "BF16": "bfloat16",
    "DOUBLE": "float64",
    "HIFLOAT8": "hifloat8",
    "FLOAT8_E8M0": "float8_e8m0fnu",
    "FLOAT4_E2M1": "float4_e2m1fn_x2",
    "FLOAT4_E1M2": "float4_e1m2fn_x2",
}


@dataclass
class Fact:
    record: str
    field: str  # parameters.x.dtypes, products, signature …
    value: str
    verdict: str
    source: str = ""  # which source decided

    def as_json(self) -> dict[str, str]:
        return asdict(self)


@dataclass
class Sources:
    """What upstream states about one operator, gathered by the caller."""

    facts: OperatorFacts | None = None
    wrapper: WrapperFacts | None = None
    doc_params: dict[str, ParamFacts] | None = None
    text: str = ""  # the page's and the docstring's text, for shapes and values stated in prose


def sample(names: list[str], size: int, seed: int, exclude: set[str] | None = None) -> list[str]:
    """``size`` record names drawn with ``seed`` (sorted first, so the draw is stable)."""
    pool = sorted(n for n in names if n not in (exclude or set()))
    return sorted(random.Random(seed).sample(pool, min(size, len(pool))))


def squeezed(text: str) -> str:
    """Text with spaces, backslashes and brackets gone and case folded, to find ``[B, S, H]``."""
    return re.sub(r"[\s\\`$()\[\]（）]", "", text).lower()


def _cited(rec: Record, field: str, value: object = None) -> bool:
    for ev in rec.get("evidence") or []:
        for about in ev.get("about") or []:
            if field == about or field.startswith(about + ".") or about.startswith(field + "."):
                values = ev.get("values") or []
                if value is None or not values or value in values:
                    return True
    return any(str(d.get("about", "")).startswith(field) for d in rec.get("discrepancies") or [])


def _kernel_lists(rec: Record, param: str, key: str) -> set[str]:
    out: set[str] = set()
    for k in rec.get("kernels") or []:
        for cfg in k.get("inputs") or []:
            for t in cfg.get("inputs") or []:
                if t.get("name") == param:
                    for v in t.get(key) or []:
                        out.add(_GE.get(v, v.lower()) if key == "dtypes" else v)
    return out


def audit_record(rec: Record, src: Sources) -> list[Fact]:
    """Every fact of ``rec`` with its verdict."""
    out: list[Fact] = []

    def add(field: str, value: object, verdict: str, source: str = "") -> None:
        out.append(Fact(rec["name"], field, str(value), verdict, source))

    up = src.facts
    schema = up.schema.text if up and up.schema else None
    if rec.get("signature"):
        verdict = (
            "open"
            if schema is None
            else ("confirmed" if schema == rec["signature"] else "contradicted")
        )
        add("signature", rec["signature"], verdict, "schema")
    args = {}
    if schema:
        try:
            args = {a.name: a for a in parse_schema(schema).args}
        except SchemaError:
            args = {}
    for p in rec.get("parameters") or []:
        _parameter(rec, p, args.get(p["name"]), src, add)
    _support(rec, up, add)
    _quantization(rec, add)
    text = squeezed(src.text)
    for rule in rec.get("rules") or []:
        # a rule is a person's reading of the page: always read, the text match is a hint
        field = f"rules.{rule['id']}"
        named = _rule_values(rule)
        hint = (
            "values on the page" if named and all(squeezed(str(v)) in text for v in named) else ""
        )
        add(field, rule.get("message", ""), "cited" if _cited(rec, field) else "open", hint)
    return out


def _parameter(rec: Record, p: Record, arg: Any, src: Sources, add: Callable[..., None]) -> None:
    name = p["name"]
    for attr, default in SCHEMA_FIELDS:
        have = p.get(attr, default)
        if arg is None:
            add(f"parameters.{name}.{attr}", have, "open")
        else:
            add(
                f"parameters.{name}.{attr}",
                have,
                "confirmed" if have == getattr(arg, attr) else "contradicted",
                "schema",
            )
    page = src.facts.params.get(name) if src.facts else None
    doc = (src.doc_params or {}).get(name)
    tensor = p["type"].startswith("Tensor")
    for key in ("dtypes", "formats"):
        stated = set(getattr(page, key, None) or []) | set(getattr(doc, key, None) or [])
        kernel = _kernel_lists(rec, name, key)
        listed = [normalize("dtype", v) or v if key == "dtypes" else v for v in p.get(key) or []]
        for value in listed:
            field = f"parameters.{name}.{key}"
            if value in stated:
                add(field, value, "confirmed", "page/docstring")
            elif value in kernel:
                add(field, value, "confirmed", "kernel")
            elif _cited(rec, field, value):
                add(field, value, "cited")
            else:
                add(field, value, "contradicted" if stated else "open", "page/docstring")
        if tensor and not p.get("any_dtype"):
            for missing in sorted(stated - set(listed)):
                add(
                    f"parameters.{name}.{key}",
                    f"missing {missing}",
                    "contradicted",
                    "page/docstring",
                )
    text = squeezed(src.text)
    ranks = _checks(src.wrapper, name, "dim")
    for shape in p.get("shapes") or []:
        field, dims = f"parameters.{name}.shapes", shape.get("dims", "")
        rank = shape_rank(dims)
        if ranks and rank is not None and any(c.admits(rank) is False for c in ranks):
            add(field, dims, "contradicted", "wrapper")
        elif squeezed(dims) and squeezed(dims) in text:
            add(field, dims, "confirmed", "page/docstring text")
        elif ranks and rank is not None:
            add(field, dims, "confirmed", "wrapper rank")
        else:
            add(field, dims, "cited" if _cited(rec, field) else "open")
    stated_values = (page.allowed(p["type"]) if page else None) or (
        doc.allowed(p["type"]) if doc else None
    )
    values = _checks(src.wrapper, name, "value")
    for value in p.get("allowed") or []:
        field = f"parameters.{name}.allowed"
        if any(c.admits(value) is False for c in values):
            add(field, value, "contradicted", "wrapper")
        elif stated_values and value in stated_values:
            add(field, value, "confirmed", "page/docstring")
        elif values and all(c.admits(value) for c in values):
            add(field, value, "confirmed", "wrapper")
        elif isinstance(value, str) and len(value) > 1 and _word_in(squeezed(value), text):
            add(field, value, "confirmed", "page/docstring text")
        else:  # a number on the page may mean anything: read it
            hint = "on the page" if _word_in(squeezed(str(value)), text) else ""
            add(field, value, "cited" if _cited(rec, field, value) else "open", hint)
    rng = p.get("range") or {}
    for bound in ("min", "max"):
        if rng.get(bound) is None:
            continue
        open_ = rng.get(f"{bound}_open", False)
        refused = not open_ and any(c.admits(rng[bound]) is False for c in values)
        verdict = (
            "contradicted"
            if refused
            else ("cited" if _cited(rec, f"parameters.{name}.range") else "open")
        )
        add(f"parameters.{name}.range.{bound}", rng[bound], verdict, "wrapper" if refused else "")


def _word_in(word: str, text: str) -> bool:
    return (
        bool(word) and re.search(rf"(?<![0-9a-z_]){re.escape(word)}(?![0-9a-z_])", text) is not None
    )


def _checks(wf: WrapperFacts | None, param: str, kind: str) -> list[Any]:
    if wf is None:
        return []
    return [
        c.accepts
        for c in wf.checks
        if c.accepts and not c.guard and c.accepts.kind == kind and c.accepts.param == param
    ]


def _support(rec: Record, up: OperatorFacts | None, add: Callable[..., None]) -> None:
    page = set(up.products or []) if up and up.products is not None else None
    kernel = {p for k in rec.get("kernels") or [] for p in k.get("products") or []}
    for product in rec.get("products") or []:
        if page is not None and product in page:
            add("products", product, "confirmed", "page")
        elif _cited(rec, "products", product):
            add("products", product, "cited")
        elif product in kernel:
            add("products", product, "confirmed", "kernel")
        else:
            add("products", product, "contradicted" if page else "open", "page")
    marked = set(up.unsupported_products or []) if up else set()
    for product in rec.get("unsupported_products") or []:
        cited = _cited(rec, "unsupported_products", product)
        add(
            "unsupported_products",
            product,
            "confirmed" if product in marked else ("cited" if cited else "open"),
            "page",
        )
    for phase in rec.get("phases") or []:
        add("phases", phase, "cited" if _cited(rec, "phases", phase) else "open")
    versions = up.versions if up else []
    for line in (rec.get("versions") or {}).get("pytorch") or []:
        verdict = "confirmed" if line in versions else ("contradicted" if versions else "open")
        add("versions.pytorch", line, verdict, "op_plugin_functions.yaml")


def _quantization(rec: Record, add: Callable[..., None]) -> None:
    params = {p["name"]: p for p in rec.get("parameters") or []}
    for mode in rec.get("quantization") or []:
        for tensor, dtypes in (mode.get("tensors") or {}).items():
            listed = params.get(tensor, {}).get("dtypes") or []
            for d in dtypes:
                verdict = "confirmed" if not listed or d in listed else "contradicted"
                add(f"quantization.{mode['scheme']}.{tensor}", d, verdict, "parameters")


def _rule_values(rule: Record) -> list[object]:
    named: list[object] = []
    for values in (rule.get("values") or {}).values():
        named += [v for v in values if v is not None]
    for dtypes in (rule.get("dtypes") or {}).values():
        named += dtypes
    return named


def summary(facts: list[Fact]) -> dict[str, Any]:
    counts = Counter(f.verdict for f in facts)
    return {
        "facts": len(facts),
        "records": len({f.record for f in facts}),
        **{v: counts[v] for v in VERDICTS},
    }
