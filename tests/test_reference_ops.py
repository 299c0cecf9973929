"""The references catch the classic porting mistakes, and refuse input outside the records.

Each mistake test builds what modelling code computes and shows that the plausible wrong
call (swapped halves, the wrong rotary mode, a missing renormalisation, a mislabelled
layout, the wrong index arrangement) does not match it, while the mapped call does.
"""

from __future__ import annotations

import math

import pytest

np = pytest.importorskip("numpy", reason="the [reference] extra is not installed")
ml_dtypes = pytest.importorskip("ml_dtypes", reason="the [reference] extra is not installed")

from kb.reference import ReferenceInputError, available, record, run  # noqa: E402
from kb.reference.proofs_sparse import COMPRESSED, causal_attention  # noqa: E402
from kb.reference.registry import IMPLEMENTATIONS  # noqa: E402

RNG = np.random.default_rng(3)


def close(a, b, tol: float = 1e-4) -> bool:
    return bool(
        np.allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), atol=tol, rtol=tol)
    )


def randn(*shape: int, scale: float = 1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def half(*shape: int):
    """Attention inputs: the FIA family takes float16/bfloat16, not float32."""
    return randn(*shape).astype(np.float16)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def test_at_least_45_operators_each_with_a_cited_record() -> None:
    names = available()
    assert len(names) >= 45
    for name in names:
        ref = record(name).get("reference")
        assert ref and ref["sources"] and ref["computes"], name
        for src in ref["sources"]:
            assert src["repo"] and src["commit"] and src["path"], (name, src)


def test_every_reference_has_a_test_that_calls_it() -> None:
    """Each operator is run by name in some tests/test_reference_ops*.py or safety test."""
    from pathlib import Path

    text = " ".join(p.read_text() for p in Path(__file__).parent.glob("test_reference_*.py"))
    untested = [n for n in available() if f'"{n}"' not in text]
    assert not untested, untested


def test_every_registered_function_exists() -> None:
    import importlib

    for target in IMPLEMENTATIONS.values():
        module, function = target.split(":")
        assert callable(getattr(importlib.import_module(f"kb.reference.{module}"), function))


def test_call_paths_and_bare_names_resolve_alike() -> None:
    x, g = randn(2, 8), np.ones(8, np.float32)
    a = run("torch_npu.npu_rms_norm", x, g)[0]
    b = run("torch.ops.npu.npu_rms_norm", input=x, gamma=g)[0]
    assert close(a, b)


@pytest.mark.parametrize(
    ("call", "fragment"),
    [
        (lambda: run("npu_rms_norm", randn(2, 8).astype(np.float64), np.ones(8)), "dtype float64"),
        (
            lambda: run("npu_rms_norm", randn(2, 8), np.ones(8, np.float32), eps=1e-5),
            "no parameter 'eps'",
        ),
        (lambda: run("npu_rms_norm", randn(2, 8)), "needs 'gamma'"),
        (lambda: run("npu_rms_norm", randn(2, 8), np.ones(4, np.float32)), "trailing dims"),
        (lambda: run("npu_moe_gating_top_k", randn(2, 8), 2, renorm=1), "allowed values"),
        (
            lambda: run(
                "npu_rotary_mul", randn(1, 1, 2, 8), randn(8), randn(8), rotary_mode="sideways"
            ),
            "rotary_mode",
        ),
        (lambda: run("npu_swiglu", randn(2, 7)), "must be even"),
        (lambda: run("npu_no_such_op", 1), "no operator record"),
        (lambda: run("npu_ffn"), "no numpy reference"),
        (
            lambda: run("npu_moe_gating_top_k", randn(2, 16), 2, group_count=8, k_group=2),
            "groups of more than 2",
        ),
        (
            lambda: run(
                "npu_fused_infer_attention_score",
                half(1, 2, 8),
                half(1, 2, 8),
                half(1, 2, 8),
                sparse_mode=3,
            ),
            "needs the compressed atten_mask",
        ),
        (
            lambda: run(
                "npu_fused_infer_attention_score", randn(1, 2, 8), randn(1, 2, 8), randn(1, 2, 8)
            ),
            "query dtype float32",
        ),
        (
            lambda: run(
                "npu_fused_infer_attention_score_v2",
                half(1, 2, 8),
                half(4, 128, 8),
                half(4, 128, 8),
                block_table=np.zeros((1, 1), np.int32),
                block_size=64,
                actual_seq_kvlen=[3],
            ),
            "multiple of 128",
        ),
    ],
)
def test_input_outside_the_record_is_refused_by_name(call, fragment: str) -> None:
    with pytest.raises(ReferenceInputError, match=fragment):
        call()


# ------------------------------------------------------------------ norms
def test_gemma_weight_needs_one_plus_w() -> None:
    x, w = randn(3, 16), randn(16, scale=0.1)
    gemma = run("npu_gemma_rms_norm", x, w)[0]
    assert close(run("npu_rms_norm", x, 1 + w)[0], gemma, 1e-5)
    assert not close(run("npu_rms_norm", x, w)[0], gemma, 1e-2)  # the raw weight is wrong


def test_add_rms_norm_returns_the_residual_sum_third() -> None:
    x1, x2, g = randn(2, 8), randn(2, 8), np.ones(8, np.float32)
    y, rstd, h = run("npu_add_rms_norm", x1, x2, g)
    assert close(h, x1 + x2) and not close(h, x1)
    assert close(y, run("npu_rms_norm", x1 + x2, g)[0], 1e-5) and rstd.dtype == np.float32


def test_layer_norm_uses_population_variance() -> None:
    x = randn(4, 6)
    y = run("npu_layer_norm_eval", x, [6])
    assert close(
        y, (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5), 1e-5
    )
    assert not close(
        y, (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, ddof=1, keepdims=True) + 1e-5), 1e-3
    )


