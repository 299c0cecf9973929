"""The argument forms the first references refused: rotate matrices, antiquant weights and
KV caches, int8 communication, dynamic routing quantization, packed int4, MX scale_alg 2.

Each test builds the upstream formula by hand (from the page or kernel document the
record cites) and shows the reference computes it, and that the plausible wrong reading
(a matrix applied from the left, the offset added after the scale, …) does not.
"""

from __future__ import annotations

import re

import pytest

np = pytest.importorskip("numpy", reason="the [reference] extra is not installed")
ml_dtypes = pytest.importorskip("ml_dtypes", reason="the [reference] extra is not installed")

from kb.reference import NotModelled, ReferenceInputError, run  # noqa: E402

RNG = np.random.default_rng(11)


def randn(*shape: int, scale: float = 1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def close(a, b, tol: float = 1e-5) -> bool:
    return bool(
        np.allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), atol=tol, rtol=tol)
    )


# ------------------------------------------------------------------ rotary_mul rotate
def _pair_swap(d: int):
    m = np.zeros((d, d), np.float32)
    i = np.arange(0, d, 2)
    m[i, i + 1] = 1.0
    m[i + 1, i] = -1.0
    return m


def test_a_rotate_matrix_is_applied_from_the_right() -> None:
    x, cos, sin = randn(1, 2, 3, 8), randn(1, 1, 3, 8), randn(1, 1, 3, 8)
    m = _pair_swap(8)
    got = run("npu_rotary_mul", x, cos, sin, rotary_mode="interleave", rotate=m)
    assert close(got, run("npu_rotary_mul", x, cos, sin, rotary_mode="interleave"))
    assert close(got, x * cos + (x @ m) * sin)
    assert not close(got, x * cos + (x @ m.T) * sin, 1e-2)


def test_a_block_diagonal_rotate_rotates_chunks_apart() -> None:
    x, cos, sin = randn(2, 3, 1, 12), randn(1, 3, 1, 12), randn(1, 3, 1, 12)
    m = np.zeros((12, 12), np.float32)
    m[:8, :8] = _pair_swap(8)
    m[8:, 8:] = _pair_swap(4)
    got = run("npu_rotary_mul", x, cos, sin, rotate=m)
    pairs = np.stack([-x[..., 1::2], x[..., 0::2]], -1).reshape(x.shape)
    assert close(got, x * cos + pairs * sin)


def test_a_rotate_matrix_of_the_wrong_size_is_refused() -> None:
    x, cos, sin = randn(1, 2, 3, 8), randn(1, 1, 3, 8), randn(1, 1, 3, 8)
    with pytest.raises(ReferenceInputError, match=r"rotate must be \[D, D\] = \[8, 8\]"):
        run("npu_rotary_mul", x, cos, sin, rotate=np.eye(4, dtype=np.float32))


# ------------------------------------------------------------------ npu_quantize quint4x2
def test_quint4x2_rounds_to_int4_and_packs_eight_per_int32() -> None:
    x = np.array([[0.4, 1.6, -2.5, 7.9, -9.0, 3.0, -0.6, 5.5, 1, 2, 3, 4, 5, 6, 7, -8]], np.float32)
    scales = np.ones(16, np.float32)
    got = run("npu_quantize", x, scales, None, "quint4x2", axis=-1, div_mode=False)
    assert got.dtype == np.int32 and got.shape == (1, 2)
    ints = np.clip(np.rint(x), -8, 7).astype(np.int64)  # [0, 2, -2, 7, -8, 3, -1, 6 | ...]
    words = [sum(int(v & 0xF) << (4 * j) for j, v in enumerate(ints[0, i : i + 8])) for i in (0, 8)]
    assert got.view(np.uint32).tolist() == [words]


def test_quint4x2_multiplies_along_the_last_axis_whatever_axis_above_minus_2() -> None:
    x = randn(2, 3, 8, scale=4)
    scales = np.linspace(0.5, 1.5, 8).astype(np.float32)
    per_last = run("npu_quantize", x, scales, None, "quint4x2", axis=-1, div_mode=False)
    assert np.array_equal(
        run("npu_quantize", x, scales, None, "quint4x2", axis=1, div_mode=False), per_last
    )


