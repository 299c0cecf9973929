"""``llms.txt`` and Markdown copies of pages, so coding agents read the site without HTML.

``llms.txt`` (the llmstxt.org convention) lists every record with its one-line summary
and a link to its page; chains, decision trees and playbooks also ship their page's
Markdown source beside the HTML (``…/index.md``), which an agent reads as it is.
Operator pages keep HTML only: their Markdown would add about 3 MB and push the site
past its size budget (kb site build checks it); ``kb show NAME`` and ``kb mcp`` serve
the operator records to agents instead.
"""

from __future__ import annotations

from site_plugins import md
from site_plugins.common import Record, SiteData, record_path

#: Kinds whose page Markdown ships beside the HTML.
MARKDOWN_KINDS = ("chain", "tree", "playbook")


def _summary(rec: Record) -> str:
    return " ".join(str((rec.get("summary") or {}).get("en", "")).split())


def llms_txt(data: SiteData, site_name: str, description: str) -> str:
    """The index: sections per kind, one line per record."""
    lines = [f"# {site_name}", "", f"> {description}", "",
             "Records are also served by the `kb` command line (`kb show NAME`, "
             "`kb search QUERY`) and by `kb mcp`.", ""]  # fmt: skip
    sections = (("Operators", "operator", data.operators), ("Reference chains", "chain", data.chains),
                ("Decision trees", "tree", data.trees), ("Playbooks", "playbook", data.playbooks))  # fmt: skip
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
    """Site path → Markdown of each chain, tree and playbook page (directory URLs only)."""
    if not data.directory_urls:
        return {}
    out = {}
    for kind, bucket in (("chain", data.chains), ("tree", data.trees), ("playbook", data.playbooks)):
        for name in bucket:
            src = record_path(kind, name)
            if src in pages:
                out[md.page_url(src, True) + "index.md"] = pages[src]
    return out
