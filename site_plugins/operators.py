"""The operator page, answer first: a summary card, the first example, the signature.

Then the words (English and Chinese tabs), the parameters as a readable list (no wide
table: identifiers never break, every width fits), and the long detail folded: rules,
quantization, constraint lists, signature history.  Folded blocks stay in the page, so
the site search and the browser's find still reach them.
"""

from __future__ import annotations

import html
from typing import Any

from kb.emulate.names import in_words
from kb.vocab import CAPTURED_GRAPH_MODES, QUANT_LABELS
from site_plugins import md, products, versions
from site_plugins.common import (
    Record,
    SiteData,
    badge,
    bilingual,
    category_path,
    chip,
    chips,
    folded,
    h1,
    join_sections,
    no_search,
    record_path,
    scalar,
    search_terms,
    status_path,
    value_text,
)
from site_plugins.operator_discrepancies import discrepancies_section
from site_plugins.operator_reference import reference_section
from site_plugins.operator_rules import rules_section

#: Above this many parameters, the optional ones are folded under the required ones.
FOLD_PARAMETERS_OVER = 10
#: Above this many constraints, the list is folded.
FOLD_CONSTRAINTS_OVER = 5
GITHUB = "https://github.com"


def operator_page(op: Record, data: SiteData) -> str:
    here = record_path("operator", op["name"])
    return join_sections(
        h1(op["name"]),
        _card(op, data, here),
        search_terms(op.get("keywords")),
        _lineage_warning(op, data, here),
        _first_example(op),
        _signature(op),
        _description(op),
        _parameters(op),
        _returns(op),
        reference_section(op),
        _constraints(op),
        discrepancies_section(op),
        _quantization(op),
        rules_section(op),
        _versions(op),
        _graph_mode(op),
        _fuses(op),
        _more_examples(op),
        _production(op),
        _used_in(op, data, here),
        _lineage(op, data, here),
        _upstream(op),
    )


def operator_markdown(op: Record, data: SiteData) -> str:
    """The compact page agents read (``…/index.md`` beside the HTML): the card's facts,
    the signature, parameters and returns, constraints, quantization and rules, links.
    The same section functions as the page, minus examples, evidence and history (the
    HTML page and ``kb show`` have those); :func:`site_plugins.llms.plain` then turns
    the page markup into plain Markdown."""
    here = record_path("operator", op["name"])
    return join_sections(
        h1(op["name"]),
        _card(op, data, here),
        _lineage_warning(op, data, here),
        _signature(op),
        _param_section("## Parameters", op.get("parameters", [])),
        _returns(op),
        _constraints(op),
        discrepancies_section(op),
        _quantization(op),
        rules_section(op),
        _fuses(op),
        _used_in(op, data, here),
        _lineage(op, data, here),
    )


# -- the card ------------------------------------------------------------------------


def _card(op: Record, data: SiteData, here: str) -> str:
    pills = [
        badge(op["status"], status_path(op["status"]), here, op["status"]),
        badge(op["category"], category_path(op["category"]), here, "category"),
    ]
    facts: list[tuple[str, str]] = []
    calls = " · ".join(md.code(c) for c in op.get("calls", []))
    facts.append(("Call", calls))
    required = [p["name"] for p in op.get("parameters", []) if p.get("required", True)]
    if required:
        facts.append(("Pass", ", ".join(md.code(n) for n in required)))
    product_chips = products.chips(op)
    facts.append(("Products", product_chips or "none documented"))
    released = versions.ranges_text(op)
    if released:
        facts.append(("torch_npu", md.code(released)))
    schemes = _schemes(op)
    if schemes:
        facts.append(("Quantization", chips(schemes, "scheme")))
    phases = op.get("phases") or []
    if phases:
        text = chips(phases, "phase")
        if op.get("phase_limit"):
            text += " (only " + ", ".join(md.code(p) for p in op["phase_limit"]) + ")"
        facts.append(("Phases", text))
    if op.get("superseded_by"):
        facts.append(("Use instead", data.ref(op["superseded_by"], here)))
    facts.append(("Emulated", md.inline(in_words(op["name"]))))
    if op.get("aliases"):
        facts.append(("Also known as", md.words(op["aliases"], " · ")))
    lines = [
        '<div class="kb-card" markdown>',
        "",
        " ".join(pills),
        "",
        f"**{md.inline(op['summary']['en'])}**",
        "",
    ]
    for term, value in facts:
        lines += [term, f":   {value}", ""]
    lines.append("</div>")
    return "\n".join(lines)


