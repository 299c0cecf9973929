"""The added norm, activation and quantization references against unfused numpy written
another way (loops, explicit formulas), each in a low-precision dtype too, and each
failing on the operator's classic mistake."""

from __future__ import annotations

import math

import pytest

np = pytest.importorskip("numpy", reason="the [reference] extra is not installed")
ml_dtypes = pytest.importorskip("ml_dtypes", reason="the [reference] extra is not installed")

from kb.reference import NotModelled, ReferenceInputError, run  # noqa: E402
from tests.reference_support import BF16, close, sampler  # noqa: E402

RNG = np.random.default_rng(11)
randn = sampler(11)


def sig(v: float) -> float:
    return 1.0 / (1.0 + math.exp(-v))


# ------------------------------------------------------------------ clipped SwiGLU, GELU-mul
@pytest.mark.parametrize("dtype", [np.float32, BF16])
def test_clipped_swiglu_pairs_even_and_odd_columns(dtype) -> None:
    x = randn(3, 8, scale=4.0, dtype=dtype)
    got = run("npu_clipped_swiglu", x, alpha=1.5, limit=3.0, bias=0.5)
    want = np.zeros((3, 4))
    for r in range(3):
        for c in range(4):
            g, u = float(x[r, 2 * c]), float(x[r, 2 * c + 1])
            g, u = min(g, 3.0), max(-3.0, min(u, 3.0))
            want[r, c] = g * sig(1.5 * g) * (u + 0.5)
    assert got.dtype == np.dtype(dtype) and close(got, want, 2e-2 if dtype is BF16 else 1e-5)
    halves = run("npu_clipped_swiglu", x, alpha=1.5, limit=3.0, bias=0.5, interleaved=False)
    assert not close(halves, want, 1e-2)  # the front/back split is another unit


def test_clipped_swiglu_group_index_leaves_later_rows_zero() -> None:
    x = randn(5, 4)
    got = run("npu_clipped_swiglu", x, group_index=np.array([1, 2], np.int64))
    assert got[:3].any() and not got[3:].any()
    y = randn(2, 4, 3)
    along_1 = run("npu_clipped_swiglu", y, dim=1, interleaved=False, limit=100.0, bias=0.0)
    gate, up = y[:, :2, :].astype(np.float64), y[:, 2:, :].astype(np.float64)
    assert along_1.shape == (2, 2, 3) and close(
        along_1, gate / (1 + np.exp(-1.702 * gate)) * up, 1e-5
    )


def test_clipped_swiglu_odd_dim_is_refused() -> None:
    with pytest.raises(ReferenceInputError, match="even"):
        run("npu_clipped_swiglu", randn(2, 5))


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_mul_activates_the_first_half(approximate: str) -> None:
    x = randn(2, 6, dtype=np.float16)
    got = run("npu_gelu_mul", x, approximate=approximate)
    xf = x.astype(np.float64)
    if approximate == "none":
        act = np.vectorize(lambda v: 0.5 * v * (1 + math.erf(v / math.sqrt(2))))(xf[:, :3])
    else:
        act = (
            0.5
            * xf[:, :3]
            * (1 + np.tanh(math.sqrt(2 / math.pi) * (xf[:, :3] + 0.044715 * xf[:, :3] ** 3)))
        )
    assert close(got, act * xf[:, 3:], 3e-3) and not close(got, xf[:, :3] * act, 1e-2)


# ------------------------------------------------------------------ GroupNorm + SiLU
def test_group_norm_silu_normalises_each_group_of_channels() -> None:
    x = randn(2, 6, 3, 2, dtype=np.float16)
    w, b = randn(6), randn(6)
    out, mean, rstd = run("npu_group_norm_silu", x, w, b, 3, eps=1e-5)
    xf = x.astype(np.float64)
    want = np.empty_like(xf)
    for n in range(2):
        for g in range(3):
            block = xf[n, 2 * g : 2 * g + 2]
            mu, var = block.mean(), block.var()
            assert close(mean[n, g], mu, 2e-3) and close(
                rstd[n, g], 1 / math.sqrt(var + 1e-5), 5e-3
            )
            for c in (2 * g, 2 * g + 1):
                z = (xf[n, c] - mu) / math.sqrt(var + 1e-5) * w[c] + b[c]
                want[n, c] = z / (1 + np.exp(-z))
    assert out.dtype == np.float16 and close(out, want, 5e-3)
    wrong, _, _ = run("npu_group_norm_silu", x, w, b, 6)  # one group per channel is another norm
    assert not close(wrong, want, 1e-2)


