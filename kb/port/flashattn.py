"""Attention written as flash-attn or xformers calls, into the fused inference kernel.

A call hook of :mod:`kb.port.hooks`.  The call's arguments are bound to the entry
point's parameters (the signatures :mod:`kb.port.standins` cites), and the fused side
passes each one on: the padded forms ([batch, seq, heads, dim]) as ``input_layout='BSND'``,
the packed (varlen) forms as ``'TND'`` with ``actual_seq_lengths`` /
``actual_seq_lengths_kv`` read from ``cu_seqlens``, flash-attn's bottom-right causal as
``sparse_mode=3`` and its window as ``sparse_mode=4`` with ``pre_tokens`` / ``next_tokens``
(both counted from the bottom-right, as :mod:`kb.reference.attention` states), the scale
as written or 1/sqrt(head_dim), the heads of query and key as ``num_heads`` and
``num_key_value_heads``.  xformers' bias decides at run time: None, causal from the
top-left (``LowerTriangularMask``, ``sparse_mode=2``) or the bottom-right, or a block
diagonal (TND from its ``seqstart_py``).

A call with an argument the fused kernel has no equivalent for (alibi slopes, softcap,
dropout written as a non-zero number, attention probabilities or the LSE returned, a
paged block table, the rotary or batch-index arguments of ``flash_attn_with_kvcache``,
``*args``) stays as it is, with a note naming the argument.
"""

from __future__ import annotations

import ast
import inspect
from dataclasses import replace
from typing import Any

import libcst as cst

from kb.port import standins
from kb.port.spans import code, dotted


def _params(fn: Any) -> tuple[str, ...]:
    return tuple(inspect.signature(fn).parameters)


_PADDED = _params(standins.flash_attn_func)  # q, k, v, dropout_p, ...
_VARLEN = _params(standins.flash_attn_varlen_func)  # q, k, v, cu_seqlens_q, ... block_table
#: entry point -> its parameters in order: the stand-ins' signatures (they cite the
#: libraries'); the packed forms take qkv or kv where the plain ones take q, k, v
PARAMS: dict[str, tuple[str, ...]] = {
    "flash_attn_func": _PADDED,
    "flash_attn_qkvpacked_func": ("qkv", *_PADDED[3:]),
    "flash_attn_kvpacked_func": ("q", "kv", *_PADDED[3:]),
    "flash_attn_varlen_func": _VARLEN,
    "flash_attn_varlen_qkvpacked_func": ("qkv", "cu_seqlens", "max_seqlen", *_VARLEN[7:-1]),
    "flash_attn_varlen_kvpacked_func": ("q", "kv", *_VARLEN[3:-1]),
    "flash_attn_with_kvcache": _params(standins.flash_attn_with_kvcache),
    "memory_efficient_attention": _params(standins.memory_efficient_attention),
}
#: arguments whose value, when given and not their default, the fused call cannot take
_NEUTRAL = {
    "alibi_slopes": ("None",),
    "softcap": ("0", "0.0"),
    "return_attn_probs": ("False",),
    "return_softmax_lse": ("False",),
    "block_table": ("None",),
    "rotary_cos": ("None",),
    "rotary_sin": ("None",),
    "cache_batch_idx": ("None",),
    "cache_leftpad": ("None",),
    "output_dtype": ("None",),
}
#: dropout arguments: a non-zero number written in the call is training-time dropout
_DROPOUT = ("dropout_p", "p")


def bind(call: cst.Call, params: tuple[str, ...]) -> dict[str, str] | str:
    """Parameter -> the code passed for it, or the reason the call cannot be bound."""
    out: dict[str, str] = {}
    for i, a in enumerate(call.args):
        if a.star:
            return f"{a.star}{code(a.value)} (arguments the port cannot name)"
        name = a.keyword.value if a.keyword is not None else (params[i] if i < len(params) else "")
        if name not in params:
            return f"argument {name or i} (not a parameter of the entry point)"
        out[name] = code(a.value)
    return out


def unmodelled(args: dict[str, str]) -> str:
    """The first argument the fused kernel has no equivalent for ('' when none)."""
    for name, neutral in _NEUTRAL.items():
        if name in args and args[name] not in neutral:
            return f"{name}={args[name]}"
    for name in _DROPOUT:
        value = args.get(name, "0.0")
        try:
            number = float(value)
        except ValueError:
            continue  # an expression: the fused side refuses a non-zero value when it runs
        if number:
            return f"{name}={value} (dropout: the fused inference kernel has none)"
    return ""


