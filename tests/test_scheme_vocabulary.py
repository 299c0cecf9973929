"""One scheme vocabulary for records, chains, trees, `kb advise` and `kb check`.

The plan `kb advise --quant X` prescribes must pass `kb check` without a scheme finding,
for every scheme a decision tree offers (walked from the shipped trees, not listed
here); every scheme id a record uses is a canonical id; a spelling of two schemes
(`w8a8`: static or per-token dynamic activations) is answered with both, never with a
silent pick; and a plan that really contradicts its scheme is still reported.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kb.api.advise import advise
from kb.api.check import check_text
from kb.catalog.compiled import Catalog, open_catalog
from kb.catalog.models import DecisionTree
from kb.cli import main
from kb.core.paths import PACKAGE_DIR
from kb.lint.findings import Finding
from kb.vocab import (
    AMBIGUOUS_SCHEMES,
    SCHEME_FLAG,
    SCHEMES,
    ambiguous_scheme_message,
    normalize,
    normalize_scheme,
    scheme_family,
    scheme_meanings,
    scheme_members,
)

# a minute or more of CPU: started first (see the heavy marker in pyproject.toml)
pytestmark = pytest.mark.heavy

#: What a scheme mix-up shows up as: an unknown scheme, no such mode, a mode the
#: arguments or dtypes contradict, or a record rule the mode's settings break.
SCHEME_CODES = {"KB005", "KB203", "KB204", "KB109", "KB307"}


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return open_catalog(PACKAGE_DIR / "records")


def _answer_paths(tree: dict[str, Any]) -> Iterator[dict[str, str]]:
    """Every full answer set from the root to a leaf (a key answered once holds on)."""
    nodes = {n["id"]: n for n in tree["nodes"]}

    def dfs(
        node_id: str | None, answers: dict[str, str], seen: frozenset[str]
    ) -> Iterator[dict[str, str]]:
        if node_id is None or node_id in seen:
            yield answers
            return
        node = nodes[node_id]
        key = node["key"]
        for opt in node["options"]:
            if key in answers and opt["value"] != answers[key]:
                continue
            yield from dfs(opt.get("goto"), {**answers, key: opt["value"]}, seen | {node_id})

    yield from dfs(tree["root"], {}, frozenset())


def _plan(doc: dict[str, Any], product: str) -> str:
    """The candidate list an advice prescribes: one candidate per operator stage, with the
    stage's arguments and tensors, in the scheme the walk answered."""
    scheme = doc["quantization"]
    lines = [
        "version: 1",
        "target:",
        f"  product: {product}",
        f"  quantization: {scheme}",
        "candidates:",
    ]
    for chain in doc["chains"]:
        for st in chain["stages"]:
            if st["operator"] == "plain-torch":
                continue
            cand: dict[str, Any] = {
                "module": f"{chain['name']}.{st['stage']}",
                "operator": st["operator"],
                "chain": chain["name"],
                "phase": st["phase"],
            }
            if st.get("quantization"):
                cand["quantization"] = scheme
            for field in ("args", "tensors"):
                if st.get(field):
                    cand[field] = st[field]
            lines.append("  - " + json.dumps(cand))
    return "\n".join(lines) + "\n"


def _advised_plans(catalog: Catalog) -> Iterator[tuple[str, str, str, str]]:
    """(tree, scheme, product, plan text) for every walk that answers the scheme question."""
    done: set[str] = set()
    for tree in catalog.records("tree"):
        for answers in _answer_paths(tree):
            if SCHEME_FLAG not in answers:
                continue
            doc = advise(catalog, tree, answers)
            if not doc["complete"] or not doc["chains"] or doc["quantization"] is None:
                continue
            products = (
                [answers["product"]]
                if "product" in answers
                else sorted({p for c in doc["chains"] for p in c["products"]})
            )
            for product in products:
                text = _plan(doc, product)
                if text not in done:
                    done.add(text)
                    yield tree["name"], doc["quantization"], product, text


def test_the_plan_advise_prescribes_checks_clean_for_every_scheme_the_trees_offer(
    catalog: Catalog,
) -> None:
    offered = {
        o["value"]
        for t in catalog.records("tree")
        for n in t["nodes"]
        if n["key"] == SCHEME_FLAG
        for o in n["options"]
        if o.get("chain") or o.get("goto")
    }
    checked: set[str] = set()
    problems: list[str] = []
    for tree, scheme, product, text in _advised_plans(catalog):
        checked.add(scheme)
        for f in check_text(text, "plan.yaml", catalog=catalog):
            if f.code in SCHEME_CODES:
                problems.append(
                    f"{tree} --{SCHEME_FLAG} {scheme} on {product}: {f.code} {f.message}"
                )
    assert not problems, "\n".join(problems[:20])
    assert offered and offered <= checked, f"never reached: {sorted(offered - checked)}"


