"""Fifth round on diffusion code as its authors ship it (issue 29): failure classes seen on
research repositories' denoisers, each pinned on a fixture written in our own words
(tests/fixtures/modelplan/research_*.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kb.api.scan import scanner
from kb.scan.emit import planned
from kb.scan.engine import ScanOptions

PLAN = Path(__file__).resolve().parent / "fixtures" / "modelplan"


def _scan(name: str) -> Any:
    options = ScanOptions(product="atlas-a3", use_config=False)
    return scanner(options=options).scan([str(PLAN / name)])


def _stages(report: Any, name: str) -> list[dict[str, Any]]:
    return [s for e in report.plan if e["module"] == name for s in e.get("stages", [])]


def test_a_router_whose_rows_are_repeated_to_every_token_is_planned() -> None:
    """The experts are chosen from the sample's conditioning vector, the logits repeated
    per token, top-k then softmax of the kept values: a router (the gate module is the
    caller's argument), planned on the top-k-then-softmax row."""
    report = _scan("research_sample_router.py")
    kinds = {m.kind for m in report.inventory if m.name == "SampleRoutedExperts"}
    assert "moe.router" in kinds
    (router,) = [m for m in report.inventory if m.kind == "moe.router"]
    assert router.facts["order"] == "topk_then_score"
    assert router.facts["scoring"] == "softmax"
    assert router.facts["topk"] == 2
    mappings = {s["mapping"] for s in _stages(report, "SampleRoutedExperts")}
    assert "router_topk_then_softmax" in mappings


def test_a_layer_norm_on_queries_and_keys_is_a_stage_beside_the_attention_chain() -> None:
    """LayerNorm modules on q and k before the head split: the attention's chain has no
    stage for them, so the plan adds a LayerNorm stage (not an RMSNorm), emitted without
    the chain's name (kb check would read it as a stage of that chain)."""
    report = _scan("research_layer_qknorm.py")
    stages = _stages(report, "ImageAttention")
    norms = [s for s in stages if s["mapping"] == "layer_norm"]
    assert [s["operator"] for s in norms] == ["npu_layer_norm_eval"]
    assert not [s for s in stages if s["mapping"].startswith("rms_norm")]
    emitted = [c for c in planned(report) if c["operator"] == "npu_layer_norm_eval"]
    assert emitted and all("chain" not in c for c in emitted)
    attention = [c for c in planned(report) if c["operator"] != "npu_layer_norm_eval"]
    assert attention and all("chain" in c for c in attention)


def test_a_class_the_block_defaults_to_is_read_where_the_caller_may_hand_a_partial() -> None:
    """``make = Attention if given is None else given`` with ``given`` a partial of the same
    class or None, as the caller decides: the branch handing ``given`` on never holds None,
    so the layer's attention is read (bidirectional, prefill only), not left unknown (which
    lost the only attention of the denoiser and planned its norms with a decode phase)."""
    report = _scan("research_unet/unet.py")
    kinds = {m.name: m.kind for m in report.inventory}
    assert kinds.get("PixelAttention") == "attention.bidirectional"
    assert {e["phase"] for e in report.plan} == {"prefill"}


def test_relative_position_keys_multiplied_with_the_queries_are_a_position_bias() -> None:
    """Scores plus ``q`` times rows of a table picked by frame distance (and the output plus
    the weights times value rows): no attention call computes that, so no attention stage
    is proposed; the module has no cache, so its one entry is the prefill's."""
    report = _scan("research_relative_keys.py")
    (facts,) = [dict(m.facts) for m in report.inventory if m.name == "FrameAttention"]
    assert facts["position_bias"] is True
    entries = [e for e in report.plan if e["module"] == "FrameAttention"]
    assert [e["phase"] for e in entries] == ["prefill"]
    assert not [s for e in entries for s in e.get("stages", [])]


def test_a_bidirectional_attention_that_masks_padding_keys_is_told_to_pass_the_mask() -> None:
    """No chain fits (the rotation is interleaved, the encoder chain does not rotate): the
    plan's note on which keys a query sees must not say "every key" for a module that hides
    its padding keys, and says to hand the mask (or the actual lengths) to the call."""
    report = _scan("research_padded_tokens.py")
    (entry,) = [e for e in report.plan if e["module"] == "TokenAttention"]
    assert "chain" not in entry
    told = [n for n in entry.get("notes", []) if n.startswith("no chain fixes the mask")]
    assert told and all("masks keys" in n and "atten_mask" in n for n in told)
