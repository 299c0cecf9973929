"""Compare records with upstream: what is new, gone, or different.

Each finding is a plain value; the two formatters (text for people, JSON for tools)
are separate and small.  A record is only compared on the facts it holds, except that
page-listed dtypes, formats and products it lacks are reported (that is how a new
dtype upstream shows up).  Run against the sources the records were built from, the
report is empty; against an edited copy it lists exactly the edits.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from kb.catalog.consistency import evidenced_values, replacement_operator
from tools.upstream.drafts import deprecation_block
from tools.upstream.facts import OperatorFacts, Upstream
from tools.upstream.records import RecordFile, RecordSet

KINDS = (
    "new",
    "removed",
    "signature",
    "dtypes",
    "formats",
    "products",
    "deprecation",
    "status",
    "versions",
)


@dataclass
class Drift:
    kind: str
    name: str
    file: str | None
    message: str
    detail: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(out.pop("detail"))
        return out


def _status_of(facts: OperatorFacts) -> str:
    return facts.status


def compare(record: RecordFile, facts: OperatorFacts) -> list[Drift]:
    """Drift between one record and the upstream facts of its operator."""
    data = record.data
    name, rel = facts.name, record.rel
    out: list[Drift] = []
    if facts.schema is not None and data.get("signature") != facts.schema.text:
        out.append(
            Drift(
                "signature",
                name,
                rel,
                "signature differs from the upstream schema",
                {
                    "record": data.get("signature"),
                    "upstream": facts.schema.text,
                    "source": facts.schema.source,
                },
            )
        )
    parsed = facts.parsed
    tensor_args = {a.name for a in parsed.args if a.type.startswith("Tensor")} if parsed else set()
    for param in data.get("parameters") or []:
        if not isinstance(param, dict):
            continue
        pname = param.get("name")
        page = facts.params.get(str(pname))
        is_tensor = pname in tensor_args or str(param.get("type", "")).startswith("Tensor")
        if page is None or not is_tensor:
            continue
        for key, listed in (("dtypes", page.dtypes), ("formats", page.formats)):
            added = [x for x in listed if x not in (param.get(key) or [])]
            if added:
                out.append(
                    Drift(
                        key,
                        name,
                        rel,
                        f"{pname}: upstream lists {', '.join(added)}",
                        {"parameter": pname, "added": added},
                    )
                )
    if facts.products is not None:
        have = list(data.get("products") or [])
        added = [p for p in facts.products if p not in have]
        kept = evidenced_values(data.get("evidence"), "products")
        removed = [p for p in have if p not in facts.products and p not in kept]
        if added or removed:
            parts = ([f"added {', '.join(added)}"] if added else []) + (
                [f"removed {', '.join(removed)}"] if removed else []
            )
            out.append(
                Drift(
                    "products",
                    name,
                    rel,
                    "products " + "; ".join(parts),
                    {"added": added, "removed": removed},
                )
            )
    if facts.unsupported_products is not None:
        marked = set(data.get("unsupported_products") or [])
        if not set(facts.unsupported_products).issubset(marked):
            out.append(
                Drift(
                    "products",
                    name,
                    rel,
                    f"unsupported products: record {sorted(marked)}, upstream "
                    f"{sorted(facts.unsupported_products)}",
                    {"unsupported": sorted(facts.unsupported_products)},
                )
            )
    rec_status = data.get("status")
    up_status = _status_of(facts)
    if (rec_status == "deprecated") != (up_status == "deprecated"):
        if up_status == "deprecated":
            msg = "deprecated upstream" + (
                f" (use {facts.replacement})" if facts.replacement else ""
            )
        else:
            msg = "the record says deprecated, upstream does not"
        out.append(
            Drift(
                "deprecation",
                name,
                rel,
                msg,
                {"record": rec_status, "upstream": up_status, "replacement": facts.replacement},
            )
        )
    elif rec_status != up_status and up_status != "deprecated":
        out.append(
            Drift(
                "status",
                name,
                rel,
                f"status is {rec_status}, upstream says {up_status}",
                {"record": rec_status, "upstream": up_status},
            )
        )
    out += _deprecation_facts(record, facts)
    versions = data.get("versions") if isinstance(data.get("versions"), dict) else {}
    held = (versions or {}).get("pytorch") or []
    if held and facts.versions and held != facts.versions:
        out.append(
            Drift(
                "versions",
                name,
                rel,
                "PyTorch versions differ",
                {"record": held, "upstream": facts.versions},
            )
        )
    return out


def _deprecation_facts(record: RecordFile, facts: OperatorFacts) -> list[Drift]:
    """``upstream.deprecation`` and ``superseded_by`` against deprecated.yaml and the page."""
    data, out = record.data, []
    up = data.get("upstream") if isinstance(data.get("upstream"), dict) else {}
    have = (up or {}).get("deprecation") or None
    want = deprecation_block(facts)
    same_status = (data.get("status") == "deprecated") == (want is not None)
    if have != want and same_status:  # a status change is reported once, by compare()
        out.append(
            Drift(
                "deprecation",
                facts.name,
                record.rel,
                f"upstream.deprecation is {have}, upstream says {want}",
                {"record": have, "upstream": want},
            )
        )
    named = replacement_operator(facts.replacement) if want else None
    succ = data.get("superseded_by")
    if named and named != facts.name and succ != named:
        out.append(
            Drift(
                "deprecation",
                facts.name,
                record.rel,
                f"superseded_by is {succ}, deprecated.yaml names {named}",
                {"record": succ, "upstream": named},
            )
        )
    return out


@dataclass
class Report:
    items: list[Drift]
    records: int
    upstream: int
    notes: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {k: sum(1 for d in self.items if d.kind == k) for k in KINDS}


def drift(upstream: Upstream, records: RecordSet) -> Report:
    ops = upstream.all_operators()
    items: list[Drift] = []
    matched: set[str] = set()
    for name in sorted(ops):
        facts = ops[name]
        record = records.find(name)
        if record is None:
            where = facts.upstream_path or facts.schema_source or "upstream"
            items.append(
                Drift(
                    "new",
                    name,
                    None,
                    f"no record ({facts.status}, {where})",
                    {"status": facts.status, "source": where},
                )
            )
            continue
        matched.add(record.name)
        items += compare(record, facts)
    page_paths = {p.upstream_path for p in upstream.pages}
    for rname in sorted(records.records):
        record = records.records[rname]
        if rname in matched:
            continue
        other = upstream.facts(rname)
        up = record.data.get("upstream") if isinstance(record.data.get("upstream"), dict) else {}
        path = (up or {}).get("path")
        if other is not None:
            # an operator outside the drafted set (e.g. excluded helpers) still gets compared
            items += compare(record, other)
            if path and path not in page_paths:
                items.append(
                    Drift(
                        "removed",
                        rname,
                        record.rel,
                        f"its page {path} is gone upstream",
                        {"reason": "page"},
                    )
                )
            continue
        if path or record.data.get("signature") or (up or {}).get("schema_source"):
            why = f"page {path} is gone" if path else "no schema defines it any more"
            items.append(
                Drift("removed", rname, record.rel, why, {"reason": "page" if path else "schema"})
            )
    order = {k: i for i, k in enumerate(KINDS)}
    items.sort(key=lambda d: (order[d.kind], d.name, str(d.detail.get("parameter", ""))))
    return Report(items, len(records.records), len(ops), list(records.problems) + upstream.warnings)


def to_json(report: Report) -> str:
    payload = {
        "summary": {
            "total": len(report.items),
            "kinds": report.counts(),
            "records": report.records,
            "upstream_operators": report.upstream,
        },
        "drift": [d.as_json() for d in report.items],
        "notes": report.notes,
    }
    return json.dumps(payload, ensure_ascii=False, indent=2)


def to_text(report: Report) -> str:
    counts = {k: v for k, v in report.counts().items() if v}
    if not report.items:
        head = f"no drift ({report.records} records, {report.upstream} upstream operators)"
        return head + "".join(f"\nnote: {n}" for n in report.notes) + "\n"
    lines = [
        f"drift: {len(report.items)} (" + ", ".join(f"{k} {v}" for k, v in counts.items()) + ")"
    ]
    for kind in KINDS:
        group = [d for d in report.items if d.kind == kind]
        if not group:
            continue
        lines.append("")
        lines.append(f"{kind} ({len(group)})")
        for d in group:
            where = f"  [{d.file}]" if d.file else ""
            lines.append(f"  {d.name}: {d.message}{where}")
            if kind == "signature":
                lines.append(f"    record:   {d.detail.get('record')}")
                lines.append(
                    f"    upstream: {d.detail.get('upstream')}  ({d.detail.get('source')})"
                )
            elif kind == "versions":
                lines.append(f"    record:   {', '.join(d.detail.get('record', []))}")
                lines.append(f"    upstream: {', '.join(d.detail.get('upstream', []))}")
    for note in report.notes:
        lines.append(f"note: {note}")
    return "\n".join(lines) + "\n"
