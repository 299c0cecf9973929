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
REQUIRED = {
    "rms_norm",
    "rms_norm_one_plus_w",
    "add_rms_norm",
    "layer_norm",
    "rope_half",
    "rope_interleave",
    "swiglu",
    "geglu",
    "gelu_tanh",
    "router_softmax_topk",
    "router_softmax_bias_topk",
    "router_sigmoid_bias_group_topk",
    "router_topk_then_sigmoid",
    "moe_experts_loop",
    "attention_gqa_bsh",
    "attention_gqa_bsnd",
    "attention_gqa_bnsd",
    "attention_gqa_tnd",
    "attention_sliding_window",
    "cache_write_paged",
    "cache_write_contiguous",
    "dynamic_quant_int8_matmul",
}


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


@pytest.mark.parametrize(
    "mapping_id", ["rms_norm", "router_sigmoid_bias_group_topk", "attention_gqa_tnd"]
)
def test_proofs_hold_for_other_seeds(mapping_id: str) -> None:
    assert verify(mapping_id, seed=7) == []


# -- the newer proofs can fail: the classic mistake of each differs beyond tolerance ----------


def test_gelu_erf_is_not_the_tanh_curve() -> None:
    import numpy as np

    from kb.reference import run
    from kb.reference.proving import Check

    x = np.linspace(-3, 3, 61, dtype=np.float32)
    assert Check("erf vs tanh", run("npu_gelu", x, approximate="tanh"), run("npu_gelu", x)).error()


def test_topk_then_softmax_needs_the_renormalisation() -> None:
    import numpy as np

    from kb.reference import run
    from kb.reference.proofs_sparse import _softmax, _topk
    from kb.reference.proving import Check

    logits = np.random.default_rng(1).standard_normal((5, 16)).astype(np.float32)
    y, _, _ = run("npu_moe_gating_top_k_softmax", logits, k=4)
    want = _softmax(np.take_along_axis(logits, _topk(logits, 4), -1))
    assert Check("no renorm", y, want).error()  # output 0 alone is the full softmax at ids


def test_sigmoid_router_output_0_is_renormalised() -> None:
    import numpy as np

    from kb.reference import run
    from kb.reference.proving import Check

    logits = np.random.default_rng(2).standard_normal((5, 16)).astype(np.float32)
    y, ids, _ = run("npu_moe_gating_top_k", logits, 3, norm_type=1)
    raw = np.take_along_axis(1 / (1 + np.exp(-logits)), ids.astype(np.int64), -1)
    assert Check("raw sigmoid", y, raw).error()


def test_noncausal_attention_is_not_the_causal_call() -> None:
    import numpy as np

    from kb.reference import run
    from kb.reference.proofs_sparse import COMPRESSED
    from kb.reference.proving import Check

    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((1, 2, 5, 8)).astype(np.float16) for _ in range(3))
    full = run(
        "npu_fused_infer_attention_score", q, k, v, num_heads=2, input_layout="BNSD", sparse_mode=0
    )[0]
    causal = run(
        "npu_fused_infer_attention_score",
        q,
        k,
        v,
        num_heads=2,
        input_layout="BNSD",
        sparse_mode=3,
        atten_mask=COMPRESSED,
    )[0]
    assert Check("causal vs full", causal, full).error()


def test_mla_cache_write_rotates_the_deinterleaved_k_pe() -> None:
    """Rotating k_pe in its stored (interleaved) order, without the de-interleave, is wrong."""
    import numpy as np

    from kb.reference import run
    from kb.reference.proving import LOW, Check, rounded

    rng = np.random.default_rng(4)
    kv, gamma = rounded(rng, (1, 1, 2, 576), "bfloat16"), rounded(rng, (512,), "bfloat16")
    ang = rng.random((1, 1, 2, 32)).astype(np.float32)
    cos, sin = (f(np.concatenate([ang, ang], -1)).astype(LOW["bfloat16"]) for f in (np.cos, np.sin))
    kc, cc = np.zeros((1, 1, 4, 64), LOW["bfloat16"]), np.zeros((1, 1, 4, 512), LOW["bfloat16"])
    run(
        "npu_kv_rmsnorm_rope_cache",
        kv,
        gamma,
        cos,
        sin,
        np.array([[0, 1]]),
        kc,
        cc,
        cache_mode="Norm",
    )
    pe = kv[..., 512:].astype(np.float32)  # the mistake: no view(32, 2).transpose
    wrong = pe * cos.astype(np.float32) + np.concatenate(
        [-pe[..., 32:], pe[..., :32]], -1
    ) * sin.astype(np.float32)
    assert Check("interleaved rope", kc[:, :, :2], wrong.astype(LOW["bfloat16"])).error()


