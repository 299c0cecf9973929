"""The guide's worked port (examples/emulate) matches its original under the emulator, and
each of four classic porting mistakes makes the comparison fail, naming the call.

The mistakes are written here as one-method changes of the port's classes: the GLU
halves swapped in the gate_up weight, the interleaved rotary mode for a rotate-half
model, the causal mask kept on a bidirectional block, the router's renormalisation left
out.  Each must fail in the submodule where it sits, and the report must name the
emulated call made there (operator and file:line).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.emulate_support import torch

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "emulate"


@pytest.fixture(scope="module")
def port(emulation: Any) -> Any:
    sys.path.insert(0, str(EXAMPLE))
    try:
        import compare_qwen
        import qwen_layer
        import qwen_port

        yield qwen_layer, qwen_port, compare_qwen
    finally:
        sys.path.remove(str(EXAMPLE))


def test_the_worked_port_runs_under_kb_emulate() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kb", "emulate", "--", "python", "compare_qwen.py", "--json"],
        cwd=EXAMPLE,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:] + done.stdout[-2000:]
    report = json.loads(done.stdout)
    assert set(report) == {"decoder", "moe-decoder", "encoder"}
    for block in report.values():
        assert block["passed"] and block["first_failure"] is None
        compared = {m["name"] for m in block["modules"]}
        assert {"self_attn", "mlp", "(output)"} <= compared
        calls = [c["op"] for m in block["modules"] if m["name"] == "(output)" for c in m["calls"]]
        assert {
            "npu_rms_norm",
            "npu_rotary_mul",
            "npu_fused_infer_attention_score_v2",
            "npu_add_rms_norm",
        } <= set(calls)


def _mistake(
    port: Any, block: str, where: str, patch: type, monkeypatch: pytest.MonkeyPatch
) -> Any:
    qwen_layer, qwen_port, compare_qwen = port
    monkeypatch.setattr(qwen_port, where, patch)
    make = compare_qwen.BLOCKS[block]
    return compare_qwen.check(block, make, qwen_layer.Config())


def test_swapped_glu_halves_fail_at_npu_swiglu(port: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    class UpFirst(port[1].FusedMLP):
        @staticmethod
        def stack(original: Any) -> Any:
            return torch.cat([original.up_proj.weight, original.gate_proj.weight], dim=0)

    result = _mistake(port, "decoder", "FusedMLP", UpFirst, monkeypatch)
    assert not result.passed and result.first_failure.name == "mlp"
    assert "torch_npu.npu_swiglu at " in result.message() and "qwen_port.py:" in result.message()


def test_the_wrong_rotary_mode_fails_at_npu_rotary_mul(
    port: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch_npu

    class Interleaved(port[1].FusedAttention):
        def rope(self, x: Any, cos: Any, sin: Any) -> Any:
            return torch_npu.npu_rotary_mul(
                x, cos[None, :, None], sin[None, :, None], rotary_mode="interleave"
            )

    result = _mistake(port, "decoder", "FusedAttention", Interleaved, monkeypatch)
    assert result.first_failure.name == "self_attn"
    here = os.path.relpath(__file__) if __file__.startswith(os.getcwd() + os.sep) else __file__
    assert f"torch_npu.npu_rotary_mul at {here}:" in result.message()


def test_a_causal_mask_on_a_bidirectional_block_fails_at_the_attention_call(
    port: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    class AlwaysCausal(port[1].FusedAttention):
        def attend(self, q: Any, k: Any, v: Any) -> Any:
            self.causal = True
            return super().attend(q, k, v)

    assert _mistake(
        port, "decoder", "FusedAttention", AlwaysCausal, monkeypatch
    ).passed  # causal anyway
    result = _mistake(port, "encoder", "FusedAttention", AlwaysCausal, monkeypatch)
    assert result.first_failure.name == "self_attn"
    assert "torch_npu.npu_fused_infer_attention_score_v2 at " in result.message()
    assert "atten_mask [2048, 2048] bool" in result.message()


def test_a_missing_router_renormalisation_fails_at_the_gating_call(
    port: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    class NoRenorm(port[1].FusedRouter):
        @staticmethod
        def renormalise(weights: Any) -> Any:
            return weights

    result = _mistake(port, "moe-decoder", "FusedRouter", NoRenorm, monkeypatch)
    assert result.first_failure.name == "mlp.router"
    assert "torch_npu.npu_moe_gating_top_k_softmax at " in result.message()


def test_the_comparison_is_plain_data(port: Any) -> None:
    qwen_layer, _, compare_qwen = port
    result = compare_qwen.check("decoder", qwen_layer.DecoderLayer, qwen_layer.Config())
    doc = json.loads(json.dumps(result.as_dict()))
    assert doc["passed"] and doc["message"].startswith("port matches")
    attn = next(m for m in doc["modules"] if m["name"] == "self_attn")
    assert attn["dtype"] == "bfloat16" and attn["tolerance"]["rtol"] > 0 and attn["inputs_match"]
    assert {c["op"] for c in attn["calls"]} == {
        "npu_rotary_mul",
        "npu_fused_infer_attention_score_v2",
    }