#: flash-attn 1.x names: causal aligned to the top-left before 2.1, and the name alone
#: does not say which release a file gets (some alias 2.x's varlen function to it)
LEGACY = (
    "flash_attn_unpadded_func",
    "flash_attn_unpadded_qkvpacked_func",
    "flash_attn_unpadded_kvpacked_func",
)


def _entry(updated: cst.Call) -> str:
    spelled = dotted(updated.func)
    if spelled.startswith(("self.", "cls.")):
        return ""  # a method of the model's own, whatever it is named
    name = spelled.rsplit(".", 1)[-1]
    return name if name in PARAMS or name in LEGACY else ""


def call(self: Any, original: cst.Call, updated: cst.Call) -> cst.BaseExpression | None:
    """A flash-attn or xformers attention call into the fused kernel (see the module doc)."""
    entry = _entry(updated)
    if not entry:
        return None
    att = [s for s in self._candidates_kind("attention") if s.mapping.startswith("attention_")]
    if not att:
        return updated
    s = att[0]
    if entry in LEGACY:
        why = "a flash-attn 1.x name: whether causal is aligned top-left (1.x) or bottom-right (>= 2.1) depends on the release installed"
        self.notes.setdefault(s.module, []).append(
            f"{entry} call at line {self._line(original)} not rewritten: {why}"
        )
        return updated
    args = bind(updated, PARAMS[entry])
    why = args if isinstance(args, str) else unmodelled(args)
    if isinstance(args, str) or why:
        note = f"{entry} call at line {self._line(original)} not rewritten: {why}"
        self.notes.setdefault(s.module, []).append(note)
        return updated
    fused, derived = _fused(entry, args)
    if not fused:
        return updated
    self.result.helpers += derived.pop("helpers")
    derived["operator"] = "npu_fused_infer_attention_score"
    derived["args"]["float32"] = "npu_fusion_attention (the inference kernel takes no float32)"
    row = _row(entry, derived["args"])
    node = self._emit(
        replace(s, mapping=row) if row else s, original, fused, code(updated), **derived
    )
    self.result.done.add((s.module, s.mapping))
    return node


def _row(entry: str, info: dict[str, Any]) -> str:
    """The pattern row of the call's own layout and masking (the plan's row may name
    another layout: the call decides it)."""
    from kb.reference.mappings import MAPPINGS

    layout = "tnd" if "varlen" in entry else "bsnd"
    masked = info.get("attn_bias", "None") != "None" or not (
        info.get("causal", "False") == "False" and info.get("window", "(-1, -1)") == "(-1, -1)"
    )
    row = f"attention_{'gqa' if masked else 'noncausal'}_{layout}"
    return row if any(m.id == row for m in MAPPINGS) else ""


def sparse(causal: str, window: str) -> dict[str, Any]:
    """sparse_mode / pre_tokens / next_tokens for a causal flag and window written as
    literals (the fused helper derives the same at run time from any expression)."""
    try:
        flag, (left, right) = ast.literal_eval(causal), ast.literal_eval(window)
    except (ValueError, TypeError, SyntaxError):
        return {"sparse_mode": "3 or 4 (or 0), from the causal flag and window at run time"}
    right = 0 if flag else int(right)
    if left < 0 and right < 0:
        return {"sparse_mode": 0}
    mode = 3 if left < 0 and right == 0 else 4
    if mode == 3:
        return {"sparse_mode": 3}
    unbounded = 2147483647
    pre, nxt = (left if left >= 0 else unbounded), (right if right >= 0 else unbounded)
    return {"sparse_mode": 4, "pre_tokens": pre, "next_tokens": nxt}


