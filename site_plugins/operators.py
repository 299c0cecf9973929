"""The operator page: everything a user needs to decide on and call one operator."""

from __future__ import annotations

from typing import Any

from kb.vocab import PRODUCT_LABELS, QUANT_LABELS
from site_plugins import md
from site_plugins.common import (
    Record,
    SiteData,
    badge,
    bilingual,
    category_path,
    h1,
    join_sections,
    keywords_section,
    record_path,
    scalar,
    status_path,
)


def operator_page(op: Record, data: SiteData) -> str:
    here = record_path("operator", op["name"])
    return join_sections(
        h1(op["name"]),
        _header(op, data, here),
        _lineage_warning(op, data, here),
        bilingual(
            op["summary"]["en"],
            op["summary"]["zh"],
            op.get("description", ""),
            op.get("description_zh", ""),
        ),
        _calls(op),
        _signature(op),
        _parameters(op),
        _returns(op),
        _constraints(op),
        _rules(op),
        _quantization(op),
        _where(op),
        _versions(op),
        _graph_mode(op),
        _fuses(op),
        _examples(op),
        _lineage(op, data, here),
        _used_in(op, data, here),
        _upstream(op),
        keywords_section(op.get("keywords")),
    )


def _header(op: Record, data: SiteData, here: str) -> str:
    pills = [
        badge(op["status"], status_path(op["status"]), here, op["status"]),
        badge(op["category"], category_path(op["category"]), here, "category"),
    ]
    return " ".join(pills)


def _lineage_warning(op: Record, data: SiteData, here: str) -> str:
    successor = op.get("superseded_by")
    if op.get("status") != "deprecated" and not successor:
        return ""
    title = "Deprecated" if op.get("status") == "deprecated" else "Superseded"
    lines = []
    if successor:
        lines.append(f"Use {data.ref(successor, here)} instead.")
    if op.get("replacement_note"):
        lines.append(md.block(op["replacement_note"]))
    body = "\n\n".join(lines) or "Prefer a newer operator."
    return f'!!! warning "{title}"\n\n' + md.indent(body)


def _calls(op: Record) -> str:
    calls = " · ".join(md.code(c) for c in op.get("calls", []))
    out = f"**Call as** {calls}"
    if op.get("aliases"):
        out += "  \n**Also known as** " + md.words(op["aliases"], " · ")
    return out


def pretty_signature(schema: str, width: int = 88) -> str:
    """One argument per line when the schema is too long to read on one line.

    Only whitespace changes; the text stays the upstream schema, token for token.
    """
    from kb.signature import SchemaError, _matching_paren, _split_top

    if len(schema) <= width:
        return schema
    try:
        open_at = schema.index("(")
        close_at = _matching_paren(schema, open_at)
    except (ValueError, SchemaError):
        return schema
    args = _split_top(schema[open_at + 1 : close_at])
    body = ",\n".join(f"    {a}" for a in args)
    return f"{schema[:open_at]}(\n{body}\n){schema[close_at + 1 :]}"


def _signature(op: Record) -> str:
    if not op.get("signature"):
        return "## Signature\n\nNo schema string is recorded for this operator."
    return "## Signature\n\n" + md.code_block(pretty_signature(op["signature"]), "python")


def _shapes(shapes: list[dict[str, Any]]) -> str:
    parts = []
    for s in shapes or []:
        text = md.code(s["dims"])
        if s.get("when"):
            text += f" ({md.inline(s['when'])})"
        parts.append(text)
    return "<br>".join(parts)


def _allowed(p: Record) -> str:
    if p.get("allowed") is not None:
        return md.words((scalar(v) for v in p["allowed"]), ", ")
    rng = p.get("range")
    if rng:
        lo, hi = rng.get("min"), rng.get("max")
        bounds = " ≤ ".join(x for x in (_num(lo), md.code(p["name"]), _num(hi)) if x)
        text = bounds if (lo is not None or hi is not None) else ""
        if rng.get("note"):
            text = f"{text} ({md.inline(rng['note'])})" if text else md.inline(rng["note"])
        return text
    return ""


