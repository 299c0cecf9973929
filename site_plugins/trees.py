"""The decision-tree page: a map of the questions, then one step per question.

A whole tree drawn as one flowchart is wider than any screen, so the page splits it:
the map is an outline of the questions only (each a link to its step, the answers
that lead on written on the branches); every step then hangs its answers off the
question as branches, each leading to a chain, operators or the next step.  All of
it is HTML and CSS (site_plugins.diagrams), so a phone wraps it and every step folds.
English stays in the English view; the Chinese questions are in their own tab.
"""

from __future__ import annotations

from site_plugins import diagrams, md
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
    """Questions only, as an outline from the root: each box links to its step, the
    answers that lead on label the branches, a question met again is a link back."""
    if len(nodes) < 2:
        return ""
    by_id = {n["id"]: n for n in nodes}
    seen: set[str] = set()

    def question(node: Record, edge: str) -> diagrams.Item:
        seen.add(node["id"])
        label = diagrams.text_html(f"{step[node['id']]}. {_short(node['question']['en'], 90)}")
        item = diagrams.Item(edge, diagrams.box(label, "#" + anchor(node["id"]), "question"))
        leads: dict[str, list[str]] = {}
        for opt in node.get("options", []):
            if opt.get("goto") in by_id:
                leads.setdefault(opt["goto"], []).append(opt["value"])
        for goto, values in leads.items():
            words = ", ".join(diagrams.text_html(md.code(v)) for v in values)
            if goto in seen:
                back = diagrams.box(f"step {step[goto]}", "#" + anchor(goto), "next")
                item.children.append(diagrams.Item(words, back))
            else:
                item.children.append(question(by_id[goto], words))
        return item

    roots = [question(n, "") for n in nodes if n["id"] not in seen]
    words = "Each question links to its step; the answers that lead on label the branches."
    head = no_search("## Map") + "\n\n" + words
    return diagrams.outline(roots, "Map of the questions", head)


def _leaf(name: str, kind: str, data: SiteData, here: str) -> str:
    """A link drawn as a box (kb.css) when the record exists; plain code otherwise."""
    ref = data.ref(name, here)
    return ref + f"{{ .kb-node .kb-node--{kind} }}" if data.path(name) else ref


def _answer(
    opt: Record, step: dict[str, int], data: SiteData, here: str, nodes: dict[str, Record]
) -> str:
    line = f"- **{md.inline(opt['label'])}** ({md.code(opt['value'])})"
    leads = []
    if opt.get("chain"):
        leads.append("chain " + _leaf(opt["chain"], "chain", data, here))
    if opt.get("operators"):
        ops = ", ".join(_leaf(op, "operator", data, here) for op in opt["operators"])
        leads.append("operators " + ops)
    if opt.get("goto") in step:
        target = nodes[opt["goto"]]
        leads.append(
            f"then [step {step[opt['goto']]}](#{anchor(opt['goto'])}){{ .kb-node .kb-node--next }}: "
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
    """One question as a foldable block: its flag, then its answers drawn as branches."""
    body = [
        f"Flag {md.code('--' + node['key'])}\n{{: #{anchor(node['id'])} }}",
        '<div class="kb-branches" markdown>\n\n'
        + "\n".join(_answer(o, step, data, here, by_id) for o in node.get("options", []))
        + "\n\n</div>",
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
