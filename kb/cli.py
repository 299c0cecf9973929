"""The ``kb`` command line: one small module per verb under ``kb.commands``.

Each verb module defines ``add_parser(subparsers)`` and the function it sets as
``func``; this file only wires them.  Imports stay lazy so ``kb show`` pays only for
what it uses.
"""

from __future__ import annotations

import argparse
import importlib
import sys

VERBS = ("search", "show", "list", "validate", "index", "check", "scan", "rules", "tree",
         "advise", "prefetch_size", "site", "doctor", "mcp")  # fmt: skip


class UsageError(Exception):
    """Bad arguments or unreadable input: exit code 2."""


def build_parser(verbs: tuple[str, ...] = VERBS) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kb",
        description="Knowledge base of torch_npu fused operators: search, show, check.",
        epilog="Run 'kb VERB --help' for the options of one verb.",
    )
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    for verb in verbs:
        try:
            module = importlib.import_module(f"kb.commands.{verb}")
        except ModuleNotFoundError as exc:
            if exc.name == f"kb.commands.{verb}":
                continue  # verb not built in this version
            raise
        module.add_parser(sub)
    return parser


def _only_verb(argv: list[str]) -> tuple[str, ...]:
    """Import just the verb asked for (fast path); all verbs for help or unknown."""
    for arg in argv:
        if arg.startswith("-"):
            continue
        name = arg.replace("-", "_")
        return (name,) if name in VERBS else VERBS
    return VERBS


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(_only_verb(argv))
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except UsageError as exc:
        print(f"kb {args.verb}: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130
