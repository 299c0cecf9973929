"""kb.catalog.consistency: cross-field checks that keep corrected facts corrected.

Every test writes small records into a temporary tree and runs the real validation
(:func:`kb.catalog.store.load_store`), so the messages carry file and line as ``kb validate``
prints them.  Each case has a clean twin: the check must fire on the defect only.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from kb.catalog.consistency import replacement_operator
from kb.catalog.store import load_store

HEAD = """\
kind: operator
name: {name}
calls: [torch_npu.{name}]
status: {status}
category: attention
summary: {{en: A test operator., zh: 测试算子。}}
description: A test operator.
"""

PARAMS = """\
signature: {name}(Tensor query, *, int mask_type=5, int? out_dtype=None) -> Tensor
parameters:
  - name: query
    type: Tensor
  - name: mask_type
    type: int
    required: false
    default: "5"
    keyword_only: true
  - name: out_dtype
    type: int?
    required: false
    default: None
    keyword_only: true
"""

CITE = """\
  - about: [{about}]
    kind: {kind}
    repo: Ascend/op-plugin
    commit: 517f2e7d0f20
    path: op_plugin/ops/atb/Example.cpp
    lines: "10-12"
    says: The source states it.
"""


def record(name: str, status: str = "stable", body: str = "", params: bool = True) -> str:
    text = HEAD.format(name=name, status=status)
    if params:
        text += PARAMS.format(name=name)
    return text + textwrap.dedent(body)


def cite(about: str, kind: str = "source") -> str:
    return "evidence:\n" + CITE.format(about=about, kind=kind)


def problems(tmp_path: Path, **records: str) -> list[str]:
    for name, text in records.items():
        (tmp_path / f"{name}.yaml").write_text(text, encoding="utf-8")
    return [str(p) for p in load_store(tmp_path).problems]


def only(found: list[str], *needles: str) -> None:
    """Exactly these problems: each needle is in exactly one of them."""
    assert len(found) == len(needles), found
    for needle in needles:
        assert sum(needle in problem for problem in found) == 1, (needle, found)


# -- deprecation and successors -------------------------------------------------------


DEP_V3 = (
    "upstream:\n  deprecation:\n    listed_in: [deprecated.yaml, page]\n    replace: npu_x_v3\n"
)


def test_superseded_by_must_be_the_replacement_deprecated_yaml_names(tmp_path: Path) -> None:
    v2 = record("npu_x_v2")
    v3 = record("npu_x_v3")
    wrong = record("npu_x", "deprecated", DEP_V3 + "superseded_by: npu_x_v2\n")
    only(
        problems(tmp_path, npu_x=wrong, npu_x_v2=v2, npu_x_v3=v3),
        "npu_x.yaml:26:16: superseded_by: upstream names npu_x_v3 as the replacement",
    )
    right = record("npu_x", "deprecated", DEP_V3 + "superseded_by: npu_x_v3\n")
    assert problems(tmp_path, npu_x=right) == []


def test_named_replacement_cannot_be_left_out(tmp_path: Path) -> None:
    note = record("npu_x", "deprecated", DEP_V3 + "replacement_note: Use something.\n")
    only(
        problems(tmp_path, npu_x=note, npu_x_v3=record("npu_x_v3")),
        "upstream.deprecation.replace: upstream names npu_x_v3",
    )


def test_status_follows_upstream_deprecation(tmp_path: Path) -> None:
    only(
        problems(tmp_path, npu_x=record("npu_x", "deprecated", "replacement_note: Use torch.\n")),
        "status: deprecated, but upstream.deprecation is empty",
    )
    only(
        problems(tmp_path, npu_x=record("npu_x", "stable", DEP_V3.replace("npu_x_v3", "torch.mm"))),
        "deprecated.yaml and page deprecate(s) this operator",
    )


def test_a_successor_upstream_does_not_name_needs_evidence(tmp_path: Path) -> None:
    v2 = record("npu_y_v2", body="supersedes: [npu_y]\n")
    invented = record("npu_y", body="superseded_by: npu_y_v2\n")
    only(
        problems(tmp_path, npu_y=invented, npu_y_v2=v2),
        "superseded_by: no upstream statement names npu_y_v2 as the successor",
    )
    cited = record("npu_y", body=cite("superseded_by", "page") + "superseded_by: npu_y_v2\n")
    assert problems(tmp_path, npu_y=cited) == []


def test_a_stale_predecessor_list_is_reported(tmp_path: Path) -> None:
    v2 = record("npu_y_v2", body="supersedes: [npu_y]\n")
    only(
        problems(tmp_path, npu_y=record("npu_y"), npu_y_v2=v2),
        "npu_y_v2.yaml",
    )
    assert "npu_y names None as its successor" in problems(tmp_path)[0]


def test_replacement_operator_reads_upstream_spellings() -> None:
    assert replacement_operator("torch_npu.npu_iou") == "npu_iou"
    assert replacement_operator("npu_mla_prolog_v3") == "npu_mla_prolog_v3"
    assert replacement_operator("torch.nn.functional.silu") is None
    assert replacement_operator("torch.bmm and torch.view") is None
    assert replacement_operator(None) is None


# -- facts without a page need a citation ---------------------------------------------------


def test_unsupported_products_need_a_page_mark_or_evidence(tmp_path: Path) -> None:
    bare = record("npu_z", body="unsupported_products: [atlas-a2]\n")
    only(
        problems(tmp_path, npu_z=bare),
        "unsupported_products[0]: atlas-a2 is not marked unsupported",
    )
    marked = record(
        "npu_z",
        body="unsupported_products: [atlas-a2]\nupstream:\n  unsupported_products: [atlas-a2]\n",
    )
    assert problems(tmp_path, npu_z=marked) == []
    other = cite("unsupported_products").replace("  - about", "  - values: [atlas-a3]\n    about")
    partly = record("npu_z", body="unsupported_products: [atlas-a2]\n" + other)
    only(problems(tmp_path, npu_z=partly), "atlas-a2 is not marked unsupported")


def test_phase_limit_needs_evidence(tmp_path: Path) -> None:
    only(
        problems(tmp_path, npu_z=record("npu_z", body="phase_limit: [decode]\n")),
        "phase_limit[0]: phase_limit decode: cite where upstream restricts",
    )
    cited = record("npu_z", body="phase_limit: [decode]\n" + cite("phase_limit", "page"))
    assert problems(tmp_path, npu_z=cited) == []


def test_legacy_spellings_need_evidence(tmp_path: Path) -> None:
    body = record("npu_z").replace(
        '    default: "5"\n', '    default: "5"\n    allowed: [5]\n    also_accepted: [3]\n'
    )
    only(problems(tmp_path, npu_z=body), "parameters[1].also_accepted: also_accepted of mask_type")
    cited = body + cite("parameters.mask_type.also_accepted")
    assert problems(tmp_path, npu_z=cited) == []


def test_undocumented_facts_cite_their_source(tmp_path: Path) -> None:
    facts = record("_npu_w", "undocumented").replace(
        "  - name: query\n    type: Tensor\n",
        "  - name: query\n    type: Tensor\n    dtypes: [float16]\n    formats: [ND]\n",
    )
    found = problems(tmp_path, _npu_w=facts + "products: [atlas-inference]\n")
    only(
        found,
        "parameters[0].dtypes: query.dtypes: _npu_w has no page",
        "parameters[0].formats",
        "products: _npu_w has no page",
    )
    cited = facts + "products: [atlas-inference]\n" + cite("parameters.query, products", "source")
    assert problems(tmp_path, _npu_w=cited) == []
    narrow = facts + cite("parameters.query.dtypes", "source")
    only(problems(tmp_path, _npu_w=narrow), "parameters[0].formats")


@pytest.mark.parametrize("kind", ["test", "shipping-code"])
def test_a_limit_rests_on_more_than_a_tests_inputs(tmp_path: Path, kind: str) -> None:
    """What a test or a caller passes is one use: a dtype list, a format list or a rule
    backed by nothing else would reject the next caller's bfloat16."""
    facts = record("_npu_w", "undocumented").replace(
        "  - name: query\n    type: Tensor\n",
        "  - name: query\n    type: Tensor\n    dtypes: [float16]\n    formats: [ND]\n",
    )
    rule = "rules:\n  - id: nd-only\n    formats: {query: [ND]}\n    message: ND only.\n"
    usage = facts + rule + cite("parameters.query, rules.nd-only", kind)
    only(
        problems(tmp_path, _npu_w=usage),
        "parameters[0].dtypes: query.dtypes rests only on a test",
        "parameters[0].formats: query.formats rests only",
        "rule nd-only rests only",
    )
    # the same facts with a wrapper check (or a page, a kernel registration) beside the test
    checked = usage + CITE.format(about="parameters.query, rules.nd-only", kind="source")
    assert problems(tmp_path, _npu_w=checked) == []
    # a documented record: the page backs its lists unless evidence names the list itself
    page = record("npu_v").replace(
        "  - name: query\n    type: Tensor\n",
        "  - name: query\n    type: Tensor\n    dtypes: [float16]\n",
    )
    other = tmp_path / "documented"
    other.mkdir()
    assert problems(other, npu_v=page + cite("parameters.query", kind)) == []
    only(
        problems(other, npu_v=page + cite("parameters.query.dtypes", kind)),
        "query.dtypes rests only",
    )


