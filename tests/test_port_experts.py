"""kb port writes expert loops over one module per expert, and experts that add biases, as
the routed pass (routing init, grouped matmuls, finalize); kb verify proves them and fails,
naming the stage, when the port computes something else (fixtures: tests/data/port
moe_modules and moe_stacked_bias)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("libcst")

from kb.api.port import port, verify

pytestmark = pytest.mark.heavy

DATA = Path(__file__).parent / "data" / "port"
MODELS = ("moe_modules", "moe_stacked_bias")


@pytest.fixture(scope="module")
def ported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict]]:
    root = tmp_path_factory.mktemp("experts")
    out = {}
    for name in MODELS:
        target = root / f"{name}_npu.py"
        out[name] = (target, port(str(DATA / f"{name}.py"), str(target), product="atlas-a2"))
    return out


def test_a_loop_over_expert_modules_becomes_the_routed_pass(ported: dict) -> None:
    path, doc = ported["moe_modules"]
    stages = doc["files"][0]["stages"]
    assert stages["TopKExperts.moe_experts_loop"]["mapping"] == "moe_experts_loop"
    assert "BiasedExperts.moe_experts_loop" in stages
    text = path.read_text()
    # the gate is the projection the activation reaches (lift), not the one named first
    assert "_kb_stacked_experts(self, 'experts', ('lift', 'proj_in', 'proj_out'))" in text
    # the loop stays, unchanged, as the unfused side; the parameters keep their names
    assert "acc.index_add_(0, token_idx, y.to(acc.dtype))" in text
    assert "self.proj_in = nn.Linear(hidden_size, intermediate_size, bias=bias)" in text
    notes = doc["files"][0]["notes"]
    assert any("clear self._kb_stacked" in n for n in notes["TopKExperts"])
    # a name bound before the loop and rebound in it reaches the kept loop by value
    assert "def _kb_expert_loop_3(acc, seen=seen):" in text
    # routing weights on the experts' inputs: not the routed pass's computation
    assert any("scale the experts' inputs" in n for n in notes["ScaledInputExperts"])
    assert "ScaledInputExperts.moe_experts_loop" not in stages
    # tokens sorted by expert: the whole method is the routed pass, the original kept
    assert "def _kb_unfused_grouped(self, x, expert_ids, expert_weights):" in text
    assert "_kb_moe_experts(x, expert_ids, expert_weights, *_kb_stacked_experts(" in text


def test_stacked_experts_with_biases_pass_them_to_the_grouped_matmuls(ported: dict) -> None:
    path, doc = ported["moe_stacked_bias"]
    text = path.read_text()
    # the clamped GLU reads as exactly npu_clipped_swiglu's formula: called between the
    # two fused matmuls with the method's own alpha, limit and shift
    assert (
        "self.w_in, self.w_out, self.b_in, self.b_out, act=lambda _kb_h: "
        "torch_npu.npu_clipped_swiglu(_kb_h, alpha=self.alpha, limit=self.limit, bias=1, "
        "interleaved=True))"
    ) in text
    assert "torch.cat([self.b_gate, self.b_up], dim=1), self.b_down)" in text
    notes = doc["files"][0]["notes"]
    assert any("(self.squash) reads as npu_clipped_swiglu" in n for n in notes["ClampedExperts"])
    assert not any("not written yet" in n for ns in notes.values() for n in ns)


#: the expert stages each fixture's port must write and verify
EXPERT_STAGES = {
    "moe_modules": {
        "TopKExperts.moe_experts_loop",
        "BiasedExperts.moe_experts_loop",
        "SortedExperts.moe_experts_loop",
    },
    "moe_stacked_bias": {"ClampedExperts.moe_experts_loop", "LinearBiasExperts.moe_experts_loop"},
}


@pytest.mark.parametrize("name", MODELS)
def test_verify_passes_in_fp32_and_bf16(name: str, ported: dict) -> None:
    path, _ = ported[name]
    doc = verify(str(DATA / f"{name}.py"), str(path), str(DATA / f"{name}.json"))
    assert doc["passed"], doc["failures"]
    ran = [r for r in doc["runs"] if not r["not_run"]]
    assert {(r["dtype"], r["phase"]) for r in ran} == {
        ("float32", "prefill"),
        ("bfloat16", "prefill"),
    }
    for run in ran:
        measured = {s["stage"] for s in run["stages"] if not s["rejected"]}
        assert EXPERT_STAGES[name] <= measured


WRONG = [
    # one module per expert: the up projection activated in place of the gate
    (
        "moe_modules",
        "('lift', 'proj_in', 'proj_out'))).reshape(acc.shape)",
        "('proj_in', 'lift', 'proj_out'))).reshape(acc.shape)",
        "TopKExperts.moe_experts_loop",
    ),
    # one module per expert: the experts' biases dropped (the stacked weights only)
    (
        "moe_modules",
        "*_kb_stacked_experts(self, 'experts', ('lift', 'proj_in', 'proj_out'))).reshape(acc.shape).to(acc.dtype), lambda: _kb_expert_loop_3",
        "*_kb_stacked_experts(self, 'experts', ('lift', 'proj_in', 'proj_out'))[:2]).reshape(acc.shape).to(acc.dtype), lambda: _kb_expert_loop_3",
        "BiasedExperts.moe_experts_loop",
    ),
    # one module per expert: the routing weights not applied
    (
        "moe_modules",
        "_kb_moe_experts(tokens, ids, weights,",
        "_kb_moe_experts(tokens, ids, torch.ones_like(weights),",
        "TopKExperts.moe_experts_loop",
    ),
    # tokens sorted by expert: the routing weights of the wrong slot (ids read as weights)
    (
        "moe_modules",
        "_kb_moe_experts(x, expert_ids, expert_weights,",
        "_kb_moe_experts(x, expert_ids, expert_weights.flip(-1),",
        "SortedExperts.moe_experts_loop",
    ),
    # stacked experts: the gate/up bias dropped before the clamped GLU
    (
        "moe_stacked_bias",
        "self.w_in, self.w_out, self.b_in, self.b_out,",
        "self.w_in, self.w_out, None, self.b_out,",
        "ClampedExperts.moe_experts_loop",
    ),
    # stacked experts: the clamped GLU's halves read as [gate | up] (they interleave)
    (
        "moe_stacked_bias",
        "bias=1, interleaved=True)",
        "bias=1, interleaved=False)",
        "ClampedExperts.moe_experts_loop",
    ),
    # stacked experts: the down projection's bias dropped
    (
        "moe_stacked_bias",
        "torch.cat([self.b_gate, self.b_up], dim=1), self.b_down)",
        "torch.cat([self.b_gate, self.b_up], dim=1), None)",
        "LinearBiasExperts.moe_experts_loop",
    ),
]


@pytest.mark.parametrize(("name", "old", "new", "named"), WRONG)
def test_a_wrong_expert_port_fails_naming_the_stage(
    name: str, old: str, new: str, named: str, ported: dict, tmp_path: Path
) -> None:
    path, _ = ported[name]
    text = path.read_text()
    assert old in text
    wrong = tmp_path / f"{name}_wrong.py"
    wrong.write_text(text.replace(old, new, 1))
    doc = verify(
        str(DATA / f"{name}.py"),
        str(wrong),
        str(DATA / f"{name}.json"),
        dtypes=("bfloat16",),
        phases=("prefill",),
    )
    assert not doc["passed"]
    assert any(named in f["message"] for f in doc["failures"]), doc["failures"]


def test_stacked_expert_weights_are_built_once_and_rebuilt_after_a_reload() -> None:
    import torch
    from torch import nn

    from kb.port.expertmods import HELPERS

    scope: dict = {"torch": torch}
    exec(HELPERS["_kb_stacked_experts"], scope)
    stacked = scope["_kb_stacked_experts"]

    class Expert(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.g, self.u = nn.Linear(4, 3, bias=False), nn.Linear(4, 3, bias=False)
            self.d = nn.Linear(3, 4, bias=False)

    owner = nn.Module()
    owner.experts = nn.ModuleList(Expert() for _ in range(2))
    gate_up, down, b_gate_up, b_down = stacked(owner, "experts", ("g", "u", "d"))
    assert gate_up.shape == (2, 4, 6) and down.shape == (2, 3, 4)
    assert b_gate_up is None and b_down is None
    assert torch.equal(gate_up[1, :, :3], owner.experts[1].g.weight.T)  # gate half first
    assert torch.equal(gate_up[1, :, 3:], owner.experts[1].u.weight.T)
    assert stacked(owner, "experts", ("g", "u", "d"))[0] is gate_up  # kept, not rebuilt
    with torch.no_grad():
        owner.experts[0].d.weight.add_(1.0)  # a reload in place
    again = stacked(owner, "experts", ("g", "u", "d"))
    assert again[0] is not gate_up
    assert torch.equal(again[1][0], owner.experts[0].d.weight.T)


CLAMPED = """
def act(self, h):
    a, b = h[..., ::2], h[..., 1::2]
    a = a.clamp(min=None, max=self.limit)
    b = b.clamp(min=-self.limit, max=self.limit)
    glu = a * torch.sigmoid(a * self.alpha)
    return (b + 1) * glu
