"""``kb scan``'s module inventory and plan (issue 19): one pinned plan per model family,
the false opportunities it must not report, and the outputs that carry the plan.

The fixtures under ``tests/fixtures/modelplan`` are written for these tests in the
shape upstream modelling code takes (HF transformers 5.x, diffusers); no upstream code.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from kb.api.check import check_text
from kb.api.scan import document, scanner
from kb.cli import main
from kb.scan.engine import ScanOptions

# a minute or more of CPU: started first (see the heavy marker in pyproject.toml)
pytestmark = pytest.mark.heavy

PLAN = Path(__file__).resolve().parent / "fixtures" / "modelplan"


def _scan(
    name: str,
    product: str = "atlas-a3",
    quantization: str | None = None,
    parallel: str | None = None,
) -> Any:
    made = scanner(
        options=ScanOptions(
            product=product, quantization=quantization, parallel=parallel, use_config=False
        )
    )
    return made.scan([str(PLAN / name)])


def _module(report: Any, name: str) -> Any:
    found = [m for m in report.inventory if m.name == name]
    assert found, [m.name for m in report.inventory]
    return found[0]


def _entries(report: Any, name: str, kind: str = "") -> dict[str, dict[str, Any]]:
    """The plan entries of one module by phase (of one kind: a block class may compute an
    attention and an adaptive norm)."""
    return {
        e["phase"]: e
        for e in report.plan
        if e["module"] == name and (not kind or e["kind"] == kind)
    }


def _ops(entry: dict[str, Any]) -> list[str]:
    return [s["operator"] for s in entry["stages"]]


def _stage(entry: dict[str, Any], operator: str) -> dict[str, Any]:
    return next(s for s in entry["stages"] if s["operator"] == operator)


# -- one plan per model family --------------------------------------------------------------


def test_dense_gqa_plan_splits_phases_and_carries_rope_cache_and_prerequisites() -> None:
    report = _scan("modeling_dense_gqa.py")
    attn = _module(report, "DenseAttention")
    assert attn.kind == "attention.gqa"
    assert attn.facts["rope"] == "half" and attn.facts["cache"] == "update"
    assert attn.facts["qk_norm"] == "rms"
    plan = _entries(report, "DenseAttention")
    assert set(plan) == {"prefill", "decode"}  # the chains differ by phase
    assert plan["decode"]["chain"] == "gqa-decode-paged"
    assert plan["prefill"]["chain"].startswith("gqa-prefill-")
    rope = _stage(plan["decode"], "npu_apply_rotary_pos_emb")
    assert rope["args"]["rotary_mode"] == "half" and rope["mapping"] == "rope_half"
    assert (
        _stage(plan["decode"], "npu_scatter_nd_update_")["mapping"] == "cache_write_scatter"
    )  # its own row and proof
    assert "npu_fused_infer_attention_score_v2" in _ops(plan["decode"])
    assert {"rope-precompute", "paged-kv-cache"} <= set(plan["decode"]["prerequisites"])
    mlp = _entries(report, "DenseMLP")["both"]
    assert mlp["chain"] == "dense-gated-ffn" and _ops(mlp) == ["npu_swiglu"]
    assert "merged-gate-up" in mlp["prerequisites"]
    assert (
        _module(report, "DenseMLP").proven["activation"].endswith("('silu' (DenseConfig default))")
    )
    layer = _entries(report, "DenseLayer")["both"]
    assert _ops(layer) == ["npu_add_rms_norm"] and layer["stages"][0]["mapping"] == "add_rms_norm"
    assert _ops(_entries(report, "DenseNorm")["both"]) == ["npu_rms_norm"]


def test_softmax_moe_plan_router_and_expert_routing() -> None:
    report = _scan("modeling_moe_softmax.py")
    router = _module(report, "SoftRouter")
    assert router.facts["scoring"] == "softmax" and router.facts["order"] == "score_then_topk"
    assert router.mappings == ["router_softmax_topk"]
    gate = _entries(report, "SoftRouter")["both"]
    # two proven chains express a softmax-then-top-k router (router_softmax_topk): the
    # dedicated kernel and the grouped gating kernel in softmax mode; one is planned, the
    # other offered as the first alternative
    pair = {
        "moe-gate-softmax": "npu_moe_gating_top_k_softmax",
        "moe-gate-softmax-gating-top-k": "npu_moe_gating_top_k",
    }
    assert gate["chain"] in pair and _ops(gate) == [pair[gate["chain"]]]
    assert (set(pair) - {gate["chain"]}) <= set(gate["alternatives"])
    if gate["chain"] == "moe-gate-softmax-gating-top-k":  # softmax mode, no groups, no renorm
        assert {k: gate["stages"][0]["args"][k] for k in ("norm_type", "renorm")} == {
            "norm_type": 0,
            "renorm": 0,
        }
    experts = _module(report, "SoftExperts")
    assert experts.facts["form"] == "loop over masks" and experts.facts["activation"] == "silu"
    plan = _entries(report, "SoftExperts")["both"]
    # nothing in a single-device modelling file says expert parallelism: the chain that
    # runs on one device is planned (its TP all-reduce drops out on one rank, and so does
    # its moe-tp-group prerequisite); the expert-parallel chains are named, not planned
    assert plan["chain"] == "moe-tp-routing"
    assert _ops(plan) == [
        "npu_moe_init_routing_v2",
        "npu_grouped_matmul",
        "npu_swiglu",
        "npu_moe_finalize_routing",
    ]
    assert {s["mapping"] for s in plan["stages"]} == {"moe_experts_loop", "swiglu"}
    assert plan["prerequisites"] == ["int32-expert-ids"]
    assert any("--parallel tp" in n and "moe-tp-group" in n for n in plan["notes"])
    held = {h["chain"]: h for h in plan["not_proposed"] if "chain" in h}
    assert {"moe-ep-alltoall-token-permute", "moe-ep-prefill-alltoall", "moe-ep-allgather"} <= set(
        held
    )
    assert {h["reason"] for h in held.values()} == {"needs expert parallelism (--parallel ep)"}
    assert not set(held) & set(plan.get("alternatives", []))


def test_mla_and_sigmoid_router_plan() -> None:
    report = _scan("modeling_mla_sigmoid.py")
    attn = _module(report, "LatentAttention")
    assert attn.kind == "attention.mla" and attn.facts["rope"] == "interleave"
    plan = _entries(report, "LatentAttention")
    # the documented cache writer (v1) leads the absorbed prefill (issue 31 item 3)
    assert plan["prefill"]["chain"] == "mla-absorb-prefill-cache-v1"
    assert plan["decode"]["chain"].startswith("mla-absorb-decode")
    # the latent cache is kept, by the documented writer first (issue 31 item 3)
    assert "npu_kv_rmsnorm_rope_cache" in _ops(plan["decode"])
    assert "npu_interleave_rope" in _ops(plan["prefill"])  # the latent's rope part (D 64)
    assert "absorbed-weights" in plan["decode"]["prerequisites"]
    router = _module(report, "GroupedSigmoidRouter")
    assert (router.facts["scoring"], router.facts["bias"], router.facts["groups"]) == (
        "sigmoid",
        True,
        "config.n_group",
    )
    gate = _entries(report, "GroupedSigmoidRouter")["both"]
    assert gate["chain"] == "moe-gate-sigmoid"
    stage = _stage(gate, "npu_moe_gating_top_k")
    assert stage["args"]["norm_type"] == 1 and stage["mapping"] == "router_sigmoid_bias_group_topk"


def test_gelu_gated_mlp_is_geglu_and_pairs_rotate_interleaved() -> None:
    report = _scan("modeling_gelu_gated.py")
    mlp = _module(report, "GeluGatedMLP")
    assert mlp.facts["activation"] == "gelu_tanh" and mlp.mappings == ["geglu"]
    plan = _entries(report, "GeluGatedMLP")
    assert all("npu_swiglu" not in _ops(e) for e in plan.values())
    # both derived: the tanh curve's code and the half the activation reaches
    # a chain record now covers the dense GeGLU (dense-geglu-ffn, one entry for both phases)
    (entry,) = plan.values()
    assert entry.get("chain") == "dense-geglu-ffn"
    assert _stage(entry, "npu_geglu")["args"] == {"approximate": 1, "activate_left": True}
    norm = _entries(report, "OnePlusNorm")["both"]
    assert norm["stages"][0]["mapping"] == "rms_norm_one_plus_w"
    assert "one-plus-weight-folded" in norm["prerequisites"]
    layer_norm = _module(report, "PlainLayerNorm")
    assert layer_norm.kind == "norm.layer"
    assert not any("npu_rms_norm" in _ops(e) for e in _entries(report, "PlainLayerNorm").values())
    attn = _module(report, "PairAttention")
    assert attn.facts["rope"] == "interleave"  # rotate_half by name, neighbouring pairs by body
    decode = _entries(report, "PairAttention")["decode"]
    # adjacent pairs: npu_rotary_mul in its interleave mode (npu_interleave_rope takes D = 64
    # only, and this module's head size is not stated)
    assert "npu_apply_rotary_pos_emb" not in _ops(decode)
    assert _stage(decode, "npu_rotary_mul")["args"]["rotary_mode"] == "interleave"


def test_linear_attention_plans_delta_rule_kernels_not_softmax_attention() -> None:
    report = _scan("modeling_linear_attention.py")
    net = _module(report, "DeltaNet")
    assert net.kind == "attention.linear" and net.facts["variant"] == "gated-delta-rule"
    assert net.not_proposed  # the head expansion is said, not proposed as repeat_kv
    plan = _entries(report, "DeltaNet")
    assert _ops(plan["prefill"]) == ["npu_chunk_gated_delta_rule"]
    assert _ops(plan["decode"]) == ["npu_recurrent_gated_delta_rule"]
    every = {op for e in plan.values() for op in _ops(e)}
    assert not any("attention" in op for op in every)


def test_dit_block_plans_one_phase_without_a_cache() -> None:
    report = _scan("transformer_dit.py")
    attn = _module(report, "BlockAttention")  # the processor's compute read into the module
    assert attn.kind == "attention.bidirectional" and attn.facts["rope"] == "interleave"
    plan = _entries(report, "BlockAttention")
    assert set(plan) == {"prefill"}  # diffusion: no decode phase
    ops = _ops(plan["prefill"])
    assert "npu_rotary_mul" in ops and "npu_rms_norm" in ops  # adjacent pairs, head size unstated
    assert not any("scatter" in op or "cache" in op for op in ops)
    assert "BlockAttnProcessor" not in {m.name for m in report.inventory}
    block = _module(report, "DiTBlock")
    assert block.kind == "norm.adaln" and block.facts["norm"] == "layer"
    ff = _entries(report, "TanhFeedForward")["prefill"]
    assert _ops(ff) == ["npu_gelu"] and ff["stages"][0]["args"] == {"approximate": "tanh"}


# -- no false opportunities -------------------------------------------------------------------


def test_training_paths_and_state_lists_are_not_opportunities() -> None:
    report = _scan("modeling_moe_softmax.py")
    names = {m.name for m in report.inventory}
    assert "SoftForCausalLM" not in names  # the auxiliary loss is not a router
    dense = _scan("modeling_dense_gqa.py")
    assert "DenseModel" not in {m.name for m in dense.inventory}  # a list of states is not a cache
    assert not any(
        "cache" in s["mapping"]
        for e in dense.plan
        if e["module"] != "DenseAttention"
        for s in e["stages"]
    )


@pytest.mark.parametrize("product", ["atlas-inference"])
def test_product_ranks_chains_whose_operators_it_runs(product: str) -> None:
    # npu_moe_finalize_routing is not documented for the Atlas inference cards, and no MoE
    # chain claims them: the chain whose operators run there wins
    plan = _entries(_scan("modeling_moe_softmax.py", product), "SoftExperts")
    assert plan
    for entry in plan.values():
        assert entry["stages"][0]["operator"] != "npu_moe_finalize_routing"
        assert "npu_moe_finalize_routing" not in _ops(entry)


def test_on_ascend_950_the_routing_chain_keeps_its_finalize() -> None:
    # issue 31: the newer aclnnMoeFinalizeRoutingV2 reference (the kernel API the wrapper
    # runs) lists Ascend 950, so the record does and the routing chain's finalize runs there
    plan = _entries(_scan("modeling_moe_softmax.py", "ascend-950"), "SoftExperts")
    assert plan
    assert any("npu_moe_finalize_routing" in _ops(entry) for entry in plan.values())


@pytest.mark.parametrize("parallel", [None, "ep"])
def test_on_atlas_a3_every_moe_stage_planned_runs_there(parallel: str | None) -> None:
    """On Atlas A3 every MoE stage planned runs there: npu_moe_finalize_routing's page names
    only A2, but its kernel's page marks A3 and its wrapper checks no product (evidence)."""
    for name in ("modeling_moe_softmax.py", "modeling_mla_sigmoid.py"):
        report = _scan(name, "atlas-a3", parallel=parallel)
        for entry in report.plan:
            if entry["kind"].startswith("moe."):
                notes = [n for s in entry["stages"] for n in s.get("notes", [])]
                assert not [n for n in notes if "on atlas-a3" in n], (name, entry["chain"], notes)


