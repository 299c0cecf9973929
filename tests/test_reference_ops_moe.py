"""The added MoE references (v1 init routing, expert row ends, re-routing, the quantized
grouped matmul with its combine, one-rank dispatch/combine) against a plain per-token
expert loop written here, in bfloat16 or float16 where the operator takes it."""

from __future__ import annotations

import pytest

np = pytest.importorskip("numpy", reason="the [reference] extra is not installed")
ml_dtypes = pytest.importorskip("ml_dtypes", reason="the [reference] extra is not installed")

from kb.reference import NotModelled, ReferenceInputError, run  # noqa: E402
from tests.reference_support import BF16, close, sampler  # noqa: E402

RNG = np.random.default_rng(5)
randn = sampler(5)


def routed(tokens: int, experts: int, k: int) -> np.ndarray:
    return np.stack([RNG.permutation(experts)[:k] for _ in range(tokens)]).astype(np.int32)


# ------------------------------------------------------------------ init routing v1
def test_init_routing_v1_sorts_by_expert_and_keeps_token_order() -> None:
    n, k = 4, 2
    x = (np.arange(n, dtype=np.float32)[:, None] + np.zeros((1, 3), np.float32)).astype(np.float16)
    ids = np.array([[2, 0], [0, 1], [2, 1], [1, 0]], np.int32)
    row_idx = np.arange(n * k, dtype=np.int32).reshape(k, n).T  # what gating_top_k_softmax returns
    ex, expanded_row_idx, expanded_expert = run("npu_moe_init_routing", x, row_idx, ids, n)
    pairs = sorted((int(ids[t, j]), t * k + j) for t in range(n) for j in range(k))
    assert expanded_expert.tolist() == [e for e, _ in pairs]
    src = [int(row_idx.reshape(-1)[p]) for _, p in pairs]
    assert ex[:, 0].tolist() == [s % n for s in src]
    for i, s in enumerate(src):
        assert expanded_row_idx[s] == i
    short, _, _ = run("npu_moe_init_routing", x, row_idx, ids, 1)
    assert short.shape == (k, 3)  # min(N, active_num) * K rows


def test_compute_expert_tokens_gives_each_experts_row_end() -> None:
    rows = np.array([0, 0, 2, 2, 2, 4], np.int32)
    got = run("npu_moe_compute_expert_tokens", rows, 6)
    assert got.tolist() == [2, 2, 5, 5, 6, 6] and got.dtype == np.int32
    with pytest.raises(ReferenceInputError, match="sorted"):
        run("npu_moe_compute_expert_tokens", np.array([3, 1], np.int32), 4)


def test_re_routing_reorders_rank_blocks_by_expert() -> None:
    # rank 0 sent 1 token of expert 0 and 2 of expert 1; rank 1 sent 2 and 1
    counts = np.array([[1, 2], [2, 1]], np.int32)
    tokens = np.arange(6, dtype=np.float32)[:, None].repeat(4, 1).astype(BF16)
    scales = np.arange(6, dtype=np.float32) * 10
    out, out_scales, idx, per_expert = run(
        "npu_moe_re_routing", tokens, counts, per_token_scales=scales
    )
    # arrival order: r0e0 [0], r0e1 [1, 2], r1e0 [3, 4], r1e1 [5]; expert order: e0 (r0, r1), e1 (r0, r1)
    assert idx.tolist() == [0, 3, 4, 1, 2, 5] and out[:, 0].astype(np.float32).tolist() == [
        0,
        3,
        4,
        1,
        2,
        5,
    ]
    assert out_scales.tolist() == [0, 30, 40, 10, 20, 50] and per_expert.tolist() == [3, 3]


