"""Support matrices: operator × product, × quantization scheme, × torch_npu release.

Columns come from the vocabularies (products, schemes) in their canonical order, or,
for releases, from the releases the records actually mention.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from kb.vocab import CANONICAL, PRODUCT_LABELS, QUANT_LABELS, product_family, product_support
from site_plugins import md
from site_plugins.common import Record, SiteData

YES, NO = "✓", "·"
_RELEASE = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?(?:\.post(\d+))?(?:rc(\d+))?$")


def release_key(release: str) -> tuple[int, ...]:
    """Order releases: 2.7.1rc1 < 2.7.1 < 2.7.1.post2 < 2.8.0."""
    m = _RELEASE.match(release)
    if not m:
        return (10**6,)
    major, minor, patch, post, rc = m.groups()
    rc_rank = int(rc) if rc is not None else 10**6
    return (int(major), int(minor), int(patch or 0), rc_rank, int(post or -1))


def _ordered_ops(data: SiteData) -> list[Record]:
    return sorted(data.operators.values(), key=lambda o: (o["category"], o["name"]))


def _op_cell(op: Record, here: str, data: SiteData) -> str:
    return data.ref(op["name"], here)


def _legend(pairs: Iterable[tuple[str, str]]) -> str:
    return "\n".join(f"- {md.code(k)}: {md.inline(v)}" for k, v in pairs)


def product_matrix(data: SiteData) -> str:
    here = "matrices/products.md"
    products = [p for p in CANONICAL["product"] if product_family(p) == p]
    rows = [
        [_op_cell(op, here, data), md.inline(op["category"])]
        + [YES if product_support(p, op.get("products", [])) in ("yes", "partial") else NO
           for p in products]
        for op in _ordered_ops(data)
    ]
    table = md.table(
        ["Operator", "Category", *map(md.code, products)], rows, "ll" + "c" * len(products)
    )
    return (
        "\n\n".join(
            [
                "# Operator × product",
                f"{YES} the operator's reference page marks the product as supported; {NO} it does not.",
                table,
                "## Products",
                _legend((p, PRODUCT_LABELS.get(p, "")) for p in products),  # type: ignore[call-overload]
            ]
        )
        + "\n"
    )


def quant_matrix(data: SiteData) -> str:
    here = "matrices/quantization.md"
    used = {q["scheme"] for op in data.operators.values() for q in op.get("quantization", [])}
    schemes = [s for s in CANONICAL["quantization"] if s in used]
    parts = [
        "# Operator × quantization scheme",
        f"{YES} the operator records the scheme and how to select it (see the "
        "operator's Quantization section); only schemes some record names are shown.",
    ]
    if not schemes:
        parts.append("No operator records a quantization scheme yet.")
        return "\n\n".join(parts) + "\n"
    rows = []
    for op in _ordered_ops(data):
        have = {q["scheme"] for q in op.get("quantization", [])}
        rows.append([_op_cell(op, here, data)] + [YES if s in have else NO for s in schemes])
    parts.append(md.table(["Operator", *map(md.code, schemes)], rows, "l" + "c" * len(schemes)))
    parts += ["## Schemes", _legend((s, QUANT_LABELS.get(s, "")) for s in schemes)]  # type: ignore[call-overload]
    return "\n\n".join(parts) + "\n"


def mentioned_releases(op: Record) -> set[str]:
    v = op.get("versions") or {}
    found = {r for r in (v.get("first"), v.get("last")) if r}
    found |= set(v.get("releases", []))
    found |= {c["release"] for c in v.get("changes", [])}
    return found


def availability(op: Record, release: str) -> str:
    """One cell: new / changed / present / absent / unknown for ``release``."""
    v = op.get("versions") or {}
    changed = {c["release"] for c in v.get("changes", [])}
    key = release_key(release)
    if v.get("releases"):
        present = release in v["releases"]
    elif v.get("first"):
        after_first = key >= release_key(v["first"])
        before_last = not v.get("last") or key <= release_key(v["last"])
        present = after_first and before_last
    else:
        return "?"
    if not present:
        return "–"
    if release == v.get("first"):
        return "new"
    return "Δ" if release in changed else YES


def release_line(release: str) -> str:
    """The release line a release belongs to: 2.7.1.post8 → 2.7."""
    return ".".join(release.split(".")[:2])


def line_availability(op: Record, releases: list[str]) -> str:
    """One cell for a release line, from the cells of its releases (new > Δ > ✓ > – > ?)."""
    cells = {availability(op, r) for r in releases}
    for mark in ("new", "Δ", YES, "–"):
        if mark in cells:
            return mark
    return "?"


def version_matrix(data: SiteData) -> str:
    here = "matrices/versions.md"
    releases = sorted(
        {r for op in data.operators.values() for r in mentioned_releases(op)}, key=release_key
    )
    parts = [
        "# Operator × torch_npu release",
        "Columns are the release lines (major.minor) of the releases the records mention; "
        "the table below the matrix names the exact releases. **new**: first release with "
        "the operator is in that line; Δ: its signature changed in that line; ✓: present; "
        "–: absent.",
    ]
    if not releases:
        parts.append("No record states a torch_npu release yet.")
        return "\n\n".join(parts) + "\n"
    lines: dict[str, list[str]] = {}
    for r in releases:
        lines.setdefault(release_line(r), []).append(r)
    with_data = [op for op in _ordered_ops(data) if mentioned_releases(op)]
    without = [op for op in _ordered_ops(data) if not mentioned_releases(op)]
    rows = [
        [_op_cell(op, here, data)] + [line_availability(op, rs) for rs in lines.values()]
        for op in with_data
    ]
    parts.append(md.table(["Operator", *map(md.code, lines)], rows, "l" + "c" * len(lines)))
    parts += ["## Exact releases", _release_details(with_data, here, data)]
    if without:
        parts.append("No release information yet: " + data.refs([o["name"] for o in without], here))
    return "\n\n".join(parts) + "\n"


def _release_details(ops: list[Record], here: str, data: SiteData) -> str:
    rows = []
    for op in ops:
        v = op.get("versions") or {}
        changes = sorted({c["release"] for c in v.get("changes", [])}, key=release_key)
        rows.append(
            [
                _op_cell(op, here, data),
                md.code(v["first"]) if v.get("first") else "",
                md.code(v["last"]) if v.get("last") else "",
                md.words(changes),
            ]
        )
    return md.table(["Operator", "First release", "Last release", "Signature changed in"], rows)


MATRICES = {
    "matrices/products.md": ("Operator × product", product_matrix),
    "matrices/quantization.md": ("Operator × quantization", quant_matrix),
    "matrices/versions.md": ("Operator × torch_npu release", version_matrix),
}
