"""Each row of the fusion-pattern table (kb/reference/mappings.py) is shown planned: some
fixture model under tests/fixtures/modelplan gets a stage tagged with the row's id.

Adding a pattern is a row (facts it matches, steps, argument derivation, proof), its
numpy proof and a fixture that computes it (docs/contributing.md); this test picks the
fixture up by the id the planner writes.  NOT_YET lists the rows no fixture plans yet:
it must shrink (the test fails when a listed row gets planned, and when a new row is
neither planned nor listed).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kb.api.scan import scanner
from kb.reference.mappings import MAPPINGS
from kb.scan.engine import ScanOptions

PLAN = Path(__file__).resolve().parent / "fixtures" / "modelplan"

#: rows planned only from the development sets (layouts, quantized and parallel chains)
NOT_YET: frozenset[str] = frozenset(
    {
        "add_rms_norm_quant",
        "attention_gqa_bnsd",
        "attention_gqa_bsh",
        "attention_gqa_ntd_tnd",
        "attention_gqa_tnd_ntd",
        "attention_mla_bsh",
        "attention_mla_bsnd",
        "attention_mla_tnd",
        "attention_noncausal_bnsd",
        "attention_noncausal_bsh",
        "attention_noncausal_ntd_tnd",
        "attention_noncausal_tnd_ntd",
        "cache_write_contiguous",
        "dequant_swiglu_quant",
        "dynamic_quant_int8_matmul",
        "lightning_indexer",
        "moe_experts_bmm",
        "moe_experts_loop_permute",
        "router_sigmoid_topk",
        "router_softmax_bias_topk",
        "router_topk_then_sigmoid",
        "sparse_attention_mla",
    }
)


@pytest.fixture(scope="module")
def planned() -> set[str]:
    made = scanner(options=ScanOptions(product="atlas-a3", use_config=False))
    out: set[str] = set()
    for fixture in sorted(PLAN.glob("*.py")):
        report = made.scan([str(fixture)])
        out |= {s["mapping"] for e in report.plan for s in e.get("stages", [])}
    return out


def test_every_pattern_row_is_planned_from_a_fixture(planned: set[str]) -> None:
    rows = {m.id for m in MAPPINGS if m.pattern is not None and m.pattern.on}
    missing = sorted(rows - planned - NOT_YET)
    assert not missing, f"rows no fixture plans (add one, or list them in NOT_YET): {missing}"
    now = sorted(NOT_YET & planned)
    assert not now, f"planned now: take them off NOT_YET: {now}"