def test_parallel_ep_plans_the_expert_parallel_chain_and_tp_keeps_its_group() -> None:
    ep = _entries(_scan("modeling_moe_softmax.py", parallel="ep"), "SoftExperts")["both"]
    # as kb advise says (one selector, issue 31): the token-permute all-to-all, whose
    # operators more code bases call, then the CANN recipes' double routing
    assert ep["chain"] == "moe-ep-alltoall-token-permute"
    assert "ep-groups" in ep["prerequisites"]
    assert (
        "moe-ep-prefill-alltoall" in ep["alternatives"]
        and "moe-tp-routing" not in ep["alternatives"]
    )
    assert [(h["chain"], h["reason"]) for h in ep["not_proposed"] if "chain" in h] == [
        ("moe-tp-routing", "needs tensor parallelism (--parallel tp)")
    ]
    assert "npu_grouped_matmul" in _ops(ep)
    tp = _entries(_scan("modeling_moe_softmax.py", parallel="tp"), "SoftExperts")["both"]
    assert tp["chain"] == "moe-tp-routing" and "moe-tp-group" in tp["prerequisites"]
    assert not any("--parallel tp" in n for n in tp.get("notes", []))
    assert {h["parallel"] for h in tp["not_proposed"] if "chain" in h} == {"ep"}
    # where the single-device chain's operators do not run (npu_moe_finalize_routing has no
    # Atlas 300I kernel), the all-gather chain vLLM-Ascend runs there is planned, with its
    # collectives and its group prerequisite left out on one device
    inference = _entries(_scan("modeling_moe_softmax.py", "atlas-inference"), "SoftExperts")["both"]
    assert (
        inference["chain"] == "moe-ep-allgather" and "ep-groups" not in inference["prerequisites"]
    )
    assert any("--parallel ep keeps them" in n for n in inference["notes"])
    # the router and the dense parts do not depend on the deployment
    for name in ("SoftRouter",):
        assert _entries(_scan("modeling_moe_softmax.py", parallel="ep"), name) == _entries(
            _scan("modeling_moe_softmax.py"), name
        )


