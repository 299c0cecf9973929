"""A Markdown extension that keeps link targets and element ids within what the site's
other readers accept (registered in mkdocs.yml, so every page gets it).

* A link or image whose target Python's URL parser refuses (``https://[oops``: an
  unclosed IPv6 bracket, a host that changes under NFKC) crashed MkDocs' own link
  rewriting with a ValueError, and so the whole build.  Such a link becomes its text
  (a ``span`` keeping the title), before MkDocs sees it.
* An element id in the theme's namespace (``__config``, ``__drawer``, ``__search``…:
  Material and kb.js look those up by id) is renamed before the table of contents is
  made, so the heading and its contents entry agree and the theme finds its own
  element.  The ids Python-Markdown's extensions make there (``__tabbed_1_2``) are kept.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as etree
from urllib.parse import urlsplit

from markdown import Markdown
from markdown.extensions import Extension
from markdown.extensions.toc import slugify
from markdown.treeprocessors import Treeprocessor

#: Ids the Markdown extensions themselves make in the theme's ``__`` namespace.
EXTENSION_IDS = re.compile(r"__(?:tabbed|code|codelineno)_[\w-]*")
#: An id any reader takes as a plain name: word characters, ``-``, ``.`` and ``:``.
PLAIN_ID = re.compile(r"[\w.:-]+")
_HEADINGS = {"h1", "h2", "h3", "h4", "h5", "h6"}


def url_parses(url: str) -> bool:
    """Whether ``urllib.parse.urlsplit`` (MkDocs' reader) accepts ``url``."""
    try:
        urlsplit(url)
    except ValueError:
        return False
    return True


def safe_id(value: str) -> str:
    """``value`` when it is a plain id outside the theme's namespace, else a plain id
    made from it (``__config`` → ``h-__config``; ``a b<c`` → ``h-abc``)."""
    if EXTENSION_IDS.fullmatch(value):
        return value
    if PLAIN_ID.fullmatch(value) and not value.startswith("__"):
        return value
    return "h-" + "".join(PLAIN_ID.findall(value))


class _SafeTree(Treeprocessor):
    def run(self, root: etree.Element) -> None:
        for el in root.iter():
            key = "href" if el.tag == "a" else "src" if el.tag == "img" else None
            if key is not None and not url_parses(el.get(key, "")):
                alt = el.get("alt", "") if el.tag == "img" else ""
                el.tag = "span"
                el.attrib.pop(key, None)
                el.attrib.pop("alt", None)
                if alt:
                    el.text = alt
            ident = el.get("id")
            if ident is not None:
                el.set("id", safe_id(ident))
            elif el.tag in _HEADINGS:
                slug = slugify("".join(el.itertext()), "-")
                if slug and safe_id(slug) != slug:
                    el.set("id", safe_id(slug))  # the table of contents keeps a set id


class SafeLinksExtension(Extension):
    def extendMarkdown(self, md: Markdown) -> None:  # Python-Markdown names it
        # after attr_list (8), before toc (5) and MkDocs' link rewriting (0)
        md.treeprocessors.register(_SafeTree(md), "kb_safe_links", 6)


def makeExtension(**kwargs: object) -> SafeLinksExtension:
    return SafeLinksExtension(**kwargs)
