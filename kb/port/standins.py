"""CPU stand-ins for flash-attn and xformers' attention, put in ``sys.modules`` only while
``kb verify`` runs (as :mod:`kb.emulate` does for torch_npu), so an original that imports
them takes the path its users run, and the port's fallback computes the same thing.

Each entry point computes the library's documented semantics in float32 and returns the
input dtype; an argument the stand-in does not compute raises :class:`NotModelled` naming
it.  The facts, and where they are stated:

flash-attn (Dao-AILab/flash-attention, commit 0251105a2fb19d2957484b7f023cd8c115286ced,
``flash_attn/flash_attn_interface.py``):

* ``flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False,
  window_size=(-1, -1), softcap=0.0, alibi_slopes=None, deterministic=False,
  return_attn_probs=False)`` (lines 1156-1168); q is (batch_size, seqlen, nheads, headdim),
  k and v (batch_size, seqlen, nheads_k, headdim), the output like q (lines 1192-1209);
  softmax_scale defaults to 1 / sqrt(headdim) (1196-1197).
* GQA: query head h reads key/value head h // (nheads / nheads_k) (lines 1170-1173).
* causal: the mask aligned to the bottom-right corner (lines 1175-1185; README.md lines
  420-423, "2.1: Change behavior of causal flag"): query i sees key j when
  j <= i + seqlen_k - seqlen_q; a row that sees nothing gives zeros (line 1185).
* window_size (left, right): query i sees keys in [i + seqlen_k - seqlen_q - left,
  i + seqlen_k - seqlen_q + right], -1 meaning no bound (lines 1163, 1187-1189);
  causal forces right = 0 (``csrc/flash_attn/flash_api.cpp`` line 427).
* ``flash_attn_qkvpacked_func(qkv, dropout_p=0.0, softmax_scale=None, causal=False, ...)``:
  qkv (batch_size, seqlen, 3, nheads, headdim) (lines 1019-1041);
  ``flash_attn_kvpacked_func(q, kv, ...)`` (1078-1089): kv (batch_size, seqlen_k, 2,
  nheads_k, headdim); ``flash_attn_varlen_qkvpacked_func(qkv, cu_seqlens, max_seqlen, ...)``
  (1233-1245) and ``flash_attn_varlen_kvpacked_func(q, kv, cu_seqlens_q, cu_seqlens_k,
  max_seqlen_q, max_seqlen_k, ...)`` (1299-1314) pack the same along the token axis.
* ``flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
  max_seqlen_k, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
  softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False,
  block_table=None)`` (lines 1391-1408): q (total_q, nheads, headdim), k/v (total_k,
  nheads_k, headdim), cu_seqlens (batch_size + 1,) cumulative (lines 1432-1438); each
  sequence attends within its own span, the causal and window rules per sequence.
* ``flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, rotary_cos=None,
  rotary_sin=None, cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None,
  block_table=None, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
  rotary_interleaved=True, alibi_slopes=None, num_splits=0, return_softmax_lse=False)``
  (lines 1485-1505): k/v, when given, are written into the caches in place at
  cache_seqlens, and attention reads the first cache_seqlens (+ the new) keys.
* ``flash_attn.bert_padding`` (``flash_attn/bert_padding.py``): ``index_first_axis``,
  ``pad_input(hidden_states, indices, batch, seqlen)`` (line 204) and
  ``unpad_input(hidden_states, attention_mask, unused_mask=None)`` (lines 98-130: five
  results, the last the used lengths per batch).  The stand-ins say they are release
  2.8.4 (``flash_attn/__init__.py`` at that commit) and xformers 0.0.35 (its
  ``version.txt`` at the commit below).

xformers (facebookresearch/xformers, commit bed3978b5efc34b92a84e6116b01f598d83b8af1,
``xformers/ops/fmha/__init__.py`` and ``attn_bias.py``):

* ``memory_efficient_attention(query, key, value, attn_bias=None, p=0.0, scale=None, *,
  op=None, output_dtype=None)`` (__init__.py lines 199-209); inputs [B, M, H, K]
  (line 215), scale defaulting to q.shape[-1] ** -0.5 (303-304), a tensor attn_bias added
  to the scores (235-236, 299-301), p the dropout probability (302).
* ``LowerTriangularMask``: causal from the top-left: a query cannot attend to a key
  farther from the first key than it is from the first query (attn_bias.py 142-150);
  ``LowerTriangularFromBottomRightMask`` aligns it to the bottom-right (261).
* ``BlockDiagonalMask.from_seqlens(q_seqlen, kv_seqlen=None)`` (849-855): sequences
  concatenated along M of a batch of one, each query block attends to its key block
  (753-763); ``seqstart_py`` holds the cumulative starts (382-398);
  ``BlockDiagonalCausalMask`` makes each block causal from its top-left (994-1001).
"""

