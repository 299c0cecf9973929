"""``kb list``: records filtered by kind, category, product or status."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kb.catalog.compiled import Catalog
    from kb.catalog.releases import Match

KINDS = ("operator", "chain", "tree", "playbook")


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
    p.add_argument("--torch-npu", metavar="VERSION",
                   help="only operators shipped in this torch_npu release, e.g. 2.5.1 "
                   "(matched to the nearest harvested release of its line)")  # fmt: skip
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=run)


def payload(catalog: Catalog, *, kind: str | None = None, category: str | None = None,
            product: str | None = None, status: str | None = None, fuses: str | None = None,
            torch_npu: str | None = None) -> dict[str, Any]:  # fmt: skip
    """The ``--format json`` document; UsageError for a value outside its vocabulary."""
    from kb.cli import UsageError
    from kb.vocab import CANONICAL, normalize

    def canon(vocab: str, value: str | None) -> str | None:
        if value is None:
            return None
        got = normalize(vocab, value)
        if got is None:
            raise UsageError(f"unknown {vocab} {value!r}; one of: {', '.join(CANONICAL[vocab])}")
        return got

    if kind is not None and kind not in KINDS:
        raise UsageError(f"unknown kind {kind!r}; one of: {', '.join(KINDS)}")
    want_product = canon("product", product)
    want_status = canon("status", status)
    want_category = canon("category", category)
    step = canon("step", fuses.replace(" ", "_") if fuses else None)
    release = torch_npu_release(torch_npu) if torch_npu else None
    rows = []
    for rec in catalog.records(kind):
        if release and not shipped_in(rec, release.release):
            continue
        if want_category and rec.get("category") != want_category:
            continue
        if want_product and want_product not in rec.get("products", []):
            continue
        if want_status and rec.get("status") != want_status:
            continue
        if step and step not in rec.get("fuses", []):
            continue
        rows.append({"kind": rec["kind"], "name": rec["name"],
                     "category": rec.get("category", rec.get("module")),
                     "status": rec.get("status"), "summary": rec["summary"]["en"]})  # fmt: skip
    doc: dict[str, Any] = {"results": rows}
    if release:
        doc["torch_npu"] = {"asked": torch_npu, "release": release.release, "exact": release.exact}
    return doc


def run(args: argparse.Namespace) -> int:
    from kb.cli._common import catalog_or_exit

    doc = payload(catalog_or_exit(), kind=args.kind, category=args.category,
                  product=args.product, status=args.status, fuses=args.fuses,
                  torch_npu=args.torch_npu)  # fmt: skip
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


def torch_npu_release(text: str) -> Match:
    """The harvested release for ``--torch-npu``; an unknown line is a usage error."""
    import sys

    from kb.catalog.releases import resolve
    from kb.cli import UsageError

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
    from kb.catalog.releases import record_has

    return rec.get("kind") == "operator" and bool(record_has(rec, release))
