"""Knowledge added for issue 31 item 5, through ``kb advise --no-input``: integer W4A4 on
Atlas A2/A3, KDA (per-channel decay) kept off the Gated DeltaNet kernels' per-head form,
dual-level MXFP4 beside single-level MXFP4 on Ascend 950."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kb.cli import main


def advise(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main(["advise", *argv, "--no-input", "--format", "json"])
    return code, json.loads(capsys.readouterr().out)


def stage(result: dict[str, Any], operator: str) -> dict[str, Any]:
    return next(
        st
        for c in result["chains"] + result["alternatives"]
        for st in c["stages"]
        if st["operator"] == operator
    )


@pytest.mark.parametrize("product", ["atlas-a2", "atlas-a3"])
def test_w4a4_on_atlas_a2_a3_is_the_int4_chain(capsys, product: str) -> None:
    code, out = advise(capsys, "quantization", "--product", product, "--quant", "w4a4")
    assert code == 0 and [c["name"] for c in out["chains"]] == ["quant-w4a4-dynamic-linear"]
    assert stage(out, "npu_dynamic_quant")["args"]["dst_type"] == "torch.quint4x2"
    assert "npu_dynamic_mx_quant" not in out["operators"]


def test_kda_decode_passes_the_per_channel_decay_as_gk_and_no_g(capsys) -> None:
    code, out = advise(
        capsys, "attention", "--arch", "linear", "--variant", "kda", "--phase", "decode"
    )
    assert code == 0
    call = stage(out, "npu_recurrent_gated_delta_rule")
    assert "gk" in call["passed"] and "g" not in call["passed"] and call["args"]["g"] is None


def test_kda_prefill_never_gets_the_per_head_chunk_kernel(capsys) -> None:
    code, out = advise(
        capsys, "attention", "--arch", "linear", "--variant", "kda", "--phase", "prefill"
    )
    assert code == 0 and out["outcome"] == "stop"
    assert "npu_chunk_gated_delta_rule" not in out["operators"]
    assert "per-head g" in out["verdict"]


def test_gated_deltanet_stays_the_common_case(capsys) -> None:
    code, out = advise(capsys, "attention", "--arch", "linear", "--phase", "prefill")
    assert code == 0 and [c["name"] for c in out["chains"]] == ["gdn-prefill-chunked"]
    assert [a["flag"] for a in out["assumed"]] == ["--variant"]


def test_dual_level_mxfp4_is_offered_beside_single_level(capsys) -> None:
    code, out = advise(capsys, "quantization", "--product", "ascend-950", "--quant", "mxfp4")
    assert code == 0 and [c["name"] for c in out["chains"]] == ["quant-mxfp4-linear"]
    alternatives = [c["name"] for c in out["alternatives"]]
    assert "quant-mxfp4-dual-level-linear" in alternatives
    matmul = stage(out, "npu_dual_level_quant_matmul")
    assert {"x1_level0_scale", "x2_level0_scale", "x1_level1_scale", "x2_level1_scale"} <= set(
        matmul["passed"]
    )
