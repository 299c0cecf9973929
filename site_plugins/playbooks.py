"""The playbook page: operator classes, sizing formulas and tuning signals."""

from __future__ import annotations

from site_plugins import md
from site_plugins.common import (
    Record,
    SiteData,
    bilingual,
    h1,
    join_sections,
    no_search,
    record_path,
    search_terms,
)

WINDOW_WORDS = {
    "safe": "yes",
    "output-only": "only once its output exists",
    "unsafe": "no",
}


def playbook_page(book: Record, data: SiteData) -> str:
    here = record_path("playbook", book["name"])
    return join_sections(
        h1(f"{book['title']['en']} · {book['title']['zh']}"),
        md.code(book["name"]),
        bilingual(book["summary"]["en"], book["summary"]["zh"], book.get("description", "")),
        search_terms(book.get("keywords")),
        _classes(book, data, here),
        _sizing(book),
        _signals(book),
        _related(book, data, here),
    )


def _classes(book: Record, data: SiteData, here: str) -> str:
    rows = []
    for cls in book.get("op_classes", []):
        rows.append(
            [
                md.code(cls["id"]),
                data.refs(cls.get("names", []), here),
                # one column for both roles: five columns do not fit a 390 px phone
                ("target: " + ("yes" if cls.get("weight_heavy") else "no"))
                + "<br>window: "
                + md.inline(WINDOW_WORDS.get(cls.get("window", ""), cls.get("window", ""))),
                md.inline(cls.get("why", "")),
            ]
        )
    head = ["Class", "Operators", "Prefetch target · dependency window", "Why"]
    return "## Operator classes\n\n" + md.table(head, rows)


def _sizing(book: Record) -> str:
    factor = book.get("conservative_factor")
    ladder = book.get("ladder", [])
    lines = ["## Sizing max_size", ""]
    if factor is not None:
        lines.append(
            f"Start at {md.code(factor)} × the weight's bytes, then move along the "
            f"ladder {' → '.join(md.code(x) for x in ladder)} as profiling allows."
        )
    formulas = book.get("formulas", [])
    if formulas:
        rows = [
            [
                md.code(f["id"]),
                md.inline(f["applies_to"]),
                md.code(f["formula"]),
                md.inline(f["explanation"]),
            ]
            for f in formulas
        ]
        lines += ["", md.table(["Formula", "Applies to", "Bytes", "Explanation"], rows)]
    return "\n".join(lines)


def _signals(book: Record) -> str:
    parts = []
    if book.get("success"):
        parts.append(
            "## Success criteria\n\n" + "\n".join(f"- {md.inline(s)}" for s in book["success"])
        )
    if book.get("failures"):
        rows = [[md.inline(f["signal"]), md.inline(f["action"])] for f in book["failures"]]
        parts.append("## Failure signals\n\n" + md.table(["Signal", "What to do"], rows))
    return "\n\n".join(parts)


def _related(book: Record, data: SiteData, here: str) -> str:
    if not book.get("related"):
        return ""
    return (
        no_search("## Related")
        + "\n\n"
        + "\n".join(f"- {data.ref(n, here)}" for n in book["related"])
    )
