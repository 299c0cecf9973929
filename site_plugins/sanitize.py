"""The last word on generated pages: an allow-list sanitizer over their rendered HTML.

Record text is escaped while the Markdown is built (:mod:`site_plugins.md`), but an
escaper guesses what the Markdown parser and the browser will make of a string; a
sanitizer sees the HTML itself.  Every page generated from records goes through
nh3 (Rust's ammonia) after Markdown: only the tags and attributes our generators and
the Markdown extensions produce survive, and links keep only http, https, mailto or
relative targets.  Control characters go first: browsers ignore some of them inside
a URL (``\\x01javascript:`` runs as ``javascript:``), so a scheme check must never see
them.
"""

from __future__ import annotations

import re

import nh3

from site_plugins.md import strip_controls
from site_plugins.safe_links import safe_id

URL_SCHEMES = frozenset({"http", "https", "mailto"})

TAGS = frozenset(
    {
        "a",
        "abbr",
        "b",
        "blockquote",
        "br",
        "caption",
        "code",
        "col",
        "colgroup",
        "dd",
        "del",
        "details",
        "div",
        "dl",
        "dt",
        "em",
        "figcaption",
        "figure",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "hr",
        "i",
        "input",
        "ins",
        "kbd",
        "label",
        "li",
        "mark",
        "ol",
        "p",
        "pre",
        "s",
        "small",
        "span",
        "strong",
        "sub",
        "summary",
        "sup",
        "table",
        "tbody",
        "td",
        "tfoot",
        "th",
        "thead",
        "tr",
        "ul",
        "wbr",
        "select",
        "option",
        "optgroup",
    }
)

#: Attributes allowed on every tag, then per tag.  Of the ``data-*`` attributes only ours
#: (kb.js's filters, the search exclusion mark, tabbed's ``data-tabs``): record text must
#: not reach the ``data-md-*`` attributes Material's script is driven by.
ATTRIBUTES: dict[str, set[str]] = {
    "*": {
        "id",
        "class",
        "title",
        "lang",
        "dir",
        "hidden",
        "role",
        "aria-label",
        "tabindex",
        "data-search-exclude",
        "data-products",
        "data-rel",
        "data-tabs",
    },
    "a": {"href", "name"},
    "td": {"style", "colspan", "rowspan"},
    "th": {"style", "colspan", "rowspan", "scope"},
    "label": {"for"},
    "details": {"open"},
    "ol": {"start"},
    "input": {"type", "name", "checked", "placeholder", "autocomplete", "value"},
    "option": {"value", "selected"},
    "optgroup": {"label"},
}

#: Input types a page may contain: content tabs (radio), filter boxes, toggles.
INPUT_TYPES = {"radio", "search", "checkbox", "text"}


#: Attributes whose value names an element: an allow-listed id (never one of the
#: theme's ``__`` ids, which Material and kb.js look up), the same one wherever it is named.
ID_ATTRIBUTES = frozenset({"id", "for", "name"})


def _filter(tag: str, attribute: str, value: str) -> str | None:
    if tag == "input" and attribute == "type" and value.lower() not in INPUT_TYPES:
        return None
    if attribute in ID_ATTRIBUTES:
        return safe_id(value)
    return value


#: An anchor the sanitizer left without a target (its scheme was refused).
_DEAD_LINK = re.compile(r"<a((?:\s(?!href=)[a-z-]+=\"[^\"]*\")*)>(.*?)</a>", re.S)


def sanitize(html: str) -> str:
    """HTML rendered from record text, with everything outside the allow-list removed.

    A link whose target was refused becomes plain text (a ``span``): an ``<a>`` without
    ``href`` is inert, but themes that intercept clicks choke on it.
    """
    clean = nh3.clean(
        strip_controls(html),
        tags=set(TAGS),
        clean_content_tags={"script", "style"},
        attributes=ATTRIBUTES,
        attribute_filter=_filter,
        generic_attribute_prefixes={"data-kb-"},
        url_schemes=set(URL_SCHEMES),
        link_rel=None,
        strip_comments=True,
        filter_style_properties={"text-align"},
    )
    return _DEAD_LINK.sub(r"<span\1>\2</span>", clean)
