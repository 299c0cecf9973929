"""The code ``kb port`` adds to a ported file: one switch, the stage dispatcher, and the
small helpers the rewritten spans call.

The ported file runs without kb installed: the helpers are plain torch and torch_npu.
``_kb_stage`` is the one place a fused call meets its fallback, so ``kb verify`` can
measure every stage by setting ``KB_PORT_PROBE`` (it gets the stage id and both thunks).
"""

from __future__ import annotations

import json
from typing import Any

from kb.port import cachewrite, expertmods, flashattn, norms, window

SWITCH = "KB_PORT_UNFUSED"

_HEAD = '''
# --- kb port: fused torch_npu calls. KB_PORT_UNFUSED=1 (or setting KB_PORT_UNFUSED = True in
# this module) runs the original code of every rewritten span instead.
import os as _kb_os

import torch_npu

KB_PORT_UNFUSED = _kb_os.environ.get("KB_PORT_UNFUSED", "") == "1"
#: set by kb verify: called as probe(stage, fused, unfused) in place of the fused call
KB_PORT_PROBE = None
#: stage id -> what the plan says of it (module, mapping, operator, derived arguments)
KB_PORT_STAGES = {stages}
#: tensors the port derives from the checkpoint's: name -> how (kb verify reads it)
KB_WEIGHT_MAP = {weights}


def _kb_stage(stage, fused, unfused):
    """One rewritten span: the fused call, or the original code behind the switch."""
    if KB_PORT_UNFUSED:
        return unfused()
    if KB_PORT_PROBE is not None:
        return KB_PORT_PROBE(stage, fused, unfused)
    return fused()
'''

HELPERS: dict[str, str] = {
    "_kb_rotary": '''

def _kb_rotary(x, cos, sin, mode):
    """npu_rotary_mul on 4-D tensors: cos/sin gain the leading axes broadcasting gives them."""
    lead = 4 - x.dim()
    x4 = x.reshape((1,) * lead + tuple(x.shape)) if lead > 0 else x
    cos = cos.reshape((1,) * (4 - cos.dim()) + tuple(cos.shape)).to(x.dtype)
    sin = sin.reshape((1,) * (4 - sin.dim()) + tuple(sin.shape)).to(x.dtype)
    out = torch_npu.npu_rotary_mul(x4, cos, sin, rotary_mode=mode)
    return out.reshape(x.shape)
''',
    "_kb_attention": '''

def _kb_attention(query, key, value, attn_mask=None, scale=None, sparse_mode=0,
                  pre_tokens=2147483647, next_tokens=2147483647):
    """Softmax attention on [B, N, S, D] tensors through the fused inference kernel
    (float32, which it does not take, through npu_fusion_attention).  sparse_mode=3 is the causal mask aligned to the last query, 4 the band of pre/next
    tokens around it (both with the compressed 2048 x 2048 mask); otherwise a boolean mask
    keeps True, an additive mask keeps its finite entries."""
    mask = None
    if sparse_mode in (3, 4):
        mask = torch.triu(torch.ones(2048, 2048, dtype=torch.bool, device=query.device), 1)
    elif attn_mask is not None:
        mask = ~attn_mask if attn_mask.dtype == torch.bool else attn_mask < -1e4
        mask = mask.expand(query.shape[0], 1, query.shape[2], key.shape[2]).contiguous()
    head_dim = query.shape[-1]
    if query.dtype == torch.float32:  # the inference kernel takes no float32; this one does
        return torch_npu.npu_fusion_attention(
            query, key, value, query.shape[1], "BNSD", atten_mask=mask,
            scale=head_dim**-0.5 if scale is None else scale, pre_tockens=pre_tokens,
            next_tockens=next_tokens, sparse_mode=sparse_mode)[0]
    out = torch_npu.npu_fused_infer_attention_score(
        query,
        key,
        value,
        atten_mask=mask,
        num_heads=query.shape[1],
        num_key_value_heads=key.shape[1],
        input_layout="BNSD",
        scale=head_dim**-0.5 if scale is None else scale,
        sparse_mode=sparse_mode,
        pre_tokens=pre_tokens,
        next_tokens=next_tokens,
    )
    return out[0]
''',
    "_kb_merged_linear": '''

def _kb_merged_linear(module, names, x):
    """One matmul for several projections of the same input: their weights concatenated
    along the output axis once (rebuilt when a weight is reloaded), outputs side by side."""
    parts = [getattr(module, n) for n in names]
    stamp = tuple((p.weight.data_ptr(), p.weight._version) for p in parts)
    cached = getattr(module, "_kb_merged", None)
    if cached is None or cached[0] != (names, stamp):
        weight = torch.cat([p.weight for p in parts], 0)
        biases = [p.bias for p in parts]
        bias = None if any(b is None for b in biases) else torch.cat(biases, 0)
        cached = ((names, stamp), weight, bias)
        object.__setattr__(module, "_kb_merged", cached)
    return torch.nn.functional.linear(x, cached[1], cached[2])
''',
    "_kb_add_rms_norm": '''

def _kb_add_rms_norm(x, residual, norm, eps):
    """The residual sum and its RMSNorm in one call: (normalised, sum)."""
    y, _, total = torch_npu.npu_add_rms_norm(x, residual, norm.weight.to(x.dtype), epsilon=eps)
    return y, total
''',
    "_kb_add_then": '''

def _kb_add_then(norm, total):
    """The original order: the sum, then the norm module on it: (normalised, sum)."""
    return norm(total), total
''',
    "_kb_topk_softmax": '''

def _kb_topk_softmax(logits, k, dtype):
    """Top-k of the softmax of router logits in one call; weights in the dtype the original's
    softmax gave, ids as int64 (torch.topk's)."""
    flat = logits.reshape(-1, logits.shape[-1])
    weights, ids, _ = torch_npu.npu_moe_gating_top_k_softmax(flat, k=k)
    shape = tuple(logits.shape[:-1]) + (k,)
    return weights.to(dtype).reshape(shape), ids.long().reshape(shape)
''',
}


HELPERS.update(norms.HELPERS)
HELPERS.update(cachewrite.HELPERS)
HELPERS.update(flashattn.HELPERS)
HELPERS.update(expertmods.HELPERS)
HELPERS.update(window.HELPERS)


def head(stages: dict[str, dict[str, Any]], weights: dict[str, Any], helpers: list[str]) -> str:
    """The block inserted after the file's imports."""
    text = _HEAD.format(stages=_literal(stages), weights=_literal(weights))
    return text + "".join(HELPERS[h] for h in sorted(set(helpers)))


def _literal(value: Any) -> str:
    """A Python literal for plain JSON data (True/False/None spelled as Python spells them)."""
    text = json.dumps(value, indent=4, sort_keys=True)
    return (
        text.replace(": true", ": True").replace(": false", ": False").replace(": null", ": None")
    )
