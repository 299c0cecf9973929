"""The reference-chain page: stages per phase, a flowchart, what changes by phase."""

from __future__ import annotations

from site_plugins import diagrams, md, products
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
        facts.append(
            "**Products:** " + ", ".join(md.inline(products.label(p)) for p in chain["products"])
        )
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


def stage_groups(stages: list[Record]) -> list[list[Record]]:
    """Consecutive stages of one name are alternatives (one per quantization scheme):
    a chain runs one of them, so they are one step with branches, not several steps."""
    groups: list[list[Record]] = []
    for stage in stages:
        if groups and groups[-1][0]["stage"] == stage["stage"]:
            groups[-1].append(stage)
        else:
            groups.append([stage])
    return groups


def _schemes(stage: Record) -> str:
    return ", ".join(stage.get("quantization") or [])


def _stage_detail(stage: Record) -> str:
    out = ""
    args = _args_cell(stage)
    if args:
        out += "  \n   " + args
    if stage.get("notes"):
        out += "  \n   " + md.inline(stage["notes"])
    return out


def _stages(chain: Record, data: SiteData, here: str) -> str:
    parts = ["## Stages"]
    several = len(chain.get("quantization") or []) > 1
    for phase in chain.get("phases", []):
        items = []
        for i, group in enumerate(stage_groups(stages_for(chain, phase)), 1):
            name = md.inline(group[0]["stage"])
            if len(group) == 1:
                stage = group[0]
                only = (
                    f" *(only with {md.inline(_schemes(stage))})*"
                    if several and stage.get("quantization")
                    else ""
                )
                items.append(
                    f"{i}. **{name}** → {_operator_cell(stage, data, here)}{only}"
                    + _stage_detail(stage)
                )
                continue
            lines = [f"{i}. **{name}**: one of, by scheme"]
            for stage in group:
                scheme = md.inline(_schemes(stage)) or "any scheme"
                detail = _stage_detail(stage).replace("\n   ", "\n      ")
                lines.append(f"    - *{scheme}* → {_operator_cell(stage, data, here)}{detail}")
            items.append("\n".join(lines))
        body = "\n".join(items) if items else "No stage runs in this phase."
        parts.append(f"### {phase.capitalize()}\n\n" + body)
    return "\n\n".join(parts)


def _diagram(chain: Record, data: SiteData, here: str) -> str:
    """The stages as boxes, one lane per phase; a step with variants shows them as
    branches side by side, each marked with its scheme (a chain runs one of them)."""
    phases = chain.get("phases", [])
    per_phase = len(phases) > 1 and any(s.get("phase", "both") != "both" for s in chain["stages"])
    groups = [(p, stages_for(chain, p)) for p in phases] if per_phase else [("", chain["stages"])]
    several = len(chain.get("quantization") or []) > 1
    lanes = []
    for phase, stages in groups:
        lane = diagrams.Lane(phase)
        for group in stage_groups(stages):
            branches = []
            for stage in group:
                op = stage["operator"]
                plain = op == PLAIN_TORCH
                label = "plain torch" if plain else f"<code>{diagrams.text_html(op)}</code>"
                if len(group) == 1:  # a fork names its stage once, above its branches
                    stage_name = diagrams.text_html(stage["stage"])
                    label = f'<span class="kb-node__stage">{stage_name}</span> {label}'

                href = None if plain else data.href(op, here)
                kind = "torch" if plain else "operator"
                scheme = (_schemes(stage) or "any scheme") if len(group) > 1 else ""
                if several and len(group) == 1 and stage.get("quantization"):
                    scheme = "only " + _schemes(stage)
                branches.append(diagrams.Branch(diagrams.box(label, href, kind), scheme))
            lane.steps.append((group[0]["stage"], branches))
        lanes.append(lane)
    label = "Flow of the stages" + (", one lane per phase" if per_phase else "")
    return diagrams.flow(lanes, label, "## Flow { data-search-exclude }")


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