def test_a_chain_says_its_deployment_through_its_prerequisites() -> None:
    """The planner knows a chain needs a communication domain only from the prerequisites a
    row of kb/vocab/parallel.py names: every chain that exchanges tokens (an all-to-all in a
    plain-torch stage, an operator taking group_ep) or runs a fused collective (an operator
    taking an hcom group) names one, or a single-device plan would propose it."""
    from kb.catalog.compiled import open_catalog
    from kb.scan.model.plan import Target, deployment, unasked

    assert deployment({"prerequisites": [{"id": "ep-groups"}, {"id": "int32-expert-ids"}]}) == [
        "ep"
    ]
    assert deployment({"prerequisites": [{"id": "paged-kv-cache"}]}) == []
    ctx, single = _ctx(), Target("atlas-a3", None, None)
    # MC2 dispatch/combine take the EP group (group_ep): never on one device; the all-gather
    # chain's collectives are plain torch and leave its fused stages runnable on one rank
    assert unasked(ctx, open_catalog().get("moe-ep-decode-mc2"), single) == (["ep"], [])
    assert unasked(ctx, open_catalog().get("moe-ep-allgather"), single) == ([], ["ep"])
    assert unasked(
        ctx, open_catalog().get("moe-ep-allgather"), Target("atlas-a3", None, None, "ep")
    ) == ([], [])
    cat = open_catalog()
    for chain in cat.records("chain"):
        params = {
            p.get("name")
            for s in chain["stages"]
            if s.get("operator") != "plain-torch"
            for p in (cat.get(s["operator"]) or {}).get("parameters") or []
        }
        torch = " ".join(s.get("torch", "") for s in chain["stages"])
        if "group_ep" in params or "all_to_all" in torch:
            assert "ep" in deployment(chain), chain["name"]
        if "hcom" in params:
            assert deployment(chain), chain["name"]


