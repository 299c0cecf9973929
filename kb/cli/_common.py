"""Helpers shared by verbs: opening the catalog with a clean message on failure."""

from __future__ import annotations

import sys

from kb.catalog.compiled import Catalog, StoreInvalid, open_catalog
from kb.text.escape import printable


def catalog_or_exit(*, rebuild: bool = False) -> Catalog:
    """The compiled catalog; invalid records end the command with exit 2 (unusable input),
    the same code from every verb, not a traceback."""
    try:
        return open_catalog(rebuild=rebuild)
    except StoreInvalid as exc:
        for problem in exc.problems[:20]:
            print(printable(str(problem)), file=sys.stderr)
        more = len(exc.problems) - 20
        if more > 0:
            print(f"... and {more} more", file=sys.stderr)
        print(
            "kb: the records do not validate; run 'kb validate' for the full list", file=sys.stderr
        )
        raise SystemExit(2) from None


#: Longer names cannot be a misspelling of a record name; fuzzy matching them only costs.
MAX_SUGGEST_CHARS = 200


def did_you_mean(catalog: Catalog, name: str) -> str:
    from kb.core.fuzzy import suggest

    if len(name) > MAX_SUGGEST_CHARS:
        return ""
    hits = suggest(name, catalog.names())
    return f" (did you mean: {', '.join(hits)}?)" if hits else ""