def test_every_chain_runs_each_scheme_it_lists_without_a_scheme_finding(catalog: Catalog) -> None:
    """Chains no tree reaches too: the stages a scheme runs, checked in that scheme."""
    problems: list[str] = []
    for chain in catalog.records("chain"):
        for scheme in chain.get("quantization") or []:
            stages = [
                st
                for st in chain["stages"]
                if not st.get("quantization") or scheme in st["quantization"]
            ]
            doc = {
                "quantization": scheme,
                "chains": [{**chain, "stages": [{"phase": "both", **st} for st in stages]}],
            }
            for product in chain.get("products") or []:
                for f in check_text(_plan(doc, product), "plan.yaml", catalog=catalog):
                    if f.code in SCHEME_CODES:
                        problems.append(
                            f"{chain['name']} in {scheme} on {product}: {f.code} {f.message}"
                        )
    assert not problems, "\n".join(problems[:20])


def test_every_scheme_id_in_records_chains_and_trees_is_canonical(catalog: Catalog) -> None:
    used: list[tuple[str, str]] = []
    for rec in catalog.records("operator"):
        for mode in rec.get("quantization") or []:
            used += [(rec["name"], mode["scheme"])] + (
                [(rec["name"], mode["kv"])] if mode.get("kv") else []
            )
    for chain in catalog.records("chain"):
        used += [(chain["name"], s) for s in chain.get("quantization") or []]
        used += [(chain["name"], s) for st in chain["stages"] for s in st.get("quantization") or []]
    for tree in catalog.records("tree"):
        used += [
            (tree["name"], o["value"])
            for n in tree["nodes"]
            if n["key"] == SCHEME_FLAG
            for o in n["options"]
        ]
    assert used
    wrong = [(where, s) for where, s in used if normalize_scheme(s) != s]
    assert not wrong, wrong
    assert {s for _, s in used} >= {"w8a8-static", "w8a8-dynamic"}


def test_a_spelling_of_two_schemes_names_both_and_picks_neither() -> None:
    assert AMBIGUOUS_SCHEMES["w8a8"] == ("w8a8-static", "w8a8-dynamic")
    for spelling in ("w8a8", "W8A8", " a8w8 "):
        assert normalize("quantization", spelling) is None
        assert normalize_scheme(spelling) is None
        assert scheme_meanings(spelling) == ("w8a8-static", "w8a8-dynamic")
    assert scheme_meanings("W8A8_DYNAMIC") == ("w8a8-dynamic",)
    assert scheme_meanings("w8a8_static") == ("w8a8-static",)
    assert scheme_meanings("w8a8 + kv_int8") == ("w8a8-static+kv-int8", "w8a8-dynamic+kv-int8")
    message = ambiguous_scheme_message("W8A8") or ""
    assert "w8a8-static" in message and "w8a8-dynamic" in message
    assert (
        ambiguous_scheme_message("w8a8-dynamic") is None
        and ambiguous_scheme_message("nope") is None
    )
    # the one difference between the two, stated on the rows
    assert SCHEMES["w8a8-static"].timing == "static" and SCHEMES["w8a8-dynamic"].timing == "dynamic"


