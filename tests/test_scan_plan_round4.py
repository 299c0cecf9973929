"""Fourth round on code nobody here tuned on (issue 29): failure classes seen on research
repositories' model files, each pinned on a fixture written in our own words
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


def _facts(report: Any, name: str, prefix: str) -> dict[str, Any]:
    (found,) = [
        dict(m.facts) for m in report.inventory if m.name == name and m.kind.startswith(prefix)
    ]
    return found


def _phases(report: Any, name: str) -> set[str]:
    return {e["phase"] for e in report.plan if e["module"] == name}


@pytest.fixture(scope="module")
def flag_cache() -> Any:
    return _scan("research_flag_cache_object.py")


@pytest.mark.parametrize(
    ("module", "write"), [("SlotAttention", "slot"), ("CopyAttention", "index_copy")]
)
def test_a_cache_object_installed_after_construction_is_read(
    flag_cache: Any, module: str, write: str
) -> None:
    """``self.store = None`` in __init__, ``layer.store = Store(...)`` later: inference runs
    with the store, so its writes are a cache and the module has a decode phase."""
    facts = _facts(flag_cache, module, "attention")
    assert facts["cache"] == write
    assert facts["causal"] is True
    assert _phases(flag_cache, module) == {"prefill", "decode"}


_FLAGGED = """
import torch.nn.functional as F
from torch import nn


class Attention(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)

    def forward(self, x, mask=None):
        b, t, c = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=FLAG)
        return self.out(y.transpose(1, 2).reshape(b, t, c))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = Attention(256, 4)

    def forward(self, x, mask=None):
        return self.layer(x, mask)
"""


@pytest.mark.parametrize(
    ("flag", "causal"),
    [("mask is None", True), ("True if mask is None else False", True), ("False", "caller")],
)
def test_a_flag_true_whenever_no_mask_is_given_is_causal(
    tmp_path: Path, flag: str, causal: object
) -> None:
    """``is_causal=mask is None`` with the mask the caller's: causal (it was read as the
    caller's choice, and planned bidirectional where the mask was built elsewhere)."""
    path = tmp_path / "model.py"
    path.write_text(_FLAGGED.replace("FLAG", flag))
    report = scanner(options=ScanOptions(product="atlas-a3", use_config=False)).scan([str(path)])
    assert _facts(report, "Attention", "attention")["causal"] == causal


@pytest.mark.parametrize("module", ["TableAttention", "WindowAttention"])
def test_a_learned_relative_position_table_is_a_position_bias(module: str) -> None:
    """A bias looked up in a learned table at relative positions (T5's buckets, a window's
    offset index) is kept: no attention call that drops it, the plan names pse."""
    report = _scan("research_position_table.py")
    assert _facts(report, module, "attention")["position_bias"] is True
    (entry,) = [
        e for e in report.plan if e["module"] == module and e["kind"].startswith("attention")
    ]
    assert entry["stages"] == [] and "pse" in entry["none"]


def test_scores_from_a_keyword_batched_multiply_add_viewed_back_are_attention() -> None:
    """``bias.baddbmm(batch1=q, batch2=kᵀ)`` then ``.view(b, h, n, n)``: the attention core
    is found, its addend is a position bias (ALiBi over cumulated positions)."""
    report = _scan("research_batched_scores.py")
    facts = _facts(report, "FoldedAttention", "attention")
    assert facts["form"] == "written" and facts["position_bias"] is True
    assert facts["causal"] is True


def test_a_linear_subclass_with_its_own_forward_projects_with_its_parameters() -> None:
    """``class Dense(nn.Linear)`` computing ``x @ self.weight.T (+ self.bias)``: q and k are
    projections (their rotation is read), and a biased projection still feeds the MLP."""
    report = _scan("research_linear_subclass.py")
    assert _facts(report, "RotatedAttention", "attention")["rope"] == "half"
    mlp = _facts(report, "PlainMLP", "mlp")
    assert (mlp["activation"], mlp["glu"]) == ("gelu", "none")


def test_a_cache_joined_only_from_the_second_call_and_a_bias_with_padding_filled_in() -> None:
    """The past comes in as an empty tuple first (the reader sees nothing in it), later as
    the keys handed back: still a cache.  A linear bias with a padding mask filled into it
    is still a position bias: no attention call that drops it."""
    report = _scan("research_second_call_cache.py")
    facts = _facts(report, "TupleCacheAttention", "attention")
    assert facts["cache"] == "cat" and facts["position_bias"] is True
    (entry,) = [e for e in report.plan if e["module"] == "TupleCacheAttention"]
    assert entry["stages"] == [] and "pse" in entry["none"]


SITE = Path(__file__).resolve().parent / "fixtures" / "sitepkg"


