"""Proofs that take the module's facts and the plan's arguments.

Each function is a row's proof (:mod:`kb.reference.mappings`): called as ``(rng)`` it
proves the mapping's own case; called as ``(rng, facts, args[, operator])`` it writes the
unfused computation the way the module computes it (which half a GLU activates, which
GELU, how a rotation pairs elements, whether every query sees every key, whether a router
renormalises, how it groups experts) and calls the fused operator with the arguments the
plan gives it, so a plan that computes something else fails.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from kb.reference import proofs_dense as dense
from kb.reference import proofs_more as more
from kb.reference import proofs_sparse as sparse
from kb.reference import run
from kb.reference.proving import FLOATS, HALVES, LOW, Check, rounded

_ERF = np.vectorize(math.erf)


def _gelu(x: np.ndarray, kind: str) -> np.ndarray:
    if kind == "gelu_tanh":
        return dense._gelu_tanh(x)
    if kind == "quick_gelu":
        return x / (1.0 + np.exp(-1.702 * x))
    return 0.5 * x * (1.0 + np.asarray(_ERF(x / math.sqrt(2.0)), dtype=np.float64))


def _halves(x: np.ndarray, glu: str) -> tuple[np.ndarray, np.ndarray]:
    """(the half the activation reaches, the other one)."""
    d = x.shape[-1] // 2
    a, b = x[..., :d].astype(np.float32), x[..., d:].astype(np.float32)
    return (b, a) if glu == "second" else (a, b)


def swiglu(rng: np.random.Generator, facts: Any = None, args: Any = None) -> list[Check]:
    """silu(activated half) * other half -> npu_swiglu (which activates the first half)."""
    glu = (facts or {}).get("glu", "first")
    out = []
    for dt in FLOATS:
        x = rounded(rng, (4, 2 * 24), dt)
        gate, up = _halves(x, glu)
        want = (dense._silu(gate) * up).astype(LOW[dt])
        out.append(Check(f"swiglu {glu} half {dt}", run("npu_swiglu", x, dim=-1), want))
    return out


def geglu(rng: np.random.Generator, facts: Any = None, args: Any = None) -> list[Check]:
    """gelu(activated half) * other half -> npu_geglu(approximate, activate_left)."""
    facts = facts or {"activation": "gelu_tanh", "glu": "first"}
    args = args if args is not None else {"approximate": 1, "activate_left": True}
    out = []
    for dt in FLOATS:
        x = rounded(rng, (3, 2 * 20), dt)
        gate, up = _halves(x, facts.get("glu", "first"))
        want = (_gelu(gate.astype(np.float64), facts.get("activation", "gelu")) * up).astype(
            np.float32
        )
        got = run("npu_geglu", x, **{"dim": -1, **args})[0]  # a stage may state dim itself
        out.append(Check(f"geglu {facts} {args} {dt}", got, want.astype(LOW[dt])))
    return out


def gelu_any(rng: np.random.Generator, facts: Any = None, args: Any = None) -> list[Check]:
    """The module's GELU (erf or tanh) -> npu_gelu(approximate)."""
    kind = (facts or {}).get("activation", "gelu_tanh")
    args = args if args is not None else {"approximate": "tanh" if kind == "gelu_tanh" else "none"}
    out = []
    for dt in FLOATS:
        x = rounded(rng, (7, 30), dt, 2.0)
        want = _gelu(x.astype(np.float64), kind).astype(np.float32)
        out.append(Check(f"{kind} {args} {dt}", run("npu_gelu", x, **args), want.astype(LOW[dt])))
    return out


