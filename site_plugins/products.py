"""Products as readers see them: families as columns, and what a record says of each.

Everything comes from the vocabulary, so new product ids (sub-series such as the
training and inference halves of a series) appear without code changes: a sub-series
folds into its family's column (``kb.vocab.PRODUCT_FAMILY`` when the vocabulary has
one), and a record can say a product is supported (``products``), documented as not
supported (``unsupported_products``), or nothing at all.
"""

from __future__ import annotations

import html
from collections.abc import Iterable

from kb import vocab
from site_plugins.common import Record

YES, NO, PARTIAL, UNKNOWN = "yes", "no", "partial", "undocumented"
MARKS = {YES: "✓", PARTIAL: "◐", NO: "✗", UNKNOWN: "·"}
WORDS = {
    YES: "documented as supported",
    PARTIAL: "documented as supported on some of its sub-series",
    NO: "documented as not supported",
    UNKNOWN: "not documented",
}


def family(product: str) -> str:
    return vocab.product_family(product)


def members(product: str) -> list[str]:
    return list(vocab.product_members(product))


def families() -> list[str]:
    """Product columns: every vocabulary id that is not a sub-series, in vocabulary order."""
    return [p for p in vocab.CANONICAL["product"] if family(p) == p]


def label(product: str) -> str:
    return str(vocab.PRODUCT_LABELS.get(product, product))  # type: ignore[call-overload]


def _cut(product: str) -> str:
    text = label(product).split(" (")[0]
    for cut in (" training/inference series", " series", " inference", " training"):
        if text.endswith(cut) and len(text) > len(cut) + 4:
            text = text[: -len(cut)]
    return text


def short(product: str) -> str:
    """A column header or chip: the label up to its first parenthesis or 'series' word,
    unless two products would then read alike ("Atlas" for both the inference and the
    training series): those keep the word that tells them apart, since a phone has no
    hover to show the tooltip."""
    text = _cut(product)
    if any(_cut(other) == text for other in families() if other != product):
        text = label(product).split(" (")[0].removesuffix(" series")
    return text


def support(op: Record, product: str) -> str:
    """yes / partial / no / undocumented for one product (family or sub-series)."""
    return vocab.product_support(
        product, op.get("products") or [], op.get("unsupported_products") or []
    )


def detail(op: Record, product: str) -> str:
    """Tooltip text for a product cell: the sub-series a partial entry covers."""
    state = support(op, product)
    text = f"{label(product)}: {WORDS[state]}"
    if state == PARTIAL:
        subs = [label(s) for s in members(product) if s in (op.get("products") or [])]
        text += " (" + ", ".join(subs) + ")"
    return text


def chips(op: Record, products: Iterable[str] | None = None) -> str:
    """One pill per product the record documents, supported ones first (inline HTML)."""
    out = []
    cols = list(products) if products is not None else families()
    for state in (YES, PARTIAL, NO):
        for p in cols:
            if support(op, p) == state:
                out.append(
                    f'<span class="kb-chip kb-chip--{state}" title="{html.escape(detail(op, p))}">'
                    f"{MARKS[state]} {html.escape(short(p))}</span>"
                )
    return " ".join(out)
