"""The decision-tree page: a small map of the questions, then one step per question.

A whole tree drawn as one flowchart is wider than any screen (the MoE tree came out
2,744 px wide), so the page splits it: the map shows only the questions, top-down,
each clickable; every step then draws one question with its answers and where each
leads (chains and operators clickable), next to the same answers as a list.  On a
phone the diagrams give way to the list, and every step folds.  English stays in the
English view; the Chinese questions are in their own tab.
"""

from __future__ import annotations

from site_plugins import md
from site_plugins.common import (
    Record,
    SiteData,
    folded,
    h1,
    join_sections,
    no_search,
    record_path,
    search_terms,
)
from site_plugins.mermaid import Flowchart


def anchor(node_id: str) -> str:
    return "q-" + node_id


def ordered_nodes(tree: Record) -> list[Record]:
    """Questions in walking order from the root (depth first), then any unreachable."""
    nodes = {n["id"]: n for n in tree.get("nodes", [])}
    order: list[str] = []

    def visit(node_id: str) -> None:
        if node_id in order or node_id not in nodes:
            return
        order.append(node_id)
        for opt in nodes[node_id].get("options", []):
            if opt.get("goto"):
                visit(opt["goto"])

    visit(tree.get("root", ""))
    for node_id in nodes:
        visit(node_id)
    return [nodes[i] for i in order]


def tree_page(tree: Record, data: SiteData) -> str:
    here = record_path("tree", tree["name"])
    nodes = ordered_nodes(tree)
    step = {n["id"]: i for i, n in enumerate(nodes, 1)}
    by_id = {n["id"]: n for n in nodes}
    walk = (
        f"On the command line, {md.code('kb tree ' + tree['name'])} prints this tree and "
        f"{md.code('kb advise ' + tree['name'] + ' --FLAG VALUE …')} walks it."
    )
    # The diagrams need the width more than the page needs a table of contents.
    front = "---\nhide:\n  - toc\n---\n"
    return front + join_sections(
        h1(tree["title"]["en"]),
        md.code(tree["name"]) + " · " + walk,
        _words(tree, nodes, step, data, here),
        search_terms(tree.get("keywords")),
        _map(nodes, step),
        "## Steps\n\n" + "\n\n".join(_step(n, step, by_id, data, here) for n in nodes),
    )


def _words(
    tree: Record, nodes: list[Record], step: dict[str, int], data: SiteData, here: str
) -> str:
    english = f"**{md.inline(tree['summary']['en'])}**"
    if tree.get("description"):
        english += "\n\n" + md.block(tree["description"])
    chinese = [f"**{md.inline(tree['title']['zh'])}**", "", md.inline(tree["summary"]["zh"]), ""]
    for node in nodes:
        values = ", ".join(md.code(o["value"]) for o in node.get("options", []))
        chinese.append(
            f"{step[node['id']]}. {md.inline(node['question']['zh'])} "
            f"({md.code('--' + node['key'])}: {values})"
        )
    return (
        '=== "English"\n\n'
        + md.indent(english)
        + '\n\n=== "中文"\n\n'
        + md.indent("\n".join(chinese))
    )


def _short(text: str, limit: int = 60) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _map(nodes: list[Record], step: dict[str, int]) -> str:
    """Questions only, top-down: narrow enough for any desktop column, every box a link."""
    if len(nodes) < 2:
        return ""
    chart = Flowchart("TD")
    ids = {n["id"]: f"q{i}" for i, n in enumerate(nodes)}
    for node in nodes:
        label = f"{step[node['id']]}. {_short(node['question']['en'])}"
        chart.node(ids[node["id"]], label, "box", "question")
        chart.click(ids[node["id"]], "#" + anchor(node["id"]), f"Go to step {step[node['id']]}")
    for node in nodes:
        for opt in node.get("options", []):
            if opt.get("goto") in ids:
                chart.edge(ids[node["id"]], ids[opt["goto"]], opt["value"])
    return (
        no_search("## Map")
        + "\n\nClick a question to go to its step.\n\n"
        + '<div class="kb-wide" markdown>\n\n'
        + chart.render(fit=True)
        + "\n\n</div>"
    )


