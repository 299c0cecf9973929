"""Issue 32's facts stay as the binding runs them, with the page's claim noted beside them.

Each test pins one corrected fact of the records records (its citation is in the record)
and, where a call shape ships, runs it through ``kb check``: a working call is no error,
the page's spelling that fails in the wrapper is one.
"""

from __future__ import annotations

from typing import Any

import pytest
from test_shipped_facts import _param, _rec

from kb.api.check import check_text
from kb.catalog.compiled import Catalog, open_catalog
from kb.core.paths import PACKAGE_DIR


@pytest.fixture(scope="module")
def records() -> Catalog:
    return open_catalog(PACKAGE_DIR / "records")


def _rule(rec: dict[str, Any], rule_id: str) -> dict[str, Any]:
    return next(r for r in rec.get("rules") or [] if r["id"] == rule_id)


def _noted(rec: dict[str, Any], about: str) -> dict[str, Any]:
    return next(d for d in rec.get("discrepancies") or [] if d["about"] == about)


def _found(records: Catalog, product: str, body: str) -> list[tuple[str, str]]:
    text = f"version: 1\ntarget: {{product: {product}}}\ncandidates:\n{body}"
    return [(f.code, f.severity) for f in check_text(text, "c.yaml", catalog=records)]


def _errors(records: Catalog, product: str, body: str) -> list[str]:
    return [code for code, severity in _found(records, product, body) if severity == "error"]


def test_mrope_takes_the_wrappers_spelling(records: Catalog) -> None:
    rec = _rec(records, "npu_mrope")
    assert _param(rec, "rotary_mode")["allowed"] == ["half", "interleave"]
    assert _noted(rec, "parameters.rotary_mode.allowed")["page"] == ["half", "interleaved"]
    call = "  - module: attn.rope\n    operator: npu_mrope\n    args: {rotary_mode: %s}\n"
    assert _errors(records, "atlas-a2", call % "interleave") == []
    # the page's spelling runs on the 7.x releases (their check holds for every string) and
    # vLLM-Ascend ships it, so it is a warning citing that code, not an error
    assert ("KB121", "warning") in _found(records, "atlas-a2", call % "interleaved")
    assert _errors(records, "atlas-a2", call % "interleaved") == []
    assert _errors(records, "atlas-a2", call % "spiral") == ["KB106"]


def test_giou_is_what_its_wrapper_accepts(records: Catalog) -> None:
    rec = _rec(records, "npu_giou")
    assert [s["dims"] for s in _param(rec, "self")["shapes"]] == ["[4, N]"]
    assert _param(rec, "trans")["allowed"] == [True]
    assert _param(rec, "is_cross")["allowed"] == [False] and _param(rec, "mode")["allowed"] == [0]
    assert [s["dims"] for s in rec["returns"][0]["shapes"]] == ["[N, 1]"]
    assert {d["about"] for d in rec["discrepancies"]} >= {"parameters.self.shapes", "returns.giou"}
    assert "torch.rand(4, 128" in rec["examples"][0]["code"]


def test_pfa_high_precision_modes_and_the_inference_token_rule(records: Catalog) -> None:
    rec = _rec(records, "npu_prompt_flash_attention")
    assert {10, 11, 12, 13, 14} <= set(_param(rec, "sparse_mode")["allowed"])
    assert set(_rule(rec, "inference-series-limits")["values"]) == {
        "sparse_mode",
        "num_key_value_heads",
    }
    assert _noted(rec, "rules.inference-series-limits")["source"]["kind"] == "kernel"
    # a 300I port's call: float16, band tokens 65535 and sparse_mode 0
    call = (
        "  - module: attn\n    operator: npu_prompt_flash_attention\n"
        "    args: {num_heads: 32, scale_value: 0.088, pre_tokens: 65535, next_tokens: 65535,"
        " input_layout: BNSD, sparse_mode: 0}\n"
        "    tensors:\n      query: {dtype: float16}\n"
    )
    assert _errors(records, "atlas-inference", call) == []
    assert _errors(records, "atlas-a2", call.replace("sparse_mode: 0", "sparse_mode: 10")) == []


