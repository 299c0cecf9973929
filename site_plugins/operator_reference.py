"""The operator page's "What it computes" section, from the record's ``reference`` block.

The same cut ``kb show NAME --section reference`` prints (:func:`kb.api.reference.semantics`),
so the page and the terminal cannot disagree.
"""

from __future__ import annotations

from kb.api.reference import semantics
from site_plugins import md
from site_plugins.common import Record, folded


def reference_section(op: Record) -> str:
    sem = semantics(op)
    if sem is None:
        return ""
    lines = ["## What it computes", "", md.block(sem["computes"]), ""]
    for src in sem["sources"]:
        target = md.url(src["url"])
        label = md.code(src["label"])
        lines.append(f"- {md.link(label, target) if target else label} — {md.inline(src['says'])}")
    detail = [f"- {md.inline(u)}" for u in sem["unstated"]]
    limits = [f"- {md.inline(m)}" for m in sem["limits"]]
    body = ""
    if detail:
        body += (
            "**Left open by the sources** (the reference's choice)\n\n" + "\n".join(detail) + "\n\n"
        )
    if limits:
        body += "**Not modelled by the reference**\n\n" + "\n".join(limits) + "\n\n"
    body += (
        f"The numpy reference runs it: {md.code(sem['run'])} (install the "
        f"{md.code('[reference]')} extra)."
    )
    return "\n".join(lines) + "\n\n" + folded("What the sources leave open", body)
