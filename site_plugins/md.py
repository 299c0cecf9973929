"""Safe Markdown building blocks for generated pages.

Record strings are Markdown *content* written by contributors, not trusted HTML: they
may use code spans, emphasis and links, but must never inject markup (``<script>``,
attribute lists ``{: onclick=…}``, ``javascript:`` links) or break the page around
them (a ``|`` in a table cell, a stray fence that swallows the rest of the page, a
newline inside a cell).  Every record string that
reaches a page goes through one of :func:`inline`, :func:`block`, :func:`code` or
:func:`code_block`.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Sequence
from urllib.parse import quote, urlsplit

#: A code span as Python-Markdown reads one: an unescaped backtick run, content on the
#: same line, the same run again.  Anything looser would keep text verbatim that
#: Markdown then parses as HTML (a span "across" a blank line or after a backslash).
_CODE_SPAN = re.compile(r"(?<![`\\])(`+)(?!`)([^\n]+?)(?<!`)\1(?!`)")
_PLAIN = str.maketrans(
    {
        "&": "&amp;",
        "<": "&lt;",
        ">": "&gt;",
        "{": "&#123;",
        "}": "&#125;",
        "|": "&#124;",
        "`": "&#96;",
    }
)
_UNSAFE_SCHEME = r"(?:javascript|vbscript|data|file)\s*:"
_UNSAFE_INLINE_LINK = re.compile(r"\]\((\s*" + _UNSAFE_SCHEME + ")", re.I)
_UNSAFE_REF_DEF = re.compile(r"^(\s{0,3})\[(?=[^\]]*\]:\s*" + _UNSAFE_SCHEME + ")", re.I | re.M)
_FENCE_LINE = re.compile(r"^([ \t]*)(`{3,}|~{3,})", re.M)
_HEADING_LINE = re.compile(r"^([ \t]{0,3})#", re.M)
_SETEXT_LINE = re.compile(r"^([ \t]{0,3})([=-])(?=[=\- \t]*$)", re.M)
#: Text that would open a block (heading, list, quote, tab, admonition) at line start.
_BLOCK_START = re.compile(r"^(#|[-+*](?=\s)|\d+(?=[.)]\s)|={3}|!{3}|\?{3})")
_WS = re.compile(r"\s+")
#: Block markers found before escaping are parked on private-use characters, so the
#: code-span pass cannot mistake a neutralized fence for a span, then become entities.
_MARKERS = "`~#=-"
_SENTINELS = "".join(chr(0xE000 + i) for i in range(len(_MARKERS)))
_TO_SENTINEL = str.maketrans(_MARKERS, _SENTINELS)
_FROM_SENTINEL = str.maketrans(
    {s: f"&#{ord(m)};" for m, s in zip(_MARKERS, _SENTINELS, strict=True)}
)
_NO_SENTINELS = str.maketrans(dict.fromkeys(_SENTINELS, "\ufffd"))
#: C0 and C1 control characters except tab, line feed and carriage return: browsers
#: skip some of them inside URLs, so they could hide a scheme from any later check.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def strip_controls(text: object) -> str:
    """Record text without control characters (they have no business on a page)."""
    return _CONTROL.sub("", str(text))


def _escape_plain(text: str) -> str:
    """Escape text outside code spans: no HTML, attribute lists, pipes or stray ticks."""
    text = text.translate(_PLAIN)
    text = _UNSAFE_INLINE_LINK.sub(r"]&#40;\1", text)
    return _UNSAFE_REF_DEF.sub(r"\1&#91;", text)


_BRACKETS = str.maketrans({"[": "&#91;", "]": "&#93;"})


def _escape_spans(text: str, brackets: bool = False) -> str:
    """Keep well-formed code spans verbatim (Markdown escapes them); escape the rest.

    ``brackets`` also neutralizes ``[`` and ``]`` (text that becomes a link label).
    """
    out: list[str] = []
    pos = 0
    for match in _CODE_SPAN.finditer(text):
        plain = _escape_plain(text[pos : match.start()])
        out.append(plain.translate(_BRACKETS) if brackets else plain)
        out.append(match.group(0))
        pos = match.end()
    plain = _escape_plain(text[pos:])
    out.append(plain.translate(_BRACKETS) if brackets else plain)
    return "".join(out)


def _entity(ch: str) -> str:
    return f"&#{ord(ch)};"


def inline(text: object, *, label: bool = False) -> str:
    """Record text for one line: a table cell, a list item, a heading.

    Newlines collapse to spaces, and nothing at the start can open a block.  With
    ``label`` the text is fit to be a link label (brackets neutralized).
    """
    flat = _WS.sub(" ", strip_controls(text)).strip()
    out = _escape_spans(flat, brackets=label)
    match = _BLOCK_START.match(out)
    if match:
        out = _entity(out[0]) + out[1:]
    return out


def block(text: object) -> str:
    """Record prose for a paragraph position: Markdown inline formatting survives,
    headings, fences and setext underlines do not (they would restructure the page)."""
    src = strip_controls(text).strip("\n").translate(_NO_SENTINELS)
    src = _FENCE_LINE.sub(lambda m: m.group(1) + m.group(2).translate(_TO_SENTINEL), src)
    src = _HEADING_LINE.sub(lambda m: m.group(1) + "#".translate(_TO_SENTINEL), src)
    src = _SETEXT_LINE.sub(lambda m: m.group(1) + m.group(2).translate(_TO_SENTINEL), src)
    return _escape_spans(src).translate(_FROM_SENTINEL)


def code(text: object) -> str:
    """An inline code span that holds any text, backticks included."""
    flat = _WS.sub(" ", strip_controls(text)).strip()
    if not flat:
        return ""
    longest = max((len(run) for run in re.findall(r"`+", flat)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def code_block(text: str, lang: str = "") -> str:
    """A fenced block whose fence is longer than any backtick run inside it."""
    body = strip_controls(text).rstrip("\n")
    longest = max((len(run) for run in re.findall(r"`{3,}", body)), default=0)
    fence = "`" * max(3, longest + 1)
    safe_lang = re.sub(r"[^A-Za-z0-9_+\-]", "", lang)
    return f"{fence}{safe_lang}\n{body}\n{fence}"


def indent(text: str, spaces: int = 4) -> str:
    """Indent every non-blank line (content of tabs, admonitions, list items)."""
    pad = " " * spaces
    return "\n".join(pad + line if line.strip() else "" for line in text.split("\n"))


def url(href: object) -> str | None:
    """An external http(s) URL made safe for a Markdown link target, else None."""
    text = str(href or "").strip()
    if urlsplit(text).scheme.lower() not in ("http", "https"):
        return None
    return quote(text, safe=":/?#@!$&'*+,;=%~-._[]")


def link(label: str, target: str) -> str:
    """``[label](target)``; the label must already be escaped."""
    return f"[{label}]({target})"


def rel(target: str, current: str) -> str:
    """Relative path between two docs-relative ``.md`` sources (what MkDocs resolves)."""
    return posixpath.relpath(target, posixpath.dirname(current) or ".")


def page_url(src: str, directory_urls: bool = True) -> str:
    """The site URL of a ``.md`` source, as MkDocs computes it."""
    stem = src[: -len(".md")]
    if not directory_urls:
        return stem + ".html"
    if stem == "index":
        return ""
    if stem.endswith("/index"):
        return stem[: -len("index")]
    return stem + "/"


def url_between(target: str, current: str, directory_urls: bool = True) -> str:
    """Relative URL from the built page of ``current`` to that of ``target``."""
    here = page_url(current, directory_urls)
    there = page_url(target, directory_urls)
    base = here if here.endswith("/") or not here else posixpath.dirname(here)
    out = posixpath.relpath(there or ".", base.rstrip("/") or ".")
    if (there.endswith("/") or not there) and not out.endswith("/"):
        out += "/"
    return out


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], align: str = "") -> str:
    """A pipe table; cells must already be escaped with :func:`inline` or :func:`code`.

    ``align`` holds one of ``l c r`` per column (default left).
    """
    marks = {"l": "---", "c": ":-:", "r": "--:"}
    sep = [marks.get(align[i] if i < len(align) else "l", "---") for i in range(len(headers))]
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join(sep) + " |"]
    for row in rows:
        cells = [c if c.strip() else " " for c in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def words(items: Iterable[object], sep: str = ", ") -> str:
    """Several short values as code spans (dtypes, formats, ids)."""
    return sep.join(code(i) for i in items if str(i) != "")
