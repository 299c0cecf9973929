"""What every list of operators shares: the groups in use and the linked name cell.

The indexes and the matrices both list operators by category and name them the same
way; both import from here, so neither imports the other.
"""

from __future__ import annotations

from kb.vocab import CANONICAL
from site_plugins import md
from site_plugins.common import Record, SiteData, html_link, record_path, wrap_name


def categories(data: SiteData) -> list[str]:
    """Categories that have operators, in vocabulary order."""
    used = {op["category"] for op in data.operators.values()}
    return [c for c in CANONICAL["category"] if c in used] + sorted(
        used - set(CANONICAL["category"])
    )


def statuses(data: SiteData) -> list[str]:
    used = {op["status"] for op in data.operators.values()}
    return [s for s in CANONICAL["status"] if s in used]


def op_cell(op: Record, here: str, data: SiteData) -> str:
    """The operator's name as a link that wraps at underscores (HTML)."""
    target = md.url_between(record_path("operator", op["name"]), here, data.directory_urls)
    return html_link(f"<code>{wrap_name(op['name'])}</code>", target)
