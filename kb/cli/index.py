"""``kb index``: show or rebuild the search index and the compiled record cache."""

from __future__ import annotations

import argparse
import time


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "index",
        help="show or rebuild the search index",
        description="Both the compiled record cache and the search index are rebuilt "
        "automatically when records change; --rebuild forces the index, --rebuild --all "
        "the record cache too (e.g. after a crash).",
    )
    p.add_argument("--rebuild", action="store_true", help="rebuild the search index now")
    p.add_argument(
        "--all",
        action="store_true",
        help="with --rebuild: also recompile the record cache (validates every record)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kb.cli._common import catalog_or_exit
    from kb.index.searchindex import index_dir, open_index

    start = time.perf_counter()
    catalog = catalog_or_exit(rebuild=args.rebuild and args.all)
    ix = open_index(catalog, rebuild=args.rebuild)
    took = time.perf_counter() - start
    print(f"records: {len(catalog.names())} ({catalog.root})")
    where = "memory (the cache is not usable)" if catalog.in_memory else index_dir(catalog)
    print(f"index:   {ix.doc_count()} documents in {where}")
    if args.rebuild:
        print(f"rebuilt in {took:.2f} s")
    return 0
