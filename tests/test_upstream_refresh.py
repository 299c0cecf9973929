"""Refresh: fact fields follow upstream, curated words and layout stay byte for byte."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest
import yaml
from fixtures.upstream.helpers import FIXTURES

from kb.catalog.store import load_store
from tools.upstream.cli import main
from tools.upstream.yamltext import PatchError, dump_record, update_text

CURATED = """\
kind: operator
name: npu_fake_norm
calls: [torch_npu.npu_fake_norm]   # hand-kept call list
status: stable
category: norm
summary:
  en: Normalizes x with gamma after an add (curated words).
  zh: 我们自己写的摘要。
description: >
  A curated paragraph that a person wrote. It spans
  two lines and must survive every refresh unchanged.
keywords:
  en: [fake norm]
  zh: [测试]
fuses: [rms_norm]
signature: npu_fake_norm(Tensor x, Tensor gamma, float epsilon=1e-06) -> (Tensor, Tensor)
parameters:
  - name: x
    type: Tensor
    description: Curated description of x.
    dtypes: [float16]
    shapes: [{dims: "[T, H]"}]
  # a comment between parameters stays
  - name: gamma
    type: Tensor
    description: Curated description of gamma.
  - name: epsilon
    type: float
    required: false
    default: "1e-06"
    description: Curated description of epsilon.
products:
  - atlas-a2
constraints:
  - text: A hand-written constraint.
    rule: x-half
rules:
  - id: x-half
    when: [{product: [atlas-a2]}]
    dtypes: {x: [float16]}
    message: Use float16 on this product.
examples:
  - title: hand-written example
    code: |
      y, rstd = torch_npu.npu_fake_norm(x, gamma)
upstream:
  path: docs/zh/custom_APIs/torch_npu/torch_npu-npu_fake_norm.md
"""

PROSE_LINES = [
    "  en: Normalizes x with gamma after an add (curated words).",
    "  zh: 我们自己写的摘要。",
    "  A curated paragraph that a person wrote. It spans",
    "  two lines and must survive every refresh unchanged.",
    "    description: Curated description of x.",
    '    shapes: [{dims: "[T, H]"}]',
    "  # a comment between parameters stays",
    "    description: Curated description of gamma.",
    "  - text: A hand-written constraint.",
    "    message: Use float16 on this product.",
    "      y, rstd = torch_npu.npu_fake_norm(x, gamma)",
    "calls: [torch_npu.npu_fake_norm]   # hand-kept call list",
]


@pytest.fixture
def curated(tmp_path: Path) -> Path:
    root = tmp_path / "records"
    path = root / "operators" / "norm" / "npu_fake_norm.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(CURATED, encoding="utf-8")
    return path


def _refresh(root: Path, *extra: str) -> int:
    return main(
        [
            "import",
            "--op-plugin",
            str(FIXTURES / "op-plugin"),
            "--records",
            str(root),
            "--only",
            "npu_fake_norm",
            *extra,
        ]
    )


def test_refresh_updates_facts_only(curated: Path) -> None:
    assert _refresh(curated.parents[2], "--commit", "abc1234") == 0
    text = curated.read_text(encoding="utf-8")
    for line in PROSE_LINES:
        assert line in text.split("\n"), line
    data = yaml.safe_load(text)
    assert data["signature"].startswith("npu_fake_norm(Tensor x, Tensor gamma, *, int mode=0")
    assert [p["name"] for p in data["parameters"]] == ["x", "gamma", "mode", "epsilon"]
    x, gamma, mode, eps = data["parameters"]
    assert x["dtypes"] == ["float16", "bfloat16"] and x["formats"] == ["ND"]
    assert x["description"] == "Curated description of x."
    assert gamma["dtypes"] == ["float16", "bfloat16", "float32"]
    assert mode == {
        "name": "mode",
        "type": "int",
        "required": False,
        "default": "0",
        "keyword_only": True,
        "allowed": [0, 1],
    }
    assert eps["keyword_only"] is True
    assert data["products"] == ["ascend-950", "atlas-a3-training", "atlas-a2"]
    assert data["versions"] == {"pytorch": ["2.2", "2.3", "2.4"]}
    assert data["upstream"]["commit"] == "abc1234"
    assert data["upstream"]["schema_source"] == "op_plugin_functions.yaml"
    untouched = (
        "summary",
        "description",
        "keywords",
        "fuses",
        "constraints",
        "rules",
        "examples",
        "calls",
    )
    before = yaml.safe_load(CURATED)
    assert {k: data[k] for k in untouched} == {k: before[k] for k in untouched}
    assert load_store(curated.parents[2]).ok


def test_refresh_diff_is_minimal(curated: Path) -> None:
    assert _refresh(curated.parents[2]) == 0
    after = curated.read_text(encoding="utf-8").splitlines()
    diff = [line for line in difflib.ndiff(CURATED.splitlines(), after) if line[:2] in ("- ", "+ ")]
    removed = [line[2:] for line in diff if line.startswith("- ")]
    # only fact lines go: the old signature, and the block list of products
    assert removed == [
        "signature: npu_fake_norm(Tensor x, Tensor gamma, float epsilon=1e-06) -> (Tensor, Tensor)",
        "    dtypes: [float16]",
        "products:",
        "  - atlas-a2",
    ]


def test_refresh_is_idempotent(curated: Path) -> None:
    assert _refresh(curated.parents[2]) == 0
    once = curated.read_text(encoding="utf-8")
    assert _refresh(curated.parents[2]) == 0
    assert curated.read_text(encoding="utf-8") == once


def test_no_refresh_and_dry_run_leave_the_file(curated: Path) -> None:
    assert _refresh(curated.parents[2], "--no-refresh") == 0
    assert _refresh(curated.parents[2], "--dry-run") == 0
    assert curated.read_text(encoding="utf-8") == CURATED


def test_dtypes_are_added_never_removed(curated: Path) -> None:
    curated.write_text(
        CURATED.replace("dtypes: [float16]", "dtypes: [float16, int4]"), encoding="utf-8"
    )
    assert _refresh(curated.parents[2]) == 0
    x = yaml.safe_load(curated.read_text(encoding="utf-8"))["parameters"][0]
    assert x["dtypes"] == ["float16", "int4", "bfloat16"]


EVIDENCE = """\
evidence:
  - about: [products]
    values: [atlas-200i-500-a2]
    kind: page
    repo: example/kernels
    commit: abc1234
    path: docs/fake_norm.md
    says: A newer kernel reference lists the 200I/500 A2 series.
