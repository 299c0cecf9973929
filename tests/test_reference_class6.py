"""Issue 32 class 6: the references apply each batch's own decode mask, order a grouped
matmul's float bias after its scales, take stacked scales, handle empty sequences, and
answer shapes that do not fit with a ReferenceInputError, never a numpy error."""

from __future__ import annotations

import pytest

np = pytest.importorskip("numpy", reason="the [reference] extra is not installed")
ml_dtypes = pytest.importorskip("ml_dtypes", reason="the [reference] extra is not installed")

from kb.reference import ReferenceInputError, run  # noqa: E402
from tests.reference_support import close, sampler  # noqa: E402

RNG = np.random.default_rng(21)
randn = sampler(21, np.float16)


def one_row_attention(q, k, v, masked):
    s = k.astype(np.float64) @ q.astype(np.float64) / np.sqrt(q.shape[-1])
    s[masked] = -np.inf
    p = np.exp(s - s.max())
    return (p / p.sum()) @ v.astype(np.float64)


# ------------------------------------------------------------------ decode mask per batch
@pytest.mark.parametrize(
    "op", ["npu_fused_infer_attention_score", "npu_fused_infer_attention_score_v2"]
)
def test_decode_mask_b_kvs_applies_each_batchs_row(op: str) -> None:
    b, n, s, d = 3, 2, 5, 8
    q, k, v = randn(b, n, 1, d), randn(b, n, s, d), randn(b, n, s, d)
    mask = np.zeros((b, s), bool)
    mask[1, :3] = True  # only batch 1 hides keys 0-2
    mask[2, 4] = True
    heads = (
        {"num_heads": n, "scale": 1 / np.sqrt(d)}
        if op.endswith("score")
        else {"num_query_heads": n, "softmax_scale": 1 / np.sqrt(d)}
    )
    got = run(op, q, k, v, atten_mask=mask, input_layout="BNSD", **heads)[0]
    for bi in range(b):
        for h in range(n):
            assert close(
                got[bi, h, 0], one_row_attention(q[bi, h, 0], k[bi, h], v[bi, h], mask[bi]), 3e-3
            ), (bi, h)


# ------------------------------------------------------------------ grouped matmul int8
def test_grouped_matmul_float_bias_comes_after_the_scales() -> None:
    x, w = RNG.integers(-5, 5, (3, 4)).astype(np.int8), RNG.integers(-5, 5, (4, 2)).astype(np.int8)
    scale, bias = np.array([0.5, 0.25], np.float32), np.array([1.0, -2.0], np.float32)
    got = run("npu_grouped_matmul", [x], [w], bias=[bias], scale=[scale], output_dtype="float16")[0]
    acc = x.astype(np.int64) @ w.astype(np.int64)
    assert close(got, acc * scale + bias, 1e-3)  # the page: (x @ w) * scale + bias
    assert not close(got, (acc + bias) * scale, 1e-3)


def test_grouped_matmul_int32_bias_comes_before_the_scales() -> None:
    x, w = RNG.integers(-5, 5, (3, 4)).astype(np.int8), RNG.integers(-5, 5, (4, 2)).astype(np.int8)
    scale, bias = np.array([0.5, 0.25], np.float32), np.array([4, -8], np.int32)
    got = run("npu_grouped_matmul", [x], [w], bias=[bias], scale=[scale], output_dtype="float16")[0]
    assert close(got, (x.astype(np.int64) @ w.astype(np.int64) + bias) * scale, 1e-3)


