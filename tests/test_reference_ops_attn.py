"""The added decode-attention, RoPE-cache, sampling, scatter and MLA-prolog references
against unfused numpy written here (per-token loops, explicit rotations), in float16 or
bfloat16 as the operators take them."""

from __future__ import annotations

import pytest

np = pytest.importorskip("numpy", reason="the [reference] extra is not installed")
ml_dtypes = pytest.importorskip("ml_dtypes", reason="the [reference] extra is not installed")

from kb.reference import NotModelled, ReferenceInputError, run  # noqa: E402
from tests.reference_support import BF16, close, sampler, softmax_rows  # noqa: E402

RNG = np.random.default_rng(9)
randn = sampler(9)


# ------------------------------------------------------------------ decode attention
def test_incre_flash_attention_gqa_with_lengths_and_per_batch_mask() -> None:
    b, n, nkv, s, d = 2, 4, 2, 6, 8
    q, k, v = (
        randn(b, 1, n * d, dtype=np.float16),
        randn(b, s, nkv * d, dtype=np.float16),
        randn(b, s, nkv * d, dtype=np.float16),
    )
    mask = np.zeros((b, s), bool)
    mask[1, 0] = True  # batch 1 must not see key 0; batch 0 sees it
    got = run(
        "npu_incre_flash_attention",
        q,
        k,
        v,
        atten_mask=mask,
        actual_seq_lengths=[4, 6],
        num_heads=n,
        num_key_value_heads=nkv,
        scale_value=0.3,
    )
    for bi, length in enumerate((4, 6)):
        for h in range(n):
            g = h // (n // nkv)
            kk = k[bi, :length, g * d : (g + 1) * d].astype(np.float64)
            vv = v[bi, :length, g * d : (g + 1) * d].astype(np.float64)
            sc = kk @ q[bi, 0, h * d : (h + 1) * d].astype(np.float64) * 0.3
            sc[mask[bi, :length]] = -np.inf
            assert close(got[bi, 0, h * d : (h + 1) * d], softmax_rows(sc) @ vv, 3e-3)


def test_paged_attention_reads_each_tokens_blocks() -> None:
    t, n, nkv, d, bs = 2, 2, 1, 8, 4
    q = randn(t, n, d, dtype=np.float16)
    kc, vc = randn(5, bs, nkv, d, dtype=np.float16), randn(5, bs, nkv, d, dtype=np.float16)
    table = np.array([[3, 1], [0, 4]], np.int32)
    lens = np.array([6, 3], np.int32)
    out = np.zeros((t, n, d), np.float16)
    assert run("_npu_paged_attention", q, kc, vc, nkv, n, 0.5, table, lens, out) is None
    for ti in range(t):
        keys = np.concatenate([kc[blk, :, 0] for blk in table[ti]])[: lens[ti]].astype(np.float64)
        vals = np.concatenate([vc[blk, :, 0] for blk in table[ti]])[: lens[ti]].astype(np.float64)
        for h in range(n):
            want = softmax_rows(keys @ q[ti, h].astype(np.float64) * 0.5) @ vals
            assert close(out[ti, h], want, 3e-3)


def test_attention_update_merges_two_halves_of_a_softmax() -> None:
    rows, hd, keys = 3, 8, 10
    sc, vals = randn(rows, keys), randn(keys, hd)
    parts, lses = [], []
    for half in (slice(0, 4), slice(4, 10)):
        s = sc[:, half].astype(np.float64)
        lses.append(np.log(np.exp(s).sum(-1)).astype(np.float32))
        parts.append((softmax_rows(s) @ vals[half]).astype(np.float16))
    out, lse = run("npu_attention_update", lses, parts, 1)
    full = sc.astype(np.float64)
    assert close(out, softmax_rows(full) @ vals, 3e-3) and close(
        lse, np.log(np.exp(full).sum(-1)), 1e-5
    )
    assert run("npu_attention_update", lses, parts, 0)[1] is None


