"""Small Mermaid flowchart builder: generated ids, quoted labels, click links.

Node ids are generated (``q0``, ``s3``) rather than taken from records, so no record
text can collide with Mermaid keywords (``end``, ``graph``) or arrow syntax.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from site_plugins import md


@dataclass
class Flowchart:
    direction: str = "TD"
    lines: list[str] = field(default_factory=list)
    classes: dict[str, list[str]] = field(default_factory=dict)

    def node(self, node_id: str, label: str, shape: str = "box", css: str | None = None) -> str:
        """Add a node; ``label`` is raw record text (escaped here)."""
        text = md.mermaid_text(label)
        opening, closing = {
            "box": ("[", "]"),
            "round": ("(", ")"),
            "question": ("{", "}"),
            "stadium": ("([", "])"),
        }[shape]
        self.lines.append(f'    {node_id}{opening}"{text}"{closing}')
        if css:
            self.classes.setdefault(css, []).append(node_id)
        return node_id

    def edge(self, src: str, dst: str, label: str | None = None) -> None:
        if label:
            self.lines.append(f'    {src} -->|"{md.mermaid_text(label)}"| {dst}')
        else:
            self.lines.append(f"    {src} --> {dst}")

    def click(self, node_id: str, href: str, tooltip: str) -> None:
        """Make a node a link (an ``<a>`` in the SVG; works with securityLevel strict)."""
        safe_href = href.replace('"', "%22")
        self.lines.append(f'    click {node_id} href "{safe_href}" "{md.mermaid_text(tooltip)}"')

    def subgraph(self, sub_id: str, title: str) -> None:
        self.lines.append(f'    subgraph {sub_id}["{md.mermaid_text(title)}"]')

    def end(self) -> None:
        self.lines.append("    end")

    def render(self, fit: bool = True) -> str:
        """The Mermaid block; ``fit`` shrinks a diagram wider than its column to fit it
        (keep diagrams small enough that this rarely happens: text shrinks with it)."""
        body = [
            '%%{init: {"flowchart": {"useMaxWidth": ' + ("true" if fit else "false") + "}}}%%",
            f"flowchart {self.direction}",
            *self.lines,
        ]
        for css, ids in self.classes.items():
            body.append(f"    class {','.join(ids)} {css}")
        body += [
            "    classDef chain stroke-width:2px",
            "    classDef operator stroke-width:2px",
            "    classDef note stroke-dasharray:4 3",
            "    classDef next stroke-dasharray:2 2",
            "    classDef question stroke-width:1px",
        ]
        return md.code_block("\n".join(body), "mermaid")
