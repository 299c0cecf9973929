"""Equivalence proof of MLA attention with the absorbed weights (DeepSeek-V2/V3 style).

The unfused side is the modelling code's own form: per head, k_nope = c W_uk[h] and
v = c W_uv[h] are expanded from the latent c, the query is [q_nope, q_pe] against
[k_nope, k_pe] with the scale of the full 192-wide head, a bottom-right causal mask, and
softmax(...) v.  The mapped side absorbs W_uk into the query (q_nope W_uk[h]ᵀ, 512 wide),
attends with one key/value head over the latent itself (key = value = c) with the rope
parts passed as query_rope/key_rope, and applies W_uv to the latent output.
"""

from __future__ import annotations

import numpy as np

from kb.reference import run
from kb.reference.proofs_sparse import COMPRESSED, _softmax
from kb.reference.proving import HALVES, LOW, Check, rounded

NOPE, ROPE, LATENT, VHEAD = 128, 64, 512, 128


def _unfused(
    q_nope: np.ndarray,
    q_pe: np.ndarray,
    c: np.ndarray,
    k_pe: np.ndarray,
    w_uk: np.ndarray,
    w_uv: np.ndarray,
) -> np.ndarray:
    """One sequence: q_* [Sq, N, d], c [Skv, 512], k_pe [Skv, 64] -> [Sq, N, 128]."""
    f = np.float32
    k_nope = np.einsum("kc,ncd->nkd", c.astype(f), w_uk.astype(f))  # kv_b_proj, key half
    v = np.einsum("kc,ncd->nkd", c.astype(f), w_uv.astype(f))  # kv_b_proj, value half
    s = np.einsum("qnd,nkd->nqk", q_nope.astype(f), k_nope) + np.einsum(
        "qnd,kd->nqk", q_pe.astype(f), k_pe.astype(f)
    )
    s = s / np.sqrt(NOPE + ROPE)
    sq, skv = q_nope.shape[0], c.shape[0]
    allowed = np.arange(skv)[None, :] <= np.arange(sq)[:, None] + (skv - sq)
    return np.einsum("nqk,nkd->qnd", _softmax(np.where(allowed, s, -np.inf)), v)


def _call(
    version: int,
    layout: str,
    q: np.ndarray,
    qr: np.ndarray,
    c: np.ndarray,
    kr: np.ndarray,
    n: int,
    lens: dict[str, list[int]],
) -> np.ndarray:
    common = {
        "input_layout": layout,
        "sparse_mode": 3,
        "atten_mask": COMPRESSED,
        "num_key_value_heads": 1,
    }
    scale = 1 / np.sqrt(NOPE + ROPE)
    if version == 1:
        extra = (
            {"actual_seq_lengths": lens["q"], "actual_seq_lengths_kv": lens["kv"]} if lens else {}
        )
        return run(
            "npu_fused_infer_attention_score",
            q,
            c,
            c,
            query_rope=qr,
            key_rope=kr,
            num_heads=n,
            scale=scale,
            **common,
            **extra,
        )[0]
    extra = {"actual_seq_qlen": lens["q"], "actual_seq_kvlen": lens["kv"]} if lens else {}
    return run(
        "npu_fused_infer_attention_score_v2",
        q,
        c,
        c,
        query_rope=qr,
        key_rope=kr,
        num_query_heads=n,
        softmax_scale=scale,
        **common,
        **extra,
    )[0]


