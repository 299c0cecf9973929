"""Diagrams as plain HTML, drawn by CSS: no diagram script, real text, real links.

Chains draw as a flow of boxes per phase (a step with scheme variants holds its
branches side by side); a decision tree's map draws as an outline of its questions
with the answers on the branches.  Both are nested lists, so a screen reader reads
them as lists, a phone wraps them, and the palette's colours apply (assets kb.css).
The blocks sit between :data:`BEGIN` and :data:`END` so a Markdown copy for agents
can drop them (the stage and answer lists beside them say the same in words).
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

BEGIN = "<!-- kb:diagram -->"
END = "<!-- /kb:diagram -->"

_CODE_SPAN = re.compile(r"`([^`\n]+)`")
_BLOCK = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END) + r"\n*", re.S)


def text_html(text: object) -> str:
    """Record text for a box: escaped, one line, code spans kept as ``<code>``."""
    flat = " ".join(str(text).split())
    parts = _CODE_SPAN.split(flat)
    return "".join(
        f"<code>{html.escape(p)}</code>" if i % 2 else html.escape(p) for i, p in enumerate(parts)
    )


def box(label_html: str, href: str | None, kind: str, title: str = "") -> str:
    """One box: a link when it leads somewhere (an operator, a chain, a step)."""
    cls = f"kb-node kb-node--{kind}"
    tip = f' title="{html.escape(title, quote=True)}"' if title else ""
    if href:
        return f'<a class="{cls}" href="{html.escape(href, quote=True)}"{tip}>{label_html}</a>'
    return f'<span class="{cls}"{tip}>{label_html}</span>'


def wrap(inner: str, css: str, label: str, head: str = "") -> str:
    """A diagram block: a labelled group that scrolls inside its own box if it must.
    ``head`` (the section heading and words about the diagram) goes inside the
    markers, so a copy without diagrams has no empty section."""
    top = f"{head}\n\n" if head else ""
    return (
        f'{BEGIN}\n\n{top}<div class="kb-diagram {css}" role="group" '
        f'aria-label="{html.escape(label, quote=True)}">\n{inner}\n</div>\n\n{END}'
    )


def without_diagrams(markdown: str) -> str:
    """Page Markdown without its diagram blocks (for the copies agents read)."""
    return _BLOCK.sub("", markdown)


# -- flows: ordered steps, a step may branch -----------------------------------------


@dataclass
class Branch:
    """One way to run a step: its box, and the scheme that selects it (if any)."""

    box_html: str
    scheme: str = ""


@dataclass
class Lane:
    """One phase of a flow: its title and its steps in order."""

    title: str
    steps: list[tuple[str, list[Branch]]] = field(default_factory=list)


def flow(lanes: list[Lane], label: str, head: str = "") -> str:
    """Phases side by side (stacked on a phone), steps top-down, branches side by side."""
    out = []
    for lane in lanes:
        items = []
        for name, branches in lane.steps:
            if len(branches) == 1:
                items.append(f'<li class="kb-flow__step">{_branch(branches[0])}</li>')
                continue
            inner = "".join(f"<li>{_branch(b)}</li>" for b in branches)
            items.append(
                '<li class="kb-flow__step kb-flow__step--fork">'
                f'<span class="kb-flow__fork">{text_html(name)}: one of</span>'
                f'<ul class="kb-flow__branches">{inner}</ul></li>'
            )
        title = f'<p class="kb-flow__title">{text_html(lane.title)}</p>' if lane.title else ""
        steps = "\n".join(items) or '<li class="kb-flow__step">no stage</li>'
        out.append(
            f'<div class="kb-flow__lane">{title}\n<ol class="kb-flow__steps">\n{steps}\n</ol></div>'
        )
    return wrap("\n".join(out), "kb-flow", label, head)


def _branch(branch: Branch) -> str:
    if not branch.scheme:
        return branch.box_html
    tag = f'<span class="kb-flow__scheme">{text_html(branch.scheme)}</span>'
    return f'<span class="kb-flow__branch">{tag}{branch.box_html}</span>'


# -- outlines: a question map --------------------------------------------------------


@dataclass
class Item:
    """One entry of an outline: the words on its branch, its box, what hangs below."""

    edge_html: str
    box_html: str
    children: list[Item] = field(default_factory=list)


def outline(roots: list[Item], label: str, head: str = "") -> str:
    """Nested lists with connector lines (kb.css); each root starts its own tree."""
    inner = f'<ul class="kb-tree">{"".join(_item(r) for r in roots)}</ul>'
    return wrap(inner, "kb-map", label, head)


def _item(item: Item) -> str:
    edge = f'<span class="kb-edge">{item.edge_html}</span>' if item.edge_html else ""
    below = "".join(_item(c) for c in item.children)
    return f"<li>{edge}{item.box_html}" + (f"<ul>{below}</ul>" if below else "") + "</li>"