# ------------------------------------------------------------------ RMSNorm variants
def test_add_rms_norm_cast_returns_float32_and_the_sum() -> None:
    x1, x2, g = randn(3, 8, dtype=BF16), randn(3, 8, dtype=BF16), randn(8, dtype=BF16)
    y32, y, rstd, x = run("npu_add_rms_norm_cast", x1, x2, g)
    s = x1.astype(np.float64) + x2.astype(np.float64)
    r = 1 / np.sqrt((s * s).mean(-1, keepdims=True) + 1e-6)
    assert y32.dtype == np.float32 and close(y32, s * r * g.astype(np.float64), 1e-4)
    assert y.dtype == BF16 and close(y, y32, 1e-2) and close(rstd, r, 1e-4) and close(x, s, 1e-2)


def test_rms_norm_quant_divides_by_the_scale() -> None:
    """The kernel multiplies by 1 / scale (the page writes * scale): 0.5 doubles the values."""
    x, g, b = (
        randn(4, 16, dtype=np.float16),
        randn(16, dtype=np.float16),
        randn(16, scale=0.1, dtype=np.float16),
    )
    scale, offset = np.array([0.05], np.float16), np.array([3], np.int8)
    got = run("npu_rms_norm_quant", x, g, b, scale, offset)
    xf = x.astype(np.float64)
    norm = xf / np.sqrt((xf**2).mean(-1, keepdims=True) + 1e-6) * g.astype(np.float64) + b.astype(
        np.float64
    )
    want = np.clip(np.round(norm / 0.05 + 3), -128, 127)
    assert got.dtype == np.int8 and np.abs(got.astype(int) - want).max() <= 1
    assert np.abs(got.astype(int) - np.clip(np.round(norm * 0.05 + 3), -128, 127)).max() > 1


def test_add_rms_norm_dynamic_quant_two_branches_and_mask() -> None:
    x1, x2, g = (
        randn(3, 8, dtype=np.float16),
        randn(3, 8, dtype=np.float16),
        randn(8, dtype=np.float16),
    )
    s1, s2 = np.abs(randn(8, dtype=np.float16)) + 0.5, np.abs(randn(8, dtype=np.float16)) + 0.5
    y1, y2, x, sc1, sc2 = run(
        "npu_add_rms_norm_dynamic_quant", x1, x2, g, smooth_scale1=s1, smooth_scale2=s2
    )
    s = x1.astype(np.float64) + x2.astype(np.float64)
    y = s / np.sqrt((s * s).mean(-1, keepdims=True) + 1e-6) * g.astype(np.float64)
    for q, sc, smooth in ((y1, sc1, s1), (y2, sc2, s2)):
        v = y * smooth.astype(np.float64)
        want_scale = np.abs(v).max(-1) / 127
        assert (
            close(sc, want_scale, 1e-3) and np.abs(q - np.round(v / want_scale[:, None])).max() <= 1
        )
    assert close(x, s, 2e-3) and x.dtype == np.float16
    only_second = run("npu_add_rms_norm_dynamic_quant", x1, x2, g, output_mask=[False, True])
    assert only_second[0].shape == () and only_second[1].shape == (3, 8)
    no_smooth = run("npu_add_rms_norm_dynamic_quant", x1, x2, g)
    assert no_smooth[1].shape == ()  # without a mask the second branch needs both smooth scales
    with pytest.raises(ReferenceInputError, match="False, False"):
        run("npu_add_rms_norm_dynamic_quant", x1, x2, g, output_mask=[False, False])


# ------------------------------------------------------------------ asymmetric / anti quant
def test_dynamic_quant_asymmetric_maps_min_and_max_to_the_int8_ends() -> None:
    x = randn(4, 32, dtype=BF16)
    y, scale, offset = run("npu_dynamic_quant_asymmetric", x)
    xf = x.astype(np.float64)
    lo, hi = xf.min(-1), xf.max(-1)
    assert close(scale, (hi - lo) / 255, 1e-5) and close(offset, 127 - hi / ((hi - lo) / 255), 1e-3)
    assert y.min(-1).tolist() == [-128] * 4 and y.max(-1).tolist() == [127] * 4


