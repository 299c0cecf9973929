"""Every chain sits on a question path (issue 31, item 3).

The selector fits a chain only where some tree option leads to it, so a chain no option
reached from a tree's root names is advice nobody can be given: ``kb validate`` reports
it at the chain's name, with file and line.  A records-only store (no trees) has no
question order to hold chains to.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from kb.catalog.store import load_store
from kb.cli import main
from kb.core.paths import records_dir
from tests.test_chains_trees import TREE, chain_yaml, line_of, operator_yaml


def _orphan(chain: str) -> str:
    return chain_yaml().replace("name: test-chain", f"name: {chain}")


def test_a_chain_no_tree_names_is_a_validation_error(
    record_tree: Callable[..., Path], capsys
) -> None:
    orphan = _orphan("lonely-chain")
    root = record_tree(
        {
            "operators/npu_test_op.yaml": operator_yaml(),
            "chains/test-chain.yaml": chain_yaml(),
            "chains/lonely-chain.yaml": orphan,
            "trees/test-tree.yaml": TREE.format(chain="test-chain"),
        }
    )
    code = main(["validate"])
    out = capsys.readouterr().out
    assert code == 2
    line = line_of(orphan, "name: lonely-chain")
    assert f"{root / 'chains/lonely-chain.yaml'}:{line}:" in out
    assert "'lonely-chain' is on no question path" in out
    assert "'test-chain' is on no question path" not in out


def test_a_node_the_root_never_reaches_does_not_count(record_tree: Callable[..., Path]) -> None:
    tree = TREE.format(chain="test-chain").replace("chain: test-chain", "note: nothing here")
    tree += (
        "  - id: island\n    key: other\n    question: {en: Unreached?, zh: 未达？}\n"
        "    options:\n      - value: x\n        label: X\n        chain: test-chain\n"
        "      - value: y\n        label: Y\n        operators: [npu_test_op]\n"
    )
    root = record_tree(
        {
            "operators/npu_test_op.yaml": operator_yaml(),
            "chains/test-chain.yaml": chain_yaml(),
            "trees/test-tree.yaml": tree,
        }
    )
    problems = [str(p) for p in load_store(root).problems]
    assert any("'test-chain' is on no question path" in p for p in problems), problems


def test_an_alternative_puts_a_chain_on_a_path(record_tree: Callable[..., Path]) -> None:
    tree = TREE.format(chain="test-chain") + (
        "        alternatives:\n          - chain: other-chain\n"
    )
    root = record_tree(
        {
            "operators/npu_test_op.yaml": operator_yaml(),
            "chains/test-chain.yaml": chain_yaml(),
            "chains/other-chain.yaml": _orphan("other-chain"),
            "trees/test-tree.yaml": tree,
        }
    )
    assert not [str(p) for p in load_store(root).problems if "question path" in str(p)]


def test_every_shipped_chain_is_on_a_question_path() -> None:
    """residual-norm and rope-precompute were on none (the layer-boundary tree names them)."""
    problems = [str(p) for p in load_store(records_dir()).problems]
    assert not [p for p in problems if "question path" in p], problems


# ------------------------------------------------------------ questions that change nothing

SAME = """\
kind: tree
name: same-tree
title: {en: Same tree, zh: 测试树}
summary: {en: Two answers to one chain., zh: 测试用决策树。}
root: count
nodes:
  - id: count
    key: count
    question: {en: How many?, zh: 多少？}
    options:
      - value: few
        label: Few
        chain: test-chain
        goto: kind
      - value: many
        label: Many
        chain: test-chain
        goto: kind
        note: Many is fine too.
  - id: kind
    key: kind
    question: {en: Which kind?, zh: 哪一种？}
    options:
      - value: a
        label: A
        operators: [npu_test_op]
      - value: b
        label: B
        note: nothing fused here
"""


def test_a_question_whose_answers_lead_to_the_same_chains_is_not_asked(
    record_tree: Callable[..., Path], capsys
) -> None:
    record_tree(
        {
            "operators/npu_test_op.yaml": operator_yaml(),
            "chains/test-chain.yaml": chain_yaml(),
            "trees/same-tree.yaml": SAME,
        }
    )
    assert main(["advise", "same-tree", "--kind", "a", "--no-input", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["outcome"] == "advice" and out["skipped"] == ["--count"]
    assert "--count" not in out["answers"]
    assert [c["name"] for c in out["chains"]] == ["test-chain"]
    assert any(n.startswith("--count many: Many is fine") for n in out["notes"]), out["notes"]
    # the next question changes the outcome (operators vs a verdict): still asked
    assert main(["advise", "same-tree", "--no-input", "--format", "json"]) == 1
    assert json.loads(capsys.readouterr().out)["needed"][0]["flag"] == "--kind"


def test_the_expert_count_is_not_asked_once_every_count_gets_the_fused_gate(capsys) -> None:
    argv = ["advise", "moe", "--moe", "yes", "--gate", "sigmoid", "--activation", "swiglu"]
    argv += ["--parallel", "tp", "--phase", "prefill", "--quant", "bf16", "--no-input"]
    assert main([*argv, "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["skipped"] == ["--routed-experts"]
    assert "moe-gate-sigmoid" in [c["name"] for c in out["chains"]]
