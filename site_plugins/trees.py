"""The decision-tree page: a Mermaid flowchart whose leaves link to chain and
operator pages, and the same tree as a nested list for reading and searching."""

from __future__ import annotations

from site_plugins import md
from site_plugins.common import (
    Record,
    SiteData,
    bilingual,
    h1,
    join_sections,
    keywords_section,
    record_path,
)
from site_plugins.mermaid import Flowchart


def tree_page(tree: Record, data: SiteData) -> str:
    here = record_path("tree", tree["name"])
    walk = (
        f"On the command line, {md.code('kb tree ' + tree['name'])} prints this tree and "
        f"{md.code('kb advise ' + tree['name'] + ' --FLAG VALUE …')} walks it; each "
        "question's flag and each answer's value are shown in brackets."
    )
    # The flowchart needs the width more than the page needs a table of contents.
    front = "---\nhide:\n  - toc\n---\n"
    return front + join_sections(
        h1(tree["title"]["en"]),
        f"{md.inline(tree['title']['zh'])} · {md.code(tree['name'])}",
        bilingual(tree["summary"]["en"], tree["summary"]["zh"], tree.get("description", "")),
        "## Flowchart { data-search-exclude }\n\nArrows carry the answer values of "
        "the questions below; click a chain (rounded) or operator box to open its page.\n\n"
        + tree_flowchart(tree, data, here),
        "## Questions\n\n" + walk + "\n\n" + tree_outline(tree, data, here),
        keywords_section(tree.get("keywords")),
    )


def tree_flowchart(tree: Record, data: SiteData, here: str) -> str:
    chart = Flowchart("LR")
    nodes = tree.get("nodes", [])
    qid = {n["id"]: f"q{i}" for i, n in enumerate(nodes)}
    leaf_ids: dict[tuple[str, str], str] = {}

    def leaf(kind: str, name: str) -> str:
        key = (kind, name)
        if key not in leaf_ids:
            node_id = f"{kind[0]}{len(leaf_ids)}"
            leaf_ids[key] = node_id
            chart.node(node_id, name, "stadium" if kind == "chain" else "box", kind)
            href = data.href(name, here)
            if href:
                chart.click(node_id, href, f"Open {name}")
        return leaf_ids[key]

    for node in nodes:
        chart.node(qid[node["id"]], node["question"]["en"], "box", None)
    notes = 0
    for node in nodes:
        src = qid[node["id"]]
        for opt in node.get("options", []):
            targets = []
            if opt.get("goto"):
                targets.append(qid[opt["goto"]])
            if opt.get("chain"):
                targets.append(leaf("chain", opt["chain"]))
            targets += [leaf("operator", op) for op in opt.get("operators", [])]
            if not targets and opt.get("note"):
                note_id = f"n{notes}"
                notes += 1
                chart.node(note_id, opt["note"], "round", "note")
                targets.append(note_id)
            for target in targets:
                chart.edge(src, target, opt["value"])
    return chart.render()


def tree_outline(tree: Record, data: SiteData, here: str) -> str:
    """The tree as nested lists from the root; a node reached twice is named, not repeated."""
    nodes = {n["id"]: n for n in tree.get("nodes", [])}
    shown: set[str] = set()
    lines: list[str] = []

    def question(node_id: str, depth: int) -> None:
        node = nodes[node_id]
        shown.add(node_id)
        pad = "    " * depth
        q = node["question"]
        lines.append(f"{pad}- **{md.inline(q['en'])}** ({md.code('--' + node['key'])})  ")
        lines.append(f"{pad}  {md.inline(q['zh'])}")
        lines.append("")
        for opt in node.get("options", []):
            answer = f"{pad}    - *{md.inline(opt['label'])}* ({md.code(opt['value'])})"
            leads = []
            if opt.get("chain"):
                leads.append("chain " + data.ref(opt["chain"], here))
            if opt.get("operators"):
                leads.append("operators " + data.refs(opt["operators"], here))
            if opt.get("goto") and opt["goto"] in shown:
                leads.append(f"back to *{md.inline(nodes[opt['goto']]['question']['en'])}*")
            if leads:
                answer += " → " + "; ".join(leads)
            if opt.get("note"):
                answer += " — " + md.inline(opt["note"])
            lines.append(answer)
            lines.append("")
            if opt.get("goto") and opt["goto"] not in shown:
                question(opt["goto"], depth + 2)

    if tree.get("root") in nodes:
        question(tree["root"], 0)
    for node_id in nodes:
        if node_id not in shown:
            question(node_id, 0)
    return "\n".join(lines).rstrip() + "\n"