# ------------------------------------------------------------------ rope
def test_half_and_interleave_are_different_rotations() -> None:
    x, cos, sin = randn(1, 2, 3, 8), randn(1, 1, 3, 8), randn(1, 1, 3, 8)
    half = run("npu_rotary_mul", x, cos, sin)
    inter = run("npu_rotary_mul", x, cos, sin, rotary_mode="interleave")
    assert not close(half, inter, 1e-2)
    rot_half = np.concatenate([-x[..., 4:], x[..., :4]], -1)
    assert close(half, x * cos + rot_half * sin, 1e-5)
    rot_pairs = np.stack([-x[..., 1::2], x[..., 0::2]], -1).reshape(x.shape)
    assert close(inter, x * cos + rot_pairs * sin, 1e-5)


def test_interleave_rope_reorders_its_output() -> None:
    """npu_interleave_rope is not npu_rotary_mul(mode='interleave'): its output is de-interleaved."""
    x, cos, sin = half(1, 1, 2, 8), half(1, 1, 2, 8), half(1, 1, 2, 8)
    out = run("npu_interleave_rope", x, cos, sin)
    assert not close(out, run("npu_rotary_mul", x, cos, sin, rotary_mode="interleave"), 1e-2)
    q = np.concatenate([x[..., 0::2], x[..., 1::2]], -1)
    assert close(out, run("npu_rotary_mul", q, cos, sin), 2e-3)


def test_apply_rotary_pos_emb_rotates_query_and_key_alike() -> None:
    q, k, cos, sin = randn(1, 2, 2, 8), randn(1, 2, 1, 8), randn(1, 2, 1, 8), randn(1, 2, 1, 8)
    qo, ko = run("npu_apply_rotary_pos_emb", q, k, cos, sin)
    assert close(qo, run("npu_rotary_mul", q, cos, sin), 1e-5) and close(
        ko, run("npu_rotary_mul", k, cos, sin), 1e-5
    )


# ------------------------------------------------------------------ GLUs and GELU
def test_swiglu_activates_the_first_half() -> None:
    x = randn(3, 8)
    a, b = x[:, :4], x[:, 4:]
    out = run("npu_swiglu", x)
    assert close(out, a * sigmoid(a) * b, 1e-5) and not close(out, b * sigmoid(b) * a, 1e-2)


def test_dequant_swiglu_quant_default_activates_the_right_half() -> None:
    x = randn(4, 16).astype(np.float16)
    left, _ = run("npu_dequant_swiglu_quant", x, activate_left=True, quant_mode=1)
    right, _ = run("npu_dequant_swiglu_quant", x, quant_mode=1)
    a, b = x[:, :8].astype(np.float32), x[:, 8:].astype(np.float32)
    y = a * sigmoid(a) * b
    assert close(left, np.rint(y / (np.abs(y).max(-1, keepdims=True) / 127)), 1.0)
    assert not close(right, left, 1.0)


