"""``kb advise TREE --flag value …``: walk a decision tree and print the chain to use.

The flags are the tree's node keys, so they differ per tree; ``kb advise TREE --help``
lists them.  Missing answers are asked for when stdin is a terminal, otherwise (and with
``--no-input``) they are a usage error that names the flag and its values.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from typing import Any


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "advise",
        help="walk a decision tree from flags and print the chain, operators, prerequisites",
        description="Walk a decision tree (the trees are listed below) with "
        "one --FLAG VALUE per question, e.g. 'kb advise attention --arch mla --indexer yes "
        "--phase decode'. Prints the reference chain(s) with their stages, each operator's "
        "products, key dtypes/formats and first constraints, and the prerequisites. Every tree "
        "also takes --product, --release, --parallel, --mode (and --phase, --quant where it "
        "does not ask them): the chains are chosen by kb.advice.select, which holds each "
        "chain to its operators' records and ranks the fitting ones by practice; chains the "
        "records refuse are listed with the reason. Run "
        "'kb advise TREE --help' for the flags of one tree, 'kb tree TREE' to see it whole.",
        usage="kb advise TREE [--format text|json] [--no-input] [--strict]\n"
        "                 [--FLAG VALUE ...]",
        epilog="exit status: 0 advice (perhaps with assumed common cases), 1 only completions "
        "(an open question changes the operators), 2 bad input. --format json always prints "
        "the document on stdout.",
        add_help=False,
    )
    p.add_argument(
        "-h",
        "--help",
        action=_HelpWithTrees,
        nargs=0,
        help="show this help message (with the trees) and exit",
    )
    p.add_argument("tree", nargs="?", help="decision tree name")
    p.add_argument("answers", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument(
        "--no-input",
        action="store_true",
        help="never prompt: a common-case answer is assumed (and reported); an open "
        "question that changes the operators lists every completion (exit 1)",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="assume nothing: a missing answer is an error (exit 2)",
    )
    p.set_defaults(func=run)


class _HelpWithTrees(argparse.Action):
    """``kb advise --help``: the help, then every tree the records hold (read only when
    help is asked for, so a walk does not pay for it)."""

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        parser.print_help()
        try:
            from kb.catalog.compiled import open_catalog

            names = open_catalog().names("tree")
        except Exception:  # a broken store: the help itself still prints
            names = []
        if names:
            from kb.text.render import wrap

            print("\n" + "\n".join(wrap("trees: " + ", ".join(names), "")))
        parser.exit(0)


def parse_tokens(tokens: list[str]) -> tuple[dict[str, str], dict[str, Any]]:
    """Split ``--key value`` / ``--key=value`` pairs from the options advise itself takes."""
    from kb.api.errors import UsageError

    answers: dict[str, str] = {}
    options: dict[str, Any] = {}
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok in ("-h", "--help"):
            options["help"] = True
            i += 1
            continue
        if tok in ("--no-input", "--strict"):
            options[tok[2:].replace("-", "_")] = True
            i += 1
            continue
        if not tok.startswith("--") or len(tok) == 2:
            raise UsageError(f"unexpected {tok!r}; answers are written --FLAG VALUE")
        key, eq, value = tok[2:].partition("=")
        if not eq:
            if i + 1 >= len(tokens) or tokens[i + 1].startswith("--"):
                raise UsageError(f"--{key} needs a value")
            value = tokens[i + 1]
            i += 1
        i += 1
        if key == "format":
            if value not in ("text", "json"):
                raise UsageError(f"--format {value!r}: use text or json")
            options["format"] = value
        elif key in answers:
            raise UsageError(f"--{key} is given twice")
        else:
            answers[key] = value
    return answers, options


def _prompt(node: dict[str, Any], steps: list[Any]) -> str:
    """Ask one question on stderr (stdout stays clean for --format json)."""
    from kb.api.errors import UsageError

    err = sys.stderr
    err.write(f"\n{node['question']['en']}  (--{node['key']})\n")
    for i, opt in enumerate(node["options"], 1):
        err.write(f"  {i}) {opt['value']:<14} {opt['label']}\n")
    values = [o["value"] for o in node["options"]]
    while True:
        err.write("> ")
        err.flush()
        line = sys.stdin.readline()
        if not line:
            raise UsageError(f"no answer for --{node['key']} (one of: {', '.join(values)})")
        text = line.strip()
        if text.isdecimal() and len(text) <= 6 and 1 <= int(text) <= len(values):
            return values[int(text) - 1]
        from kb.advice.advise import match

        if text and match(node, text) is not None:
            return text
        err.write(f"  answer with a number or one of: {', '.join(values)}\n")


def _tree_help(tree: dict[str, Any]) -> str:
    from kb.advice.advise import flags

    lines = [
        f"kb advise {tree['name']}: {tree['summary']['en']}",
        "",
        "flags (asked as the path needs them):",
    ]
    for key, values in flags(tree).items():
        lines.append(f"  --{key} {{{','.join(values)}}}")
    lines.append("")
    lines.append(f"see the questions with: kb tree {tree['name']}")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    from kb.api.errors import UsageError

    fmt = args.format
    try:
        return _run(args)
    except UsageError as exc:
        if (
            "--format=json" in (args.answers or [])
            or fmt == "json"
            or _json_asked(args.answers or [])
        ):
            print(
                json.dumps(
                    {"tree": args.tree, "outcome": "error", "error": str(exc)},
                    ensure_ascii=False,
                    indent=2,
                )
            )
        raise


def _json_asked(tokens: list[str]) -> bool:
    return any(t == "--format" and n == "json" for t, n in itertools.pairwise(tokens))


def _run(args: argparse.Namespace) -> int:
    from kb.api.advise import advise, tree_record
    from kb.api.errors import FOUND, OK, UsageError
    from kb.cli._common import catalog_or_exit
    from kb.text.advice import render

    answers, options = parse_tokens(args.answers or [])
    fmt = options.get("format", args.format)
    catalog = catalog_or_exit()
    trees = catalog.names("tree")
    if not args.tree:
        if options.get("help"):
            sys.stdout.write(
                "usage: kb advise TREE [--format text|json] [--no-input] [--FLAG VALUE ...]\n"
                f"trees: {', '.join(trees)}\n"
            )
            return 0
        raise UsageError(f"name a decision tree: {', '.join(trees) or '(none)'}")
    tree = tree_record(catalog, args.tree)
    if options.get("help"):
        sys.stdout.write(_tree_help(tree))
        return 0
    strict = bool(args.strict or options.get("strict"))
    interactive = not (args.no_input or options.get("no_input")) and _isatty()
    result = advise(catalog, tree, answers, ask=_prompt if interactive else None, strict=strict)
    if fmt == "json":
        print(json.dumps(result, ensure_ascii=False, indent=2))
    else:
        sys.stdout.write(render(result))
    return FOUND if result["outcome"] == "completions" else OK


def _isatty() -> bool:
    try:
        return bool(sys.stdin and sys.stdin.isatty())
    except (AttributeError, ValueError):
        return False