def test_fusion_attention_on_a2_a3_and_without_a_mask(records: Catalog) -> None:
    rec = _rec(records, "npu_fusion_attention")
    assert {"atlas-a2", "atlas-a3"} <= set(rec["products"])
    assert _rule(rec, "sparse-modes-need-mask")["severity"] == "warning"
    assert _param(rec, "keep_prob")["range"]["min_open"] is True
    call = (
        "  - module: attn\n    phase: prefill\n    operator: npu_fusion_attention\n"
        "    args: {head_num: 8, input_layout: TND, sparse_mode: 3}\n"
    )
    found = _found(records, "atlas-a3", call)
    assert not [c for c, s in found if s == "error"]
    assert ("KB208", "warning") not in found
    assert _errors(
        records, "atlas-a3", call.replace("sparse_mode: 3}", "sparse_mode: 3, keep_prob: 0}")
    ) == ["KB106"]


def test_scatter_update_runs_on_inference_cards(records: Catalog) -> None:
    for name in ("scatter_update_", "scatter_update"):
        rec = _rec(records, name)
        assert "atlas-inference" in rec["products"], name
    call = "  - module: kv\n    operator: scatter_update_\n    args: {axis: -2}\n"
    assert ("KB208", "warning") not in _found(records, "atlas-inference", call)


def test_settings_the_binding_drops_are_warnings(records: Catalog) -> None:
    assert _rule(_rec(records, "_npu_index_add"), "alpha-ignored")["severity"] == "warning"
    gmm_add = (
        "  - module: experts.wgrad\n    operator: npu_grouped_matmul_add_\n"
        "    args: {group_list_type: 1}\n"
    )
    assert _found(records, "atlas-a3", gmm_add) == [("KB112", "warning")]
    assert _found(records, "ascend-950", gmm_add) == []  # 950 passes group_list_type on


def test_swiglu_has_no_bfloat16_on_inference_cards(records: Catalog) -> None:
    call = "  - module: mlp.act\n    operator: npu_swiglu\n    tensors:\n      self: {dtype: %s}\n"
    assert _errors(records, "atlas-inference", call % "bfloat16")
    assert not _errors(records, "atlas-inference", call % "float16")
    assert not _errors(records, "atlas-a2", call % "bfloat16")


def test_required_arguments_the_schema_leaves_optional(records: Catalog) -> None:
    for name in ("npu_chunk_gated_delta_rule", "npu_recurrent_gated_delta_rule"):
        assert _rule(_rec(records, name), "scale-required")["require"] == ["scale"]
    for name in ("npu_alltoallv_quant_gmm", "npu_quant_gmm_alltoallv"):
        required = _rule(_rec(records, name), "quant-modes-required")["require"]
        assert required == ["gmm_x_quant_mode", "gmm_weight_quant_mode"]


def test_linear_kernel_lists_stay_per_chip(records: Catalog) -> None:
    kernel = _rec(records, "npu_linear")["kernels"][0]
    groups = {tuple(g["socs"]): g["inputs"] for g in kernel["inputs"]}
    a2 = next(v for k, v in groups.items() if "ascend910b" in k)
    assert "ascend310p" not in next(k for k in groups if "ascend910b" in k)
    x1 = [t for t in a2 if t["name"] == "x1"]
    assert len(x1) == 1 and "BF16" in x1[0]["dtypes"]


def test_dequant_rope_quant_kvcache_example_fits_the_wrapper(records: Catalog) -> None:
    rec = _rec(records, "npu_dequant_rope_quant_kvcache")
    assert [s["dims"] for s in _param(rec, "x")["shapes"]] == ["[B, S, H]", "[B, H]"]
    code = rec["examples"][0]["code"]
    assert "(bsz, seq, hidden)" in code and "hidden = (q_heads + 2 * kv_heads) * d" in code


