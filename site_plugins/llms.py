"""``llms.txt`` and Markdown copies of pages, so coding agents read the site without HTML.

``llms.txt`` (the llmstxt.org convention) lists every record with its one-line summary
and a link to its Markdown copy (``…/index.md`` beside the page's HTML).  Chains,
decision trees and playbooks ship their page's Markdown; operators ship a compact
page (:func:`site_plugins.operators.operator_markdown`: signature, parameters,
constraints, quantization, rules, links, no examples or evidence) so the copies stay
well inside the site's size budget.  Every copy goes through :func:`plain`: the page
markup (chips, folds, tabs, attribute lists, diagram blocks) becomes plain Markdown
and links point at other copies, or at built pages, from where the copy is served.
"""

from __future__ import annotations

import html
import posixpath
import re

from kb.vocab.taxonomy import KINDS
from site_plugins import diagrams, md
from site_plugins.build_cache import digest
from site_plugins.common import Record, SiteData, record_path
from site_plugins.operators import operator_markdown

#: Kinds whose page Markdown ships beside the HTML (operators in their compact form).
MARKDOWN_KINDS = KINDS

#: Chips whose value is an identifier (dtype, format, scheme, phase) read as code.
_CODE_CHIP = re.compile(
    r'<span class="kb-chip kb-chip--(?:dtype|format|scheme|phase)">(.*?)</span>'
)
_OTHER_CHIP = re.compile(r'<span class="kb-chip[^"]*"(?: title="[^"]*")?>(.*?)</span>')
_BADGE = re.compile(
    r"<span class=\"kb-badge[^\"]*\">(.*?)</span>|\[([^\]]+)\]\([^)]*\)\{ \.kb-badge[^}]*\}"
)
_HIDDEN = re.compile(r'<p class="kb-terms" hidden>.*?</p>\n*')
_WRAPPER = re.compile(r"^ *(?:<div [^>]*markdown>|</div>) *\n", re.M)
_ATTRS = re.compile(r"\n? *\{:? *(?:[#.][^}\n]*|data-search-exclude) *\}")
_FOLD = re.compile(r'^( *)(?:\?\?\?\+?|!!!|===) ?(?:[\w-]+ )?"(.*)"$')
_FRONT_MATTER = re.compile(r"\A---\n.*?\n---\n", re.S)
_LINK = re.compile(r"\]\(([^)\s#:]+\.md)(#[^)\s]*)?\)")


def _summary(rec: Record) -> str:
    return " ".join(str((rec.get("summary") or {}).get("en", "")).split())


def llms_txt(data: SiteData, site_name: str, description: str) -> str:
    """The index: sections per kind, one line per record, each to its Markdown copy."""
    lines = [
        f"# {site_name}",
        "",
        f"> {description}",
        "",
        "Each link is the Markdown of a page; drop `index.md` for its HTML. Records "
        "are also served by the `kb` command line (`kb show NAME`, `kb search QUERY`) "
        "and by `kb mcp`.",
        "",
    ]
    sections = (
        ("Operators", "operator", data.operators),
        ("Reference chains", "chain", data.chains),
        ("Decision trees", "tree", data.trees),
        ("Playbooks", "playbook", data.playbooks),
    )
    for title, kind, bucket in sections:
        if not bucket:
            continue
        lines += [f"## {title}", ""]
        for name in sorted(bucket):
            url = md.page_url(record_path(kind, name), data.directory_urls)
            if kind in MARKDOWN_KINDS and data.directory_urls:
                url += "index.md"
            summary = _summary(bucket[name])
            lines.append(f"- [{name}]({url})" + (f": {summary}" if summary else ""))
        lines.append("")
    return "\n".join(lines)


def markdown_copies(data: SiteData, pages: dict[str, str]) -> dict[str, str]:
    """Site path → Markdown of each record's page (directory URLs only)."""
    if not data.directory_urls:
        return {}
    sources: dict[str, str | None] = {}  # None: an operator's compact page, made below
    for name in data.operators:
        sources[record_path("operator", name)] = None
    for kind, bucket in (
        ("chain", data.chains),
        ("tree", data.trees),
        ("playbook", data.playbooks),
    ):
        for name in bucket:
            src = record_path(kind, name)
            if src in pages:
                sources[src] = pages[src]
    copies = set(sources)
    listed = digest(*sorted(copies))  # the links of a copy depend on which copies exist
    out = {}
    for src, text in sources.items():

        def make(src: str = src, text: str | None = text) -> str:
            if text is None:
                text = operator_markdown(data.operators[posixpath.basename(src)[:-3]], data)
            return plain(text, src, copies)

        # a chain's, tree's or playbook's copy is made of its page's text: key on it
        made = digest(text) if text is not None else "operator"
        out[md.page_url(src, True) + "index.md"] = data.page(f"llms:{listed}:{made}:{src}", make)
    return out


def plain(text: str, src: str, copies: set[str]) -> str:
    """Page Markdown as an agent reads it from ``src``'s copy: no page markup, folds and
    tabs as bold titles over their body, links that resolve from the copy's URL."""
    text = _FRONT_MATTER.sub("", diagrams.without_diagrams(text))
    text = _HIDDEN.sub("", text)
    text = _WRAPPER.sub("", text)
    text = _ATTRS.sub("", text)
    text = _CODE_CHIP.sub(lambda m: md.code(html.unescape(m.group(1))), text)
    text = _OTHER_CHIP.sub(lambda m: html.unescape(m.group(1)), text)
    text = _BADGE.sub(lambda m: m.group(1) or m.group(2), text)
    text = _unfold(text)
    text = _LINK.sub(
        lambda m: "](" + _copy_link(m.group(1), m.group(2) or "", src, copies) + ")", text
    )
    return re.sub(r"\n{3,}", "\n\n", text).strip("\n") + "\n"


def _unfold(text: str) -> str:
    """``??? kind "Title"`` / ``=== "Tab"`` blocks: a bold title, the body dedented."""
    out: list[str] = []
    folds: list[int] = []  # indents of the open blocks
    for line in text.split("\n"):
        indent = len(line) - len(line.lstrip(" "))
        while folds and line.strip() and indent <= folds[-1]:
            folds.pop()
        if folds:
            line = line[4 * len(folds) :] if line.strip() else ""
        head = _FOLD.match(line)
        if head:
            out.append(f"{head.group(1)}**{head.group(2).replace('&quot;', chr(34))}**")
            folds.append(indent)
            continue
        out.append(line)
    return "\n".join(out)


def _copy_link(target: str, anchor: str, src: str, copies: set[str]) -> str:
    """A page link of ``src``'s Markdown, seen from its copy: the target's copy when
    it has one, else its built page (with the anchor)."""
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(src), target))
    url = md.url_between(resolved, src, True)
    return url + "index.md" if resolved in copies else url + anchor
