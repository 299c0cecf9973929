"""Every chain sits on a question path (issue 31, item 3).

The selector fits a chain only where some tree option leads to it, so a chain no option
reached from a tree's root names is advice nobody can be given: ``kb validate`` reports
it at the chain's name, with file and line.  A records-only store (no trees) has no
question order to hold chains to.
"""

from __future__ import annotations

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
