"""Second round on original inference code (issue 29): failure classes seen on model files
nobody here tuned on, each pinned on a fixture written in our own words
(tests/fixtures/modelplan/research_*.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kb.api.scan import scanner
from kb.scan.engine import ScanOptions

PLAN = Path(__file__).resolve().parent / "fixtures" / "modelplan"


def _scan(name: str) -> Any:
    options = ScanOptions(product="atlas-a3", use_config=False)
    return scanner(options=options).scan([str(PLAN / name)])


def _modules(report: Any, name: str) -> dict[str, dict[str, Any]]:
    return {m.kind: dict(m.facts) for m in report.inventory if m.name == name}


def _stages(report: Any, name: str, kind: str) -> list[dict[str, Any]]:
    return [
        s for e in report.plan if e["module"] == name and e["kind"] == kind for s in e["stages"]
    ]


@pytest.fixture(scope="module")
def library_blocks() -> Any:
    return _scan("research_library_blocks.py")


def test_a_library_attention_built_in_place_runs_the_processor_it_is_handed(
    library_blocks: Any,
) -> None:
    """diffusers' Attention(..., processor=Own()) is read through the processor in reach:
    bidirectional, q/k LayerNorm from the qk_norm spelling, no decode phase."""
    facts = _modules(library_blocks, "FrameBlock")["attention.bidirectional"]
    assert facts["causal"] is False and facts["qk_norm"] == "layer"
    assert "cache" not in facts
    phases = {e["phase"] for e in library_blocks.plan if e["module"] == "FrameBlock"}
    assert phases == {"prefill"}
    ops = [s["operator"] for s in _stages(library_blocks, "FrameBlock", "attention.bidirectional")]
    assert any("attention" in op for op in ops), ops
    assert not any("cache" in op or "scatter" in op for op in ops), ops


def test_a_library_feed_forward_computes_the_activation_its_spelling_names(
    library_blocks: Any,
) -> None:
    facts = _modules(library_blocks, "FrameBlock")["mlp.plain"]
    assert (facts["activation"], facts["glu"]) == ("gelu_tanh", "none")
    (stage,) = _stages(library_blocks, "FrameBlock", "mlp.plain")
    assert stage["operator"] == "npu_gelu" and stage["args"] == {"approximate": "tanh"}


def test_a_library_geglu_activates_the_second_half(library_blocks: Any) -> None:
    facts = _modules(library_blocks, "GatedHead")["mlp.glu"]
    assert (facts["activation"], facts["glu"]) == ("gelu", "second")
    (stage,) = _stages(library_blocks, "GatedHead", "mlp.glu")
    assert stage["operator"] == "npu_geglu"
    assert stage["args"] == {"approximate": 0, "activate_left": False}


@pytest.mark.parametrize(
    ("spelling", "activation", "glu"),
    [("gelu", "gelu", "none"), ("geglu", "gelu", "second"), ("swiglu", "silu", "second")],
)
def test_each_feed_forward_spelling_reads_as_the_library_builds_it(
    tmp_path: Path, spelling: str, activation: str, glu: str
) -> None:
    text = (PLAN / "research_library_blocks.py").read_text(encoding="utf-8")
    changed = text.replace('ff_kind="gelu-approximate"', f'ff_kind="{spelling}"')
    assert changed != text
    (tmp_path / "m.py").write_text(changed, encoding="utf-8")
    report = scanner(options=ScanOptions(product="atlas-a3", use_config=False)).scan(
        [str(tmp_path / "m.py")]
    )
    mlp = next(f for k, f in _modules(report, "FrameBlock").items() if k.startswith("mlp."))
    assert (mlp["activation"], mlp["glu"]) == (activation, glu)


def test_a_rotation_some_instances_skip_stays_the_classes() -> None:
    """A class whose self-attention instances rotate and cross-attention instances do not
    keeps its RoPE (the fused stage replaces the code where it runs)."""
    report = _scan("research_shared_attention.py")
    (found,) = [m for m in report.inventory if m.name == "SharedAttention"]
    assert found.facts["rope"] == "half" and found.facts["causal"] is False
    stages = [s for e in report.plan if e["module"] == "SharedAttention" for s in e["stages"]]
    assert any(s["mapping"] == "rope_half" for s in stages), stages
    assert all(e["phase"] == "prefill" for e in report.plan if e["module"] == "SharedAttention")


def test_the_library_adaptive_norms_modulate_a_layer_norm(library_blocks: Any) -> None:
    """diffusers' AdaLayerNormZero (rows handed back to the block) and
    AdaLayerNormContinuous (scale before shift) are read as the modulation they compute."""
    for owner in ("ZeroBlock", "FrameModel"):
        facts = _modules(library_blocks, owner)["norm.adaln"]
        assert facts["norm"] == "layer" and facts["modulation"].startswith("norm(x) * (1 + scale)")
        assert facts["norm_weight"] == "none", (owner, facts)
        ops = [s["operator"] for s in _stages(library_blocks, owner, "norm.adaln")]
        assert ops, owner


def test_layers_appended_in_a_constructor_called_from_a_loop_are_all_run() -> None:
    """A list a module fills with append in its own constructor holds distinct layers even
    when its owner is built in a loop: the activation, dropout and output projection all
    run, and the activation is the one the model asks for (tanh), not the default's."""
    report = _scan("research_appended_layers.py")
    facts = _modules(report, "StackedMlp")["mlp.plain"]
    assert facts["activation"] == "gelu_tanh", facts
    stages = _stages(report, "StackedMlp", "mlp.plain")
    assert stages
    for stage in stages:
        assert stage["operator"] == "npu_gelu" and stage["args"] == {"approximate": "tanh"}