def test_dequant_swiglu_quant_static_divides_by_quant_scale() -> None:
    x = randn(2, 8).astype(np.float16)
    scale = np.full((1, 4), 0.05, np.float32)
    y, s = run("npu_dequant_swiglu_quant", x, activate_left=True, quant_scale=scale, quant_mode=0)
    a, b = x[:, :4].astype(np.float32), x[:, 4:].astype(np.float32)
    assert close(y, np.clip(np.rint(a * sigmoid(a) * b / 0.05), -128, 127), 1.0) and not s.any()


def test_geglu_side_and_approximation() -> None:
    x = randn(2, 8)
    a, b = x[:, :4], x[:, 4:]
    tanh = lambda z: 0.5 * z * (1 + np.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z**3)))  # noqa: E731
    assert close(run("npu_geglu", x)[0], a * tanh(b), 1e-5)  # default: the right half is the gate
    assert close(run("npu_geglu", x, activate_left=True)[0], tanh(a) * b, 1e-5)
    assert not close(run("npu_geglu", x, approximate=0, activate_left=True)[0], tanh(a) * b, 1e-5)


def test_fast_gelu_is_not_tanh_gelu() -> None:
    x = np.linspace(-4, 4, 33, dtype=np.float32)
    tanh = run("npu_gelu", x, approximate="tanh")
    assert not close(run("npu_fast_gelu", x), tanh, 5e-3)
    assert close(run("npu_fast_gelu", x), x * sigmoid(1.702 * x), 1e-5)


# ------------------------------------------------------------------ quantization
def test_dynamic_quant_scales_per_row_not_per_tensor() -> None:
    x = randn(3, 16) * np.array([[1.0], [10.0], [0.1]], np.float32)
    y, s = run("npu_dynamic_quant", x.astype(np.float16))
    assert close(s, np.abs(x.astype(np.float16).astype(np.float32)).max(-1) / 127, 1e-6)
    # a per-tensor scale would shrink rows 0 and 2
    assert np.abs(y).max(-1).tolist() == [127, 127, 127]


def test_add_rms_norm_quant_divides_by_scales_and_adds_zero_points() -> None:
    x1, x2, g = (
        randn(3, 16, scale=0.5),
        randn(3, 16, scale=0.5).astype(np.float16),
        np.ones(16, np.float16),
    )
    x1 = x1.astype(np.float16)
    s, z = np.full(16, 0.05, np.float32), np.full(16, 2, np.int32)
    y1, y2, h = run("npu_add_rms_norm_quant", x1, x2, g, s, z)
    norm = run(
        "npu_rms_norm", (x1.astype(np.float32) + x2.astype(np.float32)), g.astype(np.float32)
    )[0]
    assert close(y1, np.clip(np.rint(norm / s + z), -128, 127), 1) and y1.dtype == np.int8
    assert not close(y1, np.clip(np.rint(norm * s + z), -128, 127), 1)  # div_mode=True divides
    assert close(h, x1.astype(np.float32) + x2.astype(np.float32), 1e-2) and h.dtype == np.float16
    assert close(y2, np.clip(np.rint(norm), -128, 127), 1)  # no scales2: scale 1, zero point 0
    mul = run("npu_add_rms_norm_quant", x1, x2, g, 1 / s, z, div_mode=False)[0]
    assert close(mul, y1, 1)


def test_quantize_div_mode() -> None:
    x, s = randn(2, 4), np.array([0.1, 0.2, 0.5, 1.0], np.float32)
    div = run("npu_quantize", x, s, None, "int8", axis=1)
    mul = run("npu_quantize", x, s, None, "int8", axis=1, div_mode=False)
    assert close(div, np.clip(np.rint(x / s), -128, 127), 0) and close(mul, np.rint(x * s), 0)


def test_weight_quant_adds_the_offset_before_scaling() -> None:
    x = randn(2, 4).astype(np.float16)
    w = RNG.integers(-5, 5, (4, 3)).astype(np.int8)
    scale, off = np.full(3, 0.5, np.float16), np.full(3, 2, np.float16)
    got = run("npu_weight_quant_batchmatmul", x, w, scale, off).astype(np.float32)
    xf = x.astype(np.float32)
    assert close(got, xf @ ((w + 2.0) * 0.5), 2e-2) and not close(got, xf @ ((w - 2.0) * 0.5), 2e-2)


def test_weight_quant_per_group_rows() -> None:
    x, w = np.ones((1, 4), np.float16), np.ones((4, 2), np.int8)
    scale = np.array([[1, 1], [3, 3]], np.float16)  # K=4 in groups of 2
    assert run("npu_weight_quant_batchmatmul", x, w, scale, antiquant_group_size=2).tolist() == [
        [8.0, 8.0]
    ]


