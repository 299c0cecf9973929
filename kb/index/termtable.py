"""Every term's BM25F score per document, computed when the index is built and read
back with sqlite, so a cold free-text search never imports whoosh.

:meth:`kb.index.fulltext.Session.token_scores` asks whoosh, per query word, for each
text field's postings and scores them; those scores depend on nothing but the index,
so the build asks the same once for every term (:func:`write`) and a query reads the
rows of its own words (:class:`TermTable`).  The numbers are whoosh's, field by field in
:data:`kb.index.fields.TEXT_FIELDS` order, so the two paths sum to the same floats.
"""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path
from typing import Any

from kb.index.fields import TEXT_FIELDS

FILE = "terms.sqlite"


def _scores(ix: Any) -> dict[str, dict[int, float]]:
    """Per term, per document: what ``Session.token_scores`` returns for it."""
    from whoosh.scoring import BM25F, bm25

    weighting = BM25F()
    out: dict[str, dict[int, float]] = {}
    with ix.searcher(weighting=weighting) as searcher:
        reader = searcher.reader()
        docs = searcher.doc_count_all()
        for field in TEXT_FIELDS:
            avgfl = searcher.avg_field_length(field) or 1
            lengths: dict[int, int] = {}
            for raw in reader.lexicon(field):
                term = raw.decode("utf-8") if isinstance(raw, bytes) else raw
                idf = math.log(docs / (reader.doc_frequency(field, term) + 1)) + 1  # whoosh's idf
                row = out.setdefault(term, {})
                for docnum, weight in reader.postings(field, term).items_as("weight"):
                    length = lengths.get(docnum)
                    if length is None:
                        length = lengths[docnum] = searcher.doc_field_length(docnum, field, 1)
                    row[docnum] = row.get(docnum, 0.0) + bm25(idf, weight, length, avgfl,
                                                              weighting.B, weighting.K1)  # fmt: skip
    return out


def write(ix: Any, directory: Path) -> None:
    """The term table of a freshly built index, beside its segments."""
    rows = [(term, json.dumps(sorted(docs.items()), separators=(",", ":")))
            for term, docs in _scores(ix).items()]  # fmt: skip
    con = sqlite3.connect(directory / FILE)
    try:
        con.execute("CREATE TABLE terms (term TEXT PRIMARY KEY, docs TEXT NOT NULL) WITHOUT ROWID")
        con.executemany("INSERT INTO terms VALUES (?, ?)", rows)
        con.commit()
    finally:
        con.close()


class TermTable:
    """The query side of a verified index on disk: stored fields and term scores."""

    def __init__(self, directory: Path, stored: dict[int, dict[str, Any]]) -> None:
        # immutable: sqlite writes nothing beside the file (the index is checksummed)
        uri = (directory / FILE).resolve().as_uri() + "?mode=ro&immutable=1"
        self._con = sqlite3.connect(uri, uri=True, check_same_thread=False)
        self.stored = stored

    def token_scores(self, token: str) -> dict[int, float]:
        row = self._con.execute("SELECT docs FROM terms WHERE term = ?", (token,)).fetchone()
        return {int(d): float(s) for d, s in json.loads(row[0])} if row else {}

    def close(self) -> None:
        self._con.close()