def rope(rng: np.random.Generator, facts: Any = None, args: Any = None) -> list[Check]:
    """The module's rotation (halves or adjacent pairs) -> npu_rotary_mul(rotary_mode)."""
    if facts is None:
        return dense.rope_half(rng) + dense.rope_interleave(rng)
    pairs = facts.get("rope") == "interleave"
    mode = (args or {}).get("rotary_mode", "half")
    out = []
    for dt in FLOATS:
        s, n, d = 5, 3, 32
        x = rounded(rng, (1, s, n, d), dt)
        ang = dense._freqs(s, d)
        h = x.astype(np.float32)
        if pairs:
            z = (h[..., 0::2] + 1j * h[..., 1::2]) * np.exp(1j * ang)[None, :, None, :]
            want = np.stack([z.real, z.imag], -1).reshape(x.shape)
        else:
            emb = np.concatenate([ang, ang], -1)[None, :, None, :]
            want = h * np.cos(emb) + dense._rotate_half(h) * np.sin(emb)
        table = np.repeat(ang, 2, -1) if mode == "interleave" else np.concatenate([ang, ang], -1)
        cos, sin = (f(table)[None, :, None, :].astype(LOW[dt]) for f in (np.cos, np.sin))
        got = run("npu_rotary_mul", x, cos, sin, rotary_mode=mode)
        out.append(
            Check(
                f"rotary {facts.get('rope')} as {mode} {dt}",
                got,
                want.astype(LOW[dt]),
                dtype="bfloat16" if dt != "float32" else "",
            )
        )
    return out


def adaln_layer_norm(rng: np.random.Generator) -> list[Check]:
    """LN(x) * (1 + scale) + shift per sample -> npu_layer_norm_eval with weight 1 + scale
    (times the affine weight) and bias shift (plus (1 + scale) times the affine bias)."""
    out = []
    for dt in FLOATS:
        b, s, h = 2, 5, 24
        x = rounded(rng, (b, s, h), dt, 2.0)
        scale, shift = rounded(rng, (b, h), "float32", 0.3), rounded(rng, (b, h), "float32", 0.3)
        w, bias = rounded(rng, (h,), "float32"), rounded(rng, (h,), "float32")
        v = x.astype(np.float32)
        mu = v.mean(-1, keepdims=True)
        normed = (v - mu) / np.sqrt(((v - mu) ** 2).mean(-1, keepdims=True) + 1e-6)
        for affine in (False, True):
            ln = normed * w + bias if affine else normed
            want = (ln * (1 + scale[:, None]) + shift[:, None]).astype(LOW[dt])
            got = np.stack(
                [
                    run(
                        "npu_layer_norm_eval",
                        x[i],
                        [h],
                        (1 + scale[i]) * (w if affine else 1.0),
                        shift[i] + (1 + scale[i]) * (bias if affine else 0.0),
                        1e-6,
                    )
                    for i in range(b)
                ]
            )
            out.append(Check(f"adaLN affine={affine} {dt}", got, want))
    return out


#: arguments that are the model's sizes, not what is computed: the proof keeps its own
_SIZES = frozenset({"k"})


def _semantic(args: Any) -> dict[str, Any]:
    return {k: v for k, v in (args or {}).items() if k not in _SIZES}


def router_sigmoid_topk(
    rng: np.random.Generator, facts: Any = None, args: Any = None
) -> list[Check]:
    """sigmoid, top-k, renormalised or not -> npu_moe_gating_top_k(norm_type=1, out_flag):
    the weights are output 0 without out_flag, the sigmoid at the ids with it."""
    if facts is None:
        return more.router_sigmoid_topk(rng)
    logits = rounded(rng, (8, 16), "float32", 2.0)
    s = 1.0 / (1.0 + np.exp(-logits))
    ids = sparse._topk(s, 3)
    w = np.take_along_axis(s, ids, -1)
    if facts.get("renormalize"):
        w = w / w.sum(-1, keepdims=True)
    y, got, raw = run("npu_moe_gating_top_k", logits, 3, **{"norm_type": 1, **_semantic(args)})
    weights = (
        np.take_along_axis(raw, got.astype(np.int64), -1) if (args or {}).get("out_flag") else y
    )
    return [Check("ids", got, ids.astype(np.int32)), Check("weights", weights, w)]


