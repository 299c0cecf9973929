"""A small decoder driven by positions, written for the port tests: the caller allocates
the caches with ``setup_caches`` (batch size, length, dtype) and passes ``input_pos``
with every call; keys are written by slot assignment, values by a helper function that
``index_copy_``s into the tensor handed in; the mask is read from positions."""

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class ModelArgs:
    dim: int = 512
    n_layer: int = 4
    n_head: int = 8
    n_kv_heads: int = 4
    vocab_size: int = 1000
    hidden_dim: int = 1024
    norm_eps: float = 1e-5
    rope_base: float = 10000.0


def put_rows(buffer, dim, index, rows):
    """rows written into buffer at index along dim (in place)."""
    return buffer.index_copy_(dim, index, rows)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return h.type_as(x) * self.weight


class KVCache(nn.Module):
    def __init__(self, batch, heads, length, head_dim, dtype):
        super().__init__()
        self.register_buffer("keys", torch.zeros(batch, heads, length, head_dim, dtype=dtype))
        self.register_buffer("vals", torch.zeros(batch, heads, length, head_dim, dtype=dtype))

    def update(self, input_pos, k, v):
        keys = self.keys
        keys[:, :, input_pos] = k
        vals = put_rows(self.vals, 2, input_pos, v)
        return keys, vals


def rotate(x, cos, sin):
    one, two = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-two, one), dim=-1) * sin


class Attention(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.n_head, self.n_kv = args.n_head, args.n_kv_heads
        self.head_dim = args.dim // args.n_head
        self.wq = nn.Linear(args.dim, args.n_head * self.head_dim, bias=False)
        self.wk = nn.Linear(args.dim, args.n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(args.dim, args.n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(args.n_head * self.head_dim, args.dim, bias=False)
        self.kv_cache = None

    def scaled_dot_product_attention(self, q, k, v, mask):
        """The heads attended, then [B, S, N, D] (not torch's function of that name)."""
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None)
        return y.transpose(1, 2)

    def forward(self, x, cos, sin, mask, input_pos=None):
        b, s, _ = x.shape
        q = self.wq(x).view(b, s, self.n_head, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(b, s, self.n_kv, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(b, s, self.n_kv, self.head_dim).transpose(1, 2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        if input_pos is not None and self.kv_cache is not None:
            k, v = self.kv_cache.update(input_pos, k, v)
        k = k.repeat_interleave(self.n_head // self.n_kv, dim=1)
        v = v.repeat_interleave(self.n_head // self.n_kv, dim=1)
        y = self.scaled_dot_product_attention(q, k, v, mask)
        return self.wo(y.reshape(b, s, -1))


class Block(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.attn_norm = RMSNorm(args.dim, args.norm_eps)
        self.attn = Attention(args)
        self.mlp_norm = RMSNorm(args.dim, args.norm_eps)
        self.up = nn.Linear(args.dim, args.hidden_dim, bias=False)
        self.gate = nn.Linear(args.dim, args.hidden_dim, bias=False)
        self.down = nn.Linear(args.hidden_dim, args.dim, bias=False)

    def forward(self, x, cos, sin, mask, input_pos=None):
        x = x + self.attn(self.attn_norm(x), cos, sin, mask, input_pos)
        h = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Transformer(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.args = args
        self.embed = nn.Embedding(args.vocab_size, args.dim)
        self.blocks = nn.ModuleList(Block(args) for _ in range(args.n_layer))
        self.norm = RMSNorm(args.dim, args.norm_eps)
        self.head = nn.Linear(args.dim, args.vocab_size, bias=False)
        self.allowed = None

    def setup_caches(self, max_batch_size, max_seq_length, dtype):
        head_dim = self.args.dim // self.args.n_head
        for blk in self.blocks:
            blk.attn.kv_cache = KVCache(
                max_batch_size, self.args.n_kv_heads, max_seq_length, head_dim, dtype
            )
        self.allowed = torch.tril(torch.ones(max_seq_length, max_seq_length, dtype=torch.bool))

    def forward(self, idx, input_pos=None):
        s = idx.shape[1]
        h = self.embed(idx)
        where = torch.arange(s) if input_pos is None else input_pos
        head_dim = self.args.dim // self.args.n_head
        inv = self.args.rope_base ** (-torch.arange(0, head_dim, 2).float() / head_dim)
        ang = torch.outer(where.float(), inv).repeat(1, 2)
        cos, sin = ang.cos().to(h.dtype), ang.sin().to(h.dtype)
        mask = None if input_pos is None else self.allowed[None, None, input_pos]
        for blk in self.blocks:
            h = blk(h, cos, sin, mask, input_pos)
        return self.head(self.norm(h))