def attention_mla(layout: str, rng: np.random.Generator) -> list[Check]:
    out = []
    n, sq, skvs = 4, 2, (5, 7)
    for dt in HALVES:
        w_uk = rounded(rng, (n, LATENT, NOPE), dt, 0.05)
        w_uv = rounded(rng, (n, LATENT, VHEAD), dt, 0.05)
        seqs = [
            (
                rounded(rng, (sq, n, NOPE), dt),
                rounded(rng, (sq, n, ROPE), dt, 0.3),
                rounded(rng, (skv, LATENT), dt),
                rounded(rng, (skv, ROPE), dt, 0.3),
            )
            for skv in skvs
        ]
        if not layout.startswith(("TND", "NTD")):  # batched layouts: one key length
            seqs = [(a, b, c[: skvs[0]], d[: skvs[0]]) for a, b, c, d in seqs]
        want = np.stack([_unfused(*s, w_uk, w_uv) for s in seqs])  # [B, Sq, N, 128]
        # the mapped side: absorb W_uk into the query (bmm per head), rounded as the model dtype
        absorbed = [
            np.einsum("qnd,ncd->qnc", s[0].astype(np.float32), w_uk.astype(np.float32)).astype(
                LOW[dt]
            )
            for s in seqs
        ]
        q_pe = [s[1] for s in seqs]
        c = [s[2][:, None] for s in seqs]
        k_pe = [s[3][:, None] for s in seqs]
        lens: dict[str, list[int]] = {}
        if layout.startswith(("TND", "NTD")):
            q, qr, kv, kr = (np.concatenate(x) for x in (absorbed, q_pe, c, k_pe))
            lens = {
                "q": list(np.cumsum([sq] * len(seqs))),
                "kv": list(np.cumsum([x.shape[0] for x in c])),
            }
            if layout.startswith("NTD"):
                q, qr, kv, kr = (np.ascontiguousarray(x.swapaxes(0, 1)) for x in (q, qr, kv, kr))
        else:
            q, qr, kv, kr = (np.stack(x) for x in (absorbed, q_pe, c, k_pe))  # BSND
            if layout == "BSH":
                q, qr, kv, kr = (x.reshape(x.shape[0], x.shape[1], -1) for x in (q, qr, kv, kr))
        for version in (1, 2):
            latent = _call(version, layout, q, qr, kv, kr, n, lens).astype(np.float32)
            if layout.endswith("NTD"):
                latent = latent.swapaxes(0, 1)
            latent = latent.reshape(len(seqs), sq, n, LATENT)
            got = np.einsum("bqnc,ncd->bqnd", latent, w_uv.astype(np.float32)).astype(
                LOW[dt]
            )  # W_uv bmm
            out.append(Check(f"MLA FIA v{version} {layout} {dt}", got, want.astype(LOW[dt])))
    return out


def mla_absorb_bmm(rng: np.random.Generator) -> list[Check]:
    """The two absorption matmuls of MLA, written per head with einsum in the modelling code:
    q_abs = einsum('tnd,ndc->tnc', q_nope, w_uk) and o = einsum('tnc,ncd->tnd', latent, w_uv)
    -> npu_transpose_batchmatmul(q_nope [T, N, 128], w_uk [N, 128, 512], perm_x1=[1, 0, 2],
    perm_y=[1, 0, 2]) and, on the (N, T, 512) output of TND_NTD attention, perm_x1=[0, 1, 2]."""
    out = []
    t, n = 5, 4
    for dt in ("float32", *HALVES):
        q_nope, w_uk = rounded(rng, (t, n, NOPE), dt), rounded(rng, (n, NOPE, LATENT), dt, 0.1)
        latent, w_uv = rounded(rng, (n, t, LATENT), dt), rounded(rng, (n, LATENT, VHEAD), dt, 0.05)
        want_q = np.einsum(
            "tnd,ndc->tnc", q_nope.astype(np.float32), w_uk.astype(np.float32)
        ).astype(LOW[dt])
        want_o = np.einsum(
            "ntc,ncd->tnd", latent.astype(np.float32), w_uv.astype(np.float32)
        ).astype(LOW[dt])
        got_q = run(
            "npu_transpose_batchmatmul",
            q_nope,
            w_uk,
            perm_x1=[1, 0, 2],
            perm_x2=[0, 1, 2],
            perm_y=[1, 0, 2],
        )
        got_o = run(
            "npu_transpose_batchmatmul",
            latent,
            w_uv,
            perm_x1=[0, 1, 2],
            perm_x2=[0, 1, 2],
            perm_y=[1, 0, 2],
        )
        out += [
            Check(f"q absorb (W_uk) {dt}", got_q, want_q),
            Check(f"v absorb (W_uv) {dt}", got_o, want_o),
        ]
    return out


