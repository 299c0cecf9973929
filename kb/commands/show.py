"""``kb show NAME``: one record, as text or JSON."""

from __future__ import annotations

import argparse
import json
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "show",
        help="show one operator, chain, tree or playbook",
        description="Print one record. NAME may be the bare name (npu_mla_prolog_v3), a call "
        "path (torch_npu.npu_mla_prolog_v3, torch.ops.npu.npu_mla_prolog_v3) or an alias; "
        "case does not matter. Unknown names exit 1 with suggestions.",
    )
    p.add_argument("name", help="record name or call path")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="text for people (default), json for tools")  # fmt: skip
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kb.commands._common import catalog_or_exit, did_you_mean

    catalog = catalog_or_exit()
    rec = catalog.get(args.name)
    if rec is None:
        shown = repr(args.name) if len(args.name) <= 80 else f"{args.name[:60]!r}… ({len(args.name)} characters)"
        print(f"kb show: no record named {shown}{did_you_mean(catalog, args.name)}",
              file=sys.stderr)  # fmt: skip
        return 1
    if args.format == "json":
        print(json.dumps(rec, ensure_ascii=False, indent=2))
    else:
        from kb.render import record_text

        sys.stdout.write(record_text(rec))
    return 0
