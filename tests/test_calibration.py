"""Issue 11's false-positive classes: working production calls must not be errors.

Each test states a call shape real ports write (vllm-ascend, the cann-recipes ports)
and fails on the checker as it was before the calibration.  The records here are small
fixtures (tests/fixtures/calibration_records) so the expectations do not move when
the shipped records grow; a few tests also pin the shipped records' facts.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kb.api.check import Finding, check_text
from kb.catalog.compiled import Catalog, open_catalog
from kb.core.paths import PACKAGE_DIR
from kb.vocab import normalize, normalize_scheme, product_support, schemes_compatible

RECORDS = Path(__file__).parent / "fixtures" / "calibration_records"


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return open_catalog(RECORDS)


def _check(
    catalog: Catalog, body: str, product: str = "atlas-a3", extra: str = ""
) -> list[Finding]:
    text = f"version: 1\ntarget: {{product: {product}{extra}}}\ncandidates:\n{body}"
    return check_text(text, "c.yaml", catalog=catalog)


def _codes(findings: list[Finding], severity: str | None = None) -> list[str]:
    return [f.code for f in findings if severity is None or f.severity == severity]


# -- class 1: list values -----------------------------------------------------------------


def test_list_arguments_compare_as_whole_lists(catalog: Catalog) -> None:
    ok = _check(
        catalog,
        "  - module: m\n    operator: npu_transpose_batchmatmul\n"
        "    args: {perm_x1: [1, 0, 2], perm_x2: [0, 1, 2], perm_y: [1, 0, 2]}\n",
    )
    assert _codes(ok) == []
    bad = _check(
        catalog,
        "  - module: m\n    operator: npu_transpose_batchmatmul\n    args: {perm_x1: [0, 2, 1]}\n",
    )
    assert _codes(bad) == ["KB106"] and "[0, 1, 2] or [1, 0, 2]" in bad[0].message


# -- class 2: dtype-valued arguments -------------------------------------------------------


@pytest.mark.parametrize(
    "spelling",
    ["torch.int32", "int32", "torch_npu.int32", 3, "'torch.bfloat16'", "bf16", 15, "torch.float16"],
)
def test_dtype_arguments_take_every_spelling(catalog: Catalog, spelling: object) -> None:
    body = (
        f"  - module: m\n    operator: npu_quant_matmul\n    args: {{output_dtype: {spelling}}}\n"
    )
    assert _codes(_check(catalog, body)) == []


def test_dtype_arguments_still_judge_the_dtype(catalog: Catalog) -> None:
    wrong = _check(
        catalog,
        "  - module: m\n    operator: npu_quant_matmul\n"
        "    args: {output_dtype: torch.float8_e4m3fn}\n",
    )
    assert _codes(wrong) == ["KB106"] and "float8_e4m3fn is not allowed" in wrong[0].message
    nonsense = _check(
        catalog, "  - module: m\n    operator: npu_quant_matmul\n    args: {output_dtype: banana}\n"
    )
    assert _codes(nonsense) == ["KB106"] and "is not a dtype" in nonsense[0].message


def test_dtype_codes_are_the_scalar_type_and_torch_npu_values() -> None:
    assert normalize("dtype", 15) == normalize("dtype", "torch.bfloat16") == "bfloat16"
    assert normalize("dtype", 292) == normalize("dtype", 24) == "float8_e4m3fn"
    assert normalize("dtype", "torch_npu.hifloat8") == normalize("dtype", 290) == "hifloat8"
    assert normalize("dtype", 296) == "float4_e2m1fn_x2"


def test_shipped_dtype_arguments_are_canonical() -> None:
    shipped = open_catalog(PACKAGE_DIR / "records")
    qmm = {p["name"]: p for p in shipped.get("npu_quant_matmul")["parameters"]}  # type: ignore[index]
    assert qmm["output_dtype"]["takes"] == "dtype"
    assert qmm["output_dtype"]["allowed"] == [
        None,
        "int8",
        "float16",
        "bfloat16",
        "int32",
        "float32",
    ]
    mx = {p["name"]: p for p in shipped.get("npu_dynamic_mx_quant")["parameters"]}  # type: ignore[index]
    assert "float8_e4m3fn" in mx["dst_type"]["allowed"]


# -- class 3: one meaning per quantization scheme --------------------------------------------


def test_schemes_are_defined_once_and_compared_on_the_roles_an_operator_handles() -> None:
    assert normalize_scheme("MXFP8 + kv_fp8") == "mxfp8+kv-fp8"
    assert schemes_compatible("w8a8c8", "w8a8-dynamic", {"weights", "activations"})
    assert schemes_compatible("w8a8-static", "bf16", {"kv_cache"})  # attention in a w8a8 model
    assert not schemes_compatible("w8a8-static", "w8a16", {"weights", "activations"})
    # a calibrated per-tensor activation scale is not a per-token one computed at run time
    assert not schemes_compatible("w8a8-static", "w8a8-dynamic", {"weights", "activations"})
    assert schemes_compatible("w8a8-static", "w8a8-dynamic", {"weights"})
    assert not schemes_compatible("fp8", "mxfp8", {"weights"})  # other scales, other kernels


def test_mla_prolog_full_int8_is_w8a8_dynamic_like_gmm(catalog: Catalog) -> None:
    body = (
        "  - module: attn\n    operator: npu_mla_prolog_v3\n    quantization: w8a8-dynamic\n"
        "    args: {weight_quant_mode: 2, cache_mode: BSND}\n"
        "  - module: experts\n    operator: npu_grouped_matmul\n    quantization: w8a8-dynamic\n"
    )
    assert _codes(_check(catalog, body)) == []


def test_a_c8_model_runs_gmm_and_attention_modes_that_fit_its_roles(catalog: Catalog) -> None:
    body = (
        "  - module: experts\n    operator: npu_grouped_matmul\n    quantization: w8a8c8\n"
        "  - module: attn\n    operator: npu_fused_infer_attention_score_v2\n"
        "    quantization: w8a8c8\n"
        "  - module: prolog\n    operator: npu_mla_prolog_v3\n    quantization: w8a8c8\n"
        "    args: {weight_quant_mode: 2, kv_cache_quant_mode: 1, cache_mode: BSND}\n"
    )
    assert _codes(_check(catalog, body)) == []


def test_gmm_int32_output_feeding_dequant_swiglu_is_a_w8a8_dynamic_path(catalog: Catalog) -> None:
    body = (
        "  - module: experts.gate_up\n    operator: npu_quant_matmul\n    quantization: w8a8-dynamic\n"
        "    args: {output_dtype: torch.int32}\n"
    )
    assert _codes(_check(catalog, body)) == []


def test_a_scheme_the_operator_cannot_serve_is_still_an_error(catalog: Catalog) -> None:
    body = "  - module: experts\n    operator: npu_grouped_matmul\n    quantization: mxfp8\n"
    assert _codes(_check(catalog, body)) == ["KB203"]


# -- class 4: products ---------------------------------------------------------------------


def test_absent_product_is_a_warning_and_explicit_refusal_an_error(catalog: Catalog) -> None:
    body = "  - module: m\n    operator: npu_rotary_mul\n"
    found = _check(catalog, body, "atlas-inference")
    assert [(f.code, f.severity) for f in found] == [("KB208", "warning")]
    refused = _check(
        catalog, "  - module: m\n    operator: npu_dual_level_quant_matmul\n", "atlas-a2"
    )
    assert [(f.code, f.severity) for f in refused] == [("KB201", "error")]


def test_product_sub_series_are_their_own_ids(catalog: Catalog) -> None:
    body = "  - module: m\n    operator: npu_rotary_mul\n"
    assert _codes(_check(catalog, body, "atlas-a3")) == []  # the family: part of it documented
    assert _codes(_check(catalog, body, "atlas-a3-training")) == []
    assert _codes(_check(catalog, body, "atlas-a3-inference")) == ["KB208"]
    assert product_support("atlas-a2-inference", ["atlas-a2"]) == "yes"
    assert normalize("product", "Atlas A2 推理系列产品") == "atlas-a2-inference"


# -- class 6: binding names and legacy spellings ---------------------------------------------


def test_python_keyword_input_binds_to_schema_self(catalog: Catalog) -> None:
    body = "  - module: m\n    operator: npu_rotary_mul\n    tensors:\n      input: {dtype: int8}\n"
    found = _check(catalog, body, "atlas-a2-training")
    assert _codes(found) == ["KB107"]  # judged as `self`, reported where `input` is written
    assert (found[0].line, found[0].column) == (7, 22)  # the dtype value under `input`


def test_legacy_spellings_upstream_maps_are_not_errors(catalog: Catalog) -> None:
    body = "  - module: m\n    operator: npu_rotary_mul\n    args: {rotary_mode: HALF}\n"
    assert _codes(_check(catalog, body, "atlas-a2-training")) == []


# -- class 7: phases document, restrictions restrict ---------------------------------------------


def test_documented_phases_do_not_restrict(catalog: Catalog) -> None:
    body = "  - module: m\n    phase: prefill\n    operator: npu_transpose_batchmatmul\n"
    assert _codes(_check(catalog, body)) == []


# -- class 8: graph mode per candidate or phase, reserved parameters ----------------------------


def test_graph_mode_applies_per_phase(catalog: Catalog) -> None:
    extra = ", graph_mode: {prefill: eager, decode: aclgraph}"
    prefill = "  - module: m\n    phase: prefill\n    operator: npu_rotary_mul\n"
    decode = "  - module: m\n    phase: decode\n    operator: npu_rotary_mul\n"
    assert _codes(_check(catalog, prefill, "atlas-a2-training", extra)) == []
    assert _codes(_check(catalog, decode, "atlas-a2-training", extra)) == ["KB206"]
    own = "  - module: m\n    phase: decode\n    graph_mode: eager\n    operator: npu_rotary_mul\n"
    assert _codes(_check(catalog, own, "atlas-a2-training", extra)) == []


def test_reserved_parameter_set_warns(catalog: Catalog) -> None:
    body = "  - module: m\n    operator: npu_convert_weight_to_int4pack\n    args: {inner_k_tiles: 8}\n"
    assert [(f.code, f.severity) for f in _check(catalog, body)] == [("KB111", "warning")]
    default = "  - module: m\n    operator: npu_convert_weight_to_int4pack\n    args: {inner_k_tiles: 0}\n"
    assert _codes(_check(catalog, default)) == []


# -- class 9: arguments passed without a literal value ----------------------------------------


def test_passed_arguments_count_as_given(catalog: Catalog) -> None:
    body = (
        "  - module: m\n    operator: npu_mla_prolog_v3\n    args: {cache_mode: PA_BSND}\n"
        "    passed: [cache_index, token_x]\n"
    )
    assert _codes(_check(catalog, body)) == []
    unstated = "  - module: m\n    operator: npu_mla_prolog_v3\n    args: {cache_mode: PA_BSND}\n"
    assert _codes(_check(catalog, unstated)) == ["KB110"]
