"""Search quality on queries we wrote: the expected record first in ≥ 90% of cases."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kb.compiled import open_catalog
from kb.search import search

QUERIES = yaml.safe_load((Path(__file__).parent / "data" / "search_queries.yaml").read_text())


@pytest.fixture(scope="module")
def results() -> dict[str, list[str]]:
    catalog = open_catalog()
    return {q["q"]: [h.name for h in search(catalog, q["q"], limit=5)] for q in QUERIES}


def test_expected_record_is_first_in_nine_of_ten(results) -> None:
    misses = []
    for q in QUERIES:
        got = results[q["q"]]
        ok = got[:1] == [q["top"]] or (got[:1] and got[0] in q.get("also", []))
        if not ok:
            misses.append(f"{q['q']!r}: expected {q['top']}, got {got[:3]}")
    rate = 1 - len(misses) / len(QUERIES)
    assert rate >= 0.9, f"top-1 rate {rate:.0%}; misses:\n" + "\n".join(misses)


def test_expected_record_in_top_three_nearly_always(results) -> None:
    misses = [q["q"] for q in QUERIES if q["top"] not in results[q["q"]][:3]]
    assert len(misses) <= 2, misses
