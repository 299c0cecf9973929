"""``kb search`` as a function: the ranked hits as the ``--format json`` document."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kb.catalog.compiled import Catalog
    from kb.index.search import Session
    from kb.index.termtable import TermTable

#: More hits than any catalog holds; the bound keeps ``--limit`` a small integer.
MAX_LIMIT = 100_000


def search(
    catalog: Catalog,
    query: str,
    *,
    limit: int = 10,
    kind: str | None = None,
    torch_npu: str | None = None,
    session: Session | TermTable | None = None,
) -> dict[str, Any]:
    """``{"query", "results", ["torch_npu"]}``, best first; UsageError for an unusable
    query or release."""
    from kb.api.errors import UsageError
    from kb.index.search import search as rank

    if limit < 1:
        raise UsageError("--limit must be at least 1")
    if limit > MAX_LIMIT:
        raise UsageError(f"--limit must be at most {MAX_LIMIT}")
    release = None
    if torch_npu:
        from kb.api.release import torch_npu_release

        release = torch_npu_release(torch_npu)
    kinds = {kind} if kind else None
    try:
        if release is None:
            hits = rank(catalog, query, limit=limit, kinds=kinds, session=session)
        else:  # rank everything, then keep what the release ships
            from kb.api.release import shipped_in

            hits = rank(catalog, query, limit=len(catalog.names()), kinds=kinds, session=session)
            hits = [h for h in hits if shipped_in(catalog.get(h.name) or {}, release.release)]
            hits = hits[:limit]
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    out: dict[str, Any] = {"query": query, "results": [h.as_json() for h in hits]}
    if release and torch_npu:
        from kb.api.release import release_doc

        out["torch_npu"] = release_doc(torch_npu, release)
    return out
