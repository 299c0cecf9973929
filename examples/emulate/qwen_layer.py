"""A small Qwen-style model in plain PyTorch: the "before" of the worked port.

Three blocks, each the shape a real model has at a toy size:

- ``DecoderLayer``: RMSNorm, grouped-query attention (4 query heads share 2 KV heads)
  with rotate-half RoPE and a causal mask, and a SwiGLU MLP, both behind residual adds;
- ``MoEDecoderLayer``: the same attention, with a mixture of experts in place of the
  MLP, routed by a top-k softmax router that renormalises the chosen weights;
- ``EncoderLayer``: a bidirectional block (every token sees every token), as in a vision
  tower or a text encoder.

``examples/emulate/qwen_port.py`` is the same model on torch_npu's fused operators, and
``examples/emulate/compare_qwen.py`` checks one against the other on the CPU.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class Config:
    hidden: int = 64
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 16
    intermediate: int = 96
    experts: int = 4
    top_k: int = 2
    eps: float = 1e-6
    rope_theta: float = 10000.0


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """[x1, x2] -> [-x2, x1] on the last axis: each lane pairs with the one half a head away."""
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


def rope_tables(seq: int, cfg: Config, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin, [seq, head_dim], each frequency repeated for both halves."""
    inv = 1.0 / cfg.rope_theta ** (torch.arange(0, cfg.head_dim, 2).float() / cfg.head_dim)
    angles = torch.outer(torch.arange(seq).float(), inv)
    both = torch.cat((angles, angles), dim=-1)
    return both.cos().to(dtype), both.sin().to(dtype)


class Attention(nn.Module):
    def __init__(self, cfg: Config, causal: bool = True) -> None:
        super().__init__()
        self.cfg, self.causal = cfg, causal
        self.q_proj = nn.Linear(cfg.hidden, cfg.heads * cfg.head_dim, bias=True)
        self.k_proj = nn.Linear(cfg.hidden, cfg.kv_heads * cfg.head_dim, bias=True)
        self.v_proj = nn.Linear(cfg.hidden, cfg.kv_heads * cfg.head_dim, bias=True)
        self.o_proj = nn.Linear(cfg.heads * cfg.head_dim, cfg.hidden, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        cfg = self.cfg
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, cfg.heads, cfg.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, s, cfg.kv_heads, cfg.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, s, cfg.kv_heads, cfg.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        share = cfg.heads // cfg.kv_heads  # each KV head serves this many query heads
        k, v = k.repeat_interleave(share, dim=1), v.repeat_interleave(share, dim=1)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        return self.o_proj(out.transpose(1, 2).reshape(b, s, cfg.heads * cfg.head_dim))


class MLP(nn.Module):
    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden, cfg.intermediate, bias=False)
        self.up_proj = nn.Linear(cfg.hidden, cfg.intermediate, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate, cfg.hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Router(nn.Module):
    """Softmax over the experts, keep the top k, rescale the kept weights to sum to one."""

    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.top_k = cfg.top_k
        self.gate = nn.Linear(cfg.hidden, cfg.experts, bias=False)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        probs = torch.softmax(self.gate(x).float(), dim=-1)
        weights, ids = torch.topk(probs, self.top_k, dim=-1)
        weights = weights / weights.sum(dim=-1, keepdim=True)
        return weights.to(x.dtype), ids


class MoE(nn.Module):
    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.router = Router(cfg)
        self.experts = nn.ModuleList(MLP(cfg) for _ in range(cfg.experts))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, x.shape[-1])
        weights, ids = self.router(flat)
        out = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):
            rows, slot = (ids == e).nonzero(as_tuple=True)
            if rows.numel():
                out.index_add_(0, rows, expert(flat[rows]) * weights[rows, slot, None])
        return out.view_as(x)


class DecoderLayer(nn.Module):
    def __init__(self, cfg: Config, moe: bool = False, causal: bool = True) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden, cfg.eps)
        self.self_attn = Attention(cfg, causal=causal)
        self.post_attention_layernorm = RMSNorm(cfg.hidden, cfg.eps)
        self.mlp: nn.Module = MoE(cfg) if moe else MLP(cfg)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        h = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return h + self.mlp(self.post_attention_layernorm(h))


def MoEDecoderLayer(cfg: Config) -> DecoderLayer:
    return DecoderLayer(cfg, moe=True)


def EncoderLayer(cfg: Config) -> DecoderLayer:
    return DecoderLayer(cfg, causal=False)


def random_weights(module: nn.Module, seed: int, dtype: torch.dtype) -> nn.Module:
    """Small random weights (norm weights near one), then the model in ``dtype``."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            noise = torch.randn(p.shape, generator=gen)
            p.copy_(1 + 0.1 * noise if name.endswith("layernorm.weight") else 0.08 * noise)
    return module.to(dtype).eval()