def test_a_stage_written_for_one_phase_or_scheme_is_planned_only_there() -> None:
    """A chain may write one call twice, for prefill and for decode (gqa-sinks-paged) or per
    quantization scheme (mla-absorb-decode): each phase and scheme gets its own variant, and
    phases whose variants differ are separate plan entries."""
    from kb.catalog.compiled import open_catalog
    from kb.scan.model.needs import Need
    from kb.scan.model.plan import kept_stages

    cat = open_catalog()
    sinks = cat.get("gqa-sinks-paged")
    n = Need(
        "attention", frozenset({"attention"}), keep=frozenset({"attention", "flash_attention"})
    )
    for phase in ("prefill", "decode"):
        (stage,) = kept_stages(_ctx(), sinks, n, phase, "bf16")
        assert stage["phase"] == phase
    prolog = Need("attention", frozenset({"q_projection"}), keep=frozenset({"q_projection"}))
    mla = cat.get("mla-absorb-decode")
    schemes = sorted(
        {
            q
            for s in mla["stages"]
            if s["operator"] == "npu_mla_prolog_v3"
            for q in s["quantization"]
        }
    )
    assert len(schemes) >= 3
    for scheme in schemes:
        (stage,) = kept_stages(_ctx(), mla, prolog, "decode", scheme)
        assert scheme in stage["quantization"]


