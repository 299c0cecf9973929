"""The operator page's "Page versus binding" section, from the record's ``discrepancies``.

Where the reference page states one thing and the wrapper or kernel does another, the
record states what runs; this section shows the reader both, with a link to the file
that settles it.  The sentence is :func:`kb.text.binding.discrepancy_text`'s parts.
"""

from __future__ import annotations

from kb.api.reference import source_url
from kb.text.binding import shown, source_label
from site_plugins import md
from site_plugins.common import Record


def discrepancies_section(op: Record) -> str:
    entries = op.get("discrepancies") or []
    if not entries:
        return ""
    lines = [
        "## Page versus binding",
        "",
        "The reference page says otherwise than the code that runs; this record states what runs.",
        "",
        "| about | the page says | what runs | settled by |",
        "|---|---|---|---|",
    ]
    for d in entries:
        src = d["source"]
        target = md.url(source_url(src))
        label = md.code(source_label(src))
        where = f"{src['kind']}: " + (md.link(label, target) if target else label)
        lines.append(
            f"| {md.code(d['about'])} | {md.inline(shown(d['page']))} | "
            f"{md.inline(shown(d['binding']))} | {where} |"
        )
    notes = [f"- {md.code(d['about'])}: {md.inline(d['note'])}" for d in entries if d.get("note")]
    return "\n".join(lines + ([""] + notes if notes else []))