def test_kb_check_judges_w8a8_as_the_family_and_names_both_completions(
    catalog: Catalog,
) -> None:
    """``w8a8`` is the workflow's family word: no KB005 for it; a rule that holds for one
    member only (npu_mla_prolog_v3 has a w8a8-dynamic mode, no static one) is a warning
    naming both completions; a rule that holds for both stays an error; ``int8`` (which
    may also be weight-only w8a16) and a made-up word stay KB005."""
    text = (
        "version: 1\ntarget: {product: atlas-a3, quantization: W8A8}\ncandidates:\n"
        "  - module: attn\n    operator: npu_mla_prolog_v3\n    quantization: w8a8\n"
        "    args: {weight_quant_mode: 2}\n"
        "  - module: down\n    operator: npu_quant_matmul\n    quantization: a8w8\n"
        "  - module: wo\n    operator: npu_weight_quant_batchmatmul\n    quantization: w8a8\n"
        "  - module: x\n    operator: npu_quant_matmul\n    quantization: int8\n"
        "  - module: y\n    operator: npu_quant_matmul\n    quantization: w9a9\n"
    )
    found = check_text(text, "c.yaml", catalog=catalog)
    by_cand: dict[int | None, list[Finding]] = {}
    for f in found:
        by_cand.setdefault(f.candidate, []).append(f)
    unknown = [f for f in found if f.code == "KB005"]
    assert sorted(f.candidate for f in unknown) == [3, 4]  # int8, w9a9; never the family word
    warned = [f for f in by_cand[0] if f.code == "KB203"]
    assert len(warned) == 1 and warned[0].severity == "warning"
    assert "w8a8-static" in warned[0].message and "w8a8-dynamic" in warned[0].message
    assert not [f for f in by_cand.get(1, []) if f.severity == "error"]  # both modes exist
    (neither,) = [f for f in by_cand[2] if f.code == "KB203"]
    assert neither.severity == "error" and "no w8a8 mode" in neither.message


def test_a_family_is_a_shared_spelling_of_schemes_that_differ_only_in_timing() -> None:
    assert scheme_family("W8A8") == ("w8a8", ("w8a8-static", "w8a8-dynamic"))
    assert scheme_family(" a8w8 ") == ("w8a8", ("w8a8-static", "w8a8-dynamic"))
    assert scheme_family("w8a8+kv_int8") == (
        "w8a8+kv-int8",
        ("w8a8-static+kv-int8", "w8a8-dynamic+kv-int8"),
    )
    assert scheme_family("int8") is None  # w8a16 stores 16-bit activations: no family
    assert scheme_family("w8a8-dynamic") is None and scheme_family("w4a8") is None
    assert scheme_members("w8a8") == ("w8a8-static", "w8a8-dynamic")
    assert scheme_members("w4a8") == ("w4a8",) and scheme_members("w8a16") == ("w8a16",)


def test_a_record_rule_on_one_member_is_unknown_for_the_family() -> None:
    from kb.check.conditions import holds
    from kb.lint.model import Candidate, Target

    cand = Candidate(index=0, module="m", operator="op", quantization="w8a8")
    target = Target()
    assert holds({"quantization": ["w8a8-dynamic"]}, cand, target) is None
    assert holds({"quantization": ["w8a8-static", "w8a8-dynamic"]}, cand, target) is True
    assert holds({"quantization": ["w4a16"]}, cand, target) is False


