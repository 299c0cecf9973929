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
    from kb.advice.advise import flags
    from kb.api.tree import tree
    from kb.cli._common import catalog_or_exit

    doc = tree(catalog_or_exit(), args.name)
    if args.format == "json":
        print(json.dumps(doc, ensure_ascii=False, indent=2))
        return 0
    if not args.name:
        from kb.text.render import wrap

        for t in doc["trees"]:
            print(f"{t['name']}  [decision tree]")
            print("\n".join(wrap(t["summary"], "    ")))
            print("\n".join(wrap("flags: " + " ".join(f"--{k}" for k in t["flags"]), "    ")))
        print(
            f"{len(doc['trees'])} tree(s); 'kb tree NAME' prints one, "
            "'kb advise NAME --FLAG VALUE …' walks it"
        )
        return 0
    from kb.text.render import record_text

    sys.stdout.write(record_text(doc))
    example = " ".join(f"--{k} …" for k in list(flags(doc))[:3])
    print(f"\nwalk it: kb advise {doc['name']} {example}")
    return 0
