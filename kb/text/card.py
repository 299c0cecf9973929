"""The summary card of ``kb show --brief`` for a terminal (the card itself is
:func:`kb.api.recordview.brief`; the full record is :mod:`kb.text.render`'s)."""

from __future__ import annotations

from typing import Any

from kb.emulate.names import in_words
from kb.text.render import field, wrap

Rec = dict[str, Any]


def brief_text(card: Rec) -> str:
    """The summary card of :func:`kb.api.recordview.brief` for a terminal."""
    tag = f"{card['status']}, {card['category']}" if card["kind"] == "operator" else card["kind"]
    out = [f"{card['name']}  [{tag}]"]
    if card.get("title"):
        out += wrap(card["title"], "  ")
    out += wrap(card["summary"], "  ")
    labels = {
        "call": "call",
        "products": "products",
        "phases": "phases",
        "module": "module",
        "torch_npu": "torch_npu",
        "schemes": "schemes",
        "superseded_by": "superseded by",
        "operators": "operators",
        "targets": "prefetch targets",
        "conservative_factor": "conservative factor",
        "ladder": "ladder",
    }
    for key, label in labels.items():
        out += field(label, card.get(key))
    if card["kind"] == "operator":
        out += field("emulated", in_words(card["name"]))
    if card.get("flags"):
        out += field("flags", [f"--{k}={'|'.join(v)}" for k, v in card["flags"].items()])
    parts = ", ".join(_BRIEF_MORE[card["kind"]])
    out += wrap(f"sections: {parts}, … (--section NAME; all without --brief)", "  ", hang="    ")
    return "\n".join(out) + "\n"


#: The sections a reader of the card most often wants next, per kind.
_BRIEF_MORE = {
    "operator": ("parameters", "constraints", "examples"),
    "chain": ("stages", "prerequisites"),
    "tree": ("nodes",),
    "playbook": ("op_classes", "formulas"),
    "extension": ("operators",),
}
