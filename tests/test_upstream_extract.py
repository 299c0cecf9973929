"""Fact extraction: pages, schemas, versions, deprecations, wheel, undocumented set."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixtures.upstream.helpers import FIXTURES, build_wheel, op_plugin_copy

from tools.upstream import schemas as sch
from tools.upstream.docstrings import parse_docstring, product_from_doc
from tools.upstream.facts import load_upstream
from tools.upstream.pages import parse_page
from tools.upstream.text import allowed_values, clean_markdown, dtypes_in, formats_in
from tools.upstream.wheel import WheelError, docstrings_from_python, read_wheel

PAGES = FIXTURES / "op-plugin" / "docs" / "torch_npu"
CONFIG = FIXTURES / "op-plugin" / "config"


# -- text helpers ------------------------------------------------------------------------


def test_clean_markdown_drops_bom_escapes_and_anchors() -> None:
    raw = '\ufeff# torch\\_npu.npu\\_x<a name="ZH-CN_1"></a>\r\nshape \\[B, S\\]'
    assert clean_markdown(raw) == "# torch_npu.npu_x\nshape [B, S]"


def test_dtype_list_after_trigger_in_canonical_ids() -> None:
    text = "数据类型支持`FLOAT16`、`bf16`和`int4`（`int32`），数据格式支持$ND$、NZ。"
    assert dtypes_in(text) == ["float16", "bfloat16", "int4", "int32"]
    assert formats_in(text) == ["ND", "FRACTAL_NZ"]


def test_conditional_dtype_statements_are_not_support_lists() -> None:
    assert dtypes_in("当`x`数据类型为`bfloat16`，`bias`需为`float32`。") == []
    assert dtypes_in("输入数据类型为int8时，输出为float16。") == []
    assert dtypes_in("数据类型与`x1`的数据类型保持一致。") == []


def test_nested_per_product_dtype_list() -> None:
    text = (
        "必选参数。\n- 支持的数据类型如下：\n"
        "    - <term>Atlas A2 训练系列产品</term>：`float16`、`int8`。\n"
        "    - <term>Atlas 推理系列产品</term>：`float32`。\n"
    )
    assert dtypes_in(text) == ["float16", "int8", "float32"]


def test_allowed_values_from_statements_and_tables() -> None:
    assert allowed_values("取值为0或1，默认值为0。", "int") == [0, 1]
    assert allowed_values("取值支持16、32、64。另一产品取值支持8、16。", "int") == [16, 32, 64, 8]
    assert allowed_values("取值范围为[0, 1]。", "int") is None
    assert allowed_values("取值为'ND'或'NZ'", "str") == ["ND", "NZ"]
    table = "| 枚举值 | 说明 |\n| --- | --- |\n| PA/PA_BNSD | 分页 |\n| Norm | 连续 |\n"
    assert allowed_values(table, "str") == ["PA", "PA_BNSD", "Norm"]
    assert allowed_values("取值为0或1", "float") is None


# -- pages -------------------------------------------------------------------------------


def test_page_with_bom_escapes_terms_and_bullets() -> None:
    page = parse_page(PAGES / "torch_npu-npu_fake_norm.md")
    assert page.apis == ["npu_fake_norm"]
    assert not page.beta and page.namespace == "torch_npu"
    # x marks an unsupported row; "Ascend 950PR/Ascend 950DT" is the whole 950 family; a
    # row naming only the A3 training series stays that precise
    assert page.products == ["ascend-950", "atlas-a3-training", "atlas-a2"]
    assert page.unsupported_products == ["atlas-inference"]
    assert page.params["x"].dtypes == ["float16", "bfloat16"]
    assert page.params["x"].formats == ["ND"]
    # per-product sub-bullets are united; the conditional int8 is not a support fact
    assert page.params["gamma"].dtypes == ["float16", "bfloat16", "float32"]
    assert page.params["mode"].allowed("int") == [0, 1]
    assert [r.name for r in page.returns] == ["y", "rstd"]
    assert page.returns[1].dtypes == ["float32"]
    assert page.upstream_path == "docs/zh/custom_APIs/torch_npu/torch_npu-npu_fake_norm.md"


def test_beta_page_with_parameter_table_and_deprecation_note() -> None:
    page = parse_page(PAGES / "beta-torch_npu-npu_fake_cast.md")
    assert page.beta
    assert page.deprecated and page.replacement_hint == "torch_npu.npu_fake_norm"
    assert page.params["input"].type_text == "Tensor"
    assert page.params["input"].dtypes == ["float16", "int8"]
    assert page.params["input"].formats == ["ND", "FRACTAL_NZ"]
    assert page.products == ["atlas-a2-training", "atlas-training"]
    assert page.unsupported_products == []
    # a local copy's ASCII name is cited by upstream's name, so the citation resolves there
    assert page.upstream_path == "docs/zh/custom_APIs/torch_npu/（beta）torch_npu-npu_fake_cast.md"
    assert page.url.endswith("/torch_npu/%EF%BC%88beta%EF%BC%89torch_npu-npu_fake_cast.md")


def test_beta_page_under_upstreams_own_name(tmp_path: Path) -> None:
    copy = tmp_path / "（beta）torch_npu-npu_fake_cast.md"
    copy.write_text(
        (PAGES / "beta-torch_npu-npu_fake_cast.md").read_text(encoding="utf-8"), encoding="utf-8"
    )
    page = parse_page(copy)
    assert page.beta and page.apis == ["npu_fake_cast"]
    assert page.upstream_path == "docs/zh/custom_APIs/torch_npu/（beta）torch_npu-npu_fake_cast.md"


def test_page_documenting_two_apis_and_bold_paragraph_layout() -> None:
    page = parse_page(PAGES / "torch_npu-npu_fake_scatter.md")
    assert page.apis == ["npu_fake_scatter", "npu_fake_scatter_"]
    assert page.params["input"].dtypes == ["bfloat16", "float16", "int8"]
    assert page.params["indices"].dtypes == ["int32", "int64"]
    assert page.params["updates"].dtypes == []
    assert page.prototype_args("npu_fake_scatter_") == ["input", "indices", "updates"]


def test_torch_npu_namespace_page() -> None:
    page = parse_page(PAGES / "torch_npu-fake_limit.md")
    assert page.apis == ["fake_limit"] and page.call("fake_limit") == "torch.npu.fake_limit"


# -- schemas -----------------------------------------------------------------------------


def test_version_ranges_expand_against_all_version() -> None:
    allv = ["v2.1", "v2.2", "v2.3", "v2.4"]
    assert sch.expand_versions("all_version", allv) == allv
    assert sch.expand_versions(["v2.2", "newest"], allv) == ["v2.2", "v2.3", "v2.4"]
    assert sch.expand_versions([" v2.1", "v2.2 "], allv) == ["v2.1", "v2.2"]
    assert sch.expand_versions("v2.3", allv) == ["v2.3"]
    assert sch.expand_versions("v2.1, v2.3", allv) == ["v2.1", "v2.3"]
    assert sch.expand_versions({"exec": "x"}, allv) is None


def test_op_plugin_functions_versions_and_exposed() -> None:
    entries, allv = sch.parse_op_plugin_functions((CONFIG / "op_plugin_functions.yaml").read_text())
    index = sch.SchemaIndex(entries, allv)
    assert index.versions("npu_fake_norm", "") == ["2.2", "2.3", "2.4"]
    # implemented on every line, but public (exposed) only from 2.2
    assert index.versions("npu_fake_cast", "") == ["2.2", "2.3", "2.4"]
    assert index.versions("npu_fake_scatter", "") == ["2.3"]
    # exposed on 2.1 only in one section, unrestricted in the other: the union counts
    assert index.versions("npu_fake_undoc", "") == ["2.1", "2.2", "2.3", "2.4"]


def test_schema_priority_and_out_overloads(tmp_path: Path) -> None:
    up = load_upstream(FIXTURES / "op-plugin", build_wheel(tmp_path))
    chosen = up.schemas.choose("npu_fake_norm")
    assert chosen is not None and chosen.source == sch.OP_PLUGIN_FUNCTIONS
    assert chosen.text.startswith("npu_fake_norm(Tensor x, Tensor gamma, *, int mode=0")
    codegen = up.schemas.choose("npu_fake_codegen_only")
    assert codegen is not None and codegen.source == sch.CODEGEN
    atb = up.schemas.choose("_npu_fake_paged")
    assert atb is not None and atb.source == sch.ATB_SCHEMAS
    assert atb.text == (
        "_npu_fake_paged(Tensor query, Tensor key_cache, int ? block_size = 128, "
        "Tensor(a!) out, *,Tensor? workspace=None) -> ()"
    )
    assert up.schemas.choose("npu_fake_outonly") is None


def test_deprecated_yaml_skips_out_only_entries() -> None:
    dep = sch.parse_deprecated((CONFIG / "deprecated.yaml").read_text())
    assert set(dep) == {"npu_fake_cast"}
    assert dep["npu_fake_cast"].replacement == "torch_npu.npu_fake_norm"


# -- wheel -------------------------------------------------------------------------------


def test_wheel_zip_dir_and_extracted_folder(tmp_path: Path) -> None:
    zipped = read_wheel(build_wheel(tmp_path))
    assert zipped.codegen_yaml and "npu_fake_codegen_only" in zipped.codegen_yaml
    assert set(zipped.docstrings) == {"npu_fake_undoc"}
    installed = tmp_path / "site-packages" / "torch_npu"
    (installed / "csrc" / "aten").mkdir(parents=True)
    (installed / "csrc/aten/npu_native_functions_by_codegen.yaml").write_text(
        (FIXTURES / "wheel/npu_native_functions_by_codegen.yaml").read_text()
    )
    (installed / "_op_plugin_docs.py").write_text(
        (FIXTURES / "wheel/_op_plugin_docs.py").read_text()
    )
    for path in (installed, installed.parent):
        got = read_wheel(path)
        assert got.codegen_yaml and set(got.docstrings) == {"npu_fake_undoc"}
    extracted = tmp_path / "extracted"
    extracted.mkdir()
    (extracted / "npu_native_functions_by_codegen.yaml").write_text("custom: []\n")
    (extracted / "op_docstrings.json").write_text('{"npu_a": "doc"}')
    assert read_wheel(extracted).docstrings == {"npu_a": "doc"}
    with pytest.raises(WheelError):
        read_wheel(tmp_path / "nothing-here")


def test_docstrings_are_read_without_executing_the_module() -> None:
    source = 'raise SystemExit("must not run")\n_add_torch_npu_docstr("npu_a", """doc a""")\n'
    assert docstrings_from_python(source) == {"npu_a": "doc a"}


def test_docstring_facts() -> None:
    doc = (FIXTURES / "wheel/_op_plugin_docs.py").read_text()
    text = docstrings_from_python(doc)["npu_fake_undoc"]
    facts = parse_docstring(text, ["x", "cache", "group"])
    assert facts.params["x"].dtypes == ["float16", "bfloat16"]
    assert facts.params["cache"].formats == ["ND"]
    assert facts.products == ["atlas-a2"]
    assert facts.unknown_products == ["Atlas A5 训练系列产品"]
    assert product_from_doc("Atlas A3训练系列产品") == "atlas-a3-training"
    lines = ["支持的型号", "A2训练、推理系列产品", "Ascend 950PR/950DT", ""]
    spelled = parse_docstring("\n".join(lines), [])
    assert spelled.products == ["atlas-a2", "ascend-950"] and not spelled.unknown_products


# -- merged facts and the undocumented set -----------------------------------------------


@pytest.mark.parametrize("real_layout", [False, True])
def test_both_checkout_layouts(tmp_path: Path, real_layout: bool) -> None:
    up = load_upstream(op_plugin_copy(tmp_path, real_layout=real_layout))
    assert sorted(up.page_apis()) == [
        "fake_limit",
        "npu_fake_cast",
        "npu_fake_norm",
        "npu_fake_scatter",
        "npu_fake_scatter_",
    ]
    assert up.schemas.choose("npu_fake_norm") is not None


def test_operator_facts_merge(tmp_path: Path) -> None:
    up = load_upstream(FIXTURES / "op-plugin", build_wheel(tmp_path))
    cast = up.facts("npu_fake_cast")
    assert cast is not None and cast.status == "deprecated" and cast.beta
    assert cast.replacement == "torch_npu.npu_fake_norm"
    # the page calls it "input", the schema "self": mapped by prototype position
    assert cast.params["self"].dtypes == ["float16", "int8"]
    scatter_ = up.facts("npu_fake_scatter_")
    assert scatter_ is not None and scatter_.status == "stable"
    assert scatter_.calls == ["torch_npu.npu_fake_scatter_", "torch.ops.npu.npu_fake_scatter_"]
    limit = up.facts("fake_limit")
    assert limit is not None and limit.schema is None and limit.calls == ["torch.npu.fake_limit"]
    undoc = up.facts("npu_fake_undoc")
    assert undoc is not None and undoc.status == "undocumented" and undoc.docstring
    assert undoc.products == ["atlas-a2"]
    assert undoc.params["x"].dtypes == ["float16", "bfloat16"]


def test_undocumented_selection_rule(tmp_path: Path) -> None:
    up = load_upstream(FIXTURES / "op-plugin", build_wheel(tmp_path))
    included, excluded = up.undocumented()
    assert sorted(included) == [
        "_npu_fake_paged",
        "_npu_fake_paged_get_workspace",  # workspace helpers are called by graph-capture code
        "get_npu_format",  # public without the npu_ prefix; get_storage_size is not
        "npu_fake_codegen_only",
        "npu_fake_undoc",
    ]
    reasons = {e.name: e.reason for e in excluded}
    assert "get_storage_size" not in reasons
    assert reasons["npu_fake_undoc_backward"] == "backward or gradient kernel"
    assert reasons["npu_fake_undoc_functional"].startswith("_functional twin")
    assert reasons["_npu_fake_codegen_only"] == "private twin of npu_fake_codegen_only"
    assert reasons["npu_fake_outonly"] == "only an out overload has a schema"
    assert reasons["npu_fake_noschema"].startswith("registered in atb_ops.yaml")
    assert reasons["npu_fake_noschema_out"] == "out variant"


def test_string_values_defined_one_after_another_are_a_closed_set() -> None:
    text = "可选参数，`plain`表示逐元素计算，`wide`代表按块计算。默认值为`plain`。"
    assert allowed_values(text, "str?", "style") == ["plain", "wide"]
    assert allowed_values("可选参数，`plain`表示逐元素计算。", "str", "style") is None
    assert allowed_values(text, "int", "style") is None
