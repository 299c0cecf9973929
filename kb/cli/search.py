"""``kb search QUERY``: names, keywords, task phrases and Chinese queries."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kb.catalog.compiled import Catalog
    from kb.index.search import Session


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "search",
        help="search operators, chains, trees and playbooks",
        description="Search the records by exact or partial name, misspelt name, English "
        "keywords and task phrases ('paged attention decode', 'rmsnorm rope cache') or "
        "Chinese ('权重预取'). Results are best first.",
    )
    p.add_argument("query", nargs="+", help="words to search for")
    p.add_argument("--limit", type=int, default=10, help="at most this many results (default 10)")
    p.add_argument("--kind", choices=("operator", "chain", "tree", "playbook"),
                   help="only records of this kind")  # fmt: skip
    p.add_argument("--torch-npu", metavar="VERSION",
                   help="only operators shipped in this torch_npu release, e.g. 2.5.1")  # fmt: skip
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=run)


def payload(catalog: Catalog, query: str, *, limit: int = 10, kind: str | None = None,
            torch_npu: str | None = None, session: Session | None = None) -> dict[str, Any]:
    """The ``--format json`` document; UsageError for an unusable query or release."""
    from kb.cli import UsageError
    from kb.index.search import search

    if limit < 1:
        raise UsageError("--limit must be at least 1")
    release = None
    if torch_npu:
        from kb.cli.list import torch_npu_release

        release = torch_npu_release(torch_npu)
    kinds = {kind} if kind else None
    try:
        if release is None:
            hits = search(catalog, query, limit=limit, kinds=kinds, session=session)
        else:  # rank everything, then keep what the release ships
            from kb.cli.list import shipped_in

            hits = search(catalog, query, limit=len(catalog.names()), kinds=kinds, session=session)
            hits = [h for h in hits if shipped_in(catalog.get(h.name) or {}, release.release)]
            hits = hits[:limit]
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    out: dict[str, Any] = {"query": query, "results": [h.as_json() for h in hits]}
    if release:
        out["torch_npu"] = {"asked": torch_npu, "release": release.release, "exact": release.exact}
    return out


def run(args: argparse.Namespace) -> int:
    from kb.cli._common import catalog_or_exit
    from kb.text.render import WIDTH

    query = " ".join(args.query)
    doc = payload(catalog_or_exit(), query, limit=args.limit, kind=args.kind,
                  torch_npu=args.torch_npu)  # fmt: skip
    if args.format == "json":
        print(json.dumps(doc, ensure_ascii=False, indent=2))
    else:
        if not doc["results"]:
            print(f"no results for {query!r}", file=sys.stderr)
        for h in doc["results"]:
            summary = h["summary"]
            room = WIDTH - 4
            if len(summary) > room:
                summary = summary[: room - 1] + "…"
            print(f"{h['name']}  ({h['kind']})")
            if summary:
                print(f"    {summary}")
    return 0 if doc["results"] else 1
