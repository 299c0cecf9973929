"""Chains and trees: cross-references resolve, every path ends well, the cross-check holds.

The cross-check (``kb validate``) runs the real ``kb check`` rules on every chain stage
and every tree verdict; these tests pin its behaviour on small record trees and on the
shipped records.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kb.advice.advise import walk
from kb.catalog.compiled import Catalog, open_catalog
from kb.catalog.store import load_store
from kb.cli import main
from kb.core.paths import records_dir
from tests.conftest import operator_yaml

SOURCE = """\
sources:
  - model: Test-Model
    repo: example/port
    commit: 0123456789abcdef0123456789abcdef01234567
    path: model.py
    lines: 10-20
    shows: the call in the port.
"""

CHAIN = """\
kind: chain
name: test-chain
title: {{en: Test chain, zh: 测试链路}}
summary: {{en: A chain for tests., zh: 测试用链路。}}
module: norm
phases: [decode]
products: [atlas-a2]
stages:
  - stage: norm
    operator: {operator}
    phase: decode
{extra}  - stage: tail
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
    "rope-precompute",
    "contiguous-kv-cache",
    "paged-kv-cache",
    "causal-mask-2048",
    "absorbed-weights",
    "nz-weights",
    "kv-quant-scales",
    "int32-expert-ids",
    "moe-tp-group",
    "ep-groups",
    "mc2-group",
    "mc2-experts-per-rank",
    "quant-scales-float",
    "smooth-scales-complete",
    "merged-gate-up",
    "memory-bound-profile",
    "prefetch-switch",
    "multi-stream",
    "graph-dependency",
    "linear-attention-state",
    "tp-groups",
    "static-shapes",
    "cu-seqlens",
    "int4-weight-pack",
    "w8a8-static-weights",
    "timestep-modulation",
}


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def chain_yaml(operator: str = "npu_test_op", extra: str = "", sources: bool = True) -> str:
    return CHAIN.format(operator=operator, extra=extra) + (SOURCE if sources else "")


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return open_catalog()


def validate(capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["validate"])
    return code, capsys.readouterr().out


