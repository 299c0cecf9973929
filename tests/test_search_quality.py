"""Search quality on queries we wrote (tests/data/search_queries.yaml).

The ranking was tuned on the queries without ``heldout: true``; the held-out task
phrases were written before the last ranking change and measure it honestly.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kb.catalog.compiled import open_catalog
from kb.index.search import search

QUERIES = yaml.safe_load((Path(__file__).parent / "data" / "search_queries.yaml").read_text())
TUNED = [q for q in QUERIES if not q.get("heldout")]
TASKS = [q for q in QUERIES if q.get("task")]


@pytest.fixture(scope="module")
def results() -> dict[str, list[tuple[str, str]]]:
    catalog = open_catalog()
    return {q["q"]: [(h.name, h.kind) for h in search(catalog, q["q"], limit=5)] for q in QUERIES}


def accepted(q: dict) -> list[str]:
    return [q["top"], *q.get("also", [])]


def names(hits: list[tuple[str, str]]) -> list[str]:
    return [name for name, _ in hits]


def test_expected_record_is_first_in_nine_of_ten(results) -> None:
    misses = []
    for q in TUNED:
        got = names(results[q["q"]])
        if not (got[:1] and got[0] in accepted(q)):
            misses.append(f"{q['q']!r}: expected {q['top']}, got {got[:3]}")
    rate = 1 - len(misses) / len(TUNED)
    assert rate >= 0.9, f"top-1 rate {rate:.0%}; misses:\n" + "\n".join(misses)


def test_expected_record_in_top_three_nearly_always(results) -> None:
    misses = [q["q"] for q in TUNED if not set(accepted(q)) & set(names(results[q["q"]])[:3])]
    assert len(misses) <= 2, misses


def test_task_phrases_find_a_wanted_record_in_the_top_three(results) -> None:
    """Task phrases (held-out ones included): the operator a user wants in the top 3."""
    misses = [q["q"] for q in TASKS if not set(accepted(q)) & set(names(results[q["q"]])[:3])]
    assert len(misses) <= len(TASKS) // 10, misses


@pytest.mark.parametrize("query", ["moe routing", "flash attention int8"])
def test_operators_rank_above_chains_for_task_phrases(query: str, results) -> None:
    """Issue 15: a chain that merely shares words with the phrase must not lead."""
    q = next(q for q in QUERIES if q["q"] == query)
    hits = results[query]
    first_wanted = next(i for i, (name, _) in enumerate(hits) if name in accepted(q))
    chains = [i for i, (_, kind) in enumerate(hits) if kind in ("chain", "tree")]
    assert first_wanted < 3 and all(i > first_wanted for i in chains), hits


def test_a_dtype_in_the_query_is_a_requirement() -> None:
    """'flash attention int8': operators that never take int8 fall behind those that do."""
    hits = [h.name for h in search(open_catalog(), "flash attention int8", limit=10)]
    assert "npu_sparse_flash_attention" in hits  # still found, but
    assert hits.index("npu_sparse_flash_attention") > hits.index("npu_kv_quant_sparse_flash_attention")
