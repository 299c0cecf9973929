"""The Qwen-style model of ``qwen_layer.py`` ported to torch_npu's fused operators.

What each block becomes:

- RMSNorm before attention -> ``npu_rms_norm``; the residual add plus the RMSNorm after
  attention -> one ``npu_add_rms_norm`` (it returns the normalised tensor and the sum);
- rotate-half RoPE on q and k -> ``npu_rotary_mul(..., rotary_mode="half")`` on the
  [batch, seq, heads, head_dim] layout;
- GQA attention -> ``npu_fused_infer_attention_score_v2`` with ``input_layout="BSND"``;
  the causal mask is the compressed 2048 x 2048 lower-left mask with ``sparse_mode=3``,
  a bidirectional block passes no mask (``sparse_mode=0``);
- the SwiGLU MLP -> one gate_up matmul (gate rows first) and ``npu_swiglu``, which
  activates the first half;
- the MoE router -> ``npu_moe_gating_top_k_softmax`` followed by the renormalisation
  the original does.

The port keeps the original's weights (it wraps its Linear layers), so both compute
from the same parameters.  On a machine without an NPU run it under the emulator:
``kb emulate -- python examples/emulate/compare_qwen.py``.
"""

from __future__ import annotations

import torch
import torch_npu
from qwen_layer import Config, DecoderLayer, MoE, Router
from torch import nn

#: sparse_mode=3 reads this one compressed mask: True above the diagonal = hidden
CAUSAL_2K = torch.ones(2048, 2048, dtype=torch.bool, device="npu").triu_(1)


class FusedRMSNorm(nn.Module):
    def __init__(self, weight: nn.Parameter, eps: float) -> None:
        super().__init__()
        self.weight, self.eps = weight, eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch_npu.npu_rms_norm(x, self.weight, epsilon=self.eps)[0]


class FusedAttention(nn.Module):
    def __init__(self, original: nn.Module) -> None:
        super().__init__()
        self.cfg: Config = original.cfg
        self.causal = original.causal
        self.q_proj, self.k_proj = original.q_proj, original.k_proj
        self.v_proj, self.o_proj = original.v_proj, original.o_proj

    def rope(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        # cos/sin [seq, head_dim] broadcast over batch and heads of a BSND tensor
        return torch_npu.npu_rotary_mul(
            x, cos[None, :, None], sin[None, :, None], rotary_mode="half"
        )

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        cfg = self.cfg
        mask = dict(atten_mask=CAUSAL_2K, sparse_mode=3) if self.causal else dict(sparse_mode=0)
        out, _ = torch_npu.npu_fused_infer_attention_score_v2(
            q,
            k,
            v,
            num_query_heads=cfg.heads,
            num_key_value_heads=cfg.kv_heads,
            softmax_scale=cfg.head_dim**-0.5,
            input_layout="BSND",
            **mask,
        )
        return out

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        cfg = self.cfg
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, cfg.heads, cfg.head_dim)
        k = self.k_proj(x).view(b, s, cfg.kv_heads, cfg.head_dim)
        v = self.v_proj(x).view(b, s, cfg.kv_heads, cfg.head_dim)
        q, k = self.rope(q, cos, sin), self.rope(k, cos, sin)
        return self.o_proj(self.attend(q, k, v).reshape(b, s, cfg.heads * cfg.head_dim))


class FusedMLP(nn.Module):
    def __init__(self, original: nn.Module) -> None:
        super().__init__()
        # npu_swiglu activates the first half: gate rows first, then up
        self.gate_up = nn.Parameter(self.stack(original), requires_grad=False)
        self.down_proj = original.down_proj

    @staticmethod
    def stack(original: nn.Module) -> torch.Tensor:
        return torch.cat([original.gate_proj.weight, original.up_proj.weight], dim=0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(torch_npu.npu_swiglu(x @ self.gate_up.t(), dim=-1))


class FusedRouter(nn.Module):
    def __init__(self, original: Router) -> None:
        super().__init__()
        self.gate, self.top_k = original.gate, original.top_k

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        weights, ids, _ = torch_npu.npu_moe_gating_top_k_softmax(self.gate(x), None, k=self.top_k)
        return self.renormalise(weights), ids

    @staticmethod
    def renormalise(weights: torch.Tensor) -> torch.Tensor:
        return weights / weights.sum(dim=-1, keepdim=True)


class FusedMoE(MoE):
    """The original's expert loop, with the fused router and fused experts."""

    def __init__(self, original: MoE) -> None:
        nn.Module.__init__(self)
        self.router = FusedRouter(original.router)
        self.experts = nn.ModuleList(FusedMLP(e) for e in original.experts)


class FusedDecoderLayer(nn.Module):
    def __init__(self, original: DecoderLayer) -> None:
        super().__init__()
        self.eps = original.input_layernorm.eps
        self.input_layernorm = FusedRMSNorm(original.input_layernorm.weight, self.eps)
        self.self_attn = FusedAttention(original.self_attn)
        self.post_norm_weight = original.post_attention_layernorm.weight
        mlp = original.mlp
        self.mlp: nn.Module = FusedMoE(mlp) if isinstance(mlp, MoE) else FusedMLP(mlp)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        attn = self.self_attn(self.input_layernorm(x), cos, sin)
        # one kernel: h = x + attn, normed = RMSNorm(h)
        normed, _rstd, h = torch_npu.npu_add_rms_norm(
            attn, x, self.post_norm_weight, epsilon=self.eps
        )
        return h + self.mlp(normed)