def test_dynamic_quant_asymmetric_smooth_groups_follow_group_index() -> None:
    x = randn(4, 8, dtype=np.float16)
    smooth = np.stack([np.full(8, 2.0), np.full(8, 0.5)]).astype(np.float16)
    _, scale, _ = run(
        "npu_dynamic_quant_asymmetric",
        x,
        smooth_scales=smooth,
        group_index=np.array([1, 4], np.int32),
    )
    xf = x.astype(np.float64)
    spread = xf.max(-1) - xf.min(-1)
    assert close(scale, spread * np.array([2.0, 0.5, 0.5, 0.5]) / 255, 1e-3)


def test_anti_quant_adds_the_offset_before_scaling() -> None:
    x = RNG.integers(-100, 100, (3, 4)).astype(np.int8)
    scale, offset = np.array([0.5, 1, 2, 4], np.float32), np.array([1, 2, 3, 4], np.float32)
    got = run("npu_anti_quant", x, scale, offset=offset, dst_dtype="bfloat16")
    assert got.dtype == BF16 and close(got, (x + offset) * scale, 1e-2)
    assert not close(got, x * scale + offset, 1e-2)


def test_anti_quant_unpacks_int4_low_nibble_first() -> None:
    # nibbles F, 1, 2, ..., 7 from the low end
    packed = np.array([[0x7654321F]], dtype=np.uint32).view(np.int32)
    got = run("npu_anti_quant", packed, np.ones(8, np.float32), src_dtype="quint4x2")
    assert got.reshape(-1).tolist() == [-1, 1, 2, 3, 4, 5, 6, 7]


def test_trans_quant_param_packs_fp19_and_the_offset() -> None:
    scale, offset = np.array([1.2345678, -3.5], np.float32), np.array([-3.4, 300.0], np.float32)
    got = run("npu_trans_quant_param", scale, offset)
    bits = scale.view(np.uint32).astype(np.int64)
    for i, want_off in enumerate((-3, 255)):
        v = int(got[i])
        assert v & 0xFFFFFFFF == int(bits[i]) & 0xFFFFE000 and (v >> 46) & 1 == 1
        nine = (v >> 37) & 0x1FF
        assert (nine - 512 if nine >= 256 else nine) == want_off
    from kb.reference.quant_dyn import unpack_scale

    back, off = unpack_scale(got)
    assert close(back, scale, 2e-3) and off is not None and off.tolist() == [-3.0, 255.0]


def test_quant_matmul_reads_a_packed_int64_scale() -> None:
    x1, x2 = (
        RNG.integers(-5, 5, (2, 8)).astype(np.int8),
        RNG.integers(-5, 5, (8, 3)).astype(np.int8),
    )
    scale = np.array([0.5, 0.25, 0.125], np.float32)  # exact in FP19
    packed = run("npu_trans_quant_param", scale)
    got = run("npu_quant_matmul", x1, x2, packed, output_dtype="float16")
    want = (x1.astype(np.int64) @ x2.astype(np.int64)) * scale
    assert got.dtype == np.float16 and close(got, want, 1e-3)


# ------------------------------------------------------------------ MX and block quant
def test_dynamic_mx_quant_fp8_scale_is_the_block_power_of_two() -> None:
    x = randn(2, 64, scale=3.0, dtype=BF16)
    y, mxscale = run("npu_dynamic_mx_quant", x, dst_type="float8_e4m3fn")
    assert (
        y.dtype == ml_dtypes.float8_e4m3fn
        and mxscale.dtype == np.uint8
        and mxscale.shape == (2, 1, 2)
    )
    for r in range(2):
        for blk in range(2):
            vals = x[r, 32 * blk : 32 * blk + 32].astype(np.float64)
            exp = math.floor(math.log2(np.abs(vals).max())) - 8
            assert int(mxscale[r, 0, blk]) == exp + 127
            want = np.clip(vals / 2.0**exp, -448, 448).astype(ml_dtypes.float8_e4m3fn)
            assert np.array_equal(
                y[r, 32 * blk : 32 * blk + 32].astype(np.float32), want.astype(np.float32)
            )