# ------------------------------------------------------------------ routing
def test_sigmoid_gating_renormalises_and_softmax_does_not() -> None:
    logits = randn(4, 16)
    y1, ids1, norm = run("npu_moe_gating_top_k", logits, 3, norm_type=1, out_flag=True)
    assert close(y1.sum(-1), np.ones(4), 1e-5)
    assert not close(y1, np.take_along_axis(sigmoid(logits), ids1.astype(int), -1), 1e-3)
    assert close(
        np.take_along_axis(norm, ids1.astype(int), -1),
        np.take_along_axis(sigmoid(logits), ids1.astype(int), -1),
        1e-6,
    )
    y0, _ids0, _ = run("npu_moe_gating_top_k", logits, 3, norm_type=0)
    assert (y0.sum(-1) < 1).all()


def test_bias_chooses_experts_but_does_not_weight_them() -> None:
    logits = randn(2, 8)
    bias = np.zeros(8, np.float32)
    bias[7] = 100.0
    y, ids, _ = run("npu_moe_gating_top_k", logits, 1, bias=bias, norm_type=0)
    p = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    assert ids[:, 0].tolist() == [7, 7] and close(y[:, 0], p[:, 7], 1e-6)


def test_group_select_mode_changes_the_kept_groups() -> None:
    logits = np.full((1, 12), -4.0, np.float32)
    logits[0, [0, 1]] = 1.0  # group 0: two good experts
    logits[0, 4] = 3.0  # group 1: one great expert
    args = dict(k_group=1, group_count=3, norm_type=1)
    _, by_max, _ = run("npu_moe_gating_top_k", logits, 2, group_select_mode=0, **args)
    _, by_top2, _ = run("npu_moe_gating_top_k", logits, 2, group_select_mode=1, **args)
    assert 4 in by_max[0].tolist() and 4 not in by_top2[0].tolist()


def test_gating_top_k_softmax_row_idx_and_finished() -> None:
    x = randn(3, 6)
    y, ids, row_idx = run("npu_moe_gating_top_k_softmax", x, np.array([False, True, False]), k=2)
    assert row_idx.tolist() == [[0, 3], [1, 4], [2, 5]]
    assert ids[1].tolist() == [6, 6] and close(y.sum(-1) <= 1, np.ones(3))


# ------------------------------------------------------------------ experts
def test_finalize_index_arrangement_matters() -> None:
    x = randn(5, 4)
    ids = np.array([[0, 2], [1, 0], [2, 1], [0, 1], [2, 0]], np.int32)
    w = np.full((5, 2), 0.5, np.float32)
    ex, row_idx, _, _ = run(
        "npu_moe_init_routing_v2", x, ids, expert_num=3, active_expert_range=[0, 3]
    )
    right = run(
        "npu_moe_finalize_routing", ex, None, None, None, w, row_idx, ids, drop_pad_mode=2, k=2
    )
    wrong = run(
        "npu_moe_finalize_routing", ex, None, None, None, w, row_idx, ids, drop_pad_mode=0, k=2
    )
    assert close(right, x, 1e-6) and not close(wrong, x, 1e-3)


def test_finalize_reads_k_from_scales_when_they_are_given() -> None:
    """k is for scales=None (the record); with scales [N, K] the reference takes K from
    them, so leaving k at its default 1 still combines K rows per token."""
    x = randn(5, 4)
    ids = np.array([[0, 2], [1, 0], [2, 1], [0, 1], [2, 0]], np.int32)
    w = np.full((5, 2), 0.5, np.float32)
    ex, row_idx, _, _ = run(
        "npu_moe_init_routing_v2", x, ids, expert_num=3, active_expert_range=[0, 3]
    )
    out = run("npu_moe_finalize_routing", ex, None, None, None, w, row_idx, ids, drop_pad_mode=2)
    assert out.shape == x.shape and close(out, x, 1e-6)