def test_dangling_chain_stage_is_reported_with_file_and_line(
    record_tree: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    chain = chain_yaml("npu_tset_op")
    root = record_tree(
        {"operators/npu_test_op.yaml": operator_yaml(), "chains/test-chain.yaml": chain}
    )
    code, out = validate(capsys)
    assert code == 2
    line = line_of(chain, "operator: npu_tset_op")
    expected = (
        f"{root / 'chains/test-chain.yaml'}:{line}:15: stages[0].operator: "
        "'npu_tset_op' names no record (did you mean npu_test_op?)"
    )
    assert expected in out
    assert out.rstrip().endswith("1 problem(s)")


def test_dangling_tree_leaf_is_reported_with_file_and_line(
    record_tree: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    tree = TREE.format(chain="test-chian")
    root = record_tree(
        {
            "operators/npu_test_op.yaml": operator_yaml(),
            "chains/test-chain.yaml": chain_yaml(),
            "trees/test-tree.yaml": tree,
        }
    )
    code, out = validate(capsys)
    assert code == 2
    line = line_of(tree, "chain: test-chian")
    assert (
        f"{root / 'trees/test-tree.yaml'}:{line}:16: nodes[0].options[0].chain: "
        "'test-chian' names no record (did you mean test-chain?)"
    ) in out


def test_tree_leaf_naming_the_wrong_kind(record_tree: Callable[..., Path]) -> None:
    root = record_tree(
        {
            "operators/npu_test_op.yaml": operator_yaml(),
            "trees/test-tree.yaml": TREE.format(chain="npu_test_op"),
        }
    )
    (problem,) = load_store(root).problems
    assert "nodes[0].options[0].chain: 'npu_test_op' is a operator, expected chain" in str(problem)


def test_tree_goto_to_a_missing_node(record_tree: Callable[..., Path]) -> None:
    tree = TREE.format(chain="test-chain").replace("chain: test-chain", "goto: nowhere")
    root = record_tree(
        {"operators/npu_test_op.yaml": operator_yaml(), "trees/test-tree.yaml": tree}
    )
    (problem,) = load_store(root).problems
    assert "goes to unknown node 'nowhere'" in str(problem)


def test_valid_fixture_tree_walks_to_its_chain(
    record_tree: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    record_tree(
        {
            "operators/npu_test_op.yaml": operator_yaml(),
            "chains/test-chain.yaml": chain_yaml(),
            "trees/test-tree.yaml": TREE.format(chain="test-chain"),
        }
    )
    assert main(["advise", "test-tree", "--kind", "a", "--format", "json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert [c["name"] for c in result["chains"]] == ["test-chain"]
    assert result["operators"]["npu_test_op"]["products"] == ["atlas-a2"]
    assert result["chains"][0]["sources"][0]["lines"] == "10-20"


# ----------------------------------------------------------------------- record contract


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            "    args: {eps: 1.0e-6}\n    passed: {eps: epsilon}\n",
            "given both a literal value (args) and an expression (passed)",
        ),
        ("    passed: {x: None}\n", "passed as None: write them under args with the value null"),
    ],
)
def test_stage_argument_contract(
    record_tree: Callable[..., Path], extra: str, message: str
) -> None:
    chain = chain_yaml().replace(
        "    phase: decode\n  - stage: tail", "    phase: decode\n" + extra + "  - stage: tail"
    )
    root = record_tree(
        {"operators/npu_test_op.yaml": operator_yaml(), "chains/test-chain.yaml": chain}
    )
    (problem,) = load_store(root).problems
    assert message in str(problem)


def test_citation_lines_must_be_a_range(record_tree: Callable[..., Path]) -> None:
    chain = chain_yaml().replace("lines: 10-20", "lines: 20-10")
    root = record_tree(
        {"operators/npu_test_op.yaml": operator_yaml(), "chains/test-chain.yaml": chain}
    )
    (problem,) = load_store(root).problems
    assert "lines '20-10' end before they start" in str(problem)


# ------------------------------------------------------------------------- cross-check


def test_crosscheck_reports_a_stage_the_record_rejects(
    record_tree: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    chain = chain_yaml(extra="").replace(
        "    phase: decode\n  - stage: tail",
        "    phase: decode\n    args: {mode: c}\n  - stage: tail",
    )
    root = record_tree(
        {"operators/npu_test_op.yaml": operator_yaml(), "chains/test-chain.yaml": chain}
    )
    code, out = validate(capsys)
    assert code == 1
    line = line_of(chain, "- stage: norm")
    assert (
        f"{root / 'chains/test-chain.yaml'}:{line}:5: stages[0]: KB106 on atlas-a2 for stage "
        "'norm': mode='c' is not allowed; use one of a, b"
    ) in out


#: An operator whose source refuses atlas-a3 (absence from the product list is only KB208).
REFUSING_OPERATOR = operator_yaml().replace(
    "products: [atlas-a2]",
    "products: [atlas-a2]\nunsupported_products: [atlas-a3]\n"
    "evidence:\n  - {about: [unsupported_products], kind: page, repo: example/kernels,"
    " commit: abc1234, path: docs/op.md, says: The product table marks atlas-a3 unsupported.}",
)


def test_crosscheck_checks_every_product_the_chain_claims(
    record_tree: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    chain = chain_yaml().replace("products: [atlas-a2]", "products: [atlas-a2, atlas-a3]")
    record_tree({"operators/npu_test_op.yaml": REFUSING_OPERATOR, "chains/test-chain.yaml": chain})
    code, out = validate(capsys)
    assert code == 1
    assert (
        "KB201 on atlas-a3 for stage 'norm': npu_test_op is documented as not supported on atlas-a3"
        in out
    )
    assert "on atlas-a2" not in out


def test_waiver_silences_a_known_finding_and_a_stale_one_is_reported(
    record_tree: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    waived = (
        "    waivers:\n      - {code: KB201, product: atlas-a3, reason: product absence}\n"
        "      - {code: KB107, reason: no such finding}\n"
    )
    chain = chain_yaml().replace("products: [atlas-a2]", "products: [atlas-a2, atlas-a3]")
    chain = chain.replace(
        "    phase: decode\n  - stage: tail", "    phase: decode\n" + waived + "  - stage: tail"
    )
    record_tree({"operators/npu_test_op.yaml": REFUSING_OPERATOR, "chains/test-chain.yaml": chain})
    code, out = validate(capsys)
    assert code == 1
    assert "KB201" not in out.split("waiver")[0]
    assert "stages[0].waivers[1]: waiver KB107 matches no finding any more; remove it" in out
    assert out.rstrip().endswith("1 problem(s)")


#: The test operator's kernel, compiled for Atlas A2 and A3 (A3 is kernel-only support).
KERNEL = """\
kernels:
  - op_type: TestOp
    aclnn: aclnnTestOp
    repo: example/kernels
    commit: 0123456789abcdef0123456789abcdef01234567
    path: op_host/test_op_def.cpp
    lines: 10-20
    socs: [ascend910b, ascend910_93]
    products: [atlas-a2, atlas-a3]
    wrapper: {repo: example/plugin, commit: 0123456789abcdef0123456789abcdef01234567,
              path: ops/test_op.cpp, lines: 1-9}
"""
#: Atlas A3 added to the operator's products with the page that documents it.
A3_CITED = (
    "products: [atlas-a2, atlas-a3]\nevidence:\n  - {about: [products], values: [atlas-a3],"
    " kind: page, repo: example/kernels, commit: abc1234, path: docs/op.md,"
    " says: The kernel reference marks atlas-a3 supported.}\n"
)


@pytest.mark.parametrize(
    ("operator", "code"),
    [
        (operator_yaml(), "KB208"),
        (operator_yaml() + KERNEL, "KB209"),
    ],
)
def test_a_chain_claims_no_product_its_stage_is_not_documented_for(
    record_tree: Callable[..., Path], capsys: pytest.CaptureFixture[str], operator: str, code: str
) -> None:
    chain = chain_yaml().replace("products: [atlas-a2]", "products: [atlas-a2, atlas-a3]")
    root = record_tree({"operators/npu_test_op.yaml": operator, "chains/test-chain.yaml": chain})
    code_, out = validate(capsys)
    assert code_ == 1
    line = line_of(chain, "- stage: norm")
    assert (
        f"{root / 'chains/test-chain.yaml'}:{line}:5: stages[0]: {code} on atlas-a3 for stage 'norm'"
        in out
    )
    assert (
        "the chain claims atlas-a3: cite a source for atlas-a3 in the operator record "
        "(evidence, about: [products]) or drop atlas-a3 from the chain's products"
    ) in out
    assert "on atlas-a2" not in out and out.rstrip().endswith("1 problem(s)")


@pytest.mark.parametrize(
    ("operator", "products"),
    [
        # the record gains the product, with its source
        (operator_yaml().replace("products: [atlas-a2]\n", A3_CITED), "[atlas-a2, atlas-a3]"),
        # the chain drops the product
        (operator_yaml() + KERNEL, "[atlas-a2]"),
        # a family claim met by one documented sub-series: silent, as KB208 is in kb check
        (operator_yaml().replace("[atlas-a2]", "[atlas-a2, atlas-a3-training]"), "[atlas-a3]"),
        # no product claimed: the stand-in target is no claim
        (operator_yaml(), "[]"),
    ],
)
def test_a_documented_or_unclaimed_product_passes(
    record_tree: Callable[..., Path],
    capsys: pytest.CaptureFixture[str],
    operator: str,
    products: str,
) -> None:
    chain = chain_yaml().replace("products: [atlas-a2]", f"products: {products}")
    record_tree({"operators/npu_test_op.yaml": operator, "chains/test-chain.yaml": chain})
    code, out = validate(capsys)
    assert code == 0, out


def test_a_stage_limited_to_one_scheme_still_holds_on_every_claimed_product(
    record_tree: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    chain = chain_yaml().replace("products: [atlas-a2]", "products: [atlas-a2, atlas-a3]")
    chain = chain.replace(
        "    phase: decode\n  - stage: tail",
        "    phase: decode\n    quantization: [w8a8-dynamic]\n  - stage: tail",
    )
    record_tree({"operators/npu_test_op.yaml": operator_yaml(), "chains/test-chain.yaml": chain})
    code, out = validate(capsys)
    assert code == 1 and "KB208 on atlas-a3 for stage 'norm'" in out


def test_an_undocumented_product_cannot_be_waived(
    record_tree: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    waived = "    waivers:\n      - {code: KB208, product: atlas-a3, reason: it runs there}\n"
    chain = chain_yaml().replace("products: [atlas-a2]", "products: [atlas-a2, atlas-a3]")
    chain = chain.replace(
        "    phase: decode\n  - stage: tail", "    phase: decode\n" + waived + "  - stage: tail"
    )
    record_tree({"operators/npu_test_op.yaml": operator_yaml(), "chains/test-chain.yaml": chain})
    code, out = validate(capsys)
    assert code == 1
    assert "KB208 on atlas-a3 for stage 'norm'" in out
    assert (
        "stages[0].waivers[0]: KB208 cannot be waived: a chain claims only products its "
        "operators are documented for"
    ) in out


REQUIRING_OPERATOR = operator_yaml().replace(
    "products: [atlas-a2]",
    "products: [atlas-a2]\nrules:\n  - id: mode-b-needs-eps\n    when: [{arg: mode, equals: b}]\n"
    "    require: [eps]\n    message: Mode b needs eps.",
)


@pytest.mark.parametrize(("passed", "problems"), [("", 1), ("    passed: {eps: epsilon}\n", 0)])
def test_crosscheck_asks_for_arguments_a_fired_rule_requires(
    record_tree: Callable[..., Path], capsys: pytest.CaptureFixture[str], passed: str, problems: int
) -> None:
    chain = chain_yaml().replace(
        "    phase: decode\n  - stage: tail",
        "    phase: decode\n    args: {mode: b}\n" + passed + "  - stage: tail",
    )
    record_tree({"operators/npu_test_op.yaml": REQUIRING_OPERATOR, "chains/test-chain.yaml": chain})
    code, out = validate(capsys)
    assert code == (1 if problems else 0)
    if problems:
        assert (
            "KB110 on atlas-a2: npu_test_op requires eps here (record rule mode-b-needs-eps: "
            "Mode b needs eps.); pass it in args or passed"
        ) in out


DENYING_TREE = (
    TREE.format(chain="test-chain")
    + """\
      - value: c
        label: C
        note: Mode c does not exist.
        denies:
          - {operator: npu_test_op, args: {mode: MODE}}
"""
)


@pytest.mark.parametrize(("mode", "holds"), [("c", True), ("b", False)])
def test_a_verdict_may_not_deny_what_the_record_allows(
    record_tree: Callable[..., Path], capsys: pytest.CaptureFixture[str], mode: str, holds: bool
) -> None:
    tree = DENYING_TREE.replace("MODE", mode)
    root = record_tree(
        {
            "operators/npu_test_op.yaml": operator_yaml(),
            "chains/test-chain.yaml": chain_yaml(),
            "trees/test-tree.yaml": tree,
        }
    )
    code, out = validate(capsys)
    if holds:
        assert code == 0, out
        return
    assert code == 1
    line = line_of(tree, "- {operator: npu_test_op")
    assert (
        f"{root / 'trees/test-tree.yaml'}:{line}:13: nodes[0].options[2].denies[0]: the note "
        "denies npu_test_op(mode='b') on atlas-a2, but the operator record allows it"
    ) in out


def test_a_path_answer_must_fit_the_chain_it_reaches(
    record_tree: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    tree = (
        TREE.format(chain="test-chain")
        .replace("key: kind", "key: product")
        .replace("value: a", "value: atlas-a3")
    )
    record_tree(
        {
            "operators/npu_test_op.yaml": operator_yaml(),
            "chains/test-chain.yaml": chain_yaml(),
            "trees/test-tree.yaml": tree,
        }
    )
    code, out = validate(capsys)
    assert code == 1
    assert "the path answers --product atlas-a3, but chain test-chain is for atlas-a2" in out


def test_shipped_records_pass_validation_and_the_crosscheck(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["validate", "--records", str(records_dir())]) == 0, capsys.readouterr().out


# ------------------------------------------------------------------------ shipped data


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
    assert {t["name"] for t in trees} >= {
        "attention",
        "moe",
        "kv-cache",
        "prefetch-placement",
        "quantization",
        "graph-mode",
        "tensor-parallel",
    }
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


def test_every_shipped_chain_cites_the_port_it_comes_from(catalog: Catalog) -> None:
    uncited = [c["name"] for c in catalog.records("chain") if not c.get("sources")]
    assert uncited == []


#: The vLLM-Ascend commit whose files ../shared/corpus holds (tests may read it).
CORPUS_COMMIT = "182b75ea84ff13ece27b57391331ef8935410aea"
_ROOT = Path(__file__).resolve().parents[1]
#: ``../shared/corpus`` of the checkout (CI), or of the directory holding a git worktree.
CORPUS = next(
    (
        p / "shared" / "corpus" / "vllm-ascend"
        for p in (_ROOT.parent, _ROOT.parent.parent)
        if (p / "shared" / "corpus" / "vllm-ascend").is_dir()
    ),
    _ROOT.parent / "shared" / "corpus" / "vllm-ascend",
)


def _cited_corpus_ranges(catalog: Catalog) -> Iterator[tuple[str, dict[str, Any], list[str]]]:
    for chain in catalog.records("chain"):
        for src in chain.get("sources") or []:
            path = CORPUS / src["path"]
            if (
                src["repo"] == "vllm-project/vllm-ascend"
                and src["commit"] == CORPUS_COMMIT
                and path.is_file()
            ):
                yield chain["name"], src, path.read_text(encoding="utf-8").splitlines()


@pytest.mark.skipif(not CORPUS.is_dir(), reason="the shared corpus is not present")
def test_citations_into_the_corpus_point_at_the_code_they_describe(catalog: Catalog) -> None:
    """Every cited range exists, and mentions an operator of the chain or a name it quotes."""
    checked = 0
    for name, src, lines in _cited_corpus_ranges(catalog):
        first, _, last = src["lines"].partition("-")
        lo, hi = int(first), int(last or first)
        assert hi <= len(lines), f"{name}: {src['path']} has {len(lines)} lines, not {hi}"
        text = "\n".join(lines[lo - 1 : hi])
        chain = catalog.get(name) or {}
        names = {st["operator"] for st in chain["stages"] if st["operator"] != "plain-torch"}
        names |= {w for w in src["shows"].replace(",", " ").split() if "_" in w.strip(".()")}
        assert any(n.strip(".()") in text for n in names), (name, src["path"], src["lines"])
        checked += 1
    assert checked >= 10


def test_chains_share_one_prerequisite_vocabulary(catalog: Catalog) -> None:
    used: dict[str, set[str]] = {}
    for chain in catalog.records("chain"):
        for p in chain["prerequisites"]:
            used.setdefault(p["id"], set()).add(chain["name"])
    assert set(used) <= PREREQUISITES, set(used) - PREREQUISITES
    assert {"rope-precompute", "paged-kv-cache", "nz-weights", "absorbed-weights"} <= set(used)


def test_dequant_swiglu_quant_stages_activate_the_left_half(catalog: Catalog) -> None:
    """Every port sets activate_left=True; the default would gate the wrong half."""
    stages = [
        st
        for c in catalog.records("chain")
        for st in c["stages"]
        if st["operator"] == "npu_dequant_swiglu_quant"
    ]
    assert stages and all(st["args"].get("activate_left") is True for st in stages)


def test_issue_chains_exist(catalog: Catalog) -> None:
    expected = {
        "gqa-prefill-contiguous",
        "gqa-decode-contiguous",
        "gqa-prefill-paged",
        "gqa-decode-paged",
        "gqa-prefill-chunked",
        "gqa-sinks-paged",
        "gqa-fp8-kv-cache",
        "mla-absorb-prefill",
        "mla-absorb-decode",
        "mla-absorb-decode-split",
        "mla-prolog-absorbed",
        "mla-indexer-sparse",
        "mla-indexer-sparse-c8",
        "mla-contiguous-cache",
        "gdn-prefill-chunked",
        "gdn-decode-recurrent",
        "moe-gate-softmax",
        "moe-gate-softmax-bias",
        "moe-gate-sigmoid",
        "moe-tp-routing",
        "moe-tp-routing-v1-glu",
        "moe-ep-prefill-alltoall",
        "moe-ep-decode-mc2",
        "moe-ep-decode-mc2-add-rms-norm",
        "moe-ep-allgather",
        "moe-w8a8-experts",
        "dense-gated-ffn",
        "dense-gated-ffn-w8a8",
        "residual-norm",
        "rope-precompute",
        "kv-cache-contiguous",
        "kv-cache-paged",
        "prefetch-dense-mlp",
        "prefetch-attention-weights",
        "prefetch-moe-experts",
        "quant-w8a8-dynamic-linear",
        "quant-w8a16-linear",
        "quant-w4a16-moe",
        "quant-w4a8-moe",
        "quant-mxfp8-linear",
        "norm-quant-static",
        "norm-quant-dynamic",
        "norm-quant-mxfp8",
        "tp-row-parallel-fusion",
        "multistream-overlap",
        "graph-mode-torchair",
        "graph-mode-aclgraph",
    }
    assert expected <= set(catalog.names("chain"))


@pytest.mark.parametrize(
    ("query", "name"),
    [
        ("mla decode sparse", "mla-indexer-sparse"),
        ("moe ep decode", "moe-ep-decode-mc2"),
        ("预取大小", "prefetch"),
        ("分页 kv cache", "kv-cache-paged"),
        ("softmax gate chain", "moe-gate-softmax"),  # a chain asked for: operators lead otherwise
        ("linear attention prefill chain", "gdn-prefill-chunked"),
        ("attention sinks sliding window", "gqa-sinks-paged"),
    ],
)
def test_chains_trees_and_playbook_are_searchable(
    capsys: pytest.CaptureFixture[str], query: str, name: str
) -> None:
    assert main(["search", query, "--limit", "3", "--format", "json"]) == 0
    hits = [r["name"] for r in json.loads(capsys.readouterr().out)["results"]]
    assert name in hits, hits


def test_chain_schema_names_the_structured_citation_and_waiver_fields() -> None:
    """Editors validate chains against the exported schema; it must know the new fields."""
    schema = json.loads((Path(__file__).parents[1] / "schema" / "chain.schema.json").read_text())
    assert {"Citation", "Waiver", "StageTensor"} <= set(schema.get("$defs", {}))
    stage = schema["$defs"]["Stage"]["properties"]
    assert {"passed", "tensors", "waivers", "quantization"} <= set(stage)
