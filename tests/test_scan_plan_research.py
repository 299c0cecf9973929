"""Issue 29's wrong plans, each pinned on a fixture written in the shape research
repositories write (tests/fixtures/modelplan/research_*.py, our own code): the plan must
compute what the module computes, read from its dataflow and its checkpoint's config.

- a bidirectional attention in no library's naming gets one phase, no causal mask, no
  cache write;
- the GLU half the activation reaches decides activate_left, and a SiLU of the second
  half is never handed to an operator whose proof runs something else;
- the caller's constructor argument, not the class default, decides the activation;
- attention sinks are only planned on an operator that takes the learnable sink;
- experts whose projections add biases pass them to the grouped matmuls;
- a router's scoring, groups and scale come from the checkpoint's config when the code's
  defaults say otherwise;
- complex-number rotations over halves are ``half``, over neighbours ``interleave``;
- npu_interleave_rope (D = 64 only) is never proposed for a head of 128.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kb.api.scan import scanner
from kb.scan.engine import ScanOptions

PLAN = Path(__file__).resolve().parent / "fixtures" / "modelplan"


def _scan(name: str, config: str | None = None) -> Any:
    options = ScanOptions(
        product="atlas-a3",
        use_config=False,
        model_config=str(PLAN / config) if config else None,
    )
    return scanner(options=options).scan([str(PLAN / name)])


@pytest.fixture(scope="module")
def patches() -> Any:
    return _scan("research_patches.py")


@pytest.fixture(scope="module")
def decoder() -> Any:
    return _scan("research_decoder.py")


def _facts(report: Any, name: str) -> dict[str, Any]:
    found = [m for m in report.inventory if m.name == name]
    assert found, [m.name for m in report.inventory]
    return dict(found[0].facts)


def _entries(report: Any, name: str) -> dict[str, dict[str, Any]]:
    return {e["phase"]: e for e in report.plan if e["module"] == name}


def _stages(report: Any, name: str) -> list[dict[str, Any]]:
    return [s for e in report.plan if e["module"] == name for s in e["stages"]]


def _ops(report: Any, name: str) -> list[str]:
    return [s["operator"] for s in _stages(report, name)]


def test_bidirectional_attention_without_library_names_is_planned_bidirectional(
    patches: Any,
) -> None:
    facts = _facts(patches, "PatchSelfAttention")
    assert facts["causal"] is False and "cache" not in facts
    plan = _entries(patches, "PatchSelfAttention")
    assert set(plan) == {"prefill"}  # no decode phase for a module without a cache
    for stage in _stages(patches, "PatchSelfAttention"):
        assert stage["mapping"].startswith("attention_noncausal"), stage
        assert stage.get("args", {}).get("sparse_mode") in (None, 0), stage
        assert "cache" not in stage["operator"] and "scatter" not in stage["operator"]
    notes = [n for e in plan.values() for n in e.get("notes", [])]
    assert not any("before it" in n for n in notes)


def test_the_gelu_on_the_second_half_is_not_activate_left(patches: Any) -> None:
    assert _facts(patches, "GatedTanhMix")["glu"] == "second"
    (stage,) = _stages(patches, "GatedTanhMix")
    assert stage["operator"] == "npu_geglu"
    assert stage["args"] == {"approximate": 1, "activate_left": False}


def test_a_silu_on_the_second_half_gets_no_unproven_operator(patches: Any) -> None:
    """npu_swiglu gates the first half and npu_clipped_swiglu clamps: neither computes
    silu(second) * first as called, and no proof runs them on it."""
    assert _facts(patches, "SecondGateSilu")["glu"] == "second"
    assert _ops(patches, "SecondGateSilu") == []
    (entry,) = _entries(patches, "SecondGateSilu").values()
    assert entry["not_proposed"], entry


def test_the_callers_argument_decides_the_activation(patches: Any) -> None:
    facts = _facts(patches, "Feedforward")
    assert (facts["activation"], facts["glu"]) == ("gelu_tanh", "none")
    (stage,) = _stages(patches, "Feedforward")
    assert stage["operator"] == "npu_gelu" and stage["args"] == {"approximate": "tanh"}


def test_the_class_default_decides_when_the_caller_says_nothing(tmp_path: Path) -> None:
    text = (PLAN / "research_patches.py").read_text(encoding="utf-8")
    flipped = text.replace('n_heads, act_kind="tanh"', 'n_heads, act_kind="gated"')
    assert flipped != text
    (tmp_path / "m.py").write_text(flipped, encoding="utf-8")
    report = scanner(options=ScanOptions(product="atlas-a3", use_config=False)).scan(
        [str(tmp_path / "m.py")]
    )
    assert _facts(report, "Feedforward")["glu"] == "first"
    assert _ops(report, "Feedforward") == ["npu_geglu"]


def test_sinks_are_planned_only_where_the_learnable_sink_is_passed(decoder: Any) -> None:
    assert _facts(decoder, "SinkAttention")["sinks"] is True
    cores = [s for s in _stages(decoder, "SinkAttention") if s["mapping"].startswith("attention")]
    assert cores
    for stage in cores:
        assert stage["operator"] not in ("npu_fusion_attention", "npu_prompt_flash_attention")
        assert "learnable_sink" in stage.get("passed", []), stage


def test_expert_biases_reach_the_grouped_matmuls(decoder: Any) -> None:
    assert _facts(decoder, "Experts")["expert_bias"] is True
    gmm = [s for s in _stages(decoder, "Experts") if s["operator"] == "npu_grouped_matmul"]
    assert gmm and all("bias" in s.get("passed", []) for s in gmm)


def test_without_biases_no_bias_is_passed() -> None:
    report = _scan("modeling_moe_softmax.py")
    experts = [m for m in report.inventory if m.kind == "moe.experts"]
    assert experts and all("expert_bias" not in m.facts for m in experts)
    for m in experts:
        for s in _stages(report, m.name):
            if s["operator"] == "npu_grouped_matmul":
                assert "bias" not in s.get("passed", []), s


def test_the_checkpoint_config_decides_the_router_over_code_defaults(decoder: Any) -> None:
    code = _facts(decoder, "Router")
    assert code["scoring"] == "softmax"  # the dataclass default, with no config
    report = _scan("research_decoder.py", "research_decoder_params.json")
    facts = _facts(report, "Router")
    assert (facts["scoring"], facts["groups"], facts["topk_groups"], facts["scale"]) == (
        "sigmoid",
        8,
        4,
        2.5,
    )
    assert facts["bias"] is True and facts["topk"] == 6
    (stage,) = [s for s in _stages(report, "Router") if s["operator"] == "npu_moe_gating_top_k"]
    args = stage["args"]
    assert (args["norm_type"], args["group_count"], args["k_group"], args["k"]) == (1, 8, 4, 6)
    assert args["routed_scaling_factor"] == 2.5


@pytest.mark.parametrize(
    ("module", "pairing"),
    [
        ("HalvesAttention", "half"),
        ("StackedHalvesAttention", "half"),
        ("PairsAttention", "interleave"),
    ],
)
def test_complex_rotations_pair_what_the_code_pairs(
    decoder: Any, module: str, pairing: str
) -> None:
    assert _facts(decoder, module)["rope"] == pairing
    rotations = [s for s in _stages(decoder, module) if s["mapping"].startswith("rope")]
    assert rotations
    for s in rotations:
        assert s["mapping"] == f"rope_{pairing}", s
        assert s.get("args", {}).get("rotary_mode", pairing) == pairing, s


def test_interleave_rope_is_not_proposed_for_a_head_of_128(decoder: Any) -> None:
    assert _facts(decoder, "PairsAttention")["head_dim"] == 128
    ops = _ops(decoder, "PairsAttention")
    assert "npu_interleave_rope" not in ops and "npu_rotary_mul" in ops


CAUSAL_NO_CACHE = '''import torch
import torch.nn.functional as F
from torch import nn


class WholeContextAttention(nn.Module):
    """Every call re-reads the whole context: causal, nothing kept between calls."""

    def __init__(self, width, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q = q.view(b, t, self.n_heads, -1).transpose(1, 2)
        k = k.view(b, t, self.n_heads, -1).transpose(1, 2)
        v = v.view(b, t, self.n_heads, -1).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(b, t, c))
'''


def test_without_a_chain_the_mask_follows_the_modules_causality(tmp_path: Path) -> None:
    """No chain fits a causal attention without a cache: the stage still says which keys a
    query sees (sparse_mode 3 and the compressed mask), re-proved as causal."""
    (tmp_path / "m.py").write_text(CAUSAL_NO_CACHE, encoding="utf-8")
    report = scanner(options=ScanOptions(product="atlas-a3", use_config=False)).scan(
        [str(tmp_path / "m.py")]
    )
    plan = _entries(report, "WholeContextAttention")
    assert set(plan) == {"prefill"}
    (stage,) = plan["prefill"]["stages"]
    assert stage["args"]["sparse_mode"] == 3 and "held" not in stage
    assert "causal-mask-2048" in plan["prefill"]["prerequisites"]


def test_the_draft_keeps_no_opportunity_the_plan_decided_against(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Scanned by a relative path, the planned modules' pattern findings (a SwiGLU for the
    second-half SiLU, a GeGLU from a branch the caller does not take) stay out of the
    draft: the plan, proven per module, is the only source of their candidates."""
    import yaml

    from kb.cli import main

    monkeypatch.chdir(PLAN)
    draft = tmp_path / "draft.yaml"
    main(
        [
            "scan",
            "research_patches.py",
            "--plan",
            "--no-config",
            "--product",
            "atlas-a3",
            "--emit-candidates",
            str(draft),
        ]
    )
    cands = yaml.safe_load(draft.read_text(encoding="utf-8"))["candidates"]
    assert cands and not [c for c in cands if "replaces" in c], cands
    assert not [c for c in cands if c["module"].endswith("SecondGateSilu")]
    assert {c["operator"] for c in cands if c["module"].endswith("Feedforward")} == {"npu_gelu"}