def test_mla_attention_needs_the_rope_part_and_the_192_scale() -> None:
    """Dropping query_rope/key_rope, or scaling by the absorbed width 1/sqrt(576), breaks it."""
    import numpy as np

    from kb.reference import run
    from kb.reference.proving import Check

    rng = np.random.default_rng(5)
    q, qr = (
        rng.standard_normal((3, 2, 512)).astype(np.float16),
        rng.standard_normal((3, 2, 64)).astype(np.float16),
    )
    c, kr = (
        rng.standard_normal((3, 1, 512)).astype(np.float16),
        rng.standard_normal((3, 1, 64)).astype(np.float16),
    )
    args = {
        "num_heads": 2,
        "num_key_value_heads": 1,
        "input_layout": "TND",
        "actual_seq_lengths": [3],
        "actual_seq_lengths_kv": [3],
    }
    right = run(
        "npu_fused_infer_attention_score",
        q,
        c,
        c,
        query_rope=qr,
        key_rope=kr,
        scale=1 / np.sqrt(192),
        **args,
    )[0]
    no_rope = run("npu_fused_infer_attention_score", q, c, c, scale=1 / np.sqrt(192), **args)[0]
    wide = run(
        "npu_fused_infer_attention_score",
        q,
        c,
        c,
        query_rope=qr,
        key_rope=kr,
        scale=1 / np.sqrt(576),
        **args,
    )[0]
    assert Check("no rope", no_rope, right).error() and Check("scale 576", wide, right).error()
    ntd = run(
        "npu_fused_infer_attention_score",
        q,
        c,
        c,
        query_rope=qr,
        key_rope=kr,
        scale=1 / np.sqrt(192),
        **{**args, "input_layout": "TND_NTD"},
    )[0]
    assert ntd.shape == (2, 3, 512) and Check("TND_NTD", ntd.swapaxes(0, 1), right).error() is None


# -- the attention proofs fail on the classic mistakes (issue 32, class 6) -------------------
def _fails(proof) -> bool:
    from kb.reference import ReferenceInputError
    from kb.reference.proving import failures

    try:
        return bool(failures(proof()))
    except ReferenceInputError:
        return True


@pytest.mark.parametrize("layout", ["TND", "BSND"])
def test_top_left_causal_alignment_fails_the_gqa_proof(layout: str) -> None:
    """Query and key lengths differ per sequence, so sparse_mode=2 (top-left) is not the
    bottom-right causal mask the model computes (the chunked-prefill mistake)."""
    import numpy as np

    from kb.reference import proofs_sparse

    assert not _fails(lambda: proofs_sparse.attention(layout, np.random.default_rng(0)))
    assert _fails(lambda: proofs_sparse.attention(layout, np.random.default_rng(0), sparse_mode=2))


@pytest.mark.parametrize("layout", ["TND_NTD", "NTD_TND"])
def test_top_left_alignment_fails_the_split_layout_proof(layout: str) -> None:
    import numpy as np

    from kb.reference import proofs_more

    assert _fails(
        lambda: proofs_more.attention_split_layout(
            True, layout, np.random.default_rng(0), sparse_mode=2
        )
    )


def test_the_varlen_proofs_pack_unequal_lengths() -> None:
    from kb.reference.proofs_sparse import VARLEN_KV, VARLEN_Q

    assert all(q != kv for q, kv in zip(VARLEN_Q, VARLEN_KV, strict=True))


@pytest.mark.parametrize("layout", ["BNSD", "BSND", "BSH", "TND"])
def test_omitting_num_key_value_heads_fails_the_gqa_proof(layout: str) -> None:
    import numpy as np

    from kb.reference import proofs_sparse

    assert _fails(
        lambda: proofs_sparse.attention(layout, np.random.default_rng(0), pass_kv_heads=False)
    )