def test_dynamic_mx_quant_fp4_packs_two_per_byte() -> None:
    x = np.zeros((1, 32), np.float16)
    x[0, :4] = [1.0, -2.0, 6.0, 0.5]
    y, mxscale = run("npu_dynamic_mx_quant", x)  # default FP4 e2m1
    # exponent floor(log2 6) - 2 = 0, biased 127
    assert y.shape == (1, 16) and y.dtype == np.uint8 and int(mxscale[0, 0, 0]) == 127
    codes = [int(y[0, 0]) & 0xF, int(y[0, 0]) >> 4, int(y[0, 1]) & 0xF, int(y[0, 1]) >> 4]
    decoded = np.array(codes, np.uint8).view(ml_dtypes.float4_e2m1fn).astype(np.float32)
    assert decoded.tolist() == [1.0, -2.0, 6.0, 0.5]


def test_dynamic_mx_quant_non_tail_axis_interleaves_pairs() -> None:
    x = randn(96, 2, dtype=np.float16)  # three blocks along axis 0, padded to four
    _, s = run("npu_dynamic_mx_quant", x, axis=0, dst_type="float8_e5m2")
    assert s.shape == (2, 2, 2)
    exp = [
        math.floor(math.log2(np.abs(x[32 * b : 32 * b + 32, c].astype(np.float64)).max()))
        - 15
        + 127
        for c in range(2)
        for b in range(3)
    ]
    assert [int(s[0, 0, 0]), int(s[0, 0, 1]), int(s[1, 0, 0])] == exp[:3] and int(s[1, 0, 1]) == 0


def test_dynamic_block_quant_scales_each_128_column_block() -> None:
    x = randn(3, 200, dtype=BF16)
    y, scale = run("npu_dynamic_block_quant", x)
    assert scale.shape == (3, 2) and y.dtype == np.int8
    for r in range(3):
        for blk, cols in enumerate((slice(0, 128), slice(128, 200))):
            amax = np.abs(x[r, cols].astype(np.float64)).max()
            assert close(scale[r, blk], amax / 127, 1e-5)
            assert (
                np.abs(y[r, cols] - np.round(x[r, cols].astype(np.float64) * 127 / amax)).max() <= 1
            )


def test_unmodelled_mx_forms_are_named() -> None:
    with pytest.raises(NotModelled, match="dst_type=297"):  # float4_e1m2: no numpy type
        run("npu_dynamic_mx_quant", randn(1, 32, dtype=np.float16), dst_type=297)


# ------------------------------------------------------------------ plain activations
def test_silu_and_fast_gelu_in_half_precision() -> None:
    x = np.linspace(-6, 6, 49, dtype=np.float32).astype(np.float16)
    xf = x.astype(np.float64)
    assert close(run("npu_silu", x), xf / (1 + np.exp(-xf)), 2e-3)
    fast = xf / (1 + np.exp(-1.702 * xf))
    assert close(run("fast_gelu", x), fast, 2e-3) and close(run("npu_fast_gelu", x), fast, 2e-3)
    assert not close(run("npu_silu", x), fast, 1e-2)


def test_int4pack_round_trips_through_the_weight_only_matmul() -> None:
    k, n = 16, 8
    w = RNG.integers(-8, 8, (k, n)).astype(np.int32)
    packed = run("npu_convert_weight_to_int4pack", w)
    assert packed.shape == (k, 1) and packed.dtype == np.int32
    first = int(packed[0, 0]) & 0xF  # the first value sits in the lowest bits
    assert (first - 16 if first >= 8 else first) == w[0, 0]
    x = randn(3, k, dtype=np.float16)
    scale = (RNG.random(n) + 0.5).astype(np.float16)
    got = run("npu_weight_quant_batchmatmul", x, packed, scale)
    want = x.astype(np.float64) @ (w * scale.astype(np.float64))
    assert got.dtype == np.float16 and close(got, want, 5e-3)
    with pytest.raises(ReferenceInputError, match="int4 range"):
        run("npu_convert_weight_to_int4pack", np.full((2, 8), 9, np.int32))
