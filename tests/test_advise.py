"""`kb advise` walks the shipped decision trees from flags and names the right chains."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from kb.cli import main


def advise(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["advise", *argv, "--format", "json"]) == 0, capsys.readouterr().err
    result: dict[str, Any] = json.loads(capsys.readouterr().out)
    return result


def stage_ops(result: dict[str, Any]) -> list[str]:
    return [st["operator"] for ch in result["chains"] for st in ch["stages"]]


def fail(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["advise", *argv, "--no-input"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "Traceback" not in captured.err
    return captured.err


def test_mla_indexer_decode_names_the_sparse_chain(capsys: pytest.CaptureFixture[str]) -> None:
    result = advise(capsys, "attention", "--arch", "mla", "--indexer", "yes", "--phase", "decode")
    assert [c["name"] for c in result["chains"]] == ["mla-indexer-sparse"]
    ops = stage_ops(result)
    for op in ("npu_mla_prolog_v3", "npu_lightning_indexer", "npu_sparse_flash_attention"):
        assert op in ops and op in result["operators"]
    # the shared chain is narrowed to decode: the indexer cache is written by slot
    assert "npu_scatter_nd_update_" in ops and "scatter_update_" not in ops
    assert result["chains"][0]["stages_omitted"] == 1
    assert {"rope-precompute", "paged-kv-cache", "absorbed-weights"} <= {
        p["id"] for p in result["prerequisites"]
    }


def test_mla_indexer_decode_text_lists_operators_with_constraints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert (
        main(["advise", "attention", "--arch", "mla", "--indexer", "yes", "--phase", "decode"]) == 0
    )
    out = capsys.readouterr().out
    assert "Chain mla-indexer-sparse" in out
    assert "mla_prolog: npu_mla_prolog_v3 (cache_mode=PA_BSND" in out
    # one-line facts from the operator record: products and formats
    prolog = out[out.index("\n  npu_mla_prolog_v3 [") :]
    assert "products: ascend-950, atlas-a3, atlas-a2" in prolog
    assert "weight_dq" in prolog and "FRACTAL_NZ" in prolog
    assert "Prerequisites" in out and "- paged-kv-cache:" in out


def test_mla_indexer_prefill_writes_indexer_cache_by_position(
    capsys: pytest.CaptureFixture[str],
) -> None:
    result = advise(capsys, "attention", "--arch", "mla", "--indexer", "yes", "--phase", "prefill")
    ops = stage_ops(result)
    assert "scatter_update_" in ops and "npu_scatter_nd_update_" not in ops


def test_mla_indexer_c8_uses_quantized_kernels(capsys: pytest.CaptureFixture[str]) -> None:
    result = advise(
        capsys, "attention", "--arch", "mla", "--indexer", "yes-c8", "--phase", "decode"
    )
    ops = stage_ops(result)
    assert "npu_kv_quant_sparse_flash_attention" in ops and "npu_quant_lightning_indexer" in ops
    assert "npu_sparse_flash_attention" not in ops


def test_mla_without_indexer_decode_uses_prolog_and_fa_v2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    result = advise(capsys, "attention", "--arch", "mla", "--indexer", "no", "--phase", "decode")
    assert [c["name"] for c in result["chains"]] == ["mla-absorb-decode"]
    stages = {st["operator"]: st for st in result["chains"][0]["stages"]}
    assert stages["npu_fused_infer_attention_score_v2"]["args"]["sparse_mode"] == 0
    assert "npu_transpose_batchmatmul" in stages


@pytest.mark.parametrize(
    ("cache", "chain"), [("contiguous", "gqa-decode-contiguous"), ("paged", "gqa-decode-paged")]
)
def test_gqa_decode_by_cache(capsys: pytest.CaptureFixture[str], cache: str, chain: str) -> None:
    result = advise(capsys, "attention", "--arch", "gqa", "--phase", "decode", "--cache", cache)
    assert [c["name"] for c in result["chains"]] == [chain]


def test_softmax_gate_names_the_softmax_top_k(capsys: pytest.CaptureFixture[str]) -> None:
    result = advise(capsys, "moe", "--moe", "yes", "--gate", "softmax", "--parallel", "tp",
                    "--quant", "bf16")  # fmt: skip
    assert [c["name"] for c in result["chains"]] == ["moe-gate-softmax", "moe-tp-routing"]
    ops = stage_ops(result)
    assert "npu_moe_gating_top_k_softmax" in ops
    assert "npu_moe_gating_top_k" not in ops
    assert ops.index("npu_moe_init_routing_v2") < ops.index("npu_moe_finalize_routing")


def test_sigmoid_gate_names_grouped_top_k(capsys: pytest.CaptureFixture[str]) -> None:
    result = advise(capsys, "moe", "--moe", "yes", "--gate", "sigmoid", "--parallel", "ep",
                    "--phase", "prefill", "--quant", "bf16")  # fmt: skip
    ops = stage_ops(result)
    assert "npu_moe_gating_top_k" in ops
    assert "npu_moe_re_routing" in ops and "npu_moe_distribute_dispatch_v2" not in ops


@pytest.mark.parametrize(
    "path",
    [
        ("--product", "atlas-a3", "--fuse-norm", "no"),
        ("--product", "A2", "--experts-per-rank", "24-or-fewer"),  # vocabulary alias accepted
    ],
)
def test_ep_decode_names_mc2_dispatch_and_combine_v2(
    capsys: pytest.CaptureFixture[str], path: tuple[str, ...]
) -> None:
    result = advise(capsys, "moe", "--moe", "yes", "--gate", "sigmoid", "--parallel", "ep",
                    "--phase", "decode", *path, "--quant", "bf16")  # fmt: skip
    assert "moe-ep-decode-mc2" in [c["name"] for c in result["chains"]]
    ops = stage_ops(result)
    assert "npu_moe_distribute_dispatch_v2" in ops and "npu_moe_distribute_combine_v2" in ops
    assert "mc2-experts-per-rank" in {p["id"] for p in result["prerequisites"]}


def test_a2_with_too_many_experts_per_rank_falls_back(capsys: pytest.CaptureFixture[str]) -> None:
    result = advise(capsys, "moe", "--moe", "yes", "--gate", "sigmoid", "--parallel", "ep",
                    "--phase", "decode", "--product", "atlas-a2",
                    "--experts-per-rank", "more-than-24", "--quant", "w8a8")  # fmt: skip
    names = [c["name"] for c in result["chains"]]
    assert "moe-ep-decode-mc2" not in names
    assert names[-2:] == ["moe-ep-prefill-alltoall", "moe-w8a8-experts"]
    assert any("local experts" in n for n in result["notes"])
    assert "npu_dequant_swiglu_quant" in stage_ops(result)


def test_a3_combine_with_add_rms_norm(capsys: pytest.CaptureFixture[str]) -> None:
    result = advise(capsys, "moe", "--moe", "yes", "--gate", "softmax", "--parallel", "ep",
                    "--phase", "decode", "--product", "atlas-a3", "--fuse-norm", "yes",
                    "--quant", "bf16")  # fmt: skip
    ops = stage_ops(result)
    assert "npu_moe_distribute_combine_add_rms_norm" in ops
    assert "npu_moe_distribute_combine_v2" not in ops


def test_kv_cache_tree_pairs_writer_and_core(capsys: pytest.CaptureFixture[str]) -> None:
    result = advise(capsys, "kv-cache", "--cache", "paged", "--index", "position", "--arch", "gqa",
                    "--phase", "decode")  # fmt: skip
    assert [c["name"] for c in result["chains"]] == ["kv-cache-paged", "gqa-decode-paged"]
    assert any("slot = block_table" in n for n in result["notes"])


def test_stop_leaf_is_a_verdict_without_chains(capsys: pytest.CaptureFixture[str]) -> None:
    result = advise(capsys, "prefetch-placement", "--target", "mlp-weight", "--memory-bound", "no")
    assert result["outcome"] == "stop"
    assert result["chains"] == [] and result["operators"] == {}
    assert "compute-bound" in result["verdict"]


def test_prefetch_tree_leads_to_chain_and_npu_prefetch(capsys: pytest.CaptureFixture[str]) -> None:
    result = advise(capsys, "prefetch-placement", "--target", "expert-weight", "--memory-bound", "yes",
                    "--window", "light-op")  # fmt: skip
    assert result["outcome"] == "advice"
    assert [c["name"] for c in result["chains"]] == ["prefetch-moe-experts"]
    assert "npu_prefetch" in result["operators"]


def test_flags_not_on_the_path_are_reported(capsys: pytest.CaptureFixture[str]) -> None:
    result = advise(capsys, "attention", "--arch", "gqa", "--phase", "decode", "--cache", "paged",
                    "--indexer", "yes")  # fmt: skip
    assert result["ignored"] == ["--indexer"]


def test_missing_answer_names_flag_and_values(capsys: pytest.CaptureFixture[str]) -> None:
    err = fail(capsys, "attention", "--arch", "mla", "--indexer", "yes")
    assert err.startswith("kb advise: missing --phase after --arch mla --indexer yes")
    assert "prefill" in err and "decode" in err


def test_missing_answer_without_a_terminal_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    # stdin is not a terminal under pytest, so no prompt even without --no-input
    assert main(["advise", "moe", "--moe", "yes"]) == 2
    assert "missing --gate" in capsys.readouterr().err


def test_bad_value_lists_the_options(capsys: pytest.CaptureFixture[str]) -> None:
    err = fail(capsys, "attention", "--arch", "transformer")
    assert "--arch 'transformer' is not an answer" in err
    assert all(v in err for v in ("gqa", "mha", "mla"))


def test_unknown_flag_lists_the_tree_flags(capsys: pytest.CaptureFixture[str]) -> None:
    err = fail(capsys, "attention", "--architecture", "mla")
    assert "has no flag --architecture" in err and "--arch" in err


def test_unknown_tree_and_wrong_kind(capsys: pytest.CaptureFixture[str]) -> None:
    assert "did you mean attention" in fail(capsys, "attenton", "--arch", "mla")
    assert "is a playbook, not a decision tree" in fail(capsys, "prefetch")
    assert "name a decision tree" in fail(capsys)


def test_flag_without_value(capsys: pytest.CaptureFixture[str]) -> None:
    assert "--arch needs a value" in fail(capsys, "attention", "--arch")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_prompts_in_a_terminal(capsys: pytest.CaptureFixture[str],
                               monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    # answers: a number, a wrong word (asked again), then a value
    monkeypatch.setattr("sys.stdin", _Terminal("3\nmaybe\nyes\ndecode\n"))
    assert main(["advise", "attention", "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["answers"] == {"--arch": "mla", "--indexer": "yes",
                                                   "--phase": "decode"}  # fmt: skip
    assert "(--indexer)" in captured.err and "answer with a number" in captured.err


def test_prompt_ends_cleanly_on_end_of_input(capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.setattr("sys.stdin", _Terminal("mla\n"))
    assert main(["advise", "attention"]) == 2
    assert "no answer for --indexer" in capsys.readouterr().err


def test_tree_help_lists_flags(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["advise", "moe", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--experts-per-rank {24-or-fewer,more-than-24}" in out


def test_kb_tree_prints_and_lists(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tree", "attention"]) == 0
    out = capsys.readouterr().out
    assert "(--indexer)" in out and "chain mla-indexer-sparse" in out
    assert main(["tree", "--format", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)["trees"]
    assert {t["name"] for t in listed} >= {"attention", "moe", "kv-cache", "prefetch-placement"}
    assert main(["tree", "prefetch"]) == 2
    assert "is a playbook" in capsys.readouterr().err


@pytest.mark.parametrize("verb", ["tree", "advise", "prefetch-size"])
def test_verbs_have_help(verb: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main([verb, "--help"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: kb {verb}")


def test_experts_per_rank_accepts_a_count(capsys: pytest.CaptureFixture[str]) -> None:
    common = ("moe", "--moe", "yes", "--gate", "sigmoid", "--parallel", "ep", "--phase", "decode",
              "--product", "atlas-a2", "--quant", "bf16")  # fmt: skip
    over = advise(capsys, *common, "--experts-per-rank", "32")  # 256 experts on EP8
    assert over["answers"]["--experts-per-rank"] == "more-than-24"
    fits = advise(capsys, *common, "--experts-per-rank", "24")
    assert fits["answers"]["--experts-per-rank"] == "24-or-fewer"