def test_init_routing_sorts_by_expert_and_counts() -> None:
    x = np.arange(4, dtype=np.float32)[:, None] * np.ones((1, 2), np.float32)
    ids = np.array([[2], [0], [2], [1]], np.int32)
    ex, row_idx, cum, _ = run(
        "npu_moe_init_routing_v2",
        x,
        ids,
        expert_num=3,
        active_expert_range=[0, 3],
        expert_tokens_num_flag=True,
    )
    assert (
        ex[:, 0].tolist() == [1, 3, 0, 2]
        and row_idx.tolist() == [2, 0, 3, 1]
        and cum.tolist() == [1, 2, 4]
    )
    _, scatter, count, _ = run(
        "npu_moe_init_routing_v2",
        x,
        ids,
        expert_num=3,
        active_expert_range=[0, 3],
        expert_tokens_num_flag=True,
        expert_tokens_num_type=1,
        row_idx_type=1,
    )
    assert scatter.tolist() == [1, 3, 0, 2] and count.tolist() == [1, 1, 2]


def test_group_list_types_describe_the_same_split() -> None:
    x, w = randn(5, 3), randn(2, 3, 2)
    want = np.concatenate([x[:2] @ w[0], x[2:] @ w[1]])
    for kind, gl in ((0, [2, 5]), (1, [2, 3]), (2, [[0, 2], [1, 3]])):
        got = run(
            "npu_grouped_matmul",
            [x],
            [w],
            group_list=np.array(gl),
            group_list_type=kind,
            group_type=0,
            split_item=3,
        )
        assert close(got[0], want, 1e-5), kind
    counts_as_cumsum = run(
        "npu_grouped_matmul",
        [x],
        [w],
        group_list=np.array([2, 3]),
        group_list_type=0,
        group_type=0,
        split_item=3,
    )[0]
    assert not close(counts_as_cumsum, want, 1e-3)


def test_permute_unpermute_round_trip() -> None:
    x = randn(4, 3)
    ids = np.array([[1, 0], [0, 2], [2, 1], [1, 2]], np.int32)
    p, order = run("npu_moe_token_permute", x, ids)
    assert close(p[order], np.repeat(x, 2, 0))
    back = run("npu_moe_token_unpermute", p, order, probs=np.full((4, 2), 0.5, np.float32))
    assert close(back, x, 1e-6)


# ------------------------------------------------------------------ attention
def test_layout_labels_must_match_the_tensors() -> None:
    q, k = half(1, 4, 6, 8), half(1, 2, 6, 8)  # BNSD, 4 query heads over 2 kv heads
    right = run(
        "npu_fused_infer_attention_score",
        q,
        k,
        k,
        num_heads=4,
        num_key_value_heads=2,
        input_layout="BNSD",
        scale=1 / math.sqrt(8),
        sparse_mode=3,
        atten_mask=COMPRESSED,
    )[0]
    assert close(right, causal_attention(q, k, k), 2e-3)
    with pytest.raises(ReferenceInputError):  # the same tensors read as BSND have 6 "heads"
        run(
            "npu_fused_infer_attention_score",
            q,
            k,
            k,
            num_heads=4,
            num_key_value_heads=2,
            input_layout="BSND",
        )
    square = half(1, 4, 4, 8)
    wrong = run(
        "npu_fused_infer_attention_score", square, square, square, num_heads=4, input_layout="BSND"
    )[0]
    good = run(
        "npu_fused_infer_attention_score", square, square, square, num_heads=4, input_layout="BNSD"
    )[0]
    assert not close(wrong.transpose(0, 2, 1, 3), good, 1e-3)


def test_causal_alignment_top_left_versus_bottom_right() -> None:
    q, k = half(1, 2, 3, 8), half(1, 2, 7, 8)
    want = causal_attention(q, k, k)
    common = dict(num_heads=2, scale=1 / math.sqrt(8), input_layout="BNSD", atten_mask=COMPRESSED)
    assert close(
        run("npu_fused_infer_attention_score", q, k, k, sparse_mode=3, **common)[0], want, 2e-3
    )
    assert not close(
        run("npu_fused_infer_attention_score", q, k, k, sparse_mode=2, **common)[0], want, 1e-3
    )


def test_no_mask_means_full_attention_even_with_tokens() -> None:
    q = half(1, 1, 4, 8)
    full = run("npu_prompt_flash_attention", q, q, q, input_layout="BNSD")
    banded = run(
        "npu_prompt_flash_attention", q, q, q, input_layout="BNSD", pre_tokens=0, next_tokens=0
    )
    assert close(full, banded)  # the defaults next_tokens=0 do not make it causal without a mask
    mask = np.triu(np.ones((4, 4), bool), 1)
    causal = run("npu_prompt_flash_attention", q, q, q, input_layout="BNSD", atten_mask=mask)
    assert not close(causal, full, 1e-3)