def _schemes(op: Record) -> list[str]:
    out: list[str] = []
    for q in op.get("quantization", []):
        name = q["scheme"] + (f"+{q['kv']}" if q.get("kv") else "")
        if name not in out:
            out.append(name)
    return out


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


# -- example, signature, words -------------------------------------------------------


def _example_title(ex: Record) -> str:
    title = md.inline(ex.get("title", "Example"))
    if ex.get("phase"):
        title += f" ({md.inline(ex['phase'])})"
    return title


def _first_example(op: Record) -> str:
    examples = op.get("examples", [])
    if not examples:
        return ""
    ex = examples[0]
    return (
        no_search("## Example")
        + f"\n\n*{_example_title(ex)}*\n\n"
        + md.code_block(ex["code"], "python")
    )


def _more_examples(op: Record) -> str:
    rest = op.get("examples", [])[1:]
    if not rest:
        return ""
    parts = [no_search("## More examples")]
    for ex in rest:
        parts.append(folded(_example_title(ex), md.code_block(ex["code"], "python"), "example"))
    return "\n\n".join(parts)


def pretty_signature(schema: str, width: int = 88) -> str:
    """One argument per line when the schema is too long to read on one line.

    Only whitespace changes; the text stays the upstream schema, token for token.
    """
    from kb.catalog.signature import SchemaError, _matching_paren, _split_top

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
    head = no_search("## Signature")
    if not op.get("signature"):
        return head + "\n\nNo schema string is recorded for this operator."
    # plain text: an ATen schema is not Python (pygments flags every `?` as an error)
    return head + "\n\n" + md.code_block(pretty_signature(op["signature"]), "text")


def _description(op: Record) -> str:
    words = bilingual(
        "",
        op["summary"]["zh"],
        op.get("description", ""),
        op.get("description_zh", ""),
    )
    return "## What it does\n\n" + words if words else ""


# -- parameters and returns ----------------------------------------------------------


def _shapes(shapes: list[dict[str, Any]]) -> str:
    parts = []
    for s in shapes or []:
        text = md.code(s["dims"])
        if s.get("when"):
            text += f" ({md.inline(s['when'])})"
        parts.append(text)
    return "; ".join(parts)


def _allowed(p: Record) -> str:
    if p.get("allowed") is not None:
        return md.words((value_text(v) for v in p["allowed"]), ", ")
    rng = p.get("range")
    if rng:
        lo, hi = rng.get("min"), rng.get("max")
        left = " < " if rng.get("min_open") else " ≤ "
        right = " < " if rng.get("max_open") else " ≤ "
        bounds = (_num(lo) + left if lo is not None else "") + md.code(p["name"])
        bounds += right + _num(hi) if hi is not None else ""
        bounds += "".join(f", {_num(v)}" for v in rng.get("also") or [])
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


def _term(p: Record) -> str:
    """The line naming a parameter: name, type, required or default, marks."""
    parts = [f"**{md.code(p['name'])}**", md.code(p["type"])]
    if p.get("required", True):
        parts.append("required")
    elif p.get("default") is not None:
        parts.append("default " + md.code(p["default"]))
    else:
        parts.append("optional")
    for key, word in (
        ("keyword_only", "keyword-only"),
        ("mutated", "mutated in place"),
        ("reserved", "reserved: pass the default"),
        ("undocumented", "not on the official page"),
    ):
        if p.get(key):
            parts.append(f"*{word}*")
    return " · ".join(parts)


def _facts(p: Record) -> str:
    """dtypes, formats, shapes, allowed values of one parameter or return, on one line."""
    out = []
    if p.get("dtypes"):
        out.append("dtype " + chips(p["dtypes"], "dtype"))
    elif p.get("any_dtype"):
        out.append("dtype any")
    if p.get("formats"):
        out.append("format " + chips(p["formats"], "format"))
    if p.get("shapes"):
        out.append("shape " + _shapes(p["shapes"]))
    allowed = _allowed(p)
    if allowed:
        out.append("values " + allowed)
    return " · ".join(out)


def _definition(term: str, p: Record) -> str:
    lines = [term]
    facts = _facts(p)
    if facts:
        lines.append(":   " + facts)
    if p.get("description"):
        lines.append(":   " + md.inline(p["description"]))
    if len(lines) == 1:
        lines.append(":   ")
    return "\n".join(lines)