def test_undocumented_lists_stay_inside_the_values_evidence_names(tmp_path: Path) -> None:
    body = (
        record("_npu_m", "undocumented").replace(
            '    default: "5"\n', '    default: "5"\n    allowed: [5]\n'
        )
        + "products: [atlas-inference]\n"
    )
    named = (
        cite("parameters.mask_type")
        + "    values: [5]\n"
        + CITE.format(about="products", kind="test")
        + "    values: [atlas-inference]\n"
    )
    assert problems(tmp_path, _npu_m=body + named) == []
    widened = body.replace("allowed: [5]", "allowed: [0, 5]").replace(
        "products: [atlas-inference]", "products: [atlas-inference, atlas-a2]"
    )
    only(
        problems(tmp_path, _npu_m=widened + named),
        "parameters[1].allowed: parameters.mask_type.allowed lists [0]",
        "products: products lists ['atlas-a2']",
    )
    # a citation without values backs the whole list
    assert problems(tmp_path, _npu_m=widened + cite("parameters.mask_type, products")) == []


def test_evidence_names_fields_that_exist(tmp_path: Path) -> None:
    only(
        problems(tmp_path, npu_z=record("npu_z", body=cite("parameters.key"))),
        "evidence[0].about[0]: npu_z has no parameter 'key'",
    )
    only(
        problems(tmp_path, npu_z=record("npu_z", body=cite("rules.no-such-rule"))),
        "npu_z has no rule 'no-such-rule'",
    )
    only(
        problems(tmp_path, npu_z=record("npu_z", body=cite("description"))),
        "evidence[0].about: evidence cannot be about ['description']",
    )


