"""Issue 11's fact defects stay fixed in the shipped records.

Each test pins one corrected fact (the evidence for it is cited in the record itself);
kb validate keeps the general contract (kb/catalog/consistency.py), these keep the specific
values.  The checker tests at the end run shipping call shapes against the shipped
catalog: they must not be errors.
"""

from __future__ import annotations

from typing import Any

import pytest

from kb.api.check import check_text
from kb.catalog.compiled import Catalog, open_catalog
from kb.core.paths import PACKAGE_DIR


@pytest.fixture(scope="module")
def shipped() -> Catalog:
    return open_catalog(PACKAGE_DIR / "records")


def _rec(shipped: Catalog, name: str) -> dict[str, Any]:
    rec = shipped.get(name)
    assert rec is not None, name
    return rec


def _param(rec: dict[str, Any], name: str) -> dict[str, Any]:
    return next(p for p in rec["parameters"] if p["name"] == name)


def _rules(rec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in rec.get("rules") or []}


def _texts(rec: dict[str, Any]) -> str:
    return "\n".join(c["text"] for c in rec.get("constraints") or [])


def test_atb_310p_attention_facts(shipped: Catalog) -> None:
    for name, mask_type in (
        ("_npu_flash_attention_v3", 3),
        ("_npu_paged_attention_splitfuse_v2", 5),
    ):
        rec = _rec(shipped, name)
        assert rec["products"] == ["atlas-inference"]
        assert _param(rec, "mask_type")["allowed"] == [mask_type]
        # the float16 of op-plugin's tests is one tested use, not a limit (issue 20)
        assert not _param(rec, "query")["dtypes"]
        assert "float16" in _texts(rec)


def test_successors_follow_deprecated_yaml(shipped: Catalog) -> None:
    assert _rec(shipped, "npu_mla_prolog")["superseded_by"] == "npu_mla_prolog_v3"
    for name in ("npu_kv_rmsnorm_rope_cache", "npu_fused_causal_conv1d", "npu_fusion_attention"):
        assert not _rec(shipped, name).get("superseded_by"), name


def test_fia_layout_and_quant_caveats(shipped: Catalog) -> None:
    v1 = _rec(shipped, "npu_fused_infer_attention_score")
    assert "BNSD_NBSD only for 1 < Q_S <= 16" in _texts(v1)
    tnd = _rules(v1)["tnd-needs-seq-lengths"]["when"][0]["in"]
    assert "NTD" not in tnd
    v2 = _rec(shipped, "npu_fused_infer_attention_score_v2")
    assert "ascend-950" in v2["products"]
    assert 6 in _param(v2, "query_quant_mode")["allowed"]
    assert 8 in _param(v2, "value_quant_mode")["allowed"]
    assert not _param(v2, "quant_scale_p").get("reserved")
    assert {"fp8+kv-fp8", "mxfp8+kv-fp8"} <= {
        m["scheme"] + ("+" + m["kv"] if m.get("kv") else "") for m in v2["quantization"]
    }
    assert v2["quant_roles"] == ["kv_cache"]


def test_rules_without_upstream_basis_stay_dropped(shipped: Catalog) -> None:
    sfa = _rules(_rec(shipped, "npu_sparse_flash_attention"))
    for rule in sfa.values():
        assert "query_rope" not in (rule.get("dtypes") or {}), rule["id"]


def test_quantization_roles_and_paths(shipped: Catalog) -> None:
    assert _rec(shipped, "npu_dynamic_quant")["quant_roles"] == ["activations"]
    assert _rec(shipped, "npu_scatter_pa_kv_cache")["quant_roles"] == ["kv_cache"]
    gmm = _rec(shipped, "npu_grouped_matmul")
    int32 = [m for m in gmm["quantization"] if m.get("select") == {"output_dtype": "int32"}]
    assert [m["scheme"] for m in int32] == ["w8a8-dynamic"]
    v2 = _rec(shipped, "npu_mla_prolog_v2")
    partial = [m["scheme"] for m in v2["quantization"] if m.get("partial")]
    assert partial == ["w8a8-dynamic", "w8a8c8"]


def test_950_families_are_current(shipped: Catalog) -> None:
    disp = _rec(shipped, "npu_moe_distribute_dispatch_v2")
    assert "ascend-950dt" in disp["products"] and 4 in _param(disp, "quant_mode")["allowed"]
    qmm = _rec(shipped, "npu_quant_matmul")
    assert "float32" in _param(qmm, "output_dtype")["allowed"]
    assert "float8_e8m0fnu" in _param(qmm, "scale")["dtypes"]
    dq = _rec(shipped, "npu_dynamic_quant")
    assert "float8_e4m3fn" in _param(dq, "dst_type")["allowed"]


def test_apis_shipping_code_calls_have_records(shipped: Catalog) -> None:
    for name in (
        "_npu_fused_infer_attention_score_get_max_workspace",
        "_npu_fused_infer_attention_score_v2_get_max_workspace",
        "_npu_paged_attention_get_workspace",
        "get_npu_format",
    ):
        _rec(shipped, name)
    assert _param(_rec(shipped, "get_npu_format"), "self")["python_name"] == "tensor"


def _check(shipped: Catalog, body: str, product: str = "atlas-a3") -> list[str]:
    text = f"version: 1\ntarget: {{product: {product}}}\ncandidates:\n{body}"
    return [f.code for f in check_text(text, "c.yaml", catalog=shipped) if f.severity == "error"]


def test_gmm_int32_into_dequant_swiglu_is_a_w8a8_dynamic_path(shipped: Catalog) -> None:
    body = (
        "  - module: experts.gate_up\n    operator: npu_grouped_matmul\n"
        "    quantization: w8a8-dynamic\n    args: {output_dtype: torch.int32}\n"
        "    tensors:\n      x: {dtype: int8}\n      weight: {dtype: int8}\n"
        "  - module: experts.act\n    operator: npu_dequant_swiglu_quant\n"
        "    quantization: w8a8-dynamic\n    args: {quant_mode: 1}\n"
        "    tensors:\n      x: {dtype: int32}\n"
    )
    assert _check(shipped, body) == []


def test_a5_fp8_mla_decode_attention_is_accepted(shipped: Catalog) -> None:
    # vllm-ascend's A5 MLA decode with FA quantization: float8 query and latent cache
    body = (
        "  - module: attn\n    operator: npu_fused_infer_attention_score_v2\n"
        "    quantization: fp8+kv-fp8\n"
        "    args: {query_quant_mode: 3, key_quant_mode: 0, value_quant_mode: 0}\n"
        "    tensors:\n      query: {dtype: float8_e4m3fn}\n"
        "      dequant_scale_query: {dtype: float32}\n"
    )
    assert _check(shipped, body, "ascend-950") == []
    assert "KB203" in _check(shipped, body, "atlas-a3")


def test_an_mxfp8_model_runs_any_float8_kv_mode_of_the_attention_core(shipped: Catalog) -> None:
    # the attention core only sees the KV cache of the scheme: in an mxfp8+kv-fp8 model the
    # per-token FP8 MLA mode (3/0/0) is as valid as the MX one (6/6/8)
    body = (
        "  - module: attn\n    operator: npu_fused_infer_attention_score_v2\n"
        "    quantization: mxfp8+kv-fp8\n"
        "    args: {query_quant_mode: 3, key_quant_mode: 0, value_quant_mode: 0}\n"
    )
    assert _check(shipped, body, "ascend-950") == []
    int8_cache = body + "    tensors:\n      key: {dtype: int8}\n"
    assert "KB204" in _check(shipped, int8_cache, "ascend-950")  # no float8-KV mode reads int8