def _param_list(params: list[Record]) -> str:
    items = "\n\n".join(_definition(_term(p), p) for p in params)
    return f'<div class="kb-params" markdown>\n\n{items}\n\n</div>'


def _param_section(head: str, params: list[Record]) -> str:
    return head + "\n\n" + _param_list(params) if params else ""


def _parameters(op: Record) -> str:
    params = op.get("parameters", [])
    if not params:
        return ""
    head = "## Parameters"
    if len(params) <= FOLD_PARAMETERS_OVER:
        return head + "\n\n" + _param_list(params)
    required = [p for p in params if p.get("required", True)]
    optional = [p for p in params if not p.get("required", True)]
    parts = [head]
    if required:
        parts.append(_param_list(required))
    if optional:
        parts.append(folded(f"{len(optional)} optional parameters", _param_list(optional), "info"))
    return "\n\n".join(parts)


def _returns(op: Record) -> str:
    rets = op.get("returns", [])
    if not rets:
        return ""
    items = []
    for r in rets:
        term = f"**{md.code(r['name'])}** · {md.code(r.get('type', 'Tensor'))}"
        items.append(_definition(term, r))
    body = "\n\n".join(items)
    return "## Returns\n\n" + f'<div class="kb-params" markdown>\n\n{body}\n\n</div>'


# -- constraints, quantization ---------------------------------------------------------


def _constraints(op: Record) -> str:
    items = op.get("constraints", [])
    if not items:
        return ""
    lines = []
    for c in items:
        line = "- " + md.inline(c["text"])
        if c.get("rule"):
            line += f" (checked: [{md.code(c['rule'])}](#rule-{c['rule']}))"
        lines.append(line)
    body = "\n".join(lines)
    if len(items) > FOLD_CONSTRAINTS_OVER:
        body = folded(f"{len(items)} constraints", body, "warning")
    return "## Constraints\n\n" + body


def _quantization(op: Record) -> str:
    modes = op.get("quantization", [])
    if not modes:
        return ""
    items = []
    for q in modes:
        scheme = q["scheme"] + (f"+{q['kv']}" if q.get("kv") else "")
        line = f"- {chip(scheme, 'scheme')}"
        label = QUANT_LABELS.get(q["scheme"], "")  # type: ignore[call-overload]
        if label:
            line += f" {md.inline(label)}"
        if q.get("partial"):
            line += " (only some weights)"
        select = ", ".join(
            f"{md.code(k)} = {md.code(scalar(v))}" for k, v in q.get("select", {}).items()
        )
        line += "  \n  select: " + (select or "default arguments")
        if q.get("tensors"):
            line += "  \n  tensors: " + "; ".join(
                f"{md.code(t)} {chips(d, 'dtype')}" for t, d in q["tensors"].items()
            )
        if q.get("products"):
            line += "  \n  only on " + ", ".join(
                html.escape(products.short(p)) for p in q["products"]
            )
        if q.get("notes"):
            line += "  \n  " + md.inline(q["notes"])
        items.append(line)
    intro = "Set the arguments under *select* and give the tensors the listed dtypes."
    body = intro + "\n\n" + "\n".join(items)
    return "## Quantization\n\n" + folded(
        f"{len(modes)} schemes and how to select each", body, "abstract"
    )


# -- versions, graph mode, fused steps -------------------------------------------------


def _versions(op: Record) -> str:
    v = op.get("versions") or {}
    released = versions.ranges_text(op)
    if not released and not v.get("pytorch"):
        return ""
    lines = [no_search("## torch_npu releases"), ""]
    if released:
        lines.append(f"Ships in {md.code(released)} ({_range_words(op)}).")
    if v.get("pytorch"):
        lines += ["", "PyTorch lines upstream lists: " + md.words(v["pytorch"], " ")]
    history = versions.changes(op)
    if history:
        rows = [
            f"- {md.code(rel)}: " + ("; ".join(md.code(d) for d in diff) or "schema text changed")
            for rel, diff in history
        ]
        lines += ["", folded(f"{len(history)} signature changes", "\n".join(rows), "info")]
    return "\n".join(lines)


def _range_words(op: Record) -> str:
    runs = versions.ranges(op)
    if len(runs) > 1:
        return "a gap between runs is a release line that lacks it, not a removal"
    if runs and runs[0][1] is None:
        return "every harvested release from the first on"
    return "no harvested release after the last one has it"


