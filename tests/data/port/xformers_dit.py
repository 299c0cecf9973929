"""A small DiT-like block written for the port tests: self-attention through xformers'
memory_efficient_attention, cross-attention over captions of different lengths packed
with a BlockDiagonalMask, and a causal text encoder with LowerTriangularMask."""

from dataclasses import dataclass

import torch
from torch import nn

try:
    from xformers.ops import memory_efficient_attention
    from xformers.ops.fmha.attn_bias import BlockDiagonalMask, LowerTriangularMask
except ImportError:  # the test machine: kb verify puts its CPU stand-ins in place
    memory_efficient_attention = BlockDiagonalMask = LowerTriangularMask = None


@dataclass
class ModelArgs:
    dim: int = 128
    n_heads: int = 4
    depth: int = 2


class SelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.n_heads, c // self.n_heads).unbind(2)
        out = memory_efficient_attention(q, k, v, p=0.0, attn_bias=None)
        return self.proj(out.reshape(b, n, c))


class CrossAttention(nn.Module):
    def __init__(self, dim, cond_dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.q = nn.Linear(dim, dim)
        self.kv = nn.Linear(cond_dim, 2 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, cond):
        b, n, c = x.shape
        lengths = [cond.shape[1] - i for i in range(b)]
        ctx = torch.cat([cond[i, : lengths[i]] for i in range(b)])[None]
        q = self.q(x).view(1, b * n, self.n_heads, c // self.n_heads)
        k, v = self.kv(ctx).view(1, -1, 2, self.n_heads, c // self.n_heads).unbind(2)
        bias = BlockDiagonalMask.from_seqlens([n] * b, lengths)
        out = memory_efficient_attention(q, k, v, p=0.0, attn_bias=bias)
        return self.proj(out.view(b, n, c))


class TextEncoder(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, t):
        b, n, c = t.shape
        q, k, v = self.qkv(t).view(b, n, 3, self.n_heads, c // self.n_heads).unbind(2)
        mask = LowerTriangularMask()
        return t + memory_efficient_attention(q, k, v, mask).reshape(b, n, c)


class Block(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.attn = SelfAttention(args.dim, args.n_heads)
        self.cross = CrossAttention(args.dim, args.dim, args.n_heads)

    def forward(self, x, cond):
        x = x + self.attn(x)
        return x + self.cross(x, cond)


class Denoiser(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.text = TextEncoder(args.dim, args.n_heads)
        self.blocks = nn.ModuleList(Block(args) for _ in range(args.depth))

    def forward(self, x, cond):
        cond = self.text(cond)
        for block in self.blocks:
            x = block(x, cond)
        return x