def lightning_indexer(rng: np.random.Generator) -> list[Check]:
    """DeepSeek-V3.2 Indexer: score[s, t] = sum_h w[s, h] * relu(q[s, h] · k[t]) with
    w = weights_proj(x) * n_heads^-0.5 * softmax_scale, a causal mask, topk(score, k) ->
    npu_lightning_indexer(q, k[:, :, None], w (the scales folded in: ReLU commutes with a
    positive factor), sparse_count=k, sparse_mode=3).  The page does not state the order of
    the k indices: the sets are compared (each row sorted)."""
    out = []
    b, s1, s2, heads, d, top = 2, 3, 12, 8, 128, 6
    for dt in HALVES:
        q, k = rounded(rng, (b, s1, heads, d), dt), rounded(rng, (b, s2, d), dt)
        w = (rounded(rng, (b, s1, heads), dt).astype(np.float32) * heads**-0.5 * d**-0.5).astype(
            LOW[dt]
        )
        score = np.einsum("bshd,btd->bsht", q.astype(np.float32), k.astype(np.float32))
        score = (np.maximum(score, 0) * w.astype(np.float32)[..., None]).sum(2)
        allowed = np.arange(s2)[None] <= np.arange(s1)[:, None] + (s2 - s1)
        want = np.sort(
            np.argsort(-np.where(allowed, score, -np.inf), -1, kind="stable")[..., :top], -1
        )
        idx, _ = run("npu_lightning_indexer", q, k[:, :, None], w, sparse_count=top, sparse_mode=3)
        out.append(
            Check(f"indexer top-{top} sets {dt}", np.sort(idx[:, :, 0], -1), want.astype(np.int32))
        )
    return out