def test_grouped_matmul_takes_a_stacked_expert_scale_and_per_token_scale() -> None:
    x = RNG.integers(-5, 5, (5, 4)).astype(np.int8)
    w = RNG.integers(-5, 5, (2, 4, 3)).astype(np.int8)
    scale = RNG.random((2, 3)).astype(np.float32)  # [E, N] in one tensor
    pts = RNG.random(5).astype(np.float32)
    got = run(
        "npu_grouped_matmul",
        [x],
        [w],
        scale=[scale],
        per_token_scale=[pts],
        group_list=np.array([2, 3]),
        group_list_type=1,
        group_type=0,
        split_item=3,
        output_dtype="bfloat16",
    )[0]
    want = np.concatenate(
        [(x[:2].astype(np.int64) @ w[0]) * scale[0], (x[2:].astype(np.int64) @ w[1]) * scale[1]]
    )
    assert close(got, want * pts[:, None], 2e-2)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"scale": [np.ones((3, 3), np.float32)]},  # three groups of scales for two experts
        {"scale": [np.ones(7, np.float32)]},  # neither one per column nor per expert
        {"bias": [np.ones((2, 5), np.float32)], "scale": [np.ones((2, 3), np.float32)]},
    ],
)
def test_malformed_grouped_matmul_input_is_a_reference_error(kwargs) -> None:
    x = RNG.integers(-5, 5, (5, 4)).astype(np.int8)
    w = RNG.integers(-5, 5, (2, 4, 3)).astype(np.int8)
    with pytest.raises(ReferenceInputError):
        run(
            "npu_grouped_matmul",
            [x],
            [w],
            group_list=np.array([2, 3]),
            group_list_type=1,
            group_type=0,
            split_item=3,
            **kwargs,
        )


# ------------------------------------------------------------------ empty sequences and token sets
def test_a_zero_length_sequence_gives_zero_rows() -> None:
    q, k = randn(2, 2, 3, 8), randn(2, 2, 4, 8)
    out = run(
        "npu_fused_infer_attention_score",
        q,
        k,
        k,
        num_heads=2,
        input_layout="BNSD",
        actual_seq_lengths_kv=[0, 4],
    )[0]
    assert not out[0].astype(np.float32).any() and out[1].astype(np.float32).any()


def test_an_empty_tnd_sequence_is_skipped() -> None:
    q, k = randn(5, 2, 8), randn(7, 2, 8)
    out = run(
        "npu_fused_infer_attention_score",
        q,
        k,
        k,
        num_heads=2,
        input_layout="TND",
        actual_seq_lengths=[2, 2, 5],
        actual_seq_lengths_kv=[3, 3, 7],
    )[0]
    assert out.shape == q.shape and np.isfinite(out.astype(np.float32)).all()


def test_empty_lengths_are_refused_clearly() -> None:
    q = randn(1, 2, 1, 8)
    with pytest.raises(ReferenceInputError, match="one length per batch"):
        run(
            "npu_fused_infer_attention_score",
            q,
            q,
            q,
            num_heads=2,
            input_layout="BNSD",
            actual_seq_lengths_kv=[],
        )


def test_an_empty_token_set_routes_to_nothing() -> None:
    x, ids = np.zeros((0, 8), np.float16), np.zeros((0, 2), np.int32)
    every_expert = {"expert_num": 4, "active_expert_range": [0, 4], "expert_tokens_num_flag": True}
    ex, row_idx, counts, _ = run(
        "npu_moe_init_routing_v2", x, ids, expert_tokens_num_type=1, **every_expert
    )
    assert ex.shape == (0, 8) and row_idx.shape == (0,) and counts.tolist() == [0, 0, 0, 0]
    y, idx, _ = run("npu_moe_gating_top_k_softmax", np.zeros((0, 8), np.float16), k=2)
    assert y.shape == (0, 2) and idx.shape == (0, 2)
    split_m = {"group_list": counts, "group_list_type": 1, "group_type": 0, "split_item": 3}
    h = run("npu_grouped_matmul", [ex], [np.ones((4, 8, 3), np.float16)], **split_m)[0]
    assert h.shape == (0, 3)
    assert run("npu_rms_norm", x, np.ones(8, np.float16))[0].shape == (0, 8)
    assert run("npu_dynamic_quant", x)[0].shape == (0, 8)


# ------------------------------------------------------------------ shapes that do not fit
def test_shapes_that_do_not_fit_are_reference_errors_not_numpy_errors() -> None:
    with pytest.raises(ReferenceInputError):
        run("npu_grouped_matmul", [np.ones((2, 5), np.float16)], [np.ones((4, 3), np.float16)])
    with pytest.raises(ReferenceInputError):
        run(
            "npu_moe_finalize_routing",
            np.ones((4, 8), np.float16),
            None,
            None,
            None,
            np.ones((2, 2), np.float32),
            np.array([0, 1, 9, 3], np.int32),
            np.zeros((2, 2), np.int32),
            drop_pad_mode=2,
            k=2,
        )