def _fused(entry: str, a: dict[str, str]) -> tuple[str, dict[str, Any]]:
    """The fused call's code and the arguments the stage records."""
    if entry == "memory_efficient_attention":
        bias, scale, p = a.get("attn_bias", "None"), a.get("scale", "None"), a.get("p", "0.0")
        text = (
            f"_kb_xformers_attention({a['query']}, {a['key']}, {a['value']}, {bias}, {scale}, {p})"
        )
        layout = "BSND" if bias == "None" else "BSND, or TND for a block-diagonal attn_bias"
        bound = {"input_layout": layout, "attn_bias": bias, "scale": scale}
        return text, {"helpers": ["_kb_xformers_attention", "_kb_fused_attention"], "args": bound}
    scale = a.get("softmax_scale", "None")
    causal = a.get("causal", "False")
    window = a.get("window_size", "(-1, -1)")
    dropout = a.get("dropout_p", "0.0")
    if entry == "flash_attn_qkvpacked_func":
        qkv = f"*{a['qkv']}.unbind(2)"
    elif entry == "flash_attn_kvpacked_func":
        qkv = f"{a['q']}, *{a['kv']}.unbind(2)"
    elif entry == "flash_attn_varlen_qkvpacked_func":
        qkv = f"*{a['qkv']}.unbind(1)"
    elif entry == "flash_attn_varlen_kvpacked_func":
        qkv = f"{a['q']}, *{a['kv']}.unbind(1)"
    elif entry == "flash_attn_with_kvcache":
        qkv = f"{a['q']}, {a['k_cache']}, {a['v_cache']}"
    else:
        qkv = f"{a['q']}, {a['k']}, {a['v']}"
    tail = f"scale={scale}, causal={causal}, window={window}"
    info: dict[str, Any] = {"input_layout": "BSND", "causal": causal, "window": window}
    info["scale"] = scale
    info.update(sparse(causal, window))
    if entry == "flash_attn_with_kvcache":
        new = f"{a.get('k', 'None')}, {a.get('v', 'None')}"
        lens = a.get("cache_seqlens", "None")
        text = f"_kb_flash_kvcache({qkv}, {new}, {lens}, {tail})"
        info["actual_seq_lengths_kv"] = f"{lens} + new tokens"
        return text, {
            "helpers": ["_kb_flash_kvcache", "_kb_flash_attention", "_kb_fused_attention"],
            "args": info,
        }
    if "varlen" in entry:
        cu_q = a.get("cu_seqlens_q", a.get("cu_seqlens", "None"))
        cu_k = a.get("cu_seqlens_k", a.get("cu_seqlens", "None"))
        tail += f", cu_seqlens_q={cu_q}, cu_seqlens_k={cu_k}"
        info.update(input_layout="TND", cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
    text = f"_kb_flash_attention({qkv}, {tail}, dropout_p={dropout})"
    return text, {"helpers": ["_kb_flash_attention", "_kb_fused_attention"], "args": info}


HELPERS: dict[str, str] = {
    "_kb_fused_attention": '''

def _kb_fused_attention(query, key, value, layout, scale, sparse=0, pre=2147483647,
                        nxt=2147483647, mask=None, q_lens=None, kv_lens=None, fusion=False):
    """One attention call: the fused inference kernel for float16 and bfloat16, and
    npu_fusion_attention, which also takes float32, for float32 (or when ``fusion``).  In
    TND the lengths are cumulative; in BSND kv_lens holds each batch's key/value length."""
    scale = query.shape[-1] ** -0.5 if scale is None else scale
    if (fusion or query.dtype == torch.float32) and (layout == "TND" or kv_lens is None):
        return torch_npu.npu_fusion_attention(
            query, key, value, query.shape[-2], layout, atten_mask=mask, scale=scale,
            pre_tockens=pre, next_tockens=nxt, sparse_mode=sparse,
            actual_seq_qlen=q_lens, actual_seq_kvlen=kv_lens)[0]
    lengths = {}
    if q_lens is not None:
        lengths["actual_seq_lengths"] = q_lens
    if kv_lens is not None:
        lengths["actual_seq_lengths_kv"] = kv_lens
    return torch_npu.npu_fused_infer_attention_score(
        query, key, value, atten_mask=mask, num_heads=query.shape[-2],
        num_key_value_heads=key.shape[-2], input_layout=layout, scale=scale,
        sparse_mode=sparse, pre_tokens=pre, next_tokens=nxt, **lengths)[0]
''',
    "_kb_flash_attention": '''

def _kb_flash_sparse(causal, window, sq):
    """flash-attn's causal flag and window as (sparse_mode, pre_tokens, next_tokens), both
    counted from the bottom-right corner; causal bounds the window's right side at 0."""
    unbounded = 2147483647
    left, right = (int(w) for w in window)
    if causal:
        right = 0
    if left < 0 and right < 0:
        return 0, unbounded, unbounded
    pre = left if left >= 0 else unbounded
    nxt = right if right >= 0 else unbounded
    return (3 if left < 0 and right == 0 else 4), pre, nxt


def _kb_flash_attention(query, key, value, scale=None, causal=False, window=(-1, -1),
                        cu_seqlens_q=None, cu_seqlens_k=None, dropout_p=0.0, kv_lengths=None):
    """flash-attn's attention through the fused inference kernel: [B, S, N, D] as BSND, or
    tokens packed as [T, N, D] with cumulative lengths as TND."""
    if dropout_p:
        raise ValueError(f"dropout_p={dropout_p}: the fused inference kernel has no dropout")
    tnd = cu_seqlens_q is not None
    sq = query.shape[1] if not tnd else 0
    sparse, pre, nxt = _kb_flash_sparse(causal, window, sq)
    q_lens = kv_lens = None
    if tnd:
        q_lens = [int(n) for n in cu_seqlens_q[1:]]
        kv_lens = [int(n) for n in cu_seqlens_k[1:]]
    elif kv_lengths is not None:
        kv_lens = [int(n) for n in kv_lengths]
    mask = None
    if sparse and sq == 1 and sparse == 4:
        # one query row: the kernel reads no sparse mode, so the band goes in as a mask
        sk = key.shape[1]
        ends = kv_lengths if kv_lengths is not None else [sk] * query.shape[0]
        j = torch.arange(sk, device=query.device)
        rows = [(j > int(e) - 1 + nxt) | (j < int(e) - 1 - pre) for e in ends]
        mask = torch.stack(rows)[:, None, None, :]
        sparse, pre, nxt = 0, 2147483647, 2147483647
    elif sparse:
        mask = torch.triu(torch.ones(2048, 2048, dtype=torch.bool, device=query.device), 1)
    layout = "TND" if tnd else "BSND"
    # packed sequences of one query each: the inference kernel reads no sparse mode then,
    # so a window goes to npu_fusion_attention, which does
    rows = [b - a for a, b in zip([0] + (q_lens or [])[:-1], q_lens or [])]
    fusion = tnd and sparse == 4 and all(n == 1 for n in rows)
    return _kb_fused_attention(query, key, value, layout, scale, sparse, pre, nxt, mask,
                               q_lens, kv_lens, fusion)
''',
    "_kb_flash_kvcache": '''

def _kb_flash_kvcache(query, k_cache, v_cache, key=None, value=None, cache_seqlens=None,
                      scale=None, causal=False, window=(-1, -1)):
    """flash_attn_with_kvcache: the new keys and values written into the caches at
    cache_seqlens (in place), then attention over each row's filled part (BSND)."""
    b, new = query.shape[0], 0 if key is None else key.shape[1]
    if cache_seqlens is None:
        lens = [k_cache.shape[1] - new] * b
    elif isinstance(cache_seqlens, int):
        lens = [cache_seqlens] * b
    else:
        lens = [int(n) for n in cache_seqlens]
    if key is not None:
        for i in range(b):
            k_cache[i, lens[i]:lens[i] + new] = key[i]
            v_cache[i, lens[i]:lens[i] + new] = value[i]
    return _kb_flash_attention(query, k_cache, v_cache, scale, causal, window,
                               kv_lengths=[n + new for n in lens])
''',
    "_kb_xformers_attention": '''

def _kb_xformers_attention(query, key, value, attn_bias=None, scale=None, p=0.0):
    """xformers' memory_efficient_attention through the fused inference kernel: [B, M, H, K]
    as BSND (3-D [B, M, K] as one head); the bias decides the sparse mode, a block-diagonal
    bias packs its batch of one as TND with its cumulative lengths."""
    if p:
        raise ValueError(f"p={p}: the fused inference kernel has no dropout")
    kind = type(attn_bias).__name__
    if isinstance(attn_bias, torch.Tensor):
        raise ValueError("a tensor attn_bias: the port passes no score bias (pse_shift)")
    three = query.dim() == 3
    q, k, v = ((t.unsqueeze(2) if three else t) for t in (query, key, value))
    sparse, q_lens, kv_lens, layout = 0, None, None, "BSND"
    if attn_bias is None:
        pass
    elif kind in ("LowerTriangularMask", "LowerTriangularFromBottomRightMask"):
        sparse = 2 if kind == "LowerTriangularMask" else 3
    elif kind in ("BlockDiagonalMask", "BlockDiagonalCausalMask"):
        sparse = 2 if kind == "BlockDiagonalCausalMask" else 0
        layout, q, k, v = "TND", q[0], k[0], v[0]
        q_lens = list(attn_bias.q_seqinfo.seqstart_py[1:])
        kv_lens = list(attn_bias.k_seqinfo.seqstart_py[1:])
    else:
        raise ValueError(f"attn_bias={kind}: not a bias the port maps")
    mask = None
    if sparse:
        mask = torch.triu(torch.ones(2048, 2048, dtype=torch.bool, device=q.device), 1)
    unbounded = 2147483647
    out = _kb_fused_attention(q, k, v, layout, scale, sparse, unbounded, unbounded, mask,
                              q_lens, kv_lens)
    out = out.unsqueeze(0) if layout == "TND" else out
    return out.squeeze(2) if three else out
''',
}