def _targets(opt: Record) -> list[tuple[str, str]]:
    out = []
    if opt.get("chain"):
        out.append(("chain", opt["chain"]))
    out += [("operator", op) for op in opt.get("operators", [])]
    return out


def step_diagram(node: Record, step: dict[str, int], data: SiteData, here: str) -> str:
    """One question, its answers on the arrows, and where each answer leads."""
    chart = Flowchart("LR")
    chart.node("q", f"{step[node['id']]}. {_short(node['question']['en'], 80)}", "box", "question")
    leaves: dict[tuple[str, str], str] = {}
    for opt in node.get("options", []):
        targets = []
        for kind, name in _targets(opt):
            key = (kind, name)
            if key not in leaves:
                leaves[key] = f"t{len(leaves)}"
                chart.node(leaves[key], name, "stadium" if kind == "chain" else "box", kind)
                href = data.href(name, here)
                if href:
                    chart.click(leaves[key], href, f"Open {name}")
            targets.append(leaves[key])
        if opt.get("goto") in step:
            key = ("step", opt["goto"])
            if key not in leaves:
                leaves[key] = f"t{len(leaves)}"
                chart.node(leaves[key], f"step {step[opt['goto']]}", "round", "next")
                chart.click(
                    leaves[key], "#" + anchor(opt["goto"]), f"Go to step {step[opt['goto']]}"
                )
            targets.append(leaves[key])
        if not targets:
            key = ("note", opt["value"])
            leaves[key] = f"t{len(leaves)}"
            chart.node(leaves[key], _short(opt.get("note") or opt["label"], 50), "round", "note")
            targets.append(leaves[key])
        for target in targets:
            chart.edge("q", target, opt["value"])
    return chart.render(fit=True)


def _answer(
    opt: Record, step: dict[str, int], data: SiteData, here: str, nodes: dict[str, Record]
) -> str:
    line = f"- **{md.inline(opt['label'])}** ({md.code(opt['value'])})"
    leads = []
    if opt.get("chain"):
        leads.append("chain " + data.ref(opt["chain"], here))
    if opt.get("operators"):
        leads.append("operators " + data.refs(opt["operators"], here))
    if opt.get("goto") in step:
        target = nodes[opt["goto"]]
        leads.append(
            f"then [step {step[opt['goto']]}](#{anchor(opt['goto'])}): "
            + md.inline(target["question"]["en"])
        )
    if leads:
        line += " → " + "; ".join(leads)
    if opt.get("note"):
        line += " — " + md.inline(opt["note"])
    return line


def _step(
    node: Record, step: dict[str, int], by_id: dict[str, Record], data: SiteData, here: str
) -> str:
    """One question as a foldable block: its flag, its diagram (wide screens), its answers."""
    body = [
        f"Flag {md.code('--' + node['key'])}\n{{: #{anchor(node['id'])} }}",
        '<div class="kb-wide" markdown>\n\n' + step_diagram(node, step, data, here) + "\n\n</div>",
        "\n".join(_answer(o, step, data, here, by_id) for o in node.get("options", [])),
    ]
    title = f"Step {step[node['id']]} · {md.inline(node['question']['en'])}"
    return folded(title, "\n\n".join(body), "question", open_=True)


def tree_outline(tree: Record, data: SiteData, here: str) -> str:
    """The steps as Markdown (the list part of each step), for tests and reuse."""
    nodes = ordered_nodes(tree)
    step = {n["id"]: i for i, n in enumerate(nodes, 1)}
    by_id = {n["id"]: n for n in nodes}
    return "\n\n".join(
        "\n".join(_answer(o, step, data, here, by_id) for o in n.get("options", [])) for n in nodes
    )