@pytest.fixture
def library_on_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The stand-in library importable (as if installed), the subclassing model elsewhere."""
    from kb.scan.model import sitepackages

    monkeypatch.syspath_prepend(str(SITE))
    monkeypatch.setattr(sitepackages, "_FOUND", {})
    model = tmp_path / "repo" / "model.py"
    model.parent.mkdir()
    model.write_text((PLAN / "research_library_subclass.py").read_text())
    return model


def test_a_subclass_of_an_installed_library_model_plans_the_inherited_compute(
    library_on_path: Path,
) -> None:
    """``class PatchDecoder(PlainDecoder)`` with the decoder in an installed package: its
    attention (rotated, grouped, causal), SwiGLU and norms are read from the package."""
    report = scanner(options=ScanOptions(product="atlas-a3", use_config=False)).scan(
        [str(library_on_path)]
    )
    mixer = _facts(report, "Mixer", "attention")
    assert (mixer["rope"], mixer["gqa"], mixer["causal"]) == ("half", True, True)
    assert _facts(report, "Gated", "mlp")["activation"] == "silu"
    mappings = {s["mapping"] for e in report.plan for s in e["stages"]}
    assert {"rope_half", "swiglu", "rms_norm"} <= mappings


def test_an_installed_library_outside_the_confined_root_is_not_read(
    library_on_path: Path,
) -> None:
    """Under the server's root confinement the installed package (outside the root) is not
    read: the subclass's own code is all the plan sees, and the scan still answers."""
    from kb.core.paths import confine_reads

    confine_reads(str(library_on_path.parent.resolve()))
    try:
        report = scanner(options=ScanOptions(product="atlas-a3", use_config=False)).scan(
            [str(library_on_path)]
        )
    finally:
        confine_reads(None)
    assert not [m for m in report.inventory if m.name in ("Mixer", "Gated")]


def test_an_expert_list_mixing_mlps_and_identities_is_planned_with_the_identities_said() -> None:
    """``ModuleList([MLP..] + [Identity..])`` indexed by the loop: the experts are read (their
    SwiGLU, a grouped matmul), and the plan says the identity experts stay out of it."""
    report = _scan("research_identity_experts.py")
    facts = _facts(report, "MixedExperts", "moe.experts")
    assert (facts["activation"], facts["glu"], facts["identity_experts"]) == ("silu", "first", True)
    (entry,) = [
        e for e in report.plan if e["module"] == "MixedExperts" and e["kind"] == "moe.experts"
    ]
    assert any(s["operator"] == "npu_grouped_matmul" for s in entry["stages"])
    assert any("identities" in note for note in entry.get("notes", []))


_UNSET_K = """
from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class Settings:
    width: int = 256
    experts: int = 8
    per_token: int = 0


class Router(nn.Module):
    def __init__(self, config: Settings):
        super().__init__()
        self.k = config.per_token
        self.gate = nn.Linear(config.width, config.experts, bias=False)

    def forward(self, x):
        weights, chosen = torch.topk(self.gate(x), self.k)
        return weights.softmax(dim=-1), chosen
"""


def test_a_top_k_left_at_zero_by_the_code_is_unknown_not_zero(tmp_path: Path) -> None:
    """``per_token: int = 0`` in the code's config: no stage is written with k=0 (kb check
    rejects it); k stays a question for the checkpoint's configuration."""
    path = tmp_path / "model.py"
    path.write_text(_UNSET_K)
    report = scanner(options=ScanOptions(product="atlas-a3", use_config=False)).scan([str(path)])
    assert _facts(report, "Router", "moe.router")["topk"] == "unknown"
    args = [s.get("args", {}) for e in report.plan for s in e["stages"]]
    assert args and all(a.get("k") != 0 for a in args)


def test_layers_handed_in_through_functools_partial_are_built() -> None:
    """``partial(nn.LayerNorm, eps=...)`` and ``partial(Feed, ratio=2)`` handed to a block:
    its norm is a LayerNorm (so the adaptive modulation around it is read), its MLP runs."""
    report = _scan("research_partial_layers.py")
    ada = _facts(report, "ModulatedBlock", "norm.adaln")
    assert ada["norm"] == "layer"
    assert _facts(report, "Feed", "mlp")["activation"] == "gelu_tanh"


_OWN_SLOT = """
import torch
import torch.nn.functional as F
from torch import nn


class Turn(nn.Module):
    def forward(self, x):
        a, b = x.chunk(2, dim=-1)
        return torch.cat((-b, a), dim=-1)


class Mixer(nn.Module):
    def __init__(self, width, heads, turn=None):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.turn = turn

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        if self.turn is not None:
            q, k = self.turn(q), self.turn(k)
        return F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, c)


class Stack(nn.Module):
    def __init__(self, width=256, heads=4, kind="absolute"):
        super().__init__()
        self.turn: Turn | None = None
        if kind == "rotary":
            self.turn = Turn()
        self.mixer = Mixer(width, heads, turn=self.turn)

    def forward(self, x):
        return self.mixer(x)
"""


def test_a_slot_the_class_fills_itself_is_read_as_it_runs(tmp_path: Path) -> None:
    """``self.turn = Turn()`` under a configuration test the defaults leave false is the
    class's own choice: no rotation is read into it (nor into another class's ``turn``)."""
    path = tmp_path / "model.py"
    path.write_text(_OWN_SLOT)
    report = scanner(options=ScanOptions(product="atlas-a3", use_config=False)).scan([str(path)])
    assert "rope" not in _facts(report, "Mixer", "attention")
