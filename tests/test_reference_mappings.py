"""Every fusion mapping has an equivalence proof that passes, and the table is sound.

A mapping without a passing proof must not be proposed; this is the test that says which
ones have one.  The proofs themselves live in kb.reference.proofs_* (numpy).
"""

from __future__ import annotations

import pytest

pytest.importorskip("numpy", reason="the [reference] extra is not installed")
pytest.importorskip("ml_dtypes", reason="the [reference] extra is not installed")

from kb.reference import available
from kb.reference.mappings import BY_ID, MAPPINGS
from kb.reference.proofs import PROOFS, verify

#: the ids the planner relies on (issue 22); the table may hold more
REQUIRED = {"rms_norm", "rms_norm_one_plus_w", "add_rms_norm", "layer_norm", "rope_half",
            "rope_interleave", "swiglu", "geglu", "gelu_tanh", "router_softmax_topk",
            "router_softmax_bias_topk", "router_sigmoid_bias_group_topk",
            "router_topk_then_sigmoid", "moe_experts_loop", "attention_gqa_bsh",
            "attention_gqa_bsnd", "attention_gqa_bnsd", "attention_gqa_tnd",
            "attention_sliding_window", "cache_write_paged", "cache_write_contiguous",
            "dynamic_quant_int8_matmul"}  # fmt: skip


def test_the_table_holds_the_required_ids_once() -> None:
    ids = [m.id for m in MAPPINGS]
    assert len(ids) == len(set(ids))
    assert set(ids) >= REQUIRED, REQUIRED - set(ids)


def test_every_mapping_has_a_proof_and_every_proof_a_mapping() -> None:
    assert set(PROOFS) == set(BY_ID)


def test_mapped_operators_have_references() -> None:
    have = set(available())
    for m in MAPPINGS:
        assert {m.target, *m.also} <= have, m.id


@pytest.mark.parametrize("mapping_id", sorted(BY_ID))
def test_mapping_is_proven(mapping_id: str) -> None:
    assert verify(mapping_id) == []


@pytest.mark.parametrize("mapping_id", ["rms_norm", "router_sigmoid_bias_group_topk", "attention_gqa_tnd"])
def test_proofs_hold_for_other_seeds(mapping_id: str) -> None:
    assert verify(mapping_id, seed=7) == []
