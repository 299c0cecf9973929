"""What the query side needs to know of the index's documents, without whoosh."""

from __future__ import annotations

#: The fields a query's words are scored in (BM25F), in the order their scores are summed.
TEXT_FIELDS = ("name_text", "keywords", "summary", "fuses", "zh", "params", "body")


def phrase_key(text: str) -> str:
    """A keyword phrase or a query as compared whole: lower case, single spaces."""
    return " ".join(text.lower().split())