def _graph_mode(op: Record) -> str:
    g = op.get("graph_mode") or {}
    known = any(g.get(m, "unknown") != "unknown" for m in CAPTURED_GRAPH_MODES)
    if not known and not g.get("notes"):
        return ""
    modes = " · ".join(
        f"{md.code(mode)} {md.inline(g.get(mode, 'unknown'))}" for mode in CAPTURED_GRAPH_MODES
    )
    out = no_search("## Graph mode") + "\n\n" + modes
    if g.get("notes"):
        out += "\n\n" + md.block(g["notes"])
    return out


def _fuses(op: Record) -> str:
    steps = op.get("fuses", [])
    if not steps:
        return ""
    return "## Fused steps\n\n" + " → ".join(md.code(s) for s in steps)


# -- evidence and links ----------------------------------------------------------------


def site_url(repo: str, commit: str, path: str, line: int) -> str | None:
    """The permalink of one call site on GitHub (None when a part would not be a URL)."""
    return md.url(f"{GITHUB}/{repo}/blob/{commit}/{path.lstrip('/')}#L{int(line)}")


def _site_line(seen: Record, site: Record) -> str:
    target = site_url(seen["repo"], seen["commit"], site["path"], site["line"])
    label = md.code(f"{site['path']}:{site['line']}")
    line = "- " + (md.link(label, target) if target else label)
    extra = []
    if site.get("args"):
        extra.append(
            ", ".join(f"{md.code(k)} = {md.code(value_text(v))}" for k, v in site["args"].items())
        )
    if site.get("products"):
        extra.append("on " + ", ".join(html.escape(products.short(p)) for p in site["products"]))
    if site.get("phases"):
        extra.append(md.words(site["phases"]))
    if site.get("note"):
        extra.append(md.inline(site["note"]))
    return line + (" — " + " · ".join(extra) if extra else "")


def _production(op: Record) -> str:
    evidence = op.get("seen_in") or []
    if not evidence:
        return ""
    parts = [no_search("## Used in production by")]
    for seen in evidence:
        sites = seen.get("sites") or []
        n = len(sites)
        head = (
            f"**{md.inline(seen['repo'])}** at {md.code(str(seen['commit'])[:12])}: "
            f"{n} call site{'s' if n != 1 else ''}"
        )
        lines = "\n".join(_site_line(seen, s) for s in sites)
        parts.append(head + "\n\n" + (lines if n <= 5 else folded(f"{n} call sites", lines)))
    return "\n\n".join(parts)


def _used_in(op: Record, data: SiteData, here: str) -> str:
    chains = data.chains_using(op["name"])
    trees = data.trees_naming(op["name"])
    if not chains and not trees:
        return ""
    lines = [no_search("## Used in chains and trees"), ""]
    for chain in chains:
        stages = [s["stage"] for s in chain.get("stages", []) if s.get("operator") == op["name"]]
        label = md.inline(chain["title"]["en"], label=True)
        lines.append(f"- chain {data.ref(chain['name'], here, label)}, stage " + md.words(stages))
    for tree in trees:
        lines.append(
            f"- decision tree {data.ref(tree['name'], here, md.inline(tree['title']['en'], label=True))}"
        )
    return "\n".join(lines)


def _lineage(op: Record, data: SiteData, here: str) -> str:
    lines = []
    if op.get("superseded_by"):
        lines.append(f"- **Superseded by:** {data.ref(op['superseded_by'], here)}")
    if op.get("supersedes"):
        lines.append("- **Supersedes:** " + data.refs(op["supersedes"], here))
    if op.get("related"):
        lines.append("- **Related:** " + data.refs(op["related"], here))
    successors = [n for n in data.successors(op["name"]) if n != op.get("superseded_by")]
    if successors:
        lines.append("- **Newer versions:** " + data.refs(successors, here))
    out = "\n".join(lines)
    if op.get("changes"):
        out += "\n\n**What changed from the predecessor**\n\n" + md.block(op["changes"])
    return no_search("## Related operators") + "\n\n" + out if out.strip() else ""


def _upstream(op: Record) -> str:
    up = op.get("upstream") or {}
    if not any(up.values()):
        return ""
    lines = [no_search("## Upstream"), ""]
    target = md.url(up.get("url"))
    label = md.code(up.get("path") or up.get("url") or "reference page")
    lines.append("- **Reference page:** " + (md.link(label, target) if target else label))
    if up.get("commit"):
        lines.append(f"- **At commit:** {md.code(up['commit'])}")
    if up.get("schema_source"):
        lines.append(f"- **Schema from:** {md.code(up['schema_source'])}")
    return "\n".join(lines)
