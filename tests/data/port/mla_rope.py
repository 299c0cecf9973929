"""A small latent-attention (MLA) decoder for the port tests: keys and values come from a
compressed latent, and the rotary part of q and k is rotated on its even and odd lanes,
with the result kept as the even lanes rotated, then the odd ones."""

from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class ModelArgs:
    """Sizes of the model (a params.json overrides them)."""

    dim: int = 512
    n_layers: int = 2
    n_heads: int = 8
    kv_lora_rank: int = 128
    qk_nope_head_dim: int = 64
    qk_rope_head_dim: int = 32
    v_head_dim: int = 64
    vocab_size: int = 1000
    rope_theta: float = 10000.0


def lanes_rotated(q, k, cos, sin):
    """cos/sin are as wide as the rotary part; their first half holds one angle per pair."""
    cos = cos[..., : cos.shape[-1] // 2]
    sin = sin[..., : sin.shape[-1] // 2]
    q1, q2 = q[..., 0::2], q[..., 1::2]
    k1, k2 = k[..., 0::2], k[..., 1::2]
    q_out = torch.cat([q1 * cos - q2 * sin, q2 * cos + q1 * sin], dim=-1)
    k_out = torch.cat([k1 * cos - k2 * sin, k2 * cos + k1 * sin], dim=-1)
    return q_out, k_out


def tables(width, seq_len, theta, dtype):
    inv = 1.0 / (theta ** (torch.arange(0, width, 2).float() / width))
    ang = torch.outer(torch.arange(seq_len).float(), inv)
    ang = torch.cat((ang, ang), dim=-1)
    return ang.cos().to(dtype), ang.sin().to(dtype)


class LatentAttention(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.n_heads = args.n_heads
        self.nope = args.qk_nope_head_dim
        self.rope = args.qk_rope_head_dim
        self.v_dim = args.v_head_dim
        self.kv_rank = args.kv_lora_rank
        self.scale = (self.nope + self.rope) ** -0.5
        self.q_proj = nn.Linear(args.dim, self.n_heads * (self.nope + self.rope), bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(args.dim, self.kv_rank + self.rope, bias=False)
        self.kv_a_layernorm = nn.LayerNorm(self.kv_rank)
        self.kv_b_proj = nn.Linear(
            self.kv_rank, self.n_heads * (self.nope + self.v_dim), bias=False
        )
        self.o_proj = nn.Linear(self.n_heads * self.v_dim, args.dim, bias=False)

    def forward(self, x, cos, sin):
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, self.n_heads, -1).transpose(1, 2)
        q_pass, q_rot = torch.split(q, [self.nope, self.rope], dim=-1)
        latent = self.kv_a_proj_with_mqa(x)
        c, k_rot = torch.split(latent, [self.kv_rank, self.rope], dim=-1)
        kv = self.kv_b_proj(self.kv_a_layernorm(c)).view(b, s, self.n_heads, -1).transpose(1, 2)
        k_pass, v = torch.split(kv, [self.nope, self.v_dim], dim=-1)
        k_rot = k_rot.view(b, 1, s, self.rope)
        q_rot, k_rot = lanes_rotated(q_rot, k_rot, cos, sin)
        k_rot = k_rot.expand(b, self.n_heads, s, self.rope)
        q = torch.cat((q_pass, q_rot), dim=-1)
        k = torch.cat((k_pass, k_rot), dim=-1)
        scores = torch.matmul(q, k.transpose(2, 3)) * self.scale
        causal = torch.triu(torch.ones(s, s, dtype=torch.bool), 1)
        scores = scores.masked_fill(causal, float("-inf"))
        out = torch.matmul(torch.softmax(scores.float(), dim=-1).to(q.dtype), v)
        return self.o_proj(out.transpose(1, 2).reshape(b, s, -1))


class Transformer(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.args = args
        self.tok_embeddings = nn.Embedding(args.vocab_size, args.dim)
        self.layers = nn.ModuleList(LatentAttention(args) for _ in range(args.n_layers))
        self.output = nn.Linear(args.dim, args.vocab_size, bias=False)

    def forward(self, tokens):
        h = self.tok_embeddings(tokens)
        cos, sin = tables(
            self.args.qk_rope_head_dim, tokens.shape[1], self.args.rope_theta, h.dtype
        )
        for layer in self.layers:
            h = h + layer(h, cos, sin)
        return self.output(h)
