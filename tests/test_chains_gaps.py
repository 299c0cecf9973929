"""Issue 31, item 3: situations the trees had no answer for, each with a chain from a port.

Cross-attention writes the encoder K/V once; GeGLU (dense and in experts) and non-gated
experts get kernels that compute their function; the MC2 W8A8 decode composition never
stages a step the dispatch already did; version alternatives put the documented operator
first; Atlas inference cards get the kernels documented for them.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from kb.catalog.compiled import Catalog, open_catalog
from kb.cli import main
from kb.core.paths import PACKAGE_DIR
from kb.vocab import product_support

#: Kernels that split their input into a gate half and a value half.
GLU_KERNELS = {"npu_swiglu", "npu_geglu", "npu_dequant_swiglu_quant", "npu_gelu_mul"}


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return open_catalog(PACKAGE_DIR / "records")


def advise(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["advise", *argv, "--format", "json", "--no-input"]) == 0, capsys.readouterr().err
    result: dict[str, Any] = json.loads(capsys.readouterr().out)
    return result


def ops(chains: list[dict[str, Any]]) -> list[str]:
    return [st["operator"] for c in chains for st in c["stages"]]


def test_cross_attention_writes_the_encoder_kv_once_and_reads_it_bidirectionally(
    capsys: pytest.CaptureFixture[str], catalog: Catalog
) -> None:
    result = advise(capsys, "attention", "--arch", "cross", "--phase", "decode")
    (chain,) = result["chains"]
    writers = {r["name"] for r in catalog.records("operator") if r.get("category") == "kv-cache"}
    decode = [st for st in chain["stages"] if st["phase"] in ("decode", "both")]
    assert not [st for st in decode if st["operator"] in writers]  # no per-step write
    assert any(st["operator"] in writers for st in chain["stages"] if st["phase"] == "prefill")
    attention = [st for st in decode if "attention" in st["operator"]]
    assert attention and all(
        st["args"].get("sparse_mode") == 0 and "atten_mask" not in st["passed"] for st in attention
    )


def test_a_dense_geglu_gets_npu_geglu_with_the_half_it_activates_stated(
    capsys: pytest.CaptureFixture[str],
) -> None:
    result = advise(capsys, "moe", "--moe", "no", "--activation", "geglu")
    assert result["outcome"] == "advice"
    (geglu,) = [st for c in result["chains"] for st in c["stages"] if st["operator"] == "npu_geglu"]
    chosen = {**geglu["args"], **geglu["passed"]}
    assert "activate_left" in chosen and "approximate" in chosen  # never left to the defaults


def test_geglu_experts_activate_the_gate_half_and_non_gated_experts_get_no_glu_kernel(
    capsys: pytest.CaptureFixture[str],
) -> None:
    base = ("moe", "--moe", "yes", "--gate", "softmax")
    gated = advise(capsys, *base, "--activation", "geglu", "--parallel", "tp", "--quant", "bf16")
    (geglu,) = [st for c in gated["chains"] for st in c["stages"] if st["operator"] == "npu_geglu"]
    assert geglu["args"]["activate_left"] is True  # [gate | up]: the default gates the wrong half
    plain = advise(capsys, *base, "--activation", "gelu-no-mul")
    assert plain["outcome"] == "advice" and plain["chains"]
    assert not GLU_KERNELS & set(ops(plain["chains"]))
    assert "npu_grouped_matmul" in ops(plain["chains"])


@pytest.mark.parametrize("product", ["atlas-a2", "atlas-a3"])
def test_w8a8_decode_on_mc2_never_reroutes_or_requantizes_what_dispatch_returned(
    capsys: pytest.CaptureFixture[str], product: str
) -> None:
    answers = ["--moe", "yes", "--gate", "softmax", "--activation", "swiglu"]
    answers += ["--parallel", "ep", "--phase", "decode", "--product", product]
    answers += ["--experts-per-rank", "24-or-fewer", "--fuse-norm", "no"]
    result = advise(capsys, "moe", *answers, "--quant", "w8a8-dynamic")
    staged = ops(result["chains"])
    assert staged.count("npu_moe_distribute_dispatch_v2") == 1
    dispatch = next(
        st
        for c in result["chains"]
        for st in c["stages"]
        if st["operator"] == "npu_moe_distribute_dispatch_v2"
    )
    assert dispatch["args"]["quant_mode"] == 2  # dispatch quantizes ...
    routing = {"npu_moe_init_routing", "npu_moe_init_routing_v2", "npu_moe_re_routing"}
    assert not routing & set(staged) and "npu_dynamic_quant" not in staged  # ... once
    assert "npu_dequant_swiglu_quant" in staged


def test_version_alternatives_put_the_documented_operator_first(catalog: Catalog) -> None:
    """Across every tree option: a lead chain using an undocumented operator never has a
    version alternative (one chain a variant of the other) that uses none."""
    status = {r["name"]: r.get("status") for r in catalog.records("operator")}

    def undocumented(name: str) -> set[str]:
        chain = catalog.get(name) or {}
        return {
            st["operator"]
            for st in chain.get("stages") or []
            if status.get(st["operator"]) == "undocumented"
        }

    def versions(a: str, b: str) -> bool:
        ca, cb = catalog.get(a) or {}, catalog.get(b) or {}
        return ca.get("variant_of") == b or cb.get("variant_of") == a

    wrong = []
    for tree in catalog.records("tree"):
        for node in tree["nodes"]:
            for opt in node["options"]:
                lead = opt.get("chain")
                if not lead or not undocumented(lead):
                    continue
                for alt in opt.get("alternatives") or []:
                    if versions(lead, alt["chain"]) and not undocumented(alt["chain"]):
                        wrong.append((tree["name"], node["id"], lead, alt["chain"]))
    assert wrong == []
    # the MLA expanded prefill leads with the documented cache writer, v2 stays offered
    prefill = catalog.get("mla-absorb-prefill-cache-v1") or {}
    assert "npu_kv_rmsnorm_rope_cache" in {st["operator"] for st in prefill["stages"]}


def test_each_named_version_pair_has_a_chain(catalog: Catalog) -> None:
    staged = {st["operator"] for c in catalog.records("chain") for st in c["stages"]}
    for pair in (
        ("npu_kv_rmsnorm_rope_cache", "npu_kv_rmsnorm_rope_cache_v2"),
        ("npu_moe_distribute_dispatch", "npu_moe_distribute_dispatch_v2"),
        ("npu_moe_distribute_combine", "npu_moe_distribute_combine_v2"),
        ("npu_fused_infer_attention_score", "npu_fused_infer_attention_score_v2"),
    ):
        assert set(pair) <= staged, pair
    assert "npu_grouped_matmul_finalize_routing" in staged
    windows = [
        c
        for c in catalog.records("chain")
        if any(st["args"].get("sparse_mode") == 4 for st in c["stages"])
        and not any("learnable_sink" in st["passed"] for st in c["stages"])
    ]
    assert {st["operator"] for c in windows for st in c["stages"]} >= {
        "npu_fused_infer_attention_score",
        "npu_fused_infer_attention_score_v2",
    }


def test_atlas_inference_cards_get_a_chain_of_kernels_documented_there(
    catalog: Catalog, capsys: pytest.CaptureFixture[str]
) -> None:
    fits = [
        c
        for c in catalog.records("chain")
        if c["module"] == "attention"
        and any(product_support("atlas-inference", [p]) == "yes" for p in c["products"])
    ]
    assert fits
    products = {r["name"]: r.get("products") or [] for r in catalog.records("operator")}
    for chain in fits:
        phases = {st["phase"] for st in chain["stages"]}
        assert phases & {"decode", "both"} and phases & {"prefill", "both"}
        for st in chain["stages"]:
            if st["operator"] != "plain-torch":
                assert product_support("atlas-inference", products[st["operator"]]) == "yes"
    result = advise(
        capsys, "attention", "--arch", "gqa", "--phase", "decode", "--cache", "contiguous"
    )
    assert {c["name"] for c in result["alternatives"]} & {c["name"] for c in fits}
