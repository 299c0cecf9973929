"""What every page generator needs: the records by kind, their page paths, links.

Records arrive as the dicts the compiled catalog stores (pydantic ``model_dump`` by
alias), so the generators read plain data and never import pydantic.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from site_plugins import md
from site_plugins.reads import Bucket, Generation, Reads, derived

Record = dict[str, Any]

#: Where each kind of record gets its page (docs-relative source paths).
KIND_DIRS = {"operator": "operators", "chain": "chains", "tree": "trees", "playbook": "playbooks"}
#: The SiteData attribute holding each kind's records.
BUCKETS = {"operator": "operators", "chain": "chains", "tree": "trees", "playbook": "playbooks"}


class RuleUnit(Protocol):
    """The part of a checker rule unit (``kb.rules.RULES``) the site reads."""

    code: str
    name: str
    severity: str
    summary: str
    why: str
    fail: str
    fix: str


@dataclass
class SiteData:
    """All records by kind plus the checker rules, with reverse lookups."""

    operators: dict[str, Record] = field(default_factory=dict)
    chains: dict[str, Record] = field(default_factory=dict)
    trees: dict[str, Record] = field(default_factory=dict)
    playbooks: dict[str, Record] = field(default_factory=dict)
    rules: list[RuleUnit] = field(default_factory=list)
    directory_urls: bool = True
    #: Rule code → what ``kb check`` prints for that rule's failing example.
    rule_reports: dict[str, str] = field(default_factory=dict)
    #: What the page being generated reads of the buckets (site_plugins/reads.py).
    reads: Reads = field(default_factory=Reads, repr=False, compare=False)
    #: Generated pages reused by what they read; None: generate every page.
    generation: Generation | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        for kind, attr in BUCKETS.items():
            current = getattr(self, attr)
            if not isinstance(current, Bucket):
                bucket = Bucket(kind, self.reads)
                dict.update(bucket, current)
                setattr(self, attr, bucket)

    def buckets(self) -> dict[str, dict[str, Record]]:
        return {kind: getattr(self, attr) for kind, attr in BUCKETS.items()}

    def page(self, path: str, make: Callable[[], str]) -> str:
        """The text of generated page ``path``: ``make()``, or what it made before when
        nothing it read has changed."""
        return self.generation.page(path, make) if self.generation is not None else make()

    @classmethod
    def from_records(
        cls, records: Iterable[Record], rules: Iterable[RuleUnit] = (), directory_urls: bool = True
    ) -> SiteData:
        data = cls(rules=sorted(rules, key=lambda r: str(r.code)), directory_urls=directory_urls)
        buckets = {
            "operator": data.operators,
            "chain": data.chains,
            "tree": data.trees,
            "playbook": data.playbooks,
        }
        for rec in records:
            bucket = buckets.get(rec.get("kind", ""))
            if bucket is not None:
                bucket[rec["name"]] = rec
        return data

    def kind_of(self, name: str) -> str | None:
        for kind, bucket in (
            ("operator", self.operators),
            ("chain", self.chains),
            ("tree", self.trees),
            ("playbook", self.playbooks),
        ):
            if name in bucket:
                return kind
        return None

    def path(self, name: str) -> str | None:
        """The page source of a record, or None for a name no record has."""
        kind = self.kind_of(name)
        return record_path(kind, name) if kind else None

    def ref(self, name: str, current: str, label: str | None = None) -> str:
        """A link to a record's page from page ``current``; plain code if unknown."""
        target = self.path(name)
        text = label if label is not None else md.code(name)
        if target is None:
            return text
        return md.link(text, md.rel(target, current))

    def refs(self, names: Iterable[str], current: str) -> str:
        return ", ".join(self.ref(n, current) for n in names)

    def href(self, name: str, current: str) -> str | None:
        """A URL (not a .md path) to a record's built page, for raw HTML links (diagrams)."""
        target = self.path(name)
        return md.url_between(target, current, self.directory_urls) if target else None

    def chains_using(self, operator: str) -> list[Record]:
        """Chains with a stage that calls ``operator`` (a page reading them depends on
        those chains, not on every chain: :func:`site_plugins.reads.derived`)."""
        return [dict.__getitem__(self.chains, n) for n in derived(self, "chains_using", operator)]

    def trees_naming(self, name: str) -> list[Record]:
        """Decision trees with a leaf that points at ``name`` (chain or operator)."""
        return [dict.__getitem__(self.trees, n) for n in derived(self, "trees_naming", name)]

    def successors(self, name: str) -> list[str]:
        """Operators whose ``supersedes`` lists ``name``, by name."""
        return derived(self, "successors", name)


