"""Gated delta rule linear attention (Qwen3-Next): the recurrent (decode) and chunked (prefill)
operators compute the same recurrence per value head,
S_t = a_t S_{t-1} + b_t (v_t - a_t S_{t-1} k_t) k_tᵀ, o_t = S_t q_t * scale, with a_t = exp(g_t),
S of shape (Dv, Dk) and key head h // (Nv / Nk) serving value head h."""

from __future__ import annotations

from typing import Any

import numpy as np

from kb.reference.errors import NotModelled, ReferenceInputError
from kb.reference.lowp import cast, f32

Args = dict[str, Any]


def _run(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    s: np.ndarray,
    beta: Any,
    g: Any,
    scale: float,
    start: int,
    end: int,
    write: Any = None,
) -> tuple[np.ndarray, np.ndarray]:
    """One sequence [start, end): returns (o [L, Nv, Dv], the state after it); ``write(t, S)``
    stores the state after token t when the operator keeps one per token."""
    nk, nv = q.shape[1], v.shape[1]
    if nv % nk:
        raise ReferenceInputError(f"value heads ({nv}) must be a multiple of key heads ({nk})")
    rep = nv // nk
    out = np.zeros((end - start, nv, v.shape[-1]), np.float32)
    for t in range(start, end):
        a = np.exp(f32(g[t])) if g is not None else np.ones(nv, np.float32)  # [Nv]
        b = f32(beta[t]) if beta is not None else np.ones(nv, np.float32)
        kt, qt = (
            np.repeat(f32(k[t]), rep, 0),
            np.repeat(f32(q[t]), rep, 0) * np.float32(scale),
        )  # [Nv, Dk]
        s = s * a[:, None, None]
        delta = (f32(v[t]) - np.einsum("hvk,hk->hv", s, kt)) * b[:, None]
        s = s + delta[:, :, None] * kt[:, None, :]
        out[t - start] = np.einsum("hvk,hk->hv", s, qt)
        if write is not None:
            write(t, s)
    return out, s


def recurrent_gated_delta_rule(a: Args) -> np.ndarray:
    q, k, v, state = a["query"], a["key"], a["value"], a["state"]
    if a["gk"] is not None:
        raise NotModelled(
            "npu_recurrent_gated_delta_rule: the per-channel decay gk is not modelled"
        )
    t_total = q.shape[0]
    lens = (
        [t_total]
        if a["actual_seq_lengths"] is None
        else [int(x) for x in np.asarray(a["actual_seq_lengths"])]
    )
    if sum(lens) != t_total:
        raise ReferenceInputError(
            "npu_recurrent_gated_delta_rule: actual_seq_lengths must sum to T"
        )
    idx = (
        np.arange(t_total)
        if a["ssm_state_indices"] is None
        else np.asarray(a["ssm_state_indices"]).reshape(-1)
    )
    accepted = (
        None
        if a["num_accepted_tokens"] is None
        else [int(x) for x in np.asarray(a["num_accepted_tokens"])]
    )
    scale = a["scale"] if a["scale"] is not None else k.shape[-1] ** -0.5
    work = f32(state).copy()
    out = np.zeros((t_total, v.shape[1], v.shape[-1]), np.float32)
    start = 0
    for i, length in enumerate(lens):
        first = int(idx[start + (accepted[i] - 1 if accepted else 0)])

        def keep(t: int, s: np.ndarray) -> None:
            work[int(idx[t])] = s

        out[start : start + length], _ = _run(
            q, k, v, work[first].copy(), a["beta"], a["g"], scale, start, start + length, keep
        )
        start += length
    state[...] = cast(work, state.dtype)  # the state is updated in place, as on the device
    return cast(out, v.dtype)


def chunk_gated_delta_rule(a: Args) -> tuple[np.ndarray, np.ndarray]:
    q, k, v, s0 = a["query"], a["key"], a["value"], a["initial_state"]
    t_total, nv, dv, dk = q.shape[0], v.shape[1], v.shape[-1], k.shape[-1]
    lens = (
        [t_total]
        if a["actual_seq_lengths"] is None
        else [int(x) for x in np.asarray(a["actual_seq_lengths"])]
    )
    if sum(lens) != t_total:
        raise ReferenceInputError("npu_chunk_gated_delta_rule: actual_seq_lengths must sum to T")
    scale = 1.0 if a["scale"] is None else float(a["scale"])
    out = np.zeros((t_total, nv, dv), np.float32)
    final = np.zeros((len(lens), nv, dv, dk), np.float32)
    start = 0
    for i, length in enumerate(lens):
        init = f32(s0[i]).copy() if s0 is not None else np.zeros((nv, dv, dk), np.float32)
        out[start : start + length], final[i] = _run(
            q, k, v, init, a["beta"], a["g"], scale, start, start + length
        )
        start += length
    return cast(out, v.dtype), cast(final, s0.dtype if s0 is not None else v.dtype)