def _num(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return md.code(value)


def _param_name(p: Record) -> str:
    name = f"**{md.code(p['name'])}**" if p.get("required", True) else md.code(p["name"])
    marks = []
    if p.get("keyword_only"):
        marks.append("keyword-only")
    if p.get("mutated"):
        marks.append("mutated in place")
    if marks:
        name += "<br>*" + ", ".join(marks) + "*"
    return name


def _parameters(op: Record) -> str:
    params = op.get("parameters", [])
    if not params:
        return ""
    rows = []
    for p in params:
        default = md.code(p["default"]) if p.get("default") is not None else ""
        rows.append(
            [
                _param_name(p),
                md.code(p["type"]),
                default,
                md.words(p.get("dtypes", [])),
                md.words(p.get("formats", [])),
                _shapes(p.get("shapes", [])),
                _allowed(p),
                md.inline(p.get("description", "")),
            ]
        )
    head = [
        "Name",
        "Type",
        "Default",
        "Dtypes",
        "Formats",
        "Shapes",
        "Allowed values",
        "Description",
    ]
    legend = "Bold names are required; the rest have defaults."
    return "## Parameters\n\n" + legend + "\n\n" + md.table(head, rows)


def _returns(op: Record) -> str:
    rets = op.get("returns", [])
    if not rets:
        return ""
    rows = [
        [
            md.code(r["name"]),
            md.code(r.get("type", "Tensor")),
            md.words(r.get("dtypes", [])),
            md.words(r.get("formats", [])),
            _shapes(r.get("shapes", [])),
            md.inline(r.get("description", "")),
        ]
        for r in rets
    ]
    head = ["Name", "Type", "Dtypes", "Formats", "Shapes", "Description"]
    return "## Returns\n\n" + md.table(head, rows)


def _constraints(op: Record) -> str:
    items = op.get("constraints", [])
    if not items:
        return ""
    lines = ["## Constraints", ""]
    for c in items:
        line = "- " + md.inline(c["text"])
        if c.get("rule"):
            line += f" (checked: [{md.code(c['rule'])}](#rule-{c['rule']}))"
        lines.append(line)
    return "\n".join(lines)


def condition_text(cond: Record) -> str:
    """One ``when`` clause in words, e.g. ``cache_mode`` ∈ {``PA_BSND``, ``PA_NZ``}."""
    if cond.get("arg"):
        subject = md.code(cond["arg"])
        if cond.get("equals") is not None:
            return f"{subject} = {md.code(scalar(cond['equals']))}"
        if cond.get("in") is not None:
            return f"{subject} ∈ {{{md.words(scalar(v) for v in cond['in'])}}}"
        return f"{subject} ∉ {{{md.words(scalar(v) for v in cond.get('not_in') or [])}}}"
    if cond.get("tensor"):
        subject = md.code(cond["tensor"])
        parts = []
        if cond.get("dtype_in"):
            parts.append(f"{subject} dtype ∈ {{{md.words(cond['dtype_in'])}}}")
        if cond.get("format_in"):
            parts.append(f"{subject} format ∈ {{{md.words(cond['format_in'])}}}")
        return " and ".join(parts)
    if cond.get("present"):
        return f"{md.code(cond['present'])} is passed"
    if cond.get("absent"):
        return f"{md.code(cond['absent'])} is not passed"
    if cond.get("product"):
        return f"product ∈ {{{md.words(cond['product'])}}}"
    if cond.get("quantization"):
        return f"quantization ∈ {{{md.words(cond['quantization'])}}}"
    return ""


def effect_lines(rule: Record) -> list[str]:
    """What a rule demands once it applies, one phrase per effect."""
    out = []
    if rule.get("require"):
        out.append("pass " + md.words(rule["require"]))
    if rule.get("forbid"):
        out.append("do not pass " + md.words(rule["forbid"]))
    for tensor, dtypes in (rule.get("dtypes") or {}).items():
        out.append(f"{md.code(tensor)} dtype ∈ {{{md.words(dtypes)}}}")
    for tensor, formats in (rule.get("formats") or {}).items():
        out.append(f"{md.code(tensor)} format ∈ {{{md.words(formats)}}}")
    for arg, values in (rule.get("values") or {}).items():
        out.append(f"{md.code(arg)} ∈ {{{md.words(scalar(v) for v in values)}}}")
    if rule.get("products"):
        out.append("only on " + md.words(rule["products"]))
    return out


def _rules(op: Record) -> str:
    rules = op.get("rules", [])
    if not rules:
        return ""
    parts = [
        "## Checkable rules",
        "`kb check` evaluates these against a candidate list; a rule whose conditions "
        "the candidate does not state stays silent.",
    ]
    for rule in rules:
        when = " and ".join(filter(None, (condition_text(c) for c in rule.get("when", []))))
        lines = [f"### {md.inline(rule['id'])} {{ #rule-{rule['id']} }}", ""]
        lines.append(f"- **When** {when}" if when else "- **Always**")
        lines.append("- **Then** " + "; ".join(effect_lines(rule)))
        lines.append("- **Message** " + md.inline(rule.get("message", "")))
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def _quantization(op: Record) -> str:
    modes = op.get("quantization", [])
    if not modes:
        return ""
    rows = []
    for q in modes:
        scheme = md.code(q["scheme"])
        label = QUANT_LABELS.get(q["scheme"], "")  # type: ignore[call-overload]
        if label:
            scheme += f"<br>{md.inline(label)}"
        select = ", ".join(
            f"{md.code(k)} = {md.code(scalar(v))}" for k, v in q.get("select", {}).items()
        )
        tensors = "<br>".join(
            f"{md.code(t)}: {md.words(d)}" for t, d in q.get("tensors", {}).items()
        )
        rows.append(
            [
                scheme,
                select or "default arguments",
                tensors,
                md.words(q.get("products", [])),
                md.inline(q.get("notes", "")),
            ]
        )
    head = ["Scheme", "Selected by", "Tensor dtypes", "Only on", "Notes"]
    intro = "How to select each scheme: set the arguments in *Selected by* and give the tensors the listed dtypes."
    return "## Quantization\n\n" + intro + "\n\n" + md.table(head, rows)


def _where(op: Record) -> str:
    products = op.get("products", [])
    phases = op.get("phases", [])
    if not products and not phases:
        return ""
    lines = ["## Products and phases", ""]
    if products:
        rows = [[md.code(p), md.inline(PRODUCT_LABELS.get(p, ""))] for p in products]  # type: ignore[call-overload]
        lines += [md.table(["Product", "What it covers"], rows), ""]
    else:
        lines += ["No supported product is recorded.", ""]
    if phases:
        lines.append("**Phases:** " + md.words(phases))
    return "\n".join(lines)


def _versions(op: Record) -> str:
    v = op.get("versions") or {}
    if not any(v.get(k) for k in ("first", "last", "releases", "changes", "pytorch")):
        return ""
    lines = ["## torch_npu versions", ""]
    if v.get("first"):
        lines.append(f"- **First release:** {md.code(v['first'])}")
    if v.get("last"):
        lines.append(f"- **Last release:** {md.code(v['last'])}")
    if v.get("releases"):
        lines.append("- **Releases that have it:** " + md.words(v["releases"]))
    if v.get("pytorch"):
        lines.append("- **PyTorch lines:** " + md.words(v["pytorch"]))
    if v.get("changes"):
        lines += ["", "Signature changes:", ""]
        rows = [[md.code(c["release"]), md.code(c.get("schema", ""))] for c in v["changes"]]
        lines.append(md.table(["Release", "Schema from this release"], rows))
    return "\n".join(lines)


def _graph_mode(op: Record) -> str:
    g = op.get("graph_mode") or {}
    if not g:
        return ""
    rows = [[md.code(mode), md.inline(g.get(mode, "unknown"))] for mode in ("aclgraph", "torchair")]
    out = "## Graph mode\n\n" + md.table(["Mode", "Support"], rows)
    if g.get("notes"):
        out += "\n\n" + md.block(g["notes"])
    return out


def _fuses(op: Record) -> str:
    steps = op.get("fuses", [])
    if not steps:
        return ""
    return "## Fused steps\n\n" + " → ".join(md.code(s) for s in steps)


def _examples(op: Record) -> str:
    examples = op.get("examples", [])
    if not examples:
        return ""
    parts = ["## Examples"]
    for ex in examples:
        title = md.inline(ex.get("title", "Example"))
        if ex.get("phase"):
            title += f" ({md.inline(ex['phase'])})"
        parts.append(f"### {title}\n\n" + md.code_block(ex["code"], "python"))
    return "\n\n".join(parts)


def _lineage(op: Record, data: SiteData, here: str) -> str:
    lines = []
    if op.get("superseded_by"):
        lines.append(f"- **Superseded by:** {data.ref(op['superseded_by'], here)}")
    if op.get("supersedes"):
        lines.append("- **Supersedes:** " + data.refs(op["supersedes"], here))
    if op.get("related"):
        lines.append("- **Related:** " + data.refs(op["related"], here))
    successors = [
        o["name"]
        for o in data.operators.values()
        if op["name"] in o.get("supersedes", []) and o["name"] != op.get("superseded_by")
    ]
    if successors:
        lines.append("- **Newer versions:** " + data.refs(successors, here))
    out = "\n".join(lines)
    if op.get("changes"):
        out += "\n\n**What changed from the predecessor**\n\n" + md.block(op["changes"])
    return "## Related operators\n\n" + out if out.strip() else ""


def _used_in(op: Record, data: SiteData, here: str) -> str:
    chains = data.chains_using(op["name"])
    trees = data.trees_naming(op["name"])
    if not chains and not trees:
        return ""
    lines = ["## Used in", ""]
    for chain in chains:
        stages = [s["stage"] for s in chain.get("stages", []) if s.get("operator") == op["name"]]
        label = md.inline(chain["title"]["en"], label=True)
        lines.append(f"- chain {data.ref(chain['name'], here, label)}, stage " + md.words(stages))
    for tree in trees:
        lines.append(
            f"- decision tree {data.ref(tree['name'], here, md.inline(tree['title']['en'], label=True))}"
        )
    return "\n".join(lines)


def _upstream(op: Record) -> str:
    up = op.get("upstream") or {}
    if not any(up.values()):
        return ""
    lines = ["## Upstream", ""]
    target = md.url(up.get("url"))
    label = md.code(up.get("path") or up.get("url") or "reference page")
    lines.append("- **Reference page:** " + (md.link(label, target) if target else label))
    if up.get("commit"):
        lines.append(f"- **At commit:** {md.code(up['commit'])}")
    if up.get("schema_source"):
        lines.append(f"- **Schema from:** {md.code(up['schema_source'])}")
    return "\n".join(lines)
