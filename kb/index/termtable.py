"""Every term's BM25F score per document, computed when the index is built and read
back with sqlite, so a cold free-text search never imports whoosh.

:meth:`kb.index.fulltext.Session.token_scores` asks whoosh, per query word, for each
text field's postings and scores them; those scores depend on nothing but the index,
so the build scores every term once (:class:`Recorder`, :func:`write`) and a query
reads the rows of its own words (:class:`TermTable`).  The build analyses each field
itself (:meth:`Recorder.add`: the tokens whoosh's analyzer yields, counted as whoosh's
frequency format counts them) and writes no whoosh postings at all; an index that lives
in memory records the items whoosh's writer indexes instead (:meth:`Recorder.attach`),
and a test holds the two to the same table, term for term and float for float.  The
formula, lengths and order of summing are whoosh's, field by field in
:data:`kb.index.fields.TEXT_FIELDS` order, so both paths give the same floats.

A term's row holds its documents and their scores as two packed arrays (32-bit
document numbers, 64-bit floats, little-endian): the table is a quarter of the size
the same rows took as JSON text, so the checksum a cold query verifies it with reads a
quarter of the bytes, and a row decodes without a parser.
"""

from __future__ import annotations

import math
import sqlite3
import sys
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kb.index.fields import TEXT_BOOSTS, TEXT_FIELDS
from kb.index.textanalysis import known_stems, seen_stems, stem_candidates, tokens

FILE = "terms.sqlite"


class Recorder:
    """Each text field's ``(term, freq, weight)`` items per document, in document order:
    what whoosh's writer would post for them.

    :meth:`add` analyses a document's fields without whoosh; :meth:`attach` instead
    wraps a whoosh writer's own field objects, so the items are the very ones whoosh
    posts.  Scores then follow whoosh's BM25F exactly: its idf, its one-byte document
    lengths, its average over the field's true total.
    """

    def __init__(self) -> None:
        self.docs: list[dict[str, list[tuple[str, int, float]]]] = []

    def add(self, fields: dict[str, Any]) -> None:
        """One document's text fields, analysed as whoosh's ``TEXT`` fields of
        :func:`kb.index.documents.schema` analyse them: the index-mode tokens, each
        term's count, and a weight of the count times the field's boost (every token's
        own boost is 1.0), terms in the order they first occur."""
        doc: dict[str, list[tuple[str, int, float]]] = {}
        for field in TEXT_FIELDS:
            value = fields.get(field)
            if value is None:
                continue
            counts: dict[str, int] = {}
            for token in tokens(value):
                counts[token] = counts.get(token, 0) + 1
            boost = TEXT_BOOSTS[field]
            doc[field] = [(t, n, float(n) * boost) for t, n in counts.items()]
        self.docs.append(doc)

    def attach(self, writer: Any) -> None:
        for field in TEXT_FIELDS:
            obj = writer.schema[field]
            obj.index = self._wrap(field, obj.index)

    def detach(self, writer: Any) -> None:
        """Before the commit: whoosh pickles the schema into its table of contents."""
        for field in TEXT_FIELDS:
            vars(writer.schema[field]).pop("index", None)

    def start(self) -> None:
        """Call before each ``add_document``."""
        self.docs.append({})

    def _wrap(self, field: str, index: Any) -> Any:
        def recording(value: Any, **kwargs: Any) -> list[Any]:
            items = list(index(value, **kwargs))
            self.docs[-1][field] = [
                (t.decode("utf-8"), freq, weight) for t, freq, weight, _v in items
            ]
            return items

        return recording

    def scores(self, field_boost: float = 1.0) -> dict[str, dict[int, float]]:
        """Per term, per document: what ``Session.token_scores`` returns for it."""
        from whoosh.scoring import BM25F, bm25
        from whoosh.util.numeric import byte_to_length, length_to_byte

        weighting = BM25F()
        n = len(self.docs)
        out: dict[str, dict[int, float]] = {}
        for field in TEXT_FIELDS:
            lengths = [sum(freq for _t, freq, _w in doc.get(field, ())) for doc in self.docs]
            avgfl = (sum(lengths) / (n or 1)) or 1
            stored = [byte_to_length(length_to_byte(x)) if x else 1 for x in lengths]
            postings: dict[str, list[tuple[int, float]]] = {}
            for docnum, doc in enumerate(self.docs):
                for term, _freq, weight in doc.get(field, ()):
                    postings.setdefault(term, []).append((docnum, weight * field_boost))
            for term, plist in postings.items():
                idf = math.log(n / (len(plist) + 1)) + 1  # whoosh's idf
                row = out.setdefault(term, {})
                for docnum, weight in plist:
                    row[docnum] = row.get(docnum, 0.0) + bm25(
                        idf, weight, stored[docnum], avgfl, weighting.B, weighting.K1
                    )
        return out


