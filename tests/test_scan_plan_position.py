"""Scores that get more than a mask (tests/fixtures/modelplan/position_bias.py, our own
code): a linear position bias (per-head slopes times key distance, built by the caller,
added or folded into baddbmm) is never planned away as if it were a mask, and a mask built
by comparing key and query positions is the triangle it is (causal)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kb.api.scan import scanner
from kb.scan.engine import ScanOptions

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "modelplan" / "position_bias.py"


@pytest.fixture(scope="module")
def report() -> Any:
    options = ScanOptions(product="atlas-a2", use_config=False)
    return scanner(options=options).scan([str(FIXTURE)])


def _module(report: Any, name: str) -> Any:
    found = [m for m in report.inventory if m.name == name]
    assert found, [m.name for m in report.inventory]
    return found[0]


@pytest.mark.parametrize("name", ["BiasedAttention", "BatchedBiasAttention"])
def test_a_position_bias_is_not_planned_as_a_mask(report: Any, name: str) -> None:
    assert _module(report, name).facts.get("position_bias") is True
    entries = [e for e in report.plan if e["module"] == name]
    assert entries and all(not e["stages"] for e in entries), entries
    assert all("position bias" in e.get("none", "") for e in entries)


def test_positions_compared_are_a_causal_triangle_not_a_bias(report: Any) -> None:
    m = _module(report, "ComparedMaskAttention")
    assert m.facts.get("causal") is True and "position_bias" not in m.facts
    (entry,) = [e for e in report.plan if e["module"] == "ComparedMaskAttention"]
    (stage,) = [s for s in entry["stages"] if s["mapping"].startswith("attention_")]
    assert stage["args"].get("sparse_mode") == 3, stage