SHARED_BY_CALLERS = """import torch
import torch.nn.functional as F
from torch import nn


class Mixer(nn.Module):
    def __init__(self, width, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(width, 3 * width)

    def forward(self, x, mask=None):
        q, k, v = self.qkv(x).unflatten(-1, (3, self.n_heads, -1)).transpose(1, 3).unbind(2)
        return F.scaled_dot_product_attention(q, k, v, is_causal=mask is not None).flatten(1, 2)


class Encoder(nn.Module):
    def __init__(self, width, n_heads):
        super().__init__()
        self.mix = Mixer(width, n_heads)

    def forward(self, x):
        return x + self.mix(x)


class Decoder(nn.Module):
    def __init__(self, width, n_heads):
        super().__init__()
        self.mix = Mixer(width, n_heads)
        self.register_buffer("mask", torch.full((448, 448), float("-inf")).triu(1))

    def forward(self, x):
        return x + self.mix(x, mask=self.mask)
"""


def test_full_visibility_for_a_class_its_callers_make_causal_says_so(tmp_path: Path) -> None:
    """One class, bidirectional in the encoder and causal in the decoder, no cache: the
    plan is the full-visibility one and says the causal instances need the causal rows."""
    (tmp_path / "m.py").write_text(SHARED_BY_CALLERS, encoding="utf-8")
    report = scanner(options=ScanOptions(product="atlas-a3", use_config=False)).scan(
        [str(tmp_path / "m.py")]
    )
    assert _facts(report, "Mixer")["causal"] == "caller"
    notes = [n for e in _entries(report, "Mixer").values() for n in e.get("notes", [])]
    assert any("instances given a causal mask need the causal rows" in n for n in notes), notes