@pytest.mark.parametrize(
    ("call", "pairs"),
    [
        ("apply_rotary_emb(query, rotary)", "interleave"),
        ("apply_rotary_emb(query, rotary, use_real_unbind_dim=-2)", "half"),
        ("apply_rotary_emb(query, rotary, use_real=False)", "interleave"),
    ],
)
def test_the_library_rotation_pairs_what_its_arguments_say(
    tmp_path: Path, call: str, pairs: str
) -> None:
    """diffusers' apply_rotary_emb: real cos/sin unbound on the last axis rotate neighbours,
    on the second-last the halves; complex frequencies rotate neighbours."""
    text = (PLAN / "research_library_blocks.py").read_text(encoding="utf-8")
    changed = text.replace("apply_rotary_emb(query, rotary)", call).replace(
        "apply_rotary_emb(key, rotary)", call.replace("query", "key")
    )
    (tmp_path / "m.py").write_text(changed, encoding="utf-8")
    report = scanner(options=ScanOptions(product="atlas-a3", use_config=False)).scan(
        [str(tmp_path / "m.py")]
    )
    assert _modules(report, "FrameBlock")["attention.bidirectional"]["rope"] == pairs
    mappings = [s["mapping"] for s in _stages(report, "FrameBlock", "attention.bidirectional")]
    assert f"rope_{pairs}" in mappings, mappings


def test_blocks_built_from_the_config_spread_as_keywords_read_the_checkpoint() -> None:
    """``Block(**config.to_dict())``: the checkpoint's nested options reach the block, so
    the kernel the checkpoint names (written out) is read, not the code's default."""
    options = ScanOptions(
        product="atlas-a3",
        use_config=False,
        model_config=str(PLAN / "research_biased_decoder.json"),
    )
    report = scanner(options=options).scan([str(PLAN / "research_biased_decoder.py")])
    (found,) = [m for m in report.inventory if m.name == "BiasedAttention"]
    assert found.facts["form"] == "written", found.facts
    assert found.facts["causal"] is True and found.facts["mask"] is True


def test_a_triangle_filled_under_an_added_bias_is_causal(tmp_path: Path) -> None:
    """Scores with a position bias added and then the upper triangle filled: the bias is
    not the only mask the causality is read from."""
    text = (PLAN / "research_biased_decoder.py").read_text(encoding="utf-8")
    plain = text.replace('"kernel": "fused"', '"kernel": "plain"')
    assert plain != text
    (tmp_path / "m.py").write_text(plain, encoding="utf-8")
    report = scanner(options=ScanOptions(product="atlas-a3", use_config=False)).scan(
        [str(tmp_path / "m.py")]
    )
    (found,) = [m for m in report.inventory if m.name == "BiasedAttention"]
    assert found.facts["form"] == "written" and found.facts["causal"] is True, found.facts
    for entry in report.plan:
        if entry["module"] == "BiasedAttention":
            for stage in entry["stages"]:
                assert not stage["mapping"].startswith("attention_noncausal"), stage