def _hf_gated_delta(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, g: np.ndarray, beta: np.ndarray, state: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Qwen3-Next's torch recurrence for one sequence, heads [L, H, D] after repeat_interleave
    of q/k to the value heads; its state is [H, Dk, Dv] (key first)."""
    scale = q.shape[-1] ** -0.5
    s = state.astype(np.float32).copy()
    out = np.zeros((q.shape[0], v.shape[1], v.shape[2]), np.float32)
    for i in range(q.shape[0]):
        qt, kt, vt = (
            q[i].astype(np.float32) * scale,
            k[i].astype(np.float32),
            v[i].astype(np.float32),
        )
        s = s * np.exp(g[i])[:, None, None]
        kv_mem = (s * kt[:, :, None]).sum(-2)
        delta = (vt - kv_mem) * beta[i].astype(np.float32)[:, None]
        s = s + kt[:, :, None] * delta[:, None, :]
        out[i] = (s * qt[:, :, None]).sum(-2)
    return out, s


def gated_delta_rule(rng: np.random.Generator) -> list[Check]:
    """Qwen3-Next GatedDeltaNet core -> npu_chunk_gated_delta_rule (prefill: initial_state =
    the model state transposed to [B, Nv, Dv, Dk], scale=Dk^-0.5 (its default is 1.0)) and
    npu_recurrent_gated_delta_rule (decode: state slots by ssm_state_indices, updated in place)."""
    nk, nv, dk, dv, lens = 2, 4, 16, 8, (3, 2)
    t = sum(lens)
    bf = LOW["bfloat16"]
    norm = lambda x: x / np.linalg.norm(x, axis=-1, keepdims=True)  # noqa: E731  (l2norm of q and k)
    q = norm(rng.standard_normal((t, nk, dk))).astype(bf)
    k = norm(rng.standard_normal((t, nk, dk))).astype(bf)
    v = rounded(rng, (t, nv, dv), "bfloat16")
    beta = (1 / (1 + np.exp(-rng.standard_normal((t, nv))))).astype(bf)
    g = (-np.abs(rng.standard_normal((t, nv))) * 0.5).astype(np.float32)
    s0 = rounded(rng, (len(lens), nv, dk, dv), "bfloat16", 0.2)  # the model's [B, H, Dk, Dv]
    want_o, want_s = [], []
    starts = np.cumsum((0, *lens))[:-1]
    for i, (st, ln) in enumerate(zip(starts, lens, strict=True)):
        sl = slice(st, st + ln)
        o, s = _hf_gated_delta(
            np.repeat(q[sl], nv // nk, 1),
            np.repeat(k[sl], nv // nk, 1),
            v[sl],
            g[sl],
            beta[sl],
            s0[i],
        )
        want_o.append(o)
        want_s.append(s)
    o_all = np.concatenate(want_o).astype(bf)
    s_all = np.stack(want_s).swapaxes(-1, -2)  # -> [B, Nv, Dv, Dk]
    lens_arr = np.array(lens, np.int32)
    got_o, got_s = run(
        "npu_chunk_gated_delta_rule",
        q,
        k,
        v,
        beta=beta,
        initial_state=s0.swapaxes(-1, -2).copy(),
        actual_seq_lengths=lens_arr,
        scale=dk**-0.5,
        g=g,
    )
    slots = np.zeros((t, nv, dv, dk), bf)
    slots[starts] = s0.swapaxes(-1, -2)
    got_r = run(
        "npu_recurrent_gated_delta_rule",
        q,
        k,
        v,
        slots,
        beta=beta,
        scale=dk**-0.5,
        actual_seq_lengths=lens_arr,
        ssm_state_indices=np.arange(t, dtype=np.int32),
        g=g,
    )
    ends = starts + np.array(lens) - 1
    return [
        Check("chunk out", got_o, o_all),
        Check("chunk final state", got_s, s_all.astype(bf)),
        Check("recurrent out", got_r, o_all),
        Check("recurrent state slots", slots[ends], s_all.astype(bf)),
    ]


def sparse_attention_mla(rng: np.random.Generator) -> list[Check]:
    """DeepSeek-V3.2 MLA in the absorbed form its reference code writes: scores =
    (q_abs · c + q_pe · k_pe) * softmax_scale, plus an index mask that is -inf except at the
    indexer's top-k positions, plus the causal mask; softmax; times c -> npu_sparse_flash_attention
    (query=q_abs, key=value=c, sparse_indices=top-k [B, S, 1, k], scale_value=softmax_scale,
    query_rope=q_pe, key_rope=k_pe, sparse_block_size=1, sparse_mode=3, attention_mode=2)."""
    out = []
    b, s1, s2, n, top = 2, 3, 10, 4, 5
    scale = 1 / np.sqrt(NOPE + ROPE)
    for dt in HALVES:
        q, qr = rounded(rng, (b, s1, n, LATENT), dt, 0.5), rounded(rng, (b, s1, n, ROPE), dt, 0.5)
        c, kr = rounded(rng, (b, s2, LATENT), dt, 0.5), rounded(rng, (b, s2, ROPE), dt, 0.5)
        causal = np.arange(s2)[None] <= np.arange(s1)[:, None] + (s2 - s1)  # [S1, S2]
        picks = np.stack(
            [
                np.stack([rng.permutation(np.flatnonzero(causal[i]))[:top] for i in range(s1)])
                for _ in range(b)
            ]
        ).astype(np.int32)  # [B, S1, k]
        f = np.float32
        score = (
            np.einsum("bsnc,btc->bsnt", q.astype(f), c.astype(f))
            + np.einsum("bsnr,btr->bsnt", qr.astype(f), kr.astype(f))
        ) * scale
        index_mask = np.full((b, s1, s2), -np.inf, f)
        np.put_along_axis(index_mask, picks.astype(np.int64), 0.0, -1)
        score = score + index_mask[:, :, None] + np.where(causal, 0, -np.inf)[None, :, None]
        want = np.einsum("bsnt,btc->bsnc", _softmax(score), c.astype(f)).astype(LOW[dt])
        got = run(
            "npu_sparse_flash_attention",
            q,
            c[:, :, None],
            c[:, :, None],
            picks[:, :, None],
            scale,
            query_rope=qr,
            key_rope=kr[:, :, None],
            sparse_block_size=1,
            layout_query="BSND",
            layout_kv="BSND",
            sparse_mode=3,
            attention_mode=2,
        )[0]
        out.append(Check(f"sparse MLA attention {dt}", got, want))
    return out
