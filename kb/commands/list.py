"""``kb list``: records filtered by kind, category, product or status."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kb.releases import Match


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "list",
        help="list records, optionally filtered",
        description="List records with their one-line summary. Filters combine (AND). "
        "Products and other vocabularies accept aliases such as A3, 910b, bf16.",
    )
    p.add_argument("--kind", choices=("operator", "chain", "tree", "playbook"))
    p.add_argument("--category", help="operator category, e.g. attention, moe, mla, norm")
    p.add_argument("--product", help="supported on this product, e.g. atlas-a3 or A2")
    p.add_argument("--status", help="stable, beta, deprecated or undocumented")
    p.add_argument("--fuses", help="operators that fuse this step, e.g. rope or rms_norm")
    p.add_argument("--torch-npu", metavar="VERSION",
                   help="only operators shipped in this torch_npu release, e.g. 2.5.1 "
                   "(matched to the nearest harvested release of its line)")  # fmt: skip
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kb.cli import UsageError
    from kb.commands._common import catalog_or_exit
    from kb.vocab import CANONICAL, normalize

    def canon(vocab: str, value: str | None) -> str | None:
        if value is None:
            return None
        got = normalize(vocab, value)
        if got is None:
            raise UsageError(f"unknown {vocab} {value!r}; one of: {', '.join(CANONICAL[vocab])}")
        return got

    product = canon("product", args.product)
    status = canon("status", args.status)
    category = canon("category", args.category)
    step = canon("step", args.fuses.replace(" ", "_") if args.fuses else None)
    release = torch_npu_release(args.torch_npu) if args.torch_npu else None
    catalog = catalog_or_exit()
    rows = []
    for rec in catalog.records(args.kind):
        if release and not shipped_in(rec, release.release):
            continue
        if category and rec.get("category") != category:
            continue
        if product and product not in rec.get("products", []):
            continue
        if status and rec.get("status") != status:
            continue
        if step and step not in rec.get("fuses", []):
            continue
        rows.append(rec)
    if args.format == "json":
        out = [{"kind": r["kind"], "name": r["name"], "category": r.get("category", r.get("module")),
                "status": r.get("status"), "summary": r["summary"]["en"]} for r in rows]  # fmt: skip
        doc: dict[str, object] = {"results": out}
        if release:
            doc["torch_npu"] = {"asked": args.torch_npu, "release": release.release,
                                "exact": release.exact}  # fmt: skip
        print(json.dumps(doc, ensure_ascii=False, indent=2))
        return 0
    for r in rows:
        tag = r.get("status") or r["kind"]
        head = f"{r['name']}  [{tag}]"
        summary = r["summary"]["en"]
        print(head)
        print(f"    {summary[:75] + '…' if len(summary) > 76 else summary}")
    print(f"{len(rows)} record(s)")
    return 0


def torch_npu_release(text: str) -> Match:
    """The harvested release for ``--torch-npu``; an unknown line is a usage error."""
    import sys

    from kb.cli import UsageError
    from kb.releases import resolve

    if len(text) > 40:
        raise UsageError(f"--torch-npu {text[:20]}… ({len(text)} characters) is not a torch_npu "
                         "release number such as 2.7.1")  # fmt: skip
    try:
        got = resolve(text)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if not got.exact:
        print(f"kb: torch_npu {text} read as {got.release} (nearest harvested release)",
              file=sys.stderr)  # fmt: skip
    return got


def shipped_in(rec: dict[str, Any], release: str) -> bool:
    """Operators whose version facts place them in ``release``; other kinds drop out."""
    from kb.releases import record_has

    return rec.get("kind") == "operator" and bool(record_has(rec, release))