def test_learnable_sink_absorbs_weight() -> None:
    q = half(1, 2, 2, 8)
    plain = run(
        "npu_fused_infer_attention_score_v2", q, q, q, num_query_heads=2, input_layout="BNSD"
    )[0]
    import ml_dtypes

    sink = np.array([50.0, -50.0], np.float32)

    sunk = run(
        "npu_fused_infer_attention_score_v2",
        q,
        q,
        q,
        num_query_heads=2,
        input_layout="BNSD",
        learnable_sink=sink.astype(ml_dtypes.bfloat16),
    )[0]
    assert close(sunk[:, 0], 0, 1e-3) and close(sunk[:, 1], plain[:, 1], 2e-3)


def test_softmax_lse_is_returned_only_when_asked() -> None:
    q = half(1, 2, 3, 8)
    _, none = run("npu_fused_infer_attention_score", q, q, q, num_heads=2, input_layout="BNSD")
    _, lse = run(
        "npu_fused_infer_attention_score",
        q,
        q,
        q,
        num_heads=2,
        input_layout="BNSD",
        softmax_lse_flag=True,
    )
    qf = q.astype(np.float32)
    s = np.einsum("bnqd,bnkd->bnqk", qf, qf)
    assert none.shape == (1,) and close(lse[..., 0], np.log(np.exp(s).sum(-1)), 1e-4)


def test_fusion_attention_outputs() -> None:
    q = half(1, 3, 2 * 8)
    out, smax, ssum, _, seed, offset, _ = run("npu_fusion_attention", q, q, q, 2, "BSH")
    assert (
        out.shape == q.shape
        and smax.shape == (1, 2, 3, 8)
        and ssum.shape == (1, 2, 3, 8)
        and (seed, offset) == (0, 0)
    )


# ------------------------------------------------------------------ caches
def test_scatter_pa_kv_cache_default_mode_is_nz() -> None:
    k = randn(2, 2, 16).astype(np.float16)
    nd = np.zeros((2, 4, 2, 16), np.float16)
    with pytest.raises(ReferenceInputError, match="NZ cache"):
        run("npu_scatter_pa_kv_cache", k, k, nd, nd.copy(), np.array([0, 5], np.int32))
    run(
        "npu_scatter_pa_kv_cache",
        k,
        k,
        nd,
        nd.copy(),
        np.array([0, 5], np.int32),
        cache_mode="Norm",
    )
    assert close(nd[1, 1], k[1]) and close(nd[0, 0], k[0])


def test_reshape_and_cache_skips_negative_slots() -> None:
    k = randn(2, 1, 4).astype(np.float16)
    cache = np.zeros((1, 4, 1, 4), np.float16)
    run("_npu_reshape_and_cache", k, k, cache, cache.copy(), np.array([-1, 2], np.int32))
    assert close(cache[0, 2], k[1]) and not cache[0, :2].any()


def test_kv_rmsnorm_rope_cache_deinterleaves_the_rope_part() -> None:
    import ml_dtypes

    bf = ml_dtypes.bfloat16
    kv = randn(1, 1, 1, 576).astype(bf)
    cos, sin = np.ones((1, 1, 1, 64), bf), np.zeros((1, 1, 1, 64), bf)
    kc, cc = np.zeros((1, 1, 2, 64), bf), np.zeros((1, 1, 2, 512), bf)
    _, _, k_out, _ = run(
        "npu_kv_rmsnorm_rope_cache",
        kv,
        np.ones(512, bf),
        cos,
        sin,
        np.array([[1]]),
        kc,
        cc,
        is_output_kv=True,
    )
    pe = kv[0, 0, 0, 512:].astype(np.float32)
    assert close(kc[0, 0, 1], np.concatenate([pe[0::2], pe[1::2]]), 1e-2)
    assert not close(kc[0, 0, 1], pe, 1e-2) and close(k_out[0, 0, 0], kc[0, 0, 1])


def test_actual_lengths_cut_each_batch() -> None:
    q, k = half(2, 4, 2, 8), half(2, 5, 2, 8)  # BSND
    out = run(
        "npu_fused_infer_attention_score",
        q,
        k,
        k,
        num_heads=2,
        input_layout="BSND",
        actual_seq_lengths=[2, 4],
        actual_seq_lengths_kv=[3, 5],
    )[0]
    b0 = run(
        "npu_fused_infer_attention_score",
        q[:1, :2],
        k[:1, :3],
        k[:1, :3],
        num_heads=2,
        input_layout="BSND",
    )[0]
    assert close(out[:1, :2], b0, 2e-3) and not out[0, 2:].any()
    full = run("npu_fused_infer_attention_score", q, k, k, num_heads=2, input_layout="BSND")[0]
    assert close(out[1], full[1], 2e-3) and not close(out[:1, :2], full[:1, :2], 1e-3)


