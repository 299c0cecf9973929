"""A small decoder that takes one token per call, written for the port tests: each
attention keeps its cache as plain tensors made in its constructor (the largest batch
and length from the arguments, the default dtype), written at ``start_pos`` for the
first ``bsz`` rows; the attention is written out."""

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class ModelArgs:
    dim: int = 512
    n_layers: int = 4
    n_heads: int = 8
    n_kv_heads: int = 4
    vocab_size: int = 1000
    max_batch_size: int = 8
    max_seq_len: int = 256
    norm_eps: float = 1e-6


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        scale = torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * (x.float() * scale).type_as(x)


def turn(x, cos, sin):
    a, b = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-b, a), dim=-1) * sin


class Attention(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.n_heads, self.n_kv = args.n_heads, args.n_kv_heads
        self.head_dim = args.dim // args.n_heads
        self.wq = nn.Linear(args.dim, args.n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(args.dim, args.n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(args.dim, args.n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(args.n_heads * self.head_dim, args.dim, bias=False)
        shape = (args.max_batch_size, args.max_seq_len, args.n_kv_heads, self.head_dim)
        self.cache_k = torch.zeros(shape)
        self.cache_v = torch.zeros(shape)

    def forward(self, x, start_pos: int, cos, sin):
        bsz, s, _ = x.shape
        q = self.wq(x).view(bsz, s, self.n_heads, self.head_dim)
        k = self.wk(x).view(bsz, s, self.n_kv, self.head_dim)
        v = self.wv(x).view(bsz, s, self.n_kv, self.head_dim)
        q, k = turn(q, cos, sin), turn(k, cos, sin)
        self.cache_k[:bsz, start_pos : start_pos + s] = k
        self.cache_v[:bsz, start_pos : start_pos + s] = v
        keys = self.cache_k[:bsz, : start_pos + s].repeat_interleave(self.n_heads // self.n_kv, 2)
        vals = self.cache_v[:bsz, : start_pos + s].repeat_interleave(self.n_heads // self.n_kv, 2)
        q, keys, vals = q.transpose(1, 2), keys.transpose(1, 2), vals.transpose(1, 2)
        att = torch.matmul(q, keys.transpose(2, 3)) / math.sqrt(self.head_dim)
        att = F.softmax(att.float(), dim=-1).type_as(q)
        out = torch.matmul(att, vals)
        return self.wo(out.transpose(1, 2).reshape(bsz, s, -1))


class Layer(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.norm = RMSNorm(args.dim, args.norm_eps)
        self.attention = Attention(args)

    def forward(self, x, start_pos: int, cos, sin):
        return x + self.attention(self.norm(x), start_pos, cos, sin)


class Transformer(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.embed = nn.Embedding(args.vocab_size, args.dim)
        self.layers = nn.ModuleList(Layer(args) for _ in range(args.n_layers))
        self.out = nn.Linear(args.dim, args.vocab_size, bias=False)
        half = args.dim // args.n_heads // 2
        self.inv = 10000.0 ** (-torch.arange(half, dtype=torch.float32) / half)

    def forward(self, tokens, start_pos: int):
        assert tokens.shape[1] == 1, "one token per call"
        h = self.embed(tokens)
        ang = (start_pos * self.inv).repeat(2)[None, None, None, :]
        cos, sin = ang.cos().to(h.dtype), ang.sin().to(h.dtype)
        for layer in self.layers:
            h = layer(h, start_pos, cos, sin)
        return self.out(h).float()
