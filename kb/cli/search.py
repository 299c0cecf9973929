"""``kb search QUERY``: names, keywords, task phrases and Chinese queries."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

from kb.cli.fast import argparse_kwargs

if TYPE_CHECKING:
    import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]

    p = sub.add_parser(
        "search",
        help="search operators, chains, trees and playbooks",
        description="Search the records by exact or partial name, misspelt name, English "
        "keywords and task phrases ('paged attention decode', 'rmsnorm rope cache') or "
        "Chinese ('权重预取'). Results are best first.",
    )
    p.add_argument("query", nargs="+", help="words to search for")
    p.add_argument(
        "--limit",
        **argparse_kwargs("search", "--limit"),
        help="at most this many results (default %(default)s)",
    )
    p.add_argument(
        "--kind", **argparse_kwargs("search", "--kind"), help="only records of this kind"
    )
    p.add_argument(
        "--torch-npu",
        **argparse_kwargs("search", "--torch-npu"),
        metavar="VERSION",
        help="only operators shipped in this torch_npu release, e.g. 2.5.1",
    )
    p.add_argument("--format", **argparse_kwargs("search", "--format"))
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kb.api.search import search
    from kb.cli._common import catalog_or_exit
    from kb.text.width import terminal_width

    query = " ".join(args.query)
    doc = search(
        catalog_or_exit(), query, limit=args.limit, kind=args.kind, torch_npu=args.torch_npu
    )
    if args.format == "json":
        print(json.dumps(doc, ensure_ascii=False, indent=2))
    else:
        if not doc["results"]:
            print(f"no results for {query!r}", file=sys.stderr)
        for h in doc["results"]:
            summary = h["summary"]
            room = terminal_width() - 4
            if len(summary) > room:
                summary = summary[: room - 1] + "…"
            print(f"{h['name']}  ({h['kind']})")
            if summary:
                print(f"    {summary}")
    return 0 if doc["results"] else 1