def _ctx() -> Any:
    return scanner(options=ScanOptions(use_config=False)).ctx


def test_an_operator_that_spells_the_mode_otherwise_is_not_given_the_mappings_value() -> None:
    """Under w8a8 the records also rank npu_quant_matmul_gelu for a tanh GELU, but its
    approximate takes 'gelu_erf'/'gelu_tanh' (default erf): writing 'tanh' there fails
    kb check and dropping it computes erf. The operator that takes 'tanh' is planned."""
    plan = _entries(_scan("transformer_dit.py", quantization="w8a8"), "TanhFeedForward")["prefill"]
    assert [(s["operator"], s.get("args")) for s in plan["stages"]] == [
        ("npu_gelu", {"approximate": "tanh"})
    ]


def test_a_chain_stage_whose_operator_lacks_the_value_is_held_with_the_reason(monkeypatch) -> None:
    """Were the rotary operators' rotary_mode a closed list without 'half', the rope stage
    of the GQA chain could not express a half rotation: it is held, never given the value
    or left at a default that computes something else."""
    from kb.scan.model import records

    real = records.param

    def narrowed(ctx: Any, op: str, name: str) -> dict[str, Any]:
        p = real(ctx, op, name)
        rotary = op in ("npu_apply_rotary_pos_emb", "npu_rotary_mul") and name == "rotary_mode"
        return {**p, "allowed": ["quarter"]} if rotary else p

    monkeypatch.setattr(records, "param", narrowed)
    decode = _entries(_scan("modeling_dense_gqa.py"), "DenseAttention")["decode"]
    assert "npu_apply_rotary_pos_emb" not in _ops(decode) and decode["chain"] == "gqa-decode-paged"
    held = [h for h in decode["not_proposed"] if h.get("operator") == "npu_apply_rotary_pos_emb"]
    assert held and "needs 'half'" in held[0]["reason"] and "quarter" in held[0]["reason"]


def test_release_notes_operators_it_lacks() -> None:
    made = scanner(options=ScanOptions(product="atlas-a3", torch_npu="2.1.0", use_config=False))
    report = made.scan([str(PLAN / "modeling_mla_sigmoid.py")])
    notes = [n for e in report.plan for s in e["stages"] for n in s.get("notes", [])]
    assert any("is not in torch_npu 2.1.0" in n for n in notes)


