"""``kb tree [NAME]``: print a decision tree, or list the trees with their flags."""

from __future__ import annotations

import argparse
import json
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "tree",
        help="print a decision tree (or list them)",
        description="Print one decision tree as an indented outline: each question with the "
        "flag 'kb advise' uses for it, each answer with the chain or operators it leads "
        "to. Without NAME, list the trees and their flags.",
    )
    p.add_argument("name", nargs="?", help="tree name, e.g. attention, moe, kv-cache")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kb.advise import flags
    from kb.cli import UsageError
    from kb.commands._common import catalog_or_exit
    from kb.commands.advise import tree_hint

    catalog = catalog_or_exit()
    if not args.name:
        trees = list(catalog.records("tree"))
        if args.format == "json":
            out = [
                {"name": t["name"], "summary": t["summary"]["en"], "flags": flags(t)} for t in trees
            ]
            print(json.dumps({"trees": out}, ensure_ascii=False, indent=2))
            return 0
        from kb.render import wrap

        for t in trees:
            print(f"{t['name']}  [decision tree]")
            print("\n".join(wrap(t["summary"]["en"], "    ")))
            print("\n".join(wrap("flags: " + " ".join(f"--{k}" for k in flags(t)), "    ")))
        print(
            f"{len(trees)} tree(s); 'kb tree NAME' prints one, 'kb advise NAME --FLAG VALUE …' walks it"
        )
        return 0
    rec = catalog.get(args.name)
    tree_names = catalog.names("tree")
    names = ", ".join(tree_names)
    if rec is None:
        raise UsageError(f"no decision tree named {args.name!r}{tree_hint(args.name, tree_names)}; "
                         f"trees: {names}")  # fmt: skip
    if rec["kind"] != "tree":
        raise UsageError(f"{rec['name']!r} is a {rec['kind']}, not a decision tree (try 'kb show "
                         f"{rec['name']}'); trees: {names}")  # fmt: skip
    if args.format == "json":
        print(json.dumps(rec, ensure_ascii=False, indent=2))
        return 0
    from kb.render import record_text

    sys.stdout.write(record_text(rec))
    example = " ".join(f"--{k} …" for k in list(flags(rec))[:3])
    print(f"\nwalk it: kb advise {rec['name']} {example}")
    return 0