# ------------------------------------------------------------------ grouped matmul + finalize
def test_grouped_matmul_finalize_routing_against_a_token_loop() -> None:
    m, k, n, e = 6, 8, 4, 3
    x = RNG.integers(-4, 4, (m, k)).astype(np.int8)
    w = RNG.integers(-4, 4, (e, k, n)).astype(np.int8)
    counts = np.array([2, 1, 3], np.int64)
    scale = RNG.random((e, n)).astype(np.float32)
    pts, logit = RNG.random(m).astype(np.float32), RNG.random(m).astype(np.float32)
    row_index = np.array([0, 1, 2, 0, 2, 1], np.int64)  # output token of each expert row
    shared = RNG.standard_normal((2, n)).astype(np.float32).astype(BF16)
    routing = {
        "scale": scale,
        "pertoken_scale": pts,
        "logit": logit,
        "row_index": row_index,
        "output_bs": 3,
    }
    op = "npu_grouped_matmul_finalize_routing"
    got = run(
        op,
        x,
        w,
        counts,
        shared_input=shared,
        shared_input_weight=0.5,
        shared_input_offset=1,
        **routing,
    )
    want = np.zeros((3, n))
    expert_of_row = np.repeat(np.arange(e), counts)
    for r in range(m):
        g = expert_of_row[r]
        acc = sum(int(x[r, i]) * w[g, i].astype(np.int64) for i in range(k))
        want[row_index[r]] += acc * scale[g] * pts[r] * logit[r]
    want[1:3] += 0.5 * shared.astype(np.float64)
    assert got.dtype == np.float32 and got.shape == (3, n) and close(got, want, 1e-4)
    as_cumsum = run(op, x, w, np.cumsum(counts), group_list_type=0, **routing)
    assert close(as_cumsum, want - np.pad(0.5 * shared.astype(np.float64), ((1, 0), (0, 0))), 1e-4)
    with pytest.raises(ReferenceInputError, match="cumulative"):  # counts [2, 1, 3] are no cumsum
        run(op, x, w, counts, group_list_type=0, **routing)


# ------------------------------------------------------------------ one-rank dispatch / combine
def moe_loop(x, ids, weights, experts):
    """The modelling code: out[t] = sum_k w[t, k] * expert_{ids[t, k]}(x[t])."""
    out = np.zeros(x.shape, np.float64)
    for t in range(x.shape[0]):
        for j in range(ids.shape[1]):
            out[t] += weights[t, j] * experts(int(ids[t, j]), x[t].astype(np.float64))
    return out


def test_dispatch_combine_round_trip_equals_the_expert_loop() -> None:
    bs, h, e, k = 5, 8, 4, 2
    x = RNG.standard_normal((bs, h)).astype(np.float32).astype(BF16)
    ids = routed(bs, e, k)
    weights = RNG.random((bs, k)).astype(np.float32)
    mats = RNG.standard_normal((e, h, h)).astype(np.float32) * 0.3
    common = dict(
        group_ep="ep", ep_world_size=1, ep_rank_id=0, moe_expert_num=e, shared_expert_num=0
    )
    expand_x, _, assist, counts, recv, _, _ = run(
        "npu_moe_distribute_dispatch_v2", x, ids, **common
    )
    assert (
        expand_x.shape == (bs * k, h)
        and counts.tolist() == np.bincount(ids.reshape(-1), minlength=e).tolist()
    )
    rows, start = [], 0
    for g, c in enumerate(counts.tolist()):  # the experts' FFN over their contiguous rows
        rows.append(expand_x[start : start + c].astype(np.float32) @ mats[g])
        start += c
    y = np.concatenate(rows).astype(BF16)
    out = run("npu_moe_distribute_combine_v2", y, ids, assist, recv, weights, **common)
    want = moe_loop(x, ids, weights, lambda g, v: v @ mats[g])
    assert out.dtype == BF16 and close(out, want, 3e-2)
    shuffled = run(
        "npu_moe_distribute_combine_v2", y[::-1].copy(), ids, assist, recv, weights, **common
    )
    assert not close(shuffled, want, 3e-2)  # rows must come back through the assist info


def test_dispatch_dynamic_quant_scales_each_row() -> None:
    x = RNG.standard_normal((3, 16)).astype(np.float32).astype(np.float16)
    ids = routed(3, 4, 1)
    smooth = (RNG.random((4, 16)) + 0.5).astype(np.float32)
    q, scales, *_ = run(
        "npu_moe_distribute_dispatch_v2",
        x,
        ids,
        "ep",
        1,
        0,
        4,
        scales=smooth,
        quant_mode=2,
        shared_expert_num=0,
    )
    order = np.argsort(ids[:, 0], kind="stable")
    for i, t in enumerate(order):
        v = x[t].astype(np.float64) * smooth[ids[t, 0]]
        assert close(scales[i], np.abs(v).max() / 127, 1e-5)
        assert np.abs(q[i] - np.round(v / scales[i])).max() <= 1
    assert q.dtype == np.int8


def test_dispatch_refuses_a_real_group_and_the_record_still_holds() -> None:
    x, ids = np.zeros((2, 8), np.float16), np.zeros((2, 1), np.int32)
    with pytest.raises(NotModelled, match="one-rank"):
        run("npu_moe_distribute_dispatch_v2", x, ids, "ep", 2, 0, 2)
    with pytest.raises(ReferenceInputError, match="distinct"):
        run(
            "npu_moe_distribute_dispatch_v2",
            x,
            np.zeros((2, 2), np.int32),
            "ep",
            1,
            0,
            2,
            shared_expert_num=0,
        )
