"""Link operator names in hand-written pages: `npu_mla_prolog_v3` → its page.

Guides mention operators by name in code spans; linking them at build time means a
guide never links to a page that does not exist and gains links as records arrive.
Only operators: chain and tree names are ordinary words (`attention`, `moe`) that a
page may use in a code span without meaning the record.
"""

from __future__ import annotations

import re

from kb.vocab import CALL_PREFIXES
from site_plugins import md
from site_plugins.common import SiteData, record_path

_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
#: A one-backtick code span that is not already a link label (no [ before, no ] after).
_SPAN = re.compile(r"(?<![\[`])`([A-Za-z_][A-Za-z0-9_.\-]*)`(?![`\]])")


def autolink(markdown: str, current: str, data: SiteData) -> str:
    out: list[str] = []
    fence: str | None = None
    for line in markdown.split("\n"):
        m = _FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
        elif (
            fence is not None and m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence)
        ):
            fence = None
        elif fence is None:
            line = _SPAN.sub(lambda s: _link(s, current, data), line)
        out.append(line)
    return "\n".join(out)


def _link(match: re.Match[str], current: str, data: SiteData) -> str:
    name = match.group(1)
    for prefix in CALL_PREFIXES:
        if name.startswith(prefix):
            name = name[len(prefix) :]
    target = record_path("operator", name) if name in data.operators else None
    if target is None or target == current:
        return match.group(0)
    return md.link(match.group(0), md.rel(target, current))
