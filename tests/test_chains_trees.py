"""Chains and trees: cross-references resolve, stage arguments are real, every path ends well."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kb.advise import walk
from kb.cli import main
from kb.compiled import Catalog, open_catalog
from kb.paths import records_dir
from kb.store import load_store
from tests.conftest import operator_yaml

CHAIN = """\
kind: chain
name: test-chain
title: {{en: Test chain, zh: 测试链路}}
summary: {{en: A chain for tests., zh: 测试用链路。}}
module: norm
phases: [decode]
stages:
  - stage: norm
    operator: {operator}
    phase: decode
  - stage: tail
    operator: plain-torch
    torch: "y = x + 1"
"""

TREE = """\
kind: tree
name: test-tree
title: {{en: Test tree, zh: 测试树}}
summary: {{en: A tree for tests., zh: 测试用决策树。}}
root: first
nodes:
  - id: first
    key: kind
    question: {{en: Which kind?, zh: 哪一种？}}
    options:
      - value: a
        label: A
        chain: {chain}
      - value: b
        label: B
        operators: [npu_test_op]
"""

#: The prerequisite vocabulary shared by all chains; a new id is a deliberate decision.
PREREQUISITES = {
    "rope-precompute", "contiguous-kv-cache", "paged-kv-cache", "causal-mask-2048",
    "absorbed-weights", "nz-weights", "kv-quant-scales", "int32-expert-ids", "moe-tp-group",
    "ep-groups", "mc2-group", "mc2-experts-per-rank", "quant-scales-float",
    "smooth-scales-complete", "merged-gate-up", "memory-bound-profile", "prefetch-switch",
    "multi-stream", "graph-dependency",
}  # fmt: skip


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return open_catalog()


def test_dangling_chain_stage_is_reported_with_file_and_line(
    record_tree: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    chain = CHAIN.format(operator="npu_tset_op")
    root = record_tree({"operators/npu_test_op.yaml": operator_yaml(),
                        "chains/test-chain.yaml": chain})  # fmt: skip
    assert main(["validate"]) == 2
    out = capsys.readouterr().out
    line = line_of(chain, "operator: npu_tset_op")
    expected = (f"{root / 'chains/test-chain.yaml'}:{line}:15: stages[0].operator: "
                "'npu_tset_op' names no record (did you mean npu_test_op?)")  # fmt: skip
    assert expected in out
    assert out.rstrip().endswith("1 problem(s)")


def test_dangling_tree_leaf_is_reported_with_file_and_line(
    record_tree: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    tree = TREE.format(chain="test-chian")
    root = record_tree({"operators/npu_test_op.yaml": operator_yaml(),
                        "chains/test-chain.yaml": CHAIN.format(operator="npu_test_op"),
                        "trees/test-tree.yaml": tree})  # fmt: skip
    assert main(["validate"]) == 2
    out = capsys.readouterr().out
    line = line_of(tree, "chain: test-chian")
    assert (f"{root / 'trees/test-tree.yaml'}:{line}:16: nodes[0].options[0].chain: "
            "'test-chian' names no record (did you mean test-chain?)") in out  # fmt: skip


def test_tree_leaf_naming_the_wrong_kind(record_tree: Callable[..., Path]) -> None:
    root = record_tree({"operators/npu_test_op.yaml": operator_yaml(),
                        "trees/test-tree.yaml": TREE.format(chain="npu_test_op")})  # fmt: skip
    (problem,) = load_store(root).problems
    assert "nodes[0].options[0].chain: 'npu_test_op' is a operator, expected chain" in str(problem)


def test_tree_goto_to_a_missing_node(record_tree: Callable[..., Path]) -> None:
    tree = TREE.format(chain="test-chain").replace("chain: test-chain", "goto: nowhere")
    root = record_tree({"operators/npu_test_op.yaml": operator_yaml(),
                        "trees/test-tree.yaml": tree})  # fmt: skip
    (problem,) = load_store(root).problems
    assert "goes to unknown node 'nowhere'" in str(problem)


def test_valid_fixture_tree_walks_to_its_chain(
    record_tree: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    record_tree({"operators/npu_test_op.yaml": operator_yaml(),
                 "chains/test-chain.yaml": CHAIN.format(operator="npu_test_op"),
                 "trees/test-tree.yaml": TREE.format(chain="test-chain")})  # fmt: skip
    assert main(["advise", "test-tree", "--kind", "a", "--format", "json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert [c["name"] for c in result["chains"]] == ["test-chain"]
    assert result["operators"]["npu_test_op"]["products"] == ["atlas-a2"]


def test_shipped_records_have_no_problems_but_pending_operators() -> None:
    problems = [p for p in load_store(records_dir()).problems if "names no record" not in p.message]
    assert problems == []


def _paths(tree: dict[str, Any]) -> Iterator[dict[str, str]]:
    """Every complete answer set of a tree (depth-first over options)."""
    nodes = {n["id"]: n for n in tree["nodes"]}

    def go(node_id: str, answers: dict[str, str]) -> Iterator[dict[str, str]]:
        node = nodes[node_id]
        for opt in node["options"]:
            here = answers | {node["key"]: opt["value"]}
            if opt.get("goto"):
                yield from go(opt["goto"], here)
            else:
                yield here

    yield from go(tree["root"], {})


def test_every_path_of_every_shipped_tree_ends_in_advice_or_a_verdict(catalog: Catalog) -> None:
    trees = list(catalog.records("tree"))
    assert {t["name"] for t in trees} >= {"attention", "moe", "kv-cache", "prefetch-placement"}
    for tree in trees:
        for answers in _paths(tree):
            walked = walk(tree, answers)
            assert walked.ignored == []
            if walked.stop:
                assert walked.steps[-1].note, (tree["name"], answers)
                continue
            assert walked.chains() or walked.operators(), (tree["name"], answers)
            for name in walked.chains():
                assert (catalog.get(name) or {}).get("kind") == "chain", name


def test_stage_arguments_are_real_parameters_with_allowed_values(catalog: Catalog) -> None:
    for chain in catalog.records("chain"):
        for stage in chain["stages"]:
            if stage["operator"] == "plain-torch":
                assert stage["torch"], (chain["name"], stage["stage"])
                continue
            op = catalog.get(stage["operator"])
            if op is None:
                assert not stage.get("args"), f"{chain['name']}: args on a missing operator"
                continue
            params = {p["name"]: p for p in op["parameters"]}
            for arg, value in (stage.get("args") or {}).items():
                where = f"{chain['name']} {stage['stage']} {stage['operator']}.{arg}"
                assert arg in params, f"{where}: not a parameter"
                allowed = params[arg].get("allowed")
                assert allowed is None or value in allowed, f"{where}={value!r} not in {allowed}"
            if stage.get("phase", "both") != "both" and op.get("phases"):
                assert stage["phase"] in op["phases"], f"{chain['name']} {stage['stage']}"


def test_chains_share_one_prerequisite_vocabulary(catalog: Catalog) -> None:
    used: dict[str, set[str]] = {}
    for chain in catalog.records("chain"):
        for p in chain["prerequisites"]:
            used.setdefault(p["id"], set()).add(chain["name"])
    assert set(used) <= PREREQUISITES, set(used) - PREREQUISITES
    assert {"rope-precompute", "paged-kv-cache", "nz-weights", "absorbed-weights"} <= set(used)


def test_issue_chains_exist(catalog: Catalog) -> None:
    expected = {
        "gqa-prefill-contiguous", "gqa-decode-contiguous", "gqa-prefill-paged", "gqa-decode-paged",
        "mla-absorb-prefill", "mla-absorb-decode", "mla-indexer-sparse", "mla-indexer-sparse-c8",
        "moe-gate-softmax", "moe-gate-sigmoid", "moe-tp-routing",
        "moe-ep-prefill-alltoall", "moe-ep-decode-mc2", "moe-ep-decode-mc2-add-rms-norm",
        "moe-w8a8-experts", "dense-gated-ffn", "residual-norm", "rope-precompute",
        "kv-cache-contiguous", "kv-cache-paged", "prefetch-dense-mlp", "prefetch-attention-weights",
        "prefetch-moe-experts",
    }  # fmt: skip
    assert expected <= set(catalog.names("chain"))


@pytest.mark.parametrize(
    ("query", "name"),
    [
        ("mla decode sparse", "mla-indexer-sparse"),
        ("moe ep decode", "moe-ep-decode-mc2"),
        ("预取大小", "prefetch"),
        ("分页 kv cache", "kv-cache-paged"),
        ("softmax gate", "moe-gate-softmax"),
    ],
)
def test_chains_trees_and_playbook_are_searchable(
    capsys: pytest.CaptureFixture[str], query: str, name: str
) -> None:
    assert main(["search", query, "--limit", "3", "--format", "json"]) == 0
    hits = [r["name"] for r in json.loads(capsys.readouterr().out)["results"]]
    assert name in hits, hits
