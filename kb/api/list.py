"""``kb list`` as a function: records filtered by kind, category, product, status, fused
step and torch_npu release."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kb.vocab.taxonomy import KINDS

if TYPE_CHECKING:
    from kb.catalog.compiled import Catalog

__all__ = ["KINDS", "list_records"]


def list_records(
    catalog: Catalog,
    *,
    kind: str | None = None,
    category: str | None = None,
    product: str | None = None,
    status: str | None = None,
    fuses: str | None = None,
    torch_npu: str | None = None,
) -> dict[str, Any]:
    """``{"results", ["torch_npu"]}``; UsageError for a value outside its vocabulary."""
    from kb.api.errors import UsageError
    from kb.api.release import release_doc, shipped_in, torch_npu_release
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
        rows.append(
            {
                "kind": rec["kind"],
                "name": rec["name"],
                "category": rec.get("category", rec.get("module")),
                "status": rec.get("status"),
                "summary": rec["summary"]["en"],
            }
        )
    doc: dict[str, Any] = {"results": rows}
    if release and torch_npu:
        doc["torch_npu"] = release_doc(torch_npu, release)
    return doc