"""


@pytest.mark.parametrize("cited", [True, False])
def test_products_evidence_names_survive_a_refresh(curated: Path, cited: bool) -> None:
    text = CURATED.replace("  - atlas-a2\n", "  - atlas-a2\n  - atlas-200i-500-a2\n")
    text = text.replace("upstream:\n", (EVIDENCE if cited else "") + "upstream:\n")
    curated.write_text(text, encoding="utf-8")
    assert _refresh(curated.parents[2]) == 0
    data = yaml.safe_load(curated.read_text(encoding="utf-8"))
    page = ["ascend-950", "atlas-a3-training", "atlas-a2"]
    assert data["products"] == page + (["atlas-200i-500-a2"] if cited else [])
    assert load_store(curated.parents[2]).ok


# -- the text editor itself --------------------------------------------------------------

ORDERS = {(): ["a", "b", "c", "d"], ("items", "*"): ["name", "type", "extra"]}


def test_update_text_inserts_in_order_and_keeps_comments() -> None:
    text = "a: 1  # keep\nc: [x, y]\nitems:\n  - name: p\n    type: T\n"
    new = {
        "a": 1,
        "b": {"k": ["v"]},
        "c": ["x", "y", "z"],
        "items": [{"name": "p", "type": "U", "extra": True}],
    }
    out = update_text(text, new, ORDERS)
    assert out == (
        "a: 1  # keep\nb:\n  k: [v]\nc: [x, y, z]\nitems:\n"
        "  - name: p\n    type: U\n    extra: true\n"
    )


def test_update_text_inserts_after_a_folded_block_scalar() -> None:
    text = "a: >\n  folded words\n  over two lines\n\nc: 1\n"
    out = update_text(text, {"a": "folded words over two lines\n", "b": [1], "c": 1}, ORDERS)
    assert out == "a: >\n  folded words\n  over two lines\nb: [1]\n\nc: 1\n"


def test_update_text_reorders_named_items_reusing_their_text() -> None:
    text = "items:\n  - name: p  # first\n    type: T\n  - name: q\n    type: S\n"
    new = {
        "items": [
            {"name": "q", "type": "S"},
            {"name": "r", "type": "R"},
            {"name": "p", "type": "T"},
        ]
    }
    out = update_text(text, new, ORDERS, {("items",): "name"})
    assert out == (
        "items:\n  - name: q\n    type: S\n  - name: r\n    type: R\n"
        "  - name: p  # first\n    type: T\n"
    )


def test_update_text_flow_mapping_and_deletion() -> None:
    text = "a: {x: 1}\nb: 2\nd: 4\n"
    out = update_text(text, {"a": {"x": 1, "y": "two words"}, "b": 2}, ORDERS)
    assert out == "a: {x: 1, y: two words}\nb: 2\n"


def test_update_text_refuses_what_it_cannot_reproduce() -> None:
    with pytest.raises(PatchError):
        update_text("- just a list\n", {"a": 1}, ORDERS)


def test_dump_record_quotes_what_yaml_would_retype() -> None:
    text = dump_record(
        {
            "versions": {"pytorch": ["2.1", "2.10"]},
            "default": "1e-06",
            "signature": 'f(str m="a") -> Tensor',
            "on": "yes",
        }
    )
    assert yaml.safe_load(text) == {
        "versions": {"pytorch": ["2.1", "2.10"]},
        "default": "1e-06",
        "signature": 'f(str m="a") -> Tensor',
        "on": "yes",
    }


def test_multi_line_strings_are_written_as_literal_blocks() -> None:
    data = {"examples": [{"title": "t", "code": "import torch\n\nx = 1\n"}], "note": "a\nb"}
    text = dump_record(data)
    assert "    code: |\n      import torch\n\n      x = 1\n" in text
    assert "note: |-\n  a\n  b\n" in text
    assert yaml.safe_load(text) == data
    # leading spaces or trailing blanks cannot be literal blocks and stay quoted
    odd = {"a": "  indented\nx\n", "b": "x\n\n"}
    assert yaml.safe_load(dump_record(odd)) == odd and '"' in dump_record(odd)


def test_growing_a_block_list_of_mappings_keeps_it_in_block_style() -> None:
    text = "name: x\nconstraints:\n  - text: one\n  - text: two\n    rule: r\nnote: kept\n"
    data = yaml.safe_load(text)
    data["constraints"].insert(1, {"text": "new one"})
    out = update_text(text, data, {}, {})
    assert out == (
        "name: x\nconstraints:\n  - text: one\n  - text: new one\n  - text: two\n"
        "    rule: r\nnote: kept\n"
    )


def test_long_paragraphs_are_written_folded() -> None:
    words = " ".join(f"word{i}" for i in range(60))
    data = {"description": words + "\n", "short": "one line\n"}
    text = dump_record(data)
    assert text.startswith("description: >\n  word0 word1") and yaml.safe_load(text) == data
    assert max(len(line) for line in text.splitlines()) <= 92
    assert 'short: "one line\\n"' in text  # too short to fold


def test_a_changed_list_keeps_the_text_of_items_that_stay() -> None:
    text = (
        "rules:\n"
        "  - id: a   # hand comment\n"
        "    values: {mode: [0, 3]}\n"
        "  - id: b\n"
        "    when: [{arg: mode, equals: 3}]\n"
        "    values: {other: [1]}\n"
        "note: kept\n"
    )
    data = yaml.safe_load(text)
    data["rules"][1]["values"] = {"other": [1, 2]}
    data["rules"].append({"id": "c", "select": {"x": 1}, "tensors": {"q": ["int8"]}})
    out = update_text(text, data, {}, {})
    assert out == (
        "rules:\n"
        "  - id: a   # hand comment\n"
        "    values: {mode: [0, 3]}\n"
        "  - id: b\n"
        "    when: [{arg: mode, equals: 3}]\n"
        "    values: {other: [1, 2]}\n"
        "  - id: c\n"
        "    select: {x: 1}\n"
        "    tensors: {q: [int8]}\n"
        "note: kept\n"
    )
    assert yaml.safe_load(out) == data