def write(recorder: Recorder, directory: Path) -> None:
    """The term table of a freshly built index, beside its segments."""
    rows = []
    for term, docs in recorder.scores().items():
        ranked = sorted(docs.items())
        rows.append(
            (term, _packed("i", [d for d, _s in ranked]), _packed("d", [s for _d, s in ranked]))
        )
    rows.sort()  # in key order the b-tree packs tighter
    con = sqlite3.connect(directory / FILE)
    try:
        con.execute(
            "CREATE TABLE terms (term TEXT PRIMARY KEY, docs BLOB NOT NULL, scores BLOB NOT NULL)"
            " WITHOUT ROWID"
        )
        con.executemany("INSERT INTO terms VALUES (?, ?, ?)", rows)
        # the stems the build's analysis gave, for a query's words (no stemmer import);
        # the step vocabulary every free-text query matches against is stemmed too
        from kb.index.steps import named_steps

        named_steps(set())  # stems the step vocabulary (recorded in this process)
        con.execute("CREATE TABLE stems (word TEXT PRIMARY KEY, stem TEXT NOT NULL) WITHOUT ROWID")
        con.executemany("INSERT INTO stems VALUES (?, ?)", sorted(seen_stems().items()))
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

    @classmethod
    def from_bytes(cls, data: bytes, stored: dict[int, dict[str, Any]]) -> TermTable:
        """A table held in memory from the file's bytes, already read and checked: a
        long-running process (``kb mcp``) is then immune to the file changing or being
        cut short under it (nothing of it is mapped or read again)."""
        table = cls.__new__(cls)
        table._con = sqlite3.connect(":memory:", check_same_thread=False)
        table._con.deserialize(data)  # Python 3.11+; callers fall back on AttributeError
        table.stored = stored
        return table

    def token_scores(self, token: str) -> dict[int, float]:
        row = self._con.execute(
            "SELECT docs, scores FROM terms WHERE term = ?", (token,)
        ).fetchone()
        if row is None:
            return {}
        docs, scores = _unpacked("i", row[0]), _unpacked("d", row[1])
        if len(docs) != len(scores):
            raise ValueError(f"the term table's row for {token!r} is damaged")
        return dict(zip(docs, scores, strict=True))

    def prime_stems(self, text: str) -> None:
        """Hand :mod:`kb.index.textanalysis` the stems the build recorded for the words
        of ``text`` (a query), so tokenizing it imports no stemmer for them."""
        from kb.index.steps import step_parts

        words = stem_candidates(text)[:64] + step_parts()
        if not words:
            return
        marks = ",".join("?" * len(words))
        rows = self._con.execute(f"SELECT word, stem FROM stems WHERE word IN ({marks})", words)
        known_stems(dict(rows.fetchall()))

    def terms(self) -> list[str]:
        """Every term of the index, sorted."""
        return [t for (t,) in self._con.execute("SELECT term FROM terms ORDER BY term")]

    def every_score(self) -> Iterator[tuple[str, list[tuple[int, float]]]]:
        """Every term, sorted, with what :meth:`token_scores` gives for it as
        ``(document, score)`` pairs in document order: one pass over the table."""
        rows = self._con.execute("SELECT term, docs, scores FROM terms ORDER BY term")
        for term, docs_blob, scores_blob in rows:
            docs, scores = _unpacked("i", docs_blob), _unpacked("d", scores_blob)
            if len(docs) != len(scores):
                raise ValueError(f"the term table's row for {term!r} is damaged")
            yield term, sorted(zip(docs, scores, strict=True))

    def close(self) -> None:
        self._con.close()


def _packed(code: str, values: list[Any]) -> bytes:
    """``values`` as a little-endian array of ``code`` (``i``: 32-bit, ``d``: double)."""
    packed = array(code, values)
    if sys.byteorder == "big":
        packed.byteswap()
    return packed.tobytes()


def _unpacked(code: str, data: bytes) -> array[Any]:
    values = array(code)
    values.frombytes(data)  # ValueError for a length that is not a whole number of items
    if sys.byteorder == "big":
        values.byteswap()
    return values