def test_quint4x2_refuses_the_divide_path_and_an_odd_last_dim() -> None:
    with pytest.raises(ReferenceInputError, match="needs div_mode=False"):
        run("npu_quantize", randn(2, 8), np.ones(8, np.float32), None, "quint4x2", axis=-1)
    with pytest.raises(ReferenceInputError, match="multiple of 8"):
        run(
            "npu_quantize",
            randn(2, 12),
            np.ones(12, np.float32),
            None,
            "quint4x2",
            axis=-1,
            div_mode=False,
        )


# ------------------------------------------------------------------ init_routing_v2 quant_mode
def test_init_routing_v2_dynamic_int8_quantizes_each_sorted_row() -> None:
    x, ids = randn(4, 16), np.array([[2, 0], [1, 2], [0, 1], [2, 2]], np.int32)
    plain, rows, _, _ = run("npu_moe_init_routing_v2", x, ids, expert_num=3)
    q, rows_q, _, scale = run("npu_moe_init_routing_v2", x, ids, expert_num=3, quant_mode=1)
    assert np.array_equal(rows, rows_q) and q.dtype == np.int8 and scale.shape == (8,)
    want = (np.abs(plain).max(-1) / np.float32(127)).astype(np.float32)
    assert np.array_equal(scale, want)
    assert np.array_equal(q, np.rint(plain / want[:, None]).astype(np.int8))


def test_init_routing_v2_dynamic_smooth_scale_follows_each_rows_expert() -> None:
    x, ids = randn(3, 8), np.array([[0, 1], [1, 0], [1, 1]], np.int32)
    smooth = np.stack([np.full(8, 2.0), np.linspace(0.5, 4, 8)]).astype(np.float32)
    plain, *_ = run("npu_moe_init_routing_v2", x, ids, expert_num=2)
    q, _, _, scale = run(
        "npu_moe_init_routing_v2", x, ids, scale=smooth, expert_num=2, quant_mode=1
    )
    experts = np.sort(ids.reshape(-1), kind="stable")
    y = plain * smooth[experts]
    assert np.array_equal(scale, (np.abs(y).max(-1) / np.float32(127)).astype(np.float32))
    assert np.array_equal(q, np.rint(y / scale[:, None]).astype(np.int8))
    # the page's one-line formula (x / scale, the smooth factor left out) is not what it computes
    assert not np.array_equal(q, np.clip(np.rint(plain / scale[:, None]), -128, 127))


def test_init_routing_v2_static_int8_and_its_missing_offset() -> None:
    x, ids = randn(2, 8, scale=10), np.array([[0], [1]], np.int32)
    one = np.array([0.5], np.float32)
    q, _, _, scale = run(
        "npu_moe_init_routing_v2", x, ids, scale=one, offset=one, expert_num=2, quant_mode=0
    )
    assert scale is None
    h = x.astype(np.float16) * np.float16(0.5) + np.float16(0.5)
    assert np.array_equal(q, np.clip(np.rint(h), -128, 127).astype(np.int8))
    with pytest.raises(ReferenceInputError, match="needs scale and offset"):
        run("npu_moe_init_routing_v2", x, ids, scale=one, expert_num=2, quant_mode=0)


# ------------------------------------------------------------------ dynamic_mx_quant scale_alg 2
def _mx_exponent(amax: float, **kw) -> int:
    """The biased E8M0 exponent npu_dynamic_mx_quant gives one FP4 block whose max is amax."""
    block = np.zeros((1, 32), np.float32)
    block[0, 0] = amax
    _y, scale = run("npu_dynamic_mx_quant", block, **kw)
    return int(scale[0, 0, 0])


@pytest.mark.parametrize(
    ("amax", "type_max", "up"),
    [
        (1.5 * 8, 6.0, 0),  # mantissa fraction exactly 0.5: 12 / 2^1 = 6 fits
        (1.5625 * 8, 6.0, 1),  # above 0.5: 12.5 / 2 would pass 6, so the exponent rises
        (1.5625 * 8, 0.0, 1),  # 0.0 means the type's own maximum, 6
        (1.5625 * 8, 7.0, 0),  # 7.0 tolerates up to 1.75
        (1.8125 * 8, 7.0, 1),
    ],
)
def test_scale_alg_2_raises_the_exponent_past_the_mantissa_threshold(
    amax: float, type_max: float, up: int
) -> None:
    base = _mx_exponent(amax)  # scale_alg 0: floor(log2 amax) - 2 = 1, biased 128
    assert base == 128
    assert _mx_exponent(amax, scale_alg=2, dst_type_max=type_max) == base + up


