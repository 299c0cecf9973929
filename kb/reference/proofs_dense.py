"""Equivalence proofs of the dense mappings: norms, RoPE, GLUs, GELU and quantized matmuls.

Each builds the unfused computation the way modelling code writes it (numpy, float32
from the same low-precision inputs) and calls the reference operator with the mapped
arguments.
"""

from __future__ import annotations

import math

import numpy as np

from kb.reference import run
from kb.reference.proving import FLOATS, HALVES, LOW, Check, rounded

DTYPES = FLOATS


def _rms_unfused(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    h = x.astype(np.float32)
    var = (h**2).mean(-1, keepdims=True)
    return h / np.sqrt(var + eps) * w.astype(np.float32)


def rms_norm(rng: np.random.Generator) -> list[Check]:
    out = []
    for dt in DTYPES:
        x, w = rounded(rng, (3, 5, 64), dt), rounded(rng, (64,), dt)
        want = _rms_unfused(x, w, 1e-6).astype(LOW[dt])
        out.append(Check(f"npu_rms_norm {dt}", run("npu_rms_norm", x, w, epsilon=1e-6)[0], want))
    return out


def rms_norm_one_plus_w(rng: np.random.Generator) -> list[Check]:
    out = []
    for dt in DTYPES:
        x, w = rounded(rng, (4, 48), dt), rounded(rng, (48,), dt, 0.1)
        want = (
            _rms_unfused(x, np.ones(48, np.float32), 1e-6) * (1.0 + w.astype(np.float32))
        ).astype(LOW[dt])
        gamma = (1.0 + w.astype(np.float32)).astype(np.float32)  # 1 + w kept in float32
        out.append(
            Check(f"npu_rms_norm(1 + w) {dt}", run("npu_rms_norm", x, gamma, epsilon=1e-6)[0], want)
        )
        out.append(
            Check(
                f"npu_gemma_rms_norm {dt}", run("npu_gemma_rms_norm", x, w, epsilon=1e-6)[0], want
            )
        )
    return out


def add_rms_norm(rng: np.random.Generator) -> list[Check]:
    out = []
    for dt in DTYPES:
        x, res, w = rounded(rng, (6, 32), dt), rounded(rng, (6, 32), dt), rounded(rng, (32,), dt)
        h = (x.astype(np.float32) + res.astype(np.float32)).astype(LOW[dt])  # torch adds in dtype
        y, _, h_out = run("npu_add_rms_norm", x, res, w, 1e-6)
        out += [
            Check(f"add_rms_norm y {dt}", y, _rms_unfused(h, w, 1e-6).astype(LOW[dt])),
            Check(f"add_rms_norm residual {dt}", h_out, h),
        ]
    return out


def layer_norm(rng: np.random.Generator) -> list[Check]:
    out = []
    for dt in DTYPES:
        x, w, b = rounded(rng, (5, 40), dt, 3.0), rounded(rng, (40,), dt), rounded(rng, (40,), dt)
        h = x.astype(np.float32)
        mu = h.mean(-1, keepdims=True)
        sd = np.sqrt(((h - mu) ** 2).mean(-1, keepdims=True) + 1e-5)
        want = ((h - mu) / sd * w.astype(np.float32) + b.astype(np.float32)).astype(LOW[dt])
        out.append(Check(f"layer_norm {dt}", run("npu_layer_norm_eval", x, [40], w, b, 1e-5), want))
    return out


def _freqs(s: int, d: int) -> np.ndarray:
    inv = 1.0 / (10000 ** (np.arange(0, d, 2, dtype=np.float32) / d))
    return np.outer(np.arange(s, dtype=np.float32), inv)  # [S, D/2]


def _rotate_half(x: np.ndarray) -> np.ndarray:
    d = x.shape[-1] // 2
    return np.concatenate([-x[..., d:], x[..., :d]], axis=-1)


def rope_half(rng: np.random.Generator) -> list[Check]:
    out = []
    for dt in DTYPES:
        b, s, n, d = 2, 5, 4, 64
        q, k = rounded(rng, (b, s, n, d), dt), rounded(rng, (b, s, 2, d), dt)
        emb = np.concatenate([_freqs(s, d)] * 2, axis=-1)
        cos = np.cos(emb).astype(LOW[dt])[None, :, None, :]
        sin = np.sin(emb).astype(LOW[dt])[None, :, None, :]
        c32, s32 = cos.astype(np.float32), sin.astype(np.float32)
        want_q = (q.astype(np.float32) * c32 + _rotate_half(q.astype(np.float32)) * s32).astype(
            LOW[dt]
        )
        want_k = (k.astype(np.float32) * c32 + _rotate_half(k.astype(np.float32)) * s32).astype(
            LOW[dt]
        )
        out.append(Check(f"rotary_mul half {dt}", run("npu_rotary_mul", q, cos, sin), want_q))
        cos1 = np.broadcast_to(cos, (b, s, 1, d)).copy()
        sin1 = np.broadcast_to(sin, (b, s, 1, d)).copy()
        gq, gk = run("npu_apply_rotary_pos_emb", q, k, cos1, sin1, layout="BSND")
        out += [
            Check(f"apply_rotary_pos_emb q {dt}", gq, want_q),
            Check(f"apply_rotary_pos_emb k {dt}", gk, want_k),
        ]
    return out


def rope_interleave(rng: np.random.Generator) -> list[Check]:
    out = []
    for dt in DTYPES:
        s, n, d = 6, 3, 32
        x = rounded(rng, (1, s, n, d), dt)
        ang = _freqs(s, d)
        cis = np.exp(1j * ang)[None, :, None, :]  # freqs_cis [1, S, 1, D/2]
        pairs = x.astype(np.float32).reshape(1, s, n, d // 2, 2)
        z = (pairs[..., 0] + 1j * pairs[..., 1]) * cis
        want = np.stack([z.real, z.imag], axis=-1).reshape(x.shape).astype(LOW[dt])
        cos = np.repeat(np.cos(ang), 2, axis=-1).astype(np.float32)[None, :, None, :]
        sin = np.repeat(np.sin(ang), 2, axis=-1).astype(np.float32)[None, :, None, :]
        got = run(
            "npu_rotary_mul", x, cos.astype(LOW[dt]), sin.astype(LOW[dt]), rotary_mode="interleave"
        )
        out.append(
            Check(
                f"rotary_mul interleave {dt}",
                got,
                want,
                dtype="bfloat16" if dt != "float32" else "",
            )
        )
    return out


def rope_deinterleave(rng: np.random.Generator) -> list[Check]:
    out = []
    for dt in HALVES:
        b, n, s, d = 2, 1, 3, 64
        x = rounded(rng, (b, n, s, d), dt)
        emb = np.concatenate([_freqs(s, d)] * 2, axis=-1)
        cos = np.cos(emb).astype(LOW[dt])[None, None]
        sin = np.sin(emb).astype(LOW[dt])[None, None]
        cos, sin = (
            np.broadcast_to(cos, (b, 1, s, d)).copy(),
            np.broadcast_to(sin, (b, 1, s, d)).copy(),
        )
        q = (
            x.astype(np.float32)
            .reshape(b, n, s, d // 2, 2)
            .transpose(0, 1, 2, 4, 3)
            .reshape(b, n, s, d)
        )
        want = (q * cos.astype(np.float32) + _rotate_half(q) * sin.astype(np.float32)).astype(
            LOW[dt]
        )
        out.append(Check(f"interleave_rope {dt}", run("npu_interleave_rope", x, cos, sin), want))
    return out


def _silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


def swiglu(rng: np.random.Generator) -> list[Check]:
    out = []
    for dt in DTYPES:
        x = rounded(rng, (4, 2 * 24), dt)
        gate, up = x[:, :24].astype(np.float32), x[:, 24:].astype(np.float32)
        out.append(
            Check(f"swiglu {dt}", run("npu_swiglu", x, dim=-1), (_silu(gate) * up).astype(LOW[dt]))
        )
    return out


def swiglu_dynamic_quant(rng: np.random.Generator) -> list[Check]:
    out = []
    for dt in HALVES:
        x = rounded(rng, (5, 2 * 16), dt)
        y = _silu(x[:, :16].astype(np.float32)) * x[:, 16:].astype(np.float32)
        scale = np.abs(y).max(-1) / 127.0
        want = np.clip(np.rint(y / scale[:, None]), -128, 127).astype(np.int8)
        got, got_scale = run("npu_dequant_swiglu_quant", x, activate_left=True, quant_mode=1)
        out += [
            Check(f"dequant_swiglu_quant {dt}", got, want),
            Check(f"scale {dt}", got_scale, scale.astype(np.float32)),
        ]
    return out


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def geglu(rng: np.random.Generator) -> list[Check]:
    out = []
    for dt in DTYPES:
        x = rounded(rng, (3, 2 * 20), dt)
        gate, up = x[:, :20].astype(np.float32), x[:, 20:].astype(np.float32)
        got = run("npu_geglu", x, dim=-1, approximate=1, activate_left=True)[0]
        out.append(Check(f"geglu {dt}", got, (_gelu_tanh(gate) * up).astype(LOW[dt])))
    return out


def gelu_tanh(rng: np.random.Generator) -> list[Check]:
    out = []
    for dt in DTYPES:
        x = rounded(rng, (7, 30), dt, 2.0)
        out.append(
            Check(
                f"gelu tanh {dt}",
                run("npu_gelu", x, approximate="tanh"),
                _gelu_tanh(x.astype(np.float32)).astype(LOW[dt]),
            )
        )
    return out


def quick_gelu(rng: np.random.Generator) -> list[Check]:
    """``x * sigmoid(1.702 x)`` written out against npu_fast_gelu (the A2/A3 formula)."""
    out = []
    for dt in DTYPES:
        x = rounded(rng, (5, 24), dt, 3.0)
        xf = x.astype(np.float32)
        want = (xf / (1.0 + np.exp(-1.702 * xf))).astype(LOW[dt])
        out.append(Check(f"quick gelu {dt}", run("npu_fast_gelu", x), want))
    return out


def dynamic_quant_int8_matmul(rng: np.random.Generator) -> list[Check]:
    out = []
    for dt in HALVES:
        x = rounded(rng, (6, 64), dt)
        wq = rng.integers(-127, 128, (64, 16)).astype(np.int8)
        w_scale = (rng.random(16) * 0.01 + 0.001).astype(np.float32)
        h = x.astype(np.float32)
        s = np.abs(h).max(-1) / 127.0
        xq = np.clip(np.rint(h / s[:, None]), -128, 127).astype(np.int8)
        want = ((xq.astype(np.int64) @ wq.astype(np.int64)) * s[:, None] * w_scale[None, :]).astype(
            np.float32
        )
        gxq, gs = run("npu_dynamic_quant", x)
        y = run("npu_quant_matmul", gxq, wq, w_scale, pertoken_scale=gs, output_dtype="bfloat16")
        out += [
            Check(f"dynamic_quant {dt}", gxq, xq),
            Check(f"pertoken scale {dt}", gs, s.astype(np.float32)),
            Check(f"quant_matmul {dt}", y, want.astype(LOW["bfloat16"])),
        ]
    return out


def weight_only_int8_matmul(rng: np.random.Generator) -> list[Check]:
    out = []
    for dt in HALVES:
        x = rounded(rng, (4, 32), dt)
        wq = rng.integers(-127, 128, (32, 8)).astype(np.int8)
        scale = (rng.random(8) * 0.02).astype(LOW[dt])
        offset = rng.integers(-3, 4, 8).astype(np.float32).astype(LOW[dt])
        deq = (wq.astype(np.float32) + offset.astype(np.float32)) * scale.astype(np.float32)
        want = (x.astype(np.float32) @ deq).astype(LOW[dt])
        got = run("npu_weight_quant_batchmatmul", x, wq, scale, offset)
        out.append(Check(f"weight_quant_batchmatmul {dt}", got, want))
    return out