from __future__ import annotations

import importlib.machinery
import sys
import types
from typing import Any

from kb.reference.errors import NotModelled

#: the releases the stand-ins say they are: those of the commits cited above
#: (flash_attn/__init__.py; xformers' version.txt)
FLASH_VERSION = "2.8.4"
XFORMERS_VERSION = "0.0.35"
_MISSING = object()


def _torch() -> Any:
    import torch

    return torch


def _refuse(entry: str, **given: Any) -> None:
    """NotModelled naming the first argument given a value the stand-in does not compute."""
    for name, bad in given.items():
        if bad:
            raise NotModelled(f"{entry}: {name} is not modelled by kb verify's CPU stand-in")


def _refuse_flash(
    entry: str, dropout_p: float, softcap: float, alibi: Any, probs: bool, table: Any = None
) -> None:
    """The arguments of flash-attn's attention functions the stand-in does not compute."""
    _refuse(
        entry,
        dropout_p=dropout_p,
        softcap=softcap,
        alibi_slopes=alibi is not None,
        return_attn_probs=probs,
        block_table=table is not None,
    )


def _attend(q: Any, k: Any, v: Any, scale: Any, keep: Any = None, bias: Any = None) -> Any:
    """q [B, Sq, H, D], k/v [B, Sk, Hk, D] -> [B, Sq, H, Dv] in float32.  ``keep`` is a
    boolean [Sq, Sk] (or broadcastable to [B, H, Sq, Sk]); rows that keep nothing give 0."""
    torch = _torch()
    h, hk = q.shape[2], k.shape[2]
    if hk == 0 or h % hk:
        raise ValueError(f"query heads ({h}) must be a multiple of key/value heads ({hk})")
    qf, kf, vf = (t.float().transpose(1, 2) for t in (q, k, v))
    kf = kf.repeat_interleave(h // hk, dim=1)
    vf = vf.repeat_interleave(h // hk, dim=1)
    s = (qf @ kf.transpose(-2, -1)) * (q.shape[-1] ** -0.5 if scale is None else float(scale))
    if bias is not None:
        s = s + bias.float()
    if keep is not None:
        s = s.masked_fill(~keep, float("-inf"))
    p = torch.softmax(s, dim=-1)
    p = torch.nan_to_num(p, nan=0.0)  # a row that sees no key
    return (p @ vf).transpose(1, 2).contiguous()  # the layout of q, as the kernels return it


def band(sq: int, sk: int, causal: bool, window: Any, device: Any = None) -> Any:
    """flash-attn's visible [sq, sk] entries: bottom-right causal and window."""
    torch = _torch()
    i = torch.arange(sq, device=device)[:, None] + (sk - sq)
    j = torch.arange(sk, device=device)[None, :]
    left, right = (int(w) for w in (window if window is not None else (-1, -1)))
    keep = torch.ones(sq, sk, dtype=torch.bool, device=device)
    if causal:
        right = 0
    if right >= 0:
        keep &= j <= i + right
    if left >= 0:
        keep &= j >= i - left
    return keep


def flash_attn_func(
    q: Any,
    k: Any,
    v: Any,
    dropout_p: float = 0.0,
    softmax_scale: Any = None,
    causal: bool = False,
    window_size: Any = (-1, -1),
    softcap: float = 0.0,
    alibi_slopes: Any = None,
    deterministic: bool = False,
    return_attn_probs: bool = False,
) -> Any:
    _refuse_flash("flash_attn_func", dropout_p, softcap, alibi_slopes, return_attn_probs)
    keep = band(q.shape[1], k.shape[1], bool(causal), window_size, q.device)
    return _attend(q, k, v, softmax_scale, keep).to(q.dtype)


def flash_attn_qkvpacked_func(qkv: Any, *args: Any, **kwargs: Any) -> Any:
    return flash_attn_func(qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2], *args, **kwargs)


def flash_attn_kvpacked_func(q: Any, kv: Any, *args: Any, **kwargs: Any) -> Any:
    return flash_attn_func(q, kv[:, :, 0], kv[:, :, 1], *args, **kwargs)


def flash_attn_varlen_func(
    q: Any,
    k: Any,
    v: Any,
    cu_seqlens_q: Any,
    cu_seqlens_k: Any,
    max_seqlen_q: int,
    max_seqlen_k: int,
    dropout_p: float = 0.0,
    softmax_scale: Any = None,
    causal: bool = False,
    window_size: Any = (-1, -1),
    softcap: float = 0.0,
    alibi_slopes: Any = None,
    deterministic: bool = False,
    return_attn_probs: bool = False,
    block_table: Any = None,
) -> Any:
    _refuse_flash(
        "flash_attn_varlen_func", dropout_p, softcap, alibi_slopes, return_attn_probs, block_table
    )
    torch = _torch()
    out = torch.zeros(q.shape[0], q.shape[1], v.shape[-1], dtype=torch.float32, device=q.device)
    cq, ck = [int(x) for x in cu_seqlens_q], [int(x) for x in cu_seqlens_k]
    for b in range(len(cq) - 1):
        qb, kb_, vb = q[cq[b] : cq[b + 1]], k[ck[b] : ck[b + 1]], v[ck[b] : ck[b + 1]]
        keep = band(qb.shape[0], kb_.shape[0], bool(causal), window_size, q.device)
        out[cq[b] : cq[b + 1]] = _attend(qb[None], kb_[None], vb[None], softmax_scale, keep)[0]
    return out.to(q.dtype)


def flash_attn_varlen_qkvpacked_func(
    qkv: Any, cu_seqlens: Any, max_seqlen: int, *a: Any, **kw: Any
) -> Any:
    return flash_attn_varlen_func(
        qkv[:, 0], qkv[:, 1], qkv[:, 2], cu_seqlens, cu_seqlens, max_seqlen, max_seqlen, *a, **kw
    )


def flash_attn_varlen_kvpacked_func(
    q: Any, kv: Any, cu_q: Any, cu_k: Any, max_q: int, max_k: int, *a: Any, **kw: Any
) -> Any:
    return flash_attn_varlen_func(q, kv[:, 0], kv[:, 1], cu_q, cu_k, max_q, max_k, *a, **kw)


def flash_attn_with_kvcache(
    q: Any,
    k_cache: Any,
    v_cache: Any,
    k: Any = None,
    v: Any = None,
    rotary_cos: Any = None,
    rotary_sin: Any = None,
    cache_seqlens: Any = None,
    cache_batch_idx: Any = None,
    cache_leftpad: Any = None,
    block_table: Any = None,
    softmax_scale: Any = None,
    causal: bool = False,
    window_size: Any = (-1, -1),
    softcap: float = 0.0,
    rotary_interleaved: bool = True,
    alibi_slopes: Any = None,
    num_splits: int = 0,
    return_softmax_lse: bool = False,
) -> Any:
    _refuse(
        "flash_attn_with_kvcache",
        rotary_cos=rotary_cos is not None,
        cache_batch_idx=cache_batch_idx is not None,
        cache_leftpad=cache_leftpad is not None,
        block_table=block_table is not None,
        softcap=softcap,
        alibi_slopes=alibi_slopes is not None,
        return_softmax_lse=return_softmax_lse,
    )
    torch = _torch()
    b, sq = q.shape[0], q.shape[1]
    if cache_seqlens is None:
        lens = [k_cache.shape[1] - (0 if k is None else k.shape[1])] * b
    elif isinstance(cache_seqlens, int):
        lens = [cache_seqlens] * b
    else:
        lens = [int(x) for x in cache_seqlens]
    new = 0 if k is None else k.shape[1]
    if k is not None:
        for i in range(b):  # the new keys and values land in the caches, in place
            k_cache[i, lens[i] : lens[i] + new] = k[i]
            v_cache[i, lens[i] : lens[i] + new] = v[i]
    out = torch.zeros(*q.shape[:3], v_cache.shape[-1], dtype=torch.float32, device=q.device)
    for i in range(b):
        sk = lens[i] + new
        keep = band(sq, sk, bool(causal), window_size, q.device)
        kb_, vb = k_cache[i : i + 1, :sk], v_cache[i : i + 1, :sk]
        out[i : i + 1] = _attend(q[i : i + 1], kb_, vb, softmax_scale, keep)
    return out.to(q.dtype)


# -- flash_attn.bert_padding ---------------------------------------------------------------
def index_first_axis(x: Any, indices: Any) -> Any:
    return x.reshape(-1, *x.shape[1:])[indices] if x.dim() else x


def unpad_input(hidden_states: Any, attention_mask: Any, unused_mask: Any = None) -> Any:
    _refuse("unpad_input", unused_mask=unused_mask is not None)
    torch = _torch()
    lens = attention_mask.sum(dim=-1, dtype=torch.int32)
    indices = torch.nonzero(attention_mask.flatten(), as_tuple=False).flatten()
    cu = torch.nn.functional.pad(torch.cumsum(lens, dim=0, dtype=torch.int32), (1, 0))
    flat = hidden_states.reshape(-1, *hidden_states.shape[2:])
    return flat[indices], indices, cu, int(lens.max().item()), lens


def pad_input(hidden_states: Any, indices: Any, batch: int, seqlen: int) -> Any:
    torch = _torch()
    out = torch.zeros(
        batch * seqlen,
        *hidden_states.shape[1:],
        dtype=hidden_states.dtype,
        device=hidden_states.device,
    )
    out[indices] = hidden_states
    return out.reshape(batch, seqlen, *hidden_states.shape[1:])


# -- xformers ------------------------------------------------------------------------------
class AttentionBias:
    """The base of xformers' structured biases."""


class LowerTriangularMask(AttentionBias):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def to(self, device: Any) -> LowerTriangularMask:
        return self


class LowerTriangularFromBottomRightMask(LowerTriangularMask):
    pass


class _SeqLenInfo:
    def __init__(self, seqlens: Any) -> None:
        starts = [0]
        for n in seqlens:
            starts.append(starts[-1] + int(n))
        self.seqstart_py = starts
        self.seqstart = _torch().tensor(starts, dtype=_torch().int32)
        self.max_seqlen = max((int(n) for n in seqlens), default=0)
        self.min_seqlen = min((int(n) for n in seqlens), default=0)


class BlockDiagonalMask(AttentionBias):
    causal = False

    def __init__(self, q_seqinfo: _SeqLenInfo, k_seqinfo: _SeqLenInfo) -> None:
        self.q_seqinfo, self.k_seqinfo = q_seqinfo, k_seqinfo

    @classmethod
    def from_seqlens(cls, q_seqlen: Any, kv_seqlen: Any = None, *, device: Any = None) -> Any:
        q = _SeqLenInfo(list(q_seqlen))
        return cls(q, q if kv_seqlen is None else _SeqLenInfo(list(kv_seqlen)))

    def make_causal(self) -> BlockDiagonalCausalMask:
        return BlockDiagonalCausalMask(self.q_seqinfo, self.k_seqinfo)

    def to(self, device: Any) -> Any:
        return self


class BlockDiagonalCausalMask(BlockDiagonalMask):
    causal = True


def _xformers_keep(bias: Any, sq: int, sk: int, device: Any) -> Any:
    torch = _torch()
    i = torch.arange(sq, device=device)[:, None]
    j = torch.arange(sk, device=device)[None, :]
    if isinstance(bias, LowerTriangularFromBottomRightMask):
        return j <= i + (sk - sq)
    if isinstance(bias, LowerTriangularMask):
        return j <= i
    keep = torch.zeros(sq, sk, dtype=torch.bool, device=device)
    qs, ks = bias.q_seqinfo.seqstart_py, bias.k_seqinfo.seqstart_py
    for b in range(len(qs) - 1):
        block = torch.ones(qs[b + 1] - qs[b], ks[b + 1] - ks[b], dtype=torch.bool, device=device)
        if bias.causal:
            block = torch.tril(block)
        keep[qs[b] : qs[b + 1], ks[b] : ks[b + 1]] = block
    return keep


def memory_efficient_attention(
    query: Any,
    key: Any,
    value: Any,
    attn_bias: Any = None,
    p: float = 0.0,
    scale: Any = None,
    *,
    op: Any = None,
    output_dtype: Any = None,
) -> Any:
    torch = _torch()
    _refuse(
        "memory_efficient_attention", p=p, op=op is not None, five_dim_gqa_input=query.dim() == 5
    )
    known = (LowerTriangularMask, BlockDiagonalMask)
    if attn_bias is not None and not isinstance(attn_bias, (torch.Tensor, *known)):
        _refuse("memory_efficient_attention", **{f"attn_bias={type(attn_bias).__name__}": True})
    three = query.dim() == 3
    q, k, v = ((t[:, :, None] if three else t) for t in (query, key, value))
    keep = bias = None
    if isinstance(attn_bias, torch.Tensor):
        bias = attn_bias
    elif attn_bias is not None:
        keep = _xformers_keep(attn_bias, q.shape[1], k.shape[1], q.device)
    out = _attend(q, k, v, scale, keep, bias)
    out = out[:, :, 0] if three else out
    return out.to(output_dtype or query.dtype)


# -- the module tree ----------------------------------------------------------------------
def _module(name: str, **attrs: Any) -> types.ModuleType:
    mod = types.ModuleType(name, f"kb verify's CPU stand-in for {name} (kb.port.standins)")
    mod.__dict__.update(attrs)
    mod.__path__ = []  # a package: its submodules import
    # importlib.util.find_spec reads it (libraries probe for the package that way)
    mod.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
    return mod


_FLASH = {
    n: globals()[n]
    for n in (
        "flash_attn_func",
        "flash_attn_qkvpacked_func",
        "flash_attn_kvpacked_func",
        "flash_attn_varlen_func",
        "flash_attn_varlen_qkvpacked_func",
        "flash_attn_varlen_kvpacked_func",
        "flash_attn_with_kvcache",
    )
}
_BIASES = {
    n: globals()[n]
    for n in (
        "AttentionBias",
        "LowerTriangularMask",
        "LowerTriangularFromBottomRightMask",
        "BlockDiagonalMask",
        "BlockDiagonalCausalMask",
    )
}


def modules() -> dict[str, types.ModuleType]:
    """The stand-in module tree: flash_attn (+ flash_attn_interface, bert_padding) and
    xformers (+ ops, ops.fmha, ops.fmha.attn_bias)."""
    pad = {"index_first_axis": index_first_axis, "pad_input": pad_input, "unpad_input": unpad_input}
    xf = {"memory_efficient_attention": memory_efficient_attention, **_BIASES}
    tree = {
        "flash_attn": _module("flash_attn", __version__=FLASH_VERSION, **_FLASH),
        "flash_attn.flash_attn_interface": _module("flash_attn.flash_attn_interface", **_FLASH),
        "flash_attn.bert_padding": _module("flash_attn.bert_padding", **pad),
        "xformers": _module("xformers", __version__=XFORMERS_VERSION),
        "xformers.ops": _module("xformers.ops", fmha=None, **xf),
        "xformers.ops.fmha": _module("xformers.ops.fmha", attn_bias=None, **xf),
        "xformers.ops.fmha.attn_bias": _module("xformers.ops.fmha.attn_bias", **_BIASES),
    }
    for name, mod in tree.items():  # each submodule an attribute of its package
        if "." in name:
            parent, child = name.rsplit(".", 1)
            setattr(tree[parent], child, mod)
    return tree


class Installed:
    """The stand-ins in ``sys.modules`` until :meth:`undo` puts back what was there."""

    def __init__(self) -> None:
        self.saved: dict[str, Any] = {}
        for name, mod in modules().items():
            self.saved[name] = sys.modules.get(name, _MISSING)
            sys.modules[name] = mod

    def undo(self) -> None:
        for name, old in self.saved.items():
            if old is _MISSING:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = old
        self.saved = {}


def install() -> Installed:
    """Put the stand-ins in place (see the module doc)."""
    return Installed()
