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
