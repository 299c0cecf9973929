"""A small decoder whose key/value cache is an object the caller hands back, written with
index_copy_ at the token positions, written for the port tests."""

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class ModelArgs:
    """Sizes of the model (a params.json overrides them)."""

    dim: int = 512
    n_layers: int = 4
    n_heads: int = 8
    n_kv_heads: int = 4
    vocab_size: int = 1000
    ffn_dim: int = 1024
    max_seq_len: int = 64
    norm_eps: float = 1e-5
    rope_base: float = 10000.0


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        h = x.float()
        h = h * torch.rsqrt(torch.mean(h * h, dim=-1, keepdim=True) + self.eps)
        return h.type_as(x) * self.weight


class Cache:
    """Keys and values of every layer, [B, N, max_len, D] each, and where the next token goes."""

    def __init__(self, layers, batch, heads, max_len, head_dim, dtype):
        shape = (batch, heads, max_len, head_dim)
        self.keys = [torch.zeros(shape, dtype=dtype) for _ in range(layers)]
        self.values = [torch.zeros(shape, dtype=dtype) for _ in range(layers)]
        self.pos = 0


class Output(dict):
    @property
    def cache(self):
        return self.get("state")


def rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class Attention(nn.Module):
    def __init__(self, args: ModelArgs, layer_idx: int):
        super().__init__()
        self.n_heads = args.n_heads
        self.n_kv = args.n_kv_heads
        self.head_dim = args.dim // args.n_heads
        self.wq = nn.Linear(args.dim, self.n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(args.dim, self.n_kv * self.head_dim, bias=False)
        self.wv = nn.Linear(args.dim, self.n_kv * self.head_dim, bias=False)
        self.wo = nn.Linear(self.n_heads * self.head_dim, args.dim, bias=False)
        self.layer_idx = layer_idx

    def forward(self, x, cos, sin, cache=None, input_pos=None):
        b, s, _ = x.shape
        q = self.wq(x).view(b, s, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(b, s, self.n_kv, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(b, s, self.n_kv, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if cache is not None:
            k = cache.keys[self.layer_idx].index_copy_(2, input_pos, k)
            v = cache.values[self.layer_idx].index_copy_(2, input_pos, v)
            length = int(input_pos[-1]) + 1
            k, v = k[:, :, :length], v[:, :, :length]
            mask = input_pos[:, None] >= torch.arange(length)[None, :]
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
        else:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return self.wo(out.transpose(1, 2).reshape(b, s, -1))


class FeedForward(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class DecoderLayer(nn.Module):
    def __init__(self, args: ModelArgs, layer_idx: int):
        super().__init__()
        self.self_attn = Attention(args, layer_idx)
        self.mlp = FeedForward(args.dim, args.ffn_dim)
        self.in_norm = RMSNorm(args.dim, args.norm_eps)
        self.mlp_norm = RMSNorm(args.dim, args.norm_eps)

    def forward(self, x, cos, sin, cache=None, input_pos=None):
        skip = x
        x = self.self_attn(self.in_norm(x), cos, sin, cache, input_pos)
        x = skip + x
        # the feed-forward half keeps a copy of the sum for its own residual
        skip = x
        x = self.mlp_norm(x)
        return skip + self.mlp(x)


class Transformer(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.args = args
        self.tok_embeddings = nn.Embedding(args.vocab_size, args.dim)
        self.layers = nn.ModuleList(DecoderLayer(args, i) for i in range(args.n_layers))
        self.norm = RMSNorm(args.dim, args.norm_eps)
        self.output = nn.Linear(args.dim, args.vocab_size, bias=False)

    def forward(self, tokens, cache=None, use_cache=False):
        b, s = tokens.shape
        h = self.tok_embeddings(tokens)
        if use_cache and cache is None:
            head_dim = self.args.dim // self.args.n_heads
            shape = (self.args.n_layers, b, self.args.n_kv_heads, self.args.max_seq_len, head_dim)
            cache = Cache(*shape, h.dtype)
        start = cache.pos if use_cache else 0
        input_pos = torch.arange(start, start + s)
        head_dim = self.args.dim // self.args.n_heads
        inv = 1.0 / (self.args.rope_base ** (torch.arange(0, head_dim, 2).float() / head_dim))
        ang = torch.outer(input_pos.float(), inv)
        ang = torch.cat((ang, ang), dim=-1)
        cos, sin = ang.cos().to(h.dtype), ang.sin().to(h.dtype)
        for layer in self.layers:
            h = layer(h, cos, sin, cache if use_cache else None, input_pos)
        if use_cache:
            cache.pos += s
        return Output(logits=self.output(self.norm(h)), state=cache if use_cache else None)