def test_scale_alg_2_with_another_maximum_rounds_amax_over_it_up() -> None:
    # 10 / 10 = 1.0 exactly: exponent 0 (biased 127); 10.5 / 10 has a mantissa: 128
    assert _mx_exponent(10.0, scale_alg=2, dst_type_max=10.0) == 127
    assert _mx_exponent(10.5, scale_alg=2, dst_type_max=10.0) == 128


def test_scale_alg_2_values_are_divided_by_the_raised_scale() -> None:
    x = randn(2, 64, scale=3)
    _y0, s0 = run("npu_dynamic_mx_quant", x, scale_alg=0)
    y2, s2 = run("npu_dynamic_mx_quant", x, scale_alg=2, dst_type_max=6.0)
    assert y2.dtype == np.uint8 and y2.shape == (2, 32) and s2.shape == s0.shape
    assert (s2.astype(int) - s0.astype(int)).min() >= 0  # never below the OCP exponent
    codes = np.stack([y2 & 0xF, y2 >> 4], -1).reshape(2, 64).astype(np.uint8)
    values = codes.view(ml_dtypes.float4_e2m1fn).astype(np.float32)
    exps = s2.reshape(2, -1).astype(np.int64)
    scale = np.exp2(np.repeat(exps, 32, axis=-1) - 127.0)
    assert np.all(np.abs(values * scale - x) <= scale * 1.0 + 1e-6)


@pytest.mark.parametrize(
    ("kw", "fragment"),
    [
        ({"dst_type": "float8_e4m3fn", "scale_alg": 2}, "scale_alg 2 is for float4_e2m1fn_x2"),
        ({"block_size": 64, "scale_alg": 2}, "block_size 32"),
        ({"scale_alg": 2, "dst_type_max": 5.0}, "dst_type_max is 0.0 or in [6.0, 12.0]"),
    ],
)
def test_scale_alg_2_refuses_what_the_kernel_refuses(kw: dict, fragment: str) -> None:
    with pytest.raises(ReferenceInputError, match=re.escape(fragment)):
        run("npu_dynamic_mx_quant", randn(2, 64), **kw)


# ------------------------------------------------------------------ grouped_matmul antiquant
def test_grouped_matmul_antiquant_adds_the_offset_before_the_scale() -> None:
    x = randn(5, 16).astype(np.float16)
    w = RNG.integers(-128, 127, (2, 16, 8)).astype(np.int8)
    scale = (RNG.random((2, 8)) * 0.1).astype(np.float16)
    offset = RNG.standard_normal((2, 8)).astype(np.float16)
    got = run(
        "npu_grouped_matmul",
        [x],
        [w],
        antiquant_scale=[scale],
        antiquant_offset=[offset],
        group_list=np.array([2, 5]),
        group_list_type=0,
        group_type=0,
        split_item=3,
    )[0]
    xf = x.astype(np.float32)
    want = np.concatenate(
        [
            xf[r] @ ((w[g] + offset[g].astype(np.float32)) * scale[g].astype(np.float32))
            for g, r in enumerate((slice(0, 2), slice(2, 5)))
        ]
    )
    assert got.dtype == np.float16 and close(got, want.astype(np.float16), 1e-3)
    wrong = np.concatenate(
        [
            xf[r] @ (w[g] * scale[g].astype(np.float32) + offset[g].astype(np.float32))
            for g, r in enumerate((slice(0, 2), slice(2, 5)))
        ]
    )
    assert not close(got, wrong, 1e-2)


def test_grouped_matmul_antiquant_per_group_on_packed_int4() -> None:
    from kb.reference.lowp import pack_int4

    x, ints = randn(3, 8), RNG.integers(-8, 8, (8, 16))
    scale = (RNG.random((2, 16)) + 0.5).astype(np.float32)  # two K groups of 4 rows
    got = run(
        "npu_grouped_matmul",
        [x.astype(np.float16)],
        [pack_int4(ints)],
        antiquant_scale=[scale.astype(np.float16)],
    )[0]
    rows = np.repeat(scale.astype(np.float16).astype(np.float32), 4, axis=0)
    want = x.astype(np.float16).astype(np.float32) @ (ints * rows)
    assert got.shape == (3, 16) and close(got, want.astype(np.float16), 1e-3)


