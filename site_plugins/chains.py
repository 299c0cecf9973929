"""The reference-chain page: stages per phase, a flowchart, what changes by phase."""

from __future__ import annotations

from site_plugins import md, products
from site_plugins.common import (
    Record,
    SiteData,
    badge,
    bilingual,
    h1,
    join_sections,
    no_search,
    record_path,
    scalar,
    search_terms,
)
from site_plugins.mermaid import Flowchart

PLAIN_TORCH = "plain-torch"


def stages_for(chain: Record, phase: str) -> list[Record]:
    """Stages that run in ``phase`` (``both`` stages run in every phase)."""
    return [s for s in chain.get("stages", []) if s.get("phase", "both") in (phase, "both")]


def chain_page(chain: Record, data: SiteData) -> str:
    here = record_path("chain", chain["name"])
    return join_sections(
        h1(chain["title"]["en"]),
        _header(chain, here),
        bilingual(
            chain["summary"]["en"],
            chain["title"]["zh"],
            chain.get("description", ""),
            chain["summary"]["zh"],
        ),
        search_terms(chain.get("keywords")),
        _stages(chain, data, here),
        _diagram(chain, data, here),
        _differences(chain),
        _prerequisites(chain),
        _models(chain),
        _links(chain, data, here),
    )


def _header(chain: Record, here: str) -> str:
    lines = [md.code(chain["name"]), ""]
    pills = [badge(chain["module"], None, here, "category")]
    pills += [badge(p, None, here, "phase") for p in chain.get("phases", [])]
    lines.append(" ".join(pills))
    facts = []
    if chain.get("quantization"):
        facts.append("**Quantization:** " + md.words(chain["quantization"]))
    if chain.get("products"):
        facts.append("**Products:** " + ", ".join(md.inline(products.label(p)) for p in chain["products"]))
    if facts:
        lines += ["", "  \n".join(facts)]
    return "\n".join(lines)


def _operator_cell(stage: Record, data: SiteData, here: str) -> str:
    if stage["operator"] == PLAIN_TORCH:
        cell = "plain torch"
        if stage.get("torch"):
            cell += ": " + md.code(stage["torch"])
        return cell
    return data.ref(stage["operator"], here)


def _args_cell(stage: Record) -> str:
    parts = []
    for key, value in (stage.get("args") or {}).items():
        shown = ", ".join(scalar(v) for v in value) if isinstance(value, list) else scalar(value)
        parts.append(f"{md.code(key)} = {md.code(shown)}")
    return "; ".join(parts)


def _stages(chain: Record, data: SiteData, here: str) -> str:
    parts = ["## Stages"]
    for phase in chain.get("phases", []):
        items = []
        for i, stage in enumerate(stages_for(chain, phase), 1):
            line = f"{i}. **{md.inline(stage['stage'])}** → {_operator_cell(stage, data, here)}"
            args = _args_cell(stage)
            if args:
                line += "  \n   " + args
            if stage.get("notes"):
                line += "  \n   " + md.inline(stage["notes"])
            items.append(line)
        body = "\n".join(items) if items else "No stage runs in this phase."
        parts.append(f"### {phase.capitalize()}\n\n" + body)
    return "\n\n".join(parts)


def _diagram(chain: Record, data: SiteData, here: str) -> str:
    chart = Flowchart("TD")
    phases = chain.get("phases", [])
    per_phase = len(phases) > 1 and any(s.get("phase", "both") != "both" for s in chain["stages"])
    groups = [(p, stages_for(chain, p)) for p in phases] if per_phase else [("", chain["stages"])]
    for g, (phase, stages) in enumerate(groups):
        if phase:
            chart.subgraph(f"p{g}", phase)
        previous = None
        for i, stage in enumerate(stages):
            node_id = f"s{g}_{i}"
            op = stage["operator"]
            label = f"{stage['stage']}: {'plain torch' if op == PLAIN_TORCH else op}"
            css = None if op == PLAIN_TORCH else "operator"
            chart.node(node_id, label, "round" if op == PLAIN_TORCH else "box", css)
            href = data.href(op, here) if op != PLAIN_TORCH else None
            if href:
                chart.click(node_id, href, f"Open {op}")
            if previous:
                chart.edge(previous, node_id)
            previous = node_id
        if phase:
            chart.end()
    return "## Flow { data-search-exclude }\n\n" + chart.render()


def _differences(chain: Record) -> str:
    if not chain.get("differences"):
        return ""
    return "## Prefill vs decode\n\n" + md.block(chain["differences"])


def _prerequisites(chain: Record) -> str:
    items = chain.get("prerequisites", [])
    if not items:
        return ""
    lines = ["## Prerequisites", ""]
    lines += [f"- {md.code(p['id'])}: {md.inline(p['text'])}" for p in items]
    return "\n".join(lines)


def _models(chain: Record) -> str:
    if not chain.get("models"):
        return ""
    return "## Reference models\n\n" + "\n".join(f"- {md.inline(m)}" for m in chain["models"])


def _links(chain: Record, data: SiteData, here: str) -> str:
    lines = []
    used = []
    for stage in chain.get("stages", []):
        if stage["operator"] != PLAIN_TORCH and stage["operator"] not in used:
            used.append(stage["operator"])
    if used:
        lines.append("- **Operators:** " + data.refs(used, here))
    if chain.get("variant_of"):
        lines.append(f"- **Variant of:** {data.ref(chain['variant_of'], here)}")
    variants = [c["name"] for c in data.chains.values() if c.get("variant_of") == chain["name"]]
    if variants:
        lines.append("- **Variants:** " + data.refs(variants, here))
    if chain.get("related"):
        lines.append("- **Related:** " + data.refs(chain["related"], here))
    trees = data.trees_naming(chain["name"])
    if trees:
        lines.append(
            "- **Reached from decision trees:** "
            + ", ".join(
                data.ref(t["name"], here, md.inline(t["title"]["en"], label=True)) for t in trees
            )
        )
    return no_search("## See also") + "\n\n" + "\n".join(lines) if lines else ""
