"""Index pages: every operator, by category, by status; chains; trees."""

from __future__ import annotations

import html
from collections.abc import Iterable

from kb.vocab import CANONICAL, STATUS_MEANINGS
from site_plugins import md, products, versions
from site_plugins.common import (
    Record,
    SiteData,
    category_label,
    category_path,
    filter_box,
    html_table,
    select_box,
    status_path,
)
from site_plugins.operator_lists import categories, op_cell, statuses


def release_bits(op: Record, releases: list[str]) -> str:
    """Hex bitmask of the harvested releases that ship ``op`` (bit i: ``releases[i]``)."""
    from kb.catalog.releases import record_has

    bits = 0
    for i, release in enumerate(releases):
        if record_has(op, release):
            bits |= 1 << i
    return format(bits, "x")


def _product_ids(op: Record) -> str:
    """Every product id the row answers to: a family and its sub-series both match."""
    ids = []
    for p in CANONICAL["product"]:
        if products.support(op, p) in (products.YES, products.PARTIAL):
            ids.append(p)
    return " ".join(ids)


def _op_table(
    ops: Iterable[Record], here: str, data: SiteData, category: bool = True, status: bool = True
) -> str:
    """Operators with a one-line summary; rows carry what the filters above match."""
    from kb.catalog.releases import load

    releases = load().releases
    rows = []
    for op in ops:
        meta = []
        if status:
            meta.append(op["status"])
        if category:
            meta.append(category_label(op["category"]))
        first = versions.first(op)
        if first:
            meta.append(f"added in {first}")
        name = op_cell(op, here, data)
        if meta:
            name += '<br><span class="kb-meta">' + html.escape(" · ".join(meta)) + "</span>"
        summary = md_inline_html(op["summary"]["en"])
        attrs = {"data-products": _product_ids(op), "data-rel": release_bits(op, releases)}
        rows.append((attrs, [name, summary]))
    product_opts = [(p, products.label(p)) for p in CANONICAL["product"]]
    release_opts = [(str(i), r) for i, r in reversed(list(enumerate(releases)))]
    selects = select_box("data-products", "Any product", product_opts) + select_box(
        "data-rel", "Any torch_npu release", release_opts, mode="bits"
    )
    table_id = "kb-operators"
    return (
        filter_box(table_id, "Filter by name or words…", selects)
        + f'\n\n<div id="{table_id}" markdown>\n\n'
        + html_table(["Operator", "Summary"], rows)
        + "\n\n</div>"
    )


def md_inline_html(text: str) -> str:
    """Record text for a raw-HTML cell: escaped, code spans kept as <code>."""
    out = []
    for i, part in enumerate(str(text).split("`")):
        out.append(f"<code>{html.escape(part)}</code>" if i % 2 else html.escape(part))
    if str(text).count("`") % 2:
        return html.escape(str(text))
    return "".join(out)


def all_operators(data: SiteData) -> str:
    here = "operators/index.md"
    ops = sorted(data.operators.values(), key=lambda o: o["name"])
    intro = (
        f"{len(ops)} operators. Filter them by words, product or the torch_npu release you "
        f"have; browse them {md.link('by category', md.rel('categories/index.md', here))} "
        f"or {md.link('by status', md.rel('status/index.md', here))}, or compare them in the "
        f"{md.link('support matrices', md.rel('matrices/products.md', here))}."
    )
    body = _op_table(ops, here, data) if ops else "No operator records yet."
    return f"# All operators\n\n{intro}\n\n{body}\n"


def category_index(data: SiteData) -> str:
    here = "categories/index.md"
    rows = []
    for cat in categories(data):
        ops = sorted(o["name"] for o in data.operators.values() if o["category"] == cat)
        rows.append(
            [
                md.link(md.inline(cat), md.rel(category_path(cat), here)),
                str(len(ops)),
                data.refs(ops, here),
            ]
        )
    body = (
        md.table(["Category", "Count", "Operators"], rows, "lrl") if rows else "No operators yet."
    )
    return f"# Operators by category\n\n{body}\n"


def category_page(data: SiteData, category: str) -> str:
    here = category_path(category)
    ops = sorted(
        (o for o in data.operators.values() if o["category"] == category), key=lambda o: o["name"]
    )
    return f"# {md.inline(category)}\n\n{len(ops)} operators.\n\n{_op_table(ops, here, data, category=False)}\n"


def status_index(data: SiteData) -> str:
    here = "status/index.md"
    rows = []
    for status in statuses(data):
        count = sum(1 for o in data.operators.values() if o["status"] == status)
        rows.append(
            [
                md.link(md.inline(status), md.rel(status_path(status), here)),
                str(count),
                md.inline(STATUS_MEANINGS.get(status, "")),
            ]
        )
    body = md.table(["Status", "Count", "Meaning"], rows, "lrl") if rows else "No operators yet."
    return f"# Operators by status\n\n{body}\n"


def status_page(data: SiteData, status: str) -> str:
    here = status_path(status)
    ops = sorted(
        (o for o in data.operators.values() if o["status"] == status), key=lambda o: o["name"]
    )
    meaning = STATUS_MEANINGS.get(status, "")
    return (
        f"# {md.inline(status)} operators\n\n{md.inline(meaning.capitalize())}.\n\n"
        f"{_op_table(ops, here, data, status=False)}\n"
    )


def chains_index(data: SiteData) -> str:
    here = "chains/index.md"
    intro = (
        "Reference chains are proven operator sequences for one module and phase: what "
        "to call, in which order, with which prerequisites."
    )
    if not data.chains:
        return f"# Reference chains\n\n{intro}\n\nNo chain records yet.\n"
    rows = []
    for chain in sorted(data.chains.values(), key=lambda c: (c["module"], c["name"])):
        label = md.inline(chain["title"]["en"], label=True)
        rows.append(
            [
                data.ref(chain["name"], here, label),
                md.inline(chain["module"]),
                md.words(chain.get("phases", [])),
                md.inline(chain["summary"]["en"]),
            ]
        )
    table = md.table(["Chain", "Module", "Phases", "Summary"], rows)
    return f"# Reference chains\n\n{intro}\n\n{table}\n"


def trees_index(data: SiteData) -> str:
    here = "trees/index.md"
    intro = (
        "Decision trees ask the questions of the fusion workflow in order and end at "
        "the chain or operators that fit."
    )
    if not data.trees:
        return f"# Decision trees\n\n{intro}\n\nNo decision tree records yet.\n"
    rows = [
        [
            data.ref(t["name"], here, md.inline(t["title"]["en"], label=True)),
            md.inline(t["summary"]["en"]),
        ]
        for t in sorted(data.trees.values(), key=lambda t: t["name"])
    ]
    return f"# Decision trees\n\n{intro}\n\n{md.table(['Tree', 'Summary'], rows)}\n"