def test_mode_0_band_counts_from_the_top_left() -> None:
    q = half(1, 1, 5, 8)
    no_mask_entries = np.zeros((5, 5), bool)
    got = run(
        "npu_fused_infer_attention_score",
        q,
        q,
        q,
        num_heads=1,
        input_layout="BNSD",
        atten_mask=no_mask_entries,
        pre_tokens=1,
        next_tokens=0,
        scale=0.3,
    )[0]
    qf = q.astype(np.float32)[0, 0]
    s = qf @ qf.T * 0.3
    i, j = np.indices((5, 5))
    s = np.where((j <= i) & (j >= i - 1), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    assert close(got[0, 0], (p / p.sum(-1, keepdims=True)) @ qf, 2e-3)


def test_one_query_row_ignores_sparse_mode_in_fia() -> None:
    q, k = half(1, 2, 1, 8), half(1, 2, 6, 8)
    full = run("npu_fused_infer_attention_score", q, k, k, num_heads=2, input_layout="BNSD")[0]
    top_left = run(
        "npu_fused_infer_attention_score",
        q,
        k,
        k,
        num_heads=2,
        input_layout="BNSD",
        sparse_mode=2,
        atten_mask=COMPRESSED,
    )[0]
    # one decode row: sparse_mode does not apply (it would see key 0 only)
    assert close(top_left, full)
    wide = half(1, 2, 2, 8)
    two_rows = run(
        "npu_fused_infer_attention_score",
        wide,
        k,
        k,
        num_heads=2,
        input_layout="BNSD",
        sparse_mode=2,
        atten_mask=COMPRESSED,
    )[0]
    assert not close(
        two_rows,
        run("npu_fused_infer_attention_score", wide, k, k, num_heads=2, input_layout="BNSD")[0],
        1e-3,
    )


def test_transpose_batchmatmul_moves_the_batch_axis() -> None:
    """(T, N, K) input needs perm_x1=[1, 0, 2] to be read per head; the identity reads T as the batch."""
    x, w = randn(3, 4, 32), randn(4, 32, 16)
    want = np.einsum("tnk,nkd->tnd", x, w)
    assert close(run("npu_transpose_batchmatmul", x, w, perm_x1=[1, 0, 2]), want)
    with pytest.raises(ReferenceInputError):
        # (3, 4, 32) @ (4, 32, 16): batches differ
        run("npu_transpose_batchmatmul", x, w, perm_x1=[0, 1, 2])
    y = run("npu_transpose_batchmatmul", randn(4, 3, 32), w, perm_x1=[0, 1, 2])
    assert y.shape == (3, 4, 16) and not close(y, want)


def test_lightning_indexer_weights_after_the_relu_and_masks_causally() -> None:
    q, k = randn(1, 2, 4, 16).astype(np.float16), randn(1, 6, 1, 16).astype(np.float16)
    w = randn(1, 2, 4).astype(np.float16)
    idx, _ = run("npu_lightning_indexer", q, k, w, sparse_count=6, sparse_mode=3)
    s = np.einsum("shd,td->sht", q[0].astype(np.float32), k[0, :, 0].astype(np.float32))
    right = (np.maximum(s, 0) * w[0].astype(np.float32)[..., None]).sum(1)
    assert idx[0, 0, 0, -1] == -1 and idx[0, 1, 0, -1] != -1  # the first query sees 5 of 6 keys
    assert list(idx[0, 1, 0]) == list(np.argsort(-right[1], kind="stable"))
    # ReLU per head, then the weighted sum: head scores (2, -3) give 2, not relu(2 - 3) = 0
    q2 = np.zeros((1, 1, 2, 16), np.float16)
    q2[0, 0, 0, :2], q2[0, 0, 1, 0] = (2, 1), -3
    k2 = np.zeros((1, 2, 1, 16), np.float16)
    k2[0, 0, 0, 0] = k2[0, 1, 0, 1] = 1
    top, _ = run(
        "npu_lightning_indexer",
        q2,
        k2,
        np.ones((1, 1, 2), np.float16),
        sparse_count=1,
        sparse_mode=0,
    )
    assert top[0, 0, 0, 0] == 0  # relu-after-sum would score key 0 at 0 and pick key 1


def test_gated_delta_rule_state_is_value_by_key() -> None:
    """The state is (Dv, Dk): a model state kept (Dk, Dv) must be transposed; chunk's scale defaults to 1."""
    bf = ml_dtypes.bfloat16
    t, dk, dv = 3, 8, 4
    q, k, v = (randn(t, 1, d).astype(bf) for d in (dk, dk, dv))
    beta, g = np.full((t, 1), 0.5, bf), np.full((t, 1), -0.1, np.float32)
    s0 = randn(1, 1, dv, dk).astype(np.float32)
    o, final = run("npu_chunk_gated_delta_rule", q, k, v, beta=beta, initial_state=s0, g=g)
    s = s0[0, 0].astype(np.float64)
    kf, vf, qf = (x.astype(np.float64) for x in (k, v, q))
    for i in range(t):
        s = s * np.exp(-0.1)
        s = s + 0.5 * np.outer(vf[i, 0] - s @ kf[i, 0], kf[i, 0])
    assert final.shape == (1, 1, dv, dk) and close(final[0, 0], s, 1e-3)
    assert close(o[-1, 0].astype(np.float32), s @ qf[-1, 0], 3e-2)
    o2, _ = run(
        "npu_chunk_gated_delta_rule", q, k, v, beta=beta, initial_state=s0, g=g, scale=dk**-0.5
    )
    assert not close(o2.astype(np.float32), o.astype(np.float32), 1e-2)


def test_sparse_flash_attention_reads_only_the_chosen_blocks() -> None:
    """Index 1 with sparse_block_size 2 means keys 2 and 3; the rope part counts in the score."""
    bf = ml_dtypes.bfloat16
    q, qr = randn(1, 1, 2, 512).astype(bf), randn(1, 1, 2, 64).astype(bf)
    c, kr = randn(1, 6, 1, 512).astype(bf), randn(1, 6, 1, 64).astype(bf)
    idx = np.array([[[[1, -1]]]], np.int32)
    got = run(
        "npu_sparse_flash_attention",
        q,
        c,
        c,
        idx,
        0.05,
        query_rope=qr,
        key_rope=kr,
        sparse_block_size=2,
        sparse_mode=0,
        attention_mode=2,
    )[0].astype(np.float32)
    qf = np.concatenate([q, qr], -1)[0, 0].astype(np.float32)
    kf = np.concatenate([c, kr], -1)[0, 2:4, 0].astype(np.float32)
    s = qf @ kf.T * 0.05
    p = np.exp(s - s.max(-1, keepdims=True))
    want = (p / p.sum(-1, keepdims=True)) @ c[0, 2:4, 0].astype(np.float32)
    assert close(got[0, 0], want, 2e-2)
    no_rope = np.exp(q[0, 0].astype(np.float32) @ c[0, 2:4, 0].astype(np.float32).T * 0.05)
    assert not close(
        got[0, 0],
        (no_rope / no_rope.sum(-1, keepdims=True)) @ c[0, 2:4, 0].astype(np.float32),
        1e-3,
    )


def test_kv_rmsnorm_rope_cache_v2_writes_in_place_and_returns_two() -> None:
    """v1 returns the caches first; v2 returns (k_pe, latent) and only mutates the caches."""
    bf = ml_dtypes.bfloat16
    kv, gamma = randn(1, 1, 2, 576).astype(bf), np.ones(512, bf)
    cos, sin = np.ones((1, 1, 2, 64), bf), np.zeros((1, 1, 2, 64), bf)
    kc, cc = np.zeros((1, 16, 1, 64), bf), np.zeros((1, 16, 1, 512), bf)
    out = run(
        "npu_kv_rmsnorm_rope_cache_v2",
        kv,
        gamma,
        cos,
        sin,
        np.array([3, 4]),
        kc,
        cc,
        cache_mode="PA",
        is_output_kv=True,
    )
    assert len(out) == 2 and out[0].shape == (1, 1, 2, 64) and out[1].shape == (1, 1, 2, 512)
    assert close(kc[0, 3, 0].astype(np.float32), out[0][0, 0, 0].astype(np.float32), 0)
    assert close(cc[0, 4, 0].astype(np.float32), out[1][0, 0, 1].astype(np.float32), 0)
    assert not close(
        out[0][0, 0, 0].astype(np.float32), kv[0, 0, 0, 512:].astype(np.float32), 1e-3
    )  # de-interleaved