# ------------------------------------------------------------------ RoPE from a cache
def cache(max_pos: int, rot: int) -> np.ndarray:
    inv = 1.0 / 10000 ** (np.arange(0, rot, 2) / rot)
    ang = np.arange(max_pos)[:, None] * inv[None]
    return np.concatenate([np.cos(ang), np.sin(ang)], -1).astype(np.float32)


@pytest.mark.parametrize("neox", [True, False])
def test_rotary_embedding_rotates_in_place(neox: bool) -> None:
    hs, heads = 8, 2
    cs = cache(16, 8).astype(np.float16)
    pos = np.array([3, 7, 0], np.int64)
    q = randn(3, heads * hs, dtype=np.float16)
    k = randn(3, heads * hs, dtype=np.float16)
    q0, k0 = q.copy(), k.copy()
    run("_npu_rotary_embedding", pos, q, k, hs, cs, neox)
    for t, p in enumerate(pos):
        for h in range(heads):
            x = q0[t, h * hs : (h + 1) * hs].astype(np.float64)
            want = np.empty(hs)
            for i in range(hs // 2):
                c, s = float(cs[p, i]), float(cs[p, hs // 2 + i])
                a, b = (i, i + hs // 2) if neox else (2 * i, 2 * i + 1)
                want[a], want[b] = x[a] * c - x[b] * s, x[b] * c + x[a] * s
            assert close(q[t, h * hs : (h + 1) * hs], want, 3e-3)
    assert not close(k, k0, 1e-3)


def test_mrope_takes_each_section_from_its_position_row() -> None:
    hs, rot = 32, 32
    cs = cache(20, rot).astype(BF16)
    pos = np.array([[1, 2], [5, 9], [13, 3]], np.int64)  # temporal, height, width rows
    q, k = randn(2, 2 * hs, dtype=BF16), randn(2, hs, dtype=BF16)
    qo, ko = run("npu_mrope", pos, q, k, cs, hs, mrope_section=[4, 6, 6])
    bounds = [0, 4, 10, 16]
    for t in range(2):
        c = np.concatenate([cs[pos[j, t], bounds[j] : bounds[j + 1]] for j in range(3)]).astype(
            np.float64
        )
        s = np.concatenate(
            [cs[pos[j, t], 16 + bounds[j] : 16 + bounds[j + 1]] for j in range(3)]
        ).astype(np.float64)
        x = k[t].astype(np.float64)
        want = np.concatenate([x[:16] * c - x[16:] * s, x[16:] * c + x[:16] * s])
        assert close(ko[t], want, 3e-2)
    plain, _ = run("npu_mrope", pos[0], q, k, cs, hs)  # RoPE mode: every section from row 0
    assert qo.shape == q.shape and not close(plain, qo, 1e-2)


# ------------------------------------------------------------------ top-k / top-p
def test_top_k_top_p_keeps_the_right_logits() -> None:
    logits = np.array([[1.0, 4.0, 3.0, 2.0, 0.5], [0.0, 0.0, 5.0, 1.0, 1.0]], np.float32).astype(
        np.float16
    )
    out = run(
        "npu_top_k_top_p", logits, np.array([0.9, 0.5], np.float16), np.array([3, 4], np.int32)
    )
    for row in range(2):
        vals = logits[row].astype(np.float64)
        kth = np.sort(vals)[-[3, 4][row]]
        keep = vals >= kth
        probs = np.where(keep, np.exp(vals), 0)
        probs /= probs.sum()
        order = np.argsort(-vals, kind="stable")  # largest first: keep until the mass passes p
        mass, kept = 0.0, set()
        for i in order:
            if not keep[i]:
                continue
            kept.add(int(i))
            mass += probs[i]
            if mass >= [0.9, 0.5][row]:
                break
        want = [float(vals[i]) if i in kept else -np.inf for i in range(5)]
        assert out[row].astype(np.float64).tolist() == want


# ------------------------------------------------------------------ scatters and gathers
def test_scatter_nd_update_writes_rows_in_place() -> None:
    data = np.zeros((4, 3), np.float16)
    upd = randn(2, 3, dtype=np.float16)
    ret = run("npu_scatter_nd_update_", data, np.array([[2], [0]], np.int64), upd)
    assert (
        ret is data
        and close(data[2], upd[0], 0)
        and close(data[0], upd[1], 0)
        and not data[[1, 3]].any()
    )


def test_scatter_update_writes_each_batch_at_its_offset() -> None:
    data = np.zeros((2, 1, 5, 4), BF16)
    upd = randn(2, 1, 2, 4, dtype=BF16)
    run("scatter_update_", data, np.array([1, 3], np.int64), upd, -2)
    assert close(data[0, 0, 1:3], upd[0, 0], 0) and close(data[1, 0, 3:5], upd[1, 0], 0)
    assert not data[0, 0, [0, 3, 4]].astype(np.float32).any()


def test_gather_pa_kv_cache_lays_sequences_end_to_end() -> None:
    kc, vc = randn(4, 2, 1, 4, dtype=np.float16), randn(4, 2, 1, 4, dtype=np.float16)
    table = np.array([[2, 0], [3, 1]], np.int32)
    key, value = np.zeros((5, 1, 4), np.float16), np.zeros((5, 1, 4), np.float16)
    run("npu_gather_pa_kv_cache", kc, vc, table, np.array([3, 2], np.int32), key, value)
    want = [kc[2, 0], kc[2, 1], kc[0, 0], kc[3, 0], kc[3, 1]]
    assert all(close(key[i], w, 0) for i, w in enumerate(want))


# ------------------------------------------------------------------ MLA prolog
def mla_unfused(x, wdq, wuq, wuk, wdkv, gq, gkv, sin, cos, eps=1e-5):
    """DeepSeek's attention pre-processing as modelling code writes it, in float64, with the
    rope part de-interleaved first (the model's view_as_complex order)."""
    f = np.float64
    heads, dn, hckv = wuk.shape
    dr = cos.shape[-1]

    def rms(v, g):
        return v / np.sqrt((v * v).mean(-1, keepdims=True) + eps) * g.astype(f)

    def rope(v, c, s):
        half = dr // 2
        re, im = v[..., 0::2], v[..., 1::2]
        return np.concatenate(
            [re * c[..., :half] - im * s[..., :half], im * c[..., half:] + re * s[..., half:]], -1
        )

    cq = rms(x.astype(f) @ wdq.astype(f), gq)
    q = (cq @ wuq.astype(f)).reshape(len(x), heads, dn + dr)
    q_nope = np.einsum("tnd,ndc->tnc", q[..., :dn], wuk.astype(f))
    q_rope = rope(q[..., dn:], cos.astype(f)[:, None], sin.astype(f)[:, None])
    kv = x.astype(f) @ wdkv.astype(f)
    return q_nope, q_rope, rms(kv[:, :hckv], gkv), rope(kv[:, hckv:], cos.astype(f), sin.astype(f))


@pytest.mark.parametrize("version", [2, 3])
def test_mla_prolog_bf16_against_the_unfused_layer(version: int) -> None:
    t, he, hcq, heads, dn, dr, hckv, bs = 3, 32, 16, 2, 8, 8, 16, 4
    x = randn(t, he, scale=0.5, dtype=BF16)
    wdq, wuq = (
        randn(he, hcq, scale=0.2, dtype=BF16),
        randn(hcq, heads * (dn + dr), scale=0.2, dtype=BF16),
    )
    wuk, wdkv = (
        randn(heads, dn, hckv, scale=0.2, dtype=BF16),
        randn(he, hckv + dr, scale=0.2, dtype=BF16),
    )
    gq, gkv = randn(hcq, dtype=BF16), randn(hckv, dtype=BF16)
    ang = RNG.random((t, dr // 2))
    cos = np.concatenate([np.cos(ang)] * 2, -1).astype(BF16)
    sin = np.concatenate([np.sin(ang)] * 2, -1).astype(BF16)
    kvc, krc = np.zeros((2, bs, 1, hckv), BF16), np.zeros((2, bs, 1, dr), BF16)
    index = np.array([5, 0, 2], np.int64)
    weights = (x, wdq, wuq, wuk, wdkv, gq, gkv, sin, cos)
    if version == 3:
        out = run("npu_mla_prolog_v3", *weights, kvc, krc, cache_index=index)
    else:
        out = run("npu_mla_prolog_v2", *weights, index, kvc, krc)
    q_nope, q_rope, ckv, krope = mla_unfused(x, wdq, wuq, wuk, wdkv, gq, gkv, sin, cos)
    assert out[0].dtype == BF16 and close(out[0], q_nope, 5e-2) and close(out[1], q_rope, 5e-2)
    flat_kv, flat_kr = kvc.reshape(-1, hckv), krc.reshape(-1, dr)
    assert close(flat_kv[index], ckv, 5e-2) and close(flat_kr[index], krope, 5e-2)
    assert not flat_kv[[1, 3, 4, 6, 7]].astype(np.float32).any()


def test_mla_prolog_v3_refuses_what_it_does_not_model() -> None:
    bf = lambda *s: np.zeros(s, BF16)  # noqa: E731
    args = (
        bf(1, 32),
        bf(32, 16),
        bf(16, 32),
        bf(2, 8, 16),
        bf(32, 24),
        bf(16),
        bf(16),
        bf(1, 8),
        bf(1, 8),
        bf(1, 4, 1, 16),
        bf(1, 4, 1, 8),
    )
    with pytest.raises(NotModelled, match="cache_mode"):
        run("npu_mla_prolog_v3", *args, cache_index=np.zeros(1, np.int64), cache_mode="PA_BLK_BSND")
    with pytest.raises(ReferenceInputError, match="weight_quant_mode"):
        run("npu_mla_prolog_v3", *args, cache_index=np.zeros(1, np.int64), weight_quant_mode=2)
    with pytest.raises(ReferenceInputError, match="cache_index"):
        run("npu_mla_prolog_v3", *args)


# ------------------------------------------------------------------ linear attention decode
def test_recurrent_gated_delta_rule_updates_each_tokens_state_slot() -> None:
    """Two sequences of two tokens, one value head per key head; the state after each token
    lands in its ssm_state_indices slot, and o = S q * Dk^-0.5."""
    t, dk, dv = 4, 4, 2
    q, k, v = randn(t, 1, dk, dtype=BF16), randn(t, 1, dk, dtype=BF16), randn(t, 1, dv, dtype=BF16)
    beta, g = np.full((t, 1), 0.5, np.float32).astype(BF16), np.full((t, 1), -0.2, np.float32)
    state = randn(5, 1, dv, dk, dtype=BF16)
    start = state.astype(np.float64).copy()
    slots = np.array([1, 2, 3, 4], np.int32)
    o = run(
        "npu_recurrent_gated_delta_rule",
        q,
        k,
        v,
        state,
        beta=beta,
        g=g,
        actual_seq_lengths=np.array([2, 2], np.int32),
        ssm_state_indices=slots,
    )
    for first in (0, 2):
        s = start[slots[first], 0]
        for i in (first, first + 1):
            kk, qq, vv = (x[i, 0].astype(np.float64) for x in (k, q, v))
            s = s * np.exp(-0.2)
            s = s + 0.5 * np.outer(vv - s @ kk, kk)
            assert close(o[i, 0], s @ qq * dk**-0.5, 3e-2)
            assert close(state[slots[i], 0], s, 3e-2)


def test_mla_prolog_v3_int8_with_a_quantized_cache() -> None:
    """weight_quant_mode=2, kv_cache_quant_mode=1: int8 token_x and weights dequantized per
    token and channel; the query comes back int8 per token and head with its scale, the rope
    query scaled by quant_scale_ckv over that scale, the latent cache int8."""
    t, he, hcq, heads, dn, dr, hckv = 2, 16, 8, 2, 4, 4, 8
    i8 = lambda *s: RNG.integers(-6, 6, s).astype(np.int8)  # noqa: E731
    x, wdq, wuq, wdkv = i8(t, he), i8(he, hcq), i8(hcq, heads * (dn + dr)), i8(he, hckv + dr)
    wuk = randn(heads, dn, hckv, scale=0.3, dtype=BF16)
    gq, gkv = randn(hcq, dtype=BF16), randn(hckv, dtype=BF16)
    sx, sdq = np.full((t, 1), 0.02, np.float32), np.full((1, hcq), 0.05, np.float32)
    suq, sdkv = (
        np.full((1, heads * (dn + dr)), 0.04, np.float32),
        np.full((1, hckv + dr), 0.03, np.float32),
    )
    smooth, qckv = np.ones((1, hcq), np.float32), np.array([20.0], np.float32)
    ang = RNG.random((t, dr // 2))
    cos, sin = (np.concatenate([f(ang)] * 2, -1).astype(BF16) for f in (np.cos, np.sin))
    kvc, krc = np.zeros((1, 4, 1, hckv), np.int8), np.zeros((1, 4, 1, dr), BF16)
    scales = {
        "dequant_scale_x": sx,
        "dequant_scale_w_dq": sdq,
        "dequant_scale_w_uq_qr": suq,
        "dequant_scale_w_dkv_kr": sdkv,
        "quant_scale_ckv": qckv,
        "smooth_scales_cq": smooth,
    }
    weights = (x, wdq, wuq, wuk, wdkv, gq, gkv, sin, cos)
    q, q_rope, deq, _, _ = run(
        "npu_mla_prolog_v3",
        *weights,
        kvc,
        krc,
        cache_index=np.array([1, 3], np.int64),
        weight_quant_mode=2,
        kv_cache_quant_mode=1,
        **scales,
    )
    f = np.float64
    cq = (x.astype(f) @ wdq.astype(f)) * 0.02 * 0.05
    cq = cq / np.sqrt((cq**2).mean(-1, keepdims=True) + 1e-5) * gq.astype(f)
    step = np.abs(cq).max(-1, keepdims=True) / 127
    qcqr = (np.round(cq / step) @ wuq.astype(f)) * step * 0.04
    qcqr = qcqr.reshape(t, heads, dn + dr)
    nope = np.einsum("tnd,ndc->tnc", qcqr[..., :dn], wuk.astype(f))
    head_scale = np.abs(nope).max(-1, keepdims=True) / 127
    assert q.dtype == np.int8 and deq.shape == (t, heads, 1) and close(deq, head_scale, 2e-2)
    assert np.abs(q - np.round(nope / head_scale)).max() <= 2
    kv = (x.astype(f) @ wdkv.astype(f)) * 0.02 * 0.03
    c = kv[:, :hckv] / np.sqrt((kv[:, :hckv] ** 2).mean(-1, keepdims=True) + 1e-5) * gkv.astype(f)
    assert (
        kvc.dtype == np.int8
        and np.abs(kvc[0, [1, 3], 0] - np.clip(np.round(c * 20), -128, 127)).max() <= 1
    )
    pe = qcqr[..., dn:]
    re, im = pe[..., 0::2], pe[..., 1::2]
    c2, s2 = cos.astype(f)[:, None, : dr // 2], sin.astype(f)[:, None, : dr // 2]
    rope = np.concatenate([re * c2 - im * s2, im * c2 + re * s2], -1)
    assert q_rope.dtype == BF16 and close(q_rope, rope * 20 / head_scale, 5e-2)