def router_grouped(rng: np.random.Generator, facts: Any = None, args: Any = None) -> list[Check]:
    """A sigmoid router with a selection bias and expert groups (group score: the sum of
    its top two, or its max) -> npu_moe_gating_top_k with the plan's group arguments."""
    if facts is None:
        return sparse.router_sigmoid_bias_group_topk(rng)
    groups = int(facts.get("groups") or 1)
    keep = int(facts.get("topk_groups") or 1)
    factor = float(facts.get("scale") or 1.0)
    logits, bias = (
        rounded(rng, (8, 8 * groups), "float32"),
        rounded(rng, (8 * groups,), "float32", 0.3),
    )
    s = 1.0 / (1.0 + np.exp(-logits))
    grouped = (s + bias).reshape(8, groups, 8)
    by_max = facts.get("group_score") == "max"
    group_score = grouped.max(-1) if by_max else np.sort(grouped, -1)[..., -2:].sum(-1)
    gmask = np.zeros((8, groups), bool)
    np.put_along_axis(gmask, sparse._topk(group_score, keep), True, -1)
    ids = sparse._topk(np.where(np.repeat(gmask, 8, -1), s + bias, -np.inf), 4)
    w = np.take_along_axis(s, ids, -1)
    w = w / (w.sum(-1, keepdims=True) + 1e-20) * factor
    call = {"bias": bias, "eps": 1e-20, **{k: v for k, v in _semantic(args).items() if k != "bias"}}
    y, got, _ = run("npu_moe_gating_top_k", logits, 4, **call)
    return [
        Check("ids", np.sort(got, -1), np.sort(ids, -1).astype(np.int32)),
        Check("weights", np.sort(y, -1), np.sort(w, -1).astype(np.float32)),
    ]


#: the arguments of each attention kernel that decide which keys a query sees
_VISIBILITY = ("sparse_mode", "pre_tokens", "next_tokens", "pre_tockens", "next_tockens")


def attention(
    layout: str, rng: np.random.Generator, facts: Any = None, args: Any = None, operator: str = ""
) -> list[Check]:
    """Causal or bidirectional as the module is, against the kernel with the plan's mask
    arguments (sparse mode, pre/next tokens; a mode that reads a mask gets the compressed
    triangular one): a causal mask on a bidirectional module, or none on a causal one,
    fails.  In decode the one new query sees every key before it either way."""
    if facts is None:
        return sparse.attention(layout, rng)
    return _as_planned(rng, facts, args or {}, operator)


def attention_noncausal(
    layout: str, rng: np.random.Generator, facts: Any = None, args: Any = None, operator: str = ""
) -> list[Check]:
    """:func:`attention` for the bidirectional rows."""
    if facts is None:
        return more.attention_noncausal(layout, rng)
    return _as_planned(rng, facts, args or {}, operator)


def _as_planned(
    rng: np.random.Generator, facts: dict[str, Any], args: dict[str, Any], operator: str
) -> list[Check]:
    causal = facts.get("causal") is True or (
        facts.get("causal") == "caller" and bool(facts.get("cache"))
    )
    op = operator or "npu_fused_infer_attention_score"
    kwargs: dict[str, Any] = {k: v for k, v in args.items() if k in _VISIBILITY}
    if int(kwargs.get("sparse_mode", 0)) in (2, 3, 4):
        kwargs["atten_mask"] = sparse.COMPRESSED
    sq = 1 if facts.get("phase") == "decode" else 6
    out = []
    for dt in HALVES:
        q = rounded(rng, (1, 2, sq, 16), dt)
        k, v = (rounded(rng, (1, 2, 6, 16), dt) for _ in range(2))
        want = (
            sparse.causal_attention(q, k, v) if causal else more._full_attention(q, k, v)
        ).astype(LOW[dt])
        if op == "npu_fusion_attention":
            got = run(op, q, k, v, 2, "BNSD", scale=0.25, **kwargs)[0]
        elif op == "npu_fused_infer_attention_score_v2":
            got = run(
                op, q, k, v, num_query_heads=2, softmax_scale=0.25, input_layout="BNSD", **kwargs
            )[0]
        elif op == "npu_prompt_flash_attention":
            got = run(op, q, k, v, num_heads=2, scale_value=0.25, input_layout="BNSD", **kwargs)
        else:
            got = run(
                "npu_fused_infer_attention_score",
                q,
                k,
                v,
                num_heads=2,
                scale=0.25,
                input_layout="BNSD",
                **kwargs,
            )[0]
        out.append(Check(f"{op} {args} for causal={causal} {dt}", got, want))
    return out