"""


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("", ""),  # the formula itself
        ("a.clamp(min=None, max=self.limit)", "a.clamp(min=-self.limit, max=self.limit)"),
        ("return (b + 1) * glu", "return 2 * (b + 1) * glu"),
        ("h[..., ::2], h[..., 1::2]", "h[..., 1::2], h[..., ::2]"),
        ("b.clamp(min=-self.limit, max=self.limit)", "b.clamp(min=-self.cap, max=self.cap)"),
        ("torch.sigmoid(a * self.alpha)", "torch.sigmoid(b * self.alpha)"),
    ],
)
def test_a_clamped_glu_is_fused_only_when_it_is_the_operators_formula(old: str, new: str) -> None:
    import libcst as cst

    from kb.port.clippedglu import fused

    method = cst.parse_module(CLAMPED.replace(old, new) if old else CLAMPED).body[0]
    assert isinstance(method, cst.FunctionDef)
    found = fused(method)
    if not old:
        assert found is not None
        assert found[1] == {"alpha": "self.alpha", "limit": "self.limit", "bias": "1"}
    else:
        assert found is None


def test_a_loop_whose_names_are_read_after_it_is_left_with_a_note() -> None:
    import libcst as cst

    from kb.port.expertmods import read_loop

    src = """
def forward(self, x, ids, w):
    acc = torch.zeros_like(x)
    for e, expert in enumerate(self.experts):
        rows, slot = torch.where(ids == e)
        acc.index_add_(0, rows, expert(x[rows]) * w[rows, slot, None])
    return acc + rows.sum()
"""
    fn = cst.parse_module(src).body[0]
    assert isinstance(fn, cst.FunctionDef)
    found = read_loop(fn, {"experts": "Expert"})
    assert isinstance(found, str) and "read after it (rows)" in found
    fixed = cst.parse_module(src.replace("acc + rows.sum()", "acc")).body[0]
    assert isinstance(fixed, cst.FunctionDef)
    assert not isinstance(read_loop(fixed, {"experts": "Expert"}), str)
