"""Links and markup from record text after the sanitizer, and what a build leaves behind."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import markdown
import pytest
from mkdocs.config import load_config
from site_builds import FixtureSite

from site_plugins import md
from site_plugins.diagrams import Branch, Lane, box, flow
from site_plugins.sanitize import sanitize

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def render():
    cfg = load_config(str(ROOT / "mkdocs.yml"))

    def convert(text: str) -> str:
        return markdown.Markdown(
            extensions=cfg.markdown_extensions, extension_configs=cfg.mdx_configs
        ).convert(text)

    return convert


class Links(HTMLParser):
    def __init__(self, html: str) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self.hrefs += [v or "" for k, v in attrs if k == "href"]


def as_browser_reads(href: str) -> str:
    """The URL as the WHATWG parser reads it: leading and trailing C0 controls and
    spaces dropped, tabs and newlines removed anywhere."""
    return re.sub(r"[\t\n\r]", "", href.strip("".join(map(chr, range(0x21))))).lower()


HOSTILE_LINKS = [
    "See [notes](\x01javascript:alert(1)).",
    "See [notes](java\nscript:alert(1)).",
    "See [notes](java\tscript:alert(1)).",
    "See [notes](JaVaScRiPt:alert(1)).",
    "See [notes](\x00vbscript:msgbox(1)).",
    "See [notes](data:text/html,<script>alert(1)</script>).",
    "[notes]: \x0bjavascript:alert(1)\n\nSee [notes].",
]


@pytest.mark.parametrize("text", HOSTILE_LINKS)
def test_markdown_links_from_raw_markdown_lose_unsafe_schemes(render, text: str) -> None:
    """Even Markdown that skipped the escaper cannot keep a script link."""
    raw_html = render(text)
    for href in Links(sanitize(raw_html)).hrefs:
        assert not as_browser_reads(href).startswith(("javascript:", "vbscript:", "data:"))


@pytest.mark.parametrize("text", HOSTILE_LINKS)
def test_record_text_through_the_page_pipeline_has_no_script_link(render, text: str) -> None:
    html = sanitize(render(md.block(text)))
    links = Links(html)
    assert all(
        not as_browser_reads(h).startswith(("javascript:", "vbscript:", "data:"))
        for h in links.hrefs
    ), links.hrefs
    assert "\x01" not in html and "\x00" not in html and "\x0b" not in html


def test_control_characters_are_stripped_before_markdown() -> None:
    assert md.inline("a\x01b\x7fc\x9fd") == "abcd"
    assert md.block("line\x01\nnext\ttab") == "line\nnext\ttab"
    assert md.code("x\x02y") == "`xy`"


@pytest.mark.parametrize(
    ("href", "kept"),
    [
        ("https://example.org/a?b=1#c", True),
        ("http://example.org/", True),
        ("mailto:someone@example.org", True),
        ("../operators/npu_x/", True),
        ("#rule-x", True),
        ("javascript:alert(1)", False),
        ("ftp://example.org/", False),
        ("file:///etc/passwd", False),
    ],
)
def test_url_scheme_allow_list(href: str, kept: bool) -> None:
    out = sanitize(f'<p><a href="{href}">x</a></p>')
    assert (f'href="{href}"' in out) is kept, out


def test_page_structure_survives_and_handlers_do_not(render) -> None:
    page = (
        '=== "English"\n\n    **Hello**\n\n=== "中文"\n\n    你好\n\n'
        "| a | b |\n| :-: | --: |\n| 1 | 2 |\n\n"
        '??? note "More"\n\n    folded\n\n'
        "## Flow { data-search-exclude }\n\n"
        + flow(
            [Lane("decode", [("a", [Branch(box("<code>op</code>", "../x/", "operator"))])])], "F"
        )
        + "\n\n"
        "```python\nx = 1\n```\n"
    )
    html = render(page)
    out = sanitize(html + '<p onclick="alert(1)" style="color:red">x</p><script>alert(2)</script>')
    tags = Links(out).tags
    names = {t for t, _ in tags}
    assert {"input", "label", "table", "details", "summary", "pre", "code"} <= names
    radios = [a for t, a in tags if t == "input"]
    assert radios and all(a.get("type") == "radio" for a in radios)
    assert 'style="text-align:center"' in out and "color:red" not in out
    # The HTML diagram survives whole: classes, its group role and label, its links.
    assert '<div class="kb-diagram kb-flow" role="group" aria-label="F">' in out
    assert '<a class="kb-node kb-node--operator" href="../x/"><code>op</code></a>' in out
    assert "data-search-exclude" in out
    assert "onclick" not in out and "<script" not in out and "alert(2)" not in out


def test_fixture_pages_keep_no_script_link(fixture_site: FixtureSite) -> None:
    html = (fixture_site.path / "operators" / "npu_fixture_attention" / "index.html").read_text(
        encoding="utf-8"
    )
    article = html.split('<article class="md-content__inner md-typeset">')[1].split("</article>")[0]
    links = Links(article)
    assert "<span>split</span>" in article  # the link whose target was refused
    assert not [t for t, a in links.tags if t == "a" and a.get("href") is None]
    for href in links.hrefs:
        assert "script:" not in as_browser_reads(href), href
    assert "Move to v2" in article and "split" in article


def test_a_build_writes_nothing_into_tmpdir(fixture_site: FixtureSite) -> None:
    assert list(fixture_site.tmpdir.iterdir()) == []
    # kb's own search index replaces lunr's, so no page is segmented with jieba (whose
    # 9 MB dictionary cache would land in TMPDIR)
    assert not list(fixture_site.cache.rglob("jieba*"))


# -- issue 35, class H: links MkDocs cannot parse, ids in the theme's namespace ------------


def test_a_link_mkdocs_cannot_parse_becomes_its_text(fixture_site: FixtureSite) -> None:
    """``[bad host](https://[oops "a trailing title")`` crashed the build (MkDocs' link
    rewriting raised ValueError); the page now shows the text and keeps the title."""
    html = (fixture_site.path / "operators" / "__config" / "index.html").read_text("utf-8")
    article = html.split('<article class="md-content__inner md-typeset">')[1].split("</article>")[0]
    assert '<span title="a trailing title">bad host</span>' in article
    assert "[oops" not in article


THEME_IDS = ("__config", "__drawer", "__search", "__toc", "__palette_0")


def test_no_record_text_takes_an_id_of_the_theme(fixture_site: FixtureSite) -> None:
    """The first element with the id ``__config`` is the theme's configuration script on
    every page, whatever a record is named (``document.getElementById`` returns the first)."""
    pages = list(fixture_site.path.rglob("*.html"))
    assert any(p.parent.name == "__config" for p in pages)
    for path in pages:
        html = path.read_text("utf-8")
        if "<article" not in html:
            continue
        article = html.split("<article", 1)[1].split("</article>")[0]
        ids = re.findall(r"\bid=\"?([^\"\s>]+)", article)
        assert not [i for i in ids if i in THEME_IDS], (path, ids)


@pytest.mark.parametrize(
    ("source", "wanted"),
    [
        ("# __config", 'id="h-__config"'),
        ("## Drawer { #__drawer }", 'id="h-__drawer"'),
        ('[x](https://[oops "t")', '<span title="t">x</span>'),
        ('![pic](http://[oops "t")', "<span"),
        ('=== "A"\n\n    a\n\n=== "B"\n\n    b\n', 'id="__tabbed_1_2"'),
        ("# _npu_flash_attention", 'id="_npu_flash_attention"'),
    ],
)
def test_markdown_keeps_links_parseable_and_ids_out_of_the_theme(
    render, source: str, wanted: str
) -> None:
    html = render(source)
    assert wanted in html, html


def test_the_sanitizer_allow_lists_ids_and_data_attributes() -> None:
    out = sanitize(
        '<h1 id="__config">x</h1><label for="__search">l</label><a href="#a" name="__toc">a</a>'
        '<div id="a&quot;b c" data-md-component="search" data-md-color-scheme="slate" '
        'data-kb-group data-search-exclude data-tabs="1:2">y</div>'
    )
    assert 'id="h-__config"' in out and 'for="h-__search"' in out and 'name="h-__toc"' in out
    assert 'id="h-abc"' in out
    assert "data-md-" not in out
    assert "data-kb-group" in out and "data-search-exclude" in out and 'data-tabs="1:2"' in out