#: Labels for category and module ids whose capitalized form reads wrong.
LABELS = {"kv-cache": "KV cache", "moe": "MoE", "ffn": "FFN", "mla": "MLA", "rope": "RoPE"}


def category_label(text: str) -> str:
    return LABELS.get(text, text.replace("-", " ").capitalize())


def record_path(kind: str, name: str) -> str:
    return f"{KIND_DIRS[kind]}/{name}.md"


def rule_path(code: str) -> str:
    return f"rules/{safe_slug(code)}.md"


def category_path(category: str) -> str:
    return f"categories/{safe_slug(category)}/index.md"


def status_path(status: str) -> str:
    return f"status/{safe_slug(status)}.md"


def safe_slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.\-]", "-", str(text)) or "-"


def title_text(text: object) -> str:
    """Record text for a page title (H1 and nav), which themes also put in <title>.

    MkDocs keeps HTML entities in titles and Material's ``striptags`` turns them back
    into raw characters inside <title>, so angle brackets become look-alike quotes.
    """
    return " ".join(str(text).split()).replace("<", "‹").replace(">", "›")


def nav_title(text: object) -> str:
    """A nav entry title: themes print it as HTML, so escape it; and let it wrap after
    each underscore.

    The sidebar cuts a label it cannot wrap, and identifiers have no break of their own:
    ``npu_fused_infer_attention_score`` and its ``_v2`` were cut to the same text.  With
    the whole label shown, labels made from record names and titles cannot collide.
    ``<wbr>`` leaves the page's <title> through the theme's ``striptags``.
    """
    return "_<wbr>".join(html.escape(part, quote=True) for part in title_text(text).split("_"))


def h1(text: object) -> str:
    return "# " + md.inline(title_text(text))


def badge(label: str, target: str | None, current: str, kind: str) -> str:
    """A status/category pill: a link styled by attr_list classes (see kb.css)."""
    text = md.inline(label)
    if target is None:
        return f'<span class="kb-badge kb-badge--{safe_slug(kind)}">{text}</span>'
    return md.link(text, md.rel(target, current)) + f"{{ .kb-badge .kb-badge--{safe_slug(kind)} }}"


def bilingual(en_summary: str, zh_summary: str, en_body: str = "", zh_body: str = "") -> str:
    """English and Chinese words as content tabs (both indexed by search)."""
    parts = []
    for label, summary, body in (("English", en_summary, en_body), ("中文", zh_summary, zh_body)):
        inner = f"**{md.inline(summary)}**" if summary else ""
        if body:
            inner += "\n\n" + md.block(body)
        if inner:
            parts.append(f'=== "{label}"\n\n' + md.indent(inner))
    return "\n\n".join(parts)


def search_terms(keywords: dict[str, list[str]] | None) -> str:
    """The record's search keywords, indexed with the page's first section but not shown.

    Readers come for the answer, not for a list of terms; the site search still finds
    the page by every English and Chinese phrase the record lists.  Place it before the
    first ``##`` heading so the terms count for the page itself, not a sub-section.
    """
    if not keywords or not (keywords.get("en") or keywords.get("zh")):
        return ""
    words = [md.inline(k) for k in (keywords.get("en") or []) + (keywords.get("zh") or [])]
    return '<p class="kb-terms" hidden>' + " · ".join(words) + "</p>"


def chip(text: str, kind: str = "", title: str | None = None) -> str:
    """A small inline pill for a value (dtype, format, scheme, phase); never wraps inside."""
    cls = "kb-chip" + (f" kb-chip--{safe_slug(kind)}" if kind else "")
    tip = f' title="{html.escape(title, quote=True)}"' if title else ""
    return f'<span class="{cls}"{tip}>{html.escape(str(text))}</span>'