def test_audit_fixes_stay(records: Catalog) -> None:
    # a value the page says has no effect is a warning, not an error
    axis = _rule(_rec(records, "npu_add_rms_norm_quant"), "axis-minus-one")
    assert axis["severity"] == "warning"
    assert _param(_rec(records, "npu_add_rms_norm_quant"), "axis").get("allowed") is None
    # dtypes a page mentions in passing are no limit
    assert not _param(_rec(records, "npu_format_cast"), "self").get("dtypes")
    # ranges with single values beside the span
    count = _rule(_rec(records, "npu_lightning_indexer"), "sparse-count-values")["ranges"][
        "sparse_count"
    ]
    assert (count["max"], count["also"]) == (2048, [3072, 4096, 5120, 6144, 7168, 8192])
    call = "  - module: idx\n    operator: npu_lightning_indexer\n    args: {sparse_count: %d}\n"
    assert _errors(records, "atlas-a3", call % 4096) == [] and _errors(
        records, "atlas-a3", call % 3000
    )
    grouped = _rec(records, "npu_grouped_dynamic_mx_quant")
    assert _rule(grouped, "e2m1-type-max")["ranges"]["dst_type_max"]["min"] == 6.0


def test_quant_gmm_alltoallv_takes_the_wrappers_mx_mode_and_world_sizes(records: Catalog) -> None:
    """The docstring names quant mode 1 only and writes 6 among the world sizes; the
    wrapper runs an MX mode 6 and checks a set with 8 (read from ``SET.find(x)``)."""
    rec = _rec(records, "npu_quant_gmm_alltoallv")
    assert _param(rec, "gmm_x_quant_mode")["allowed"] == [1, 6]
    assert _noted(rec, "parameters.ep_world_size.allowed")["page"][2] == 6
    head = "  - module: experts.down\n    operator: npu_quant_gmm_alltoallv\n"
    mx = (
        head + "    args: {gmm_x_quant_mode: 6, gmm_weight_quant_mode: 6, ep_world_size: 8,"
        " gmm_x_scale_dtype: float8_e8m0fnu}\n"
        "    tensors:\n      gmm_x: {dtype: float8_e4m3fn}\n"
        "      gmm_x_scale: {dtype: float8_e8m0fnu}\n"
    )
    assert _errors(records, "ascend-950", mx) == []
    tt = head + "    args: {gmm_x_quant_mode: 1, gmm_weight_quant_mode: 1, ep_world_size: %d}\n"
    assert _errors(records, "ascend-950", tt % 8) == []
    assert _errors(records, "ascend-950", tt % 6) == ["KB106"]
    wrong = mx.replace("float8_e4m3fn}", "hifloat8}")  # mode 6 with mode 1's data type
    assert _errors(records, "ascend-950", wrong) == ["KB109"]  # the mx-scheme rule


def test_a_page_value_the_binding_refuses_is_explained(records: Catalog) -> None:
    """The page's spelling is refused with the page named as the one in error and the
    binding's file cited, so the message does not read as the knowledge base being wrong."""
    text = (
        "version: 1\ntarget: {product: atlas-a2}\ncandidates:\n"
        "  - module: boxes\n    operator: npu_giou\n    args: {mode: 1}\n"
        "  - module: attn.rope2\n    operator: npu_mrope\n    args: {rotary_mode: spiral}\n"
    )
    found = {
        f.candidate: f.message
        for f in check_text(text, "c.yaml", catalog=records)
        if f.code == "KB106"
    }
    assert "the page lists 1, but op-plugin's wrapper refuses it" in found[0]
    assert "Ascend/op-plugin@517f2e7 op_plugin/ops/aclops/GiouKernelNpu.cpp" in found[0]
    assert "page" not in found[1]  # a value nobody documents gets the plain message