HELPER_GATE = """import torch.nn.functional as F
from torch import nn


def gated(x):
    x, gate = x.chunk(2, dim=-1)
    return x * F.silu(gate)


class Mlp(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.up = nn.Linear(width, 2 * hidden)
        self.down = nn.Linear(hidden, width)

    def forward(self, x):
        return self.down(gated(self.up(x)))
"""


def test_a_helper_function_of_a_planned_file_adds_no_candidate(tmp_path: Path) -> None:
    """The helper's SiLU gates the second half: the module calling it is planned (and holds
    npu_swiglu back); the helper's own text must not put npu_swiglu in the draft."""
    import yaml

    from kb.cli import main

    (tmp_path / "m.py").write_text(HELPER_GATE, encoding="utf-8")
    draft = tmp_path / "draft.yaml"
    main(
        [
            "scan",
            str(tmp_path / "m.py"),
            "--plan",
            "--no-config",
            "--product",
            "atlas-a3",
            "--emit-candidates",
            str(draft),
        ]
    )
    assert _facts_of(tmp_path / "m.py", "Mlp")["glu"] == "second"
    cands = yaml.safe_load(draft.read_text(encoding="utf-8"))["candidates"]
    assert not [c for c in cands if c["operator"] == "npu_swiglu"], cands


def _facts_of(path: Path, name: str) -> dict[str, Any]:
    report = scanner(options=ScanOptions(product="atlas-a3", use_config=False)).scan([str(path)])
    return _facts(report, name)


def test_a_function_replaced_from_an_unreadable_table_is_read_as_the_default() -> None:
    """``run = plain; if impl != "plain": run = TABLE[impl]`` (transformers 4.x's
    attention dispatch): the attention is the default function's computation, read
    through the branch, not lost to the lookup it cannot see into."""
    report = _scan("table_dispatch.py")
    facts = _facts(report, "GroupedAttention")
    assert facts.get("gqa") is True and facts.get("rope") == "half", facts
    assert _entries(report, "GroupedAttention"), report.plan


def test_every_module_of_the_scanned_file_carries_the_file_as_given(tmp_path: Path) -> None:
    """Both readers name the scanned file the way the caller wrote it, so the plan
    prints one header per file (a relative path used to split it in two)."""
    import os

    here = os.getcwd()
    try:
        os.chdir(PLAN)
        options = ScanOptions(product="atlas-a3", use_config=False)
        report = scanner(options=options).scan(["table_dispatch.py"])
    finally:
        os.chdir(here)
    assert {m.file for m in report.inventory} == {"table_dispatch.py"}, [
        (m.name, m.file) for m in report.inventory
    ]
