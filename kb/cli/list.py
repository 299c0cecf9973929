"""``kb list``: records filtered by kind, category, product or status."""

from __future__ import annotations

import argparse
import json

from kb.api.list import KINDS


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "list",
        help="list records, optionally filtered",
        description="List records with their one-line summary. Filters combine (AND). "
        "Products and other vocabularies accept aliases such as A3, 910b, bf16.",
    )
    p.add_argument("--kind", choices=KINDS)
    p.add_argument("--category", help="operator category, e.g. attention, moe, mla, norm")
    p.add_argument("--product", help="supported on this product, e.g. atlas-a3 or A2")
    p.add_argument("--status", help="stable, beta, deprecated or undocumented")
    p.add_argument("--fuses", help="operators that fuse this step, e.g. rope or rms_norm")
    p.add_argument(
        "--torch-npu",
        metavar="VERSION",
        help="only operators shipped in this torch_npu release, e.g. 2.5.1 "
        "(matched to the nearest harvested release of its line)",
    )
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kb.api.list import list_records
    from kb.cli._common import catalog_or_exit

    doc = list_records(
        catalog_or_exit(),
        kind=args.kind,
        category=args.category,
        product=args.product,
        status=args.status,
        fuses=args.fuses,
        torch_npu=args.torch_npu,
    )
    if args.format == "json":
        print(json.dumps(doc, ensure_ascii=False, indent=2))
        return 0
    for r in doc["results"]:
        tag = r.get("status") or r["kind"]
        summary = r["summary"]
        print(f"{r['name']}  [{tag}]")
        print(f"    {summary[:75] + '…' if len(summary) > 76 else summary}")
    print(f"{len(doc['results'])} record(s)")
    return 0
