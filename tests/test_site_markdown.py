"""The Markdown safety helpers, rendered with the site's own Markdown configuration."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import markdown
import pytest
from mkdocs.config import load_config

from site_plugins import md

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def render():
    """Markdown → HTML with exactly the extensions mkdocs.yml configures."""
    cfg = load_config(str(ROOT / "mkdocs.yml"))

    def convert(text: str) -> str:
        return markdown.Markdown(
            extensions=cfg.markdown_extensions, extension_configs=cfg.mdx_configs
        ).convert(text)

    return convert


class Elements(HTMLParser):
    """Every start tag with its attributes."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def named(self, tag: str) -> list[dict[str, str | None]]:
        return [a for t, a in self.tags if t == tag]

    def attributes(self) -> set[str]:
        return {name for _, attrs in self.tags for name in attrs}


HOSTILE = (
    "<script>alert(1)</script> <img src=x onerror=alert(2)> <b>bold</b> "
    '[x](javascript:alert(3)) {: onclick="alert(4)" } <!-- comment -->'
)


@pytest.mark.parametrize("escape", [md.inline, md.block])
def test_html_and_attribute_injection_are_neutralized(render, escape) -> None:
    html = render(escape(HOSTILE) + "\n")
    found = Elements(html)
    assert not {"script", "img", "b"} & {t for t, _ in found.tags}
    assert not {"onerror", "onclick"} & found.attributes()
    assert all(not (a.get("href") or "").startswith("javascript") for a in found.named("a"))
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # shown as text, not dropped


def test_attribute_list_after_a_paragraph_does_not_attach(render) -> None:
    html = render(md.block('A paragraph\n{: onclick="alert(1)" .evil }') + "\n")
    assert not Elements(html).attributes() & {"onclick", "class"}


def test_markdown_formatting_and_code_spans_survive(render) -> None:
    html = render(md.block("Use `a < b | c` and **bold** and [docs](https://example.org)."))
    assert "<code>a &lt; b | c</code>" in html
    assert "<strong>bold</strong>" in html
    assert '<a href="https://example.org">docs</a>' in html


def test_fence_heading_and_setext_lines_cannot_restructure_the_page(render) -> None:
    text = "intro\n# not a heading\n```\nswallowed?\n---\nend ~~~"
    html = render(md.block(text) + "\n\n## After\n")
    found = Elements(html)
    assert [t for t, _ in found.tags if t in ("h1", "h2", "pre", "code", "hr")] == ["h2"]
    assert "<h2" in html and "After" in html


def test_lone_backtick_does_not_pair_with_later_code(render) -> None:
    html = render("- " + md.inline("a lone ` tick") + " then `real code`\n")
    assert "<code>real code</code>" in html


def test_table_cells_keep_their_columns(render) -> None:
    rows = [
        [md.inline("pipe | in\ntext\nwith newlines"), md.code("x|y"), md.inline("- item")],
        [md.inline("# hash"), md.code("a`b"), md.inline("<script>")],
    ]
    html = render(md.table(["A", "B", "C"], rows) + "\n")
    found = Elements(html)
    assert len(found.named("tr")) == 3
    assert len(found.named("td")) == 6
    assert "<code>x|y</code>" in html and "<code>a`b</code>" in html
    assert not {"ul", "h1", "script"} & {t for t, _ in found.tags}


def test_link_labels_cannot_close_early(render) -> None:
    html = render(md.link(md.inline("a ] b [c]", label=True), "x.md") + "\n")
    assert Elements(html).named("a") == [{"href": "x.md"}]
    assert "a ] b [c]" in html.replace("&#93;", "]").replace("&#91;", "[")


def test_code_block_fence_outgrows_the_content(render) -> None:
    block = md.code_block('print("```")\n````\nstill code', "python")
    html = render(block + "\n\n## After\n")
    text = re.sub(r"<[^>]+>", "", html)
    assert html.count("<pre") == 1 and "still code" in text and "<h2" in html


@pytest.mark.parametrize(
    "href, expected",
    [
        ("https://e.org/a b(1).md", "https://e.org/a%20b%281%29.md"),
        ("javascript:alert(1)", None),
        ("data:text/html,x", None),
        ("", None),
    ],
)
def test_external_urls(href: str, expected: str | None) -> None:
    assert md.url(href) == expected


@pytest.mark.parametrize(
    "target, current, directory_urls, expected",
    [
        ("operators/x.md", "trees/t.md", True, "../../operators/x/"),
        ("index.md", "trees/t.md", True, "../../"),
        ("trees/index.md", "index.md", True, "trees/"),
        ("categories/norm/index.md", "operators/x.md", True, "../../categories/norm/"),
        ("operators/x.md", "trees/t.md", False, "../operators/x.html"),
    ],
)
def test_urls_between_built_pages(target, current, directory_urls, expected) -> None:
    assert md.url_between(target, current, directory_urls) == expected


def test_relative_source_links() -> None:
    assert md.rel("operators/x.md", "chains/c.md") == "../operators/x.md"
    assert md.rel("operators/x.md", "index.md") == "operators/x.md"


@pytest.mark.parametrize(
    "text",
    [
        "`open\n\n<script>alert(1)</script>\n\nclose`",
        "`open\n# <script>alert(1)</script> `",
        "\\`not a span <script>alert(1)</script>`",
    ],
)
def test_only_real_code_spans_are_kept_verbatim(render, text: str) -> None:
    html = render(md.block(text) + "\n")
    assert "script" not in {t for t, _ in Elements(html).tags}