def chips(values: Iterable[object], kind: str = "") -> str:
    return " ".join(chip(str(v), kind) for v in values if str(v) != "")


def folded(title: str, body: str, kind: str = "note", open_: bool = False) -> str:
    """A collapsible block (pymdownx.details): shut by default, still indexed by search."""
    marker = "???+" if open_ else "???"
    return f'{marker} {kind} "{title.replace(chr(34), "&quot;")}"\n\n' + md.indent(body)


def no_search(heading: str) -> str:
    """A heading whose section stays out of the search index (lists of links, releases)."""
    return heading + " { data-search-exclude }"


def join_sections(*sections: str) -> str:
    """Page text from its sections, empty ones dropped."""
    return "\n\n".join(s.strip("\n") for s in sections if s and s.strip()) + "\n"


def scalar(value: object) -> str:
    """A scalar from a record as its Python spelling (True, None, 'PA_BSND' → PA_BSND)."""
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "True" if value else "False"
    return str(value)


def value_text(value: object) -> str:
    """A record value as its Python spelling, a list of scalars as ``[a, b]``."""
    if isinstance(value, list):
        return "[" + ", ".join(scalar(v) for v in value) + "]"
    return scalar(value)


# -- raw HTML tables (rows that carry data attributes for the page filters) -----------


def wrap_name(name: str) -> str:
    """An identifier as HTML that may wrap after an underscore, never inside a word."""
    return "_<wbr>".join(html.escape(part) for part in str(name).split("_"))


def html_link(label_html: str, target: str | None) -> str:
    if not target:
        return label_html
    return f'<a href="{html.escape(target, quote=True)}">{label_html}</a>'


def html_table(
    headers: list[str],
    rows: Iterable[tuple[dict[str, str], list[str]]],
    align: str = "",
) -> str:
    """A table from already-escaped cell HTML; each row carries its own attributes.

    ``align`` holds one of ``l c r`` per column (default left).  These tables list
    records (indexes, matrices): they stay out of the search index, where each row
    would be a weaker duplicate of the record's own page.
    """
    styles = {"c": ' style="text-align: center"', "r": ' style="text-align: right"'}

    def style(i: int) -> str:
        return styles.get(align[i] if i < len(align) else "l", "")

    head = "".join(f"<th{style(i)}>{h}</th>" for i, h in enumerate(headers))
    body = []
    for attrs, cells in rows:
        attr = "".join(f' {k}="{html.escape(v, quote=True)}"' for k, v in attrs.items())
        tds = "".join(f"<td{style(i)}>{c}</td>" for i, c in enumerate(cells))
        body.append(f"<tr{attr}>{tds}</tr>")
    return (
        f"<table data-search-exclude>\n<thead><tr>{head}</tr></thead>\n<tbody>\n"
        + "\n".join(body)
        + "\n</tbody>\n</table>"
    )


def filter_box(target: str, placeholder: str, selects: str = "") -> str:
    """Controls that filter the rows under the element ``target`` (assets/javascripts/kb.js).

    Hidden until the script shows it: without JavaScript the page is the full table.
    """
    return (
        f'<div class="kb-filter" data-kb-filter="{html.escape(target, quote=True)}" hidden>'
        f'<input type="search" placeholder="{html.escape(placeholder, quote=True)}" '
        f'aria-label="{html.escape(placeholder, quote=True)}" autocomplete="off">'
        f"{selects}<span data-kb-count></span></div>"
    )


def select_box(attr: str, label: str, options: list[tuple[str, str]], mode: str = "") -> str:
    """A filter select: rows whose ``attr`` lists the chosen value stay (``bits``: a hex
    bitmask whose bit ``value`` is set)."""
    opts = [f'<option value="">{html.escape(label)}</option>']
    opts += [
        f'<option value="{html.escape(v, quote=True)}">{html.escape(t)}</option>'
        for v, t in options
    ]
    extra = f' data-kb-mode="{mode}"' if mode else ""
    return (
        f'<select data-kb-attr="{html.escape(attr, quote=True)}"{extra} '
        f'aria-label="{html.escape(label, quote=True)}">' + "".join(opts) + "</select>"
    )