# -- values stay inside what the parameters allow -----------------------------------------------


def _allowed(values: str) -> str:
    return record("npu_v").replace(
        '    default: "5"\n', f'    default: "5"\n    allowed: {values}\n'
    )


def test_schema_default_is_an_allowed_value(tmp_path: Path) -> None:
    assert problems(tmp_path, npu_v=_allowed("[5]")) == []
    only(
        problems(tmp_path, npu_v=_allowed("[3]")),
        "parameters[1].allowed: the schema default of mask_type (5) is not among",
    )
    said = _allowed("[3]") + cite("parameters.mask_type.default", "page")
    assert problems(tmp_path, npu_v=said) == []


def test_rules_and_modes_stay_inside_allowed_values(tmp_path: Path) -> None:
    rules = """\
    rules:
      - id: odd
        when: [{arg: mask_type, equals: 4}]
        values: {mask_type: [7]}
        message: Use 7.
    quantization:
      - scheme: w8a8-static
        select: {mask_type: 6}
    """
    found = problems(tmp_path, npu_v=_allowed("[5]") + textwrap.dedent(rules))
    only(
        found,
        "rules[0].values.mask_type: rule odd allows [7]",
        "rules[0].when: rule odd conditions on mask_type = [4]",
        "quantization[0].select.mask_type: mode w8a8-static selects mask_type=6",
    )


EXAMPLE = """\
examples:
  - title: call
    code: |
      import torch, torch_npu
      torch_npu.npu_v(q, mask_type={value}, out_dtype=torch.bfloat16)
"""


@pytest.mark.parametrize(("value", "bad"), [("5", False), ("3", True)])
def test_examples_pass_allowed_keyword_values(tmp_path: Path, value: str, bad: bool) -> None:
    text = _allowed("[5]").replace(
        "    default: None\n", "    default: None\n    takes: dtype\n    allowed: [bfloat16]\n"
    )
    found = problems(tmp_path, npu_v=text + EXAMPLE.format(value=value))
    if bad:
        only(found, "examples[0].code: example line 2: mask_type=3 is not an allowed value")
    else:
        assert found == []


def test_examples_use_real_keywords(tmp_path: Path) -> None:
    text = record("npu_v") + EXAMPLE.format(value="5").replace("mask_type", "mask_kind")
    only(problems(tmp_path, npu_v=text), "example line 2: npu_v has no keyword 'mask_kind'")


def test_scheme_dtypes_rest_on_more_than_a_test(tmp_path: Path) -> None:
    body = record("_npu_q", "undocumented") + (
        "quantization:\n  - scheme: w8a8-static\n    tensors: {query: [int8]}\n"
    )
    only(
        problems(tmp_path, _npu_q=body + cite("quantization", "test")),
        "quantization: the quantization schemes' tensor dtypes rest only on a test",
    )
    assert problems(tmp_path, _npu_q=body + cite("quantization", "source")) == []