def test_grouped_matmul_antiquant_refuses_int8_x_and_a_bad_scale() -> None:
    w = RNG.integers(-128, 127, (16, 8)).astype(np.int8)
    with pytest.raises(ReferenceInputError, match="not int8"):
        run(
            "npu_grouped_matmul",
            [np.ones((2, 16), np.int8)],
            [w],
            antiquant_scale=[np.ones(8, np.float16)],
        )
    with pytest.raises(ReferenceInputError, match=r"is \[n\] or \[G, n\] with n = 8"):
        run(
            "npu_grouped_matmul",
            [np.ones((2, 16), np.float16)],
            [w],
            antiquant_scale=[np.ones(4, np.float16)],
        )


# ------------------------------------------------------------------ IFA / FIA int8 KV antiquant
def _int8(*shape: int):
    return RNG.integers(-127, 128, shape).astype(np.int8)


def _attend(q, k, v, scale: float):
    """softmax(scale q kᵀ) v in float64 over [B, N, Sq, D] query and [B, Nkv, S, D] key/value."""
    rep = q.shape[1] // k.shape[1]
    k, v = (
        np.repeat(k, rep, axis=1).astype(np.float64),
        np.repeat(v, rep, axis=1).astype(np.float64),
    )
    score = scale * q.astype(np.float64) @ np.swapaxes(k, -1, -2)
    p = np.exp(score - score.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


def _bsh(t, n: int):
    return t.reshape(t.shape[0], t.shape[1], n, -1).transpose(0, 2, 1, 3)


def test_ifa_reads_an_int8_cache_as_kv_plus_offset_times_scale() -> None:
    b, n, s, d = 2, 4, 16, 8
    q = randn(b, 1, n * d).astype(np.float16)
    k8, v8 = _int8(b, s, n * d), _int8(b, s, n * d)
    scale = (RNG.random((2, n * d)) * 0.02).astype(np.float16)
    offset = RNG.integers(-3, 4, (2, n * d)).astype(np.float16)
    kw = {"num_heads": n, "input_layout": "BSH", "scale_value": d**-0.5}
    got = run(
        "npu_incre_flash_attention", q, k8, v8, antiquant_scale=scale, antiquant_offset=offset, **kw
    )
    sf, of = scale.astype(np.float32), offset.astype(np.float32)
    k, v = (k8 + of[0]) * sf[0], (v8 + of[1]) * sf[1]
    want = _attend(_bsh(q, n), _bsh(k, n), _bsh(v, n), d**-0.5)
    assert close(_bsh(got, n), want, 2e-3)
    wrong_k, wrong_v = k8 * sf[0] + of[0], v8 * sf[1] + of[1]  # the offset after the scale
    assert not close(
        _bsh(got, n), _attend(_bsh(q, n), _bsh(wrong_k, n), _bsh(wrong_v, n), d**-0.5), 1e-2
    )


def test_ifa_int8_cache_without_scales_is_refused() -> None:
    q, k8 = randn(1, 1, 16).astype(np.float16), _int8(1, 4, 16)
    with pytest.raises(ReferenceInputError, match="needs antiquant_scale"):
        run("npu_incre_flash_attention", q, k8, k8, num_heads=2)


def test_fia_split_scales_per_channel_key_and_per_token_value() -> None:
    b, n, nkv, s, d = 2, 4, 2, 8, 16
    q = randn(b, n, 1, d).astype(np.float16)
    k8, v8 = _int8(b, nkv, s, d), _int8(b, nkv, s, d)
    k_s = (RNG.random((1, nkv, 1, d)) * 0.02).astype(np.float16)
    v_s = (RNG.random((1, b, s)) * 0.02).astype(np.float32)  # per token: float32 (1, B, S)
    kw = {"num_heads": n, "num_key_value_heads": nkv, "input_layout": "BNSD", "scale": d**-0.5}
    got, _ = run(
        "npu_fused_infer_attention_score",
        q,
        k8,
        v8,
        key_antiquant_scale=k_s,
        value_antiquant_scale=v_s,
        key_antiquant_mode=0,
        value_antiquant_mode=1,
        **kw,
    )
    k = k8 * k_s.astype(np.float32)[0]
    v = v8 * v_s[0][:, None, :, None]
    assert close(got, _attend(q, k, v, d**-0.5), 2e-3)


def test_fia_split_scales_win_over_the_combined_ones() -> None:
    b, n, s, d = 1, 2, 8, 16
    q, k8 = randn(b, s, n, d).astype(np.float16)[:, :1], _int8(b, s, n, d)
    ones = np.ones((1, n, d), np.float16)
    kw = {
        "num_heads": n,
        "input_layout": "BSND",
        "key_antiquant_scale": ones * 0.01,
        "value_antiquant_scale": ones * 0.01,
    }
    split, _ = run("npu_fused_infer_attention_score", q, k8, k8, **kw)
    combined = np.full((2, n, d), 5, np.float16)
    both, _ = run("npu_fused_infer_attention_score", q, k8, k8, antiquant_scale=combined, **kw)
    assert np.array_equal(split, both)


def test_fia_antiquant_modes_past_per_token_are_named() -> None:
    q, k8 = randn(1, 2, 1, 16).astype(np.float16), _int8(1, 2, 8, 16)
    head = np.ones(2, np.float16)
    with pytest.raises(NotModelled, match="antiquant mode 2"):
        run(
            "npu_fused_infer_attention_score",
            q,
            k8,
            k8,
            num_heads=2,
            input_layout="BNSD",
            key_antiquant_scale=head,
            value_antiquant_scale=head,
            key_antiquant_mode=2,
            value_antiquant_mode=2,
        )


# ------------------------------------------------------------------ combine_v2 int8 communication
BF16 = ml_dtypes.bfloat16


def _combine(y, ids, weights, **kw):
    common = {
        "group_ep": "ep",
        "ep_world_size": 1,
        "ep_rank_id": 0,
        "moe_expert_num": 4,
        "shared_expert_num": 0,
    }
    x = np.zeros((ids.shape[0], y.shape[1]), y.dtype)
    _ex, _s, assist, _c, recv, _t, _e = run("npu_moe_distribute_dispatch_v2", x, ids, **common)
    return run("npu_moe_distribute_combine_v2", y, ids, assist, recv, weights, **common, **kw)


def _group_int8(v, size: int):
    """v quantized and read back per group of size values: q = rint(v / (max|v| / 127))."""
    g = v.reshape(*v.shape[:-1], -1, size).astype(np.float64)
    scale = np.abs(g).max(-1, keepdims=True) / 127
    return (np.rint(g / scale) * scale).reshape(v.shape)


def test_combine_int8_rows_are_quantized_per_8_values_before_the_sum() -> None:
    ids = np.array([[0, 1], [2, 3], [1, 0]], np.int32)
    weights = RNG.random((3, 2)).astype(np.float32)
    y = randn(6, 16).astype(BF16)
    plain = _combine(y, ids, weights)
    got = _combine(y, ids, weights, comm_quant_mode=2)
    assert got.dtype == BF16 and not np.array_equal(got, plain)
    assert close(got, plain, 2e-2)
    # the rows dispatch laid out by expert: 0, 0, 1, 1, 2, 3 (tokens 0, 2, 0, 2, 1, 1)
    rows = _group_int8(y.astype(np.float32), 8)
    order = [(0, 0), (2, 1), (0, 1), (2, 0), (1, 0), (1, 1)]
    want = np.zeros((3, 16))
    for r, (t, s) in enumerate(order):
        want[t] += weights[t, s] * rows[r]
    assert close(got, want, 1e-2)


def test_combine_int8_hierarchy_quantizes_the_token_sums() -> None:
    ids = np.array([[0, 1], [2, 3]], np.int32)
    weights = RNG.random((2, 2)).astype(np.float32)
    y = randn(4, 32).astype(BF16)
    plain = _combine(y, ids, weights).astype(np.float32)
    got = _combine(y, ids, weights, comm_quant_mode=2, comm_alg="hierarchy")
    assert close(got, _group_int8(plain, 8), 1e-2)
    half = _combine(y.astype(np.float16), ids, weights, comm_quant_mode=2, comm_alg="hierarchy")
    assert half.dtype == np.float16 and close(half, _group_int8(plain, 16), 2e-2)


def test_combine_int8_refuses_fullmesh_and_an_odd_hidden_size() -> None:
    ids, weights = np.array([[0, 1]], np.int32), np.ones((1, 2), np.float32)
    with pytest.raises(ReferenceInputError, match="not 'fullmesh'"):
        _combine(randn(2, 16).astype(BF16), ids, weights, comm_quant_mode=2, comm_alg="fullmesh")
    with pytest.raises(ReferenceInputError, match="multiple of 8"):
        _combine(randn(2, 12).astype(BF16), ids, weights, comm_quant_mode=2)
