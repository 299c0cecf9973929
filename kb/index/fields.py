"""What the query side needs to know of the index's documents, without whoosh."""

from __future__ import annotations

#: The fields a query's words are scored in (BM25F), in the order their scores are summed.
TEXT_FIELDS = ("name_text", "keywords", "summary", "fuses", "zh", "params", "body")

#: Field weights, tuned on tests/data/search_queries.yaml (``name`` weighs the
#: ``name_text`` field).
BOOSTS: dict[str, float] = {
    "name": 6.0,
    "keywords": 4.0,
    "summary": 3.0,
    "fuses": 2.5,
    "zh": 3.0,
    "params": 1.0,
    "body": 1.0,
}


def phrase_key(text: str) -> str:
    """A keyword phrase or a query as compared whole: lower case, single spaces."""
    return " ".join(text.lower().split())


#: The weight of each text field's terms.
TEXT_BOOSTS: dict[str, float] = {
    field: BOOSTS["name" if field == "name_text" else field] for field in TEXT_FIELDS
}