def test_kb_advise_asks_which_w8a8_and_names_the_question_s_options(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = [
        "advise",
        "attention",
        "--arch",
        "mla",
        "--indexer",
        "no",
        "--phase",
        "decode",
        "--prolog",
        "yes",
        "--mtp",
        "no",
        "--no-input",
    ]
    assert main([*argv, "--quant", "w8a8"]) == 2
    err = capsys.readouterr().err
    assert "w8a8-static" in err and "w8a8-dynamic" in err
    assert main([*argv, "--quant", "W8A8_DYNAMIC", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["quantization"] == "w8a8-dynamic"


def test_kb_scan_asks_which_w8a8(capsys: pytest.CaptureFixture[str], tmp_path: Any) -> None:
    (tmp_path / "m.py").write_text("x = 1\n")
    assert main(["scan", str(tmp_path / "m.py"), "--quant", "w8a8"]) == 2
    err = capsys.readouterr().err
    assert "w8a8-static" in err and "w8a8-dynamic" in err


def test_a_tree_cannot_offer_an_ambiguous_or_unknown_scheme() -> None:
    def tree(value: str) -> dict[str, Any]:
        return {
            "kind": "tree",
            "name": "t",
            "title": {"en": "t", "zh": "t"},
            "summary": {"en": "t", "zh": "t"},
            "root": "q",
            "nodes": [
                {
                    "id": "q",
                    "key": SCHEME_FLAG,
                    "question": {"en": "q", "zh": "q"},
                    "options": [
                        {"value": "bf16", "label": "none", "note": "n"},
                        {"value": value, "label": "int8", "note": "n"},
                    ],
                }
            ],
        }

    DecisionTree.model_validate(tree("w8a8-dynamic"))
    for value, says in (
        ("w8a8", "w8a8-static"),
        ("w8a8_dynamic", "'w8a8-dynamic'"),
        ("nope", "canonical"),
    ):
        with pytest.raises(ValueError, match=says):
            DecisionTree.model_validate(tree(value))


# -- the contradiction of issue 23 --------------------------------------------------------

_DEEPSEEK = (
    "version: 1\ntarget: {{product: atlas-a3, quantization: {scheme}}}\ncandidates:\n"
    "  - module: model.layers.*.self_attn\n    phase: decode\n"
    "    operator: npu_mla_prolog_v3\n    chain: mla-absorb-decode\n"
    "    quantization: {scheme}\n"
    "    args: {{cache_mode: PA_NZ, weight_quant_mode: {mode}, kv_cache_quant_mode: 0,"
    " query_quant_mode: 0}}\n"
    "    tensors:\n      token_x: {{dtype: {token_x}}}\n"
    "      weight_dq: {{dtype: int8, format: FRACTAL_NZ}}\n"
)


def _codes(found: list[Finding]) -> list[str]:
    return sorted(f.code for f in found if f.severity != "info")


def _deepseek(catalog: Catalog, scheme: str, mode: int, token_x: str) -> list[Finding]:
    text = _DEEPSEEK.format(scheme=scheme, mode=mode, token_x=token_x)
    return check_text(text, "plan.yaml", catalog=catalog)


def test_advise_prescribes_mode_2_under_the_scheme_its_record_gives_mode_2(
    catalog: Catalog,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert (
        main(
            [
                "advise",
                "attention",
                "--arch",
                "mla",
                "--indexer",
                "no",
                "--phase",
                "decode",
                "--prolog",
                "yes",
                "--mtp",
                "no",
                "--quant",
                "w8a8-dynamic",
                "--format",
                "json",
            ]
        )
        == 0
    )
    doc = json.loads(capsys.readouterr().out)
    prolog = [
        st for c in doc["chains"] for st in c["stages"] if st["operator"] == "npu_mla_prolog_v3"
    ]
    assert [st["args"]["weight_quant_mode"] for st in prolog] == [2]
    rec = catalog.get("npu_mla_prolog_v3")
    assert rec is not None
    mode_2 = {
        m["scheme"]
        for m in rec["quantization"]
        if (m.get("select") or {})
        == {"weight_quant_mode": 2, "kv_cache_quant_mode": 0, "query_quant_mode": 0}
    }
    assert mode_2 == {"w8a8-dynamic"}
    assert _codes(_deepseek(catalog, "w8a8-dynamic", 2, "int8")) == []


def test_mode_2_with_a_16_bit_token_x_is_one_dtype_error_not_a_mode_1_hint(
    catalog: Catalog,
) -> None:
    found = _deepseek(catalog, "w8a8-dynamic", 2, "bfloat16")
    assert _codes(found) == ["KB109"]  # token_x must be int8; KB204 no longer proposes mode 1
    assert "token_x" in next(f.message for f in found if f.code == "KB109")


def test_a_real_scheme_mismatch_is_still_reported(catalog: Catalog) -> None:
    wrong_mode = [f for f in _deepseek(catalog, "w8a8-dynamic", 0, "int8") if f.code == "KB204"]
    assert (
        wrong_mode
        and "weight_quant_mode=1 or 2, not 0 (weight_quant_mode=0 is bf16)" in wrong_mode[0].message
    )
    static = [f for f in _deepseek(catalog, "w8a8-static", 2, "int8") if f.code == "KB203"]
    assert static and "no w8a8-static mode" in static[0].message  # the prolog quantizes per token


def test_a_clean_list_written_with_the_family_word_stays_error_free(catalog: Catalog) -> None:
    """The workflow's own spelling: a list that checks clean under w8a8-dynamic has no
    error under w8a8 (a rule holding for one member only is a warning naming both)."""
    clean = (Path(__file__).parent / "fixtures" / "candidates" / "clean.yaml").read_text(
        encoding="utf-8"
    )
    assert "w8a8-dynamic" in clean
    before = check_text(clean, "clean.yaml", catalog=catalog)
    assert not [f for f in before if f.severity == "error"]
    after = check_text(clean.replace("w8a8-dynamic", "w8a8"), "clean.yaml", catalog=catalog)
    assert not [f for f in after if f.severity == "error"], after
    warned = [f for f in after if f.severity == "warning" and f.code in SCHEME_CODES]
    assert all("w8a8-static" in f.message and "w8a8-dynamic" in f.message for f in warned)
