"""``kb rules [CODE]``: the checker's rule reference, from the rule units themselves."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from typing import Any


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "rules",
        help="list the kb check rules, or explain one",
        description="Without CODE, list every rule of kb check and kb scan. With a code (KB104), a prefix "
        "(KB4) or a rule name (unknown-argument), explain the matching rules: what they "
        "check, why, and a failing and a fixed candidate-list snippet.",
    )
    p.add_argument("code", nargs="?", help="rule code, code prefix or rule name")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=run)


def _explain(rule: Any) -> str:
    wrap = textwrap.TextWrapper(width=88)
    lines = [
        f"{rule.code}  {rule.name}  ({rule.severity})",
        "",
        wrap.fill(rule.summary),
        "",
        "Why:",
        textwrap.indent(wrap.fill(rule.why), "  "),
        "",
        "Fails:",
        textwrap.indent(rule.fail.rstrip("\n"), "  "),
        "",
        "Fixed:",
        textwrap.indent(rule.fix.rstrip("\n"), "  "),
    ]
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    from kb.api.rules import document, select, suggestions

    rules = select(args.code)
    if not rules:
        hits = suggestions(args.code)
        hint = f" (did you mean: {', '.join(hits)}?)" if hits else ""
        from kb.api.errors import NotFound

        raise NotFound(f"no rule {args.code!r}{hint}")
    if args.format == "json":
        print(json.dumps(document(args.code), ensure_ascii=False, indent=2))
    elif args.code:
        sys.stdout.write("\n".join(_explain(r) for r in rules))
    else:
        width = max(len(r.name) for r in rules)
        for r in rules:
            print(f"{r.code}  {r.severity:<7}  {r.name:<{width}}  {r.summary}")
    return 0
