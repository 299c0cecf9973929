"""Search over the records: name hits first, then full-text matches.

Ranking, best first:
1. the exact name or call path (``torch_npu.npu_rms_norm``);
2. names that start with the query (``npu_mla_prolog`` → v1, v2, v3, shortest first);
3. close spellings of a name when the query looks like an identifier
   (``npu_mla_prolog_v4`` → ``npu_mla_prolog_v3``);
4. BM25F text matches, rescored (:mod:`kb.index.fulltext`).

An identifier query answered by 1 or 3 (:func:`kb.index.names.answered_by_name`) stops
there: the compiled store answers it.  Free text reads the scores of its words from the
index's term table (:mod:`kb.index.termtable`); whoosh's engine is imported only for
an index that lives in memory, or by a caller that passes its own index or session.  Where the index lives and how it is built, opened and healed is
:mod:`kb.index.searchindex`.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from kb.catalog.compiled import Catalog
from kb.index.names import MAX_QUERY_CHARS, Hit, answered_by_name, name_hits
from kb.index.textanalysis import tokens

if TYPE_CHECKING:
    from kb.index.fulltext import Session
    from kb.index.termtable import TermTable

__all__ = ["MAX_QUERY_CHARS", "Hit", "search"]  # and, loaded on first use: Session, open_index


def __getattr__(name: str) -> Any:
    """``Session`` and ``open_index`` load whoosh: imported when first asked for."""
    if name == "Session":
        from kb.index.fulltext import Session

        return Session
    if name == "open_index":
        from kb.index.searchindex import open_index

        return open_index
    raise AttributeError(name)


def search(
    catalog: Catalog,
    text: str,
    *,
    limit: int = 10,
    kinds: set[str] | None = None,
    ix: Any = None,
    session: Session | TermTable | None = None,
) -> list[Hit]:
    """Best-first hits for a query; raises ValueError for an empty or oversized query."""
    text = text.strip()
    if not text:
        raise ValueError("the query is empty")
    if len(text) > MAX_QUERY_CHARS:
        raise ValueError(f"the query is {len(text)} characters; keep it under {MAX_QUERY_CHARS}")
    hits = name_hits(catalog, text, kinds)
    if answered_by_name(text, hits):
        return hits[:limit]
    from kb.index.searchindex import open_index, open_terms

    # the index on disk, opened before the query is tokenized: its build's stems answer
    # the query's words, so a cold search imports no stemmer for them
    first = open_terms(catalog) if session is None and ix is None else None
    if first is not None:
        with contextlib.suppress(Exception):  # a damaged table: the search below rebuilds it
            first.prime_stems(text)
    toks = list(dict.fromkeys(tokens(text, query=True)))
    if not toks:
        if first is not None:
            first.close()
        return hits[:limit]
    from kb.index.fulltext import own_session_hits, text_hits

    seen = {h.name for h in hits}
    if session is not None:  # the caller's (kb mcp): it owns healing and closing
        return (hits + text_hits(session, text, toks, kinds, seen))[:limit]

    if ix is None:  # a verified index on disk answers without whoosh; else build it
        for rebuild in (False, True):
            table, first = (None if rebuild else first or open_terms(catalog)), None
            if table is None:
                ix = open_index(catalog, rebuild=rebuild)
                table = open_terms(catalog)
            if table is None:
                break  # the index lives in memory (the cache is not usable): ask whoosh
            try:
                return (hits + text_hits(table, text, toks, kinds, seen))[:limit]
            except Exception:  # a table that breaks mid-query (sqlite, JSON): rebuild, ask again
                ix = None
            finally:
                table.close()
    try:
        hits += own_session_hits(ix or open_index(catalog), text, toks, kinds, seen)
    except Exception:  # a damaged index (zlib.error, whoosh's own): rebuild it, ask again
        hits += own_session_hits(open_index(catalog, rebuild=True), text, toks, kinds, seen)
    return hits[:limit]