def test_quantization_selects_quantized_chains() -> None:
    report = _scan("modeling_dense_gqa.py", quantization="w8a8-dynamic")
    mlp = _entries(report, "DenseMLP")
    assert {e.get("chain") for e in mlp.values()} == {"dense-gated-ffn-w8a8"}


# -- outputs ----------------------------------------------------------------------------------


def test_json_and_api_carry_inventory_and_plan() -> None:
    doc = document(_scan("modeling_mla_sigmoid.py"))
    kinds = {m["module"]: m["kind"] for m in doc["inventory"]}
    assert kinds["LatentAttention"] == "attention.mla"
    assert any(e["module"] == "LatentAttention" and e.get("chain") for e in doc["plan"])
    json.dumps(doc)  # plain data all the way down
    from kb.api.scan import scan as api_scan

    text = (PLAN / "modeling_moe_softmax.py").read_text(encoding="utf-8")
    got = api_scan(text=text, product="atlas-a3")
    assert {m["kind"] for m in got["inventory"]} >= {"moe.router", "moe.experts"}
    assert got["plan"]


def test_plan_text_view(capsys) -> None:
    assert (
        main(
            [
                "scan",
                str(PLAN / "modeling_dense_gqa.py"),
                "--product",
                "atlas-a3",
                "--plan",
                "--no-config",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "DenseAttention [attention.gqa]" in out
    assert "decode: chain gqa-decode-paged" in out and "prerequisites: rope-precompute" in out


def test_emitted_plan_is_kb_check_clean(tmp_path: Path, capsys) -> None:
    out = tmp_path / "draft.yaml"
    assert (
        main(
            [
                "scan",
                str(PLAN),
                "--product",
                "atlas-a3",
                "--quant",
                "bf16",
                "--no-config",
                "--emit-candidates",
                str(out),
            ]
        )
        == 0
    )
    capsys.readouterr()
    draft = yaml.safe_load(out.read_text())
    assert draft["target"] == {"product": "atlas-a3", "quantization": "bf16"}
    chained = [c for c in draft["candidates"] if c.get("chain")]
    assert chained and all(c["phase"] in ("prefill", "decode", "both") for c in chained)
    assert all("mapping " in c["notes"] for c in chained)
    errors = [f for f in check_text(out.read_text(), str(out)) if f.severity == "error"]
    assert errors == []


def test_emitted_expert_parallel_plan_is_kb_check_clean(tmp_path: Path, capsys) -> None:
    out = tmp_path / "draft.yaml"
    assert (
        main(
            [
                "scan",
                str(PLAN),
                "--product",
                "atlas-a3",
                "--parallel",
                "ep",
                "--no-config",
                "--emit-candidates",
                str(out),
            ]
        )
        == 0
    )
    capsys.readouterr()
    draft = yaml.safe_load(out.read_text())
    assert "moe-ep-alltoall-token-permute" in {c.get("chain") for c in draft["candidates"]}
    errors = [f for f in check_text(out.read_text(), str(out)) if f.severity == "error"]
    assert errors == []


def test_plan_text_names_the_chains_another_deployment_would_take(capsys) -> None:
    assert (
        main(
            [
                "scan",
                str(PLAN / "modeling_moe_softmax.py"),
                "--product",
                "atlas-a3",
                "--plan",
                "--no-config",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "both: chain moe-tp-routing" in out
    line = next(x for x in out.splitlines() if "--parallel ep" in x)
    assert line.strip().startswith("needs expert parallelism (--parallel ep): ")
    assert "moe-ep-alltoall-token-permute" in line


@pytest.mark.parametrize("value", ["sp", "expert-parallel-16"])
def test_unknown_parallel_mode_is_a_usage_error(value: str, capsys) -> None:
    from kb.api.errors import UsageError
    from kb.api.scan import scan as api_scan

    assert main(["scan", str(PLAN / "modeling_dense_gqa.py"), "--parallel", value]) == 2
    assert "--parallel" in capsys.readouterr().err
    with pytest.raises(UsageError, match="parallel mode"):
        api_scan(text="x = 1\n", parallel=value)
    assert api_scan(text="x = 1\n", parallel="EP")["plan"] == []  # spellings fold as elsewhere


def test_parallel_from_the_projects_tool_kb_table(tmp_path: Path, capsys) -> None:
    source = (PLAN / "modeling_moe_softmax.py").read_text(encoding="utf-8")
    (tmp_path / "tp").mkdir()
    for where in (tmp_path / "m.py", tmp_path / "tp" / "m.py"):
        where.write_text(source, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(
        '[tool.kb]\nparallel = "ep"\n\n[[tool.kb.overrides]]\n'
        'files = ["tp/*.py"]\nparallel = "tp"\n'
    )
    report = scanner(options=ScanOptions(product="atlas-a3")).scan([str(tmp_path)])
    chains = {
        (Path(e["file"]).parent.name, e.get("chain"))
        for e in report.plan
        if e["module"] == "SoftExperts"
    }
    assert chains == {(tmp_path.name, "moe-ep-alltoall-token-permute"), ("tp", "moe-tp-routing")}
    (tmp_path / "pyproject.toml").write_text('[tool.kb]\nparallel = "sp"\n')
    assert main(["scan", str(tmp_path / "m.py")]) == 2
    assert "parallel 'sp' is not one of none, tp, ep" in capsys.readouterr().err


def test_unknown_quant_is_a_usage_error(capsys) -> None:
    assert main(["scan", str(PLAN / "modeling_dense_gqa.py"), "--quant", "w9a9"]) == 2
    assert "quantization" in capsys.readouterr().err


@pytest.mark.parametrize(
    "source",
    [
        "",
        "x = 1\n",
        "class A:\n    pass\n",
        "class B(nn.Module):\n    def forward(self):\n        return self.q(1)\n",
    ],
)
def test_files_without_modules_give_an_empty_inventory(source: str) -> None:
    made = scanner(options=ScanOptions(product="atlas-a3", use_config=False))
    report = made.scan_text(source, "<text>")
    assert report.inventory == [] and report.plan == []


def _kb6(report: Any) -> list[tuple[str, int]]:
    return [(f.code, f.line) for f in report.findings if f.code.startswith("KB6")]


def test_kb6_findings_skip_losses_state_lists_and_linear_attention_heads() -> None:
    moe = _scan("modeling_moe_softmax.py")
    text = (PLAN / "modeling_moe_softmax.py").read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(text, 1) if line.startswith("def balance_loss"))
    loss_lines = range(start, start + 5)  # softmax + topk for an auxiliary loss
    assert not [c for c, line in _kb6(moe) if c == "KB605" and line in loss_lines]
    assert _module(moe, "SoftRouter").kind == "moe.router"  # softmax and top-k in two methods
    linear = _scan("modeling_linear_attention.py")
    assert "KB607" not in {c for c, _ in _kb6(linear)}
    made = scanner(options=ScanOptions(product="atlas-a3", use_config=False))
    states = made.scan_text(
        "class Keep:\n    def put(self, layer_idx, s):\n        self.linear_cache[layer_idx] = s\n",
        "m.py",
    )
    assert _kb6(states) == []
    slots = made.scan_text("def put(k_cache, k, slots):\n    k_cache[slots] = k\n", "m.py")
    assert [c for c, _ in _kb6(slots)] == ["KB608"]


def test_topk_then_softmax_router_is_named_as_written() -> None:
    made = scanner(options=ScanOptions(product="atlas-a3", use_config=False))
    text = (
        "import torch\n\n\ndef route(logits, k):\n    top, idx = torch.topk(logits, k, dim=-1)\n"
        "    return torch.softmax(top, dim=-1), idx\n"
    )
    found = [f.message for f in made.scan_text(text, "m.py").findings if f.code == "KB605"]
    assert found and found[0].startswith("topk then softmax")


def test_a_stage_without_an_equivalence_proof_is_not_proposed(monkeypatch) -> None:
    """Issue 22: the planner proposes only stages whose mapping id has a proof in the mapping
    table; an id taken out of it moves its stage to the notes, and every proposed stage of
    the fixtures carries a proven id."""
    from kb.reference.mappings import BY_ID
    from kb.scan.model import plan as plan_module

    report = _scan("modeling_linear_attention.py")
    for entry in report.plan:
        assert all(s["mapping"] in BY_ID for s in entry["stages"]), entry
    monkeypatch.setattr(
        plan_module, "PROVEN", {k: v for k, v in BY_ID.items() if k != "gated_delta_rule"}
    )
    plan = _entries(_scan("modeling_linear_attention.py"), "DeltaNet")
    assert _ops(plan["prefill"]) == [] and _ops(plan["decode"]) == []
    held = plan["prefill"]["not_proposed"][0]
    assert (
        held["operator"] == "npu_chunk_gated_delta_rule" and held["mapping"] == "gated_delta_rule"
    )
    assert any("no equivalence proof yet" in n for n in plan["prefill"]["notes"])


def test_renormalising_softmax_router_is_told_to_divide_after_the_gate() -> None:
    """router_softmax_topk's operators do not renormalise (its proof divides after the call)."""
    plan = _entries(_scan("modeling_moe_softmax.py"), "SoftRouter")
    assert all(
        any("divide the weights by their sum" in n for n in e.get("notes", []))
        for e in plan.values()
    )


def test_attention_causality_decides_phases_and_masks() -> None:
    """An encoder runs once (prefill only, full visibility); cross-attention over a cache
    of encoder states never gets a causal prefill chain; causality set by the caller is
    said, not guessed; a module with no window never gets the sliding-window chain."""
    report = _scan("modeling_encoder_decoder.py")
    enc = _entries(report, "TinyEncoderAttention")
    assert set(enc) == {"prefill"}
    assert enc["prefill"]["chain"] == "encoder-attention-pfa"
    assert {s["mapping"] for s in enc["prefill"]["stages"]} == {"attention_noncausal_bsnd"}
    cross = _entries(report, "TinyCrossAttention")
    assert set(cross) == {"prefill", "decode"}
    prefill = cross["prefill"]
    # the cross-attention chain (encoder K/V written once) is bidirectional like PFA's
    assert prefill.get("chain") in (None, "encoder-attention-pfa", "cross-attention-encoder-kv")
    assert all(s.get("args", {}).get("sparse_mode") in (None, 0) for s in prefill["stages"])
    if prefill.get("chain") is None:
        assert any("every query sees every key" in n for n in prefill.get("notes", []))
    shared = _module(report, "TinySharedAttention")
    assert shared.facts["causal"] == "caller"
    assert any(
        "the caller decides" in n
        for e in _entries(report, "TinySharedAttention").values()
        for n in e.get("notes", [])
    )
    for e in report.plan:
        assert e.get("chain") != "gqa-sliding-window", e["module"]


def test_lookalikes_are_not_planned() -> None:
    """A state-space scan is not the gated delta rule, a decay-gate module is not an
    attention, and top-k over sigmoid scores with no experts is not a MoE router."""
    report = _scan("modeling_lookalikes.py")
    kinds = {m.name: (m.kind, m.facts.get("variant")) for m in report.inventory}
    assert kinds.get("ScanMixer") == ("attention.linear", "state-space")
    assert "DecayGate" not in kinds and "QuerySelector" not in kinds
    assert [
        e for e in report.plan if e["module"] in ("ScanMixer", "DecayGate", "QuerySelector")
    ] == []


def test_the_planner_needs_no_numpy() -> None:
    """numpy is the optional reference extra: kb scan --plan must import without it."""
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('numpy', 'ml_dtypes'):\n"
        "            raise ImportError(name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import kb.scan.model.plan, kb.scan.engine\n"
    )
    root = str(Path(__file__).resolve().parent.parent)
    subprocess.run([sys.executable, "-c", probe], check=True, cwd=root, capture_output=True)


def test_a_scan_of_a_model_file_names_its_modules_and_points_to_the_plan(capsys) -> None:
    """``kb scan FILE`` (no --plan) lists the modules it recognised and says where their
    plan is; a directory scan stays a lint run (no model reading unless asked)."""
    capsys.readouterr()
    assert main(["scan", str(PLAN / "modeling_dense_gqa.py"), "--no-config"]) == 0
    out = capsys.readouterr().out
    assert "model modules recognised: " in out and "DenseAttention (attention.gqa)" in out
    assert "kb scan --plan FILE" in out
    main(["scan", str(PLAN), "--no-config"])
    assert "model modules recognised" not in capsys.readouterr().out
