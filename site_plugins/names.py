"""The record names the search box's "did you mean" compares a query with.

Material's search is lunr: exact terms and prefixes, so ``npu_mla_prolog_v4`` (a typo
of ``npu_mla_prolog_v3``) finds nothing useful.  The site ships the names of every
record, current ones first, and ``assets/javascripts/kb.js`` offers the closest names
above the results.  Aliases and call paths point at their record.
"""

from __future__ import annotations

import json

from site_plugins import md
from site_plugins.common import KIND_DIRS, Record, SiteData

NAMES_PATH = "assets/kb-names.json"


def _current(op: Record) -> bool:
    return op.get("status") != "deprecated" and not op.get("superseded_by")


def names_json(data: SiteData) -> str:
    """Every name with its page and ``current``, in preference order (ties go to the
    earlier), in the compact form of :func:`_compact`.

    ``current`` is 0 for deprecated or superseded operators: a typo close to both
    ``npu_mla_prolog_v3`` and its superseded ``_v2`` suggests only the current one.
    """
    entries: list[list[str | int]] = []
    seen: set[str] = set()

    def add(name: str, target: str, current: bool) -> None:
        if name and name not in seen:
            seen.add(name)
            path = data.path(target)
            if path:
                entries.append([name, md.page_url(path, data.directory_urls), int(current)])

    ops = sorted(data.operators.values(), key=lambda o: (not _current(o), o["name"]))
    for op in ops:
        add(op["name"], op["name"], _current(op))
    for bucket in (data.chains, data.trees, data.playbooks):
        for name in sorted(bucket):
            add(name, name, True)
    for op in ops:
        calls = [c for c in op.get("calls", []) if c.rsplit(".", 1)[-1] != op["name"]]
        for other in op.get("aliases", []) + calls:
            add(other, op["name"], _current(op))
    return json.dumps(_compact(entries, data), ensure_ascii=False, separators=(",", ":"))


def _compact(entries: list[list[str | int]], data: SiteData) -> object:
    """``{"dirs": [...], "names": [[name, current, dir], …]}`` where a name's URL is
    ``dirs[dir] + name + "/"`` (its own record's page), else ``[name, current, url]``:
    half the bytes a first search downloads for "did you mean" (kb.js reads both)."""
    if not data.directory_urls:
        return entries
    dirs = [f"{folder}/" for folder in KIND_DIRS.values()]
    out: list[list[str | int]] = []
    for name, url, current in entries:
        usual = [i for i, d in enumerate(dirs) if url == f"{d}{name}/"]
        out.append([name, current, usual[0] if usual else url])
    return {"dirs": dirs, "names": out}
