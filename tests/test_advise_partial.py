"""Partial answers: common cases assumed and reported, open questions give every completion.

The contract (issue 21): with --no-input a question naming its common case is assumed
(``assumed`` in JSON, a prominent line in text); an open question that changes the operators
yields every completion, ranked, with exit 1; bad input is exit 2; --format json always
prints the document; --strict keeps the old behaviour; the MCP tool returns the same document.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from kb.api.advise import advise_step
from kb.catalog.compiled import open_catalog
from kb.cli import main

# a minute or more of CPU: started first (see the heavy marker in pyproject.toml)
pytestmark = pytest.mark.heavy


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any], str]:
    code = main(["advise", *argv, "--format", "json", "--no-input"])
    captured = capsys.readouterr()
    assert captured.out.strip(), "--format json must always print the document"
    return code, json.loads(captured.out), captured.err


def test_common_cases_are_assumed_and_reported(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc, _ = run(
        capsys, "attention", "--arch", "gqa", "--phase", "decode", "--cache", "paged"
    )
    assert code == 0 and doc["outcome"] == "advice" and doc["complete"] is True
    assert [(a["flag"], a["answer"]) for a in doc["assumed"]] == [
        ("--sinks", "no"),
        ("--kv-quant", "bf16"),
        ("--window", "no"),
    ]
    assert all(
        s["assumed"] == (s["flag"] in ("--sinks", "--kv-quant", "--window")) for s in doc["path"]
    )


def test_text_says_what_was_assumed_before_the_chains(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "advise",
                "attention",
                "--arch",
                "gqa",
                "--phase",
                "prefill",
                "--cache",
                "paged",
                "--no-input",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    lines = out.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("ASSUMED"))
    head = [lines[at]]  # the heading paragraph, wrapped to the terminal (continuations hang by 4)
    while lines[at + len(head)].startswith("    "):
        head.append(lines[at + len(head)].strip())
    line = " ".join(head)
    assert "--sinks no" in line and "--history no" in line
    assert out.index("ASSUMED") < out.index("Chain gqa-paged-fa-v1")  # first by practice


def test_an_open_question_gives_every_completion_ranked(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc, _ = run(capsys, "attention", "--arch", "gqa", "--phase", "decode")
    assert code == 1 and doc["outcome"] == "completions" and doc["complete"] is False
    assert doc["needed"][0]["flag"] == "--cache"
    ranks = [c["rank"] for c in doc["completions"]]
    assert ranks == list(range(1, len(ranks) + 1)) and doc["completions_total"] == len(ranks) == 2
    first, second = doc["completions"]
    assert first["adds"] == {"--cache": "contiguous"} and second["adds"] == {"--cache": "paged"}
    assert first["assumed"] == {"--sinks": "no", "--kv-quant": "bf16", "--window": "no"}
    # a completion's chains are the selector's, as the complete walk's (first by practice)
    assert [c["name"] for c in second["chains"]] == ["gqa-paged-fa-v1"]
    assert {"gqa-decode-paged", "gqa-decode-capture"} <= set(second["chains"][0]["alternatives"])


def test_completions_cover_verdicts_too(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc, _ = run(capsys, "quantization", "--product", "atlas-a2")
    assert code == 1
    outcomes = {tuple(c["adds"].items()): c for c in doc["completions"]}
    assert outcomes[(("--quant", "bf16"),)]["outcome"] == "stop"
    assert outcomes[(("--quant", "bf16"),)]["verdict"]
    w8a8 = outcomes[(("--quant", "w8a8-dynamic"),)]
    assert w8a8["outcome"] == "advice" and w8a8["assumed"] == {"--fuse-norm": "no"}


@pytest.mark.parametrize(
    "tree",
    [
        "attention",
        "moe",
        "kv-cache",
        "quantization",
        "tensor-parallel",
        "graph-mode",
        "prefetch-placement",
    ],
)
def test_every_tree_answers_an_empty_query(capsys: pytest.CaptureFixture[str], tree: str) -> None:
    code, doc, _ = run(capsys, tree)
    assert code in (0, 1)
    assert doc["chains"] or doc["completions"] or doc["outcome"] == "stop"


def test_bad_input_is_exit_2_with_a_json_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc, err = run(capsys, "attention", "--arch", "rnn")
    assert code == 2 and doc["outcome"] == "error" and "--arch 'rnn'" in doc["error"]
    assert "--arch 'rnn'" in err


def test_strict_keeps_the_missing_answer_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["advise", "attention", "--arch", "gqa", "--no-input", "--strict"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "missing --sinks" in captured.err


def test_mcp_returns_the_same_document(capsys: pytest.CaptureFixture[str]) -> None:
    for answers in (
        {"arch": "gqa", "phase": "decode"},
        {"arch": "gqa", "phase": "decode", "cache": "paged"},
    ):
        argv = [a for k, v in answers.items() for a in (f"--{k}", v)]
        _, doc, _ = run(capsys, "attention", *argv)
        assert advise_step(open_catalog(), "attention", answers) == doc


def test_alternatives_carry_where_they_are_practiced(capsys: pytest.CaptureFixture[str]) -> None:
    # on Atlas A3 the FA v2 chain is first (FA v1's ports are A2 ones) and FA v1 is ranked after
    _, doc, _ = run(
        capsys,
        "attention",
        "--arch",
        "gqa",
        "--phase",
        "decode",
        "--cache",
        "paged",
        "--product",
        "atlas-a3",
    )
    alt = next(a for a in doc["alternatives"] if a["name"] == "gqa-paged-fa-v1")
    assert alt["rank"] > 1 and alt["instead_of"] == "gqa-decode-paged" and alt["when"]
    cited = {e["repo"] for e in alt["practice"]["engines"] if e["cited"]}
    assert {"Ascend/MindIE-LLM", "DeepLink-org/dlinfer"} <= cited
    assert alt["practice"]["releases"] and alt["practice"]["products"]
    capture = next(a for a in doc["alternatives"] if a["name"] == "gqa-decode-capture")
    calls = [st["call"] for st in capture["stages"]]
    assert any(
        c.startswith("torch_npu.npu_fused_infer_attention_score.out(")
        and "workspace=workspace" in c
        for c in calls
    )
