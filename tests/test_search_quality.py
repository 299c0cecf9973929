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
    assert hits.index("npu_sparse_flash_attention") > hits.index(
        "npu_kv_quant_sparse_flash_attention"
    )


def reciprocal_rank(q: dict, hits: list[tuple[str, str]]) -> float:
    return next((1 / (i + 1) for i, name in enumerate(names(hits)) if name in accepted(q)), 0.0)


def mrr(queries: list[dict], results) -> float:
    return sum(reciprocal_rank(q, results[q["q"]]) for q in queries) / len(queries)


def test_mean_reciprocal_rank(results) -> None:
    """Issue 23: MRR over every query and over the task phrasings (0.944 and 0.904 on
    the first 156 queries before the word-share ranking; 0.965 and 0.929 on all 171
    after it; the floors sit just under, so a regression fails)."""
    assert len(QUERIES) >= 170 and len(TASKS) >= 55
    assert mrr(QUERIES, results) >= 0.96, mrr(QUERIES, results)
    assert mrr(TASKS, results) >= 0.92, mrr(TASKS, results)


def test_held_out_batch_ranks_as_well_as_the_tuned_queries(results) -> None:
    """The i23b queries were written before the word-share ranking and never tuned on
    (0.889 before it, 0.933 after)."""
    batch = [q for q in QUERIES if q.get("batch") == "i23b"]
    assert len(batch) >= 10
    assert mrr(batch, results) >= 0.9, mrr(batch, results)


def test_a_record_missing_a_named_word_falls_behind_one_holding_every_word(results) -> None:
    """'rmsnorm then dynamic quantization': npu_dynamic_quant spells two of the three
    words in its name but holds no rmsnorm; the records that norm and quantize lead."""
    got = names(results["rmsnorm then dynamic quantization"])
    assert "rms_norm" in got[0] and "npu_dynamic_quant" not in got[:3], got


def test_a_chinese_run_counts_as_one_word() -> None:
    from kb.index.textanalysis import query_words

    assert query_words("融合注意力 训练") == [["融合", "合注", "注意", "意力"], ["训练"]]
    assert query_words("the swiglu then quant") == [["swiglu"], ["quant"]]


@pytest.mark.parametrize(
    ("query", "first"),
    [
        ("rmsnorm", "npu_rms_norm"),
        ("rms norm", "npu_rms_norm"),
        ("swiglu", "npu_swiglu"),
        ("flash attention", None),
    ],
)
def test_the_basic_operator_leads_its_specialisations(
    query: str, first: str | None, results
) -> None:
    """A record named for a step the query does not ask about (npu_add_rms_norm for
    residual_add, npu_sparse_flash_attention for sparse_attention) falls behind."""
    got = names(results[query])
    if first:
        assert got[0] == first, got
    else:
        assert got[0] != "npu_sparse_flash_attention", got


def test_named_steps_find_the_operator_fusing_exactly_them(results) -> None:
    """'residual add then rmsnorm in one kernel': npu_add_rms_norm fuses those two steps
    and nothing else; the MoE combine that also adds and normalises is no answer."""
    got = names(results["residual add then rmsnorm in one kernel"])
    assert got[0] == "npu_add_rms_norm", got


def test_steps_are_read_from_the_query() -> None:
    from kb.index.steps import named_steps, step_factor
    from kb.index.textanalysis import tokens

    def steps(text: str) -> frozenset[str]:
        toks = set(tokens(text, query=True))
        return named_steps(toks | {a + b for a in toks for b in toks})

    # add is residual_add's
    assert steps("residual add then rmsnorm") == {"residual_add", "rms_norm"}
    assert steps("swiglu then quantize") == {"swiglu", "quantize"}
    named = frozenset({"residual_add", "rms_norm"})
    exact = step_factor(frozenset({"residual_add", "rms_norm"}), named)
    wider = step_factor(frozenset({"residual_add", "rms_norm", "all_to_all", "combine"}), named)
    assert exact > wider > 1.0
    assert step_factor(frozenset({"rms_norm"}), frozenset({"rms_norm"})) == 1.0  # one step: a topic
    # a named step is done by a fused step whose words hold its own
    generic = frozenset({"attention", "mask"})
    assert step_factor(frozenset({"flash_attention", "mask"}), generic) == step_factor(
        generic, generic
    )
    assert step_factor(frozenset({"mask", "convolution"}), generic) < step_factor(generic, generic)


def test_a_step_named_by_its_joined_spelling_is_asked() -> None:
    """'rmsnorm' asks for rms_norm: a record named for it is no specialisation."""
    from kb.index.names import name_stems
    from kb.index.steps import named_steps, unasked_named_steps

    query = {"rmsnorm", "dynamic", "quant"}
    named = named_steps(query)
    fused = frozenset({"rms_norm", "dynamic_quantize", "bias_add"})
    assert unasked_named_steps(name_stems("npu_rms_norm_dynamic_quant"), fused, query, named) == 0
    assert (
        unasked_named_steps(name_stems("npu_add_rms_norm_dynamic_quant"), fused, query, named) == 1
    )


def test_an_exact_name_is_answered_without_whoosh(tmp_path) -> None:
    """The compiled store answers an exact or misspelt operator name; free text reads the
    index's term table, and whoosh's engine is loaded only to build that index."""
    import os
    import subprocess
    import sys

    probe = (
        "import sys\nfrom kb.catalog.compiled import open_catalog\nfrom kb.index.search import search\n"
        "hits = search(open_catalog(), sys.argv[1], limit=3)\n"
        "print(hits[0].name, 'whoosh.index' in sys.modules or 'whoosh.searching' in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}

    def run(query: str) -> str:
        return subprocess.run(
            [sys.executable, "-c", probe, query],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        ).stdout.strip()

    assert run("npu_rms_norm") == "npu_rms_norm False"
    assert run("torch_npu.npu_mla_prolog_v3") == "npu_mla_prolog_v3 False"
    assert run("npu_mla_prolgo_v3") == "npu_mla_prolog_v3 False"
    run("rms norm")  # builds the index if this cache has none
    assert run("rms norm") == "npu_rms_norm False"
    assert run("权重预取") == "npu_prefetch False"


def test_the_term_table_scores_what_whoosh_scores() -> None:
    """Every term's row is, float for float, what a whoosh searcher sums for it."""
    from kb.catalog.compiled import open_catalog
    from kb.index.fulltext import Session
    from kb.index.searchindex import open_index, open_terms

    catalog = open_catalog()
    session = Session(open_index(catalog))
    table = open_terms(catalog)
    assert table is not None
    try:
        terms = [t for (t,) in table._con.execute("SELECT term FROM terms ORDER BY term")]
        assert len(terms) > 1000
        for term in terms[::37]:
            assert table.token_scores(term) == session.token_scores(term), term
        assert table.stored == session.stored
        assert table.token_scores("no-such-term-anywhere") == {}
        # the one-pass read the site's search shards are made from gives the same rows
        every = list(table.every_score())
        assert [t for t, _ in every] == terms == table.terms()
        for term, pairs in every[::37]:
            assert pairs == sorted(table.token_scores(term).items()), term
    finally:
        table.close()
        session.close()
