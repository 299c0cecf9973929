"""How a record's discrepancies read: the page's claim, what runs, and the file that says so.

One wording for ``kb show`` and the site, so the terminal and the page cannot disagree.
"""

from __future__ import annotations

from typing import Any


def shown(value: Any) -> str:
    """A value as the record states it: lists joined, strings bare."""
    if isinstance(value, list):
        return "[" + ", ".join(shown(v) for v in value) + "]"
    return str(value)


def source_label(src: dict[str, Any]) -> str:
    """``Ascend/op-plugin@517f2e7 op_plugin/ops/opapi/X.cpp:21-24``."""
    return f"{src['repo']}@{str(src['commit'])[:7]} {src['path']}:{src['lines']}"


def discrepancy_text(d: dict[str, Any]) -> str:
    """One discrepancy in a sentence: ``about: the page says …; what runs: … (source)``."""
    text = f"{d['about']}: the page says {shown(d['page'])}; what runs: {shown(d['binding'])}"
    text += f" ({d['source']['kind']} {source_label(d['source'])})"
    return text + (f". {d['note']}" if d.get("note") else "")


def discrepancy_texts(rec: dict[str, Any]) -> list[str]:
    return [discrepancy_text(d) for d in rec.get("discrepancies") or []]
