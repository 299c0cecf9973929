"""Support matrices: operator × product, × quantization scheme, × torch_npu release.

Built to be read, on a desktop and on a phone: one compact table per category under a
filter box, a header that stays in view, operator names that wrap at underscores.
Columns come from the vocabularies (product families in canonical order); where one
column per value cannot fit (15 schemes, 47 releases), the cell lists the values
instead, and releases are shown as ranges ("2.1.0.post17, 2.6.0.post3+"), never a
cell per release line, so a late backport cannot read as a removal.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable

from kb.vocab import CANONICAL, QUANT_LABELS, SCHEMES
from site_plugins import md, products, versions
from site_plugins.common import (
    Record,
    SiteData,
    category_label,
    chip,
    chips,
    filter_box,
    html_table,
)
from site_plugins.operator_lists import categories, op_cell

MATRIX_ID = "kb-matrix"


def _by_category(data: SiteData) -> list[tuple[str, list[Record]]]:
    out = []
    for cat in categories(data):
        # internal _npu_* kernels after the public API of the same category
        ops = sorted(
            (o for o in data.operators.values() if o["category"] == cat),
            key=lambda o: (o["name"].startswith("_"), o["name"]),
        )
        out.append((cat, ops))
    return out


def _grouped(
    data: SiteData,
    here: str,
    headers: list[str],
    row: Callable[[Record], list[str]],
    align: str = "",
) -> str:
    """One table per category, each in a group the filter can hide when it empties."""
    parts = []
    for cat, ops in _by_category(data):
        rows: list[tuple[dict[str, str], list[str]]] = [
            ({}, [op_cell(op, here, data), *row(op)]) for op in ops
        ]
        parts.append(
            "<div data-kb-group markdown>\n\n"
            f"### {md.inline(category_label(cat))} {{ #{cat} }}\n\n"
            + html_table(headers, rows, align)
            + "\n\n</div>"
        )
    return (
        f'<div id="{MATRIX_ID}" class="kb-matrix" markdown>\n\n' + "\n\n".join(parts) + "\n\n</div>"
    )


def _page(title: str, intro: str, body: str, legend: str = "") -> str:
    front = "---\nhide:\n  - toc\n---\n"
    parts = [f"# {title}", intro, filter_box(MATRIX_ID, "Filter operators…"), body]
    if legend:
        parts.append(legend)
    return front + "\n\n".join(parts) + "\n"


def _legend(pairs: list[tuple[str, str]]) -> str:
    return "\n".join(f"- {md.code(k)}: {md.inline(v)}" for k, v in pairs)


def column_id(product: str) -> str:
    """A compact column header for a product id: ``atlas-a3`` → ``a3``."""
    return re.sub(r"^(atlas|ascend)-", "", product)


def product_matrix(data: SiteData) -> str:
    here = "matrices/products.md"
    cols = products.families()
    headers = ["Operator"] + [
        f'<span title="{html.escape(products.label(p), quote=True)}">'
        f"{html.escape(column_id(p))}</span>"
        for p in cols
    ]

    def row(op: Record) -> list[str]:
        cells = []
        for p in cols:
            state = products.support(op, p)
            cells.append(
                f'<span class="kb-mark kb-mark--{state}" '
                f'title="{html.escape(products.detail(op, p), quote=True)}">'
                f"{products.MARKS[state]}</span>"
            )
        return cells

    marks = " · ".join(
        f"{products.MARKS[s]} {products.WORDS[s]}"
        for s in (products.YES, products.PARTIAL, products.NO, products.UNKNOWN)
    )
    intro = (
        f"What each operator's reference page says about each product: {marks}. "
        "Columns are product families; a family whose reference table names only some "
        "of its sub-series is marked ◐ (hover for which)."
    )
    legend = "## Products\n\n" + _legend([(column_id(p), products.label(p)) for p in cols])
    body = _grouped(data, here, headers, row, "l" + "c" * len(cols))
    return _page("Operator × product", intro, body, legend)


def _spellings(scheme: str) -> str:
    """The other spellings of a scheme; a shared one (``w8a8``) is marked, it names several."""
    row = SCHEMES[scheme]
    names = [f"<code>{html.escape(a)}</code>" for a in row.aliases]
    names += [f"<code>{html.escape(a)}</code> <em>shared</em>" for a in row.shared]
    return ", ".join(names) or "-"


def quant_matrix(data: SiteData) -> str:
    here = "matrices/quantization.md"
    used: dict[str, int] = {}
    for op in data.operators.values():
        for scheme in {q["scheme"] for q in op.get("quantization", [])}:
            used[scheme] = used.get(scheme, 0) + 1
    schemes = [s for s in CANONICAL["quantization"] if s in used]
    intro = (
        "The quantization schemes each operator records, with how to select them on the "
        "operator's page. Type a scheme (`w8a8-dynamic`) in the filter to list the operators "
        "that support it. A spelling marked *shared* names more than one scheme (`w8a8` is "
        "static or per-token dynamic): `kb check` and `kb advise` ask which one you mean."
    )
    if not schemes:
        return _page(
            "Operator × quantization scheme",
            intro,
            "No operator records a quantization scheme yet.",
        )

    def row(op: Record) -> list[str]:
        names = []
        for q in op.get("quantization", []):
            name = q["scheme"] + (f"+{q['kv']}" if q.get("kv") else "")
            if name not in names:
                names.append(name)
        return [
            chips(names, "scheme")
            if names
            else '<span class="kb-mark kb-mark--undocumented">·</span>'
        ]

    def described(s: str) -> str:
        """What the scheme is, its activation scale and other spellings: one cell, so the
        table still fits a phone."""
        return (
            html.escape(str(QUANT_LABELS.get(s, "")))  # type: ignore[call-overload]
            + f"<br><small>activation scale: {html.escape(SCHEMES[s].activation_scale)}"
            + f"; also written: {_spellings(s)}</small>"
        )

    summary = html_table(
        ["Scheme", "Operators", "What it is"],
        [({}, [chip(s, "scheme"), str(used[s]), described(s)]) for s in schemes],
        "lrl",
    )
    body = _grouped(data, here, ["Operator", "Schemes"], row)
    return _page(
        "Operator × quantization scheme",
        intro + "\n\n" + summary,
        body,
    )


def version_matrix(data: SiteData) -> str:
    here = "matrices/versions.md"
    intro = (
        "The torch_npu releases that ship each operator, as runs of consecutive "
        "harvested releases: `2.1.0.post17, 2.6.0.post3+` means 2.1.0.post17 alone, then "
        "every release from 2.6.0.post3 on. Release lines are maintained in parallel, so "
        "a gap is a line that lacks the operator (often a late backport), not a removal."
    )
    known = [op for op in data.operators.values() if versions.ranges(op)]
    if not known:
        return _page(
            "Operator × torch_npu release", intro, "No record states a torch_npu release yet."
        )

    def row(op: Record) -> list[str]:
        runs = versions.ranges_text(op)
        n = len(versions.changes(op))
        first = versions.first(op)
        return [
            f"<code>{html.escape(first)}</code>" if first else "",
            f"<code>{html.escape(runs)}</code>"
            if runs
            else '<span class="kb-mark kb-mark--undocumented">?</span>',
            str(n) if n else "",
        ]

    body = _grouped(
        data, here, ["Operator", "Added in", "Ships in", "Signature changes"], row, "lllr"
    )
    return _page("Operator × torch_npu release", intro, body)


MATRICES = {
    "matrices/products.md": ("Operator × product", product_matrix),
    "matrices/quantization.md": ("Operator × quantization", quant_matrix),
    "matrices/versions.md": ("Operator × torch_npu release", version_matrix),
}
