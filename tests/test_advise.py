"""`kb advise` walks the shipped decision trees from flags and names the right chains."""

from __future__ import annotations

import io
import json
import re
from typing import Any

import pytest

from kb.catalog.compiled import open_catalog
from kb.cli import main

# a minute or more of CPU: started first (see the heavy marker in pyproject.toml)
pytestmark = pytest.mark.heavy


def advise(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["advise", *argv, "--format", "json"]) == 0, capsys.readouterr().err
    result: dict[str, Any] = json.loads(capsys.readouterr().out)
    return result


def text(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["advise", *argv]) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def stages(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [st for ch in result["chains"] for st in ch["stages"]]


def stage_ops(result: dict[str, Any]) -> list[str]:
    return [st["operator"] for st in stages(result)]


def stage(result: dict[str, Any], operator: str) -> dict[str, Any]:
    return next(st for st in stages(result) if st["operator"] == operator)


def fail(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["advise", *argv, "--no-input", "--strict"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "Traceback" not in captured.err
    return captured.err


GQA = ("attention", "--arch", "gqa", "--sinks", "no")
MLA = ("attention", "--arch", "mla", "--indexer", "no")
EP_DECODE = (
    "moe",
    "--moe",
    "yes",
    "--gate",
    "sigmoid",
    "--routed-experts",
    "256",
    "--activation",
    "swiglu",
    "--parallel",
    "ep",
    "--phase",
    "decode",
)


# ------------------------------------------------------------------------- attention


def test_mla_indexer_decode_names_the_sparse_chain(capsys: pytest.CaptureFixture[str]) -> None:
    result = advise(capsys, "attention", "--arch", "mla", "--indexer", "yes", "--phase", "decode")
    # ranked by practice (issue 31): the split path (MindIE-LLM and the CANN recipes call
    # its operators) comes first, the fused-prolog chain (the CANN recipes) after it
    assert [c["name"] for c in result["chains"]] == ["mla-indexer-sparse-split"]
    (fused,) = [c for c in result["alternatives"] if c["name"] == "mla-indexer-sparse"]
    ops = [st["operator"] for st in fused["stages"]]
    for op in ("npu_mla_prolog_v3", "npu_lightning_indexer", "npu_sparse_flash_attention"):
        assert op in ops
    for op in ("npu_lightning_indexer", "npu_sparse_flash_attention"):
        assert op in stage_ops(result) and op in result["operators"]
    assert "npu_scatter_nd_update_" in ops and "scatter_update_" not in ops
    assert {"paged-kv-cache", "absorbed-weights"} <= {p["id"] for p in result["prerequisites"]}


@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_indexer_cache_is_written_by_slot_in_both_phases(
    capsys: pytest.CaptureFixture[str], phase: str
) -> None:
    result = advise(capsys, "attention", "--arch", "mla", "--indexer", "yes", "--phase", phase)
    write = next(st for st in stages(result) if st["stage"] == "indexer_cache_write")
    assert write["operator"] == "npu_scatter_nd_update_"
    assert write["passed"]["indices"] == "slot_mapping.view(-1, 1)"


def test_text_prints_complete_call_lines_and_whole_constraints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # the C8 path: its one chain calls the fused prolog (the bf16 path ranks the split
    # chain first, by practice)
    out = text(capsys, "attention", "--arch", "mla", "--indexer", "yes-c8", "--phase", "decode")
    assert "Chain mla-indexer-sparse-c8" in out
    flat = " ".join(out.split())
    # the call line: positional required arguments, then what the port sets, by keyword
    assert "torch_npu.npu_mla_prolog_v3(hidden_states.view(T, -1), q_a_proj.weight," in flat
    assert "cache_index=slot_mapping.view(-1)" in flat and "cache_mode='PA_BSND'" in flat
    assert "seen in DeepSeek-V3.2-Exp: hicann/cann-recipes-infer@fbc225d2de" in flat
    # constraints are never cut: the text has no ellipsis, and says how many were left out
    assert "…" not in out
    assert re.search(r"\(\d+ more constraint\(s\): kb show npu_mla_prolog_v3\)", out)


def test_json_carries_whole_constraints_and_call_arguments(
    capsys: pytest.CaptureFixture[str],
) -> None:
    result = advise(capsys, *MLA, "--phase", "decode", "--prolog", "yes", "--quant", "bf16")
    record = open_catalog().get("npu_mla_prolog_v3") or {}
    assert result["operators"]["npu_mla_prolog_v3"]["constraints"] == [
        " ".join(c["text"].split()) for c in record["constraints"]
    ]
    prolog = stage(result, "npu_mla_prolog_v3")
    required = [
        p["name"]
        for p in record["parameters"]
        if p.get("required", True) and not p["type"].endswith("?") and p.get("default") is None
    ]
    given = {a["name"]: a for a in prolog["arguments"]}
    assert set(required) <= set(given)
    assert given["cache_mode"] == {"name": "cache_mode", "value": "'PA_NZ'", "given": "literal"}
    assert given["cache_index"]["given"] == "expression"
    assert prolog["call"].startswith("torch_npu.npu_mla_prolog_v3(hidden_states, q_a_proj.weight,")


def test_mla_decode_quant_answer_narrows_the_prolog_stages(
    capsys: pytest.CaptureFixture[str],
) -> None:
    result = advise(capsys, *MLA, "--phase", "decode", "--prolog", "yes", "--quant", "w8a8c8")
    assert result["quantization"] == "w8a8c8"
    (chain,) = result["chains"]
    prologs = [st for st in chain["stages"] if st["operator"] == "npu_mla_prolog_v3"]
    assert [st["args"]["kv_cache_quant_mode"] for st in prologs] == [1]
    assert stage(result, "npu_fused_infer_attention_score_v2")["args"]["query_quant_mode"] == 3
    assert chain["stages_omitted"] == 3  # the bf16 and w8a8 prolog, the bf16/w8a8 attention


def test_mtp_verify_prints_sparse_mode_3_with_the_mask(capsys: pytest.CaptureFixture[str]) -> None:
    result = advise(
        capsys, *MLA, "--phase", "decode", "--prolog", "yes", "--mtp", "yes", "--quant", "bf16"
    )
    assert [c["name"] for c in result["chains"]] == ["mla-absorb-decode-mtp"]
    (attention,) = [
        st for st in stages(result) if st["operator"] == "npu_fused_infer_attention_score_v2"
    ]
    assert (
        attention["args"]["sparse_mode"] == 3 and "atten_mask=causal_mask_2048" in attention["call"]
    )
    assert advise(capsys, *MLA, "--phase", "decode", "--prolog", "yes", "--quant", "bf16")[
        "assumed"
    ] == [
        {
            "flag": "--mtp",
            "answer": "no",
            "label": "No - one query token per request (the common case); "
            "sparse_mode 0 without a mask",
        }
    ]


def test_absorbed_decode_allows_sparse_mode_3_under_mtp(capsys: pytest.CaptureFixture[str]) -> None:
    result = advise(capsys, *MLA, "--phase", "decode", "--prolog", "yes", "--quant", "bf16")
    attention = stage(result, "npu_fused_infer_attention_score_v2")
    assert attention["args"]["sparse_mode"] == 0
    assert "MTP" in attention["notes"] and "sparse_mode 3" in attention["notes"]
    assert "npu_transpose_batchmatmul" in stage_ops(result)


@pytest.mark.parametrize(
    ("answer", "chain", "core"),
    [
        # the documented v1 writer leads; the undocumented v2 is the alternative
        ("expand", "mla-absorb-prefill-cache-v1", "npu_kv_rmsnorm_rope_cache"),
        ("absorbed", "mla-prolog-absorbed", "npu_mla_prolog_v3"),
    ],
)
def test_mla_prefill_asks_which_of_the_two_real_paths(
    capsys: pytest.CaptureFixture[str], answer: str, chain: str, core: str
) -> None:
    result = advise(capsys, *MLA, "--phase", "prefill", "--prefill", answer)
    assert [c["name"] for c in result["chains"]] == [chain]
    assert core in stage_ops(result)
    assert result["chains"][0]["sources"], "a chain cites the port it comes from"


def test_mla_decode_without_prolog_takes_the_split_path(capsys: pytest.CaptureFixture[str]) -> None:
    result = advise(capsys, *MLA, "--phase", "decode", "--prolog", "no")
    # the documented v1 writer leads (issue 31); the v2 chain stays the named alternative
    assert [c["name"] for c in result["chains"]] == ["mla-absorb-decode-split-cache-v1"]
    assert "npu_kv_rmsnorm_rope_cache" in stage_ops(result)
    assert [c["name"] for c in result["alternatives"]] == ["mla-absorb-decode-split"]


def test_c8_uses_the_repository_cache_and_quantized_kernels(
    capsys: pytest.CaptureFixture[str],
) -> None:
    result = advise(
        capsys, "attention", "--arch", "mla", "--indexer", "yes-c8", "--phase", "decode"
    )
    ops = stage_ops(result)
    assert "npu_kv_quant_sparse_flash_attention" in ops and "npu_quant_lightning_indexer" in ops
    assert stage(result, "npu_mla_prolog_v3")["args"]["ckvkr_repo_mode"] == 1


@pytest.mark.parametrize(
    ("cache", "chain"), [("contiguous", "gqa-decode-contiguous"), ("paged", "gqa-decode-paged")]
)
def test_gqa_decode_by_cache_uses_fa_v2(
    capsys: pytest.CaptureFixture[str], cache: str, chain: str
) -> None:
    # on Atlas A3: the FA v1 chain's ports are A2 ones (gqa-paged-fa-v1 lists atlas-a2), so
    # the FA v2 chain ported there ranks first (on A2 practice puts FA v1 first)
    result = advise(capsys, *GQA, "--phase", "decode", "--cache", cache, "--product", "atlas-a3")
    assert [c["name"] for c in result["chains"]] == [chain]
    assert "npu_fused_infer_attention_score_v2" in stage_ops(result)
    assert "npu_fused_infer_attention_score" not in stage_ops(result)


@pytest.mark.parametrize(
    ("history", "chain", "first"),
    # with history, FA v1 ranks first: vLLM-Ascend (attention_v1.py lines 1447-1468) and xLLM
    # (attention.cpp lines 108-130) read the paged history with it on A2/A3 (issue 31)
    [
        ("no", "gqa-prefill-paged", "attention"),
        ("yes", "gqa-prefill-chunked-fa-v1", "cache_write"),
    ],
)
def test_gqa_prefill_distinguishes_fresh_kv_from_chunked_prefill(
    capsys: pytest.CaptureFixture[str], history: str, chain: str, first: str
) -> None:
    result = advise(
        capsys,
        *GQA,
        "--phase",
        "prefill",
        "--cache",
        "paged",
        "--history",
        history,
        "--product",
        "atlas-a3",
    )  # on A3 (see above)
    assert [c["name"] for c in result["chains"]] == [chain]
    names = [st["stage"] for st in stages(result)]
    assert names.index(first) < names.index(
        {"attention": "cache_write", "cache_write": "attention"}[first]
    )
    fa = "npu_fused_infer_attention_score" + ("" if history == "yes" else "_v2")
    attention = stage(result, fa)
    assert ("block_table" in attention["passed"]) is (history == "yes")


def test_sinks_lead_to_fa_v2_with_learnable_sink(capsys: pytest.CaptureFixture[str]) -> None:
    result = advise(capsys, "attention", "--arch", "gqa", "--sinks", "yes", "--phase", "decode")
    assert [c["name"] for c in result["chains"]] == ["gqa-sinks-paged"]
    attention = stage(result, "npu_fused_infer_attention_score_v2")
    assert attention["passed"]["learnable_sink"] == "sinks"
    assert "sliding_window" in attention["passed"]["sparse_mode"]
    assert any("v1) has no such argument" in n for n in result["notes"])


@pytest.mark.parametrize(
    ("phase", "op"),
    [("prefill", "npu_chunk_gated_delta_rule"), ("decode", "npu_recurrent_gated_delta_rule")],
)
def test_linear_attention(capsys: pytest.CaptureFixture[str], phase: str, op: str) -> None:
    result = advise(capsys, "attention", "--arch", "linear", "--phase", phase)
    assert op in stage_ops(result)
    assert result["outcome"] == "advice"


# ------------------------------------------------------------------------------- moe


def test_softmax_gate_names_the_softmax_top_k(capsys: pytest.CaptureFixture[str]) -> None:
    result = advise(
        capsys,
        "moe",
        "--moe",
        "yes",
        "--gate",
        "softmax",
        "--activation",
        "swiglu",
        "--parallel",
        "tp",
        "--quant",
        "bf16",
    )
    # ranked by practice: npu_moe_gating_top_k in softmax mode is called in more code bases
    # than npu_moe_gating_top_k_softmax, which stays the ranked alternative
    assert [c["name"] for c in result["chains"]] == [
        "moe-gate-softmax-gating-top-k",
        "moe-tp-routing",
    ]
    ops = stage_ops(result)
    assert "npu_moe_gating_top_k" in ops and "npu_moe_gating_top_k_softmax" not in ops
    (dedicated,) = [c for c in result["alternatives"] if c["name"] == "moe-gate-softmax"]
    assert "npu_moe_gating_top_k_softmax" in [st["operator"] for st in dedicated["stages"]]
    assert ops.index("npu_moe_init_routing_v2") < ops.index("npu_moe_finalize_routing")


def test_softmax_with_bias_is_the_grouped_gate_with_norm_type_0(
    capsys: pytest.CaptureFixture[str],
) -> None:
    result = advise(
        capsys,
        "moe",
        "--moe",
        "yes",
        "--gate",
        "softmax-bias",
        "--activation",
        "swiglu",
        "--parallel",
        "tp",
        "--quant",
        "bf16",
    )
    gate = stage(result, "npu_moe_gating_top_k")
    assert gate["args"]["norm_type"] == 0 and "bias" in gate["passed"]
    assert "npu_moe_gating_top_k_softmax" not in stage_ops(result)


# Another count was left to torch while only the R1/V3.2/K2 ports (guarded to 256 or 384)
# were read; the Step-3.7 (288) and Hy3 (192) ports call the fused gate on other counts,
# so it is advised there too, with the guard and the record's group limits in the note.
@pytest.mark.parametrize(
    ("count", "answer", "fused"), [("256", "256", True), ("160", "other", True)]
)
def test_sigmoid_gate_follows_the_ports_expert_count_guard(
    capsys: pytest.CaptureFixture[str], count: str, answer: str, fused: bool
) -> None:
    result = advise(
        capsys,
        "moe",
        "--moe",
        "yes",
        "--gate",
        "sigmoid",
        "--routed-experts",
        count,
        "--activation",
        "swiglu",
        "--parallel",
        "tp",
        "--quant",
        "bf16",
    )
    assert result["answers"]["--routed-experts"] == answer
    assert ("moe-gate-sigmoid" in [c["name"] for c in result["chains"]]) is fused
    if answer == "other":
        assert any("256 or 384" in n and "288" in n for n in result["notes"])


def test_gpt_oss_glu_is_not_npu_swiglu(capsys: pytest.CaptureFixture[str]) -> None:
    result = advise(
        capsys, "moe", "--moe", "yes", "--gate", "softmax", "--activation", "clamped-interleaved"
    )
    assert [c["name"] for c in result["chains"]] == [
        "moe-gate-softmax-gating-top-k",
        "moe-tp-routing-v1-glu",
    ]
    ops = stage_ops(result)
    assert {"npu_moe_init_routing", "npu_moe_compute_expert_tokens"} <= set(ops)
    assert "npu_swiglu" not in ops
    assert "bias" in stage(result, "npu_grouped_matmul")["passed"]


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
    result = advise(capsys, *EP_DECODE, *path, "--quant", "bf16")
    assert "moe-ep-decode-mc2" in [c["name"] for c in result["chains"]]
    ops = stage_ops(result)
    assert "npu_moe_distribute_dispatch_v2" in ops and "npu_moe_distribute_combine_v2" in ops
    assert "mc2-experts-per-rank" in {p["id"] for p in result["prerequisites"]}


def test_a2_fallback_prints_its_stages(capsys: pytest.CaptureFixture[str]) -> None:
    result = advise(
        capsys,
        *EP_DECODE,
        "--product",
        "atlas-a2",
        "--experts-per-rank",
        "32",
        "--quant",
        "w8a8-dynamic",
    )
    names = [c["name"] for c in result["chains"]]
    assert "moe-ep-decode-mc2" not in names
    assert names[-2:] == ["moe-ep-allgather", "moe-w8a8-experts"]
    fallback = result["chains"][-2]
    assert [st["stage"] for st in fallback["stages"]][:2] == ["gather_tokens", "routing_init"]
    # the bf16 expert stages of the routing chain give way to the W8A8 ones
    assert "npu_swiglu" not in [st["operator"] for st in fallback["stages"]]
    assert "npu_dequant_swiglu_quant" in stage_ops(result)
    assert stage(result, "npu_dequant_swiglu_quant")["args"]["activate_left"] is True


def test_a3_combine_with_add_rms_norm(capsys: pytest.CaptureFixture[str]) -> None:
    result = advise(
        capsys, *EP_DECODE, "--product", "atlas-a3", "--fuse-norm", "yes", "--quant", "bf16"
    )
    ops = stage_ops(result)
    assert "npu_moe_distribute_combine_add_rms_norm" in ops
    assert "npu_moe_distribute_combine_v2" not in ops


def test_experts_per_rank_accepts_a_count(capsys: pytest.CaptureFixture[str]) -> None:
    common = (*EP_DECODE, "--product", "atlas-a2", "--quant", "bf16")
    over = advise(capsys, *common, "--experts-per-rank", "32")  # 256 experts on EP8
    assert over["answers"]["--experts-per-rank"] == "more-than-24"
    fits = advise(capsys, *common, "--experts-per-rank", "24")
    assert fits["answers"]["--experts-per-rank"] == "24-or-fewer"


# ---------------------------------------------------------------- kv-cache, prefetch


def test_kv_cache_tree_pairs_writer_and_core(capsys: pytest.CaptureFixture[str]) -> None:
    result = advise(
        capsys,
        "kv-cache",
        "--cache",
        "paged",
        "--index",
        "position",
        "--arch",
        "gqa",
        "--phase",
        "decode",
    )
    assert [c["name"] for c in result["chains"]] == ["kv-cache-paged", "gqa-decode-paged"]
    assert any("slot = block_table" in n for n in result["notes"])


def test_contiguous_mla_cache_is_not_a_dead_end(capsys: pytest.CaptureFixture[str]) -> None:
    result = advise(
        capsys, "kv-cache", "--cache", "contiguous", "--index", "position", "--arch", "mla"
    )
    assert result["outcome"] == "advice"
    assert [c["name"] for c in result["chains"]] == ["mla-contiguous-cache"]
    assert stage(result, "npu_mla_prolog_v3")["args"]["cache_mode"] == "BSND"


def test_stop_leaf_is_a_verdict_without_chains(capsys: pytest.CaptureFixture[str]) -> None:
    result = advise(capsys, "prefetch-placement", "--target", "mlp-weight", "--memory-bound", "no")
    assert result["outcome"] == "stop"
    assert result["chains"] == [] and result["operators"] == {}
    assert "compute-bound" in result["verdict"]


def test_router_classifier_is_a_prefetch_target(capsys: pytest.CaptureFixture[str]) -> None:
    result = advise(
        capsys,
        "prefetch-placement",
        "--target",
        "router",
        "--memory-bound",
        "yes",
        "--window",
        "matmul-output",
    )
    assert result["outcome"] == "advice"
    prefetches = [st for st in stages(result) if st["stage"] == "prefetch_router"]
    assert prefetches and prefetches[0]["passed"]["self"] == "router.classifier.weight.data"


@pytest.mark.parametrize(
    ("window", "outcome"), [("communication-output", "advice"), ("communication", "stop")]
)
def test_a_finished_communication_output_is_a_window(
    capsys: pytest.CaptureFixture[str], window: str, outcome: str
) -> None:
    result = advise(
        capsys,
        "prefetch-placement",
        "--target",
        "mlp-weight",
        "--memory-bound",
        "yes",
        "--window",
        window,
    )
    assert result["outcome"] == outcome
    assert ("npu_prefetch" in result["operators"]) is (outcome == "advice")


# ------------------------------------------------------ quantization, graph, TP trees


def test_fp8_on_a3_is_a_verdict_backed_by_the_records(capsys: pytest.CaptureFixture[str]) -> None:
    result = advise(capsys, "quantization", "--product", "atlas-a3", "--quant", "mxfp8")
    assert result["outcome"] == "stop" and "Ascend 950" in result["verdict"]


def test_mxfp8_on_950_with_fused_norm(capsys: pytest.CaptureFixture[str]) -> None:
    result = advise(
        capsys,
        "quantization",
        "--product",
        "ascend-950",
        "--quant",
        "mxfp8",
        "--fuse-norm",
        "mxfp8",
    )
    assert [c["name"] for c in result["chains"]] == ["quant-mxfp8-linear", "norm-quant-mxfp8"]
    assert "npu_add_rms_norm_dynamic_mx_quant" in stage_ops(result)


def test_w8a8_with_a_fused_dynamic_norm(capsys: pytest.CaptureFixture[str]) -> None:
    result = advise(
        capsys,
        "quantization",
        "--product",
        "atlas-a2",
        "--quant",
        "w8a8-dynamic",
        "--fuse-norm",
        "dynamic",
    )
    assert stage(result, "npu_add_rms_norm_dynamic_quant")["args"]["output_mask"] == [True, False]


def test_a_note_only_option_marked_not_stop_keeps_the_advice(
    capsys: pytest.CaptureFixture[str],
) -> None:
    result = advise(capsys, "graph-mode", "--mode", "torchair", "--streams", "none")
    assert result["outcome"] == "advice"
    assert [c["name"] for c in result["chains"]] == ["graph-mode-torchair"]
    graph = result["operators"]["npu_fused_infer_attention_score_v2"]["graph_mode"]
    assert set(graph) == {"aclgraph", "torchair", "notes"}


def test_graph_mode_text_lists_each_operators_graph_support(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = text(capsys, "graph-mode", "--mode", "torchair", "--streams", "none")
    record = open_catalog().get("npu_prefetch") or {}
    expected = f"graph mode: aclgraph {record['graph_mode']['aclgraph']}, torchair {record['graph_mode']['torchair']}"
    prefetch = out[out.index("\n  npu_prefetch [") :]
    assert expected in " ".join(prefetch.split())


def test_graph_mode_with_shared_expert_streams(capsys: pytest.CaptureFixture[str]) -> None:
    result = advise(capsys, "graph-mode", "--mode", "aclgraph", "--streams", "shared-experts")
    assert [c["name"] for c in result["chains"]] == ["graph-mode-aclgraph", "multistream-overlap"]


@pytest.mark.parametrize(("product", "outcome"), [("ascend-950", "advice"), ("atlas-a3", "stop")])
def test_tensor_parallel_fused_all_reduce(
    capsys: pytest.CaptureFixture[str], product: str, outcome: str
) -> None:
    result = advise(capsys, "tensor-parallel", "--phase", "prefill", "--product", product)
    assert result["outcome"] == outcome
    if outcome == "advice":
        assert stage(result, "npu_mm_all_reduce_base")["args"]["reduce_op"] == "sum"


# ------------------------------------------------------------------- the command line


def test_flags_not_on_the_path_are_reported(capsys: pytest.CaptureFixture[str]) -> None:
    result = advise(capsys, *GQA, "--phase", "decode", "--cache", "paged", "--indexer", "yes")
    assert result["ignored"] == ["--indexer"]


def test_missing_answer_names_flag_and_values(capsys: pytest.CaptureFixture[str]) -> None:
    err = fail(capsys, "attention", "--arch", "mla", "--indexer", "yes")
    assert err.startswith("kb advise: missing --phase after --arch mla --indexer yes")
    assert "prefill" in err and "decode" in err


def test_missing_answer_without_a_terminal_is_an_error_under_strict(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # stdin is not a terminal under pytest, so no prompt even without --no-input
    assert main(["advise", "moe", "--moe", "yes", "--strict"]) == 2
    assert "missing --gate" in capsys.readouterr().err


def test_bad_value_lists_the_options(capsys: pytest.CaptureFixture[str]) -> None:
    err = fail(capsys, "attention", "--arch", "transformer")
    assert "--arch 'transformer' is not an answer" in err
    assert all(v in err for v in ("gqa", "mha", "mla", "linear"))


def test_a_count_with_no_catch_all_is_rejected(capsys: pytest.CaptureFixture[str]) -> None:
    err = fail(capsys, "attention", "--arch", "7")
    assert "--arch '7' is not an answer" in err


def test_unknown_flag_lists_the_tree_flags(capsys: pytest.CaptureFixture[str]) -> None:
    err = fail(capsys, "attention", "--architecture", "mla")
    assert "has no flag --architecture" in err and "--arch" in err


def test_unknown_tree_and_wrong_kind(capsys: pytest.CaptureFixture[str]) -> None:
    # a name nothing has exits 1, as 'kb show NAME' does (docs/cli.md); a wrong kind is 2
    assert main(["advise", "attenton", "--arch", "mla", "--no-input"]) == 1
    assert "did you mean attention" in capsys.readouterr().err
    assert main(["tree", "nope"]) == 1
    assert "no decision tree named 'nope'" in capsys.readouterr().err
    assert "is a playbook, not a decision tree" in fail(capsys, "prefetch")
    assert "name a decision tree" in fail(capsys)


def test_flag_without_value(capsys: pytest.CaptureFixture[str]) -> None:
    assert "--arch needs a value" in fail(capsys, "attention", "--arch")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_prompts_in_a_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # answers: a number, a wrong word (asked again), then a value
    monkeypatch.setattr("sys.stdin", _Terminal("3\nmaybe\nyes\ndecode\n"))
    assert main(["advise", "attention", "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["answers"] == {
        "--arch": "mla",
        "--indexer": "yes",
        "--phase": "decode",
    }
    assert "(--indexer)" in captured.err and "answer with a number" in captured.err


def test_prompt_ends_cleanly_on_end_of_input(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", _Terminal("mla\n"))
    assert main(["advise", "attention"]) == 2
    assert "no answer for --indexer" in capsys.readouterr().err


def test_tree_help_lists_flags(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["advise", "moe", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--experts-per-rank {24-or-fewer,more-than-24}" in out
    assert "--routed-experts {256,384,other}" in out


def test_kb_tree_prints_and_lists(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tree", "attention"]) == 0
    out = capsys.readouterr().out
    assert "(--indexer)" in out and "chain mla-indexer-sparse" in out
    assert main(["tree", "--format", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)["trees"]
    assert {t["name"] for t in listed} >= {
        "attention",
        "moe",
        "kv-cache",
        "prefetch-placement",
        "quantization",
        "graph-mode",
        "tensor-parallel",
    }
    assert main(["tree", "prefetch"]) == 2
    assert "is a playbook" in capsys.readouterr().err


@pytest.mark.parametrize("verb", ["tree", "advise", "prefetch-size"])
def test_verbs_have_help(verb: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main([verb, "--help"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: kb {verb}")


@pytest.mark.parametrize("columns", [80, 60])
def test_advice_text_fits_the_terminal(
    columns: int, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 23: every line of ``kb advise`` fits min(terminal, 80) columns - the README
    tour's walk, a walk with alternatives, and each tree's completions and assumptions."""
    import unicodedata

    monkeypatch.setenv("COLUMNS", str(columns))
    walks = [
        ["attention", "--arch", "mla", "--indexer", "yes", "--phase", "decode"],
        [
            "moe",
            "--moe",
            "yes",
            "--gate",
            "softmax",
            "--activation",
            "swiglu",
            "--parallel",
            "ep",
            "--phase",
            "prefill",
            "--quant",
            "bf16",
        ],
    ]
    walks += [[t["name"], "--no-input"] for t in open_catalog().records("tree")]
    for argv in walks:
        main(["advise", *argv])
        out = capsys.readouterr().out
        assert out.count("\n") > 5, argv
        wide = [
            line
            for line in out.splitlines()
            if sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in line) > columns
        ]
        assert not wide, (argv, wide[:3])
